//! Graphs through the real binary (issue #8): the gst-launch graph syntax and `[[node]]` project
//! files, `framepipe graph` (text and Graphviz), bad graphs as one-line errors naming the nodes,
//! and graphs that run (tee, feedback) checked against the chains they are made of.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{run, tmpdir, FP};

fn fp(args: &[&str]) -> Output {
    run(Command::new(FP).args(args), Duration::from_secs(120))
}

fn fp_in(dir: &Path, args: &[&str]) -> Output {
    run(
        Command::new(FP).current_dir(dir).args(args),
        Duration::from_secs(120),
    )
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The one error line of a failed run (status 1, no panic, one `framepipe: error:` line).
fn error_line(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("framepipe: error: "))
        .collect();
    assert_eq!(lines.len(), 1, "{what}: one error line expected: {err}");
    lines[0]["framepipe: error: ".len()..].to_string()
}

#[test]
fn bad_graphs_are_one_line_errors_naming_the_nodes() {
    let cases: &[(&str, &str)] = &[
        // The parser's checks.
        (
            "testsrc ! mxi.  testsrc ! nullsink name=mix",
            "unknown node 'mxi' in the link 'mxi.'; did you mean 'mix'?",
        ),
        (
            "testsrc name=a ! nullsink  testsrc name=a ! nullsink",
            "two nodes named 'a' (nodes 1 and 3)",
        ),
        (
            "testsrc ! frei0r-glow name=a ! frei0r-blur name=b ! a.  b. ! nullsink",
            "cycle of links: a -> b -> a; a node cannot take its own output of the same frame: \
             to feed the previous frame back, use feedback from=b",
        ),
        (
            "testsrc ! t.sink_1  tee name=t ! nullsink",
            "t.sink_0 is not linked but t.sink_1 is",
        ),
        (
            "testsrc ! t.sink_0  testsrc ! t.sink_0  tee name=t ! nullsink",
            "t.sink_0 is linked twice, from testsrc and from testsrc#2",
        ),
        // The builder's.
        (
            "testsrc nullsink",
            "nullsink (node 2): nullsink is a sink: it needs an input, it has none (missing '!' \
             between testsrc and nullsink?",
        ),
        (
            "testsrc ! frei0r-glow ! nullsink  feedback from=frei0r-glw ! nullsink",
            "feedback (node 4): unknown node 'frei0r-glw' in from=frei0r-glw of feedback; did \
             you mean 'frei0r-glow'?",
        ),
        (
            "testsrc ! tee name=t  t. ! nullsink master=true  t. ! nullsink master=true",
            "nullsink (node 3) and nullsink#2 (node 4) both say master=true",
        ),
        (
            "testsrc ! nullsink mode=serial",
            "nullsink (node 2): mode=serial applies to effects and mixers; nullsink is a sink",
        ),
        (
            "testsrc on-end=forever ! nullsink",
            "testsrc (node 1): bad value 'forever' for on-end: expected stop, loop or hold",
        ),
        (
            "testsrc ! frei0r-glow name=g ! nullsink  feedback from=g color=pink ! nullsink",
            "feedback (node 4): bad value 'pink' for color",
        ),
        (
            "testsrc ! frei0r-glow blurr=1 ! nullsink",
            "frei0r-glow (node 2): unknown property 'blurr' on frei0r-glow; expected one of: blur",
        ),
        (
            "testsrc ! mix name=m ! nullsink  testsrc ! m.  testsrc ! m.  testsrc ! m.  \
             testsrc ! m.  testsrc ! m.  testsrc ! m.  testsrc ! m.  testsrc ! m.",
            "m has 9 inputs or more; a node has at most 8 (sink_0 to sink_7)",
        ),
        // The runtime's, for the whole graph.
        (
            "testsrc ! mix ! nullsink",
            "mix (mixer) takes 2 to 8 inputs, it has 1: testsrc",
        ),
        (
            "testsrc ! frei0r-glow  testsrc ! nullsink",
            "the output of frei0r-glow goes nowhere",
        ),
        (
            "testsrc ! tee name=t  t. ! nullsink  t. ! frei0r-glow  testsrc ! nullsink",
            "the output of frei0r-glow goes nowhere",
        ),
    ];
    for (pipeline, want) in cases {
        for args in [&["run", "-q", pipeline][..], &["graph", pipeline]] {
            let line = error_line(&fp(args), pipeline);
            assert!(
                line.contains(want),
                "{args:?}:\n  got  {line}\n  want {want}"
            );
        }
    }
}

