//! The worker loop, one for every kind of executor: a worker takes turns at the shows its
//! [`WorkSource`] hands it; in a turn it takes a job under the show's scheduler lock, runs it
//! without the lock, and reports it back, running at once the job the report hands on
//! (cache-warm).
//!
//! Three work sources today: a run's own workers ([`OwnWorkers`]: one show, idle workers
//! wait on its condition variable), a host's (`host::HostQueue`: any show whose index is
//! queued; a turn ends with the jobs it took) and a show's IO threads (`IoJobs`, `io.rs`:
//! blocking sources' jobs only, each waiting on its own signal). Another kind of executor (a
//! GPU context thread) is another `WorkSource`: its own `next_show`, `take_job` (the jobs of
//! its kind), `report` and `idle`.

use std::cell::Cell;
use std::sync::Arc;

use crate::exec::unwind::{catch_panic, panic_error};
use crate::sched::{Done, Job, Locked, Scheduler, Shared, Version};

/// Where a worker finds work: which shows it takes turns at, how it waits, and what it tells
/// the others. One implementation per kind of executor; the loop ([`work`]) is the same.
pub(crate) trait WorkSource {
    /// Whether a turn at a show goes on after the jobs a report handed on run out (a run's
    /// own workers: they look for another job there) or ends (back to [`next_show`]).
    ///
    /// [`next_show`]: WorkSource::next_show
    const STAYS: bool;

    /// The next show to take a turn at, waiting for one; `None`: the worker leaves.
    fn next_show(&self) -> Option<&Shared>;

    /// Takes a job of this executor's kind from `st` (the show's state, under its lock).
    fn take_job(&self, show: &Shared, st: &mut Scheduler) -> Option<Job> {
        st.next_job(show)
    }

    /// Called under the lock just after this worker took a job from `st`: tells other workers
    /// of what is left, if they would not hear of it otherwise.
    fn took(&self, _st: &mut Scheduler) {}

    /// Reports a job done to `st` (under the lock); returns the job it hands straight on to
    /// this worker, if any.
    fn report(&self, show: &Shared, st: &mut Scheduler, done: Done) -> Option<Job> {
        st.complete(done, show)
    }

    /// `show` had no job for this worker (`st`: its lock): waits there for one (`Some`: the
    /// lock again, to look once more) or ends the turn (`None`).
    fn idle<'a>(&self, show: &'a Shared, st: Locked<'a>) -> Option<Locked<'a>>;

    /// The thread, as an error names it after a panic outside any element (`thread`: its
    /// index in `Shared::running`).
    fn thread(&self, thread: usize) -> String {
        format!("worker thread fp-worker-{thread}")
    }
}

/// A worker thread's body: takes turns at the shows `source` hands it until it hands none.
pub(crate) fn work(source: &impl WorkSource, worker: usize) {
    while let Some(show) = source.next_show() {
        show.turn(worker, source);
    }
}

/// The work source of a run of its own: its workers serve one show, wait on its condition
/// variable while it has no job for them, and leave when the run is over.
pub(crate) struct OwnWorkers<'a> {
    show: &'a Shared,
    started: Cell<bool>,
}

impl<'a> OwnWorkers<'a> {
    pub(crate) fn new(show: &'a Shared) -> Self {
        OwnWorkers {
            show,
            started: Cell::new(false),
        }
    }
}

impl WorkSource for OwnWorkers<'_> {
    const STAYS: bool = true;

    fn next_show(&self) -> Option<&Shared> {
        (!self.started.replace(true)).then_some(self.show)
    }

    fn idle<'a>(&self, show: &'a Shared, st: Locked<'a>) -> Option<Locked<'a>> {
        // After an abort (stop, error) an idle worker has nothing left to do: frames are no
        // longer started, pending ones were dropped, and the owner of a slice job runs the
        // slices nobody took. Those still inside a job finish it and leave too.
        if st.finished() || st.aborted() {
            return None;
        }
        Some(show.workers.wait(st))
    }
}

impl Shared {
    /// A worker thread's body in a run of its own (see [`OwnWorkers`]).
    pub(crate) fn worker(&self, worker: usize) {
        work(&OwnWorkers::new(self), worker);
    }

    /// `worker`'s turn at this show. A panic that escapes the element guards (a bug in the
    /// scheduler itself) ends this show's run with an error naming the worker, and wakes
    /// everyone, rather than leaving the others waiting for a frame that this worker held.
    fn turn<W: WorkSource>(&self, worker: usize, source: &W) {
        // The fork (its owner's worker index) whose slice this worker has claimed and not yet
        // had counted.
        let claimed = Cell::new(None);
        if let Err(p) = catch_panic(|| self.run_turn(worker, &claimed, source)) {
            let e = panic_error(source.thread(worker), &p);
            self.mark_running(worker, None);
            self.break_run(e, claimed.get());
        }
    }

    fn run_turn<W: WorkSource>(&self, worker: usize, claimed: &Cell<Option<usize>>, source: &W) {
        let mut st = self.lock();
        // The graph version of the job this worker runs: the one the job names (while a live
        // edit's replaced version finishes its frames, two versions have jobs).
        let mut ver: Option<Arc<Version>> = None;
        loop {
            let Some(mut job) = source.take_job(self, &mut st) else {
                // Not kept while idle: a version a live edit replaced is dropped on the edit
                // thread once nobody else holds it (this is never the last reference then).
                if ver
                    .as_ref()
                    .is_some_and(|v| !Arc::ptr_eq(v, st.running_version()))
                {
                    ver = None;
                }
                match source.idle(self, st) {
                    Some(again) => st = again,
                    None => return,
                }
                continue;
            };
            let mut v = match ver.take() {
                Some(mut v) => {
                    follow(&mut v, st.job_ver(&job));
                    v
                }
                None => Arc::clone(st.job_ver(&job)),
            };
            source.took(&mut st);
            drop(st);
            // The job, and those its reports hand on.
            loop {
                if let Job::Slice { slot: owner, .. } = &job {
                    claimed.set(Some(*owner));
                }
                let done = self.run_job(&v, job, worker);
                st = self.lock();
                // Cleared in the same critical section that counts the slice, so that a
                // panic can neither lose nor double-count it.
                claimed.set(None);
                let Some(next) = source.report(self, &mut st, done) else {
                    break;
                };
                follow(&mut v, st.job_ver(&next));
                source.took(&mut st);
                drop(st);
                job = next;
            }
            if !W::STAYS {
                // The lock first: the version's reference goes after it.
                drop(st);
                return;
            }
            ver = Some(v);
        }
    }
}

/// Makes `ver` the version `want` (the job's), cloning the reference only when it changed.
fn follow(ver: &mut Arc<Version>, want: &Arc<Version>) {
    if !Arc::ptr_eq(ver, want) {
        *ver = Arc::clone(want);
    }
}
