//! `--osc [ADDR:]PORT`: Open Sound Control in over UDP, read by the `fp-osc` thread and posted
//! to the engine's command queue like stdin's lines (the mapping is
//! `framepipe_control::osc_in`; addresses in docs/CONTROL.md).
//!
//! With several shows in one run, every address is the one-show address prefixed with the
//! show's name: `/cam1/framepipe/invert/mix 0.5`, and `/*/framepipe/pause` for every show
//! (docs/SHOWS.md). A bundle's messages for one show are one batch, as for one show; a bundle
//! that spans shows is one batch per show (no frame is common to two shows).
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
use std::collections::HashMap;

use framepipe_control::osc_in::{self, Ranges};
use framepipe_control::{CommandSender, Full, LogLimit, Ticket};
use framepipe_oscquery::live::model_of;
use framepipe_oscquery::norm_ranges;
use framepipe_runtime::{GraphView, ShowView};
use rosc::OscPacket;

use crate::outlet::Outlet;

/// The receive buffer: every UDP datagram fits.
pub const MAX_DATAGRAM: usize = 64 * 1024;
/// How often the thread looks at its stop flag.
const POLL: Duration = Duration::from_millis(50);
/// How often it looks whether what a show holds is due, while it holds commands.
const HOLD_POLL: Duration = Duration::from_millis(1);

