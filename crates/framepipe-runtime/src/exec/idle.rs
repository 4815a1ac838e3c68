//! How a show reaches its idle workers: the other side of a [`WorkSource`]. The scheduler
//! decides under its lock that a worker should be woken (`Wake`), asks [`IdleWorkers::any`]
//! whether one could be, and after the unlock calls [`IdleWorkers::wake`]; what a wake-up is
//! depends on where the show's workers come from:
//!
//! * a run's own workers wait on the show's condition variable ([`IdleWorkers::wait`]), and
//!   are counted while they do: a wake-up notifies it, and none is due while nobody waits;
//! * a host's workers wait on the host's queue of shows ([`ShowQueue`]): a wake-up queues the
//!   show (once until a worker takes it), and one is always due (an idle host worker serves
//!   any show).
//!
//! [`WorkSource`]: crate::exec::WorkSource

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use framepipe_clock::PiCondvar;

use crate::sched::Locked;

/// A queue of shows with work, served by workers that are no one show's (a host's).
pub(crate) trait ShowQueue: Send + Sync {
    /// Show `show` has work for a worker.
    fn work_for(&self, show: usize);
}

/// A show's idle workers, as the scheduler reaches them (see the module documentation).
pub(crate) struct IdleWorkers {
    /// A run's own workers wait here for work (with the scheduler mutex).
    cv: PiCondvar,
    /// A run's own workers waiting on `cv`. Changed and read under the scheduler lock only.
    waiting: AtomicUsize,
    /// In a host: its queue of shows and this show's index there.
    queue: OnceLock<(Arc<dyn ShowQueue>, usize)>,
}

impl Default for IdleWorkers {
    fn default() -> Self {
        IdleWorkers {
            cv: PiCondvar::new(),
            waiting: AtomicUsize::new(0),
            queue: OnceLock::new(),
        }
    }
}

impl std::fmt::Debug for IdleWorkers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdleWorkers")
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .field("queued", &self.queue.get().map(|(_, i)| *i))
            .finish()
    }
}

impl IdleWorkers {
    /// From now on (before the show starts) the show's workers are `queue`'s, and the show is
    /// `show` there.
    pub(crate) fn serve_from(&self, queue: Arc<dyn ShowQueue>, show: usize) {
        let _ = self.queue.set((queue, show));
    }

    /// Whether a wake-up could reach an idle worker (under the scheduler lock): one of the
    /// show's own waits, or the show is a host's (its idle workers serve any show).
    pub(crate) fn any(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0 || self.queue.get().is_some()
    }

    /// A show's own worker waits for work: `st`, the scheduler lock, is released meanwhile
    /// (see `Locked::wait`: it may return at once, like a spurious wake-up).
    pub(crate) fn wait<'a>(&self, st: Locked<'a>) -> Locked<'a> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let st = st.wait(&self.cv);
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        st
    }

    /// Wakes an idle worker, or every one (`all`), after the scheduler lock is released.
    pub(crate) fn wake(&self, all: bool) {
        match self.queue.get() {
            Some((queue, show)) => queue.work_for(*show),
            None if all => self.cv.notify_all(),
            None => self.cv.notify_one(),
        }
    }
}
