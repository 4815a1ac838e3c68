//! `tcpsink`: sends frames to one receiver, or stripes them over several links.
//!
//! Link 0 is written by the pipeline's sink thread inside [`Sink::consume`]; each further link has
//! a sender thread, created at start, that gets the frame (a reference-counted [`Frame`] handle,
//! no copy) over a bounded channel, packs its stripe into its own buffer and writes it. `consume`
//! returns when every link has written its stripe, so no frame handle outlives the call. Writes
//! block when the receiver stops reading: that is the back-pressure. A write waits in steps of
//! [`WRITE_STEP`] (the socket's send timeout) so that it sees the process's stop request
//! (SIGINT/SIGTERM, [`framepipe_core::stop`]): a receiver that has not taken a byte for
//! [`STOP_GRACE`] after it ends the run ([`NetError::NotReading`]) instead of holding it for
//! ever.

use std::io::{self, IoSlice, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use framepipe_core::{Frame, FrameCtx, Sink, VideoInfo};

use crate::accept::{Acceptor, Expect};
use crate::error::{NetError, Result};
use crate::pack::pack;
use crate::sock::{self, Buf};
use crate::wire::{
    self, FrameHeader, StreamHeader, WireFormat, FRAME_HEADER_LEN, STREAM_HEADER_LEN,
};

/// Element name.
pub const NAME: &str = "tcpsink";

/// The socket's send timeout: how often a blocked write looks at the stop request.
pub const WRITE_STEP: Duration = Duration::from_millis(100);

/// Once a stop is requested, how long a write may go without the receiver taking a byte
/// before it gives up (a receiver that reads slowly still gets its frame whole).
pub const STOP_GRACE: Duration = Duration::from_millis(500);

/// How `tcpsink` is configured (from its properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkConfig {
    /// Receivers to connect to; several = several links (stripes). Empty when listening.
    pub hosts: Vec<String>,
    /// Address to listen on for one receiver instead of connecting.
    pub listen: Option<String>,
    /// Pixel format on the wire.
    pub format: WireFormat,
    /// `TCP_NODELAY` (Nagle off).
    pub nodelay: bool,
    /// Bare frames with no headers (`protocol=raw`).
    pub raw: bool,
    /// Reconnect when the receiver goes away instead of failing.
    pub reconnect: bool,
    /// CRC-32 of every payload in its frame header.
    pub checksum: bool,
    /// Largest frame (on the wire) the sink agrees to send.
    pub max_frame_bytes: u64,
    /// Seconds to wait for a receiver at start or when reconnecting (0: forever).
    pub timeout_s: u64,
}

enum Target {
    Connect(String),
    Listen(Acceptor),
}

/// One connection and its stripe.
struct TxLink {
    target: Target,
    stream: Option<TcpStream>,
    peer: String,
    header: StreamHeader,
    /// Whole frames written on the current connection.
    frames: u64,
    first_row: usize,
    rows: u32,
    /// Packed stripe, allocated at start (empty for RGBA, which is written from the frame).
    buf: Vec<u8>,
    raw: bool,
    nodelay: bool,
    timeout_s: u64,
}

impl TxLink {
    /// Connects (or accepts the receiver) and, for the framed protocol, sends the stream header
    /// at once, announcing `first_seq` as the first frame's sequence number: a receiver learns
    /// the stream's size as soon as it is connected, however long the first frame takes.
    fn open(&mut self, first_seq: u64) -> Result<()> {
        let deadline = sock::deadline(self.timeout_s);
        let mut stream = match &mut self.target {
            Target::Connect(addr) => {
                let s = sock::connect_retry(NAME, addr, deadline, self.timeout_s)?;
                self.peer = addr.clone();
                s
            }
            Target::Listen(acceptor) => {
                let a = acceptor.next(Expect::Silence, deadline, self.timeout_s)?;
                self.peer = a.peer;
                a.stream
            }
        };
        stream
            .set_nodelay(self.nodelay)
            .map_err(|e| NetError::io(format!("setting TCP_NODELAY for {}", self.peer), e))?;
        stream
            .set_write_timeout(Some(WRITE_STEP))
            .map_err(|e| NetError::io(format!("setting the send timeout for {}", self.peer), e))?;
        let want = self.header.stripe_bytes() + FRAME_HEADER_LEN + STREAM_HEADER_LEN;
        let got = sock::set_buffer(&stream, Buf::Send, want)
            .map_err(|e| NetError::io(format!("sizing the send buffer for {}", self.peer), e))?;
        if got < want {
            eprintln!(
                "{NAME}: send buffer for {} is {got} bytes, less than a frame ({want}); \
                 raise net.core.wmem_max",
                self.peer
            );
        }
        self.frames = 0;
        if !self.raw {
            let sh = StreamHeader {
                first_seq,
                ..self.header
            };
            if let Err(e) = write_all_vectored(&mut stream, &sh.encode(), &[]) {
                let _ = stream.shutdown(Shutdown::Both);
                return Err(self.write_error(e));
            }
        }
        self.stream = Some(stream);
        Ok(())
    }

