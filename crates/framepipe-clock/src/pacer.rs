//! [`Pacer`]: frame release at absolute deadlines, sleep then spin.

use framepipe_core::Rational;

use crate::stats::LatenessStats;
use crate::sys::{now_ns, sleep_until_ns};
use crate::{Error, Result};

/// Margin the pacer starts with before it has measured its own wake-ups.
pub const INITIAL_MARGIN_NS: i64 = 200_000;
/// The margin never shrinks below this: a wake-up is rarely better than a few tens of µs late.
pub const MIN_MARGIN_NS: i64 = 30_000;
/// The margin never grows beyond this, which bounds the spinning per frame.
pub const MAX_MARGIN_NS: i64 = 1_000_000;
/// Headroom added to the observed oversleep quantile.
const MARGIN_HEADROOM_NS: i64 = 20_000;
/// How many recent wake-ups the margin is computed from.
const WAKE_WINDOW: usize = 64;
/// Which of the sorted recent oversleeps sets the margin: the 58th of 64, about the 90th
/// percentile. Covering rarer, larger oversleeps is not worth it: on a shared or virtual
/// machine they come from the CPU being taken away for milliseconds, which no margin a
/// frame period can afford would cover, while a larger margin costs CPU on every frame.
const WAKE_RANK: usize = 57;

/// One released deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    /// Index of the deadline since the pacer started (or since the last re-anchoring, the index
    /// keeps counting).
    pub index: u64,
    /// The deadline, `CLOCK_MONOTONIC` ns.
    pub deadline_ns: i64,
    /// When [`Pacer::wait_next`] returned, `CLOCK_MONOTONIC` ns.
    pub released_ns: i64,
    /// `released_ns - deadline_ns`; 0 or a little more normally, large when the caller came to
    /// wait after the deadline had passed.
    pub lateness_ns: i64,
}

/// Releases frames at absolute deadlines `origin + rate.frame_time_ns(index)` on
/// `CLOCK_MONOTONIC`.
///
/// Each wait sleeps (`clock_nanosleep`, `TIMER_ABSTIME`) until `deadline - margin`, then spins
/// until the deadline. The margin adapts to the wake-ups it observes: it is the 90th percentile
/// of the last 64 oversleeps (wake-up time minus requested time) plus 20 µs, within
/// [`MIN_MARGIN_NS`]..[`MAX_MARGIN_NS`]; it starts at [`INITIAL_MARGIN_NS`]. Call
/// [`prepare_pacing_thread`](crate::prepare_pacing_thread) on the pacing thread first so the
/// kernel does not add its default 50 µs timer slack.
///
/// Deadlines come from the frame index and an exact rate, so they do not drift however long the
/// run. Overload handling is the caller's: [`slip_to`](Self::slip_to) moves the clock (slow
/// policy), [`LatenessStats::record_repeat`] counts a deadline at which the previous frame was
/// shown again (live policy), [`resync`](Self::resync) re-anchors after a pause.
#[derive(Debug)]
pub struct Pacer {
    rate: Rational,
    origin_ns: Option<i64>,
    index: u64,
    margin: WakeMargin,
    stats: LatenessStats,
}

/// How long before a deadline a thread that sleeps then spins should wake up: the 90th
/// percentile of its last 64 oversleeps (wake-up time minus requested time) plus 20 µs, within
/// [`MIN_MARGIN_NS`]..[`MAX_MARGIN_NS`]; [`INITIAL_MARGIN_NS`] until 64 were seen. The
/// [`Pacer`] keeps one; a thread serving several clocks (a host's clock thread) keeps its own.
#[derive(Debug, Clone)]
pub struct WakeMargin {
    margin_ns: i64,
    /// Whether it learns from wake-ups (`false`: [`fixed`](Self::fixed)).
    adaptive: bool,
    /// Recent oversleeps, a ring; `wakes` counts all ever recorded.
    oversleeps: [i64; WAKE_WINDOW],
    wakes: usize,
}

impl Default for WakeMargin {
    fn default() -> Self {
        WakeMargin {
            margin_ns: INITIAL_MARGIN_NS,
            adaptive: true,
            oversleeps: [0; WAKE_WINDOW],
            wakes: 0,
        }
    }
}

impl WakeMargin {
    /// A margin that stays at `margin_ns` (at least 0) whatever the wake-ups (for
    /// measurements).
    pub fn fixed(margin_ns: i64) -> Self {
        WakeMargin {
            margin_ns: margin_ns.max(0),
            adaptive: false,
            ..WakeMargin::default()
        }
    }

    /// The margin now, ns.
    pub fn ns(&self) -> i64 {
        self.margin_ns
    }

