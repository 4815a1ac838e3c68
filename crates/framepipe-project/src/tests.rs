//! The parsers' own tests: the old chain forms, the graph forms of issue #8, every structural
//! error's message, printing back.

use crate::{parse_pipeline, parse_project, Error, GraphDesc};

/// `(name, element, inputs as names)` of every node, for compact assertions.
fn shape(d: &GraphDesc) -> Vec<(String, String, Vec<String>)> {
    d.nodes
        .iter()
        .map(|n| {
            let inputs = n.inputs.iter().map(|&i| d.nodes[i].name.clone()).collect();
            (n.name.clone(), n.element.clone(), inputs)
        })
        .collect()
}

/// [`shape`] written out: `"name=element<-a,b"` per node.
fn shape_text(d: &GraphDesc) -> Vec<String> {
    shape(d)
        .into_iter()
        .map(|(name, element, inputs)| format!("{name}={element}<-{}", inputs.join(",")))
        .collect()
}

fn err(text: &str) -> String {
    parse_pipeline(text)
        .map(|d| panic!("{text:?} parsed as {:?}", shape_text(&d)))
        .unwrap_err()
        .to_string()
}

fn project_err(text: &str) -> String {
    parse_project(text)
        .map(|d| panic!("{text:?} parsed as {:?}", shape_text(&d)))
        .unwrap_err()
        .to_string()
}

/// Printed, a graph parses back to itself and prints the same.
fn round_trips(d: &GraphDesc) -> String {
    let printed = d.to_string();
    let again =
        parse_pipeline(&printed).unwrap_or_else(|e| panic!("{printed:?} does not parse back: {e}"));
    assert_eq!(again.nodes, d.nodes, "{printed:?}");
    assert_eq!(again.to_string(), printed);
    printed
}

/// The issue's example (`ffmpegsrc` clips replaced by test sources in the CLI's tests).
const ISSUE_EXAMPLE: &str = "ffmpegsrc location=a.mp4 ! scale width=1280 height=720 ! frei0r-glow ! mix.  \
  testsrc pattern=bars width=1280 height=720 ! frei0r-sobel ! mix.  \
  mix name=mix mode=crossfade fader=~sine:0.1hz:0..1 ! tee name=t  \
  t. ! y4msink location=show.y4m  t. ! monitor width=320 height=180 ! y4msink location=preview.y4m leaky=true";

