//! The pipeline as the user builds it ([`Pipeline`], [`EffectStage`], [`Options`]) and
//! [`Pipeline::prepare`]: negotiation of every stage's shape, the frame pools, every effect
//! instance and the scheduler's state, all made before the first frame. [`Prepared::run`]
//! starts the workers (`worker.rs`) and becomes the output thread (`output.rs`).
//!
//! Why hand-written rather than rayon or a channel per stage: a channel per stage means a thread
//! per stage (oversubscription, the very thing this engine avoids), and rayon's work stealing has
//! no notion of serial-in-order stages or of a bound on frames in flight. The scheduler is small:
//! one mutex-protected state machine (`sched/`) that workers consult only between jobs.

use std::sync::{Arc, Mutex};

use framepipe_control::{CommandReader, Oscillator};
use framepipe_core::{
    EffectFactory, Error, Frame, FramePool, Mode, PropSpec, PropValue, Rational, Result, Sink,
    VideoInfo,
};

use crate::events::EventFn;
use crate::graph::{Graph, OnEnd};
use crate::live::{FrameParams, Live, LiveStage};
use crate::plan::{Part, Plan};
use crate::pools::{PoolNeeds, PoolNode, PoolPlan, SharedPools, ShowPools};
use crate::sched::{
    new_state, EditPlan, Instance, Kind, NextVersion, NodeState, Proc, Shared, SourceInst, Topo,
    TopoNode, Version,
};
use crate::stats::{Counters, RunStats, StageCounters};
use crate::view::{GraphView, NodeView, ShowView};
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
    /// Paced runs: how long before its deadline a frame may begin (its sources read; each node
    /// takes the live values when it starts the frame): the bound on how late a command can
    /// reach the output. 0 = automatic: the graph's measured latency (the slowest of the last
    /// frames from beginning to ready) plus a quarter and 2 ms. Never more frames than
    /// `in_flight`. Unpaced runs are not held back.
    pub latency_ns: u64,
    /// Paced runs: no standby pacing thread. By default, with two CPUs, a second thread kept
    /// off the output thread's CPU releases a frame the output thread has not
    /// released 0.25 ms after its deadline (it lost its CPU: a VM's host took it).
    pub no_standby: bool,
    /// Fault injection, for tests: once the first `Duration` has passed since the master
    /// output began, its thread stays away for the second (a sleep where it would wait for a
    /// deadline), as if its CPU were taken away. Only with the standby (see `no_standby`).
    #[doc(hidden)]
    pub inject_stall: Option<(std::time::Duration, std::time::Duration)>,
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

impl Graph {
    /// Negotiates every node's shape, makes the frame pools and every effect and mixer
    /// instance, starts the sinks, and readies the workers' state. Everything that allocates
    /// happens here.
    pub fn prepare(self, options: Options) -> Result<Prepared> {
        let (threads, asked_in_flight) = options.resolved();
        let plan = Plan::new(self)?;
        let rate = plan.rate;
        let infos: Vec<VideoInfo> = plan.nodes.iter().map(|e| e.info).collect();
        // Frames in flight: never more than the shortest source that stops the run gives.
        let len_hint = plan
            .nodes
            .iter()
            .filter_map(|e| match &e.part {
                Part::Source {
                    source,
                    on_end: OnEnd::Stop,
                } => Some(source.len_hint()),
                _ => None,
            })
            .fold(None, |acc: Option<Option<u64>>, h| match (acc, h) {
                (None, h) => Some(h),
                (Some(Some(a)), Some(b)) => Some(Some(a.min(b))),
                (Some(a), None) => Some(a),
                (Some(None), b) => Some(b),
            })
            .flatten();
        let in_flight = crate::pools::in_flight(threads, asked_in_flight, &infos, len_hint);
        let memory = Arc::new(crate::pools::MemoryBook::default());
        let built = build_version(
            plan,
            &VersionCtx {
                threads,
                in_flight,
                options,
                number: 0,
                running: None,
                memory: &memory,
                admit: Admit::First,
            },
        )?;
        let source_rate = rate;
        let stall_timeout_ns = match (options.stall_timeout_ns, options.pace) {
            (0, Some(pace)) => pace.period_ns().saturating_mul(5).max(100_000_000),
            // Unpaced (batch) runs have no deadline to miss: only report what looks stuck.
            (0, None) => source_rate.period_ns().saturating_mul(5).max(1_000_000_000),
            (t, _) => t,
        };
        let Built {
            ver,
            live,
            node_states,
            sinks,
            port_nodes,
            graph_view,
            moves: _,
            pool_plans,
        } = built;
        let stages = Arc::clone(&ver.stages);
        let view = ShowView::new(graph_view, &live);
        let state = new_state(Arc::new(ver), threads, port_nodes, node_states);
        let counters = Arc::new(Counters::new(stages, memory));
        let shared = Shared::new(state, rate, threads, live, counters, view);
        Ok(Prepared {
            shared: Arc::new(shared),
            sinks,
            infos,
            threads,
            in_flight,
            options,
            stall_timeout_ns,
            commands: None,
            editor: None,
            own_pools: pool_plans,
            pool_share: None,
        })
    }
}

