//! The scheduler's state and job selection for a graph: frames in flight (one *slot* each),
//! the nodes' readiness per frame, serial nodes taking frames in order, leaky branches, the
//! sinks' output ports, and what happens when a job completes.
//!
//! # The model
//! A frame in flight has a slot (`seq % in_flight`) holding, per node, its output for that
//! frame (shared read-only: a frame fanned out to several nodes is never copied), how many of
//! its inputs are still missing, and how many consumers have yet to take it. A node becomes
//! *runnable* for a frame when its last input is ready; a serial node then waits for its turn
//! (frames strictly in order, one at a time), parking the frame meanwhile; a parallel node runs
//! at once on any worker, one instance per worker. Independent branches of one frame are
//! runnable together and run on different workers. A frame *begins* (a job that fixes its
//! oscillator time; each node samples its live parameters when it starts the frame) when fewer than `in_flight` frames are in flight; then every source of the
//! graph is runnable for it (sources advance in lockstep), and every feedback node as soon as
//! the node it feeds back has finished the previous frame. A frame leaves flight when every
//! node of the show has finished it.
//!
//! A frame that cannot be made (a source ended or failed) flows through the graph *empty*: each
//! node finishes it at once without running, in order, so the bookkeeping is the same for every
//! frame and the frames before it are delivered whole.
//!
//! A *leaky branch* (a monitor tap, a preview sink) has its own slot beside the frames': when
//! its first node becomes runnable for a frame and the branch still holds an earlier one, the
//! branch skips this frame (counted) instead of holding it back; otherwise it takes the frame
//! (its inputs and its parameters) into its slot and runs on its own time. So a slow tap never
//! holds back the master output.
//!
//! # Live edits
//! A live edit's next version (built off the frame path) is armed: no frame begins in the
//! running version from then on. When neither version has a leaky branch or a feedback, it
//! switches in at once, at the next frame to begin, N (`switch_overlapping`): the running
//! version's frames before N go on in their version, which is kept beside the new one
//! (`State::old`) until its last frame has left every node. Jobs name their version; the old
//! version's jobs go first, and the new one's leave it a worker (`new_jobs_held_back`). A
//! node the edit keeps is handed over (its one set of instances, its source, moved) once the
//! old version no longer owes it a frame (`NodeState::owed`); until then its frames from N
//! on park (`NodeState::held`), so it still takes every frame once and in order. Otherwise
//! the switch waits for the frames in flight to be made (`maybe_switch`,
//! `only_held_at_sinks`).
//!
//! # The lock
//! Everything here runs under the one scheduler mutex, taken by a worker between jobs and by
//! an output thread once per frame. Under it: bookkeeping only, a few dozen steps per node and
//! frame. Nothing allocates, prints, formats or calls element or user code there (frames going
//! back to their pool is a lock-free push): wake-ups are collected in [`Wake`] and a discarded
//! error in `garbage`, and both are dealt with by [`Locked`] after the mutex is released. Every
//! hold is timed into a lock-free histogram (`lockstats.rs`).

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;

use framepipe_clock::{now_ns, PiCondvar, PiGuard, PiMutex};
use framepipe_core::{
    Effect, Error, Frame, FrameCtx, FramePool, Mixer, PropValue, Rational, Result, Source,
};

use crate::graph::{OnEnd, MAX_INPUTS};
use crate::live::{FrameParams, Live, LiveSpec};
use crate::slices::{PanicPayload, SliceJob, SliceSlot};
use crate::stats::EventFn;
use crate::stats::{Counters, StageCounters};

/// What a node is, for the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Source,
    /// An effect or a mixer: runs on a worker with an instance.
    Process,
    /// Yields node `from`'s output of the previous frame: no job.
    Feedback {
        from: usize,
    },
    /// A sink, fed through output port `.0` (one per sink; its own thread runs it).
    Sink(usize),
}

/// The graph's shape as the scheduler sees it (never changes during a run; no lock).
#[derive(Debug)]
pub(crate) struct Topo {
    pub nodes: Vec<TopoNode>,
    /// Frame slots (frames in flight at most).
    pub cap: usize,
    /// Per leaky branch: its nodes.
    pub branches: Vec<Vec<usize>>,
    /// Sources and feedbacks: runnable when a frame begins.
    pub roots: Vec<usize>,
    /// Nodes outside the leaky branches: a frame leaves flight when all have finished it.
    pub show_nodes: usize,
    /// The sources.
    pub sources: Vec<usize>,
    /// Nodes through which a frame leaves the show (its sinks, the first nodes of leaky
    /// branches): they also wait for every source to have finished the frame, so that a frame
    /// at or after a source's end never reaches a sink, even through a feedback that had
    /// a frame to give.
    pub gated: Vec<usize>,
}

#[derive(Debug)]
pub(crate) struct TopoNode {
    pub kind: Kind,
    pub inputs: Vec<usize>,
    pub consumers: Vec<usize>,
    /// Feedback nodes yielding this node's output one frame later.
    pub feeds: Vec<usize>,
    pub serial: bool,
    pub branch: Option<usize>,
    /// First node of its leaky branch.
    pub head: bool,
    /// A source that may wait on the outside world (`Source::blocks`): its jobs go to the
    /// show's IO thread, never to a compute worker.
    pub blocks: bool,
}

/// An effect or mixer instance.
pub(crate) enum Proc {
    Effect(Box<dyn Effect>),
    Mixer(Box<dyn Mixer>),
}

/// An effect or mixer instance with the property values it currently has.
pub(crate) struct Instance {
    pub(crate) proc: Proc,
    /// Has processed a frame (counted in the stats' `instances` the first time).
    pub(crate) used: bool,
    pub(crate) applied: Vec<PropValue>,
    /// Properties the element refused to change live (reported once, then not retried).
    pub(crate) refused: Vec<bool>,
    /// Scratch for `sync_params`: which values differ on this frame.
    pub(crate) changed: Vec<bool>,
    /// Its share of the memory budget (one output frame), counted while it lives: it moves
    /// with the instance when a live edit keeps its node.
    _held: crate::pools::Held,
}

impl Instance {
    pub(crate) fn new(proc: Proc, initial: &[PropValue], held: crate::pools::Held) -> Self {
        Instance {
            _held: held,
            proc,
            used: false,
            applied: initial.to_vec(),
            refused: vec![false; initial.len()],
            changed: vec![false; initial.len()],
        }
    }
}

/// A source with what the graph keeps of it: its end policy, its resampling to the graph's
/// rate, the last frame it gave (for `hold` and for repeating frames of a slower source).
pub(crate) struct SourceInst {
    pub source: Box<dyn Source>,
    pub on_end: OnEnd,
    /// `(source rate, graph rate)` when they differ: output frame N takes the source's frame
    /// `floor(N / graph rate * source rate)`.
    pub resample: Option<(Rational, Rational)>,
    /// Frames read from the source so far (its own frame numbers; they go on across loops).
    pub produced: u64,
    /// The graph frame it started at (0, or the frame a live edit added it at): graph frame
    /// N takes its frame for N − origin.
    pub origin: u64,
    /// The last frame read, kept when it may be given again (hold, resampling).
    pub last: Option<Frame>,
    pub keep_last: bool,
    /// Ended under `hold`: the last frame is given from now on.
    pub held: bool,
    /// Its live properties' values as last set on it ([`Source::live_props`]), which it
    /// refused (reported once), and scratch for which changed on this frame: as an effect
    /// instance's.
    pub applied: Vec<PropValue>,
    pub refused: Vec<bool>,
    pub changed: Vec<bool>,
}

pub(crate) enum Inst {
    Source(SourceInst),
    Proc(Instance),
}

/// A node's input frames for one job, without allocating.
pub(crate) struct Inputs {
    pub frames: [Option<Frame>; MAX_INPUTS],
    pub n: usize,
}

impl Inputs {
    pub(crate) const fn new() -> Self {
        Inputs {
            frames: [None, None, None, None, None, None, None, None],
            n: 0,
        }
    }

    fn push(&mut self, f: Option<Frame>) {
        self.frames[self.n] = f;
        self.n += 1;
    }

    fn clear(&mut self) {
        for f in &mut self.frames[..self.n] {
            *f = None;
        }
        self.n = 0;
    }
}

// A job moves on the stack between the lock and the worker (about 250 bytes, the inputs
// inline): boxing them would allocate on every job.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Job {
    /// Frame `slot`'s boundary: fix its oscillator time (for its timestamp); the nodes sample
    /// their parameters when they start it.
    Begin { slot: usize, pts_ns: i64 },
    Node {
        node: usize,
        /// The slot the output goes to (a frame's, or a leaky branch's), also the index of
        /// the parameter snapshot the node uses.
        slot: usize,
        /// The number of the graph version the job belongs to (two run at once while a live
        /// edit's replaced version finishes its frames).
        version: u64,
        ctx: FrameCtx,
        inputs: Inputs,
        inst: Inst,
    },
    Slice {
        slot: usize,
        index: usize,
        job: SliceJob,
    },
}

