//! The clock thread's wake-ups: two heaps (deadlines, the others) of (when, generation, show).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::shows::ShowEntry;

/// One wake-up: (when, generation, show).
type Timer = Reverse<(i64, u64, usize)>;

/// The clock thread's wake-ups: deadlines (a frame to release: precise, spun for) and the
/// others (a frame may begin, a command poll, a pause), each a binary heap of
/// (when, generation, show). An entry whose generation is not its show's any more (the show
/// was polled since) is stale and skipped.
pub(super) struct Timers {
    deadlines: BinaryHeap<Timer>,
    others: BinaryHeap<Timer>,
}

impl Timers {
    /// The wake-ups of `n` shows, made with room for what they usually hold at once (one
    /// current wake-up each, and the stale ones not yet at the top).
    pub(super) fn for_shows(n: usize) -> Self {
        Timers {
            deadlines: BinaryHeap::with_capacity(2 * n + 16),
            others: BinaryHeap::with_capacity(4 * n + 16),
        }
    }

    /// Queues show `show`'s wake-up at `t` of generation `generation` (a deadline or not).
    pub(super) fn push(&mut self, t: i64, generation: u64, show: usize, deadline: bool) {
        let heap = if deadline {
            &mut self.deadlines
        } else {
            &mut self.others
        };
        heap.push(Reverse((t, generation, show)));
    }

    /// The next show whose deadline (`deadline`) or other wake-up is due at `now`.
    pub(super) fn pop_due(
        &mut self,
        now: i64,
        deadline: bool,
        entries: &[ShowEntry],
    ) -> Option<usize> {
        let heap = if deadline {
            &mut self.deadlines
        } else {
            &mut self.others
        };
        while let Some(&Reverse((t, g, i))) = heap.peek() {
            if t > now {
                return None;
            }
            heap.pop();
            if entries[i].current(g) {
                return Some(i);
            }
        }
        None
    }

    /// The earliest live wake-up, and whether it is a deadline (stale entries at the top are
    /// dropped on the way).
    pub(super) fn next(&mut self, entries: &[ShowEntry]) -> Option<(i64, bool)> {
        let live = |heap: &mut BinaryHeap<Timer>| {
            while let Some(&Reverse((t, g, i))) = heap.peek() {
                if entries[i].current(g) {
                    return Some(t);
                }
                heap.pop();
            }
            None
        };
        match (live(&mut self.deadlines), live(&mut self.others)) {
            (Some(d), Some(o)) if o < d => Some((o, false)),
            (Some(d), _) => Some((d, true)),
            (None, Some(o)) => Some((o, false)),
            (None, None) => None,
        }
    }
}
