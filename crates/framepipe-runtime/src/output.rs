//! The output thread: the one thread that releases frames to the sink.
//!
//! It is the thread that called [`Prepared::run`](crate::Prepared::run), so it adds no thread
//! to the process. Once per frame boundary it reads the command queue (lock-free), applies
//! transport commands itself and parameter commands to the live state (they reach the next frame
//! the source starts), and answers each command on the queue's return path (lock-free, no
//! allocation) with the frame it applies from, or the reason it was refused, waits for the next frame in order, waits for its deadline on the frame
//! clock when the run is paced, and hands it to the sink. It also notices stalled stages.
//!
//! It takes the scheduler lock once per frame (returning the previous frame and taking the next
//! in one critical section) and never waits on it: it waits for a frame on its port's flag and
//! `park`. Commands are also read while it waits, so `stop` ends the run at once even when no
//! frame is coming (a blocked source, a pause). Its scheduling policy is restored at the end,
//! also when unwinding; a panic here is caught by `Prepared::run`.
//!
//! Overload policies (paced runs):
//! * `slow`: a frame that is late is released when ready and the clock slips to it; nothing is
//!   dropped or repeated, the frame rate falls.
//! * `live`: the clock holds. At a deadline with no new frame ready, the previous frame is given
//!   to the sink again and counted as repeated; when frames come back, deadlines already missed
//!   are skipped (counted as repeated) so the pipeline catches up without a burst.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use framepipe_clock::{now_ns, prepare_pacing_thread, CpuMeter, LatenessSummary, Pacer};
use framepipe_control::{Command, CommandReader, Outcome, Posted, Release, Transport};
use framepipe_core::{Error, Frame, FrameCtx, Result, Sink};

use crate::edit::{EditLink, FromEditor, ToEditor};
use crate::events::Event;
use crate::live::Edit;
use crate::pipeline::{Options, Overload};
use crate::state::{PortItem, Shared, Version};
use crate::worker::guard;

/// How often the output thread looks at commands and stalls while it has nothing else to do.
const POLL: Duration = Duration::from_millis(2);

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
}

/// The last frames' latencies (beginning to ready at the master sink), without allocating.
struct LatencyWindow {
    ns: [i64; 32],
    n: usize,
}

impl LatencyWindow {
    fn push(&mut self, ns: i64) {
        self.ns[self.n % self.ns.len()] = ns.max(0);
        self.n += 1;
    }

    /// The slowest of the last frames.
    fn max(&self) -> Option<i64> {
        let k = self.n.min(self.ns.len());
        self.ns[..k].iter().copied().max()
    }
}