/// Messages counted by the `fp-osc` thread (read by the status line and the summary).
#[derive(Debug, Default)]
pub struct OscCounters {
    /// Messages posted.
    pub ok: AtomicU64,
    /// Datagrams or messages refused (malformed, unknown address, bad arguments).
    pub bad: AtomicU64,
    /// Messages dropped because the command queue was full.
    pub full: AtomicU64,
    /// Messages replaced by a later one of their kind before they were posted (a flood
    /// coalesced: `framepipe_control::Coalescer`); counted in `ok` too.
    pub coalesced: AtomicU64,
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
        let coalesced = self.coalesced.load(Ordering::Relaxed);
        if coalesced > 0 {
            s.push_str(&format!(", {coalesced} coalesced"));
        }
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
    /// How `--oscquery ADDR` serves this input: this process's name, the OSC port clients
    /// send to, and the mDNS advert unless `--no-mdns`.
    pub fn query_options(
        &self,
        addr: SocketAddr,
        no_mdns: bool,
    ) -> framepipe_oscquery::ServeOptions {
        framepipe_oscquery::ServeOptions {
            addr,
            info: framepipe_oscquery::HostInfo {
                name: format!("framepipe-{}", std::process::id()),
                osc: Some(self.local),
            },
            mdns: !no_mdns,
        }
    }

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

/// A show the OSC input posts to.
pub struct OscShow {
    /// Its name, the first part of its addresses (`/NAME/framepipe/...`); `None` when it is
    /// the only show (addresses unprefixed).
    pub name: Option<String>,
    /// Its command queue.
    pub tx: CommandSender,
    /// Its published graph: `/norm` scales with its ranges (rebuilt when a live edit changes
    /// it).
    pub view: ShowView,
}

/// Binds `addr` and starts the `fp-osc` thread posting to `shows` (one without a name, or
/// several, each named).
pub fn spawn(addr: SocketAddr, shows: Vec<OscShow>) -> Result<OscInput> {
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
            .spawn(move || listen(&socket, shows, &counters, &stop))
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

/// A show as the `fp-osc` thread keeps it: its queue, and its `/norm` table with the graph it
/// was made from.
struct Target {
    /// Its queue: values held back (a flood of one property reaches the engine once per
    /// 10 ms), full-queue drops said once a second at most.
    outlet: Outlet,
    view: ShowView,
    graph: Arc<GraphView>,
    ranges: Ranges,
}

impl Target {
    fn new(show: OscShow) -> Self {
        let graph = show.view.graph();
        let ranges = ranges_of(&graph);
        Target {
            outlet: Outlet::new(show.name.as_deref(), show.tx),
            view: show.view,
            graph,
            ranges,
        }
    }

    /// Posts the commands of `packet` (its addresses without the show's prefix).
    fn post(
        &mut self,
        packet: &OscPacket,
        counters: &OscCounters,
        warn: &mut Warn,
        from: SocketAddr,
    ) {
        // A bundle's commands are posted as one batch: applied at one frame, or all refused.
        let now = self.view.graph();
        if !Arc::ptr_eq(&now, &self.graph) {
            self.ranges = ranges_of(&now);
            self.graph = now;
        }
        let cmds = osc_in::packet_commands(packet, &self.ranges);
        for e in &cmds.refused {
            warn.bad(counters, from, &Shown(self.outlet.name(), e));
        }
        counters
            .ok
            .fetch_add(cmds.ignored as u64, Ordering::Relaxed);
        for (cmd, _) in cmds.commands {
            self.send(counters, Some(cmd), false);
        }
    }

    /// After every receive, whatever came (a packet for this show or another, a bad one, none):
    /// posts what is held once it is due, and waits for the next gap when a flood outruns the
    /// engine (the kernel then drops what the socket cannot hold).
    fn after(&mut self, counters: &OscCounters) {
        if let Some(n) = self
            .outlet
            .pace(&mut |who, full, n, r| posted(counters, who, full, n, r))
        {
            crate::say!(
                "\rframepipe: osc: {}{n} more commands dropped in the last second (command queue full)",
                self.outlet.who()
            );
        }
    }

    /// Offers `cmd` to the outlet (posted at once unless one of its property was posted
    /// within the gap), or, without one, posts what is held (after the gap, with `settle`).
    /// Counts what is posted, dropped and coalesced.
    fn send(
        &mut self,
        counters: &OscCounters,
        cmd: Option<framepipe_control::Command>,
        settle: bool,
    ) {
        let coalesced = self.outlet.coalesced();
        let mut post = |who: &str, full: &mut LogLimit, n: usize, r: Result<Ticket, Full>| {
            posted(counters, who, full, n, r)
        };
        match cmd {
            Some(cmd) => self.outlet.offer(cmd, &mut post),
            None if settle => self.outlet.settle(&mut post),
            None => self.outlet.flush(&mut post),
        }
        // A message replaced by a later one was taken (the later one stands for it).
        let replaced = self.outlet.coalesced() - coalesced;
        if replaced > 0 {
            counters.ok.fetch_add(replaced, Ordering::Relaxed);
            counters.coalesced.fetch_add(replaced, Ordering::Relaxed);
        }
    }

    /// Whether it holds commands (the thread then looks again within a millisecond).
    fn holds(&self) -> bool {
        self.outlet.held() > 0
    }
}

/// How the OSC input reports a post of `n` messages: counted as `ok` or `full` (dropped); a
/// drop said once a second at most (`full`), naming the show when there are several (`who`).
fn posted(
    counters: &OscCounters,
    who: &str,
    full: &mut LogLimit,
    n: usize,
    r: Result<Ticket, Full>,
) {
    match r {
        Ok(_) => {
            counters.ok.fetch_add(n as u64, Ordering::Relaxed);
        }
        Err(Full(cmd)) => {
            counters.full.fetch_add(n as u64, Ordering::Relaxed);
            if full.allow(Instant::now()) {
                crate::say!(
                    "\rframepipe: osc: {who}command queue full; dropped: {} (and any more until it drains)",
                    crate::commands::shown(&cmd)
                );
            }
        }
    }
}

/// An error about a show's message, naming the show when there are several.
struct Shown<'a, E>(Option<&'a str>, E);

impl<E: std::fmt::Display> std::fmt::Display for Shown<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(name) => write!(f, "show {name}: {}", self.1),
            None => self.1.fmt(f),
        }
    }
}

/// What the `fp-osc` thread keeps between receives: the shows, and how packets are routed to
/// them.
struct Listener {
    targets: Vec<Target>,
    /// Show names to their index (several shows).
    index: HashMap<String, usize>,
    names: Vec<String>,
    /// One show without a name: addresses as they are.
    single: bool,
    warn: Warn,
}

