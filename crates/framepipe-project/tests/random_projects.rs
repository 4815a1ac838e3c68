//! The quick, seeded version of the `project_loader` fuzz target
//! (`fuzz/fuzz_targets/project_loader.rs`, run for millions of inputs by `scripts/fuzz`): TOML
//! project files built from lines of real and broken projects (`[[element]]` chains, `[[node]]`
//! graphs, `pipeline =` strings), some of them mutated byte by byte, each checked for the same
//! properties as the target.

mod properties;

use framepipe_project::parse_project;
use framepipe_testkit::fuzz::Inputs;
use properties::check_project;

/// `pipeline =` lines.
const PIPELINES: &[&str] = &[
    "pipeline = \"testsrc frames=3 ! nullsink\"",
    "pipeline = \"testsrc !\"",
    "pipeline = 3",
    "pipeline = \"testsrc ! m.  testsrc ! m.  mix name=m ! nullsink\"",
    "pipeline = \"testsrc ! m.sink_1  mix name=m\"",
];

/// Run settings, good and bad.
const SETTINGS: &[&str] = &[
    "threads = 2",
    "threads = 0",
    "threads = -1",
    "in-flight = 4",
    "in-flight = 9223372036854775807",
    "stats = \"s.json\"",
    "fps = 30",
    "fps = \"30000/1001\"",
    "fps = [30, 1]",
    "unpaced = true",
    "unpaced = 1",
];

/// `type =` lines of an `[[element]]`.
const TYPES: &[&str] = &[
    "type = \"testsrc\"",
    "type = \"frei0r-glow\"",
    "type = \"nullsink\"",
    "type = \"a b\"",
    "type = \"!\"",
    "type = \"x=y\"",
    "type = \"\"",
    "type = 5",
];

/// Property lines of an `[[element]]`: every TOML value type, names a pipeline string cannot hold.
const PROPS: &[&str] = &[
    "width = 64",
    "frames = 3",
    "blur = 0.5",
    "blur = -0.0",
    "blur = 1e308",
    "blur = inf",
    "blur = nan",
    "blur = { osc = \"sine\", freq = 0.5, min = 0, max = 1 }",
    "location = \"a b.y4m\"",
    "location = 'it''s'",
    "pattern = \"moving \\\"bars\\\"\"",
    "color = [1, 0.5, 0]",
    "list = [[1, 2], [3]]",
    "when = 1979-05-27T07:32:00Z",
    "\"a=b\" = 1",
    "\"\" = 1",
    "\"k k\" = \"v v\"",
    "\"!\" = \"!\"",
];

/// Lines of a `[[node]]` beyond its type and properties: names and inputs, good and bad.
const NODE_LINES: &[&str] = &[
    "name = \"a\"",
    "name = \"b\"",
    "name = \"mix\"",
    "name = \"testsrc\"",
    "name = \"\"",
    "name = \"x=y\"",
    "name = 3",
    "input = \"a\"",
    "input = \"b\"",
    "input = \"testsrc\"",
    "input = \"mix\"",
    "input = \"nowhere\"",
    "input = 1",
    "inputs = [\"a\", \"b\"]",
    "inputs = [\"testsrc\", \"a\"]",
    "inputs = [\"a\", \"a\", \"a\", \"a\", \"a\", \"a\", \"a\", \"a\", \"a\"]",
    "inputs = []",
    "inputs = [1]",
    "inputs = \"a\"",
];

/// Anything else: wrong tables, keys, syntax.
const OTHER: &[&str] = &[
    "[element]",
    "element = []",
    "[[node]]",
    "node = [1]",
    "element = [1]",
    "[x]",
    "pipelin = \"x\"",
    "#",
    "=",
    "[",
];

/// Every line, for the lines appended at random.
const LINES: &[&[&str]] = &[PIPELINES, SETTINGS, TYPES, PROPS, NODE_LINES, OTHER];