/// What a graph version is built with.
pub(crate) struct VersionCtx<'a> {
    pub threads: usize,
    /// Frame slots (a live edit keeps the running graph's).
    pub in_flight: usize,
    pub options: Options,
    pub number: u64,
    /// A live edit: the running version, whose kept nodes move in.
    pub running: Option<&'a RunningVersion<'a>>,
    /// The show's memory book: what the version holds is counted there.
    pub memory: &'a Arc<crate::pools::MemoryBook>,
    /// What a live edit's version is, for its memory check (see [`Admit`]).
    pub admit: Admit,
}

/// What a version is, for the memory check of a live edit: what it holds is added to what
/// the show holds already (the running version, and one an edit replaced that is not dropped
/// yet), since the running version goes on while the new one is built and until the switch is
/// over ([`MemoryBook::admit`](crate::pools::MemoryBook::admit)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// A run's first version: checked alone (the pools' own check).
    First,
    /// An edit (`add`, `remove`, `replace`, `link`, `load` without `fade=`).
    Edit,
    /// A crossfade's version (both projects), switched in from the running one.
    FadeStart,
    /// The version after a crossfade (the new project alone), built while the fade runs.
    FadeEnd,
}

/// What the budget counts for a version: its pools at full capacity, the instances it makes
/// (the nodes an edit keeps bring theirs), and all of its nodes' instances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Need {
    pub pools: u64,
    pub new_instances: u64,
    pub all_instances: u64,
}

impl Need {
    /// What building it adds to what is held: its pools and its new instances.
    pub(crate) fn added(&self) -> u64 {
        self.pools.saturating_add(self.new_instances)
    }
}

/// Effect and mixer instances a node has (0 for the others).
fn instances_of(e: &crate::plan::ExecNode, threads: usize) -> usize {
    match &e.part {
        Part::Effect(_) | Part::Mixer(_) => {
            if e.serial {
                1
            } else {
                threads
            }
        }
        _ => 0,
    }
}

/// Per node: the running node it continues with its instances, source or ring (a live edit's
/// kept node), if any.
fn kept_nodes(plan: &Plan, running: Option<&RunningVersion<'_>>) -> Vec<Option<usize>> {
    let infos: Vec<VideoInfo> = plan.nodes.iter().map(|e| e.info).collect();
    plan.nodes
        .iter()
        .map(|e| {
            let named = running.and_then(|r| r.index_of(&e.was));
            match e.part {
                // A running source or sink is the one of that name (its shape is checked when
                // the version is built).
                Part::Running { .. } => named,
                _ => named.filter(|&o| running.is_some_and(|r| r.same_node(o, e, &infos))),
            }
        })
        .collect()
}

/// The frames each node keeps beyond the frames in flight, and what the pools are sized from
/// (see `pools.rs`).
fn pool_layout<'p>(
    plan: &'p Plan,
    ctx: &VersionCtx<'_>,
) -> (Vec<usize>, Vec<PoolNode<'p>>, bool, bool) {
    let (threads, in_flight, options) = (ctx.threads, ctx.in_flight, ctx.options);
    let rate = plan.rate;
    let chain = plan
        .nodes
        .iter()
        .all(|e| e.inputs.len() <= 1 && e.consumers.len() <= 1 && e.feeds.is_empty());
    let keep_last = options.pace.is_some() && options.overload == Overload::Live;
    // Per node: the frames of its own output it keeps beyond the frames in flight (a source's
    // last frame, when it may give it again). A running source carried into a live edit's
    // version keeps its policy, and takes its frames from the new version's pools.
    let holds: Vec<usize> = plan
        .nodes
        .iter()
        .map(|e| match &e.part {
            Part::Source { on_end, source } => {
                usize::from(*on_end == OnEnd::Hold || source.info().rate != rate)
            }
            Part::Running { sink: false } => ctx
                .running
                .and_then(|r| r.index_of(&e.was).map(|o| r.ver.holds[o]))
                .unwrap_or(0),
            _ => 0,
        })
        .collect();
    let pool_nodes: Vec<PoolNode<'_>> = plan
        .nodes
        .iter()
        .enumerate()
        .map(|(i, e)| {
            // A live edit's running sink is a sink like a new one: it may keep a clone of
            // its frame, and the master output's thread keeps its last frame under `live`,
            // both taken from this version's pools after the switch.
            let sinks: Vec<&crate::plan::ExecNode> = e
                .consumers
                .iter()
                .map(|&c| &plan.nodes[c])
                .filter(|c| matches!(c.part, Part::Sink(_) | Part::Running { sink: true }))
                .collect();
            let extra = holds[i]
                + match &e.part {
                    // Frame 0's frame.
                    Part::Feedback { .. } => 1,
                    _ => 0,
                }
                + if e.feeds.is_empty() { 0 } else { in_flight }
                // A leaky branch reading it keeps the frame it took (its first node's
                // input) after that frame left flight, one at a time per branch.
                + plan
                    .heads
                    .iter()
                    .filter(|&&h| plan.nodes[h].inputs.contains(&i))
                    .count();
            PoolNode {
                info: e.info,
                name: &e.name,
                writes: !matches!(e.part, Part::Sink(_) | Part::Feedback { .. }),
                instances: instances_of(e, threads),
                in_branch: e.branch.is_some(),
                sinks_fed: sinks.len(),
                feeds_master: sinks.iter().any(|s| s.master),
                extra,
            }
        })
        .collect();
    (holds, pool_nodes, chain, keep_last)
}

