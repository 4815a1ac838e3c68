//! GPU elements: shaders that run on the engine's one GPU context, reading and writing
//! textures, so that frames stay on the GPU between two GPU nodes.
//!
//! The contract between the runtime and a GPU element:
//! * A GPU element is built as [`Element::Gpu`](crate::Element::Gpu): a [`GpuFactory`] that
//!   says what it is (a source, an effect or a mixer: [`GpuFactory::kind`]), negotiates its
//!   output shape like a CPU effect or mixer, and makes [`GpuNode`] instances.
//! * Every call to a [`GpuNode`] happens on the GPU executor's thread, with the context
//!   current; the instance is made elsewhere (the builder), so a node creates its GL objects
//!   lazily, on its first [`render`](GpuNode::render), and frees them in
//!   [`release`](GpuNode::release), which the executor calls before the node is dropped.
//! * A node never waits on the GPU: no `glFinish`, no readback, no fence wait. The executor
//!   submits consecutive GPU nodes of one frame as one submission and is the only one that
//!   moves pixels between the CPU and the GPU (uploads and downloads, inserted by the plan
//!   where a GPU node meets a CPU node).
//! * Textures are the engine's: a node renders into the [`GpuImage`] it is given and reads
//!   its inputs; textures of its own (a multi-pass shader's buffers, persistent buffers) are
//!   counted in [`GpuFactory::gpu_bytes`], so the memory budget covers them.
//!
//! The GL API is [`glow`]'s (re-exported), so that the runtime and the elements agree on one
//! context type without this crate knowing EGL or any driver.

pub use glow;

use crate::element::{ElementKind, Mode};
use crate::error::{Error, Result};
use crate::info::{FrameCtx, VideoInfo};
use crate::props::PropValue;

/// How a texture stores its texels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TexFormat {
    /// 8 bits per channel, normalized (what CPU frames hold): uploads and downloads.
    Rgba8,
    /// Half floats per channel (ISF's `FLOAT` passes).
    Rgba16F,
    /// 32-bit floats per channel.
    Rgba32F,
}

impl TexFormat {
    /// Bytes of one texel.
    pub fn texel_bytes(self) -> u64 {
        match self {
            TexFormat::Rgba8 => 4,
            TexFormat::Rgba16F => 8,
            TexFormat::Rgba32F => 16,
        }
    }
}

/// A texture of the engine's GPU context, as a node reads or writes it on one frame. Only
/// valid on the GPU executor's thread, for the duration of the call it is given to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuImage {
    /// The GL texture (`GL_TEXTURE_2D`), with GL's convention that row 0 is the bottom row;
    /// uploads and downloads flip, so a node sees the picture upright in texture space.
    pub texture: glow::Texture,
    /// Width in texels.
    pub width: u32,
    /// Height in texels.
    pub height: u32,
    /// Its texel format.
    pub format: TexFormat,
}

/// A GPU frame handed to a sink that draws textures itself
/// ([`Sink::takes_textures`](crate::Sink::takes_textures)): the texture, rendered completely
/// (the GPU has passed every command that wrote it), and a handle that keeps it out of its pool
/// while any clone is held. A clone is a reference count; nothing is allocated or copied.
///
/// The texture belongs to the show's GPU context; a context that draws it must be in that
/// context's share group (framepipe-gpu's `present` module says how windows are).
#[derive(Clone)]
pub struct TextureFrame {
    image: GpuImage,
    owner: std::sync::Arc<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for TextureFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextureFrame")
            .field("image", &self.image)
            .finish_non_exhaustive()
    }
}

impl TextureFrame {
    /// `image`, kept alive (out of its pool) by `owner` while the frame or a clone is held.
    pub fn new(image: GpuImage, owner: std::sync::Arc<dyn std::any::Any + Send + Sync>) -> Self {
        TextureFrame { image, owner }
    }

    /// The texture.
    pub fn image(&self) -> GpuImage {
        self.image
    }

    /// What keeps the texture out of its pool.
    pub fn owner(&self) -> &std::sync::Arc<dyn std::any::Any + Send + Sync> {
        &self.owner
    }
}

