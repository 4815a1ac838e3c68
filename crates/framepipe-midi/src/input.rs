//! The MIDI threads.
//!
//! * `fp-midi-in` (a raw device or FIFO, `--midi /path`): blocking reads of up to 1 KiB into
//!   one buffer, parsed ([`Parser`]), each message sent to `fp-midi` over a bounded channel
//!   ([`CHANNEL`]; while it is full the reader waits, so that a flood is read at `fp-midi`'s
//!   pace and the message after it is never the one lost). At the end of a FIFO (its
//!   writer closed) or a read error (a device unplugged) it says so, counts a disconnect and
//!   opens the path again (a FIFO's open waits for a writer; a missing device is tried every
//!   500 ms). It may be blocked in `read`/`open` when the run ends: it is left to the process's
//!   end (it holds nothing the run needs).
//! * An ALSA sequencer port (`--midi NAME`): midir's own input thread parses each event's
//!   bytes and sends them the same way; `fp-midi-alsa` connects, checks every second that the
//!   port is still there, and connects again when it comes back.
//! * `fp-midi`: runs the [`Surface`]: handles the messages as they come (draining the channel
//!   in batches), surface commands ([`MidiHandle::request`]), the learn window and the held
//!   values' deadlines, and posts the commands with
//!   [`CommandSender::post`](framepipe_control::CommandSender::post). It wakes at least every
//!   [`POLL`] to see whether the run is over.
//!
//! Several shows in one process (issue #11, [`spawn_shows`]): one input, one `fp-midi`, one
//! [`Surface`] per show (its own mappings, learn window, values and command queue); every
//! message is offered to every show's surface, each posting to its own show.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use framepipe_control::{monotonic_ns, Command, CommandSender, LogLimit};

use crate::parser::{Message, ParseCounts, Parser};
use crate::surface::Surface;
use crate::{Error, Result};

/// Messages that may wait between a reader and `fp-midi`.
pub const CHANNEL: usize = 4096;
/// How often `fp-midi` looks whether the run is over, at least.
pub const POLL: Duration = Duration::from_millis(50);
/// Messages handled in one batch before the held values are looked at.
const BATCH: usize = 1024;
/// The ALSA sequencer's device.
#[cfg(feature = "alsa")]
const SEQ: &str = "/dev/snd/seq";

/// Where MIDI comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Port {
    /// An ALSA sequencer input port whose name contains this text (case-insensitive).
    Alsa(String),
    /// A raw MIDI device or a FIFO, read as a byte stream.
    Raw(PathBuf),
}

impl Port {
    /// A path (a raw device, FIFO or file): text starting with `/`, `./` or `../`, or naming
    /// something that exists; anything else an ALSA port name to match.
    pub fn parse(text: &str) -> Port {
        let path_like = text.starts_with('/')
            || text.starts_with("./")
            || text.starts_with("../")
            || Path::new(text).exists();
        if path_like {
            Port::Raw(PathBuf::from(text))
        } else {
            Port::Alsa(text.to_string())
        }
    }
}

/// The answer to a surface command: `Ok(text)` or `Err(why refused)`.
pub type Reply = Box<dyn FnOnce(std::result::Result<String, String>) + Send>;

/// Where the MIDI threads tell the user things (one line each, without a prefix).
pub type Notify = Arc<dyn Fn(&str) + Send + Sync>;

/// Counts of the MIDI surface (read by the status line and the summary).
#[derive(Debug, Default)]
pub struct Counters {
    /// Channel messages (CC, notes) handled.
    pub messages: AtomicU64,
    /// Commands posted.
    pub posted: AtomicU64,
    /// Values replaced by a newer one before they were posted (a flood coalesced).
    pub coalesced: AtomicU64,
    /// Stray data bytes, undefined status bytes and cut-off messages.
    pub bad: AtomicU64,
    /// Messages dropped (the channel to `fp-midi` full) and commands dropped (the command
    /// queue full).
    pub dropped: AtomicU64,
    /// Times the input went away (a FIFO's writer closed, a device unplugged).
    pub disconnects: AtomicU64,
}

impl Counters {
    /// `midi: N messages, M posted, K coalesced, B bad, D dropped` (and disconnects, if any).
    pub fn summary(&self) -> String {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut s = format!(
            "midi: {} messages, {} posted, {} coalesced, {} bad, {} dropped",
            get(&self.messages),
            get(&self.posted),
            get(&self.coalesced),
            get(&self.bad),
            get(&self.dropped)
        );
        let d = get(&self.disconnects);
        if d > 0 {
            s.push_str(&format!(", {d} disconnects"));
        }
        s
    }
}