/// How long before its deadline a frame begins, in a paced run: the asked latency, or by
/// default the measured one with a margin (see [`crate::budget::default_budget`]: a quarter
/// of it and 2 ms, in whole periods beyond a period). `None` (no limit) until a latency is
/// known.
fn latency_budget(asked_ns: u64, window: &LatencyWindow, period_ns: u64) -> Option<u64> {
    if asked_ns > 0 {
        return Some(asked_ns);
    }
    let max = window.max()? as u64;
    Some(crate::budget::default_budget(max, period_ns))
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

/// The reply to an edit that the run's end overtook.
const ENDED_BEFORE_EDIT: &str = "the run ended before the edit could take effect";

/// Most parameter edits applied in one critical section of the live lock (one frame
/// boundary's worth in practice; more are applied in further batches).
const EDIT_BATCH: usize = 64;
const _: () = assert!(EDIT_BATCH >= framepipe_control::MAX_BATCH);

/// Runs the output loop of sink port `port` until the end of the stream, an error, or `stop`.
///
/// Per frame it takes the scheduler lock once when the next frame is already waiting: in that
/// one critical section it returns the previous frame (the sink stage's bookkeeping) and takes
/// the next. Otherwise it waits for the workers' signal without the lock (a flag and an unpark,
/// see `PortSignal`) and takes the lock once more when the frame is there.
pub(crate) fn run_output(
    shared: &Shared,
    port: usize,
    sink: &mut dyn Sink,
    mut commands: Option<CommandReader>,
    mut edits_link: Option<EditLink>,
    options: Options,
    stall_ns: u64,
) -> (Option<PacingStats>, Result<()>) {
    let signal = &shared.port_signals[port];
    signal.register_current();
    let out_slot = shared.threads + port;
    // The graph version this thread last looked at (re-read, under the lock it takes anyway,
    // when `Shared::version` says a live edit switched), and its sink node's counters.
    let (mut ver, mut sink_stage) = {
        let st = shared.lock();
        (Arc::clone(&st.ver), st.ports[port].node)
    };
    let mut sink_counter = Arc::clone(&ver.stages[sink_stage]);
    let sink_name = sink_counter.name.clone();
    let live_policy = options.overload == Overload::Live;
    let mut pacer = match options.pace.map(Pacer::new).transpose() {
        Ok(p) => p,
        Err(e) => {
            let mut st = shared.lock();
            st.stop();
            st.after_change(shared);
            return (None, Err(Error::from(e)));
        }
    };
    // Kept to the end of the loop: dropping it (also on unwinding) gives the calling thread back
    // its own scheduling policy, priority and timer slack.
    let setup = pacer
        .is_some()
        .then(|| prepare_pacing_thread(options.realtime));
    let realtime = setup.as_ref().is_some_and(|s| s.realtime);
    let half_period_ns = pacer.as_ref().map_or(0, |p| p.period_ns() as i64 / 2);
    let mut last_release_ns: Option<i64> = None;
    // (start of the current second, worst lateness in it so far), ns.
    let mut peak_window: (i64, i64) = (now_ns(), 0);
    shared.counters.realtime.store(realtime, Ordering::Relaxed);
    let cpu = CpuMeter::start();
    let mut transport = Transport::new();
    let mut last: Option<(FrameCtx, Frame)> = None;
    let mut edits: Vec<Edit> = Vec::with_capacity(EDIT_BATCH);
    // The commands of `edits`, answered once assigned.
    let mut edited: Vec<Posted> = Vec::with_capacity(EDIT_BATCH);
    // The outcome of the frame last given to the sink (its slot), returned to the scheduler in
    // the next critical section (with the taking of the next frame).
    let mut done: Option<(usize, u64, Result<()>)> = None;
    // Paced master: frames begin just in time (see `Options::latency_ns`).
    let gate = port == 0 && pacer.is_some();
    let period_ns = pacer.as_ref().map_or(0, |p| p.period_ns());
    let mut window = LatencyWindow { ns: [0; 32], n: 0 };
    let mut released_seq: Option<u64> = None;
    let mut budget: Option<u64> = None;
    // When the next frame may begin (a paced master wakes up then to let it); set where the
    // output thread takes the lock for the next frame.
    let mut begin_at: Option<i64>;
    // A frame held back while paused (still in flight; the sink's turn is taken).
    let mut held: Option<PortItem> = None;

    'frames: loop {
        // 1. Commands, once per frame boundary (and while waiting for a frame).
        let mut stop = false;
        // A live edit switched versions: look at the new one (and, the master, answer the
        // edit and hand what the switch replaced to the edit thread).
        if shared.version.load(Ordering::Acquire) != ver.number {
            let mut st = shared.lock_output();
            ver = Arc::clone(&st.ver);
            sink_stage = st.ports[port].node;
            let switched = if port == 0 { st.switched.take() } else { None };
            drop(st);
            sink_counter = Arc::clone(&ver.stages[sink_stage]);
            if let Some(mut sw) = switched {
                shared.counters.set_stages(Arc::clone(&ver.stages));
                if let (Some(p), Some(reader)) = (sw.posted.take(), commands.as_mut()) {
                    reader.reply(p, Outcome::Applied { frame: sw.frame });
                }
                if let Some(l) = edits_link.as_mut() {
                    l.busy = false;
                    // Full (cannot be: one edit at a time): dropped here instead.
                    let _ = l.tx.try_send(ToEditor::Switched(sw));
                }
            }
        }
        if let (Some(l), Some(reader)) = (edits_link.as_mut(), commands.as_mut()) {
            match l.take() {
                Some(FromEditor::Ready(p)) => {
                    let mut st = shared.lock_output();
                    st.arm_switch(p);
                    st.after_change(shared);
                }
                Some(FromEditor::Refused(p, reason)) => {
                    l.busy = false;
                    refuse(shared, reader, p, reason);
                }
                None => {}
            }
        }
        if let Some(reader) = commands.as_mut() {
            // The boundary is named by the next frame to be released (see `Outcome::Applied`).
            let boundary = released_seq.map_or(0, |s| s + 1);
            let mut batch = Batch {
                edits: &mut edits,
                posted: &mut edited,
            };
            stop = apply_commands(
                shared,
                &ver,
                reader,
                edits_link.as_mut(),
                &mut transport,
                &mut batch,
                boundary,
            );
        }
        shared
            .counters
            .paused
            .store(transport.is_paused(), Ordering::Relaxed);
        if stop {
            // At once, even while waiting for a frame that does not come (a blocked source, a
            // pause): every frame the sink got was whole; no new frame is started; the frames
            // in flight go back to their pools.
            drop(held.take());
            let mut st = shared.lock_output();
            if let Some((slot, v, r)) = done.take() {
                st.sink_done(shared, port, slot, v, r);
            }
            st.stop();
            st.after_change(shared);
            break;
        }

        // 2. The next frame in order (or the end). Under the live policy, the previous frame is
        //    shown again at deadlines that pass meanwhile; stalls are noticed while waiting.
        let token = match held.take() {
            Some(t) => Some(t),
            None => {
                // A signal raised before this lock is seen in it; later ones raise it again.
                signal.take();
                let mut st = shared.lock_output();
                begin_at = None;
                if let (true, Some(seq), Some(b), Some(d)) = (
                    gate,
                    released_seq,
                    budget,
                    pacer.as_ref().and_then(|p| p.next_deadline()),
                ) {
                    // Frames whose deadline is within the budget may begin now; the next one
                    // when its time comes (woken up below).
                    let limit = begin_limit(seq, d, period_ns, b, now_ns());
                    if limit > st.begin_limit || st.begin_limit == u64::MAX {
                        st.begin_limit = limit;
                        st.after_change(shared);
                    }
                    begin_at = Some(next_begin_ns(seq, d, period_ns, b, st.begin_limit));
                }
                if let Some((slot, v, r)) = done.take() {
                    st.sink_done(shared, port, slot, v, r);
                }
                let mut got = st.take_ready(port);
                let mut end = got.is_none() && st.finished();
                drop(st);
                while got.is_none() && !end {
                    let now = now_ns();
                    check_stalls(shared, &ver, stall_ns, now);
                    if commands.as_ref().is_some_and(|r| r.pending() > 0)
                        || edits_link
                            .as_ref()
                            .is_some_and(|l| l.ready.load(Ordering::Acquire))
                        || shared.version.load(Ordering::Acquire) != ver.number
                    {
                        continue 'frames;
                    }
                    let mut timeout = POLL;
                    if let Some(at) = begin_at {
                        if now >= at {
                            // The next frame's time to begin: read commands, then let it.
                            continue 'frames;
                        }
                        timeout = timeout.min(Duration::from_nanos((at - now) as u64));
                    }
                    if let (true, false, Some(p), Some((ctx, frame))) = (
                        live_policy,
                        transport.is_paused(),
                        pacer.as_mut(),
                        last.as_ref(),
                    ) {
                        if let Some(deadline) = p.next_deadline() {
                            if now >= deadline {
                                // Nothing new at this deadline: show the previous frame again.
                                last_release_ns = Some(p.wait_next().released_ns);
                                p.stats_mut().record_repeat();
                                shared.counters.repeated.fetch_add(1, Ordering::Relaxed);
                                let result = guard(&sink_name, || sink.consume(ctx, frame));
                                // Look for the next frame (or the end) after every repeat: a
                                // repeat that outlasts a period must not lead straight to
                                // another one, or a slow sink would repeat for ever.
                                let mut st = shared.lock_output();
                                if let Err(e) = result {
                                    st.fail(e);
                                    st.after_change(shared);
                                }
                                got = st.take_ready(port);
                                end = got.is_none() && st.finished();
                                continue;
                            }
                            timeout = timeout.min(Duration::from_nanos((deadline - now) as u64));
                        }
                    }
                    if !signal.wait(timeout) {
                        continue;
                    }
                    let mut st = shared.lock_output();
                    got = st.take_ready(port);
                    end = got.is_none() && st.finished();
                }
                got
            }
        };
        let Some(token) = token else {
            break;
        };
        if gate {
            window.push(token.ready_ns - token.begun_ns);
            budget = latency_budget(options.latency_ns, &window, period_ns);
            shared
                .counters
                .latency_budget_us
                .store(budget.unwrap_or(0) / 1000, Ordering::Relaxed);
        }

        // 3. Release it, or hold it while paused.
        match transport.at_boundary() {
            Release::Go => {}
            Release::GoAfterPause => {
                if let Some(p) = pacer.as_mut() {
                    p.resync(now_ns());
                }
            }
            Release::Hold => {
                held = Some(token);
                check_stalls(shared, &ver, stall_ns, now_ns());
                std::thread::sleep(POLL);
                continue;
            }
            Release::Stop => {
                drop(token);
                let mut st = shared.lock_output();
                st.stop();
                st.after_change(shared);
                break;
            }
        }

        // 4. Its deadline.
        if let Some(p) = pacer.as_mut() {
            if live_policy {
                let skipped = p.skip_missed(now_ns());
                for _ in 0..skipped {
                    p.stats_mut().record_repeat();
                }
                shared
                    .counters
                    .repeated
                    .fetch_add(skipped, Ordering::Relaxed);
            }
            // Was the frame itself late (ready only after its deadline)? Judged by when it
            // reached the sink stage, not when this thread looked, so that a preempted output
            // thread does not pass for an overloaded pipeline.
            let frame_late = p
                .next_deadline()
                .is_some_and(|d| token.ready_ns > d + framepipe_clock::DEFAULT_LATE_THRESHOLD_NS);
            // After this thread lost the CPU, deadlines may already have passed: keep the grid
            // (no drift) but release no closer than half a period after the previous frame, so
            // the output catches up without a burst.
            if let (Some(d), Some(prev)) = (p.next_deadline(), last_release_ns) {
                let earliest = prev + half_period_ns;
                if d < earliest {
                    p.wait_until(earliest);
                }
            }
            let tick = p.wait_next();
            last_release_ns = Some(tick.released_ns);
            if tick.lateness_ns > framepipe_clock::DEFAULT_LATE_THRESHOLD_NS {
                shared.counters.late.fetch_add(1, Ordering::Relaxed);
            }
            // The worst lateness of each whole second, for live displays (two atomic
            // stores a second).
            if tick.released_ns - peak_window.0 >= 1_000_000_000 {
                let us = (peak_window.1.max(0) / 1000) as u64;
                shared
                    .counters
                    .lateness_peak_us
                    .store(us, Ordering::Relaxed);
                peak_window = (tick.released_ns, 0);
            }
            peak_window.1 = peak_window.1.max(tick.lateness_ns);
            if frame_late && !live_policy {
                // Slow policy: the pipeline could not keep up; the clock slips to this frame
                // instead of hurrying the next.
                p.slip_to(tick.released_ns);
            }
        }

        // 5. The sink.
        let PortItem {
            slot,
            ctx,
            frame,
            version,
            ..
        } = token;
        let started = std::time::Instant::now();
        shared.mark_running(out_slot, Some(sink_stage));
        let result = guard(&sink_name, || sink.consume(&ctx, &frame));
        shared.mark_running(out_slot, None);
        sink_counter.record(started.elapsed());
        if result.is_ok() && port == 0 {
            shared.counters.frames_out.fetch_add(1, Ordering::Relaxed);
        }
        if live_policy && pacer.is_some() {
            last = Some((ctx, frame));
        } else {
            drop(frame);
        }
        let failed = result.is_err();
        released_seq = Some(ctx.seq);
        done = Some((slot, version, result));
        if failed {
            break;
        }
    }
    if let Some((slot, v, r)) = done.take() {
        shared.lock_output().sink_done(shared, port, slot, v, r);
    }
    // An edit built but not switched in before the end: say so.
    if let Some(reader) = commands.as_mut() {
        let (pending, switched) = {
            let mut st = shared.lock_output();
            (st.pending.take(), st.switched.take())
        };
        let in_state = pending.is_some() || switched.is_some();
        if let Some(p) = pending.and_then(|mut p| p.posted.take()) {
            refuse(shared, reader, p, ENDED_BEFORE_EDIT.into());
        }
        // An edit still on the edit thread (being built, or built and not yet taken): its
        // answer is waited for (off the frame path: the run is over), so that it too gets a
        // reply. Dropping our sender lets the edit thread end after it.
        if let Some(l) = edits_link.take() {
            let EditLink { tx, rx, busy, .. } = l;
            drop(tx);
            if busy && !in_state {
                match rx.recv_timeout(crate::pipeline::JOIN_GRACE) {
                    Ok(FromEditor::Ready(mut p)) => {
                        if let Some(posted) = p.posted.take() {
                            refuse(shared, reader, posted, ENDED_BEFORE_EDIT.into());
                        }
                    }
                    Ok(FromEditor::Refused(p, reason)) => refuse(shared, reader, p, reason),
                    // The edit thread is stuck in an element's constructor: it is left
                    // running, detached (see `Prepared::run`).
                    Err(_) => {}
                }
            }
        }
        if let Some(mut sw) = switched {
            if let Some(p) = sw.posted.take() {
                reader.reply(p, Outcome::Applied { frame: sw.frame });
            }
        }
    }
    drop(last);
    drop(setup);
    let pacing = pacer.map(|p| PacingStats {
        target_fps: p.rate().as_f64(),
        overload: options.overload,
        lateness: p.stats().summary(),
        realtime,
        cpu_share: cpu.share(),
        latency_budget_ms: budget.map_or(0.0, |b| b as f64 / 1e6),
        frames_ahead: budget.map_or(0, |b| {
            usize::try_from(b.div_ceil(period_ns.max(1)))
                .unwrap_or(usize::MAX)
                .min(ver.topo.cap)
        }),
        frame_latency_ms: window.max().map_or(0.0, |ns| ns as f64 / 1e6),
    });
    (pacing, Ok(()))
}

