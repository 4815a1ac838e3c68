//! The frame clock's side of a paced output: deadlines on a host's grid, and (the master) the
//! begin limit that lets frames begin just in time, with a ring of its last raises (to say
//! when a late frame was let begin).

use super::Output;
use crate::sched::Shared;

/// When the master output last raised the begin limit: (the limit, when, the budget then),
/// the latest [`ALLOWED_KEPT`], to say when a late frame was let begin.
pub(super) const ALLOWED_KEPT: usize = 8;

/// One raise of the begin limit: (the limit, when, the budget then).
pub(super) type Raise = (u64, i64, u64);

/// When frame `seq` was let begin and the budget then, from the ring `allowed` of the begin
/// limit's last raises (`n` raises so far, the latest [`ALLOWED_KEPT`] kept): the earliest kept
/// raise to `seq` or beyond, if the raise before it (kept too) was below `seq`.
pub(super) fn allowed_at(
    allowed: &[Raise; ALLOWED_KEPT],
    n: usize,
    seq: u64,
) -> Option<(i64, u64)> {
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

/// The first time at or after `t` on the grid `anchor + phase + k * period` (`t` itself without
/// a grid).
pub(super) fn on_grid(grid: Option<(i64, i64)>, period_ns: u64, t: i64) -> i64 {
    match grid {
        None => t,
        Some((anchor, phase)) => {
            let first = anchor + phase;
            let period = period_ns.max(1) as i64;
            first + ((t - first).max(0) + period - 1) / period * period
        }
    }
}

impl Output {
    /// Paced master: lets begin every frame whose deadline is within the budget (raising the
    /// scheduler's begin limit) and notes when the next one may (`begin_at`).
    pub(super) fn let_begin(
        &mut self,
        shared: &Shared,
        st: &mut crate::sched::Locked<'_>,
        now: i64,
    ) {
        self.begin_at = None;
        if let (true, Some(seq), Some(b), Some(d)) = (
            self.gate,
            self.released_seq,
            self.budget,
            self.pacer.as_ref().and_then(|p| p.next_deadline()),
        ) {
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

    /// The first time at or after `t` on this output's deadline grid (`t` without one).
    pub(super) fn on_grid(&self, t: i64) -> i64 {
        on_grid(self.grid, self.period_ns, t)
    }
}

#[cfg(test)]
mod tests {
    use super::{allowed_at, on_grid, ALLOWED_KEPT};

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

    /// A host's shows of one group share the grid: whenever each (re)starts its clock, its
    /// deadlines land on the same times, the first at or after the start, within a period.
    #[test]
    fn deadlines_on_a_grid_are_the_grids_first_time_at_or_after() {
        let period = 40_000_000u64;
        let grid = Some((1_000_000_000, 5_000_000));
        let first = 1_005_000_000;
        assert_eq!(on_grid(None, period, 123), 123);
        // Before the grid's start: its start.
        assert_eq!(on_grid(grid, period, 0), first);
        for t in [
            first,
            first + 1,
            first + 39_999_999,
            first + 40_000_000,
            7_777_777_777,
        ] {
            let d = on_grid(grid, period, t);
            assert!(d >= t && d - t < period as i64, "{t} -> {d}");
            assert_eq!((d - first) % period as i64, 0, "{t} -> {d} is on the grid");
        }
    }
}
