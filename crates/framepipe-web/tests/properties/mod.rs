//! What the `web_message` fuzz target and the suite's seeded version check of
//! [`framepipe_web::admit_message`], the server's path from a page's message to a posted command.
//!
//! Beyond "no panic":
//! * an admitted command is one a page may send (docs/WEB.md): values and transport (a `set`
//!   only of a property of the graph that is not text), the preview switch `link TAP NODE` to
//!   a node of the graph, or `load` of a regular `.toml` file directly in the scenes folder;
//! * no reason is longer than 2 KiB, whatever the message (a value quoted in it is cut), and
//!   each is one line.

use std::path::Path;

use framepipe_control::{Command, GraphEdit, Target};
use framepipe_core::{PropKind, PropSpec, PropValue};
use framepipe_runtime::{GraphView, NodeView};
use framepipe_web::{admit_message, Refusal};

/// The preview tap of [`graph`].
pub const TAP: &str = "web-monitor";

/// A graph of three nodes and the preview tap; each has a number `value` and `x` and a text
/// `text` (which a page may not set: it may name a file).
pub fn graph() -> GraphView {
    let float = |name: &str| {
        PropSpec::new(
            name,
            PropKind::Float { min: 0.0, max: 1.0 },
            PropValue::Float(0.0),
            "",
        )
    };
    let node = |name: &str| NodeView {
        name: name.into(),
        element: "stamp".into(),
        kind: "effect",
        inputs: vec![],
        width: 64,
        height: 32,
        props: vec![
            float("value"),
            float("x"),
            PropSpec::new("text", PropKind::Str, PropValue::Str("a".into()), ""),
        ],
        bypassable: true,
        leaky: false,
        master: false,
        auto: false,
    };
    GraphView {
        version: 0,
        nodes: vec![node("src"), node("s"), node("out"), node(TAP)],
    }
}

/// Checks one message against the rule, with `scenes` (a folder holding `two.toml`) or none;
/// what became of it: `value` (values, transport), `link`, `load`, `bad` or `forbidden`.
pub fn check(msg: &str, scenes: Option<&Path>, graph: &GraphView) -> &'static str {
    let (_, admitted) = admit_message(msg, scenes, Some(TAP), graph);
    match admitted {
        Ok(cmd) => check_admitted(&cmd, scenes, graph),
        Err(r) => {
            let reason = match &r {
                Refusal::Bad(r) | Refusal::Forbidden(r) => r,
            };
            assert!(!reason.contains('\n'), "two lines: {reason:?}");
            // At most 60 characters of the line and 200 of the parser's error, each escaped
            // as `\u{NN}` at worst (6 bytes), and the words: bounded, whatever the message.
            assert!(
                reason.len() <= 2048,
                "reason of {} bytes for a message of {}",
                reason.len(),
                msg.len()
            );
            match r {
                Refusal::Bad(_) => "bad",
                Refusal::Forbidden(_) => "forbidden",
            }
        }
    }
}

/// Every `set` in `cmd` is of a property of `graph` that is not text.
fn sets_no_text(cmd: &Command, graph: &GraphView) {
    match cmd {
        Command::Batch(cmds) => cmds.iter().for_each(|c| sets_no_text(c, graph)),
        Command::Set { element, prop, .. } => {
            let node = match element {
                Target::Index(i) => graph.nodes.get(*i),
                Target::Name(n) => graph.nodes.iter().find(|x| x.name == *n || x.element == *n),
            };
            let spec = node
                .and_then(|n| n.props.iter().find(|p| p.name == *prop))
                .unwrap_or_else(|| panic!("a set of what the graph lacks: {cmd}"));
            assert_ne!(spec.kind, PropKind::Str, "a set of a text property: {cmd}");
        }
        _ => {}
    }
}

fn check_admitted(cmd: &Command, scenes: Option<&Path>, graph: &GraphView) -> &'static str {
    if cmd.is_value_or_transport() {
        sets_no_text(cmd, graph);
        return "value";
    }
    match cmd {
        Command::Edit(GraphEdit::Link { node, input, from }) => {
            assert_eq!((node.as_str(), *input), (TAP, 0), "{cmd}");
            assert!(graph.node(from).is_some() && from != TAP, "{cmd}");
            "link"
        }
        Command::Edit(GraphEdit::Load { path, .. }) => {
            let dir = scenes.unwrap_or_else(|| panic!("load without --scenes: {cmd}"));
            let p = Path::new(path);
            assert_eq!(p.parent(), Some(dir), "{cmd}");
            let m = std::fs::symlink_metadata(p).unwrap();
            assert!(m.file_type().is_file(), "{cmd}");
            assert!(path.ends_with(".toml"), "{cmd}");
            "load"
        }
        other => panic!("a page may not send {other}"),
    }
}
