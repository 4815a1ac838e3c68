//! framepipe's core types, shared by every other crate.
//!
//! * [`frame`]: RGBA8 frames with frei0r's layout (pitch = width*4, 16-byte aligned) and the
//!   [`FramePool`] they come from. Ownership is in the types: a [`FrameMut`] is the only handle to
//!   its buffer and may write it; a [`Frame`] is a shared, read-only handle. A buffer goes back to
//!   its pool when its last handle drops.
//! * [`info`]: [`VideoInfo`] (size and rate), [`Rational`], [`FrameCtx`] (sequence number and
//!   timestamp of the frame being processed; time is integer nanoseconds).
//! * [`props`]: typed element properties, their specs and parsing from `name=value` text.
//! * [`shm`]: the memfd a shared frame pool keeps its buffers in, so that a child process (an
//!   isolated plugin) reads and writes frames in place; [`SharedFrame`] says where a frame is.
//! * [`crash`]: the line that names the node a fatal signal hit (a plugin run in process).
//! * [`limits`]: the memory budget every size from untrusted input is checked against.
//! * [`quote`]: untrusted text in a message: cut, with its length, and on one line.
//! * [`gpu`]: the contract of GPU elements ([`GpuFactory`], [`GpuNode`]): shaders run on the
//!   engine's one GPU context, frames kept as textures between GPU nodes.
//! * [`element`]: the [`Source`], [`Effect`]/[`EffectFactory`] and [`Sink`] traits every element
//!   implements, and [`Registry`], through which native and frei0r elements are found by name.
//!
//! Real-time contract: nothing in this crate allocates on the frame path. [`FramePool::acquire`]
//! and dropping a frame are lock-free, and allocation-free once the pool holds the frames the run
//! uses (a lazy pool allocates each of its buffers once, the first time it is needed; the
//! runtime fills a paced run's pools during the warm-up).
#![deny(unsafe_code)]

pub mod crash;
pub mod element;
pub mod error;
pub mod frame;
pub mod gpu;
pub mod info;
pub mod limits;
pub mod props;
pub mod quote;
pub mod shm;
pub mod stop;

pub use element::{
    edit_distance, BuildFn, Effect, EffectFactory, Element, ElementDesc, ElementKind, InlineSlices,
    Mixer, MixerFactory, Mode, Registry, RegistryEntry, Sink, SliceRunner, Source,
};
pub use error::{Error, Result};
pub use frame::{Frame, FrameMut, FramePool, PoolSharing};
pub use gpu::{FrameAudio, GpuCtx, GpuFactory, GpuImage, GpuNode, TexFormat, TextureFrame};
pub use info::{BeatCtx, FrameCtx, LoopOrigin, Rational, VideoInfo};
pub use limits::Limits;
pub use props::{PathUse, PropKind, PropSpec, PropValue, Props};
pub use shm::SharedFrame;
