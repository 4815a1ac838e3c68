//! Floods on a control surface (issue #21): commands coalesced before they reach the engine, and
//! messages about them limited to a few lines a second.
//!
//! The engine applies a command from the next frame to begin, and a frame shows one value per
//! property: of several `set`s of the same property posted within a frame period only the
//! last can ever be seen. A [`Coalescer`] keeps them on the surface's thread instead of in the
//! engine's queue: a command that only the last of its kind counts for (`set` and `bypass` of
//! one target, `speed`, `tempo`) is posted at once unless one of its kind was posted less than
//! [`MIN_GAP`] ago; then it is held, a newer one replacing it, and posted when the gap has
//! passed. So a surface posts at most one command per property per [`MIN_GAP`], however fast
//! its input: the engine (woken by every post) and the replies see a flood at the rate of the
//! frames, not of the input. A command alone, or the first of a burst, is never delayed. Every
//! other command (an oscillator, `tap`, the transport, an edit, a batch) is posted at once,
//! after what is held, so that order is kept.
//!
//! The coalescer does not know the graph, so it cannot tell whether `fx` and `1` name one node:
//! writes that may reach the same property (the same property name on any node but another
//! index; any two `bypass`) keep their order. One posted at once comes after such a held one
//! (posted first, early), and held commands are posted in the order of their last write.
//!
//! A replaced command was never posted: it gets no ticket and no reply; it is counted
//! ([`Coalescer::coalesced`]). A surface that takes more than [`OFFERS_PER_GAP`] commands in a
//! gap waits for the next ([`Coalescer::should_wait`]): its input's writer is held back by its
//! pipe, or the kernel drops datagrams; the surface's thread then costs a bounded share of a
//! CPU whatever the flood.
//!
//! [`LogLimit`] is the other half: a message of one kind (a refusal, a full queue, a bad line)
//! is said at most [`LogLimit::burst`] times a second; the rest are counted and said as one line
//! when the second is over. A flood then costs the log a few lines a second, never a line per
//! message.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::command::{Command, Target};
use crate::queue::{CommandSender, Full, Ticket};

/// The least time between two posts of one property's commands: about a frame period or less
/// (10 ms: 100 a second at most). The surface does not know the show's rate; a frame shows the
/// last value posted before it began anyway. The MIDI surface spaces its values the same way
/// (its frame period, or this when unpaced).
pub const MIN_GAP: Duration = Duration::from_millis(10);

/// How many commands a surface takes from its input in one [`MIN_GAP`] before it waits for the
/// next (a flood is slowed to the engine's pace).
pub const OFFERS_PER_GAP: usize = 256;

/// Properties whose last post is remembered before the old ones are forgotten (a flood of
/// distinct targets must not grow memory).
const RECENT_KEPT: usize = 1024;

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
            Command::Tempo(_) | Command::TempoAuto => Some(Key::Tempo),
            _ => None,
        }
    }

    /// Whether `self` and `other` may write the same property: a node named two ways (a
    /// label, its element's name, its index) is one node, so only the property's name tells,
    /// but two indexes are two nodes; every `bypass` may be any node's.
    fn may_alias(&self, other: &Key) -> bool {
        match (self, other) {
            (Key::Prop(a, p), Key::Prop(b, q)) => p == q && same_node_maybe(a, b),
            (Key::Bypass(a), Key::Bypass(b)) => same_node_maybe(a, b),
            (Key::Speed, Key::Speed) | (Key::Tempo, Key::Tempo) => true,
            _ => false,
        }
    }
}

/// Whether `a` and `b` may name one node (without the graph: a name may be any index).
fn same_node_maybe(a: &Target, b: &Target) -> bool {
    match (a, b) {
        (Target::Index(i), Target::Index(j)) => i == j,
        _ => true,
    }
}

/// One surface's commands on their way to the engine, coalesced (see the module
/// documentation). Owned by the surface's thread; nothing here blocks but
/// [`settle`](Self::settle).
#[derive(Debug, Default)]
pub struct Coalescer {
    /// Commands held, in the order of their last write, with their keys.
    held: Vec<(Key, Command)>,
    /// Where the held command of a key is in `held`.
    index: HashMap<Key, usize>,
    /// When each key was last posted (the recent ones).
    recent: HashMap<Key, Instant>,
    /// When the oldest held command was held.
    since: Option<Instant>,
    /// The current gap's start and the commands offered in it.
    window: Option<(Instant, usize)>,
    /// Commands replaced by a later one.
    coalesced: u64,
}

