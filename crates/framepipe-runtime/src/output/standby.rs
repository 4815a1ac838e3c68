//! The standby pacing thread: a second thread, on another CPU than the pacing thread
//! (a host's clock thread, a run's master output thread), that releases a frame the pacing
//! thread has not released [`STANDBY_AFTER_NS`] after its deadline. It keeps off the CPU the
//! pacing thread last ran on (that thread publishes it; neither is pinned).
//!
//! Why: on a virtual machine the host takes a vCPU away for up to milliseconds at a time
//! (`framepipe doctor`'s noise floor: a spinning thread losing 3–10 % of its time, up to
//! 1.8–4 ms at once, on the 2-core VM this was built on), and no priority inside the guest
//! helps: the pacing thread is simply not running at its deadline, and every frame it had to
//! release then is late. Two vCPUs rarely lose their CPU at the same moment (measured here:
//! stalls over 1 ms on one of them 15–80 times in 20 s, on both at once 2–14 times), so a
//! thread sleeping on the other CPU can step in.
//!
//! How: the pacing thread keeps its state (what to release, and when) behind locks that it
//! never holds while it sleeps or spins (a host: one per show and a short one for the
//! wake-ups, so that the standby can serve the other shows while the clock thread is stuck in
//! one show's poll; a run of its own: one), and after each round publishes when it will next
//! wake up ([`Watch::publish`]: the earliest of its timed wake-ups, deadlines and the others
//! that lead to them, a frame's beginning above all; a run's next deadline too). The standby
//! sleeps (never spins) to that time plus [`STANDBY_AFTER_NS`]; if the same time is still
//! pending then, the pacing thread did not run: the standby takes the lock and serves what is
//! due, and goes on doing so at each time it leaves pending until the pacing thread is back.
//! A time is rescued once at most (a rescue that leaves it pending waits for the pacing
//! thread). When the pacing thread comes back it finds those frames released and goes on.
//! Cost: one wake-up of the standby per wake-up of the pacing thread, and an uncontended lock
//! per round of the pacing thread; the standby takes the locks only to rescue. What it cannot
//! cover: a frame made ready while the pacing thread is away is seen at the next timed
//! wake-up, not at once (the port's signal wakes the pacing thread only).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::Duration;

use framepipe_clock::now_ns;

/// How long after a deadline the standby looks whether it was served: a release it makes is
/// late by this plus its own wake-up, under the 1 ms a frame is judged late by.
pub(crate) const STANDBY_AFTER_NS: i64 = 250_000;

/// Without a deadline to watch, the standby looks again this often (a deadline published
/// meanwhile unparks it anyway).
const IDLE_NS: i64 = 100_000_000;

/// Whether a standby can run apart from the pacing thread: this process may use two CPUs.
pub(crate) fn possible() -> bool {
    framepipe_clock::allowed_cpus().len() >= 2
}

/// What the pacing thread and its standby share besides the pacing state's lock.
#[derive(Debug)]
pub(crate) struct Watch {
    /// The pacing thread's next timed wake-up, as it was when a thread last let go of the
    /// pacing state (`i64::MAX`: none).
    pending: AtomicI64,
    /// When the standby wakes up by itself (`i64::MAX` while awake).
    wakes_at: AtomicI64,
    thread: OnceLock<Thread>,
    /// The CPU the pacing thread last published from (`usize::MAX`: not known).
    cpu: AtomicUsize,
    /// The pacing thread is done: the standby leaves too.
    over: AtomicBool,
    /// Times the standby woke up to watch a wake-up of the pacing thread.
    pub(crate) wakeups: AtomicU64,
    /// Deadlines (frames released) the standby served in the pacing thread's place.
    pub(crate) rescued: AtomicU64,
}

impl Default for Watch {
    fn default() -> Self {
        Watch {
            pending: AtomicI64::new(i64::MAX),
            wakes_at: AtomicI64::new(i64::MAX),
            thread: OnceLock::new(),
            cpu: AtomicUsize::new(usize::MAX),
            over: AtomicBool::new(false),
            wakeups: AtomicU64::new(0),
            rescued: AtomicU64::new(0),
        }
    }
}

impl Watch {
    /// Publishes when the pacing thread wakes up next (`None`: only when signalled), before
    /// the pacing state's lock is let go, and the CPU it runs on (which the standby keeps
    /// off). Unparks the standby only when it would look too late for this one.
    pub(crate) fn publish(&self, deadline: Option<i64>) {
        let cpu = framepipe_clock::current_cpu().unwrap_or(usize::MAX);
        if self.cpu.load(Ordering::Relaxed) != cpu {
            self.cpu.store(cpu, Ordering::Relaxed);
        }
        self.publish_next(deadline);
    }

