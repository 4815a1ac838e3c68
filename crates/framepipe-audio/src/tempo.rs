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

/// Estimates within this of the tempo followed are the same tempo, bpm: the follower glides
/// to them. Farther ones are a new tempo, taken once they hold for [`HOLD_NS`].
const NEAR_BPM: f64 = 2.0;
/// Estimates within this of the tempo followed change nothing, bpm (the estimator's 0.05 bpm
/// steps between two close candidates are not a tempo change).
const DEADBAND_BPM: f64 = 0.1;
/// Time constant of the glide, ns.
const GLIDE_NS: f64 = 2e9;
/// How long a far estimate must hold before the follower jumps to it, ns.
const HOLD_NS: i64 = 1_000_000_000;
/// Gain of the phase correction per onset: the beat moves this fraction of the way to the onset.
const PHASE_GAIN: f64 = 0.2;
/// Onsets farther than this from the nearest beat (in beats) leave the phase alone (an
/// off-beat hi-hat is not a missed beat).
const PHASE_WINDOW: f64 = 0.25;

/// `tempo auto`: turns the estimator's estimates, read once per frame at the frame's audio
/// time, into a steady tempo for the beat clock, and onsets into small corrections of its
/// phase. Estimates near the tempo followed are glided to (a time constant of 2 s; a change
/// under 0.1 bpm is ignored), so two close estimates do not make the beat clock jitter; an
/// estimate far from it is taken once it has held for 1 s (the music changed tempo). Plain
/// arithmetic; no allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TempoFollow {
    /// The tempo followed, bpm (0: none yet).
    bpm: f64,
    /// A far estimate waiting to hold, and since when (audio time, ns).
    candidate: Option<(f64, i64)>,
    /// The audio time of the last step, ns.
    last_ns: Option<i64>,
}

impl TempoFollow {
    /// A follower with no tempo yet.
    pub fn new() -> Self {
        TempoFollow::default()
    }

    /// The tempo followed, bpm (0: none yet).
    pub fn bpm(&self) -> f64 {
        self.bpm
    }

    /// The frame at audio time `t_ns` read `estimate` (bpm; 0: none): returns the tempo to
    /// set, when it changed.
    pub fn step(&mut self, estimate: f32, t_ns: i64) -> Option<f64> {
        let dt = self.last_ns.map_or(0, |l| (t_ns - l).max(0));
        self.last_ns = Some(t_ns);
        let e = estimate as f64;
        if !(e.is_finite() && e > 0.0) {
            return None;
        }
        let before = self.bpm;
        if (e - self.bpm).abs() <= NEAR_BPM {
            self.candidate = None;
            if (e - self.bpm).abs() > DEADBAND_BPM {
                self.bpm += (e - self.bpm) * (1.0 - (-(dt as f64) / GLIDE_NS).exp());
            }
        } else {
            match self.candidate {
                Some((c, since)) if (e - c).abs() <= NEAR_BPM => {
                    if t_ns - since >= HOLD_NS || self.bpm == 0.0 {
                        self.bpm = e;
                        self.candidate = None;
                    }
                }
                _ => self.candidate = Some((e, t_ns)),
            }
        }
        (self.bpm != before).then_some(self.bpm)
    }

    /// An onset `age_ns` of oscillator time before a frame whose beat position is
    /// `nanobeats`, at `bpm`: the shift of the beat position (nanobeats) that moves the
    /// nearest beat [`PHASE_GAIN`] of the way to the onset; 0 for an onset far from any beat.
    pub fn phase_shift(nanobeats: i64, age_ns: i64, bpm: f64) -> i64 {
        const BEAT: f64 = 1e9;
        let at = nanobeats as f64 - age_ns as f64 * bpm / 60.0;
        let off = at / BEAT - (at / BEAT).round();
        if off.abs() > PHASE_WINDOW {
            return 0;
        }
        (-off * PHASE_GAIN * BEAT) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: i64 = 40_000_000;

    /// Estimates flickering between two close values (the estimator's 0.05 bpm steps) give a
    /// steady tempo between them, not a jittering one.
    #[test]
    fn close_estimates_do_not_make_the_tempo_jitter() {
        let mut f = TempoFollow::new();
        let mut t = 0;
        let mut got = Vec::new();
        for k in 0..500 {
            let e = if (k / 6) % 2 == 0 { 127.95 } else { 128.05 };
            if let Some(b) = f.step(e, t) {
                got.push(b);
            }
            t += FRAME;
        }
        assert!((f.bpm() - 128.0).abs() < 0.1, "{}", f.bpm());
        // After the first second the tempo no longer moves.
        assert!(
            got.len() <= 2,
            "the tempo changed {} times: {got:?}",
            got.len()
        );
    }

    /// A far estimate is taken once it has held for a second; a lone outlier is not.
    #[test]
    fn a_new_tempo_is_taken_once_it_holds_and_an_outlier_is_ignored() {
        let mut f = TempoFollow::new();
        let mut t = 0;
        let mut run = |f: &mut TempoFollow, e: f32, frames: usize| {
            for _ in 0..frames {
                f.step(e, t);
                t += FRAME;
            }
        };
        run(&mut f, 120.0, 2);
        assert_eq!(f.bpm(), 120.0, "the first estimate is taken");
        run(&mut f, 90.0, 5);
        run(&mut f, 120.0, 50);
        assert_eq!(f.bpm(), 120.0, "an outlier of 200 ms moved the tempo");
        run(&mut f, 140.0, 20);
        assert_eq!(f.bpm(), 120.0, "taken before it held a second");
        run(&mut f, 140.0, 10);
        assert_eq!(f.bpm(), 140.0);
    }

    /// An onset just after a beat pulls the beat later by a fifth of the gap; one half-way
    /// between beats leaves it alone.
    #[test]
    fn an_onset_near_a_beat_pulls_the_phase_toward_it() {
        // 120 bpm: a beat is 500 ms. The frame is at beat 4.1; an onset 50 ms ago was at 4.0.
        assert_eq!(
            TempoFollow::phase_shift(4_100_000_000, 50_000_000, 120.0),
            0
        );
        // The onset 100 ms ago was at beat 3.9: the beat moves 0.2 × 0.1 beat toward it,
        // i.e. the position advances by 20 millibeats.
        let s = TempoFollow::phase_shift(4_100_000_000, 100_000_000, 120.0);
        assert!((s - 20_000_000).abs() < 10, "{s}");
        assert_eq!(TempoFollow::phase_shift(4_500_000_000, 0, 120.0), 0);
    }
}
