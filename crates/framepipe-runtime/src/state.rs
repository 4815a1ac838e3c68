//! The scheduler's state and job selection: tokens (frames in flight), serial and parallel
//! stages, parking of tokens whose turn has not come, the bound on frames in flight, the sinks'
//! output ports, and what happens when a job completes.
//!
//! Everything here runs under the one scheduler mutex, taken by a worker between jobs and by
//! the output thread once per frame (returning the previous frame and taking the next in the same
//! critical section). Under it: queue bookkeeping only. Nothing allocates, frees, prints, formats
//! or calls element or user code there: wake-ups are collected in [`Wake`] and errors that are
//! not kept in `garbage`, and both are dealt with by [`Locked`] after the mutex is released.
//! Every hold is timed into a lock-free histogram (`lockstats.rs`).

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;

use framepipe_clock::{now_ns, PiCondvar, PiGuard, PiMutex};
use framepipe_core::{
    Effect, Error, Frame, FrameCtx, FramePool, PropValue, Rational, Result, Source,
};

use crate::events::EventFn;
use crate::live::{FrameParams, Live, LiveSpec};
use crate::slices::{PanicPayload, SliceJob, SliceSlot};
use crate::stats::Counters;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Source,
    Effect,
    /// A sink, fed through output port `.0` (one per sink; its own thread runs it).
    Sink(usize),
}

pub(crate) struct Token {
    pub(crate) ctx: FrameCtx,
    pub(crate) frame: Option<Frame>,
    /// When the frame reached the sink stage, fully processed (monotonic ns): the slow overload
    /// policy slips the clock only for frames that were not ready by their deadline.
    pub(crate) ready_ns: i64,
}

/// An effect instance with the property values it currently has.
pub(crate) struct Instance {
    pub(crate) effect: Box<dyn Effect>,
    /// Has processed a frame (counted in the stats' `instances` the first time).
    pub(crate) used: bool,
    pub(crate) applied: Vec<PropValue>,
    /// Properties the element refused to change live (reported once, then not retried).
    pub(crate) refused: Vec<bool>,
}

impl Instance {
    pub(crate) fn new(effect: Box<dyn Effect>, initial: &[PropValue]) -> Self {
        Instance {
            effect,
            used: false,
            applied: initial.to_vec(),
            refused: vec![false; initial.len()],
        }
    }
}

pub(crate) enum Inst {
    Source(Box<dyn Source>),
    Effect(Instance),
}

pub(crate) enum Job {
    Stage {
        stage: usize,
        token: Token,
        inst: Inst,
    },
    Slice {
        slot: usize,
        index: usize,
        job: SliceJob,
    },
}

pub(crate) struct StageState {
    pub(crate) kind: Kind,
    pub(crate) serial: bool,
    /// Serial stages: a worker is running it, or a token has been reserved for it.
    pub(crate) busy: bool,
    /// Serial stages: the sequence number allowed in next.
    pub(crate) next_seq: u64,
    /// Serial stages: tokens waiting for their turn, at `seq % max_in_flight`.
    pub(crate) parked: Vec<Option<Token>>,
    /// Effect instances not in use.
    pub(crate) free: Vec<Instance>,
    pub(crate) max_instances: usize,
    pub(crate) source: Option<Box<dyn Source>>,
}

pub(crate) struct State {
    pub(crate) stages: Vec<StageState>,
    /// Tokens reserved for a serial effect stage (it was their turn when they were unparked).
    pub(crate) ready: VecDeque<(usize, Token)>,
    /// Per sink: the token whose turn it is there, for that sink's output thread.
    pub(crate) ports: Vec<Port>,
    pub(crate) in_flight: usize,
    pub(crate) max_in_flight: usize,
    pub(crate) next_seq: u64,
    pub(crate) source_done: bool,
    pub(crate) abort: bool,
    pub(crate) error: Option<Error>,
    pub(crate) source_error: Option<Error>,
    pub(crate) waiting: usize,
    /// One slot per worker for its fork-join slice jobs.
    pub(crate) slices: Vec<SliceSlot>,
    /// A panic outside any element left the state inconsistent: the run is over whatever the
    /// in-flight count says (see `Shared::break_run`).
    pub(crate) broken: bool,
    /// Whom to wake once the lock is released (collected by the state machine under it).
    pub(crate) wake: Wake,
    /// An error that was not kept (a later one than the first), dropped after unlocking.
    pub(crate) garbage: Option<Error>,
}

/// One sink's hand-off: the token whose turn it is at that sink. Several sinks (a graph) have
/// one each; the chain has one.
pub(crate) struct Port {
    /// The sink's stage index.
    pub(crate) stage: usize,
    pub(crate) ready: Option<Token>,
}

