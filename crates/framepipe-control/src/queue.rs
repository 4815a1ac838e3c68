//! A bounded, lock-free multi-producer queue of [`Command`]s, read once per frame.

use std::fmt;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use crate::command::Command;

/// How many applied commands the reader may hand back for freeing before the senders collect
/// them; beyond that the reader frees them itself.
const RETIRED_CAPACITY: usize = 256;

struct Shared {
    commands: ArrayQueue<Command>,
    retired: ArrayQueue<Command>,
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
    });
    (
        CommandSender {
            shared: Arc::clone(&shared),
        },
        CommandReader { shared },
    )
}

/// The sending side: clone one per control source (stdin, web, OSC, MIDI).
#[derive(Clone)]
pub struct CommandSender {
    shared: Arc<Shared>,
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
    /// returned in [`Full`].
    pub fn post(&self, cmd: Command) -> Result<(), Full> {
        self.shared.commands.push(cmd).map_err(Full)
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

    /// Commands waiting to be read.
    pub fn pending(&self) -> usize {
        self.shared.commands.len()
    }

    /// The queue's capacity.
    pub fn capacity(&self) -> usize {
        self.shared.commands.capacity()
    }
}

/// The reading side, for the frame path: one per queue, not cloneable.
pub struct CommandReader {
    shared: Arc<Shared>,
}

impl fmt::Debug for CommandReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandReader")
            .field("pending", &self.shared.commands.len())
            .finish()
    }
}

impl CommandReader {
    /// Takes the oldest command, if any. Lock-free, no allocation.
    pub fn pop(&mut self) -> Option<Command> {
        self.shared.commands.pop()
    }

    /// Applies `f` to the commands pending now, oldest first, at most as many as were queued
    /// when the call began (so a busy sender cannot keep the frame path here). Returns how many
    /// were applied. Call once per frame boundary.
    pub fn drain(&mut self, mut f: impl FnMut(Command)) -> usize {
        let n = self.shared.commands.len();
        let mut done = 0;
        while done < n {
            match self.shared.commands.pop() {
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

    /// Commands waiting.
    pub fn pending(&self) -> usize {
        self.shared.commands.len()
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
                tx.post(Command::Stop).unwrap();
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
}