/// Outcome of running a job, reported back under the lock.
#[allow(clippy::large_enum_variant)] // as `Job`: never boxed, that would allocate per job
pub(crate) enum Done {
    Begin {
        slot: usize,
    },
    /// `Ok(None)` from a source: its stream ended (and it does not loop or hold).
    Node {
        node: usize,
        slot: usize,
        /// As in [`Job::Node`].
        version: u64,
        inst: Inst,
        result: Result<Option<Frame>>,
    },
    Slice(usize, Option<PanicPayload>),
}

/// Per frame in flight (or per leaky branch): every node's output and readiness.
pub(crate) struct Slot {
    pub ctx: FrameCtx,
    pub active: bool,
    /// Its parameters are sampled: nodes may run.
    pub begun: bool,
    /// When it began (monotonic ns): the graph's latency is measured from there to the master.
    pub begun_ns: i64,
    pub outputs: Vec<Option<Frame>>,
    /// Inputs not yet finished, per node.
    pub missing: Vec<u32>,
    /// Consumers that have not yet taken the output, per node.
    pub uses: Vec<u32>,
    /// Sinks: when the frame was ready for them (every input finished; monotonic ns), whether
    /// or not it was their turn yet.
    pub ready_ns: Vec<i64>,
    /// Nodes that have not finished this frame (the show's, or the branch's).
    pub left: usize,
}

pub(crate) struct NodeState {
    /// The first frame this node runs (0, or the frame a live edit added it at): a feedback
    /// node gives its first colour then.
    pub first_seq: u64,
    /// Serial nodes: running, or a frame reserved for it.
    pub busy: bool,
    /// Serial nodes: the sequence number allowed in next.
    pub next_seq: u64,
    /// Serial nodes: runnable for the frame of this slot, waiting for its turn.
    pub parked: Vec<bool>,
    /// Instances not in use.
    pub free: Vec<Instance>,
    pub source: Option<SourceInst>,
    /// Feedback nodes: the node fed back's output per frame, `(seq, frame)` at `seq % cap`,
    /// until the next frame takes it.
    pub ring: Vec<Option<(u64, Option<Frame>)>>,
    /// Frames in flight (begun, or taken into its leaky branch) that this node has not
    /// finished yet: a live edit hands a kept node over to the next version once the replaced
    /// version's count is 0.
    pub owed: u32,
    /// A kept node of a version switched in while the replaced version still owed it frames:
    /// it runs nothing (its runnable frames are parked) until it is handed over (its
    /// instances, source, ring moved in; `State::hand_over`).
    pub held: bool,
}

/// A step of the bookkeeping, queued so that one completion can trigger many without recursion.
#[derive(Debug)]
enum Step {
    /// The node's inputs for this slot are ready (or, for a root, the frame has begun).
    Runnable(usize, usize),
    /// The node has finished this slot, with this output.
    Finished(usize, usize, Option<Frame>),
}

pub(crate) struct State {
    /// The graph version frames begin in now.
    pub(crate) ver: Arc<Version>,
    /// A live edit's next version, waiting for the frames of this one to leave flight; no
    /// frame at or after `switch_at` begins in this one.
    pub(crate) pending: Option<Box<Pending>>,
    pub(crate) switch_at: u64,
    /// The first frame of the running version (0, or the frame a live edit switched at).
    pub(crate) ver_first: u64,
    /// After a switch, once the replaced version has no frame left: what it replaced, for
    /// the master output thread to hand to the edit thread, which drops it off the frame path.
    pub(crate) switched: Option<Box<Pending>>,
    /// A switch happened: the edit's command and the frame it is visible from, for the
    /// master output thread to answer (at the switch, before the replaced version is done).
    pub(crate) news: Option<SwitchNews>,
    /// An overlapping switch's replaced version, still finishing its frames (see
    /// `maybe_switch`): its state (`old.state`: version, nodes, slots, queues, counts) runs
    /// beside the running one's until its last frame has left every node, then it goes to
    /// `switched`. Its jobs name its version number.
    pub(crate) old: Option<Box<Pending>>,
    pub(crate) nodes: Vec<NodeState>,
    /// Frame slots `0..cap`, then one per leaky branch.
    pub(crate) slots: Vec<Slot>,
    /// Jobs whose inputs are ready (and whose turn it is, for serial nodes): (node, slot).
    pub(crate) ready: VecDeque<(usize, usize)>,
    /// IO threads serve this show's blocking sources (`TopoNode::blocks`): their jobs wait in
    /// `io_ready` for them, not in `ready` for the compute workers.
    pub(crate) io: bool,
    pub(crate) io_ready: VecDeque<(usize, usize)>,
    /// IO threads running a job (counted in `running` too).
    pub(crate) io_busy: usize,
    /// IO threads waiting for a job, bit K for IO thread K: a queued job wakes one of them
    /// (the others would only find it taken).
    pub(crate) io_idle: u8,
    /// Per leaky branch: holds a frame; the inputs its first node took.
    pub(crate) branch_busy: Vec<bool>,
    pub(crate) branch_inputs: Vec<Inputs>,
    steps: VecDeque<Step>,
    /// Per sink: the frame whose turn it is there, for that sink's output thread.
    pub(crate) ports: Vec<Port>,
    pub(crate) in_flight: usize,
    pub(crate) max_in_flight: usize,
    /// The next frame to begin.
    pub(crate) next_seq: u64,
    /// Paced runs: the last frame allowed to begin now (just in time for its deadline; set by
    /// the master output thread as it releases frames). `u64::MAX`: no limit.
    pub(crate) begin_limit: u64,
    pub(crate) begin_busy: bool,
    /// Frames from this one on are empty (a source ended or failed there).
    pub(crate) end_seq: u64,
    /// No frame begins any more.
    pub(crate) source_done: bool,
    pub(crate) abort: bool,
    pub(crate) error: Option<Error>,
    pub(crate) source_error: Option<Error>,
    pub(crate) waiting: usize,
    /// The show runs in a [`Host`](crate::Host): its workers are the host's, which wait for
    /// any show's work (`HostSignals`), not on this show's condition variable.
    pub(crate) host: bool,
    /// Node jobs running on workers.
    pub(crate) running: usize,
    /// One slot per worker for its fork-join slice jobs.
    pub(crate) slices: Vec<SliceSlot>,
    /// A panic outside any element left the state inconsistent: the run is over whatever the
    /// in-flight count says (see `Shared::break_run`).
    pub(crate) broken: bool,
    /// Whom to wake once the lock is released (collected by the state machine under it).
    pub(crate) wake: Wake,
    /// An error that was not kept (a later one than the first), dropped after unlocking.
    pub(crate) garbage: Option<Error>,
}

/// A live edit's next graph version, built off the frame path (`pipeline::prepare_edit`),
/// waiting in the state for its switch; after the switch it holds what it replaced.
pub(crate) struct Pending {
    /// The new version's scheduler state, made like a run's first (`new_state`): its version,
    /// nodes, slots and queues are swapped in at the switch.
    pub(crate) state: State,
    /// The new version's live stages (swapped into `Shared::live`).
    pub(crate) live_stages: Vec<crate::live::LiveStage>,
    /// (running node, new node) carried over: instances, source, feedback ring, live values.
    pub(crate) moves: Vec<(usize, usize)>,
    /// Per running node: what the edit does to it, for the commands read once it is armed
    /// (`Live::arm`, `Live::gone`).
    pub(crate) fates: Vec<crate::live::Fate>,
    /// The running nodes the edit removes (their names), for the refusals of commands on
    /// them after the switch.
    pub(crate) removed: Vec<Arc<str>>,
    /// Per new node: carried over (else it starts at the switch frame).
    pub(crate) moved: Vec<bool>,
    /// The edit's command, answered once switched (or refused).
    pub(crate) posted: Option<framepipe_control::Posted>,
    /// The new graph, published once switched.
    pub(crate) graph_view: Option<crate::stats::GraphView>,
    /// The new version's own pools, each once with its plan, until the edit's checks have
    /// passed: then (`pipeline::fill_edit_pools`) replaced by quota handles on a host's pools
    /// or filled.
    pub(crate) edit_pools: Vec<(framepipe_core::FramePool, crate::pools::PoolPlan)>,
    /// The frame the switch happened at.
    pub(crate) frame: u64,
    /// When it was armed and when it switched (monotonic ns): the drain, for the figures.
    pub(crate) armed_ns: i64,
    pub(crate) switched_ns: i64,
}

/// What the master output thread answers a switched edit with.
pub(crate) struct SwitchNews {
    /// The edit's command.
    pub(crate) posted: Option<framepipe_control::Posted>,
    /// The first frame of the new version.
    pub(crate) frame: u64,
    /// From its arming to its switch (ns).
    pub(crate) drain_ns: i64,
    /// The new graph, to publish.
    pub(crate) graph_view: Option<crate::stats::GraphView>,
    /// The nodes the switch removed (`Pending::removed`).
    pub(crate) removed: Vec<Arc<str>>,
}