/// What a node's [`render`](GpuNode::render) gets besides its images.
pub struct GpuCtx<'a> {
    /// The context (current on this thread).
    pub gl: &'a glow::Context,
    /// The frame being rendered: its sequence number and timestamp (a shader's `TIME` is the
    /// frame's own time, so that output does not depend on speed or thread count).
    pub frame: FrameCtx,
    /// The show's frame period in nanoseconds (a shader's `TIMEDELTA`).
    pub period_ns: i64,
    /// A vertex array object with no attributes, bound while the node runs: a full-screen
    /// triangle or quad is drawn from `gl_VertexID` without buffers of its own.
    pub empty_vao: glow::VertexArray,
    /// The show's audio at this frame (ISF `audio` and `audioFFT` inputs); empty slices where
    /// the show has no audio.
    pub audio: FrameAudio<'a>,
}

/// The audio one frame is shown with, as GPU nodes read it: the same analysis point for every
/// node of the frame. Borrowed from the runtime's per-frame snapshot for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrameAudio<'a> {
    /// The latest waveform, mono, oldest sample first, in -1..=1 (ISF `audio`): empty without
    /// audio.
    pub wave: &'a [f32],
    /// FFT magnitudes from DC up to half the sample rate, each in 0..=1 (ISF `audioFFT`):
    /// empty without audio.
    pub fft: &'a [f32],
    /// Sample rate of `wave`, Hz (0 without audio).
    pub sample_rate: u32,
}

impl FrameAudio<'_> {
    /// Whether the show has audio for this frame.
    pub fn is_present(&self) -> bool {
        !self.wave.is_empty() || !self.fft.is_empty()
    }
}

/// One instance of a GPU element. Runs on the GPU executor's thread only (see the module).
pub trait GpuNode: Send {
    /// Renders this frame into `output` from `inputs` (in the order of the node's inputs;
    /// none for a source). Must not wait on the GPU.
    fn render(&mut self, gpu: &GpuCtx<'_>, inputs: &[GpuImage], output: &GpuImage) -> Result<()>;

    /// Changes a property while running (applied by the runtime between frames, on the GPU
    /// thread: a node may update uniforms or reload its program here).
    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        let _ = value;
        Err(Error::Pipeline(format!(
            "property '{name}' cannot be changed while running"
        )))
    }

    /// A message for the show's operator, if the node has one since the last call (a reloaded
    /// shader file that was refused, and why). Polled by the executor after
    /// [`render`](Self::render) and reported as the node's event; must not allocate when there
    /// is none.
    fn take_message(&mut self) -> Option<String> {
        None
    }

    /// Frees the GL objects it made. Called on the GPU thread before the instance is dropped;
    /// calling [`render`](Self::render) again afterwards makes them anew.
    fn release(&mut self, gl: &glow::Context) {
        let _ = gl;
    }
}

/// A configured GPU element, from which the runtime makes instances.
pub trait GpuFactory: Send + Sync {
    /// Element name, for messages and stats.
    fn name(&self) -> &str;
    /// A source (no input), an effect (one) or a mixer (several, a transition's two).
    fn kind(&self) -> ElementKind;
    /// How to schedule it: a shader with persistent buffers (state across frames) is
    /// [`Mode::Serial`]; others may say [`Mode::Parallel`], which the GPU executor runs in
    /// order anyway (one context), but which lets the scheduler start later frames' inputs.
    fn default_mode(&self) -> Mode {
        Mode::Serial
    }
    /// Given the shape of each input (none for a source), the output shape. Called once,
    /// before any [`instantiate`](Self::instantiate). A source gives its own size and rate.
    fn negotiate(&mut self, inputs: &[VideoInfo]) -> Result<VideoInfo>;
    /// Whether every input must have the first input's size (the graph scales the others).
    fn needs_equal_sizes(&self) -> bool {
        true
    }
    /// For a source: frames it will produce, when finite.
    fn len_hint(&self) -> Option<u64> {
        None
    }
    /// GPU memory one instance keeps besides its output (its own pass and persistent
    /// buffers), in bytes, once negotiated: counted against the GPU memory budget.
    fn gpu_bytes(&self) -> u64 {
        0
    }
    /// A new instance, configured with the element's properties. No GL call happens here.
    fn instantiate(&self) -> Result<Box<dyn GpuNode>>;
}