    fn write_error(&self, e: io::Error) -> NetError {
        if e.kind() == io::ErrorKind::TimedOut {
            // `write_all_vectored` gave up: stopping, and the receiver takes nothing.
            return NetError::NotReading {
                peer: self.peer.clone(),
                frames: self.frames,
                waited_ms: STOP_GRACE.as_millis() as u64,
            };
        }
        let closed = matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::WriteZero
        );
        if closed {
            NetError::ReceiverClosed {
                peer: self.peer.clone(),
                frames: self.frames,
            }
        } else {
            NetError::io(format!("sending to {}", self.peer), e)
        }
    }

    /// Drops the connection (the next send reconnects).
    fn reset(&mut self) {
        if let Some(s) = self.stream.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn send(&mut self, frame: &Frame, seq: u64, pts_ns: i64) -> Result<()> {
        if self.stream.is_none() {
            self.open(seq)?;
        }
        let row_bytes = frame.width() as usize * 4;
        let rows = &frame.data()[self.first_row * row_bytes..][..self.rows as usize * row_bytes];
        let payload: &[u8] = if self.header.format == WireFormat::Rgba {
            rows
        } else {
            pack(
                self.header.format,
                frame.width(),
                self.rows,
                rows,
                &mut self.buf,
            );
            &self.buf
        };
        let mut head = [0u8; FRAME_HEADER_LEN];
        let head_len = if self.raw {
            0
        } else {
            let fh = FrameHeader {
                seq,
                pts_ns,
                payload_len: payload.len() as u32,
                checksum: self.header.checksum.then(|| crc32fast::hash(payload)),
            };
            head.copy_from_slice(&fh.encode());
            FRAME_HEADER_LEN
        };
        let Some(stream) = self.stream.as_mut() else {
            return Err(NetError::ReceiverClosed {
                peer: self.peer.clone(),
                frames: self.frames,
            });
        };
        let result = write_all_vectored(stream, &head[..head_len], payload);
        match result {
            Ok(()) => {
                self.frames += 1;
                Ok(())
            }
            Err(e) => {
                let err = self.write_error(e);
                // Whatever part of this frame went out is not a frame: the connection is dropped
                // and the receiver reports the cut.
                self.reset();
                Err(err)
            }
        }
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(s) = self.stream.take() {
            let _ = s.shutdown(Shutdown::Write);
        }
        Ok(())
    }
}

