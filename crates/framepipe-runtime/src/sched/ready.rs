//! Readiness: what a completed job makes runnable, serial nodes' turns, feedbacks, a frame
//! leaving flight, and the run's end.

use std::sync::Arc;

use framepipe_clock::now_ns;
use framepipe_core::{Error, Frame};

use super::{Done, Inst, Job, Kind, Shared, State, Step, Version};

impl State {
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

    /// Runs the queued bookkeeping steps until none is left.
    pub(super) fn drain(&mut self) {
        let v = Arc::clone(&self.ver);
        while let Some(step) = self.steps.pop_front() {
            match step {
                Step::Runnable(node, slot) => self.runnable(&v, node, slot),
                Step::Finished(node, slot, output) => self.finished_node(&v, node, slot, output),
            }
        }
    }

    /// `node` may run for `slot` now (its inputs are ready, or it is a root of a begun frame).
    pub(super) fn runnable(&mut self, v: &Version, node: usize, slot: usize) {
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

    /// `node` has finished `slot` with `output` (none: an empty frame).
    pub(super) fn finished_node(
        &mut self,
        v: &Version,
        node: usize,
        slot: usize,
        output: Option<Frame>,
    ) {
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
    pub(super) fn try_feedback(&mut self, v: &Version, f: usize, seq: u64) {
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
    pub(super) fn release_serial(&mut self, node: usize) {
        self.nodes[node].next_seq += 1;
        self.let_in(node);
    }

    /// Serial `node` is free: its frame `next_seq` may run, if it is already waiting.
    pub(super) fn let_in(&mut self, node: usize) {
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

    /// Drops every frame in flight (they go back to their pools) and what waits for them, of
    /// every version.
    pub(crate) fn drop_pending(&mut self) {
        self.drop_own();
        if self.old.is_some() {
            self.with_old(State::drop_own);
        }
    }

    /// `drop_pending` for the version swapped in.
    pub(super) fn drop_own(&mut self) {
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
            .set_in_flight(self.in_flight + old_in_flight);
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
    pub(super) fn record_own(&mut self, done: Done) {
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
    pub(super) fn end_at(&mut self, seq: u64) {
        self.end_seq = self.end_seq.min(seq);
        self.source_done = true;
    }
}