    /// Records one observed oversleep and recomputes the margin once the window is full
    /// (until then the initial margin stands); a [`fixed`](Self::fixed) margin ignores it. A
    /// copy and a selection over 64 integers on the stack: well under a microsecond, no
    /// allocation.
    pub fn learn(&mut self, oversleep_ns: i64) {
        if !self.adaptive {
            return;
        }
        self.oversleeps[self.wakes % WAKE_WINDOW] = oversleep_ns;
        self.wakes += 1;
        if self.wakes >= WAKE_WINDOW {
            let mut sorted = self.oversleeps;
            let (_, &mut q, _) = sorted.select_nth_unstable(WAKE_RANK);
            self.margin_ns = (q + MARGIN_HEADROOM_NS).clamp(MIN_MARGIN_NS, MAX_MARGIN_NS);
        }
    }

    /// Waits until `deadline_ns` (`CLOCK_MONOTONIC`): sleeps with `clock_nanosleep`
    /// (`TIMER_ABSTIME`) to `deadline - margin`, learns the oversleep, spins the rest. Returns
    /// the lateness, `now - deadline` on return (never negative: it does not return early).
    pub fn wait_until(&mut self, deadline_ns: i64) -> i64 {
        let slept = |to| {
            sleep_until_ns(to);
            true
        };
        self.wait_until_with(deadline_ns, i64::MAX, slept)
            .expect("clock_nanosleep with TIMER_ABSTIME does not return early")
    }

    /// The sleep then spin of every pacing thread: sleeps with `sleep` to `deadline -
    /// min(margin, max_spin_ns)` (when that is still ahead), learns the oversleep, then spins
    /// to `deadline_ns`; returns the lateness then (`now - deadline`, never negative).
    ///
    /// `sleep(to)` sleeps until `to` (`CLOCK_MONOTONIC` ns) and says whether it slept the
    /// whole time: a thread that must also wake up for something else (a host's clock thread,
    /// unparked by a show's signal) returns `false` when woken early or not put to sleep at
    /// all; then nothing is learned, there is no spin, and the result is `None`.
    pub fn wait_until_with(
        &mut self,
        deadline_ns: i64,
        max_spin_ns: i64,
        sleep: impl FnOnce(i64) -> bool,
    ) -> Option<i64> {
        let sleep_to = deadline_ns - self.margin_ns.min(max_spin_ns);
        if sleep_to > now_ns() {
            if !sleep(sleep_to) {
                return None;
            }
            self.learn(now_ns() - sleep_to);
        }
        let mut now = now_ns();
        while now < deadline_ns {
            std::hint::spin_loop();
            now = now_ns();
        }
        Some(now - deadline_ns)
    }
}

impl Pacer {
    /// A pacer at `rate` frames per second (exact rational, e.g. `30000/1001`).
    pub fn new(rate: Rational) -> Result<Self> {
        if rate.num == 0 || rate.den == 0 || rate.period_ns() == 0 {
            return Err(Error::BadPeriod {
                period_ns: if rate.den == 0 { 0 } else { rate.period_ns() },
                rate: format!("{}/{}", rate.num, rate.den),
            });
        }
        Ok(Pacer {
            rate,
            origin_ns: None,
            index: 0,
            margin: WakeMargin::default(),
            stats: LatenessStats::default(),
        })
    }

    /// A pacer with a period given in nanoseconds.
    pub fn from_period_ns(period_ns: u64) -> Result<Self> {
        if period_ns == 0 || period_ns > u32::MAX as u64 {
            return Err(Error::BadPeriod {
                period_ns,
                rate: "-".into(),
            });
        }
        // period_ns ns per frame = 1e9/period_ns frames per second = 1_000_000_000 / period_ns.
        Self::new(Rational::new(1_000_000_000, period_ns as u32))
    }

    /// Uses a fixed sleep-to-spin margin instead of the adaptive one (for measurements).
    pub fn with_fixed_margin_ns(mut self, margin_ns: i64) -> Self {
        self.margin = WakeMargin::fixed(margin_ns);
        self
    }

    /// Uses `stats` (e.g. with another late threshold) for lateness records.
    pub fn with_stats(mut self, stats: LatenessStats) -> Self {
        self.stats = stats;
        self
    }

    /// The rate.
    pub fn rate(&self) -> Rational {
        self.rate
    }

    /// The nominal period in ns (rounded down; deadlines themselves are exact).
    pub fn period_ns(&self) -> u64 {
        self.rate.period_ns()
    }

    /// The current sleep-to-spin margin in ns.
    pub fn margin_ns(&self) -> i64 {
        self.margin.margin_ns
    }

