//! Where live commands come from: standard input, one command per line, read by the `fp-stdin`
//! thread and posted to the engine's command queue.
//!
//! Standard input is untrusted and may be anything (a terminal, a script, a file of bytes):
//! * a line is at most [`MAX_LINE`] bytes; a longer one is reported and skipped while it is
//!   read, without growing memory (a stream without newlines costs one 4 KiB buffer);
//! * a line that is not UTF-8 is reported and skipped; later lines still work;
//! * `stop`, `pause` and `resume` are never refused for a full queue (framepipe-control's side
//!   channel); other commands are refused and reported when the queue is full;
//! * at the end of input the sender is dropped: a paused run stops (nothing could resume it),
//!   after the steps already asked for, and says so; a running run goes on;
//! * a flood is coalesced (each show's `outlet::Outlet`, over `framepipe_control::Coalescer`:
//!   one `set` per property per 10 ms reaches the engine, the rest are replaced by the latest
//!   and counted) and read no faster than 256 commands per 10 ms (the writer waits on its
//!   pipe); messages about bad lines and a full queue are limited to a few a second, the rest
//!   counted (issue #21).
//!
//! Every command posted gets one reply from the engine; the `fp-replies` thread (the one reader
//! of the replies: a small hub) prints each as one line on stderr ([`spawn_reply_printer`]) and,
//! with `--web`, hands it to the web pages: `framepipe: ok 'set 1.blur 0.3' from frame 123`
//! or `framepipe: refused 'set 1.blurr 1': unknown property 'blurr' on ...`. With `-q` only
//! refusals are printed, 3 a second per kind at most (the rest counted), long values cut with
//! their length; the lines of one pass go out in one write. The reader's thread writes little
//! itself (a few lines a second), so a slow stderr holds back the printer, not the reading.
//!
//! Surface commands (`learn`, `unlearn`, `midi`, `save`) are not the engine's: [`route`] sends
//! them to the MIDI surface (with `--midi`) and everything else to the command queue; their
//! answers are printed the same way (`framepipe: learning ...`, `framepipe: refused ...`).
//!
//! A source that reads standard input ([`stdin_sources`]) and the command reader never share it.

use std::io::BufRead;
use std::os::unix::fs::MetadataExt;

use std::time::{Duration, Instant};

use framepipe_control::{
    Command, CommandSender, Full, LogLimit, Outcome, Replies, Ticket, Transport,
};
use framepipe_core::{ElementKind, Registry};
use framepipe_midi::{MidiHandle, Reply};
use framepipe_project::GraphDesc;

use crate::outlet::Outlet;

/// The longest command line accepted, in bytes (newline excluded).
pub const MAX_LINE: usize = 4096;

/// Every source that reads standard input, as `NAME: ELEMENT location=...` in the order
/// written: `location=-`, or a path that is standard input's own file (`/dev/stdin`,
/// `/dev/fd/0`, `/proc/self/fd/0`, or the file or pipe that stdin is). More than one cannot run
/// (they would share one stream); one means no commands from stdin.
pub fn stdin_sources(desc: &GraphDesc, registry: &Registry) -> Vec<String> {
    desc.nodes
        .iter()
        .filter(|n| {
            registry
                .find(&n.element)
                .is_some_and(|entry| entry.desc.kind == ElementKind::Source)
        })
        .filter_map(|n| {
            n.props
                .iter()
                .find(|(k, v)| k == "location" && is_stdin(v))
                .map(|(_, v)| {
                    if n.name == n.element {
                        format!("{} location={v}", n.element)
                    } else {
                        format!("{} ({} location={v})", n.name, n.element)
                    }
                })
        })
        .collect()
}

