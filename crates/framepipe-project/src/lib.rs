//! framepipe's project descriptions: what the user wrote, parsed into one description of what to
//! run, before any element is looked up or built.
//!
//! * [`parse_pipeline`]: the gst-launch-like string form, a chain
//!   (`testsrc frames=100 ! frei0r-glow blur=0.5 ! y4msink location=out.y4m`) or a graph with
//!   named nodes and branches (`a ! mix.  b ! mix.  mix name=mix ! sink`).
//! * [`parse_project`]: a TOML project file, `[[node]]` tables, `pipeline = "..."` or a chain
//!   of `[[element]]` tables, with run settings at the top.
//! * [`GraphDesc::apply`]: a live edit (`add`, `remove`, `replace`, `link`, `load`; #9) on a
//!   description, giving the next one, checked like a parsed one.
//!
//! A project file may give a deck's bank clip by clip (`[[clip]]` tables: `clips`), which
//! become the deck's `locations` and `clip-settings`.
//!
//! A project file may also carry MIDI mappings (`[[midi]]` tables, [`midi`]), which
//! [`with_midi`] rewrites in place and [`project_text`] writes with a graph.
//!
//! Both give the same [`GraphDesc`]: nodes with unique names, elements by name with their
//! properties as text, inputs as node indices, and [`Settings`]. Turning names into elements
//! (the registry), text into typed values (each property's spec) and checking what depends on
//! the elements (a mixer's input count, outputs going nowhere) is the caller's job. Input is
//! untrusted: every malformed input is an [`Error`] naming the offending text, never a panic (a
//! fuzz target runs both parsers).
#![forbid(unsafe_code)]

mod clips;
mod desc;
mod edit;
mod file;
mod links;
pub mod midi;
mod pipeline;
mod project;

pub use desc::{check_show_name, GraphDesc, NodeDescr, Settings, MAX_SHOW_NAME};
pub use file::{project_folder, read_project, read_project_text, MAX_PROJECT_BYTES};
pub use midi::{project_text, with_midi, MidiBinding, MidiControlKind, MidiMode};
pub use pipeline::parse_pipeline;
pub use project::parse_project;

/// The most inputs a node may have (`X.sink_0` to `X.sink_7`).
pub const MAX_INPUTS: usize = 8;

