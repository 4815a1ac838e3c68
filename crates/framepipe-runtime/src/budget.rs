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
//! * when that is more than a period, a whole number of periods, rounded up from the latency
//!   plus the margin. The master output thread lets frames begin when it releases one and
//!   otherwise only while it waits for a frame, not while it sleeps until a deadline; with
//!   such a budget the next frame is ready when a frame is released, so frames begin at
//!   releases and a budget between two multiples of the period would act as the lower one
//!   (measured: `--latency 40` at 60 fps put frames 33.3 ms ahead), which may be less than the
//!   graph's latency. Rounded up, frames begin at least the latency plus the margin ahead.
//!
//! No half-period margin any more: it was a third of the control latency of a light chain
//! (16.8 of ~48 ms p95 at 30 fps). Its cost: on a machine that starves the workers, the old
//! 17 ms at 30 fps absorbed more (docs/REALTIME.md has both builds' late frames).

/// Added to the graph's measured latency in the default budget: 2 ms. With 1 ms (or a budget
/// of the latency plus 0.5 or 1 ms) a light chain at 60 fps had several times the late frames
/// of `--latency 2` in the same runs on the 2-core test machine.
pub(crate) const LATENCY_MARGIN_NS: u64 = 2_000_000;

/// The default budget (ns) for a graph whose measured latency is `latency_ns`, at a frame
/// period of `period_ns` (see the module doc): `latency * 5/4 + 2 ms` when that fits in a
/// period, else `latency + 2 ms` rounded up to whole periods. Saturates instead of
/// overflowing.
pub(crate) fn default_budget(latency_ns: u64, period_ns: u64) -> u64 {
    let period = period_ns.max(1);
    let needed = latency_ns
        .saturating_add(latency_ns / 4)
        .saturating_add(LATENCY_MARGIN_NS);
    if needed <= period {
        return needed;
    }
    latency_ns
        .saturating_add(LATENCY_MARGIN_NS)
        .div_ceil(period)
        .saturating_mul(period)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const P30: u64 = 1_000_000_000 / 30;
    const P60: u64 = 1_000_000_000 / 60;

    /// A light chain (0.2 ms): the budget is its latency, a quarter and 2 ms, not half a
    /// period (the goal: a command shows within a period plus the chain's time).
    #[test]
    fn a_light_chain_begins_its_latency_and_the_margin_ahead() {
        for period in [P30, P60] {
            assert_eq!(default_budget(200_000, period), 250_000 + LATENCY_MARGIN_NS);
        }
        assert_eq!(default_budget(0, P60), LATENCY_MARGIN_NS);
    }

    /// Within a period the budget grows with the latency: a quarter of it on top.
    #[test]
    fn within_a_period_the_budget_is_the_latency_a_quarter_and_the_margin() {
        assert_eq!(default_budget(8 * MS, P30), 12 * MS);
        assert_eq!(default_budget(20 * MS, P30), 27 * MS);
    }

    /// Beyond a period: whole periods (frames begin at releases), never fewer than the
    /// latency plus the margin, at most one period more than that.
    #[test]
    fn beyond_a_period_the_budget_is_whole_periods_covering_the_latency() {
        for period in [P30, P60] {
            for latency in [
                14 * MS,
                30 * MS,
                35 * MS,
                70 * MS,
                100 * MS,
                131 * MS,
                400 * MS,
            ] {
                let b = default_budget(latency, period);
                if latency + latency / 4 + LATENCY_MARGIN_NS <= period {
                    continue;
                }
                assert_eq!(b % period, 0, "{latency} ns at {period} ns: {b}");
                assert!(
                    b >= latency + LATENCY_MARGIN_NS,
                    "{latency} at {period}: {b}"
                );
                assert!(
                    b < latency + LATENCY_MARGIN_NS + period,
                    "{latency} at {period}: {b}"
                );
            }
        }
        // 720p glow -> sobel -> vignette at 30 fps, ~100 ms: four periods, as before.
        assert_eq!(default_budget(100 * MS, P30), 4 * P30);
        // 30 ms at 30 fps: one period covers it and the margin; 32 ms: two periods (the old
        // budget, 32 * 5/4 + half a period = 56.7 ms, began frames one period ahead: 1.3 ms
        // more than the latency).
        assert_eq!(default_budget(30 * MS, P30), P30);
        assert_eq!(default_budget(32 * MS, P30), 2 * P30);
    }

    #[test]
    fn the_budget_saturates_instead_of_overflowing() {
        assert_eq!(default_budget(u64::MAX, P30), u64::MAX);
        assert_eq!(default_budget(u64::MAX - 1, P60), u64::MAX);
        // No period (cannot happen in a paced run): counted as 1 ns, no division by zero.
        assert_eq!(default_budget(5 * MS, 0), 5 * MS + LATENCY_MARGIN_NS);
    }
}
