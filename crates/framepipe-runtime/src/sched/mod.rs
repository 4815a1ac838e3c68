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

mod branch;
mod job;
mod lock;
mod lockstats;
mod ports;
mod ready;
mod select;
mod switch;
mod version;

pub(crate) use job::{Done, Inputs, Inst, Instance, Job, Kind, Proc, SourceInst, Topo, TopoNode};
pub(crate) use lock::{Locked, Wake};
pub use lockstats::LockSummary;
pub(crate) use lockstats::Log2Histogram;
pub(crate) use ports::{Port, PortItem, PortQueue, PortSignal};
pub(crate) use switch::{Pending, SwitchNews};
pub(crate) use version::Version;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize};
use std::sync::{Arc, Mutex};

use framepipe_clock::{PiCondvar, PiMutex};
use framepipe_core::{Error, Frame, FrameCtx, Rational};

use crate::exec::SliceFork;
use crate::live::Live;
use crate::stats::Counters;
use crate::stats::EventFn;

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
    /// Node jobs running on workers.
    pub(crate) running: usize,
    /// One slot per worker for its fork-join slice jobs.
    pub(crate) slices: Vec<SliceFork>,
    /// A panic outside any element left the state inconsistent: the run is over whatever the
    /// in-flight count says (see `Shared::break_run`).
    pub(crate) broken: bool,
    /// Whom to wake once the lock is released (collected by the state machine under it).
    pub(crate) wake: Wake,
    /// An error that was not kept (a later one than the first), dropped after unlocking.
    pub(crate) garbage: Option<Error>,
}

pub(crate) struct Shared {
    /// The scheduler lock. Priority-inheriting: while the SCHED_FIFO output thread waits for
    /// it, the worker holding it runs at the output thread's priority.
    pub(crate) state: PiMutex<State>,
    /// The show's idle workers (its own, or a host's), as a wake-up reaches them.
    pub(crate) workers: crate::exec::IdleWorkers,
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
    /// What the IO threads wait on, one each ([`MAX_IO_THREADS`]): all raised when a blocking
    /// source's job is queued (and at the end).
    pub(crate) io_signals: Vec<PortSignal>,
    /// The IO threads started so far (`Shared::ensure_io_threads`), one per blocking source
    /// up to [`MAX_IO_THREADS`]; joined at the run's end.
    pub(crate) io_threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// The most IO threads a show runs: one per blocking source (`Source::blocks`), so that one
/// source waiting on its camera, pipe or peer does not hold back another's read; a show with
/// more blocking sources than this shares them (any IO thread takes any blocking source's
/// job, the oldest first).
pub(crate) const MAX_IO_THREADS: usize = 8;

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
        running: 0,
        slices: (0..threads).map(|_| SliceFork::default()).collect(),
        broken: false,
        wake: Wake::default(),
        garbage: None,
    }
}
