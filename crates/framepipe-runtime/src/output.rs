//! The output thread: the one thread that releases frames to the sink.
//!
//! It is the thread that called [`Prepared::run`](crate::Prepared::run), so it adds no thread
//! to the process. Once per frame boundary it reads the command queue (lock-free), applies
//! transport commands itself and parameter commands to the live state (they reach every frame
//! whose node has not started yet: a node samples its values when it starts a frame, see
//! live.rs), and answers each command on the queue's return path (lock-free, no
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

use crate::budget::Margin;
use crate::edit::{EditLink, FromEditor, ToEditor};
use crate::events::Event;
use crate::live::{Edit, Fate};
use crate::pipeline::{Options, Overload};
use crate::sched::{PortItem, Shared, Version};
use crate::worker::guard;

/// How often the output thread looks at stalls while it has nothing else to do. Commands do not
/// wait for it: a post raises the master port's signal (the command queue's waker), which
/// wakes the output thread (in a host, has the clock thread poll the show). It was 2 ms when
/// commands were polled: 20 wake-ups a frame at 25 fps, for nothing most of the time.
/// The same in a host (the clock thread polls the show then).
const POLL: Duration = Duration::from_millis(50);

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
    /// The default budget's adaptive margin at the end of the run (ms; see `budget.rs`): what
    /// the budget adds to the graph's latency and a quarter of it.
    pub latency_margin_ms: f64,
    /// The largest the adaptive margin was during the run (ms).
    pub latency_margin_peak_ms: f64,
    /// The last late frames: when each was due and how late it left, to find what made them
    /// late (a pause, an edit, another process at that moment).
    pub late_log: LateLog,
    /// Frames the standby thread released because the output thread had not 0.25 ms after
    /// their deadline (`None`: no standby; see `standby.rs`).
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

/// When the master output last raised the begin limit: (the limit, when, the budget then),
/// the latest [`ALLOWED_KEPT`], to say when a late frame was let begin.
const ALLOWED_KEPT: usize = 8;

/// One raise of the begin limit: (the limit, when, the budget then).
type Raise = (u64, i64, u64);

/// When frame `seq` was let begin and the budget then, from the ring `allowed` of the begin
/// limit's last raises (`n` raises so far, the latest [`ALLOWED_KEPT`] kept): the earliest kept
/// raise to `seq` or beyond, if the raise before it (kept too) was below `seq`.
fn allowed_at(allowed: &[Raise; ALLOWED_KEPT], n: usize, seq: u64) -> Option<(i64, u64)> {
    let k = n.min(ALLOWED_KEPT);
    let mut below = false;
    for i in n - k..n {
        let (limit, at, budget) = allowed[i % ALLOWED_KEPT];
        if limit >= seq {
            return below.then_some((at, budget));
        }
        below = true;
    }
    None
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

    fn push(&mut self, frame: LateFrame) {
        self.frames[(self.n % Self::CAP as u64) as usize] = frame;
        self.n += 1;
    }

    /// The kept late frames, oldest first.
    pub fn frames(&self) -> impl Iterator<Item = LateFrame> + '_ {
        let k = self.n.min(Self::CAP as u64);
        (self.n - k..self.n).map(|i| self.frames[(i % Self::CAP as u64) as usize])
    }
}

/// The last frames' latencies (beginning to ready at the master sink), without allocating.
///
/// The warm-up's frames (begun before the first release, when nothing is held back: every
/// frame in flight begun at once, each waiting behind the others) took far longer than a frame
/// held back does: counted, they kept the budget at several periods for the next 32 frames
/// (3.2 s at 10 fps; measured with `scripts/bench-control` on the 720p chain: commands waited
/// up to 3.4 periods for their frame then). So once [`HELD_ENOUGH`] frames begun held back
/// have come, the window forgets the warm-up's.
#[derive(Default)]
struct LatencyWindow {
    ns: [i64; 32],
    n: usize,
    /// Frames pushed that began held back (after the warm-up).
    held: usize,
}

/// Frames begun held back after which the warm-up's latencies no longer count.
const HELD_ENOUGH: usize = 4;

impl LatencyWindow {
    /// A frame's latency; `held_back`: it began after the warm-up (frames come in order: the
    /// warm-up's first).
    fn push(&mut self, ns: i64, held_back: bool) {
        self.ns[self.n % self.ns.len()] = ns.max(0);
        self.n += 1;
        self.held += usize::from(held_back);
    }

