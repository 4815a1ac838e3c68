//! A show's own pools: made lazy once the budget check passes, filled in the background.

use framepipe_core::{FramePool, Limits, Result};
use framepipe_gpu::TexturePool;

use super::{pool_bytes, MemoryKind, PoolNeeds, PoolPlan, PoolShape};

/// A run's pools: per node, the pool its output comes from; and each distinct pool once with its
/// plan (what [`fill_in_background`] fills, what a host's [`SharedPools`](super::SharedPools)
/// counts).
#[derive(Debug, Default)]
pub(crate) struct ShowPools {
    pub per_node: Vec<FramePool>,
    pub distinct: Vec<(FramePool, PoolPlan)>,
    /// Their host-memory bytes at full capacity ([`pool_bytes`]).
    pub bytes: u64,
    /// Per node whose output is a texture (a GPU node, an upload): its texture pool (one per
    /// distinct size); its host pool above holds no frame.
    pub textures: Vec<Option<TexturePool>>,
    /// The texture pools' GPU bytes at full capacity (the GPU nodes' own buffers are counted
    /// by their instances).
    pub gpu_bytes: u64,
}

/// Checks the run's frames against the memory budget, then makes one lazy pool per distinct
/// frame size: for each node, the pool its output comes from, and each pool once with its plan.
/// Nothing frame-sized is allocated before the checks pass, nor here: a paced run's pools are
/// filled by a helper thread once it starts ([`fill_in_background`]), or replaced by
/// a host's shared pools ([`SharedPools`](super::SharedPools)).
pub(crate) fn frame_pools(needs: &PoolNeeds<'_>) -> Result<ShowPools> {
    let limits = Limits::current();
    for node in needs.nodes {
        limits.check_frame(node.name, node.info.width, node.info.height)?;
    }
    let (plans, node_pool) = needs.plan();
    let (total, what) = needs.total(&plans);
    limits.check_total(&what, total)?;
    let (gpu, what) = needs.gpu_total(&plans);
    if gpu > MemoryKind::Gpu.limit() {
        return Err(framepipe_core::Error::TooLarge {
            what,
            asked: gpu,
            limit: MemoryKind::Gpu.limit(),
            hint: "raise --max-gpu-memory, or lower --in-flight".into(),
        });
    }
    let shared = framepipe_core::shm::shared_pools_requested();
    let shape = |p: &PoolPlan| PoolShape {
        width: p.width,
        height: p.height,
        kind: p.kind,
        shared,
    };
    let pools: Vec<FramePool> = plans
        .iter()
        .map(|p| shape(p).make(p.capacity))
        .collect::<Result<_>>()?;
    let texture_pools: Vec<Option<TexturePool>> = plans
        .iter()
        .map(|p| (p.kind == MemoryKind::Gpu).then(|| shape(p).make_textures(p.capacity)))
        .collect();
    Ok(ShowPools {
        textures: node_pool
            .iter()
            .map(|&i| texture_pools[i].clone())
            .collect(),
        gpu_bytes: pool_bytes(&plans, MemoryKind::Gpu),
        bytes: pool_bytes(&plans, MemoryKind::Cpu),
        per_node: node_pool.into_iter().map(|i| pools[i].clone()).collect(),
        // Texture pools' stand-ins are not filled or shared.
        distinct: pools
            .into_iter()
            .zip(plans)
            .filter(|(_, p)| p.kind == MemoryKind::Cpu)
            .collect(),
    })
}

/// A paced run's own pools (each once, with its plan) are filled to their `fill` by a helper
/// thread while the first frames flow (see the module documentation).
pub(crate) fn fill_in_background(own: Vec<(FramePool, PoolPlan)>) {
    fill_to_targets(
        own.into_iter()
            .map(|(pool, plan)| (pool, plan.fill))
            .collect(),
    );
}

/// Fills every pool to its target on a short-lived helper thread, one frame at a time, the
/// source's pool first; stops early when nobody else holds a pool any more (the run ended or was
/// never started). If the thread cannot be started, the pools still grow on demand.
fn fill_to_targets(pools: Vec<(FramePool, usize)>) {
    let _ = std::thread::Builder::new()
        .name("fp-pool-fill".into())
        .spawn(move || {
            for (pool, target) in &pools {
                while pool.allocated() < *target {
                    // Only this thread's handles left: the pipeline is gone.
                    if pools.iter().all(|(p, _)| p.handles() == 1) {
                        return;
                    }
                    pool.fill(pool.allocated() + 1);
                }
            }
        });
}
