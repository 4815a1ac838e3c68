//! Where a frame's memory lives ([`MemoryKind`]) and what makes two frames of a pool
//! interchangeable ([`PoolShape`]): the one place a pool is made.
//!
//! Every pool plan names its kind, the memory book counts per kind, and each kind has its own
//! limit: host memory (what `--max-memory` counts) and GPU textures (what
//! `--max-gpu-memory` counts, [`set_max_gpu_memory`]). A GPU node's output pool is a texture
//! pool ([`PoolShape::make_textures`]); its place among the host pools is a pool of no frame
//! (the scheduler indexes pools by node), so nothing else in the crate changes shape.

use std::sync::atomic::{AtomicU64, Ordering};

use framepipe_core::gpu::TexFormat;
use framepipe_core::{FramePool, Limits, Result};
use framepipe_gpu::TexturePool;

/// The GPU memory budget when none is set: 2 GiB (a 1920x1080 RGBA8 texture is 7.9 MiB, so
/// about 250 of them; textures on llvmpipe are host memory, outside `--max-memory`).
pub const DEFAULT_MAX_GPU_MEMORY: u64 = 2 << 30;

/// 0 = not set: [`DEFAULT_MAX_GPU_MEMORY`].
static MAX_GPU_MEMORY: AtomicU64 = AtomicU64::new(0);

/// Sets the GPU memory budget of this process, bytes (`--max-gpu-memory`): every show's texture
/// pools at full capacity and its GPU nodes' own buffers ([`GpuFactory::gpu_bytes`]) are
/// checked against it before anything is made. Call before preparing a show.
///
/// [`GpuFactory::gpu_bytes`]: framepipe_core::gpu::GpuFactory::gpu_bytes
pub fn set_max_gpu_memory(bytes: u64) {
    MAX_GPU_MEMORY.store(bytes.max(1), Ordering::Relaxed);
}

/// The GPU memory budget in force, bytes.
pub fn max_gpu_memory() -> u64 {
    match MAX_GPU_MEMORY.load(Ordering::Relaxed) {
        0 => DEFAULT_MAX_GPU_MEMORY,
        m => m,
    }
}

/// Where a pool's frames live, as the budget counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum MemoryKind {
    /// Host memory: the heap, or one memfd per pool when a process-isolated plugin runs in the
    /// process ([`framepipe_core::shm`]). Counted against `--max-memory`.
    #[default]
    Cpu,
    /// GPU textures (RGBA8) of the show's GPU context. Counted against `--max-gpu-memory`.
    Gpu,
}

impl MemoryKind {
    /// How many kinds there are: the length of a per-kind table ([`index`](Self::index)).
    pub(crate) const COUNT: usize = 2;

    /// Its place in a per-kind table.
    pub(crate) const fn index(self) -> usize {
        match self {
            MemoryKind::Cpu => 0,
            MemoryKind::Gpu => 1,
        }
    }

    /// The budget this kind's frames are counted against, bytes.
    pub(crate) fn limit(self) -> u64 {
        match self {
            MemoryKind::Cpu => Limits::current().max_memory,
            MemoryKind::Gpu => max_gpu_memory(),
        }
    }
}

/// What makes two frames interchangeable, so that one pool can serve them: their size, their
/// memory kind, and (host memory) whether they are in shared memory. The format and stride are
/// always RGBA, `width * 4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolShape {
    pub width: u32,
    pub height: u32,
    pub kind: MemoryKind,
    /// Host memory in a memfd (see [`MemoryKind::Cpu`]).
    pub shared: bool,
}

impl PoolShape {
    /// The shape of `pool`'s frames.
    pub(crate) fn of(pool: &FramePool) -> Self {
        PoolShape {
            width: pool.width(),
            height: pool.height(),
            kind: MemoryKind::Cpu,
            shared: pool.is_shared(),
        }
    }

    /// A pool of `capacity` textures of this shape (a GPU node's or an upload's outputs): no
    /// GL call here; a texture is made on the GPU thread the first time it is needed.
    pub(crate) fn make_textures(self, capacity: usize) -> TexturePool {
        debug_assert_eq!(self.kind, MemoryKind::Gpu);
        TexturePool::new(self.width, self.height, TexFormat::Rgba8, capacity)
    }

    /// A lazy pool of `capacity` frames of this shape: nothing is allocated until a frame is
    /// first needed or the pool is filled.
    pub(crate) fn make(self, capacity: usize) -> Result<FramePool> {
        match self.kind {
            MemoryKind::Cpu if self.shared => {
                FramePool::lazy_shared(self.width, self.height, capacity)
            }
            MemoryKind::Cpu => Ok(FramePool::lazy(self.width, self.height, capacity)),
            // Its frames are textures ([`make_textures`](Self::make_textures)): the host pool
            // standing in its place is never drawn from, filled or shared, so its one lazy
            // frame is never made.
            MemoryKind::Gpu => Ok(FramePool::lazy(self.width, self.height, 1)),
        }
    }
}
