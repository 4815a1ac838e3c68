//! A bounded, lock-free multi-producer queue of [`Command`]s, read once per frame.
//!
//! Beside the ring, a transport side channel of atomics makes sure that the commands which
//! end or unblock a run are never lost to a full queue:
//! * `stop` is always posted there and read before anything else (stop wins: commands still
//!   queued before it are not applied, the run ends at the next frame boundary);
//! * `pause` and `resume` go into the ring like any command; when it is full they wait in the
//!   side channel instead (the newest one if several), and are read in their place — after the
//!   commands that were queued before them;
//! * when the last [`CommandSender`] is dropped (stdin reached its end) the reader yields
//!   [`Command::EndOfInput`] once, after every command: a paused run then stops instead of
//!   waiting for ever for a `resume` that cannot come.
//!
//! [`Stopper`] posts only `stop` and is not a command source (a signal handler's thread holds
//! one); it does not delay [`Command::EndOfInput`].

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use crate::command::Command;

/// How many applied commands the reader may hand back for freeing before the senders collect
/// them; beyond that the reader frees them itself.
const RETIRED_CAPACITY: usize = 256;

/// `urgent`'s low two bits: which transport command waits there (0: none).
const URGENT_PAUSE: u64 = 1;
const URGENT_RESUME: u64 = 2;
const URGENT_KIND: u64 = 3;

struct Shared {
    commands: ArrayQueue<Command>,
    retired: ArrayQueue<Command>,
    /// A `stop` was posted and not yet read.
    stop: AtomicBool,
    /// A `pause`/`resume` that found the ring full: its kind in the low two bits, above them the
    /// number of commands pushed into the ring before it (it is read after those). 0: none.
    urgent: AtomicU64,
    /// Commands pushed into the ring so far.
    pushed: AtomicU64,
    /// Live [`CommandSender`]s.
    senders: AtomicUsize,
}

/// A full queue's refusal: the command comes back to the sender, who may retry, report, or
/// give up; it is never dropped silently.
#[derive(Debug, Clone, PartialEq)]
pub struct Full(pub Command);

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "command queue full: '{}' not accepted; the engine reads commands once per frame \
             (is it paused or stalled?)",
            self.0
        )
    }
}

impl std::error::Error for Full {}

/// Creates a command queue holding at most `capacity` (≥ 1) commands: one reader for the
/// frame path and any number of senders (clone the [`CommandSender`]). Allocates here, once.
pub fn command_queue(capacity: usize) -> (CommandSender, CommandReader) {
    let shared = Arc::new(Shared {
        commands: ArrayQueue::new(capacity.max(1)),
        retired: ArrayQueue::new(RETIRED_CAPACITY),
        stop: AtomicBool::new(false),
        urgent: AtomicU64::new(0),
        pushed: AtomicU64::new(0),
        senders: AtomicUsize::new(1),
    });
    (
        CommandSender {
            shared: Arc::clone(&shared),
        },
        CommandReader {
            shared,
            popped: 0,
            end_delivered: false,
        },
    )
}

/// The sending side: clone one per control source (stdin, web, OSC, MIDI). When the last one
/// is dropped the reader sees [`Command::EndOfInput`] after the commands already posted.
pub struct CommandSender {
    shared: Arc<Shared>,
}

impl Clone for CommandSender {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        CommandSender {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for CommandSender {
    fn drop(&mut self) {
        // Release: every push of this sender happens before the reader sees the count fall.
        self.shared.senders.fetch_sub(1, Ordering::Release);
    }
}

impl fmt::Debug for CommandSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandSender")
            .field("pending", &self.shared.commands.len())
            .field("capacity", &self.shared.commands.capacity())
            .finish()
    }
}

