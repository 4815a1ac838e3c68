//! `--osc [ADDR:]PORT`: Open Sound Control in over UDP, read by the `fp-osc` thread and posted
//! to the engine's command queue like stdin's lines (the mapping is
//! `framepipe_control::osc_in`; addresses in docs/CONTROL.md).
//!
//! Datagrams are untrusted: each is read into one 64 KiB buffer allocated at start (the UDP
//! maximum is 65,507 bytes, so nothing is cut), decoded with nesting bounded, and every message
//! is counted as `ok` (posted), `bad` (malformed packet, unknown address, wrong arguments) or
//! `full` (the command queue was full: dropped, never waited for). Bad input is reported at
//! most once a second. The thread polls a stop flag every [`POLL`] and ends with the run.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use framepipe_control::osc_in::{self, Ranges};
use framepipe_control::CommandSender;
use framepipe_oscquery::live::model_of;
use framepipe_oscquery::norm_ranges;
use framepipe_runtime::{GraphView, ShowView};

/// The receive buffer: every UDP datagram fits.
pub const MAX_DATAGRAM: usize = 64 * 1024;
/// How often the thread looks at its stop flag.
const POLL: Duration = Duration::from_millis(50);

/// Messages counted by the `fp-osc` thread (read by the status line and the summary).
#[derive(Debug, Default)]
pub struct OscCounters {
    /// Messages posted.
    pub ok: AtomicU64,
    /// Datagrams or messages refused (malformed, unknown address, bad arguments).
    pub bad: AtomicU64,
    /// Messages dropped because the command queue was full.
    pub full: AtomicU64,
}

impl OscCounters {
    /// `osc: N ok, M bad` (and the drops, if any).
    pub fn summary(&self) -> String {
        let full = self.full.load(Ordering::Relaxed);
        let mut s = format!(
            "osc: {} ok, {} bad",
            self.ok.load(Ordering::Relaxed),
            self.bad.load(Ordering::Relaxed)
        );
        if full > 0 {
            s.push_str(&format!(", {full} dropped (command queue full)"));
        }
        s
    }
}

/// The running `fp-osc` thread.
pub struct OscInput {
    /// Where it listens (the port chosen when 0 was asked for).
    pub local: SocketAddr,
    /// Its counts.
    pub counters: Arc<OscCounters>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl OscInput {
    /// Stops the thread (within [`POLL`]) and waits for it; its sender is dropped.
    pub fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

/// `PORT` → 127.0.0.1:PORT; `ADDR:PORT` as given (`[::1]:7000` for IPv6). `flag` names the
/// option in the error.
pub fn parse_addr(flag: &str, text: &str) -> Result<SocketAddr> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Some(port) = text.strip_prefix("localhost:") {
        if let Ok(port) = port.parse::<u16>() {
            return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
        }
    }
    match text.parse::<SocketAddr>() {
        Ok(a) => Ok(a),
        Err(_) => bail!(
            "bad {flag} '{text}': expected PORT (on 127.0.0.1) or ADDR:PORT, e.g. 7000 or 0.0.0.0:7000"
        ),
    }
}

/// Binds `addr` and starts the `fp-osc` thread posting to `tx`; `/norm` scales with the ranges
/// of the graph `view` shows (rebuilt when a live edit changes it).
pub fn spawn(addr: SocketAddr, tx: CommandSender, view: ShowView) -> Result<OscInput> {
    let socket =
        UdpSocket::bind(addr).with_context(|| format!("--osc: cannot listen on UDP {addr}"))?;
    socket
        .set_read_timeout(Some(POLL))
        .context("--osc: setting the socket's read timeout")?;
    let local = socket.local_addr().unwrap_or(addr);
    let counters = Arc::new(OscCounters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (counters, stop) = (Arc::clone(&counters), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("fp-osc".into())
            .spawn(move || listen(&socket, &tx, &view, &counters, &stop))
            .context("--osc: starting the fp-osc thread")?
    };
    Ok(OscInput {
        local,
        counters,
        stop,
        thread,
    })
}

/// Bad-input warnings, at most one line a second; the rest counted into the next line.
struct Warn {
    last: Option<Instant>,
    quiet_since: u64,
}

impl Warn {
    fn bad(&mut self, counters: &OscCounters, from: SocketAddr, why: &dyn std::fmt::Display) {
        counters.bad.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            self.quiet_since += 1;
            return;
        }
        let more = match self.quiet_since {
            0 => String::new(),
            n => format!(" ({n} more bad messages not shown)"),
        };
        crate::say!("\rframepipe: osc: from {from}: {why}; ignored{more}");
        self.last = Some(now);
        self.quiet_since = 0;
    }
}

/// The `/norm` table of the graph `view` shows now.
fn ranges_of(graph: &GraphView) -> Ranges {
    norm_ranges(&model_of(graph))
}

fn listen(
    socket: &UdpSocket,
    tx: &CommandSender,
    view: &ShowView,
    counters: &OscCounters,
    stop: &AtomicBool,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut graph = view.graph();
    let mut ranges = ranges_of(&graph);
    let mut warn = Warn {
        last: None,
        quiet_since: 0,
    };
    // The first refusal of a burst of full-queue drops is said, the rest counted.
    let mut full_said = false;
    while !stop.load(Ordering::Relaxed) {
        let (len, from) = match socket.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                crate::say!("\rframepipe: osc: receive failed: {e}; no more OSC input");
                return;
            }
        };
        let packet = match osc_in::decode(&buf[..len]) {
            Ok(p) => p,
            Err(e) => {
                warn.bad(counters, from, &e);
                continue;
            }
        };
        // A bundle's commands are posted as one batch: applied at one frame, or all refused.
        let now = view.graph();
        if !Arc::ptr_eq(&now, &graph) {
            ranges = ranges_of(&now);
            graph = now;
        }
        let cmds = osc_in::packet_commands(&packet, &ranges);
        for e in &cmds.refused {
            warn.bad(counters, from, e);
        }
        counters
            .ok
            .fetch_add(cmds.ignored as u64, Ordering::Relaxed);
        for (cmd, n) in cmds.commands {
            match tx.post(cmd) {
                Ok(_) => {
                    counters.ok.fetch_add(n as u64, Ordering::Relaxed);
                    full_said = false;
                }
                Err(full) => {
                    counters.full.fetch_add(n as u64, Ordering::Relaxed);
                    if !full_said {
                        crate::say!(
                            "\rframepipe: osc: command queue full; dropped: {} (and any more until it drains)",
                            full.0
                        );
                        full_said = true;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_loopback() {
        assert_eq!(
            parse_addr("--osc", "7000").unwrap().to_string(),
            "127.0.0.1:7000"
        );
        assert_eq!(
            parse_addr("--osc", "localhost:7001").unwrap().to_string(),
            "127.0.0.1:7001"
        );
        assert_eq!(
            parse_addr("--osc", "0.0.0.0:7002").unwrap().to_string(),
            "0.0.0.0:7002"
        );
        assert_eq!(
            parse_addr("--osc", "[::1]:7003").unwrap().to_string(),
            "[::1]:7003"
        );
        for bad in ["", "70000", "host:7000", "1.2.3.4", ":7000"] {
            let e = parse_addr("--osc", bad).unwrap_err().to_string();
            assert!(e.contains(&format!("'{bad}'")), "{bad}: {e}");
        }
    }
}
