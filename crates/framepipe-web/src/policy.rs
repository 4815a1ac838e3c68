//! What a page may post (issue #21, docs/WEB.md "What the page may send"): least privilege,
//! decided on the parsed [`Command`], never on its text, for every WebSocket route (`/ws` and
//! `/shows/NAME/ws` go through [`Policy::admit`]).
//!
//! * values and transport ([`Command::is_value_or_transport`]): `set`, `osc`, `unosc`,
//!   `bypass`, `speed`, `tempo`, `tap`, `pause`, `step`, `resume`, `stop`, `batch` of them;
//!   a `set` only of a property the running graph has, and not of a text one (it may name a
//!   file the node opens: [`TEXT_PROPERTY_RULE`]);
//! * the preview switch the page posts: `link TAP NODE`, `TAP` the preview's `monitor` node,
//!   `NODE` a node of the running graph;
//! * `load NAME [fade=D [transition=T ...]]` of a project file directly in the folder named
//!   with `--scenes DIR`: `NAME` a file name ending `.toml` (no `/`, no `..`), a regular file there (not a link,
//!   a device or a FIFO); posted as `load DIR/NAME`. Without `--scenes`, `load` is refused.
//!
//! Everything else — `add`, `remove`, `replace`, another `link`, `learn`, `unlearn`, `midi`,
//! `save` — can open a file, connect to a host or write one: refused, with the command's word
//! and the rule. The refusal never quotes what a file holds (nothing is read here but the
//! folder's entry for `NAME`).

use std::path::{Path, PathBuf};

use framepipe_control::osc_in::TEXT_PROPERTY_RULE;
use framepipe_control::{Command, GraphEdit, Target};
use framepipe_core::quote::{quote, quote_at_most};
use framepipe_core::PropKind;

/// The most characters of a command parser's error a refusal repeats (it may quote a token
/// whole: found by the `web_message` fuzz target, a 1,160-byte reason for a 529-byte message).
const ERROR_CHARS: usize = 200;
use framepipe_runtime::GraphView;

/// What a page may post beyond values and transport.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    /// `--scenes DIR`, canonical: `load NAME` loads `DIR/NAME`.
    pub(crate) scenes: Option<PathBuf>,
}

/// The rule, for refusals.
const RULE: &str = "the page may send values and transport (set, osc, unosc, bypass, speed, \
                    tempo, tap, pause, step, resume, stop, batch), link PREVIEW NODE and load \
                    SCENE (with --scenes DIR); see docs/WEB.md";

impl Policy {
    /// Whether [`Policy::admit`] reads the disk for `cmd` (a `load`'s entry in the scenes
    /// folder): the server then admits it off its async thread.
    pub(crate) fn reads_disk(cmd: &Command) -> bool {
        matches!(cmd, Command::Edit(GraphEdit::Load { .. }))
    }

    /// `cmd` as it may be posted (a `load`'s file name made its path in the scenes folder),
    /// or why a page may not post it. `tap`: the preview's `monitor` node; `graph`: the
    /// running graph.
    pub(crate) fn admit(
        &self,
        cmd: Command,
        tap: Option<&str>,
        graph: &GraphView,
    ) -> Result<Command, String> {
        if cmd.is_value_or_transport() {
            settable(&cmd, graph)?;
            return Ok(cmd);
        }
        match cmd {
            Command::Edit(GraphEdit::Link { node, input, from }) => {
                let Some(tap) = tap.filter(|t| *t == node && input == 0) else {
                    return Err(format!(
                        "link {} is not allowed from the web page: it may only switch the \
                         preview ({}); {RULE}",
                        quote(&node),
                        match tap {
                            Some(t) => format!("link {t} NODE"),
                            None => "this show has none".into(),
                        }
                    ));
                };
                if graph.node(&from).is_none() || from == tap {
                    return Err(format!(
                        "link {tap} {}: no such node to preview in the running graph",
                        quote(&from)
                    ));
                }
                Ok(Command::Edit(GraphEdit::Link { node, input, from }))
            }
            Command::Edit(GraphEdit::Load {
                path,
                fade_ns,
                transition,
            }) => {
                let Some(dir) = &self.scenes else {
                    return Err(
                        "load is not allowed from the web page: framepipe was started without \
                         --scenes DIR (start it with --scenes DIR to let the page load the \
                         project files in DIR by name)"
                            .into(),
                    );
                };
                let path = scene_path(dir, &path)?;
                Ok(Command::Edit(GraphEdit::Load {
                    path: path.to_string_lossy().into_owned(),
                    fade_ns,
                    transition,
                }))
            }
            other => Err(format!(
                "{} is not allowed from the web page: {RULE}",
                other.word()
            )),
        }
    }
}

