//! What a pipeline string or a project file describes: a graph of named nodes ([`GraphDesc`]),
//! each an element with its properties as text and its inputs, plus run [`Settings`]; and how
//! such a graph prints back as a pipeline string.

use std::collections::HashMap;
use std::fmt;

use crate::{Error, Result};

/// At most this many characters of offending text are quoted in a message.
const SHOWN_CHARS: usize = 60;

/// At most this many characters of a path are quoted: a path names the user's own file and
/// is shown whole (the system's own limit, `PATH_MAX`, is 4096 bytes).
const SHOWN_PATH_CHARS: usize = 4096;

/// `text` for an error message: one line, at most [`SHOWN_CHARS`] characters.
pub(crate) fn shown(text: &str) -> String {
    shown_at_most(text, SHOWN_CHARS)
}

/// A path for an error message: one line, whole up to [`SHOWN_PATH_CHARS`] characters.
pub(crate) fn shown_path(text: &str) -> String {
    shown_at_most(text, SHOWN_PATH_CHARS)
}

fn shown_at_most(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(max).is_some() {
        out.push_str("...");
    }
    out
}

/// One node as written: its name, its element and properties, and where its inputs come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDescr {
    /// Unique in its graph: given with `name=X` (or `name = "X"` in a `[[node]]` table), else
    /// generated from the element: `frei0r-glow` for the first node of that element,
    /// `frei0r-glow#2` for the second, and so on, whether or not the others are named (see
    /// `DefaultNames`). Stats, errors and live commands use it.
    pub name: String,
    /// Registry name, e.g. `frei0r-glow`, or a structural node (`tee`, `feedback`).
    pub element: String,
    /// Properties as text, in the order written (`name` is not one of them).
    pub props: Vec<(String, String)>,
    /// Indices into [`GraphDesc::nodes`] of the nodes whose output this node takes, in input
    /// order (input 0 first; `X.sink_1` is `inputs[1]`).
    pub inputs: Vec<usize>,
}

impl fmt::Display for NodeDescr {
    /// The element and its properties as pipeline-string text (names and values quoted where
    /// needed), without the node's name or links: `frei0r-glow blur=0.5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_quoted(f, &self.element, true)?;
        for (k, v) in &self.props {
            f.write_str(" ")?;
            write_quoted(f, k, false)?;
            f.write_str("=")?;
            write_quoted(f, v, false)?;
        }
        Ok(())
    }
}

/// Run settings a project file may carry (command-line flags win).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Worker threads.
    pub threads: Option<usize>,
    /// Frames in flight.
    pub in_flight: Option<usize>,
    /// Where to write JSON stats.
    pub stats: Option<String>,
    /// Output rate (`fps = 30` or `fps = "30000/1001"`).
    pub fps: Option<String>,
    /// Run unpaced.
    pub unpaced: bool,
    /// The show's audio (`audio = "track.wav"`, `"default"`, `"jack"`, `"alsa:hw:1"`): what
    /// `--audio` takes; a file's path is resolved against the project's folder.
    pub audio: Option<String>,
    /// The audio's band edges, Hz (`audio-bands = "20,250,2000,6000,20000"`): what
    /// `--audio-bands` takes.
    pub audio_bands: Option<String>,
    /// The show's name when several run in one process (`name = "cam1"`; default: the file's
    /// stem). Letters, digits, `-`, `_` and `.`, at most [`MAX_SHOW_NAME`] bytes.
    pub name: Option<String>,
}

/// The longest show name, in bytes.
pub const MAX_SHOW_NAME: usize = 64;

/// Checks a show name: 1..=[`MAX_SHOW_NAME`] bytes of ASCII letters, digits, `-`, `_`, `.`
/// (a name is written in `@NAME` command lines and in OSC addresses `/NAME/...`). Returns
/// why not, in words.
pub fn check_show_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("a show name cannot be empty".into());
    }
    if name.len() > MAX_SHOW_NAME {
        return Err(format!("at most {MAX_SHOW_NAME} bytes"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "'{}' is not allowed; use letters, digits, '-', '_' and '.'",
            c.escape_default()
        ));
    }
    Ok(())
}

/// A whole graph as written: nodes in the order they were written, links between them resolved
/// to indices, and the project file's settings.
///
/// A graph the parser returns has unique node names, every input index within `nodes`, at most
/// [`MAX_INPUTS`](crate::MAX_INPUTS) inputs per node and no cycle of input links. Whether each
/// node has the right number of inputs for its kind, whether every output goes somewhere and
/// whether every branch ends in a sink depend on the elements, and are the runtime's checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GraphDesc {
    /// Every node, in the order written.
    pub nodes: Vec<NodeDescr>,
    /// Settings from a project file.
    pub settings: Settings,
    /// MIDI mappings from a project file's `[[midi]]` tables (not part of the graph: the
    /// pipeline string a graph prints as does not carry them).
    pub midi: Vec<crate::MidiBinding>,
}

/// The names nodes get when none is given: the element's name for the first node of that
/// element in the graph, `ELEMENT#K` for the K-th (counting every node of the element before
/// it, named or not). Fed the nodes' elements in order.
#[derive(Debug, Default)]
pub(crate) struct DefaultNames<'a> {
    seen: HashMap<&'a str, usize>,
}

