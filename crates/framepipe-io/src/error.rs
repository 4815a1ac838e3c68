//! The io crate's error type.

/// Errors of framepipe's sources and sinks. Converted into [`framepipe_core::Error`] with
/// `Error::element(name, e)` at the trait boundary, so every message starts with the element name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// A file could not be opened for reading.
    #[error("cannot open '{path}': {source}")]
    Open {
        /// The location given.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be created for writing.
    #[error("cannot create '{path}': {source}")]
    Create {
        /// The location given.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Reading failed.
    #[error("reading '{path}': {source}")]
    Read {
        /// The location read.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Writing failed.
    #[error("writing '{path}': {source}")]
    Write {
        /// The location written.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Writing a sink's output failed (a full disk, a reader gone): how many frames the
    /// output holds whole, counted from the bytes the system took.
    #[error("writing '{path}': {source}; the output holds {kept} whole frames")]
    WriteLost {
        /// The location written.
        path: String,
        /// Why.
        source: std::io::Error,
        /// Frames written whole before the failure.
        kept: u64,
    },
    /// A FIFO given as a sink's location had no reader within the wait.
    #[error("'{path}' is a FIFO and no reader opened it within {secs} s")]
    NoReader {
        /// The location.
        path: String,
        /// How long it waited.
        secs: u64,
    },
    /// The input ended in the middle of a frame.
    #[error("{path} is truncated: frame {frame} has {got} of {want} bytes")]
    Truncated {
        /// The location read.
        path: String,
        /// Index of the incomplete frame (0-based).
        frame: u64,
        /// Bytes of it that were there.
        got: usize,
        /// Bytes a frame has.
        want: usize,
    },
    /// A malformed YUV4MPEG2 stream or frame header.
    #[error("{path}: bad YUV4MPEG2 header: {reason}")]
    BadHeader {
        /// The location read.
        path: String,
        /// What is wrong, quoting the offending text.
        reason: String,
    },
    /// A well-formed input in a format this element does not take.
    #[error("{path}: unsupported {what}")]
    Unsupported {
        /// The location read.
        path: String,
        /// What was found and what is supported.
        what: String,
    },
    /// A frame size that is empty or too large to allocate.
    #[error("frame size {width}x{height} is {reason}")]
    BadSize {
        /// Width.
        width: u64,
        /// Height.
        height: u64,
        /// `empty`, or `too large (at most ...)`.
        reason: String,
    },
    /// A size from the input is over the memory budget ([`framepipe_core::Limits`]); the message
    /// says what was asked, the limit and how to raise it.
    #[error(transparent)]
    Limit(framepipe_core::Error),
    /// A regular file too short for even one frame of the size its header or the properties
    /// claim: refused before anything frame-sized is allocated.
    #[error(
        "{path}: {claim} ({} a frame) but the file holds {}, not one whole frame",
        framepipe_core::limits::human_bytes(*frame_bytes),
        framepipe_core::limits::human_bytes(*file_bytes)
    )]
    ShortFile {
        /// The location read.
        path: String,
        /// What claimed the size: "header says 16384x16384", "width=64 height=48 format=rgba".
        claim: String,
        /// Bytes one frame takes in the file.
        frame_bytes: u64,
        /// Bytes the file holds (after its header).
        file_bytes: u64,
    },
    /// A property this element cannot do without.
    #[error("property '{prop}' is required: {why}")]
    Missing {
        /// The property.
        prop: &'static str,
        /// What it is for.
        why: &'static str,
    },
    /// An external tool could not be started.
    #[error("cannot run '{program}': {source}")]
    Spawn {
        /// The program, e.g. `ffmpeg`.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// Probing an input with ffprobe failed.
    #[error("cannot probe '{location}': {reason}")]
    Probe {
        /// The location probed.
        location: String,
        /// ffprobe's message, or what was missing from its answer.
        reason: String,
    },
    /// An external tool failed.
    #[error("{program} {status}: {message}")]
    ToolFailed {
        /// The program.
        program: String,
        /// How it ended, e.g. `exited with exit status: 1`.
        status: String,
        /// Its last line on stderr.
        message: String,
    },
    /// A clip decoded with errors or fewer frames than announced, under `strict=true`.
    #[error("'{location}' is damaged: {what} (strict=true; without it this is a warning)")]
    Damaged {
        /// The clip.
        location: String,
        /// Frames delivered against those announced, and the decoder's first error.
        what: String,
    },
    /// Colour conversion refused the buffers (a bug if it happens: sizes are checked at start).
    #[error("colour conversion of a {width}x{height} frame failed: {reason}")]
    Convert {
        /// Width.
        width: u32,
        /// Height.
        height: u32,
        /// The library's message.
        reason: String,
    },
}

/// Result with [`IoError`].
pub type Result<T> = std::result::Result<T, IoError>;
