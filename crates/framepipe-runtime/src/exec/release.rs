//! GPU node instances a live edit removed, on their way to be released: the edit thread hands
//! them over when it buries the version that held them ([`GpuRelease::hand_over`]); the GPU
//! thread, between its jobs, calls each one's [`GpuNode::release`] with its context current
//! (their GL objects are deleted then, not at the show's end) and hands it back
//! ([`GpuRelease::next`], [`GpuRelease::released`]); the edit thread drops it
//! ([`GpuRelease::drop_released`]), so no instance is freed on the GPU thread.
//!
//! Contract: only instances that rendered (made GL objects) come here. The edit thread makes
//! room for every instance it hands over in the list they come back to, so the GPU thread's
//! moves allocate nothing; it takes the lock without waiting ([`GpuRelease::next`] tries it)
//! except to give an instance back, which the edit thread holds only for a move or a reserve.

use std::sync::{Mutex, MutexGuard, PoisonError};

use framepipe_core::gpu::GpuNode;

use super::Instance;

/// The instances to release, and those released.
#[derive(Default)]
pub(crate) struct GpuRelease {
    queues: Mutex<Queues>,
}

#[derive(Default)]
struct Queues {
    /// Handed over by the edit thread; the GPU thread releases them.
    pending: Vec<Box<dyn GpuNode>>,
    /// Released; the edit thread drops them.
    done: Vec<Box<dyn GpuNode>>,
}

impl GpuRelease {
    fn queues(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Edit thread: hands the GPU nodes among `instances` that rendered over to the GPU
    /// thread (the others are dropped here). Returns whether any was: then the caller wakes
    /// the GPU thread.
    pub(crate) fn hand_over(&self, instances: impl Iterator<Item = Instance>) -> bool {
        let nodes: Vec<Box<dyn GpuNode>> = instances.filter_map(Instance::into_gpu_node).collect();
        if nodes.is_empty() {
            return false;
        }
        let mut q = self.queues();
        let n = q.pending.len() + q.done.len() + nodes.len();
        q.done.reserve(n);
        q.pending.extend(nodes);
        true
    }

    /// GPU thread: the next instance to release; `None` when there is none or the edit thread
    /// holds the lock (looked at again later).
    pub(crate) fn next(&self) -> Option<Box<dyn GpuNode>> {
        let mut q = match self.queues.try_lock() {
            Ok(q) => q,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        q.pending.pop()
    }

    /// GPU thread: `node` is released; the edit thread drops it (room was made for it).
    pub(crate) fn released(&self, node: Box<dyn GpuNode>) {
        self.queues().done.push(node);
    }

    /// Edit thread: drops the released instances.
    pub(crate) fn drop_released(&self) {
        let done = std::mem::take(&mut self.queues().done);
        drop(done);
    }

    /// Whether instances are still on their way (the edit thread looks again soon).
    pub(crate) fn busy(&self) -> bool {
        let q = self.queues();
        !q.pending.is_empty() || !q.done.is_empty()
    }
}
