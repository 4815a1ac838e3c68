//! The output thread: the one thread that releases frames to the sink.
//!
//! It is the thread that called [`Prepared::run`](crate::Prepared::run), so it adds no thread
//! to the process. Once per frame boundary it reads the command queue (lock-free), applies
//! transport commands itself and parameter commands to the live state (they reach every frame
//! whose node has not started yet: a node samples its values when it starts a frame, see
//! `crate::live`), and answers each command on the queue's return path (lock-free, no
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

mod deliver;
mod drive;
mod gate;
mod master;
mod pace;
mod stalls;
mod standby;

use std::sync::Arc;
use std::time::Duration;

use framepipe_clock::{now_ns, CpuMeter, Pacer};
use framepipe_control::{CommandReader, Outcome, Posted, Release, Transport};
use framepipe_core::{Error, Frame, FrameCtx, Result, Sink};

use crate::edit::{EditLink, FromEditor};
use crate::live::Set;
use crate::model::{Options, Overload};
use crate::sched::{PortItem, Shared, Version};
use crate::stats::{LateLog, PacingStats};

use gate::{latency_budget, LatencyWindow, Margin};
use master::{refuse, Of, EDIT_BATCH, ENDED_BEFORE_EDIT};
use pace::{on_grid, Raise, ALLOWED_KEPT};
use stalls::check_stalls;

pub(crate) use drive::run_output;
pub(crate) use gate::HOST_MIN_MARGIN_NS;
pub(crate) use standby::{possible as standby_possible, Watch};

/// How often the output thread looks at stalls while it has nothing else to do. Commands do not
/// wait for it: a post raises the master port's signal (the command queue's waker), which
/// wakes the output thread (in a host, has the clock thread poll the show). It was 2 ms when
/// commands were polled: 20 wake-ups a frame at 25 fps, for nothing most of the time.
/// The same in a host (the clock thread polls the show then).
const POLL: Duration = Duration::from_millis(50);

/// What an [`Output`] asks of whoever drives it, after one [`Output::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Poll again at once (a frame was released, a command or an edit is waiting).
    Again,
    /// A frame is due at this deadline (`CLOCK_MONOTONIC` ns): poll again then, and not
    /// before; the driver sleeps, then spins the last stretch.
    Deadline(i64),
    /// Nothing to do before this time, or before the port's signal (a frame ready, the end, a
    /// command posted), whichever comes first: no precision needed.
    Wait(i64),
    /// The output loop is over: call [`Output::finish`].
    Done,
}

/// A frame taken for release, waiting for its deadline.
struct Due {
    item: PortItem,
    /// Whether it was ready only after its deadline (the pipeline could not keep up).
    frame_late: bool,
    /// When it may be released (its deadline, or later to avoid a burst).
    at: i64,
}

