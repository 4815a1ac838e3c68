//! One graph version: everything fixed while it runs, replaced whole by a live edit.

use std::sync::{Arc, Mutex};

use crate::live::{FrameParams, LiveSpec};
use crate::stats::StageCounters;

use super::Topo;

/// One version of the graph: everything that is fixed while it runs and replaced whole by a
/// live edit. The scheduler state holds the current one; a job takes a reference to it with
/// the job (under the lock), so a version lives as long as any job of it.
pub(crate) struct Version {
    /// 0 for the graph the run started with, +1 per edit.
    pub(crate) number: u64,
    pub(crate) topo: Topo,
    /// Per-slot parameter snapshots (frames, then leaky branches). A frame's is written at its
    /// boundary and read by the nodes running it, a branch's copied from its frame's when the
    /// branch takes it; its mutex is never contended in practice.
    pub(crate) snapshots: Vec<Mutex<FrameParams>>,
    pub(crate) param_names: Vec<Vec<Arc<str>>>,
    /// What the live parameters are (names, specs): commands are resolved against it without
    /// the scheduler lock.
    pub(crate) live_spec: LiveSpec,
    /// Per node: its counters (shared with `Counters::stages`).
    pub(crate) stages: Arc<[Arc<StageCounters>]>,
    /// Per node: its name, element, kind word and output shape (what a live edit compares).
    pub(crate) names: Vec<Arc<str>>,
    pub(crate) elements: Vec<String>,
    pub(crate) kinds: Vec<&'static str>,
    pub(crate) infos: Vec<framepipe_core::VideoInfo>,
    /// Per output port: its sink's node.
    pub(crate) ports: Vec<usize>,
    /// Per node: frames of its own output it keeps beyond the frames in flight (a source's
    /// last frame under `hold` or resampling), counted again when a live edit carries it over.
    pub(crate) holds: Vec<usize>,
    /// What the budget counts for its instances: one output frame each, and its sources' own
    /// memory (they move with the nodes a live edit keeps).
    pub(crate) instance_bytes: u64,
    /// Per node: a source's own memory ([`framepipe_core::Source::own_bytes`]; 0 for the
    /// others), for the version a live edit builds next to know what a kept source holds.
    pub(crate) source_bytes: Vec<u64>,
    /// Its GPU nodes' own buffers (GPU memory their instances count).
    pub(crate) gpu_instance_bytes: u64,
    /// Per node, the pool its output frames come from (`pools[node]`), feedbacks' frames 0,
    /// and what they count in the show's memory book (memory/).
    pub(crate) pools: crate::memory::VersionPools,
}