    /// Lateness statistics of the deadlines released by [`wait_next`](Self::wait_next).
    pub fn stats(&self) -> &LatenessStats {
        &self.stats
    }

    /// Mutable statistics, e.g. to [`record_repeat`](LatenessStats::record_repeat).
    pub fn stats_mut(&mut self) -> &mut LatenessStats {
        &mut self.stats
    }

    /// Index of the next deadline [`wait_next`](Self::wait_next) will wait for.
    pub fn next_index(&self) -> u64 {
        self.index
    }

    /// Starts the clock: deadline 0 is `origin_ns`. Without this, the first
    /// [`wait_next`](Self::wait_next) starts it at its own call time (first frame at once).
    pub fn start_at(&mut self, origin_ns: i64) {
        self.origin_ns = Some(origin_ns);
        self.index = 0;
    }

    /// The deadline of index `index`, once started.
    pub fn deadline(&self, index: u64) -> Option<i64> {
        self.origin_ns.map(|o| o + self.rate.frame_time_ns(index))
    }

    /// The deadline of the next [`wait_next`](Self::wait_next), once started.
    pub fn next_deadline(&self) -> Option<i64> {
        self.deadline(self.index)
    }

    /// Re-anchors so that the deadline just released (index `next_index() - 1`) counts as
    /// released at `released_ns`; all later deadlines move by the same amount. This is the slow
    /// overload policy: when a frame came late, the clock slips instead of hurrying the next.
    pub fn slip_to(&mut self, released_ns: i64) {
        let last = self.index.saturating_sub(1);
        self.origin_ns = Some(released_ns - self.rate.frame_time_ns(last));
    }

    /// Re-anchors so that the next deadline is `at_ns` (after a pause: resume without a burst).
    pub fn resync(&mut self, at_ns: i64) {
        self.origin_ns = Some(at_ns - self.rate.frame_time_ns(self.index));
    }

    /// Skips deadlines that have already passed by more than one period, so a caller that fell
    /// behind (live policy) continues at the current deadline instead of releasing a burst.
    /// Returns how many deadlines were skipped; the caller counts them as repeated frames.
    pub fn skip_missed(&mut self, now: i64) -> u64 {
        let mut skipped = 0;
        while let Some(next) = self.deadline(self.index + 1) {
            if next > now {
                break;
            }
            self.index += 1;
            skipped += 1;
        }
        skipped
    }

    /// Waits until `deadline_ns` (`CLOCK_MONOTONIC`): sleeps to `deadline - margin`, spins the
    /// rest. Returns the lateness, `now - deadline` on return (never negative: it does not
    /// return early). Adapts the margin from the observed wake-up. Does not record statistics.
    pub fn wait_until(&mut self, deadline_ns: i64) -> i64 {
        self.margin.wait_until(deadline_ns)
    }

