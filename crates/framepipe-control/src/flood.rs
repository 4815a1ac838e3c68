//! Floods on a control surface (issue #21): commands coalesced before they reach the engine, and
//! messages about them limited to a few lines a second.
//!
//! The engine reads its commands once per frame boundary, and a frame shows one value per
//! property: of several `set`s of the same property posted between two boundaries only the
//! last can ever be seen. A [`Coalescer`] keeps them on the surface's thread instead of in the
//! engine's queue: it holds the commands that only the last of their kind counts for (`set` and
//! `bypass` of one target, `speed`, `tempo`), the newer replacing the older, and posts what it
//! holds once the engine has read what it posted last
//! ([`CommandSender::read_past`]). So a surface posts at most one command per property per
//! frame, however fast its input, and the frame path's work per boundary stays bounded by the
//! number of properties, not by the rate of the flood. Every other command (an oscillator,
//! `tap`, the transport, an edit, a batch) is posted in its place, after what was held before
//! it, so that order is kept.
//!
//! A replaced command was never posted: it gets no ticket and no reply; it is counted
//! ([`Coalescer::coalesced`]).
//!
//! [`LogLimit`] is the other half: a message of one kind (a refusal, a full queue, a bad line)
//! is said at most [`LogLimit::burst`] times a second; the rest are counted and said as one line
//! when the second is over. A flood then costs the log a few lines a second, never a line per
//! message.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::command::{Command, Target};
use crate::queue::{CommandSender, Full, Ticket};

/// How many commands a surface takes from its input between two posts before it waits for the
/// next one (a flood is slowed to the engine's pace: the input's writer is held back by its
/// pipe, or the kernel drops datagrams).
pub const OFFERS_PER_READ: usize = 256;

/// The least time between two posts of what a surface holds: about a frame period or less
/// (10 ms: 100 posts a second per property at most). The engine is woken by every post and
/// reads at once, so "the engine has read" alone would not hold a flood back; this spacing
/// does, without the surface knowing the show's rate (a frame shows the last value posted
/// before it began anyway). The MIDI surface spaces its values the same way (its frame
/// period, or this when unpaced).
pub const MIN_GAP: Duration = Duration::from_millis(10);

/// The longest a surface waits for the engine to read what it posted before it posts what it
/// holds anyway (an engine that reads no commands: a stalled pipeline).
pub const MAX_HOLD: Duration = Duration::from_millis(100);

/// What only the last command of counts, between two reads of the engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Prop(Target, String),
    Bypass(Target),
    Speed,
    Tempo,
}

impl Key {
    fn of(cmd: &Command) -> Option<Key> {
        match cmd {
            Command::Set { element, prop, .. } => Some(Key::Prop(element.clone(), prop.clone())),
            Command::Bypass { element, .. } => Some(Key::Bypass(element.clone())),
            Command::Speed(_) => Some(Key::Speed),
            Command::Tempo(_) => Some(Key::Tempo),
            _ => None,
        }
    }

    /// The key a command that is not coalesced still touches (an oscillator on a property):
    /// a `set` held before it must stay before it.
    fn touched(cmd: &Command) -> Option<Key> {
        match cmd {
            Command::Osc { element, prop, .. } | Command::Unosc { element, prop } => {
                Some(Key::Prop(element.clone(), prop.clone()))
            }
            _ => None,
        }
    }
}

/// One surface's commands on their way to the engine, coalesced between the engine's reads
/// (see the module documentation). Owned by the surface's thread; nothing here blocks.
#[derive(Debug, Default)]
pub struct Coalescer {
    /// Commands held, in order.
    held: Vec<Command>,
    /// Where the held command of a key is in `held`.
    index: HashMap<Key, usize>,
    /// The queue's mark after the last command posted ([`CommandSender::mark`]).
    mark: Option<u64>,
    /// When the oldest held command was offered.
    since: Option<Instant>,
    /// When it last posted what it held.
    flushed: Option<Instant>,
    /// Commands offered since the last post.
    offered: usize,
    /// Commands replaced by a later one.
    coalesced: u64,
}

impl Coalescer {
    /// Nothing held.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes `cmd`: a command that only the last of its kind counts for is held (replacing the
    /// one of its kind held already: counted in [`coalesced`](Self::coalesced)); any other is
    /// posted at once, after everything held (through `post`, which gets, for each command
    /// posted, how many commands it carries (a batch's count, else 1) and
    /// [`CommandSender::post`]'s answer).
    pub fn offer(
        &mut self,
        tx: &CommandSender,
        cmd: Command,
        post: &mut dyn FnMut(usize, Result<Ticket, Full>),
    ) {
        self.offered += 1;
        match Key::of(&cmd) {
            Some(key) => {
                if let Some(&i) = self.index.get(&key) {
                    self.held[i] = cmd;
                    self.coalesced += 1;
                } else {
                    self.index.insert(key, self.held.len());
                    self.held.push(cmd);
                }
                self.since.get_or_insert_with(Instant::now);
            }
            None => {
                if let Some(key) = Key::touched(&cmd) {
                    // A later `set` of that property comes after this oscillator: not merged
                    // into one held before it.
                    self.index.remove(&key);
                }
                self.held.push(cmd);
                self.flush(tx, post);
            }
        }
    }

