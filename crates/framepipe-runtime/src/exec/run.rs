//! Running one job outside the scheduler lock: a slice, a frame's beginning, or a node (a
//! source or a processor) on one frame.

use std::time::Instant;

use framepipe_clock::now_ns;
use framepipe_core::BeatCtx;

use super::Inst;
use crate::exec::unwind::guard;
use crate::live::lock;
use crate::sched::{Done, Job, Pixels, Shared, Version};

impl Shared {
    /// Runs one job outside the lock.
    pub(crate) fn run_job(&self, ver: &Version, job: Job, worker: usize) -> Done {
        match job {
            Job::Slice {
                slot: owner,
                index,
                job,
            } => {
                // A panicking slice is contained so that the owner's count still completes.
                Done::Slice(owner, job.call_caught(index))
            }
            Job::Begin { slot, pts_ns } => {
                let beat = self.begin_frame(ver, slot, pts_ns);
                Done::Begin { slot, beat }
            }
            Job::Node {
                node,
                slot,
                version,
                ctx,
                inputs,
                inst,
            } => {
                let started = Instant::now();
                self.mark_running(worker, Some(node));
                // A fatal signal in the element from here names it (framepipe_core::crash).
                framepipe_core::crash::enter(&ver.names[node], &ver.elements[node], ctx.seq);
                let counters = &ver.stages[node];
                let (inst, result) = match inst {
                    Inst::Source(mut source) => {
                        let r = guard(&counters.name, || {
                            self.run_source(ver, node, slot, &mut source, &ctx)
                        })
                        .map(|f| f.map(Pixels::Cpu));
                        (Inst::Source(source), r)
                    }
                    Inst::Proc(instance) => {
                        let (i, r) = self.run_proc(ver, node, slot, instance, &ctx, inputs, worker);
                        (Inst::Proc(i), r.map(Some))
                    }
                };
                framepipe_core::crash::leave();
                self.mark_running(worker, None);
                // The source's last call, which finds the end of the stream, is not a frame.
                if !matches!(result, Ok(None)) {
                    counters.record(started.elapsed());
                }
                Done::Node {
                    node,
                    slot,
                    version,
                    inst,
                    result,
                }
            }
        }
    }

    /// The frame boundary: the worker beginning frame `slot` fixes its oscillator time in its
    /// snapshot (and the values of the leaky branches' nodes, which take the frame's values
    /// with them). Under the live lock (shared only with command assignment), never under the
    /// scheduler lock. Frames begin one at a time, in order. Returns the frame's beat clock,
    /// which every node of the frame sees in its `FrameCtx` (set in the slot under the
    /// scheduler lock when the frame is recorded as begun, before any node of it runs).
    fn begin_frame(&self, ver: &Version, slot: usize, pts_ns: i64) -> BeatCtx {
        if let Some(audio) = &self.audio {
            // A render waits for its audio up to this frame (no lock held).
            audio.wait_for(pts_ns);
        }
        let mut live = self.live.lock();
        let mut snap = lock(&ver.snapshots[slot]);
        let branches = ver.topo.branches.iter().flatten().copied();
        live.begin(pts_ns, &mut snap, branches);
        let beat = live.beat();
        if let Some(audio) = &self.audio {
            if live.tempo_auto() {
                self.counters.set_tempo_bpm(live.tempo());
            }
            drop(live);
            self.counters.set_audio(snap.audio());
            // The frame's waveform and spectrum for the GPU nodes (ISF audio inputs), off the
            // live lock: two copies of a few thousand floats, made only where a GPU node of
            // this version may read them.
            if ver.topo.nodes.iter().any(|t| t.gpu) {
                snap.read_arrays(audio);
            }
        }
        beat
    }

    /// Node `node` starts frame `seq` (in frame slot `slot`): it samples its values, unless a
    /// later frame of it sampled them already (`Live::start_node`), and publishes them for
    /// the control surfaces (at most every `PUBLISH_EVERY_NS`, never waiting).
    pub(super) fn start_node(&self, ver: &Version, node: usize, slot: usize, seq: u64) {
        let mut live = self.live.lock();
        if live.version() != ver.number {
            // A frame of the version a live edit replaced: its values were sampled at the
            // switch (the live stages are the new version's now).
            return;
        }
        if live.start_node(node, seq, slot, &ver.snapshots, ver.topo.cap) {
            self.view.publish(&live, seq, now_ns());
        }
    }
}