/// What the budget would count for a version of `plan` (nothing is made): see [`Need`].
pub(crate) fn need_of(plan: &Plan, ctx: &VersionCtx<'_>) -> Need {
    let (_, pool_nodes, chain, keep_last) = pool_layout(plan, ctx);
    let needs = PoolNeeds {
        nodes: &pool_nodes,
        chain,
        threads: ctx.threads,
        in_flight: ctx.in_flight,
        keep_last,
    };
    let (plans, _) = needs.plan();
    let kept = kept_nodes(plan, ctx.running);
    let bytes = |e: &crate::plan::ExecNode| {
        (instances_of(e, ctx.threads) as u64).saturating_mul(framepipe_core::limits::frame_bytes(
            e.info.width,
            e.info.height,
        ))
    };
    Need {
        pools: crate::pools::pool_bytes(&plans),
        new_instances: plan
            .nodes
            .iter()
            .zip(&kept)
            .filter(|(_, k)| k.is_none())
            .map(|(e, _)| bytes(e))
            .fold(0, u64::saturating_add),
        all_instances: plan.nodes.iter().map(bytes).fold(0, u64::saturating_add),
    }
}

/// The running version as a live edit sees it.
pub(crate) struct RunningVersion<'a> {
    pub ver: &'a Version,
    /// Per output port, its sink's node in the running version.
    pub ports: &'a [usize],
}

impl RunningVersion<'_> {
    pub(crate) fn index_of(&self, name: &str) -> Option<usize> {
        self.ver.names.iter().position(|n| &**n == name)
    }

    fn port_of(&self, node: usize) -> Option<usize> {
        self.ports.iter().position(|&p| p == node)
    }

    /// Whether running node `o` can be carried into the new version as execution node `e`:
    /// the edit keeps it (a running placeholder, or `keep`), it is the same element, of the
    /// same kind, with the same output shape and mode, fed by inputs of the same shapes.
    /// `infos`: the new version's output shape per node.
    fn same_node(&self, o: usize, e: &crate::plan::ExecNode, infos: &[VideoInfo]) -> bool {
        let v = self.ver;
        // A feedback's state is its ring (the loop's previous frame): kept only when the edit
        // keeps the node, like an effect's instances (a replaced one starts afresh).
        let kept = matches!(e.part, Part::Running { .. }) || e.keep;
        let old_inputs = &v.topo.nodes[o].inputs;
        kept && v.elements[o] == e.element
            && v.kinds[o] == e.kind_word()
            && v.infos[o] == e.info
            && v.topo.nodes[o].serial == e.serial
            && old_inputs.len() == e.inputs.len()
            && old_inputs
                .iter()
                .zip(&e.inputs)
                .all(|(&a, &b)| v.infos[a] == infos[b])
    }
}

/// A graph version, built: everything the scheduler needs for it, before it runs.
pub(crate) struct Built {
    pub ver: Version,
    pub live: Live,
    pub node_states: Vec<NodeState>,
    /// Per output port: the sink (a new run's; a live edit keeps the running ones).
    pub sinks: Vec<Option<Box<dyn Sink>>>,
    pub port_nodes: Vec<usize>,
    pub graph_view: GraphView,
    /// Live edits: (running node, new node) whose instances, source or ring move in.
    pub moves: Vec<(usize, usize)>,
    /// Each distinct pool of `ver.pools` once, with its plan.
    pub pool_plans: Vec<(FramePool, PoolPlan)>,
}