    /// The slowest of the last frames (of those begun held back, once there are enough).
    fn max(&self) -> Option<i64> {
        let mut k = self.n.min(self.ns.len());
        if self.held >= HELD_ENOUGH {
            k = k.min(self.held);
        }
        (self.n - k..self.n)
            .map(|i| self.ns[i % self.ns.len()])
            .max()
    }
}

/// How long before its deadline a frame begins, in a paced run: the asked latency, or by
/// default the measured one with a margin (see [`crate::budget::default_budget`]: a quarter
/// of it and the adaptive margin). `None` (no limit) until a latency is known.
fn latency_budget(asked_ns: u64, window: &LatencyWindow, margin: &Margin) -> Option<u64> {
    if asked_ns > 0 {
        return Some(asked_ns);
    }
    let max = window.max()? as u64;
    Some(crate::budget::default_budget(max, margin.ns()))
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

/// The first time at or after `t` on the grid `anchor + phase + k * period` (`t` itself without
/// a grid).
fn on_grid(grid: Option<(i64, i64)>, period_ns: u64, t: i64) -> i64 {
    match grid {
        None => t,
        Some((anchor, phase)) => {
            let first = anchor + phase;
            let period = period_ns.max(1) as i64;
            first + ((t - first).max(0) + period - 1) / period * period
        }
    }
}

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
    edits: Vec<Edit>,
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
            (Arc::clone(st.running_version()), st.sink_node(port))
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
            shared.counters.realtime.store(realtime, Ordering::Relaxed);
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
    /// [`crate::budget::HOST_MIN_MARGIN_NS`]). Before the first frame only.
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
                .latency_budget_us
                .store(self.budget.unwrap_or(0) / 1000, Ordering::Relaxed);
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
            shared
                .counters
                .repeated
                .fetch_add(skipped, Ordering::Relaxed);
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
                .latency_margin_us
                .store(self.margin.ns() / 1000, Ordering::Relaxed);
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

    /// Paced master: lets begin every frame whose deadline is within the budget (raising the
    /// scheduler's begin limit) and notes when the next one may (`begin_at`).
    fn let_begin(&mut self, shared: &Shared, st: &mut crate::sched::Locked<'_>, now: i64) {
        self.begin_at = None;
        if let (true, Some(seq), Some(b), Some(d)) = (
            self.gate,
            self.released_seq,
            self.budget,
            self.pacer.as_ref().and_then(|p| p.next_deadline()),
        ) {
            let budget = b;
            // A host rounds this output's wake-ups up to its grid: begin that much earlier.
            let b = b.saturating_add(self.begin_slack_ns);
            let limit = begin_limit(seq, d, self.period_ns, b, now);
            if limit > st.begin_limit() || st.begin_limit() == u64::MAX {
                st.allow_begin_until(limit);
                st.after_change(shared);
                self.allowed[self.allowed_n % ALLOWED_KEPT] = (limit, now, budget);
                self.allowed_n += 1;
            }
            self.begin_at = Some(next_begin_ns(seq, d, self.period_ns, b, st.begin_limit()));
        }
    }

    /// The first time at or after `t` on this output's deadline grid (`t` without one).
    fn on_grid(&self, t: i64) -> i64 {
        on_grid(self.grid, self.period_ns, t)
    }

    /// Reads the commands and the edit thread's answers; whether `stop` was read.
    fn read_commands(&mut self, shared: &Shared) -> bool {
        let port = self.port;
        // The edit thread's answer first: an edit armed now may switch at once, and the
        // commands read below must know it.
        if let (Some(l), Some(reader)) = (self.edits_link.as_mut(), self.commands.as_mut()) {
            match l.take() {
                Some(FromEditor::Ready(p)) => {
                    let repeated = shared.counters.repeated.load(Ordering::Relaxed);
                    self.edit_repeats_at_arm = repeated;
                    if let Some((sent_ns, at_send)) = self.edit_sent.take() {
                        let build_ns = now_ns() - sent_ns;
                        let repeats = repeated.saturating_sub(at_send);
                        shared.counters.record_edit_build(build_ns, repeats);
                    }
                    // (It may switch at once, e.g. in a paused show: the commands below are
                    // then read against the new version.)
                    let mut st = shared.lock_output();
                    st.arm_switch(p, shared);
                    st.after_change(shared);
                }
                Some(FromEditor::Refused(p, reason)) => {
                    l.busy = false;
                    self.edit_sent = None;
                    refuse(shared, reader, p, reason);
                }
                None => {}
            }
        }
        // A live edit switched versions: look at the new one (and, the master, answer the
        // edit and hand what the switch replaced to the edit thread).
        let changed = shared.running_version_number() != self.ver.number;
        if changed || self.retire_due {
            let mut st = shared.lock_output();
            if changed {
                self.ver = Arc::clone(st.running_version());
                self.sink_stage = st.sink_node(port);
            }
            let (news, switched) = if port == 0 {
                (st.take_switch_news(), st.take_replaced())
            } else {
                (None, None)
            };
            drop(st);
            if changed {
                self.sink_counter = Arc::clone(&self.ver.stages[self.sink_stage]);
            }
            // Answered at the switch (the next edit may be built then, against the new
            // version); what it replaced goes to the edit thread once its frames are done (at
            // once when the switch waited for them).
            if let Some(mut news) = news {
                shared.counters.set_stages(Arc::clone(&self.ver.stages));
                std::mem::swap(&mut self.removed.0, &mut news.removed);
                self.removed.1 = news.frame;
                self.edit_watch = Some((news.frame, news.drain_ns, self.edit_repeats_at_arm));
                if let (Some(p), Some(reader)) = (news.posted, self.commands.as_mut()) {
                    reader.reply(p, Outcome::Applied { frame: news.frame });
                }
                if let Some(l) = self.edits_link.as_mut() {
                    l.busy = false;
                    // Full (cannot be: see the channel's size): dropped here instead.
                    let _ = l.tx.try_send(ToEditor::Switched {
                        frame: news.frame,
                        graph_view: news.graph_view,
                        dropped: news.removed,
                    });
                }
                self.retire_due = true;
            }
            if let Some(sw) = switched {
                self.retire_due = false;
                if let Some(l) = self.edits_link.as_mut() {
                    let _ = l.tx.try_send(ToEditor::Bury(sw));
                }
            }
        }
        let mut stop = false;
        if let Some(reader) = self.commands.as_mut() {
            // The boundary is named by the next frame to be released (see `Outcome::Applied`).
            let boundary = self.released_seq.map_or(0, |s| s + 1);
            let mut batch = Batch {
                edits: &mut self.edits,
                posted: &mut self.edited,
                of: &mut self.edited_of,
                removed: (&self.removed.0, self.removed.1),
            };
            let building = self.edits_link.as_ref().is_some_and(|l| l.busy);
            stop = apply_commands(
                shared,
                &self.ver,
                reader,
                self.edits_link.as_mut(),
                &mut self.transport,
                &mut batch,
                boundary,
            );
            if !building && self.edits_link.as_ref().is_some_and(|l| l.busy) {
                let repeated = shared.counters.repeated.load(Ordering::Relaxed);
                self.edit_sent = Some((now_ns(), repeated));
            }
        }
        if port == 0 {
            shared
                .counters
                .paused
                .store(self.transport.is_paused(), Ordering::Relaxed);
        }
        stop
    }

    /// Takes the next frame when it is there: `Ok(Some)`; `Ok(None)` at the end; `Err(next)`:
    /// not yet, wait as `next` says (or poll again at once: a command, an edit, the time to let
    /// the next frame begin, a repeat given to the sink).
    fn take(
        &mut self,
        shared: &Shared,
        sink: &mut dyn Sink,
        now: i64,
    ) -> std::result::Result<Option<PortItem>, Next> {
        let port = self.port;
        // A signal raised before this lock is seen in it; later ones raise it again.
        shared.port_signals[port].take();
        let mut st = shared.lock_output();
        self.let_begin(shared, &mut st, now);
        if let Some((slot, v, r)) = self.done.take() {
            st.sink_done(shared, port, slot, v, r);
        }
        let got = st.take_ready(port);
        let end = got.is_none() && st.finished();
        drop(st);
        if got.is_some() || end {
            return Ok(got);
        }
        check_stalls(
            shared,
            &self.ver,
            self.stall_ns,
            now,
            self.released_seq.is_some(),
        );
        if self.commands.as_ref().is_some_and(|r| r.pending() > 0)
            || self
                .edits_link
                .as_ref()
                .is_some_and(|l| l.ready.load(Ordering::Acquire))
            || shared.running_version_number() != self.ver.number
        {
            return Err(Next::Again);
        }
        let mut wake = now + self.poll_ns;
        if let Some(at) = self.begin_at {
            if now >= at {
                // The next frame's time to begin: read commands, then let it.
                return Err(Next::Again);
            }
            wake = wake.min(at);
        }
        if let (true, false, Some(p), Some((ctx, frame))) = (
            self.live_policy,
            self.transport.is_paused(),
            self.pacer.as_mut(),
            self.last.as_ref(),
        ) {
            if let Some(deadline) = p.next_deadline() {
                if now >= deadline {
                    // Nothing new at this deadline: show the previous frame again.
                    self.last_release_ns = Some(p.wait_next().released_ns);
                    p.stats_mut().record_repeat();
                    shared.counters.repeated.fetch_add(1, Ordering::Relaxed);
                    let sink_name = &self.sink_name;
                    let result = guard(sink_name, || sink.consume(ctx, frame));
                    // Look for the next frame (or the end) after every repeat: a repeat that
                    // outlasts a period must not lead straight to another one, or a slow sink
                    // would repeat for ever.
                    let mut st = shared.lock_output();
                    if let Err(e) = result {
                        st.fail(e);
                        st.after_change(shared);
                    }
                    let got = st.take_ready(port);
                    let end = got.is_none() && st.finished();
                    drop(st);
                    if got.is_some() || end {
                        return Ok(got);
                    }
                    return Err(Next::Again);
                }
                wake = wake.min(deadline);
            }
        }
        Err(Next::Wait(wake))
    }

    /// Releases a frame whose deadline has come (or an unpaced one): the frame clock's figures,
    /// then the sink.
    fn release(&mut self, shared: &Shared, sink: &mut dyn Sink, due: Due) -> Next {
        let Due {
            item, frame_late, ..
        } = due;
        let (ready_ns, begun_ns, seq) = (item.ready_ns, item.begun_ns, item.ctx.seq);
        if let Some(p) = self.pacer.as_mut() {
            // The deadline has passed (the driver waited for it): no wait here.
            let tick = p.wait_next();
            self.last_release_ns = Some(tick.released_ns);
            if tick.lateness_ns > framepipe_clock::DEFAULT_LATE_THRESHOLD_NS {
                shared.counters.late.fetch_add(1, Ordering::Relaxed);
                let allowed_at = allowed_at(&self.allowed, self.allowed_n, seq);
                let budget_ns = allowed_at
                    .map(|(_, b)| b)
                    .or(self.budget)
                    .unwrap_or(0)
                    .min(i64::MAX as u64) as i64;
                self.late_log.push(LateFrame {
                    deadline_ns: tick.deadline_ns,
                    lateness_ns: tick.lateness_ns,
                    ready_ns: ready_ns - tick.deadline_ns,
                    begun_ns: begun_ns - tick.deadline_ns,
                    budget_ns,
                    allowed_ns: allowed_at.map(|(t, _)| t - tick.deadline_ns),
                });
            }
            // The worst lateness of each whole second, for live displays (two atomic stores a
            // second).
            if tick.released_ns - self.peak_window.0 >= 1_000_000_000 {
                let us = (self.peak_window.1.max(0) / 1000) as u64;
                shared
                    .counters
                    .lateness_peak_us
                    .store(us, Ordering::Relaxed);
                self.peak_window = (tick.released_ns, 0);
            }
            self.peak_window.1 = self.peak_window.1.max(tick.lateness_ns);
            if frame_late && !self.live_policy {
                // Slow policy: the pipeline could not keep up; the clock slips to this frame
                // instead of hurrying the next (on a host's grid: to the grid's first time at
                // least half a period later, so the show stays with its group).
                match self.grid {
                    None => p.slip_to(tick.released_ns),
                    Some(_) => p.resync(on_grid(
                        self.grid,
                        self.period_ns,
                        tick.released_ns + self.half_period_ns,
                    )),
                }
            }
        }

        // 5. The sink.
        let PortItem {
            slot,
            ctx,
            frame,
            version,
            ..
        } = item;
        let started = std::time::Instant::now();
        shared.mark_running(self.out_slot, Some(self.sink_stage));
        let result = guard(&self.sink_name, || sink.consume(&ctx, &frame));
        shared.mark_running(self.out_slot, None);
        self.sink_counter.record(started.elapsed());
        if result.is_ok() && self.port == 0 {
            shared.counters.frames_out.fetch_add(1, Ordering::Relaxed);
        }
        if let Some((first, drain_ns, at_arm)) = self.edit_watch {
            if ctx.seq >= first {
                let repeats = shared
                    .counters
                    .repeated
                    .load(Ordering::Relaxed)
                    .saturating_sub(at_arm);
                shared.counters.record_edit(drain_ns, repeats);
                self.edit_watch = None;
            }
        }
        if self.live_policy && self.pacer.is_some() {
            self.last = Some((ctx, frame));
        } else {
            drop(frame);
        }
        let failed = result.is_err();
        self.released_seq = Some(ctx.seq);
        if self.gate_opened_ns.is_none() {
            self.gate_opened_ns = Some(now_ns());
        }
        self.done = Some((slot, version, result));
        if failed {
            self.ended = true;
            return Next::Done;
        }
        Next::Again
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
                (
                    st.take_next_version(),
                    st.take_replaced(),
                    st.take_switch_news(),
                )
            };
            // (An edit answered whose replaced version had not finished: nothing to wait for.)
            let in_state =
                pending.is_some() || switched.is_some() || news.is_some() || self.retire_due;
            if let Some(p) = pending.and_then(|mut p| p.take_posted()) {
                refuse(shared, reader, p, ENDED_BEFORE_EDIT.into());
            }
            // An edit still on the edit thread (being built, or built and not yet taken): its
            // answer is waited for (off the frame path: the run is over), so that it too gets
            // a reply. Dropping our sender lets the edit thread end after it.
            if let Some(l) = self.edits_link.take() {
                let EditLink { tx, rx, busy, .. } = l;
                drop(tx);
                if busy && !in_state {
                    match rx.recv_timeout(crate::pipeline::JOIN_GRACE) {
                        Ok(FromEditor::Ready(mut p)) => {
                            if let Some(posted) = p.take_posted() {
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
    if port == 0 && options.pace.is_some() && !options.no_standby && crate::standby::possible() {
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
    let watch = crate::standby::Watch::default();
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
                    let released = shared.counters.frames_out.load(Ordering::Relaxed);
                    let out = d.out.as_mut().expect("until the end");
                    let next = loop {
                        match out.poll(shared, &mut *d.sink, now_ns()) {
                            Next::Again => continue,
                            next => break next,
                        }
                    };
                    let served = shared
                        .counters
                        .frames_out
                        .load(Ordering::Relaxed)
                        .saturating_sub(released);
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

/// Per command waiting to be assigned: how many of the batch's edits are its, and whether it
/// is refused because the armed live edit ends its node before its frame (that node's stage,
/// the fate, the switch frame).
type Of = (usize, Option<(usize, Fate, u64)>);

/// Parameter edits waiting to be assigned, with their commands (answered once assigned).
/// Every vector has room for [`EDIT_BATCH`] from the start.
struct Batch<'a> {
    edits: &'a mut Vec<Edit>,
    posted: &'a mut Vec<Posted>,
    /// Per command of `posted`: how many of `edits` are its; whether it is refused.
    of: &'a mut Vec<Of>,
    /// The nodes the last live edit removed, and its first frame (for the refusals).
    removed: (&'a [Arc<str>], u64),
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
                        // The commands read before it are assigned first: the ones after it
                        // are those its switch carries into a node it replaces.
                        assign_edits(shared, ver, reader, batch);
                        shared.live.lock().edit_read();
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
                    assign_edits(shared, ver, reader, batch);
                }
                batch.edits.push(edit);
                batch.posted.push(p);
                batch.of.push((1, None));
            }
            Err(reason) => {
                let on_its_way = link.as_deref().is_some_and(|l| l.busy);
                let reason = not_yet(reason, &p.command, on_its_way, batch.removed);
                refuse(shared, reader, p, reason);
            }
        }
    }
    assign_edits(shared, ver, reader, batch);
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
        assign_edits(shared, ver, reader, batch);
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
    batch.of.push((batch.edits.len() - start, None));
}

/// Assigns the batch's edits under the live lock, from the first frame that can show all of
/// them: the latest of their stages' next frames (the next frame to begin for a clock
/// command), the stages behind it first sampling their current values for the frames in
/// between (`Live::catch_up`; see live.rs). After unlocking, the old values they then hold
/// are dropped and their commands answered with that frame.
///
/// The edits were resolved (node and property indices) against graph version `ver`; if a
/// live edit switched versions since (another thread may make the switch between the output
/// thread's look at the version and this), they would name other nodes, or none: they are
/// refused instead. A command on a node that the armed live edit removes (or replaces by
/// another element) is refused when that frame would be the switch's or later: no frame
/// would show it (`Live::gone`).
fn assign_edits(shared: &Shared, ver: &Version, reader: &mut CommandReader, batch: &mut Batch<'_>) {
    if batch.edits.is_empty() {
        return;
    }
    let (frame, next_frame) = {
        let mut live = shared.live.lock();
        let next_frame = live.next_frame();
        let frame = if live.version == ver.number {
            let first_of = |live: &crate::live::Live, of: &[Of]| {
                let mut k = 0;
                let mut first = None::<u64>;
                for &(n, gone) in of {
                    if gone.is_none() {
                        for e in &batch.edits[k..k + n] {
                            let f = live.first_frame_of(e);
                            first = Some(first.map_or(f, |g| g.max(f)));
                        }
                    }
                    k += n;
                }
                first
            };
            let mut first = first_of(&live, batch.of);
            if let Some(f) = first {
                // Commands on nodes the armed edit ends before that frame: refused.
                let mut k = 0;
                let mut any = false;
                for (n, gone) in batch.of.iter_mut() {
                    *gone = batch.edits[k..k + *n].iter().find_map(|e| {
                        let s = e.stage()?;
                        live.gone(s, f).map(|(fate, at)| (s, fate, at))
                    });
                    any |= gone.is_some();
                    k += *n;
                }
                if any {
                    first = first_of(&live, batch.of);
                }
            }
            if let Some(first) = first {
                let mut k = 0;
                for &(n, gone) in batch.of.iter() {
                    if gone.is_none() {
                        for e in batch.edits[k..k + n].iter_mut() {
                            if let Some(s) = e.stage() {
                                live.catch_up(s, first, &ver.snapshots, ver.topo.cap);
                                live.commanded(s, first);
                            }
                            live.apply(e);
                        }
                    }
                    k += n;
                }
                let mbpm = (live.tempo() * 1000.0).round() as u64;
                shared.counters.tempo_mbpm.store(mbpm, Ordering::Relaxed);
            }
            Some(first)
        } else {
            None
        };
        (frame, next_frame)
    };
    batch.edits.clear();
    for (p, (_, gone)) in batch.posted.drain(..).zip(batch.of.drain(..)) {
        match (frame, gone) {
            (Some(_), Some((s, fate, at))) => {
                let reason = crate::live::gone_reason(ver.live_spec.label(s), fate, at);
                refuse(shared, reader, p, reason);
            }
            // (None: only commands without edits are left, transport ones of a batch.)
            (Some(frame), None) => reader.reply(
                p,
                Outcome::Applied {
                    frame: frame.unwrap_or(next_frame),
                },
            ),
            (None, _) => reader.reply(
                p,
                Outcome::Refused {
                    reason: "the graph changed (a live edit) while this command was read; \
                             send it again"
                        .into(),
                },
            ),
        }
    }
}

/// A command's refusal `reason` when `command` names a node the running graph does not have:
/// one the last live edit removed (`ended`: their names, its first frame) is named so; else a
/// word on the live edit on its way (`on_its_way`), which may bring it.
fn not_yet(
    reason: String,
    command: &Command,
    on_its_way: bool,
    ended: (&[Arc<str>], u64),
) -> String {
    if !reason.starts_with("no element '") {
        return reason;
    }
    let named = match command {
        Command::Set { element, .. }
        | Command::Osc { element, .. }
        | Command::Unosc { element, .. }
        | Command::Bypass { element, .. } => match element {
            framepipe_control::Target::Name(n) => Some(n.as_str()),
            framepipe_control::Target::Index(_) => None,
        },
        _ => None,
    };
    if let Some(n) = named.filter(|n| ended.0.iter().any(|e| &**e == *n)) {
        return crate::live::gone_reason(n, crate::live::Fate::Removed, ended.1);
    }
    if on_its_way {
        format!(
            "{reason} (a live edit is on its way: a node it adds takes commands once it is \
             answered)"
        )
    } else {
        reason
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
/// Not before the show has started (`started`: its first frame released): the first frames
/// carry the start-up (a decoder's first frame, caches, pools), which is no stall.
fn check_stalls(shared: &Shared, ver: &Version, stall_ns: u64, now: i64, started: bool) {
    if !started {
        return;
    }
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

#[cfg(test)]
mod tests {
    use super::{
        allowed_at, latency_budget, on_grid, LateFrame, LateLog, LatencyWindow, ALLOWED_KEPT,
        HELD_ENOUGH,
    };
    use crate::budget::Margin;

    /// The default budget is the slowest recent frame's latency, a quarter, and the adaptive
    /// margin as it is now (grown by a late frame); `--latency` replaces all of it.
    #[test]
    fn the_default_budget_carries_the_adaptive_margin() {
        const MS: u64 = 1_000_000;
        let mut window = LatencyWindow::default();
        let mut margin = Margin::new(33_333_333);
        assert_eq!(latency_budget(0, &window, &margin), None, "no latency yet");
        window.push(4 * MS as i64, true);
        assert_eq!(latency_budget(0, &window, &margin), Some(5 * MS + 2 * MS));
        // A frame 6 ms late: the margin grows to 1.5 x (2 + 6) ms, and the budget with it.
        margin.observe(-6 * MS as i64, 33_333_333);
        assert_eq!(margin.ns(), 12 * MS);
        assert_eq!(latency_budget(0, &window, &margin), Some(5 * MS + 12 * MS));
        assert_eq!(latency_budget(9 * MS, &window, &margin), Some(9 * MS));
    }

    /// The warm-up's frames count until enough frames begun held back have come; then only
    /// those do, the slowest of the last 32 of them.
    #[test]
    fn the_latency_window_forgets_the_warm_up_once_frames_are_held_back() {
        const MS: i64 = 1_000_000;
        let mut window = LatencyWindow::default();
        assert_eq!(window.max(), None);
        for k in 0..6 {
            // Frames begun at once: each waits behind the ones before.
            window.push((50 + 40 * k) * MS, false);
        }
        assert_eq!(window.max(), Some(250 * MS));
        for k in 0..HELD_ENOUGH as i64 {
            assert_eq!(window.max(), Some(250 * MS), "after {k} held back");
            window.push((55 + k) * MS, true);
        }
        assert_eq!(window.max(), Some(58 * MS));
        for _ in 0..40 {
            window.push(60 * MS, true);
        }
        window.push(70 * MS, true);
        assert_eq!(window.max(), Some(70 * MS));
        for _ in 0..31 {
            window.push(60 * MS, true);
        }
        assert_eq!(window.max(), Some(70 * MS), "still one of the last 32");
        window.push(60 * MS, true);
        assert_eq!(window.max(), Some(60 * MS));
    }

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

    /// A late frame's "let begin" time is the raise of the begin limit that first reached it,
    /// known only when the raise before it (below it) is kept too.
    #[test]
    fn a_frame_is_let_begin_by_the_first_raise_that_reaches_it() {
        let mut allowed = [(0, 0, 0); ALLOWED_KEPT];
        let raises = [(5u64, 100i64, 7u64), (6, 200, 8), (8, 300, 9), (9, 400, 10)];
        for (k, r) in raises.iter().enumerate() {
            allowed[k] = *r;
        }
        let at = |seq| allowed_at(&allowed, raises.len(), seq);
        assert_eq!(at(5), None, "the raise before it is not kept");
        assert_eq!(at(6), Some((200, 8)));
        assert_eq!(at(7), Some((300, 9)));
        assert_eq!(at(8), Some((300, 9)));
        assert_eq!(at(9), Some((400, 10)));
        assert_eq!(at(10), None, "not let begin yet");
    }

    /// A host's shows of one group share the grid: whenever each (re)starts its clock, its
    /// deadlines land on the same times, the first at or after the start, within a period.
    #[test]
    fn deadlines_on_a_grid_are_the_grids_first_time_at_or_after() {
        let period = 40_000_000u64;
        let grid = Some((1_000_000_000, 5_000_000));
        let first = 1_005_000_000;
        assert_eq!(on_grid(None, period, 123), 123);
        // Before the grid's start: its start.
        assert_eq!(on_grid(grid, period, 0), first);
        for t in [
            first,
            first + 1,
            first + 39_999_999,
            first + 40_000_000,
            7_777_777_777,
        ] {
            let d = on_grid(grid, period, t);
            assert!(d >= t && d - t < period as i64, "{t} -> {d}");
            assert_eq!((d - first) % period as i64, 0, "{t} -> {d} is on the grid");
        }
    }
}
