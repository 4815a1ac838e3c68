//! The latency gate of a paced master output ([`Gate`]): frames begin just in time, a latency
//! budget before their deadline (`Options::latency_ns`, else the default budget below, from
//! the graph's latency over the last frames, [`LatencyWindow`]). The master raises the
//! scheduler's begin limit to every frame whose deadline is within the budget
//! ([`Gate::let_begin`], under the scheduler lock it takes anyway) and wakes up when the next
//! one may begin ([`Gate::begin_at`]); it keeps the limit's last raises to say when a late
//! frame was let begin.
//!
//! ## The default budget
//!
//! The default latency budget of a paced run: how long before its deadline a frame begins
//! (samples its parameters), when `--latency` does not say (see docs/REALTIME.md, "Latency of
//! control").
//!
//! A command reaches the output within the wait for the next frame to begin (up to a period)
//! plus this budget, so every millisecond of margin is a millisecond of control latency; a
//! budget shorter than the graph's latency makes frames late. The policy, measured with
//! `scripts/bench-control` (issue #9):
//!
//! * the graph's measured latency (the slowest of the last frames, beginning to ready at the
//!   master sink) plus a quarter of it (a chain whose time grows) plus an **adaptive margin**
//!   ([`Margin`]): what that latency does not count (the output thread's and the worker's
//!   wake-up to begin the frame, a CPU taken away from a worker for a while) is read off the
//!   frames themselves, as their *slack* (deadline minus ready at the sink). A frame whose
//!   slack is under half the margin grows the margin to 1.5 times what the delay took;
//!   otherwise the margin decays towards [`MIN_MARGIN_NS`] with a time constant of
//!   [`MARGIN_DECAY_NS`]. So a quiet machine gets a fraction of a millisecond (a fader answers
//!   sooner) and a noisy spell (a virtual machine's host taking a CPU away for milliseconds)
//!   gets what it showed, for about a second after each delay.
//!
//! The master output lets frames begin at their time also while it waits for a frame's
//! deadline (it wakes up for it), so a budget longer than a period needs no rounding (letting
//! them begin only at releases and while waiting for a frame makes a budget between two
//! multiples of the period act as the lower one: measured, `--latency 40` at 60 fps put
//! frames 33.3 ms ahead).
//!
//! Why an adaptive margin: half a period is a third of the control latency of a light chain
//! (16.8 of ~48 ms p95 at 30 fps), though on a machine that starves the workers it absorbs
//! more (docs/REALTIME.md has both policies' late frames); a fixed 2 ms keeps a light chain at
//! 60 fps at 1.1x the goal on a quiet machine (the goal leaves ~0.8 ms for the whole
//! budget there), and a noisy spell longer than 2 ms makes late frames every time it comes
//! back.

use std::sync::atomic::Ordering;

use framepipe_clock::now_ns;

use crate::sched::Shared;

/// The adaptive margin never goes below this: 0.25 ms, about the output thread's timer
/// oversleep at the 99th percentile plus a worker's wake-up on the 2-core test machine
/// (`framepipe doctor`: 172 µs and 23 µs).
pub(crate) const MIN_MARGIN_NS: u64 = 250_000;

/// The adaptive margin's starting value, as the fixed margin was before: 2 ms. (With a fixed 1
/// ms, or a budget of the latency plus 0.5 or 1 ms, a light chain at 60 fps had several times
/// the late frames of `--latency 2` in the same runs on the 2-core test machine: hence start
/// careful and let the frames show what is safe.)
pub(crate) const START_MARGIN_NS: u64 = 2_000_000;

/// The adaptive margin's floor for a show in a host (several shows in one process), instead
/// of [`MIN_MARGIN_NS`]: 5 ms. Many shows begin their frames in groups, and a group's frames,
/// let begin in time, waited 1.5 to 7.6 ms for a worker now and then on the 2-core virtual
/// machine (a halted vCPU's wake-up: `--stats` `late_frames` `allowed_us` / `begun_us`), so a
/// margin decaying to 0.25 ms made a late group each time (P8, `scripts/bench-shows`: 0.013 to
/// 0.157 % late by default against 0.013 to 0.022 % with a fixed `--latency 5`, in the same
/// minutes). Its cost is 5 ms of control latency a show in a host; `--latency` still decides.
pub(crate) const HOST_MIN_MARGIN_NS: u64 = 5_000_000;

/// The adaptive margin never grows beyond half a period, nor beyond this: 20 ms.
pub(crate) const MAX_MARGIN_NS: u64 = 20_000_000;