/// Builds a graph version from its plan: pools, live parameters, instances of every effect and
/// mixer (except those a live edit keeps), sources, sinks (started; a new run's only), and the
/// scheduler's shape of it. Everything that allocates for a version happens here.
pub(crate) fn build_version(plan: Plan, ctx: &VersionCtx<'_>) -> Result<Built> {
    let VersionCtx {
        threads, in_flight, ..
    } = *ctx;
    let rate = plan.rate;
    let n = plan.nodes.len();
    let infos: Vec<VideoInfo> = plan.nodes.iter().map(|e| e.info).collect();
    let names: Vec<Arc<str>> = plan
        .nodes
        .iter()
        .map(|e| Arc::from(e.name.as_str()))
        .collect();
    let elements: Vec<String> = plan.nodes.iter().map(|e| e.element.clone()).collect();
    let kinds: Vec<&'static str> = plan.nodes.iter().map(|e| e.kind_word()).collect();
    let mut moves = Vec::new();
    let need = need_of(&plan, ctx);
    let kept = kept_nodes(&plan, ctx.running);
    // A live edit's version is made while the running one goes on, and both live until the
    // switch is over: what it adds must fit besides what the show holds already (checked
    // before anything of it is made; a frame over its share of the budget is named first).
    if let Some(r) = ctx.running {
        let limits = framepipe_core::Limits::current();
        for e in &plan.nodes {
            limits.check_frame(&e.name, e.info.width, e.info.height)?;
        }
        let running = r.ver.pool_bytes.saturating_add(r.ver.instance_bytes);
        let (name, during, hint) = match ctx.admit {
            Admit::First | Admit::Edit => ("the new one", "while the edit switches", ""),
            Admit::FadeStart => (
                "the crossfade's graph of both projects",
                "as the fade begins",
                ", or load without fade= (a cut holds the running graph and the new one only)",
            ),
            Admit::FadeEnd => ("the new project's graph", "at the fade's end", ""),
        };
        ctx.memory
            .admit(running, need.added(), name, during, hint)?;
    }
    let (holds, pool_nodes, chain, keep_last) = pool_layout(&plan, ctx);
    let ShowPools {
        per_node: pools,
        distinct: pool_plans,
        bytes: pool_bytes,
    } = crate::pools::frame_pools(&PoolNeeds {
        nodes: &pool_nodes,
        chain,
        threads,
        in_flight,
        keep_last,
    })?;
    drop(pool_nodes);
    debug_assert_eq!(pool_bytes, need.pools);
    let pools_held = ctx.memory.hold(pool_bytes);

    // Live parameters, one stage per node.
    let mut live_stages = Vec::with_capacity(n);
    for e in &plan.nodes {
        let is_proc = matches!(e.part, Part::Effect(_) | Part::Mixer(_));
        let mut live = LiveStage::new(e.name.clone(), e.element.clone(), is_proc, e.same_shape);
        let (params, oscillators) = match &e.part {
            Part::Effect(s) => (s.params.clone(), s.oscillators.clone()),
            Part::Mixer(s) => (s.params.clone(), s.oscillators.clone()),
            // A generator's parameters (frei0r sources): set like an effect's.
            Part::Source { source, .. } => (source.live_props(), Vec::new()),
            _ => (Vec::new(), Vec::new()),
        };
        for (spec, value) in params {
            live.add_param(spec, value);
        }
        for (prop, osc) in oscillators {
            live.attach(&prop, osc).map_err(|reason| Error::BadValue {
                element: e.name.clone(),
                prop: prop.clone(),
                value: "~oscillator".into(),
                reason,
            })?;
        }
        live_stages.push(live);
    }
    let live = Live::new(live_stages);
    let graph_view = GraphView {
        version: ctx.number,
        nodes: plan
            .nodes
            .iter()
            .zip(&live.stages)
            .map(|(e, st)| NodeView {
                name: e.name.clone(),
                element: e.element.clone(),
                kind: e.kind_word(),
                inputs: e
                    .inputs
                    .iter()
                    .map(|&i| plan.nodes[i].name.clone())
                    .collect(),
                width: e.info.width,
                height: e.info.height,
                props: st.params.iter().map(|p| p.spec.clone()).collect(),
                bypassable: st.is_effect && st.same_shape,
                leaky: e.branch.is_some(),
                master: e.master,
                auto: e.auto,
            })
            .collect(),
    };
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
    let nb = plan.heads.len();
    let snapshots: Vec<Mutex<FrameParams>> = (0..in_flight + nb)
        .map(|_| Mutex::new(live.empty_frame()))
        .collect();
    let initial = live.empty_frame();

    // Sinks start with their input's shape; then every instance is made, so that a
    // plugin that cannot be made fails before any frame, and none is constructed on the
    // frame path (which would allocate and could make a frame late mid-show).
    let master = plan
        .nodes
        .iter()
        .position(|e| e.master)
        .expect("a checked graph has a master sink");
    let mut port_nodes = match ctx.running {
        // Filled in by the running sinks (they keep their ports), checked below.
        Some(r) => vec![usize::MAX; r.ports.len()],
        None => {
            let mut p = vec![master];
            p.extend(
                (0..n).filter(|&i| i != master && matches!(plan.nodes[i].part, Part::Sink(_))),
            );
            p
        }
    };
    let heads = plan.heads.clone();
    let mut topo_nodes = Vec::with_capacity(n);
    let mut node_states = Vec::with_capacity(n);
    let mut counters = Vec::with_capacity(n);
    let mut sinks: Vec<Option<Box<dyn Sink>>> = (0..port_nodes.len()).map(|_| None).collect();
    let mut first_frames: Vec<Option<Frame>> = (0..n).map(|_| None).collect();
    let mut roots = Vec::new();
    let mut branches: Vec<Vec<usize>> = vec![Vec::new(); nb];
    let mut show_nodes = 0;
    for (i, e) in plan.nodes.into_iter().enumerate() {
        // A running source or sink is the one of that name (its shape is checked below).
        let old = kept[i];
        let instance_bytes = framepipe_core::limits::frame_bytes(e.info.width, e.info.height);
        let counter = match (old, ctx.running) {
            (Some(o), Some(r)) => Arc::clone(&r.ver.stages[o]),
            _ => Arc::new(StageCounters::new(&e.name, e.mode())),
        };
        let mut st = NodeState::new();
        // A source whose `fill` may wait on the outside world: run by the IO thread.
        let mut blocks = false;
        let kind = match e.part {
            Part::Source { mut source, on_end } => {
                // Ready before the clock starts (a decoder's first frame decoded).
                source.ready()?;
                roots.push(i);
                blocks = source.blocks();
                let own = source.info().rate;
                let resample = (own != rate).then_some((own, rate));
                let applied: Vec<_> = source.live_props().into_iter().map(|(_, v)| v).collect();
                let n = applied.len();
                st.source = Some(SourceInst {
                    applied,
                    refused: vec![false; n],
                    changed: vec![false; n],
                    source,
                    on_end,
                    resample,
                    produced: 0,
                    origin: 0,
                    last: None,
                    keep_last: on_end == OnEnd::Hold || resample.is_some(),
                    giving_last: false,
                });
                counter.add_instance();
                Kind::Source
            }
            Part::Effect(_) | Part::Mixer(_) if old.is_some() => {
                // Kept by the edit: its instances move in at the switch, with their state.
                moves.push((old.expect("checked"), i));
                Kind::Process
            }
            Part::Effect(stage) => {
                let count = if e.serial { 1 } else { threads };
                for _ in 0..count {
                    st.free.push(Instance::new(
                        Proc::Effect(stage.factory.instantiate()?),
                        &initial.values[i],
                        ctx.memory.hold(instance_bytes),
                    ));
                }
                Kind::Process
            }
            Part::Mixer(stage) => {
                let count = if e.serial { 1 } else { threads };
                for _ in 0..count {
                    st.free.push(Instance::new(
                        Proc::Mixer(stage.factory.instantiate()?),
                        &initial.values[i],
                        ctx.memory.hold(instance_bytes),
                    ));
                }
                Kind::Process
            }
            Part::Feedback { from, color } => {
                roots.push(i);
                if let Some(o) = old {
                    // Its ring (the previous frame of the node it feeds back) moves in.
                    moves.push((o, i));
                }
                st.ring = (0..in_flight).map(|_| None).collect();
                let mut frame = pools[i].try_acquire()?;
                let px = u32::from_le_bytes(color);
                frame.words_mut().iter_mut().for_each(|w| *w = px);
                first_frames[i] = Some(frame.freeze());
                counter.add_instance();
                Kind::Feedback { from }
            }
            Part::Running { sink } => {
                let (Some(r), Some(o)) = (ctx.running, old) else {
                    return Err(Error::Graph(format!(
                        "{} stands for a running node: only a live edit's graph may have \
                         one",
                        e.name
                    )));
                };
                moves.push((o, i));
                if sink {
                    let port = r
                        .port_of(o)
                        .ok_or_else(|| Error::Graph(format!("{} is not a running sink", e.name)))?;
                    if r.ver.infos[o] != e.info {
                        let was = r.ver.infos[o];
                        return Err(Error::Graph(format!(
                            "the edit would change the frames reaching {} from {}x{} to \
                             {}x{}; a running sink keeps its size (scale in front of it)",
                            e.name, was.width, was.height, e.info.width, e.info.height
                        )));
                    }
                    port_nodes[port] = i;
                    Kind::Sink(port)
                } else {
                    if r.ver.topo.nodes[o].kind != Kind::Source {
                        return Err(Error::Graph(format!(
                            "{} stands for a running source, but the running {} is a {}",
                            e.name, e.name, r.ver.kinds[o]
                        )));
                    }
                    roots.push(i);
                    blocks = r.ver.topo.nodes[o].blocks;
                    Kind::Source
                }
            }
            Part::Sink(_) if ctx.running.is_some() => {
                return Err(Error::Graph(format!(
                    "{}: sinks cannot be added while running",
                    e.name
                )))
            }
            Part::Sink(mut sink) => {
                sink.start(e.info)?;
                // Ready before the clock starts (an encoder loaded and reading): the first
                // frames are not late because a sink was still starting.
                sink.ready()?;
                let port = port_nodes.iter().position(|&p| p == i).expect("a port");
                sinks[port] = Some(sink);
                counter.add_instance();
                Kind::Sink(port)
            }
        };
        match e.branch {
            Some(b) => branches[b].push(i),
            None => show_nodes += 1,
        }
        topo_nodes.push(TopoNode {
            kind,
            inputs: e.inputs,
            consumers: e.consumers,
            feeds: e.feeds,
            serial: e.serial,
            branch: e.branch,
            head: e.head,
            blocks,
        });
        node_states.push(st);
        counters.push(counter);
    }
    debug_assert_eq!(heads.len(), nb);
    let sources: Vec<usize> = (0..n)
        .filter(|&i| topo_nodes[i].kind == Kind::Source)
        .collect();
    let gated: Vec<usize> = (0..n)
        .filter(|&i| {
            let t: &TopoNode = &topo_nodes[i];
            t.head || (t.branch.is_none() && matches!(t.kind, Kind::Sink(_)))
        })
        .collect();
    let topo = Topo {
        nodes: topo_nodes,
        sources,
        gated,
        cap: in_flight,
        branches,
        roots,
        show_nodes,
    };
    if let Some(r) = ctx.running {
        if let Some(p) = port_nodes.iter().position(|&i| i == usize::MAX) {
            return Err(Error::Graph(format!(
                "the edit removes the sink {}; sinks cannot be removed while running",
                r.ver.names[r.ports[p]]
            )));
        }
        if port_nodes[0] != master {
            return Err(Error::Graph(format!(
                "the edit would make {} the master output instead of {}",
                names[master], r.ver.names[r.ports[0]]
            )));
        }
    }
    let stages: Arc<[Arc<StageCounters>]> = counters.into_iter().collect();
    Ok(Built {
        ver: Version {
            number: ctx.number,
            topo,
            pools,
            first_frames,
            snapshots,
            param_names,
            live_spec,
            stages,
            names,
            infos,
            elements,
            kinds,
            ports: port_nodes.clone(),
            holds,
            pool_bytes: need.pools,
            instance_bytes: need.all_instances,
            pools_held: Some(pools_held),
            pool_lease: None,
        },
        live,
        node_states,
        sinks,
        port_nodes,
        graph_view,
        moves,
        pool_plans,
    })
}