/// The output loop of one sink port as a state machine: [`poll`](Self::poll) does everything
/// that can be done now without waiting and says what to wait for. [`run_output`] drives one
/// on its own thread (the single-show run); a [`Host`](crate::Host)'s clock thread drives the
/// master outputs of every show.
///
/// Per frame it takes the scheduler lock once when the next frame is already waiting: in that
/// one critical section it returns the previous frame (the sink stage's bookkeeping) and takes
/// the next. Otherwise the driver waits for the workers' signal without the lock (a flag and an
/// unpark, see `PortSignal`) and the next poll takes the lock once more.
pub(crate) struct Output {
    port: usize,
    /// This output's slot in `Shared::running` (after the workers').
    out_slot: usize,
    commands: Option<CommandReader>,
    edits_link: Option<EditLink>,
    options: Options,
    stall_ns: u64,
    /// The graph version this output last looked at (re-read, under the lock it takes anyway,
    /// when `Shared::version` says a live edit switched), and its sink node's counters.
    ver: Arc<Version>,
    sink_stage: usize,
    sink_counter: Arc<crate::stats::StageCounters>,
    sink_name: Arc<str>,
    live_policy: bool,
    pacer: Option<Pacer>,
    /// Paced, in a host: the grid its deadlines are on, `anchor + phase + k * period` (the
    /// host spreads its shows' groups over the period; the shows of a group share one grid).
    /// `None`: the first deadline is when the first frame is taken.
    grid: Option<(i64, i64)>,
    realtime: bool,
    half_period_ns: i64,
    last_release_ns: Option<i64>,
    /// (start of the current second, worst lateness in it so far), ns.
    peak_window: (i64, i64),
    late_log: LateLog,
    cpu: CpuMeter,
    transport: Transport,
    last: Option<(FrameCtx, Frame)>,
    edits: Vec<Set>,
    /// The commands of `edits`, answered once assigned.
    edited: Vec<Posted>,
    /// Per command of `edited`: how many of `edits` are its, and whether it is refused (its
    /// node ended by the armed live edit: the fate and the switch frame).
    edited_of: Vec<Of>,
    /// The nodes the last live edit removed, and its first frame: a command naming one is
    /// refused saying so.
    removed: (Vec<Arc<str>>, u64),
    /// The outcome of the frame last given to the sink (its slot), returned to the scheduler in
    /// the next critical section (with the taking of the next frame).
    done: Option<(usize, u64, Result<()>)>,
    /// Paced master: frames begin just in time (see `Options::latency_ns`).
    gate: bool,
    period_ns: u64,
    window: LatencyWindow,
    /// When the first frame was released (frames begun since were held back by the budget).
    gate_opened_ns: Option<i64>,
    /// The default budget's adaptive margin, fed with each frame's slack.
    margin: Margin,
    /// When the margin last saw a frame (its deadline, ns).
    margin_seen: Option<i64>,
    released_seq: Option<u64>,
    budget: Option<u64>,
    /// When the next frame may begin (a paced master wakes up then to let it); set where the
    /// output takes the lock for the next frame.
    begin_at: Option<i64>,
    /// A frame held back while paused (still in flight; the sink's turn is taken).
    held: Option<PortItem>,
    due: Option<Due>,
    ended: bool,
    /// How often it looks at commands and stalls while it waits for a frame (or is paused).
    poll_ns: i64,
    /// Added to the latency budget when letting frames begin: how late the driver may wake up
    /// for a frame's beginning (a host rounds such wake-ups up to a grid).
    begin_slack_ns: u64,
    /// The begin limit's last raises: (limit, when, the budget then), a ring
    /// ([`ALLOWED_KEPT`]).
    allowed: [Raise; ALLOWED_KEPT],
    allowed_n: usize,
    /// The master's repeat count when it armed the last live edit.
    edit_repeats_at_arm: u64,
    /// A live edit handed to the edit thread: when (monotonic ns) and the repeat count then,
    /// until it comes back built (`Counters::record_edit_build`).
    edit_sent: Option<(i64, u64)>,
    /// A live edit switched in: (its first frame, its drain in ns, the repeat count when it
    /// was armed), until that frame is released (`Counters::record_edit`).
    edit_watch: Option<(u64, i64, u64)>,
    /// The master: a live edit switched in and was answered; what it replaced is not yet
    /// handed to the edit thread (an overlapping switch's replaced version still finishes its
    /// frames): looked for at every boundary until then.
    retire_due: bool,
}