enum Event {
    Msg(Message, i64, Instant),
    /// A surface command for show N's surface.
    Request(usize, Command, Reply),
}

/// A handle to send surface commands (`learn`, `unlearn`, `midi`, `save`) to `fp-midi`;
/// cloneable, for every surface that takes commands. It addresses one show's surface (the
/// first, or the one [`MidiHandle::for_show`] names).
#[derive(Clone)]
pub struct MidiHandle {
    events: SyncSender<Event>,
    show: usize,
}

impl std::fmt::Debug for MidiHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MidiHandle")
    }
}

impl MidiHandle {
    /// Hands `cmd` to the MIDI surface; `reply` is called once, on `fp-midi`, with the answer
    /// (for `learn`: that it is listening; what it learned is told when a control moves).
    /// Never blocks: when the surface is flooded, or gone, the command is handed back.
    pub fn request(&self, cmd: Command, reply: Reply) -> std::result::Result<(), (Command, Reply)> {
        match self.events.try_send(Event::Request(self.show, cmd, reply)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(Event::Request(_, c, r)))
            | Err(TrySendError::Disconnected(Event::Request(_, c, r))) => Err((c, r)),
            Err(_) => unreachable!("a request is handed back as sent"),
        }
    }

    /// The same input's handle for show `show`'s surface (its place in [`spawn_shows`]'s
    /// list).
    pub fn for_show(&self, show: usize) -> MidiHandle {
        MidiHandle {
            events: self.events.clone(),
            show,
        }
    }
}

/// The running MIDI surface.
pub struct MidiInput {
    /// Its counts.
    pub counters: Arc<Counters>,
    /// What it reads: the ALSA port's full name, or the path.
    pub name: String,
    handle: MidiHandle,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
    alsa: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MidiInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MidiInput")
            .field("name", &self.name)
            .finish()
    }
}

impl MidiInput {
    /// A handle for surface commands.
    pub fn handle(&self) -> MidiHandle {
        self.handle.clone()
    }

    /// Stops `fp-midi` (within [`POLL`]) and the ALSA connection, and waits for them; the
    /// command sender is dropped. A raw reader blocked in `read` is left to the process's end.
    pub fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        if let Some(t) = self.alsa {
            let _ = t.join();
        }
    }
}

/// The ALSA sequencer's input ports, by name.
#[cfg(feature = "alsa")]
pub fn list_ports() -> Result<Vec<String>> {
    if !Path::new(SEQ).exists() {
        return Err(Error::NoSequencer);
    }
    let input = midir::MidiInput::new("framepipe").map_err(|e| Error::Alsa(e.to_string()))?;
    Ok(input
        .ports()
        .iter()
        .filter_map(|p| input.port_name(p).ok())
        .collect())
}

/// The ALSA sequencer's input ports: none in a build without the `alsa` feature.
#[cfg(not(feature = "alsa"))]
pub fn list_ports() -> Result<Vec<String>> {
    Err(Error::Alsa(
        "this build has no ALSA support (feature 'alsa')".into(),
    ))
}

/// Opens `port` and starts the MIDI threads: messages become commands posted to `tx`.
pub fn spawn(
    port: &Port,
    surface: Surface,
    tx: CommandSender,
    notify: Notify,
) -> Result<MidiInput> {
    spawn_shows(
        port,
        vec![ShowSurface {
            name: None,
            surface,
            tx,
        }],
        notify,
    )
}

/// One show's surface for [`spawn_shows`].
pub struct ShowSurface {
    /// The show's name, said in its notices (`show NAME: learned ...`); `None` for the only
    /// show.
    pub name: Option<String>,
    /// Its mappings and state.
    pub surface: Surface,
    /// Its command queue.
    pub tx: CommandSender,
}

