//! `tcpsrc`: receives frames from a `tcpsink` (framed, one or several links) or from a peer sending
//! bare frames (`protocol=raw`: ffmpeg, GStreamer).
//!
//! The framed protocol's stream header carries the frame size and rate, and the engine must know
//! them before the pipeline is built, so building a framed `tcpsrc` blocks until the sender has
//! connected and its header has arrived (bounded by `timeout`). A listening `tcpsrc` takes only
//! a connection that proves to be a sender ([`crate::accept`]): strays are logged and closed, and
//! listening goes on.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use framepipe_core::{FrameCtx, FrameMut, Limits, Rational, Source, VideoInfo};

use crate::accept::{Acceptor, Expect};
use crate::error::{NetError, Result};
use crate::pack::unpack;
use crate::sock::{self, Buf};
use crate::wire::{self, read_full, StreamHeader, WireFormat, WireReader, FRAME_HEADER_LEN};

/// Element name.
pub const NAME: &str = "tcpsrc";

/// How `tcpsrc` is configured (from its properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrcConfig {
    /// Addresses to listen on (links may arrive on any of them). Empty when connecting.
    pub listen: Vec<String>,
    /// Senders to connect to instead (e.g. ffmpeg `?listen`, GStreamer `tcpserversink`).
    pub hosts: Vec<String>,
    /// Bare frames with no headers.
    pub raw: bool,
    /// For `raw`: the pixel format of the bare frames.
    pub format: WireFormat,
    /// For `raw`: frame width.
    pub width: u32,
    /// For `raw`: frame height.
    pub height: u32,
    /// For `raw`: frame rate.
    pub rate: Rational,
    /// Largest frame (on the wire) accepted from a peer.
    pub max_frame_bytes: u64,
    /// Seconds to wait for the sender at start (0: forever).
    pub timeout_s: u64,
    /// Seconds a connection has to deliver its whole stream header (framed).
    pub header_timeout_s: u64,
}

struct RxLink {
    reader: WireReader<TcpStream>,
    first_row: usize,
    rows: u32,
    /// Packed stripe (empty for RGBA, which is read straight into the frame).
    buf: Vec<u8>,
}

struct RawLink {
    stream: TcpStream,
    peer: String,
    buf: Vec<u8>,
}

enum Links {
    Framed(Vec<RxLink>),
    Raw(RawLink),
}

/// The `tcpsrc` element.
pub struct TcpSrc {
    info: VideoInfo,
    format: WireFormat,
    links: Links,
    frames: u64,
}

impl std::fmt::Debug for TcpSrc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpSrc")
            .field("info", &self.info)
            .field("format", &self.format)
            .field("links", &self.links())
            .field("frames", &self.frames)
            .finish()
    }
}

impl TcpSrc {
    /// Connects or accepts, and for the framed protocol reads and checks every link's stream
    /// header. Blocks until then (up to `timeout`).
    pub fn open(cfg: &SrcConfig) -> Result<Self> {
        if cfg.hosts.is_empty() == cfg.listen.is_empty() {
            return Err(NetError::BadProp {
                prop: "host/listen",
                value: format!(
                    "host={} listen={}",
                    cfg.hosts.join(","),
                    cfg.listen.join(",")
                ),
                reason: "give exactly one of listen=ADDR:PORT[,...] or host=H:P[,...]".into(),
            });
        }
        let deadline = sock::deadline(cfg.timeout_s);
        if cfg.raw {
            Self::open_raw(cfg, deadline)
        } else {
            Self::open_framed(cfg, deadline)
        }
    }

