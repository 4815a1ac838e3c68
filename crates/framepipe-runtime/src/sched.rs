//! The scheduler. See the crate docs for the model; this file is the whole of it.
//!
//! Why hand-written rather than rayon or a channel per stage: a channel per stage means a thread
//! per stage (oversubscription, the very thing this engine avoids), and rayon's work stealing has
//! no notion of serial-in-order stages or of a bound on frames in flight. The scheduler is small:
//! one mutex-protected state machine that workers consult only between jobs.

#![allow(unsafe_code)] // only for the slice runner's borrowed closure; see SliceJob

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use framepipe_core::{
    Effect, EffectFactory, Error, Frame, FrameCtx, FramePool, Mode, Result, Sink, SliceRunner,
    Source, VideoInfo,
};

use crate::stats::{Counters, RunStats, StageCounters};

/// An effect in a pipeline, with how to schedule it.
pub struct EffectStage {
    /// The configured effect.
    pub factory: Box<dyn EffectFactory>,
    /// Serial or parallel (the element's default unless the user overrode it).
    pub mode: Mode,
}

impl std::fmt::Debug for EffectStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EffectStage({}, {})", self.factory.name(), self.mode)
    }
}

/// How to run a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// Worker threads. 0 = one per available core.
    pub threads: usize,
    /// Frames in flight at most. 0 = automatic (`2 * threads + 2`).
    pub in_flight: usize,
}

impl Options {
    fn resolved(self) -> (usize, usize) {
        let threads = if self.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            self.threads
        };
        let in_flight = if self.in_flight == 0 {
            2 * threads + 2
        } else {
            self.in_flight
        };
        (threads, in_flight)
    }
}

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

    /// Negotiates frame sizes from the source to the sink, makes the frame pools and the first
    /// instance of every effect, and readies the workers' state. Everything that allocates
    /// happens here.
    pub fn prepare(self, options: Options) -> Result<Prepared> {
        let (threads, in_flight) = options.resolved();
        let Pipeline {
            source: (source_name, source),
            effects,
            sink: (sink_name, mut sink),
        } = self;

        // Negotiation: each stage's output shape.
        let mut infos = vec![source.info()];
        let mut factories = Vec::with_capacity(effects.len());
        let mut modes = Vec::with_capacity(effects.len());
        let mut names = vec![source_name];
        for (name, mut stage) in effects {
            let input = *infos.last().expect("infos starts with the source");
            let out = stage.factory.negotiate(input)?;
            if out.width == 0 || out.height == 0 {
                return Err(Error::Unsupported {
                    element: name,
                    what: format!("an output of {}x{}", out.width, out.height),
                });
            }
            infos.push(out);
            factories.push(stage.factory);
            modes.push(stage.mode);
            names.push(name);
        }
        names.push(sink_name);
        let last = *infos.last().expect("at least the source");
        sink.start(last)?;

        // One pool per distinct frame size. Every token holds at most two frames at once (its
        // input and its output while a stage runs), the sink may keep a couple (a "last frame").
        let mut pools: Vec<(u32, u32, FramePool)> = Vec::new();
        let mut stage_pools = Vec::with_capacity(infos.len());
        for info in &infos {
            let idx = match pools
                .iter()
                .position(|(w, h, _)| *w == info.width && *h == info.height)
            {
                Some(i) => i,
                None => {
                    pools.push((
                        info.width,
                        info.height,
                        FramePool::new(info.width, info.height, 2 * in_flight + 4),
                    ));
                    pools.len() - 1
                }
            };
            stage_pools.push(pools[idx].2.clone());
        }

        let n = names.len();
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
                created: 0,
                max_instances: if mode == Mode::Serial { 1 } else { threads },
                source: None,
                sink: None,
            };
            if kind == Kind::Effect {
                // The first instance now: a plugin that cannot be made fails before any frame.
                st.free.push(factories[i - 1].instantiate()?);
                st.created = 1;
                counter.add_instance();
            } else {
                counter.add_instance();
            }
            stage_states.push(st);
            counters.push(counter);
        }
        stage_states[0].source = Some(source);
        stage_states[n - 1].sink = Some(sink);

        let shared = Shared {
            state: Mutex::new(State {
                stages: stage_states,
                ready: VecDeque::with_capacity(in_flight * n),
                in_flight: 0,
                max_in_flight: in_flight,
                next_seq: 0,
                source_done: false,
                abort: false,
                error: None,
                source_error: None,
                waiting: 0,
                slices: (0..threads).map(|_| SliceSlot::default()).collect(),
            }),
            work: Condvar::new(),
            slice_done: Condvar::new(),
            factories,
            pools: stage_pools,
            rate: infos[0].rate,
            threads,
            counters: Arc::new(Counters {
                stages: counters,
                in_flight: Default::default(),
                frames_out: Default::default(),
                started: Instant::now(),
            }),
        };
        Ok(Prepared {
            shared,
            infos,
            threads,
            in_flight,
        })
    }
}

