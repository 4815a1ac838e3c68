//! The scheduler lock: the guard (`Locked`) that times each hold and, after the unlock, drops
//! the discarded error and does the wake-ups (`Wake`) collected under it.

use std::ops::{Deref, DerefMut};

use framepipe_clock::{now_ns, PiCondvar, PiGuard};

use super::{Shared, State};

/// Wake-ups decided under the lock, done after releasing it (so that the woken thread does not
/// run into a held mutex, and the hold time excludes the futex calls).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Wake {
    pub(super) work_one: bool,
    pub(super) work_all: bool,
    pub(super) slices: bool,
    pub(super) ports: bool,
    /// The IO threads to wake, bit K for IO thread K (all: the end).
    pub(super) io: u8,
}

impl Wake {
    /// Whether any wake-up is pending.
    pub(super) fn any(self) -> bool {
        self.work_one || self.work_all || self.slices || self.ports || self.io != 0
    }
}

impl Shared {
    /// Takes the scheduler lock (a worker, or the run's set-up and end). The hold is timed.
    pub(crate) fn lock(&self) -> Locked<'_> {
        // No poisoning: a panic in an element is caught in `run_job`, and one in the scheduler's
        // own code marks the run broken (`Shared::break_run`).
        let guard = self.state.lock();
        Locked {
            guard: Some(guard),
            shared: self,
            since: now_ns(),
        }
    }

    /// Takes the scheduler lock from an output thread: the time it waited to get it is recorded
    /// too (the priority-inversion figure: a SCHED_FIFO thread waiting on worker threads).
    pub(crate) fn lock_output(&self) -> Locked<'_> {
        let asked = now_ns();
        let locked = self.lock();
        self.counters
            .record_output_lock_wait((locked.since - asked).max(0) as u64);
        locked
    }

    /// Does the wake-ups collected under the lock.
    fn wake(&self, w: Wake) {
        if let Some((h, show)) = self.host.get() {
            if w.work_all || w.work_one {
                h.work_for(*show);
            }
        } else if w.work_all {
            self.work.notify_all();
        } else if w.work_one {
            self.work.notify_one();
        }
        if w.slices {
            self.slice_done.notify_all();
        }
        for (k, s) in self.io_signals.iter().enumerate() {
            if w.io & (1 << k) != 0 {
                s.raise();
            }
        }
        if w.ports {
            for p in &self.port_signals {
                p.raise();
            }
        }
    }
}

/// The scheduler lock, held. Derefs to the [`State`]. On release it records how long it was
/// held, then, with the mutex released, drops a discarded error and does the wake-ups the state
/// machine asked for.
pub(crate) struct Locked<'a> {
    guard: Option<PiGuard<'a, State>>,
    shared: &'a Shared,
    since: i64,
}

impl Locked<'_> {
    /// Waits on `cv` (a condition variable of this mutex), releasing the lock meanwhile; the
    /// wait is not counted as holding it. Pending wake-ups are done first.
    ///
    /// When wake-ups are pending, they are done with the mutex released (as on every release:
    /// a woken output thread must not run into a held lock) and this returns at once without
    /// waiting, like a spurious wake-up: callers wait in a loop that checks their condition.
    pub(crate) fn wait(mut self, cv: &PiCondvar) -> Self {
        let mut guard = self.guard.take().expect("held");
        let wake = std::mem::take(&mut guard.wake);
        // (A discarded error stays in the state: it is dropped at the next release.)
        let held = (now_ns() - self.since).max(0) as u64;
        let guard = if wake.any() {
            drop(guard);
            self.shared.counters.record_lock_hold(held);
            self.shared.wake(wake);
            self.shared.state.lock()
        } else {
            self.shared.counters.record_lock_hold(held);
            cv.wait(guard)
        };
        self.guard = Some(guard);
        self.since = now_ns();
        self
    }
}

impl Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        self.guard.as_deref().expect("held")
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.guard.as_deref_mut().expect("held")
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            let wake = std::mem::take(&mut guard.wake);
            let garbage = guard.garbage.take();
            let held = (now_ns() - self.since).max(0) as u64;
            drop(guard);
            // Recorded with the mutex released: the histogram's atomics are not held time.
            self.shared.counters.record_lock_hold(held);
            drop(garbage);
            self.shared.wake(wake);
        }
    }
}