/// Plans `graph` as the next version of `ver` (its sources' and sinks' shapes as they run).
fn plan_against(
    graph: Graph,
    ver: &Version,
    rate: framepipe_core::Rational,
) -> Result<(RunningVersion<'_>, Plan)> {
    let running = RunningVersion {
        ver,
        ports: &ver.ports,
    };
    let info = |name: &str| running.index_of(name).map(|o| ver.infos[o]);
    let plan = Plan::build(
        graph,
        Some(&crate::plan::RunningGraph { rate, info: &info }),
    )?;
    Ok((running, plan))
}

/// What the edit from `running` to `next` does to each running node, for the commands on it
/// (see `Live::gone`): it goes on when it moves (`moves`) or `next` has a node of its name and
/// element (a replaced one, which takes what commands set on it meanwhile: `Live::carry`).
fn fates_of(running: &Version, next: &Version, moves: &[(usize, usize)]) -> Vec<crate::live::Fate> {
    use crate::live::Fate;
    (0..running.names.len())
        .map(|o| {
            if moves.iter().any(|&(from, _)| from == o) {
                return Fate::GoesOn;
            }
            match next.names.iter().position(|n| *n == running.names[o]) {
                None => Fate::Removed,
                Some(j) if next.elements[j] == running.elements[o] => Fate::GoesOn,
                Some(_) => Fate::Replaced,
            }
        })
        .collect()
}

