//! A bounded, lock-free multi-producer queue of [`Command`]s, read once per frame, with a
//! bounded lock-free return path of [`Reply`]s.
//!
//! Every command a [`CommandSender`] posts gets a [`Ticket`] from [`CommandSender::post`] and,
//! later, exactly one [`Reply`] carrying that ticket and the command: [`Outcome::Applied`] with
//! the frame it took effect at, or [`Outcome::Refused`] with a one-line reason. Replies are read
//! with a [`Replies`] handle ([`CommandSender::replies`]); reading them also frees the commands'
//! text off the frame path. When the return path is full (nobody reads it), a reply is counted
//! ([`Replies::dropped`]) and dropped, never silently lost. Commands still unread when the
//! engine's [`CommandReader`] is dropped (the run ended) are refused then, and a command posted
//! after that is refused at once.
//!
//! Beside the ring, a transport side channel makes sure that the commands which end or unblock
//! a run are never lost to a full queue:
//! * `stop` is always posted there and read before anything else (stop wins: commands still
//!   queued before it are not applied, they are refused when the run ends);
//! * `pause` and `resume` go into the ring like any command; when it is full they wait in the
//!   side channel instead (the newest one if several: the one it replaces is refused as
//!   superseded), and are read in their place — after the commands that were queued before them;
//! * when the last [`CommandSender`] is dropped (stdin reached its end) the reader yields
//!   [`Command::EndOfInput`] once, after every command: a paused run then stops instead of
//!   waiting for ever for a `resume` that cannot come.
//!
//! [`Stopper`] posts only `stop` and is not a command source (a signal handler's thread holds
//! one); it does not delay [`Command::EndOfInput`], and its stops get no reply.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_queue::ArrayQueue;

use crate::command::Command;

/// Room on the return path beyond the ring's capacity: replies produced by the side channel
/// (`stop`, `pause`/`resume` waiting there) and by commands refused at the end of a run.
const REPLY_SLACK: usize = 64;

/// `stop`s of senders that may wait to be read at once; more are refused as not needed.
const STOP_CAPACITY: usize = 8;

/// `Shared::stopped_at` when no `stop` was applied.
const NOT_STOPPED: u64 = u64::MAX;

/// A posted command's number: unique in its queue and increasing in the order of posting (a
/// post refused for a full queue uses one up). Its [`Reply`] carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

impl fmt::Display for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// What became of a posted command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Applied. `frame` is a frame number (`FrameCtx::seq`, 0 = the run's first frame):
    /// * a parameter command (`set`, `osc`, `unosc`, `bypass`, `speed`, `tempo`, `tap`): the
    ///   first frame processed with it — every stage of frame `frame` sees the new value, no
    ///   stage of frame `frame - 1` does;
    /// * a transport command (`pause`, `step`, `resume`, `stop`): the boundary it acted at, named
    ///   by the frame after it — the next frame the master output would release when the command
    ///   was read: the first frame held (`pause`), released by the step or after the resume
    ///   (`step`, `resume`; later when a deadline must pass first), or never released (`stop`).
    ///
    /// If the run ends before frame `frame`, no frame showed the command.
    Applied {
        /// See above.
        frame: u64,
    },
    /// Not applied; one line saying why, naming the offending value.
    Refused {
        /// Why.
        reason: Cow<'static, str>,
    },
}

/// The answer to one posted command.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// What [`CommandSender::post`] returned for it.
    pub ticket: Ticket,
    /// The command itself (handed back, so that its text is freed by the reader of replies).
    pub command: Command,
    /// Applied at a frame, or refused.
    pub outcome: Outcome,
}

impl fmt::Display for Reply {
    /// `ok 'set glow.blur 0.3' from frame 123`, or `refused 'set glow.blurr 1': unknown ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Outcome::Applied { frame } => write!(f, "ok '{}' from frame {frame}", self.command),
            Outcome::Refused { reason } => write!(f, "refused '{}': {reason}", self.command),
        }
    }
}

