//! Accepting peers on a listening socket without letting a stray connection take the place of
//! the real one.
//!
//! A listening port on a network sees more than the peer it waits for: port scans, health checks
//! (connect, then close), HTTP clients, a second sender. [`Acceptor`] accepts every connection
//! as it comes and keeps it *pending* (non-blocking, several at once) until it proves to be the
//! awaited peer; a connection that cannot be one is closed and logged on stderr — one line naming
//! the peer and what was wrong — and listening goes on. Because pending connections are judged
//! side by side, a silent or slow one (a slowloris) never delays the real peer behind it; it holds
//! one of at most [`MAX_PENDING`] slots until its own timeout.
//!
//! What proves a peer (see [`Expect`]):
//! * a framed `tcpsrc` waits for a sender: a valid 64-byte stream header, within
//!   `header-timeout`, whose frame the memory budget allows
//!   ([`framepipe_core::Limits::check_frame`]), checked before anything is allocated from it;
//!   the header is checked byte by byte as it arrives, so an HTTP request is refused at once;
//! * a raw `tcpsrc` waits for a raw sender: its first byte (a connection closed before sending
//!   anything is a stray);
//! * a listening `tcpsink` waits for a receiver, which never sends anything: a connection that
//!   stays open and silent for [`RECEIVER_SETTLE`] (one that sends bytes or closes is a stray).
//!
//! Only at start (or reconnection), never per frame. Polls every 10 ms, like the rest of set-up.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use framepipe_core::Limits;

use crate::error::{NetError, Result};
use crate::wire::{StreamHeader, MAGIC, STREAM_HEADER_LEN};

/// At most this many connections wait to prove themselves at once; when one more arrives, the
/// oldest pending one is dropped (and logged).
pub const MAX_PENDING: usize = 32;
/// Strays logged one line each; after that they are only counted (a port scan must not flood
/// stderr). The count is in the timeout message.
pub const MAX_STRAY_LINES: u64 = 16;
/// How long a connection to a listening `tcpsink` must stay open and silent to be taken for the
/// receiver (a receiver sends nothing; an HTTP client or a health check does, or closes).
pub const RECEIVER_SETTLE: Duration = Duration::from_millis(100);
const POLL: Duration = Duration::from_millis(10);

/// What proves a pending connection to be the awaited peer.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// A framepipe sender: a valid stream header within `header_timeout`, describing a frame of
    /// at most `max_frame_bytes` on the wire and within the memory budget.
    Header {
        /// Time a connection has to deliver its whole header.
        header_timeout: Duration,
        /// The `max-frame-bytes` property.
        max_frame_bytes: u64,
    },
    /// A raw sender: its first byte (not consumed).
    FirstByte,
    /// A receiver: open and silent for [`RECEIVER_SETTLE`].
    Silence,
}

/// A connection accepted and judged to be the awaited peer.
#[derive(Debug)]
pub struct Accepted {
    /// The connection, back in blocking mode.
    pub stream: TcpStream,
    /// The peer's address.
    pub peer: String,
    /// Its stream header, for [`Expect::Header`].
    pub header: Option<StreamHeader>,
}

struct Pending {
    stream: TcpStream,
    peer: String,
    buf: [u8; STREAM_HEADER_LEN],
    got: usize,
    since: Instant,
}

enum Verdict {
    Wait,
    Take(Option<StreamHeader>),
    Stray(String),
}

/// Listening sockets and the connections pending on them.
pub struct Acceptor {
    who: &'static str,
    listeners: Vec<TcpListener>,
    addrs: String,
    pending: VecDeque<Pending>,
    strays: u64,
    last_stray: Option<String>,
}

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acceptor")
            .field("who", &self.who)
            .field("addrs", &self.addrs)
            .field("pending", &self.pending.len())
            .field("strays", &self.strays)
            .finish()
    }
}

