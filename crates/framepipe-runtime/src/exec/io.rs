//! The IO threads: a show's blocking sources (`Source::blocks`) run on threads of their own,
//! one per blocking source (at most `MAX_IO_THREADS`), so that a source waiting on a socket or
//! a pipe holds no compute worker.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use framepipe_core::Error;

use crate::exec::unwind::panic_message;
use crate::sched::{Shared, MAX_IO_THREADS};
use crate::stats::Event;

/// The longest an IO thread sleeps without a signal.
const IO_POLL: Duration = Duration::from_millis(100);

impl Shared {
    /// The `running` slot of IO thread `k` (after the workers' and the output threads').
    fn io_slot(&self, k: usize) -> usize {
        self.running.len() - MAX_IO_THREADS + k
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

    /// IO thread `k`'s body: runs blocking sources' jobs, one at a time, until the run ends.
    /// A panic outside the element guards ends the run, as a worker's does.
    fn io_thread(&self, k: usize) {
        self.io_signals[k].register_current();
        let io = self.io_slot(k);
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            loop {
                let mut st = self.lock();
                if let Some(job) = st.next_io_job(k) {
                    let ver = Arc::clone(st.job_ver(&job));
                    drop(st);
                    let done = self.run_job(&ver, job, io);
                    let mut st = self.lock();
                    st.record_io(done, self);
                    continue;
                }
                if st.finished() || st.aborted() {
                    return;
                }
                // Woken (its bit taken) when a job is queued for it; every IO thread at the
                // end and on abort. The timeout only bounds what a lost wake-up could cost.
                st.io_thread_idle(k);
                drop(st);
                self.io_signals[k].wait(IO_POLL);
            }
        }));
        if let Err(p) = r {
            let e = Error::element(
                "IO thread fp-io",
                format!("panicked: {}", panic_message(&*p)),
            );
            self.mark_running(io, None);
            self.break_run(e, None);
        }
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
                    .running_stage(self.io_slot(k))
                    .unwrap_or_else(|| Arc::from("(scheduler)"));
                self.emit(Event::LeftRunning {
                    stage,
                    worker: self.io_slot(k),
                });
            }
        }
    }
}
