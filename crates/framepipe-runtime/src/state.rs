//! The scheduler's state and job selection: tokens (frames in flight), serial and parallel
//! stages, parking of tokens whose turn has not come, the bound on frames in flight, and what
//! happens when a job completes. Everything here runs under the one scheduler mutex, taken by
//! a worker between jobs and by the output thread once per frame; no element code runs under it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use framepipe_core::{
    Effect, Error, Frame, FrameCtx, FramePool, PropValue, Rational, Result, Source,
};

use crate::events::EventFn;
use crate::live::{FrameParams, Live};
use crate::slices::{SliceJob, SliceSlot};
use crate::stats::Counters;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Source,
    Effect,
    Sink,
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
    /// The token whose turn it is at the sink, for the output thread.
    pub(crate) out_ready: Option<Token>,
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
    pub(crate) live: Live,
}

pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// Workers wait here for work.
    pub(crate) work: Condvar,
    /// The output thread waits here for its next frame.
    pub(crate) out_cv: Condvar,
    pub(crate) slice_done: Condvar,
    /// The pool each stage's output frames come from (index = stage).
    pub(crate) pools: Vec<FramePool>,
    pub(crate) rate: Rational,
    pub(crate) threads: usize,
    /// Per-frame parameter snapshots, at `seq % max_in_flight`. Each is touched by one stage at
    /// a time (the stage holding that frame), so its mutex is never contended.
    pub(crate) snapshots: Vec<Mutex<FrameParams>>,
    pub(crate) param_names: Vec<Vec<String>>,
    /// Per worker (and the output thread, last): stage + 1 it is running (0 = none) and since
    /// when (monotonic ns), for stall detection by the output thread.
    pub(crate) running: Vec<(AtomicUsize, AtomicI64)>,
    pub(crate) events: Option<EventFn>,
    pub(crate) counters: Arc<Counters>,
}

/// Outcome of running a job, reported back under the lock.
pub(crate) enum Done {
    Source(Box<dyn Source>, Result<Option<Token>>),
    Effect(usize, Option<Instance>, Result<Token>),
    Slice(usize, bool),
}

impl State {
    pub(crate) fn finished(&self) -> bool {
        self.in_flight == 0 && (self.source_done || self.abort) && !self.stages[0].busy
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

    pub(crate) fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.abort = true;
    }

    /// Ends the run early without an error (a `stop` command): no new frames; frames in flight
    /// are dropped.
    pub(crate) fn stop(&mut self) {
        self.source_done = true;
        self.abort = true;
        self.drop_pending();
    }

    /// The next job for an idle worker: slices of a frame being worked on first (they hold a
    /// worker waiting), then frames furthest down the pipeline (to bound latency), then a new
    /// frame from the source.
    pub(crate) fn next_job(&mut self, shared: &Shared) -> Option<Job> {
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
            // The frame boundary: the values in force now are the frame's, in every stage.
            let slot = (seq % self.max_in_flight as u64) as usize;
            let mut snap = shared.snapshots[slot]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            self.live.sample(pts_ns, &mut snap);
            drop(snap);
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
            Kind::Sink => unreachable!("the sink runs on the output thread"),
            // A serial stage has one instance and runs one frame at a time; a parallel stage has
            // one per worker and each worker holds at most one: there is always one free.
            Kind::Effect => Inst::Effect(st.free.pop().expect("an instance per worker")),
        }
    }

    /// Hands a token whose turn has come at serial `stage` to whoever runs that stage.
    pub(crate) fn make_ready(&mut self, stage: usize, token: Token, shared: &Shared) {
        if self.stages[stage].kind == Kind::Sink {
            debug_assert!(self.out_ready.is_none(), "one frame at a time for the sink");
            self.out_ready = Some(token);
            shared.out_cv.notify_one();
        } else {
            self.ready.push_back((stage, token));
        }
    }

    /// Moves `token` to `stage`: returns the job if this worker can run it now, else parks it
    /// (or hands it to the output thread).
    pub(crate) fn advance(
        &mut self,
        stage: usize,
        mut token: Token,
        shared: &Shared,
    ) -> Option<Job> {
        if self.abort {
            self.in_flight -= 1;
            return None;
        }
        if self.stages[stage].kind == Kind::Sink {
            // Processed: from now on the frame only waits for its turn at the output.
            token.ready_ns = framepipe_clock::now_ns();
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
            if st.kind == Kind::Sink {
                self.make_ready(stage, token, shared);
                return None;
            }
        }
        let inst = self.take_instance(stage);
        Some(Job::Stage { stage, token, inst })
    }

    /// A serial stage finished a frame: let the next one in, if it is already waiting.
    pub(crate) fn release_serial(&mut self, stage: usize, shared: &Shared) {
        let cap = self.max_in_flight as u64;
        let st = &mut self.stages[stage];
        st.busy = false;
        st.next_seq += 1;
        let next = st.next_seq;
        let slot = (next % cap) as usize;
        if st.parked[slot].as_ref().is_some_and(|t| t.ctx.seq == next) {
            let token = st.parked[slot].take().expect("checked above");
            st.busy = true;
            self.make_ready(stage, token, shared);
        }
    }

    /// Drops every parked or ready token: their frames go back to the pools.
    pub(crate) fn drop_pending(&mut self) {
        let dropped = self.ready.len()
            + usize::from(self.out_ready.is_some())
            + self
                .stages
                .iter_mut()
                .flat_map(|s| s.parked.iter_mut())
                .filter_map(Option::take)
                .count();
        self.ready.clear();
        self.out_ready = None;
        self.in_flight -= dropped;
    }

    /// The output thread has consumed (or failed to consume) the sink's frame.
    pub(crate) fn sink_done(&mut self, result: Result<()>, shared: &Shared) {
        let last = self.stages.len() - 1;
        self.release_serial(last, shared);
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
            shared.work.notify_all();
            shared.out_cv.notify_all();
        } else if self.waiting > 0 && self.has_work() {
            shared.work.notify_one();
        }
    }

    /// Records a job's outcome and returns the job the same worker should run next, if any.
    pub(crate) fn complete(&mut self, done: Done, shared: &Shared) -> Option<Job> {
        let next = match done {
            Done::Slice(slot, panicked) => {
                let s = &mut self.slices[slot];
                s.done += 1;
                s.panicked |= panicked;
                if s.done == s.n {
                    shared.slice_done.notify_all();
                }
                None
            }
            Done::Source(source, result) => {
                self.stages[0].source = Some(source);
                self.stages[0].busy = false;
                match result {
                    Ok(Some(token)) => self.advance(1, token, shared),
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
                    self.release_serial(stage, shared);
                }
                match result {
                    Ok(token) => self.advance(stage + 1, token, shared),
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
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in an element is caught in `run_job`, so the lock is never held by a panicking
        // thread; recover the state anyway rather than cascade.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