/// Whether reading `location` reads this process's standard input.
fn is_stdin(location: &str) -> bool {
    if matches!(
        location,
        "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0"
    ) {
        return true;
    }
    // The same file as stdin (a pipe's /proc/PID/fd/0, the terminal's /dev/pts/N, the file
    // given with `<`): the command reader would read it too.
    match (
        std::fs::metadata(location),
        std::fs::metadata("/proc/self/fd/0"),
    ) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Where [`route`] sent a command.
#[derive(Debug)]
pub enum Routed {
    /// Posted to the engine's queue; its reply will carry this ticket.
    #[allow(dead_code)]
    // stdin does not match replies; a surface that does (the web page) reads it
    Engine(Ticket),
    /// Handed to the MIDI surface; it answers through the `reply` given to [`route`].
    Surface,
}

/// Why [`route`] could not send a command (the command is handed back).
#[derive(Debug)]
pub enum NotRouted {
    /// The engine's command queue is full.
    Full(Command),
    /// A surface command, and there is no MIDI surface (no `--midi`).
    NoMidi(Command),
    /// The MIDI surface's channel is full (a flood) or it has ended.
    Busy(Command),
}

impl std::fmt::Display for NotRouted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotRouted::Full(c) => write!(f, "refused '{c}': the command queue is full"),
            NotRouted::NoMidi(c) => write!(
                f,
                "refused '{c}': no MIDI input; start framepipe with --midi PORT"
            ),
            NotRouted::Busy(c) => write!(f, "refused '{c}': the MIDI surface is busy; try again"),
        }
    }
}

/// Sends `cmd` where it belongs: a surface command (`learn`, `unlearn`, `midi`, `save`;
/// [`Command::is_surface`]) to the MIDI surface, which calls `reply` once with its answer;
/// any other command to the engine's queue (`reply` is not called: the engine's reply comes on
/// the queue's return path). Never blocks. For every surface that takes command lines (stdin,
/// the web page).
pub fn route(
    cmd: Command,
    tx: &CommandSender,
    midi: Option<&MidiHandle>,
    reply: Reply,
) -> Result<Routed, NotRouted> {
    if !cmd.is_surface() {
        return tx
            .post(cmd)
            .map(Routed::Engine)
            .map_err(|full| NotRouted::Full(full.0));
    }
    match midi {
        None => Err(NotRouted::NoMidi(cmd)),
        Some(h) => h
            .request(cmd, reply)
            .map(|()| Routed::Surface)
            .map_err(|(cmd, _)| NotRouted::Busy(cmd)),
    }
}

/// A [`Reply`] that prints a surface command's answer on stderr like the engine's replies:
/// `framepipe: learning ...` (each line of a longer answer prefixed), or
/// `framepipe: refused 'learn x.y': ...`; `who` (`show NAME: ` or empty) after `framepipe: `.
pub fn print_reply(who: &str, cmd: &Command) -> Reply {
    let text = cmd.to_string();
    let who = who.to_string();
    Box::new(move |answer| match answer {
        Ok(said) => {
            for line in said.lines() {
                crate::say!("\rframepipe: {who}{line}");
            }
        }
        Err(reason) => crate::say!("\rframepipe: {who}refused '{text}': {reason}"),
    })
}

/// Starts the `fp-stdin` thread, the one reader of standard input whatever the number of
/// shows: with one show every line is its command ([`read_one`]); with several, each line is
/// `@NAME COMMAND` (to show NAME) or `@* COMMAND` (to every show; [`read_show_commands`]).
/// `others`: another surface (OSC, MIDI, web, a window) also posts commands, so the end of
/// stdin does not end a pause.
pub fn spawn_stdin_reader(mut shows: Vec<(String, ShowInput)>, others: bool) {
    let spawned = std::thread::Builder::new()
        .name("fp-stdin".into())
        .spawn(move || {
            let stdin = std::io::stdin();
            if shows.len() == 1 {
                let (_, show) = shows.pop().expect("one show");
                read_one(&mut stdin.lock(), show, others);
            } else {
                read_show_commands(&mut stdin.lock(), shows, others);
            }
        });
    if let Err(e) = spawned {
        crate::say!("framepipe: warning: no command input: {e}");
    }
}

/// How often the `fp-replies` thread looks for replies.
const REPLY_POLL: Duration = Duration::from_millis(5);

/// One show's return path, for the reply printer.
pub struct ReplySource {
    /// `show NAME: ` in a run of several shows, empty for one show.
    pub who: String,
    /// Its replies.
    pub replies: Replies,
    /// A command the CLI posted itself (e.g. `--start-paused`'s pause): its reply is not
    /// printed.
    pub skip: Option<Ticket>,
    /// The show's web pages (`--web`): every reply is handed to them too.
    pub web: Option<framepipe_web::ReplyTap>,
}

impl ReplySource {
    /// The return path of show `name` (`None`: the only show), skipping the reply to `skip`.
    pub fn new(name: Option<&str>, replies: Replies, skip: Option<Ticket>) -> Self {
        ReplySource {
            who: crate::outlet::who(name),
            replies,
            skip,
            web: None,
        }
    }
}