/// What the output thread of a port waits on instead of the scheduler mutex: a flag set (after
/// unlocking) whenever its port or the run's end changed, and an unpark of its thread. It
/// checks the flag, and takes the lock only when there is something to take.
#[derive(Debug, Default)]
pub(crate) struct PortSignal {
    flag: AtomicBool,
    thread: OnceLock<Thread>,
}

impl PortSignal {
    /// Registers the calling thread as this port's output thread.
    pub(crate) fn register_current(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    fn raise(&self) {
        self.flag.store(true, Ordering::Release);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Whether the port was signalled since the last call (clears it).
    pub(crate) fn take(&self) -> bool {
        self.flag.swap(false, Ordering::AcqRel)
    }

    /// Waits up to `timeout` for a signal; returns whether there was one.
    pub(crate) fn wait(&self, timeout: std::time::Duration) -> bool {
        if self.take() {
            return true;
        }
        std::thread::park_timeout(timeout);
        self.take()
    }
}

/// Wake-ups decided under the lock, done after releasing it (so that the woken thread does not
/// run into a held mutex, and the hold time excludes the futex calls).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Wake {
    work_one: bool,
    work_all: bool,
    slices: bool,
    ports: bool,
}

impl Wake {
    /// Whether any wake-up is pending.
    fn any(self) -> bool {
        self.work_one || self.work_all || self.slices || self.ports
    }
}

pub(crate) struct Shared {
    /// The scheduler lock. Priority-inheriting: while the SCHED_FIFO output thread waits for
    /// it, the worker holding it runs at the output thread's priority.
    pub(crate) state: PiMutex<State>,
    /// Workers wait here for work.
    pub(crate) work: PiCondvar,
    /// A slice owner waits here for the slices other workers took.
    pub(crate) slice_done: PiCondvar,
    /// The pool each stage's output frames come from (index = stage).
    pub(crate) pools: Vec<FramePool>,
    pub(crate) rate: Rational,
    pub(crate) threads: usize,
    /// Per-frame parameter snapshots, at `seq % max_in_flight`. Each is touched by one stage at
    /// a time (the stage holding that frame), so its mutex is never contended.
    pub(crate) snapshots: Vec<Mutex<FrameParams>>,
    pub(crate) param_names: Vec<Vec<Arc<str>>>,
    /// The live parameter values, under their own (priority-inheriting) mutex: commands assign
    /// to them (output thread) and the source's worker samples them at each frame boundary;
    /// never under the scheduler lock.
    pub(crate) live: PiMutex<Live>,
    /// What the live parameters are (names, specs): commands are resolved against it without
    /// any lock.
    pub(crate) live_spec: LiveSpec,
    /// One per output port (sink).
    pub(crate) port_signals: Vec<PortSignal>,
    /// Per worker (and each output thread, after them): stage + 1 it is running (0 = none) and
    /// since when (monotonic ns), for stall detection by the output thread.
    pub(crate) running: Vec<(AtomicUsize, AtomicI64)>,
    pub(crate) events: Option<EventFn>,
    pub(crate) counters: Arc<Counters>,
}

/// Outcome of running a job, reported back under the lock.
pub(crate) enum Done {
    Source(Box<dyn Source>, Result<Option<Token>>),
    Effect(usize, Option<Instance>, Result<Token>),
    Slice(usize, Option<PanicPayload>),
}

impl State {
    pub(crate) fn finished(&self) -> bool {
        self.broken
            || (self.in_flight == 0 && (self.source_done || self.abort) && !self.stages[0].busy)
    }

    pub(crate) fn has_work(&self) -> bool {
        !self.ready.is_empty() || self.source_runnable() || self.slice_pending().is_some()
    }

    pub(crate) fn source_runnable(&self) -> bool {
        !self.source_done
            && !self.abort
            && !self.stages[0].busy
            && self.in_flight < self.max_in_flight
    }

    pub(crate) fn slice_pending(&self) -> Option<usize> {
        self.slices
            .iter()
            .position(|s| s.job.is_some() && s.next < s.n)
    }