impl Coalescer {
    /// Nothing held.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes `cmd`: a command that only the last of its kind counts for is posted now, or held
    /// when one of its kind was posted less than [`MIN_GAP`] ago (replacing the one of its kind
    /// held already: counted in [`coalesced`](Self::coalesced)); any other is posted at once,
    /// after everything held. `post` gets, for each command posted, how many commands it
    /// carries (a batch's count, else 1) and [`CommandSender::post`]'s answer.
    pub fn offer(
        &mut self,
        tx: &CommandSender,
        cmd: Command,
        post: &mut dyn FnMut(usize, Result<Ticket, Full>),
    ) {
        let now = Instant::now();
        match &mut self.window {
            Some((start, n)) if now.duration_since(*start) < MIN_GAP => *n += 1,
            w => *w = Some((now, 1)),
        }
        match Key::of(&cmd) {
            Some(key) => {
                if let Some(i) = self.index.remove(&key) {
                    // The newest write goes last: a `set` of the same property through another
                    // alias, held after the replaced one, must land before this one.
                    self.held.remove(i);
                    for (j, (k, _)) in self.held.iter().enumerate().skip(i) {
                        if let Some(at) = self.index.get_mut(k) {
                            *at = j;
                        }
                    }
                    self.index.insert(key.clone(), self.held.len());
                    self.held.push((key, cmd));
                    self.coalesced += 1;
                } else if self
                    .recent
                    .get(&key)
                    .is_some_and(|t| now.duration_since(*t) < MIN_GAP)
                {
                    self.index.insert(key.clone(), self.held.len());
                    self.held.push((key, cmd));
                    self.since.get_or_insert(now);
                } else {
                    // Posted at once, so first what is held that may write the same property
                    // (`fx.amount` held, `1.amount` now: they may be one node's).
                    self.flush_where(tx, post, |k| k.may_alias(&key));
                    self.remember(key, now);
                    send(tx, cmd, post);
                }
            }
            None => {
                self.flush(tx, post);
                send(tx, cmd, post);
            }
        }
    }

    fn remember(&mut self, key: Key, now: Instant) {
        if self.recent.len() >= RECENT_KEPT {
            self.recent.retain(|_, t| now.duration_since(*t) < MIN_GAP);
        }
        self.recent.insert(key, now);
    }

    /// Whether what is held should be posted now: it was held [`MIN_GAP`] already.
    pub fn due(&self) -> bool {
        self.since.is_some_and(|t| t.elapsed() >= MIN_GAP)
    }

    /// Whether the surface should stop taking input until the next gap: it took
    /// [`OFFERS_PER_GAP`] commands in this one.
    pub fn should_wait(&self) -> bool {
        self.window
            .is_some_and(|(start, n)| n >= OFFERS_PER_GAP && start.elapsed() < MIN_GAP)
    }

    /// Sleeps until what is held is [`due`](Self::due) and the current gap is over, then posts
    /// what is held. For a surface about to block on its input (nothing would post what it
    /// holds meanwhile), or one that [`should_wait`](Self::should_wait).
    pub fn settle(
        &mut self,
        tx: &CommandSender,
        post: &mut dyn FnMut(usize, Result<Ticket, Full>),
    ) {
        let until = [
            self.since.map(|t| t + MIN_GAP),
            self.window
                .filter(|&(_, n)| n >= OFFERS_PER_GAP)
                .map(|(t, _)| t + MIN_GAP),
        ]
        .into_iter()
        .flatten()
        .max();
        if let Some(t) = until {
            std::thread::sleep(t.saturating_duration_since(Instant::now()));
        }
        self.window = None;
        self.flush(tx, post);
    }

    /// Posts everything held, in order, now.
    pub fn flush(&mut self, tx: &CommandSender, post: &mut dyn FnMut(usize, Result<Ticket, Full>)) {
        self.flush_where(tx, post, |_| true);
    }