#[test]
fn strings_parse_with_quotes_and_tight_bangs() {
    let d = parse_pipeline(r#"testsrc width=64 pattern="moving bars"!frei0r-glow blur=0.5 ! y4msink location='a b.y4m'"#).unwrap();
    assert_eq!(d.nodes.len(), 3);
    assert_eq!(
        d.nodes[0].props[1],
        ("pattern".into(), "moving bars".into())
    );
    assert_eq!(d.nodes[1].element, "frei0r-glow");
    assert_eq!(d.nodes[2].props[0].1, "a b.y4m");
}

#[test]
fn every_old_form_is_the_same_chain() {
    let chain = "testsrc frames=3 ! frei0r-glow blur=0.5 ! frei0r-glow ! nullsink";
    let from_string = parse_pipeline(chain).unwrap();
    let from_key = parse_project(&format!("pipeline = \"{chain}\"")).unwrap();
    let from_tables = parse_project(
        "[[element]]\ntype = \"testsrc\"\nframes = 3\n[[element]]\ntype = \"frei0r-glow\"\n\
         blur = 0.5\n[[element]]\ntype = \"frei0r-glow\"\n[[element]]\ntype = \"nullsink\"\n",
    )
    .unwrap();
    for d in [&from_string, &from_key, &from_tables] {
        assert!(d.is_chain(), "{:?}", shape_text(d));
        assert_eq!(
            shape_text(d),
            [
                "testsrc=testsrc<-",
                "frei0r-glow=frei0r-glow<-testsrc",
                "frei0r-glow#2=frei0r-glow<-frei0r-glow",
                "nullsink=nullsink<-frei0r-glow#2"
            ]
        );
    }
    assert_eq!(from_string, from_key);
    assert_eq!(from_string, from_tables);
    // A chain prints as it is written.
    assert_eq!(round_trips(&from_string), chain);
}

#[test]
fn the_issue_example_is_a_graph_of_named_nodes() {
    let d = parse_pipeline(ISSUE_EXAMPLE).unwrap();
    assert_eq!(
        shape_text(&d),
        [
            "ffmpegsrc=ffmpegsrc<-",
            "scale=scale<-ffmpegsrc",
            "frei0r-glow=frei0r-glow<-scale",
            "testsrc=testsrc<-",
            "frei0r-sobel=frei0r-sobel<-testsrc",
            "mix=mix<-frei0r-glow,frei0r-sobel",
            "t=tee<-mix",
            "y4msink=y4msink<-t",
            "monitor=monitor<-t",
            "y4msink#2=y4msink<-monitor",
        ]
    );
    assert!(!d.is_chain());
    // `name` is the parser's; every other property is passed on, in order.
    let mix = &d.nodes[5];
    assert_eq!(
        mix.props,
        [
            ("mode".to_string(), "crossfade".to_string()),
            ("fader".to_string(), "~sine:0.1hz:0..1".to_string())
        ]
    );
    assert!(d.nodes[6].props.is_empty());
    assert_eq!(d.nodes[9].props[1], ("leaky".into(), "true".into()));
    round_trips(&d);
}

#[test]
fn the_issue_example_as_node_tables_is_the_same_graph() {
    let toml = r#"
        threads = 2
        [[node]]
        type = "ffmpegsrc"
        location = "a.mp4"
        [[node]]
        type = "scale"
        input = "ffmpegsrc"
        height = 720
        width = 1280
        [[node]]
        type = "frei0r-glow"
        input = "scale"
        [[node]]
        type = "testsrc"
        height = 720
        pattern = "bars"
        width = 1280
        [[node]]
        type = "frei0r-sobel"
        input = "testsrc"
        [[node]]
        name = "mix"
        type = "mix"
        inputs = ["frei0r-glow", "frei0r-sobel"]
        fader = { osc = "sine", freq = 0.1, min = 0, max = 1 }
        mode = "crossfade"
        [[node]]
        name = "t"
        type = "tee"
        input = "mix"
        [[node]]
        type = "y4msink"
        input = "t"
        location = "show.y4m"
        [[node]]
        type = "monitor"
        input = "t"
        height = 180
        width = 320
        [[node]]
        type = "y4msink"
        input = "monitor"
        leaky = true
        location = "preview.y4m"
    "#;
    let from_toml = parse_project(toml).unwrap();
    assert_eq!(from_toml.settings.threads, Some(2));
    let mut from_string = parse_pipeline(ISSUE_EXAMPLE).unwrap();
    // TOML tables hold their keys sorted; the oscillator table is in its compact form.
    for n in &mut from_string.nodes {
        n.props.sort();
        for (_, v) in &mut n.props {
            if v == "~sine:0.1hz:0..1" {
                *v = "~sine:0.1hz:0..1:phase=0".into();
            }
        }
    }
    assert_eq!(from_toml.nodes, from_string.nodes);
    // And a `pipeline =` string may be a graph.
    let key = parse_project(&format!("pipeline = '''{ISSUE_EXAMPLE}'''")).unwrap();
    assert_eq!(key.nodes, parse_pipeline(ISSUE_EXAMPLE).unwrap().nodes);
}

#[test]
fn links_may_come_before_the_node_they_name_and_name_inputs() {
    // Forward links fill inputs in the order written; `X.sink_N` is input N; the free links
    // take the inputs the numbered ones left.
    let d = parse_pipeline(
        "testsrc name=a ! mix.sink_2  testsrc name=b ! mix.  testsrc name=c ! mix.  \
         mix name=mix ! nullsink",
    )
    .unwrap();
    assert_eq!(d.nodes[3].inputs, [1, 2, 0]);
    let printed = round_trips(&d);
    assert_eq!(
        printed,
        "testsrc name=a  testsrc name=b  testsrc name=c  b. ! mix ! nullsink  c. ! mix.sink_1  \
         a. ! mix.sink_2"
    );
    // A chain into a mixer is its first free input; a link may go on from a node (`mix. ! x`).
    let d =
        parse_pipeline("testsrc ! mix.sink_1  mix. ! nullsink  testsrc ! mix name=mix").unwrap();
    assert_eq!(
        shape_text(&d),
        [
            "testsrc=testsrc<-",
            "nullsink=nullsink<-mix",
            "testsrc#2=testsrc<-",
            "mix=mix<-testsrc#2,testsrc"
        ]
    );
    round_trips(&d);
    // Names may need quotes; their links too.
    let d = parse_pipeline(r#"testsrc name="a b.c" ! nullsink  "a b.c". ! "x.y""#).unwrap();
    assert_eq!(d.nodes[2].element, "x.y");
    assert_eq!(d.nodes[2].inputs, [0]);
    round_trips(&d);
}

#[test]
fn elements_without_a_bang_between_them_are_two_branches() {
    // gst-launch's rule: `testsrc nullsink` is two nodes, not linked; whether that can run is
    // for the runtime (per element kind) to say.
    let d = parse_pipeline("testsrc nullsink").unwrap();
    assert_eq!(shape_text(&d), ["testsrc=testsrc<-", "nullsink=nullsink<-"]);
    assert_eq!(round_trips(&d), "testsrc  nullsink");
    let d = parse_pipeline("testsrc width").unwrap();
    assert_eq!(d.nodes[1].element, "width");
}

#[test]
fn malformed_strings_are_explained() {
    for (bad, want) in [
        ("", "empty pipeline"),
        ("  \n", "empty pipeline"),
        ("testsrc !", "pipeline ends with '!' (after 'testsrc')"),
        (
            "! nullsink",
            "'!' with no element before it (after 'the start')",
        ),
        (
            "testsrc ! ! nullsink",
            "'!' with no element before it (after 'testsrc')",
        ),
        (
            "width=3 ! nullsink",
            "expected an element name, found property 'width=3'",
        ),
        ("testsrc =3", "empty property name in '=3' on testsrc"),
        ("testsrc a=\"x", "unterminated \" quote in pipeline at: \"x"),
    ] {
        assert_eq!(err(bad), want, "{bad:?}");
    }
}

#[test]
fn bad_links_and_names_are_one_line_naming_them() {
    for (bad, want) in [
        (
            "testsrc ! frei0r.glow ! nullsink",
            "bad link 'frei0r.glow': expected NAME. or NAME.sink_N (an element name with '.' is \
             written in quotes)",
        ),
        (
            "testsrc ! mix.sink_x  mix name=mix ! nullsink",
            "bad link 'mix.sink_x': the input number N of NAME.sink_N is 0, 1, 2...",
        ),
        (
            "mix.sink_0 ! nullsink  testsrc ! mix name=mix",
            "bad link 'mix.sink_0': a branch starts from NAME. (an output), not from an input",
        ),
        (
            "testsrc ! mix.sink_1 ! nullsink  testsrc ! mix name=mix",
            "bad link 'mix.sink_1': an input cannot be linked from; a branch starts from NAME.",
        ),
        (
            "testsrc name=t ! nullsink  t.  testsrc",
            "bad link 't.': a link alone links nothing; write NAME. ! element to take NAME's output",
        ),
        (
            "testsrc name=t ! nullsink  t. location=x ! nullsink",
            "property 'location=x' after the link 't.': properties go on the element, where it \
             is written (with name=...)",
        ),
        ("testsrc name= ! nullsink", "bad node name '' on testsrc: a name may not be empty"),
        (
            "testsrc name=a=b ! nullsink",
            "bad node name 'a=b' on testsrc: a name may not contain '='",
        ),
        ("testsrc name=a name=b ! nullsink", "testsrc is named twice: 'a' and 'b'"),
        ("a. ! nullsink.", "unknown node 'a' in the link 'a.'; the pipeline has no elements"),
    ] {
        assert_eq!(err(bad), want, "{bad:?}");
    }
}

#[test]
fn structural_errors_name_the_nodes() {
    for (bad, want) in [
        (
            "testsrc name=a ! nullsink  testsrc name=a ! nullsink",
            "two nodes named 'a' (nodes 1 and 3); names must be unique (unnamed nodes are \
             called ELEMENT, ELEMENT#2, ...)",
        ),
        (
            // A given name that is another node's generated one.
            "testsrc ! nullsink name=testsrc",
            "two nodes named 'testsrc' (nodes 1 and 2); names must be unique (unnamed nodes are \
             called ELEMENT, ELEMENT#2, ...)",
        ),
        (
            "testsrc ! mxi.  testsrc ! mix.  mix name=mix ! nullsink",
            "unknown node 'mxi' in the link 'mxi.'; did you mean 'mix'?",
        ),
        (
            "testsrc ! nullsink  zzzzzzzzzzzz. ! nullsink",
            "unknown node 'zzzzzzzzzzzz' in the link 'zzzzzzzzzzzz.'; the nodes are: testsrc, \
             nullsink, nullsink#2",
        ),
        (
            "testsrc ! mix.sink_1  testsrc ! mix.sink_1  mix name=mix ! nullsink",
            "mix.sink_1 is linked twice, from testsrc and from testsrc#2",
        ),
        (
            "testsrc ! mix.sink_1  mix name=mix ! nullsink",
            "mix.sink_0 is not linked but mix.sink_1 is; inputs are numbered from 0 without gaps",
        ),
        (
            "testsrc ! mix.sink_8  mix name=mix ! nullsink",
            "mix has 9 inputs or more; a node has at most 8 (sink_0 to sink_7)",
        ),
        (
            "testsrc ! mix.sink_99999999999999999999999  mix name=mix ! nullsink",
            &format!(
                "mix has {} inputs or more; a node has at most 8 (sink_0 to sink_7)",
                usize::MAX
            ),
        ),
        (
            "frei0r-glow name=a ! frei0r-blur name=b ! a.",
            "cycle of links: a -> b -> a; a node cannot take its own output of the same frame: \
             to feed the previous frame back, use feedback from=b",
        ),
        (
            "testsrc ! mix.  frei0r-glow name=g ! mix name=mix ! tee name=t ! nullsink  \
             t. ! frei0r-blur ! g.",
            "cycle of links: g -> mix -> t -> frei0r-blur -> g; a node cannot take its own \
             output of the same frame: to feed the previous frame back, use feedback \
             from=frei0r-blur",
        ),
        (
            "frei0r-glow name=a ! a.",
            "cycle of links: a -> a; a node cannot take its own output of the same frame: to \
             feed the previous frame back, use feedback from=a",
        ),
    ] {
        assert_eq!(err(bad), want, "{bad:?}");
    }
    // Nine inputs by free links.
    let nine: String = (0..9).map(|_| "testsrc ! m.  ").collect::<String>() + "mix name=m";
    assert_eq!(
        err(&nine),
        "m has 9 inputs or more; a node has at most 8 (sink_0 to sink_7)"
    );
    let eight: String = (0..8).map(|_| "testsrc ! m.  ").collect::<String>() + "mix name=m";
    assert_eq!(parse_pipeline(&eight).unwrap().nodes[8].inputs.len(), 8);
    // Feedback is how a loop is written: `from=` is a property, not a link.
    let d = parse_pipeline(
        "testsrc ! mix.  feedback from=g ! mix.  mix name=mix ! frei0r-glow name=g ! nullsink",
    )
    .unwrap();
    assert_eq!(d.resolve("g", "from=g of feedback"), Ok(3));
    assert_eq!(
        d.resolve("gg", "from=gg of feedback")
            .unwrap_err()
            .to_string(),
        "unknown node 'gg' in from=gg of feedback; did you mean 'g'?"
    );
}

#[test]
fn project_files_hold_the_same() {
    let a = parse_project("pipeline = \"testsrc frames=3 ! nullsink\"\nthreads = 2").unwrap();
    let b = parse_project(
        "threads = 2\n[[element]]\ntype = \"testsrc\"\nframes = 3\n[[element]]\ntype = \"nullsink\"\n",
    )
    .unwrap();
    let c = parse_project(
        "threads = 2\n[[node]]\ntype = \"testsrc\"\nframes = 3\n[[node]]\ntype = \"nullsink\"\n\
         input = \"testsrc\"\n",
    )
    .unwrap();
    assert_eq!(a, b);
    assert_eq!(a, c);
    assert_eq!(a.settings.threads, Some(2));
    let e = parse_project("pipelin = \"x\"").unwrap_err().to_string();
    assert!(e.contains("unknown key 'pipelin'"), "{e}");
}

#[test]
fn node_tables_errors_name_the_table() {
    for (bad, want) in [
        (
            "[[node]]\ntype = \"testsrc\"\n[[node]]\ntype = \"nullsink\"\ninput = \"tstsrc\"",
            "unknown node 'tstsrc' in the inputs of [[node]] 2 (nullsink); did you mean 'testsrc'?",
        ),
        (
            "[[node]]\ntype = \"testsrc\"\n[[node]]\ntype = \"nullsink\"\ninput = \"testsrc\"\n\
             inputs = [\"testsrc\"]",
            "[[node]] 2 (nullsink) has both 'input' and 'inputs'; keep one (inputs = [\"a\", \
             \"b\"] for several)",
        ),
        (
            "[[node]]\ntype = \"nullsink\"\ninput = 3",
            "[[node]] 1 (nullsink): 'input' must be a node name like \"a\", got 3",
        ),
        (
            "[[node]]\ntype = \"mix\"\ninputs = \"a\"",
            "[[node]] 1 (mix): 'inputs' must be a list of node names like [\"a\", \"b\"], got \"a\"",
        ),
        (
            "[[node]]\ntype = \"mix\"\nname = 1",
            "[[node]] 1 (mix): 'name' must be a string, got 1",
        ),
        (
            "[[node]]\ntype = \"mix\"\nname = \"\"",
            "bad node name '' on mix: a name may not be empty",
        ),
        ("[[node]]\nname = \"a\"", "node 1 has no type = \"...\""),
        ("node = [1]", "node 1 is not a table"),
        (
            "[[node]]\nname = \"a\"\ntype = \"testsrc\"\n[[node]]\nname = \"a\"\ntype = \"nullsink\"\ninput = \"a\"",
            "two nodes named 'a' (nodes 1 and 2); names must be unique (unnamed nodes are \
             called ELEMENT, ELEMENT#2, ...)",
        ),
        (
            "[[node]]\nname = \"a\"\ntype = \"frei0r-glow\"\ninput = \"b\"\n[[node]]\nname = \"b\"\n\
             type = \"frei0r-glow\"\ninput = \"a\"",
            "cycle of links: a -> b -> a; a node cannot take its own output of the same frame: \
             to feed the previous frame back, use feedback from=b",
        ),
        (
            "[[node]]\ntype = \"mix\"\ninputs = [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n\
             [[node]]\nname = \"x\"\ntype = \"testsrc\"",
            "mix has 9 inputs or more; a node has at most 8 (sink_0 to sink_7)",
        ),
        (
            "pipeline = \"testsrc ! nullsink\"\n[[node]]\ntype = \"testsrc\"",
            "project file has both 'pipeline = \"...\"' and [[node]] tables; keep one of them",
        ),
        (
            "[[element]]\ntype = \"testsrc\"\n[[node]]\ntype = \"testsrc\"",
            "project file has both [[element]] tables and [[node]] tables; keep one of them",
        ),
        (
            "threads = 2",
            "project file has no [[node]] tables, 'pipeline = \"...\"' or [[element]] tables",
        ),
    ] {
        assert_eq!(project_err(bad), want, "{bad:?}");
    }
    // `input`/`inputs` are the node's in [[node]] tables only; in an [[element]] chain they are
    // the element's properties, as before.
    let d = parse_project(
        "[[element]]\ntype = \"testsrc\"\ninput = \"x\"\n[[element]]\ntype = \"nullsink\"",
    )
    .unwrap();
    assert_eq!(d.nodes[0].props, [("input".into(), "x".into())]);
    // A graph of [[node]] tables with a forward input and a name, printed, is the same graph.
    let d = parse_project(
        "[[node]]\ntype = \"nullsink\"\ninput = \"m\"\n[[node]]\ntype = \"testsrc\"\n\
         [[node]]\nname = \"m\"\ntype = \"mix\"\ninputs = [\"testsrc\", \"testsrc\"]",
    )
    .unwrap();
    assert_eq!(d.nodes[0].inputs, [2]);
    assert_eq!(d.nodes[2].inputs, [1, 1]);
    assert_eq!(
        round_trips(&d),
        "m. ! nullsink  testsrc ! mix name=m  testsrc. ! m.sink_1"
    );
}

#[test]
fn project_file_errors_are_one_line_naming_the_value() {
    let e = parse_project("threads = -3\npipeline = \"testsrc ! nullsink\"")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "'threads' must be a positive integer, got -3");
    let e = parse_project("pipeline = \"testsrc !\"")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "in 'pipeline': pipeline ends with '!' (after 'testsrc')");
    let e = parse_project("threads = 2\npipeline = [\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("not a valid TOML project file: line 2, column "),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e:?}");
}