/// Starts the `fp-replies` thread: prints every reply of every show in `sources` as one line
/// on stderr (with `quiet`, refusals only), naming the show in a run of several, and hands it
/// to the show's web pages (with `--web`). It ends once
/// every show's engine reader is gone and every reply is out; join it after the run so that
/// the replies come before the summary. One thread for the process, however many shows.
/// Returns `None` if the thread cannot be started (said on stderr; refusals then go
/// unreported).
pub fn spawn_reply_printer(
    sources: Vec<ReplySource>,
    quiet: bool,
) -> Option<std::thread::JoinHandle<()>> {
    let spawned = std::thread::Builder::new()
        .name("fp-replies".into())
        .spawn(move || print_replies(&sources, quiet));
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            crate::say!("framepipe: warning: command replies will not be shown: {e}");
            None
        }
    }
}

/// Refusals of one kind (one show's, one command word's) printed a second at most; the rest
/// are counted and said once the second is over (issue #21).
const REFUSALS_PER_S: u32 = 3;

/// The longest refusal reason printed, in bytes (a reason quoting an oversized value is cut).
const MAX_REASON: usize = 1024;

/// The kind a refusal is counted under: the command's word, every graph edit as one `edit`.
fn verb(cmd: &Command) -> &'static str {
    match cmd {
        Command::Edit(_) => "edit",
        other => other.word(),
    }
}

/// A refusal's reason for a message: an oversized value of `cmd` that it quotes is cut with
/// its length, and the whole is cut at [`MAX_REASON`].
fn reason_shown(cmd: &Command, reason: &str) -> String {
    use framepipe_core::quote::{quote, quote_at_most, QUOTE_CHARS};
    let mut text = reason.to_string();
    if let Command::Set { value, .. } = cmd {
        if value.len() > QUOTE_CHARS && text.contains(value.as_str()) {
            let cut = quote(value);
            text = text
                .replace(&format!("'{value}'"), &cut)
                .replace(value.as_str(), &cut);
        }
    }
    if text.len() > MAX_REASON {
        text = quote_at_most(&text, MAX_REASON / 4);
    }
    text
}

