//! Feeds arbitrary text to the pipeline-string parser, `framepipe_project::parse_pipeline`
//! (`testsrc width=64 pattern="moving bars" ! frei0r-glow blur=0.5 ! y4msink location=out.y4m`).
//!
//! Checked beyond "no panic":
//! * an accepted pipeline has at least one element, and every property a non-empty name without
//!   `=`;
//! * printed back (each element's `Display`, joined by ` ! `) it parses to the same description,
//!   and that printed text is canonical (printing the re-parsed pipeline gives the same text).
#![no_main]

use framepipe_project::{parse_pipeline, PipelineDesc};
use libfuzzer_sys::fuzz_target;

fn print(desc: &PipelineDesc) -> String {
    let parts: Vec<String> = desc.elements.iter().map(|e| e.to_string()).collect();
    parts.join(" ! ")
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(desc) = parse_pipeline(text) else {
        return;
    };
    assert!(!desc.elements.is_empty(), "{text:?}");
    for e in &desc.elements {
        for (k, _) in &e.props {
            assert!(
                !k.is_empty() && !k.contains('='),
                "{text:?}: property {k:?}"
            );
        }
    }
    let printed = print(&desc);
    let again = parse_pipeline(&printed)
        .unwrap_or_else(|e| panic!("{text:?} -> {printed:?} does not parse: {e}"));
    assert_eq!(again, desc, "{text:?} -> {printed:?}");
    assert_eq!(
        print(&again),
        printed,
        "{text:?}: printing is not canonical"
    );
});
