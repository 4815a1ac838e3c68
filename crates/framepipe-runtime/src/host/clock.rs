//! The host's clock thread: polls every show's master output at its deadlines, its signals
//! and its command polls, with a standby thread on another CPU.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use framepipe_clock::{now_ns, prepare_pacing_thread, WakeMargin};
use framepipe_core::{Result, Sink};

use super::shows::ShowTable;
use super::signals::HostSignals;
use super::timers::Timers;
use crate::output::{standby_possible, Output, Watch};
use crate::sched::Shared;
use crate::sched::{LockSummary, Log2Histogram};
use crate::show::Side;
use crate::stats::PacingStats;

/// A show as handed to the clock thread.
pub(super) struct Start {
    pub(super) shared: Arc<Shared>,
    pub(super) sink: Box<dyn Sink>,
    pub(super) commands: Option<framepipe_control::CommandReader>,
    pub(super) link: Option<crate::edit::EditLink>,
    pub(super) side: Side,
    pub(super) options: crate::model::Options,
    pub(super) stall_ns: u64,
}

/// A show whose master output is over, handed back to be concluded.
pub(super) struct Ended {
    pub(super) index: usize,
    pub(super) sink: Box<dyn Sink>,
    pub(super) output: (Option<PacingStats>, Result<()>),
    pub(super) side: Side,
}

/// A running show on the clock thread.
pub(super) struct RunningShow {
    pub(super) shared: Arc<Shared>,
    pub(super) sink: Box<dyn Sink>,
    pub(super) out: Output,
    pub(super) side: Side,
}

/// Most shows of one period whose deadlines fall together: the shows of a period are put in
/// groups of at most this many, the groups spread evenly over the period. A group is released
/// in one wake-up of the clock thread, one show after the other (a few µs each), so the last of
/// a group is that much later than the first; fewer, larger groups mean fewer wake-ups and
/// less spinning.
pub(super) const GROUP: i64 = 16;

/// The clock thread spins at most this long before a deadline, whatever its wake-ups have
/// been: it serves many shows, and spinning for one group's deadline is time taken from the
/// workers. (A late-judged frame is more than 1 ms late.)
pub(super) const MAX_SPIN_NS: i64 = 100_000;

/// Wake-ups that need no precision (a frame may begin, a stall poll) are rounded up to this
/// grid, so that the shows of a group, whose times are close, share one wake-up.
pub(crate) const GRID_NS: i64 = 1_000_000;

// A host's shared pools make frames ahead for shows that begin one grid step early.
const _: () = assert!(GRID_NS as u64 == crate::memory::HOST_BEGIN_SLACK_NS);

/// The shows' first deadlines are at least this long after the clock starts: every show's
/// first frames (its sources starting, its pools being filled, hundreds of shows at once)
/// are made meanwhile instead of counting late. Measured with 200 shows of
/// `testsrc 64x64 ! stamp ! nullsink`, 125 frames each: 1,996 late frames (a median of 10 a
/// show) without it, 32 (a median of 0) with 300 ms; 500 ms is not measured separately.
pub(super) const WARM_UP_NS: i64 = 500_000_000;

/// How the clock thread runs (from the [`Host`](crate::Host)).
pub(super) struct ClockSetup {
    pub(super) realtime: bool,
    pub(super) standby: bool,
    pub(super) counters: Arc<ClockCounters>,
    pub(super) stall: Option<(Duration, Duration)>,
}

/// The host clock's figures (`--stats` `clock`), readable after [`Host::run`](crate::Host::run).
#[derive(Debug, Default)]
pub struct ClockCounters {
    /// Whether a standby thread ran beside the clock thread.
    pub standby: AtomicBool,
    /// Times the standby thread woke up to watch a wake-up of the clock thread.
    pub standby_wakeups: std::sync::atomic::AtomicU64,
    /// Frames the standby thread released because the clock thread had not served a wake-up
    /// 0.25 ms after its time (it had lost its CPU, or was still busy in a long round: the
    /// standby then serves the shows beside it).
    pub rescued: std::sync::atomic::AtomicU64,
    /// How long each round of either clock thread (releases, signalled shows, beginnings,
    /// stall polls due at once) took: with hundreds of shows, the last release of a long
    /// round leaves that much after the first.
    pub(super) rounds: Log2Histogram,
}

impl ClockCounters {
    /// The clock rounds' lengths (see the field): count, p50, p99, max.
    pub fn rounds(&self) -> LockSummary {
        self.rounds.summary()
    }
}

