//! The scheduler. See the crate docs for the model; this file is the whole of it, with the
//! output thread in `output.rs` and live parameters in `live.rs`.
//!
//! Why hand-written rather than rayon or a channel per stage: a channel per stage means a thread
//! per stage (oversubscription, the very thing this engine avoids), and rayon's work stealing has
//! no notion of serial-in-order stages or of a bound on frames in flight. The scheduler is small:
//! one mutex-protected state machine that workers consult only between jobs.

#![allow(unsafe_code)] // only for the slice runner's borrowed closure; see SliceJob

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use framepipe_control::{CommandReader, Oscillator};
use framepipe_core::{
    Effect, EffectFactory, Error, Frame, FrameCtx, FramePool, Mode, PropSpec, PropValue, Rational,
    Result, Sink, SliceRunner, Source, VideoInfo,
};

use crate::live::{assign, FrameParams, Live, LiveStage};
use crate::stats::{Counters, RunStats, StageCounters};

/// An effect in a pipeline, with how to schedule it and what may be changed while it runs.
pub struct EffectStage {
    /// The configured effect.
    pub factory: Box<dyn EffectFactory>,
    /// Serial or parallel (the element's default unless the user overrode it).
    pub mode: Mode,
    /// Its properties and their initial values: these can be set, oscillated or bypassed live.
    pub params: Vec<(PropSpec, PropValue)>,
    /// Oscillators on properties from the start (property name, oscillator).
    pub oscillators: Vec<(String, Oscillator)>,
}

impl EffectStage {
    /// A stage with no live parameters.
    pub fn new(factory: Box<dyn EffectFactory>, mode: Mode) -> Self {
        EffectStage {
            factory,
            mode,
            params: Vec::new(),
            oscillators: Vec::new(),
        }
    }
}

impl std::fmt::Debug for EffectStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EffectStage({}, {})", self.factory.name(), self.mode)
    }
}

/// What the output clock does when a frame is not ready at its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overload {
    /// Never drop or repeat: the clock slips and the frame rate falls (rendering content).
    #[default]
    Slow,
    /// The clock holds: the previous frame is shown again and the miss counted (a live show).
    Live,
}

impl Overload {
    /// Parses `slow` or `live`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "slow" => Some(Overload::Slow),
            "live" => Some(Overload::Live),
            _ => None,
        }
    }

    /// `slow` or `live`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overload::Slow => "slow",
            Overload::Live => "live",
        }
    }
}

/// How to run a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// Worker threads. 0 = one per available core.
    pub threads: usize,
    /// Frames in flight at most. 0 = automatic: `2 * threads + 2`, fewer for large frames but
    /// never below `threads + 1` (see `pools.rs`). Never more than the source's `len_hint`.
    pub in_flight: usize,
    /// Output frame rate; `None` = unpaced (as fast as the pipeline goes).
    pub pace: Option<Rational>,
    /// What to do when a frame is late (paced runs only).
    pub overload: Overload,
    /// A stage running longer than this is reported as stalled (once per stage). 0 = automatic:
    /// five frame periods of `pace`, at least 100 ms; unpaced, at least 1 s.
    pub stall_timeout_ns: u64,
    /// Try to run the output thread under `SCHED_FIFO` (falls back quietly when not permitted).
    pub realtime: bool,
}

impl Options {
    /// Threads, and frames in flight as asked (0 = automatic: resolved once the frame sizes
    /// are known, by `pools::in_flight`).
    fn resolved(self) -> (usize, usize) {
        let threads = if self.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            self.threads
        };
        (threads, self.in_flight)
    }
}

/// Something a running pipeline reports (to a status line, a log, a control surface).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A stage has been running one frame for longer than the stall timeout (reported once).
    Stalled {
        /// Stage name.
        stage: String,
        /// How long it had been running when noticed, ms.
        elapsed_ms: u64,
    },
    /// A command could not be applied.
    CommandRejected {
        /// The command as text.
        command: String,
        /// Why.
        reason: String,
    },
    /// A live property change was refused by the element itself (reported once per property).
    PropertyRejected {
        /// Stage name.
        stage: String,
        /// Property.
        prop: String,
        /// The element's error.
        reason: String,
    },
}

/// Receives [`Event`]s; called from the output thread or a worker, so it must be quick.
pub type EventFn = Arc<dyn Fn(&Event) + Send + Sync>;