/// Issue #11: a project names its show (`name = "cam1"`), for runs of several shows.
#[test]
fn a_project_names_its_show() {
    let d = parse_project("name = \"cam-1.b_2\"\npipeline = \"testsrc ! nullsink\"").unwrap();
    assert_eq!(d.settings.name.as_deref(), Some("cam-1.b_2"));
    let d = parse_project("pipeline = \"testsrc ! nullsink\"").unwrap();
    assert_eq!(d.settings.name, None);
    assert_eq!(
        project_err("name = \"cam 1\"\npipeline = \"testsrc ! nullsink\""),
        "bad show name 'cam 1' in project file: ' ' is not allowed; use letters, digits, '-', '_' and '.'"
    );
    assert_eq!(
        project_err("name = \"\"\npipeline = \"testsrc ! nullsink\""),
        "bad show name '' in project file: a show name cannot be empty"
    );
    let long = "n".repeat(crate::MAX_SHOW_NAME + 1);
    assert!(project_err(&format!(
        "name = \"{long}\"\npipeline = \"testsrc ! nullsink\""
    ))
    .ends_with(&format!("at most {} bytes", crate::MAX_SHOW_NAME)),);
    assert_eq!(
        project_err("name = 3\npipeline = \"testsrc ! nullsink\""),
        "'name' must be a string like \"cam1\", got 3"
    );
}

