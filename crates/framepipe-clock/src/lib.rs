//! framepipe's frame clock.
//!
//! * [`Pacer`]: releases frames at absolute deadlines on `CLOCK_MONOTONIC`. It sleeps with
//!   `clock_nanosleep(TIMER_ABSTIME)` to just before a deadline (a margin it measures and adapts
//!   from its own wake-ups) and spins the last stretch, so a frame leaves within a microsecond or
//!   so of its deadline. Deadlines are computed from the frame index and an exact [`Rational`]
//!   rate, so they never drift.
//! * [`WakeMargin`]: that margin, and the one sleep then spin every pacing thread uses
//!   ([`WakeMargin::wait_until`], or [`WakeMargin::wait_until_with`] for a thread whose sleep
//!   something else can cut short: a host's clock thread).
//! * [`LatenessStats`]: a fixed log-linear histogram of lateness (p50/p99/max, late and
//!   repeated frame counts).
//! * [`prepare_pacing_thread`]: low timer slack (`PR_SET_TIMERSLACK`, 1 ns) and, when the
//!   process is permitted, `SCHED_FIFO` for the calling thread ([`try_realtime`]).
//! * [`PiMutex`], [`PiCondvar`]: a mutex with priority inheritance, for the lock the
//!   real-time output thread shares with the workers.
//! * [`now_ns`], [`thread_cpu_ns`], [`CpuMeter`]: monotonic time and the pacing thread's own CPU
//!   time, to report what the spinning costs.
//!
//! # Real-time contract
//! Nothing here allocates, locks or blocks per frame except the intended sleep in
//! [`WakeMargin::wait_until_with`]. [`LatenessStats::new`] allocates its histogram once;
//! recording is an array increment. Every call per frame is a handful of `clock_gettime` calls
//! (vDSO, no syscall), one `clock_nanosleep` and a bounded spin of at most the current margin
//! (the 90th percentile of recent wake-up delays plus 20 µs, within 30 µs .. 1 ms).
//!
//! Unsafe code is limited to the libc calls in [`sys`]; each block states why it holds.
//!
//! [`Rational`]: framepipe_core::Rational

pub mod pacer;
pub mod pi;
pub mod stats;
pub mod sys;

pub use pacer::{Pacer, Tick, WakeMargin};
pub use pi::{PiCondvar, PiGuard, PiMutex};
pub use stats::{LatenessStats, LatenessSummary, DEFAULT_LATE_THRESHOLD_NS};
pub use sys::{
    allowed_cpus, current_cpu, now_ns, pin_current_thread, prepare_pacing_thread, set_thread_cpus,
    set_thread_cpus_except, set_timer_slack_ns, sleep_until_ns, thread_cpu_ns, timer_slack_of_self,
    try_realtime, CpuMeter, ThreadSetup,
};

/// Errors of the clock crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A period or rate that cannot pace anything (zero, or a zero denominator).
    #[error("cannot pace at period {period_ns} ns (rate {rate}): the period must be positive")]
    BadPeriod {
        /// The period asked for, in nanoseconds.
        period_ns: u64,
        /// The rate it came from, as text (`-` when a period was given directly).
        rate: String,
    },
    /// A system call failed.
    #[error("{call} failed: {source}")]
    Sys {
        /// The call, e.g. `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`.
        call: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Result with the clock crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl From<Error> for framepipe_core::Error {
    fn from(e: Error) -> Self {
        framepipe_core::Error::element("clock", e)
    }
}
