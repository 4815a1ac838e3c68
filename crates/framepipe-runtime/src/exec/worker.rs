//! The workers: each loops picking a job under the scheduler lock, running it without the
//! lock, and reporting back; and what the show knows of what each is running (stall
//! detection, the end's grace).

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use framepipe_core::Error;

use crate::exec::slices::PanicPayload;
use crate::exec::unwind::panic_message;
use crate::sched::{Job, Shared, Version};
use crate::stats::Event;

impl Shared {
    /// A worker thread's body. A panic that escapes the element guards (a bug in the scheduler
    /// itself) ends the run with an error naming the worker, and wakes everyone, rather than
    /// leaving the others waiting for a frame that this worker held.
    pub(crate) fn worker(&self, worker: usize) {
        // The slice slot whose index this worker has claimed and not yet had counted.
        let claimed = Cell::new(None);
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| self.worker_loop(worker, &claimed)));
        if let Err(p) = r {
            let e = Error::element(
                format!("worker thread fp-worker-{worker}"),
                format!("panicked: {}", panic_message(&*p)),
            );
            self.mark_running(worker, None);
            self.break_run(e, claimed.get());
        }
    }

    fn worker_loop(&self, worker: usize, claimed: &Cell<Option<usize>>) {
        let mut st = self.lock();
        // The graph version of the job this worker runs: the one the job names (while a live
        // edit's replaced version finishes its frames, two versions have jobs).
        let mut ver = Arc::clone(st.running_version());
        loop {
            if let Some(mut job) = st.next_job(self) {
                follow(&mut ver, st.job_ver(&job));
                drop(st);
                loop {
                    if let Job::Slice { slot, .. } = &job {
                        claimed.set(Some(*slot));
                    }
                    let done = self.run_job(&ver, job, worker);
                    st = self.lock();
                    // Cleared in the same critical section that counts the slice, so that a
                    // panic can neither lose nor double-count it.
                    claimed.set(None);
                    match st.complete(done, self) {
                        Some(next) => {
                            follow(&mut ver, st.job_ver(&next));
                            drop(st);
                            job = next;
                        }
                        None => break,
                    }
                }
                continue;
            }
            // After an abort (stop, error) an idle worker has nothing left to do: frames are no
            // longer started, pending ones were dropped, and the owner of a slice job runs the
            // slices nobody took. Those still inside a job finish it and leave too.
            if st.finished() || st.aborted() {
                return;
            }
            // Not kept while idle: a version a live edit replaced is dropped on the edit thread
            // once nobody else holds it (this is never the last reference then).
            if !Arc::ptr_eq(&ver, st.running_version()) {
                ver = Arc::clone(st.running_version());
            }
            st = st.wait_for_work();
        }
    }

    /// A host worker's turn at this show (it was announced as having work): takes a job, and
    /// runs it and the jobs its completions hand straight on (cache-warm, as a worker of its
    /// own would), then returns to the host's queue. When the show has more work than this
    /// worker takes, it is announced again so that another worker joins in. A panic outside
    /// the element guards ends this show only, as in [`worker`](Self::worker).
    pub(crate) fn host_round(&self, worker: usize) {
        let claimed = Cell::new(None);
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let mut st = self.lock();
            let Some(mut job) = st.next_job(self) else {
                return;
            };
            let mut ver = Arc::clone(st.job_ver(&job));
            if st.has_work() {
                st.announce_work();
            }
            drop(st);
            loop {
                if let Job::Slice { slot, .. } = &job {
                    claimed.set(Some(*slot));
                }
                let done = self.run_job(&ver, job, worker);
                let mut st = self.lock();
                claimed.set(None);
                match st.complete(done, self) {
                    Some(next) => {
                        follow(&mut ver, st.job_ver(&next));
                        if st.has_work() {
                            st.announce_work();
                        }
                        drop(st);
                        job = next;
                    }
                    None => break,
                }
            }
        }));
        if let Err(p) = r {
            let e = Error::element(
                format!("worker thread fp-worker-{worker}"),
                format!("panicked: {}", panic_message(&*p)),
            );
            self.mark_running(worker, None);
            self.break_run(e, claimed.get());
        }
    }

    /// Ends the run after a panic outside any element (a worker's or the output thread's own
    /// code): the state may be inconsistent (a token lost with the unwound stack), so the run is
    /// marked broken (finished whatever the in-flight count) and everyone is woken. A slice
    /// index the dead worker had claimed is counted, so that its owner does not wait for ever.
    pub(crate) fn break_run(&self, e: Error, claimed_slice: Option<usize>) {
        let payload: Option<PanicPayload> = claimed_slice.map(|_| Box::new("its worker died") as _);
        let mut st = self.lock();
        if let Some(slot) = claimed_slice {
            st.count_slice(slot, payload);
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

    /// The name of the node that `slot` (a worker, an output thread, the IO thread) is inside,
    /// if any.
    pub(super) fn running_stage(&self, slot: usize) -> Option<Arc<str>> {
        let s = self.running[slot]
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

    /// Marks what `slot` (a worker, or the output thread) is running, for stall detection.
    pub(crate) fn mark_running(&self, slot: usize, stage: Option<usize>) {
        let (s, since) = &self.running[slot];
        if let Some(stage) = stage {
            since.store(framepipe_clock::now_ns(), Ordering::Relaxed);
            s.store(stage + 1, Ordering::Release);
        } else {
            s.store(0, Ordering::Release);
        }
    }
}

/// Makes `ver` the version `want` (the job's), cloning the reference only when it changed.
fn follow(ver: &mut Arc<Version>, want: &Arc<Version>) {
    if !Arc::ptr_eq(ver, want) {
        *ver = Arc::clone(want);
    }
}
