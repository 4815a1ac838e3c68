//! What the web surface counts: clients, commands, and every kind of bad input it refused or
//! dropped. Atomics, read by the CLI's status line, `--stats` and the page itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::bounded::ConnCounters;

/// Counters of the web surface. Every field only grows, except `clients` and `http_open`.
#[derive(Debug, Default)]
pub struct WebCounters {
    /// WebSocket clients connected now.
    pub(crate) clients: AtomicU64,
    /// WebSocket connections accepted so far.
    pub(crate) connections: AtomicU64,
    /// Commands posted to the engine.
    pub(crate) commands: AtomicU64,
    /// Messages that were not a command (not JSON, not text, unknown command, bad argument).
    pub(crate) bad: AtomicU64,
    /// Messages over the size cap (the connection is closed).
    pub(crate) oversized: AtomicU64,
    /// Messages dropped by a client's rate limit.
    pub(crate) rate_limited: AtomicU64,
    /// Commands refused because the engine's queue was full.
    pub(crate) queue_full: AtomicU64,
    /// Messages to a client dropped because its send queue was full (a slow browser).
    pub(crate) send_dropped: AtomicU64,
    /// Clients closed because one send took too long (a vanished browser).
    pub(crate) send_timeouts: AtomicU64,
    /// HTTP or WebSocket requests refused: missing or wrong token.
    pub(crate) refused_token: AtomicU64,
    /// Requests refused: a WebSocket `Origin` other than the page's host, or a `Host` that is
    /// not a loopback name on a loopback address (DNS rebinding).
    pub(crate) refused_origin: AtomicU64,
    /// Preview images encoded.
    pub(crate) previews: AtomicU64,
    /// Commands a page may not send (an edit, `save`, ...: docs/WEB.md), refused.
    pub(crate) forbidden: AtomicU64,
    /// WebSocket clients refused because [`MAX_CLIENTS`](crate::MAX_CLIENTS) were connected.
    pub(crate) refused_clients: AtomicU64,
    /// WebSocket clients dropped because they answered no ping (they never read).
    pub(crate) idle_dropped: AtomicU64,
    /// The HTTP connections' counts (accepted, open, refused at the cap, timed out).
    pub(crate) conn: Arc<ConnCounters>,
}

/// A copy of [`WebCounters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WebCountsSnapshot {
    /// See [`WebCounters`].
    pub clients: u64,
    /// See [`WebCounters`].
    pub connections: u64,
    /// See [`WebCounters`].
    pub commands: u64,
    /// See [`WebCounters`].
    pub bad: u64,
    /// See [`WebCounters`].
    pub oversized: u64,
    /// See [`WebCounters`].
    pub rate_limited: u64,
    /// See [`WebCounters`].
    pub queue_full: u64,
    /// See [`WebCounters`].
    pub send_dropped: u64,
    /// See [`WebCounters`].
    pub send_timeouts: u64,
    /// See [`WebCounters`].
    pub refused_token: u64,
    /// See [`WebCounters`].
    pub refused_origin: u64,
    /// See [`WebCounters`].
    pub previews: u64,
    /// See [`WebCounters`].
    pub forbidden: u64,
    /// See [`WebCounters`].
    pub refused_clients: u64,
    /// See [`WebCounters`].
    pub idle_dropped: u64,
    /// HTTP connections accepted.
    pub http_accepted: u64,
    /// HTTP connections open now.
    pub http_open: u64,
    /// HTTP connections answered 503: too many open.
    pub http_refused: u64,
    /// HTTP connections closed: no request within the header timeout.
    pub http_timed_out: u64,
}

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl WebCounters {
    /// All figures now.
    pub fn snapshot(&self) -> WebCountsSnapshot {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WebCountsSnapshot {
            clients: l(&self.clients),
            connections: l(&self.connections),
            commands: l(&self.commands),
            bad: l(&self.bad),
            oversized: l(&self.oversized),
            rate_limited: l(&self.rate_limited),
            queue_full: l(&self.queue_full),
            send_dropped: l(&self.send_dropped),
            send_timeouts: l(&self.send_timeouts),
            refused_token: l(&self.refused_token),
            refused_origin: l(&self.refused_origin),
            previews: l(&self.previews),
            forbidden: l(&self.forbidden),
            refused_clients: l(&self.refused_clients),
            idle_dropped: l(&self.idle_dropped),
            http_accepted: l(&self.conn.accepted),
            http_open: l(&self.conn.open),
            http_refused: l(&self.conn.refused),
            http_timed_out: l(&self.conn.timed_out),
        }
    }

    /// One short phrase for a status line: `web 2 clients 14 cmds`, plus whatever bad input was
    /// counted (`3 bad 1 oversized 120 rate-limited ...`).
    pub fn summary(&self) -> String {
        let s = self.snapshot();
        let mut out = format!("web {} clients {} cmds", s.clients, s.commands);
        for (n, what) in [
            (s.bad, "bad"),
            (s.oversized, "oversized"),
            (s.rate_limited, "rate-limited"),
            (s.queue_full, "queue-full"),
            (s.send_dropped, "send-dropped"),
            (s.send_timeouts, "send-timeouts"),
            (s.refused_token, "refused-token"),
            (s.refused_origin, "refused-origin"),
            (s.forbidden, "forbidden"),
            (s.refused_clients, "refused-clients"),
            (s.idle_dropped, "idle-dropped"),
            (s.http_refused, "http-refused"),
            (s.http_timed_out, "http-timed-out"),
        ] {
            if n > 0 {
                out.push_str(&format!(" {n} {what}"));
            }
        }
        out
    }
}
