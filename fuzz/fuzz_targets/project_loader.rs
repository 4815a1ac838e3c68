//! Feeds arbitrary text to the TOML project loader, `framepipe_project::parse_project`:
//! `[[node]]` tables (names, `input`/`inputs`), `pipeline = "..."` or `[[element]]` chains, with
//! run settings (`threads`, `in-flight`, `stats`, `fps`, `unpaced`).
//!
//! Checked beyond "no panic" (a stack overflow from deep nesting is a crash too), by
//! `properties::check_project`, shared with the seeded test:
//! * an accepted project has positive `threads` / `in-flight`;
//! * its graph (when it has nodes) holds the parser's promises (unique names, inputs within the
//!   graph, at most 8 each, no cycle), and printed as a pipeline string (the graph's `Display`)
//!   it parses back to the same nodes: a project file and a pipeline string describe the same
//!   things;
//! * nothing is allocated in proportion to a number in the file (scripts/fuzz runs this target
//!   with `-malloc_limit_mb=64`: `in-flight = 9223372036854775807` must stay a number).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/framepipe-project/tests/properties/mod.rs"]
mod properties;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = properties::check_project(text);
    }
});
