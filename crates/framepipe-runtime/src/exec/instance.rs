//! An element's instance as the executors run it: an effect or mixer instance with the
//! property values it currently has, a source with its end policy, resampling and last frame.
//! Only exec/ reads or changes them (running a job, syncing parameters); the scheduler holds
//! them between jobs (`NodeState`) and hands one out with each job (`Inst`), and the builder
//! makes them (`Instance::new`, `SourceInst::new`).

use framepipe_core::gpu::GpuNode;
use framepipe_core::{Effect, Frame, Mixer, PropValue, Rational, Source};

use crate::model::OnEnd;

/// An effect or mixer instance, or what a job of the GPU thread runs.
pub(crate) enum Proc {
    Effect(Box<dyn Effect>),
    Mixer(Box<dyn Mixer>),
    /// A GPU node's instance (called on the GPU thread only).
    Gpu(GpuProc),
    /// An upload's job (the GPU thread's uploader does the work).
    Upload,
    /// A download's job: one instance per readback that may be under way at once.
    Download,
    /// A present's job (a texture to a sink that takes textures): one instance per frame in
    /// flight, like a download's.
    Present,
}

/// A GPU node's instance with what the executor keeps of it.
pub(crate) struct GpuProc {
    pub(crate) node: Box<dyn GpuNode>,
    /// A GPU source's length, when finite (its frames from then on end the run).
    pub(crate) frames: Option<u64>,
    /// It failed at render: from then on it is bypassed (its first input passes, or a source
    /// gives a black frame), like an isolated plugin that crashed; reported once.
    pub(crate) failed: bool,
    /// It has made GL objects (rendered once): released on the GPU thread before it is
    /// dropped.
    pub(crate) rendered: bool,
}

/// An effect or mixer instance with the property values it currently has.
pub(crate) struct Instance {
    pub(super) proc: Proc,
    /// Has processed a frame (counted in the stats' `instances` the first time).
    pub(super) used: bool,
    pub(super) applied: Vec<PropValue>,
    /// Properties the element refused to change live (reported once, then not retried).
    pub(super) refused: Vec<bool>,
    /// Scratch for `sync_params`: which values differ on this frame.
    pub(super) changed: Vec<bool>,
    /// Its share of the memory budget (one output frame), counted while it lives: it moves
    /// with the instance when a live edit keeps its node.
    _budget_share: crate::memory::Held,
}

impl Instance {
    /// Its GPU node, when it is one that rendered (it has GL objects to release on the GPU
    /// thread); dropped otherwise.
    pub(crate) fn into_gpu_node(self) -> Option<Box<dyn GpuNode>> {
        match self.proc {
            Proc::Gpu(g) if g.rendered => Some(g.node),
            _ => None,
        }
    }

    pub(crate) fn new(
        proc: Proc,
        initial: &[PropValue],
        budget_share: crate::memory::Held,
    ) -> Self {
        Instance {
            _budget_share: budget_share,
            proc,
            used: false,
            applied: initial.to_vec(),
            refused: vec![false; initial.len()],
            changed: vec![false; initial.len()],
        }
    }
}

/// A source with what the graph keeps of it: its end policy, its resampling to the graph's
/// rate, the last frame it gave (for `hold` and for repeating frames of a slower source).
pub(crate) struct SourceInst {
    pub(super) source: Box<dyn Source>,
    pub(super) on_end: OnEnd,
    /// `(source rate, graph rate)` when they differ: output frame N takes the source's frame
    /// `floor(N / graph rate * source rate)`.
    pub(super) resample: Option<(Rational, Rational)>,
    /// Frames read from the source so far (its own frame numbers; they go on across loops).
    pub(super) produced: u64,
    /// The graph frame it started at (0, or the frame a live edit added it at): graph frame
    /// N takes its frame for N − origin.
    pub(super) origin: u64,
    /// The last frame read, kept when it may be given again (hold, resampling).
    pub(super) last: Option<Frame>,
    pub(super) keep_last: bool,
    /// Ended under `hold`: the last frame is given from now on.
    pub(super) giving_last: bool,
    /// Its live properties' values as last set on it ([`Source::live_props`]), which it
    /// refused (reported once), and scratch for which changed on this frame: as an effect
    /// instance's.
    pub(super) applied: Vec<PropValue>,
    pub(super) refused: Vec<bool>,
    pub(super) changed: Vec<bool>,
    /// The stamp of the set each value in `applied` came from: a newer set is given to the
    /// source even when its value is the same (a deck's retrigger restarts the clip).
    pub(super) stamps: Vec<u64>,
    /// The source's own memory ([`Source::own_bytes`]) in the show's memory book, while it
    /// lives (it moves with the source across a live edit).
    _own: crate::memory::Held,
}

/// What a node's job runs: its source, or one of its effect or mixer instances (taken from
/// the node for the job and given back with its outcome).
pub(crate) enum Inst {
    Source(SourceInst),
    Proc(Instance),
}

impl SourceInst {
    /// A source about to run in a graph at `rate` (its own rate may differ: resampled), ending
    /// by `on_end`; its live properties as it reports them now; `held` counts its own memory.
    pub(crate) fn new(
        source: Box<dyn Source>,
        on_end: OnEnd,
        rate: Rational,
        held: crate::memory::Held,
    ) -> Self {
        let own = source.info().rate;
        let resample = (own != rate).then_some((own, rate));
        let applied: Vec<_> = source.live_props().into_iter().map(|(_, v)| v).collect();
        let n = applied.len();
        SourceInst {
            applied,
            refused: vec![false; n],
            changed: vec![false; n],
            stamps: vec![0; n],
            _own: held,
            source,
            on_end,
            resample,
            produced: 0,
            origin: 0,
            last: None,
            keep_last: on_end == OnEnd::Hold || resample.is_some(),
            giving_last: false,
        }
    }

    /// A kept source starts counting graph frames at `n` in the version a live edit switched
    /// in at `n`.
    pub(crate) fn start_at(&mut self, n: u64) {
        self.origin = n;
    }
}
