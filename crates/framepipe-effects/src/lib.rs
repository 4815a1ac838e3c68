//! framepipe's native effects: `scale`, `invert`, `stamp` and the preview tap `monitor`; the
//! native mixer `mix`; and the pieces they share: a tiny bitmap [`font`] and [`slices`], which
//! cuts a frame into row slices for the engine's workers (and says how big a slice must be).
//!
//! All are stateless and run in [`Mode::Parallel`](framepipe_core::Mode) by default: the
//! runtime makes one instance per worker that runs them.
//!
//! Real-time contract, per frame:
//! * `invert`, `stamp`, `monitor` and `mix` neither allocate, lock (beyond one uncontended
//!   mutex per slice, taken once, in [`slices::for_each_row_slice_sized`]) nor block.
//! * `scale` owns one `fast_image_resize::Resizer` per instance, made at instantiation, whose
//!   working buffers are kept between frames. fast_image_resize still computes its filter
//!   coefficients on every call: about one small allocation per output row and column
//!   (measured in `tests/no_alloc.rs`: out_w + out_h + 6), never a frame-sized buffer. This is
//!   the one known exception to "no allocation per frame" in this crate.
#![forbid(unsafe_code)]

pub mod error;
pub mod font;
pub mod invert;
pub mod mix;
pub mod monitor;
pub mod scale;
pub mod slices;
pub mod stamp;

pub use error::{EffectsError, Result};

use framepipe_core::Registry;

/// Registers `scale`, `invert`, `stamp`, `mix` and `monitor` in `registry`.
pub fn register(registry: &mut Registry) {
    registry.register(scale::desc(), Box::new(scale::build));
    registry.register(invert::desc(), Box::new(invert::build));
    registry.register(stamp::desc(), Box::new(stamp::build));
    registry.register(mix::desc(), Box::new(mix::build));
    registry.register(monitor::desc(), Box::new(monitor::build));
}
