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
//! oscillator time; each node samples its live parameters when it starts the frame) when
//! fewer than `in_flight` frames are in flight; then every source of the graph is runnable
//! for it (sources advance in lockstep), and every feedback node as soon as the node it feeds
//! back has finished the previous frame. A frame leaves flight when every
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
//! # Versions
//! Each graph version in flight has its own [`Flight`] (`flight.rs`): its slots, nodes, queues
//! and counts. The state holds the running one; a live edit's next version, built off the
//! frame path, arrives as a [`NextVersion`] and is armed (`switch.rs`): no frame begins in the
//! running version from its switch frame N on. When neither version has a leaky branch or a
//! feedback, it switches in at once, at N (`switch_overlapping`): the running flight becomes
//! a [`Retiring`] one, kept beside the new one until its frames before N have left every
//! node, then a [`Replaced`] one, which the master output thread hands to the edit thread to
//! be dropped off the frame path. Jobs name their version (`Scheduler::job_ver` picks its
//! flight); the retiring version's jobs go first, and the new one's leave it a worker
//! (`new_jobs_held_back`). A node the edit keeps is handed over (its one set of instances,
//! its source, moved) once the retiring version no longer owes it a frame
//! (`NodeState::owed`); until then it awaits its hand-over and its frames from N on park
//! (`NodeState::awaiting_hand_over`), so it still takes every frame once and in order.
//! Otherwise the switch waits for the frames in flight to be made (`maybe_switch`,
//! `frames_only_at_sinks`) and the replaced version is [`Replaced`] at once.
//!
//! # The lock
//! Everything here runs under the one scheduler mutex ([`Shared::lock`], `lock.rs`, where the
//! order of the show's locks is written), taken by a worker between jobs, by an IO thread
//! around its job and by an output thread once per frame. Under it: bookkeeping only, a few
//! dozen steps per node and frame. Nothing allocates, prints, formats or calls element or user
//! code there (frames going back to their pool is a lock-free push; a version switch moves
//! what the edit thread built and leaves what it replaced for the edit thread to drop):
//! wake-ups are collected in [`Wake`] and a discarded error in `Run::garbage`, and both are
//! dealt with by [`Locked`] after the mutex is released. The only locks taken under it are
//! the live lock (arming and switching a version) and a version's snapshot mutexes (a leaky
//! branch taking a frame), in the order written in `lock.rs`. Every hold is timed into a
//! lock-free histogram (`lockstats.rs`).
//!
//! # Files
//! | file | its job |
//! |---|---|
//! | `mod.rs` | this contract; [`Scheduler`], [`Shared`] |
//! | `job.rs` | the vocabulary: what a node is to the scheduler, a job and its outcome |
//! | `version.rs` | [`Version`]: one graph version, fixed while it runs |
//! | `flight.rs` | [`Flight`]: one version's frames, nodes, queues and counts |
//! | `run.rs` | [`Run`]: the run's end, errors, ports, wake-ups; the run's life |
//! | `select.rs` | which job a worker or IO thread takes next; slices |
//! | `ready.rs` | what a completed job makes runnable; the bookkeeping after every change |
//! | `branch.rs` | leaky branches taking or skipping a frame |
//! | `ports.rs` | the sinks' ports, the signal an output thread waits on, a sink's completion |
//! | `switch.rs` | a live edit's switch: [`NextVersion`], [`Retiring`], [`Replaced`] |
//! | `lock.rs` | the lock guard, wake-ups after the unlock, the waits; the lock order |
//! | `lockstats.rs` | the lock-hold histogram |

mod branch;
mod flight;
mod job;
mod lock;
mod lockstats;
mod pixels;
mod ports;
mod ready;
mod run;
mod select;
mod switch;
mod version;

pub(crate) use crate::exec::{GpuProc, Inst, Instance, Proc, SourceInst};
pub(crate) use flight::NodeState;
pub(crate) use job::{Done, Inputs, Job, Kind, Topo, TopoNode};
pub(crate) use lock::Locked;
pub use lockstats::LockSummary;
pub(crate) use lockstats::Log2Histogram;
pub(crate) use pixels::Pixels;
pub(crate) use ports::{PortItem, PortQueue, PortSignal};
pub(crate) use switch::{EditPlan, NextVersion, Replaced, SwitchNews};
pub(crate) use version::Version;

