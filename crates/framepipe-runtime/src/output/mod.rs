//! The outputs: one per sink port, the loop that releases that port's frames to its sink, as
//! a pollable state machine ([`Output`], returning [`Next`]) that several drivers run.
//!
//! Contract:
//! * An output takes its port's next frame in order, waits for its deadline on the frame clock
//!   when the run is paced ([`pace`]), hands it to the sink and returns it to the scheduler
//!   ([`deliver`]). It takes the scheduler lock once per frame (returning the previous frame
//!   and taking the next in one critical section) and never waits on it: it waits for a frame
//!   on its port's flag and `park`.
//! * The master output (port 0) also holds the [`master`] part: once per frame boundary it
//!   reads the command queue (lock-free), applies transport commands itself and parameter
//!   commands (sets) to the live state (they reach every frame whose node has not started
//!   yet: a node samples its values when it starts a frame, see `live`), hands live edits to
//!   the edit thread, answers each command on the queue's return path (lock-free, no
//!   allocation) with the frame it applies from or the reason it was refused, and reports
//!   stalled stages ([`stalls`]). Paced, it lets frames begin just in time ([`gate`]).
//!   Commands are also read while it waits, so `stop` ends the run at once even when no frame
//!   is coming (a blocked source, a pause). The other outputs follow it unpaced.
//! * Drivers ([`drive`]): the output's own thread ([`run_output`]: the single-show run, whose
//!   master output is the thread that called [`Prepared::run`](crate::Prepared::run), so it
//!   adds no thread to the process), with a [`standby`] thread beside a paced master, and a
//!   [`Host`](crate::Host)'s clock thread, which drives the master outputs of every show.
//!   They differ in what they wait on; the waiting for a deadline is the clock crate's one
//!   sleep then spin (`WakeMargin::wait_until_with`). Its scheduling policy is restored at
//!   the end, also when unwinding; a panic here is caught by `Prepared::run`.
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

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use framepipe_clock::Pacer;
use framepipe_control::{CommandReader, Release};
use framepipe_core::{Error, Result, Sink};

use crate::edit::EditLink;
use crate::model::Options;
use crate::sched::{PortItem, Shared, Version};
use crate::stats::{PacingStats, StageCounters};

use gate::Gate;
use master::Master;
use pace::Pacing;

pub(crate) use drive::run_output;
pub(crate) use gate::HOST_MIN_MARGIN_NS;
pub(crate) use standby::{possible as standby_possible, Watch};

/// How often an output looks at stalls while it has nothing else to do (in a host, the clock
/// thread polls the show then). Commands do not wait for it: a post raises the master port's
/// signal (the command queue's waker), which wakes the output thread (in a host, has the clock
/// thread poll the show); polling commands instead (every 2 ms) cost 20 wake-ups a frame at 25
/// fps, for nothing most of the time.
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
    /// The graph version this output last looked at (re-read, under the lock it takes anyway,
    /// when `Shared::version` says a live edit switched), and its sink node's counters.
    ver: Arc<Version>,
    sink_stage: usize,
    sink_counter: Arc<StageCounters>,
    sink_name: Arc<str>,
    /// A paced output: its frame clock and what it keeps about the releases.
    pacing: Option<Pacing>,
    /// The master output (port 0): commands, live edits' replies, the latency gate, stall
    /// checks. `None`: a follower, delivery (and pacing) only.
    master: Option<Master>,
    /// The last frame given to the sink (`None` before the first).
    released_seq: Option<u64>,
    /// The outcome of the frame last given to the sink (its slot), returned to the scheduler in
    /// the next critical section (with the taking of the next frame).
    done: Option<(usize, u64, Result<()>)>,
    /// A frame taken while paused, kept until the transport lets it go (still in flight; the
    /// sink's turn is taken).
    paused_frame: Option<PortItem>,
    due: Option<Due>,
    ended: bool,
    /// How often it looks at commands and stalls while it waits for a frame (or is paused).
    poll_ns: i64,
}

