//! The pipeline as the user builds it ([`Pipeline`], [`EffectStage`], [`Options`]) and
//! [`Pipeline::prepare`]: negotiation of every stage's shape, the frame pools, every effect
//! instance and the scheduler's state, all made before the first frame. [`Prepared::run`]
//! starts the workers (`worker.rs`) and becomes the output thread (`output.rs`).
//!
//! Why hand-written rather than rayon or a channel per stage: a channel per stage means a thread
//! per stage (oversubscription, the very thing this engine avoids), and rayon's work stealing has
//! no notion of serial-in-order stages or of a bound on frames in flight. The scheduler is small:
//! one mutex-protected state machine (`state.rs`) that workers consult only between jobs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize};
use std::sync::{Arc, Mutex};

use framepipe_clock::{PiCondvar, PiMutex};

use framepipe_control::{CommandReader, Oscillator};
use framepipe_core::{
    EffectFactory, Error, Mode, PropSpec, PropValue, Rational, Result, Sink, Source, VideoInfo,
};

use crate::events::EventFn;
use crate::live::{FrameParams, Live, LiveStage};
use crate::slices::SliceSlot;
use crate::state::{Instance, Kind, Port, PortSignal, Shared, StageState, State, Wake};
use crate::stats::{Counters, RunStats, StageCounters};
use crate::worker::{guard, panic_message};

/// How long a run that ended early (stop, error) waits for each worker to finish the job in
/// hand before leaving it running, detached (it is blocked inside an element).
pub const JOIN_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

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
        let param_names: Vec<Vec<Arc<str>>> = live
            .stages
            .iter()
            .map(|s| {
                s.params
                    .iter()
                    .map(|p| Arc::from(p.spec.name.as_str()))
                    .collect()
            })
            .collect();
        let live_spec = live.spec();
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
                (Mode::Serial, Kind::Sink(0))
            } else {
                (modes[i - 1], Kind::Effect)
            };
            let counter = StageCounters::new(name, mode);
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
            (0, Some(pace)) => pace.period_ns().saturating_mul(5).max(100_000_000),
            // Unpaced (batch) runs have no deadline to miss: only report what looks stuck.
            (0, None) => rate.period_ns().saturating_mul(5).max(1_000_000_000),
            (t, _) => t,
        };
        let shared = Shared {
            state: PiMutex::new(State {
                stages: stage_states,
                ready: VecDeque::with_capacity(n + 1),
                ports: vec![Port {
                    stage: n - 1,
                    ready: None,
                }],
                in_flight: 0,
                max_in_flight: in_flight,
                next_seq: 0,
                source_done: false,
                abort: false,
                error: None,
                source_error: None,
                waiting: 0,
                slices: (0..threads).map(|_| SliceSlot::default()).collect(),
                broken: false,
                wake: Wake::default(),
                garbage: None,
            }),
            work: PiCondvar::new(),
            slice_done: PiCondvar::new(),
            pools: stage_pools,
            rate,
            threads,
            snapshots,
            param_names,
            live: PiMutex::new(live),
            live_spec,
            port_signals: vec![PortSignal::default()],
            running: (0..threads + 1)
                .map(|_| (AtomicUsize::new(0), AtomicI64::new(0)))
                .collect(),
            events: None,
            counters: Arc::new(Counters::new(counters)),
        };
        Ok(Prepared {
            shared: Arc::new(shared),
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
    pub(crate) shared: Arc<Shared>,
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
        Arc::get_mut(&mut self.shared)
            .expect("only the Prepared holds the state before run")
            .events = Some(f);
    }

    /// Runs to the end of the stream (or the first error, or a `stop` command) and returns the
    /// final figures. The calling thread becomes the output thread: it runs the sink, paced by
    /// the frame clock when `Options::pace` is set.
    ///
    /// On a source error, the frames produced before it still reach the sink; the sink is always
    /// finished (flushed, closed). The first error is returned after that. A panic anywhere (an
    /// element, the sink, an event callback, the output thread, a worker) ends the run with an
    /// error that says where; no thread is left waiting.
    ///
    /// When the run ends early (`stop`, an error), the sink is finished at once, and workers get
    /// [`JOIN_GRACE`] to finish the job in hand. A worker blocked inside an element (a source
    /// waiting for a peer) cannot be interrupted: it is left running, detached, and reported as
    /// [`Event::LeftRunning`](crate::Event::LeftRunning); it exits as soon as the element
    /// returns, and with the process.
    pub fn run(mut self) -> Result<RunStats> {
        let mut sink = self.sink.take().expect("run once");
        let shared = Arc::clone(&self.shared);
        let commands = self.commands.take();
        let options = self.options;
        let stall = self.stall_timeout_ns;
        let port = 0;
        let sink_stage = shared.lock().ports[port].stage;
        let sink_name = shared.counters.stages[sink_stage].name.clone();
        let mut workers = Vec::with_capacity(self.threads);
        for w in 0..self.threads {
            let sh = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name(format!("fp-worker-{w}"))
                .spawn(move || sh.worker(w));
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => {
                    let e = Error::io("starting a worker thread", e);
                    let mut st = shared.lock();
                    st.fail(e);
                    st.after_change(&shared);
                }
            }
        }
        let output = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::output::run_output(&shared, port, &mut *sink, commands, options, stall)
        }));
        let (pacing, out_result) = output.unwrap_or_else(|p| {
            let e = Error::element("output thread", format!("panicked: {}", panic_message(&*p)));
            shared.break_run(e, None);
            (None, Ok(()))
        });
        // Every frame the sink got was whole: finish it now, before waiting for the workers
        // (one may be blocked in a source that nothing will unblock).
        let finish = guard(&sink_name, || sink.finish());
        shared.join_workers(workers, JOIN_GRACE);
        let (error, source_error) = {
            let mut st = shared.lock();
            (st.error.take(), st.source_error.take())
        };
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