/// Writes `head` then `payload` with as few system calls as possible (`writev`), retrying on
/// `EINTR` and short writes. The socket's send timeout ([`WRITE_STEP`]) makes a write that the
/// receiver does not take return now and then: it goes on, unless the process was asked to
/// stop and the receiver has taken nothing for [`STOP_GRACE`] (then `TimedOut`).
fn write_all_vectored(s: &mut TcpStream, head: &[u8], payload: &[u8]) -> io::Result<()> {
    let mut bufs = [IoSlice::new(head), IoSlice::new(payload)];
    let mut slices: &mut [IoSlice<'_>] = &mut bufs;
    IoSlice::advance_slices(&mut slices, 0);
    let mut progress = Instant::now();
    while !slices.is_empty() {
        match s.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                IoSlice::advance_slices(&mut slices, n);
                progress = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if framepipe_core::stop::requested() && progress.elapsed() >= STOP_GRACE {
                    return Err(io::ErrorKind::TimedOut.into());
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

enum Job {
    Send { frame: Frame, seq: u64, pts_ns: i64 },
    Reset,
    Finish,
}

struct Helper {
    jobs: SyncSender<Job>,
    done: Receiver<Result<()>>,
    thread: Option<JoinHandle<()>>,
}

fn helper_main(mut link: TxLink, jobs: Receiver<Job>, done: SyncSender<Result<()>>) {
    while let Ok(job) = jobs.recv() {
        let last = matches!(job, Job::Finish);
        let r = match job {
            Job::Send { frame, seq, pts_ns } => {
                let r = link.send(&frame, seq, pts_ns);
                drop(frame);
                r
            }
            Job::Reset => {
                link.reset();
                Ok(())
            }
            Job::Finish => link.finish(),
        };
        if done.send(r).is_err() || last {
            break;
        }
    }
}

/// The `tcpsink` element.
pub struct TcpSink {
    cfg: SinkConfig,
    link0: Option<TxLink>,
    helpers: Vec<Helper>,
    /// Frames sent; also the sequence number of the next frame on the wire, whatever the
    /// pipeline's `ctx.seq` says, so that a frame the output thread gives again (a repeat under
    /// `--overload live`) goes out as the next frame of a continuous stream.
    frames: u64,
}

impl std::fmt::Debug for TcpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpSink")
            .field("cfg", &self.cfg)
            .field(
                "links",
                &(self.helpers.len() + usize::from(self.link0.is_some())),
            )
            .field("frames", &self.frames)
            .finish()
    }
}

impl TcpSink {
    /// A sink that connects (or listens) in [`Sink::start`].
    pub fn new(cfg: SinkConfig) -> Result<Self> {
        if cfg.hosts.is_empty() == cfg.listen.is_none() {
            return Err(NetError::BadProp {
                prop: "host/listen",
                value: format!(
                    "host={} listen={}",
                    cfg.hosts.join(","),
                    cfg.listen.clone().unwrap_or_default()
                ),
                reason: "give exactly one of host=H:P[,H:P...] or listen=ADDR:PORT".into(),
            });
        }
        if cfg.hosts.len() > wire::MAX_LINKS as usize {
            return Err(NetError::BadProp {
                prop: "host",
                value: cfg.hosts.join(","),
                reason: format!("at most {} links", wire::MAX_LINKS),
            });
        }
        if cfg.raw && cfg.hosts.len() > 1 {
            return Err(NetError::BadProp {
                prop: "host",
                value: cfg.hosts.join(","),
                reason: "protocol=raw has no headers, so it cannot stripe over several links"
                    .into(),
            });
        }
        Ok(TcpSink {
            cfg,
            link0: None,
            helpers: Vec::new(),
            frames: 0,
        })
    }

    /// Whole frames sent (on every link).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    fn start_links(&mut self, info: VideoInfo) -> Result<()> {
        let cfg = &self.cfg;
        let bytes = cfg
            .format
            .bytes(info.width, info.height)
            .unwrap_or(u64::MAX);
        if bytes > cfg.max_frame_bytes {
            return Err(NetError::FrameTooLarge {
                width: info.width,
                height: info.height,
                format: cfg.format.name(),
                bytes,
                limit: cfg.max_frame_bytes,
            });
        }
        let count = cfg.hosts.len().max(1) as u16;
        if count as u32 > info.height {
            return Err(NetError::BadProp {
                prop: "host",
                value: cfg.hosts.join(","),
                reason: format!("{count} links for {} rows", info.height),
            });
        }
        let stream_id = stream_id();
        let mut targets: Vec<Target> = match &cfg.listen {
            Some(addr) => vec![Target::Listen(Acceptor::bind(
                NAME,
                std::slice::from_ref(addr),
            )?)],
            None => cfg
                .hosts
                .iter()
                .map(|h| Target::Connect(h.clone()))
                .collect(),
        };
        let mut links = Vec::with_capacity(targets.len());
        for (i, target) in targets.drain(..).enumerate() {
            let header = StreamHeader {
                width: info.width,
                height: info.height,
                format: cfg.format,
                checksum: cfg.checksum,
                rate: info.rate,
                link_index: i as u16,
                link_count: count,
                stream_id,
                first_seq: 0,
            };
            let (first_row, rows) = header.stripe();
            let packed = if cfg.format == WireFormat::Rgba {
                0
            } else {
                header.stripe_bytes()
            };
            let mut link = TxLink {
                target,
                stream: None,
                peer: String::new(),
                header,
                frames: 0,
                first_row: first_row as usize,
                rows,
                buf: vec![0u8; packed],
                raw: cfg.raw,
                nodelay: cfg.nodelay,
                timeout_s: cfg.timeout_s,
            };
            link.open(self.frames)?;
            links.push(link);
        }
        let mut links = links.into_iter();
        self.link0 = links.next();
        for (i, link) in links.enumerate() {
            let (jobs_tx, jobs_rx) = sync_channel(1);
            let (done_tx, done_rx) = sync_channel(1);
            let thread = std::thread::Builder::new()
                .name(format!("tcpsink-link{}", i + 1))
                .spawn(move || helper_main(link, jobs_rx, done_tx))
                .map_err(|e| NetError::io("starting a link sender thread", e))?;
            self.helpers.push(Helper {
                jobs: jobs_tx,
                done: done_rx,
                thread: Some(thread),
            });
        }
        Ok(())
    }

    /// Runs `job` on every helper and `own` on link 0; returns the first error after all are done.
    fn all_links(
        &mut self,
        job: impl Fn() -> Job,
        own: impl FnOnce(&mut TxLink) -> Result<()>,
    ) -> Result<()> {
        let mut first_err = None;
        let mut sent = 0;
        for h in &self.helpers {
            if h.jobs.send(job()).is_ok() {
                sent += 1;
            } else {
                first_err.get_or_insert(NetError::LinkMismatch(
                    "a link sender thread stopped".into(),
                ));
            }
        }
        if let Some(l) = self.link0.as_mut() {
            if let Err(e) = own(l) {
                first_err.get_or_insert(e);
            }
        }
        for h in self.helpers.iter().take(sent) {
            match h.done.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(NetError::LinkMismatch(
                        "a link sender thread stopped".into(),
                    ));
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn send_frame(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        let (seq, pts_ns) = (self.frames, ctx.pts_ns);
        self.all_links(
            || Job::Send {
                frame: frame.clone(),
                seq,
                pts_ns,
            },
            |l| l.send(frame, seq, pts_ns),
        )
    }
}

impl TcpSink {
    /// Whether `e` is a listening sink's receiver gone before its first frame.
    fn stray_receiver(&self, e: &NetError) -> bool {
        self.cfg.listen.is_some()
            && e.is_connection_lost()
            && self.link0.as_ref().is_some_and(|l| l.frames == 0)
    }
}

fn stream_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ ((std::process::id() as u64) << 40) ^ 0x9e37_79b9_7f4a_7c15
}

impl Sink for TcpSink {
    /// Waits for the receiver when it stops reading (the back-pressure it is made for).
    fn blocks(&self) -> bool {
        true
    }

    fn start(&mut self, info: VideoInfo) -> framepipe_core::Result<()> {
        self.start_links(info)
            .map_err(|e| framepipe_core::Error::element(NAME, e))
    }

    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> framepipe_core::Result<()> {
        loop {
            match self.send_frame(ctx, frame) {
                Ok(()) => {
                    self.frames += 1;
                    return Ok(());
                }
                Err(e) if self.stray_receiver(&e) => {
                    // A listening sink's "receiver" that went away before taking a single frame
                    // was a stray (a port scan, a health check): wait for the real one.
                    eprintln!("{NAME}: {e}, before its first frame; waiting for another receiver");
                }
                Err(e) if self.cfg.reconnect && e.is_connection_lost() => {
                    eprintln!("{NAME}: {e}; reconnecting, resending frame {}", self.frames);
                    // Every link starts a new connection (and stream header) together.
                    self.all_links(
                        || Job::Reset,
                        |l| {
                            l.reset();
                            Ok(())
                        },
                    )
                    .map_err(|e| framepipe_core::Error::element(NAME, e))?;
                }
                Err(e) => return Err(framepipe_core::Error::element(NAME, e)),
            }
        }
    }

    fn finish(&mut self) -> framepipe_core::Result<()> {
        let r = self.all_links(|| Job::Finish, |l| l.finish());
        for h in &mut self.helpers {
            if let Some(t) = h.thread.take() {
                let _ = t.join();
            }
        }
        r.map_err(|e| framepipe_core::Error::element(NAME, e))
    }
}

impl Drop for TcpSink {
    fn drop(&mut self) {
        // Dropping the job senders ends the helper threads.
        for h in self.helpers.drain(..) {
            drop(h.jobs);
            if let Some(t) = h.thread {
                let _ = t.join();
            }
        }
    }
}
