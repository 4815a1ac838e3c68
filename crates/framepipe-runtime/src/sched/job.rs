//! The scheduler's vocabulary: what a node is to it (`Kind`, `Topo`), a job (`Job`, carrying
//! the instance it runs: exec's `Inst`) and its outcome (`Done`).

use framepipe_core::{BeatCtx, FrameCtx, Result};

use super::Pixels;

use crate::exec::Inst;
use crate::exec::{PanicPayload, SliceJob};
use crate::model::MAX_INPUTS;

/// What a node is, for the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Source,
    /// An effect or a mixer: runs on a worker with an instance.
    Process,
    /// Yields node `from`'s output of the previous frame: no job.
    Feedback {
        from: usize,
    },
    /// A sink, fed through output port `.0` (one per sink; its own thread runs it).
    Sink(usize),
}

/// The graph's shape as the scheduler sees it (never changes during a run; no lock).
#[derive(Debug)]
pub(crate) struct Topo {
    pub nodes: Vec<TopoNode>,
    /// Frame slots (frames in flight at most).
    pub cap: usize,
    /// Per leaky branch: its nodes.
    pub branches: Vec<Vec<usize>>,
    /// Sources and feedbacks: runnable when a frame begins.
    pub roots: Vec<usize>,
    /// Nodes outside the leaky branches: a frame leaves flight when all have finished it.
    pub show_nodes: usize,
    /// The sources.
    pub sources: Vec<usize>,
    /// Nodes through which a frame leaves the show (its sinks, the first nodes of leaky
    /// branches): they also wait for every source to have finished the frame, so that a frame
    /// at or after a source's end never reaches a sink, even through a feedback that had
    /// a frame to give.
    pub gated: Vec<usize>,
}

#[derive(Debug)]
pub(crate) struct TopoNode {
    pub kind: Kind,
    pub inputs: Vec<usize>,
    pub consumers: Vec<usize>,
    /// Feedback nodes yielding this node's output one frame later.
    pub feeds: Vec<usize>,
    pub serial: bool,
    pub branch: Option<usize>,
    /// First node of its leaky branch.
    pub head: bool,
    /// A source that may wait on the outside world (`Source::blocks`): its jobs go to the
    /// show's IO thread, never to a compute worker.
    pub blocks: bool,
    /// A GPU node, an upload or a download: its jobs go to the show's GPU thread, never to a
    /// compute worker.
    pub gpu: bool,
}

/// A node's input frames for one job, without allocating.
pub(crate) struct Inputs {
    pub frames: [Option<Pixels>; MAX_INPUTS],
    pub n: usize,
}

impl Inputs {
    pub(crate) const fn new() -> Self {
        Inputs {
            frames: [None, None, None, None, None, None, None, None],
            n: 0,
        }
    }

    pub(super) fn push(&mut self, f: Option<Pixels>) {
        self.frames[self.n] = f;
        self.n += 1;
    }

    pub(super) fn clear(&mut self) {
        for f in &mut self.frames[..self.n] {
            *f = None;
        }
        self.n = 0;
    }
}

// A job moves on the stack between the lock and the worker (about 250 bytes, the inputs
// inline): boxing them would allocate on every job.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Job {
    /// Frame `slot`'s boundary: fix its oscillator time (for its timestamp); the nodes sample
    /// their parameters when they start it.
    Begin { slot: usize, pts_ns: i64 },
    Node {
        node: usize,
        /// The slot the output goes to (a frame's, or a leaky branch's), also the index of
        /// the parameter snapshot the node uses.
        slot: usize,
        /// The number of the graph version the job belongs to (two run at once while a live
        /// edit's replaced version finishes its frames).
        version: u64,
        ctx: FrameCtx,
        inputs: Inputs,
        inst: Inst,
    },
    Slice {
        slot: usize,
        index: usize,
        job: SliceJob,
    },
}

/// Outcome of running a job, reported back under the lock.
#[allow(clippy::large_enum_variant)] // as `Job`: never boxed, that would allocate per job
pub(crate) enum Done {
    Begin {
        slot: usize,
        /// The frame's beat clock, sampled with its oscillator time.
        beat: BeatCtx,
    },
    /// `Ok(None)` from a source: its stream ended (and it does not loop or hold).
    Node {
        node: usize,
        slot: usize,
        /// As in [`Job::Node`].
        version: u64,
        inst: Inst,
        result: Result<Option<Pixels>>,
    },
    Slice(usize, Option<PanicPayload>),
}