/// Builds a live edit's next version of the running graph (on the edit thread, never on a
/// worker or an output thread): negotiation against the running sources' and sinks' shapes,
/// new pools, instances of the new nodes, and the scheduler state, ready to be switched in.
pub(crate) fn prepare_edit(
    graph: Graph,
    shared: &Arc<Shared>,
    options: Options,
    admit: Admit,
) -> Result<NextVersion> {
    let ver = Arc::clone(shared.lock().running_version());
    let (running, plan) = plan_against(graph, &ver, shared.rate)?;
    let built = build_version(
        plan,
        &VersionCtx {
            threads: shared.threads,
            in_flight: ver.topo.cap,
            options,
            number: ver.number + 1,
            running: Some(&running),
            memory: &shared.counters.memory,
            admit,
        },
    )?;
    let Built {
        ver: next,
        live,
        node_states,
        sinks: _,
        port_nodes,
        graph_view,
        moves,
        pool_plans,
    } = built;
    // A source that blocks runs on an IO thread, one per such source: started now if the
    // show had fewer. (The new pools are filled, or in a host replaced by quota handles on the
    // host's, by the edit thread once every check of the edit has passed: `fill_edit_pools`.)
    let blocking = next.topo.nodes.iter().filter(|t| t.blocks).count();
    if blocking > 0 {
        shared
            .ensure_io_threads(blocking)
            .map_err(|e| Error::io("starting an IO thread", e))?;
    }
    let mut moved = vec![false; next.topo.nodes.len()];
    for &(_, j) in &moves {
        moved[j] = true;
    }
    let fates = fates_of(&ver, &next, &moves);
    let removed = (0..fates.len())
        .filter(|&o| fates[o] == crate::live::Fate::Removed)
        .map(|o| Arc::clone(&ver.names[o]))
        .collect();
    let plan = EditPlan {
        live_stages: live.stages,
        moves,
        fates,
        removed,
        moved,
        graph_view: Some(graph_view),
        edit_pools: pool_plans,
    };
    Ok(NextVersion::new(
        Arc::new(next),
        port_nodes,
        node_states,
        plan,
    ))
}

/// Readies a live edit's new pools on the edit thread, once every check of the edit has passed
/// (its memory checks, a crossfade's): nothing is made for an edit that is refused. In a host,
/// they are replaced by quota handles on the host's pools (a new shape's pool made and filled
/// here: `share_edit`; the host's filler does the rest); alone, or for a pool the host has
/// none for, their buffers are made (allocated, every page touched): left lazy, they would be
/// made by the workers running the first frames after the switch.
pub(crate) fn fill_edit_pools(p: &mut NextVersion, shared: &Shared, options: Options) {
    let own = p.take_edit_pools();
    let running = Arc::clone(shared.lock().running_version());
    // Only the edit thread holds the new version before it is sent (`new_state` kept one
    // reference); were it otherwise, it keeps its own pools.
    if let Some(next) = p.version_mut() {
        let pace = pace_of(shared, options, running.topo.cap);
        crate::pools::share_edit(next, &own, &running, pace);
    }
    drop(running);
    let pools = &p.version().pools;
    for (i, pool) in pools.iter().enumerate() {
        if pool.quota().is_none() && !pools[..i].iter().any(|q| q.same_pool(pool)) {
            pool.fill(pool.capacity());
        }
    }
}

/// What the budget would count for the version `graph` makes once `p` runs (a crossfade's
/// version, not switched in yet; `graph`: the version after the fade), nothing built: its
/// plan against `p`'s version, as [`prepare_edit`] will plan it then.
pub(crate) fn need_after(
    graph: Graph,
    p: &NextVersion,
    shared: &Shared,
    options: Options,
) -> Result<Need> {
    let ver = p.version();
    let (running, plan) = plan_against(graph, ver, shared.rate)?;
    Ok(need_of(
        &plan,
        &VersionCtx {
            threads: shared.threads,
            in_flight: ver.topo.cap,
            options,
            number: ver.number + 1,
            running: Some(&running),
            memory: &shared.counters.memory,
            admit: Admit::FadeEnd,
        },
    ))
}

