//! The drivers of an [`Output`] on a thread of its own: [`run_output`] (a run's output
//! threads), and for a paced master the same loop with a standby thread beside it
//! (`fp-out-standby`, see [`standby`](super::standby)). A host's clock thread is the third
//! driver (`host`). Every driver waits for a [`Next::Deadline`] with the clock crate's one
//! sleep then spin (`WakeMargin`), and for a [`Next::Wait`] on the port's signal (the host:
//! its own signals).

use std::sync::atomic::Ordering;
use std::time::Duration;

use framepipe_clock::{now_ns, prepare_pacing_thread, PiMutex, WakeMargin};
use framepipe_control::CommandReader;
use framepipe_core::{Result, Sink};

use super::standby::{self, Watch};
use super::{Next, Output};
use crate::edit::EditLink;
use crate::model::Options;
use crate::sched::{PortSignal, Shared};
use crate::stats::PacingStats;

/// Runs the output loop of sink port `port` on the calling thread until the end of the stream,
/// an error, or `stop`: a paced one under the frame clock (sleep then spin, `SCHED_FIFO` when
/// permitted and asked, restored at the end, also when unwinding). The paced master gets a
/// standby thread on another CPU (see [`standby`](super::standby)) unless
/// `options.no_standby`.
pub(crate) fn run_output(
    shared: &Shared,
    port: usize,
    sink: &mut dyn Sink,
    commands: Option<CommandReader>,
    edits_link: Option<EditLink>,
    options: Options,
    stall_ns: u64,
) -> (Option<PacingStats>, Result<()>) {
    let signal = &shared.port_signals[port];
    signal.register_current();
    // Kept to the end of the loop: dropping it (also on unwinding) gives the calling thread back
    // its own scheduling policy, priority and timer slack.
    let setup = options
        .pace
        .is_some()
        .then(|| prepare_pacing_thread(options.realtime));
    let realtime = setup.as_ref().is_some_and(|s| s.realtime);
    let mut out = match Output::new(
        shared, port, commands, edits_link, options, stall_ns, realtime,
    ) {
        Ok(o) => o,
        Err(e) => return (None, Err(e)),
    };
    let with_standby =
        out.master.is_some() && out.pacing.is_some() && !options.no_standby && standby::possible();
    let rescued = if with_standby {
        let stall = options.inject_stall;
        Some(drive_with_standby(
            shared, signal, &mut out, sink, realtime, stall,
        ))
    } else {
        drive(signal, None, || {
            let now = now_ns();
            (out.poll(shared, sink, now), now)
        });
        None
    };
    let (mut pacing, result) = out.finish(shared);
    if let (Some(p), Some(rescued)) = (pacing.as_mut(), rescued) {
        p.standby_rescued = Some(rescued);
    }
    drop(setup);
    (pacing, result)
}

/// The loop of an output on a thread of its own: `round` polls it (returning what it asks
/// and when it polled), then the loop waits as it asks: a deadline with the one sleep then
/// spin, anything else on the port's `signal` with a timeout. `stall`: (when, how long), one
/// sleep injected at the first deadline from then on, as if the thread had lost its CPU (for
/// tests of the standby).
fn drive(
    signal: &PortSignal,
    mut stall: Option<(i64, Duration)>,
    mut round: impl FnMut() -> (Next, i64),
) {
    let mut margin = WakeMargin::default();
    loop {
        let (next, now) = round();
        match next {
            Next::Again => {}
            Next::Deadline(_) if stall.is_some_and(|(t, _)| now >= t) => {
                let (_, d) = stall.take().expect("checked");
                std::thread::sleep(d);
            }
            Next::Deadline(at) => {
                margin.wait_until(at);
            }
            Next::Wait(at) => {
                signal.wait(Duration::from_nanos((at - now).max(0) as u64));
            }
            Next::Done => break,
        }
    }
}

/// The output state machine and its sink, as the master output thread and its standby share
/// them (one at a time, under a lock).
struct Driven<'a> {
    out: &'a mut Output,
    sink: &'a mut dyn Sink,
}

impl Output {
    /// When the standby should look whether the output thread came back (see
    /// [`standby`](super::standby)): the next time a frame must be released (the frame held
    /// for its deadline, or the clock's next deadline) or may begin, whichever is sooner. Not
    /// the output thread's other wake-ups (a frame ready, a command posted, its 50 ms stall
    /// poll): the standby would wake for each, and a wake-up costs it tens of µs of CPU on a
    /// VM.
    fn watch_time(&self, next: &Next, now: i64) -> Option<i64> {
        if matches!(next, Next::Done) {
            return None;
        }
        let due = self.due.as_ref().map(|d| d.at);
        let begin = self.begin_at();
        let deadline = self.pacing.as_ref().and_then(|p| p.next_deadline());
        due.into_iter()
            .chain(begin)
            .chain(deadline)
            .filter(|&t| t > now)
            .min()
    }
}

/// [`drive`] for a paced master output, with a standby thread (`fp-out-standby`, see
/// [`standby`](super::standby)) that keeps off the calling thread's CPU and releases a frame
/// the calling thread has not released 0.25 ms after its deadline (it lost its CPU). The
/// calling thread sleeps and spins with its own wake-up margin, not holding the lock. Returns
/// how many frames the standby released. `stall`: (after how long, how long) (see
/// `Options::inject_stall`).
fn drive_with_standby(
    shared: &Shared,
    signal: &PortSignal,
    out: &mut Output,
    sink: &mut dyn Sink,
    realtime: bool,
    stall: Option<(Duration, Duration)>,
) -> u64 {
    let stall = stall.map(|(after, d)| (now_ns() + after.as_nanos() as i64, d));
    let core = PiMutex::new(Driven { out, sink });
    let watch = Watch::default();
    let (core_ref, watch_ref) = (&core, &watch);
    std::thread::scope(|scope| {
        let _ = std::thread::Builder::new()
            .name("fp-out-standby".into())
            .spawn_scoped(scope, move || {
                let _setup = prepare_pacing_thread(realtime);
                watch_ref.stand_by(|| {
                    let mut d = core_ref.lock();
                    let d = &mut *d;
                    let released = shared.counters.frames_out.load(Ordering::Relaxed);
                    let next = loop {
                        match d.out.poll(shared, &mut *d.sink, now_ns()) {
                            Next::Again => continue,
                            next => break next,
                        }
                    };
                    let served = shared
                        .counters
                        .frames_out
                        .load(Ordering::Relaxed)
                        .saturating_sub(released);
                    watch_ref.publish_from_standby(d.out.watch_time(&next, now_ns()));
                    (served, !matches!(next, Next::Done))
                })
            });
        drive(signal, stall, || {
            let mut d = core_ref.lock();
            let d = &mut *d;
            let now = now_ns();
            let next = d.out.poll(shared, &mut *d.sink, now);
            watch_ref.publish(d.out.watch_time(&next, now));
            (next, now)
        });
        watch_ref.finish();
    });
    watch.rescued.load(Ordering::Relaxed)
}
