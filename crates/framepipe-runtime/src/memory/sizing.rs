//! Sizing: how many frames each pool may need at once (see the module documentation).

use std::fmt::Write as _;

use framepipe_core::limits::{frame_bytes, human_bytes};
use framepipe_core::VideoInfo;

use super::MemoryKind;

/// Frames in flight, by default, take at most this much (the default `2 * threads + 2` is
/// lowered for large frames, never below `threads + 1`). On two workers: 1920x1080 keeps the
/// usual 6, 3840x2160 gets 3. `threads + 1` keeps every worker busy: when one finishes a frame
/// and hands it to the sink, it can start the next without waiting for the output thread. (4K
/// glow, 2 workers, interleaved rounds: in-flight 3 against 6 ran at 0.93x and 1.03x, per-round
/// medians of two series, within the noise; docs/RELIABILITY.md.)
pub const IN_FLIGHT_BYTES: u64 = 96 << 20;

/// Frames in flight for a run: `requested` (0 = the default, see [`IN_FLIGHT_BYTES`]), never
/// more than the source will produce (`len_hint`), at least 1.
pub(crate) fn in_flight(
    threads: usize,
    requested: usize,
    infos: &[VideoInfo],
    len_hint: Option<u64>,
) -> usize {
    let wanted = if requested > 0 {
        requested
    } else {
        let largest = infos
            .iter()
            .map(|i| frame_bytes(i.width, i.height))
            .max()
            .unwrap_or(1)
            .max(1);
        let fits = usize::try_from(IN_FLIGHT_BYTES / largest).unwrap_or(usize::MAX);
        fits.clamp(threads + 1, 2 * threads + 2)
    };
    match len_hint {
        Some(n) => wanted.min(usize::try_from(n).unwrap_or(usize::MAX)).max(1),
        None => wanted.max(1),
    }
}

/// Textures a texture pool holds beyond its nodes' frames: those the GPU thread keeps after
/// the jobs that read them, until the GPU has passed them (`exec/gpu.rs`: it takes no job
/// that could hold more).
pub(crate) const GPU_HELD_TEXTURES: usize = 12;

/// One node's part in the pools' sizes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolNode<'a> {
    /// Its output shape (a sink: its input's; it writes none).
    pub info: VideoInfo,
    /// Where its output frames live (a pool serves one size of one kind).
    pub kind: MemoryKind,
    pub name: &'a str,
    /// Writes frames of its own (sources, effects, mixers; not sinks or feedbacks).
    pub writes: bool,
    /// Effect or mixer instances (0 for a source: its job holds only the frame it fills); a
    /// node of the GPU thread: 1 (that thread runs one job at a time).
    pub instances: usize,
    /// Its instance's own buffers, estimated in host memory (per instance: one output frame
    /// for an effect or mixer, a download's staging; 0 for a GPU node's textures).
    pub instance_bytes: u64,
    /// GPU memory its instance keeps besides its output ([`GpuFactory::gpu_bytes`]).
    ///
    /// [`GpuFactory::gpu_bytes`]: framepipe_core::gpu::GpuFactory::gpu_bytes
    pub gpu_bytes: u64,
    /// In a leaky branch: at most one frame of its own at a time, whatever the frames in flight.
    pub in_branch: bool,
    /// Sinks fed by this node (each may keep a clone of the frame it was given).
    pub sinks_fed: usize,
    /// Feeds the master sink.
    pub feeds_master: bool,
    /// Frames it holds beyond those: a source's last frame (hold, resampling), a feedback's
    /// frame 0 and the frames waiting for the next frame (at most the frames in flight), one
    /// per leaky branch whose first node reads it (the branch keeps that frame after the frame
    /// left flight).
    pub extra: usize,
}

/// What the pools are sized from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolNeeds<'a> {
    /// Every node, in execution order.
    pub nodes: &'a [PoolNode<'a>],
    /// A chain (one input and one consumer each): a frame in flight holds one frame between
    /// nodes; in a graph, every node's output for one frame may be alive at once.
    pub chain: bool,
    /// Worker threads.
    pub threads: usize,
    /// Frames in flight at most (already resolved, see [`in_flight`]).
    pub in_flight: usize,
    /// The output thread keeps its last frame (paced, `--overload live`).
    pub keep_last: bool,
}

/// One pool to make: its frame size and how many frames it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolPlan {
    pub width: u32,
    pub height: u32,
    pub kind: MemoryKind,
    pub capacity: usize,
    /// What a paced run fills in the background: the capacity but for the frames sinks may
    /// keep. No framepipe sink keeps one; a sink that does keeps it from its first frame on, so
    /// it grows the pool during the warm-up anyway, and the others do not pay for it.
    pub fill: usize,
    /// Frames a paced show holds of this pool while no worker runs it: a frame done and waiting
    /// for its deadline (the master's pool: its frame; in a graph, each node's output), the
    /// output thread's last frame, what nodes keep (`extra`), one per leaky branch. What a
    /// host's shared pool is filled with per show ([`SharedPools`](super::SharedPools)).
    pub idle: usize,
    /// Frames of this pool that each frame a paced show has begun ahead holds once it is done (the
    /// chain's master pool: its frame; in a graph, each node's output), `idle` counting the first
    /// ([`SharedPools`](super::SharedPools) adds the others by the show's latency budget).
    pub ahead: usize,
}