impl Output {
    /// The output of sink port `port` (0: the master, which reads `commands` and answers
    /// edits; the others follow it unpaced). `realtime`: whether the driving thread runs under
    /// `SCHED_FIFO` (for the figures). A rate the frame clock cannot pace stops the run.
    pub(crate) fn new(
        shared: &Shared,
        port: usize,
        commands: Option<CommandReader>,
        edits_link: Option<EditLink>,
        options: Options,
        stall_ns: u64,
        realtime: bool,
    ) -> Result<Self> {
        let (ver, sink_stage) = {
            let st = shared.lock();
            (Arc::clone(&st.ver), st.ports[port].node)
        };
        let sink_counter = Arc::clone(&ver.stages[sink_stage]);
        let sink_name = sink_counter.name.clone();
        let pacer = match options.pace.map(Pacer::new).transpose() {
            Ok(p) => p,
            Err(e) => {
                let mut st = shared.lock();
                st.stop();
                st.after_change(shared);
                return Err(Error::from(e));
            }
        };
        let period_ns = pacer.as_ref().map_or(0, |p| p.period_ns());
        if let Some(reader) = commands.as_ref().filter(|_| port == 0) {
            // A post wakes the master output thread (in a host, the clock thread for this
            // show): commands are not polled.
            let signal = Arc::clone(&shared.port_signals[0]);
            reader.set_waker(move || signal.raise());
        }
        if port == 0 {
            shared.counters.set_realtime(realtime);
        }
        Ok(Output {
            port,
            out_slot: shared.threads + port,
            commands,
            edits_link,
            options,
            stall_ns,
            ver,
            sink_stage,
            sink_counter,
            sink_name,
            live_policy: options.overload == Overload::Live,
            gate: port == 0 && pacer.is_some(),
            half_period_ns: period_ns as i64 / 2,
            pacer,
            grid: None,
            realtime,
            last_release_ns: None,
            peak_window: (now_ns(), 0),
            late_log: LateLog::default(),
            cpu: CpuMeter::start(),
            transport: Transport::new(),
            last: None,
            edits: Vec::with_capacity(EDIT_BATCH),
            edited: Vec::with_capacity(EDIT_BATCH),
            edited_of: Vec::with_capacity(EDIT_BATCH),
            removed: (Vec::new(), 0),
            done: None,
            period_ns,
            window: LatencyWindow::default(),
            gate_opened_ns: None,
            margin: Margin::new(period_ns),
            margin_seen: None,
            released_seq: None,
            budget: None,
            begin_at: None,
            held: None,
            due: None,
            ended: false,
            poll_ns: POLL.as_nanos() as i64,
            begin_slack_ns: 0,
            allowed: [(0, 0, 0); ALLOWED_KEPT],
            allowed_n: 0,
            edit_repeats_at_arm: 0,
            edit_sent: None,
            edit_watch: None,
            retire_due: false,
        })
    }

    /// Paced: puts the deadlines on the grid `anchor + phase + k * period` (the first one at
    /// or after the first frame is taken): a host puts the shows of a group on one grid, and
    /// spreads the groups over the period, so that their deadlines share wake-ups without all
    /// falling together.
    pub(crate) fn set_grid(&mut self, anchor: i64, phase_ns: i64) {
        self.grid = Some((anchor, phase_ns.max(0)));
    }

    /// The default budget's adaptive margin never goes below `floor` (a show in a host:
    /// [`HOST_MIN_MARGIN_NS`]). Before the first frame only.
    pub(crate) fn set_margin_floor(&mut self, floor: Duration) {
        self.margin = Margin::with_floor(self.period_ns, floor.as_nanos() as u64);
    }

    /// Frames begin this much earlier than the latency budget says: the driver wakes up that
    /// late for a beginning (a host rounds such wake-ups up to its grid).
    pub(crate) fn set_begin_slack(&mut self, slack: Duration) {
        self.begin_slack_ns = slack.as_nanos() as u64;
    }

    /// The frame clock of a paced output (the driver sleeps and spins with its margin).
    pub(crate) fn pacer_mut(&mut self) -> Option<&mut Pacer> {
        self.pacer.as_mut()
    }