/// What a host's pool filler reads of a paced show (`None`: unpaced): its counters (the
/// latency budget), its period and its frames in flight.
fn pace_of(shared: &Shared, options: Options, in_flight: usize) -> Option<crate::pools::Pace> {
    options.pace.map(|rate| crate::pools::Pace {
        counters: Arc::clone(&shared.counters),
        period_ns: rate.period_ns(),
        in_flight,
    })
}

/// A negotiated pipeline, ready to run.
pub struct Prepared {
    pub(crate) shared: Arc<Shared>,
    /// Per output port (the master's first).
    pub(crate) sinks: Vec<Option<Box<dyn Sink>>>,
    infos: Vec<VideoInfo>,
    threads: usize,
    in_flight: usize,
    pub(crate) options: Options,
    pub(crate) stall_timeout_ns: u64,
    pub(crate) commands: Option<CommandReader>,
    pub(crate) editor: Option<Box<dyn crate::Editor>>,
    /// Its own pools (each once, with its plan): lazy, nothing made until the run starts
    /// ([`start_pools`](Self::start_pools)).
    own_pools: Vec<(FramePool, PoolPlan)>,
    /// Its place in a host's shared pools ([`share_pools`](Self::share_pools)).
    pool_share: Option<crate::pools::PoolLease>,
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

    /// The show's published state (graph and live values) for control surfaces; reading it
    /// never blocks the engine.
    pub fn view(&self) -> ShowView {
        self.shared.view.clone()
    }

    /// The negotiated shape at each node's output, in execution order (a sink: its input's;
    /// for a chain: the source first, then each effect, then the sink).
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

    /// Live edits (`Command::Edit`) are built by `editor` on an edit thread of the run's own
    /// and switched in at a frame boundary (see `edit.rs`). Without one they are refused.
    pub fn set_editor(&mut self, editor: Box<dyn crate::Editor>) {
        self.editor = Some(editor);
    }

    /// Commands (set, osc, bypass, speed, pause, step, resume, stop, edits) will be read from
    /// this queue once per frame boundary by the output thread.
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
        let shared = Arc::clone(&self.shared);
        let options = self.options;
        let stall = self.stall_timeout_ns;
        // Before the workers: the IO thread must have the blocking sources' first jobs (and
        // both the frame pools).
        self.start_pools();
        let mut side = self.start_side();
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
        let commands = self.commands.take();
        let mut sink = self.sinks[0].take().expect("the master sink");
        let output = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::output::run_output(
                &shared,
                0,
                &mut *sink,
                commands,
                side.link.take(),
                options,
                stall,
            )
        }));
        let (pacing, out_result) = output.unwrap_or_else(|p| {
            let e = Error::element("output thread", format!("panicked: {}", panic_message(&*p)));
            shared.break_run(e, None);
            (None, Ok(()))
        });
        conclude(
            &shared,
            self.threads,
            sink,
            (pacing, out_result),
            side,
            Some(workers),
        )
    }

    /// Starts what runs beside the master output: a follower output thread per other sink
    /// (unpaced: the master's pace holds the frames back; no commands: the master reads them)
    /// and, with an editor, the edit thread (live edits are built off the frame path).
    pub(crate) fn start_side(&mut self) -> Side {
        let shared = Arc::clone(&self.shared);
        let follower_options = Options {
            pace: None,
            ..self.options
        };
        let mut followers = Vec::new();
        for (port, slot) in self.sinks.iter_mut().enumerate().skip(1) {
            let mut sink = slot.take().expect("each sink once");
            let sh = Arc::clone(&shared);
            let name = sh.counters.stages()[sh.lock().sink_node(port)].name.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("fp-out-{port}"))
                .spawn(move || {
                    let output = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        crate::output::run_output(
                            &sh,
                            port,
                            &mut *sink,
                            None,
                            None,
                            follower_options,
                            u64::MAX,
                        )
                    }));
                    let out = match output {
                        Ok((_, r)) => r,
                        Err(p) => {
                            let e = Error::element(
                                format!("output thread of {name}"),
                                format!("panicked: {}", panic_message(&*p)),
                            );
                            sh.break_run(e, None);
                            Ok(())
                        }
                    };
                    let finish = guard(&name, || sink.finish());
                    out.and(finish)
                });
            match spawned {
                Ok(h) => followers.push((port, h)),
                Err(e) => {
                    let e = Error::io("starting an output thread", e);
                    let mut st = shared.lock();
                    st.fail(e);
                    st.after_change(&shared);
                }
            }
        }
        let blocking = shared
            .lock()
            .running_version()
            .topo
            .nodes
            .iter()
            .filter(|t| t.blocks)
            .count();
        if blocking > 0 {
            if let Err(e) = shared.ensure_io_threads(blocking) {
                let e = Error::io("starting an IO thread", e);
                let mut st = shared.lock();
                st.fail(e);
                st.after_change(&shared);
            }
        }
        let mut edit_thread = None;
        let mut link = None;
        if let Some(editor) = self.editor.take() {
            match crate::edit::spawn(editor, Arc::clone(&shared), self.options) {
                Ok((l, h)) => {
                    link = Some(l);
                    edit_thread = Some(h);
                }
                Err(e) => {
                    let e = Error::io("starting the edit thread", e);
                    let mut st = shared.lock();
                    st.fail(e);
                    st.after_change(&shared);
                }
            }
        }
        Side {
            followers,
            edit_thread,
            link,
        }
    }

    /// Enrolls this show's pools in a host's shared pools (at `Host::add`): when the host
    /// starts, [`start_pools`](Self::start_pools) replaces them with quota handles on those.
    pub(crate) fn share_pools(&mut self, pools: &SharedPools) {
        let pace = pace_of(&self.shared, self.options, self.in_flight);
        self.pool_share = pools.enroll(&self.own_pools, pace);
    }

    /// Readies the frame pools as the run starts, before its first frame. In a host
    /// ([`share_pools`](Self::share_pools)): every pool of the show is replaced by a handle on
    /// the host's pool of its shape, with the show's own capacity as its quota (a feedback's
    /// frame 0 is copied over). Alone (or for a pool the host has none for): a paced run's own
    /// pools are filled by a helper thread while the first frames flow.
    pub(crate) fn start_pools(&mut self) {
        let own = std::mem::take(&mut self.own_pools);
        let mut keep = own;
        if let Some(lease) = self.pool_share.take() {
            let mut st = self.shared.lock();
            // Only the state holds the version before the run; were it otherwise, the show
            // keeps its own pools.
            if self.options.pace.is_some() {
                // A paced show begins its frame 0 only, then each frame just in time for its
                // deadline (the output raises the limit as it releases frames, once it has
                // measured the show's latency). Without this, every show would begin all its
                // frames in flight at once as it starts (or while paused), and the shared
                // pools would have to hold every show's frames in flight: the sum of the
                // quotas, nothing saved.
                st.allow_begin_until(0);
            }
            if let Some(ver) = st.running_version_mut() {
                let pools: Vec<FramePool> = keep.iter().map(|(p, _)| p.clone()).collect();
                let handles = lease.pools().clone().bind(&lease, &pools, self.threads);
                crate::pools::rebind(&mut ver.pools, &mut ver.first_frames, &pools, &handles);
                if let Some(held) = ver.pools_held.take() {
                    lease.count(held);
                }
                ver.pool_lease = Some(lease);
                // What the show still fills of its own: the pools it kept.
                keep.retain(|(p, _)| ver.pools.iter().any(|q| q.same_handle(p)));
            }
        }
        if self.options.pace.is_some() {
            ShowPools {
                per_node: Vec::new(),
                distinct: keep,
                bytes: 0,
            }
            .fill_in_background();
        }
    }

    /// Takes the master sink out (to be driven by a host's clock thread).
    pub(crate) fn take_master_sink(&mut self) -> Box<dyn Sink> {
        self.sinks[0].take().expect("the master sink")
    }
}

