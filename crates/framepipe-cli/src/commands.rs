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
//!   after the steps already asked for, and says so; a running run goes on.
//!
//! Every command posted gets one reply from the engine; the `fp-replies` thread (the one reader
//! of the replies: a small hub) prints each as one line on stderr ([`spawn_reply_printer`]) and,
//! with `--web`, hands it to the web pages: `framepipe: ok 'set 1.blur 0.3' from frame 123`
//! or `framepipe: refused 'set 1.blurr 1': unknown property 'blurr' on ...`. With `-q` only
//! refusals are printed.
//!
//! Surface commands (`learn`, `unlearn`, `midi`, `save`) are not the engine's: [`route`] sends
//! them to the MIDI surface (with `--midi`) and everything else to the command queue; their
//! answers are printed the same way (`framepipe: learning ...`, `framepipe: refused ...`).
//!
//! A source that reads standard input ([`stdin_sources`]) and the command reader never share it.

use std::io::BufRead;
use std::os::unix::fs::MetadataExt;

use std::time::Duration;

use framepipe_control::{Command, CommandSender, Outcome, Replies, Ticket, Transport};
use framepipe_core::{ElementKind, Registry};
use framepipe_midi::{MidiHandle, Reply};
use framepipe_project::GraphDesc;

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

/// Starts the `fp-stdin` thread: reads commands from standard input and posts them to `tx`
/// (surface commands to `midi`). `start_paused`: the run begins paused (for the end-of-input
/// message); `others`: another surface (OSC, MIDI) also posts commands, so the end of stdin
/// does not end a pause.
pub fn spawn_stdin_reader(
    tx: CommandSender,
    start_paused: bool,
    others: bool,
    midi: Option<MidiHandle>,
) {
    let spawned = std::thread::Builder::new()
        .name("fp-stdin".into())
        .spawn(move || {
            let stdin = std::io::stdin();
            read_commands(&mut stdin.lock(), tx, start_paused, others, midi.as_ref());
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
            who: name.map_or(String::new(), |n| format!("show {n}: ")),
            replies,
            skip,
            web: None,
        }
    }

    /// Its replies also go to the show's web pages.
    pub fn with_web(mut self, web: Option<framepipe_web::ReplyTap>) -> Self {
        self.web = web;
        self
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

fn print_replies(sources: &[ReplySource], quiet: bool) {
    // Refusals for the same reason in a row (a burst left unread by `stop`) are said once and
    // then counted, so that a flood of commands does not become a flood of lines.
    let mut last_reason: Option<(usize, String)> = None;
    let mut repeats = 0u64;
    let flush = |repeats: &mut u64| {
        if *repeats > 0 {
            crate::say!("\rframepipe: {repeats} more commands refused for the same reason");
            *repeats = 0;
        }
    };
    loop {
        // Read before taking: once gone, every reply of the run is on the path.
        let gone = sources.iter().all(|s| s.replies.engine_gone());
        let mut any = false;
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
                        if last_reason
                            .as_ref()
                            .is_some_and(|(s, last)| *s == i && last == reason)
                        {
                            repeats += 1;
                            continue;
                        }
                        flush(&mut repeats);
                        last_reason = Some((i, reason.to_string()));
                    }
                    Outcome::Applied { .. } => {
                        flush(&mut repeats);
                        last_reason = None;
                        if quiet {
                            continue;
                        }
                    }
                }
                crate::say!("\rframepipe: {}{r}", source.who);
            }
        }
        if gone && !any {
            break;
        }
        std::thread::sleep(REPLY_POLL);
    }
    flush(&mut repeats);
    for source in sources {
        let dropped = source.replies.dropped();
        if dropped > 0 {
            crate::say!(
                "\rframepipe: {}{dropped} command replies were lost: the reply path was full (commands faster than they were printed)",
                source.who
            );
        }
    }
}

/// Reads `input` line by line until its end and hands each line's text to `on_line` (with its
/// number, from 1; a trailing `\r` removed). A line longer than [`MAX_LINE`] or not UTF-8 is
/// reported and skipped here, without growing memory.
fn read_lines(input: &mut impl BufRead, mut on_line: impl FnMut(&str, u64)) {
    let mut line: Vec<u8> = Vec::with_capacity(MAX_LINE);
    let mut too_long = false;
    let mut number = 0u64;
    let mut deliver = |bytes: &[u8], too_long: bool, number: u64| {
        if too_long {
            crate::say!(
                "\rframepipe: command line {number} is longer than {MAX_LINE} bytes; skipped"
            );
            return;
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => on_line(text.strip_suffix('\r').unwrap_or(text), number),
            Err(e) => crate::say!(
                "\rframepipe: command line {number} is not UTF-8 (bad byte at {}); skipped",
                e.valid_up_to()
            ),
        }
    };
    loop {
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
                deliver(&line, too_long, number);
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
        input.consume(used);
        if newline.is_some() {
            number += 1;
            deliver(&line, too_long, number);
            line.clear();
            too_long = false;
        }
    }
}