/// A pipeline as built by the user: one source, effects in order, one sink.
pub struct Pipeline {
    source: (String, Box<dyn Source>),
    effects: Vec<(String, EffectStage)>,
    sink: (String, Box<dyn Sink>),
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = std::iter::once(self.source.0.as_str())
            .chain(self.effects.iter().map(|e| e.0.as_str()))
            .chain(std::iter::once(self.sink.0.as_str()))
            .collect();
        write!(f, "Pipeline({})", names.join(" ! "))
    }
}

impl Pipeline {
    /// A pipeline from a source, effects and a sink, each with the name shown in stats.
    pub fn new(
        source: (String, Box<dyn Source>),
        effects: Vec<(String, EffectStage)>,
        sink: (String, Box<dyn Sink>),
    ) -> Self {
        Pipeline {
            source,
            effects,
            sink,
        }
    }

    /// The source's frame rate: the default output rate of a paced run.
    pub fn source_rate(&self) -> Rational {
        self.source.1.info().rate
    }

    /// Negotiates frame sizes from the source to the sink, makes the frame pools and the first
    /// instance of every effect, and readies the workers' state. Everything that allocates
    /// happens here.
    pub fn prepare(self, options: Options) -> Result<Prepared> {
        let (threads, asked_in_flight) = options.resolved();
        let Pipeline {
            source: (source_name, source),
            effects,
            sink: (sink_name, mut sink),
        } = self;

        // Negotiation: each stage's output shape.
        let mut infos = vec![source.info()];
        let mut factories = Vec::with_capacity(effects.len());
        let mut modes = Vec::with_capacity(effects.len());
        let mut names = vec![source_name.clone()];
        let mut live_stages = vec![LiveStage::new(
            source_name.clone(),
            source_name,
            false,
            true,
        )];
        for (name, mut stage) in effects {
            let input = *infos.last().expect("infos starts with the source");
            let out = stage.factory.negotiate(input)?;
            if out.width == 0 || out.height == 0 {
                return Err(Error::Unsupported {
                    element: name,
                    what: format!("an output of {}x{}", out.width, out.height),
                });
            }
            let mut live = LiveStage::new(
                name.clone(),
                stage.factory.name().to_string(),
                true,
                out.width == input.width && out.height == input.height,
            );
            for (spec, value) in stage.params {
                live.add_param(spec, value);
            }
            for (prop, osc) in stage.oscillators {
                live.attach(&prop, osc).map_err(|reason| Error::BadValue {
                    element: name.clone(),
                    prop: prop.clone(),
                    value: "~oscillator".into(),
                    reason,
                })?;
            }
            live_stages.push(live);
            infos.push(out);
            factories.push(stage.factory);
            modes.push(stage.mode);
            names.push(name);
        }
        // Frame pools sized from what the run needs, checked against the memory budget before
        // anything frame-sized is allocated (pools.rs).
        let in_flight =
            crate::pools::in_flight(threads, asked_in_flight, &infos, source.len_hint());
        let stage_pools = crate::pools::frame_pools(&crate::pools::PoolNeeds {
            infos: &infos,
            names: &names,
            modes: &modes,
            threads,
            in_flight,
            paced: options.pace.is_some(),
            keep_last: options.pace.is_some() && options.overload == Overload::Live,
        })?;
        names.push(sink_name.clone());
        live_stages.push(LiveStage::new(sink_name.clone(), sink_name, false, true));
        let last = *infos.last().expect("at least the source");
        sink.start(last)?;

        let n = names.len();
        let live = Live::new(live_stages);
        let param_names: Vec<Vec<String>> = live
            .stages
            .iter()
            .map(|s| s.params.iter().map(|p| p.spec.name.clone()).collect())
            .collect();
        let snapshots: Vec<Mutex<FrameParams>> = (0..in_flight)
            .map(|_| Mutex::new(live.empty_frame()))
            .collect();
        let initial = live.empty_frame();
        let mut stage_states = Vec::with_capacity(n);
        let mut counters = Vec::with_capacity(n);
        for (i, name) in names.iter().enumerate() {
            let (mode, kind) = if i == 0 {
                (Mode::Serial, Kind::Source)
            } else if i == n - 1 {
                (Mode::Serial, Kind::Sink)
            } else {
                (modes[i - 1], Kind::Effect)
            };
            let counter = StageCounters::new(name.clone(), mode);
            let mut st = StageState {
                kind,
                serial: mode == Mode::Serial,
                busy: false,
                next_seq: 0,
                parked: (0..in_flight).map(|_| None).collect(),
                free: Vec::with_capacity(threads),
                max_instances: if mode == Mode::Serial { 1 } else { threads },
                source: None,
            };
            if kind == Kind::Effect {
                // Every instance now (one per worker for a parallel stage): a plugin that cannot
                // be made fails before any frame, and no plugin is constructed on the frame path
                // (which would allocate and could make a frame late mid-show).
                for _ in 0..st.max_instances {
                    st.free.push(Instance::new(
                        factories[i - 1].instantiate()?,
                        &initial.values[i],
                    ));
                }
            } else {
                counter.add_instance();
            }
            stage_states.push(st);
            counters.push(counter);
        }
        stage_states[0].source = Some(source);

        let rate = infos[0].rate;
        let stall_timeout_ns = match (options.stall_timeout_ns, options.pace) {
            (0, Some(pace)) => (5 * pace.period_ns()).max(100_000_000),
            // Unpaced (batch) runs have no deadline to miss: only report what looks stuck.
            (0, None) => (5 * rate.period_ns()).max(1_000_000_000),
            (t, _) => t,
        };
        let shared = Shared {
            state: Mutex::new(State {
                stages: stage_states,
                ready: VecDeque::with_capacity(n + 1),
                out_ready: None,
                in_flight: 0,
                max_in_flight: in_flight,
                next_seq: 0,
                source_done: false,
                abort: false,
                error: None,
                source_error: None,
                waiting: 0,
                slices: (0..threads).map(|_| SliceSlot::default()).collect(),
                live,
            }),
            work: Condvar::new(),
            out_cv: Condvar::new(),
            slice_done: Condvar::new(),
            pools: stage_pools,
            rate,
            threads,
            snapshots,
            param_names,
            running: (0..threads + 1)
                .map(|_| (AtomicUsize::new(0), AtomicI64::new(0)))
                .collect(),
            events: None,
            counters: Arc::new(Counters::new(counters)),
        };
        Ok(Prepared {
            shared,
            sink: Some(sink),
            infos,
            threads,
            in_flight,
            options,
            stall_timeout_ns,
            commands: None,
        })
    }
}