#[test]
fn offending_text_is_shortened_to_one_line() {
    let long = format!("testsrc \"{}", "x\n".repeat(500));
    let e = parse_pipeline(&long).unwrap_err().to_string();
    assert!(
        e.starts_with("unterminated \" quote in pipeline at: \"x x"),
        "{e}"
    );
    assert!(e.len() < 120 && !e.contains('\n'), "{e:?}");
    let e = err(&format!("testsrc ! {}. ! nullsink", "n".repeat(500)));
    assert!(e.len() < 300 && e.contains("nnn...'"), "{e:?}");
}

/// Issue #7: the oscillator table documented in docs/CONTROL.md and the README was
/// rejected ("a value of type table that is not supported").
#[test]
fn oscillator_tables_work_as_documented() {
    let d = parse_project(
        "[[element]]\ntype = \"testsrc\"\n[[element]]\ntype = \"stamp\"\n\
         value = { osc = \"sine\", freq = 0.5, min = 0, max = 1, phase = 0.25 }\n\
         [[element]]\ntype = \"frei0r-glow\"\nblur = \"~triangle:0.1hz:0.2..0.8\"\n\
         [[element]]\ntype = \"nullsink\"\n",
    )
    .unwrap();
    assert_eq!(
        d.nodes[1].props,
        [(
            "value".to_string(),
            "~sine:0.5hz:0..1:phase=0.25".to_string()
        )]
    );
    assert_eq!(d.nodes[2].props[0].1, "~triangle:0.1hz:0.2..0.8");
    for (table, needle) in [
        ("{ osc = \"sine\", frq = 2 }", "frq"),
        ("{ osc = \"wobble\" }", "wobble"),
        ("{ osc = \"sine\", freq = 1e308 }", "0..=1000 Hz"),
        ("{ osc = \"sine\", freq = nan }", "freq=NaN"),
        ("{ osc = \"sine\", min = -inf }", "min=-inf"),
    ] {
        let e = parse_project(&format!(
            "[[element]]\ntype = \"testsrc\"\n[[element]]\ntype = \"stamp\"\nvalue = {table}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("'value'") && e.contains(needle), "{table}: {e}");
    }
    // A table that is not an oscillator is still refused by type.
    let e = parse_project("[[element]]\ntype = \"testsrc\"\nsize = { w = 1 }\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("type table"), "{e}");
}

/// Issue #7: a project file with both `pipeline =` and `[[element]]` silently ignored one.
#[test]
fn pipeline_and_element_tables_together_are_an_error() {
    let e = parse_project("pipeline = \"testsrc ! nullsink\"\n[[element]]\ntype = \"testsrc\"\n")
        .unwrap_err();
    assert_eq!(
        e,
        Error::TwoPipelines {
            first: "'pipeline = \"...\"'",
            second: "[[element]] tables"
        }
    );
    assert!(e.to_string().contains("both"), "{e}");
}

/// A graph from a fuzzer may be a long chain or a deep tree of links: the checks walk it
/// without recursion.
#[test]
fn a_long_chain_is_checked_without_deep_recursion() {
    let chain: String = std::iter::once("testsrc")
        .chain(std::iter::repeat_n("frei0r-glow", 100_000))
        .collect::<Vec<_>>()
        .join(" ! ");
    let d = parse_pipeline(&chain).unwrap();
    assert_eq!(d.nodes.len(), 100_001);
    assert_eq!(d.nodes[100_000].name, "frei0r-glow#100000");
}
