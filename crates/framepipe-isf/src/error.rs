//! The crate's one error type: every message is one line naming the offending text.

/// Errors of an ISF file: its header, its expressions, and its GLSL where the assembly reads it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file is larger than [`MAX_FILE_BYTES`](crate::MAX_FILE_BYTES).
    #[error("{what} is {size} bytes; at most {limit} are read")]
    TooLarge {
        /// What was too large ("the .fs file", "the .vs file").
        what: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The file does not begin with a `/* ... */` comment.
    #[error("no ISF header: an ISF file begins with a /*{{ ... }}*/ comment holding a JSON object; this one begins with {found}")]
    NoHeader {
        /// The file's first characters, quoted.
        found: String,
    },
    /// The header comment has no end.
    #[error("the ISF header comment opened on line {line} is never closed with */")]
    UnclosedHeader {
        /// The `.fs` line of the `/*`.
        line: u32,
    },
    /// The header is not JSON.
    #[error("line {line} column {column}: the ISF header is not valid JSON: {message}")]
    Json {
        /// The `.fs` line.
        line: u32,
        /// The column within the JSON (on the header's first line, counted from after `/*`).
        column: u32,
        /// serde_json's description.
        message: String,
    },
    /// A header value has the wrong type or an impossible value.
    #[error("{at}: {message}")]
    Header {
        /// Where in the header: `INPUTS[2] "blur" MAX`, `PASSES[0] TARGET`.
        at: String,
        /// What is wrong, with the value found.
        message: String,
    },
    /// An input's `TYPE` is not one of ISF's.
    #[error("{at}: unknown TYPE {found}; expected one of: event, bool, long, float, point2D, color, image, audio, audioFFT")]
    UnknownInputType {
        /// The input: `INPUTS[1] "amount"`.
        at: String,
        /// The type found, quoted.
        found: String,
    },
    /// An input, buffer or imported image has a name GLSL or ISF cannot use.
    #[error("{at}: {name} {why}")]
    BadName {
        /// Where the name is written.
        at: String,
        /// The name, quoted.
        name: String,
        /// Why it cannot be used.
        why: &'static str,
    },
    /// Two things share a name (each becomes a GLSL uniform).
    #[error("{name} names both {first} and {second}; inputs, pass targets and imported images each need their own name")]
    DuplicateName {
        /// The name, quoted.
        name: String,
        /// The first use.
        first: String,
        /// The second.
        second: String,
    },
    /// A WIDTH/HEIGHT expression does not parse or names something unknown.
    #[error("{at}: expression {expr}: {message}")]
    Expr {
        /// Where the expression is written (`PASSES[1] WIDTH`), or "expression".
        at: String,
        /// The expression, quoted.
        expr: String,
        /// What is wrong, with the position where that helps.
        message: String,
    },
    /// An ISF function in the GLSL is malformed or reads an unknown image.
    #[error("{file} line {line}: {message}")]
    Glsl {
        /// `.fs` or `.vs`.
        file: &'static str,
        /// The line in that file.
        line: u32,
        /// What is wrong.
        message: String,
    },
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Untrusted text for a message: quoted, escaped, and cut to 60 characters.
pub(crate) fn quote(text: &str) -> String {
    const MAX: usize = 60;
    if text.chars().count() > MAX {
        let cut: String = text.chars().take(MAX).collect();
        format!("{:?}...", cut)
    } else {
        format!("{text:?}")
    }
}

/// A JSON value for a message: its kind and, when short, itself.
pub(crate) fn describe(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("the string {}", quote(s)),
        Value::Array(a) => format!("an array of {}", a.len()),
        Value::Object(_) => "an object".into(),
    }
}