/// One sink's hand-off: the frame whose turn it is at that sink.
pub(crate) struct Port {
    /// The sink's node.
    pub(crate) node: usize,
    pub(crate) ready: Option<PortItem>,
    /// A live edit switched while this sink held a frame of the replaced version (waiting at
    /// the port or being consumed by its output thread): the sink's node in the running
    /// version is kept busy, so that the new version's first frame waits for that one's
    /// completion (`sink_done`) and the sink still takes its frames in order.
    pub(crate) held_over: bool,
}

/// A frame for a sink.
pub(crate) struct PortItem {
    pub(crate) slot: usize,
    pub(crate) ctx: FrameCtx,
    pub(crate) frame: Frame,
    /// When the frame reached the sink, fully processed (monotonic ns): the slow overload
    /// policy slips the clock only for frames that were not ready by their deadline.
    pub(crate) ready_ns: i64,
    /// When the frame began (monotonic ns).
    pub(crate) begun_ns: i64,
    /// The graph version it was handed in: a leaky sink may still be consuming a frame of
    /// the version a live edit replaced (the switch does not wait for it), whose completion
    /// then has nothing to update.
    pub(crate) version: u64,
}

/// The most IO threads a show runs: one per blocking source (`Source::blocks`), so that one
/// source waiting on its camera, pipe or peer does not hold back another's read; a show with
/// more blocking sources than this shares them (any IO thread takes any blocking source's
/// job, the oldest first).
pub(crate) const MAX_IO_THREADS: usize = 8;

/// What the output thread of a port waits on instead of the scheduler mutex: a flag set (after
/// unlocking) whenever its port or the run's end changed, and an unpark of its thread. It
/// checks the flag, and takes the lock only when there is something to take.
#[derive(Debug, Default)]
pub(crate) struct PortSignal {
    flag: AtomicBool,
    thread: OnceLock<Thread>,
    /// In a host, the master port's signal goes to the clock thread, naming the show.
    host: OnceLock<(Arc<crate::host::HostSignals>, usize)>,
}

impl PortSignal {
    /// Registers the calling thread as this port's output thread.
    pub(crate) fn register_current(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    pub(crate) fn raise(&self) {
        if let Some((h, show)) = self.host.get() {
            // Queued once per raise after the last `take`: the clock thread polls the show.
            if !self.flag.swap(true, Ordering::AcqRel) {
                h.port_raised(*show);
            }
            return;
        }
        self.flag.store(true, Ordering::Release);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Routes this signal to a host's clock thread (before the show starts).
    pub(crate) fn route_to_host(&self, h: Arc<crate::host::HostSignals>, show: usize) {
        let _ = self.host.set((h, show));
    }

    /// Whether the port was signalled since the last call (clears it).
    pub(crate) fn take(&self) -> bool {
        self.flag.swap(false, Ordering::AcqRel)
    }

    /// Waits up to `timeout` for a signal; returns whether there was one.
    pub(crate) fn wait(&self, timeout: std::time::Duration) -> bool {
        if self.take() {
            return true;
        }
        std::thread::park_timeout(timeout);
        self.take()
    }
}

/// Wake-ups decided under the lock, done after releasing it (so that the woken thread does not
/// run into a held mutex, and the hold time excludes the futex calls).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Wake {
    work_one: bool,
    work_all: bool,
    slices: bool,
    ports: bool,
    /// The IO threads to wake, bit K for IO thread K (all: the end).
    io: u8,
}

impl Wake {
    /// Whether any wake-up is pending.
    fn any(self) -> bool {
        self.work_one || self.work_all || self.slices || self.ports || self.io != 0
    }
}

/// One version of the graph: everything that is fixed while it runs and replaced whole by a
/// live edit. The scheduler state holds the current one; a job takes a reference to it with
/// the job (under the lock), so a version lives as long as any job of it.
pub(crate) struct Version {
    /// 0 for the graph the run started with, +1 per edit.
    pub(crate) number: u64,
    pub(crate) topo: Topo,
    /// The pool each node's output frames come from (index = node).
    pub(crate) pools: Vec<FramePool>,
    /// Feedback nodes: frame 0's frame (the colour asked for).
    pub(crate) first_frames: Vec<Option<Frame>>,
    /// Per-slot parameter snapshots (frames, then leaky branches). A frame's is written at its
    /// boundary and read by the nodes running it, a branch's copied from its frame's when the
    /// branch takes it; its mutex is never contended in practice.
    pub(crate) snapshots: Vec<Mutex<FrameParams>>,
    pub(crate) param_names: Vec<Vec<Arc<str>>>,
    /// What the live parameters are (names, specs): commands are resolved against it without
    /// the scheduler lock.
    pub(crate) live_spec: LiveSpec,
    /// Per node: its counters (shared with `Counters::stages`).
    pub(crate) stages: Arc<[Arc<StageCounters>]>,
    /// Per node: its name, element, kind word and output shape (what a live edit compares).
    pub(crate) names: Vec<Arc<str>>,
    pub(crate) elements: Vec<String>,
    pub(crate) kinds: Vec<&'static str>,
    pub(crate) infos: Vec<framepipe_core::VideoInfo>,
    /// Per output port: its sink's node.
    pub(crate) ports: Vec<usize>,
    /// Per node: frames of its own output it keeps beyond the frames in flight (a source's
    /// last frame under `hold` or resampling), counted again when a live edit carries it over.
    pub(crate) holds: Vec<usize>,
    /// What the budget counts for it: its pools at full capacity, and the estimate of every
    /// node's instances (one output frame each; they move with the nodes a live edit keeps).
    pub(crate) pool_bytes: u64,
    pub(crate) instance_bytes: u64,
    /// Its pools' share of the show's [`MemoryBook`](crate::pools::MemoryBook), counted until
    /// it is dropped (a replaced version: on the edit thread, once its frames are back). In a
    /// host it moves into the pool lease (`None` here), counted until the lease's frames are
    /// back.
    pub(crate) pools_held: Option<crate::pools::Held>,
    /// In a host: its pools' quota handles on the host's shared pools, given back once it is
    /// dropped and every frame taken through them is back (`pools.rs`, `PoolLease`). Declared
    /// last: the version's handles and frames go before it.
    pub(crate) pool_lease: Option<crate::pools::PoolLease>,
}

pub(crate) struct Shared {
    /// The scheduler lock. Priority-inheriting: while the SCHED_FIFO output thread waits for
    /// it, the worker holding it runs at the output thread's priority.
    pub(crate) state: PiMutex<State>,
    /// Workers wait here for work.
    pub(crate) work: PiCondvar,
    /// A slice owner waits here for the slices other workers took.
    pub(crate) slice_done: PiCondvar,
    pub(crate) rate: Rational,
    pub(crate) threads: usize,
    /// The live parameter values, under their own (priority-inheriting) mutex: commands assign
    /// to them (output thread) and the worker beginning a frame samples them; never under the
    /// scheduler lock.
    pub(crate) live: PiMutex<Live>,
    /// One per output port (sink).
    /// (Shared with the command queue's waker: a post raises the master's.)
    pub(crate) port_signals: Vec<Arc<PortSignal>>,
    /// Per worker (then each output thread, then each IO thread): node + 1 it is running (0 =
    /// none) and since when (monotonic ns), for stall detection by the master output thread.
    pub(crate) running: Vec<(AtomicUsize, AtomicI64)>,
    pub(crate) events: Option<EventFn>,
    pub(crate) counters: Arc<Counters>,
    /// The number of the graph version in `State::ver`, readable without the lock (the output
    /// threads re-read the version only when it changed).
    pub(crate) version: std::sync::atomic::AtomicU64,
    /// The published state for control surfaces (`view.rs`).
    pub(crate) view: crate::stats::ShowView,
    /// In a host: where this show's work is announced to the host's workers, and its index.
    pub(crate) host: OnceLock<(Arc<crate::host::HostSignals>, usize)>,
    /// What the IO threads wait on, one each ([`MAX_IO_THREADS`]): all raised when a blocking
    /// source's job is queued (and at the end).
    pub(crate) io_signals: Vec<PortSignal>,
    /// The IO threads started so far (`Shared::ensure_io_threads`), one per blocking source
    /// up to [`MAX_IO_THREADS`]; joined at the run's end.
    pub(crate) io_threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl State {
    pub(crate) fn finished(&self) -> bool {
        self.broken
            || self.abort
            || (self.source_done
                && self.in_flight == 0
                && !self.begin_busy
                && self.running == 0
                && self.old.is_none()
                && !self.branch_busy.iter().any(|&b| b))
    }

    /// Node jobs running on workers (and the IO thread), of every version.
    pub(crate) fn running_jobs(&self) -> usize {
        self.running + self.old.as_ref().map_or(0, |p| p.state.running)
    }

    /// While a replaced version still has frames in flight, the new version's node jobs take
    /// at most all workers but one (all of one worker): a worker stays free for the old
    /// frames' next nodes, which are due first and would otherwise wait for a new frame's job
    /// to end (jobs are not preempted).
    fn new_jobs_held_back(&self) -> bool {
        self.old.as_ref().is_some_and(|p| p.state.in_flight > 0)
            && self.running >= self.slices.len().saturating_sub(1).max(1)
    }

    /// The replaced version's jobs waiting for a worker (none when there is none).
    fn old_ready(&self) -> usize {
        self.old.as_ref().map_or(0, |p| p.state.ready.len())
    }

    /// The version job `job` belongs to (a worker runs it with that one).
    pub(crate) fn job_ver(&self, job: &Job) -> &Arc<Version> {
        if let Job::Node { version, .. } = job {
            if let Some(p) = self.old.as_ref().filter(|p| p.state.ver.number == *version) {
                return &p.state.ver;
            }
        }
        &self.ver
    }

    /// Swaps the replaced version's state (`old`) with the running one's: the state machine's
    /// code then works on the replaced version. Moves only (pointers and counts); always
    /// undone before the lock is released (`with_old`).
    fn swap_old(&mut self) {
        if let Some(mut p) = self.old.take() {
            swap_versions(self, &mut p.state);
            self.old = Some(p);
        }
    }

    /// Runs `f` on the replaced version's state (see `swap_old`).
    fn with_old<R>(&mut self, f: impl FnOnce(&mut State) -> R) -> R {
        self.swap_old();
        let r = f(self);
        self.swap_old();
        r
    }

    /// Whether a worker may be idle, waiting for this show's work (in a host: always).
    pub(crate) fn workers_idle(&self) -> bool {
        self.waiting > 0 || self.host
    }

    pub(crate) fn has_work(&self) -> bool {
        (!self.ready.is_empty() && !self.new_jobs_held_back())
            || self.old_ready() > 0
            || self.begin_runnable()
            || self.slice_pending().is_some()
    }

    fn begin_runnable(&self) -> bool {
        !self.source_done
            && !self.abort
            && !self.begin_busy
            && self.next_seq <= self.begin_limit
            && self.next_seq < self.switch_at
            && self.in_flight < self.max_in_flight
            && !self.slots[(self.next_seq % self.max_in_flight as u64) as usize].active
    }

    pub(crate) fn slice_pending(&self) -> Option<usize> {
        self.slices
            .iter()
            .position(|s| s.job.is_some() && s.next < s.n)
    }

    /// Ends the run with `e` (the first error is the one returned; a later one is dropped
    /// after unlocking).
    pub(crate) fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        } else {
            self.garbage = Some(e);
        }
        self.abort = true;
        self.wake.work_all = true;
        self.wake.ports = true;
        self.wake.io = u8::MAX;
    }

