//! Audio for framepipe shows (issue #25): the show's sound, analysed once per **analysis
//! point** (every [`HOP`] samples at [`RATE`] Hz, 10 ms), published lock-free on a
//! [`Timeline`], and read per video frame as an [`AudioFrame`] at the frame's time.
//!
//! The data path:
//!
//! ```text
//! ffmpeg -f f32le (decode.rs, its own thread) ─┐
//!                                              ├─ Analyzer::push (analysis.rs: level, bands, FFT,
//! (a live capture would push here too)        ─┘   onset.rs, tempo.rs) ─ Timeline::publish (timeline.rs)
//!                                                                             │ lock-free
//! the engine, once per frame as it begins: Feed::frame(pts) ─ AudioFrame ─────┘
//!   → each bound property: Envelope::step (envelope.rs) → min + (max − min)·value
//! ```
//!
//! **Time.** Point `k` covers the [`FFT_SIZE`] samples that end at sample `(k + 1)·HOP`.
//! A frame whose time (its timestamp less the first frame's) is `t` reads the points that
//! end at or before `t`; its [`AudioFrame`] holds the latest one's level and bands, and
//! the onsets, peaks and flux of every point since the previous frame. So the frame's
//! analysis is a pure function of the audio and `t`, whatever the speed or thread count:
//! with a file, the engine waits for the decoder to reach `t` ([`Feed::wait_for`]).
//!
//! **Real time.** Every buffer is made when an [`Analyzer`] or a [`Timeline`] is made;
//! analysing a point and reading a frame allocate nothing, take no lock and make no
//! syscall. The timeline is a ring of seqlocked atomics (one writer, any readers).
#![forbid(unsafe_code)]

mod analysis;
mod capture;
mod decode;
mod envelope;
mod meter;
mod onset;
mod tempo;
mod timeline;

pub use analysis::{Analyzer, BandEdges, Point, DEFAULT_BAND_EDGES};
pub use capture::{
    list_devices, CaptureError, CaptureStats, Input, LiveInput, LiveSpec, OpenedDevice, Source,
    JACK_CLIENT,
};
pub use decode::{probe_has_audio, FileInput};
pub use envelope::Envelope;
pub use framepipe_control::audio::{AudioFeature, AudioFollow, MAX_BANDS};
pub use meter::{Meter, MeterReading};
pub use onset::OnsetDetector;
pub use tempo::{TempoEstimator, TempoFollow};
pub use timeline::{AudioFrame, Feed, Timeline, ARRAY_POINTS};

/// Sample rate of the analysis, Hz: every input is resampled to it.
pub const RATE: u32 = 48_000;
/// Samples between analysis points: 10 ms at [`RATE`].
pub const HOP: usize = 480;
/// Analysis points per second.
pub const POINTS_PER_SECOND: u32 = RATE / HOP as u32;
/// Samples in the analysis window (the FFT's size): 42.7 ms at [`RATE`].
pub const FFT_SIZE: usize = 2048;
/// FFT magnitudes per point (bin `k` is `k·RATE/FFT_SIZE` Hz, 23.4 Hz apart): ISF's
/// `audioFFT` input takes them as they are.
pub const SPECTRUM_BINS: usize = FFT_SIZE / 2;

/// Errors of the audio crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The ffmpeg tool could not be started.
    #[error("cannot run ffmpeg to decode the audio '{input}': {reason}; install it (Debian: apt-get install ffmpeg)")]
    NoFfmpeg {
        /// The input named.
        input: String,
        /// What the OS said.
        reason: String,
    },
    /// ffmpeg could not read the input (its own message).
    #[error("ffmpeg cannot read the audio '{input}': {message}")]
    Decode {
        /// The input named.
        input: String,
        /// ffmpeg's message.
        message: String,
    },
    /// Bad band edges.
    #[error("bad audio bands '{edges}': {reason}")]
    BadBands {
        /// The edges given.
        edges: String,
        /// Why.
        reason: String,
    },
}

/// The audio crate's result.
pub type Result<T> = std::result::Result<T, Error>;