fn print_replies(sources: &[ReplySource], quiet: bool) {
    use std::io::Write as _;
    // Refusals are limited by kind, so that a flood of commands does not become a flood of
    // lines; the lines of one pass go out in one write.
    let mut limits: std::collections::HashMap<(usize, &'static str), LogLimit> =
        std::collections::HashMap::new();
    let mut out = String::new();
    let counts = |limits: &mut std::collections::HashMap<(usize, &'static str), LogLimit>,
                  out: &mut String,
                  now: Option<Instant>| {
        for ((i, verb), limit) in limits.iter_mut() {
            let n = match now {
                Some(now) => limit.tick(now).unwrap_or(0),
                None => limit.take_hidden(),
            };
            if n > 0 {
                let who = &sources[*i].who;
                let when = if now.is_some() {
                    " in the last second"
                } else {
                    ""
                };
                out.push_str(&format!(
                    "{}framepipe: {who}{n} more '{verb}' commands refused{when} (at most {REFUSALS_PER_S} shown a second)\n",
                    crate::status::line_start()
                ));
            }
        }
    };
    loop {
        // Read before taking: once gone, every reply of the run is on the path.
        let gone = sources.iter().all(|s| s.replies.engine_gone());
        let mut any = false;
        let now = Instant::now();
        for (i, source) in sources.iter().enumerate() {
            while let Some(r) = source.replies.take() {
                any = true;
                if Some(r.ticket) == source.skip {
                    continue;
                }
                // The hub: every page of the show sees every reply (the one that posted it,
                // with its id).
                if let Some(w) = &source.web {
                    w.deliver(&r);
                }
                match &r.outcome {
                    Outcome::Refused { reason } => {
                        let limit = limits
                            .entry((i, verb(&r.command)))
                            .or_insert_with(|| LogLimit::new(REFUSALS_PER_S));
                        if limit.allow(now) {
                            out.push_str(&format!(
                                "{}framepipe: {}refused '{}': {}\n",
                                crate::status::line_start(),
                                source.who,
                                shown(&r.command),
                                reason_shown(&r.command, reason)
                            ));
                        }
                    }
                    Outcome::Applied { frame } => {
                        if !quiet {
                            out.push_str(&format!(
                                "{}framepipe: {}ok '{}' from frame {frame}\n",
                                crate::status::line_start(),
                                source.who,
                                shown(&r.command)
                            ));
                        }
                    }
                }
            }
        }
        counts(&mut limits, &mut out, Some(now));
        if !out.is_empty() {
            let _ = std::io::stderr().write_all(out.as_bytes());
            out.clear();
        }
        if gone && !any {
            break;
        }
        std::thread::sleep(REPLY_POLL);
    }
    counts(&mut limits, &mut out, None);
    for source in sources {
        let dropped = source.replies.dropped();
        if dropped > 0 {
            out.push_str(&format!(
                "{}framepipe: {}{dropped} command replies were lost: the reply path was full (commands faster than they were printed)\n",
                crate::status::line_start(),
                source.who
            ));
        }
    }
    let _ = std::io::stderr().write_all(out.as_bytes());
}

/// What [`read_lines`] hands on.
enum Input<'a> {
    /// A line's text (a trailing `\r` removed) and its number, from 1.
    Line(&'a str, u64),
    /// Every byte read so far was handed on: the next read may wait for input.
    Idle,
}

/// Reads `input` line by line until its end and hands each line's text to `on` (and
/// [`Input::Idle`] before each read that may block). A line longer than [`MAX_LINE`] or not
/// UTF-8 is reported and skipped here, without growing memory; those reports are limited to a
/// few a second ([`LINE_LOG_BURST`]), the rest counted.
fn read_lines(input: &mut impl BufRead, mut on: impl FnMut(Input<'_>)) {
    let mut line: Vec<u8> = Vec::with_capacity(MAX_LINE);
    let mut too_long = false;
    let mut number = 0u64;
    let mut limit = LogLimit::new(LINE_LOG_BURST);
    let deliver = |bytes: &[u8],
                   too_long: bool,
                   number: u64,
                   limit: &mut LogLimit,
                   on: &mut dyn FnMut(Input<'_>)| {
        let now = Instant::now();
        if let Some(n) = limit.tick(now) {
            crate::say!("\rframepipe: {n} more command lines skipped in the last second");
        }
        if too_long {
            if limit.allow(now) {
                crate::say!(
                    "\rframepipe: command line {number} is longer than {MAX_LINE} bytes; skipped"
                );
            }
            return;
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => on(Input::Line(text.strip_suffix('\r').unwrap_or(text), number)),
            Err(e) => {
                if limit.allow(now) {
                    crate::say!(
                        "\rframepipe: command line {number} is not UTF-8 (bad byte at {}); skipped",
                        e.valid_up_to()
                    )
                }
            }
        }
    };
    // Whether every byte read was handed on (the next `fill_buf` may block).
    let mut drained = true;
    loop {
        if drained {
            on(Input::Idle);
        }
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                crate::say!(
                    "\rframepipe: reading commands from stdin failed: {e}; no more commands"
                );
                break;
            }
        };
        if buf.is_empty() {
            // The end; a last line without a newline still counts.
            if !line.is_empty() || too_long {
                number += 1;
                deliver(&line, too_long, number, &mut limit, &mut on);
            }
            break;
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        if !too_long {
            if line.len() + chunk.len() > MAX_LINE {
                // Skip the rest of this line as it arrives; memory stays at MAX_LINE.
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = chunk.len() + newline.is_some() as usize;
        drained = used == buf.len();
        input.consume(used);
        if newline.is_some() {
            number += 1;
            deliver(&line, too_long, number, &mut limit, &mut on);
            line.clear();
            too_long = false;
        }
    }
    if let Some(n) = Some(limit.take_hidden()).filter(|&n| n > 0) {
        crate::say!("\rframepipe: {n} more command lines skipped");
    }
}

/// Reports about skipped or bad command lines said a second at most, the rest counted (issue
/// #21: a flood of bad lines costs the log a few lines a second).
const LINE_LOG_BURST: u32 = 10;

/// One show's side of the command reader: its [`Outlet`] (coalesced: a flood of `set`s of one
/// property reaches the engine as one per 10 ms, issue #21), and what its transport will be
/// once the engine has read them (for the end-of-input message; the real decision is the
/// engine's).
pub struct ShowInput {
    outlet: Outlet,
    mirror: Transport,
    /// The show's MIDI surface (with `--midi`).
    midi: Option<MidiHandle>,
}

/// How stdin reports a post: a full queue said (see [`said_full`]).
fn stdin_posted(who: &str, full: &mut LogLimit, _: usize, r: Result<Ticket, Full>) {
    said_full(who, full, r);
}

impl ShowInput {
    /// Commands for one show (`name`: `None` when it is the only one) posted to `tx`.
    /// `start_paused`: the run begins paused.
    pub fn new(name: Option<&str>, tx: CommandSender, start_paused: bool) -> Self {
        let mut mirror = Transport::new();
        if start_paused {
            mirror.apply(&Command::Pause);
        }
        ShowInput {
            outlet: Outlet::new(name, tx),
            mirror,
            midi: None,
        }
    }

    /// Surface commands (`learn`, ...) go to this show's MIDI surface.
    pub fn with_midi(mut self, midi: Option<MidiHandle>) -> Self {
        self.midi = midi;
        self
    }

    /// Takes `cmd` (a surface command to its MIDI surface, after what is held), reporting what
    /// cannot be applied.
    fn submit(&mut self, cmd: Command) {
        if matches!(
            cmd,
            Command::Pause | Command::Step(_) | Command::Resume | Command::Stop
        ) {
            self.mirror.apply(&cmd);
        }
        if !cmd.is_surface() {
            self.outlet.offer(cmd, &mut stdin_posted);
            return;
        }
        self.outlet.flush(&mut stdin_posted);
        let reply = print_reply(self.outlet.who(), &cmd);
        match route(cmd, self.outlet.tx(), self.midi.as_ref(), reply) {
            Ok(_) => {}
            Err(NotRouted::Full(cmd)) => self.outlet.report(Err(Full(cmd)), &mut stdin_posted),
            Err(other) => crate::say!("\rframepipe: {}{other}", self.outlet.who()),
        }
    }

    /// After a line: posts what is held once it is due, and waits for the next gap when a flood
    /// outruns the engine (the writer is then held back by the pipe).
    fn after_line(&mut self) {
        if let Some(n) = self.outlet.pace(&mut stdin_posted) {
            crate::say!(
                "\rframepipe: {}{n} more commands were not applied while the queue was full",
                self.outlet.who()
            );
        }
    }

    /// Before a read that may block: nothing may stay held meanwhile.
    fn idle(&mut self) {
        if self.outlet.held() > 0 {
            self.outlet.settle(&mut stdin_posted);
        }
    }

    /// The end of input: what is held is posted, the sender is dropped (the engine sees the
    /// end of input); says what that means for a paused show (nothing when `others`: another
    /// surface still holds a sender and may resume it).
    fn end(mut self, others: bool) {
        self.outlet.flush(&mut stdin_posted);
        let who = self.outlet.who().to_string();
        let hidden = self.outlet.take_hidden();
        if hidden > 0 {
            crate::say!("\rframepipe: {who}{hidden} more commands were not applied while the queue was full");
        }
        let coalesced = self.outlet.coalesced();
        if coalesced > 0 {
            crate::say!(
                "\rframepipe: {who}{coalesced} commands from stdin were replaced by a later one before they were posted (coalesced: a frame shows one value per property)"
            );
        }
        if !others && self.mirror.is_paused() && !self.mirror.is_stopped() {
            if self.mirror.steps_pending() > 0 {
                crate::say!(
                    "\rframepipe: {who}stdin closed while paused: stopping after the frames asked for by 'step' (nothing could resume the run)"
                );
            } else {
                crate::say!(
                    "\rframepipe: {who}stdin closed while paused: stopping (nothing could resume the run)"
                );
            }
        }
        drop(self.outlet.into_sender());
    }
}

/// Reports a command refused for a full queue: the first of a second is named, the rest
/// counted (a flood must not turn into a flood of messages).
fn said_full(who: &str, limit: &mut LogLimit, posted: Result<Ticket, Full>) {
    if let Err(Full(cmd)) = posted {
        if limit.allow(Instant::now()) {
            crate::say!(
                "\rframepipe: {who}command queue full; not applied: {} (stop, pause and resume still are)",
                shown(&cmd)
            );
        }
    }
}

/// `cmd` as a line for a message, a long value cut with its length (issue #21: a refusal
/// never quotes a whole oversized value).
pub fn shown(cmd: &Command) -> String {
    match cmd {
        Command::Set {
            element,
            prop,
            value,
        } if value.len() > framepipe_core::quote::QUOTE_CHARS => {
            format!(
                "set {element}.{prop} {}",
                framepipe_core::quote::quote(value)
            )
        }
        other => {
            let text = other.to_string();
            if text.len() > 2 * framepipe_core::quote::QUOTE_CHARS {
                framepipe_core::quote::quote_at_most(&text, 2 * framepipe_core::quote::QUOTE_CHARS)
            } else {
                text
            }
        }
    }
}

/// Reads the only show's command lines from `input` until its end and posts them through
/// `show` (coalesced, see [`ShowInput`]); at the end drops its sender (the engine sees the end
/// of input) and says what the end means for a paused run (nothing when `others`: another
/// surface still holds a sender and may resume it). Bad lines are reported a few a second at
/// most, the rest counted.
pub fn read_one(input: &mut impl BufRead, mut show: ShowInput, others: bool) {
    let mut bad = LogLimit::new(LINE_LOG_BURST);
    read_lines(input, |input| match input {
        Input::Idle => show.idle(),
        Input::Line(text, _) => {
            match Command::parse_line(text) {
                Ok(Some(cmd)) => show.submit(cmd),
                Ok(None) => {}
                Err(e) => said_bad(&mut bad, text, &e),
            }
            show.after_line();
        }
    });
    said_bad_end(&mut bad);
    show.end(others);
}

/// Reports a line that is no command: a few a second, the rest counted; the line and the
/// error cut when long.
fn said_bad(limit: &mut LogLimit, text: &str, e: &dyn std::fmt::Display) {
    let now = Instant::now();
    if let Some(n) = limit.tick(now) {
        crate::say!("\rframepipe: {n} more bad command lines in the last second");
    }
    if limit.allow(now) {
        let why = e.to_string();
        let why = if why.len() > 4 * framepipe_core::quote::QUOTE_CHARS {
            framepipe_core::quote::quote_at_most(&why, 4 * framepipe_core::quote::QUOTE_CHARS)
        } else {
            why
        };
        crate::say!(
            "\rframepipe: bad command {}: {why}",
            framepipe_core::quote::quote(text.trim())
        );
    }
}

fn said_bad_end(limit: &mut LogLimit) {
    let n = limit.take_hidden();
    if n > 0 {
        crate::say!("\rframepipe: {n} more bad command lines");
    }
}

/// What `@` names in a line for several shows: every show (`@*`).
pub const ALL_SHOWS: &str = framepipe_control::osc_in::ALL_SHOWS;

/// How many show names a message lists at most.
const NAMES_LISTED: usize = 5;

/// `a, b, c, d, e and 195 more`: the first names of `names`, for messages.
pub fn some_names<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    let more = names.len().saturating_sub(NAMES_LISTED);
    let mut text = names.take(NAMES_LISTED).collect::<Vec<_>>().join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// Reads command lines for several shows until the end of `input`: `@NAME COMMAND` posts
/// COMMAND to show NAME, `@* COMMAND` to every show; a line without `@` is refused with how to
/// address a show. Each show's replies name it. At the end every sender is dropped, as for one
/// show.
pub fn read_show_commands(
    input: &mut impl BufRead,
    mut shows: Vec<(String, ShowInput)>,
    others: bool,
) {
    let index: std::collections::HashMap<String, usize> = shows
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (name.clone(), i))
        .collect();
    let mut bad = LogLimit::new(LINE_LOG_BURST);
    let refused = |bad: &mut LogLimit, why: String| {
        let now = Instant::now();
        if let Some(n) = bad.tick(now) {
            crate::say!("\rframepipe: {n} more bad command lines in the last second");
        }
        if bad.allow(now) {
            crate::say!("\rframepipe: {why}");
        }
    };
    read_lines(input, |input| {
        let (text, number) = match input {
            Input::Idle => {
                for (_, show) in shows.iter_mut() {
                    show.idle();
                }
                return;
            }
            Input::Line(text, number) => (text, number),
        };
        let line = text.trim();
        if line.is_empty() || line.starts_with('#') {
            return;
        }
        let quoted = framepipe_core::quote::quote(line);
        let example = if quoted.len() == line.len() + 2 {
            line
        } else {
            "COMMAND"
        };
        let Some(rest) = line.strip_prefix('@') else {
            refused(
                &mut bad,
                format!(
                    "refused command line {number} {quoted}: {} shows run; address one as '@NAME {example}' (shows: {}), or every one as '@{ALL_SHOWS} {example}'",
                    shows.len(),
                    some_names(shows.iter().map(|(n, _)| n.as_str()))
                ),
            );
            return;
        };
        let (name, command) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let targets: Vec<usize> = if name == ALL_SHOWS {
            (0..shows.len()).collect()
        } else if let Some(&i) = index.get(name) {
            vec![i]
        } else {
            refused(
                &mut bad,
                format!(
                    "refused command line {number}: no show named {} (shows: {})",
                    framepipe_core::quote::quote(name),
                    some_names(shows.iter().map(|(n, _)| n.as_str()))
                ),
            );
            return;
        };
        let cmd = match Command::parse_line(command) {
            Ok(Some(cmd)) => cmd,
            Ok(None) => {
                refused(
                    &mut bad,
                    format!("refused command line {number}: no command after '@{name}'"),
                );
                return;
            }
            Err(e) => {
                refused(
                    &mut bad,
                    format!(
                        "bad command {} for @{name}: {}",
                        framepipe_core::quote::quote(command.trim()),
                        framepipe_core::quote::quote_at_most(
                            &e.to_string(),
                            4 * framepipe_core::quote::QUOTE_CHARS
                        )
                    ),
                );
                return;
            }
        };
        for &i in &targets {
            shows[i].1.submit(cmd.clone());
        }
        for i in targets {
            shows[i].1.after_line();
        }
    });
    said_bad_end(&mut bad);
    for (_, show) in shows {
        show.end(others);
    }
}

/// Whether commands are read from stdin, given the sources that read it (`stdin_sources`):
/// `--control` (none given: stdin unless a source reads it, which is said unless `quiet`);
/// refused when two sources read stdin, or one does and `--control stdin` asks for it too.
pub(crate) fn commands_from_stdin(
    control: Option<&str>,
    stdin_sources: &[String],
    quiet: bool,
) -> anyhow::Result<bool> {
    if let [a, b, ..] = stdin_sources {
        anyhow::bail!("{a} and {b} both read stdin; only one source can, give the other a file");
    }
    Ok(match (control, stdin_sources.first()) {
        (None, None) | (Some("stdin"), None) => true,
        (None, Some(source)) => {
            if !quiet {
                crate::say!(
                    "framepipe: {source} reads stdin, so commands are not read from it \
                     (SIGINT/SIGTERM still stop the run)"
                );
            }
            false
        }
        (Some("stdin"), Some(source)) => anyhow::bail!(
            "--control stdin: {source} reads stdin too, and they cannot share it; use \
             --control none, or give the source a file"
        ),
        (Some("none"), _) => false,
        (Some(other), _) => anyhow::bail!("bad --control '{other}': expected stdin or none"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use framepipe_control::{command_queue, CommandReader};

    /// Every command a reader has, as text (`EndOfInput` included).
    fn drain(reader: &mut CommandReader) -> Vec<String> {
        std::iter::from_fn(|| reader.pop())
            .map(|p| p.command.to_string())
            .collect()
    }

    /// Issue #11: `@NAME` lines reach that show's queue only, `@*` every show's; lines without
    /// a name, unknown names and surface commands reach none; every queue sees the end of
    /// input.
    #[test]
    fn lines_for_several_shows_reach_the_show_they_name() {
        let (tx_a, mut rx_a) = command_queue(16);
        let (tx_b, mut rx_b) = command_queue(16);
        let shows = vec![
            ("a".to_string(), ShowInput::new(Some("a"), tx_a, false)),
            ("b".to_string(), ShowInput::new(Some("b"), tx_b, false)),
        ];
        let input = "set x.y 1\n@a set x.y 2\n@b  bypass x on\n@nope pause\n@*   tempo 100\n@a\n@b learn x.y\n# a comment\n@a speed\n";
        read_show_commands(&mut input.as_bytes(), shows, false);
        let (a, b) = (drain(&mut rx_a), drain(&mut rx_b));
        let end = Command::EndOfInput.to_string();
        assert_eq!(
            a,
            ["set x.y 2".to_string(), "tempo 100".into(), end.clone()]
        );
        assert_eq!(b, ["bypass x on".to_string(), "tempo 100".into(), end]);
    }

    #[test]
    fn names_are_listed_a_few_at_most() {
        let names: Vec<String> = (1..=7).map(|i| format!("cam{i}")).collect();
        assert_eq!(
            some_names(names.iter().map(String::as_str)),
            "cam1, cam2, cam3, cam4, cam5 and 2 more"
        );
        assert_eq!(some_names(["x", "y"].into_iter()), "x, y");
    }
}