    /// Does what can be done now (commands, taking the next frame, releasing a frame whose
    /// deadline has come, giving it to the sink) and says what to wait for next.
    pub(crate) fn poll(&mut self, shared: &Shared, sink: &mut dyn Sink, now: i64) -> Next {
        if self.ended {
            return Next::Done;
        }
        if let Some(at) = self.due.as_ref().map(|d| d.at) {
            if now < at {
                // The next frames may have to begin before this one is released (a budget
                // longer than the time to its deadline): wake up for that first.
                if self.begin_at.is_some_and(|b| now >= b) {
                    let mut st = shared.lock_output();
                    self.let_begin(shared, &mut st, now);
                }
                if let Some(b) = self.begin_at.filter(|&b| b > now && b < at) {
                    return Next::Wait(b);
                }
                return Next::Deadline(at);
            }
            let due = self.due.take().expect("checked");
            return self.release(shared, sink, due);
        }

        // 1. Commands, once per frame boundary (and while waiting for a frame). The master's
        //    signal is cleared first: in a host a raise queues the show for the clock thread
        //    only while it is clear, and a paused show never gets to `take` (which clears it
        //    too), so a `resume` posted after any other raise would wait for the next poll.
        if self.port == 0 {
            shared.port_signals[0].take();
        }
        if self.read_commands(shared) {
            // At once, even while waiting for a frame that does not come (a blocked source, a
            // pause): every frame the sink got was whole; no new frame is started; the frames
            // in flight go back to their pools.
            drop(self.held.take());
            let mut st = shared.lock_output();
            if let Some((slot, v, r)) = self.done.take() {
                st.sink_done(shared, self.port, slot, v, r);
            }
            st.stop();
            st.after_change(shared);
            self.ended = true;
            return Next::Done;
        }

        // 2. The next frame in order (or the end). Under the live policy, the previous frame is
        //    shown again at deadlines that pass meanwhile; stalls are noticed while waiting.
        let item = match self.held.take() {
            Some(t) => t,
            None => match self.take(shared, sink, now) {
                Ok(Some(t)) => t,
                Ok(None) => {
                    self.ended = true;
                    return Next::Done;
                }
                Err(next) => return next,
            },
        };
        if self.gate {
            let held_back = self.gate_opened_ns.is_some_and(|t| item.begun_ns >= t);
            self.window.push(item.ready_ns - item.begun_ns, held_back);
            self.budget = latency_budget(self.options.latency_ns, &self.window, &self.margin);
            shared
                .counters
                .set_latency_budget_us(self.budget.unwrap_or(0) / 1000);
        }

        // 3. Release it, or hold it while paused.
        match self.transport.at_boundary() {
            Release::Go => {}
            Release::GoAfterPause => {
                let at = self.on_grid(now);
                if let Some(p) = self.pacer.as_mut() {
                    p.resync(at);
                }
            }
            Release::Hold => {
                self.held = Some(item);
                check_stalls(
                    shared,
                    &self.ver,
                    self.stall_ns,
                    now,
                    self.released_seq.is_some(),
                );
                // A command (`resume`) raises the port's signal.
                return Next::Wait(now + self.poll_ns);
            }
            Release::Stop => {
                drop(item);
                let mut st = shared.lock_output();
                st.stop();
                st.after_change(shared);
                self.ended = true;
                return Next::Done;
            }
        }

        // 4. Its deadline.
        let Some(p) = self.pacer.as_mut() else {
            return self.release(
                shared,
                sink,
                Due {
                    item,
                    frame_late: false,
                    at: now,
                },
            );
        };
        if p.next_deadline().is_none() {
            let origin = on_grid(self.grid, self.period_ns, now);
            p.start_at(origin);
        }
        if self.live_policy {
            let skipped = p.skip_missed(now);
            for _ in 0..skipped {
                p.stats_mut().record_repeat();
            }
            shared.counters.count_repeats(skipped);
        }
        let d = p.next_deadline().expect("started");
        // Was the frame itself late (ready only after its deadline)? Judged by when it reached
        // the sink stage, not when this output looked, so that a preempted output thread does
        // not pass for an overloaded pipeline.
        let frame_late = item.ready_ns > d + framepipe_clock::DEFAULT_LATE_THRESHOLD_NS;
        // Its slack feeds the default budget's margin, once frames are held back (the warm-up
        // and a pause's held frame say nothing about how early a frame must begin).
        if self.gate && self.released_seq.is_some() && self.options.latency_ns == 0 {
            // At most two periods: a pause is not a quiet spell.
            let elapsed = self
                .margin_seen
                .map_or(0, |t| ((d - t).max(0) as u64).min(2 * self.period_ns));
            self.margin.observe(d - item.ready_ns, elapsed);
            self.margin_seen = Some(d);
            shared
                .counters
                .set_latency_margin_us(self.margin.ns() / 1000);
        }
        // After the driver lost the CPU, deadlines may already have passed: keep the grid (no
        // drift) but release no closer than half a period after the previous frame, so the
        // output catches up without a burst.
        let at = match self.last_release_ns {
            Some(prev) => d.max(prev + self.half_period_ns),
            None => d,
        };
        let due = Due {
            item,
            frame_late,
            at,
        };
        if now < at {
            self.due = Some(due);
            return Next::Deadline(at);
        }
        self.release(shared, sink, due)
    }