/// Parameter edits waiting to be assigned, with their commands (answered once assigned).
/// Both vectors have room for [`EDIT_BATCH`] from the start.
struct Batch<'a> {
    edits: &'a mut Vec<Edit>,
    posted: &'a mut Vec<Posted>,
}

/// Applies the commands pending now: transport ones here, answered with `boundary` (the next
/// frame to be released); parameter ones are resolved (parsed, checked) here, without any
/// lock, then assigned together under the live lock, so that every command read at one
/// boundary applies from the same frame, the one its reply names. Old values are dropped,
/// rejections reported and replies sent with no lock held. A `stop` ends the reading: what is
/// queued after it is refused when the reader is dropped at the end of the run. Returns
/// whether `stop` was read.
fn apply_commands(
    shared: &Shared,
    ver: &Version,
    reader: &mut CommandReader,
    mut link: Option<&mut EditLink>,
    transport: &mut Transport,
    batch: &mut Batch<'_>,
    boundary: u64,
) -> bool {
    let pending = reader.pending();
    let mut stop = false;
    for _ in 0..pending {
        let Some(p) = reader.pop() else { break };
        if let Command::Edit(_) = &p.command {
            // Built on the edit thread, switched in at a frame boundary; answered then.
            let refused = match link.as_deref_mut() {
                None => Some("live edits are not available in this run"),
                Some(l) if l.busy => {
                    Some("another edit is being prepared; send this one once it is answered")
                }
                Some(l) => match l.tx.try_send(ToEditor::Build(p)) {
                    Ok(()) => {
                        l.busy = true;
                        continue;
                    }
                    Err(
                        std::sync::mpsc::TrySendError::Full(msg)
                        | std::sync::mpsc::TrySendError::Disconnected(msg),
                    ) => {
                        if let ToEditor::Build(back) = msg {
                            let reason = "the edit thread is not taking edits";
                            refuse(shared, reader, back, reason.into());
                        }
                        continue;
                    }
                },
            };
            if let Some(reason) = refused {
                refuse(shared, reader, p, reason.into());
            }
            continue;
        }
        if let Command::Batch(cmds) = &p.command {
            let n = cmds.len();
            apply_batch(shared, ver, reader, transport, batch, p, n);
            continue;
        }
        if transport.apply(&p.command) {
            stop = matches!(p.command, Command::Stop);
            reader.reply(p, Outcome::Applied { frame: boundary });
            if stop {
                break;
            }
            continue;
        }
        match ver.live_spec.resolve(&p.command) {
            Ok(edit) => {
                if batch.edits.len() == batch.edits.capacity() {
                    assign_edits(shared, ver.number, reader, batch);
                }
                batch.edits.push(edit);
                batch.posted.push(p);
            }
            Err(reason) => refuse(shared, reader, p, reason),
        }
    }
    assign_edits(shared, ver.number, reader, batch);
    stop
}