    /// Ends the run early without an error (a `stop` command): no new frames; frames in flight
    /// are dropped.
    pub(crate) fn stop(&mut self) {
        self.source_done = true;
        self.abort = true;
        self.drop_pending();
        // Idle workers leave (see `worker_loop`); output threads see the end.
        self.wake.work_all = true;
        self.wake.ports = true;
        self.wake.io = u8::MAX;
    }

    /// The next job for an idle worker: slices of a frame being worked on first (they hold a
    /// worker waiting), then the show's runnable node furthest down the graph (to bound latency
    /// and frames in flight), then the next frame's beginning, then a leaky branch's node.
    pub(crate) fn next_job(&mut self, shared: &Shared) -> Option<Job> {
        let v = Arc::clone(&self.ver);
        if let Some(slot) = self.slice_pending() {
            let s = &mut self.slices[slot];
            let index = s.next;
            s.next += 1;
            let job = s.job.expect("pending slot has a job");
            return Some(Job::Slice { slot, index, job });
        }
        // The replaced version's frames are older: theirs first (its jobs are all the show's:
        // a version with leaky branches is not switched while it has frames in flight).
        if self.old_ready() > 0 {
            return self.with_old(|st| {
                let pos = (0..st.ready.len()).max_by_key(|&i| st.ready[i].0)?;
                let (node, slot) = st.ready.remove(pos).expect("index in range");
                let v = Arc::clone(&st.ver);
                Some(st.node_job(&v, node, slot))
            });
        }
        let cap = v.topo.cap;
        let held_back = self.new_jobs_held_back();
        let show = (0..self.ready.len())
            .filter(|&i| self.ready[i].1 < cap && !held_back)
            .max_by_key(|&i| self.ready[i].0);
        if let Some(pos) = show {
            let (node, slot) = self.ready.remove(pos).expect("index in range");
            return Some(self.node_job(&v, node, slot));
        }
        if self.begin_runnable() {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.in_flight += 1;
            self.begin_busy = true;
            let slot = (seq % self.max_in_flight as u64) as usize;
            let s = &mut self.slots[slot];
            s.ctx = FrameCtx {
                seq,
                pts_ns: shared.rate.frame_time_ns(seq),
            };
            s.active = true;
            s.begun = false;
            s.begun_ns = now_ns();
            s.left = v.topo.show_nodes;
            for (i, t) in v.topo.nodes.iter().enumerate() {
                s.missing[i] = t.inputs.len() as u32;
                s.uses[i] = t.consumers.len() as u32;
                debug_assert!(s.outputs[i].is_none(), "a freed slot holds no frame");
                if t.branch.is_none() {
                    self.nodes[i].owed += 1;
                }
            }
            for &g in &v.topo.gated {
                s.missing[g] += v.topo.sources.len() as u32;
            }
            let pts_ns = s.ctx.pts_ns;
            return Some(Job::Begin { slot, pts_ns });
        }
        // Leaky branches last: they run on workers the show leaves idle, so a slow tap takes
        // no worker the show could use (in a paced show, workers wait for the clock most of
        // the time; an unpaced run may leave a preview behind until its end).
        if held_back {
            return None;
        }
        if let Some(pos) = (0..self.ready.len()).max_by_key(|&i| self.ready[i].0) {
            let (node, slot) = self.ready.remove(pos).expect("index in range");
            return Some(self.node_job(&v, node, slot));
        }
        None
    }

    /// The next job for an IO thread: a blocking source's frame, the oldest first.
    pub(crate) fn next_io_job(&mut self) -> Option<Job> {
        if self
            .old
            .as_ref()
            .is_some_and(|p| !p.state.io_ready.is_empty())
        {
            return self.with_old(State::next_io_job);
        }
        let (node, slot) = self.io_ready.pop_front()?;
        let v = Arc::clone(&self.ver);
        self.io_busy += 1;
        Some(self.node_job(&v, node, slot))
    }

    /// The first IO thread has started: blocking sources' jobs go to the IO threads from now
    /// on. None can be queued for the workers yet: it starts before the workers, or (on the
    /// edit thread) before a version with a blocking source switches in, the running one
    /// having none.
    pub(crate) fn start_io(&mut self) {
        debug_assert!(
            self.ready
                .iter()
                .all(|&(n, _)| !self.ver.topo.nodes[n].blocks),
            "a blocking source's job was queued for the workers before the IO thread started"
        );
        self.io = true;
    }

    /// The job of runnable `node` at `slot`: its inputs and an instance.
    fn node_job(&mut self, v: &Version, node: usize, slot: usize) -> Job {
        let t = &v.topo.nodes[node];
        let mut inputs = Inputs::new();
        if t.head {
            let b = t.branch.expect("a head is in a branch");
            std::mem::swap(&mut inputs, &mut self.branch_inputs[b]);
        } else {
            for &i in &t.inputs {
                let f = self.consume(slot, i);
                inputs.push(f);
            }
        }
        let st = &mut self.nodes[node];
        let inst = match t.kind {
            Kind::Source => Inst::Source(st.source.take().expect("a serial source is home")),
            // A serial node has one instance and runs one frame at a time; a parallel node has
            // one per worker and each worker holds at most one: there is always one free.
            Kind::Process => Inst::Proc(st.free.pop().expect("an instance per worker")),
            Kind::Feedback { .. } | Kind::Sink(_) => unreachable!("not run on a worker"),
        };
        self.running += 1;
        Job::Node {
            node,
            slot,
            version: v.number,
            ctx: self.slots[slot].ctx,
            inputs,
            inst,
        }
    }

    /// A consumer takes node `i`'s output at `slot` (the last one takes it, the others share it).
    fn consume(&mut self, slot: usize, i: usize) -> Option<Frame> {
        let s = &mut self.slots[slot];
        s.uses[i] -= 1;
        if s.uses[i] == 0 {
            s.outputs[i].take()
        } else {
            s.outputs[i].clone()
        }
    }

