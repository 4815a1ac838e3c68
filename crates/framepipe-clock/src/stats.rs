//! Lateness statistics with no allocation per frame: a fixed log-linear histogram.
//!
//! Values are nanoseconds. Below 128 ns each nanosecond has its own bucket; above, every power
//! of two is split into 64 buckets, so a quantile is exact to within 1/64 (1.6 %) of its value.
//! The histogram covers up to 2^41 ns (about 37 minutes); larger values land in the last bucket.
//! The maximum and minimum are kept exactly.
//!
//! Hand-written, not `hdrhistogram`: that crate would be allowed here (one writer, the output
//! thread, owns this; a `Histogram::new_with_bounds` does not resize, and `saturating_record` never
//! allocates), but it does the same job (its cost not measured against ours; 2 significant digits:
//! buckets of 1/128 of a value in about 35 KB; ours 1/64 in 19 KB), the exact extremes, sum and
//! counts stay ours beside it, and its quantile is the highest value of a bucket where ours is the
//! middle: every run's reported figures would change, for the ~60 lines of bucket arithmetic below,
//! which `buckets_are_contiguous_and_cover_their_values` checks. See docs/REALTIME.md,
//! "Hand-written, and why".

use serde::Serialize;

/// The default "late" threshold: a frame released more than 1 ms after its deadline counts as
/// late. At 60 fps that is 6 % of a period; less than a display can show, but well beyond the
/// pacer's normal lateness (a few µs), so it counts real misses and not noise.
pub const DEFAULT_LATE_THRESHOLD_NS: i64 = 1_000_000;

const LINEAR: u64 = 128;
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS; // 64 buckets per octave
const MAX_BIT: u32 = 41;
const BUCKETS: usize = LINEAR as usize + (MAX_BIT - 7 + 1) as usize * SUB as usize;

fn bucket_of(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let msb = (63 - v.leading_zeros()).min(MAX_BIT);
    let v = v.min((1u64 << (MAX_BIT + 1)) - 1);
    let shift = msb - SUB_BITS;
    let sub = (v >> shift) - SUB; // 0..64
    LINEAR as usize + (msb - 7) as usize * SUB as usize + sub as usize
}

/// Lowest value that falls in bucket `b`.
fn bucket_low(b: usize) -> u64 {
    if (b as u64) < LINEAR {
        return b as u64;
    }
    let i = b as u64 - LINEAR;
    let msb = (i / SUB) as u32 + 7;
    let sub = i % SUB;
    (SUB + sub) << (msb - SUB_BITS)
}

/// Width of bucket `b` (1 in the linear part).
fn bucket_width(b: usize) -> u64 {
    if (b as u64) < LINEAR {
        return 1;
    }
    let msb = ((b as u64 - LINEAR) / SUB) as u32 + 7;
    1 << (msb - SUB_BITS)
}

/// Lateness of released frames, and counts of late, early and repeated frames.
///
/// Allocates its histogram once in [`LatenessStats::new`]; [`record`](Self::record) and
/// [`record_repeat`](Self::record_repeat) are a few integer operations.
#[derive(Debug, Clone)]
pub struct LatenessStats {
    hist: Box<[u64]>,
    count: u64,
    sum: i128,
    min: i64,
    max: i64,
    late: u64,
    early: u64,
    repeated: u64,
    late_threshold_ns: i64,
}

/// A snapshot of [`LatenessStats`], in microseconds where it says so; for `--stats` output.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatenessSummary {
    /// Frames recorded.
    pub frames: u64,
    /// Median lateness, µs (early frames count as 0).
    pub p50_us: f64,
    /// 99th percentile lateness, µs.
    pub p99_us: f64,
    /// Largest lateness, µs (exact).
    pub max_us: f64,
    /// Mean lateness, µs.
    pub mean_us: f64,
    /// Frames later than the late threshold.
    pub late: u64,
    /// Frames released before their deadline (should stay 0).
    pub early: u64,
    /// Deadlines at which the previous frame was shown again.
    pub repeated: u64,
    /// The late threshold, µs.
    pub late_threshold_us: f64,
}

impl Default for LatenessStats {
    fn default() -> Self {
        Self::new(DEFAULT_LATE_THRESHOLD_NS)
    }
}

impl LatenessStats {
    /// Empty statistics; frames later than `late_threshold_ns` count as late.
    pub fn new(late_threshold_ns: i64) -> Self {
        LatenessStats {
            hist: vec![0u64; BUCKETS].into_boxed_slice(),
            count: 0,
            sum: 0,
            min: i64::MAX,
            max: i64::MIN,
            late: 0,
            early: 0,
            repeated: 0,
            late_threshold_ns,
        }
    }

    /// Records one frame's lateness (release time minus deadline; negative = early).
    pub fn record(&mut self, lateness_ns: i64) {
        self.count += 1;
        self.sum += lateness_ns as i128;
        self.min = self.min.min(lateness_ns);
        self.max = self.max.max(lateness_ns);
        if lateness_ns < 0 {
            self.early += 1;
        }
        if lateness_ns > self.late_threshold_ns {
            self.late += 1;
        }
        self.hist[bucket_of(lateness_ns.max(0) as u64)] += 1;
    }