impl Output {
    /// The output of sink port `port`: port 0 is the master, which reads `commands`, answers
    /// edits through `edits_link` and reports stages running one frame longer than `stall_ns`;
    /// the others follow it unpaced (they have no commands, no link, and ignore `stall_ns`).
    /// `realtime`: whether the driving thread runs under `SCHED_FIFO` (for the figures). A
    /// rate the frame clock cannot pace stops the run.
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
        debug_assert!(port == 0 || (commands.is_none() && edits_link.is_none()));
        let master = (port == 0).then(|| {
            shared.counters.realtime.store(realtime, Ordering::Relaxed);
            let gate = pacer
                .as_ref()
                .map(|p| Gate::new(p.period_ns(), options.latency_ns));
            Master::new(shared, commands, edits_link, stall_ns, gate)
        });
        Ok(Output {
            port,
            out_slot: shared.threads + port,
            ver,
            sink_stage,
            sink_counter,
            sink_name,
            pacing: pacer.map(|p| Pacing::new(p, options.overload, realtime)),
            master,
            released_seq: None,
            done: None,
            paused_frame: None,
            due: None,
            ended: false,
            poll_ns: POLL.as_nanos() as i64,
        })
    }

    /// Paced: puts the deadlines on the grid `anchor + phase + k * period` (the first one at
    /// or after the first frame is taken): a host puts the shows of a group on one grid, and
    /// spreads the groups over the period, so that their deadlines share wake-ups without all
    /// falling together.
    pub(crate) fn set_grid(&mut self, anchor: i64, phase_ns: i64) {
        if let Some(p) = self.pacing.as_mut() {
            p.set_grid(anchor, phase_ns);
        }
    }

    /// The default budget's adaptive margin never goes below `floor` (a show in a host:
    /// [`HOST_MIN_MARGIN_NS`]). Before the first frame only.
    pub(crate) fn set_margin_floor(&mut self, floor: Duration) {
        if let Some(g) = self.gate_mut() {
            g.set_margin_floor(floor.as_nanos() as u64);
        }
    }

    /// Frames begin this much earlier than the latency budget says: the driver wakes up that
    /// late for a beginning (a host rounds such wake-ups up to its grid).
    pub(crate) fn set_begin_slack(&mut self, slack: Duration) {
        if let Some(g) = self.gate_mut() {
            g.set_begin_slack(slack.as_nanos() as u64);
        }
    }

    /// The paced master's latency gate.
    fn gate(&self) -> Option<&Gate> {
        self.master.as_ref().and_then(|m| m.gate.as_ref())
    }

    fn gate_mut(&mut self) -> Option<&mut Gate> {
        self.master.as_mut().and_then(|m| m.gate.as_mut())
    }

    /// When the next frame may begin (a paced master wakes up then to let it).
    fn begin_at(&self) -> Option<i64> {
        self.gate().and_then(Gate::begin_at)
    }

    /// Paced master: lets begin every frame whose deadline is within the budget (raising the
    /// scheduler's begin limit) and notes when the next one may.
    fn let_begin(&mut self, shared: &Shared, st: &mut crate::sched::Locked<'_>, now: i64) {
        let deadline = self.pacing.as_ref().and_then(Pacing::next_deadline);
        if let Some(g) = self.master.as_mut().and_then(|m| m.gate.as_mut()) {
            g.let_begin(shared, st, now, self.released_seq, deadline);
        }
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
                if self.begin_at().is_some_and(|b| now >= b) {
                    let mut st = shared.lock_output();
                    self.let_begin(shared, &mut st, now);
                }
                if let Some(b) = self.begin_at().filter(|&b| b > now && b < at) {
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
        if self.master.is_some() {
            shared.port_signals[self.port].take();
        }
        if self.read_commands(shared) {
            // At once, even while waiting for a frame that does not come (a blocked source, a
            // pause): every frame the sink got was whole; no new frame is started; the frames
            // in flight go back to their pools.
            drop(self.paused_frame.take());
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
        let item = match self.paused_frame.take() {
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
        if let Some(g) = self.gate_mut() {
            g.taken(shared, item.begun_ns, item.ready_ns);
        }

        // 3. Release it, or hold it while paused (only the master has a transport).
        let release = self
            .master
            .as_mut()
            .map_or(Release::Go, |m| m.transport.at_boundary());
        match release {
            Release::Go => {}
            Release::GoAfterPause => {
                if let Some(p) = self.pacing.as_mut() {
                    p.resume(now);
                }
            }
            Release::Hold => {
                self.paused_frame = Some(item);
                self.check_stalls(shared, now);
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
        let Some(p) = self.pacing.as_mut() else {
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
        let (d, at) = p.deadline(shared, now);
        // Was the frame itself late (ready only after its deadline)? Judged by when it reached
        // the sink stage, not when this output looked, so that a preempted output thread does
        // not pass for an overloaded pipeline.
        let frame_late = item.ready_ns > d + framepipe_clock::DEFAULT_LATE_THRESHOLD_NS;
        // Its slack feeds the default budget's margin, once frames are held back (the warm-up
        // and a pause's held frame say nothing about how early a frame must begin).
        if let (Some(g), Some(_)) = (
            self.master.as_mut().and_then(|m| m.gate.as_mut()),
            self.released_seq,
        ) {
            g.observe_slack(shared, d, item.ready_ns);
        }
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
    /// end overtook (the master), and gives the frame clock's figures.
    pub(crate) fn finish(mut self, shared: &Shared) -> (Option<PacingStats>, Result<()>) {
        drop(self.due.take());
        drop(self.paused_frame.take());
        if let Some((slot, v, r)) = self.done.take() {
            shared
                .lock_output()
                .sink_done(shared, self.port, slot, v, r);
        }
        if let Some(m) = self.master.as_mut() {
            m.finish(shared);
        }
        let cap = self.ver.topo.cap;
        let gate = self.master.as_ref().and_then(|m| m.gate.as_ref());
        let pacing = self.pacing.map(|p| p.figures(gate, cap));
        (pacing, Ok(()))
    }
}
