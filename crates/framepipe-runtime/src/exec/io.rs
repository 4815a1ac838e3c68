//! The IO threads: a show's blocking sources (`Source::blocks`) run on threads of their own,
//! one per blocking source (at most `MAX_IO_THREADS`), so that a source waiting on a socket or
//! a pipe holds no compute worker.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::exec::{work, WorkSource};
use crate::sched::{Done, Job, Locked, Scheduler, Shared, MAX_IO_THREADS};
use crate::stats::Event;

/// The longest an IO thread sleeps without a signal.
const IO_POLL: Duration = Duration::from_millis(100);

/// IO thread `k`'s work source: its show's blocking sources' jobs (`Scheduler::next_io_job`),
/// one at a time: a report hands nothing on (the source's next node is a compute worker's).
/// It waits for a job on its own signal, outside the scheduler lock.
struct IoJobs<'a> {
    show: &'a Shared,
    k: usize,
    started: Cell<bool>,
}

impl<'a> IoJobs<'a> {
    fn new(show: &'a Shared, k: usize) -> Self {
        IoJobs {
            show,
            k,
            started: Cell::new(false),
        }
    }
}

impl WorkSource for IoJobs<'_> {
    const STAYS: bool = true;

    fn next_show(&self) -> Option<&Shared> {
        (!self.started.replace(true)).then_some(self.show)
    }

    fn take_job(&self, _show: &Shared, st: &mut Scheduler) -> Option<Job> {
        st.next_io_job(self.k)
    }

    fn report(&self, show: &Shared, st: &mut Scheduler, done: Done) -> Option<Job> {
        st.record_io(done, show);
        None
    }

    fn idle<'a>(&self, show: &'a Shared, mut st: Locked<'a>) -> Option<Locked<'a>> {
        if st.finished() || st.aborted() {
            return None;
        }
        // Woken (its bit taken) when a job is queued for it; every IO thread at the end and
        // on abort. The timeout only bounds what a lost wake-up could cost.
        st.io_thread_idle(self.k);
        drop(st);
        show.io_signals[self.k].wait(IO_POLL);
        Some(show.lock())
    }

    fn thread(&self, _thread: usize) -> String {
        "IO thread fp-io".into()
    }
}

impl Shared {
    /// IO thread `k`'s index in `running` (after the workers and the output threads, before
    /// the GPU thread).
    fn io_thread_index(&self, k: usize) -> usize {
        self.running.len() - 1 - MAX_IO_THREADS + k
    }

    /// Starts IO threads until the show has one per blocking source of a version with
    /// `sources` of them (at most [`MAX_IO_THREADS`]; never fewer than it has): from then on
    /// the show's blocking sources (`Source::blocks`) run on them, so that a source waiting on
    /// a socket or a pipe holds no compute worker (in a host, none of the workers every show
    /// shares), nor another blocking source's read. Called off the frame path: at the start,
    /// and by the edit thread before a version with more blocking sources can switch in.
    pub(crate) fn ensure_io_threads(self: &Arc<Self>, sources: usize) -> std::io::Result<()> {
        let mut threads = self
            .io_threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while threads.len() < sources.min(MAX_IO_THREADS) {
            let (sh, k) = (Arc::clone(self), threads.len());
            let h = std::thread::Builder::new()
                .name("fp-io".into())
                .spawn(move || sh.io_thread(k))?;
            threads.push(h);
            if k == 0 {
                // From now on (not from when the thread gets to run): no worker takes them.
                self.lock().start_io();
            }
        }
        Ok(())
    }

    /// IO thread `k`'s body: runs blocking sources' jobs, one at a time, until the run ends
    /// (the worker loop over [`IoJobs`]). A panic outside the element guards ends the run, as
    /// a worker's does.
    fn io_thread(&self, k: usize) {
        self.io_signals[k].register_current();
        work(&IoJobs::new(self, k), self.io_thread_index(k));
    }

    /// At the run's end: waits up to `grace` for the IO threads to leave; one blocked inside
    /// a source then is left running, detached, and reported as [`Event::LeftRunning`].
    pub(crate) fn join_io_threads(&self, grace: Duration) {
        let threads = std::mem::take(
            &mut *self
                .io_threads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let deadline = Instant::now() + grace;
        while threads.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for (k, h) in threads.into_iter().enumerate() {
            if h.is_finished() {
                let _ = h.join();
            } else {
                let stage = self
                    .running_stage(self.io_thread_index(k))
                    .unwrap_or_else(|| Arc::from("(scheduler)"));
                self.emit(Event::LeftRunning {
                    stage,
                    worker: self.io_thread_index(k),
                });
            }
        }
    }
}
