//! Feeds arbitrary text to the TOML project loader, `framepipe_project::parse_project`: either
//! `pipeline = "..."` or `[[element]]` tables, with run settings (`threads`, `in-flight`, `stats`,
//! `fps`, `unpaced`).
//!
//! Checked beyond "no panic" (a stack overflow from deep nesting is a crash too):
//! * an accepted project has positive `threads` / `in-flight`;
//! * its elements (when there are any) printed as a pipeline string (each element's `Display`, joined by ` ! `) parse
//!   back to the same elements: a project file and a pipeline string describe the same things;
//! * nothing is allocated in proportion to a number in the file (scripts/fuzz runs this target
//!   with `-malloc_limit_mb=64`: `in-flight = 9223372036854775807` must stay a number).
#![no_main]

use framepipe_project::{parse_pipeline, parse_project};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(desc) = parse_project(text) else {
        return;
    };
    assert!(desc.settings.threads.is_none_or(|n| n > 0), "{text:?}");
    assert!(desc.settings.in_flight.is_none_or(|n| n > 0), "{text:?}");
    if desc.elements.is_empty() {
        return; // `element = []`: refused later, by the CLI ("needs at least a source and a sink")
    }
    let parts: Vec<String> = desc.elements.iter().map(|e| e.to_string()).collect();
    let printed = parts.join(" ! ");
    let again = parse_pipeline(&printed)
        .unwrap_or_else(|e| panic!("{text:?} -> {printed:?} does not parse: {e}"));
    assert_eq!(again.elements, desc.elements, "{text:?} -> {printed:?}");
});