/// A project file: settings, then a `pipeline =` line, `[[element]]` tables (each with a type
/// and properties) or `[[node]]` tables (with names and inputs too), sometimes followed by any
/// line; one time in three mutated byte by byte.
fn project(inputs: &mut Inputs) -> String {
    let r = inputs.rng();
    let mut lines: Vec<&str> = Vec::new();
    for _ in 0..r.below(3) {
        lines.push(r.pick(SETTINGS));
    }
    match r.below(3) {
        0 => lines.push(r.pick(PIPELINES)),
        1 => {
            for _ in 0..1 + r.below(3) {
                lines.push("[[element]]");
                lines.push(r.pick(TYPES));
                for _ in 0..r.below(4) {
                    lines.push(r.pick(PROPS));
                }
            }
        }
        _ => {
            for _ in 0..1 + r.below(4) {
                lines.push("[[node]]");
                lines.push(r.pick(TYPES));
                for _ in 0..r.below(3) {
                    lines.push(r.pick(NODE_LINES));
                }
                for _ in 0..r.below(3) {
                    lines.push(r.pick(PROPS));
                }
            }
        }
    }
    for _ in 0..r.below(3) / 2 {
        let group = r.pick(LINES);
        lines.push(r.pick(group));
    }
    let mut text = lines.join("\n");
    if inputs.rng().one_in(3) {
        let mut bytes = text.into_bytes();
        for _ in 0..1 + inputs.rng().below(3) {
            inputs.mutate(&mut bytes);
        }
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    text
}

#[test]
fn random_project_files_never_panic_and_their_graphs_print_as_the_same_pipeline() {
    let mut inputs = Inputs::new(0x7011_f11e, OTHER, &["\n"], 1);
    let (mut accepted, mut graphs) = (0, 0);
    for _ in 0..10_000 {
        if let Some(desc) = check_project(&project(&mut inputs)) {
            accepted += 1;
            graphs += desc
                .nodes
                .iter()
                .any(|n| !n.inputs.is_empty() && !desc.is_chain()) as u32;
        }
    }
    eprintln!("{accepted} of 10000 accepted, {graphs} of them graphs that are not chains");
    // The generator reaches valid project files, not only junk, and graphs among them.
    assert!(accepted > 500, "{accepted}");
    assert!(graphs > 100, "{graphs}");
}

/// A project file nested deeper than any real one (`x = [[[[...]]]]`) is refused or read, never
/// a stack overflow that kills the process.
#[test]
fn deeply_nested_project_files_do_not_overflow_the_stack() {
    for depth in [100, 10_000, 100_000] {
        let text = format!("x = {}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(parse_project(&text).is_err());
        let text = format!(
            "[[element]]\ntype = \"testsrc\"\nx = {}1{}",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let _ = parse_project(&text);
        let text = format!("x = {}1{}", "{a=".repeat(depth), "}".repeat(depth));
        assert!(parse_project(&text).is_err());
    }
}

/// Found by the random test above: a project file could name an element type or a property that
/// no pipeline string can hold (`type = "x=y"`, `"a=b" = 1`, `"" = 1`); they are refused, named.
#[test]
fn project_names_a_pipeline_string_cannot_hold_are_refused() {
    for (text, want) in [
        (
            "[[element]]\ntype = \"x=y\"",
            "expected an element name, found property 'x=y'",
        ),
        (
            "[[element]]\ntype = \"t\"\n\"a=b\" = 1",
            "property name 'a=b' on t may not contain '='",
        ),
        (
            "[[element]]\ntype = \"t\"\n\"\" = 1",
            "empty property name in '=1' on t",
        ),
    ] {
        assert_eq!(
            parse_project(text).unwrap_err().to_string(),
            want,
            "{text:?}"
        );
    }
    // What a pipeline string can hold still loads: blanks, quotes and `!` in names and values.
    let d = parse_project("[[element]]\ntype = \"!\"\n\"k k\" = \"a \\\"b\\\" !\"").unwrap();
    assert_eq!(d.nodes[0].element, "!");
    assert_eq!(d.nodes[0].props, [("k k".into(), "a \"b\" !".into())]);
}
