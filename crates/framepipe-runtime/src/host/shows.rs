//! The clock's show table: every show's master output behind a lock of its own, and polling
//! one show (what the clock thread and its standby share).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Mutex, TryLockError};

use framepipe_clock::{now_ns, PiMutex};

use super::clock::{Ended, RunningShow, GRID_NS};
use super::signals::HostSignals;
use super::timers::Timers;
use crate::exec::{catch_panic, panic_error};
use crate::output::Next;
use crate::output::Watch;

/// Most polls of one show in a row that ask to be polled again at once (an unpaced show
/// whose frames are always ready) before the others get their turn.
pub(super) const AGAIN_LIMIT: usize = 64;

/// One show on the clock threads: its output state machine behind a lock of its own, so that a
/// clock thread that loses its CPU while it polls one show (inside its sink's `consume`, its
/// output's bookkeeping) holds back that show alone: the other thread serves the others.
pub(super) struct ShowEntry {
    /// The show, `None` once it ended (or if its output could not start). Never waited for:
    /// a thread that finds it held raises `wanted` and goes on (see [`ShowTable::poll`]).
    show: Mutex<Option<RunningShow>>,
    /// The generation of the show's wake-ups, bumped at every poll: a heap entry of another
    /// generation is stale. [`ENDED`] once the show ended.
    generation: AtomicU64,
    /// A poll was asked for while another thread held `show`: the holder polls once more
    /// before it lets go, so that no due wake-up or signal is lost.
    wanted: AtomicBool,
}

/// An entry's generation once its show ended: every wake-up of it is stale.
pub(super) const ENDED: u64 = u64::MAX;

impl ShowEntry {
    fn new(live: Option<RunningShow>) -> Self {
        ShowEntry {
            generation: AtomicU64::new(if live.is_some() { 0 } else { ENDED }),
            show: Mutex::new(live),
            wanted: AtomicBool::new(false),
        }
    }

    /// Whether a wake-up of generation `g` is the show's current one.
    pub(super) fn current(&self, g: u64) -> bool {
        g != ENDED && self.generation.load(Ordering::Acquire) == g
    }
}

/// What the clock threads (the clock thread and its standby) share: every show's
/// [`ShowEntry`], the wake-ups behind a short lock of their own (`timers`: a pop or a push,
/// never held across a show's poll), and how many shows still run. Both threads may serve at
/// once, different shows; neither holds a lock while it sleeps or spins, so a clock thread
/// that loses its CPU holds back only the show it is polling (docs/SHOWS.md).
pub(super) struct ShowTable {
    entries: Vec<ShowEntry>,
    timers: PiMutex<Timers>,
    /// Shows not ended yet.
    running: AtomicUsize,
}

impl ShowTable {
    /// The table of `shows` (`None`: a show whose output did not start) with their first
    /// wake-ups.
    pub(super) fn new(shows: Vec<Option<RunningShow>>, timers: Timers) -> Self {
        let running = shows.iter().filter(|s| s.is_some()).count();
        ShowTable {
            entries: shows.into_iter().map(ShowEntry::new).collect(),
            timers: PiMutex::new(timers),
            running: AtomicUsize::new(running),
        }
    }

    /// Serves everything due now: deadlines first, then the signalled shows (taken from
    /// `HostSignals::raised` one at a time, so that what this thread has not taken yet stays
    /// there for the other one, should this one lose its CPU), then the other wake-ups whose
    /// time has come (deadlines still first). Returns how many frames it released.
    pub(super) fn serve(&self, signals: &HostSignals, tx: &Sender<Ended>) -> u64 {
        let mut released = 0;
        // Deadlines first: a release waits for nothing else that is due (a frame's beginning
        // or a command poll of another group rounded to the same millisecond, a signal).
        loop {
            let due = self.timers.lock().pop_due(now_ns(), true, &self.entries);
            let Some(i) = due else { break };
            released += self.poll(i, tx);
        }
        // Shows whose port was signalled (a show signalled again while being polled is queued
        // again: the loop ends once no signal is left).
        loop {
            // In the order they were signalled.
            let raised = signals.take_raised();
            let Some(i) = raised else { break };
            released += self.poll(i, tx);
        }
        // The other wake-ups whose time has come, deadlines still first.
        loop {
            let due = {
                let now = now_ns();
                let mut timers = self.timers.lock();
                timers
                    .pop_due(now, true, &self.entries)
                    .or_else(|| timers.pop_due(now, false, &self.entries))
            };
            let Some(i) = due else { break };
            released += self.poll(i, tx);
        }
        released
    }