/// Whether every `set` in `cmd` (alone or in a batch) is of a property of the running graph
/// that is not text (issue #21): a text value may name a file a node opens (frei0r
/// facedetect's `classifier`), and a page must not make the show open one. The node is found
/// as the engine finds it (an index; a name, else the first node of that element). A `set` of
/// a node or property the running graph does not have is refused too: the graph may be about
/// to change (a `load` posted just before), and what it names then is not known here.
fn settable(cmd: &Command, graph: &GraphView) -> Result<(), String> {
    match cmd {
        Command::Batch(cmds) => cmds.iter().try_for_each(|c| settable(c, graph)),
        Command::Set { element, prop, .. } => {
            let what = || format!("set {}", quote(&format!("{element}.{prop}")));
            let node = match element {
                Target::Index(i) => graph.nodes.get(*i),
                Target::Name(n) => graph
                    .node(n)
                    .map(|(_, node)| node)
                    .or_else(|| graph.nodes.iter().find(|node| node.element == *n)),
            };
            let Some(node) = node else {
                return Err(format!(
                    "{}: no element {} in the running graph",
                    what(),
                    quote(&element.to_string())
                ));
            };
            match node.props.iter().find(|p| p.name == *prop) {
                None => Err(format!(
                    "{}: unknown property {} on {} in the running graph",
                    what(),
                    quote(prop),
                    node.name
                )),
                Some(p) if p.kind == PropKind::Str => Err(format!(
                    "{} is not allowed from the web page: {TEXT_PROPERTY_RULE}",
                    what()
                )),
                Some(_) => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// Why a page's message is not posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a command: not JSON, no `cmd`, a line that does not parse (counted `bad`).
    Bad(String),
    /// A command a page may not send (counted `forbidden`).
    Forbidden(String),
}

impl Refusal {
    /// The reason, for the page's `error`.
    pub fn reason(&self) -> &str {
        match self {
            Refusal::Bad(r) | Refusal::Forbidden(r) => r,
        }
    }
}

/// What the server does with one page message before posting it: parses it
/// (`{"id": N, "cmd": "LINE"}`), parses its command line ([`parse_message`]), admits the
/// command by the page's rule ([`Policy::admit`]; `scenes`: the canonical `--scenes` folder;
/// `tap`: the preview's `monitor` node; `graph`: the running graph). The request id (when
/// there is one) and the command to post, or why not. Every route does the same (the server
/// runs the two steps apart, a `load`'s admission off its async thread); the `web_message`
/// fuzz target checks it.
pub fn admit_message(
    msg: &str,
    scenes: Option<&Path>,
    tap: Option<&str>,
    graph: &GraphView,
) -> (Option<u64>, Result<Command, Refusal>) {
    let (id, cmd) = parse_message(msg);
    let policy = Policy {
        scenes: scenes.map(Path::to_path_buf),
    };
    (
        id,
        cmd.and_then(|cmd| policy.admit(cmd, tap, graph).map_err(Refusal::Forbidden)),
    )
}

/// A page message's request id (when there is one) and its command, or why it is not one.
pub(crate) fn parse_message(msg: &str) -> (Option<u64>, Result<Command, Refusal>) {
    let req = match crate::protocol::parse_request(msg) {
        Ok(r) => r,
        Err(reason) => return (None, Err(Refusal::Bad(reason))),
    };
    match Command::parse(&req.cmd) {
        Ok(c) => (req.id, Ok(c)),
        Err(e) => {
            // The parser's error names the offending token whole: cut it too.
            let e = e.to_string();
            let e = if e.len() > ERROR_CHARS {
                quote_at_most(&e, ERROR_CHARS)
            } else {
                e
            };
            let reason = format!("bad command {}: {e}", quote(req.cmd.trim()));
            (req.id, Err(Refusal::Bad(reason)))
        }
    }
}

/// The most scene names a page is offered ([`scene_names`]).
pub(crate) const MAX_SCENES: usize = 128;
/// The most folder entries looked at for them (a huge folder costs a page's hello no more).
const MAX_SCENE_ENTRIES: usize = 4096;

/// The scenes a page may `load` from `dir` (the `--scenes` folder): the names of its regular
/// `.toml` files (not links, folders, devices or FIFOs, as [`scene_path`] admits), sorted, at
/// most [`MAX_SCENES`]. Read when a page connects, so a scene added during the show appears on
/// the next page (or reconnect). An unreadable folder offers none.
pub(crate) fn scene_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .take(MAX_SCENE_ENTRIES)
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| scene_path(dir, n).is_ok())
        .collect();
    names.sort();
    names.truncate(MAX_SCENES);
    names
}

/// `DIR/NAME` for a page's `load NAME`: `NAME` a plain file name ending `.toml`, a regular
/// file in `dir`. Reads the folder's entry (blocking: the server calls it off its async
/// thread).
fn scene_path(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && Path::new(name).components().count() == 1;
    if !plain {
        return Err(format!(
            "load {}: the page loads a scene by its file name in the --scenes folder (no \
             folders, no '..', no absolute path)",
            quote(name)
        ));
    }
    // Only project files: an engine parse error may quote a value, so another file's bits
    // could come back to the page.
    if name.len() <= ".toml".len() || !name.ends_with(".toml") {
        return Err(format!(
            "load {}: the page loads project files (NAME.toml) from the --scenes folder, no \
             other file",
            quote(name)
        ));
    }
    let path = dir.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_file() => Ok(path),
        Ok(_) => Err(format!(
            "load {}: not a regular file in the --scenes folder (links, folders, devices and \
             FIFOs are not loaded from the page)",
            quote(name)
        )),
        Err(_) => Err(format!(
            "load {}: no such scene in the --scenes folder",
            quote(name)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, kind: PropKind) -> framepipe_core::PropSpec {
        let default = match kind {
            PropKind::Str => framepipe_core::PropValue::Str("x.xml".into()),
            _ => framepipe_core::PropValue::Float(0.0),
        };
        framepipe_core::PropSpec::new(name, kind, default, "")
    }

    /// One node `a` (a frei0r facedetect: a number `b` and a text `classifier`).
    fn graph() -> GraphView {
        GraphView {
            version: 0,
            nodes: vec![framepipe_runtime::NodeView {
                name: "a".into(),
                element: "frei0r-facedetect".into(),
                kind: "effect",
                inputs: vec![],
                width: 8,
                height: 8,
                props: vec![
                    spec("b", PropKind::Float { min: 0.0, max: 1.0 }),
                    spec("classifier", PropKind::Str),
                ],
                bypassable: true,
                leaky: false,
                master: false,
                auto: false,
            }],
        }
    }

    fn parse(line: &str) -> Command {
        Command::parse(line).unwrap()
    }

    #[test]
    fn values_and_transport_pass_edits_and_surface_commands_do_not() {
        let p = Policy::default();
        for ok in [
            "set a.b 1",
            "osc a.b ~sine:1hz:0..1",
            "unosc a.b",
            "bypass a on",
            "speed 2",
            "tempo 120",
            "tap",
            "pause",
            "step 2",
            "resume",
            "stop",
            "batch set a.b 1; pause",
        ] {
            assert!(p.admit(parse(ok), None, &graph()).is_ok(), "{ok}");
        }
        for (bad, word) in [
            ("replace a y4msrc location=/etc/shadow", "replace "),
            ("add invert after a", "add "),
            ("remove a", "remove "),
            ("save /tmp/x.toml", "save "),
            ("learn a.b", "learn "),
            ("unlearn all", "unlearn "),
            ("midi", "midi "),
        ] {
            let e = p.admit(parse(bad), None, &graph()).unwrap_err();
            assert!(e.starts_with(word), "{bad}: {e}");
            assert!(!e.contains("shadow"), "{e}");
        }
        let e = p.admit(parse("load x.toml"), None, &graph()).unwrap_err();
        assert!(e.contains("--scenes DIR"), "{e}");
        let e = p
            .admit(parse("link out web-monitor"), Some("web-monitor"), &graph())
            .unwrap_err();
        assert!(e.contains("only switch the preview"), "{e}");
    }

    /// Issue #21: a text value may name a file the node opens (`set fd.classifier /dev/zero`
    /// could hang the show), so the page sets none, however it names the node; nor a property
    /// the running graph lacks (a `load` posted before it may be about to bring one).
    #[test]
    fn a_page_sets_no_text_property_nor_one_the_running_graph_lacks() {
        let p = Policy::default();
        for bad in [
            "set a.classifier /dev/zero",
            "set frei0r-facedetect.classifier /dev/zero",
            "set 0.classifier x",
            "batch set a.b 1; set a.classifier x",
        ] {
            let e = p.admit(parse(bad), None, &graph()).unwrap_err();
            assert!(
                e.contains("not allowed from the web page") && e.contains(TEXT_PROPERTY_RULE),
                "{bad}: {e}"
            );
        }
        for (bad, why) in [
            ("set nosuch.classifier x", "no element 'nosuch'"),
            ("set 1.classifier x", "no element '1'"),
            ("set a.nope x", "unknown property 'nope' on a"),
        ] {
            let e = p.admit(parse(bad), None, &graph()).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(p.admit(parse("set 0.b 0.5"), None, &graph()).is_ok());
    }

    /// Found by the `web_message` fuzz target: the command parser's error quoted a long token
    /// whole (a 1,160-byte reason for a 529-byte message).
    #[test]
    fn a_refusal_cuts_a_long_token_in_the_parsers_error() {
        let token = format!("~sine:{}hz", "Q".repeat(500));
        let msg = serde_json::json!({ "id": 1, "cmd": format!("osc s.value {token}") });
        let (id, r) = admit_message(&msg.to_string(), None, None, &graph());
        let Err(Refusal::Bad(reason)) = r else {
            panic!("{r:?}")
        };
        assert_eq!(id, Some(1));
        assert!(reason.len() < 600, "{} bytes: {reason}", reason.len());
    }

    #[test]
    fn the_page_is_offered_the_regular_toml_files_of_the_scenes_folder_sorted() {
        let dir = framepipe_testkit::tmpdir("fp-web-scene-names");
        let d = dir.path();
        std::fs::write(d.join("b.toml"), "x").unwrap();
        std::fs::write(d.join("a.toml"), "x").unwrap();
        std::fs::write(d.join("notes.txt"), "x").unwrap();
        std::fs::create_dir(d.join("sub.toml")).unwrap();
        std::os::unix::fs::symlink(d.join("a.toml"), d.join("link.toml")).unwrap();
        assert_eq!(scene_names(d), ["a.toml", "b.toml"]);
        assert!(scene_names(&d.join("missing")).is_empty());
    }

    #[test]
    fn scenes_are_plain_file_names_of_regular_files() {
        let dir = framepipe_testkit::tmpdir("fp-web-policy");
        std::fs::write(
            dir.path().join("a.toml"),
            "pipeline = \"testsrc ! nullsink\"",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        std::fs::write(dir.path().join(".toml"), "x").unwrap();
        std::fs::write(dir.path().join("my \"best\" 'show'.toml"), "x").unwrap();
        let scenes = dir.path().canonicalize().unwrap();
        assert_eq!(
            scene_path(&scenes, "a.toml").unwrap(),
            scenes.join("a.toml")
        );
        // Spaces and quotes are a name like another (the page quotes it in `load "..."`).
        let odd = "my \"best\" 'show'.toml";
        assert_eq!(scene_path(&scenes, odd).unwrap(), scenes.join(odd));
        assert_eq!(scene_names(&scenes), ["a.toml", odd]);
        for other in ["notes.txt", ".toml"] {
            let e = scene_path(&scenes, other).unwrap_err();
            assert!(e.contains("NAME.toml"), "{other}: {e}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../a.toml",
            "/etc/passwd",
            "sub/a.toml",
            "sub",
        ] {
            assert!(scene_path(&scenes, bad).is_err(), "{bad}");
        }
        assert!(scene_path(&scenes, "b.toml")
            .unwrap_err()
            .contains("no such scene"));
    }
}