/// How fast the adaptive margin decays towards its floor ([`MIN_MARGIN_NS`], in a host
/// [`HOST_MIN_MARGIN_NS`]) while frames are ready with room to spare: the gap to the floor
/// shrinks by a factor e every second (halves in 0.7 s).
/// Measured with `scripts/bench-control` (light chain, 30 and 60 fps, two rounds each, on the
/// 2-core machine): with 5 s and a growth to twice the delay, one delay of a few ms every ten
/// seconds or so (this virtual machine's, even when quiet) kept the margin at 2–8 ms most of the
/// time: p95 34.3 / 22.1 ms against the fixed 2 ms's 35.2 / 19.0; with 1 s and 1.5 times,
/// 30.9 / 17.1 ms (goal 33.6 / 16.9), late frames 2 and 2 against 0 and 2 of ~720 / ~1,440.
pub(crate) const MARGIN_DECAY_NS: u64 = 1_000_000_000;

/// The default budget (ns) for a graph whose measured latency is `latency_ns`, with the
/// adaptive margin `margin_ns` (see the module doc): `latency * 5/4 + margin`, whatever the
/// period. Saturates instead of overflowing.
pub(crate) fn default_budget(latency_ns: u64, margin_ns: u64) -> u64 {
    latency_ns
        .saturating_add(latency_ns / 4)
        .saturating_add(margin_ns)
}

/// The adaptive margin of the default budget (see the module doc), fed with every paced
/// frame's slack by the master output.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Margin {
    ns: u64,
    /// What it decays towards: [`MIN_MARGIN_NS`], or a host's [`HOST_MIN_MARGIN_NS`].
    min_ns: u64,
    max_ns: u64,
    /// The largest it has been (for `--stats`).
    peak_ns: u64,
}

impl Margin {
    /// The margin of a run whose frame period is `period_ns` (its cap is half of it).
    pub(crate) fn new(period_ns: u64) -> Self {
        Self::with_floor(period_ns, MIN_MARGIN_NS)
    }

    /// The margin of a show whose frame period is `period_ns`, never below `floor_ns` (nor
    /// above half the period or [`MAX_MARGIN_NS`], which win), starting at the larger of
    /// [`START_MARGIN_NS`] and the floor.
    pub(crate) fn with_floor(period_ns: u64, floor_ns: u64) -> Self {
        let max_ns = (period_ns / 2).clamp(MIN_MARGIN_NS, MAX_MARGIN_NS);
        let min_ns = floor_ns.clamp(MIN_MARGIN_NS, max_ns);
        let ns = START_MARGIN_NS.max(min_ns).min(max_ns);
        Margin {
            ns,
            min_ns,
            max_ns,
            peak_ns: ns,
        }
    }

    /// The margin now (ns).
    pub(crate) fn ns(&self) -> u64 {
        self.ns
    }

    /// The largest the margin has been (ns).
    pub(crate) fn peak_ns(&self) -> u64 {
        self.peak_ns
    }

    /// A frame was ready at the sink `slack_ns` before its deadline (negative: after it),
    /// `elapsed_ns` after the previous frame observed. Under half the margin left: what the
    /// delay took (the margin minus the slack) was more than half of it, so the margin becomes
    /// 1.5 times that. Otherwise it decays towards the minimum.
    pub(crate) fn observe(&mut self, slack_ns: i64, elapsed_ns: u64) {
        let half = (self.ns / 2) as i64;
        if slack_ns < half {
            let took = (self.ns as i64).saturating_sub(slack_ns).max(0) as u64;
            self.ns = (took.saturating_mul(3) / 2).clamp(self.ns, self.max_ns);
            self.peak_ns = self.peak_ns.max(self.ns);
        } else {
            let above = self.ns.saturating_sub(self.min_ns);
            let step = (above as u128 * elapsed_ns.min(MARGIN_DECAY_NS) as u128
                / MARGIN_DECAY_NS as u128) as u64;
            // At least 1 ns while above the minimum, so that it gets there.
            self.ns -= step.max(u64::from(above > 0)).min(above);
        }
    }
}

