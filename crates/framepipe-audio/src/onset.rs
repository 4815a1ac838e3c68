//! Onsets: the spectral flux against an adaptive threshold, the mean flux of the last
//! [`MEAN_POINTS`] points (0.3 s) times [`RATIO`] plus [`FLOOR`]. An onset is the point where
//! the flux rises above the threshold, at most one per [`REFRACTORY_POINTS`] (a hit's flux
//! stays high for a few points while it crosses the window).

/// Points in the threshold's running mean (0.3 s).
pub const MEAN_POINTS: usize = 30;
/// The threshold over the running mean.
pub const RATIO: f32 = 1.5;
/// The threshold's floor (flux units): quieter rises are not onsets.
pub const FLOOR: f32 = 0.05;
/// Points after an onset in which no other is taken (60 ms).
pub const REFRACTORY_POINTS: u32 = 6;

/// Spectral-flux onset detector, fixed size.
#[derive(Debug, Clone)]
pub struct OnsetDetector {
    recent: [f32; MEAN_POINTS],
    next: usize,
    sum: f32,
    above: bool,
    since: u32,
    strength: f32,
}

impl Default for OnsetDetector {
    fn default() -> Self {
        OnsetDetector::new()
    }
}

impl OnsetDetector {
    /// A detector that has seen silence.
    pub fn new() -> Self {
        OnsetDetector {
            recent: [0.0; MEAN_POINTS],
            next: 0,
            sum: 0.0,
            above: false,
            since: REFRACTORY_POINTS,
            strength: 0.0,
        }
    }

    /// The flux of the next point; returns whether it is an onset.
    pub fn push(&mut self, flux: f32) -> bool {
        let mean = (self.sum / MEAN_POINTS as f32).max(0.0);
        let threshold = mean * RATIO + FLOOR;
        let above = flux > threshold;
        let onset = above && !self.above && self.since >= REFRACTORY_POINTS;
        self.above = above;
        self.since = if onset {
            0
        } else {
            self.since.saturating_add(1)
        };
        self.strength = (flux - mean).max(0.0);
        self.sum += flux - self.recent[self.next];
        self.recent[self.next] = flux;
        self.next = (self.next + 1) % MEAN_POINTS;
        onset
    }

    /// The last point's onset strength: its flux over the running mean (0 when below); what
    /// the tempo estimator correlates.
    pub fn strength(&self) -> f32 {
        self.strength
    }
}
