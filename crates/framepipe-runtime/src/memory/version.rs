//! A graph version's frame pools ([`VersionPools`]): made with the version, readied as it
//! starts (filled, or replaced by quota handles on a host's pools), counted in the show's
//! memory book until the version is dropped and its frames are back.

use std::sync::Arc;

use framepipe_core::{Frame, FramePool, Result};
use framepipe_gpu::TexturePool;

use super::{frame_pools, rebind, Held, MemoryBook, MemoryKind, Pace, PoolLease, PoolNeeds};
use super::{PoolPlan, ShowPools};

/// A version's frame pools. Index it by node for the pool that node's output frames come from
/// (`pools[node].try_acquire()`, on the frame path: no lock, nothing else).
#[derive(Debug)]
pub(crate) struct VersionPools {
    /// Per node: the pool its output frames come from (index = node).
    per_node: Vec<FramePool>,
    /// Per node whose output is a texture: the texture pool its output comes from.
    textures: Vec<Option<TexturePool>>,
    /// The texture pools' bytes at full capacity, counted in the show's book as GPU memory
    /// until the version is dropped (each GPU node's own buffers are counted by its
    /// instance, which a live edit may keep).
    gpu_held: Held,
    /// Feedback nodes: frame 0's frame (the colour asked for).
    first_frames: Vec<Option<Frame>>,
    /// Its pools' host-memory bytes at full capacity: what the budget counts for them.
    bytes: u64,
    /// That share of the show's [`MemoryBook`], counted until the version is dropped (a
    /// replaced version: on the edit thread, once its frames are back). In a host it moves into
    /// the lease (`None` here), counted until the lease's frames are back.
    held: Option<Held>,
    /// In a host: its pools' quota handles on the host's shared pools, given back once it is
    /// dropped and every frame taken through them is back ([`PoolLease`]). Declared last: the
    /// version's handles and frames go before it.
    lease: Option<PoolLease>,
}

impl std::ops::Index<usize> for VersionPools {
    type Output = FramePool;

    /// The pool node `node`'s output frames come from.
    fn index(&self, node: usize) -> &FramePool {
        &self.per_node[node]
    }
}

impl VersionPools {
    /// Checks `needs` against the memory budget, then makes the version's pools (lazy: nothing
    /// frame-sized is allocated here) and counts them in `memory` until the version is dropped.
    /// Also returns each distinct pool once, with its plan: what is readied as the version
    /// starts ([`bind`](Self::bind) and [`fill_in_background`](super::fill_in_background), or
    /// [`share_for_edit`](Self::share_for_edit) and [`fill_own_now`](Self::fill_own_now)).
    pub(crate) fn make(
        needs: &PoolNeeds<'_>,
        memory: &Arc<MemoryBook>,
    ) -> Result<(Self, Vec<(FramePool, PoolPlan)>)> {
        let ShowPools {
            per_node,
            distinct,
            bytes,
            textures,
            gpu_bytes,
        } = frame_pools(needs)?;
        let held = memory.hold(MemoryKind::Cpu, bytes);
        let pools = VersionPools {
            textures,
            gpu_held: memory.hold(MemoryKind::Gpu, gpu_bytes),
            first_frames: (0..per_node.len()).map(|_| None).collect(),
            per_node,
            bytes,
            held: Some(held),
            lease: None,
        };
        Ok((pools, distinct))
    }

    /// Its pools' host-memory bytes at full capacity (what the budget counts for them).
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Its texture pools' GPU bytes at full capacity: what the budget counts for them.
    pub(crate) fn gpu_bytes(&self) -> u64 {
        self.gpu_held.bytes()
    }

    /// The texture pool node `node`'s output textures come from (a GPU node's, an upload's).
    pub(crate) fn textures(&self, node: usize) -> &TexturePool {
        self.textures[node]
            .as_ref()
            .expect("a node whose output is a texture has a texture pool")
    }

    /// Sets feedback node `node`'s frame 0 (taken from `self[node]`).
    pub(crate) fn set_first_frame(&mut self, node: usize, frame: Frame) {
        self.first_frames[node] = Some(frame);
    }

    /// Feedback node `node`'s frame 0.
    pub(crate) fn first_frame(&self, node: usize) -> Option<Frame> {
        self.first_frames[node].clone()
    }

    /// A show in a host, as it starts (before its first frame): every pool of `own` (its own,
    /// from [`make`](Self::make), enrolled in the host's pools with `lease`) is replaced by its
    /// handle on the host's pool of its shape (`handles`, from [`PoolLease::bind`]; its own
    /// capacity as its quota; a feedback's frame 0 is copied over), and what its pools count
    /// moves into the lease. Returns the pools it keeps of its own (the host had none for
    /// them).
    pub(crate) fn bind(
        &mut self,
        lease: PoolLease,
        mut own: Vec<(FramePool, PoolPlan)>,
        handles: &[Option<FramePool>],
    ) -> Vec<(FramePool, PoolPlan)> {
        let pools: Vec<FramePool> = own.iter().map(|(p, _)| p.clone()).collect();
        self.share(&pools, handles, lease);
        own.retain(|(p, _)| self.per_node.iter().any(|q| q.same_handle(p)));
        own
    }

    /// A live edit's new version of a show in a host (the `running` version has a lease), on
    /// the edit thread once every check of the edit has passed (nothing is made for an edit
    /// that is refused): its pools (`own`, from [`make`](Self::make)) become quota handles on
    /// the host's ([`SharedPools::join`](super::SharedPools::join)), held until the version is
    /// dropped and its frames are back, and the memory its pools count stays counted as long.
    /// A show alone keeps its own.
    pub(crate) fn share_for_edit(
        &mut self,
        own: &[(FramePool, PoolPlan)],
        running: &VersionPools,
        pace: Option<Pace>,
    ) {
        let Some(lease) = &running.lease else {
            return;
        };
        let (handles, lease) = lease.pools().join(lease.show(), own, pace);
        let own: Vec<FramePool> = own.iter().map(|(p, _)| p.clone()).collect();
        self.share(&own, &handles, lease);
    }

    /// Makes every frame of the pools it has of its own (not a host's), each pool once: a live
    /// edit's, on the edit thread (left lazy, they would be made by the workers running the
    /// first frames after the switch).
    pub(crate) fn fill_own_now(&self) {
        let pools = &self.per_node;
        for (i, pool) in pools.iter().enumerate() {
            if pool.quota().is_none() && !pools[..i].iter().any(|q| q.same_pool(pool)) {
                pool.fill(pool.capacity());
            }
        }
    }

    /// Lets go of the feedbacks' frames 0 (a replaced version), and says whether every frame
    /// of its pools is back: then dropping it frees nothing a frame still uses.
    pub(crate) fn release(&mut self) -> bool {
        self.first_frames.iter_mut().for_each(|f| *f = None);
        self.per_node.iter().all(|pool| pool.in_use() == 0)
            && self.textures.iter().flatten().all(|t| t.in_use() == 0)
    }

    /// Replaces its pools by quota handles (`handles[k]` for `own[k]`; `None` keeps that one)
    /// and moves what they count into `lease`, which it keeps.
    fn share(&mut self, own: &[FramePool], handles: &[Option<FramePool>], lease: PoolLease) {
        rebind(&mut self.per_node, &mut self.first_frames, own, handles);
        if let Some(held) = self.held.take() {
            lease.count(held);
        }
        self.lease = Some(lease);
    }
}
