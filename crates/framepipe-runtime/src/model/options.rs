//! How a show runs: [`Options`] (threads, frames in flight, pace, overload, latency) and
//! [`JOIN_GRACE`].

use framepipe_core::Rational;

/// How long a run that ended early (stop, error) waits for each worker to finish the job in
/// hand before leaving it running, detached (it is blocked inside an element).
pub const JOIN_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// What the output clock does when a frame is not ready at its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overload {
    /// Never drop or repeat: the clock slips and the frame rate falls (rendering content).
    #[default]
    Slow,
    /// The clock holds: the previous frame is shown again and the miss counted (a live show).
    Live,
}

impl Overload {
    /// Parses `slow` or `live`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "slow" => Some(Overload::Slow),
            "live" => Some(Overload::Live),
            _ => None,
        }
    }

    /// `slow` or `live`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overload::Slow => "slow",
            Overload::Live => "live",
        }
    }
}

/// How to run a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// Worker threads. 0 = one per available core.
    pub threads: usize,
    /// Frames in flight at most. 0 = automatic: `2 * threads + 2`, fewer for large frames but
    /// never below `threads + 1` (see `memory/`). Never more than the source's `len_hint`.
    pub in_flight: usize,
    /// Output frame rate; `None` = unpaced (as fast as the pipeline goes).
    pub pace: Option<Rational>,
    /// What to do when a frame is late (paced runs only).
    pub overload: Overload,
    /// A stage running longer than this is reported as stalled (once per stage). 0 = automatic:
    /// five frame periods of `pace`, at least 100 ms; unpaced, at least 1 s.
    pub stall_timeout_ns: u64,
    /// Try to run the output thread under `SCHED_FIFO` (falls back quietly when not permitted).
    pub realtime: bool,
    /// Paced runs: how long before its deadline a frame may begin (its sources read; each node
    /// takes the live values when it starts the frame): the bound on how late a command can
    /// reach the output. 0 = automatic: the graph's measured latency (the slowest of the last
    /// frames from beginning to ready) plus a quarter and 2 ms. Never more frames than
    /// `in_flight`. Unpaced runs are not held back.
    pub latency_ns: u64,
    /// Paced runs: no standby pacing thread. By default, with two CPUs, a second thread kept
    /// off the output thread's CPU releases a frame the output thread has not
    /// released 0.25 ms after its deadline (it lost its CPU: a VM's host took it).
    pub no_standby: bool,
    /// Fault injection, for tests: once the first `Duration` has passed since the master
    /// output began, its thread stays away for the second (a sleep where it would wait for a
    /// deadline), as if its CPU were taken away. Only with the standby (see `no_standby`).
    #[doc(hidden)]
    pub inject_stall: Option<(std::time::Duration, std::time::Duration)>,
}

impl Options {
    /// Threads, and frames in flight as asked (0 = automatic: resolved once the frame sizes
    /// are known, by `memory::in_flight`).
    pub(crate) fn resolved(self) -> (usize, usize) {
        let threads = if self.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            self.threads
        };
        (threads, self.in_flight)
    }
}
