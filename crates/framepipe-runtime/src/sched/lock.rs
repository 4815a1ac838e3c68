//! The scheduler lock: the guard (`Locked`) that times each hold and, after the unlock, drops
//! the discarded error and does the wake-ups (`Wake`) collected under it; the waits on the
//! scheduler's condition variables.
//!
//! # Lock order
//! A show's locks, in the order they may nest (a thread holding one takes only locks below it):
//! 1. the scheduler lock (`Shared::scheduler`, priority-inheriting): workers between jobs, IO
//!    threads, output threads once per frame, the edit thread briefly;
//! 2. the live lock (`Shared::live`, priority-inheriting): taken *under* the scheduler lock by
//!    exactly three methods, [`Scheduler::arm_switch`], the waiting switch (`maybe_switch`) and
//!    `switch_overlapping` (an edit's switch frame and the live stages change with the
//!    version); else alone (a command's assignment, a worker beginning a frame or starting a
//!    node). Never the scheduler lock under it;
//! 3. a version's per-slot parameter snapshot (`Version::snapshots`, uncontended): under the
//!    live lock (a frame's beginning, a switch catching the retiring frames up), under the
//!    scheduler lock (a leaky branch copying its frame's snapshot: the frame's slot, then the
//!    branch's), or alone (a node syncing its parameters); the view's values (`stats/view.rs`,
//!    `try_lock` under the live lock, never waiting).
//!
//! Once a show runs, nothing under the scheduler lock allocates, prints or calls element or user
//! code. Before its first frame (no other thread contends yet) a show joining a host rebinds
//! its version's pools to the host's under it (`Prepared::start_pools`: a feedback's first
//! frame is copied into the host's pool).

use std::ops::{Deref, DerefMut};

use framepipe_clock::{now_ns, PiCondvar, PiGuard};

use super::{Scheduler, Shared};

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
    /// The GPU thread (a job queued for it, the end).
    pub(super) gpu: bool,
}

impl Wake {
    /// Whether any wake-up is pending.
    pub(super) fn any(self) -> bool {
        self.work_one || self.work_all || self.slices || self.ports || self.io != 0 || self.gpu
    }
}

impl Shared {
    /// Takes the scheduler lock (a worker, or the run's set-up and end). The hold is timed.
    pub(crate) fn lock(&self) -> Locked<'_> {
        // No poisoning: a panic in an element is caught in `run_job`, and one in the scheduler's
        // own code marks the run broken (`Shared::break_run`).
        let guard = self.scheduler.lock();
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
        if w.work_all || w.work_one {
            self.workers.wake(w.work_all);
        }
        if w.slices {
            self.slice_done.notify_all();
        }
        for (k, s) in self.io_signals.iter().enumerate() {
            if w.io & (1 << k) != 0 {
                s.raise();
            }
        }
        if w.gpu {
            self.gpu_signal.raise();
        }
        if w.ports {
            for p in &self.port_signals {
                p.raise();
            }
        }
    }
}

/// The scheduler lock, held. Derefs to the [`Scheduler`]. On release it records how long it was
/// held, then, with the mutex released, drops a discarded error and does the wake-ups the state
/// machine asked for.
pub(crate) struct Locked<'a> {
    guard: Option<PiGuard<'a, Scheduler>>,
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
        let wake = std::mem::take(&mut guard.run.wake);
        // (A discarded error stays in the state: it is dropped at the next release.)
        let held_ns = (now_ns() - self.since).max(0) as u64;
        let guard = if wake.any() {
            drop(guard);
            self.shared.counters.record_lock_hold(held_ns);
            self.shared.wake(wake);
            self.shared.scheduler.lock()
        } else {
            self.shared.counters.record_lock_hold(held_ns);
            cv.wait(guard)
        };
        self.guard = Some(guard);
        self.since = now_ns();
        self
    }

    /// A slice owner waits for the slices other workers took.
    pub(crate) fn wait_for_slices(self) -> Self {
        let shared = self.shared;
        self.wait(&shared.slice_done)
    }
}

impl Deref for Locked<'_> {
    type Target = Scheduler;
    fn deref(&self) -> &Scheduler {
        self.guard.as_deref().expect("held")
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Scheduler {
        self.guard.as_deref_mut().expect("held")
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            let wake = std::mem::take(&mut guard.run.wake);
            let garbage = guard.run.garbage.take();
            let held_ns = (now_ns() - self.since).max(0) as u64;
            drop(guard);
            // Recorded with the mutex released: the histogram's atomics are not held time.
            self.shared.counters.record_lock_hold(held_ns);
            drop(garbage);
            self.shared.wake(wake);
        }
    }
}
