//! The slice runner handed to effects: fork-join of one frame's slices on the pipeline's own
//! workers. The caller publishes the job as its worker's fork (`SliceFork`, `Scheduler::post_slices`); idle workers take slices before
//! any other work (`Scheduler::next_job`); the caller runs slices too and returns when all are done.

#![allow(unsafe_code)] // only for the slice runner's borrowed closure; see SliceJob

use std::cell::Cell;
use std::marker::PhantomData;

use framepipe_core::SliceRunner;

use crate::exec::unwind::{catch_panic, resume_panic, PanicPayload};
use crate::sched::Shared;

/// A borrowed slice closure with its lifetime erased, so that other workers can call it.
#[derive(Clone, Copy)]
pub(crate) struct SliceJob(*const (dyn Fn(usize) + Sync + 'static));

// SAFETY: the pointee is `Sync`, and the slice owner keeps it alive until every claimed index has
// been run and counted (see `PoolSlices::run`), so sending the pointer to another worker is sound.
unsafe impl Send for SliceJob {}

impl SliceJob {
    /// Runs slice `index` of a claimed job, containing a panic (returned as its payload).
    /// Only for an index claimed from a published fork and not yet counted done.
    pub(crate) fn call_caught(self, index: usize) -> Option<PanicPayload> {
        // SAFETY: the slice owner waits (in `PoolSlices::run`) until this index is counted
        // done before its closure goes out of scope, so the pointer is valid here.
        let f = unsafe { &*self.0 };
        run_slice(f, index)
    }
}

thread_local! {
    /// Set while this thread runs a slice (its own or another worker's).
    static IN_SLICE: Cell<bool> = const { Cell::new(false) };
}

/// Runs one slice with [`IN_SLICE`] set, containing a panic (returned as its payload).
fn run_slice(f: &(dyn Fn(usize) + Sync), index: usize) -> Option<PanicPayload> {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_SLICE.with(|c| c.set(false));
        }
    }
    IN_SLICE.with(|c| c.set(true));
    let _reset = Reset;
    catch_panic(|| f(index)).err()
}

/// One worker's fork of a frame's slices, published under the scheduler lock for idle workers
/// to help with (one per worker, `Scheduler::slices`; empty while it runs none).
#[derive(Default)]
pub(crate) struct SliceFork {
    job: Option<SliceJob>,
    /// Slices in all.
    n: usize,
    /// The next slice index to claim.
    next: usize,
    /// Slices run and counted.
    done: usize,
    /// The first slice panic; the owner re-raises it once every slice is accounted for.
    panicked: Option<PanicPayload>,
}

impl SliceFork {
    /// `n` slices of `job`, none claimed yet.
    pub(crate) fn new(job: SliceJob, n: usize) -> Self {
        SliceFork {
            job: Some(job),
            n,
            next: 0,
            done: 0,
            panicked: None,
        }
    }

    /// Whether a slice is left for a helper to claim.
    pub(crate) fn pending(&self) -> bool {
        self.job.is_some() && self.next < self.n
    }

    /// Claims the next slice (it is [`pending`](Self::pending)): its index and the job.
    pub(crate) fn claim_pending(&mut self) -> (usize, SliceJob) {
        let index = self.next;
        self.next += 1;
        (index, self.job.expect("a pending fork has a job"))
    }

    /// The owner claims the next slice nobody took, if any.
    pub(crate) fn claim(&mut self) -> Option<usize> {
        (self.next < self.n).then(|| {
            self.next += 1;
            self.next - 1
        })
    }

    /// Counts one claimed slice as done, keeping the first panic (a second one in the same
    /// frame is dropped: an error path, the only free under the scheduler lock); whether it was
    /// the last.
    pub(crate) fn count(&mut self, panicked: Option<PanicPayload>) -> bool {
        self.done += 1;
        if self.panicked.is_none() {
            self.panicked = panicked;
        }
        self.done == self.n
    }

    /// Whether every slice is done.
    pub(crate) fn all_done(&self) -> bool {
        self.done >= self.n
    }

    /// Empties the fork (every slice done): the first slice panic, to re-raise.
    pub(crate) fn finish(&mut self) -> Option<PanicPayload> {
        std::mem::take(self).panicked
    }
}

/// The slice runner handed to effects: fork-join on the pipeline's own workers.
///
/// Not `Sync` (nor is `dyn SliceRunner`): a slice job, which must be `Sync`, cannot capture the
/// runner, so slices cannot start slices (see the `compile_fail` example on [`SliceRunner`]).
pub(crate) struct PoolSlices<'a> {
    shared: &'a Shared,
    worker: usize,
    _not_sync: PhantomData<Cell<()>>,
}

impl<'a> PoolSlices<'a> {
    /// The runner for the effect that worker `worker` is running.
    pub(crate) fn new(shared: &'a Shared, worker: usize) -> Self {
        PoolSlices {
            shared,
            worker,
            _not_sync: PhantomData,
        }
    }
}

impl SliceRunner for PoolSlices<'_> {
    fn workers(&self) -> usize {
        self.shared.threads
    }

    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        // Defence in depth: should a slice ever reach a runner (the types forbid it), its slices
        // run inline on this thread rather than overwrite the published job.
        if n <= 1 || self.shared.threads == 1 || IN_SLICE.with(Cell::get) {
            (0..n).for_each(job);
            return;
        }
        let erased: *const (dyn Fn(usize) + Sync + '_) = job;
        // Only the lifetime changes. The pointer is published in this worker's fork and this
        // function does not return until `done == n`, i.e. until every index claimed by any
        // worker has been run; then the fork is cleared under the lock, so no worker can
        // dereference the pointer once `job` goes out of scope.
        let erased: *const (dyn Fn(usize) + Sync + 'static) =
            // SAFETY: see above: the pointee outlives every use through the fork.
            unsafe { std::mem::transmute(erased) };
        let mut st = self.shared.lock();
        st.post_slices(self.worker, SliceJob(erased), n);
        if self.shared.workers.any() {
            st.wake_all_workers();
        }
        while let Some(index) = st.claim_slice(self.worker) {
            drop(st);
            let panicked = run_slice(job, index);
            st = self.shared.lock();
            st.count_slice(self.worker, panicked);
        }
        while !st.slices_done(self.worker) {
            st = st.wait_for_slices();
        }
        let panicked = st.finish_slices(self.worker);
        drop(st);
        if let Some(payload) = panicked {
            // Every slice is accounted for and the fork is cleared: safe to unwind now. The
            // effect's guard turns this into an error naming the element, with the message.
            resume_panic(payload);
        }
    }
}