impl<'a> DefaultNames<'a> {
    /// The default name of the next node, whose element is `element`.
    pub(crate) fn next(&mut self, element: &'a str) -> String {
        let count = self.seen.entry(element).or_insert(0);
        *count += 1;
        if *count == 1 {
            element.to_string()
        } else {
            format!("{element}#{count}")
        }
    }
}

impl GraphDesc {
    /// The index of the node called `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// The index of the node called `name`, or an [`Error::UnknownNode`] saying where the name
    /// was used (`place`, e.g. "from=glw of feedback") and suggesting the closest name.
    pub fn resolve(&self, name: &str, place: &str) -> Result<usize> {
        self.find(name).ok_or_else(|| Error::UnknownNode {
            name: shown(name),
            place: place.to_string(),
            hint: hint(name, self.nodes.iter().map(|n| n.name.as_str())),
        })
    }

    /// Whether the graph is a chain as the old forms wrote it: node `i` takes node `i - 1`'s
    /// output and nothing else.
    pub fn is_chain(&self) -> bool {
        self.nodes
            .iter()
            .enumerate()
            .all(|(i, n)| n.inputs == (if i == 0 { vec![] } else { vec![i - 1] }))
    }
}

/// "; did you mean 'x'?" for the known name closest to `name`, or the list of names when there
/// are few, or nothing.
pub(crate) fn hint<'a>(name: &str, known: impl Iterator<Item = &'a str> + Clone) -> String {
    let best = known
        .clone()
        .map(|k| (edit_distance(name, k), k))
        .min_by_key(|(d, _)| *d);
    match best {
        Some((d, k)) if d <= 3.max(name.chars().count() / 3) => {
            format!("; did you mean '{}'?", shown(k))
        }
        Some(_) => {
            let names: Vec<String> = known.take(9).map(shown).collect();
            let more = if names.len() == 9 { ", ..." } else { "" };
            format!(
                "; the nodes are: {}{more}",
                names[..names.len().min(8)].join(", ")
            )
        }
        None => String::new(),
    }
}

/// Levenshtein distance in characters; the names compared are short (a name longer than 64
/// characters is compared by its first 64).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().take(64).collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = Vec::with_capacity(b.len() + 1);
    for (i, ca) in a.chars().take(64).enumerate() {
        cur.clear();
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Writes `text` as (part of) one word that the tokenizer reads back as `text`: bare when it is
/// not empty and has no blank, quote or `!` (nor `.` when `name`: an unquoted `.` in an element
/// name would make it a link); else in double quotes, with `"` and `\` escaped.
fn write_quoted(f: &mut fmt::Formatter<'_>, text: &str, name: bool) -> fmt::Result {
    let bare = !text.is_empty()
        && !text.contains(|c: char| {
            c.is_whitespace() || matches!(c, '"' | '\'' | '!') || (name && c == '.')
        });
    if bare {
        return f.write_str(text);
    }
    f.write_str("\"")?;
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            f.write_str("\\")?;
        }
        write!(f, "{c}")?;
    }
    f.write_str("\"")
}

/// Writes a link to node `name`: `NAME.` or `NAME.sink_K`.
fn write_link(f: &mut fmt::Formatter<'_>, name: &str, input: Option<usize>) -> fmt::Result {
    write_quoted(f, name, true)?;
    match input {
        None => f.write_str("."),
        Some(k) => write!(f, ".sink_{k}"),
    }
}

impl fmt::Display for GraphDesc {
    /// The graph as a pipeline string that [`parse_pipeline`](crate::parse_pipeline) reads back
    /// as the same nodes (settings are not printed). Nodes are written in order: a node whose
    /// only or first input is the node just before it continues that chain (`a ! b`); any other
    /// node starts a branch (`src. ! b`, or `b` without inputs); its further inputs are links
    /// at the end (`src. ! b.sink_1`). `name=` is written where the name is not the generated
    /// one. A chain prints as it was written: `testsrc ! frei0r-glow ! nullsink`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut later = Vec::new();
        let mut default_names = DefaultNames::default();
        for (i, node) in self.nodes.iter().enumerate() {
            match node.inputs.first() {
                Some(&first) if i > 0 && first == i - 1 => f.write_str(" ! ")?,
                Some(&first) => {
                    if i > 0 {
                        f.write_str("  ")?;
                    }
                    write_link(f, &self.nodes[first].name, None)?;
                    f.write_str(" ! ")?;
                }
                None if i > 0 => f.write_str("  ")?,
                None => {}
            }
            write_quoted(f, &node.element, true)?;
            if node.name != default_names.next(&node.element) {
                f.write_str(" name=")?;
                write_quoted(f, &node.name, false)?;
            }
            for (k, v) in &node.props {
                f.write_str(" ")?;
                write_quoted(f, k, false)?;
                f.write_str("=")?;
                write_quoted(f, v, false)?;
            }
            for (k, &from) in node.inputs.iter().enumerate().skip(1) {
                later.push((from, i, k));
            }
        }
        for (from, to, k) in later {
            f.write_str("  ")?;
            write_link(f, &self.nodes[from].name, None)?;
            f.write_str(" ! ")?;
            write_link(f, &self.nodes[to].name, Some(k))?;
        }
        Ok(())
    }
}