/// The last frames' latencies (beginning to ready at the master sink), without allocating.
///
/// The warm-up's frames (begun before the first release, when nothing is held back: every
/// frame in flight begun at once, each waiting behind the others) took far longer than a frame
/// held back does: counted, they kept the budget at several periods for the next 32 frames
/// (3.2 s at 10 fps; measured with `scripts/bench-control` on the 720p chain: commands waited
/// up to 3.4 periods for their frame then). So once [`HELD_ENOUGH`] frames begun held back
/// have come, the window forgets the warm-up's.
#[derive(Default)]
struct LatencyWindow {
    ns: [i64; 32],
    n: usize,
    /// Frames pushed that began held back (after the warm-up).
    held_back: usize,
}

/// Frames begun held back after which the warm-up's latencies no longer count.
const HELD_ENOUGH: usize = 4;

impl LatencyWindow {
    /// A frame's latency; `held_back`: it began after the warm-up (frames come in order: the
    /// warm-up's first).
    fn push(&mut self, ns: i64, held_back: bool) {
        self.ns[self.n % self.ns.len()] = ns.max(0);
        self.n += 1;
        self.held_back += usize::from(held_back);
    }

    /// The slowest of the last frames (of those begun held back, once there are enough).
    fn max(&self) -> Option<i64> {
        let mut k = self.n.min(self.ns.len());
        if self.held_back >= HELD_ENOUGH {
            k = k.min(self.held_back);
        }
        (self.n - k..self.n)
            .map(|i| self.ns[i % self.ns.len()])
            .max()
    }
}

/// How long before its deadline a frame begins, in a paced run: the asked latency, or by
/// default the measured one with a margin (see [`default_budget`]: a quarter
/// of it and the adaptive margin). `None` (no limit) until a latency is known.
fn latency_budget(asked_ns: u64, window: &LatencyWindow, margin: &Margin) -> Option<u64> {
    if asked_ns > 0 {
        return Some(asked_ns);
    }
    let max = window.max()? as u64;
    Some(default_budget(max, margin.ns()))
}

/// The latency gate of a paced master output (see the module doc).
pub(super) struct Gate {
    /// The asked budget (`Options::latency_ns`; 0: the default budget).
    asked_ns: u64,
    period_ns: u64,
    window: LatencyWindow,
    /// When the first frame was released (frames begun since were held back by the budget).
    opened_ns: Option<i64>,
    /// The default budget's adaptive margin, fed with each frame's slack.
    margin: Margin,
    /// When the margin last saw a frame (its deadline, ns).
    margin_seen: Option<i64>,
    budget: Option<u64>,
    /// When the next frame may begin (the master wakes up then to let it); set where the
    /// output takes the lock for the next frame.
    begin_at: Option<i64>,
    /// Added to the latency budget when letting frames begin: how late the driver may wake up
    /// for a frame's beginning (a host rounds such wake-ups up to a grid).
    begin_slack_ns: u64,
    /// The begin limit's last raises: (limit, when, the budget then), a ring
    /// ([`ALLOWED_KEPT`]).
    allowed: [Raise; ALLOWED_KEPT],
    allowed_n: usize,
}

impl Gate {
    /// The gate of a master paced at `period_ns`, with the asked budget `asked_ns` (0: the
    /// default budget).
    pub(super) fn new(period_ns: u64, asked_ns: u64) -> Self {
        Gate {
            asked_ns,
            period_ns,
            window: LatencyWindow::default(),
            opened_ns: None,
            margin: Margin::new(period_ns),
            margin_seen: None,
            budget: None,
            begin_at: None,
            begin_slack_ns: 0,
            allowed: [(0, 0, 0); ALLOWED_KEPT],
            allowed_n: 0,
        }
    }

    /// The adaptive margin never goes below `floor_ns` (see [`HOST_MIN_MARGIN_NS`]).
    pub(super) fn set_margin_floor(&mut self, floor_ns: u64) {
        self.margin = Margin::with_floor(self.period_ns, floor_ns);
    }

    /// Frames begin `slack_ns` earlier than the budget says.
    pub(super) fn set_begin_slack(&mut self, slack_ns: u64) {
        self.begin_slack_ns = slack_ns;
    }

    /// When the next frame may begin (`None`: no limit to raise, or not known yet).
    pub(super) fn begin_at(&self) -> Option<i64> {
        self.begin_at
    }

    /// The latency budget now (`None`: no limit until a latency is known).
    pub(super) fn budget(&self) -> Option<u64> {
        self.budget
    }

    /// The graph's latency now: the slowest of the last frames (ns).
    pub(super) fn frame_latency_ns(&self) -> Option<i64> {
        self.window.max()
    }

    /// The default budget's adaptive margin.
    pub(super) fn margin(&self) -> &Margin {
        &self.margin
    }

