//! framepipe's sources and sinks: where frames enter and leave the engine, converted from and to
//! its RGBA8 frames at the edge.
//!
//! | element | kind | module |
//! |---|---|---|
//! | `testsrc` | source | [`testsrc`]: bars, noise, counter, gradient, solid |
//! | `rawsrc`, `rawsink`, `nullsink` | source, sinks | [`raw`]: headerless rgba/bgra/rgb24 |
//! | `y4msrc`, `y4msink` | source, sink | [`y4m`]: YUV4MPEG2 8-bit 4:2:0 and 4:4:4 |
//! | `ffmpegsrc`, `ffmpegsink` | source, sink | [`ffmpeg`]: the ffmpeg tool through a pipe |
//!
//! Real-time contract, per frame:
//! * Nothing allocates: read buffers, conversion scratch and YUV planes are allocated when the
//!   element is built or started, sized from the (checked, at most [`MAX_DIM`] a side) frame size.
//!   Readers fill preallocated buffers (the pool frame itself where no conversion is needed);
//!   writers use one `BufWriter` made at build or start.
//! * Nothing locks, except ffmpeg's stderr collector: a helper thread that takes a mutex only
//!   when ffmpeg prints a line (it is told `-v error`, so normally never); and `ffmpegsink`
//!   hands each frame, copied into a ring of buffers allocated at start, to its writer thread
//!   through a bounded channel (see `ffmpeg::Running`).
//! * Sources and sinks *block* on their file, pipe or child process: that is their job. They run
//!   as the pipeline's first and last serial stages, so the runtime keeps them off the effects'
//!   way.
//! * Bad input ends the stream with a one-line error that names the problem (missing file,
//!   truncated frame, malformed header, unsupported chroma, ffmpeg's own last message); frames
//!   read before it are delivered. No input can make these elements panic or allocate without
//!   bound.
#![forbid(unsafe_code)]

pub mod error;
pub mod ffmpeg;
pub mod pixfmt;
pub mod raw;
pub mod stream;
pub mod testsrc;
pub mod y4m;

pub use error::{IoError, Result};
pub use pixfmt::RawFormat;
pub use stream::MAX_DIM;

use framepipe_core::Registry;

/// Registers every source and sink of this crate in `registry`.
pub fn register(registry: &mut Registry) {
    registry.register(testsrc::desc(), Box::new(testsrc::build));
    registry.register(raw::src_desc(), Box::new(raw::build_src));
    registry.register(y4m::src_desc(), Box::new(y4m::build_src));
    registry.register(ffmpeg::src_desc(), Box::new(ffmpeg::build_src));
    registry.register(raw::null_desc(), Box::new(raw::build_null));
    registry.register(raw::sink_desc(), Box::new(raw::build_sink));
    registry.register(y4m::sink_desc(), Box::new(y4m::build_sink));
    registry.register(ffmpeg::sink_desc(), Box::new(ffmpeg::build_sink));
}
