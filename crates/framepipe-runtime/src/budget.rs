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
//!   master sink) plus a quarter of it plus [`LATENCY_MARGIN_NS`]: the margin covers what that
//!   latency does not count (the worker's wake-up to begin the frame, the output thread's own)
//!   and the quarter covers a chain whose time grows;
//!
//! The master output lets frames begin at their time also while it waits for a frame's
//! deadline (it wakes up for it), so a budget longer than a period needs no rounding. (It
//! used to let them begin only at releases and while waiting for a frame, which made a budget
//! between two multiples of the period act as the lower one: measured, `--latency 40` at 60
//! fps put frames 33.3 ms ahead; the default was then rounded up to whole periods.)
//!
//! No half-period margin any more: it was a third of the control latency of a light chain
//! (16.8 of ~48 ms p95 at 30 fps). Its cost: on a machine that starves the workers, the old
//! 17 ms at 30 fps absorbed more (docs/REALTIME.md has both builds' late frames).

/// Added to the graph's measured latency in the default budget: 2 ms. With 1 ms (or a budget
/// of the latency plus 0.5 or 1 ms) a light chain at 60 fps had several times the late frames
/// of `--latency 2` in the same runs on the 2-core test machine.
pub(crate) const LATENCY_MARGIN_NS: u64 = 2_000_000;

/// The default budget (ns) for a graph whose measured latency is `latency_ns` (see the module
/// doc): `latency * 5/4 + 2 ms`, whatever the period. Saturates instead of overflowing.
pub(crate) fn default_budget(latency_ns: u64) -> u64 {
    latency_ns
        .saturating_add(latency_ns / 4)
        .saturating_add(LATENCY_MARGIN_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A light chain (0.2 ms): the budget is its latency, a quarter and 2 ms, not half a
    /// period (the goal: a command shows within a period plus the chain's time).
    #[test]
    fn a_light_chain_begins_its_latency_and_the_margin_ahead() {
        assert_eq!(default_budget(200_000), 250_000 + LATENCY_MARGIN_NS);
        assert_eq!(default_budget(0), LATENCY_MARGIN_NS);
    }

    /// Within a period the budget grows with the latency: a quarter of it on top.
    #[test]
    fn within_a_period_the_budget_is_the_latency_a_quarter_and_the_margin() {
        assert_eq!(default_budget(8 * MS), 12 * MS);
        assert_eq!(default_budget(20 * MS), 27 * MS);
    }

    /// Beyond a period too: no rounding to whole periods (frames begin at their time while
    /// the output waits for a deadline).
    #[test]
    fn beyond_a_period_the_budget_is_still_the_latency_a_quarter_and_the_margin() {
        // 720p glow -> sobel -> vignette at 30 fps, ~100 ms.
        assert_eq!(default_budget(100 * MS), 127 * MS);
        assert_eq!(default_budget(32 * MS), 42 * MS);
        assert_eq!(default_budget(40 * MS), 52 * MS);
    }

    #[test]
    fn the_budget_saturates_instead_of_overflowing() {
        assert_eq!(default_budget(u64::MAX), u64::MAX);
        assert_eq!(default_budget(u64::MAX - 1), u64::MAX);
    }
}