    /// Runs the queued bookkeeping steps until none is left.
    fn drain(&mut self) {
        let v = Arc::clone(&self.ver);
        while let Some(step) = self.steps.pop_front() {
            match step {
                Step::Runnable(node, slot) => self.runnable(&v, node, slot),
                Step::Finished(node, slot, output) => self.finished_node(&v, node, slot, output),
            }
        }
    }

    /// `node` may run for `slot` now (its inputs are ready, or it is a root of a begun frame).
    fn runnable(&mut self, v: &Version, node: usize, slot: usize) {
        if self.abort {
            return;
        }
        if self.nodes[node].held {
            // Kept by a live edit, still finishing the replaced version's frames: this one
            // runs once it is handed over (`hand_over`).
            self.nodes[node].parked[slot] = true;
            return;
        }
        let t = &v.topo.nodes[node];
        let seq = self.slots[slot].ctx.seq;
        if t.serial && t.branch.is_none() {
            let st = &mut self.nodes[node];
            if st.busy || seq != st.next_seq {
                st.parked[slot] = true;
                return;
            }
            st.busy = true;
        }
        if t.head {
            self.enter_branch(v, node, slot);
            return;
        }
        match t.kind {
            Kind::Source => {
                if seq >= self.end_seq {
                    self.steps.push_back(Step::Finished(node, slot, None));
                } else if t.blocks && self.io {
                    self.io_ready.push_back((node, slot));
                    // One idle IO thread (none idle: a busy one takes it after its job).
                    let one = self.io_idle & self.io_idle.wrapping_neg();
                    self.io_idle &= !one;
                    self.wake.io |= one;
                } else {
                    self.ready.push_back((node, slot));
                }
            }
            Kind::Feedback { .. } => {
                let out = if seq == self.nodes[node].first_seq {
                    v.first_frames[node].clone()
                } else {
                    let k = ((seq - 1) % v.topo.cap as u64) as usize;
                    match self.nodes[node].ring[k].take() {
                        Some((s, f)) if s == seq - 1 => f,
                        _ => unreachable!("a feedback is runnable once its frame is stored"),
                    }
                };
                self.steps.push_back(Step::Finished(node, slot, out));
            }
            Kind::Process | Kind::Sink(_) => {
                // A frame at or after a source's end is empty everywhere.
                let empty = seq >= self.end_seq
                    || t.inputs
                        .iter()
                        .any(|&i| self.slots[slot].outputs[i].is_none());
                if empty {
                    for &i in &t.inputs {
                        drop(self.consume(slot, i));
                    }
                    self.steps.push_back(Step::Finished(node, slot, None));
                } else if let Kind::Sink(port) = t.kind {
                    let frame = self.consume(slot, t.inputs[0]).expect("checked above");
                    // When it was processed, not when its turn came.
                    let ready_ns = self.slots[slot].ready_ns[node];
                    self.hand_to_port(port, slot, slot, frame, ready_ns);
                } else {
                    self.ready.push_back((node, slot));
                }
            }
        }
    }

    /// Hands `frame` of frame `slot` to sink `port`; the sink will finish it at `out_slot`
    /// (the frame's, or its leaky branch's).
    fn hand_to_port(
        &mut self,
        port: usize,
        slot: usize,
        out_slot: usize,
        frame: Frame,
        ready_ns: i64,
    ) {
        let p = &mut self.ports[port];
        debug_assert!(p.ready.is_none(), "one frame at a time for a sink");
        p.ready = Some(PortItem {
            slot: out_slot,
            ctx: self.slots[slot].ctx,
            frame,
            ready_ns,
            begun_ns: self.slots[slot].begun_ns,
            version: self.ver.number,
        });
        self.wake.ports = true;
    }

    /// The first node of a leaky branch is runnable for frame `slot`: the branch takes the
    /// frame (its inputs, its parameters) into its own slot, or skips it when it still holds
    /// an earlier one.
    fn enter_branch(&mut self, v: &Version, head: usize, slot: usize) {
        let t = &v.topo.nodes[head];
        let b = t.branch.expect("a head is in a branch");
        let empty = self.slots[slot].ctx.seq >= self.end_seq
            || t.inputs
                .iter()
                .any(|&i| self.slots[slot].outputs[i].is_none());
        if self.branch_busy[b] || empty {
            for &i in &t.inputs {
                drop(self.consume(slot, i));
            }
            if !empty {
                v.stages[head].skip();
            }
            return;
        }
        self.branch_busy[b] = true;
        let bs = v.topo.cap + b;
        let ctx = self.slots[slot].ctx;
        let begun_ns = self.slots[slot].begun_ns;
        {
            let s = &mut self.slots[bs];
            s.ctx = ctx;
            s.active = true;
            s.begun = true;
            s.begun_ns = begun_ns;
            s.left = v.topo.branches[b].len();
            for &i in &v.topo.branches[b] {
                let n = &v.topo.nodes[i];
                s.missing[i] = n.inputs.len() as u32;
                s.uses[i] = n.consumers.len() as u32;
                self.nodes[i].owed += 1;
            }
        }
        let mut inputs = Inputs::new();
        for &i in &t.inputs {
            let f = self.consume(slot, i);
            inputs.push(f);
        }
        if let Kind::Sink(port) = t.kind {
            // A leaky sink fed by the show (`t. ! sink leaky=true`) heads a branch of its own:
            // its frame goes to its port, not to a worker; it has no parameters to copy.
            let frame = inputs.frames[0].take().expect("checked above");
            let ready_ns = self.slots[slot].ready_ns[head];
            self.hand_to_port(port, slot, bs, frame, ready_ns);
            return;
        }
        self.branch_inputs[b] = inputs;
        // The branch runs this frame with the frame's parameters, which are resampled when
        // the frame's slot is reused: a copy (assignments, no allocation; two uncontended
        // mutexes, the only ones taken under this lock).
        {
            let from = v.snapshots[slot].lock().unwrap_or_else(|p| p.into_inner());
            let mut to = v.snapshots[bs].lock().unwrap_or_else(|p| p.into_inner());
            to.copy_nodes(&from, &v.topo.branches[b]);
        }
        self.ready.push_back((head, bs));
    }

    /// `node` has finished `slot` with `output` (none: an empty frame).
    fn finished_node(&mut self, v: &Version, node: usize, slot: usize, output: Option<Frame>) {
        let t = &v.topo.nodes[node];
        debug_assert!(self.nodes[node].owed > 0, "a node finishes a frame it owes");
        self.nodes[node].owed = self.nodes[node].owed.saturating_sub(1);
        if t.serial && t.branch.is_none() {
            self.release_serial(node);
        }
        let seq = self.slots[slot].ctx.seq;
        for &f in &t.feeds {
            let k = (seq % v.topo.cap as u64) as usize;
            self.nodes[f].ring[k] = Some((seq, output.clone()));
            self.try_feedback(v, f, seq + 1);
        }
        let s = &mut self.slots[slot];
        if s.uses[node] > 0 {
            s.outputs[node] = output;
        } else {
            drop(output);
        }
        let gated: &[usize] = if t.kind == Kind::Source {
            &v.topo.gated
        } else {
            &[]
        };
        // Its consumers have one input fewer to wait for; sinks and leaky branches, one
        // source fewer.
        for &c in t.consumers.iter().chain(gated) {
            s.missing[c] -= 1;
            if s.missing[c] == 0 {
                if matches!(v.topo.nodes[c].kind, Kind::Sink(_)) {
                    s.ready_ns[c] = now_ns();
                }
                self.steps.push_back(Step::Runnable(c, slot));
            }
        }
        s.left -= 1;
        if s.left == 0 {
            s.active = false;
            if slot < v.topo.cap {
                self.in_flight -= 1;
            } else {
                self.branch_busy[slot - v.topo.cap] = false;
            }
        }
    }

    /// Feedback `f` may yield for frame `seq` once that frame has begun and its node has
    /// finished the frame before.
    fn try_feedback(&mut self, v: &Version, f: usize, seq: u64) {
        let slot = (seq % v.topo.cap as u64) as usize;
        let s = &self.slots[slot];
        if !(s.active && s.begun && s.ctx.seq == seq) {
            return;
        }
        let stored = seq == self.nodes[f].first_seq || {
            let k = ((seq - 1) % v.topo.cap as u64) as usize;
            matches!(self.nodes[f].ring[k], Some((s, _)) if s == seq - 1)
        };
        if stored {
            self.steps.push_back(Step::Runnable(f, slot));
        }
    }

    /// A serial node finished a frame: let the next one in, if it is already waiting.
    fn release_serial(&mut self, node: usize) {
        self.nodes[node].next_seq += 1;
        self.let_in(node);
    }