/// What a started show runs beside its master output.
pub(crate) struct Side {
    followers: Vec<(usize, std::thread::JoinHandle<Result<()>>)>,
    edit_thread: Option<std::thread::JoinHandle<()>>,
    /// The master output's end of the edit thread's link (taken by the output).
    pub(crate) link: Option<crate::edit::EditLink>,
}

/// The end of a run, once its master output is over: finishes the master sink (every frame it
/// got was whole), lets the edit thread and the followers end, waits for the workers (`Some`:
/// the run's own, joined; `None`: a host's, which only need to be out of this show's jobs), and
/// returns the first error or the final figures.
pub(crate) fn conclude(
    shared: &Arc<Shared>,
    threads: usize,
    mut sink: Box<dyn Sink>,
    output: (Option<crate::output::PacingStats>, Result<()>),
    side: Side,
    workers: Option<Vec<std::thread::JoinHandle<()>>>,
) -> Result<RunStats> {
    let (pacing, out_result) = output;
    let sink_name = shared.counters.stages()[shared.lock().sink_node(0)]
        .name
        .clone();
    // Finished now, before waiting for the workers (one may be blocked in a source that
    // nothing will unblock).
    let finish = guard(&sink_name, || sink.finish());
    // The edit thread ends when the output thread's end of it is gone, unless it is inside
    // an element's constructor: then it is left to finish, detached.
    if let Some(h) = side.edit_thread {
        let deadline = std::time::Instant::now() + JOIN_GRACE;
        while !h.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if h.is_finished() {
            let _ = h.join();
        }
    }
    // The followers end with the run (the master's end, an error or a stop wakes them).
    // After a normal end each finishes its sink (flushes its file) and is waited for; after
    // an early end (stop, error) one blocked in its sink gets the workers' grace, then is
    // left running, detached, like a blocked worker.
    let early = shared.lock().aborted();
    let deadline = std::time::Instant::now() + JOIN_GRACE;
    let mut follower_result = Ok(());
    for (port, h) in side.followers {
        while early && !h.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if early && !h.is_finished() {
            let node = shared.lock().sink_node(port);
            shared.emit(crate::Event::LeftRunning {
                stage: shared.counters.stages()[node].name.clone(),
                worker: threads + port,
            });
            continue;
        }
        let r = h.join().unwrap_or_else(|_| Ok(()));
        if follower_result.is_ok() {
            follower_result = r;
        }
    }
    match workers {
        Some(workers) => shared.join_workers(workers, JOIN_GRACE),
        None => shared.leave_host(JOIN_GRACE),
    }
    shared.join_io_threads(JOIN_GRACE);
    let (error, source_error) = {
        let mut st = shared.lock();
        st.take_errors()
    };
    if let Some(e) = error.or(source_error) {
        return Err(e);
    }
    out_result?;
    finish?;
    follower_result?;
    let mut stats = shared.counters.snapshot();
    stats.pacing = pacing;
    Ok(stats)
}
