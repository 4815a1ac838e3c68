//! The show's audio as the surfaces read it (the web page's meters, OSCQuery): the last
//! frame's analysis, written by the worker beginning each frame and read by any thread,
//! lock-free (relaxed atomics: a reader may see one field from a frame and the next field
//! from the following one, which a meter does not mind). Onsets are counted, so that a
//! surface polling slower than the frame rate misses none.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::{AudioFrame, MAX_BANDS};

/// The last frame's analysis, for the surfaces (see the module doc).
#[derive(Debug, Default)]
pub struct Meter {
    frames: AtomicU64,
    onsets: AtomicU64,
    level: AtomicU32,
    peak: AtomicU32,
    flux: AtomicU32,
    tempo_bpm: AtomicU32,
    bands: [AtomicU32; MAX_BANDS],
    band_count: AtomicU32,
}

/// What a [`Meter`] holds, read at once.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MeterReading {
    /// Frames whose analysis was written (0: the show has no audio, or no frame yet).
    pub frames: u64,
    /// Frames that had an onset, so far.
    pub onsets: u64,
    /// The last frame's RMS level.
    pub level: f32,
    /// The last frame's peak.
    pub peak: f32,
    /// The last frame's largest spectral flux.
    pub flux: f32,
    /// The tempo estimate, bpm (0: none yet).
    pub tempo_bpm: f32,
    /// The last frame's band amplitudes (the show's bands first; the rest 0).
    pub bands: [f32; MAX_BANDS],
    /// The show's bands (`bands[..band_count]`; 0: no audio). Their names:
    /// `AudioFeature::band(i).name()` (bass, low-mid, high-mid, treble, band4...).
    pub band_count: usize,
}

impl Meter {
    /// An empty meter.
    pub fn new() -> Self {
        Meter::default()
    }

    /// The show's audio has `n` bands (set once, before the run).
    pub fn set_bands(&self, n: usize) {
        self.band_count
            .store(n.min(MAX_BANDS) as u32, Ordering::Relaxed);
    }

    /// Writes frame `a`'s analysis (one writer at a time: frames begin one at a time).
    pub fn store(&self, a: &AudioFrame) {
        let put = |d: &AtomicU32, v: f32| d.store(v.to_bits(), Ordering::Relaxed);
        put(&self.level, a.level);
        put(&self.peak, a.peak);
        put(&self.flux, a.flux);
        put(&self.tempo_bpm, a.tempo_bpm);
        for (d, &v) in self.bands.iter().zip(&a.bands) {
            put(d, v);
        }
        if a.onset {
            self.onsets.fetch_add(1, Ordering::Relaxed);
        }
        self.frames.fetch_add(1, Ordering::Release);
    }

    /// The last frame's analysis.
    pub fn read(&self) -> MeterReading {
        let get = |a: &AtomicU32| f32::from_bits(a.load(Ordering::Relaxed));
        MeterReading {
            frames: self.frames.load(Ordering::Acquire),
            onsets: self.onsets.load(Ordering::Relaxed),
            level: get(&self.level),
            peak: get(&self.peak),
            flux: get(&self.flux),
            tempo_bpm: get(&self.tempo_bpm),
            bands: std::array::from_fn(|b| get(&self.bands[b])),
            band_count: self.band_count.load(Ordering::Relaxed) as usize,
        }
    }
}
