//! Lossless frame streaming over TCP, with back-pressure: the `tcpsink` and `tcpsrc` elements.
//!
//! Machine A ends its chain with `tcpsink host=B:9000`, machine B starts its chain with
//! `tcpsrc listen=0.0.0.0:9000`. Frames go uncompressed, as RGBA, RGB24 or RGB565
//! (`wire-format=`), each with a header carrying its sequence number, timestamp and optionally a
//! CRC-32 (the wire format is in `docs/WIRE.md` and [`wire`]). Several destinations
//! (`host=B1:9000,B2:9000`) stripe every frame over several links. `protocol=raw` sends or
//! receives bare frames for ffmpeg and GStreamer peers.
//!
//! Nothing is dropped: there is no queue between the pipeline and the socket other than the
//! kernel's socket buffers (sized at start to hold a whole frame), so when the receiver stops
//! reading, the sender's writes block and its pipeline (with its bounded frames in flight) stops
//! too, and resumes when the receiver does.
//!
//! # Real-time contract
//! * Allocation: all buffers (packed stripes, one per link) are allocated at start; the frame path
//!   allocates nothing. Error paths and reconnection allocate (messages).
//! * Locks: none of ours. Striping hands each frame (a reference-counted handle) to the link
//!   sender threads over bounded `std::sync::mpsc::sync_channel`s of capacity 1.
//! * Blocking: `tcpsink`'s `consume` blocks in `write` when the receiver is slower (that is the
//!   back-pressure), and until every link has written its stripe. `tcpsrc`'s `fill` blocks in
//!   `read` until a whole frame has arrived. Building a framed `tcpsrc` blocks until the sender
//!   connects and sends its header (up to `timeout`); `tcpsink` connects in `start` and sends its
//!   stream header at once. A listening end takes only a connection that proves to be its peer
//!   ([`accept`]): strays are logged on stderr and closed, and listening goes on.
//! * System calls per frame and link: one `writev` (more only on short writes) on the sender; two
//!   `read`s (header, payload) on the receiver, the payload read straight into the pool frame for
//!   RGBA.
#![deny(unsafe_code)]

pub mod accept;
pub mod error;
pub mod pack;
pub mod sink;
#[allow(unsafe_code)] // setsockopt/getsockopt; see the SAFETY comments
pub mod sock;
pub mod src;
pub mod wire;

use framepipe_core::{
    Element, ElementDesc, ElementKind, Mode, PropKind, PropSpec, PropValue, Props, Rational,
    Registry,
};

pub use error::{NetError, Result};
pub use sink::{SinkConfig, TcpSink};
pub use src::{SrcConfig, TcpSrc};
pub use wire::{FrameHeader, StreamHeader, WireFormat, WireReader};

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn format_spec() -> PropSpec {
    PropSpec::new(
        "wire-format",
        PropKind::Enum(WireFormat::ALL.iter().map(|f| f.name().to_string()).collect()),
        PropValue::Str("rgba".into()),
        "pixel format on the wire: rgba (4 bytes/pixel), rgb24 (3, alpha restored as 255), rgb565 (2, lossy)",
    )
}

fn common_specs(timeout_default: i64, timeout_doc: &str) -> Vec<PropSpec> {
    vec![
        PropSpec::new(
            "protocol",
            PropKind::Enum(vec!["framed".into(), "raw".into()]),
            PropValue::Str("framed".into()),
            "framed: framepipe wire format (docs/WIRE.md); raw: bare frames, no headers (ffmpeg, GStreamer)",
        ),
        format_spec(),
        PropSpec::new(
            "max-frame-bytes",
            PropKind::Int {
                min: 1,
                max: 1 << 36,
            },
            PropValue::Int(wire::DEFAULT_MAX_FRAME_BYTES as i64),
            "largest whole frame on the wire, in bytes; larger streams are refused before any allocation",
        ),
        PropSpec::new(
            "timeout",
            PropKind::Int { min: 0, max: 86400 },
            PropValue::Int(timeout_default),
            timeout_doc,
        ),
    ]
}

/// The resolved `tcpsink` configuration from its properties.
pub fn sink_config(p: &Props) -> SinkConfig {
    let listen = p.str("listen").trim();
    SinkConfig {
        hosts: list(p.str("host")),
        listen: (!listen.is_empty()).then(|| listen.to_string()),
        format: WireFormat::parse(p.str("wire-format")).unwrap_or(WireFormat::Rgba),
        nodelay: p.bool("nodelay"),
        raw: p.str("protocol") == "raw",
        reconnect: p.bool("reconnect"),
        checksum: p.bool("checksum"),
        max_frame_bytes: p.i64("max-frame-bytes") as u64,
        timeout_s: p.i64("timeout") as u64,
    }
}