    /// Polls show `i` if no other thread is polling it, else asks that thread to poll it once
    /// more; returns how many frames this thread released.
    fn poll(&self, i: usize, tx: &Sender<Ended>) -> u64 {
        let entry = &self.entries[i];
        entry.wanted.store(true, Ordering::SeqCst);
        // Orders the store before the try_lock's load (store then load on both sides: the
        // holder's unlock and load of `wanted` below): one of the two threads sees the other.
        std::sync::atomic::fence(Ordering::SeqCst);
        let mut released = 0;
        loop {
            let mut live = match entry.show.try_lock() {
                Ok(g) => g,
                // A panic is caught inside `poll_locked`: the state is whole.
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                // The holder sees `wanted` before it lets go, or after (below).
                Err(TryLockError::WouldBlock) => return released,
            };
            while entry.wanted.swap(false, Ordering::SeqCst) {
                released += self.poll_locked(&mut live, i, tx);
            }
            drop(live);
            std::sync::atomic::fence(Ordering::SeqCst);
            // Raised between the last swap and the unlock, by a thread that found the lock
            // held: it went on, so this thread polls again.
            if !entry.wanted.load(Ordering::SeqCst) {
                return released;
            }
        }
    }

    /// Polls show `i`, held by this thread, until it waits for something (a wake-up is queued
    /// for it) or ends (handed back to be concluded); returns how many frames it released.
    fn poll_locked(&self, show: &mut Option<RunningShow>, i: usize, tx: &Sender<Ended>) -> u64 {
        let Some(live) = show.as_mut() else {
            return 0;
        };
        let before = live.shared.counters.frames_out.load(Ordering::Relaxed);
        let g = self.entries[i].generation.fetch_add(1, Ordering::AcqRel) + 1;
        let mut again = 0;
        let ended = loop {
            let now = now_ns();
            let next = catch_panic(|| live.out.poll(&live.shared, &mut *live.sink, now));
            match next {
                Ok(Next::Again) => {
                    again += 1;
                    if again >= AGAIN_LIMIT {
                        self.timers.lock().push(now, g, i, false);
                        break false;
                    }
                }
                Ok(Next::Deadline(t)) => {
                    self.timers.lock().push(t, g, i, true);
                    break false;
                }
                Ok(Next::Wait(t)) => {
                    let t = t
                        .div_euclid(GRID_NS)
                        .saturating_add(1)
                        .saturating_mul(GRID_NS);
                    self.timers.lock().push(t, g, i, false);
                    break false;
                }
                Ok(Next::Done) => break true,
                Err(p) => {
                    let e = panic_error("output of the clock thread", &p);
                    live.shared.break_run(e, None);
                    break true;
                }
            }
        };
        let frames_out = live.shared.counters.frames_out.load(Ordering::Relaxed);
        if !ended {
            return frames_out.saturating_sub(before);
        }
        self.entries[i].generation.store(ENDED, Ordering::Release);
        let RunningShow {
            shared,
            sink,
            out,
            side,
        } = show.take().expect("polled");
        let output = catch_panic(|| out.finish(&shared)).unwrap_or_else(|p| {
            shared.break_run(panic_error("output of the clock thread", &p), None);
            (None, Ok(()))
        });
        let _ = tx.send(Ended {
            index: i,
            sink,
            output,
            side,
        });
        self.running.fetch_sub(1, Ordering::AcqRel);
        frames_out.saturating_sub(before)
    }

    /// The next timed wake-up of any show, published for the standby thread (under the
    /// timers' lock, so that what the two threads publish comes in the order they computed
    /// it): a deadline, or what leads to one (a frame's beginning). `clock`: published by the
    /// clock thread (with its CPU, which the standby keeps off), else by the standby.
    pub(super) fn publish(&self, watch: &Watch, clock: bool) -> Option<(i64, bool)> {
        let mut timers = self.timers.lock();
        let next = timers.next(&self.entries);
        let t = next.map(|(t, _)| t);
        if clock {
            watch.publish(t);
        } else {
            watch.publish_from_standby(t);
        }
        next
    }

    /// The earliest timed wake-up of any show now.
    pub(super) fn next(&self) -> Option<(i64, bool)> {
        self.timers.lock().next(&self.entries)
    }

    pub(super) fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }
}
