//! The quick, seeded version of the `pipeline_parser` fuzz target
//! (`fuzz/fuzz_targets/pipeline_parser.rs`, run for millions of inputs by `scripts/fuzz`):
//! pipeline strings built from element names, properties, quotes, escapes, `!`, node names and
//! links (`name=mix`, `mix.`, `mix.sink_1`), some of them mutated byte by byte, each checked for
//! the same properties as the target.

mod properties;

use framepipe_project::{parse_pipeline, GraphDesc, NodeDescr};
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
    "mix",
    "tee",
    "name=mix",
    "name=t",
    "name=a",
    "name=\"a b\"",
    "name=",
    "mix.",
    "mix.",
    "t.",
    "a.",
    "\"a b\".",
    "mix.sink_0",
    "mix.sink_1",
    "mix.sink_8",
    "mix.src",
    ".",
    "\"x.y\"",
    "frei0r-glow#2.",
    // Whole links, so that graphs linked by name are common.
    "testsrc ! mix.",
    "testsrc name=a ! mix.sink_1",
    "a. ! mix.",
    "mix name=mix",
    "mix name=mix ! tee name=t",
    "t. ! nullsink",
    "t. !",
];

const SEPARATORS: &[&str] = &[" ", " ", " ! ", "!", "", "\t", "\n", "  "];

#[test]
fn random_pipeline_strings_never_panic_and_accepted_ones_print_back_the_same() {
    let mut inputs = Inputs::new(0x0091_9e11, FRAGMENTS, SEPARATORS, 8);
    let (mut accepted, mut linked) = (0, 0);
    for _ in 0..20_000 {
        if let Some(desc) = check(&inputs.mutated_text()) {
            accepted += 1;
            // Graphs with links by name: a node taking an input that is not the node before it.
            linked += desc
                .nodes
                .iter()
                .enumerate()
                .any(|(i, n)| n.inputs.iter().any(|&from| from + 1 != i))
                as u32;
        }
    }
    eprintln!("{accepted} of 20000 accepted, {linked} with links by name");
    // The generator reaches valid pipelines, not only junk (graphs are the next test's).
    assert!(accepted > 1_000, "{accepted}");
}

/// Elements for [`graph_text`].
const ELEMENTS: &[&str] = &[
    "testsrc",
    "frei0r-glow",
    "mix",
    "tee",
    "nullsink",
    "\"a.b\"",
];

/// A random graph as a pipeline string: up to six nodes `n0`..`n5`, each in a branch of its
/// own or chained to the one before, with links to any node (before or after it, itself too:
/// cycles, gaps, inputs linked twice and unknown names all come out), one time in four mutated
/// byte by byte.
fn graph_text(inputs: &mut Inputs) -> String {
    let r = inputs.rng();
    let n = 1 + r.below(6);
    let mut text = String::new();
    for i in 0..n {
        let chained = i > 0 && r.one_in(3);
        if chained {
            text.push_str(" ! ");
        } else {
            text.push_str("  ");
            if r.one_in(2) {
                text.push_str(&format!("n{}. ! ", r.below(n + 1)));
            }
        }
        text.push_str(r.pick(ELEMENTS));
        if !r.one_in(5) {
            text.push_str(&format!(" name=n{i}"));
        }
        if r.one_in(3) {
            text.push_str(" k=v");
        }
        if r.one_in(3) {
            let to = r.below(n + 1);
            match r.below(3) {
                0 => text.push_str(&format!(" ! n{to}.sink_{}", r.below(3))),
                _ => text.push_str(&format!(" ! n{to}.")),
            }
        }
    }
    if inputs.rng().one_in(4) {
        let mut bytes = text.into_bytes();
        inputs.mutate(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    text
}

#[test]
fn random_graph_strings_are_checked_structures_that_print_back_the_same() {
    let mut inputs = Inputs::new(0x6a4a_9e11, FRAGMENTS, SEPARATORS, 1);
    let (mut accepted, mut linked) = (0, 0);
    for _ in 0..20_000 {
        if let Some(desc) = check(&graph_text(&mut inputs)) {
            accepted += 1;
            linked += (!desc.is_chain() && desc.nodes.iter().any(|n| !n.inputs.is_empty())) as u32;
        }
    }
    eprintln!("{accepted} of 20000 accepted, {linked} graphs with links that are not chains");
    assert!(accepted > 2_000, "{accepted}");
    assert!(linked > 1_000, "{linked}");
}

/// Found by the random test above: an element printed (`Display`) as text that does not parse
/// back to it (`''` printed as nothing; quotes, `!` and blanks in values printed bare).
#[test]
fn an_element_prints_as_text_that_parses_back_to_it() {
    let node = NodeDescr {
        name: String::new(),
        element: String::new(),
        props: vec![
            ("a b".into(), "x\"y\\z".into()),
            ("k".into(), String::new()),
            ("l".into(), "it's ! fine".into()),
            ("m".into(), "C:\\dir\\".into()),
        ],
        inputs: vec![],
    };
    let printed = node.to_string();
    assert_eq!(
        printed,
        r#""" "a b"="x\"y\\z" k="" l="it's ! fine" m=C:\dir\"#
    );
    assert_eq!(
        parse_pipeline(&printed).unwrap().nodes,
        std::slice::from_ref(&node)
    );
    let graph = GraphDesc {
        nodes: vec![node],
        ..GraphDesc::default()
    };
    assert_eq!(graph.to_string(), printed);
}

/// Element names with a `.` are quoted when printed: unquoted, the word would be a link.
#[test]
fn an_element_name_with_a_dot_prints_quoted() {
    let d = parse_pipeline(r#""a.b" ! "c."  "c.". ! nullsink"#).unwrap();
    let names: Vec<&str> = d.nodes.iter().map(|n| n.element.as_str()).collect();
    assert_eq!(names, ["a.b", "c.", "nullsink"]);
    assert_eq!(d.to_string(), r#""a.b" ! "c." ! nullsink"#);
}

/// Found by the random test above: a quoted `"!"` was taken for the separator, so an element
/// named `!` (possible in a project file) could not be written as a pipeline string.
#[test]
fn a_quoted_bang_is_a_name_not_a_separator() {
    let d = parse_pipeline(r#"testsrc ! "!" k='!' ! nullsink"#).unwrap();
    let names: Vec<&str> = d.nodes.iter().map(|e| e.element.as_str()).collect();
    assert_eq!(names, ["testsrc", "!", "nullsink"]);
    assert_eq!(d.nodes[1].props, [("k".into(), "!".into())]);
}
