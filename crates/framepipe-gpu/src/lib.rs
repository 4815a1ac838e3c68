//! framepipe's GPU side: one headless OpenGL context, the textures frames live in on the GPU,
//! and the moves between CPU frames and textures. GPU elements (ISF shaders, transitions)
//! render with it through `framepipe_core::gpu`'s contract; the runtime's GPU executor owns
//! the one [`Gpu`] and drives it.
//!
//! * [`context`]: [`Gpu::open`] (EGL without a window system, GL 3.3 core or GLES 3.0, current
//!   on the opening thread; errors name the packages to install), [`GpuInfo`], the
//!   [`Garbage`] queue for GL objects dropped on other threads.
//! * [`texture`]: [`TexturePool`], the [`GpuFrame`]s it lends and the [`SharedGpuFrame`]s
//!   they become once written (`Send`; clones of one `Arc` per texture; back to the pool when
//!   the last is dropped, from any thread, without a GL call or an allocation).
//! * [`transfer`]: [`Uploader`] (pixel-unpack buffer ring), [`Downloader`] (readbacks that
//!   never make a thread wait: pixel-pack buffers and fences, or a download thread with a
//!   context sharing the GPU context's objects), [`read_back_blocking`] for tests.
//! * [`present`]: textures drawn in windows: the X server's EGL display, shared by the show's
//!   context and the windows' ([`present::Presenter`]), so that a window needs no download.
//! * [`probe`]: what `framepipe doctor` measures: the renderer and the cost of uploads,
//!   downloads and one full-screen pass.
//!
//! * [`isf`]: ISF shaders as GPU elements (`isf location=FILE.fs`, `isf-NAME`): passes,
//!   persistent and float buffers, inputs as properties, imported images, reload.
//! * [`transitions`]: the gl-transitions collection as `transition-NAME` mixers.
//! * [`register`]: adds those elements to a registry.
//!
//! Texture row 0 is the picture's bottom row (GL's convention); uploads and downloads flip.
//!
//! # Why this crate uses `unsafe`
//! GL is a C API: every [`glow`] call is `unsafe`, because GL cannot check that a context is
//! current, that object names belong to it, or that a pointer it writes through is large
//! enough. EGL is loaded from a shared library at run time, and an extension's entry point
//! is cast to its C signature. Each block says why it holds: the context is current on this
//! thread ([`Gpu`] is `!Send`, and everything that calls GL takes `&Gpu`), the names come from
//! this context (pools and rings remember the context they were first used with), and the
//! sizes of buffers GL reads or writes were checked against the texture's.
#![allow(unsafe_code)] // GL and EGL calls: see "Why this crate uses unsafe" above

pub mod context;
mod error;
mod fence;
pub mod isf;
pub mod present;
pub mod probe;
pub mod texture;
pub mod transfer;
pub mod transitions;

pub use context::{Api, Garbage, GlObject, Gpu, GpuInfo, OpenOptions, Platform};
pub use error::{GpuError, Result, PACKAGES};
pub use fence::Fence;
pub use framepipe_core::gpu::{glow, GpuImage, TexFormat};
pub use texture::{GpuFrame, SharedGpuFrame, TexturePool};
pub use transfer::{
    read_back_blocking, read_back_blocking_f32, DownloadMode, Downloader, Ticket, Uploader,
};

/// Adds framepipe's GPU elements to `registry`: `isf`, `isf-NAME` for the shaders of the ISF
/// folders ([`isf::library`]), and `transition-NAME` for the gl-transitions collection when
/// it is installed ([`transitions`]). Returns warnings (a collection found but unreadable).
pub fn register(registry: &mut framepipe_core::Registry) -> Vec<String> {
    isf::register(registry);
    transitions::register(registry).into_iter().collect()
}