    /// Records that a deadline passed with no new frame, so the previous one was shown again.
    pub fn record_repeat(&mut self) {
        self.repeated += 1;
    }

    /// Frames recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Frames later than the threshold.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// Frames released early (negative lateness).
    pub fn early(&self) -> u64 {
        self.early
    }

    /// Repeated frames.
    pub fn repeated(&self) -> u64 {
        self.repeated
    }

    /// Largest lateness recorded, ns (`None` before the first record).
    pub fn max_ns(&self) -> Option<i64> {
        (self.count > 0).then_some(self.max)
    }

    /// Smallest lateness recorded, ns (`None` before the first record).
    pub fn min_ns(&self) -> Option<i64> {
        (self.count > 0).then_some(self.min)
    }

    /// The `q`-quantile (0.0 ..= 1.0) of lateness in ns, early frames counted as 0: the middle
    /// of the bucket holding it, never above the exact maximum. `None` when empty.
    pub fn quantile_ns(&self, q: f64) -> Option<i64> {
        if self.count == 0 {
            return None;
        }
        // Rank of the wanted value, 1-based: the smallest value with at least q*count below.
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &n) in self.hist.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let mid = bucket_low(b) + (bucket_width(b) - 1) / 2;
                return Some((mid as i64).min(self.max.max(0)));
            }
        }
        Some(self.max.max(0))
    }

    /// A summary for reporting.
    pub fn summary(&self) -> LatenessSummary {
        let us = |ns: i64| ns as f64 / 1000.0;
        LatenessSummary {
            frames: self.count,
            p50_us: us(self.quantile_ns(0.5).unwrap_or(0)),
            p99_us: us(self.quantile_ns(0.99).unwrap_or(0)),
            max_us: us(self.max_ns().unwrap_or(0)),
            mean_us: if self.count == 0 {
                0.0
            } else {
                self.sum as f64 / self.count as f64 / 1000.0
            },
            late: self.late,
            early: self.early,
            repeated: self.repeated,
            late_threshold_us: us(self.late_threshold_ns),
        }
    }

    /// Forgets everything recorded (keeps the threshold and the allocation).
    pub fn clear(&mut self) {
        self.hist.fill(0);
        self.count = 0;
        self.sum = 0;
        self.min = i64::MAX;
        self.max = i64::MIN;
        self.late = 0;
        self.early = 0;
        self.repeated = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_their_values() {
        let mut prev_end = 0;
        for b in 0..BUCKETS {
            assert_eq!(bucket_low(b), prev_end, "bucket {b}");
            prev_end = bucket_low(b) + bucket_width(b);
        }
        for v in [
            0u64,
            1,
            127,
            128,
            129,
            255,
            256,
            1000,
            12_345,
            999_999,
            1 << 40,
        ] {
            let b = bucket_of(v);
            assert!(
                bucket_low(b) <= v && v < bucket_low(b) + bucket_width(b),
                "{v} in bucket {b} [{}, +{})",
                bucket_low(b),
                bucket_width(b)
            );
            // Precision: bucket no wider than 1/64 of its values.
            assert!(bucket_width(b) * 64 <= v.max(64), "{v}");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_of_known_values() {
        let mut s = LatenessStats::new(1_000_000);
        // 1..=1000 µs, once each.
        for us in 1..=1000i64 {
            s.record(us * 1000);
        }
        let p50 = s.quantile_ns(0.5).unwrap();
        let p99 = s.quantile_ns(0.99).unwrap();
        assert!((p50 - 500_000).abs() <= 500_000 / 64, "p50 {p50}");
        assert!((p99 - 990_000).abs() <= 990_000 / 64, "p99 {p99}");
        assert_eq!(s.max_ns(), Some(1_000_000));
        assert_eq!(
            s.late(),
            0,
            "1 ms exactly is not later than the 1 ms threshold"
        );
        s.record(1_000_001);
        assert_eq!(s.late(), 1);
        let sum = s.summary();
        assert_eq!(sum.frames, 1001);
        assert!((sum.max_us - 1000.001).abs() < 1e-9);
    }

    #[test]
    fn small_values_are_exact_and_early_frames_counted() {
        let mut s = LatenessStats::default();
        for v in [3, 5, 7, -2, 9] {
            s.record(v);
        }
        assert_eq!(s.early(), 1);
        assert_eq!(s.min_ns(), Some(-2));
        assert_eq!(s.quantile_ns(0.5), Some(5));
        assert_eq!(s.quantile_ns(0.0), Some(0), "the early frame counts as 0");
        assert_eq!(s.quantile_ns(1.0), Some(9));
        s.record_repeat();
        s.record_repeat();
        assert_eq!(s.repeated(), 2);
        s.clear();
        assert_eq!(s.count(), 0);
        assert_eq!(s.repeated(), 0);
        assert_eq!(s.quantile_ns(0.5), None);
        s.record(42);
        assert_eq!(s.quantile_ns(0.5), Some(42));
    }
}