/// Opens `port` once and starts the MIDI threads for several shows: every message is offered
/// to every show's surface; each posts to its own queue.
pub fn spawn_shows(port: &Port, shows: Vec<ShowSurface>, notify: Notify) -> Result<MidiInput> {
    let (events, rx) = mpsc::sync_channel::<Event>(CHANNEL);
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (name, alsa) = match port {
        Port::Raw(path) => {
            let file = open_raw(path)?;
            let (events, counters, notify, stop) = (
                events.clone(),
                Arc::clone(&counters),
                Arc::clone(&notify),
                Arc::clone(&stop),
            );
            let path2 = path.clone();
            std::thread::Builder::new()
                .name("fp-midi-in".into())
                .spawn(move || read_raw(&path2, file, &events, &counters, &*notify, &stop))
                .map_err(|source| Error::Thread {
                    name: "fp-midi-in",
                    source,
                })?;
            (path.display().to_string(), None)
        }
        #[cfg(feature = "alsa")]
        Port::Alsa(wanted) => {
            let (name, thread) = alsa::start(wanted, &events, &counters, &notify, &stop)?;
            (name, Some(thread))
        }
        #[cfg(not(feature = "alsa"))]
        Port::Alsa(_) => {
            return Err(Error::Alsa(
                "this build has no ALSA support (feature 'alsa')".into(),
            ))
        }
    };
    let thread = {
        let (counters, stop) = (Arc::clone(&counters), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("fp-midi".into())
            .spawn(move || run(shows, &rx, &counters, &*notify, &stop))
            .map_err(|source| Error::Thread {
                name: "fp-midi",
                source,
            })?
    };
    Ok(MidiInput {
        counters,
        name,
        handle: MidiHandle { events, show: 0 },
        stop,
        thread,
        alsa,
    })
}

/// Opens a raw device now (errors at start); a FIFO is only checked, since opening it waits
/// for a writer: the reader opens it. A directory or a socket is refused.
fn open_raw(path: &Path) -> Result<Option<File>> {
    let err = |source| Error::Open {
        path: path.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(err)?;
    let t = meta.file_type();
    if t.is_fifo() {
        return Ok(None);
    }
    let what = if t.is_dir() {
        Some("a directory")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        None
    };
    if let Some(what) = what {
        return Err(Error::NotMidi {
            path: path.display().to_string(),
            what,
        });
    }
    File::open(path).map(Some).map_err(err)
}

/// The longest pause between two opens of an input that keeps failing.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// The reader's notices about its input going away: the first said, then at most one a second
/// (the control surfaces' [`LogLimit`]), the next one said with the count of those not said.
struct Notices(LogLimit);

impl Notices {
    fn new() -> Self {
        Notices(LogLimit::new(1))
    }

    fn say(&mut self, notify: &(dyn Fn(&str) + Send + Sync), line: &str) {
        let now = Instant::now();
        let unsaid = self.0.tick(now).unwrap_or(0);
        if !self.0.allow(now) {
            return;
        }
        if unsaid > 0 {
            notify(&format!(
                "{line} ({unsaid} more times since the last notice)"
            ));
        } else {
            notify(line);
        }
    }
}

/// Adds the parser's new counts to the counters.
fn count_parse(counters: &Counters, before: &mut ParseCounts, now: ParseCounts) {
    let bad = (now.stray + now.truncated).saturating_sub(before.stray + before.truncated);
    if bad > 0 {
        counters.bad.fetch_add(bad, Ordering::Relaxed);
    }
    *before = now;
}

/// Sends a message to `fp-midi` (a full channel drops it, counted: an ALSA port's callback may
/// not wait); false when it is gone.
#[cfg_attr(not(feature = "alsa"), allow(dead_code))]
fn send(
    events: &SyncSender<Event>,
    counters: &Counters,
    m: Message,
    at_ns: i64,
    now: Instant,
) -> bool {
    if matches!(m, Message::Other) {
        return true;
    }
    match events.try_send(Event::Msg(m, at_ns, now)) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            true
        }
        Err(TrySendError::Disconnected(_)) => false,
    }
}

