//! Building one graph version from its plan ([`build_version`]).

use std::sync::{Arc, Mutex};

use framepipe_core::{Error, FramePool, Result, Sink, VideoInfo};

use super::need::{own_bytes_of, pool_layout};
use super::running::kept_nodes;
use super::*;
use crate::live::{FrameParams, Live, LiveStage};
use crate::memory::{MemoryKind, PoolNeeds, PoolPlan, VersionPools};
use crate::model::{ExecNode, Options, Part, Plan};
use crate::sched::{GpuProc, Instance, Kind, NodeState, Proc, SourceInst, Topo, TopoNode, Version};
use crate::stats::StageCounters;
use crate::stats::{GraphView, NodeView};

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
    pub memory: &'a Arc<crate::memory::MemoryBook>,
    /// What a live edit's version is, for its memory check (see [`Admit`]).
    pub admit: Admit,
}

/// What a version is, for the memory check of a live edit: what it holds is added to what
/// the show holds already (the running version, and one an edit replaced that is not dropped
/// yet), since the running version goes on while the new one is built and until the switch is
/// over ([`MemoryBook::admit`](crate::memory::MemoryBook::admit)).
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
    /// Each distinct pool of `ver.pools` once, with its plan: readied as the version starts.
    pub pool_plans: Vec<(FramePool, PoolPlan)>,
}