    /// Whether what is held should be posted now: [`MIN_GAP`] has passed since the last post
    /// and the engine has read what was posted then, or it was held [`MAX_HOLD`] already.
    pub fn due(&self, tx: &CommandSender) -> bool {
        !self.held.is_empty()
            && ((self.flushed.is_none_or(|t| t.elapsed() >= MIN_GAP)
                && self.mark.is_none_or(|m| tx.read_past(m)))
                || self.since.is_some_and(|t| t.elapsed() >= MAX_HOLD))
    }

    /// Whether the surface should stop taking input for a while: it took [`OFFERS_PER_READ`]
    /// commands since it last posted (a flood: the surface then goes at the engine's pace).
    pub fn should_wait(&self, _tx: &CommandSender) -> bool {
        self.offered >= OFFERS_PER_READ
    }

    /// Waits (sleeping 1 ms at a time) until what is held is [`due`](Self::due), at most
    /// [`MAX_HOLD`]; then posts what is held. For a surface about to block on its input
    /// (nothing would post what it holds meanwhile), or one that
    /// [`should_wait`](Self::should_wait).
    pub fn settle(
        &mut self,
        tx: &CommandSender,
        post: &mut dyn FnMut(usize, Result<Ticket, Full>),
    ) {
        let start = Instant::now();
        while !self.held.is_empty() && !self.due(tx) && start.elapsed() < MAX_HOLD {
            std::thread::sleep(Duration::from_millis(1));
        }
        if self.held.is_empty() {
            // Nothing to post, but the input was counted: wait for the engine to read.
            while !self.mark.is_none_or(|m| tx.read_past(m)) && start.elapsed() < MAX_HOLD {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.offered = 0;
            return;
        }
        self.flush(tx, post);
    }

    /// Posts everything held, in order, now.
    pub fn flush(&mut self, tx: &CommandSender, post: &mut dyn FnMut(usize, Result<Ticket, Full>)) {
        self.offered = 0;
        if self.held.is_empty() {
            return;
        }
        self.index.clear();
        self.since = None;
        self.flushed = Some(Instant::now());
        for cmd in self.held.drain(..) {
            let n = match &cmd {
                Command::Batch(cmds) => cmds.len(),
                _ => 1,
            };
            post(n, tx.post(cmd));
        }
        self.mark = Some(tx.mark());
    }

    /// Commands held now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Commands replaced by a later one of their kind so far (never posted, no reply).
    pub fn coalesced(&self) -> u64 {
        self.coalesced
    }
}

/// Lines of one kind, at most [`burst`](Self::burst) a second; the rest counted (see the module
/// documentation). Use: [`tick`](Self::tick) (say the count it returns), then
/// [`allow`](Self::allow) before each line.
#[derive(Debug, Clone)]
pub struct LogLimit {
    burst: u32,
    /// The current second's start, and lines said in it.
    window: Option<(Instant, u32)>,
    /// Lines not said since the last count was said.
    hidden: u64,
}

impl LogLimit {
    /// At most `burst` lines a second.
    pub fn new(burst: u32) -> Self {
        LogLimit {
            burst,
            window: None,
            hidden: 0,
        }
    }

    /// Lines allowed a second.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Whether a line may be said now; if not, it is counted.
    pub fn allow(&mut self, now: Instant) -> bool {
        let (start, said) = self.window.get_or_insert((now, 0));
        if now.duration_since(*start) >= Duration::from_secs(1) {
            *start = now;
            *said = 0;
        }
        if *said < self.burst {
            *said += 1;
            true
        } else {
            self.hidden += 1;
            false
        }
    }

    /// Once the second in which lines were held back is over: how many (to be said as one
    /// line), and a new second begins. `None` otherwise.
    pub fn tick(&mut self, now: Instant) -> Option<u64> {
        let (start, _) = self.window?;
        if self.hidden == 0 || now.duration_since(start) < Duration::from_secs(1) {
            return None;
        }
        self.window = None;
        Some(std::mem::take(&mut self.hidden))
    }