    /// Waits for the next deadline, records its lateness in [`stats`](Self::stats) and
    /// advances. Starts the clock at the call time if it was not started.
    pub fn wait_next(&mut self) -> Tick {
        let origin = *self.origin_ns.get_or_insert_with(now_ns);
        let deadline_ns = origin + self.rate.frame_time_ns(self.index);
        let lateness_ns = self.wait_until(deadline_ns);
        self.stats.record(lateness_ns);
        let tick = Tick {
            index: self.index,
            deadline_ns,
            released_ns: deadline_ns + lateness_ns,
            lateness_ns,
        };
        self.index += 1;
        tick
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::prepare_pacing_thread;

    #[test]
    fn bad_rates_are_refused_with_the_value() {
        let e = Pacer::new(Rational::new(0, 1)).unwrap_err();
        assert!(e.to_string().contains("0/1"), "{e}");
        let e = Pacer::from_period_ns(0).unwrap_err();
        assert!(e.to_string().contains("period 0 ns"), "{e}");
        assert_eq!(
            Pacer::from_period_ns(10_000_000).unwrap().period_ns(),
            10_000_000
        );
    }

    #[test]
    fn deadlines_are_exact_and_do_not_drift() {
        let mut p = Pacer::new(Rational::new(30000, 1001)).unwrap();
        p.start_at(1_000);
        assert_eq!(p.deadline(0), Some(1_000));
        assert_eq!(p.deadline(30000), Some(1_000 + 1001 * 1_000_000_000));
    }

    #[test]
    fn never_early_and_rarely_late() {
        let _setup = prepare_pacing_thread(false);
        // 200 frames at 500 fps = 0.4 s.
        let mut p = Pacer::new(Rational::new(500, 1)).unwrap();
        p.start_at(now_ns() + 1_000_000);
        let mut best = i64::MAX;
        for _ in 0..200 {
            let t = p.wait_next();
            assert!(t.lateness_ns >= 0, "released {} ns early", -t.lateness_ns);
            assert!(now_ns() >= t.deadline_ns);
            best = best.min(t.lateness_ns);
        }
        let s = p.stats().summary();
        assert_eq!(s.frames, 200);
        assert_eq!(s.early, 0);
        // A working pacer releases within a few µs of the deadline whenever it has its CPU; a
        // broken one (sleeping a period too long) is ~2 ms late every time. Judged by the best
        // frame, not the median: on a loaded machine (the suite beside two builds) the thread,
        // not real-time here, lost its CPU for most frames (median 23 ms once), never for all.
        assert!(best < 500_000, "the least late frame was {best} ns late");
        // Spread is measured by the pacing benchmark, not asserted here.
    }

    #[test]
    fn slip_and_resync_move_later_deadlines() {
        let mut p = Pacer::from_period_ns(1_000_000).unwrap();
        p.start_at(0);
        p.index = 5; // as if 5 deadlines were released
        p.slip_to(10_000_000); // deadline 4 was released at 10 ms instead of 4 ms
        assert_eq!(p.deadline(4), Some(10_000_000));
        assert_eq!(p.next_deadline(), Some(11_000_000));
        p.resync(50_000_000);
        assert_eq!(p.next_deadline(), Some(50_000_000));
    }

    #[test]
    fn skip_missed_lands_on_the_current_deadline() {
        let mut p = Pacer::from_period_ns(1_000_000).unwrap();
        p.start_at(0);
        // At 3.5 ms deadlines 0..=3 have passed: skip 0,1,2 and wait for 3 (the current one).
        assert_eq!(p.skip_missed(3_500_000), 3);
        assert_eq!(p.next_index(), 3);
        assert_eq!(p.skip_missed(3_500_000), 0);
    }

    #[test]
    fn margin_follows_the_usual_oversleep_not_the_rare_one() {
        let mut p = Pacer::from_period_ns(10_000_000).unwrap();
        for i in 0..WAKE_WINDOW {
            assert_eq!(p.margin_ns(), INITIAL_MARGIN_NS, "window not full yet");
            // Mostly 50 µs, with three 5 ms outliers (a CPU taken away).
            p.margin.learn(if i % 20 == 7 { 5_000_000 } else { 50_000 });
        }
        assert_eq!(p.margin_ns(), 50_000 + MARGIN_HEADROOM_NS);
        // A machine that always oversleeps 300 µs gets a margin that covers it.
        for _ in 0..WAKE_WINDOW {
            p.margin.learn(300_000);
        }
        assert_eq!(p.margin_ns(), 300_000 + MARGIN_HEADROOM_NS);
        for _ in 0..WAKE_WINDOW {
            p.margin.learn(0);
        }
        assert_eq!(p.margin_ns(), MIN_MARGIN_NS);
    }

    /// A sleep cut short (a host's clock thread unparked by a signal) neither spins nor
    /// teaches the margin anything; a whole one does, and the wait ends at the deadline.
    #[test]
    fn a_sleep_cut_short_returns_without_spinning_or_learning() {
        let mut m = WakeMargin::default();
        let deadline = now_ns() + 50_000_000;
        let mut asked = None;
        let r = m.wait_until_with(deadline, i64::MAX, |to| {
            asked = Some(to);
            false
        });
        assert_eq!(r, None);
        assert_eq!(asked, Some(deadline - INITIAL_MARGIN_NS));
        assert!(now_ns() < deadline, "no spin to the deadline");
        assert_eq!(m.wakes, 0, "nothing learned");

        let deadline = now_ns() + 2_000_000;
        let r = m.wait_until_with(deadline, 100_000, |to| {
            assert_eq!(to, deadline - 100_000, "the spin is capped");
            sleep_until_ns(to);
            true
        });
        assert!(r.is_some_and(|late| late >= 0) && now_ns() >= deadline);
        assert_eq!(m.wakes, 1);

        // A fixed margin never learns.
        let mut f = WakeMargin::fixed(70_000);
        for _ in 0..WAKE_WINDOW {
            f.learn(900_000);
        }
        assert_eq!(f.ns(), 70_000);
    }

    #[test]
    fn a_late_caller_is_released_at_once_and_counted_late() {
        let mut p = Pacer::from_period_ns(1_000_000).unwrap();
        p.start_at(now_ns() - 5_000_000);
        let t = p.wait_next();
        assert!(t.lateness_ns >= 5_000_000, "{t:?}");
        assert_eq!(p.stats().late(), 1);
    }
}