impl Listener {
    fn new(shows: Vec<OscShow>) -> Self {
        let targets: Vec<Target> = shows.into_iter().map(Target::new).collect();
        let index = targets
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.outlet.name().map(|n| (n.to_string(), i)))
            .collect();
        let names = targets
            .iter()
            .map(|t| t.outlet.name().unwrap_or_default().to_string())
            .collect();
        let single = targets.len() == 1 && targets[0].outlet.name().is_none();
        Listener {
            targets,
            index,
            names,
            single,
            warn: Warn {
                last: None,
                quiet_since: 0,
            },
        }
    }

    /// Whether a show holds commands (the socket is then read with a short timeout).
    fn holds(&self) -> bool {
        self.targets.iter().any(Target::holds)
    }

    /// Takes what one `recv_from` into `buf` gave; false when no more can come. Whatever it
    /// was, every show then posts what it holds that is due: a flood for another show, or of
    /// bad packets, never keeps a held value back longer than its gap and a packet.
    fn received(
        &mut self,
        got: std::io::Result<(usize, SocketAddr)>,
        buf: &[u8],
        counters: &OscCounters,
    ) -> bool {
        let more = match got {
            Ok((len, from)) => {
                self.datagram(&buf[..len], from, counters);
                true
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                true
            }
            Err(e) => {
                crate::say!("\rframepipe: osc: receive failed: {e}; no more OSC input");
                false
            }
        };
        for t in self.targets.iter_mut() {
            t.after(counters);
        }
        more
    }

    /// Posts the commands of one datagram from `from` to the shows it addresses.
    fn datagram(&mut self, bytes: &[u8], from: SocketAddr, counters: &OscCounters) {
        let packet = match osc_in::decode(bytes) {
            Ok(p) => p,
            Err(e) => {
                self.warn.bad(counters, from, &e);
                return;
            }
        };
        if self.single {
            self.targets[0].post(&packet, counters, &mut self.warn, from);
            return;
        }
        let warn = &mut self.warn;
        let parts = osc_in::split_by_show(&packet, &self.index, &self.names, |why| {
            warn.bad(counters, from, &why)
        });
        for (i, p) in parts {
            self.targets[i].post(&p, counters, &mut self.warn, from);
        }
    }

    /// The run is over: what is still held is posted (and refused as unread).
    fn finish(&mut self, counters: &OscCounters) {
        for t in self.targets.iter_mut() {
            t.send(counters, None, false);
        }
    }
}