    /// Serial `node` is free: its frame `next_seq` may run, if it is already waiting.
    fn let_in(&mut self, node: usize) {
        let cap = self.ver.topo.cap as u64;
        let st = &mut self.nodes[node];
        st.busy = false;
        let next = st.next_seq;
        let slot = (next % cap) as usize;
        if st.parked[slot] && self.slots[slot].active && self.slots[slot].ctx.seq == next {
            st.parked[slot] = false;
            self.steps.push_back(Step::Runnable(node, slot));
        }
    }

    /// Counts one claimed slice of `slot` as done; wakes its owner when it was the last.
    /// The first panic is kept for the owner to re-raise (a second one in the same frame is
    /// dropped here: an error path, the only free under this lock).
    pub(crate) fn count_slice(&mut self, slot: usize, panicked: Option<PanicPayload>) {
        let s = &mut self.slices[slot];
        s.done += 1;
        if s.panicked.is_none() {
            s.panicked = panicked;
        }
        if s.done == s.n {
            self.wake.slices = true;
        }
    }

    /// Wakes every idle worker once the lock is released (slices to help with).
    /// Asks for another worker (done when the lock is released).
    pub(crate) fn announce_work(&mut self) {
        self.wake.work_one = true;
    }

    pub(crate) fn wake_all_workers(&mut self) {
        self.wake.work_all = true;
    }

    /// The frame whose turn it is at sink `port`, if it has arrived.
    pub(crate) fn take_ready(&mut self, port: usize) -> Option<PortItem> {
        self.ports[port].ready.take()
    }

    /// Drops every frame in flight (they go back to their pools) and what waits for them, of
    /// every version.
    pub(crate) fn drop_pending(&mut self) {
        self.drop_own();
        if self.old.is_some() {
            self.with_old(State::drop_own);
        }
    }

    /// `drop_pending` for the version swapped in.
    fn drop_own(&mut self) {
        self.ready.clear();
        self.io_ready.clear();
        self.steps.clear();
        for p in &mut self.ports {
            p.ready = None;
            p.held_over = false;
        }
        for s in &mut self.slots {
            s.active = false;
            for o in &mut s.outputs {
                *o = None;
            }
        }
        for n in &mut self.nodes {
            n.parked.iter_mut().for_each(|p| *p = false);
            n.ring.iter_mut().for_each(|r| *r = None);
            n.owed = 0;
        }
        for b in &mut self.branch_inputs {
            b.clear();
        }
        self.branch_busy.iter_mut().for_each(|b| *b = false);
        self.in_flight = 0;
    }

    /// The output thread of `port` has consumed (or failed to consume) the frame of `slot`.
    pub(crate) fn sink_done(
        &mut self,
        shared: &Shared,
        port: usize,
        slot: usize,
        version: u64,
        result: Result<()>,
    ) {
        // A frame of a replaced version (see `maybe_switch`): its bookkeeping went with that
        // version. A show sink's next frame, the new version's first, waited for it.
        if !self.abort && version == self.ver.number {
            let node = self.ports[port].node;
            self.steps.push_back(Step::Finished(node, slot, None));
            self.drain();
        } else if !self.abort
            && self
                .old
                .as_ref()
                .is_some_and(|p| p.state.ver.number == version)
        {
            // A frame of the version an overlapping switch replaced, still finishing: its
            // sink may now be handed over to the running version.
            self.with_old(|st| {
                let node = st.ports[port].node;
                st.steps.push_back(Step::Finished(node, slot, None));
                st.drain();
            });
            self.hand_over();
        } else if !self.abort && self.ports[port].held_over {
            self.ports[port].held_over = false;
            let node = self.ports[port].node;
            self.let_in(node);
            self.drain();
        }
        if let Err(e) = result {
            self.fail(e);
        }
        self.after_change(shared);
    }

    /// Bookkeeping after any change: drops pending work on abort, publishes the in-flight
    /// count, wakes whoever can now proceed.
    pub(crate) fn after_change(&mut self, shared: &Shared) {
        if self.abort {
            self.drop_pending();
        }
        self.maybe_retire();
        self.maybe_switch(shared);
        self.maybe_retire();
        let old_in_flight = self.old.as_ref().map_or(0, |p| p.state.in_flight);
        shared
            .counters
            .in_flight
            .store(self.in_flight + old_in_flight, Ordering::Relaxed);
        if self.finished() {
            self.wake.work_all = true;
            self.wake.ports = true;
            self.wake.io = u8::MAX;
        } else if self.workers_idle() && self.has_work() {
            // Several independent jobs (branches of one frame): wake every idle worker.
            if self.ready.len() + self.old_ready() + usize::from(self.begin_runnable()) > 1 {
                self.wake.work_all = true;
            } else {
                self.wake.work_one = true;
            }
        }
    }

    /// Arms a live edit's switch: no frame begins in the running version from now on; once
    /// the frames in flight have left every node but the sinks holding them, the next version
    /// takes over (`maybe_switch`). The live lock is taken inside (as at the switch): a
    /// command read since the edit was read is shown from the frame its reply named, so the
    /// switch comes after that frame (`Live::arm`), and the commands read from now on know
    /// the switch frame and which nodes it ends (`Live::gone`).
    pub(crate) fn arm_switch(&mut self, mut p: Box<Pending>, shared: &Shared) {
        debug_assert!(self.pending.is_none());
        p.armed_ns = now_ns();
        // A version an edit switched in shows at least its first frame: an edit armed before
        // that frame began switches after it (else its reply would name a frame that shows
        // the next edit's graph instead).
        let at = if self.ver.number > 0 {
            self.next_seq.max(self.ver_first + 1)
        } else {
            self.next_seq
        };
        self.switch_at = shared.live.lock().arm(at, &p.fates);
        self.pending = Some(p);
    }

    /// Switches to the pending version once the running one's frames are done with: every
    /// frame before the switch frame has left every node but the show's sinks that hold it
    /// (at their port, or being consumed by their output thread: a frame waiting there for
    /// its deadline does not hold the next version's first frame back), no job runs, no
    /// leaky branch holds a frame that has not reached its sink. Moves only (the new version
    /// was built off the frame path): the kept nodes' instances, sources and feedback rings,
    /// and their live values, go into the new version; what is replaced waits in `switched`
    /// to be dropped off the frame path. A sink holding a frame of the replaced version stays
    /// busy in the new one until that frame's completion (`Port::held_over`).
    fn maybe_switch(&mut self, shared: &Shared) {
        // After the sources' end no frame begins any more: an edit switched in then would
        // be answered with a frame that is never output; it is refused at the run's end.
        if self.pending.is_none()
            || self.source_done
            || self.abort
            || self.broken
            || self.begin_busy
            || self.switched.is_some()
            || self.old.is_some()
            || self.news.is_some()
            || self.next_seq < self.switch_at
        {
            return;
        }
        if self.can_overlap() {
            self.switch_overlapping(shared);
            return;
        }
        if self.running > 0
            || !self.ready.is_empty()
            || !self.io_ready.is_empty()
            || self.slice_pending().is_some()
            || !self.only_held_at_sinks()
        {
            return;
        }
        // A leaky branch still holding a frame has, with no job running or queued and no
        // frame waiting at a port, only its sinks left: their output threads are consuming
        // that frame (a preview blocked in its I/O). The switch does not wait for them (a
        // leaky branch never holds back the show); their completion is ignored (`sink_done`).
        let mut p = self.pending.take().expect("checked");
        let n = self.next_seq;
        for port in &mut self.ports {
            port.held_over = self.nodes[port.node].busy;
        }
        let next = &mut p.state;
        for &(o, j) in &p.moves {
            let (old, new) = (&mut self.nodes[o], &mut next.nodes[j]);
            std::mem::swap(&mut new.free, &mut old.free);
            std::mem::swap(&mut new.source, &mut old.source);
            std::mem::swap(&mut new.ring, &mut old.ring);
            new.first_seq = old.first_seq;
        }
        start_new_nodes(next, &p.moved, n);
        move_live_stages(&mut shared.live.lock(), &mut p, n);
        let next = &mut p.state;
        std::mem::swap(&mut self.ver, &mut next.ver);
        std::mem::swap(&mut self.nodes, &mut next.nodes);
        std::mem::swap(&mut self.slots, &mut next.slots);
        std::mem::swap(&mut self.ready, &mut next.ready);
        std::mem::swap(&mut self.io_ready, &mut next.io_ready);
        std::mem::swap(&mut self.steps, &mut next.steps);
        std::mem::swap(&mut self.branch_busy, &mut next.branch_busy);
        std::mem::swap(&mut self.branch_inputs, &mut next.branch_inputs);
        for (port, np) in self.ports.iter_mut().zip(&next.ports) {
            port.node = np.node;
            // Its first frame of the new version (`n`) waits for the held one.
            self.nodes[port.node].busy = port.held_over;
        }
        // The frames still held by sinks are the replaced version's (its pools', its slots'):
        // the new version's frames are counted afresh.
        self.in_flight = 0;
        self.announce_switch(shared, &mut p, n);
        self.switched = Some(p);
    }