    /// Ends the run with `e` (the first error is the one returned; a later one is dropped
    /// after unlocking).
    pub(crate) fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        } else {
            self.garbage = Some(e);
        }
        self.abort = true;
        self.wake.work_all = true;
        self.wake.ports = true;
    }

    /// Ends the run early without an error (a `stop` command): no new frames; frames in flight
    /// are dropped.
    pub(crate) fn stop(&mut self) {
        self.source_done = true;
        self.abort = true;
        self.drop_pending();
        // Idle workers leave (see `worker_loop`); output threads see the end.
        self.wake.work_all = true;
        self.wake.ports = true;
    }

    /// The next job for an idle worker: slices of a frame being worked on first (they hold a
    /// worker waiting), then frames furthest down the pipeline (to bound latency), then a new
    /// frame from the source.
    pub(crate) fn next_job(&mut self, shared: &Shared) -> Option<Job> {
        // (The frame's parameters are sampled by the worker that runs the source job, outside
        // this lock: see `Shared::run_job`.)
        if let Some(slot) = self.slice_pending() {
            let s = &mut self.slices[slot];
            let index = s.next;
            s.next += 1;
            let job = s.job.expect("pending slot has a job");
            return Some(Job::Slice { slot, index, job });
        }
        if let Some(pos) = (0..self.ready.len()).max_by_key(|&i| self.ready[i].0) {
            let (stage, token) = self.ready.remove(pos).expect("index in range");
            let inst = self.take_instance(stage);
            return Some(Job::Stage { stage, token, inst });
        }
        if self.source_runnable() {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.in_flight += 1;
            self.stages[0].busy = true;
            let pts_ns = shared.rate.frame_time_ns(seq);
            let inst = Inst::Source(self.stages[0].source.take().expect("idle source is home"));
            let token = Token {
                ctx: FrameCtx { seq, pts_ns },
                frame: None,
                ready_ns: 0,
            };
            return Some(Job::Stage {
                stage: 0,
                token,
                inst,
            });
        }
        None
    }

    pub(crate) fn take_instance(&mut self, stage: usize) -> Inst {
        let st = &mut self.stages[stage];
        match st.kind {
            Kind::Source => Inst::Source(st.source.take().expect("serial source reserved")),
            Kind::Sink(_) => unreachable!("a sink runs on its output thread"),
            // A serial stage has one instance and runs one frame at a time; a parallel stage has
            // one per worker and each worker holds at most one: there is always one free.
            Kind::Effect => Inst::Effect(st.free.pop().expect("an instance per worker")),
        }
    }

    /// Hands a token whose turn has come at serial `stage` to whoever runs that stage.
    pub(crate) fn make_ready(&mut self, stage: usize, token: Token) {
        if let Kind::Sink(port) = self.stages[stage].kind {
            let p = &mut self.ports[port];
            debug_assert!(p.ready.is_none(), "one frame at a time for a sink");
            p.ready = Some(token);
            self.wake.ports = true;
        } else {
            self.ready.push_back((stage, token));
        }
    }

    /// Counts one claimed slice of `slot` as done; wakes its owner when it was the last.
    /// The first panic is kept for the owner to re-raise (a second one in the same frame is
    /// dropped here: an error path, the only free under this lock).
    pub(crate) fn count_slice(&mut self, slot: usize, panicked: Option<PanicPayload>) {
        let s = &mut self.slices[slot];
        s.done += 1;
        if s.panicked.is_none() {
            s.panicked = panicked;
        }
        if s.done == s.n {
            self.wake.slices = true;
        }
    }

    /// Wakes every idle worker once the lock is released (slices to help with).
    pub(crate) fn wake_all_workers(&mut self) {
        self.wake.work_all = true;
    }

    /// The token whose turn it is at sink `port`, if it has arrived.
    pub(crate) fn take_ready(&mut self, port: usize) -> Option<Token> {
        self.ports[port].ready.take()
    }

    /// Moves `token` to `stage`: returns the job if this worker can run it now, else parks it
    /// (or hands it to the output thread).
    pub(crate) fn advance(&mut self, stage: usize, mut token: Token) -> Option<Job> {
        if self.abort {
            self.in_flight -= 1;
            return None;
        }
        if let Kind::Sink(_) = self.stages[stage].kind {
            // Processed: from now on the frame only waits for its turn at the output.
            token.ready_ns = now_ns();
        }
        let cap = self.max_in_flight;
        let st = &mut self.stages[stage];
        if st.serial {
            if st.busy || token.ctx.seq != st.next_seq {
                let slot = (token.ctx.seq % cap as u64) as usize;
                debug_assert!(st.parked[slot].is_none(), "parking slot collision");
                st.parked[slot] = Some(token);
                return None;
            }
            st.busy = true;
            if let Kind::Sink(_) = st.kind {
                self.make_ready(stage, token);
                return None;
            }
        }
        let inst = self.take_instance(stage);
        Some(Job::Stage { stage, token, inst })
    }

    /// A serial stage finished a frame: let the next one in, if it is already waiting.
    pub(crate) fn release_serial(&mut self, stage: usize) {
        let cap = self.max_in_flight as u64;
        let st = &mut self.stages[stage];
        st.busy = false;
        st.next_seq += 1;
        let next = st.next_seq;
        let slot = (next % cap) as usize;
        if st.parked[slot].as_ref().is_some_and(|t| t.ctx.seq == next) {
            let token = st.parked[slot].take().expect("checked above");
            st.busy = true;
            self.make_ready(stage, token);
        }
    }

    /// Drops every parked or ready token: their frames go back to the pools.
    pub(crate) fn drop_pending(&mut self) {
        let dropped = self.ready.len()
            + self.ports.iter_mut().filter_map(|p| p.ready.take()).count()
            + self
                .stages
                .iter_mut()
                .flat_map(|s| s.parked.iter_mut())
                .filter_map(Option::take)
                .count();
        self.ready.clear();
        self.in_flight -= dropped;
    }

    /// The output thread of `port` has consumed (or failed to consume) its sink's frame.
    pub(crate) fn sink_done(&mut self, port: usize, result: Result<()>, shared: &Shared) {
        self.release_serial(self.ports[port].stage);
        self.in_flight -= 1;
        if let Err(e) = result {
            self.fail(e);
        }
        self.after_change(shared);
    }

    /// Bookkeeping after any change: drops pending work on abort, publishes the in-flight
    /// count, wakes whoever can now proceed.
    pub(crate) fn after_change(&mut self, shared: &Shared) {
        if self.abort {
            self.drop_pending();
        }
        shared
            .counters
            .in_flight
            .store(self.in_flight, Ordering::Relaxed);
        if self.finished() {
            self.wake.work_all = true;
            self.wake.ports = true;
        } else if self.waiting > 0 && self.has_work() {
            self.wake.work_one = true;
        }
    }

    /// Records a job's outcome and returns the job the same worker should run next, if any.
    pub(crate) fn complete(&mut self, done: Done, shared: &Shared) -> Option<Job> {
        let next = match done {
            Done::Slice(slot, panicked) => {
                self.count_slice(slot, panicked);
                None
            }
            Done::Source(source, result) => {
                self.stages[0].source = Some(source);
                self.stages[0].busy = false;
                match result {
                    Ok(Some(token)) => self.advance(1, token),
                    Ok(None) => {
                        self.source_done = true;
                        self.in_flight -= 1;
                        None
                    }
                    Err(e) => {
                        self.source_error = Some(e);
                        self.source_done = true;
                        self.in_flight -= 1;
                        None
                    }
                }
            }
            Done::Effect(stage, inst, result) => {
                if let Some(inst) = inst {
                    self.stages[stage].free.push(inst);
                }
                if self.stages[stage].serial {
                    self.release_serial(stage);
                }
                match result {
                    Ok(token) => self.advance(stage + 1, token),
                    Err(e) => {
                        self.fail(e);
                        self.in_flight -= 1;
                        None
                    }
                }
            }
        };
        self.after_change(shared);
        next
    }
}

