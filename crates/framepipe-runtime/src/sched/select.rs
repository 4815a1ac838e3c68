//! Job selection: which job an idle worker or IO thread takes next, and whether there is any.

use std::sync::Arc;

use crate::exec::{PanicPayload, SliceFork, SliceJob};

use super::{Flight, Inputs, Inst, Job, Kind, Pixels, Scheduler, Shared, Version};

impl Scheduler {
    /// Node jobs running on workers (and the IO threads), of every version.
    pub(crate) fn running_jobs(&self) -> usize {
        self.flight.running + self.retiring.as_ref().map_or(0, |r| r.flight.running)
    }

    /// While a replaced version still has frames in flight, the new version's node jobs take
    /// at most all workers but one (all of one worker): a worker stays free for the old
    /// frames' next nodes, which are due first and would otherwise wait for a new frame's job
    /// to end (jobs are not preempted).
    fn new_jobs_held_back(&self) -> bool {
        self.retiring
            .as_ref()
            .is_some_and(|r| r.flight.in_flight > 0)
            && self.flight.running >= self.slices.len().saturating_sub(1).max(1)
    }

    /// The replaced version's jobs waiting for a worker (none when there is none).
    pub(super) fn retiring_ready(&self) -> usize {
        self.retiring.as_ref().map_or(0, |r| r.flight.ready.len())
    }

    /// The version job `job` belongs to (a worker runs it with that one).
    pub(crate) fn job_ver(&self, job: &Job) -> &Arc<Version> {
        if let Job::Node { version, .. } = job {
            if let Some(r) = self
                .retiring
                .as_ref()
                .filter(|r| r.flight.ver.number == *version)
            {
                return &r.flight.ver;
            }
        }
        &self.flight.ver
    }

    pub(crate) fn has_work(&self) -> bool {
        (!self.flight.ready.is_empty() && !self.new_jobs_held_back())
            || self.retiring_ready() > 0
            || self.begin_runnable()
            || self.slice_pending().is_some()
    }

    pub(super) fn begin_runnable(&self) -> bool {
        !self.run.source_done
            && !self.run.abort
            && !self.begin_busy
            && self.next_seq <= self.begin_limit
            && self.next_seq < self.switch_at
            && self.flight.in_flight < self.flight.ver.topo.cap
            && !self.flight.slots[self.flight.slot_of(self.next_seq)].active
    }

    pub(crate) fn slice_pending(&self) -> Option<usize> {
        self.slices.iter().position(|s| s.pending())
    }

    /// The next job for an idle worker: slices of a frame being worked on first (they hold a
    /// worker waiting), then the replaced version's runnable nodes (its frames are older), then
    /// the show's runnable node furthest down the graph (to bound latency and frames in
    /// flight), then the next frame's beginning, then a leaky branch's node.
    pub(crate) fn next_job(&mut self, shared: &Shared) -> Option<Job> {
        if let Some(slot) = self.slice_pending() {
            let (index, job) = self.slices[slot].claim_pending();
            return Some(Job::Slice { slot, index, job });
        }
        // Its jobs are all the show's: a version with leaky branches is not switched while it
        // has frames in flight.
        if let Some(r) = self
            .retiring
            .as_mut()
            .filter(|r| !r.flight.ready.is_empty())
        {
            return r.flight.next_node_job(false);
        }
        let held_back = self.new_jobs_held_back();
        if !held_back {
            if let Some(job) = self.flight.next_node_job(true) {
                return Some(job);
            }
        }
        if self.begin_runnable() {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.begin_busy = true;
            return Some(self.flight.begin_frame(seq, shared.rate.frame_time_ns(seq)));
        }
        // Leaky branches last: they run on workers the show leaves idle, so a slow tap takes
        // no worker the show could use (in a paced show, workers wait for the clock most of
        // the time; an unpaced run may leave a preview behind until its end).
        if held_back {
            return None;
        }
        self.flight.next_node_job(false)
    }

    /// The next job for IO thread `k`: a blocking source's frame, the oldest first (the
    /// replaced version's first). The thread is busy until it records the job
    /// ([`record_io`](Self::record_io)).
    pub(crate) fn next_io_job(&mut self, k: usize) -> Option<Job> {
        let flight = match self.retiring.as_mut() {
            Some(r) if !r.flight.io_ready.is_empty() => &mut r.flight,
            _ => &mut self.flight,
        };
        let (node, slot) = flight.io_ready.pop_front()?;
        let job = flight.node_job(node, slot);
        self.io_busy += 1;
        self.run.io_idle &= !(1 << k);
        Some(job)
    }

