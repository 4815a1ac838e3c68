//! Where a frame's memory lives ([`MemoryKind`]) and what makes two frames of a pool
//! interchangeable ([`PoolShape`]): the one place a pool is made.
//!
//! Every pool plan names its kind, the memory book counts per kind, and each kind has its own
//! limit. There is one kind today (host memory, what `--max-memory` counts); a frame whose
//! memory is elsewhere (a GPU texture) is a variant here, a branch in [`PoolShape::make`] and
//! one in [`MemoryKind::limit`], and nothing else in the crate changes shape.

use framepipe_core::{FramePool, Limits, Result};

/// Where a pool's frames live, as the budget counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum MemoryKind {
    /// Host memory: the heap, or one memfd per pool when a process-isolated plugin runs in the
    /// process ([`framepipe_core::shm`]). Counted against `--max-memory`.
    #[default]
    Cpu,
}

impl MemoryKind {
    /// How many kinds there are: the length of a per-kind table ([`index`](Self::index)).
    pub(crate) const COUNT: usize = 1;

    /// Its place in a per-kind table.
    pub(crate) const fn index(self) -> usize {
        match self {
            MemoryKind::Cpu => 0,
        }
    }

    /// The budget this kind's frames are counted against, bytes.
    pub(crate) fn limit(self) -> u64 {
        match self {
            MemoryKind::Cpu => Limits::current().max_memory,
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

    /// A lazy pool of `capacity` frames of this shape: nothing is allocated until a frame is
    /// first needed or the pool is filled.
    pub(crate) fn make(self, capacity: usize) -> Result<FramePool> {
        match self.kind {
            MemoryKind::Cpu if self.shared => {
                FramePool::lazy_shared(self.width, self.height, capacity)
            }
            MemoryKind::Cpu => Ok(FramePool::lazy(self.width, self.height, capacity)),
        }
    }
}
