//! What a frame slot holds per node ([`Pixels`]): a CPU frame or a texture of the show's GPU
//! context. CPU nodes, sinks and feedbacks only ever see CPU frames: the plan puts an upload
//! in front of a GPU node fed by a CPU node and a download after a GPU node that feeds a CPU
//! node, a sink or a feedback (`model/plan.rs`); a sink that takes textures (a window) is
//! given the texture itself, behind a `present`.

use framepipe_core::{Frame, FrameCtx, Result, Sink};
use framepipe_gpu::SharedGpuFrame;

/// One node's output for one frame, shared read-only by its consumers (a clone is a reference
/// count, never a copy of the pixels).
#[derive(Debug, Clone)]
pub(crate) enum Pixels {
    /// A frame in host memory (a CPU node's, a download's).
    Cpu(Frame),
    /// A texture (a GPU node's, an upload's); back to its pool when the last holder drops it,
    /// on any thread. A clone is an `Arc` clone of the texture its pool made: no allocation.
    Gpu(SharedGpuFrame),
}

impl Pixels {
    /// The CPU frame. A CPU node, a feedback or a sink that takes no textures is never given a
    /// texture (the plan puts a download in front of it), so a texture here is a bug in the
    /// plan.
    pub(crate) fn cpu(&self) -> &Frame {
        match self {
            Pixels::Cpu(f) => f,
            Pixels::Gpu(_) => unreachable!(
                "a CPU node is given a texture: the plan has a download in front of it"
            ),
        }
    }

    /// The texture. A GPU node or a download is given only textures (the plan puts an upload
    /// in front of a GPU node fed by a CPU node).
    pub(crate) fn gpu(&self) -> &SharedGpuFrame {
        match self {
            Pixels::Gpu(t) => t,
            Pixels::Cpu(_) => unreachable!(
                "a GPU node is given a CPU frame: the plan has an upload in front of it"
            ),
        }
    }
}

impl Pixels {
    /// Gives this frame to `sink`: a CPU frame to [`Sink::consume`], a texture to
    /// [`Sink::consume_texture`] (only a sink that takes textures is fed one). Allocates
    /// nothing: the texture's owner is a clone of the `Arc` its pool made with it.
    pub(crate) fn to_sink(&self, sink: &mut dyn Sink, ctx: &FrameCtx) -> Result<()> {
        match self {
            Pixels::Cpu(f) => sink.consume(ctx, f),
            Pixels::Gpu(t) => sink.consume_texture(ctx, &t.texture_frame()),
        }
    }
}

impl From<Frame> for Pixels {
    fn from(f: Frame) -> Self {
        Pixels::Cpu(f)
    }
}
