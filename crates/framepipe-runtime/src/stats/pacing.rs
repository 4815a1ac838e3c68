//! The frame clock's figures of a paced run, as the master output gives them at the end
//! ([`PacingStats`]), with its log of the last late frames ([`LateLog`]).

use framepipe_clock::LatenessSummary;

use crate::Overload;

/// Figures of the frame clock for a paced run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacingStats {
    /// The target rate, frames per second.
    pub target_fps: f64,
    /// Overload policy used.
    pub overload: Overload,
    /// Lateness of released frames (µs), late and repeated counts.
    pub lateness: LatenessSummary,
    /// Whether the output thread ran under `SCHED_FIFO`.
    pub realtime: bool,
    /// The output thread's CPU time over the run's wall time (sleep + spin pacing costs this).
    pub cpu_share: f64,
    /// How long before its deadline a frame began, at the end of the run (ms). 0 when frames
    /// were not held back (no measurement yet).
    pub latency_budget_ms: f64,
    /// Frames that may be begun ahead of the one being released (the budget in periods, rounded
    /// up, at most the frames in flight), at the end of the run.
    pub frames_ahead: usize,
    /// The graph's latency (a frame's beginning to ready at the master sink), the slowest of
    /// the last frames, at the end of the run (ms).
    pub frame_latency_ms: f64,
    /// The default budget's adaptive margin at the end of the run (ms; see `output/gate.rs`): what
    /// the budget adds to the graph's latency and a quarter of it.
    pub latency_margin_ms: f64,
    /// The largest the adaptive margin was during the run (ms).
    pub latency_margin_peak_ms: f64,
    /// The last late frames: when each was due and how late it left, to find what made them
    /// late (a pause, an edit, another process at that moment).
    pub late_log: LateLog,
    /// Frames the standby thread released because the output thread had not 0.25 ms after
    /// their deadline (`None`: no standby; see `output/standby.rs`).
    pub standby_rescued: Option<u64>,
}

/// One late frame of a [`LateLog`]. Times after the deadline are in ns, negative when before
/// it. A frame ready in time but released late was late for the pacing thread (it did not
/// run); one ready late, for the pipeline: it began late (`begun_ns` well after
/// `-budget_ns`: the pacing thread or a worker came late to begin it) or took long (its
/// workers lost their CPU, or the graph was slower than its budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LateFrame {
    /// Its deadline (`CLOCK_MONOTONIC` ns).
    pub deadline_ns: i64,
    /// How late it was released (ns).
    pub lateness_ns: i64,
    /// When it was ready at the sink, after its deadline.
    pub ready_ns: i64,
    /// When it began (its source's job started), after its deadline.
    pub begun_ns: i64,
    /// The latency budget in force when it was let begin (when that is not known, when it was
    /// released, which counts its own latency already; 0: none, an unpaced run or the
    /// warm-up): a frame may begin `budget_ns` before its deadline.
    pub budget_ns: i64,
    /// When the master output let it begin, after its deadline (`None`: not known, e.g. in
    /// the warm-up, when frames are not held back). Well after `-budget_ns`: the pacing
    /// thread came late to let it; in time but `begun_ns` late: no worker began it in time.
    pub allowed_ns: Option<i64>,
}

/// The last [`LateLog::CAP`] late frames (released more than the late threshold after their
/// deadline), kept without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LateLog {
    frames: [LateFrame; LateLog::CAP],
    n: u64,
}

impl LateLog {
    /// How many late frames are kept (the latest).
    pub const CAP: usize = 16;

    pub(crate) fn push(&mut self, frame: LateFrame) {
        self.frames[(self.n % Self::CAP as u64) as usize] = frame;
        self.n += 1;
    }

    /// The kept late frames, oldest first.
    pub fn frames(&self) -> impl Iterator<Item = LateFrame> + '_ {
        let k = self.n.min(Self::CAP as u64);
        (self.n - k..self.n).map(|i| self.frames[(i % Self::CAP as u64) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::{LateFrame, LateLog};

    /// The log keeps the latest late frames, oldest first, once it has wrapped too.
    #[test]
    fn the_late_log_keeps_the_latest_frames_in_order() {
        let f = |i: i64| LateFrame {
            deadline_ns: 10 + i,
            lateness_ns: 1_000_001 + i,
            ready_ns: i,
            begun_ns: i - 500,
            budget_ns: 400,
            allowed_ns: (i % 2 == 0).then_some(i - 600),
        };
        let mut log = LateLog::default();
        assert_eq!(log.frames().count(), 0);
        log.push(f(-5));
        assert_eq!(log.frames().collect::<Vec<_>>(), [f(-5)]);
        for i in 1..40 {
            log.push(f(i));
        }
        let kept: Vec<_> = log.frames().collect();
        assert_eq!(kept.len(), LateLog::CAP);
        let want: Vec<_> = (40 - LateLog::CAP as i64..40).map(f).collect();
        assert_eq!(kept, want);
    }
}
