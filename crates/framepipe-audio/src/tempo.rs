//! Tempo: the autocorrelation of the onset strength over the last [`WINDOW_POINTS`] points
//! (8 s), scored for every tempo from [`MIN_BPM`] to [`MAX_BPM`] in 0.05 bpm steps as a comb:
//! the sum of the autocorrelation at 1, 2, 3 and 4 beat periods (read between lags by linear
//! interpolation, so the estimate is finer than one point's 10 ms). The comb favours the
//! true tempo over its half (which gets only every other tooth) and the unnormalised sum
//! favours it over its double. Recomputed every [`EVERY_POINTS`] points once 3 s are in;
//! fixed-size buffers.

use crate::POINTS_PER_SECOND;

/// Points of onset strength correlated (8 s).
pub const WINDOW_POINTS: usize = 800;
/// Points between estimates (0.25 s).
pub const EVERY_POINTS: u32 = 25;
/// Slowest tempo considered, bpm.
pub const MIN_BPM: f32 = 60.0;
/// Fastest tempo considered, bpm.
pub const MAX_BPM: f32 = 200.0;
/// Beat periods in the comb.
const TEETH: usize = 4;
/// Longest lag read: four periods of the slowest tempo, plus one for interpolation.
const MAX_LAG: usize = (60.0 * POINTS_PER_SECOND as f32 / MIN_BPM) as usize * TEETH + 2;
/// Points needed before a first estimate (3 s).
const MIN_POINTS: usize = 300;

/// Tempo estimator, fixed size.
#[derive(Debug, Clone)]
pub struct TempoEstimator {
    ring: Vec<f32>,
    next: usize,
    filled: usize,
    linear: Vec<f32>,
    ac: Vec<f32>,
    countdown: u32,
    bpm: f32,
}

impl Default for TempoEstimator {
    fn default() -> Self {
        TempoEstimator::new()
    }
}

impl TempoEstimator {
    /// An estimator with no estimate.
    pub fn new() -> Self {
        TempoEstimator {
            ring: vec![0.0; WINDOW_POINTS],
            next: 0,
            filled: 0,
            linear: vec![0.0; WINDOW_POINTS],
            ac: vec![0.0; MAX_LAG + 1],
            countdown: EVERY_POINTS,
            bpm: 0.0,
        }
    }

    /// The next point's onset strength; returns the current estimate, bpm (0: none yet).
    pub fn push(&mut self, strength: f32) -> f32 {
        self.ring[self.next] = strength;
        self.next = (self.next + 1) % WINDOW_POINTS;
        self.filled = (self.filled + 1).min(WINDOW_POINTS);
        self.countdown -= 1;
        if self.countdown == 0 {
            self.countdown = EVERY_POINTS;
            if self.filled >= MIN_POINTS {
                self.estimate();
            }
        }
        self.bpm
    }

    /// The current estimate, bpm (0: none yet).
    pub fn bpm(&self) -> f32 {
        self.bpm
    }

    fn estimate(&mut self) {
        let n = self.filled;
        // Oldest first.
        let start = (self.next + WINDOW_POINTS - n) % WINDOW_POINTS;
        for i in 0..n {
            self.linear[i] = self.ring[(start + i) % WINDOW_POINTS];
        }
        let x = &self.linear[..n];
        for (lag, a) in self.ac.iter_mut().enumerate() {
            *a = if lag < n {
                x[lag..].iter().zip(x).map(|(p, q)| p * q).sum()
            } else {
                0.0
            };
        }
        let ac = &self.ac;
        let at = |lag: f32| -> f32 {
            let i = lag as usize;
            if i + 1 >= ac.len() {
                return 0.0;
            }
            let f = lag - i as f32;
            ac[i] * (1.0 - f) + ac[i + 1] * f
        };
        let (mut best, mut best_score) = (0.0f32, 0.0f32);
        let steps = ((MAX_BPM - MIN_BPM) / 0.05) as usize;
        for s in 0..=steps {
            let bpm = MIN_BPM + s as f32 * 0.05;
            let period = 60.0 * POINTS_PER_SECOND as f32 / bpm;
            let score: f32 = (1..=TEETH).map(|m| at(period * m as f32)).sum();
            if score > best_score {
                (best, best_score) = (bpm, score);
            }
        }
        if best_score > 0.0 {
            self.bpm = best;
        }
    }
}
