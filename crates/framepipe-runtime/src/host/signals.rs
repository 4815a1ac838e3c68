//! Where a host's shows announce work to its workers and signal their master port to the
//! clock thread.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;

use framepipe_clock::{now_ns, PiCondvar, PiMutex};

use crate::exec::ShowQueue;
use crate::sched::PortQueue;

/// Where shows announce work to the host's workers, and signal their master port to the clock
/// thread.
pub(crate) struct HostSignals {
    /// Shows with work, each at most once until a worker takes it (`queued`).
    work: PiMutex<VecDeque<usize>>,
    work_cv: PiCondvar,
    queued: Vec<AtomicBool>,
    closing: AtomicBool,
    /// Shows whose master port was signalled since the clock last looked.
    pub(super) raised: PiMutex<VecDeque<usize>>,
    pub(super) clock: OnceLock<Thread>,
    /// When the clock thread will wake up by itself (ns; 0 while it is awake): a signal
    /// unparks it only when that is more than [`LAZY_NS`] away, so that with many shows (the
    /// clock waking up every millisecond or so anyway) a frame being ready costs no wake-up.
    pub(super) clock_wakes_at: AtomicI64,
}

impl std::fmt::Debug for HostSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostSignals")
            .field("shows", &self.queued.len())
            .finish()
    }
}

impl ShowQueue for HostSignals {
    /// Show `show` has work for a worker: queued, once until a worker takes it.
    fn work_for(&self, show: usize) {
        if !self.queued[show].swap(true, Ordering::AcqRel) {
            self.work.lock().push_back(show);
            self.work_cv.notify_one();
        }
    }
}

impl PortQueue for HostSignals {
    /// Show `show`'s master port was signalled: the clock thread polls it.
    fn port_raised(&self, show: usize) {
        self.raised.lock().push_back(show);
        if self.clock_wakes_at.load(Ordering::SeqCst) > now_ns() + LAZY_NS {
            if let Some(t) = self.clock.get() {
                t.unpark();
            }
        }
    }
}

impl HostSignals {
    pub(super) fn new(n: usize) -> Self {
        HostSignals {
            // Each show is in the queue at most once: it never grows past this.
            work: PiMutex::new(VecDeque::with_capacity(n + 1)),
            work_cv: PiCondvar::new(),
            queued: (0..n).map(|_| AtomicBool::new(false)).collect(),
            closing: AtomicBool::new(false),
            raised: PiMutex::new(VecDeque::with_capacity(2 * n + 16)),
            clock: OnceLock::new(),
            clock_wakes_at: AtomicI64::new(0),
        }
    }

    /// The next show with work, waiting for one; `None` once the host closes. The show is
    /// taken: its next [`work_for`](Self::work_for) queues it again.
    pub(super) fn next_work(&self) -> Option<usize> {
        let i = {
            let mut q = self.work.lock();
            loop {
                if let Some(i) = q.pop_front() {
                    break i;
                }
                if self.closing.load(Ordering::Acquire) {
                    return None;
                }
                q = self.work_cv.wait(q);
            }
        };
        self.queued[i].store(false, Ordering::Release);
        Some(i)
    }

    /// Makes the calling thread the clock thread (unparked by a port's signal).
    pub(super) fn register_clock(&self) {
        let _ = self.clock.set(std::thread::current());
    }

    /// Unparks the clock thread.
    pub(super) fn wake_clock(&self) {
        if let Some(t) = self.clock.get() {
            t.unpark();
        }
    }

    /// When the clock thread will wake up by itself (ns; 0 while it is awake).
    pub(super) fn clock_sleeps_to(&self) -> i64 {
        self.clock_wakes_at.load(Ordering::SeqCst)
    }

    /// The show whose master port was signalled first since the clock last looked, taken.
    pub(super) fn take_raised(&self) -> Option<usize> {
        self.raised.lock().pop_front()
    }

    /// Closes the work queue: every worker leaves once it is empty.
    pub(super) fn close(&self) {
        self.closing.store(true, Ordering::Release);
        let _q = self.work.lock();
        self.work_cv.notify_all();
    }
}

/// A show's signal (its frame is ready, its end) wakes the clock thread only if it would sleep
/// longer than this; otherwise the clock sees it when it wakes up.
pub(super) const LAZY_NS: i64 = 500_000;
