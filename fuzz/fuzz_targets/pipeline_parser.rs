//! Feeds arbitrary text to the pipeline-string parser, `framepipe_project::parse_pipeline`
//! (`testsrc width=64 pattern="moving bars" ! frei0r-glow blur=0.5 ! y4msink location=out.y4m`,
//! or a graph: `a ! mix.  b ! mix.sink_1  mix name=mix ! tee name=t  t. ! sink`).
//!
//! Checked beyond "no panic" (`properties::check`, shared with the seeded tests):
//! * an accepted pipeline has at least one node; every property a non-empty name without `=`
//!   (and never `name`, the parser's); node names are unique; inputs name nodes of the graph, at
//!   most 8 per node, with no cycle;
//! * printed back (the graph's `Display`) it parses to the same nodes, and that printed text is
//!   canonical (printing the re-parsed graph gives the same text).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/framepipe-project/tests/properties/mod.rs"]
mod properties;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = properties::check(text);
    }
});