    /// Whether the pending version may switch in while the running one still has frames in
    /// flight (`switch_overlapping`): neither has a leaky branch or a feedback (a branch's
    /// slot and a feedback's ring are not handed over node by node), and no sink still waits
    /// for a frame of an earlier switch. Otherwise the switch waits for the frames in flight
    /// to be made.
    fn can_overlap(&self) -> bool {
        let Some(next) = self.pending.as_ref().map(|p| &p.state) else {
            return false;
        };
        let simple = |v: &Version| {
            v.topo.branches.is_empty()
                && v.topo
                    .nodes
                    .iter()
                    .all(|t| !matches!(t.kind, Kind::Feedback { .. }))
        };
        simple(&self.ver) && simple(&next.ver) && !self.ports.iter().any(|p| p.held_over)
    }

    /// Switches to the pending version at frame `n` (the next to begin) at once, while the
    /// running version's frames before `n` are still being made: those finish in their
    /// version, which moves to `old` and runs beside the new one (its jobs name it; its frames
    /// go first) until its last frame has left every node (`maybe_retire`). A kept node the
    /// old version still owes frames to is *held* in the new one (its frames from `n` park)
    /// and handed over (instances, source: one of each, moved) once it has finished the old
    /// version's last frame (`hand_over`), so it still takes every frame once, in order; a
    /// kept sink likewise takes `n` only after the old version's last frame. The old frames'
    /// nodes that have not started yet take their parameter values now (the live stages go
    /// to the new version). Moves and assignments only, like the waiting switch.
    fn switch_overlapping(&mut self, shared: &Shared) {
        let mut p = self.pending.take().expect("checked");
        let n = self.next_seq;
        let next = &mut p.state;
        for &(o, j) in &p.moves {
            let (old, new) = (&mut self.nodes[o], &mut next.nodes[j]);
            new.first_seq = old.first_seq;
            if old.owed == 0 {
                std::mem::swap(&mut new.free, &mut old.free);
                std::mem::swap(&mut new.source, &mut old.source);
                std::mem::swap(&mut new.ring, &mut old.ring);
            } else {
                new.held = true;
            }
        }
        start_new_nodes(next, &p.moved, n);
        {
            let mut live = shared.live.lock();
            let cap = self.ver.topo.cap;
            for s in 0..live.stages.len() {
                live.catch_up(s, n, &self.ver.snapshots, cap);
            }
            move_live_stages(&mut live, &mut p, n);
        }
        swap_versions(self, &mut p.state);
        self.announce_switch(shared, &mut p, n);
        self.old = Some(p);
    }

    /// The end of both switches, at frame `n`: the version is `p`'s now (published for the
    /// stats readers), its first frame `n`; the switch's news (the replies, the drain, the
    /// graph's view) is left for the output thread, and every port and worker looks again.
    fn announce_switch(&mut self, shared: &Shared, p: &mut Pending, n: u64) {
        self.switch_at = u64::MAX;
        self.ver_first = n;
        p.frame = n;
        p.switched_ns = now_ns();
        shared.version.store(self.ver.number, Ordering::Release);
        self.news = Some(SwitchNews {
            posted: p.posted.take(),
            frame: n,
            drain_ns: p.switched_ns - p.armed_ns,
            graph_view: p.graph_view.take(),
            removed: std::mem::take(&mut p.removed),
        });
        self.wake.ports = true;
        self.wake.work_all = true;
    }

    /// Hands the kept nodes that the replaced version no longer owes a frame over to the
    /// running one: their instances, source and ring move in, and their parked frames become
    /// runnable (in order: a serial node parks again what is not its turn).
    fn hand_over(&mut self) {
        let Some(mut p) = self.old.take() else {
            return;
        };
        let mut any = false;
        for &(o, j) in &p.moves {
            if !self.nodes[j].held || p.state.nodes[o].owed > 0 {
                continue;
            }
            let (old, new) = (&mut p.state.nodes[o], &mut self.nodes[j]);
            std::mem::swap(&mut new.free, &mut old.free);
            std::mem::swap(&mut new.source, &mut old.source);
            std::mem::swap(&mut new.ring, &mut old.ring);
            new.held = false;
            for (k, parked) in new.parked.iter_mut().enumerate() {
                if *parked && self.slots[k].active {
                    *parked = false;
                    self.steps.push_back(Step::Runnable(j, k));
                    any = true;
                }
            }
        }
        self.old = Some(p);
        if any {
            self.drain();
        }
    }

    /// The replaced version of an overlapping switch has no frame left in flight and no job
    /// running: it goes to `switched`, for the master output thread to hand to the edit thread
    /// (which drops it off the frame path).
    fn maybe_retire(&mut self) {
        let done = self
            .old
            .as_ref()
            .is_some_and(|p| p.state.in_flight == 0 && p.state.running == 0);
        if !done || self.switched.is_some() {
            return;
        }
        debug_assert!(
            self.abort || self.nodes.iter().all(|n| !n.held),
            "every kept node was handed over"
        );
        self.switched = self.old.take();
        self.wake.ports = true;
    }

    /// Whether the running version's frames in flight have left every node but the show's
    /// sinks holding them, as `maybe_switch` needs: each one's remaining nodes are exactly
    /// the sinks that hold it (a sink still waiting for its turn, at a serial node, does not
    /// count: its frame must reach it in this version's bookkeeping first); no frame waits at
    /// a leaky sink's port (its branch may take the next one only once that one is taken);
    /// each holding sink's port is a show sink in the next version too (it will wait there);
    /// no sink still waits for the frame of an earlier switch.
    fn only_held_at_sinks(&self) -> bool {
        let v = &self.ver;
        let Some(next) = self.pending.as_ref().map(|p| &p.state) else {
            return false;
        };
        let holding = |node: usize, seq: u64| {
            let st = &self.nodes[node];
            v.topo.nodes[node].branch.is_none() && st.busy && st.next_seq == seq
        };
        for (i, port) in self.ports.iter().enumerate() {
            let leaky = v.topo.nodes[port.node].branch.is_some();
            if port.held_over || (leaky && port.ready.is_some()) {
                return false;
            }
            let held = self.nodes[port.node].busy && !leaky;
            let np = next.ports[i].node;
            if held && next.ver.topo.nodes[np].branch.is_some() {
                return false;
            }
        }
        self.slots[..v.topo.cap].iter().all(|s| {
            !s.active
                || s.left
                    == self
                        .ports
                        .iter()
                        .filter(|p| holding(p.node, s.ctx.seq))
                        .count()
        })
    }

    /// Records a job's outcome and returns the job the same worker should run next, if any
    /// (usually the node just made runnable: its input is warm in this worker's cache).
    pub(crate) fn complete(&mut self, done: Done, shared: &Shared) -> Option<Job> {
        if self.record(done, shared) {
            self.next_job(shared)
        } else {
            None
        }
    }

    /// Records a job's outcome (the IO thread's way: it takes no compute job next); whether
    /// the caller may take another job.
    pub(crate) fn record(&mut self, done: Done, shared: &Shared) -> bool {
        if let Done::Slice(slot, panicked) = done {
            self.count_slice(slot, panicked);
            self.after_change(shared);
            return false;
        }
        let of_old = match &done {
            Done::Node { version, .. } if *version != self.ver.number => {
                debug_assert!(
                    self.old
                        .as_ref()
                        .is_some_and(|p| p.state.ver.number == *version),
                    "a job's version is the running one or the one it replaced"
                );
                self.old.is_some()
            }
            _ => false,
        };
        if of_old {
            self.with_old(|st| st.record_own(done));
            self.hand_over();
        } else {
            self.record_own(done);
        }
        self.after_change(shared);
        !self.abort
    }

    /// `record`'s bookkeeping in the version swapped in (a node's or a beginning's outcome).
    fn record_own(&mut self, done: Done) {
        let v = Arc::clone(&self.ver);
        match done {
            Done::Slice(..) => unreachable!("counted by `record`"),
            Done::Begin { slot } => {
                self.begin_busy = false;
                if !self.abort {
                    self.slots[slot].begun = true;
                    let seq = self.slots[slot].ctx.seq;
                    for &r in &v.topo.roots {
                        match v.topo.nodes[r].kind {
                            Kind::Feedback { .. } => self.try_feedback(&v, r, seq),
                            _ => self.steps.push_back(Step::Runnable(r, slot)),
                        }
                    }
                }
            }
            Done::Node {
                node,
                slot,
                inst,
                result,
                ..
            } => {
                self.running -= 1;
                match inst {
                    Inst::Source(s) => self.nodes[node].source = Some(s),
                    Inst::Proc(i) => self.nodes[node].free.push(i),
                }
                if !self.abort {
                    let is_source = v.topo.nodes[node].kind == Kind::Source;
                    let output = match result {
                        Ok(Some(frame)) => Some(frame),
                        Ok(None) => {
                            self.end_at(self.slots[slot].ctx.seq);
                            None
                        }
                        Err(e) if is_source => {
                            // Frames before this one still reach the sinks; the error is
                            // returned at the end.
                            if self.source_error.is_none() {
                                self.source_error = Some(e);
                            } else {
                                self.garbage = Some(e);
                            }
                            self.end_at(self.slots[slot].ctx.seq);
                            None
                        }
                        Err(e) => {
                            self.fail(e);
                            None
                        }
                    };
                    if !self.abort {
                        self.steps.push_back(Step::Finished(node, slot, output));
                    }
                }
            }
        }
        self.drain();
    }

