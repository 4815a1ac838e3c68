//! Running a processor (an effect or a mixer) on one frame, with that frame's parameter
//! values.

use framepipe_core::{Error, Frame, Result};

use super::{Instance, Proc};
use crate::exec::slices::PoolSlices;
use crate::exec::unwind::guard;
use crate::live::{assign, lock};
use crate::model::MAX_INPUTS;
use crate::sched::{Inputs, Pixels, Shared, Version};
use crate::stats::Event;

impl Shared {
    /// Runs an effect or a mixer on one frame, with that frame's parameters.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_proc(
        &self,
        ver: &Version,
        node: usize,
        slot: usize,
        mut inst: Instance,
        ctx: &framepipe_core::FrameCtx,
        mut inputs: Inputs,
        worker: usize,
    ) -> (Instance, Result<Pixels>) {
        let slices = PoolSlices::new(self, worker);
        let name = &ver.stages[node].name;
        if !inst.used {
            inst.used = true;
            ver.stages[node].add_instance();
        }
        // This node's values for this frame: those in force now, unless it has them already
        // (see `crate::live`); then the instance is brought to them.
        if slot < ver.topo.cap {
            self.start_node(ver, node, slot, ctx.seq);
        }
        let synced = guard(name, || Ok(self.sync_params(ver, node, &mut inst, slot)));
        let result = synced.and_then(|(bypass, rejected)| {
            // Reported with no lock held (the snapshot's included): the callback is user code.
            for (j, e) in rejected {
                self.emit(Event::PropertyRejected {
                    stage: name.clone(),
                    prop: ver.param_names[node][j].clone(),
                    reason: e.to_string(),
                });
            }
            if bypass {
                // The first input passes through (bypass is refused when the shape differs).
                return Ok(inputs.frames[0].take().expect("a node's inputs are frames"));
            }
            guard(name, || {
                let mut output = ver.pools[node].try_acquire()?;
                match &mut inst.proc {
                    Proc::Effect(e) => {
                        let input = inputs.frames[0].as_ref().expect("an effect's input").cpu();
                        e.process(ctx, input, &mut output, &slices)?;
                    }
                    Proc::Mixer(m) => {
                        let n = inputs.n;
                        let refs: [&Frame; MAX_INPUTS] = std::array::from_fn(|k| {
                            inputs.frames[k.min(n - 1)]
                                .as_ref()
                                .expect("a mixer's inputs")
                                .cpu()
                        });
                        m.process(ctx, &refs[..n], &mut output, &slices)?;
                    }
                    Proc::Gpu(_) | Proc::Upload | Proc::Download | Proc::Present => {
                        unreachable!("the GPU thread's jobs never reach a CPU worker")
                    }
                }
                Ok(Pixels::Cpu(output.freeze()))
            })
        });
        // The inputs go back to their pools now, before the bookkeeping.
        drop(inputs);
        (inst, result)
    }

    /// Sets on `inst` the properties whose value in snapshot `slot` differs from what it has.
    /// Returns whether the node is bypassed on this frame, and the properties the element
    /// refused (each reported once; the list allocates only then).
    pub(super) fn sync_params(
        &self,
        ver: &Version,
        node: usize,
        inst: &mut Instance,
        slot: usize,
    ) -> (bool, Vec<(usize, Error)>) {
        // Copy what changed under the snapshot's lock (assignments only), then call the
        // element with no lock held: a branch copying this snapshot under the scheduler lock
        // never waits for element code.
        let bypass = {
            let snap = lock(&ver.snapshots[slot]);
            for (j, value) in snap.values(node).iter().enumerate() {
                inst.changed[j] = inst.applied[j] != *value;
                if inst.changed[j] {
                    assign(&mut inst.applied[j], value);
                }
            }
            snap.bypassed(node)
        };
        let mut rejected = Vec::new();
        for j in 0..inst.applied.len() {
            if !inst.changed[j] || inst.refused[j] {
                continue;
            }
            let name = &ver.param_names[node][j];
            let value = &inst.applied[j];
            let r = match &mut inst.proc {
                Proc::Effect(e) => e.set_property(name, value),
                Proc::Mixer(m) => m.set_property(name, value),
                // On the GPU thread, which syncs a GPU node's parameters before it renders.
                Proc::Gpu(g) => g.node.set_property(name, value),
                Proc::Upload | Proc::Download | Proc::Present => Ok(()),
            };
            if let Err(e) = r {
                inst.refused[j] = true;
                rejected.push((j, e));
            }
        }
        (bypass, rejected)
    }
}