/// Sends a message to `fp-midi`, waiting while the channel is full (a raw input is read no
/// faster than `fp-midi` handles it: the FIFO's writer, or the device's kernel buffer, holds the
/// rest back, so that the newest message is never the one dropped, issue #21); false when
/// `fp-midi` is gone or the run is over.
fn send_waiting(
    events: &SyncSender<Event>,
    m: Message,
    at_ns: i64,
    now: Instant,
    stop: &AtomicBool,
) -> bool {
    if matches!(m, Message::Other) {
        return true;
    }
    let mut ev = Event::Msg(m, at_ns, now);
    loop {
        match events.try_send(ev) {
            Ok(()) => return true,
            Err(TrySendError::Full(back)) => {
                if stop.load(Ordering::Relaxed) {
                    return false;
                }
                ev = back;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(TrySendError::Disconnected(_)) => return false,
        }
    }
}

fn read_raw(
    path: &Path,
    first: Option<File>,
    events: &SyncSender<Event>,
    counters: &Counters,
    notify: &(dyn Fn(&str) + Send + Sync),
    stop: &AtomicBool,
) {
    let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    let mut parser = Parser::new();
    let mut seen = ParseCounts::default();
    let mut buf = [0u8; 1024];
    let mut file = first;
    let mut reopened = false;
    let mut notices = Notices::new();
    let mut back = Notices::new();
    // Grows while an input fails again right after being opened, so that a broken one is not
    // opened in a busy loop.
    let mut backoff = Duration::ZERO;
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let f = match &mut file {
            Some(f) => f,
            // A FIFO waits here for a writer; a device unplugged is tried again.
            None => match File::open(path) {
                Ok(f) => {
                    if reopened {
                        back.say(notify, &format!("midi: {} is back", path.display()));
                    }
                    file.insert(f)
                }
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(500));
                    continue;
                }
            },
        };
        let why = match f.read(&mut buf) {
            Ok(0) if regular => {
                notify(&format!(
                    "midi: end of {}; no more MIDI input",
                    path.display()
                ));
                return;
            }
            Ok(0) => "closed by its writer".to_string(),
            Ok(n) => {
                backoff = Duration::ZERO;
                let (at_ns, now) = (monotonic_ns(), Instant::now());
                let mut gone = false;
                parser.feed(&buf[..n], |m| {
                    gone = gone || !send_waiting(events, m, at_ns, now, stop);
                });
                count_parse(counters, &mut seen, parser.counts);
                if gone {
                    return;
                }
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => e.to_string(),
        };
        counters.disconnects.fetch_add(1, Ordering::Relaxed);
        notices.say(
            notify,
            &format!(
                "midi: {} {why} (unplugged?); waiting for it to come back",
                path.display()
            ),
        );
        file = None;
        reopened = true;
        std::thread::sleep(backoff);
        backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_BACKOFF);
        // A message cut off by the disconnect is not completed by the next device's bytes.
        let counts = parser.counts;
        parser = Parser::new();
        parser.counts = counts;
    }
}

/// One show's surface as `fp-midi` runs it.
struct Target {
    /// `show NAME: ` with several shows, else empty.
    who: String,
    surface: Surface,
    tx: CommandSender,
    /// The first drop of a burst is said, the rest counted.
    full_said: bool,
}