/// The resolved `tcpsrc` configuration from its properties.
pub fn src_config(p: &Props) -> std::result::Result<SrcConfig, NetError> {
    let rate_text = p.str("rate");
    let rate = Rational::parse(rate_text).ok_or_else(|| NetError::BadProp {
        prop: "rate",
        value: rate_text.to_string(),
        reason: "expected a frame rate like 30, 30000/1001 or 29.97".into(),
    })?;
    Ok(SrcConfig {
        listen: list(p.str("listen")),
        hosts: list(p.str("host")),
        raw: p.str("protocol") == "raw",
        format: WireFormat::parse(p.str("wire-format")).unwrap_or(WireFormat::Rgba),
        width: p.i64("width") as u32,
        height: p.i64("height") as u32,
        rate,
        max_frame_bytes: p.i64("max-frame-bytes") as u64,
        timeout_s: p.i64("timeout") as u64,
        header_timeout_s: p.i64("header-timeout") as u64,
    })
}

/// Registers `tcpsink` and `tcpsrc`.
pub fn register(registry: &mut Registry) {
    let mut sink_props = vec![
        PropSpec::new(
            "host",
            PropKind::Str,
            PropValue::Str(String::new()),
            "receiver(s) to connect to, HOST:PORT; several comma-separated = several links, each frame striped over them",
        ),
        PropSpec::new(
            "listen",
            PropKind::Str,
            PropValue::Str(String::new()),
            "instead of host: listen on ADDR:PORT and send to the one receiver that connects",
        ),
        PropSpec::new("nodelay", PropKind::Bool, PropValue::Bool(true), "TCP_NODELAY (Nagle off)"),
        PropSpec::new(
            "reconnect",
            PropKind::Bool,
            PropValue::Bool(false),
            "when the receiver goes away, wait for it and reconnect (new stream header) instead of failing",
        ),
        PropSpec::new(
            "checksum",
            PropKind::Bool,
            PropValue::Bool(false),
            "send a CRC-32 of every payload; the receiver checks it",
        ),
    ];
    sink_props.extend(common_specs(
        30,
        "seconds to wait for the receiver at start and when reconnecting (0: for ever)",
    ));
    registry.register(
        ElementDesc {
            name: sink::NAME.into(),
            kind: ElementKind::Sink,
            description: "sends frames over TCP, losslessly, blocking when the receiver is slow"
                .into(),
            props: sink_props,
            default_mode: Mode::Serial,
            details: vec![("wire format".into(), "docs/WIRE.md".into())],
        },
        Box::new(|p| {
            TcpSink::new(sink_config(p))
                .map(|s| Element::Sink(Box::new(s)))
                .map_err(|e| framepipe_core::Error::element(sink::NAME, e))
        }),
    );

    let mut src_props = vec![
        PropSpec::new(
            "listen",
            PropKind::Str,
            PropValue::Str(String::new()),
            "ADDR:PORT to accept the sender on (several comma-separated: links may arrive on any)",
        ),
        PropSpec::new(
            "host",
            PropKind::Str,
            PropValue::Str(String::new()),
            "instead of listen: connect to the sender at HOST:PORT (e.g. ffmpeg ?listen, gst tcpserversink)",
        ),
        PropSpec::new(
            "width",
            PropKind::Int { min: 0, max: wire::MAX_DIMENSION as i64 },
            PropValue::Int(0),
            "protocol=raw only: frame width",
        ),
        PropSpec::new(
            "height",
            PropKind::Int { min: 0, max: wire::MAX_DIMENSION as i64 },
            PropValue::Int(0),
            "protocol=raw only: frame height",
        ),
        PropSpec::new(
            "rate",
            PropKind::Str,
            PropValue::Str("30".into()),
            "protocol=raw only: frame rate (30, 30000/1001, 29.97)",
        ),
        PropSpec::new(
            "header-timeout",
            PropKind::Int { min: 1, max: 3600 },
            PropValue::Int(src::DEFAULT_HEADER_TIMEOUT_S as i64),
            "seconds a connection has to send its whole stream header; a silent or slow one is dropped (listening goes on)",
        ),
    ];
    src_props.extend(common_specs(
        0,
        "seconds to wait at build time for the sender to connect and send its header (0: for ever)",
    ));
    registry.register(
        ElementDesc {
            name: src::NAME.into(),
            kind: ElementKind::Source,
            description: "receives frames over TCP from tcpsink (framed) or a raw peer; blocks at build until the sender connects".into(),
            props: src_props,
            default_mode: Mode::Serial,
            details: vec![("wire format".into(), "docs/WIRE.md".into())],
        },
        Box::new(|p| {
            let cfg = src_config(p).map_err(|e| framepipe_core::Error::element(src::NAME, e))?;
            TcpSrc::open(&cfg)
                .map(|s| Element::Source(Box::new(s)))
                .map_err(|e| framepipe_core::Error::element(src::NAME, e))
        }),
    );
}