    /// Ends the output: returns the last frame's outcome to the scheduler, answers an edit the
    /// end overtook, and gives the frame clock's figures.
    pub(crate) fn finish(mut self, shared: &Shared) -> (Option<PacingStats>, Result<()>) {
        drop(self.due.take());
        drop(self.held.take());
        if let Some((slot, v, r)) = self.done.take() {
            shared
                .lock_output()
                .sink_done(shared, self.port, slot, v, r);
        }
        // An edit built but not switched in before the end: say so.
        if let Some(reader) = self.commands.as_mut() {
            let (pending, switched, news) = {
                let mut st = shared.lock_output();
                (st.pending.take(), st.switched.take(), st.news.take())
            };
            // (An edit answered whose replaced version had not finished: nothing to wait for.)
            let in_state =
                pending.is_some() || switched.is_some() || news.is_some() || self.retire_due;
            if let Some(p) = pending.and_then(|mut p| p.posted.take()) {
                refuse(shared, reader, p, ENDED_BEFORE_EDIT.into());
            }
            // An edit still on the edit thread (being built, or built and not yet taken): its
            // answer is waited for (off the frame path: the run is over), so that it too gets
            // a reply. Dropping our sender lets the edit thread end after it.
            if let Some(l) = self.edits_link.take() {
                let EditLink { tx, rx, busy, .. } = l;
                drop(tx);
                if busy && !in_state {
                    match rx.recv_timeout(crate::model::JOIN_GRACE) {
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
            if let Some(news) = news {
                if let Some(p) = news.posted {
                    reader.reply(p, Outcome::Applied { frame: news.frame });
                }
            }
            drop(switched);
        }
        drop(self.last.take());
        let budget = self.budget;
        let period_ns = self.period_ns;
        let cap = self.ver.topo.cap;
        let pacing = self.pacer.map(|p| PacingStats {
            target_fps: p.rate().as_f64(),
            overload: self.options.overload,
            lateness: p.stats().summary(),
            realtime: self.realtime,
            cpu_share: self.cpu.share(),
            latency_budget_ms: budget.map_or(0.0, |b| b as f64 / 1e6),
            frames_ahead: budget.map_or(0, |b| {
                usize::try_from(b.div_ceil(period_ns.max(1)))
                    .unwrap_or(usize::MAX)
                    .min(cap)
            }),
            frame_latency_ms: self.window.max().map_or(0.0, |ns| ns as f64 / 1e6),
            latency_margin_ms: self.margin.ns() as f64 / 1e6,
            latency_margin_peak_ms: self.margin.peak_ns() as f64 / 1e6,
            late_log: self.late_log,
            standby_rescued: None,
        });
        (pacing, Ok(()))
    }
}
