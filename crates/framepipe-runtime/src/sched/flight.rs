//! One graph version in flight: its frames' slots, its nodes' readiness and queues, its jobs
//! running. The scheduler holds the running version's [`Flight`]; while a live edit's replaced
//! version finishes its frames, that one's `Flight` is kept beside it (`Retiring`), and an
//! armed edit's next version waits in its own (`NextVersion`). Every bookkeeping method works
//! on the flight it is called on, and writes what the run shares (its end, errors, ports,
//! wake-ups) into the `Run` it is given.

use std::collections::VecDeque;
use std::sync::Arc;

use framepipe_core::FrameCtx;

use super::{Inputs, Instance, Job, Kind, Pixels, SourceInst, Version};

/// Per frame in flight (or per leaky branch): every node's output and readiness.
pub(crate) struct Slot {
    pub(super) ctx: FrameCtx,
    pub(super) active: bool,
    /// Its parameters are sampled: nodes may run.
    pub(super) begun: bool,
    /// When it began (monotonic ns): the graph's latency is measured from there to the master.
    pub(super) begun_ns: i64,
    pub(super) outputs: Vec<Option<Pixels>>,
    /// Inputs not yet finished, per node.
    pub(super) missing: Vec<u32>,
    /// Consumers that have not yet taken the output, per node.
    pub(super) uses: Vec<u32>,
    /// Sinks: when the frame was ready for them (every input finished; monotonic ns), whether
    /// or not it was their turn yet.
    pub(super) ready_ns: Vec<i64>,
    /// Nodes that have not finished this frame (the show's, or the branch's).
    pub(super) left: usize,
}

/// A node's scheduling state in one version. Built (with its instances, source or feedback
/// ring) by the version's builder; the rest is the scheduler's.
pub(crate) struct NodeState {
    /// The first frame this node runs (0, or the frame a live edit added it at): a feedback
    /// node gives its first colour then.
    pub(super) first_seq: u64,
    /// Serial nodes: running, or a frame reserved for it.
    pub(super) busy: bool,
    /// Serial nodes: the sequence number allowed in next.
    pub(super) next_seq: u64,
    /// Serial nodes: runnable for the frame of this slot, waiting for its turn.
    pub(super) parked: Vec<bool>,
    /// Instances not in use.
    pub(super) free: Vec<Instance>,
    pub(super) source: Option<SourceInst>,
    /// Feedback nodes: the node fed back's output per frame, `(seq, frame)` at `seq % cap`,
    /// until the next frame takes it.
    pub(super) ring: Vec<Option<(u64, Option<Pixels>)>>,
    /// Frames in flight (begun, or taken into its leaky branch) that this node has not
    /// finished yet: a live edit hands a kept node over to the next version once the replaced
    /// version's count is 0.
    pub(super) owed: u32,
    /// A kept node of a version switched in while the replaced version still owed it frames:
    /// it runs nothing (its runnable frames are parked) until it is handed over (its
    /// instances, source, ring moved in; `Scheduler::hand_over`).
    pub(super) awaiting_hand_over: bool,
}

impl NodeState {
    /// The builder gives the node one more instance (a parallel node: one per worker).
    pub(crate) fn add_instance(&mut self, instance: Instance) {
        self.free.push(instance);
    }

    /// The builder gives a source node its source.
    pub(crate) fn set_source(&mut self, source: SourceInst) {
        self.source = Some(source);
    }

    /// A feedback node's ring, one entry per frame in flight.
    pub(crate) fn make_ring(&mut self, in_flight: usize) {
        self.ring = (0..in_flight).map(|_| None).collect();
    }

    /// A node with no instance, source or ring yet (the builder adds them).
    pub(crate) fn new() -> Self {
        NodeState {
            first_seq: 0,
            busy: false,
            next_seq: 0,
            parked: Vec::new(),
            free: Vec::new(),
            source: None,
            ring: Vec::new(),
            owed: 0,
            awaiting_hand_over: false,
        }
    }
}

/// A step of the bookkeeping, queued so that one completion can trigger many without recursion.
#[derive(Debug)]
pub(super) enum Step {
    /// The node's inputs for this slot are ready (or, for a root, the frame has begun).
    Runnable(usize, usize),
    /// The node has finished this slot, with this output.
    Finished(usize, usize, Option<Pixels>),
}