/// A command as the reader takes it, with the ticket to reply to (`None` for what no sender
/// posted: [`Command::EndOfInput`] and a [`Stopper`]'s `stop`).
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    /// Its ticket, if a sender posted it.
    pub ticket: Option<Ticket>,
    /// The command.
    pub command: Command,
}

/// A `pause`/`resume` waiting in the side channel.
#[derive(Debug, Clone, Copy)]
struct Urgent {
    ticket: Ticket,
    pause: bool,
    /// Commands pushed into the ring before it (it is read after those).
    after: u64,
}

impl Urgent {
    fn command(&self) -> Command {
        if self.pause {
            Command::Pause
        } else {
            Command::Resume
        }
    }

    /// The reply of this one when `by` took its place.
    fn superseded(self, by: &Urgent) -> Reply {
        let reason = if by.pause {
            "superseded by a later 'pause' while the queue was full (the last word counts)"
        } else {
            "superseded by a later 'resume' while the queue was full (the last word counts)"
        };
        Reply {
            ticket: self.ticket,
            command: self.command(),
            outcome: Outcome::Refused {
                reason: Cow::Borrowed(reason),
            },
        }
    }
}

const ENDED: &str = "not applied: the run ended before it was read";
const STOPPED: &str = "not applied: the run stopped first ('stop' is read before queued commands)";

struct Shared {
    commands: ArrayQueue<(Ticket, Command)>,
    replies: ArrayQueue<Reply>,
    /// Replies that found the return path full.
    dropped: AtomicU64,
    /// The next ticket.
    tickets: AtomicU64,
    /// A [`Stopper`]'s `stop` was posted and not yet read.
    stop: AtomicBool,
    /// Senders' `stop`s not yet read.
    stops: ArrayQueue<Ticket>,
    /// A `pause`/`resume` that found the ring full (the newest one).
    urgent: ArrayQueue<Urgent>,
    /// Commands pushed into the ring so far.
    pushed: AtomicU64,
    /// Live [`CommandSender`]s.
    senders: AtomicUsize,
    /// The reader is gone: whatever is unread is refused.
    gone: AtomicBool,
    /// The frame a `stop` was applied at ([`NOT_STOPPED`]: none).
    stopped_at: AtomicU64,
    /// Called after every post (and a `stop`, and the last sender's going): wakes the reader's
    /// thread, so that it need not poll the queue ([`CommandReader::set_waker`]).
    waker: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Shared {
    /// Wakes the reader, if it said how.
    fn wake(&self) {
        if let Some(w) = self.waker.get() {
            w();
        }
    }

    /// Puts `r` on the return path, or counts it as dropped (and drops it) when full.
    fn reply(&self, r: Reply) {
        if self.replies.push(r).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The reply to a `stop` read after the run stopped or ended.
    fn late_stop(&self, ticket: Ticket) -> Reply {
        let at = self.stopped_at.load(Ordering::Acquire);
        Reply {
            ticket,
            command: Command::Stop,
            outcome: if at == NOT_STOPPED {
                Outcome::Refused {
                    reason: Cow::Borrowed(ENDED),
                }
            } else {
                Outcome::Applied { frame: at }
            },
        }
    }

    /// Why a command unread at the end was not applied.
    fn unread_reason(&self) -> Cow<'static, str> {
        Cow::Borrowed(if self.stopped_at.load(Ordering::Acquire) == NOT_STOPPED {
            ENDED
        } else {
            STOPPED
        })
    }

    /// Answers everything still unread (the reader is gone): the run ended before it.
    fn flush_unread(&self) {
        while let Some(t) = self.stops.pop() {
            self.reply(self.late_stop(t));
        }
        if let Some(u) = self.urgent.pop() {
            self.reply(Reply {
                ticket: u.ticket,
                command: u.command(),
                outcome: Outcome::Refused {
                    reason: self.unread_reason(),
                },
            });
        }
        while let Some((ticket, command)) = self.commands.pop() {
            self.reply(Reply {
                ticket,
                command,
                outcome: Outcome::Refused {
                    reason: self.unread_reason(),
                },
            });
        }
    }
}

/// A full queue's refusal: the command comes back to the sender, who may retry, report, or
/// give up; it is never dropped silently. (It got no ticket and will get no reply.)
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
/// frame path and any number of senders (clone the [`CommandSender`]), and a return path for
/// `capacity` + 64 replies. Allocates here, once.
pub fn command_queue(capacity: usize) -> (CommandSender, CommandReader) {
    let capacity = capacity.max(1);
    let shared = Arc::new(Shared {
        commands: ArrayQueue::new(capacity),
        replies: ArrayQueue::new(capacity + REPLY_SLACK),
        dropped: AtomicU64::new(0),
        tickets: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        stops: ArrayQueue::new(STOP_CAPACITY),
        urgent: ArrayQueue::new(1),
        pushed: AtomicU64::new(0),
        senders: AtomicUsize::new(1),
        gone: AtomicBool::new(false),
        stopped_at: AtomicU64::new(NOT_STOPPED),
        waker: OnceLock::new(),
    });
    (
        CommandSender {
            shared: Arc::clone(&shared),
        },
        CommandReader {
            shared,
            popped: 0,
            held: None,
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
        if self.shared.senders.fetch_sub(1, Ordering::Release) == 1 {
            // The reader has an end of input to read.
            self.shared.wake();
        }
    }
}

impl fmt::Debug for CommandSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandSender")
            .field("pending", &self.pending())
            .field("capacity", &self.shared.commands.capacity())
            .finish()
    }
}