    /// A frame taken at the master sink (`begun_ns`, `ready_ns`: when it began and was ready
    /// there): its latency joins the window, and the budget follows.
    pub(super) fn taken(&mut self, shared: &Shared, begun_ns: i64, ready_ns: i64) {
        let held_back = self.opened_ns.is_some_and(|t| begun_ns >= t);
        self.window.push(ready_ns - begun_ns, held_back);
        self.budget = latency_budget(self.asked_ns, &self.window, &self.margin);
        shared
            .counters
            .latency_budget_us
            .store(self.budget.unwrap_or(0) / 1000, Ordering::Relaxed);
    }

    /// A frame with deadline `deadline` was ready at `ready_ns`, once frames are held back:
    /// its slack feeds the default budget's margin (not an asked budget's).
    pub(super) fn observe_slack(&mut self, shared: &Shared, deadline: i64, ready_ns: i64) {
        if self.asked_ns != 0 {
            return;
        }
        // At most two periods: a pause is not a quiet spell.
        let elapsed = self.margin_seen.map_or(0, |t| {
            ((deadline - t).max(0) as u64).min(2 * self.period_ns)
        });
        self.margin.observe(deadline - ready_ns, elapsed);
        self.margin_seen = Some(deadline);
        shared
            .counters
            .latency_margin_us
            .store(self.margin.ns() / 1000, Ordering::Relaxed);
    }

    /// A frame was released: the first one opens the gate (frames begun from then on were
    /// held back by the budget).
    pub(super) fn released(&mut self) {
        if self.opened_ns.is_none() {
            self.opened_ns = Some(now_ns());
        }
    }

    /// Lets begin every frame whose deadline is within the budget (raising the scheduler's
    /// begin limit, under its lock `st`) and notes when the next one may (`begin_at`).
    /// `released`: the last frame released; `deadline`: the next one's deadline.
    pub(super) fn let_begin(
        &mut self,
        shared: &Shared,
        st: &mut crate::sched::Locked<'_>,
        now: i64,
        released: Option<u64>,
        deadline: Option<i64>,
    ) {
        self.begin_at = None;
        if let (Some(seq), Some(b), Some(d)) = (released, self.budget, deadline) {
            let budget = b;
            // A host rounds this output's wake-ups up to its grid: begin that much earlier.
            let b = b.saturating_add(self.begin_slack_ns);
            let limit = begin_limit(seq, d, self.period_ns, b, now);
            if limit > st.begin_limit() || st.begin_limit() == u64::MAX {
                st.allow_begin_until(limit);
                st.after_change(shared);
                self.allowed[self.allowed_n % ALLOWED_KEPT] = (limit, now, budget);
                self.allowed_n += 1;
            }
            self.begin_at = Some(next_begin_ns(seq, d, self.period_ns, b, st.begin_limit()));
        }
    }

    /// When frame `seq` was let begin and the budget then (`None`: not known).
    pub(super) fn allowed_at(&self, seq: u64) -> Option<(i64, u64)> {
        allowed_at(&self.allowed, self.allowed_n, seq)
    }
}

/// When the master output last raised the begin limit: (the limit, when, the budget then),
/// the latest [`ALLOWED_KEPT`], to say when a late frame was let begin.
const ALLOWED_KEPT: usize = 8;

/// One raise of the begin limit: (the limit, when, the budget then).
type Raise = (u64, i64, u64);

/// When frame `seq` was let begin and the budget then, from the ring `allowed` of the begin
/// limit's last raises (`n` raises so far, the latest [`ALLOWED_KEPT`] kept): the earliest kept
/// raise to `seq` or beyond, if the raise before it (kept too) was below `seq`.
fn allowed_at(allowed: &[Raise; ALLOWED_KEPT], n: usize, seq: u64) -> Option<(i64, u64)> {
    let k = n.min(ALLOWED_KEPT);
    let mut below = false;
    for i in n - k..n {
        let (limit, at, budget) = allowed[i % ALLOWED_KEPT];
        if limit >= seq {
            return below.then_some((at, budget));
        }
        below = true;
    }
    None
}

/// The last frame that may have begun at `now`: every frame whose deadline is at most `budget`
/// away. `released` is the last frame released, `d_next` the next one's deadline.
fn begin_limit(released: u64, d_next: i64, period: u64, budget: u64, now: i64) -> u64 {
    let lead = now.saturating_add(budget as i64) - d_next;
    if lead < 0 {
        released
    } else {
        released + 1 + lead as u64 / period.max(1)
    }
}