use flight::{Flight, Step};
use lock::Wake;
use ports::Port;
use run::Run;
use switch::Retiring;

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use framepipe_clock::{PiCondvar, PiMutex};
use framepipe_core::Rational;

use crate::exec::SliceFork;
use crate::live::Live;
use crate::stats::Counters;
use crate::stats::EventFn;

/// The scheduler's state for one show, under the scheduler lock (`Shared::lock`): the running
/// version's [`Flight`], an armed edit's [`NextVersion`], a [`Retiring`] version finishing its
/// frames, and what the run has whatever the version (frame numbering, [`Run`], the slices).
pub(crate) struct Scheduler {
    /// The graph version frames begin in now.
    flight: Flight,
    /// A live edit's next version, armed: no frame at or after `switch_at` begins in the
    /// running one.
    next: Option<NextVersion>,
    switch_at: u64,
    /// The first frame of the running version (0, or the frame a live edit switched at).
    ver_first: u64,
    /// An overlapping switch's replaced version, still finishing its frames beside the running
    /// one (see `switch_overlapping`).
    retiring: Option<Retiring>,
    /// A replaced version with no frame left, for the master output thread to hand to the edit
    /// thread, which drops it off the frame path.
    replaced: Option<Replaced>,
    /// A switch happened: the edit's command and the frame it is visible from, for the master
    /// output thread to answer (at the switch, before the replaced version is done).
    news: Option<SwitchNews>,
    /// What every flight's bookkeeping writes: the end, errors, ports, IO threads, wake-ups.
    run: Run,
    /// IO threads running a job (counted in their flight's `running` too).
    io_busy: usize,
    /// Jobs the GPU thread has taken and not reported (a download's until its readback is
    /// in; counted in their flight's `running` too).
    gpu_busy: usize,
    /// The next frame to begin.
    next_seq: u64,
    /// Paced runs: the last frame allowed to begin now (just in time for its deadline; set by
    /// the master output thread as it releases frames). `u64::MAX`: no limit.
    begin_limit: u64,
    /// A frame's beginning job is out (one at a time, in order).
    begin_busy: bool,
    /// One fork per worker for its fork-join slice jobs.
    slices: Vec<SliceFork>,
    /// A panic outside any element left the state inconsistent: the run is over whatever the
    /// in-flight count says (see `Shared::break_run`).
    broken: bool,
}

/// What a show's threads share: the scheduler lock and its condition variables, the live
/// values' lock, the signals each thread waits on, and the run's counters and view. The lock
/// order is in `lock.rs`.
pub(crate) struct Shared {
    /// The scheduler lock ([`Shared::lock`]). Priority-inheriting: while the SCHED_FIFO
    /// output thread waits for it, the worker holding it runs at the output thread's priority.
    scheduler: PiMutex<Scheduler>,
    /// The show's idle workers (its own, or a host's), as a wake-up reaches them.
    pub(crate) workers: crate::exec::IdleWorkers,
    /// A slice owner waits here for the slices other workers took
    /// ([`Locked::wait_for_slices`]).
    slice_done: PiCondvar,
    pub(crate) rate: Rational,
    pub(crate) threads: usize,
    /// The live parameter values, under their own (priority-inheriting) mutex: commands assign
    /// to them (output thread) and the worker beginning a frame samples them; taken under the
    /// scheduler lock only by a version switch (the lock order is in `lock.rs`).
    pub(crate) live: PiMutex<Live>,
    /// One per output port (sink).
    /// (Shared with the command queue's waker: a post raises the master's.)
    pub(crate) port_signals: Vec<Arc<PortSignal>>,
    /// Per worker (then each output thread, then each IO thread, then the GPU thread): node + 1
    /// it is running (0 = none) and since when (monotonic ns), for stall detection by the
    /// master output thread.
    pub(crate) running: Vec<(AtomicUsize, AtomicI64)>,
    pub(crate) events: Option<EventFn>,
    /// The show's audio (`--audio`), when it has one: an exact feed makes the worker
    /// beginning a frame wait, off every lock, for the audio up to the frame's time.
    pub(crate) audio: Option<framepipe_audio::Feed>,
    pub(crate) counters: Arc<Counters>,
    /// The number of the running graph version, readable without the lock (the output
    /// threads re-read the version only when it changed).
    version: AtomicU64,
    /// The published state for control surfaces (`stats/view.rs`).
    pub(crate) view: crate::stats::ShowView,
    /// What the IO threads wait on, one each ([`MAX_IO_THREADS`]): all raised when a blocking
    /// source's job is queued (and at the end).
    pub(crate) io_signals: Vec<PortSignal>,
    /// The IO threads started so far (`Shared::ensure_io_threads`), one per blocking source
    /// up to [`MAX_IO_THREADS`]; joined at the run's end.
    pub(crate) io_threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// What the GPU thread waits on: raised when a GPU job is queued (and at the end).
    pub(crate) gpu_signal: PortSignal,
    /// The GPU thread, once started (`Shared::ensure_gpu_thread`); joined at the run's end.
    pub(crate) gpu_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// GPU instances a live edit removed, between the edit thread and the GPU thread.
    pub(crate) gpu_release: crate::exec::GpuRelease,
}