impl CommandSender {
    /// Posts a command without blocking (lock-free). When the queue is full the command is
    /// returned in [`Full`] — except `stop`, `pause` and `resume`, which are never refused:
    /// `stop` always goes to the side channel and is read first, `pause`/`resume` wait there
    /// when the ring is full (see the module documentation).
    pub fn post(&self, cmd: Command) -> Result<(), Full> {
        let urgent_kind = match cmd {
            Command::Stop => {
                self.shared.stop.store(true, Ordering::Release);
                return Ok(());
            }
            Command::Pause => URGENT_PAUSE,
            Command::Resume => URGENT_RESUME,
            _ => 0,
        };
        match self.shared.commands.push(cmd) {
            Ok(()) => {
                self.shared.pushed.fetch_add(1, Ordering::AcqRel);
                Ok(())
            }
            Err(cmd) if urgent_kind == 0 => Err(Full(cmd)),
            Err(_) => {
                let after = self.shared.pushed.load(Ordering::Acquire);
                self.shared
                    .urgent
                    .store(after << 2 | urgent_kind, Ordering::Release);
                Ok(())
            }
        }
    }

    /// A handle that can only post `stop` (for a signal handler), and does not count as a
    /// command source: holding it does not delay [`Command::EndOfInput`].
    pub fn stopper(&self) -> Stopper {
        Stopper {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Frees the commands the reader has applied and retired (see
    /// [`CommandReader::retire`]); returns how many. Call it from the sender's thread now and
    /// then, e.g. after each posted line.
    pub fn collect_retired(&self) -> usize {
        let mut n = 0;
        while self.shared.retired.pop().is_some() {
            n += 1;
        }
        n
    }

    /// Commands waiting to be read (in the ring and in the side channel).
    pub fn pending(&self) -> usize {
        self.shared.commands.len()
            + self.shared.stop.load(Ordering::Acquire) as usize
            + (self.shared.urgent.load(Ordering::Acquire) != 0) as usize
    }

    /// The ring's capacity.
    pub fn capacity(&self) -> usize {
        self.shared.commands.capacity()
    }
}

/// Posts `stop` and nothing else; see [`CommandSender::stopper`]. Lock-free and
/// allocation-free: an atomic store.
#[derive(Clone)]
pub struct Stopper {
    shared: Arc<Shared>,
}

impl fmt::Debug for Stopper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stopper").finish_non_exhaustive()
    }
}

impl Stopper {
    /// Asks the run to stop at the next frame boundary; read before every queued command.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
    }
}

/// The reading side, for the frame path: one per queue, not cloneable.
pub struct CommandReader {
    shared: Arc<Shared>,
    /// Commands taken from the ring so far (orders a side-channel `pause`/`resume`).
    popped: u64,
    /// [`Command::EndOfInput`] was handed out.
    end_delivered: bool,
}

impl fmt::Debug for CommandReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandReader")
            .field("pending", &self.pending())
            .finish()
    }
}

impl CommandReader {
    /// Takes the next command, if any: a posted `stop` first, then the ring in order with a
    /// side-channel `pause`/`resume` in its place, then, once, [`Command::EndOfInput`] when
    /// every sender is gone. Lock-free, no allocation.
    pub fn pop(&mut self) -> Option<Command> {
        let shared = &*self.shared;
        if shared.stop.swap(false, Ordering::AcqRel) {
            return Some(Command::Stop);
        }
        let urgent = shared.urgent.load(Ordering::Acquire);
        if urgent != 0 && urgent >> 2 <= self.popped {
            if let Some(c) = self.take_urgent(urgent) {
                return Some(c);
            }
        }
        if let Some(c) = self.shared.commands.pop() {
            self.popped += 1;
            return Some(c);
        }
        // The ring is empty: whatever waits in the side channel has no predecessor left.
        let urgent = self.shared.urgent.load(Ordering::Acquire);
        if urgent != 0 {
            if let Some(c) = self.take_urgent(urgent) {
                return Some(c);
            }
        }
        if !self.end_delivered && self.all_senders_gone() {
            self.end_delivered = true;
            return Some(Command::EndOfInput);
        }
        None
    }