/// A negotiated pipeline, ready to run.
pub struct Prepared {
    pub(crate) shared: Shared,
    pub(crate) sink: Option<Box<dyn Sink>>,
    infos: Vec<VideoInfo>,
    threads: usize,
    in_flight: usize,
    pub(crate) options: Options,
    pub(crate) stall_timeout_ns: u64,
    pub(crate) commands: Option<CommandReader>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("threads", &self.threads)
            .field("in_flight", &self.in_flight)
            .field("infos", &self.infos)
            .finish()
    }
}

impl Prepared {
    /// Live counters; reading them never blocks the workers.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.shared.counters)
    }

    /// The negotiated shape at each stage's output (source first; the sink's input is the last).
    pub fn infos(&self) -> &[VideoInfo] {
        &self.infos
    }

    /// Worker threads that will run.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Frames in flight at most.
    pub fn max_in_flight(&self) -> usize {
        self.in_flight
    }

    /// Commands (set, osc, bypass, speed, pause, step, resume, stop) will be read from this
    /// queue once per frame boundary by the output thread.
    pub fn set_commands(&mut self, reader: CommandReader) {
        self.commands = Some(reader);
    }

    /// Events (stalls, rejected commands) go to `f`.
    pub fn set_events(&mut self, f: EventFn) {
        self.shared.events = Some(f);
    }

    /// Runs to the end of the stream (or the first error, or a `stop` command) and returns the
    /// final figures. The calling thread becomes the output thread: it runs the sink, paced by
    /// the frame clock when `Options::pace` is set.
    ///
    /// On a source error, the frames produced before it still reach the sink; the sink is always
    /// finished (flushed, closed). The first error is returned after that.
    pub fn run(mut self) -> Result<RunStats> {
        let mut sink = self.sink.take().expect("run once");
        let threads = self.threads;
        let shared = &self.shared;
        let commands = self.commands.take();
        let options = self.options;
        let stall = self.stall_timeout_ns;
        let (pacing, out_result) = std::thread::scope(|s| {
            for w in 0..threads {
                let spawned = std::thread::Builder::new()
                    .name(format!("fp-worker-{w}"))
                    .spawn_scoped(s, move || shared.worker(w));
                if let Err(e) = spawned {
                    shared.lock().fail(Error::io("starting a worker thread", e));
                    shared.work.notify_all();
                }
            }
            crate::output::run_output(shared, &mut *sink, commands, options, stall)
        });
        let (error, source_error) = {
            let mut st = shared.lock();
            (st.error.take(), st.source_error.take())
        };
        let finish = sink.finish();
        if let Some(e) = error.or(source_error) {
            return Err(e);
        }
        out_result?;
        finish?;
        let mut stats = shared.counters.snapshot();
        stats.pacing = pacing;
        Ok(stats)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Source,
    Effect,
    Sink,
}

