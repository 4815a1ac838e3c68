//! The analysis of one point: level (RMS, peak), band amplitudes and FFT magnitudes of the
//! last [`FFT_SIZE`] samples (Hann window), and the onset and tempo detectors fed with the
//! spectral flux. Every buffer is sized in [`Analyzer::new`]; [`Analyzer::push`] allocates
//! nothing.

use std::sync::Arc;

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

use crate::onset::OnsetDetector;
use crate::tempo::TempoEstimator;
use crate::{Error, Result, FFT_SIZE, HOP, MAX_BANDS, RATE, SPECTRUM_BINS};

/// The default band edges, Hz: bass 20–250, low-mid 250–2000, high-mid 2000–6000, treble
/// 6000–20000.
pub const DEFAULT_BAND_EDGES: [f32; 5] = [20.0, 250.0, 2000.0, 6000.0, 20000.0];

/// Band edges in Hz, rising: `n + 1` edges make `n` bands (1 to [`MAX_BANDS`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BandEdges(Vec<f32>);

impl Default for BandEdges {
    fn default() -> Self {
        BandEdges(DEFAULT_BAND_EDGES.to_vec())
    }
}

impl BandEdges {
    /// Parses `20,250,2000,6000,20000` (Hz, rising, at least one bin apart, below half the
    /// sample rate).
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |reason: String| Error::BadBands {
            edges: text.to_string(),
            reason,
        };
        let edges = text
            .split(',')
            .map(|e| e.trim().trim_end_matches("hz").parse::<f32>())
            .collect::<std::result::Result<Vec<f32>, _>>()
            .map_err(|_| bad("expected Hz numbers separated by commas, e.g. 20,250,2000".into()))?;
        if edges.len() < 2 || edges.len() > MAX_BANDS + 1 {
            return Err(bad(format!(
                "give 2 to {} edges (1 to {MAX_BANDS} bands)",
                MAX_BANDS + 1
            )));
        }
        let bin = RATE as f32 / FFT_SIZE as f32;
        for w in edges.windows(2) {
            if !(w[0] >= 0.0 && w[1] - w[0] >= bin) {
                return Err(bad(format!(
                    "edges must rise by at least one FFT bin ({bin:.1} Hz): {}..{}",
                    w[0], w[1]
                )));
            }
        }
        if edges[edges.len() - 1] > RATE as f32 / 2.0 {
            return Err(bad(format!("the top edge is above {} Hz", RATE / 2)));
        }
        Ok(BandEdges(edges))
    }

    /// The edges, Hz.
    pub fn edges(&self) -> &[f32] {
        &self.0
    }

    /// Number of bands.
    pub fn count(&self) -> usize {
        self.0.len() - 1
    }

    /// Band `b`'s bins: those whose centre frequency lies in `[lo, hi)`, DC excluded.
    pub fn bins(&self, b: usize) -> std::ops::Range<usize> {
        let bin = RATE as f32 / FFT_SIZE as f32;
        let first = |hz: f32| ((hz / bin).ceil() as usize).clamp(1, SPECTRUM_BINS);
        first(self.0[b])..first(self.0[b + 1])
    }
}

/// One analysis point, what the [`Timeline`](crate::Timeline) keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Point {
    /// RMS of the window's samples.
    pub level: f32,
    /// Largest magnitude of the point's new [`HOP`] samples.
    pub peak: f32,
    /// Band amplitudes: a sine of amplitude `a` inside band `b` gives `bands[b] ≈ a`.
    pub bands: [f32; MAX_BANDS],
    /// Spectral flux: the sum over bins of the rise of each magnitude since the last point.
    pub flux: f32,
    /// Whether an onset was detected at this point.
    pub onset: bool,
    /// The tempo estimate, bpm (0 until there is one).
    pub tempo_bpm: f32,
}