/// When the frame after `limit` may begin (see [`begin_limit`]).
fn next_begin_ns(released: u64, d_next: i64, period: u64, budget: u64, limit: u64) -> i64 {
    let frames = limit.saturating_sub(released) as i64;
    d_next + frames.saturating_mul(period as i64) - budget as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A light chain (0.2 ms): the budget is its latency, a quarter and the margin, not half a
    /// period (the goal: a command shows within a period plus the chain's time).
    #[test]
    fn a_light_chain_begins_its_latency_and_the_margin_ahead() {
        assert_eq!(
            default_budget(200_000, MIN_MARGIN_NS),
            250_000 + MIN_MARGIN_NS
        );
        assert_eq!(default_budget(0, START_MARGIN_NS), START_MARGIN_NS);
    }

    /// Within a period the budget grows with the latency: a quarter of it on top.
    #[test]
    fn within_a_period_the_budget_is_the_latency_a_quarter_and_the_margin() {
        assert_eq!(default_budget(8 * MS, 2 * MS), 12 * MS);
        assert_eq!(default_budget(20 * MS, 2 * MS), 27 * MS);
    }

    /// Beyond a period too: no rounding to whole periods (frames begin at their time while
    /// the output waits for a deadline).
    #[test]
    fn beyond_a_period_the_budget_is_still_the_latency_a_quarter_and_the_margin() {
        // 720p glow -> sobel -> vignette at 30 fps, ~100 ms.
        assert_eq!(default_budget(100 * MS, 2 * MS), 127 * MS);
        assert_eq!(default_budget(32 * MS, 2 * MS), 42 * MS);
        assert_eq!(default_budget(40 * MS, 2 * MS), 52 * MS);
    }

    #[test]
    fn the_budget_saturates_instead_of_overflowing() {
        assert_eq!(default_budget(u64::MAX, 0), u64::MAX);
        assert_eq!(default_budget(u64::MAX - 1, 2 * MS), u64::MAX);
    }

    const P30: u64 = 33_333_333;

    /// Frames ready with room to spare: the margin falls from its start towards the minimum,
    /// by a factor e in a second, and reaches it.
    #[test]
    fn the_margin_decays_to_its_minimum_while_frames_have_room() {
        let mut m = Margin::new(P30);
        assert_eq!(m.ns(), START_MARGIN_NS);
        for _ in 0..30 {
            m.observe(10 * MS as i64, P30);
        }
        // 1 s at 30 fps: the gap to the minimum is about 1/e of what it was.
        let gap = (START_MARGIN_NS - MIN_MARGIN_NS) as f64;
        let left = (m.ns() - MIN_MARGIN_NS) as f64 / gap;
        assert!((0.33..0.40).contains(&left), "{left}");
        for _ in 0..30 * 120 {
            m.observe(10 * MS as i64, P30);
        }
        assert_eq!(m.ns(), MIN_MARGIN_NS);
        assert_eq!(m.peak_ns(), START_MARGIN_NS);
    }

    /// A frame ready with less than half the margin to spare grows it to 1.5 times what the
    /// delay took; a late frame (negative slack) likewise; never beyond half a period.
    #[test]
    fn a_frame_nearly_late_grows_the_margin_to_one_and_a_half_times_its_delay() {
        let mut m = Margin::new(P30);
        m.observe(START_MARGIN_NS as i64 / 2 + 1, P30);
        assert!(m.ns() < START_MARGIN_NS, "room to spare: decays");
        let before = m.ns();
        // 0.4 ms left of the margin: the delay took margin - 0.4 ms.
        m.observe(400_000, P30);
        assert_eq!(m.ns(), 3 * (before - 400_000) / 2);
        // Late by 3 ms: the delay took the margin and 3 ms.
        let before = m.ns();
        m.observe(-3 * MS as i64, P30);
        assert_eq!(m.ns(), 3 * (before + 3 * MS) / 2);
        assert_eq!(m.peak_ns(), m.ns());
        // A frame 100 ms late: capped at half a period.
        m.observe(-100 * MS as i64, P30);
        assert_eq!(m.ns(), P30 / 2);
        // And at 20 ms whatever the period.
        let mut slow = Margin::new(1_000 * MS);
        slow.observe(-100 * MS as i64, 1_000 * MS);
        assert_eq!(slow.ns(), MAX_MARGIN_NS);
    }

    /// A short period starts below 2 ms (half a period at 1000 fps), and never below the
    /// minimum.
    #[test]
    fn the_margin_fits_short_periods() {
        assert_eq!(Margin::new(1_000_000).ns(), 500_000);
        assert_eq!(Margin::new(100_000).ns(), MIN_MARGIN_NS);
    }

    /// A host's floor: the margin starts there and decays to it, not below; it still grows
    /// above it, and half a period still caps it (a 1000 fps show in a host).
    #[test]
    fn a_hosts_margin_decays_to_its_floor_only() {
        let mut m = Margin::with_floor(40 * MS, HOST_MIN_MARGIN_NS);
        assert_eq!(m.ns(), HOST_MIN_MARGIN_NS);
        for _ in 0..25 * 60 {
            m.observe(30 * MS as i64, 40 * MS);
        }
        assert_eq!(m.ns(), HOST_MIN_MARGIN_NS);
        m.observe(-2 * MS as i64, 40 * MS);
        assert_eq!(m.ns(), 3 * (HOST_MIN_MARGIN_NS + 2 * MS) / 2);
        for _ in 0..25 * 60 {
            m.observe(30 * MS as i64, 40 * MS);
        }
        assert_eq!(m.ns(), HOST_MIN_MARGIN_NS);
        assert_eq!(Margin::with_floor(MS, HOST_MIN_MARGIN_NS).ns(), MS / 2);
    }

    /// The default budget is the slowest recent frame's latency, a quarter, and the adaptive
    /// margin as it is now (grown by a late frame); `--latency` replaces all of it.
    #[test]
    fn the_default_budget_carries_the_adaptive_margin() {
        const MS: u64 = 1_000_000;
        let mut window = LatencyWindow::default();
        let mut margin = Margin::new(33_333_333);
        assert_eq!(latency_budget(0, &window, &margin), None, "no latency yet");
        window.push(4 * MS as i64, true);
        assert_eq!(latency_budget(0, &window, &margin), Some(5 * MS + 2 * MS));
        // A frame 6 ms late: the margin grows to 1.5 x (2 + 6) ms, and the budget with it.
        margin.observe(-6 * MS as i64, 33_333_333);
        assert_eq!(margin.ns(), 12 * MS);
        assert_eq!(latency_budget(0, &window, &margin), Some(5 * MS + 12 * MS));
        assert_eq!(latency_budget(9 * MS, &window, &margin), Some(9 * MS));
    }

    /// The warm-up's frames count until enough frames begun held back have come; then only
    /// those do, the slowest of the last 32 of them.
    #[test]
    fn the_latency_window_forgets_the_warm_up_once_frames_are_held_back() {
        const MS: i64 = 1_000_000;
        let mut window = LatencyWindow::default();
        assert_eq!(window.max(), None);
        for k in 0..6 {
            // Frames begun at once: each waits behind the ones before.
            window.push((50 + 40 * k) * MS, false);
        }
        assert_eq!(window.max(), Some(250 * MS));
        for k in 0..HELD_ENOUGH as i64 {
            assert_eq!(window.max(), Some(250 * MS), "after {k} held back");
            window.push((55 + k) * MS, true);
        }
        assert_eq!(window.max(), Some(58 * MS));
        for _ in 0..40 {
            window.push(60 * MS, true);
        }
        window.push(70 * MS, true);
        assert_eq!(window.max(), Some(70 * MS));
        for _ in 0..31 {
            window.push(60 * MS, true);
        }
        assert_eq!(window.max(), Some(70 * MS), "still one of the last 32");
        window.push(60 * MS, true);
        assert_eq!(window.max(), Some(60 * MS));
    }

    /// A late frame's "let begin" time is the raise of the begin limit that first reached it,
    /// known only when the raise before it (below it) is kept too.
    #[test]
    fn a_frame_is_let_begin_by_the_first_raise_that_reaches_it() {
        let mut allowed = [(0, 0, 0); ALLOWED_KEPT];
        let raises = [(5u64, 100i64, 7u64), (6, 200, 8), (8, 300, 9), (9, 400, 10)];
        for (k, r) in raises.iter().enumerate() {
            allowed[k] = *r;
        }
        let at = |seq| allowed_at(&allowed, raises.len(), seq);
        assert_eq!(at(5), None, "the raise before it is not kept");
        assert_eq!(at(6), Some((200, 8)));
        assert_eq!(at(7), Some((300, 9)));
        assert_eq!(at(8), Some((300, 9)));
        assert_eq!(at(9), Some((400, 10)));
        assert_eq!(at(10), None, "not let begin yet");
    }
}