impl Shared {
    /// What the threads of a show run by `scheduler` share (`threads` workers; its live values, its
    /// counters, its published view); no event callback yet.
    pub(crate) fn new(
        scheduler: Scheduler,
        rate: Rational,
        threads: usize,
        live: Live,
        counters: Arc<Counters>,
        view: crate::stats::ShowView,
    ) -> Self {
        let ports = scheduler.run.ports.len();
        Shared {
            scheduler: PiMutex::new(scheduler),
            workers: Default::default(),
            slice_done: PiCondvar::new(),
            rate,
            threads,
            live: PiMutex::new(live),
            version: AtomicU64::new(0),
            port_signals: (0..ports)
                .map(|_| Arc::new(PortSignal::default()))
                .collect(),
            // Workers, output threads, the IO threads, the GPU thread.
            running: (0..threads + ports + MAX_IO_THREADS + 1)
                .map(|_| (AtomicUsize::new(0), AtomicI64::new(0)))
                .collect(),
            events: None,
            audio: None,
            counters,
            view,
            io_signals: (0..MAX_IO_THREADS).map(|_| PortSignal::default()).collect(),
            io_threads: Mutex::new(Vec::new()),
            gpu_signal: PortSignal::default(),
            gpu_thread: Mutex::new(None),
            gpu_release: Default::default(),
        }
    }

    /// The number of the running graph version, without the lock.
    pub(crate) fn running_version_number(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

/// The most IO threads a show runs: one per blocking source (`Source::blocks`), so that one
/// source waiting on its camera, pipe or peer does not hold back another's read; a show with
/// more blocking sources than this shares them (any IO thread takes any blocking source's
/// job, the oldest first).
pub(crate) const MAX_IO_THREADS: usize = 8;

impl Scheduler {
    /// A fresh scheduler for a run of `ver` (its sinks' nodes per output port, its nodes' states) on
    /// `threads` workers: every queue at its final capacity.
    pub(crate) fn new(
        ver: Arc<Version>,
        threads: usize,
        port_nodes: Vec<usize>,
        nodes: Vec<NodeState>,
    ) -> Self {
        let ports = port_nodes.len();
        Scheduler {
            flight: Flight::new(ver, port_nodes, nodes),
            next: None,
            switch_at: u64::MAX,
            ver_first: 0,
            retiring: None,
            replaced: None,
            news: None,
            run: Run::new(ports),
            io_busy: 0,
            gpu_busy: 0,
            next_seq: 0,
            begin_limit: u64::MAX,
            begin_busy: false,
            slices: (0..threads).map(|_| SliceFork::default()).collect(),
            broken: false,
        }
    }
}
