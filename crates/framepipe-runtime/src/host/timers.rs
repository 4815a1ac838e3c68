//! The clock thread's wake-ups: two heaps (deadlines, the others) of (when, generation, show).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::shows::Slot;

/// One wake-up: (when, generation, show).
pub(super) type Timer = Reverse<(i64, u64, usize)>;

/// The clock thread's wake-ups: deadlines (a frame to release: precise, spun for) and the
/// others (a frame may begin, a command poll, a pause), each a binary heap of
/// (when, generation, show). An entry whose generation is not its show's any more (the show
/// was polled since) is stale and skipped.
pub(super) struct Timers {
    pub(super) deadlines: BinaryHeap<Timer>,
    pub(super) others: BinaryHeap<Timer>,
}

impl Timers {
    pub(super) fn push(&mut self, t: i64, generation: u64, show: usize, deadline: bool) {
        let heap = if deadline {
            &mut self.deadlines
        } else {
            &mut self.others
        };
        heap.push(Reverse((t, generation, show)));
    }

    /// The next show whose deadline (`deadline`) or other wake-up is due at `now`.
    pub(super) fn pop_due(&mut self, now: i64, deadline: bool, slots: &[Slot]) -> Option<usize> {
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
            if slots[i].current(g) {
                return Some(i);
            }
        }
        None
    }

    /// The earliest live wake-up, and whether it is a deadline (stale entries at the top are
    /// dropped on the way).
    pub(super) fn next(&mut self, slots: &[Slot]) -> Option<(i64, bool)> {
        let live = |heap: &mut BinaryHeap<Timer>| {
            while let Some(&Reverse((t, g, i))) = heap.peek() {
                if slots[i].current(g) {
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