/// The lines of `framepipe graph`'s text for each node, by the node's name.
fn node_line<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no line for {name} in:\n{text}"))
}

#[test]
fn graph_shows_every_node_and_creates_nothing() {
    let dir = tmpdir("graph-show");
    let pipeline = "testsrc width=320 height=240 pattern=bars ! frei0r-glow ! tee name=t  \
                    t. ! y4msink location=show.y4m  \
                    t. ! scale width=160 height=120 ! y4msink location=preview.y4m leaky=true  \
                    testsrc width=64 height=48 on-end=loop ! frei0r-sobel mode=serial ! nullsink";
    let text = ok(&fp_in(&dir, &["graph", pipeline]), "graph");
    let first = text.lines().next().unwrap();
    assert!(first.contains("master output: y4msink"), "{text}");
    assert_eq!(text.lines().count(), 1 + 9, "a line per node:\n{text}");
    for (name, parts) in [
        ("testsrc", &["source", "320x240", "on-end=stop"][..]),
        (
            "frei0r-glow",
            &["effect", "320x240", "parallel", "<- testsrc"],
        ),
        ("t", &["tee", "frei0r-glow"]),
        ("y4msink", &["sink", "320x240", "master", "<- frei0r-glow"]),
        ("scale", &["effect", "160x120", "leaky", "<- frei0r-glow"]),
        ("y4msink#2", &["sink", "160x120", "leaky", "<- scale"]),
        ("testsrc#2", &["source", "64x48", "on-end=loop"]),
        (
            "frei0r-sobel",
            &["effect", "64x48", "serial", "<- testsrc#2"],
        ),
        ("nullsink", &["sink", "64x48", "<- frei0r-sobel"]),
    ] {
        let line = node_line(&text, name);
        for p in parts {
            assert!(line.contains(p), "{name}: {p:?} not in {line:?}");
        }
    }
    assert!(!node_line(&text, "y4msink#2").contains("master"), "{text}");
    // Nothing was started: the sinks did not create their files.
    assert!(!dir.join("show.y4m").exists() && !dir.join("preview.y4m").exists());
}

#[test]
fn a_node_table_project_shows_the_same_graph_as_its_string() {
    let dir = tmpdir("graph-toml");
    let pipeline = "testsrc width=96 height=64 ! frei0r-glow blur=0.3 ! tee name=t  \
                    t. ! nullsink  t. ! frei0r-sobel ! nullsink leaky=true";
    let toml = dir.join("show.toml");
    std::fs::write(
        &toml,
        "[[node]]\ntype = \"testsrc\"\nwidth = 96\nheight = 64\n\
         [[node]]\ntype = \"frei0r-glow\"\ninput = \"testsrc\"\nblur = 0.3\n\
         [[node]]\nname = \"t\"\ntype = \"tee\"\ninput = \"frei0r-glow\"\n\
         [[node]]\ntype = \"nullsink\"\ninput = \"t\"\n\
         [[node]]\ntype = \"frei0r-sobel\"\ninput = \"t\"\n\
         [[node]]\ntype = \"nullsink\"\ninput = \"frei0r-sobel\"\nleaky = true\n",
    )
    .unwrap();
    let from_string = ok(&fp(&["graph", pipeline]), "graph string");
    let from_toml = ok(&fp(&["graph", toml.to_str().unwrap()]), "graph toml");
    assert_eq!(from_string, from_toml);
    let dot_string = ok(&fp(&["graph", "--dot", pipeline]), "dot string");
    let dot_toml = ok(&fp(&["graph", "--dot", toml.to_str().unwrap()]), "dot toml");
    assert_eq!(dot_string, dot_toml);
}