impl PoolNeeds<'_> {
    /// The distinct pools and, for each node, the index of the pool its output comes from.
    pub fn plan(&self) -> (Vec<PoolPlan>, Vec<usize>) {
        let mut plans: Vec<PoolPlan> = Vec::new();
        let mut node_pool = Vec::with_capacity(self.nodes.len());
        for node in self.nodes {
            let info = node.info;
            let idx = match plans.iter().position(|p| {
                p.width == info.width && p.height == info.height && p.kind == node.kind
            }) {
                Some(i) => i,
                None => {
                    plans.push(PoolPlan {
                        width: info.width,
                        height: info.height,
                        kind: node.kind,
                        capacity: 0,
                        fill: 0,
                        idle: 0,
                        ahead: 0,
                    });
                    plans.len() - 1
                }
            };
            node_pool.push(idx);
        }
        for (p, plan) in plans.iter_mut().enumerate() {
            let node_pool = &node_pool;
            let of_pool = || (0..self.nodes.len()).filter(move |&i| node_pool[i] == p);
            let show_writers = of_pool()
                .filter(|&i| self.nodes[i].writes && !self.nodes[i].in_branch)
                .count();
            // Frames in flight: one frame each in a chain; in a graph, up to one per node.
            let per_frame = if self.chain {
                show_writers.min(1)
            } else {
                show_writers
            };
            let tokens = self.in_flight.saturating_mul(per_frame);
            let branch = of_pool()
                .filter(|&i| self.nodes[i].writes && self.nodes[i].in_branch)
                .count();
            // Running nodes writing into this pool: at most one per worker, per instance.
            let instances: usize = of_pool()
                .filter(|&i| self.nodes[i].writes)
                .map(|i| self.nodes[i].instances)
                .sum();
            let running = instances.min(self.threads).min(self.in_flight);
            let extra: usize = of_pool().map(|i| self.nodes[i].extra).sum();
            let sink_keeps: usize = of_pool().map(|i| self.nodes[i].sinks_fed).sum();
            let last = usize::from(self.keep_last && of_pool().any(|i| self.nodes[i].feeds_master));
            // A texture pool: the textures held until the GPU has passed the jobs that read
            // them.
            let held = if plan.kind == MemoryKind::Gpu {
                GPU_HELD_TEXTURES
            } else {
                0
            };
            plan.fill = tokens
                .saturating_add(held)
                .saturating_add(branch)
                .saturating_add(running)
                .saturating_add(extra)
                .saturating_add(last);
            plan.capacity = plan.fill.saturating_add(sink_keeps);
            let feeds_master = of_pool().any(|i| self.nodes[i].feeds_master);
            let waiting = if self.chain {
                usize::from(feeds_master)
            } else {
                show_writers
            };
            plan.ahead = waiting;
            plan.idle = waiting
                .saturating_add(branch)
                .saturating_add(extra)
                .saturating_add(last)
                .min(plan.capacity);
        }
        (plans, node_pool)
    }

    /// Everything the run may hold in host memory (pools at full capacity, the instances'
    /// estimate), and its description for a refusal.
    pub fn total(&self, plans: &[PoolPlan]) -> (u64, String) {
        let pools = pool_bytes(plans, MemoryKind::Cpu);
        let instances: u64 = self
            .nodes
            .iter()
            .map(|n| (n.instances as u64).saturating_mul(n.instance_bytes))
            .fold(0u64, u64::saturating_add);
        let n_instances: usize = self
            .nodes
            .iter()
            .filter(|n| n.instance_bytes > 0)
            .map(|n| n.instances)
            .sum();
        let mut what = String::from("frame pools (");
        for (i, p) in plans
            .iter()
            .filter(|p| p.kind == MemoryKind::Cpu)
            .enumerate()
        {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(
                what,
                "{sep}{} frames of {}x{}",
                p.capacity, p.width, p.height
            );
        }
        let _ = write!(
            what,
            ": {}) and {n_instances} effect instance{} (estimated at one output frame each: {}) \
             for {} frames in flight on {} threads",
            human_bytes(pools),
            if n_instances == 1 { "" } else { "s" },
            human_bytes(instances),
            self.in_flight,
            self.threads
        );
        (pools.saturating_add(instances), what)
    }
}

impl PoolNeeds<'_> {
    /// Everything the run may hold in GPU memory (texture pools at full capacity, the GPU
    /// nodes' own buffers), and its description for a refusal.
    pub fn gpu_total(&self, plans: &[PoolPlan]) -> (u64, String) {
        let pools = pool_bytes(plans, MemoryKind::Gpu);
        let own: u64 = self
            .nodes
            .iter()
            .map(|n| n.gpu_bytes)
            .fold(0u64, u64::saturating_add);
        let mut what = String::from("GPU texture pools (");
        for (i, p) in plans
            .iter()
            .filter(|p| p.kind == MemoryKind::Gpu)
            .enumerate()
        {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(
                what,
                "{sep}{} textures of {}x{}",
                p.capacity, p.width, p.height
            );
        }
        let _ = write!(
            what,
            ": {}) and the GPU nodes' own buffers ({})",
            human_bytes(pools),
            human_bytes(own)
        );
        (pools.saturating_add(own), what)
    }
}

/// The bytes of the pools of `kind` at full capacity.
pub(crate) fn pool_bytes(plans: &[PoolPlan], kind: MemoryKind) -> u64 {
    plans
        .iter()
        .filter(|p| p.kind == kind)
        .fold(0u64, |sum, p| {
            sum.saturating_add((p.capacity as u64).saturating_mul(frame_bytes(p.width, p.height)))
        })
}
