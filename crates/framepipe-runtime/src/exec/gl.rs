//! The GL calls the GPU thread makes itself, beside what `framepipe-gpu` does: binding the
//! empty vertex array a node draws with, submitting without waiting, and the timer queries
//! that measure each GPU node. Every call is `unsafe` in glow because GL cannot check that
//! its context is current; here it always is: [`Gpu`] is `!Send` and made current on the GPU
//! thread that opened it, and every function takes it.
#![allow(unsafe_code)] // GL calls: see the module documentation

use framepipe_core::gpu::glow::{self, HasContext};
use framepipe_gpu::Gpu;

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