pub(crate) struct Token {
    pub ctx: FrameCtx,
    pub frame: Option<Frame>,
    /// When the frame reached the sink stage, fully processed (monotonic ns): the slow overload
    /// policy slips the clock only for frames that were not ready by their deadline.
    pub ready_ns: i64,
}

/// An effect instance with the property values it currently has.
struct Instance {
    effect: Box<dyn Effect>,
    /// Has processed a frame (counted in the stats' `instances` the first time).
    used: bool,
    applied: Vec<PropValue>,
    /// Properties the element refused to change live (reported once, then not retried).
    refused: Vec<bool>,
}

impl Instance {
    fn new(effect: Box<dyn Effect>, initial: &[PropValue]) -> Self {
        Instance {
            effect,
            used: false,
            applied: initial.to_vec(),
            refused: vec![false; initial.len()],
        }
    }
}

enum Inst {
    Source(Box<dyn Source>),
    Effect(Instance),
}

enum Job {
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

struct StageState {
    kind: Kind,
    serial: bool,
    /// Serial stages: a worker is running it, or a token has been reserved for it.
    busy: bool,
    /// Serial stages: the sequence number allowed in next.
    next_seq: u64,
    /// Serial stages: tokens waiting for their turn, at `seq % max_in_flight`.
    parked: Vec<Option<Token>>,
    /// Effect instances not in use.
    free: Vec<Instance>,
    max_instances: usize,
    source: Option<Box<dyn Source>>,
}

/// A borrowed slice closure with its lifetime erased, so that other workers can call it.
#[derive(Clone, Copy)]
struct SliceJob(*const (dyn Fn(usize) + Sync + 'static));

// SAFETY: the pointee is `Sync`, and the slice owner keeps it alive until every claimed index has
// been run and counted (see `PoolSlices::run`), so sending the pointer to another worker is sound.
unsafe impl Send for SliceJob {}

#[derive(Default)]
struct SliceSlot {
    job: Option<SliceJob>,
    n: usize,
    next: usize,
    done: usize,
    /// A slice panicked; the owner re-raises it once every slice is accounted for.
    panicked: bool,
}

pub(crate) struct State {
    stages: Vec<StageState>,
    /// Tokens reserved for a serial effect stage (it was their turn when they were unparked).
    ready: VecDeque<(usize, Token)>,
    /// The token whose turn it is at the sink, for the output thread.
    pub out_ready: Option<Token>,
    pub in_flight: usize,
    max_in_flight: usize,
    next_seq: u64,
    pub source_done: bool,
    pub abort: bool,
    pub error: Option<Error>,
    source_error: Option<Error>,
    waiting: usize,
    /// One slot per worker for its fork-join slice jobs.
    slices: Vec<SliceSlot>,
    pub live: Live,
}

pub(crate) struct Shared {
    pub state: Mutex<State>,
    /// Workers wait here for work.
    pub work: Condvar,
    /// The output thread waits here for its next frame.
    pub out_cv: Condvar,
    slice_done: Condvar,
    /// The pool each stage's output frames come from (index = stage).
    pools: Vec<FramePool>,
    rate: Rational,
    threads: usize,
    /// Per-frame parameter snapshots, at `seq % max_in_flight`. Each is touched by one stage at
    /// a time (the stage holding that frame), so its mutex is never contended.
    snapshots: Vec<Mutex<FrameParams>>,
    param_names: Vec<Vec<String>>,
    /// Per worker (and the output thread, last): stage + 1 it is running (0 = none) and since
    /// when (monotonic ns), for stall detection by the output thread.
    pub running: Vec<(AtomicUsize, AtomicI64)>,
    pub events: Option<EventFn>,
    pub counters: Arc<Counters>,
}

/// Outcome of running a job, reported back under the lock.
enum Done {
    Source(Box<dyn Source>, Result<Option<Token>>),
    Effect(usize, Option<Instance>, Result<Token>),
    Slice(usize, bool),
}

impl State {
    pub fn finished(&self) -> bool {
        self.in_flight == 0 && (self.source_done || self.abort) && !self.stages[0].busy
    }

    fn has_work(&self) -> bool {
        !self.ready.is_empty() || self.source_runnable() || self.slice_pending().is_some()
    }

    fn source_runnable(&self) -> bool {
        !self.source_done
            && !self.abort
            && !self.stages[0].busy
            && self.in_flight < self.max_in_flight
    }

    fn slice_pending(&self) -> Option<usize> {
        self.slices
            .iter()
            .position(|s| s.job.is_some() && s.next < s.n)
    }

    pub fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.abort = true;
    }

    /// Ends the run early without an error (a `stop` command): no new frames; frames in flight
    /// are dropped.
    pub fn stop(&mut self) {
        self.source_done = true;
        self.abort = true;
        self.drop_pending();
    }

    /// The next job for an idle worker: slices of a frame being worked on first (they hold a
    /// worker waiting), then frames furthest down the pipeline (to bound latency), then a new
    /// frame from the source.
    fn next_job(&mut self, shared: &Shared) -> Option<Job> {
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

    fn take_instance(&mut self, stage: usize) -> Inst {
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
    fn make_ready(&mut self, stage: usize, token: Token, shared: &Shared) {
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
    fn advance(&mut self, stage: usize, mut token: Token, shared: &Shared) -> Option<Job> {
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
    fn release_serial(&mut self, stage: usize, shared: &Shared) {
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
    fn drop_pending(&mut self) {
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
    pub fn sink_done(&mut self, result: Result<()>, shared: &Shared) {
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
    pub fn after_change(&mut self, shared: &Shared) {
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
    fn complete(&mut self, done: Done, shared: &Shared) -> Option<Job> {
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
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in an element is caught in `run_job`, so the lock is never held by a panicking
        // thread; recover the state anyway rather than cascade.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn emit(&self, e: Event) {
        if let Some(f) = &self.events {
            f(&e);
        }
    }

    fn worker(&self, worker: usize) {
        let mut st = self.lock();
        loop {
            if let Some(mut job) = st.next_job(self) {
                drop(st);
                loop {
                    let done = self.run_job(job, worker);
                    st = self.lock();
                    match st.complete(done, self) {
                        Some(next) => {
                            drop(st);
                            job = next;
                        }
                        None => break,
                    }
                }
                continue;
            }
            if st.finished() {
                return;
            }
            st.waiting += 1;
            st = self.work.wait(st).unwrap_or_else(|p| p.into_inner());
            st.waiting -= 1;
        }
    }

    /// Marks what `slot` (a worker, or the output thread) is running, for stall detection.
    pub fn mark_running(&self, slot: usize, stage: Option<usize>) {
        let (s, since) = &self.running[slot];
        if let Some(stage) = stage {
            since.store(framepipe_clock::now_ns(), Ordering::Relaxed);
            s.store(stage + 1, Ordering::Release);
        } else {
            s.store(0, Ordering::Release);
        }
    }

    /// Runs one job outside the lock.
    fn run_job(&self, job: Job, worker: usize) -> Done {
        match job {
            Job::Slice { slot, index, job } => {
                // SAFETY: the slice owner waits (in `PoolSlices::run`) until this index is counted
                // done before its closure goes out of scope, so the pointer is valid here.
                let f = unsafe { &*job.0 };
                // A panicking slice is contained so that the owner's count still completes.
                let ok =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(index))).is_ok();
                Done::Slice(slot, !ok)
            }
            Job::Stage {
                stage,
                mut token,
                inst,
            } => {
                let started = Instant::now();
                self.mark_running(worker, Some(stage));
                let counters = &self.counters.stages[stage];
                let done = match inst {
                    Inst::Source(mut source) => {
                        let result = guard(&counters.name, || {
                            let mut frame = self.pools[0].try_acquire()?;
                            if source.fill(&token.ctx, &mut frame)? {
                                token.frame = Some(frame.freeze());
                                Ok(Some(token))
                            } else {
                                Ok(None)
                            }
                        });
                        Done::Source(source, result)
                    }
                    Inst::Effect(effect) => self.run_effect(stage, effect, token, worker),
                };
                self.mark_running(worker, None);
                // The source's last call, which finds the end of the stream, is not a frame.
                if !matches!(done, Done::Source(_, Ok(None))) {
                    counters.record(started.elapsed());
                }
                done
            }
        }
    }

    fn run_effect(
        &self,
        stage: usize,
        mut inst: Instance,
        mut token: Token,
        worker: usize,
    ) -> Done {
        let slices = PoolSlices {
            shared: self,
            worker,
        };
        let name = &self.counters.stages[stage].name;
        if !inst.used {
            inst.used = true;
            self.counters.stages[stage].add_instance();
        }
        let result = guard(name, || {
            // Bring the instance to this frame's parameter values (sampled at its boundary).
            let slot = (token.ctx.seq % self.snapshots.len() as u64) as usize;
            let bypass = {
                let snap = self.snapshots[slot]
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                for (j, value) in snap.values[stage].iter().enumerate() {
                    if inst.applied[j] != *value {
                        if !inst.refused[j] {
                            if let Err(e) =
                                inst.effect.set_property(&self.param_names[stage][j], value)
                            {
                                inst.refused[j] = true;
                                self.emit(Event::PropertyRejected {
                                    stage: name.clone(),
                                    prop: self.param_names[stage][j].clone(),
                                    reason: e.to_string(),
                                });
                            }
                        }
                        assign(&mut inst.applied[j], value);
                    }
                }
                snap.bypass[stage]
            };
            if bypass {
                return Ok(token);
            }
            let input = token.frame.take().expect("effects get a frame");
            let mut output = self.pools[stage].try_acquire()?;
            inst.effect
                .process(&token.ctx, &input, &mut output, &slices)?;
            token.frame = Some(output.freeze());
            Ok(token)
        });
        Done::Effect(stage, Some(inst), result)
    }
}

/// Runs `f`, turning a panic inside an element into an error that names it.
pub(crate) fn guard<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::element(name, format!("panicked: {msg}")))
        }
    }
}

/// The slice runner handed to effects: fork-join on the pipeline's own workers.
struct PoolSlices<'a> {
    shared: &'a Shared,
    worker: usize,
}

impl SliceRunner for PoolSlices<'_> {
    fn workers(&self) -> usize {
        self.shared.threads
    }

    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        if n <= 1 || self.shared.threads == 1 {
            (0..n).for_each(job);
            return;
        }
        let erased: *const (dyn Fn(usize) + Sync + '_) = job;
        // Only the lifetime changes. The pointer is published in this worker's slot and this
        // function does not return until `done == n`, i.e. until every index claimed by any
        // worker has been run; then the slot is cleared under the lock, so no worker can
        // dereference the pointer once `job` goes out of scope.
        let erased: *const (dyn Fn(usize) + Sync + 'static) =
            // SAFETY: see above: the pointee outlives every use through the slot.
            unsafe { std::mem::transmute(erased) };
        let mut st = self.shared.lock();
        st.slices[self.worker] = SliceSlot {
            job: Some(SliceJob(erased)),
            n,
            next: 0,
            done: 0,
            panicked: false,
        };
        if st.waiting > 0 {
            self.shared.work.notify_all();
        }
        loop {
            let s = &mut st.slices[self.worker];
            if s.next < n {
                let index = s.next;
                s.next += 1;
                drop(st);
                let ok =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(index))).is_ok();
                st = self.shared.lock();
                let s = &mut st.slices[self.worker];
                s.done += 1;
                s.panicked |= !ok;
            } else {
                break;
            }
        }
        while st.slices[self.worker].done < n {
            st = self
                .shared
                .slice_done
                .wait(st)
                .unwrap_or_else(|p| p.into_inner());
        }
        let panicked = std::mem::take(&mut st.slices[self.worker]).panicked;
        drop(st);
        if panicked {
            // Every slice is accounted for and the slot is cleared: safe to unwind now. The
            // effect's guard turns this into an error naming the element.
            panic!("a slice of this frame panicked");
        }
    }
}
