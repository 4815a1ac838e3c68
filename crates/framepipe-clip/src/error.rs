//! The crate's error.

/// What can go wrong with a clip.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClipError {
    /// The clip cannot be opened: missing, not a video, no decoder.
    #[error("cannot open clip '{location}': {reason}")]
    Open {
        /// The file.
        location: String,
        /// Why, in FFmpeg's words where it has some.
        reason: String,
    },
    /// Decoding failed mid-play.
    #[error("clip '{location}': {reason}")]
    Decode {
        /// The file.
        location: String,
        /// What failed.
        reason: String,
    },
    /// A property's value is wrong.
    #[error("{prop}='{value}': {reason}")]
    BadValue {
        /// The property.
        prop: &'static str,
        /// The text given.
        value: String,
        /// What is expected.
        reason: String,
    },
    /// The decoder thread stopped on an error (its message names the clip).
    #[error("{0}")]
    Stopped(String),
    /// The clip's decoder thread could not be started.
    #[error("cannot start the decoding thread: {0}")]
    Thread(std::io::Error),
}

/// The crate's result.
pub type Result<T> = std::result::Result<T, ClipError>;