fn listen(socket: &UdpSocket, shows: Vec<OscShow>, counters: &OscCounters, stop: &AtomicBool) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut listener = Listener::new(shows);
    // While a show holds commands the socket is read with a short timeout, so that they are
    // posted as soon as they are due (`Target::after`) when no packet comes.
    let mut short = false;
    while !stop.load(Ordering::Relaxed) {
        let holds = listener.holds();
        if holds != short {
            let wait = if holds { HOLD_POLL } else { POLL };
            if socket.set_read_timeout(Some(wait)).is_ok() {
                short = holds;
            }
        }
        let got = socket.recv_from(&mut buf);
        if !listener.received(got, &buf, counters) {
            break;
        }
    }
    listener.finish(counters);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rosc::{OscBundle, OscMessage, OscTime};

    /// A real show's published view, for the shows of a test (the `Prepared` is kept while it
    /// is used; the show never runs).
    fn show_view() -> (framepipe_runtime::Prepared, ShowView) {
        let desc = framepipe_project::parse_pipeline(
            "testsrc width=16 height=16 ! invert name=fx ! nullsink",
        )
        .unwrap();
        let registry = crate::load::registry_for(&desc, None);
        let graph = crate::build::build(&desc, &registry, crate::build::Purpose::Run).unwrap();
        let prepared = graph
            .prepare(framepipe_runtime::Options {
                threads: 1,
                ..Default::default()
            })
            .unwrap();
        let view = prepared.view();
        (prepared, view)
    }

    fn texts(rx: &mut framepipe_control::CommandReader) -> Vec<String> {
        std::iter::from_fn(|| rx.pop())
            .map(|p| p.command.to_string())
            .collect()
    }

    /// Issue #21: a value held back (the second `set` of a property within its gap) lands once
    /// its gap is over while packets keep coming less than a millisecond apart, for another
    /// show or not OSC at all: what is due is posted after every receive, not only when the
    /// socket is quiet.
    #[test]
    fn a_held_value_lands_while_packets_for_another_show_or_garbage_keep_coming() {
        let (_prepared, view) = show_view();
        let (tx_a, mut rx_a) = framepipe_control::command_queue(1024);
        let (tx_b, mut rx_b) = framepipe_control::command_queue(1024);
        let show = |name: &str, tx| OscShow {
            name: Some(name.into()),
            tx,
            view: view.clone(),
        };
        let mut listener = Listener::new(vec![show("a", tx_a), show("b", tx_b)]);
        let counters = OscCounters::default();
        let from: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut receive = |listener: &mut Listener, bytes: &[u8]| {
            buf[..bytes.len()].copy_from_slice(bytes);
            assert!(listener.received(Ok((bytes.len(), from)), &buf, &counters));
        };
        let encode = |addr: &str, v: i32| rosc::encoder::encode(&message(addr, v)).unwrap();
        let garbage = b"no OSC packet".to_vec();
        assert!(osc_in::decode(&garbage).is_err());
        let others = [
            ("to show b", encode("/b/framepipe/fx/amount", 7)),
            ("garbage", garbage),
        ];
        for (prop, (what, other)) in ["p0", "p1"].into_iter().zip(others) {
            let addr = format!("/a/framepipe/fx/{prop}");
            receive(&mut listener, &encode(&addr, 1));
            let held = Instant::now();
            receive(&mut listener, &encode(&addr, 2));
            assert_eq!(texts(&mut rx_a), [format!("set fx.{prop} 1")], "{what}");
            let mut landed = None;
            while held.elapsed() < 20 * framepipe_control::flood::MIN_GAP {
                receive(&mut listener, &other);
                let got = texts(&mut rx_a);
                if !got.is_empty() {
                    assert_eq!(got, [format!("set fx.{prop} 2")], "{what}");
                    landed = Some(held.elapsed());
                    break;
                }
                texts(&mut rx_b);
                std::thread::sleep(Duration::from_micros(100));
            }
            let landed = landed.unwrap_or_else(|| {
                panic!("{what}: the held value did not land while other packets came")
            });
            assert!(
                landed >= framepipe_control::flood::MIN_GAP,
                "{what}: {landed:?}"
            );
        }
        listener.finish(&counters);
    }

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

    fn message(addr: &str, v: i32) -> OscPacket {
        OscPacket::Message(OscMessage {
            addr: addr.into(),
            args: vec![rosc::OscType::Int(v)],
        })
    }

    fn addrs(p: &OscPacket) -> Vec<(String, Vec<rosc::OscType>)> {
        osc_in::messages(p)
            .into_iter()
            .map(|m| (m.addr.clone(), m.args.clone()))
            .collect()
    }

    /// Issue #11: a packet for several shows is split by the first part of each address; a
    /// bundle stays a bundle per show (one batch each), `/*/` goes to every show, an unknown
    /// or missing show is refused naming the address.
    #[test]
    fn packets_are_split_by_show() {
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let index: HashMap<String, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        let bundle = OscPacket::Bundle(OscBundle {
            timetag: OscTime {
                seconds: 0,
                fractional: 1,
            },
            content: vec![
                message("/b/framepipe/x/y", 1),
                message("/a/framepipe/x/y", 2),
                message("/b/framepipe/pause", 3),
                message("/nope/framepipe/stop", 4),
                message("/framepipe", 5),
                message("/*/framepipe/tap", 6),
            ],
        });
        let mut refused = Vec::new();
        let parts = osc_in::split_by_show(&bundle, &index, &names, |why| refused.push(why));
        let shape: Vec<(usize, bool, Vec<String>)> = parts
            .iter()
            .map(|(i, p)| {
                (
                    *i,
                    matches!(p, OscPacket::Bundle(_)),
                    addrs(p).into_iter().map(|(a, _)| a).collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (
                    1,
                    true,
                    vec![
                        "/framepipe/x/y".to_string(),
                        "/framepipe/pause".into(),
                        "/framepipe/tap".into()
                    ]
                ),
                (
                    0,
                    true,
                    vec!["/framepipe/x/y".into(), "/framepipe/tap".into()]
                ),
                (2, true, vec!["/framepipe/tap".into()]),
            ]
        );
        assert_eq!(addrs(&parts[1].1)[0].1, vec![rosc::OscType::Int(2)]);
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(refused[0]
            .starts_with("address '/nope/framepipe/stop': no show named 'nope' (shows: a, b, c;"));
        assert_eq!(
            refused[1],
            "address '/framepipe': 3 shows run; address one as /NAME/framepipe"
        );
        // A lone message stays a lone message (not a batch).
        let parts = osc_in::split_by_show(&message("/c/framepipe/stop", 1), &index, &names, |_| {
            panic!("refused")
        });
        assert!(matches!(&parts[..], [(2, OscPacket::Message(m))] if m.addr == "/framepipe/stop"));
    }
}
