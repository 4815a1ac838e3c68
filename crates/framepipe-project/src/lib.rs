//! framepipe's project descriptions: what the user wrote, parsed into one description of what to
//! run, before any element is looked up or built.
//!
//! * [`parse_pipeline`]: the gst-launch-like string form, `testsrc frames=100 ! frei0r-glow
//!   blur=0.5 ! y4msink location=out.y4m`.
//! * [`parse_project`]: a TOML project file, either `pipeline = "..."` or `[[element]]` tables,
//!   with run settings at the top.
//!
//! Both give the same [`PipelineDesc`]: elements by name with their properties as text, and
//! [`Settings`]. Turning names into elements (the registry) and text into typed values (each
//! property's spec) is the caller's job. Input is untrusted: every malformed input is an
//! [`Error`] naming the offending text, never a panic (a fuzz target runs both parsers).
#![forbid(unsafe_code)]

mod parse;

pub use parse::{parse_pipeline, parse_project, ElementDescr, PipelineDesc, Settings};

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
    /// A bare word after an element's name, where `prop=value` or `!` was expected.
    #[error(
        "expected prop=value after '{element}', found '{word}' (missing '!' between elements?)"
    )]
    ExpectedProperty {
        /// The element being described.
        element: String,
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
        "unknown key '{key}' in project file; expected one of: pipeline, element, threads, \
         in-flight, stats, fps, unpaced"
    )]
    UnknownKey {
        /// The key given.
        key: String,
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
    /// An `[[element]]` entry that is not a table.
    #[error("element {index} is not a table")]
    ElementNotTable {
        /// 1-based position.
        index: usize,
    },
    /// An `[[element]]` table without `type = "..."`.
    #[error("element {index} has no type = \"...\"")]
    ElementWithoutType {
        /// 1-based position.
        index: usize,
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
    /// Both `pipeline = "..."` and `[[element]]` tables.
    #[error("project file has both 'pipeline = \"...\"' and [[element]] tables; keep one of them")]
    TwoPipelines,
    /// The project file describes no pipeline.
    #[error("project file has neither 'pipeline = \"...\"' nor [[element]] tables")]
    NoPipeline,
    /// An error in the string of a project file's `pipeline = "..."`.
    #[error("in 'pipeline': {0}")]
    InPipelineKey(Box<Error>),
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
