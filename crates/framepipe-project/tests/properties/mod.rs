//! The properties the `pipeline_parser` fuzz target checks, shared by that target
//! (`fuzz/fuzz_targets/pipeline_parser.rs` includes this file) and the quick seeded test
//! (`random_pipelines.rs`), so that both check the same thing.

use framepipe_project::{parse_pipeline, PipelineDesc};

pub fn print(desc: &PipelineDesc) -> String {
    let parts: Vec<String> = desc.elements.iter().map(|e| e.to_string()).collect();
    parts.join(" ! ")
}

/// The fuzz target's properties: an accepted pipeline has elements and property names that are
/// not empty and hold no `=`; printed, it parses back to itself and prints the same.
pub fn check(text: &str) -> Option<PipelineDesc> {
    let desc = parse_pipeline(text).ok()?;
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
    Some(desc)
}
