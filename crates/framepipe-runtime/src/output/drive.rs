//! The drivers of an [`Output`] on a thread of its own: [`run_output`] (the single-show run's
//! output threads), and for a paced master the same with a standby thread beside it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use framepipe_clock::{now_ns, prepare_pacing_thread};
use framepipe_control::CommandReader;
use framepipe_core::{Result, Sink};

use super::{Next, Output};
use crate::edit::EditLink;
use crate::model::Options;
use crate::sched::Shared;
use crate::stats::PacingStats;

/// Runs the output loop of sink port `port` on the calling thread until the end of the stream,
/// an error, or `stop`: a paced one under the frame clock (sleep then spin, `SCHED_FIFO` when
/// permitted and asked, restored at the end, also when unwinding).
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
    // The paced master output gets a standby thread on another CPU (`standby.rs`).
    if port == 0 && options.pace.is_some() && !options.no_standby && super::standby::possible() {
        let (out, rescued) =
            drive_with_standby(shared, signal, out, sink, realtime, options.inject_stall);
        let (mut pacing, result) = out.finish(shared);
        if let Some(p) = pacing.as_mut() {
            p.standby_rescued = Some(rescued);
        }
        drop(setup);
        return (pacing, result);
    }
    loop {
        let now = now_ns();
        match out.poll(shared, sink, now) {
            Next::Again => {}
            Next::Deadline(at) => {
                if let Some(p) = out.pacer_mut() {
                    p.wait_until(at);
                }
            }
            Next::Wait(at) => {
                signal.wait(Duration::from_nanos((at - now).max(0) as u64));
            }
            Next::Done => break,
        }
    }
    let r = out.finish(shared);
    drop(setup);
    r
}

/// The output state machine and its sink, as the master output thread and its standby share
/// them (one at a time, under a lock).
struct Driven<'a> {
    /// Taken back at the end.
    out: Option<Output>,
    sink: &'a mut dyn Sink,
}

/// When the standby should look whether the output thread came back (see `standby.rs`): the
/// next time a frame must be released (the frame held for its deadline, or the clock's next
/// deadline) or may begin, whichever is sooner. Not the output thread's other wake-ups (a
/// frame ready, a command posted, its 50 ms stall poll): the standby would wake for each, and
/// a wake-up costs it tens of µs of CPU on a VM.
fn watch_time(out: &mut Output, next: &Next, now: i64) -> Option<i64> {
    if matches!(next, Next::Done) {
        return None;
    }
    let due = out.due.as_ref().map(|d| d.at);
    let begin = out.begin_at;
    let deadline = out.pacer_mut().and_then(|p| p.next_deadline());
    due.into_iter()
        .chain(begin)
        .chain(deadline)
        .filter(|&t| t > now)
        .min()
}

/// [`run_output`]'s loop for a paced master output, with a standby thread (`fp-out-standby`,
/// see `standby.rs`) that keeps off the calling thread's CPU and releases a frame the calling
/// thread has not released 0.25 ms after its deadline (it lost its CPU). The calling thread
/// sleeps and spins with its own wake-up margin, not holding the lock. Returns the output (to
/// be finished) and how many frames the standby released.
fn drive_with_standby(
    shared: &Shared,
    signal: &crate::sched::PortSignal,
    out: Output,
    sink: &mut dyn Sink,
    realtime: bool,
    stall: Option<(Duration, Duration)>,
) -> (Output, u64) {
    let mut stall = stall.map(|(after, d)| (now_ns() + after.as_nanos() as i64, d));
    let core = framepipe_clock::PiMutex::new(Driven {
        out: Some(out),
        sink,
    });
    let watch = super::standby::Watch::default();
    let mut margin = framepipe_clock::WakeMargin::default();
    let (core_ref, watch_ref) = (&core, &watch);
    std::thread::scope(|scope| {
        let _ = std::thread::Builder::new()
            .name("fp-out-standby".into())
            .spawn_scoped(scope, move || {
                let _setup = prepare_pacing_thread(realtime);
                watch_ref.stand_by(|| {
                    let mut d = core_ref.lock();
                    let d = &mut *d;
                    let released = shared.counters.frames_out();
                    let out = d.out.as_mut().expect("until the end");
                    let next = loop {
                        match out.poll(shared, &mut *d.sink, now_ns()) {
                            Next::Again => continue,
                            next => break next,
                        }
                    };
                    let served = shared.counters.frames_out().saturating_sub(released);
                    watch_ref.publish_from_standby(watch_time(out, &next, now_ns()));
                    (served, !matches!(next, Next::Done))
                })
            });
        loop {
            let (next, now) = {
                let mut d = core_ref.lock();
                let d = &mut *d;
                let now = now_ns();
                let out = d.out.as_mut().expect("until the end");
                let next = out.poll(shared, &mut *d.sink, now);
                watch_ref.publish(watch_time(out, &next, now));
                (next, now)
            };
            match next {
                Next::Again => {}
                Next::Deadline(_) if stall.is_some_and(|(t, _)| now >= t) => {
                    let (_, d) = stall.take().expect("checked");
                    std::thread::sleep(d);
                }
                Next::Deadline(at) => {
                    let sleep_to = at - margin.ns();
                    if sleep_to > now {
                        framepipe_clock::sleep_until_ns(sleep_to);
                        margin.learn(now_ns() - sleep_to);
                    }
                    while now_ns() < at {
                        std::hint::spin_loop();
                    }
                }
                Next::Wait(at) => {
                    signal.wait(Duration::from_nanos((at - now).max(0) as u64));
                }
                Next::Done => break,
            }
        }
        watch_ref.finish();
    });
    let rescued = watch.rescued.load(Ordering::Relaxed);
    let out = core.lock().out.take().expect("taken once");
    (out, rescued)
}