    /// Takes the side channel's `pause`/`resume` if it is still `seen` (a sender may have put
    /// a newer one there meanwhile; that one is then read on the next call).
    fn take_urgent(&self, seen: u64) -> Option<Command> {
        self.shared
            .urgent
            .compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        Some(if seen & URGENT_KIND == URGENT_PAUSE {
            Command::Pause
        } else {
            Command::Resume
        })
    }

    /// No sender left and nothing of theirs still to read.
    fn all_senders_gone(&self) -> bool {
        // Acquire pairs with the senders' Release in `drop`: their pushes are visible now.
        self.shared.senders.load(Ordering::Acquire) == 0
            && self.shared.commands.is_empty()
            && self.shared.urgent.load(Ordering::Acquire) == 0
    }

    /// Applies `f` to the commands pending now, oldest first, at most as many as were queued
    /// when the call began (so a busy sender cannot keep the frame path here). Returns how many
    /// were applied. Call once per frame boundary.
    pub fn drain(&mut self, mut f: impl FnMut(Command)) -> usize {
        let n = self.pending();
        let mut done = 0;
        while done < n {
            match self.pop() {
                Some(c) => f(c),
                None => break,
            }
            done += 1;
        }
        done
    }

    /// Hands an applied command back so that a sender frees its text, keeping deallocation off
    /// the frame path. If the retired ring is full (no sender collects), the command is
    /// dropped here after all.
    pub fn retire(&mut self, cmd: Command) {
        let _ = self.shared.retired.push(cmd);
    }