    /// A source ended at frame `seq`: no frame begins from then on, and frames from it on that
    /// have begun flow through empty.
    fn end_at(&mut self, seq: u64) {
        self.end_seq = self.end_seq.min(seq);
        self.source_done = true;
    }
}

impl Shared {
    /// Takes the scheduler lock (a worker, or the run's set-up and end). The hold is timed.
    pub(crate) fn lock(&self) -> Locked<'_> {
        // No poisoning: a panic in an element is caught in `run_job`, and one in the scheduler's
        // own code marks the run broken (`Shared::break_run`).
        let guard = self.state.lock();
        Locked {
            guard: Some(guard),
            shared: self,
            since: now_ns(),
        }
    }

    /// Takes the scheduler lock from an output thread: the time it waited to get it is recorded
    /// too (the priority-inversion figure: a SCHED_FIFO thread waiting on worker threads).
    pub(crate) fn lock_output(&self) -> Locked<'_> {
        let asked = now_ns();
        let locked = self.lock();
        self.counters
            .output_lock_wait
            .record((locked.since - asked).max(0) as u64);
        locked
    }

    /// Does the wake-ups collected under the lock.
    fn wake(&self, w: Wake) {
        if let Some((h, show)) = self.host.get() {
            if w.work_all || w.work_one {
                h.work_for(*show);
            }
        } else if w.work_all {
            self.work.notify_all();
        } else if w.work_one {
            self.work.notify_one();
        }
        if w.slices {
            self.slice_done.notify_all();
        }
        for (k, s) in self.io_signals.iter().enumerate() {
            if w.io & (1 << k) != 0 {
                s.raise();
            }
        }
        if w.ports {
            for p in &self.port_signals {
                p.raise();
            }
        }
    }
}

/// Swaps what belongs to one graph version between two states: the version, its nodes,
/// slots, queues, frames in flight and running jobs, and the sinks' nodes of the ports. What
/// is the show's whatever the version stays (frame numbers, the end, the ports' frames, the
/// IO thread, slices, wake-ups). Moves only.
/// Both switches: the new version's nodes take frames from `n`; those not kept from the old
/// one (`moved[j]` false) also count their first frame (and a source its origin) from `n`.
fn start_new_nodes(next: &mut State, moved: &[bool], n: u64) {
    for (j, st) in next.nodes.iter_mut().enumerate() {
        st.next_seq = n;
        if !moved[j] {
            st.first_seq = n;
            if let Some(src) = st.source.as_mut() {
                src.origin = n;
            }
        }
    }
}

/// Both switches: the kept nodes' live parameters (values, oscillators, bypass) move to their
/// place in the new version's stages, which become the live ones, sampling from frame `n`; a
/// node replaced by one of the same name and element first takes what commands read after the
/// edit set on it (`Live::carry`).
fn move_live_stages(live: &mut crate::live::Live, p: &mut Pending, n: u64) {
    live.carry(&mut p.live_stages, &p.moved, &p.moves);
    for &(o, j) in &p.moves {
        if let Some(old) = live.stages.get_mut(o) {
            std::mem::swap(&mut old.params, &mut p.live_stages[j].params);
            p.live_stages[j].bypass = old.bypass;
        }
    }
    std::mem::swap(&mut live.stages, &mut p.live_stages);
    live.switched(p.state.ver.number, n);
}

fn swap_versions(a: &mut State, b: &mut State) {
    std::mem::swap(&mut a.ver, &mut b.ver);
    std::mem::swap(&mut a.nodes, &mut b.nodes);
    std::mem::swap(&mut a.slots, &mut b.slots);
    std::mem::swap(&mut a.ready, &mut b.ready);
    std::mem::swap(&mut a.io_ready, &mut b.io_ready);
    std::mem::swap(&mut a.steps, &mut b.steps);
    std::mem::swap(&mut a.branch_busy, &mut b.branch_busy);
    std::mem::swap(&mut a.branch_inputs, &mut b.branch_inputs);
    std::mem::swap(&mut a.in_flight, &mut b.in_flight);
    std::mem::swap(&mut a.max_in_flight, &mut b.max_in_flight);
    std::mem::swap(&mut a.running, &mut b.running);
    for (x, y) in a.ports.iter_mut().zip(b.ports.iter_mut()) {
        std::mem::swap(&mut x.node, &mut y.node);
    }
}

/// A fresh state for `topo`: every queue at its final capacity.
pub(crate) fn new_state(
    ver: Arc<Version>,
    threads: usize,
    ports: Vec<usize>,
    mut nodes: Vec<NodeState>,
) -> State {
    let topo = &ver.topo;
    let n = topo.nodes.len();
    let nb = topo.branches.len();
    let slot = || Slot {
        ctx: FrameCtx { seq: 0, pts_ns: 0 },
        active: false,
        begun: false,
        begun_ns: 0,
        outputs: (0..n).map(|_| None).collect(),
        missing: vec![0; n],
        uses: vec![0; n],
        ready_ns: vec![0; n],
        left: 0,
    };
    for st in &mut nodes {
        st.parked = vec![false; topo.cap];
    }
    State {
        pending: None,
        switch_at: u64::MAX,
        ver_first: 0,
        switched: None,
        news: None,
        old: None,
        ver: Arc::clone(&ver),
        nodes,
        slots: (0..topo.cap + nb).map(|_| slot()).collect(),
        ready: VecDeque::with_capacity(n * (topo.cap + nb) + 1),
        io: false,
        io_busy: 0,
        io_idle: 0,
        io_ready: VecDeque::with_capacity(topo.sources.len() * topo.cap + 1),
        branch_busy: vec![false; nb],
        branch_inputs: (0..nb).map(|_| Inputs::new()).collect(),
        steps: VecDeque::with_capacity(4 * n * (topo.cap + nb) + 8),
        ports: ports
            .into_iter()
            .map(|node| Port {
                node,
                ready: None,
                held_over: false,
            })
            .collect(),
        in_flight: 0,
        max_in_flight: topo.cap,
        next_seq: 0,
        begin_limit: u64::MAX,
        begin_busy: false,
        end_seq: u64::MAX,
        source_done: false,
        abort: false,
        error: None,
        source_error: None,
        waiting: 0,
        host: false,
        running: 0,
        slices: (0..threads).map(|_| SliceSlot::default()).collect(),
        broken: false,
        wake: Wake::default(),
        garbage: None,
    }
}

/// The scheduler lock, held. Derefs to the [`State`]. On release it records how long it was
/// held, then, with the mutex released, drops a discarded error and does the wake-ups the state
/// machine asked for.
pub(crate) struct Locked<'a> {
    guard: Option<PiGuard<'a, State>>,
    shared: &'a Shared,
    since: i64,
}

impl Locked<'_> {
    /// Waits on `cv` (a condition variable of this mutex), releasing the lock meanwhile; the
    /// wait is not counted as holding it. Pending wake-ups are done first.
    ///
    /// When wake-ups are pending, they are done with the mutex released (as on every release:
    /// a woken output thread must not run into a held lock) and this returns at once without
    /// waiting, like a spurious wake-up: callers wait in a loop that checks their condition.
    pub(crate) fn wait(mut self, cv: &PiCondvar) -> Self {
        let mut guard = self.guard.take().expect("held");
        let wake = std::mem::take(&mut guard.wake);
        // (A discarded error stays in the state: it is dropped at the next release.)
        let held = (now_ns() - self.since).max(0) as u64;
        let guard = if wake.any() {
            drop(guard);
            self.shared.counters.lock_hold.record(held);
            self.shared.wake(wake);
            self.shared.state.lock()
        } else {
            self.shared.counters.lock_hold.record(held);
            cv.wait(guard)
        };
        self.guard = Some(guard);
        self.since = now_ns();
        self
    }
}

impl Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        self.guard.as_deref().expect("held")
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.guard.as_deref_mut().expect("held")
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            let wake = std::mem::take(&mut guard.wake);
            let garbage = guard.garbage.take();
            let held = (now_ns() - self.since).max(0) as u64;
            drop(guard);
            // Recorded with the mutex released: the histogram's atomics are not held time.
            self.shared.counters.lock_hold.record(held);
            drop(garbage);
            self.shared.wake(wake);
        }
    }
}