impl Shared {
    /// Takes the scheduler lock (a worker, or the run's set-up and end). The hold is timed.
    pub(crate) fn lock(&self) -> Locked<'_> {
        // No poisoning: a panic in an element is caught in `run_job`, and one in the scheduler's
        // own code marks the run broken (`Shared::break_run`).
        let guard = self.state.lock();
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
            .output_lock_wait
            .record((locked.since - asked).max(0) as u64);
        locked
    }

    /// Does the wake-ups collected under the lock.
    fn wake(&self, w: Wake) {
        if w.work_all {
            self.work.notify_all();
        } else if w.work_one {
            self.work.notify_one();
        }
        if w.slices {
            self.slice_done.notify_all();
        }
        if w.ports {
            for p in &self.port_signals {
                p.raise();
            }
        }
    }
}

/// The scheduler lock, held. Derefs to the [`State`]. On release it records how long it was
/// held, then, with the mutex released, drops a discarded error and does the wake-ups the state
/// machine asked for.
pub(crate) struct Locked<'a> {
    guard: Option<PiGuard<'a, State>>,
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
        let wake = std::mem::take(&mut guard.wake);
        // (A discarded error stays in the state: it is dropped at the next release.)
        let held = (now_ns() - self.since).max(0) as u64;
        let guard = if wake.any() {
            drop(guard);
            self.shared.counters.lock_hold.record(held);
            self.shared.wake(wake);
            self.shared.state.lock()
        } else {
            self.shared.counters.lock_hold.record(held);
            cv.wait(guard)
        };
        self.guard = Some(guard);
        self.since = now_ns();
        self
    }
}

impl Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        self.guard.as_deref().expect("held")
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.guard.as_deref_mut().expect("held")
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            let wake = std::mem::take(&mut guard.wake);
            let garbage = guard.garbage.take();
            let held = (now_ns() - self.since).max(0) as u64;
            drop(guard);
            // Recorded with the mutex released: the histogram's atomics are not held time.
            self.shared.counters.lock_hold.record(held);
            drop(garbage);
            self.shared.wake(wake);
        }
    }
}
