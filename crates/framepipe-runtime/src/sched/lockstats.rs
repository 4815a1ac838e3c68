//! Lock statistics: how long the scheduler lock is held, and how long the output thread waits
//! to get it. Every acquisition records into a fixed log2 histogram of atomics (no allocation,
//! no lock), read into [`LockSummary`]s for `RunStats` and `--stats`.
//!
//! Hand-written, not `hdrhistogram`: any thread that takes the scheduler lock records here, at
//! once, through `&self` (one relaxed `fetch_add`). The crate's `Histogram::record` takes
//! `&mut self`, so a shared one would need a lock inside the hold it measures; its
//! `SyncHistogram` gives each thread a `Recorder` whose phase shift sends over an unbounded
//! channel (allocates) and whose `refresh` waits for every recorder. Power-of-two buckets are
//! the precision these figures need. See docs/REALTIME.md, "Hand-written, and why".

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets by bit length of the duration in ns: bucket `b` holds `2^(b-1) ..= 2^b - 1` ns
/// (bucket 0 holds 0). 40 buckets reach 2^39 ns, about 9 minutes; longer goes in the last.
const BUCKETS: usize = 40;

/// A lock-free histogram of durations, by powers of two.
#[derive(Debug)]
pub(crate) struct Log2Histogram {
    buckets: [AtomicU64; BUCKETS],
    max_ns: AtomicU64,
}

impl Default for Log2Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Log2Histogram {
    pub(crate) const fn new() -> Self {
        Log2Histogram {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
            max_ns: AtomicU64::new(0),
        }
    }

    /// Records one duration: one relaxed increment, and a write of the maximum only when it
    /// grows (a load otherwise).
    pub(crate) fn record(&self, ns: u64) {
        let b = ((u64::BITS - ns.leading_zeros()) as usize).min(BUCKETS - 1);
        self.buckets[b].fetch_add(1, Ordering::Relaxed);
        if ns > self.max_ns.load(Ordering::Relaxed) {
            self.max_ns.fetch_max(ns, Ordering::Relaxed);
        }
    }

    /// Count, p50, p99 and max. A percentile is the upper bound of the bucket it falls in (so
    /// at most twice the true value), never above the maximum seen.
    pub(crate) fn summary(&self) -> LockSummary {
        let counts: [u64; BUCKETS] =
            std::array::from_fn(|b| self.buckets[b].load(Ordering::Relaxed));
        let count: u64 = counts.iter().sum();
        let max_ns = self.max_ns.load(Ordering::Relaxed);
        let quantile = |q: f64| -> f64 {
            if count == 0 {
                return 0.0;
            }
            let rank = ((q * count as f64).ceil() as u64).max(1);
            let mut seen = 0;
            for (b, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    let upper = if b == 0 { 0 } else { (1u64 << b) - 1 };
                    return upper.min(max_ns) as f64 / 1e3;
                }
            }
            max_ns as f64 / 1e3
        };
        LockSummary {
            count,
            p50_us: quantile(0.50),
            p99_us: quantile(0.99),
            max_us: max_ns as f64 / 1e3,
        }
    }
}

/// Figures of one lock histogram, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LockSummary {
    /// Acquisitions recorded.
    pub count: u64,
    /// Median (upper bound of its power-of-two bucket), µs.
    pub p50_us: f64,
    /// 99th percentile (upper bound of its power-of-two bucket), µs.
    pub p99_us: f64,
    /// Longest, µs (exact).
    pub max_us: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_bucket_upper_bounds_and_the_max_is_exact() {
        let h = Log2Histogram::new();
        assert_eq!(h.summary(), LockSummary::default());
        // 98 short holds (700 ns: bucket 512..1023), 2 long ones (3 ms and 5 ms).
        for _ in 0..98 {
            h.record(700);
        }
        h.record(3_000_000);
        h.record(5_000_000);
        let s = h.summary();
        assert_eq!(s.count, 100);
        assert_eq!(s.p50_us, 1.023);
        // The 99th of 100 is the 3 ms one: bucket 2^21..2^22-1 ns.
        assert_eq!(s.p99_us, 4194.303);
        assert_eq!(s.max_us, 5000.0);
        h.record(0);
        assert_eq!(h.summary().count, 101);
    }
}