/// A negotiated pipeline, ready to run.
pub struct Prepared {
    shared: Shared,
    infos: Vec<VideoInfo>,
    threads: usize,
    in_flight: usize,
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

    /// Runs to the end of the stream (or the first error) and returns the final figures.
    ///
    /// On a source error, the frames produced before it still reach the sink; the sink is always
    /// finished (flushed, closed). The first error is returned after that.
    pub fn run(self) -> Result<RunStats> {
        let shared = &self.shared;
        std::thread::scope(|s| {
            for w in 0..self.threads {
                std::thread::Builder::new()
                    .name(format!("fp-worker-{w}"))
                    .spawn_scoped(s, move || shared.worker(w))
                    .map_err(|e| Error::io("starting a worker thread", e))?;
            }
            Ok::<(), Error>(())
        })?;
        let (sink, error, source_error) = {
            let mut st = shared.lock();
            let last = st.stages.len() - 1;
            (
                st.stages[last].sink.take(),
                st.error.take(),
                st.source_error.take(),
            )
        };
        let finish = match sink {
            Some(mut sink) => sink.finish(),
            None => Ok(()),
        };
        if let Some(e) = error.or(source_error) {
            return Err(e);
        }
        finish?;
        Ok(shared.counters.snapshot())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Source,
    Effect,
    Sink,
}

struct Token {
    ctx: FrameCtx,
    frame: Option<Frame>,
}

enum Inst {
    Source(Box<dyn Source>),
    Effect(Box<dyn Effect>),
    /// A parallel stage's new instance, to be made by the worker outside the lock.
    NewEffect,
    Sink(Box<dyn Sink>),
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
    free: Vec<Box<dyn Effect>>,
    created: usize,
    max_instances: usize,
    source: Option<Box<dyn Source>>,
    sink: Option<Box<dyn Sink>>,
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

struct State {
    stages: Vec<StageState>,
    /// Tokens reserved for a serial stage (it was their turn when they were unparked).
    ready: VecDeque<(usize, Token)>,
    in_flight: usize,
    max_in_flight: usize,
    next_seq: u64,
    source_done: bool,
    abort: bool,
    error: Option<Error>,
    source_error: Option<Error>,
    waiting: usize,
    /// One slot per worker for its fork-join slice jobs.
    slices: Vec<SliceSlot>,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    slice_done: Condvar,
    factories: Vec<Box<dyn EffectFactory>>,
    /// The pool each stage's output frames come from (index = stage).
    pools: Vec<FramePool>,
    rate: framepipe_core::Rational,
    threads: usize,
    counters: Arc<Counters>,
}

/// Outcome of running a job, reported back under the lock.
enum Done {
    Source(Box<dyn Source>, Result<Option<Token>>),
    Effect(usize, Option<Box<dyn Effect>>, Result<Token>),
    Sink(Box<dyn Sink>, Result<()>),
    Slice(usize, bool),
}

impl State {
    fn finished(&self) -> bool {
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

    fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.abort = true;
    }

    /// The next job for an idle worker: slices of a frame being worked on first (they hold a
    /// worker waiting), then frames furthest down the pipeline (to bound latency), then a new
    /// frame from the source.
    fn next_job(&mut self) -> Option<Job> {
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
            let inst = Inst::Source(self.stages[0].source.take().expect("idle source is home"));
            let token = Token {
                ctx: FrameCtx { seq, pts_ns: 0 },
                frame: None,
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
            Kind::Sink => Inst::Sink(st.sink.take().expect("serial sink reserved")),
            Kind::Effect => match st.free.pop() {
                Some(e) => Inst::Effect(e),
                None => {
                    // Each worker holds at most one instance, so a parallel stage with
                    // `threads` instances always has one free; this is the lazy creation.
                    debug_assert!(st.created < st.max_instances, "instance bound exceeded");
                    st.created += 1;
                    Inst::NewEffect
                }
            },
        }
    }

