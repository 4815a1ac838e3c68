//! The crate's error type.

use std::io;

/// Errors of the network elements. Converted into [`framepipe_core::Error`] at the element
/// boundary, which prefixes the element name (`tcpsink: ...`, `tcpsrc: ...`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// Stopping (SIGINT/SIGTERM) while the receiver takes nothing: the frame being written is
    /// given up.
    #[error("{peer} has not read for {waited_ms} ms while stopping; frame {frames} not sent whole (the receiver gets {frames} whole frames)")]
    NotReading {
        /// The receiver.
        peer: String,
        /// Whole frames written on this connection.
        frames: u64,
        /// How long it took nothing after the stop request.
        waited_ms: u64,
    },
    /// The stream does not start with the framepipe magic.
    #[error("not a framepipe stream: starts with {found:?}, expected \"FPWIRE\\r\\n\" (is the peer using protocol=raw?)")]
    BadMagic {
        /// The first 8 bytes received.
        found: [u8; 8],
    },
    /// The peer speaks another wire version.
    #[error(
        "unsupported wire version {found} (this side speaks {})",
        crate::wire::VERSION
    )]
    UnsupportedVersion {
        /// Version received.
        found: u16,
    },
    /// The peer closed the connection before a whole stream header arrived.
    #[error("{peer} closed the connection after {got} of 64 stream header bytes")]
    ShortHeader {
        /// The peer.
        peer: String,
        /// Bytes received.
        got: usize,
    },
    /// A header field has a value that is not allowed.
    #[error("bad {field} {value} in header: {reason}")]
    BadHeader {
        /// Which field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// Why it is rejected.
        reason: String,
    },
    /// A frame would exceed the configured size limit (checked before any allocation).
    #[error("a {width}x{height} {format} frame is {bytes} bytes, over the limit of {limit} bytes (max-frame-bytes)")]
    FrameTooLarge {
        /// Width announced.
        width: u32,
        /// Height announced.
        height: u32,
        /// Wire format.
        format: &'static str,
        /// Bytes of one frame.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A frame header does not start with the frame magic: the stream is out of step or garbage.
    #[error("frame {seq}: bad frame header magic {found:?}, expected \"FPFR\"")]
    BadFrameMagic {
        /// The sequence number expected.
        seq: u64,
        /// The 4 bytes received.
        found: [u8; 4],
    },
    /// A frame's sequence number is not the next one: a frame was lost or repeated.
    #[error("sequence gap: expected frame {expected}, got frame {found}")]
    SequenceGap {
        /// The sequence number expected.
        expected: u64,
        /// The one received.
        found: u64,
    },
    /// A payload's CRC-32 does not match its header.
    #[error("frame {seq} link {link}: checksum {computed:#010x} does not match the sender's {expected:#010x}")]
    ChecksumMismatch {
        /// Frame sequence number.
        seq: u64,
        /// Link index.
        link: u16,
        /// CRC in the frame header.
        expected: u32,
        /// CRC of the payload received.
        computed: u32,
    },
    /// The sender went away inside a frame; the partial frame was not emitted.
    #[error("connection from {peer} closed mid-frame after {frames} whole frames")]
    ClosedMidFrame {
        /// The peer.
        peer: String,
        /// Whole frames received before.
        frames: u64,
    },
    /// The receiver went away.
    #[error("receiver {peer} closed the connection after {frames} frames")]
    ReceiverClosed {
        /// The peer.
        peer: String,
        /// Whole frames written to it on that connection.
        frames: u64,
    },
    /// The links of a striped stream disagree.
    #[error("link mismatch: {0}")]
    LinkMismatch(String),
    /// Waiting for a peer took longer than the `timeout` property.
    #[error("timed out after {secs} s (timeout={secs}) waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The timeout.
        secs: u64,
    },
    /// A peer connected but sent nothing for the whole header timeout (or the stream timeout).
    #[error("no data from {peer} for {secs} s ({prop}={secs}); a framepipe sender sends its stream header as soon as it connects")]
    Silent {
        /// The peer.
        peer: String,
        /// How long it was silent.
        secs: u64,
        /// The property that set the limit (`header-timeout`).
        prop: &'static str,
    },
    /// Every connection attempt was refused until the `timeout` property ran out.
    #[error("connection refused by {peer} for {secs} s (timeout={secs}): nothing listens there; start the receiver first, or raise timeout (0 = wait for ever)")]
    Refused {
        /// The address connected to.
        peer: String,
        /// The timeout.
        secs: u64,
    },
    /// A size a peer announced is over the process's memory budget (checked before allocating).
    #[error(transparent)]
    Budget(#[from] framepipe_core::Error),
    /// A property value that cannot work.
    #[error("bad value '{value}' for {prop}: {reason}")]
    BadProp {
        /// Property name.
        prop: &'static str,
        /// The value given.
        value: String,
        /// Why.
        reason: String,
    },
    /// An I/O error with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the peer.
        context: String,
        /// The error.
        source: io::Error,
    },
}

impl NetError {
    /// An I/O error with context.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        NetError::Io {
            context: context.into(),
            source,
        }
    }

    /// Whether this error means the connection is gone (so reconnecting may help).
    pub fn is_connection_lost(&self) -> bool {
        match self {
            NetError::ReceiverClosed { .. } | NetError::ClosedMidFrame { .. } => true,
            NetError::Io { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::WriteZero
                    | io::ErrorKind::UnexpectedEof
            ),
            _ => false,
        }
    }
}

/// Result with [`NetError`].
pub type Result<T> = std::result::Result<T, NetError>;
