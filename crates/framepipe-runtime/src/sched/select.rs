//! Job selection: which job an idle worker or IO thread takes next, and whether there is any.

use std::sync::Arc;

use framepipe_clock::now_ns;
use framepipe_core::{Frame, FrameCtx};

use crate::exec::PanicPayload;

use super::{Inputs, Inst, Job, Kind, Shared, State, Version};

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
    pub(super) fn new_jobs_held_back(&self) -> bool {
        self.old.as_ref().is_some_and(|p| p.state.in_flight > 0)
            && self.running >= self.slices.len().saturating_sub(1).max(1)
    }

    /// The replaced version's jobs waiting for a worker (none when there is none).
    pub(super) fn old_ready(&self) -> usize {
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

    pub(crate) fn has_work(&self) -> bool {
        (!self.ready.is_empty() && !self.new_jobs_held_back())
            || self.old_ready() > 0
            || self.begin_runnable()
            || self.slice_pending().is_some()
    }

    pub(super) fn begin_runnable(&self) -> bool {
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
    pub(super) fn node_job(&mut self, v: &Version, node: usize, slot: usize) -> Job {
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
    pub(super) fn consume(&mut self, slot: usize, i: usize) -> Option<Frame> {
        let s = &mut self.slots[slot];
        s.uses[i] -= 1;
        if s.uses[i] == 0 {
            s.outputs[i].take()
        } else {
            s.outputs[i].clone()
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
}