/// `fp-midi`: the shows' surfaces, fed by the channel, each posting to its show's queue.
fn run(
    shows: Vec<ShowSurface>,
    rx: &Receiver<Event>,
    counters: &Counters,
    notify: &(dyn Fn(&str) + Send + Sync),
    stop: &AtomicBool,
) {
    let mut targets: Vec<Target> = shows
        .into_iter()
        .map(|s| Target {
            who: s.name.map_or(String::new(), |n| format!("show {n}: ")),
            surface: s.surface,
            tx: s.tx,
            full_said: false,
        })
        .collect();
    let mut next: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let wait = next.map_or(POLL, |t| t.saturating_duration_since(now).min(POLL));
        let handle = |ev: Event, targets: &mut [Target]| match ev {
            Event::Msg(m, at_ns, at) => {
                for t in targets.iter_mut() {
                    t.surface.message(m, at, at_ns);
                }
            }
            Event::Request(show, cmd, reply) => match targets.get_mut(show) {
                Some(t) => reply(t.surface.command(&cmd)),
                None => reply(Err(format!("no MIDI surface for show {show}"))),
            },
        };
        match rx.recv_timeout(wait) {
            Ok(ev) => {
                handle(ev, &mut targets);
                for _ in 0..BATCH {
                    match rx.try_recv() {
                        Ok(ev) => handle(ev, &mut targets),
                        Err(_) => break,
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        next = None;
        let (mut messages, mut coalesced) = (0, 0);
        for t in &mut targets {
            let due = t.surface.flush(Instant::now());
            next = match (next, due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            for cmd in t.surface.take_commands() {
                match t.tx.post(cmd) {
                    Ok(_) => {
                        counters.posted.fetch_add(1, Ordering::Relaxed);
                        t.full_said = false;
                    }
                    Err(full) => {
                        counters.dropped.fetch_add(1, Ordering::Relaxed);
                        if !t.full_said {
                            notify(&format!(
                                "midi: {}command queue full; dropped: {} (and any more until it drains)",
                                t.who, full.0
                            ));
                            t.full_said = true;
                        }
                    }
                }
            }
            for line in t.surface.take_notices() {
                if t.who.is_empty() {
                    notify(&line);
                } else {
                    notify(&format!("{}{line}", t.who));
                }
            }
            // Every surface sees every message: the count is one surface's.
            messages = t.surface.counts.messages.max(messages);
            coalesced += t.surface.counts.coalesced;
        }
        counters.messages.store(messages, Ordering::Relaxed);
        counters.coalesced.store(coalesced, Ordering::Relaxed);
    }
}

/// The ALSA sequencer input, through midir.
#[cfg(feature = "alsa")]
mod alsa {
    use super::*;
    use midir::{Ignore, MidiInput, MidiInputConnection};

    /// How often the port's presence is checked.
    const CHECK: Duration = Duration::from_secs(1);

    type Conn = MidiInputConnection<(Parser, ParseCounts)>;

    /// The first port whose name contains `wanted` (case-insensitive), with its name.
    fn find(
        input: &MidiInput,
        wanted: &str,
    ) -> std::result::Result<(midir::MidiInputPort, String), String> {
        let lower = wanted.to_lowercase();
        let mut names = Vec::new();
        for p in input.ports() {
            let Ok(name) = input.port_name(&p) else {
                continue;
            };
            if name.to_lowercase().contains(&lower) {
                return Ok((p, name));
            }
            names.push(name);
        }
        Err(if names.is_empty() {
            "(none)".into()
        } else {
            names.join(", ")
        })
    }

    fn connect(
        wanted: &str,
        events: &SyncSender<Event>,
        counters: &Arc<Counters>,
    ) -> Result<(Conn, String)> {
        let mut input = MidiInput::new("framepipe").map_err(|e| Error::Alsa(e.to_string()))?;
        input.ignore(Ignore::None);
        let (port, name) = find(&input, wanted).map_err(|ports| Error::NoPort {
            wanted: wanted.to_string(),
            ports,
        })?;
        let (events, counters) = (events.clone(), Arc::clone(counters));
        let conn = input
            .connect(
                &port,
                "framepipe-in",
                move |_stamp, bytes, (parser, seen)| {
                    let (at_ns, now) = (monotonic_ns(), Instant::now());
                    parser.feed(bytes, |m| {
                        send(&events, &counters, m, at_ns, now);
                    });
                    count_parse(&counters, seen, parser.counts);
                },
                (Parser::new(), ParseCounts::default()),
            )
            .map_err(|e| Error::Alsa(e.to_string()))?;
        Ok((conn, name))
    }

    /// Connects to the port (errors now), then starts `fp-midi-alsa`, which keeps the
    /// connection and makes it again after the port went away and came back.
    pub(super) fn start(
        wanted: &str,
        events: &SyncSender<Event>,
        counters: &Arc<Counters>,
        notify: &Notify,
        stop: &Arc<AtomicBool>,
    ) -> Result<(String, JoinHandle<()>)> {
        if !Path::new(SEQ).exists() {
            return Err(Error::NoSequencer);
        }
        // midir's connection stays on the thread that made it.
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<String>>(1);
        let (wanted, events, counters, notify, stop) = (
            wanted.to_string(),
            events.clone(),
            Arc::clone(counters),
            Arc::clone(notify),
            Arc::clone(stop),
        );
        let thread = std::thread::Builder::new()
            .name("fp-midi-alsa".into())
            .spawn(move || {
                let mut conn = match connect(&wanted, &events, &counters) {
                    Ok((conn, name)) => {
                        let _ = ready_tx.send(Ok(name));
                        Some(conn)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let watch = MidiInput::new("framepipe-watch").ok();
                let mut last = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(POLL);
                    if last.elapsed() < CHECK {
                        continue;
                    }
                    last = Instant::now();
                    let present = watch.as_ref().is_none_or(|w| find(w, &wanted).is_ok());
                    match (&conn, present) {
                        (Some(_), false) => {
                            if let Some(c) = conn.take() {
                                c.close();
                            }
                            counters.disconnects.fetch_add(1, Ordering::Relaxed);
                            notify(&format!(
                                "midi: ALSA port '{wanted}' went away (unplugged?); waiting for it to come back"
                            ));
                        }
                        (None, true) => {
                            if let Ok((c, name)) = connect(&wanted, &events, &counters) {
                                notify(&format!("midi: ALSA port '{name}' is back"));
                                conn = Some(c);
                            }
                        }
                        _ => {}
                    }
                }
                if let Some(c) = conn {
                    c.close();
                }
            })
            .map_err(|source| Error::Thread {
                name: "fp-midi-alsa",
                source,
            })?;
        match ready_rx.recv() {
            Ok(Ok(name)) => Ok((name, thread)),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(Error::Alsa("the connecting thread ended".into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_told_from_alsa_port_names() {
        assert_eq!(
            Port::parse("/dev/snd/midiC1D0"),
            Port::Raw("/dev/snd/midiC1D0".into())
        );
        assert_eq!(Port::parse("./ctl.mid"), Port::Raw("./ctl.mid".into()));
        assert_eq!(Port::parse("../ctl.mid"), Port::Raw("../ctl.mid".into()));
        assert_eq!(
            Port::parse("nanoKONTROL2"),
            Port::Alsa("nanoKONTROL2".into())
        );
    }
}