/// The analysis: samples in, one [`Point`] every [`HOP`] samples.
pub struct Analyzer {
    fft: Arc<dyn Fft<f32>>,
    scratch: Vec<Complex<f32>>,
    buf: Vec<Complex<f32>>,
    window: Vec<f32>,
    /// `4 / (FFT_SIZE · Σw²)`: one-sided power to squared amplitude.
    power_scale: f32,
    /// `2 / Σw`: a bin's magnitude to a sine's amplitude.
    mag_scale: f32,
    /// The last `FFT_SIZE` samples, oldest first.
    history: Vec<f32>,
    /// Samples of the point being filled (`HOP` at most).
    fill: usize,
    peak: f32,
    mags: Vec<f32>,
    prev_mags: Vec<f32>,
    bands: Vec<std::ops::Range<usize>>,
    onset: OnsetDetector,
    tempo: TempoEstimator,
    point: Point,
    points: u64,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("bands", &self.bands)
            .field("points", &self.points)
            .finish()
    }
}

impl Analyzer {
    /// An analyser with these bands; every buffer is made here.
    pub fn new(bands: &BandEdges) -> Self {
        let fft = FftPlanner::<f32>::new().plan_fft_forward(FFT_SIZE);
        let scratch = vec![Complex::default(); fft.get_inplace_scratch_len()];
        let window: Vec<f32> = (0..FFT_SIZE)
            .map(|n| {
                let x = std::f32::consts::TAU * n as f32 / FFT_SIZE as f32;
                0.5 - 0.5 * x.cos()
            })
            .collect();
        let sum: f32 = window.iter().sum();
        let sum_sq: f32 = window.iter().map(|w| w * w).sum();
        Analyzer {
            fft,
            scratch,
            buf: vec![Complex::default(); FFT_SIZE],
            power_scale: 4.0 / (FFT_SIZE as f32 * sum_sq),
            mag_scale: 2.0 / sum,
            window,
            history: vec![0.0; FFT_SIZE],
            fill: 0,
            peak: 0.0,
            mags: vec![0.0; SPECTRUM_BINS],
            prev_mags: vec![0.0; SPECTRUM_BINS],
            bands: (0..bands.count()).map(|b| bands.bins(b)).collect(),
            onset: OnsetDetector::new(),
            tempo: TempoEstimator::new(),
            point: Point::default(),
            points: 0,
        }
    }

    /// Feeds interleaved samples of `channels` channels (averaged to mono); `on_point` is
    /// called with each point completed. Allocates nothing.
    pub fn push(&mut self, samples: &[f32], channels: usize, mut on_point: impl FnMut(&Analyzer)) {
        let channels = channels.max(1);
        let start = FFT_SIZE - HOP;
        for frame in samples.chunks_exact(channels) {
            let x = if channels == 1 {
                frame[0]
            } else {
                frame.iter().sum::<f32>() / channels as f32
            };
            let x = if x.is_finite() { x } else { 0.0 };
            self.history[start + self.fill] = x;
            self.peak = self.peak.max(x.abs());
            self.fill += 1;
            if self.fill == HOP {
                self.analyse();
                on_point(self);
                self.history.copy_within(HOP.., 0);
                self.fill = 0;
                self.peak = 0.0;
            }
        }
    }

    /// The point just completed (inside `on_point`), or the last one.
    pub fn point(&self) -> &Point {
        &self.point
    }

    /// Points completed so far.
    pub fn points(&self) -> u64 {
        self.points
    }

    /// The FFT magnitudes of the last point, [`SPECTRUM_BINS`] of them, as sine amplitudes
    /// (ISF `audioFFT`).
    pub fn spectrum(&self) -> &[f32] {
        &self.mags
    }

    /// The last point's window of raw samples, oldest first (ISF `audio`). Valid inside
    /// `on_point`.
    pub fn waveform(&self) -> &[f32] {
        &self.history
    }

    fn analyse(&mut self) {
        for ((c, &x), &w) in self.buf.iter_mut().zip(&self.history).zip(&self.window) {
            *c = Complex::new(x * w, 0.0);
        }
        self.fft
            .process_with_scratch(&mut self.buf, &mut self.scratch);
        std::mem::swap(&mut self.mags, &mut self.prev_mags);
        let mut flux = 0.0f32;
        for (k, m) in self.mags.iter_mut().enumerate() {
            let v = self.buf[k].norm() * self.mag_scale;
            flux += (v - self.prev_mags[k]).max(0.0);
            *m = v;
        }
        let mut bands = [0.0f32; MAX_BANDS];
        for (b, r) in self.bands.iter().enumerate() {
            let power: f32 = self.buf[r.clone()].iter().map(|c| c.norm_sqr()).sum();
            bands[b] = (power * self.power_scale).sqrt();
        }
        let sq: f32 = self.history.iter().map(|x| x * x).sum();
        let onset = self.onset.push(flux);
        let tempo_bpm = self.tempo.push(self.onset.strength());
        self.point = Point {
            level: (sq / FFT_SIZE as f32).sqrt(),
            peak: self.peak,
            bands,
            flux,
            onset,
            tempo_bpm,
        };
        self.points += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(freq: f64, amp: f64, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (amp * (std::f64::consts::TAU * freq * i as f64 / RATE as f64).sin()) as f32)
            .collect()
    }