    /// Posts the held commands whose key `which` picks, in order, now; the others stay held.
    fn flush_where(
        &mut self,
        tx: &CommandSender,
        post: &mut dyn FnMut(usize, Result<Ticket, Full>),
        which: impl Fn(&Key) -> bool,
    ) {
        if !self.held.iter().any(|(k, _)| which(k)) {
            return;
        }
        let now = Instant::now();
        let (out, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(k, _)| which(k));
        self.held = kept;
        self.index = self
            .held
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (k.clone(), i))
            .collect();
        if self.held.is_empty() {
            self.since = None;
        }
        for (key, cmd) in out {
            self.remember(key, now);
            send(tx, cmd, post);
        }
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

/// Posts `cmd`, telling `post` how many commands it carries.
fn send(tx: &CommandSender, cmd: Command, post: &mut dyn FnMut(usize, Result<Ticket, Full>)) {
    let n = match &cmd {
        Command::Batch(cmds) => cmds.len(),
        _ => 1,
    };
    post(n, tx.post(cmd));
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

    /// Issue #21: a flood of `set`s of one property within a gap reaches the engine as the
    /// first (at once) and the last (after the gap); other properties keep theirs, in order;
    /// the rest are counted.
    #[test]
    fn sets_of_one_property_within_a_gap_keep_the_first_and_the_last() {
        let (tx, mut rx) = command_queue(1024);
        let mut c = Coalescer::new();
        let mut results = Vec::new();
        let mut post = |_: usize, r: Result<Ticket, Full>| results.push(r.is_ok());
        // A command alone is posted at once.
        c.offer(&tx, cmd("set a.x 1"), &mut post);
        assert_eq!(texts(&mut rx), ["set a.x 1"]);
        // The same property again within the gap: held, the newest replacing the older.
        // (Short loops: all of it within one gap.)
        for i in 2..100 {
            c.offer(&tx, cmd(&format!("set a.x {i}")), &mut post);
        }
        c.offer(&tx, cmd("set b.y 1"), &mut post);
        for i in 2..100 {
            c.offer(&tx, cmd(&format!("set b.y {i}")), &mut post);
            c.offer(&tx, cmd("bypass c on"), &mut post);
        }
        c.offer(&tx, cmd("speed 2"), &mut post);
        c.offer(&tx, cmd("tempo 100"), &mut post);
        c.offer(&tx, cmd("speed 3"), &mut post);
        assert_eq!(
            texts(&mut rx),
            ["set b.y 1", "bypass c on", "speed 2", "tempo 100"],
            "the first of each, at once"
        );
        assert!(!c.due() || c.held() == 0);
        c.settle(&tx, &mut post);
        assert_eq!(
            texts(&mut rx),
            ["set a.x 99", "set b.y 99", "bypass c on", "speed 3"]
        );
        assert_eq!(c.coalesced(), 97 + 97 + 96);
        // After the gap, a command alone goes at once again.
        std::thread::sleep(MIN_GAP);
        c.offer(&tx, cmd("set a.x 5"), &mut post);
        assert_eq!(texts(&mut rx), ["set a.x 5"]);
        assert!(results.iter().all(|&ok| ok));
        assert_eq!(results.len(), 10);
    }

    /// Commands that are not coalesced are posted at once, after what was held, and a `set`
    /// after an oscillator on the same property stays after it.
    #[test]
    fn other_commands_keep_their_place() {
        let (tx, mut rx) = command_queue(64);
        let mut c = Coalescer::new();
        let mut post = |_: usize, r: Result<Ticket, Full>| assert!(r.is_ok());
        c.offer(&tx, cmd("set a.x 1"), &mut post);
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

    /// One node named two ways (`fx`, and its index `1`) is one property: a write through one
    /// name never lands before an older one through the other, whether the newer is posted at
    /// once (what may alias it is posted first) or held (the newest write is posted last).
    /// Two indexes, or two property names, are two properties: nothing is posted early.
    #[test]
    fn writes_to_one_property_through_two_names_keep_their_order() {
        let (tx, mut rx) = command_queue(64);
        let mut c = Coalescer::new();
        let mut post = |_: usize, r: Result<Ticket, Full>| assert!(r.is_ok());
        c.offer(&tx, cmd("set fx.amount 1"), &mut post);
        c.offer(&tx, cmd("set fx.amount 2"), &mut post);
        assert_eq!(c.held(), 1);
        c.offer(&tx, cmd("set 1.amount 3"), &mut post);
        assert_eq!(
            texts(&mut rx),
            ["set fx.amount 1", "set fx.amount 2", "set 1.amount 3"]
        );
        // Both held now; the newest write, through the first name, is posted last.
        c.offer(&tx, cmd("set fx.amount 4"), &mut post);
        c.offer(&tx, cmd("set 1.amount 5"), &mut post);
        c.offer(&tx, cmd("set fx.amount 6"), &mut post);
        assert_eq!(texts(&mut rx), Vec::<String>::new());
        c.flush(&tx, &mut post);
        assert_eq!(texts(&mut rx), ["set 1.amount 5", "set fx.amount 6"]);
        // Any held bypass may be the node's.
        c.offer(&tx, cmd("bypass fx on"), &mut post);
        c.offer(&tx, cmd("bypass fx off"), &mut post);
        c.offer(&tx, cmd("bypass 2 on"), &mut post);
        assert_eq!(
            texts(&mut rx),
            ["bypass fx on", "bypass fx off", "bypass 2 on"]
        );
        // Not the same property: what is held stays held.
        c.offer(&tx, cmd("set 2.mix 1"), &mut post);
        c.offer(&tx, cmd("set 2.mix 2"), &mut post);
        c.offer(&tx, cmd("set 3.mix 1"), &mut post);
        c.offer(&tx, cmd("set fx.other 1"), &mut post);
        assert_eq!(
            texts(&mut rx),
            ["set 2.mix 1", "set 3.mix 1", "set fx.other 1"]
        );
        assert_eq!(c.held(), 1);
        c.flush(&tx, &mut post);
        assert_eq!(texts(&mut rx), ["set 2.mix 2"]);
    }

    /// A flood makes the surface wait for the next gap; what it holds is posted then.
    #[test]
    fn a_flood_waits_for_the_next_gap() {
        let (tx, mut rx) = command_queue(4096);
        let mut c = Coalescer::new();
        let mut post = |_: usize, r: Result<Ticket, Full>| assert!(r.is_ok());
        let t = Instant::now();
        for i in 0..OFFERS_PER_GAP {
            c.offer(&tx, cmd(&format!("set a.x {i}")), &mut post);
        }
        if t.elapsed() < MIN_GAP {
            assert!(c.should_wait());
        }
        c.settle(&tx, &mut post);
        assert!(t.elapsed() >= MIN_GAP);
        assert!(!c.should_wait());
        assert_eq!(
            texts(&mut rx),
            [
                "set a.x 0".to_string(),
                format!("set a.x {}", OFFERS_PER_GAP - 1)
            ]
        );
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