/// The clock thread: polls each show's master output at its deadlines, its signals and its
/// command polls, until every show has ended. With paced shows, two CPUs and `standby`, a
/// standby thread on another CPU than the clock thread's serves any deadline the clock
/// thread has not served 0.25 ms after its time: a virtual machine's host (or
/// anything else) taking the clock thread's CPU away for milliseconds then delays no release
/// by more than that, as long as the other CPU runs.
pub(super) fn clock_loop(
    signals: &HostSignals,
    starts: Vec<Option<Start>>,
    how: &ClockSetup,
    tx: &Sender<Ended>,
) {
    let ClockSetup {
        realtime,
        standby: standby_wanted,
        ref counters,
        stall,
    } = *how;
    let mut stall = stall.map(|(after, d)| (now_ns() + after.as_nanos() as i64, d));
    signals.register_clock();
    let paced = starts.iter().flatten().any(|s| s.options.pace.is_some());
    let with_standby = standby_wanted && paced && standby_possible();
    // Kept to the end: dropping it restores this thread's policy and timer slack.
    let setup = prepare_pacing_thread(realtime);
    let n = starts.len();
    let mut shows: Vec<Option<RunningShow>> = Vec::with_capacity(n);
    let mut timers = Timers::for_shows(n);
    let mut margin = WakeMargin::default();
    let now = now_ns();
    // Shows of the same period spread their first deadlines over it: (period, shows of it,
    // shows of it placed so far).
    let mut periods: Vec<(u64, i64, i64)> = Vec::new();
    for s in starts.iter().flatten() {
        if let Some(rate) = s.options.pace {
            let period = rate.period_ns();
            match periods.iter_mut().find(|(p, _, _)| *p == period) {
                Some((_, m, _)) => *m += 1,
                None => periods.push((period, 1, 0)),
            }
        }
    }
    for (i, start) in starts.into_iter().enumerate() {
        let Some(s) = start else {
            shows.push(None);
            continue;
        };
        let Start {
            shared,
            sink,
            commands,
            link,
            side,
            options,
            stall_ns,
        } = s;
        match Output::new(
            &shared,
            0,
            commands,
            link,
            options,
            stall_ns,
            setup.realtime,
        ) {
            Ok(mut out) => {
                out.set_begin_slack(Duration::from_nanos(GRID_NS as u64));
                out.set_margin_floor(Duration::from_nanos(crate::output::HOST_MIN_MARGIN_NS));
                if let Some(rate) = options.pace {
                    let period = rate.period_ns();
                    if let Some((_, m, k)) = periods.iter_mut().find(|(p, _, _)| *p == period) {
                        // Show k of m: group k / GROUP of ceil(m / GROUP), spread over the
                        // period.
                        let groups = (*m + GROUP - 1) / GROUP;
                        out.set_grid(now + WARM_UP_NS, (*k / GROUP) * period as i64 / groups);
                        *k += 1;
                    }
                }
                shows.push(Some(RunningShow {
                    shared,
                    sink,
                    out,
                    side,
                }));
                timers.push(now, 0, i, false);
            }
            Err(e) => {
                shows.push(None);
                let _ = tx.send(Ended {
                    index: i,
                    sink,
                    output: (None, Err(e)),
                    side,
                });
            }
        }
    }
    let core = ShowTable::new(shows, timers);
    let watch = Watch::default();
    let (core, standby) = (&core, &watch);
    std::thread::scope(|scope| {
        if with_standby {
            let spawned = std::thread::Builder::new()
                .name("fp-clock-standby".into())
                .spawn_scoped(scope, move || {
                    let _setup = prepare_pacing_thread(realtime);
                    standby.stand_by(|| {
                        let t0 = now_ns();
                        let served = core.serve(signals, tx);
                        counters.rounds.record((now_ns() - t0).max(0) as u64);
                        let wake_clock = if core.running() == 0 {
                            true
                        } else {
                            // A wake-up this round queued before the clock thread's sleep
                            // ends (it computed its sleep before): wake it up for it.
                            let next = core.publish(standby, false);
                            let sleeps_to = signals.clock_sleeps_to();
                            next.is_some_and(|(t, _)| sleeps_to != 0 && t < sleeps_to)
                        };
                        if wake_clock {
                            signals.wake_clock();
                        }
                        (served, core.running() != 0)
                    })
                });
            if spawned.is_ok() {
                counters.standby.store(true, Ordering::Relaxed);
            }
        }
        loop {
            let t0 = now_ns();
            core.serve(signals, tx);
            counters.rounds.record((now_ns() - t0).max(0) as u64);
            if core.running() == 0 {
                break;
            }
            let next = core.publish(standby, true);
            // Sleep to the next one (a signal unparks), and spin the last stretch of a
            // deadline.
            let Some((t, precise)) = next else {
                // Announced like a timed sleep, so that a signal or the standby (a wake-up it
                // queued) unparks it.
                signals
                    .clock_wakes_at
                    .store(now_ns() + 2_000_000, Ordering::SeqCst);
                if signals.raised.lock().is_empty() && core.next().is_none() {
                    std::thread::park_timeout(Duration::from_millis(2));
                }
                signals.clock_wakes_at.store(0, Ordering::SeqCst);
                continue;
            };
            let now = now_ns();
            if let Some((_, d)) = stall.filter(|&(at, _)| precise && now >= at) {
                stall = None;
                std::thread::sleep(d);
                continue;
            }
            // The sleep, cut short by a signal: announced, then the signals and the wake-ups
            // are looked at once more (a signal raised, or a wake-up the standby queued,
            // before the announcement did not unpark: it must be seen here). `false`: not
            // slept, or unparked (a show was signalled, or the standby queued an earlier
            // wake-up): the next round serves it.
            let sleep = |sleep_to: i64| {
                signals.clock_wakes_at.store(sleep_to, Ordering::SeqCst);
                if !signals.raised.lock().is_empty() || core.next().is_some_and(|(u, _)| u < t) {
                    signals.clock_wakes_at.store(0, Ordering::SeqCst);
                    return false;
                }
                std::thread::park_timeout(Duration::from_nanos((sleep_to - now).max(0) as u64));
                signals.clock_wakes_at.store(0, Ordering::SeqCst);
                now_ns() >= sleep_to
            };
            if precise {
                // A deadline: the one sleep then spin, spinning at most MAX_SPIN_NS.
                margin.wait_until_with(t, MAX_SPIN_NS, sleep);
            } else if t > now {
                sleep(t);
            }
        }
        standby.finish();
    });
    counters
        .standby_wakeups
        .store(watch.wakeups.load(Ordering::Relaxed), Ordering::Relaxed);
    counters
        .rescued
        .store(watch.rescued.load(Ordering::Relaxed), Ordering::Relaxed);
    drop(setup);
}
