//! What a version would hold against the memory budget ([`Need`]), and what its pools are
//! sized from ([`pool_layout`]).

use super::running::kept_nodes;
use super::*;
use crate::memory::{pool_bytes, MemoryKind, PoolNeeds, PoolNode};
use crate::model::OnEnd;
use crate::model::Overload;
use crate::model::{Part, Plan};

/// What the budget counts for a version: its pools at full capacity, the instances it makes
/// (the nodes an edit keeps bring theirs), and all of its nodes' instances. A source's own
/// memory ([`framepipe_core::Source::own_bytes`]) counts as its node's instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Need {
    pub pools: u64,
    pub new_instances: u64,
    pub all_instances: u64,
    /// GPU memory building it adds: its texture pools at full capacity and the own buffers of
    /// the GPU nodes it makes (those an edit keeps bring theirs).
    pub gpu: u64,
    /// The own buffers of all of its GPU nodes.
    pub gpu_all_instances: u64,
}

impl Need {
    /// What building it adds to what is held: its pools and its new instances.
    pub(crate) fn added(&self) -> u64 {
        self.pools.saturating_add(self.new_instances)
    }
}

/// Effect and mixer instances a node has (0 for the others); a node of the GPU thread
/// counts 1: that thread runs one job at a time (a download's job takes its output frame
/// only when its readback is in).
pub(super) fn instances_of(e: &crate::model::ExecNode, threads: usize) -> usize {
    match &e.part {
        Part::Effect(_) | Part::Mixer(_) => {
            if e.serial {
                1
            } else {
                threads
            }
        }
        Part::Gpu(_) | Part::Upload | Part::Download | Part::Present => 1,
        _ => 0,
    }
}

/// The host memory one instance of a node is estimated to keep: one output frame for an
/// effect or mixer (see `memory/`), a download's staging buffer; nothing for a GPU node
/// (its buffers are GPU memory: [`gpu_bytes_of`]) or an upload.
pub(super) fn instance_bytes_of(e: &crate::model::ExecNode) -> u64 {
    match &e.part {
        Part::Effect(_) | Part::Mixer(_) | Part::Download => {
            framepipe_core::limits::frame_bytes(e.info.width, e.info.height)
        }
        _ => 0,
    }
}

/// GPU memory a GPU node's instance keeps besides its output (its passes, persistent
/// buffers).
pub(super) fn gpu_bytes_of(e: &crate::model::ExecNode) -> u64 {
    match &e.part {
        Part::Gpu(g) => g.factory.gpu_bytes(),
        _ => 0,
    }
}

/// A source's own memory: a new one's as it says, a kept one's as the running version
/// counted it; 0 for the other nodes.
pub(crate) fn own_bytes_of(e: &crate::model::ExecNode, ctx: &VersionCtx<'_>) -> u64 {
    match &e.part {
        Part::Source { source, .. } => source.own_bytes(),
        Part::Running { sink: false } => ctx
            .running
            .and_then(|r| r.index_of(&e.was).map(|o| r.ver.source_bytes[o]))
            .unwrap_or(0),
        _ => 0,
    }
}

/// The frames each node keeps beyond the frames in flight, and what the pools are sized from
/// (see `memory/`).
pub(super) fn pool_layout<'p>(
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
            let sinks: Vec<&crate::model::ExecNode> = e
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
                // A GPU node's and an upload's output frames are textures.
                kind: if e.gpu_output() {
                    MemoryKind::Gpu
                } else {
                    MemoryKind::Cpu
                },
                instance_bytes: instance_bytes_of(e),
                gpu_bytes: gpu_bytes_of(e),
                name: &e.name,
                // A present hands on its input's texture.
                writes: !matches!(
                    e.part,
                    Part::Sink(_) | Part::Feedback { .. } | Part::Present
                ),
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
    let gpu_new = plan
        .nodes
        .iter()
        .zip(&kept)
        .filter(|(_, k)| k.is_none())
        .map(|(e, _)| gpu_bytes_of(e))
        .fold(0, u64::saturating_add);
    let bytes = |e: &crate::model::ExecNode| {
        (instances_of(e, ctx.threads) as u64)
            .saturating_mul(instance_bytes_of(e))
            .saturating_add(own_bytes_of(e, ctx))
    };
    Need {
        pools: pool_bytes(&plans, MemoryKind::Cpu),
        // A source built for this version is new whatever its name (a kept one is `Running`).
        new_instances: plan
            .nodes
            .iter()
            .zip(&kept)
            .filter(|(e, k)| k.is_none() || matches!(e.part, Part::Source { .. }))
            .map(|(e, _)| bytes(e))
            .fold(0, u64::saturating_add),
        all_instances: plan.nodes.iter().map(bytes).fold(0, u64::saturating_add),
        gpu: pool_bytes(&plans, MemoryKind::Gpu).saturating_add(gpu_new),
        gpu_all_instances: plan
            .nodes
            .iter()
            .map(gpu_bytes_of)
            .fold(0, u64::saturating_add),
    }
}
