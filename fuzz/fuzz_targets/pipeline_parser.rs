//! Feeds arbitrary text to the pipeline-string parser, `framepipe_project::parse_pipeline`
//! (`testsrc width=64 pattern="moving bars" ! frei0r-glow blur=0.5 ! y4msink location=out.y4m`).
//!
//! Checked beyond "no panic":
//! * an accepted pipeline has at least one element, and every property a non-empty name without
//!   `=`;
//! * printed back (each element's `Display`, joined by ` ! `) it parses to the same description,
//!   and that printed text is canonical (printing the re-parsed pipeline gives the same text).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/framepipe-project/tests/properties/mod.rs"]
mod properties;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = properties::check(text);
    }
});