/// One graph version in flight: the version, its frame slots, its nodes, its queues and
/// counts. Frames begin only in the running one; every flight takes its frames to the end.
pub(crate) struct Flight {
    pub(super) ver: Arc<Version>,
    pub(super) nodes: Vec<NodeState>,
    /// Frame slots `0..cap`, then one per leaky branch.
    pub(super) slots: Vec<Slot>,
    /// Jobs whose inputs are ready (and whose turn it is, for serial nodes): (node, slot).
    pub(super) ready: VecDeque<(usize, usize)>,
    /// Blocking sources' jobs, for the IO threads (`Run::io`), not the compute workers.
    pub(super) io_ready: VecDeque<(usize, usize)>,
    /// GPU nodes', uploads' and downloads' jobs, for the show's GPU thread only.
    pub(super) gpu_ready: VecDeque<(usize, usize)>,
    pub(super) steps: VecDeque<Step>,
    /// Per leaky branch: holds a frame; the inputs its first node took.
    pub(super) branch_busy: Vec<bool>,
    pub(super) branch_inputs: Vec<Inputs>,
    /// Frames begun in this version that have not left every show node.
    pub(super) in_flight: usize,
    /// Node jobs of this version running (on workers or IO threads).
    pub(super) running: usize,
    /// Per output port: its sink's node in this version.
    pub(super) port_nodes: Vec<usize>,
}

impl Flight {
    /// A fresh flight for `ver`: every queue at its final capacity.
    pub(super) fn new(
        ver: Arc<Version>,
        port_nodes: Vec<usize>,
        mut nodes: Vec<NodeState>,
    ) -> Self {
        let topo = &ver.topo;
        let n = topo.nodes.len();
        let nb = topo.branches.len();
        let slot = || Slot {
            ctx: FrameCtx::new(0, 0),
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
        Flight {
            nodes,
            slots: (0..topo.cap + nb).map(|_| slot()).collect(),
            ready: VecDeque::with_capacity(n * (topo.cap + nb) + 1),
            io_ready: VecDeque::with_capacity(topo.sources.len() * topo.cap + 1),
            gpu_ready: VecDeque::with_capacity(
                topo.nodes.iter().filter(|t| t.gpu).count() * (topo.cap + nb) + 1,
            ),
            branch_busy: vec![false; nb],
            branch_inputs: (0..nb).map(|_| Inputs::new()).collect(),
            steps: VecDeque::with_capacity(4 * n * (topo.cap + nb) + 8),
            in_flight: 0,
            running: 0,
            port_nodes,
            ver,
        }
    }

    /// The frame slot of frame `seq`.
    pub(super) fn slot_of(&self, seq: u64) -> usize {
        (seq % self.ver.topo.cap as u64) as usize
    }

    /// Begins frame `seq` (at `pts_ns`) in its slot: every show node owes it, every input is
    /// missing; the job fixes its time.
    pub(super) fn begin_frame(&mut self, seq: u64, pts_ns: i64) -> Job {
        let v = &self.ver;
        self.in_flight += 1;
        let slot = (seq % v.topo.cap as u64) as usize;
        let s = &mut self.slots[slot];
        s.ctx = FrameCtx::new(seq, pts_ns);
        s.active = true;
        s.begun = false;
        s.begun_ns = framepipe_clock::now_ns();
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
        Job::Begin { slot, pts_ns }
    }

    /// Drops every frame in flight (they go back to their pools) and what waits for them.
    pub(super) fn drop_frames(&mut self) {
        self.ready.clear();
        self.io_ready.clear();
        self.gpu_ready.clear();
        self.steps.clear();
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

    /// Whether a version has neither a leaky branch nor a feedback: its frames can be handed
    /// over node by node (an overlapping switch).
    pub(super) fn overlappable(&self) -> bool {
        let topo = &self.ver.topo;
        topo.branches.is_empty()
            && topo
                .nodes
                .iter()
                .all(|t| !matches!(t.kind, Kind::Feedback { .. }))
    }

    /// Moves kept node `o`'s instances, source and feedback ring from `from` into node `j` of
    /// this flight.
    pub(super) fn take_node(&mut self, j: usize, from: &mut Flight, o: usize) {
        let (old, new) = (&mut from.nodes[o], &mut self.nodes[j]);
        std::mem::swap(&mut new.free, &mut old.free);
        std::mem::swap(&mut new.source, &mut old.source);
        std::mem::swap(&mut new.ring, &mut old.ring);
    }

    /// No frame of it is in flight and no job of it runs.
    pub(super) fn idle(&self) -> bool {
        self.in_flight == 0 && self.running == 0
    }
}