/// Builds a graph version from its plan: pools, live parameters, instances of every effect and
/// mixer (except those a live edit keeps), sources, sinks (started; a new run's only), and the
/// scheduler's shape of it. Everything that allocates for a version happens here.
pub(crate) fn build_version(plan: Plan, ctx: &VersionCtx<'_>) -> Result<Built> {
    let need = need_of(&plan, ctx);
    let kept = kept_nodes(&plan, ctx.running);
    let source_bytes: Vec<u64> = plan.nodes.iter().map(|e| own_bytes_of(e, ctx)).collect();
    if let Some(r) = ctx.running {
        admit_edit(&plan, r, ctx, need)?;
    }
    let (holds, mut pools, pool_plans) = make_pools(&plan, ctx)?;
    debug_assert_eq!(pools.bytes(), need.pools);
    let live = live_params(&plan)?;
    let graph_view = graph_view(&plan, &live, ctx.number);
    let described = Described::of(&plan);
    let param_names = param_names(&live);
    let live_spec = live.spec();
    let nb = plan.heads.len();
    let snapshots: Vec<Mutex<FrameParams>> = (0..ctx.in_flight + nb)
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
    let rate = plan.rate;
    let mut nodes = Nodes::new(&plan, ctx, master);
    for (i, e) in plan.nodes.into_iter().enumerate() {
        nodes.add(i, e, kept[i], rate, ctx, &mut pools, initial.values(i))?;
    }
    let Nodes {
        topo_nodes,
        node_states,
        counters,
        port_nodes,
        sinks,
        roots,
        branches,
        show_nodes,
        moves,
    } = nodes;
    debug_assert_eq!(branches.len(), nb);
    if let Some(r) = ctx.running {
        check_ports(r, &port_nodes, master, &described.names)?;
    }
    let topo = topo(topo_nodes, ctx.in_flight, branches, roots, show_nodes);
    let stages: Arc<[Arc<StageCounters>]> = counters.into_iter().collect();
    Ok(Built {
        ver: Version {
            number: ctx.number,
            topo,
            snapshots,
            param_names,
            live_spec,
            stages,
            names: described.names,
            infos: described.infos,
            elements: described.elements,
            kinds: described.kinds,
            ports: port_nodes.clone(),
            holds,
            instance_bytes: need.all_instances,
            source_bytes,
            gpu_instance_bytes: need.gpu_all_instances,
            pools,
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

/// A live edit's version is made while the running one goes on, and both live until the
/// switch is over: what it adds must fit besides what the show holds already, in host memory
/// and in GPU memory, each against its own limit (checked before anything of it is made; a
/// frame over its share of the budget is named first).
fn admit_edit(plan: &Plan, r: &RunningVersion<'_>, ctx: &VersionCtx<'_>, need: Need) -> Result<()> {
    let limits = framepipe_core::Limits::current();
    for e in &plan.nodes {
        limits.check_frame(&e.name, e.info.width, e.info.height)?;
    }
    let running = r.ver.pools.bytes().saturating_add(r.ver.instance_bytes);
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
    ctx.memory.admit_gpu(
        r.ver
            .pools
            .gpu_bytes()
            .saturating_add(r.ver.gpu_instance_bytes),
        need.gpu,
        name,
        during,
    )
}

/// Per node the frames it keeps beyond the frames in flight, and the version's pools (checked
/// against the memory budget, then made lazy and counted), each distinct one with its plan.
type MadePools = (Vec<usize>, VersionPools, Vec<(FramePool, PoolPlan)>);

fn make_pools(plan: &Plan, ctx: &VersionCtx<'_>) -> Result<MadePools> {
    let (holds, pool_nodes, chain, keep_last) = pool_layout(plan, ctx);
    let (pools, plans) = VersionPools::make(
        &PoolNeeds {
            nodes: &pool_nodes,
            chain,
            threads: ctx.threads,
            in_flight: ctx.in_flight,
            keep_last,
        },
        ctx.memory,
    )?;
    Ok((holds, pools, plans))
}

/// Live parameters, one stage per node, with the oscillators the graph puts on them.
fn live_params(plan: &Plan) -> Result<Live> {
    let mut live_stages = Vec::with_capacity(plan.nodes.len());
    for e in &plan.nodes {
        let is_proc = matches!(e.part, Part::Effect(_) | Part::Mixer(_) | Part::Gpu(_));
        let mut live = LiveStage::new(e.name.clone(), e.element.clone(), is_proc, e.same_shape);
        let (params, oscillators) = match &e.part {
            Part::Effect(s) => (s.params.clone(), s.oscillators.clone()),
            Part::Mixer(s) => (s.params.clone(), s.oscillators.clone()),
            Part::Gpu(s) => (s.params.clone(), s.oscillators.clone()),
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
    Ok(Live::new(live_stages))
}

/// The version as control surfaces see it.
fn graph_view(plan: &Plan, live: &Live, number: u64) -> GraphView {
    GraphView {
        version: number,
        nodes: plan
            .nodes
            .iter()
            .zip(live.stages())
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
                props: st.specs().cloned().collect(),
                bypassable: st.bypassable(),
                leaky: e.branch.is_some(),
                master: e.master,
                auto: e.auto,
            })
            .collect(),
    }
}

/// Per node, the names of its live parameters.
fn param_names(live: &Live) -> Vec<Vec<Arc<str>>> {
    live.stages()
        .iter()
        .map(|s| s.specs().map(|p| Arc::from(p.name.as_str())).collect())
        .collect()
}

/// Per node: what a live edit compares (name, element, kind word, output shape).
struct Described {
    names: Vec<Arc<str>>,
    elements: Vec<String>,
    kinds: Vec<&'static str>,
    infos: Vec<VideoInfo>,
}

impl Described {
    fn of(plan: &Plan) -> Self {
        Described {
            names: plan
                .nodes
                .iter()
                .map(|e| Arc::from(e.name.as_str()))
                .collect(),
            elements: plan.nodes.iter().map(|e| e.element.clone()).collect(),
            kinds: plan.nodes.iter().map(|e| e.kind_word()).collect(),
            infos: plan.nodes.iter().map(|e| e.info).collect(),
        }
    }
}

/// The scheduler's shape of the version and what each node starts with, made node by node in
/// execution order ([`add`](Self::add)).
struct Nodes {
    topo_nodes: Vec<TopoNode>,
    node_states: Vec<NodeState>,
    counters: Vec<Arc<StageCounters>>,
    /// Per output port: its sink's node (a live edit: filled in by the running sinks, which
    /// keep their ports; `usize::MAX` until then).
    port_nodes: Vec<usize>,
    /// Per output port: a new run's sink, started.
    sinks: Vec<Option<Box<dyn Sink>>>,
    /// Sources and feedbacks: the nodes a frame begins at.
    roots: Vec<usize>,
    /// Per leaky branch: its nodes.
    branches: Vec<Vec<usize>>,
    /// Nodes not in a leaky branch.
    show_nodes: usize,
    /// Live edits: (running node, new node) whose instances, source or ring move in.
    moves: Vec<(usize, usize)>,
}

impl Nodes {
    fn new(plan: &Plan, ctx: &VersionCtx<'_>, master: usize) -> Self {
        let n = plan.nodes.len();
        let port_nodes = match ctx.running {
            Some(r) => vec![usize::MAX; r.ports.len()],
            None => {
                let mut p = vec![master];
                p.extend(
                    (0..n).filter(|&i| i != master && matches!(plan.nodes[i].part, Part::Sink(_))),
                );
                p
            }
        };
        Nodes {
            topo_nodes: Vec::with_capacity(n),
            node_states: Vec::with_capacity(n),
            counters: Vec::with_capacity(n),
            sinks: (0..port_nodes.len()).map(|_| None).collect(),
            port_nodes,
            roots: Vec::new(),
            branches: vec![Vec::new(); plan.heads.len()],
            show_nodes: 0,
            moves: Vec::new(),
        }
    }

    /// Node `i`: its source readied, its instances made (or, `old`: the running node a live
    /// edit keeps, whose instances, source, ring or sink move in), its sink started, its
    /// feedback's frame 0 taken from `pools`. `initial`: its live parameters' first values.
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        i: usize,
        e: ExecNode,
        old: Option<usize>,
        rate: framepipe_core::Rational,
        ctx: &VersionCtx<'_>,
        pools: &mut VersionPools,
        initial: &[framepipe_core::PropValue],
    ) -> Result<()> {
        let threads = ctx.threads;
        let instance_bytes = framepipe_core::limits::frame_bytes(e.info.width, e.info.height);
        let counter = match (old, ctx.running) {
            (Some(o), Some(r)) => Arc::clone(&r.ver.stages[o]),
            _ => Arc::new(StageCounters::new(&e.name, e.mode())),
        };
        let mut st = NodeState::new();
        // A source whose `fill` may wait on the outside world: run by the IO thread.
        let mut blocks = false;
        // Run by the GPU thread (a GPU node, an upload, a download).
        let mut gpu = false;
        let kind = match e.part {
            Part::Source { mut source, on_end } => {
                // Ready before the clock starts (a decoder's first frame decoded).
                source.ready()?;
                self.roots.push(i);
                blocks = source.blocks();
                let own = ctx.memory.hold(MemoryKind::Cpu, source.own_bytes());
                st.set_source(SourceInst::new(source, on_end, rate, own));
                counter.add_instance();
                Kind::Source
            }
            Part::Effect(_) | Part::Mixer(_) | Part::Gpu(_) if old.is_some() => {
                // Kept by the edit: its instances move in at the switch, with their state.
                // A GPU node stays the GPU thread's (a GPU source a root).
                if matches!(e.part, Part::Gpu(_)) {
                    gpu = true;
                    if e.inputs.is_empty() {
                        self.roots.push(i);
                    }
                }
                self.moves.push((old.expect("checked"), i));
                Kind::Process
            }
            Part::Effect(stage) => {
                let count = if e.serial { 1 } else { threads };
                for _ in 0..count {
                    st.add_instance(Instance::new(
                        Proc::Effect(stage.factory.instantiate()?),
                        initial,
                        ctx.memory.hold(MemoryKind::Cpu, instance_bytes),
                    ));
                }
                Kind::Process
            }
            Part::Mixer(stage) => {
                let count = if e.serial { 1 } else { threads };
                for _ in 0..count {
                    st.add_instance(Instance::new(
                        Proc::Mixer(stage.factory.instantiate()?),
                        initial,
                        ctx.memory.hold(MemoryKind::Cpu, instance_bytes),
                    ));
                }
                Kind::Process
            }
            Part::Gpu(stage) => {
                let source = e.inputs.is_empty();
                if source {
                    self.roots.push(i);
                }
                gpu = true;
                // One instance: the GPU thread runs one job at a time.
                st.add_instance(Instance::new(
                    Proc::Gpu(GpuProc {
                        node: stage.factory.instantiate()?,
                        frames: if source {
                            stage.factory.len_hint()
                        } else {
                            None
                        },
                        failed: false,
                        rendered: false,
                    }),
                    initial,
                    ctx.memory.hold(MemoryKind::Gpu, stage.factory.gpu_bytes()),
                ));
                Kind::Process
            }
            Part::Upload => {
                gpu = true;
                st.add_instance(Instance::new(
                    Proc::Upload,
                    initial,
                    ctx.memory.hold(MemoryKind::Cpu, 0),
                ));
                Kind::Process
            }
            Part::Download | Part::Present => {
                gpu = true;
                // One per readback (or present) under way: at most one per frame in flight.
                let present = matches!(e.part, Part::Present);
                for _ in 0..ctx.in_flight.max(1) {
                    st.add_instance(Instance::new(
                        if present {
                            Proc::Present
                        } else {
                            Proc::Download
                        },
                        initial,
                        ctx.memory.hold(MemoryKind::Cpu, 0),
                    ));
                }
                counter.add_instance();
                Kind::Process
            }
            Part::Feedback { from, color } => {
                self.roots.push(i);
                if let Some(o) = old {
                    // Its ring (the previous frame of the node it feeds back) moves in.
                    self.moves.push((o, i));
                }
                st.make_ring(ctx.in_flight);
                let mut frame = pools[i].try_acquire()?;
                let px = u32::from_le_bytes(color);
                frame.words_mut().iter_mut().for_each(|w| *w = px);
                pools.set_first_frame(i, frame.freeze());
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
                self.moves.push((o, i));
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
                    self.port_nodes[port] = i;
                    Kind::Sink(port)
                } else {
                    if r.ver.topo.nodes[o].kind != Kind::Source {
                        return Err(Error::Graph(format!(
                            "{} stands for a running source, but the running {} is a {}",
                            e.name, e.name, r.ver.kinds[o]
                        )));
                    }
                    self.roots.push(i);
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
                let port = self
                    .port_nodes
                    .iter()
                    .position(|&p| p == i)
                    .expect("a port");
                self.sinks[port] = Some(sink);
                counter.add_instance();
                Kind::Sink(port)
            }
        };
        match e.branch {
            Some(b) => self.branches[b].push(i),
            None => self.show_nodes += 1,
        }
        self.topo_nodes.push(TopoNode {
            kind,
            inputs: e.inputs,
            consumers: e.consumers,
            feeds: e.feeds,
            serial: e.serial,
            branch: e.branch,
            head: e.head,
            blocks,
            gpu,
        });
        self.node_states.push(st);
        self.counters.push(counter);
        Ok(())
    }
}

/// The scheduler's shape of the version: its nodes, and the sources and gated nodes among them.
fn topo(
    nodes: Vec<TopoNode>,
    in_flight: usize,
    branches: Vec<Vec<usize>>,
    roots: Vec<usize>,
    show_nodes: usize,
) -> Topo {
    let n = nodes.len();
    let sources: Vec<usize> = (0..n).filter(|&i| nodes[i].kind == Kind::Source).collect();
    let gated: Vec<usize> = (0..n)
        .filter(|&i| {
            let t: &TopoNode = &nodes[i];
            t.head || (t.branch.is_none() && matches!(t.kind, Kind::Sink(_)))
        })
        .collect();
    Topo {
        nodes,
        sources,
        gated,
        cap: in_flight,
        branches,
        roots,
        show_nodes,
    }
}

/// A live edit keeps every running sink on its port, the master's first.
fn check_ports(
    r: &RunningVersion<'_>,
    port_nodes: &[usize],
    master: usize,
    names: &[Arc<str>],
) -> Result<()> {
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
    Ok(())
}