impl Acceptor {
    /// Binds a listener on each of `addrs`; `who` (the element name) prefixes log lines.
    pub fn bind(who: &'static str, addrs: &[String]) -> Result<Self> {
        let listeners = addrs
            .iter()
            .map(|a| {
                let l = TcpListener::bind(a.as_str())
                    .map_err(|e| NetError::io(format!("listening on {a}"), e))?;
                l.set_nonblocking(true)
                    .map_err(|e| NetError::io(format!("listening on {a}"), e))?;
                Ok(l)
            })
            .collect::<Result<Vec<_>>>()?;
        let addrs = listeners
            .iter()
            .filter_map(|l| l.local_addr().ok().map(|a| a.to_string()))
            .collect::<Vec<_>>()
            .join(",");
        Ok(Acceptor {
            who,
            listeners,
            addrs,
            pending: VecDeque::new(),
            strays: 0,
            last_stray: None,
        })
    }

    /// Waits until a connection proves to be the awaited peer, or `deadline`
    /// ([`NetError::Timeout`], naming the strays seen). Strays are logged and closed.
    pub fn next(
        &mut self,
        expect: Expect,
        deadline: Option<Instant>,
        timeout_s: u64,
    ) -> Result<Accepted> {
        loop {
            self.accept_new()?;
            let now = Instant::now();
            let mut i = 0;
            while i < self.pending.len() {
                match judge(&mut self.pending[i], expect, now) {
                    Verdict::Wait => i += 1,
                    Verdict::Stray(why) => {
                        if let Some(p) = self.pending.remove(i) {
                            self.stray(&p.peer, &why);
                        }
                    }
                    Verdict::Take(header) => {
                        let Some(p) = self.pending.remove(i) else {
                            continue;
                        };
                        p.stream
                            .set_nonblocking(false)
                            .map_err(|e| NetError::io(format!("accepting {}", p.peer), e))?;
                        return Ok(Accepted {
                            stream: p.stream,
                            peer: p.peer,
                            header,
                        });
                    }
                }
            }
            if deadline.is_some_and(|d| now >= d) {
                let mut what = match expect {
                    Expect::Silence => format!("a receiver to connect to {}", self.addrs),
                    _ => format!("a sender to connect to {}", self.addrs),
                };
                if let Some(last) = &self.last_stray {
                    what.push_str(&format!(
                        " (ignored {} other connections; the last: {last})",
                        self.strays
                    ));
                }
                return Err(NetError::Timeout {
                    what,
                    secs: timeout_s,
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Refuses a connection taken by [`Acceptor::next`] after all (its header disagrees with the
    /// stream's other links): logged like any stray.
    pub fn refuse(&mut self, peer: &str, why: &str) {
        self.stray(peer, why);
    }

    fn accept_new(&mut self) -> Result<()> {
        for i in 0..self.listeners.len() {
            loop {
                let accepted = self.listeners[i].accept();
                match accepted {
                    Ok((stream, peer)) => {
                        let peer = peer.to_string();
                        if let Err(e) = stream.set_nonblocking(true) {
                            self.stray(&peer, &format!("cannot make it non-blocking: {e}"));
                            continue;
                        }
                        if self.pending.len() >= MAX_PENDING {
                            if let Some(old) = self.pending.pop_front() {
                                let why = format!(
                                    "dropped after {} ms without proving itself: {MAX_PENDING} connections were pending",
                                    old.since.elapsed().as_millis()
                                );
                                self.stray(&old.peer, &why);
                            }
                        }
                        self.pending.push_back(Pending {
                            stream,
                            peer,
                            buf: [0; STREAM_HEADER_LEN],
                            got: 0,
                            since: Instant::now(),
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::Interrupted
                                | io::ErrorKind::ConnectionAborted
                                | io::ErrorKind::ConnectionReset
                        ) => {}
                    Err(e) => {
                        let at = self.listeners[i]
                            .local_addr()
                            .map(|a| a.to_string())
                            .unwrap_or_default();
                        return Err(NetError::io(format!("accepting on {at}"), e));
                    }
                }
            }
        }
        Ok(())
    }

    fn stray(&mut self, peer: &str, why: &str) {
        self.strays += 1;
        if self.strays <= MAX_STRAY_LINES {
            eprintln!(
                "{}: ignored connection from {peer}: {why}; still listening on {}",
                self.who, self.addrs
            );
            if self.strays == MAX_STRAY_LINES {
                eprintln!(
                    "{}: {MAX_STRAY_LINES} connections ignored; further ones are counted, not logged",
                    self.who
                );
            }
        }
        self.last_stray = Some(format!("{peer}: {why}"));
    }
}

fn judge(p: &mut Pending, expect: Expect, now: Instant) -> Verdict {
    match expect {
        Expect::Header {
            header_timeout,
            max_frame_bytes,
        } => judge_header(p, header_timeout, max_frame_bytes, now),
        Expect::FirstByte => match p.stream.peek(&mut [0u8; 1]) {
            Ok(0) => Verdict::Stray("closed without sending anything".into()),
            Ok(_) => Verdict::Take(None),
            Err(e) if would_block(&e) => Verdict::Wait,
            Err(e) => Verdict::Stray(e.to_string()),
        },
        Expect::Silence => {
            let mut b = [0u8; 16];
            match p.stream.peek(&mut b) {
                Ok(0) => Verdict::Stray("closed at once (a receiver stays connected)".into()),
                Ok(n) => Verdict::Stray(format!(
                    "sent \"{}\" (a framepipe receiver sends nothing)",
                    b[..n].escape_ascii()
                )),
                Err(e) if would_block(&e) => {
                    if now.duration_since(p.since) >= RECEIVER_SETTLE {
                        Verdict::Take(None)
                    } else {
                        Verdict::Wait
                    }
                }
                Err(e) => Verdict::Stray(e.to_string()),
            }
        }
    }
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

fn judge_header(p: &mut Pending, timeout: Duration, max_frame_bytes: u64, now: Instant) -> Verdict {
    loop {
        if p.got == STREAM_HEADER_LEN {
            break;
        }
        match p.stream.read(&mut p.buf[p.got..]) {
            Ok(0) => {
                return Verdict::Stray(format!(
                    "closed after {} of {STREAM_HEADER_LEN} stream header bytes",
                    p.got
                ))
            }
            Ok(n) => {
                p.got += n;
                let m = p.got.min(MAGIC.len());
                if p.buf[..m] != MAGIC[..m] {
                    return Verdict::Stray(format!(
                        "not a framepipe stream: it starts with \"{}\", expected \"FPWIRE\\r\\n\"",
                        p.buf[..p.got.min(24)].escape_ascii()
                    ));
                }
            }
            Err(e) if would_block(&e) => {
                let waited = now.duration_since(p.since);
                if waited < timeout {
                    return Verdict::Wait;
                }
                return Verdict::Stray(if p.got == 0 {
                    NetError::Silent {
                        peer: p.peer.clone(),
                        secs: timeout.as_secs(),
                        prop: "header-timeout",
                    }
                    .to_string()
                } else {
                    format!(
                        "only {} of {STREAM_HEADER_LEN} stream header bytes in {} s (header-timeout={})",
                        p.got,
                        timeout.as_secs(),
                        timeout.as_secs()
                    )
                });
            }
            Err(e) => return Verdict::Stray(e.to_string()),
        }
    }
    let header = match StreamHeader::decode(&p.buf, max_frame_bytes) {
        Ok(h) => h,
        Err(e) => return Verdict::Stray(e.to_string()),
    };
    // The pool frames the pipeline will allocate for this stream are RGBA frames of this size.
    if let Err(e) = Limits::current().check_frame("its stream header", header.width, header.height)
    {
        return Verdict::Stray(e.to_string());
    }
    Verdict::Take(Some(header))
}