    /// What is held back now, said or not (for the end of a run).
    pub fn take_hidden(&mut self) -> u64 {
        std::mem::take(&mut self.hidden)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::command_queue;

    fn cmd(line: &str) -> Command {
        Command::parse(line).unwrap()
    }

    fn texts(rx: &mut crate::CommandReader) -> Vec<String> {
        std::iter::from_fn(|| rx.pop())
            .map(|p| p.command.to_string())
            .collect()
    }

    /// Issue #21: a flood of `set`s of one property between two reads of the engine reaches
    /// the engine as one `set`, the last; other properties keep theirs, in order; the rest are
    /// counted.
    #[test]
    fn sets_of_one_property_between_two_reads_keep_the_last() {
        let (tx, mut rx) = command_queue(1024);
        let mut c = Coalescer::new();
        let mut results = Vec::new();
        let mut post = |_: usize, r: Result<Ticket, Full>| results.push(r.is_ok());
        // The engine has read nothing yet, and nothing was posted: the first offer is due.
        c.offer(&tx, cmd("set a.x 1"), &mut post);
        assert!(c.due(&tx));
        c.flush(&tx, &mut post);
        assert_eq!(texts(&mut rx), ["set a.x 1"]);
        // The engine read it: due again. Hold a flood, post it once it is read.
        c.offer(&tx, cmd("set a.x 2"), &mut post);
        c.flush(&tx, &mut post);
        c.offer(&tx, cmd("set a.x 3"), &mut post);
        assert!(!c.due(&tx), "the engine has not read 'set a.x 2'");
        for i in 4..1000 {
            c.offer(&tx, cmd(&format!("set a.x {i}")), &mut post);
            c.offer(&tx, cmd(&format!("set b.y {i}")), &mut post);
            c.offer(&tx, cmd("bypass c on"), &mut post);
        }
        c.offer(&tx, cmd("speed 2"), &mut post);
        c.offer(&tx, cmd("tempo 100"), &mut post);
        c.offer(&tx, cmd("speed 3"), &mut post);
        assert_eq!(texts(&mut rx), ["set a.x 2"]);
        std::thread::sleep(MIN_GAP);
        assert!(c.due(&tx), "read, and the gap has passed");
        c.flush(&tx, &mut post);
        assert_eq!(
            texts(&mut rx),
            [
                "set a.x 999",
                "set b.y 999",
                "bypass c on",
                "speed 3",
                "tempo 100"
            ]
        );
        assert_eq!(c.coalesced(), 996 + 995 + 995 + 1);
        assert!(results.iter().all(|&ok| ok));
        assert_eq!(results.len(), 7);
    }

    /// Commands that are not coalesced are posted at once, after what was held, and a `set`
    /// after an oscillator on the same property stays after it.
    #[test]
    fn other_commands_keep_their_place() {
        let (tx, mut rx) = command_queue(64);
        let mut c = Coalescer::new();
        let mut post = |_: usize, r: Result<Ticket, Full>| assert!(r.is_ok());
        c.offer(&tx, cmd("set a.x 1"), &mut post);
        c.flush(&tx, &mut post);
        assert_eq!(texts(&mut rx), ["set a.x 1"]);
        c.offer(&tx, cmd("set a.x 2"), &mut post);
        c.offer(&tx, cmd("set a.x 3"), &mut post);
        c.offer(&tx, cmd("osc a.x sine"), &mut post);
        c.offer(&tx, cmd("set a.x 4"), &mut post);
        c.offer(&tx, cmd("set a.x 5"), &mut post);
        c.offer(&tx, cmd("pause"), &mut post);
        assert_eq!(
            texts(&mut rx),
            [
                "set a.x 3",
                "osc a.x ~sine:1hz:0..1:phase=0",
                "set a.x 5",
                "pause"
            ]
        );
        assert_eq!(c.held(), 0);
    }

    /// An engine that reads nothing (a stalled pipeline): what is held is posted after
    /// `MAX_HOLD` anyway, and a flood makes the surface wait for the engine.
    #[test]
    fn a_stalled_engine_gets_what_is_held_after_max_hold() {
        let (tx, _rx) = command_queue(4096);
        let mut c = Coalescer::new();
        let mut n = 0;
        let mut post = |_: usize, r: Result<Ticket, Full>| {
            assert!(r.is_ok());
            n += 1;
        };
        c.offer(&tx, cmd("set a.x 1"), &mut post);
        c.flush(&tx, &mut post);
        for i in 0..OFFERS_PER_READ {
            c.offer(&tx, cmd(&format!("set a.x {i}")), &mut post);
        }
        assert!(!c.due(&tx));
        assert!(c.should_wait(&tx));
        let t = Instant::now();
        c.settle(&tx, &mut post);
        assert!(t.elapsed() >= MAX_HOLD);
        assert_eq!(n, 2);
        assert!(!c.should_wait(&tx));
    }

    #[test]
    fn log_limit_says_a_burst_then_a_count_a_second() {
        let mut l = LogLimit::new(3);
        let t0 = Instant::now();
        let allowed = (0..100).filter(|_| l.allow(t0)).count();
        assert_eq!(allowed, 3);
        assert_eq!(l.tick(t0 + Duration::from_millis(500)), None);
        assert_eq!(l.tick(t0 + Duration::from_secs(1)), Some(97));
        assert_eq!(l.tick(t0 + Duration::from_secs(2)), None, "said once");
        let t1 = t0 + Duration::from_secs(3);
        assert!(l.allow(t1), "a new second");
        assert_eq!(l.take_hidden(), 0);
    }
}