impl CommandSender {
    /// Posts a command without blocking (lock-free); returns its [`Ticket`], which its
    /// [`Reply`] will carry. When the queue is full the command is returned in [`Full`] (no
    /// reply follows) — except `stop`, `pause` and `resume`, which are never refused: `stop`
    /// always goes to the side channel and is read first, `pause`/`resume` wait there when the
    /// ring is full (see the module documentation).
    ///
    /// A [`Command::Tap`] without a time is stamped here with
    /// [`monotonic_ns`](crate::monotonic_ns): tap tempo measures the intervals between posts.
    pub fn post(&self, mut cmd: Command) -> Result<Ticket, Full> {
        if let Command::Tap { at_ns: at @ None } = &mut cmd {
            *at = Some(crate::beat::monotonic_ns());
        }
        if let Command::Batch(cmds) = &mut cmd {
            for c in cmds {
                if let Command::Tap { at_ns: at @ None } = c {
                    *at = Some(crate::beat::monotonic_ns());
                }
            }
        }
        let shared = &*self.shared;
        let ticket = Ticket(shared.tickets.fetch_add(1, Ordering::Relaxed));
        let pause = match cmd {
            Command::Stop => {
                if shared.stops.push(ticket).is_err() {
                    // Enough stops wait already; make sure one is read, and say so.
                    shared.stop.store(true, Ordering::Release);
                    shared.reply(Reply {
                        ticket,
                        command: cmd,
                        outcome: Outcome::Refused {
                            reason: Cow::Borrowed("not needed: the run is already stopping"),
                        },
                    });
                }
                self.after_post();
                return Ok(ticket);
            }
            Command::Pause => Some(true),
            Command::Resume => Some(false),
            _ => None,
        };
        match shared.commands.push((ticket, cmd)) {
            Ok(()) => {
                shared.pushed.fetch_add(1, Ordering::AcqRel);
            }
            Err((_, cmd)) => {
                let Some(pause) = pause else {
                    return Err(Full(cmd));
                };
                let u = Urgent {
                    ticket,
                    pause,
                    after: shared.pushed.load(Ordering::Acquire),
                };
                if let Some(old) = shared.urgent.force_push(u) {
                    shared.reply(old.superseded(&u));
                }
            }
        }
        self.after_post();
        Ok(ticket)
    }

