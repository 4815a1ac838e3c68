//! The run's state whatever the version ([`Run`]: its end, errors, the sinks' ports, the IO
//! threads' idle bits, the wake-ups) and the run's life: its end, an error, a stop, and what
//! the other modules ask of the scheduler about the run.

use std::sync::Arc;

use framepipe_core::Error;

use super::{Port, Scheduler, Version, Wake};

/// What every flight's bookkeeping shares, whichever version it runs: taken by `&mut` by the
/// [`Flight`](super::Flight) methods, so that a retiring version's frames and the running
/// version's write to the same end, errors, ports and wake-ups.
pub(crate) struct Run {
    /// Per sink: the frame whose turn it is there, for that sink's output thread.
    pub(super) ports: Vec<Port>,
    /// IO threads serve this show's blocking sources (`TopoNode::blocks`): their jobs wait in
    /// a flight's `io_ready` for them, not in `ready` for the compute workers.
    pub(super) io: bool,
    /// IO threads waiting for a job, bit K for IO thread K: a queued job wakes one of them
    /// (the others would only find it taken).
    pub(super) io_idle: u8,
    /// The GPU thread waits for a job: a queued one wakes it.
    pub(super) gpu_idle: bool,
    /// Frames from this one on are empty (a source ended or failed there).
    pub(super) end_seq: u64,
    /// No frame begins any more.
    pub(super) source_done: bool,
    pub(super) abort: bool,
    pub(super) error: Option<Error>,
    pub(super) source_error: Option<Error>,
    /// An error that was not kept (a later one than the first), dropped after unlocking.
    pub(super) garbage: Option<Error>,
    /// Whom to wake once the lock is released (collected by the state machine under it).
    pub(super) wake: Wake,
}

impl Run {
    pub(super) fn new(ports: usize) -> Self {
        Run {
            ports: (0..ports).map(|_| Port::default()).collect(),
            io: false,
            io_idle: 0,
            gpu_idle: false,
            end_seq: u64::MAX,
            source_done: false,
            abort: false,
            error: None,
            source_error: None,
            garbage: None,
            wake: Wake::default(),
        }
    }

    /// Ends the run with `e` (the first error is the one returned; a later one is dropped
    /// after unlocking).
    pub(super) fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        } else {
            self.garbage = Some(e);
        }
        self.abort = true;
        self.wake_everyone();
    }

    /// A source failed: the frames before go on; its error is returned at the end (a later
    /// one is dropped after unlocking).
    pub(super) fn source_failed(&mut self, e: Error) {
        if self.source_error.is_none() {
            self.source_error = Some(e);
        } else {
            self.garbage = Some(e);
        }
    }

    /// A source ended at frame `seq`: no frame begins from then on, and frames from it on that
    /// have begun flow through empty.
    pub(super) fn end_at(&mut self, seq: u64) {
        self.end_seq = self.end_seq.min(seq);
        self.source_done = true;
    }

    /// A job was queued for the GPU thread: woken if it waits.
    pub(super) fn wake_gpu(&mut self) {
        if std::mem::take(&mut self.gpu_idle) {
            self.wake.gpu = true;
        }
    }

    /// Every worker, output thread and IO thread looks again (the end, an abort).
    pub(super) fn wake_everyone(&mut self) {
        self.wake.work_all = true;
        self.wake.ports = true;
        self.wake.io = u8::MAX;
        self.wake.gpu = true;
    }
}

impl Scheduler {
    /// Whether the run is over: broken, aborted, or its sources done and every frame out.
    pub(crate) fn finished(&self) -> bool {
        self.broken
            || self.run.abort
            || (self.run.source_done
                && self.flight.in_flight == 0
                && !self.begin_busy
                && self.flight.running == 0
                && self.retiring.is_none()
                && !self.flight.branch_busy.iter().any(|&b| b))
    }

    /// Whether the run was aborted (an error or a stop): no job is taken any more.
    pub(crate) fn aborted(&self) -> bool {
        self.run.abort
    }

    /// Ends the run with `e` (the first error is the one returned; a later one is dropped
    /// after unlocking).
    pub(crate) fn fail(&mut self, e: Error) {
        self.run.fail(e);
    }

    /// A panic outside any element left the state inconsistent: the run is over whatever its
    /// counts say (after [`fail`](Self::fail)).
    pub(crate) fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Ends the run early without an error (a `stop` command): no new frames; frames in flight
    /// are dropped.
    pub(crate) fn stop(&mut self) {
        self.run.source_done = true;
        self.run.abort = true;
        self.drop_pending();
        // Idle workers leave (see `OwnWorkers::idle`, `exec/worker.rs`); output threads see the end.
        self.run.wake_everyone();
    }

    /// Drops every frame in flight (they go back to their pools) and what waits for them, of
    /// every version.
    pub(crate) fn drop_pending(&mut self) {
        self.flight.drop_frames();
        if let Some(r) = self.retiring.as_mut() {
            r.flight.drop_frames();
        }
        for p in &mut self.run.ports {
            p.ready = None;
            p.finishing_replaced = false;
        }
    }

    /// The run's error and its sources' (at its end; the first is the one to report).
    pub(crate) fn take_errors(&mut self) -> (Option<Error>, Option<Error>) {
        (self.run.error.take(), self.run.source_error.take())
    }

    /// The running graph version (frames begin in it).
    pub(crate) fn running_version(&self) -> &Arc<Version> {
        &self.flight.ver
    }

    /// The running version, while nothing but the state holds it (before the run starts).
    pub(crate) fn running_version_mut(&mut self) -> Option<&mut Version> {
        Arc::get_mut(&mut self.flight.ver)
    }

    /// Paced runs: the last frame allowed to begin now (`u64::MAX`: no limit).
    pub(crate) fn begin_limit(&self) -> u64 {
        self.begin_limit
    }

    /// Paced runs: frames up to `seq` may begin (the master output thread, as it releases
    /// frames; 0 before the start: frame 0 only).
    pub(crate) fn allow_begin_until(&mut self, seq: u64) {
        self.begin_limit = seq;
    }

    /// Whether a compute worker is inside one of this show's jobs (a node of any version, or
    /// a frame's beginning); the IO threads' and the GPU thread's jobs are not counted.
    pub(crate) fn compute_jobs_running(&self) -> bool {
        self.running_jobs() > self.io_busy + self.gpu_busy || self.begin_busy
    }
}