    /// Commands waiting, side channel and [`Command::EndOfInput`] included: when it is not
    /// zero, [`pop`](Self::pop) has something.
    pub fn pending(&self) -> usize {
        self.shared.commands.len()
            + self.shared.stop.load(Ordering::Acquire) as usize
            + (self.shared.urgent.load(Ordering::Acquire) != 0) as usize
            + (!self.end_delivered && self.shared.senders.load(Ordering::Acquire) == 0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_queue_returns_the_command() {
        let (tx, mut rx) = command_queue(2);
        tx.post(Command::Pause).unwrap();
        tx.post(Command::Step(1)).unwrap();
        let refused = Command::parse("set frei0r-glow.blur 0.7").unwrap();
        let err = tx.post(refused.clone()).unwrap_err();
        assert_eq!(err, Full(refused.clone()));
        assert!(
            err.to_string().contains("set frei0r-glow.blur 0.7"),
            "{err}"
        );
        // Nothing was lost: the two queued come out in order, and after that the refused one
        // can be posted again.
        assert_eq!(rx.pop(), Some(Command::Pause));
        tx.post(err.0).unwrap();
        assert_eq!(rx.pop(), Some(Command::Step(1)));
        assert_eq!(rx.pop(), Some(refused));
        assert_eq!(rx.pop(), None);
    }

    #[test]
    fn several_senders_nothing_lost_in_order_per_sender() {
        let (tx, mut rx) = command_queue(64);
        let senders: Vec<_> = (0..3u32)
            .map(|s| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for i in 0..2000u32 {
                        let mut c = Command::Step(s * 10_000 + i + 1);
                        // Busy reader: retry with the command we got back.
                        loop {
                            match tx.post(c) {
                                Ok(()) => break,
                                Err(Full(back)) => {
                                    c = back;
                                    std::thread::yield_now();
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        let mut last = [0u32; 3];
        let mut got = 0;
        while got < 6000 {
            rx.drain(|c| {
                let Command::Step(v) = c else { panic!("{c:?}") };
                let (s, i) = ((v - 1) / 10_000, (v - 1) % 10_000 + 1);
                assert_eq!(i, last[s as usize] + 1, "sender {s} out of order");
                last[s as usize] = i;
                got += 1;
            });
            std::thread::yield_now();
        }
        for s in senders {
            s.join().unwrap();
        }
        assert_eq!(last, [2000; 3]);
    }

    #[test]
    fn drain_takes_only_what_was_there() {
        let (tx, mut rx) = command_queue(8);
        for n in 1..=3 {
            tx.post(Command::Step(n)).unwrap();
        }
        let mut seen = Vec::new();
        let n = rx.drain(|c| {
            // A command posted while draining waits for the next frame.
            if seen.is_empty() {
                tx.post(Command::Step(9)).unwrap();
            }
            seen.push(c);
        });
        assert_eq!(n, 3);
        assert_eq!(seen, [Command::Step(1), Command::Step(2), Command::Step(3)]);
        assert_eq!(rx.pending(), 1);
    }

    #[test]
    fn retired_commands_are_freed_by_the_sender() {
        let (tx, mut rx) = command_queue(4);
        tx.post(Command::parse("set a.b hello").unwrap()).unwrap();
        let c = rx.pop().unwrap();
        rx.retire(c);
        assert_eq!(tx.collect_retired(), 1);
        assert_eq!(tx.collect_retired(), 0);
    }

    /// Issue #7: `stop` was refused when the queue was full (e.g. a burst of commands while
    /// paused), and the run could not be stopped. Now it is read first, whatever is queued.
    #[test]
    fn stop_is_never_lost_to_a_full_queue() {
        let (tx, mut rx) = command_queue(4);
        for n in 1..=4 {
            tx.post(Command::Step(n)).unwrap();
        }
        assert!(tx.post(Command::Step(5)).is_err(), "the ring is full");
        tx.post(Command::Stop).unwrap();
        assert_eq!(rx.pending(), 5);
        assert_eq!(rx.pop(), Some(Command::Stop), "stop wins");
        assert_eq!(rx.pop(), Some(Command::Step(1)));
        // A stopper (a signal handler's) does the same without being a command source.
        let stopper = tx.stopper();
        stopper.stop();
        assert_eq!(rx.pop(), Some(Command::Stop));
    }

    #[test]
    fn pause_and_resume_are_never_lost_to_a_full_queue_and_keep_their_place() {
        let (tx, mut rx) = command_queue(2);
        tx.post(Command::Step(1)).unwrap();
        tx.post(Command::Step(2)).unwrap();
        tx.post(Command::Pause).unwrap();
        assert!(tx.post(Command::Step(3)).is_err());
        assert_eq!(rx.pending(), 3);
        // Read after the two queued before it.
        assert_eq!(rx.pop(), Some(Command::Step(1)));
        tx.post(Command::Step(4)).unwrap(); // posted after the pause
        assert_eq!(rx.pop(), Some(Command::Step(2)));
        assert_eq!(rx.pop(), Some(Command::Pause));
        assert_eq!(rx.pop(), Some(Command::Step(4)));
        // Full again: the newest of several waits, the last word counts.
        tx.post(Command::Step(5)).unwrap();
        tx.post(Command::Step(6)).unwrap();
        tx.post(Command::Pause).unwrap();
        tx.post(Command::Resume).unwrap();
        let mut got = Vec::new();
        rx.drain(|c| got.push(c));
        assert_eq!(got, [Command::Step(5), Command::Step(6), Command::Resume]);
        assert_eq!(rx.pop(), None);
    }

    #[test]
    fn end_of_input_comes_once_after_every_command_of_every_sender() {
        let (tx, mut rx) = command_queue(8);
        let stopper = tx.stopper();
        let tx2 = tx.clone();
        tx.post(Command::Pause).unwrap();
        drop(tx);
        assert_eq!(rx.pop(), Some(Command::Pause));
        assert_eq!(rx.pop(), None, "one sender is left");
        tx2.post(Command::Step(2)).unwrap();
        drop(tx2);
        assert_eq!(rx.pending(), 2);
        assert_eq!(rx.pop(), Some(Command::Step(2)));
        assert_eq!(
            rx.pop(),
            Some(Command::EndOfInput),
            "a stopper is no source"
        );
        assert_eq!(rx.pending(), 0);
        assert_eq!(rx.pop(), None, "once");
        stopper.stop();
        assert_eq!(rx.pop(), Some(Command::Stop));
    }
}