    /// After a post: if the reader is gone, answer what it will never read.
    fn after_post(&self) {
        // SeqCst with the reader's store in `drop`: either the reader's final flush sees this
        // post, or this load sees the reader gone and flushes it here.
        if self.shared.gone.load(Ordering::SeqCst) {
            self.shared.flush_unread();
        }
        self.shared.wake();
    }

    /// A handle that can only post `stop` (for a signal handler), and does not count as a
    /// command source: holding it does not delay [`Command::EndOfInput`].
    pub fn stopper(&self) -> Stopper {
        Stopper {
            shared: Arc::clone(&self.shared),
        }
    }

    /// A handle on the return path, to read the [`Reply`]s; it does not count as a command
    /// source. All senders of a queue share one return path: a surface that shares the queue
    /// with another must match replies by [`Ticket`].
    pub fn replies(&self) -> Replies {
        Replies {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Commands waiting to be read (in the ring and in the side channel).
    pub fn pending(&self) -> usize {
        self.shared.commands.len()
            + self.shared.stop.load(Ordering::Acquire) as usize
            + self.shared.stops.len()
            + self.shared.urgent.len()
    }

    /// The ring's capacity.
    pub fn capacity(&self) -> usize {
        self.shared.commands.capacity()
    }
}

/// The return path of a command queue: the [`Reply`]s to posted commands, oldest first (in
/// the order the engine answered them). Lock-free; reading a reply frees its command here.
#[derive(Clone)]
pub struct Replies {
    shared: Arc<Shared>,
}

impl fmt::Debug for Replies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replies")
            .field("waiting", &self.shared.replies.len())
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl Replies {
    /// The oldest reply not yet taken, if any. Never blocks.
    pub fn take(&self) -> Option<Reply> {
        self.shared.replies.pop()
    }

    /// Replies dropped so far because the return path was full (nobody took them).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// The engine's reader is gone (the run ended) and every command was answered: no more
    /// replies come, except to commands posted from now on (refused at once).
    pub fn engine_gone(&self) -> bool {
        self.shared.gone.load(Ordering::SeqCst)
    }
}

/// Posts `stop` and nothing else; see [`CommandSender::stopper`]. Lock-free and
/// allocation-free: an atomic store. Its stops get no reply.
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
        self.shared.wake();
    }
}

/// The reading side, for the frame path: one per queue, not cloneable. When it is dropped (the
/// run ended), whatever is still unread is refused.
pub struct CommandReader {
    shared: Arc<Shared>,
    /// Commands taken from the ring so far (orders a side-channel `pause`/`resume`).
    popped: u64,
    /// A side-channel `pause`/`resume` taken out of it, waiting for its turn.
    held: Option<Urgent>,
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

impl Drop for CommandReader {
    fn drop(&mut self) {
        // Gone first (SeqCst, see `CommandSender::after_post`), then answer what is unread.
        self.shared.gone.store(true, Ordering::SeqCst);
        if let Some(u) = self.held.take() {
            self.shared.reply(Reply {
                ticket: u.ticket,
                command: u.command(),
                outcome: Outcome::Refused {
                    reason: self.shared.unread_reason(),
                },
            });
        }
        self.shared.flush_unread();
    }
}

impl CommandReader {
    /// Takes the next command, if any: a posted `stop` first, then the ring in order with a
    /// side-channel `pause`/`resume` in its place, then, once, [`Command::EndOfInput`] when
    /// every sender is gone. Lock-free, no allocation. Answer it with [`reply`](Self::reply).
    pub fn pop(&mut self) -> Option<Posted> {
        if let Some(t) = self.shared.stops.pop() {
            return Some(Posted {
                ticket: Some(t),
                command: Command::Stop,
            });
        }
        if self.shared.stop.swap(false, Ordering::AcqRel) {
            return Some(Posted {
                ticket: None,
                command: Command::Stop,
            });
        }
        self.refresh_urgent();
        if self.held.is_some_and(|u| u.after <= self.popped) {
            return self.take_held();
        }
        if let Some((ticket, command)) = self.shared.commands.pop() {
            self.popped += 1;
            return Some(Posted {
                ticket: Some(ticket),
                command,
            });
        }
        // The ring is empty: whatever waits in the side channel has no predecessor left.
        self.refresh_urgent();
        if self.held.is_some() {
            return self.take_held();
        }
        if !self.end_delivered && self.all_senders_gone() {
            self.end_delivered = true;
            return Some(Posted {
                ticket: None,
                command: Command::EndOfInput,
            });
        }
        None
    }