/// A [`Command::Batch`]: every parameter command in it is resolved first; if one is refused,
/// the whole batch is (with that command's reason) and nothing of it applies. Otherwise its
/// transport commands apply now and its edits join the ones assigned at this boundary, so that
/// all of it is seen from the same frame (the one its reply names).
fn apply_batch(
    shared: &Shared,
    ver: &Version,
    reader: &mut CommandReader,
    transport: &mut Transport,
    batch: &mut Batch<'_>,
    p: Posted,
    n: usize,
) {
    let Command::Batch(cmds) = &p.command else {
        unreachable!("apply_batch takes a batch");
    };
    // Room for all of it in this assignment (a batch has at most MAX_BATCH commands, and the
    // buffer holds EDIT_BATCH >= MAX_BATCH, so this never grows it).
    if batch.edits.len() + n > batch.edits.capacity() {
        assign_edits(shared, ver.number, reader, batch);
    }
    let start = batch.edits.len();
    let mut refused = None;
    for c in cmds {
        if matches!(c, Command::Pause | Command::Resume | Command::Step(_)) {
            continue;
        }
        match ver.live_spec.resolve(c) {
            Ok(edit) => batch.edits.push(edit),
            Err(reason) => {
                refused = Some(format!("{c}: {reason}"));
                break;
            }
        }
    }
    if let Some(reason) = refused {
        batch.edits.truncate(start);
        refuse(shared, reader, p, reason);
        return;
    }
    for c in cmds {
        transport.apply(c);
    }
    batch.posted.push(p);
}

