//! What a show knows of its executor threads: what each is running (stall detection, the
//! names in `Event::LeftRunning`), and the run's end for them: a broken run after a panic
//! outside any element, joining the workers (or, in a host, leaving them), with a grace.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use framepipe_core::Error;

use crate::exec::PanicPayload;
use crate::sched::Shared;
use crate::stats::Event;

impl Shared {
    /// Ends the run after a panic outside any element (a worker's or the output thread's own
    /// code): the state may be inconsistent (a token lost with the unwound stack), so the run is
    /// marked broken (finished whatever the in-flight count) and everyone is woken. A slice
    /// index the dead worker had claimed is counted, so that its owner does not wait for ever.
    pub(crate) fn break_run(&self, e: Error, claimed_slice: Option<usize>) {
        let payload: Option<PanicPayload> = claimed_slice.map(|_| Box::new("its worker died") as _);
        let mut st = self.lock();
        if let Some(owner) = claimed_slice {
            st.count_slice(owner, payload);
        }
        st.fail(e);
        st.mark_broken();
    }

    /// Waits up to `grace` for the workers to exit (at once after a normal end), joins those
    /// that did, and leaves the others running, detached, with an [`Event::LeftRunning`] each:
    /// they are blocked inside an element and exit when it returns.
    pub(crate) fn join_workers(&self, workers: Vec<JoinHandle<()>>, grace: Duration) {
        let deadline = Instant::now() + grace;
        while workers.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for (w, h) in workers.into_iter().enumerate() {
            if h.is_finished() {
                // A worker's panics are caught inside it; nothing to report from the join.
                let _ = h.join();
            } else {
                let stage = self
                    .running_stage(w)
                    .unwrap_or_else(|| Arc::from("(scheduler)"));
                self.emit(Event::LeftRunning { stage, worker: w });
            }
        }
    }

    /// In a host, at the show's end: waits up to `grace` until no host worker is inside one of
    /// this show's jobs; a worker still inside one then (blocked in an element) is reported
    /// as [`Event::LeftRunning`]: the host goes on without it until the element returns.
    pub(crate) fn leave_host(&self, grace: Duration) {
        let deadline = Instant::now() + grace;
        // The IO threads' jobs are not a host worker's (they have their own grace,
        // `join_io_threads`).
        let busy = |sh: &Self| {
            let st = sh.lock();
            st.compute_jobs_running()
        };
        while busy(self) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for w in 0..self.threads {
            if let Some(stage) = self.running_stage(w) {
                self.emit(Event::LeftRunning { stage, worker: w });
            }
        }
    }

    /// The name of the node that thread `thread` (its index in `running`: a worker, an output
    /// thread, an IO thread) is inside, if any.
    pub(super) fn running_stage(&self, thread: usize) -> Option<Arc<str>> {
        let s = self.running[thread]
            .0
            .load(Ordering::Acquire)
            .checked_sub(1)?;
        Some(
            self.counters
                .stages()
                .get(s)
                .map_or_else(|| Arc::from("(a removed node)"), |c| c.name.clone()),
        )
    }

    /// The GPU thread's index in `running` (the last).
    pub(crate) fn gpu_thread_index(&self) -> usize {
        self.running.len() - 1
    }

    /// Marks what thread `thread` (its index in `running`: a worker, an output thread, an IO
    /// thread) is running, for stall detection.
    pub(crate) fn mark_running(&self, thread: usize, stage: Option<usize>) {
        let (s, since) = &self.running[thread];
        if let Some(stage) = stage {
            since.store(framepipe_clock::now_ns(), Ordering::Relaxed);
            s.store(stage + 1, Ordering::Release);
        } else {
            s.store(0, Ordering::Release);
        }
    }
}
