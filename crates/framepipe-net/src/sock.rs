//! Socket set-up: buffer sizes (the only `unsafe`: `setsockopt`/`getsockopt`), connecting with
//! retries and accepting with a deadline. All of this runs at start or on reconnection, never per
//! frame.

use std::io;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
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

/// A deadline from a `timeout` property in seconds (0: none).
pub fn deadline(timeout_s: u64) -> Option<Instant> {
    (timeout_s > 0).then(|| Instant::now() + Duration::from_secs(timeout_s))
}

/// Connects to `addr`, retrying every 100 ms while the peer refuses (it may not be listening
/// yet), until `deadline`.
pub fn connect_retry(addr: &str, deadline: Option<Instant>, timeout_s: u64) -> Result<TcpStream> {
    loop {
        let resolved = addr
            .to_socket_addrs()
            .map_err(|e| NetError::io(format!("resolving '{addr}'"), e))?;
        let mut last = None;
        for sa in resolved {
            match TcpStream::connect_timeout(&sa, Duration::from_secs(5)) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(match last {
                Some(e) if e.kind() != io::ErrorKind::ConnectionRefused => {
                    NetError::io(format!("connecting to {addr}"), e)
                }
                _ => NetError::Timeout {
                    what: format!("{addr} to accept the connection"),
                    secs: timeout_s,
                },
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Binds a listener on `addr`.
pub fn listen(addr: &str) -> Result<TcpListener> {
    TcpListener::bind(addr).map_err(|e| NetError::io(format!("listening on {addr}"), e))
}

/// Accepts one connection on any of `listeners`, polling every 10 ms, until `deadline`.
/// Returns the index of the listener and the connection (in blocking mode).
pub fn accept_any(
    listeners: &[TcpListener],
    deadline: Option<Instant>,
    timeout_s: u64,
) -> Result<(usize, TcpStream, String)> {
    for l in listeners {
        l.set_nonblocking(true)
            .map_err(|e| NetError::io("setting the listener non-blocking", e))?;
    }
    loop {
        for (i, l) in listeners.iter().enumerate() {
            match l.accept() {
                Ok((s, peer)) => {
                    s.set_nonblocking(false)
                        .map_err(|e| NetError::io(format!("accepting {peer}"), e))?;
                    return Ok((i, s, peer.to_string()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let at = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
                    return Err(NetError::io(format!("accepting on {at}"), e));
                }
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let at: Vec<String> = listeners
                .iter()
                .filter_map(|l| l.local_addr().ok().map(|a| a.to_string()))
                .collect();
            return Err(NetError::Timeout {
                what: format!("a sender to connect to {}", at.join(",")),
                secs: timeout_s,
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
