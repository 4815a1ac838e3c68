//! Readiness: what a completed job makes runnable in its flight (serial nodes' turns,
//! feedbacks, a frame leaving flight), and the bookkeeping after every change.

use std::sync::Arc;

use framepipe_clock::now_ns;
use framepipe_core::{BeatCtx, Result};

use super::{Done, Flight, Inst, Job, Kind, Pixels, Run, Scheduler, Shared, Step, Version};

impl Flight {
    /// Runs the queued bookkeeping steps until none is left.
    pub(super) fn drain(&mut self, run: &mut Run) {
        let v = Arc::clone(&self.ver);
        while let Some(step) = self.steps.pop_front() {
            match step {
                Step::Runnable(node, slot) => self.runnable(run, &v, node, slot),
                Step::Finished(node, slot, output) => self.finished_node(&v, node, slot, output),
            }
        }
    }

    /// `node` may run for `slot` now (its inputs are ready, or it is a root of a begun frame).
    fn runnable(&mut self, run: &mut Run, v: &Version, node: usize, slot: usize) {
        if run.abort {
            return;
        }
        if self.nodes[node].awaiting_hand_over {
            // Kept by a live edit, still finishing the replaced version's frames: this one
            // runs once it is handed over (`Scheduler::hand_over`).
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
            self.enter_branch(run, v, node, slot);
            return;
        }
        match t.kind {
            Kind::Source => {
                if seq >= run.end_seq {
                    self.steps.push_back(Step::Finished(node, slot, None));
                } else if t.blocks && run.io {
                    self.io_ready.push_back((node, slot));
                    // One idle IO thread (none idle: a busy one takes it after its job).
                    let one = run.io_idle & run.io_idle.wrapping_neg();
                    run.io_idle &= !one;
                    run.wake.io |= one;
                } else {
                    self.ready.push_back((node, slot));
                }
            }
            Kind::Feedback { .. } => {
                let out = if seq == self.nodes[node].first_seq {
                    v.pools.first_frame(node).map(Pixels::Cpu)
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
                let empty = seq >= run.end_seq
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
                    self.hand_to_port(run, port, slot, slot, frame, ready_ns);
                } else if t.gpu {
                    self.gpu_ready.push_back((node, slot));
                    run.wake_gpu();
                } else {
                    self.ready.push_back((node, slot));
                }
            }
        }
    }

    /// `node` has finished `slot` with `output` (none: an empty frame).
    fn finished_node(&mut self, v: &Version, node: usize, slot: usize, output: Option<Pixels>) {
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

    /// Frame `slot` has begun (its time and beat clock `beat` fixed): its roots are runnable.
    fn begun(&mut self, run: &mut Run, slot: usize, beat: BeatCtx) {
        self.slots[slot].ctx.beat = beat;
        if !run.abort {
            let v = Arc::clone(&self.ver);
            self.slots[slot].begun = true;
            let seq = self.slots[slot].ctx.seq;
            for &r in &v.topo.roots {
                match v.topo.nodes[r].kind {
                    Kind::Feedback { .. } => self.try_feedback(&v, r, seq),
                    _ => self.steps.push_back(Step::Runnable(r, slot)),
                }
            }
        }
        self.drain(run);
    }

    /// Node `node` of this flight ran frame `slot`: its instance comes home and its output
    /// (`Ok(None)` from a source: its stream ended) finishes the frame there.
    fn node_done(
        &mut self,
        run: &mut Run,
        node: usize,
        slot: usize,
        inst: Inst,
        result: Result<Option<Pixels>>,
    ) {
        self.running -= 1;
        match inst {
            Inst::Source(s) => self.nodes[node].source = Some(s),
            Inst::Proc(i) => self.nodes[node].free.push(i),
        }
        if !run.abort {
            let is_source = self.ver.topo.nodes[node].kind == Kind::Source;
            let seq = self.slots[slot].ctx.seq;
            let output = match result {
                Ok(Some(frame)) => Some(frame),
                Ok(None) => {
                    run.end_at(seq);
                    None
                }
                Err(e) if is_source => {
                    // Frames before this one still reach the sinks; the error is returned at
                    // the end.
                    run.source_failed(e);
                    run.end_at(seq);
                    None
                }
                Err(e) => {
                    run.fail(e);
                    None
                }
            };
            if !run.abort {
                self.steps.push_back(Step::Finished(node, slot, output));
            }
        }
        self.drain(run);
    }

    /// The sink of output `port` has consumed the frame of `slot`: it finishes it.
    pub(super) fn finish_at_sink(&mut self, run: &mut Run, port: usize, slot: usize) {
        let node = self.port_nodes[port];
        self.steps.push_back(Step::Finished(node, slot, None));
        self.drain(run);
    }
}

impl Scheduler {
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
        match done {
            Done::Slice(slot, panicked) => {
                self.count_slice(slot, panicked);
                self.after_change(shared);
                return false;
            }
            Done::Begin { slot, beat } => {
                self.begin_busy = false;
                self.flight.begun(&mut self.run, slot, beat);
            }
            Done::Node {
                node,
                slot,
                version,
                inst,
                result,
            } => {
                debug_assert!(
                    version == self.flight.ver.number
                        || self
                            .retiring
                            .as_ref()
                            .is_some_and(|r| r.flight.ver.number == version),
                    "a job's version is the running one or the one it replaced"
                );
                match self.retiring.as_mut() {
                    Some(r) if version != self.flight.ver.number => {
                        r.flight.node_done(&mut self.run, node, slot, inst, result);
                        self.hand_over();
                    }
                    _ => self
                        .flight
                        .node_done(&mut self.run, node, slot, inst, result),
                }
            }
        }
        self.after_change(shared);
        !self.run.abort
    }

    /// Bookkeeping after any change: drops pending work on abort, switches or retires a
    /// version when due, publishes the in-flight count, wakes whoever can now proceed.
    pub(crate) fn after_change(&mut self, shared: &Shared) {
        if self.run.abort {
            self.drop_pending();
        }
        self.maybe_retire();
        self.maybe_switch(shared);
        self.maybe_retire();
        let retiring_in_flight = self.retiring.as_ref().map_or(0, |r| r.flight.in_flight);
        shared
            .counters
            .set_in_flight(self.flight.in_flight + retiring_in_flight);
        if self.finished() {
            self.run.wake.work_all = true;
            self.run.wake.ports = true;
            self.run.wake.io = u8::MAX;
            self.run.wake.gpu = true;
        } else if shared.workers.any() && self.has_work() {
            // Several independent jobs (branches of one frame): wake every idle worker.
            if self.flight.ready.len() + self.retiring_ready() + usize::from(self.begin_runnable())
                > 1
            {
                self.run.wake.work_all = true;
            } else {
                self.run.wake.work_one = true;
            }
        }
    }
}