    /// Moves `token` to `stage`: returns the job if it can run now, else parks it.
    fn advance(&mut self, stage: usize, token: Token) -> Option<Job> {
        if self.abort {
            self.in_flight -= 1;
            return None;
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
        }
        let inst = self.take_instance(stage);
        Some(Job::Stage { stage, token, inst })
    }

    /// A serial stage finished a frame: let the next one in, if it is already waiting.
    fn release_serial(&mut self, stage: usize) {
        let cap = self.max_in_flight as u64;
        let st = &mut self.stages[stage];
        st.busy = false;
        st.next_seq += 1;
        let slot = (st.next_seq % cap) as usize;
        if st.parked[slot]
            .as_ref()
            .is_some_and(|t| t.ctx.seq == st.next_seq)
        {
            let token = st.parked[slot].take().expect("checked above");
            st.busy = true;
            self.ready.push_back((stage, token));
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
            Done::Sink(sink, result) => {
                let last = self.stages.len() - 1;
                self.stages[last].sink = Some(sink);
                self.release_serial(last);
                self.in_flight -= 1;
                if let Err(e) = result {
                    self.fail(e);
                }
                None
            }
        };
        if self.abort {
            // Drop everything parked or ready: their frames go back to the pools.
            let dropped = self.ready.len()
                + self
                    .stages
                    .iter_mut()
                    .flat_map(|s| s.parked.iter_mut())
                    .filter_map(Option::take)
                    .count();
            self.ready.clear();
            self.in_flight -= dropped;
        }
        shared
            .counters
            .in_flight
            .store(self.in_flight, std::sync::atomic::Ordering::Relaxed);
        if self.finished() {
            shared.work.notify_all();
        } else if self.waiting > 0 && self.has_work() {
            shared.work.notify_one();
        }
        next
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in an element is caught in `run_job`, so the lock is never held by a panicking
        // thread; recover the state anyway rather than cascade.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn worker(&self, worker: usize) {
        let mut st = self.lock();
        loop {
            if let Some(mut job) = st.next_job() {
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
                let counters = &self.counters.stages[stage];
                let done = match inst {
                    Inst::Source(mut source) => {
                        token.ctx.pts_ns = self.rate.frame_time_ns(token.ctx.seq);
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
                    Inst::NewEffect => match self.factories[stage - 1].instantiate() {
                        Ok(effect) => {
                            counters.add_instance();
                            self.run_effect(stage, effect, token, worker)
                        }
                        Err(e) => Done::Effect(stage, None, Err(e)),
                    },
                    Inst::Sink(mut sink) => {
                        let result = guard(&counters.name, || {
                            let frame = token.frame.take().expect("frames reach the sink");
                            sink.consume(&token.ctx, &frame)
                        });
                        if result.is_ok() {
                            self.counters
                                .frames_out
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Done::Sink(sink, result)
                    }
                };
                counters.record(started.elapsed());
                done
            }
        }
    }

    fn run_effect(
        &self,
        stage: usize,
        mut effect: Box<dyn Effect>,
        mut token: Token,
        worker: usize,
    ) -> Done {
        let slices = PoolSlices {
            shared: self,
            worker,
        };
        let name = &self.counters.stages[stage].name;
        let result = guard(name, || {
            let input = token.frame.take().expect("effects get a frame");
            let mut output = self.pools[stage].try_acquire()?;
            effect.process(&token.ctx, &input, &mut output, &slices)?;
            token.frame = Some(output.freeze());
            Ok(token)
        });
        Done::Effect(stage, Some(effect), result)
    }
}

/// Runs `f`, turning a panic inside an element into an error that names it.
fn guard<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
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
        // SAFETY: only the lifetime is changed. The pointer is published in this worker's slot
        // and this function does not return until `done == n`, i.e. until every index claimed by
        // any worker has been run; after that the slot is cleared under the lock, so no worker
        // can dereference the pointer once `job` goes out of scope.
        let erased: *const (dyn Fn(usize) + Sync + 'static) =
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
