//! The GL calls the GPU thread makes itself, beside what `framepipe-gpu` does: binding the
//! empty vertex array a node draws with, submitting without waiting, and the timer queries
//! that measure each GPU node. Every call is `unsafe` in glow because GL cannot check that
//! its context is current; here it always is: [`Gpu`] is `!Send` and made current on the GPU
//! thread that opened it, and every function takes it.
#![allow(unsafe_code)] // GL calls: see the module documentation

use std::sync::Arc;

use framepipe_core::gpu::glow::{self, HasContext};
use framepipe_gpu::Gpu;

use crate::stats::StageCounters;

/// Submits the commands issued so far (`glFlush`): never waits for them.
pub(super) fn flush(gpu: &Gpu) {
    // SAFETY: `gpu`'s context is current on this thread (`Gpu` is `!Send`); glFlush takes
    // no argument.
    unsafe { gpu.gl().flush() }
}

/// Binds `vao` (the context's empty vertex array) for the node about to render.
pub(super) fn bind_vertex_array(gpu: &Gpu, vao: glow::VertexArray) {
    // SAFETY: the context is current on this thread and `vao` is a vertex array of it
    // (`Gpu::empty_vao`).
    unsafe { gpu.gl().bind_vertex_array(Some(vao)) }
}

/// GL timer queries (`GL_TIME_ELAPSED`) around each GPU node's render, read back without
/// waiting: a query's result is looked at between jobs and added to its node's counters once
/// the GPU has it. A fixed set of queries made at the start: when all are waiting for their
/// results, a render goes unmeasured (counted apart: `gpu_frames` ≤ `frames`).
pub(super) struct Timers {
    free: Vec<glow::Query>,
    pending: Vec<(glow::Query, Arc<StageCounters>)>,
}

/// Timer queries made at the start (results usually come within a frame or two).
const TIMER_QUERIES: usize = 32;

impl Timers {
    /// The queries, made now (none when the context has no timer queries: nothing measured).
    pub(super) fn new(gpu: &Gpu) -> Self {
        let mut free = Vec::with_capacity(TIMER_QUERIES);
        for _ in 0..TIMER_QUERIES {
            // SAFETY: the context is current on this thread; a query name is only made.
            match unsafe { gpu.gl().create_query() } {
                Ok(q) => free.push(q),
                Err(_) => break,
            }
        }
        Timers {
            pending: Vec::with_capacity(free.len()),
            free,
        }
    }

    /// Starts measuring the commands issued from now on; `None`: no query free.
    pub(super) fn begin(&mut self, gpu: &Gpu) -> Option<glow::Query> {
        let q = self.free.pop()?;
        // SAFETY: the context is current on this thread; `q` is a query of it with no
        // result pending, and no other TIME_ELAPSED query is active (one node at a time).
        unsafe { gpu.gl().begin_query(glow::TIME_ELAPSED, q) };
        Some(q)
    }

    /// Ends the measure started by [`begin`](Self::begin), to be added to `node` once known.
    pub(super) fn end(&mut self, gpu: &Gpu, q: glow::Query, node: Arc<StageCounters>) {
        // SAFETY: the context is current on this thread; `q` is the active TIME_ELAPSED query.
        unsafe { gpu.gl().end_query(glow::TIME_ELAPSED) };
        self.pending.push((q, node));
    }

    /// Adds every result the GPU has to its node's counters (never waits).
    pub(super) fn poll(&mut self, gpu: &Gpu) {
        let gl = gpu.gl();
        let mut k = 0;
        while k < self.pending.len() {
            let q = self.pending[k].0;
            // SAFETY: the context is current on this thread; `q` is an ended query of it.
            // QUERY_RESULT_AVAILABLE does not wait.
            let available = unsafe { gl.get_query_parameter_u32(q, glow::QUERY_RESULT_AVAILABLE) };
            if available == 0 {
                k += 1;
                continue;
            }
            let (q, node) = self.pending.swap_remove(k);
            // SAFETY: as above; its result is available, so reading it does not wait.
            let ns = unsafe { gl.get_query_parameter_u64(q, glow::QUERY_RESULT) };
            node.record_gpu(ns);
            self.free.push(q);
        }
    }

    /// Deletes the queries (the context still current).
    pub(super) fn release(self, gpu: &Gpu) {
        for q in self
            .free
            .into_iter()
            .chain(self.pending.into_iter().map(|p| p.0))
        {
            // SAFETY: the context is current on this thread; `q` is a query of it.
            unsafe { gpu.gl().delete_query(q) };
        }
    }
}

/// A fence after the commands issued so far (not submitted by itself: the caller flushes).
pub(super) fn fence(gpu: &Gpu) -> Option<glow::Fence> {
    // SAFETY: the context is current on this thread; a sync object is only made.
    unsafe {
        gpu.gl()
            .fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0)
            .ok()
    }
}

/// Whether the GPU is past `fence` (a zero-timeout poll: never waits).
pub(super) fn signalled(gpu: &Gpu, fence: glow::Fence) -> bool {
    // SAFETY: the context is current on this thread and `fence` is a live sync object of it
    // (deleted only by `delete_fence`); timeout 0 and no flags only read its state.
    let status = unsafe { gpu.gl().client_wait_sync(fence, 0, 0) };
    status != glow::TIMEOUT_EXPIRED
}

/// Deletes `fence`.
pub(super) fn delete_fence(gpu: &Gpu, fence: glow::Fence) {
    // SAFETY: the context is current on this thread and `fence` is a sync object of it, not
    // used after this.
    unsafe { gpu.gl().delete_sync(fence) }
}