/// Errors of pipeline strings and project files. Each message is one line naming the offending
/// text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A quote that is never closed.
    #[error("unterminated {quote} quote in pipeline at: {at}")]
    UnterminatedQuote {
        /// The quote character, `"` or `'`.
        quote: char,
        /// The text from the opening quote on (shortened).
        at: String,
    },
    /// A `!` at the start or right after another `!`.
    #[error("'!' with no element before it (after '{after}')")]
    BangWithoutElement {
        /// The element before the gap, or "the start".
        after: String,
    },
    /// A `prop=value` where an element name was expected.
    #[error("expected an element name, found property '{word}'")]
    PropertyWithoutElement {
        /// The offending word.
        word: String,
    },
    /// `=value` with no property name.
    #[error("empty property name in '{word}' on {element}")]
    EmptyPropertyName {
        /// The element being described.
        element: String,
        /// The offending word.
        word: String,
    },
    /// A property name of a project file's `[[element]]` that a pipeline string could not
    /// hold: it contains `=`.
    #[error("property name '{name}' on {element} may not contain '='")]
    PropertyNameWithEquals {
        /// The element being described.
        element: String,
        /// The offending name.
        name: String,
    },
    /// Nothing but blanks.
    #[error("empty pipeline")]
    EmptyPipeline,
    /// A `!` with nothing after it.
    #[error("pipeline ends with '!' (after '{last}')")]
    TrailingBang {
        /// The last element.
        last: String,
    },
    /// The project file is not TOML.
    #[error("not a valid TOML project file: line {line}, column {column}: {message}")]
    Toml {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// The TOML parser's message.
        message: String,
    },
    /// A top-level key of the project file that does not exist.
    #[error(
        "unknown key '{key}' in project file; expected one of: node, pipeline, element, midi, \
         clip, name, threads, in-flight, stats, fps, unpaced, audio, audio-bands"
    )]
    UnknownKey {
        /// The key given.
        key: String,
    },
    /// The project's `name` is not a usable show name.
    #[error("bad show name '{name}' in project file: {reason}")]
    BadShowName {
        /// The name given (shortened).
        name: String,
        /// Why not.
        reason: String,
    },
    /// A top-level key of the project file with a value of the wrong kind.
    #[error("'{key}' must be {expected}, got {got}")]
    BadKey {
        /// The key.
        key: &'static str,
        /// What it must be, with an example.
        expected: &'static str,
        /// The value given (shortened).
        got: String,
    },
    /// A `[[midi]]` table that is not a valid mapping.
    #[error("[[midi]] {index}: {reason}")]
    BadMidi {
        /// 1-based position.
        index: usize,
        /// What is wrong, naming the key and value.
        reason: String,
    },
    /// Replacing the `[[midi]]` tables of a project file line by line would change more than
    /// them (an inline `midi = [...]`, a table laid out over unusual lines).
    #[error(
        "cannot replace the [[midi]] tables of this project file line by line without changing \
         something else; save to another file"
    )]
    MidiRewrite,
    /// An `[[element]]`, `[[node]]` or `[[midi]]` entry that is not a table.
    #[error("{table} {index} is not a table")]
    NotATable {
        /// `element`, `node` or `midi`.
        table: &'static str,
        /// 1-based position.
        index: usize,
    },
    /// An `[[element]]` or `[[node]]` table without `type = "..."`.
    #[error("{table} {index} has no type = \"...\"")]
    WithoutType {
        /// `element` or `node`.
        table: &'static str,
        /// 1-based position.
        index: usize,
    },
    /// A `[[node]]`'s own key (`name`, `input`, `inputs`) with a value of the wrong kind.
    #[error("[[node]] {index} ({element}): '{key}' must be {expected}, got {got}")]
    BadNodeKey {
        /// 1-based position.
        index: usize,
        /// Its element.
        element: String,
        /// The key.
        key: &'static str,
        /// What it must be.
        expected: &'static str,
        /// The value given (shortened).
        got: String,
    },
    /// A `[[node]]` with both `input` and `inputs`.
    #[error(
        "[[node]] {index} ({element}) has both 'input' and 'inputs'; keep one \
         (inputs = [\"a\", \"b\"] for several)"
    )]
    InputAndInputs {
        /// 1-based position.
        index: usize,
        /// Its element.
        element: String,
    },
    /// A property value of a TOML type that has no text form.
    #[error("property '{key}' has a value of type {kind} that is not supported")]
    UnsupportedValue {
        /// The property.
        key: String,
        /// The TOML type given.
        kind: &'static str,
    },
    /// An oscillator table (`{ osc = "sine", ... }`) that is not a valid oscillator.
    #[error("property '{key}': bad oscillator table: {reason}")]
    BadOscillator {
        /// The property.
        key: String,
        /// Why, naming the field.
        reason: String,
    },
    /// Two of `pipeline = "..."`, `[[element]]` and `[[node]]` tables.
    #[error("project file has both {first} and {second}; keep one of them")]
    TwoPipelines {
        /// The first form, as written (`'pipeline = "..."'`, `[[element]] tables`...).
        first: &'static str,
        /// The second form.
        second: &'static str,
    },
    /// The project file describes no pipeline.
    #[error("project file has no [[node]] tables, 'pipeline = \"...\"' or [[element]] tables")]
    NoPipeline,
    /// An error in the string of a project file's `pipeline = "..."`.
    #[error("in 'pipeline': {0}")]
    InPipelineKey(Box<Error>),
    /// A word with an unquoted `.` that is not a link (`NAME.` or `NAME.sink_N`), or a link
    /// where it cannot be.
    #[error("bad link '{word}': {reason}")]
    BadLink {
        /// The word.
        word: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// `prop=value` after a link, where only `!` or a new branch can follow.
    #[error(
        "property '{word}' after the link '{link}': properties go on the element, where it is \
         written (with name=...)"
    )]
    PropertyOnLink {
        /// The link.
        link: String,
        /// The property.
        word: String,
    },
    /// A `name=` that no link could name.
    #[error("bad node name '{name}' on {element}: {reason}")]
    BadNodeName {
        /// The name.
        name: String,
        /// The element it names.
        element: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// `name=` twice on one element.
    #[error("{element} is named twice: '{first}' and '{second}'")]
    NamedTwice {
        /// The element.
        element: String,
        /// The first name.
        first: String,
        /// The second name.
        second: String,
    },
    /// Two nodes with one name (given, or generated from the element: `frei0r-glow#2`).
    #[error(
        "two nodes named '{name}' (nodes {first} and {second}); names must be unique \
         (unnamed nodes are called ELEMENT, ELEMENT#2, ...)"
    )]
    DuplicateName {
        /// The name.
        name: String,
        /// 1-based position of the first node.
        first: usize,
        /// 1-based position of the second node.
        second: usize,
    },
    /// A link (or `from=`) to a name no node has.
    #[error("unknown node '{name}' in {place}{hint}")]
    UnknownNode {
        /// The name.
        name: String,
        /// Where it was written ("the link 'mxi.'", "the inputs of [[node]] 3 (mix)").
        place: String,
        /// "; did you mean 'mix'?", or the names, or nothing.
        hint: String,
    },
    /// One input linked twice (`X.sink_1` given twice).
    #[error("{node}.sink_{input} is linked twice, from {first} and from {second}")]
    InputTwice {
        /// The node.
        node: String,
        /// The input, from 0.
        input: usize,
        /// The node linked first.
        first: String,
        /// The node linked again.
        second: String,
    },
    /// An input left unlinked below a linked one (`X.sink_1` without `X.sink_0`).
    #[error(
        "{node}.sink_{missing} is not linked but {node}.sink_{linked} is; inputs are numbered \
         from 0 without gaps"
    )]
    InputGap {
        /// The node.
        node: String,
        /// The input not linked.
        missing: usize,
        /// The highest input linked.
        linked: usize,
    },
    /// More than [`MAX_INPUTS`] inputs on a node.
    #[error("{node} has {count} inputs or more; a node has at most 8 (sink_0 to sink_7)")]
    TooManyInputs {
        /// The node.
        node: String,
        /// How many it would have (at least).
        count: usize,
    },
    /// A cycle of input links: a frame would need itself.
    #[error(
        "cycle of links: {path}; a node cannot take its own output of the same frame: to feed \
         the previous frame back, use feedback from={back}"
    )]
    Cycle {
        /// The nodes along the cycle, `a -> b -> a`.
        path: String,
        /// The node whose output closes the cycle.
        back: String,
    },
    /// A live edit that cannot be made on this graph (why, naming the nodes).
    #[error("cannot {edit}: {reason}")]
    EditRefused {
        /// The edit, as a command line.
        edit: String,
        /// Why, naming the nodes.
        reason: String,
    },
    /// `load`: the project file cannot be read.
    #[error("cannot read project file '{path}': {reason}")]
    ReadProject {
        /// The file.
        path: String,
        /// The system's reason.
        reason: String,
    },
    /// A `[[clip]]` table that cannot go into a deck's bank.
    #[error("[[clip]] {index}: {reason}")]
    BadClip {
        /// The table's place among the `[[clip]]` tables, from 1.
        index: usize,
        /// What is wrong, and how to write it.
        reason: String,
    },
    /// `load`: the project file does not parse.
    #[error("in project file '{path}': {error}")]
    InProject {
        /// The file.
        path: String,
        /// Its error.
        error: Box<Error>,
    },
    /// `load`: the project's sinks are not the running ones.
    #[error("cannot load '{path}': its sinks must be the running ones ({running}) by name: {why}")]
    LoadSinks {
        /// The file.
        path: String,
        /// The running sinks.
        running: String,
        /// Which are missing, which are new.
        why: String,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests;
