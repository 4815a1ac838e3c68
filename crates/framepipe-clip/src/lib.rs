//! framepipe's clip players: clips decoded in the process through FFmpeg's libraries
//! (libavformat, libavcodec, libswscale, through `ffmpeg-next`), played the way a VJ plays
//! them.
//!
//! | element | kind | module |
//! |---|---|---|
//! | `clip` | source | [`clip`]: one clip; seamless loops, in/out, ping-pong, speed, reverse, scrub, pause |
//! | `clips` | source | [`deck`]: a bank of clips, one playing, triggered live by `clip=N` (on the beat with `quantize`) |
//!
//! | module | job |
//! |---|---|
//! | [`decode`] | one file: demux, decode, frame-accurate seek, RGBA exactly as `ffmpeg -pix_fmt rgba` |
//! | [`cursor`] | which clip frame comes next: the play head in integer fixed point |
//! | [`player`] | the decoder thread ahead of the show, its queue and cache |
//!
//! Real-time contract, per frame: `fill` copies a picture decoded ahead into the pool frame
//! and hands the buffer back through a lock-free queue; it allocates nothing and takes no lock.
//! It may wait for the decoder thread when that is behind (a seek, a reverse window), so the
//! sources say [`Source::blocks`](framepipe_core::Source::blocks) and run on the show's IO
//! thread. Every buffer is allocated when the element starts, sized from the clip and
//! checked against the memory budget ([`framepipe_core::Limits`]), and the sources say what
//! they hold ([`Source::own_bytes`](framepipe_core::Source::own_bytes)): the runtime counts
//! it in the show's memory book.
//!
//! Unsafe code: two calls FFmpeg's Rust binding does not wrap (`av_seek_frame` on the video
//! stream, in its own time base, for exact seeks; `sws_setColorspaceDetails`, for the colour
//! matrix and range of each frame, as the `ffmpeg` tool sets them) and the `Send` of the
//! converter's context. Each block says why it holds.
#![deny(unsafe_code)]

pub mod clip;
pub mod cursor;
pub mod deck;
#[allow(unsafe_code)] // FFI calls ffmpeg-next does not wrap: see the crate doc
pub mod decode;
pub mod error;
pub mod player;

pub use error::{ClipError, Result};

use framepipe_core::Registry;

/// Registers the clip players in `registry`.
pub fn register(registry: &mut Registry) {
    registry.register(clip::desc(), Box::new(clip::build));
    registry.register(deck::desc(), Box::new(deck::build));
}