    fn open_raw(cfg: &SrcConfig, deadline: Option<Instant>) -> Result<Self> {
        if cfg.width == 0 || cfg.height == 0 {
            return Err(NetError::BadProp {
                prop: "width/height",
                value: format!("{}x{}", cfg.width, cfg.height),
                reason: "protocol=raw has no header: give width= and height=".into(),
            });
        }
        if cfg.hosts.len() + cfg.listen.len() > 1 {
            return Err(NetError::BadProp {
                prop: "host/listen",
                value: format!("{}{}", cfg.hosts.join(","), cfg.listen.join(",")),
                reason: "protocol=raw takes one link".into(),
            });
        }
        let bytes = cfg.format.bytes(cfg.width, cfg.height).unwrap_or(u64::MAX);
        if bytes > cfg.max_frame_bytes {
            return Err(NetError::FrameTooLarge {
                width: cfg.width,
                height: cfg.height,
                format: cfg.format.name(),
                bytes,
                limit: cfg.max_frame_bytes,
            });
        }
        Limits::current().check_frame("width/height", cfg.width, cfg.height)?;
        let (stream, peer) = if let Some(h) = cfg.hosts.first() {
            (
                sock::connect_retry(NAME, h, deadline, cfg.timeout_s)?,
                h.clone(),
            )
        } else {
            // A connection closed before sending anything (a health check) is not the sender.
            let a = Acceptor::bind(NAME, &cfg.listen)?.next(
                Expect::FirstByte,
                deadline,
                cfg.timeout_s,
            )?;
            (a.stream, a.peer)
        };
        size_rcvbuf(&stream, &peer, bytes as usize);
        let packed = if cfg.format == WireFormat::Rgba {
            0
        } else {
            bytes as usize
        };
        Ok(TcpSrc {
            info: VideoInfo {
                width: cfg.width,
                height: cfg.height,
                rate: cfg.rate,
            },
            format: cfg.format,
            links: Links::Raw(RawLink {
                stream,
                peer,
                buf: vec![0u8; packed],
            }),
            frames: 0,
        })
    }

    fn open_framed(cfg: &SrcConfig, deadline: Option<Instant>) -> Result<Self> {
        let mut readers: Vec<WireReader<TcpStream>> = Vec::new();
        if !cfg.hosts.is_empty() {
            for h in &cfg.hosts {
                let s = sock::connect_retry(NAME, h, deadline, cfg.timeout_s)?;
                readers.push(read_header(s, h, cfg)?);
            }
        } else {
            let mut acceptor = Acceptor::bind(NAME, &cfg.listen)?;
            let expect = Expect::Header {
                header_timeout: Duration::from_secs(cfg.header_timeout_s.max(1)),
                max_frame_bytes: cfg.max_frame_bytes,
            };
            // Links of one stream arrive on any listener; a connection that is not one of them
            // (a stray, another stream, a link already connected) is logged and closed.
            loop {
                let a = acceptor.next(expect, deadline, cfg.timeout_s)?;
                let Some(h) = a.header else {
                    continue;
                };
                if let Some(first) = readers.first().map(|r| *r.header()) {
                    let same = StreamHeader {
                        link_index: first.link_index,
                        ..h
                    } == first;
                    if !same {
                        acceptor.refuse(
                            &a.peer,
                            &format!(
                                "its header {h:?} disagrees with link {}'s {first:?}",
                                first.link_index
                            ),
                        );
                        continue;
                    }
                    if readers
                        .iter()
                        .any(|r| r.header().link_index == h.link_index)
                    {
                        acceptor.refuse(
                            &a.peer,
                            &format!(
                                "link {} of stream {:#x} is already connected",
                                h.link_index, h.stream_id
                            ),
                        );
                        continue;
                    }
                }
                readers.push(WireReader::with_header(a.stream, &a.peer, h));
                if readers.len() >= h.link_count as usize {
                    break;
                }
            }
        }
        let first = *readers[0].header();
        if readers.len() != first.link_count as usize {
            return Err(NetError::LinkMismatch(format!(
                "the stream has {} links, {} connected",
                first.link_count,
                readers.len()
            )));
        }
        let mut seen = vec![false; first.link_count as usize];
        for r in &readers {
            let h = r.header();
            let same = StreamHeader {
                link_index: first.link_index,
                ..*h
            } == first;
            if !same {
                return Err(NetError::LinkMismatch(format!(
                    "link {} disagrees with link {}: {h:?} vs {first:?}",
                    h.link_index, first.link_index
                )));
            }
            if std::mem::replace(&mut seen[h.link_index as usize], true) {
                return Err(NetError::LinkMismatch(format!(
                    "link {} connected twice",
                    h.link_index
                )));
            }
        }
        readers.sort_by_key(|r| r.header().link_index);
        let links = readers
            .into_iter()
            .map(|reader| {
                let h = *reader.header();
                let (first_row, rows) = h.stripe();
                size_rcvbuf(
                    reader.get_ref(),
                    "sender",
                    h.stripe_bytes() + FRAME_HEADER_LEN,
                );
                let packed = if h.format == WireFormat::Rgba {
                    0
                } else {
                    h.stripe_bytes()
                };
                RxLink {
                    reader,
                    first_row: first_row as usize,
                    rows,
                    buf: vec![0u8; packed],
                }
            })
            .collect();
        Ok(TcpSrc {
            info: VideoInfo {
                width: first.width,
                height: first.height,
                rate: first.rate,
            },
            format: first.format,
            links: Links::Framed(links),
            frames: 0,
        })
    }

