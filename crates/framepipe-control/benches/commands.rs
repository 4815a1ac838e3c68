//! Command queue benchmark (work in progress).
fn main() {}
