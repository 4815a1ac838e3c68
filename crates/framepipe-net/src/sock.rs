//! Socket set-up: buffer sizes (the only `unsafe`: `setsockopt`/`getsockopt`) and connecting
//! with retries. All of this runs at start or on reconnection, never per frame. Accepting is in
//! [`crate::accept`].

use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::error::{NetError, Result};

/// Which socket buffer.
#[derive(Debug, Clone, Copy)]
pub enum Buf {
    /// `SO_SNDBUF`.
    Send,
    /// `SO_RCVBUF`.
    Recv,
}

/// Asks for a socket buffer of at least `bytes` and returns the size the kernel reports.
/// Tries the `*FORCE` variant first (allowed with CAP_NET_ADMIN, it ignores `net.core.*mem_max`),
/// then the ordinary option, which the kernel caps.
pub fn set_buffer(sock: &impl AsRawFd, which: Buf, bytes: usize) -> io::Result<usize> {
    let fd = sock.as_raw_fd();
    let (force, plain) = match which {
        Buf::Send => (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        Buf::Recv => (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
    };
    let want: libc::c_int = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    if setopt(fd, force, want).is_err() {
        setopt(fd, plain, want)?;
    }
    let mut got: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is an open socket borrowed from `sock`; `got` and `len` are valid for writes
    // and `len` holds the size of `got`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            plain,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // Linux reports twice the value set (it reserves half for bookkeeping).
    Ok(got as usize / 2)
}

fn setopt(fd: libc::c_int, opt: libc::c_int, val: libc::c_int) -> io::Result<()> {
    // SAFETY: `fd` is an open socket; the value pointer and length describe a live c_int.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn is_self_connected(s: &TcpStream) -> bool {
    matches!((s.local_addr(), s.peer_addr()), (Ok(a), Ok(b)) if a == b)
}

/// A deadline from a `timeout` property in seconds (0: none).
pub fn deadline(timeout_s: u64) -> Option<Instant> {
    (timeout_s > 0).then(|| Instant::now() + Duration::from_secs(timeout_s))
}

/// How often a refused connection is retried.
const RETRY_MS: u64 = 100;
/// The longest a single connection attempt may take (an unanswered SYN).
const ATTEMPT: Duration = Duration::from_secs(5);

/// "until timeout (30 s)" or "for ever (timeout=0)": how long retries go on, for messages.
fn until(timeout_s: u64) -> String {
    if timeout_s == 0 {
        "for ever (timeout=0)".into()
    } else {
        format!("until timeout ({timeout_s} s)")
    }
}

/// Connects to `addr`, retrying every [`RETRY_MS`] while the peer refuses (it may not be
/// listening yet), until `deadline`. The first refusal (and the first of any other kind of
/// failure) is said once on stderr, prefixed by `who` (the element), so that a sender waiting
/// for a receiver that is not there says so; at the deadline, a refusal is
/// [`NetError::Refused`].
pub fn connect_retry(
    who: &str,
    addr: &str,
    deadline: Option<Instant>,
    timeout_s: u64,
) -> Result<TcpStream> {
    let mut said: Option<io::ErrorKind> = None;
    loop {
        let resolved: Vec<_> = addr
            .to_socket_addrs()
            .map_err(|e| NetError::io(format!("resolving '{addr}'"), e))?
            .collect();
        let mut last = None;
        for sa in &resolved {
            let attempt = match deadline {
                Some(d) => d
                    .saturating_duration_since(Instant::now())
                    .clamp(Duration::from_millis(RETRY_MS), ATTEMPT),
                None => ATTEMPT,
            };
            match TcpStream::connect_timeout(sa, attempt) {
                // Retrying a local port nobody listens on can connect the socket to itself
                // (TCP simultaneous open, when the kernel picks that port as the source): that
                // is no peer, and as good as refused.
                Ok(s) if is_self_connected(&s) => {
                    last = Some(io::ErrorKind::ConnectionRefused.into());
                }
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        let Some(e) = last else {
            return Err(NetError::io(
                format!("resolving '{addr}'"),
                io::Error::other("no address"),
            ));
        };
        let refused = e.kind() == io::ErrorKind::ConnectionRefused;
        if said != Some(e.kind()) {
            said = Some(e.kind());
            if refused {
                eprintln!(
                    "{who}: connection refused by {addr}; retrying every {RETRY_MS} ms {}",
                    until(timeout_s)
                );
            } else {
                eprintln!(
                    "{who}: cannot connect to {addr}: {e}; retrying every {RETRY_MS} ms {}",
                    until(timeout_s)
                );
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(if refused {
                NetError::Refused {
                    peer: addr.to_string(),
                    secs: timeout_s,
                }
            } else {
                NetError::io(
                    format!("connecting to {addr} for {timeout_s} s (timeout={timeout_s})"),
                    e,
                )
            });
        }
        std::thread::sleep(Duration::from_millis(RETRY_MS));
    }
}