    /// As [`publish`](Self::publish), from the standby after a rescue: the pacing thread's
    /// next wake-up only, not the CPU (the standby's own: recorded, it would move the standby
    /// onto the pacing thread's CPU, the one just taken away).
    pub(crate) fn publish_from_standby(&self, deadline: Option<i64>) {
        self.publish_next(deadline);
    }

    fn publish_next(&self, deadline: Option<i64>) {
        let d = deadline.unwrap_or(i64::MAX);
        self.pending.store(d, Ordering::SeqCst);
        if d != i64::MAX
            && d.saturating_add(STANDBY_AFTER_NS) < self.wakes_at.load(Ordering::SeqCst)
        {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    /// The pacing thread is done: the standby returns.
    pub(crate) fn finish(&self) {
        self.over.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// The standby thread's loop, on the calling thread: sleeps to [`STANDBY_AFTER_NS`] after
    /// the pending deadline; if it is still pending then, calls `rescue`, which takes the
    /// pacing state's lock, serves what is due, publishes, and returns how many deadlines it
    /// served and whether to go on. Returns when [`finish`](Self::finish) is called or
    /// `rescue` says so.
    pub(crate) fn stand_by(&self, mut rescue: impl FnMut() -> (u64, bool)) {
        let _ = self.thread.set(std::thread::current());
        let cpus = framepipe_clock::allowed_cpus();
        // The pacing thread's CPU this thread keeps off (`usize::MAX`: none yet).
        let mut avoiding = usize::MAX;
        // The wake-up last rescued: never rescued twice (a time that a rescue leaves pending
        // waits for the pacing thread, instead of a busy loop).
        let mut rescued_for = i64::MIN;
        while !self.over.load(Ordering::SeqCst) {
            let mut d = self.pending.load(Ordering::SeqCst);
            if d == rescued_for {
                d = i64::MAX;
            }
            let now = now_ns();
            if d != i64::MAX && now >= d + STANDBY_AFTER_NS {
                // The pacing thread has not served a wake-up that long after its time.
                rescued_for = d;
                let (served, go_on) = rescue();
                self.rescued.fetch_add(served, Ordering::Relaxed);
                if !go_on {
                    return;
                }
                continue;
            }
            let wake = if d == i64::MAX {
                now + IDLE_NS
            } else {
                d + STANDBY_AFTER_NS
            };
            // Off the pacing thread's CPU: a timer armed there would fire late when that CPU
            // is taken away, as the pacing thread's own does. (The pacing thread is not pinned,
            // so that threads of other processes are not piled on one CPU: it moves seldom, and
            // this follows it, one system call when it did.)
            let on = self.cpu.load(Ordering::Relaxed);
            if on != avoiding && on != usize::MAX {
                framepipe_clock::set_thread_cpus_except(&cpus, on);
                avoiding = on;
            }
            // Announce the sleep, then look once more (a deadline published before the
            // announcement did not unpark).
            self.wakes_at.store(wake, Ordering::SeqCst);
            let again = self.pending.load(Ordering::SeqCst);
            if again != d && again != rescued_for {
                self.wakes_at.store(i64::MAX, Ordering::SeqCst);
                continue;
            }
            std::thread::park_timeout(Duration::from_nanos((wake - now) as u64));
            self.wakes_at.store(i64::MAX, Ordering::SeqCst);
            if d != i64::MAX {
                self.wakeups.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A deadline left pending is rescued about STANDBY_AFTER_NS after its time, once; one
    /// served in time (published as gone) is not.
    #[test]
    fn the_standby_rescues_a_deadline_left_pending_only() {
        let watch = Watch::default();
        let served: Mutex<Vec<i64>> = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            s.spawn(|| {
                watch.stand_by(|| {
                    served.lock().unwrap().push(now_ns());
                    // Serving it: nothing pending after.
                    watch.publish(None);
                    (1, true)
                })
            });
            // Served in time: published, then replaced before its rescue time.
            let t0 = now_ns() + 20_000_000;
            watch.publish(Some(t0));
            std::thread::sleep(Duration::from_millis(10));
            watch.publish(Some(t0 + 40_000_000));
            // That one is left pending (the pacing thread "stalls").
            std::thread::sleep(Duration::from_millis(100));
            watch.finish();
            let got = served.lock().unwrap().clone();
            assert_eq!(got.len(), 1, "rescues at {got:?}");
            assert!(got[0] >= t0 + 40_000_000 + STANDBY_AFTER_NS);
        });
        assert_eq!(watch.rescued.load(Ordering::Relaxed), 1);
    }
}