/// One show's side of the command reader: where its commands go, and what its transport will
/// be once the engine has read them (for the end-of-input message; the real decision is the
/// engine's).
pub struct ShowInput {
    /// `show NAME: ` in a run of several shows, empty for one show (prefixes messages).
    who: String,
    tx: CommandSender,
    mirror: Transport,
    /// Commands refused in a row for a full queue.
    refused: u64,
    /// The show's MIDI surface (several shows with `--midi`).
    midi: Option<MidiHandle>,
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
            who: name.map_or(String::new(), |n| format!("show {n}: ")),
            tx,
            mirror,
            refused: 0,
            midi: None,
        }
    }

    /// Surface commands (`learn`, ...) go to this show's MIDI surface.
    pub fn with_midi(mut self, midi: Option<MidiHandle>) -> Self {
        self.midi = midi;
        self
    }

    /// Posts `cmd` (a surface command to `midi`), reporting what cannot be applied.
    fn submit(&mut self, cmd: Command, midi: Option<&MidiHandle>) {
        let who = &self.who;
        let transport = matches!(
            cmd,
            Command::Pause | Command::Step(_) | Command::Resume | Command::Stop
        )
        .then(|| cmd.clone());
        let reply = print_reply(who, &cmd);
        let midi = self.midi.as_ref().or(midi);
        match route(cmd, &self.tx, midi, reply) {
            Ok(_) => {
                if let Some(t) = transport {
                    self.mirror.apply(&t);
                }
                self.said_refused();
                self.refused = 0;
            }
            Err(NotRouted::Full(cmd)) => {
                // The first refusal of a burst is named, the rest counted (a flood must not
                // turn into a flood of messages).
                if self.refused == 0 {
                    crate::say!(
                        "\rframepipe: {who}command queue full; not applied: {cmd} (stop, pause and resume still are)"
                    );
                }
                self.refused += 1;
            }
            Err(other) => crate::say!("\rframepipe: {who}{other}"),
        }
    }

    /// Says how many commands of the last burst were refused for a full queue, beyond the
    /// first (which was named).
    fn said_refused(&self) {
        if self.refused > 1 {
            crate::say!(
                "\rframepipe: {}{} more commands were not applied while the queue was full",
                self.who,
                self.refused - 1
            );
        }
    }

    /// The end of input: the sender is dropped (the engine sees the end of input); says what
    /// that means for a paused show (nothing when `others`: another surface still holds a
    /// sender and may resume it).
    fn end(self, others: bool) {
        self.said_refused();
        let who = &self.who;
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
        drop(self.tx);
    }
}

/// Reads command lines from `input` until its end, posts them to `tx`, then drops `tx` (the
/// engine sees the end of input) and says what the end means for a paused run (nothing when
/// `others`: another surface still holds a sender and may resume it).
pub fn read_commands(
    input: &mut impl BufRead,
    tx: CommandSender,
    start_paused: bool,
    others: bool,
    midi: Option<&MidiHandle>,
) {
    let mut show = ShowInput::new(None, tx, start_paused);
    read_lines(input, |text, _| match Command::parse_line(text) {
        Ok(Some(cmd)) => show.submit(cmd, midi),
        Ok(None) => {}
        Err(e) => crate::say!("\rframepipe: bad command '{}': {e}", text.trim()),
    });
    show.end(others);
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

/// Starts the `fp-stdin` thread for a run of several shows: each line is `@NAME COMMAND` (to
/// show NAME) or `@* COMMAND` (to every show); see [`read_show_commands`].
pub fn spawn_show_stdin_reader(shows: Vec<(String, ShowInput)>, others: bool) {
    let spawned = std::thread::Builder::new()
        .name("fp-stdin".into())
        .spawn(move || {
            let stdin = std::io::stdin();
            read_show_commands(&mut stdin.lock(), shows, others);
        });
    if let Err(e) = spawned {
        crate::say!("framepipe: warning: no command input: {e}");
    }
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
    read_lines(input, |text, number| {
        let line = text.trim();
        if line.is_empty() || line.starts_with('#') {
            return;
        }
        let Some(rest) = line.strip_prefix('@') else {
            crate::say!(
                "\rframepipe: refused command line {number} '{line}': {} shows run; address one as '@NAME {line}' (shows: {}), or every one as '@{ALL_SHOWS} {line}'",
                shows.len(),
                some_names(shows.iter().map(|(n, _)| n.as_str()))
            );
            return;
        };
        let (name, command) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let targets: Vec<usize> = if name == ALL_SHOWS {
            (0..shows.len()).collect()
        } else if let Some(&i) = index.get(name) {
            vec![i]
        } else {
            crate::say!(
                "\rframepipe: refused command line {number}: no show named '{name}' (shows: {})",
                some_names(shows.iter().map(|(n, _)| n.as_str()))
            );
            return;
        };
        let cmd = match Command::parse_line(command) {
            Ok(Some(cmd)) => cmd,
            Ok(None) => {
                crate::say!(
                    "\rframepipe: refused command line {number}: no command after '@{name}'"
                );
                return;
            }
            Err(e) => {
                crate::say!(
                    "\rframepipe: bad command '{}' for @{name}: {e}",
                    command.trim()
                );
                return;
            }
        };
        for i in targets {
            shows[i].1.submit(cmd.clone(), None);
        }
    });
    for (_, show) in shows {
        show.end(others);
    }
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