    /// Moves a side-channel `pause`/`resume` to `held`; one held already is superseded.
    fn refresh_urgent(&mut self) {
        if let Some(u) = self.shared.urgent.pop() {
            if let Some(old) = self.held.replace(u) {
                self.shared.reply(old.superseded(&u));
            }
        }
    }

    fn take_held(&mut self) -> Option<Posted> {
        self.held.take().map(|u| Posted {
            ticket: Some(u.ticket),
            command: u.command(),
        })
    }

    /// No sender left and nothing of theirs still to read.
    fn all_senders_gone(&self) -> bool {
        // Acquire pairs with the senders' Release in `drop`: their pushes are visible now.
        self.shared.senders.load(Ordering::Acquire) == 0
            && self.shared.commands.is_empty()
            && self.shared.urgent.is_empty()
            && self.held.is_none()
    }

    /// Applies `f` to the commands pending now, oldest first, at most as many as were queued
    /// when the call began (so a busy sender cannot keep the frame path here). Returns how many
    /// were applied. Call once per frame boundary.
    pub fn drain(&mut self, mut f: impl FnMut(Posted)) -> usize {
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

    /// Answers a command taken with [`pop`](Self::pop): the reply, with the command handed
    /// back (so that its text is freed by whoever reads replies, off the frame path), goes on
    /// the return path. Lock-free, no allocation. When the return path is full the reply is
    /// counted as dropped ([`Replies::dropped`]) and freed here after all. What no sender
    /// posted (`ticket` `None`) needs no answer and is dropped (no text to free).
    pub fn reply(&mut self, posted: Posted, outcome: Outcome) {
        if let (Command::Stop, Outcome::Applied { frame }) = (&posted.command, &outcome) {
            // Later stops (read after the run ended) are answered with this frame.
            let _ = self.shared.stopped_at.compare_exchange(
                NOT_STOPPED,
                *frame,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        let Some(ticket) = posted.ticket else { return };
        self.shared.reply(Reply {
            ticket,
            command: posted.command,
            outcome,
        });
    }

    /// Says how to wake the reading thread: `wake` is called after every post, a `stop` and
    /// the last sender's going (from the posting thread: it must be cheap and never block, e.g.
    /// an unpark). Set once; `false` if a waker was set already.
    pub fn set_waker(&self, wake: impl Fn() + Send + Sync + 'static) -> bool {
        self.shared.waker.set(Box::new(wake)).is_ok()
    }

    /// Commands waiting, side channel and [`Command::EndOfInput`] included: when it is not
    /// zero, [`pop`](Self::pop) has something.
    pub fn pending(&self) -> usize {
        self.shared.commands.len()
            + self.shared.stop.load(Ordering::Acquire) as usize
            + self.shared.stops.len()
            + self.shared.urgent.len()
            + self.held.is_some() as usize
            + (!self.end_delivered && self.shared.senders.load(Ordering::Acquire) == 0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader's waker is called after every post that the reader has something to read
    /// for: a command, one refused with the ring full (no: nothing to read), `stop` by a sender
    /// and by a stopper, a `pause` in the side channel, and the last sender's going (the end
    /// of input); and only once set.
    #[test]
    fn the_waker_is_called_for_everything_the_reader_must_read() {
        let (tx, rx) = command_queue(1);
        let woken = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&woken);
        assert!(rx.set_waker(move || {
            count.fetch_add(1, Ordering::SeqCst);
        }));
        assert!(!rx.set_waker(|| {}), "set once");
        let n = || woken.load(Ordering::SeqCst);
        tx.post(Command::parse("set a.b 1").unwrap()).unwrap();
        assert_eq!(n(), 1);
        // The ring is full: refused, nothing new to read.
        assert!(tx.post(Command::parse("set a.b 2").unwrap()).is_err());
        assert_eq!(n(), 1);
        // `pause` goes to the side channel when the ring is full.
        tx.post(Command::Pause).unwrap();
        assert_eq!(n(), 2);
        tx.post(Command::Stop).unwrap();
        assert_eq!(n(), 3);
        tx.stopper().stop();
        assert_eq!(n(), 4);
        let other = tx.clone();
        drop(tx);
        assert_eq!(n(), 4, "another sender is left");
        drop(other);
        assert_eq!(n(), 5, "the last sender went: end of input to read");
    }

    /// The command of what was popped.
    fn c(p: Option<Posted>) -> Option<Command> {
        p.map(|p| p.command)
    }

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
        assert_eq!(c(rx.pop()), Some(Command::Pause));
        tx.post(err.0).unwrap();
        assert_eq!(c(rx.pop()), Some(Command::Step(1)));
        assert_eq!(c(rx.pop()), Some(refused));
        assert_eq!(c(rx.pop()), None);
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
                                Ok(_) => break,
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
            rx.drain(|p| {
                let Command::Step(v) = p.command else {
                    panic!("{p:?}")
                };
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
        let n = rx.drain(|p| {
            // A command posted while draining waits for the next frame.
            if seen.is_empty() {
                tx.post(Command::Step(9)).unwrap();
            }
            seen.push(p.command);
        });
        assert_eq!(n, 3);
        assert_eq!(seen, [Command::Step(1), Command::Step(2), Command::Step(3)]);
        assert_eq!(rx.pending(), 1);
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
        assert_eq!(c(rx.pop()), Some(Command::Stop), "stop wins");
        assert_eq!(c(rx.pop()), Some(Command::Step(1)));
        // A stopper (a signal handler's) does the same without being a command source.
        let stopper = tx.stopper();
        stopper.stop();
        assert_eq!(c(rx.pop()), Some(Command::Stop));
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
        assert_eq!(c(rx.pop()), Some(Command::Step(1)));
        tx.post(Command::Step(4)).unwrap(); // posted after the pause
        assert_eq!(c(rx.pop()), Some(Command::Step(2)));
        assert_eq!(c(rx.pop()), Some(Command::Pause));
        assert_eq!(c(rx.pop()), Some(Command::Step(4)));
        // Full again: the newest of several waits, the last word counts.
        tx.post(Command::Step(5)).unwrap();
        tx.post(Command::Step(6)).unwrap();
        tx.post(Command::Pause).unwrap();
        tx.post(Command::Resume).unwrap();
        let mut got = Vec::new();
        rx.drain(|p| got.push(p.command));
        assert_eq!(got, [Command::Step(5), Command::Step(6), Command::Resume]);
        assert_eq!(c(rx.pop()), None);
    }

    #[test]
    fn end_of_input_comes_once_after_every_command_of_every_sender() {
        let (tx, mut rx) = command_queue(8);
        let stopper = tx.stopper();
        let tx2 = tx.clone();
        tx.post(Command::Pause).unwrap();
        drop(tx);
        assert_eq!(c(rx.pop()), Some(Command::Pause));
        assert_eq!(c(rx.pop()), None, "one sender is left");
        tx2.post(Command::Step(2)).unwrap();
        drop(tx2);
        assert_eq!(rx.pending(), 2);
        assert_eq!(c(rx.pop()), Some(Command::Step(2)));
        assert_eq!(
            c(rx.pop()),
            Some(Command::EndOfInput),
            "a stopper is no source"
        );
        assert_eq!(rx.pending(), 0);
        assert_eq!(c(rx.pop()), None, "once");
        stopper.stop();
        assert_eq!(c(rx.pop()), Some(Command::Stop));
    }

    fn applied(frame: u64) -> Outcome {
        Outcome::Applied { frame }
    }

    /// Issue #9: every posted command gets one reply, carrying its ticket and the command, in
    /// the order the reader answered them.
    #[test]
    fn every_post_gets_one_reply_in_order() {
        let (tx, mut rx) = command_queue(16);
        let replies = tx.replies();
        let cmds: Vec<Command> = (0..10)
            .map(|i| Command::parse(&format!("set fx.p 0.{i}")).unwrap())
            .collect();
        let tickets: Vec<Ticket> = cmds.iter().map(|c| tx.post(c.clone()).unwrap()).collect();
        let mut i = 0;
        while let Some(p) = rx.pop() {
            assert_eq!(p.ticket, Some(tickets[i]));
            let outcome = if i % 3 == 2 {
                Outcome::Refused {
                    reason: Cow::Borrowed("no"),
                }
            } else {
                applied(100 + i as u64)
            };
            rx.reply(p, outcome);
            i += 1;
        }
        let got: Vec<Reply> = std::iter::from_fn(|| replies.take()).collect();
        assert_eq!(got.len(), 10);
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.ticket, tickets[i]);
            assert_eq!(r.command, cmds[i]);
            if i % 3 == 2 {
                assert_eq!(r.to_string(), format!("refused 'set fx.p 0.{i}': no"));
            } else {
                assert_eq!(r.outcome, applied(100 + i as u64));
                assert_eq!(
                    r.to_string(),
                    format!("ok 'set fx.p 0.{i}' from frame {}", 100 + i)
                );
            }
        }
        assert_eq!(replies.dropped(), 0);
        assert!(tickets.windows(2).all(|w| w[0] < w[1]), "increasing");
    }

    /// Issue #9: a return path nobody reads fills up; what does not fit is counted, never
    /// lost silently, and the reader neither blocks nor fails.
    #[test]
    fn a_full_return_path_counts_dropped_replies() {
        let (tx, mut rx) = command_queue(1);
        let replies = tx.replies();
        let room = 1 + REPLY_SLACK;
        let n = room + 37;
        for i in 0..n {
            tx.post(Command::Step(i as u32 + 1)).unwrap();
            let p = rx.pop().unwrap();
            rx.reply(p, applied(i as u64));
        }
        assert_eq!(replies.dropped(), 37);
        let got: Vec<Reply> = std::iter::from_fn(|| replies.take()).collect();
        assert_eq!(got.len(), room);
        // The first ones are kept, in order.
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.outcome, applied(i as u64));
        }
        // Room again.
        tx.post(Command::Step(1)).unwrap();
        let p = rx.pop().unwrap();
        rx.reply(p, applied(7));
        assert_eq!(replies.take().map(|r| r.outcome), Some(applied(7)));
        assert_eq!(replies.dropped(), 37);
    }

    /// Commands unread when the run ends are refused then; one posted afterwards at once;
    /// stops read late are answered with the frame the run stopped at.
    #[test]
    fn unread_commands_are_refused_when_the_reader_goes() {
        let (tx, mut rx) = command_queue(4);
        let replies = tx.replies();
        let first_stop = tx.post(Command::Stop).unwrap();
        let second_stop = tx.post(Command::Stop).unwrap();
        let set = tx.post(Command::parse("set a.b 1").unwrap()).unwrap();
        let p = rx.pop().unwrap();
        assert_eq!((p.ticket, &p.command), (Some(first_stop), &Command::Stop));
        rx.reply(p, applied(12));
        assert!(!replies.engine_gone());
        drop(rx);
        assert!(replies.engine_gone());
        let late = tx.post(Command::Resume).unwrap();
        let got: Vec<(Ticket, Outcome)> = std::iter::from_fn(|| replies.take())
            .map(|r| (r.ticket, r.outcome))
            .collect();
        let ended = Outcome::Refused {
            reason: Cow::Borrowed(STOPPED),
        };
        assert_eq!(
            got,
            [
                (first_stop, applied(12)),
                (second_stop, applied(12)),
                (set, ended.clone()),
                (late, ended),
            ]
        );
    }

    /// A side-channel `pause` replaced by a newer `resume` is answered as superseded, whether
    /// the sender or the reader finds it replaced.
    #[test]
    fn a_superseded_pause_is_refused() {
        let (tx, mut rx) = command_queue(1);
        let replies = tx.replies();
        tx.post(Command::Step(1)).unwrap();
        let pause = tx.post(Command::Pause).unwrap();
        let resume = tx.post(Command::Resume).unwrap(); // replaces the pause (sender side)
        let r = replies.take().unwrap();
        assert_eq!((r.ticket, &r.command), (pause, &Command::Pause));
        assert!(
            r.to_string().contains("superseded by a later 'resume'"),
            "{r}"
        );
        // The reader holds the resume (not its turn yet) when a pause replaces it.
        let step = rx.pop().unwrap();
        assert_eq!(step.command, Command::Step(1));
        tx.post(Command::Step(2)).unwrap();
        assert!(rx.pop().is_some_and(|p| p.ticket == Some(resume)));
        rx.reply(step, applied(0));
        assert_eq!(replies.take().map(|r| r.outcome), Some(applied(0)));
        assert!(replies.take().is_none());
    }

    /// Issue #9: with several senders posting while the reader answers and then goes away
    /// mid-way, every accepted post gets exactly one reply.
    #[test]
    fn exactly_one_reply_per_post_under_concurrency() {
        let (tx, mut rx) = command_queue(32);
        let replies = tx.replies();
        let collector = {
            let replies = replies.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    match replies.take() {
                        Some(r) => got.push(r.ticket),
                        None if replies.engine_gone()
                            && got.len() as u64 + replies.dropped() >= 6000 =>
                        {
                            break
                        }
                        None => std::thread::yield_now(),
                    }
                }
                got
            })
        };
        let senders: Vec<_> = (0..3u32)
            .map(|s| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut tickets = Vec::new();
                    for i in 0..2000u32 {
                        let mut c = match i % 50 {
                            7 => Command::Pause,
                            8 => Command::Resume,
                            9 if s == 0 => Command::Stop,
                            _ => Command::Step(i + 1),
                        };
                        loop {
                            match tx.post(c) {
                                Ok(t) => break tickets.push(t),
                                Err(Full(back)) => {
                                    c = back;
                                    std::thread::yield_now();
                                }
                            }
                        }
                    }
                    tickets
                })
            })
            .collect();
        drop(tx);
        let mut answered = 0;
        while answered < 4000 {
            while let Some(p) = rx.pop() {
                rx.reply(p, applied(1));
                answered += 1;
            }
            std::thread::yield_now();
        }
        // The run ends with commands still coming: those are refused by the drop, or at once.
        drop(rx);
        let mut posted: Vec<Ticket> = senders
            .into_iter()
            .flat_map(|s| s.join().unwrap())
            .collect();
        assert_eq!(posted.len(), 6000);
        let mut got = collector.join().unwrap();
        got.sort();
        posted.sort();
        let n = got.len();
        got.dedup();
        assert_eq!(got.len(), n, "a ticket answered twice");
        assert!(got.iter().all(|t| posted.binary_search(t).is_ok()));
        // Each post answered once: taken, or counted when the return path was full.
        assert_eq!(n as u64 + replies.dropped(), 6000);
    }
}
