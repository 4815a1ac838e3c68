//! The core error type, used across element traits.
//!
//! The rule for every framepipe error type: its message is one line that carries the offending
//! value *and its cause's message*, and the cause is also chained (`source()`) for programs that
//! inspect it. A printer that walks the chain (the CLI does) therefore skips a cause whose text
//! the message already holds; contexts added on top (anyhow's `with_context`) are kept.

/// Errors of framepipe's core and of elements at their trait boundary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No element of that name is registered.
    #[error("unknown element '{name}'{hint}")]
    UnknownElement {
        /// The name asked for.
        name: String,
        /// A " (did you mean ...?)" hint, or empty.
        hint: String,
    },
    /// The element has no property of that name.
    #[error("unknown property '{prop}' on {element}; expected one of: {expected}")]
    UnknownProperty {
        /// Element name.
        element: String,
        /// Property asked for.
        prop: String,
        /// Comma-separated list of valid property names.
        expected: String,
    },
    /// A property value could not be parsed or is out of range.
    #[error("bad value '{value}' for property '{prop}' of {element}: {reason}")]
    BadValue {
        /// Element name.
        element: String,
        /// Property name.
        prop: String,
        /// The offending text.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The pipeline itself is malformed (no source, effect after sink, ...).
    #[error("bad pipeline: {0}")]
    Pipeline(String),
    /// A graph that cannot run: a cycle without `feedback`, a link to an unknown node, a mixer
    /// with too few inputs, an output going nowhere... The message names the nodes.
    #[error("bad graph: {0}")]
    Graph(String),
    /// A frame size or format an element cannot take.
    #[error("{element}: cannot take {what}")]
    Unsupported {
        /// Element name.
        element: String,
        /// What was offered.
        what: String,
    },
    /// A frame pool had no free frame. The runtime bounds frames in flight so this means a sink or
    /// effect kept frames it should have released.
    #[error("frame pool {width}x{height} exhausted ({capacity} frames all in use)")]
    PoolExhausted {
        /// Frame width.
        width: u32,
        /// Frame height.
        height: u32,
        /// Number of frames in the pool.
        capacity: usize,
    },
    /// Something would allocate more than the memory budget allows ([`crate::Limits`]).
    #[error(
        "{what} would take {}, over the limit of {}; {hint}",
        crate::limits::human_bytes(*asked),
        crate::limits::human_bytes(*limit)
    )]
    TooLarge {
        /// What was asked for, naming who asked ("y4msrc: a frame of 16384x16384").
        what: String,
        /// Bytes asked for.
        asked: u64,
        /// The limit in force, bytes.
        limit: u64,
        /// How to raise the limit or what is allowed.
        hint: String,
    },
    /// An I/O error, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. "opening 'in.y4m'".
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An element failed; its own error is the source.
    #[error("{element}: {source}")]
    Element {
        /// Element name.
        element: String,
        /// The element's own error.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl Error {
    /// Wraps an element's own error, naming the element.
    pub fn element(
        element: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Error::Element {
            element: element.into(),
            source: source.into(),
        }
    }

    /// An I/O error with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// Result with the core [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
