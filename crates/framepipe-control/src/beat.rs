//! The beat clock's pieces that do not run per frame: the tempo range, tap tempo from
//! timestamps, and the monotonic clock taps are stamped with.
//!
//! The beat position itself lives in [`OscClock`](crate::OscClock): it advances with the
//! oscillator time (so the master speed scales it) at the tempo in force, and a tempo change
//! only changes how fast it moves from that frame on, never where it is.
//!
//! # Tap tempo
//! A `tap` is stamped with [`monotonic_ns`] when it is *posted*
//! ([`CommandSender::post`](crate::CommandSender::post) fills [`Command::Tap`](crate::Command)'s
//! `at_ns`), so the interval between two taps is the user's, however late the engine reads
//! them (once per frame). [`TapTempo`] then, in the order the taps were posted:
//! * ignores a tap less than [`MIN_TAP_GAP_NS`] after the previous one (a bouncing button:
//!   faster than [`MAX_BPM`]);
//! * starts a new run of taps when the previous one is more than [`MAX_TAP_GAP_NS`] old (slower
//!   than [`MIN_BPM`]) or the first one;
//! * otherwise sets the tempo from the mean interval of the last [`TAP_HISTORY`] taps of the
//!   run (the first and last of them: `(last − first) / (n − 1)`).

use std::sync::OnceLock;
use std::time::Instant;

use crate::{Error, Result};

/// Tempo at the start of a run, beats per minute.
pub const DEFAULT_BPM: f64 = 120.0;
/// Slowest tempo accepted, bpm.
pub const MIN_BPM: f64 = 20.0;
/// Fastest tempo accepted, bpm.
pub const MAX_BPM: f64 = 999.0;
/// Taps further apart than this (one beat at [`MIN_BPM`], 3 s) start a new run of taps.
pub const MAX_TAP_GAP_NS: i64 = 3_000_000_000;
/// Taps closer than this (one beat at [`MAX_BPM`], rounded up) are ignored as bounces.
pub const MIN_TAP_GAP_NS: i64 = 60_060_061;
/// How many of the latest taps of a run the tempo is averaged over.
pub const TAP_HISTORY: usize = 5;

/// Checks a tempo: a number within [`MIN_BPM`]`..=`[`MAX_BPM`] (NaN is outside).
pub fn check_tempo(bpm: f64) -> Result<()> {
    if (MIN_BPM..=MAX_BPM).contains(&bpm) {
        Ok(())
    } else {
        Err(Error::BadArgument {
            command: "tempo".into(),
            token: bpm.to_string(),
            reason: "expected a tempo in bpm within 20..=999".into(),
        })
    }
}

/// Now on the process's monotonic clock, ns since its first use. Taps are stamped with it when
/// posted, and the engine reads it again when it applies them; no allocation after the first
/// call.
pub fn monotonic_ns() -> i64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    i64::try_from(epoch.elapsed().as_nanos()).unwrap_or(i64::MAX)
}

/// What a tap did (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TapResult {
    /// Too soon after the previous tap: ignored altogether.
    Ignored,
    /// The first tap of a run: no tempo yet.
    First,
    /// The tempo the taps of the run give, bpm (within the accepted range).
    Tempo(f64),
}

/// Tap tempo over the posting times of the taps. Fixed size: no allocation.
#[derive(Debug, Clone, Default)]
pub struct TapTempo {
    times: [i64; TAP_HISTORY],
    /// Taps of the current run kept in `times` (≤ TAP_HISTORY), oldest first.
    len: usize,
}

impl TapTempo {
    /// No taps yet.
    pub fn new() -> Self {
        TapTempo::default()
    }

    /// A tap posted at `at_ns` (monotonic). Taps must come in posting order; one stamped
    /// before the previous one starts a new run.
    pub fn tap(&mut self, at_ns: i64) -> TapResult {
        if self.len > 0 {
            let gap = at_ns.saturating_sub(self.times[self.len - 1]);
            if (0..MIN_TAP_GAP_NS).contains(&gap) {
                return TapResult::Ignored;
            }
            if !(0..=MAX_TAP_GAP_NS).contains(&gap) {
                self.len = 0;
            }
        }
        if self.len == TAP_HISTORY {
            self.times.copy_within(1.., 0);
            self.len -= 1;
        }
        self.times[self.len] = at_ns;
        self.len += 1;
        if self.len < 2 {
            return TapResult::First;
        }
        let span = (self.times[self.len - 1] - self.times[0]) as f64;
        let interval = span / (self.len - 1) as f64;
        TapResult::Tempo((60e9 / interval).clamp(MIN_BPM, MAX_BPM))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn taps_set_the_tempo_from_the_mean_of_the_last_intervals() {
        let mut t = TapTempo::new();
        assert_eq!(t.tap(1_000 * MS), TapResult::First);
        // 500 ms: 120 bpm.
        assert_eq!(t.tap(1_500 * MS), TapResult::Tempo(120.0));
        // 400 ms next: the mean of 500 and 400 is 450 ms = 133.33 bpm.
        match t.tap(1_900 * MS) {
            TapResult::Tempo(b) => assert!((b - 60e3 / 450.0).abs() < 1e-9, "{b}"),
            other => panic!("{other:?}"),
        }
        // Six taps 600 ms apart after those: only the last five count (4 intervals of 600).
        let mut at = 1_900 * MS;
        let mut last = TapResult::First;
        for _ in 0..6 {
            at += 600 * MS;
            last = t.tap(at);
        }
        assert_eq!(last, TapResult::Tempo(100.0));
    }

    #[test]
    fn a_long_pause_starts_a_new_run_and_bounces_are_ignored() {
        let mut t = TapTempo::new();
        t.tap(0);
        assert_eq!(t.tap(250 * MS), TapResult::Tempo(240.0));
        // 3.5 s later: a new run, the old taps do not count.
        assert_eq!(t.tap(3_750 * MS), TapResult::First);
        // A bounce 20 ms later is ignored, and does not count as a tap.
        assert_eq!(t.tap(3_770 * MS), TapResult::Ignored);
        assert_eq!(t.tap(4_750 * MS), TapResult::Tempo(60.0));
        // Exactly the longest gap still counts (mean of 1 s and 3 s: 30 bpm).
        assert_eq!(t.tap(4_750 * MS + MAX_TAP_GAP_NS), TapResult::Tempo(30.0));
        // A tap stamped before the previous one starts a new run.
        assert_eq!(t.tap(0), TapResult::First);
        // The fastest accepted gap gives at most 999 bpm.
        let mut t = TapTempo::new();
        t.tap(0);
        match t.tap(MIN_TAP_GAP_NS) {
            TapResult::Tempo(b) => assert!(b <= MAX_BPM && b > 998.9, "{b}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tempo_range_is_checked_naming_the_value() {
        for bpm in [MIN_BPM, DEFAULT_BPM, MAX_BPM] {
            check_tempo(bpm).unwrap();
        }
        for bpm in [19.99, 1000.0, f64::NAN, -120.0] {
            let e = check_tempo(bpm).unwrap_err().to_string();
            assert!(
                e.contains(&bpm.to_string()) && e.contains("20..=999"),
                "{e}"
            );
        }
    }

    #[test]
    fn monotonic_clock_does_not_go_back() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a && a >= 0);
    }
}