/// Assigns the batch's edits under the live lock, noting the first frame that will see them;
/// after unlocking, the old values they then hold are dropped and their commands answered with
/// that frame.
///
/// The edits were resolved (node and property indices) against graph version `version`; if a
/// live edit switched versions since (another thread may make the switch between the output
/// thread's look at the version and this), they would name other nodes, or none: they are
/// refused instead.
fn assign_edits(shared: &Shared, version: u64, reader: &mut CommandReader, batch: &mut Batch<'_>) {
    if batch.edits.is_empty() {
        return;
    }
    let frame = {
        let mut live = shared.live.lock();
        if live.version == version {
            for e in batch.edits.iter_mut() {
                live.apply(e);
            }
            let mbpm = (live.tempo() * 1000.0).round() as u64;
            shared.counters.tempo_mbpm.store(mbpm, Ordering::Relaxed);
            Some(live.next_frame())
        } else {
            None
        }
    };
    batch.edits.clear();
    for p in batch.posted.drain(..) {
        let outcome = match frame {
            Some(frame) => Outcome::Applied { frame },
            None => Outcome::Refused {
                reason: "the graph changed (a live edit) while this command was read; send it \
                         again"
                    .into(),
            },
        };
        reader.reply(p, outcome);
    }
}

/// Refuses a command: reported as an event (for a caller without a reply printer) and
/// answered with `reason`. Every refusal of the output thread goes through here.
fn refuse(shared: &Shared, reader: &mut CommandReader, p: Posted, reason: String) {
    shared.emit(Event::CommandRejected {
        command: p.command.to_string(),
        reason: reason.clone(),
    });
    reader.reply(
        p,
        Outcome::Refused {
            reason: reason.into(),
        },
    );
}

/// Reports, once per stage, a stage that has been running one frame for longer than `stall_ns`.
fn check_stalls(shared: &Shared, ver: &Version, stall_ns: u64, now: i64) {
    // A follower output thread (stall `u64::MAX`) leaves stall reports to the master's.
    let Ok(stall_ns) = i64::try_from(stall_ns) else {
        return;
    };
    for (stage, since) in &shared.running {
        let s = stage.load(Ordering::Acquire);
        if s == 0 {
            continue;
        }
        let elapsed = now - since.load(Ordering::Relaxed);
        // (A job of the version before a live edit may name a node this one lacks.)
        let Some(counter) = ver.stages.get(s - 1) else {
            continue;
        };
        if elapsed > stall_ns && !counter.stall_reported.swap(true, Ordering::Relaxed) {
            shared.emit(Event::Stalled {
                stage: counter.name.clone(),
                elapsed_ms: (elapsed / 1_000_000) as u64,
            });
        }
    }
}
