//! Leaky branches: a branch takes a frame into its own slot, or skips it.

use super::{Flight, Inputs, Kind, Run, Version};

impl Flight {
    /// The first node of a leaky branch is runnable for frame `slot`: the branch takes the
    /// frame (its inputs, its parameters) into its own slot, or skips it when it still holds
    /// an earlier one.
    pub(super) fn enter_branch(&mut self, run: &mut Run, v: &Version, head: usize, slot: usize) {
        let t = &v.topo.nodes[head];
        let b = t.branch.expect("a head is in a branch");
        let empty = self.slots[slot].ctx.seq >= run.end_seq
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
            self.hand_to_port(run, port, slot, bs, frame, ready_ns);
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
        if t.gpu {
            self.gpu_ready.push_back((head, bs));
            run.wake_gpu();
        } else {
            self.ready.push_back((head, bs));
        }
    }
}