    /// The reference: a plain DFT (O(N²), f64) of the same Hann-windowed samples, summed over
    /// the band's bins, written here independently of the analyser's code.
    fn reference_band(samples: &[f64], lo_hz: f64, hi_hz: f64) -> f64 {
        let n = samples.len();
        let w: Vec<f64> = (0..n)
            .map(|i| 0.5 - 0.5 * (std::f64::consts::TAU * i as f64 / n as f64).cos())
            .collect();
        let sum_sq: f64 = w.iter().map(|x| x * x).sum();
        let df = RATE as f64 / n as f64;
        let mut power = 0.0;
        for k in 1..n / 2 {
            let f = k as f64 * df;
            if f < lo_hz || f >= hi_hz {
                continue;
            }
            let (mut re, mut im) = (0.0, 0.0);
            for (i, (&x, &wi)) in samples.iter().zip(&w).enumerate() {
                let a = std::f64::consts::TAU * (k * i) as f64 / n as f64;
                re += x * wi * a.cos();
                im -= x * wi * a.sin();
            }
            power += re * re + im * im;
        }
        // Parseval: a sine of amplitude A has one-sided power N·A²·Σw²/4.
        (4.0 * power / (n as f64 * sum_sq)).sqrt()
    }

    #[test]
    fn a_sines_band_energy_matches_a_plain_dft_and_its_amplitude() {
        let edges = BandEdges::default();
        let mut an = Analyzer::new(&edges);
        // 100 Hz at 0.5 (bass) plus 3 kHz at 0.25 (high-mid).
        let a = sine(100.0, 0.5, RATE as usize / 2);
        let b = sine(3000.0, 0.25, RATE as usize / 2);
        let mix: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let mut last = None;
        an.push(&mix, 1, |an| {
            last = Some((*an.point(), an.waveform().to_vec()));
        });
        let (point, window) = last.unwrap();
        let window: Vec<f64> = window.iter().map(|&x| x as f64).collect();
        for b in 0..4 {
            let e = edges.edges();
            let want = reference_band(&window, e[b] as f64, e[b + 1] as f64);
            let got = point.bands[b] as f64;
            assert!((got - want).abs() < 1e-3, "band {b}: {got} vs {want}");
        }
        assert!((point.bands[0] - 0.5).abs() < 0.01, "{:?}", point.bands);
        assert!((point.bands[2] - 0.25).abs() < 0.01, "{:?}", point.bands);
        assert!(
            point.bands[1] < 0.01 && point.bands[3] < 0.01,
            "{:?}",
            point.bands
        );
        // RMS of the sum: sqrt(0.5²/2 + 0.25²/2).
        let rms = (0.125f32 + 0.03125).sqrt();
        assert!((point.level - rms).abs() < 0.01, "{} vs {rms}", point.level);
        assert!(point.peak <= 0.75 && point.peak > 0.6, "{}", point.peak);
    }

    #[test]
    fn stereo_is_averaged_and_custom_bands_follow_their_edges() {
        let edges = BandEdges::parse("50,500,5000").unwrap();
        assert_eq!(edges.count(), 2);
        let mut an = Analyzer::new(&edges);
        let left = sine(1000.0, 0.8, 9600);
        let stereo: Vec<f32> = left.iter().flat_map(|&x| [x, 0.0]).collect();
        an.push(&stereo, 2, |_| {});
        assert_eq!(an.points(), 20);
        let p = an.point();
        assert!((p.bands[1] - 0.4).abs() < 0.01, "{:?}", p.bands);
        assert!(p.bands[0] < 0.01);
        for bad in ["", "100", "100,90", "20,30", "20,30000", "a,b"] {
            assert!(BandEdges::parse(bad).is_err(), "{bad}");
        }
    }
}