    /// Whole frames received.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Pixel format on the wire.
    pub fn wire_format(&self) -> WireFormat {
        self.format
    }

    /// Number of links.
    pub fn links(&self) -> usize {
        match &self.links {
            Links::Framed(l) => l.len(),
            Links::Raw(_) => 1,
        }
    }

    /// Reads the next frame into `data` (`width*height*4` RGBA bytes). `Ok(false)` at a clean end.
    pub fn read_into(&mut self, data: &mut [u8]) -> Result<bool> {
        let width = self.info.width;
        let row_bytes = width as usize * 4;
        let format = self.format;
        match &mut self.links {
            Links::Raw(link) => {
                let target: &mut [u8] = if format == WireFormat::Rgba {
                    data
                } else {
                    &mut link.buf
                };
                let want = target.len();
                let got = read_full(&mut link.stream, target)
                    .map_err(|e| NetError::io(format!("reading from {}", link.peer), e))?;
                if got == 0 {
                    return Ok(false);
                }
                if got < want {
                    return Err(NetError::ClosedMidFrame {
                        peer: link.peer.clone(),
                        frames: self.frames,
                    });
                }
                if format != WireFormat::Rgba {
                    unpack(format, width, self.info.height, &link.buf, data);
                }
            }
            Links::Framed(links) => {
                for (i, link) in links.iter_mut().enumerate() {
                    let rows =
                        &mut data[link.first_row * row_bytes..][..link.rows as usize * row_bytes];
                    let got = if format == WireFormat::Rgba {
                        link.reader.read_frame(rows)?
                    } else {
                        link.reader.read_frame(&mut link.buf)?
                    };
                    if got.is_none() {
                        if i == 0 {
                            return Ok(false);
                        }
                        return Err(NetError::ClosedMidFrame {
                            peer: format!("link {i}"),
                            frames: self.frames,
                        });
                    }
                    if format != WireFormat::Rgba {
                        unpack(format, width, link.rows, &link.buf, rows);
                    }
                }
            }
        }
        self.frames += 1;
        Ok(true)
    }
}

/// Reads and checks the stream header of a sender we connected to (`host=`): within
/// `header-timeout`, and within `max-frame-bytes` and the memory budget.
fn read_header(stream: TcpStream, peer: &str, cfg: &SrcConfig) -> Result<WireReader<TcpStream>> {
    let secs = cfg.header_timeout_s.max(1);
    let io = |e| NetError::io(format!("reading from {peer}"), e);
    stream
        .set_read_timeout(Some(Duration::from_secs(secs)))
        .map_err(io)?;
    let r = WireReader::open(stream, peer, cfg.max_frame_bytes).map_err(|e| match e {
        NetError::Io { source, .. }
            if matches!(
                source.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            NetError::Silent {
                peer: peer.to_string(),
                secs,
                prop: "header-timeout",
            }
        }
        e => e,
    })?;
    r.get_ref().set_read_timeout(None).map_err(io)?;
    let h = r.header();
    Limits::current().check_frame(&format!("stream header from {peer}"), h.width, h.height)?;
    Ok(r)
}

fn size_rcvbuf(stream: &TcpStream, peer: &str, want: usize) {
    match sock::set_buffer(stream, Buf::Recv, want) {
        Ok(got) if got < want => eprintln!(
            "{NAME}: receive buffer for {peer} is {got} bytes, less than a frame ({want}); \
             raise net.core.rmem_max"
        ),
        Ok(_) => {}
        Err(e) => eprintln!("{NAME}: cannot size the receive buffer for {peer}: {e}"),
    }
}

impl Source for TcpSrc {
    fn info(&self) -> VideoInfo {
        self.info
    }

    /// Waits on the peer's socket.
    fn blocks(&self) -> bool {
        true
    }

    fn fill(&mut self, _ctx: &FrameCtx, frame: &mut FrameMut) -> framepipe_core::Result<bool> {
        self.read_into(frame.data_mut())
            .map_err(|e| framepipe_core::Error::element(NAME, e))
    }
}

/// Seconds a connection has to send its stream header unless `header-timeout` says otherwise.
pub const DEFAULT_HEADER_TIMEOUT_S: u64 = 5;

/// Largest frame accepted unless `max-frame-bytes` says otherwise.
pub const DEFAULT_MAX_FRAME_BYTES: u64 = wire::DEFAULT_MAX_FRAME_BYTES;
