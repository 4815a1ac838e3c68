//! Serving HTTP with bounded connections (issue #21): the web page's server and OSCQuery's
//! both serve through [`serve`], so that silent, slow or idle clients cannot lock anyone out.
//!
//! * At most [`ConnLimits::max_open`] connections are served at once. One more is accepted and
//!   answered `503 Service Unavailable` with the reason, then closed (not left in the kernel's
//!   backlog, where it would wait without a word): counted `http_refused`.
//! * A connection must send a whole request head within [`ConnLimits::header_timeout`] of
//!   being accepted or of its last response (hyper's `header_read_timeout`, which covers an
//!   idle keep-alive connection too); else it is closed: counted `http_timed_out`. So silent
//!   connections hold a place for a few seconds at most, and a new client after them is served.
//! * A WebSocket leaves the HTTP count when it is upgraded; the routes cap WebSocket clients
//!   themselves, and [`Liveness`] drops a client that answers no ping (one that never reads).
//!
//! Hand-written over hyper's HTTP/1 connection (rather than `axum::serve`) because
//! `axum::serve` sets no timer, so no header timeout, and waits in `accept` when a limit is
//! reached; hyper is the server axum itself runs on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// What [`serve`] bounds.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections served at once (HTTP requests, WebSocket handshakes not yet upgraded).
    pub max_open: u64,
    /// The longest a connection may take to send a request head, from its start or its last
    /// response.
    pub header_timeout: Duration,
    /// What the 503 beyond `max_open` names (`the web page`, `OSCQuery`).
    pub what: &'static str,
}

/// The counts of [`serve`] (atomics).
#[derive(Debug, Default)]
pub struct ConnCounters {
    /// Connections accepted and served.
    pub accepted: AtomicU64,
    /// Connections open now (served, not yet closed or upgraded).
    pub open: AtomicU64,
    /// Connections answered 503 because `max_open` were open.
    pub refused: AtomicU64,
    /// Connections closed because no request head came within the timeout.
    pub timed_out: AtomicU64,
}

/// Refusals being written at once at most; beyond, a connection is closed without a word.
const REFUSING: u64 = 64;
/// How long a refusal waits for the client to read it.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` until the future is dropped, within `limits`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    counters: Arc<ConnCounters>,
) {
    let refusing = Arc::new(AtomicU64::new(0));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of descriptors and the like: wait a little, as axum's own loop does.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        if counters.open.fetch_add(1, Ordering::Relaxed) >= limits.max_open {
            counters.open.fetch_sub(1, Ordering::Relaxed);
            counters.refused.fetch_add(1, Ordering::Relaxed);
            if refusing.fetch_add(1, Ordering::Relaxed) < REFUSING {
                let refusing = Arc::clone(&refusing);
                tokio::spawn(async move {
                    refuse(stream, limits).await;
                    refusing.fetch_sub(1, Ordering::Relaxed);
                });
            } else {
                refusing.fetch_sub(1, Ordering::Relaxed);
            }
            continue;
        }
        counters.accepted.fetch_add(1, Ordering::Relaxed);
        let service = TowerToHyperService::new(app.clone());
        let counters = Arc::clone(&counters);
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            if let Err(e) = conn.await {
                if e.is_timeout() {
                    counters.timed_out.fetch_add(1, Ordering::Relaxed);
                }
            }
            counters.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Answers 503 with the reason, and closes once the client read it (or after a second).
async fn refuse(mut stream: TcpStream, limits: ConnLimits) {
    let body = format!(
        "too many connections to {} ({} open): try again in a few seconds\n",
        limits.what, limits.max_open
    );
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nretry-after: {}\r\nconnection: close\r\n\r\n",
        body.len(),
        limits.header_timeout.as_secs().max(1)
    );
    let _ = tokio::time::timeout(REFUSAL_LINGER, async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await?;
        // Read what the client sends until it closes, so that closing does not reset the
        // connection before the client has read the answer.
        let mut sink = [0u8; 1024];
        loop {
            let n = tokio::io::AsyncReadExt::read(&mut stream, &mut sink).await?;
            if n == 0 {
                return Ok::<(), std::io::Error>(());
            }
        }
    })
    .await;
}

/// A WebSocket client's liveness: pinged every [`Liveness::PING_EVERY`]; one that sent
/// nothing (no pong, no message) for [`Liveness::IDLE_TIMEOUT`] is dropped, so clients that
/// never read cannot hold a place for good. Clients that read answer pings by themselves
/// (browsers, tungstenite, every WebSocket library).
#[derive(Debug)]
pub struct Liveness {
    heard: Instant,
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness {
            heard: Instant::now(),
        }
    }
}

impl Liveness {
    /// How often a client is pinged.
    pub const PING_EVERY: Duration = Duration::from_secs(3);
    /// How long a client may stay silent (no pong either).
    pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

    /// The client sent something (a message, a pong).
    pub fn heard(&mut self) {
        self.heard = Instant::now();
    }

    /// Whether the client has been silent too long.
    pub fn idle(&self) -> bool {
        self.heard.elapsed() >= Self::IDLE_TIMEOUT
    }

    /// The ticker for pings (first tick after [`Liveness::PING_EVERY`]).
    pub fn ticker() -> tokio::time::Interval {
        let mut t = tokio::time::interval_at(
            tokio::time::Instant::now() + Self::PING_EVERY,
            Self::PING_EVERY,
        );
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    }
}