#[test]
fn graph_dot_output_is_rendered_by_graphviz() {
    let dir = tmpdir("graph-dot");
    let pipeline =
        "testsrc width=96 height=64 ! frei0r-glow name=\"glow \\\"one\\\"\" ! tee name=t  \
                    t. ! nullsink  t. ! scale width=48 height=32 ! nullsink leaky=true";
    let dot = ok(&fp(&["graph", "--dot", pipeline]), "graph --dot");
    assert!(dot.trim_start().starts_with("digraph"), "{dot}");
    let dot_file = dir.join("g.dot");
    std::fs::write(&dot_file, &dot).unwrap();
    // scripts/install-deps installs graphviz.
    let out = run(
        Command::new("dot").args(["-Tsvg", dot_file.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    let svg = ok(&out, "dot -Tsvg");
    assert!(svg.contains("<svg"), "{svg}");
    for name in ["testsrc", "glow &quot;one&quot;", "scale", "nullsink#2"] {
        assert!(svg.contains(name), "{name} not in the SVG of:\n{dot}");
    }
    // One edge per link, the tee looked through or drawn, but every link there.
    let edges = dot.matches("->").count();
    assert!(edges >= 4, "{dot}");
}

/// The issue's example with test sources instead of clips (the second at another size, so
/// that `framepipe graph` shows the scaler it gets), as a string and as `[[node]]` tables.
const ISSUE_EXAMPLE: &str = "testsrc pattern=noise width=128 height=72 frames=4 ! \
    scale width=128 height=72 ! frei0r-glow ! mix.  \
    testsrc pattern=bars width=64 height=40 frames=4 ! frei0r-sobel ! mix.  \
    mix name=mix mode=crossfade fader=~sine:0.1hz:0..1 ! tee name=t  \
    t. ! y4msink location=show.y4m  \
    t. ! monitor width=80 height=45 ! y4msink location=preview.y4m leaky=true";

const ISSUE_EXAMPLE_TOML: &str = r#"
[[node]]
type = "testsrc"
pattern = "noise"
width = 128
height = 72
frames = 4
[[node]]
type = "scale"
input = "testsrc"
width = 128
height = 72
[[node]]
type = "frei0r-glow"
input = "scale"
[[node]]
type = "testsrc"
pattern = "bars"
width = 64
height = 40
frames = 4
[[node]]
type = "frei0r-sobel"
input = "testsrc#2"
[[node]]
name = "mix"
type = "mix"
inputs = ["frei0r-glow", "frei0r-sobel"]
mode = "crossfade"
fader = "~sine:0.1hz:0..1"
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
width = 80
height = 45
[[node]]
type = "y4msink"
input = "monitor"
location = "preview.y4m"
leaky = true
"#;

#[test]
fn the_issue_example_shows_and_runs_as_a_graph() {
    let dir = tmpdir("graph-issue");
    let text = ok(&fp_in(&dir, &["graph", ISSUE_EXAMPLE]), "graph");
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains("master output: y4msink"),
        "{text}"
    );
    for (name, parts) in [
        ("testsrc", &["source", "128x72"][..]),
        ("scale", &["effect", "128x72", "<- testsrc"]),
        ("frei0r-glow", &["effect", "128x72", "<- scale"]),
        ("testsrc#2", &["source", "64x40"]),
        ("frei0r-sobel", &["effect", "64x40", "<- testsrc#2"]),
        // `mode=crossfade` is mix's own property, not scheduling.
        // The 64x40 input gets a scaler to the first input's size.
        (
            "mix.sink_1:scale",
            &["scale (auto)", "128x72", "<- frei0r-sobel"],
        ),
        (
            "mix",
            &[
                "mixer",
                "128x72",
                "parallel",
                "<- frei0r-glow, mix.sink_1:scale",
            ],
        ),
        ("t", &["tee", "mix"]),
        ("y4msink", &["sink", "128x72", "master", "<- mix"]),
        ("monitor", &["effect", "80x45", "leaky", "<- mix"]),
        ("y4msink#2", &["sink", "80x45", "leaky", "<- monitor"]),
    ] {
        let line = node_line(&text, name);
        for p in parts {
            assert!(line.contains(p), "{name}: {p:?} not in {line:?}");
        }
    }
    assert!(!dir.join("show.y4m").exists() && !dir.join("preview.y4m").exists());
    // The project file form is the same graph.
    std::fs::write(dir.join("show.toml"), ISSUE_EXAMPLE_TOML).unwrap();
    assert_eq!(
        ok(&fp_in(&dir, &["graph", "show.toml"]), "graph toml"),
        text
    );
    // And it runs: every frame recorded, the preview at its size.
    ok(
        &fp_in(&dir, &["run", "-q", "--unpaced", "show.toml"]),
        "run the issue example",
    );
    let show = std::fs::read(dir.join("show.y4m")).unwrap();
    let header_end = show.iter().position(|&b| b == b'\n').unwrap();
    let header = String::from_utf8_lossy(&show[..header_end]).into_owned();
    assert!(header.contains(" W128 H72 "), "{header}");
    let frame_bytes = 128 * 72 * 3 / 2;
    let frames = show.windows(6).filter(|w| w == b"FRAME\n").count();
    assert_eq!(frames, 4, "{header}");
    assert!(show.len() >= header_end + 4 * (6 + frame_bytes));
    let preview = std::fs::read(dir.join("preview.y4m")).unwrap();
    assert!(preview.starts_with(b"YUV4MPEG2 W80 H45 "), "preview header");
}

/// Runs `pipeline` unpaced in `dir` at `threads`.
fn run_in(dir: &Path, threads: &str, pipeline: &str) {
    ok(
        &fp_in(
            dir,
            &["run", "-q", "--unpaced", "--threads", threads, pipeline],
        ),
        pipeline,
    );
}

#[test]
fn a_tee_gives_each_branch_what_its_chain_gives() {
    let dir = tmpdir("graph-tee");
    let src = "testsrc width=96 height=64 frames=12 pattern=noise seed=7";
    run_in(&dir, "1", &format!("{src} ! rawsink location=plain.rgba"));
    run_in(
        &dir,
        "1",
        &format!("{src} ! frei0r-glow blur=0.4 ! frei0r-sobel ! rawsink location=fx.rgba"),
    );
    let plain = std::fs::read(dir.join("plain.rgba")).unwrap();
    let fx = std::fs::read(dir.join("fx.rgba")).unwrap();
    assert_eq!(plain.len(), 12 * 96 * 64 * 4);
    assert_ne!(plain, fx);
    for threads in ["1", "3"] {
        run_in(
            &dir,
            threads,
            &format!(
                "{src} ! tee name=t  t. ! rawsink location=a.rgba  \
                 t. ! frei0r-glow blur=0.4 ! frei0r-sobel ! rawsink location=b.rgba"
            ),
        );
        assert!(
            std::fs::read(dir.join("a.rgba")).unwrap() == plain,
            "threads {threads}"
        );
        assert!(
            std::fs::read(dir.join("b.rgba")).unwrap() == fx,
            "threads {threads}"
        );
    }
}

/// Runs `testsrc ! frei0r-glow name=g ! rawsink` alone and with `feedback from=g color=#ff8000
/// ! rawsink` beside it; gives the frame size, g's frames alone, g's beside the feedback, and
/// the feedback's.
fn feedback_run(name: &str) -> (usize, Vec<u8>, Vec<u8>, Vec<u8>) {
    let dir = tmpdir(name);
    let src = "testsrc width=32 height=16 frames=6 pattern=noise seed=11";
    run_in(
        &dir,
        "1",
        &format!("{src} ! frei0r-glow blur=0.2 ! rawsink location=g.rgba"),
    );
    run_in(
        &dir,
        "2",
        &format!(
            "{src} ! frei0r-glow blur=0.2 name=g ! rawsink location=g2.rgba  \
             feedback from=g color=#ff8000 ! rawsink location=fb.rgba"
        ),
    );
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    (
        32 * 16 * 4,
        read("g.rgba"),
        read("g2.rgba"),
        read("fb.rgba"),
    )
}

#[test]
fn feedback_yields_the_previous_frame_of_its_node_and_its_colour_first() {
    let (frame, g, g2, fb) = feedback_run("graph-feedback");
    assert_eq!(g.len(), 6 * frame);
    assert_eq!(g2, g, "the show is the same beside a feedback");
    assert!(fb.len() >= g.len(), "{} bytes of feedback", fb.len());
    assert!(
        fb[..frame].chunks(4).all(|px| px == [255, 128, 0, 255]),
        "frame 0 is the colour"
    );
    assert!(
        fb[frame..g.len()] == g[..g.len() - frame],
        "frame N is g's frame N-1"
    );
}

/// The show has 6 frames (its source's); a feedback branch with no source of its own got a
/// 7th (g's frame 5) when this was written: the runtime runs it one frame past the end.
#[test]
fn a_feedback_branch_gets_as_many_frames_as_the_show() {
    let (_, g, _, fb) = feedback_run("graph-feedback-count");
    assert_eq!(fb.len(), g.len());
}

#[test]
fn two_sources_reading_stdin_are_refused_naming_both() {
    let line = error_line(
        &fp(&[
            "run",
            "-q",
            "y4msrc location=- ! tee name=t  t. ! nullsink  y4msrc location=/dev/stdin ! nullsink",
        ]),
        "two stdin sources",
    );
    assert_eq!(
        line,
        "y4msrc location=- and y4msrc#2 (y4msrc location=/dev/stdin) both read stdin; only one \
         source can, give the other a file"
    );
}