    /// The next job for the show's GPU thread: a GPU node's, an upload's or a download's, the
    /// replaced version's first (its frames are older), then the frames' furthest down the
    /// graph (so that a frame's consecutive GPU nodes run back to back and frames leave
    /// soon), the oldest frame's first among them, then the leaky branches'. The job is the GPU thread's until it records it
    /// ([`record_gpu`](Self::record_gpu)).
    pub(crate) fn next_gpu_job(&mut self) -> Option<Job> {
        let flight = match self.retiring.as_mut() {
            Some(r) if !r.flight.gpu_ready.is_empty() => &mut r.flight,
            _ => &mut self.flight,
        };
        let cap = flight.ver.topo.cap;
        let q = &flight.gpu_ready;
        let slots = &flight.slots;
        let key = |i: usize| (q[i].0, std::cmp::Reverse(slots[q[i].1].ctx.seq));
        let pos = (0..q.len())
            .filter(|&i| q[i].1 < cap)
            .max_by_key(|&i| key(i))
            .or_else(|| (0..q.len()).max_by_key(|&i| key(i)))?;
        let (node, slot) = flight.gpu_ready.remove(pos).expect("index in range");
        let job = flight.node_job(node, slot);
        self.gpu_busy += 1;
        Some(job)
    }

    /// The GPU thread waits for a job: a queued one wakes it.
    pub(crate) fn gpu_thread_idle(&mut self) {
        self.run.gpu_idle = true;
    }

    /// Records a GPU thread's job (as [`record`](Self::record)).
    pub(crate) fn record_gpu(&mut self, done: super::Done, shared: &Shared) -> bool {
        self.gpu_busy -= 1;
        self.record(done, shared)
    }

    /// IO thread `k` waits for a job: a queued one wakes it.
    pub(crate) fn io_thread_idle(&mut self, k: usize) {
        self.run.io_idle |= 1 << k;
    }

    /// Records an IO thread's job (as [`record`](Self::record)).
    pub(crate) fn record_io(&mut self, done: super::Done, shared: &Shared) -> bool {
        self.io_busy -= 1;
        self.record(done, shared)
    }

    /// The first IO thread has started: blocking sources' jobs go to the IO threads from now
    /// on. None can be queued for the workers yet: it starts before the workers, or (on the
    /// edit thread) before a version with a blocking source switches in, the running one
    /// having none.
    pub(crate) fn start_io(&mut self) {
        debug_assert!(
            self.flight
                .ready
                .iter()
                .all(|&(n, _)| !self.flight.ver.topo.nodes[n].blocks),
            "a blocking source's job was queued for the workers before the IO thread started"
        );
        self.run.io = true;
    }

    /// Counts one claimed slice of `slot` as done; wakes its owner when it was the last.
    /// The first panic is kept for the owner to re-raise (a second one in the same frame is
    /// dropped here: an error path, the only free under this lock).
    pub(crate) fn count_slice(&mut self, slot: usize, panicked: Option<PanicPayload>) {
        if self.slices[slot].count(panicked) {
            self.run.wake.slices = true;
        }
    }

    /// Worker `worker` offers `n` slices of `job` to the idle workers (its slot was free).
    pub(crate) fn post_slices(&mut self, worker: usize, job: SliceJob, n: usize) {
        self.slices[worker] = SliceFork::new(job, n);
    }

    /// The owner of `worker`'s slices claims the next one nobody took, if any.
    pub(crate) fn claim_slice(&mut self, worker: usize) -> Option<usize> {
        self.slices[worker].claim()
    }

    /// Whether every slice of `worker`'s is done.
    pub(crate) fn slices_done(&self, worker: usize) -> bool {
        self.slices[worker].all_done()
    }

    /// Clears `worker`'s slice slot (every slice done); the first slice panic, to re-raise.
    pub(crate) fn finish_slices(&mut self, worker: usize) -> Option<PanicPayload> {
        self.slices[worker].finish()
    }

    /// Asks for another worker (done when the lock is released).
    pub(crate) fn announce_work(&mut self) {
        self.run.wake.work_one = true;
    }

    /// Wakes every idle worker once the lock is released (slices to help with).
    pub(crate) fn wake_all_workers(&mut self) {
        self.run.wake.work_all = true;
    }
}

impl Flight {
    /// Takes the runnable node furthest down the graph (the highest index) off the queue, of
    /// the frames only (`frames_only`) or of the frames and the leaky branches, as its job.
    fn next_node_job(&mut self, frames_only: bool) -> Option<Job> {
        let cap = self.ver.topo.cap;
        let pos = (0..self.ready.len())
            .filter(|&i| !frames_only || self.ready[i].1 < cap)
            .max_by_key(|&i| self.ready[i].0)?;
        let (node, slot) = self.ready.remove(pos).expect("index in range");
        Some(self.node_job(node, slot))
    }

    /// The job of runnable `node` at `slot`: its inputs and an instance.
    fn node_job(&mut self, node: usize, slot: usize) -> Job {
        let v = Arc::clone(&self.ver);
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
    pub(super) fn consume(&mut self, slot: usize, i: usize) -> Option<Pixels> {
        let s = &mut self.slots[slot];
        s.uses[i] -= 1;
        if s.uses[i] == 0 {
            s.outputs[i].take()
        } else {
            s.outputs[i].clone()
        }
    }
}
