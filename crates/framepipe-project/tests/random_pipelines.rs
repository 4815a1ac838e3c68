//! The quick, seeded version of the `pipeline_parser` fuzz target
//! (`fuzz/fuzz_targets/pipeline_parser.rs`, run for millions of inputs by `scripts/fuzz`):
//! pipeline strings built from element names, properties, quotes, escapes and `!`, some of them
//! mutated byte by byte, each checked for the same properties as the target.

mod properties;

use framepipe_project::{parse_pipeline, ElementDescr};
use framepipe_testkit::fuzz::Inputs;
use properties::check;

const FRAGMENTS: &[&str] = &[
    "testsrc",
    "frei0r-glow",
    "y4msink",
    "nullsink",
    "日本",
    "width=64",
    "pattern=\"moving bars\"",
    "location='a b.y4m'",
    "location=-",
    "blur=~sine:0.5hz:0..1",
    "k=",
    "=v",
    "k=a=b",
    "k=\"\"",
    "\"a b\"=c",
    "k=\"a\\\"b\"",
    "k=\"a\\\\\"",
    "k='it\\'",
    "\"!\"",
    "'!'",
    "k=\"!\"",
    "\"\"",
    "''",
    "\"",
    "'",
    "\\",
    "!",
    "=",
    "\u{a0}",
    "#",
];

const SEPARATORS: &[&str] = &[" ", " ", " ! ", "!", "", "\t", "\n", "  "];

#[test]
fn random_pipeline_strings_never_panic_and_accepted_ones_print_back_the_same() {
    let mut inputs = Inputs::new(0x0091_9e11, FRAGMENTS, SEPARATORS, 8);
    let mut accepted = 0;
    for _ in 0..20_000 {
        accepted += check(&inputs.mutated_text()).is_some() as u32;
    }
    eprintln!("{accepted} of 20000 accepted");
    // The generator reaches valid pipelines, not only junk.
    assert!(accepted > 1_000, "{accepted}");
}

/// Found by the random test above: an element printed (`Display`) as text that does not parse
/// back to it (`''` printed as nothing; quotes, `!` and blanks in values printed bare).
#[test]
fn an_element_prints_as_text_that_parses_back_to_it() {
    let e = ElementDescr {
        name: String::new(),
        props: vec![
            ("a b".into(), "x\"y\\z".into()),
            ("k".into(), String::new()),
            ("l".into(), "it's ! fine".into()),
            ("m".into(), "C:\\dir\\".into()),
        ],
    };
    let printed = e.to_string();
    assert_eq!(
        printed,
        r#""" "a b"="x\"y\\z" k="" l="it's ! fine" m=C:\dir\"#
    );
    assert_eq!(parse_pipeline(&printed).unwrap().elements, [e]);
}

/// Found by the random test above: a quoted `"!"` was taken for the separator, so an element
/// named `!` (possible in a project file) could not be written as a pipeline string.
#[test]
fn a_quoted_bang_is_a_name_not_a_separator() {
    let d = parse_pipeline(r#"testsrc ! "!" k='!' ! nullsink"#).unwrap();
    let names: Vec<&str> = d.elements.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["testsrc", "!", "nullsink"]);
    assert_eq!(d.elements[1].props, [("k".into(), "!".into())]);
}
