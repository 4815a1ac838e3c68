//! What a running show reports: live and final statistics, [`Event`]s, and the published view
//! of the show for control surfaces.
//!
//! Contract: nothing here makes the frame path wait. [`Counters`] and [`StageCounters`] are
//! relaxed atomics (but the node list, an `Arc` replaced per graph version off the frame
//! path), private to this module: the workers, the output threads and the scheduler
//! count and set them through methods (one atomic operation each, no lock, no allocation), and
//! anyone (a status line, a monitor) reads them without the scheduler's lock. Events are
//! delivered outside the scheduler lock (`events.rs`); the view is read without it and written
//! by the workers with a `try_lock` that never waits (`view.rs`).
//!
//! | file | its job |
//! |---|---|
//! | `mod.rs` | the counters ([`StageCounters`], [`Counters`]) and their snapshots ([`StageStats`], [`EditStats`], [`RunStats`]) |
//! | `pacing.rs` | the frame clock's figures of a paced run ([`PacingStats`]) and the late frames' log ([`LateLog`]) |
//! | `events.rs` | [`Event`]s and their delivery |
//! | `view.rs` | the published state for control surfaces ([`ShowView`]: the graph as it runs, the latest values) |

mod events;
mod view;

pub use events::{Event, EventFn};
pub use view::{GraphView, NodeView, ShowView, ValuesView, PUBLISH_EVERY_NS};

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use framepipe_core::Mode;

use crate::sched::{LockSummary, Log2Histogram};

mod pacing;
pub use pacing::{LateFrame, LateLog, PacingStats};

/// Counters of one stage, updated by the worker that runs it.
#[derive(Debug)]
pub struct StageCounters {
    /// Stage name (element name); shared with events without copying.
    pub name: Arc<str>,
    /// Serial or parallel.
    pub mode: Mode,
    frames: AtomicU64,
    busy_ns: AtomicU64,
    instances: AtomicUsize,
    skipped: AtomicU64,
    /// A GPU node: frames whose GPU time was measured (timer queries), and that time.
    gpu_frames: AtomicU64,
    gpu_ns: AtomicU64,
    /// A stall of this stage was reported (once per stage).
    stall_reported: AtomicBool,
}

impl StageCounters {
    pub(crate) fn new(name: &str, mode: Mode) -> Self {
        StageCounters {
            name: Arc::from(name),
            mode,
            frames: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            instances: AtomicUsize::new(0),
            skipped: AtomicU64::new(0),
            gpu_frames: AtomicU64::new(0),
            gpu_ns: AtomicU64::new(0),
            stall_reported: AtomicBool::new(false),
        }
    }

    /// A leaky branch starting at this node skipped a frame (it still held an earlier one).
    pub(crate) fn skip(&self) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record(&self, busy: Duration) {
        self.frames.fetch_add(1, Ordering::Relaxed);
        self.busy_ns
            .fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
    }

    /// A GPU node's render took `ns` on the GPU (a timer query's result).
    pub(crate) fn record_gpu(&self, ns: u64) {
        self.gpu_frames.fetch_add(1, Ordering::Relaxed);
        self.gpu_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Whether a stall of this stage is to be reported now: true the first time only.
    pub(crate) fn report_stall_once(&self) -> bool {
        !self.stall_reported.swap(true, Ordering::Relaxed)
    }

    pub(crate) fn add_instance(&self) {
        self.instances.fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot of this stage's figures.
    pub fn snapshot(&self) -> StageStats {
        let frames = self.frames.load(Ordering::Relaxed);
        let busy = self.busy_ns.load(Ordering::Relaxed);
        let gpu_frames = self.gpu_frames.load(Ordering::Relaxed);
        let gpu_ns = self.gpu_ns.load(Ordering::Relaxed);
        StageStats {
            gpu_ms: (gpu_frames > 0).then(|| gpu_ns as f64 / gpu_frames as f64 / 1e6),
            name: self.name.to_string(),
            mode: self.mode,
            instances: self.instances.load(Ordering::Relaxed),
            frames,
            skipped: self.skipped.load(Ordering::Relaxed),
            mean_ms: if frames == 0 {
                0.0
            } else {
                busy as f64 / frames as f64 / 1e6
            },
        }
    }
}

/// Figures of one stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StageStats {
    /// Element name.
    pub name: String,
    /// How it was scheduled.
    pub mode: Mode,
    /// Instances that processed at least one frame (1 for serial stages; up to the worker count
    /// for parallel ones, all of which are made at prepare).
    pub instances: usize,
    /// Frames processed.
    pub frames: u64,
    /// Frames a leaky branch starting here skipped because it was still busy with an earlier
    /// one (0 elsewhere).
    pub skipped: u64,
    /// Mean processing time per frame, milliseconds (a GPU thread's job: the time to issue
    /// it; a download: from its start to its readback in).
    pub mean_ms: f64,
    /// A GPU node: its mean time on the GPU per frame, milliseconds, measured with GL timer
    /// queries (read without waiting; `None` when none was measured).
    pub gpu_ms: Option<f64>,
}

/// Counters of the whole run.
#[derive(Debug)]
pub struct Counters {
    /// One per node of the running graph version (see [`Counters::stages`]). Replaced whole
    /// by a live edit (off the frame path); a node kept by the edit keeps its counters.
    stages: Mutex<Arc<[Arc<StageCounters>]>>,
    in_flight: AtomicUsize,
    frames_out: AtomicU64,
    started: std::time::Instant,
    late: AtomicU64,
    repeated: AtomicU64,
    realtime: AtomicBool,
    /// Paced runs: how long before its deadline a frame begins, µs.
    latency_budget_us: AtomicU64,
    /// Paced runs: the default budget's adaptive margin now, µs (see `output/gate.rs`).
    latency_margin_us: AtomicU64,
    /// Paced runs: the worst lateness of a frame in the last whole second, µs.
    lateness_peak_us: AtomicU64,
    paused: AtomicBool,
    /// The beat clock's tempo, 1/1000 bpm (written after each `tempo` / `tap` is assigned).
    tempo_mbpm: AtomicU64,
    /// How long each acquisition of the scheduler lock was held.
    lock_hold: Log2Histogram,
    /// How long the output thread waited to acquire it.
    output_lock_wait: Log2Histogram,
    /// Live edits switched in whose first frame was released (master output).
    edit_switches: AtomicU64,
    /// Deadlines repeated (live policy) from an edit's arming to its first frame's release.
    edit_repeats: AtomicU64,
    /// The drains (arming to switch) of those edits: sum and longest, µs.
    edit_drain_us_sum: AtomicU64,
    edit_drain_us_max: AtomicU64,
    /// Edits built (handed to the edit thread by a command, back built), the deadlines
    /// repeated meanwhile and the builds' total time, µs.
    edit_builds: AtomicU64,
    edit_build_repeats: AtomicU64,
    edit_build_us_sum: AtomicU64,
    /// What the show holds against `--max-memory` (every graph version alive, its instances).
    pub(crate) memory: Arc<crate::memory::MemoryBook>,
    /// The GPU thread's transfers: uploads done, downloads finished.
    uploads: AtomicU64,
    downloads: AtomicU64,
    /// GPU instances released after a live edit removed them.
    gpu_releases: AtomicU64,
    /// The show's GPU renderer, once its GPU thread opened its context.
    renderer: Mutex<Option<String>>,
    /// The show's audio: the last frame's analysis, for the surfaces (issue #25).
    audio: framepipe_audio::Meter,
}

impl Counters {
    pub(crate) fn new(
        stages: Arc<[Arc<StageCounters>]>,
        memory: Arc<crate::memory::MemoryBook>,
    ) -> Self {
        Counters {
            stages: Mutex::new(stages),
            in_flight: AtomicUsize::new(0),
            frames_out: AtomicU64::new(0),
            started: std::time::Instant::now(),
            late: AtomicU64::new(0),
            repeated: AtomicU64::new(0),
            realtime: AtomicBool::new(false),
            latency_budget_us: AtomicU64::new(0),
            latency_margin_us: AtomicU64::new(0),
            lateness_peak_us: AtomicU64::new(0),
            paused: AtomicBool::new(false),
            tempo_mbpm: AtomicU64::new((framepipe_control::beat::DEFAULT_BPM * 1000.0) as u64),
            lock_hold: Log2Histogram::new(),
            output_lock_wait: Log2Histogram::new(),
            edit_switches: AtomicU64::new(0),
            edit_repeats: AtomicU64::new(0),
            edit_drain_us_sum: AtomicU64::new(0),
            edit_drain_us_max: AtomicU64::new(0),
            edit_builds: AtomicU64::new(0),
            edit_build_repeats: AtomicU64::new(0),
            edit_build_us_sum: AtomicU64::new(0),
            memory,
            uploads: AtomicU64::new(0),
            downloads: AtomicU64::new(0),
            gpu_releases: AtomicU64::new(0),
            audio: framepipe_audio::Meter::new(),
            renderer: Mutex::new(None),
        }
    }

    /// The GPU thread uploaded a frame into a texture.
    pub(crate) fn count_upload(&self) {
        self.uploads.fetch_add(1, Ordering::Relaxed);
    }

    /// The GPU thread finished a download (a texture into a CPU frame).
    pub(crate) fn count_download(&self) {
        self.downloads.fetch_add(1, Ordering::Relaxed);
    }

    /// The GPU thread released a GPU instance a live edit removed.
    pub(crate) fn count_gpu_release(&self) {
        self.gpu_releases.fetch_add(1, Ordering::Relaxed);
    }

    /// The GPU thread opened its context on `renderer` (off the frame path).
    pub(crate) fn set_renderer(&self, renderer: String) {
        *self
            .renderer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(renderer);
    }

    /// The GPU figures, for a show that has a GPU thread.
    fn gpu(&self, frames: u64) -> Option<GpuStats> {
        let renderer = self
            .renderer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()?;
        let uploads = self.uploads.load(Ordering::Relaxed);
        let downloads = self.downloads.load(Ordering::Relaxed);
        let per = |n: u64| {
            if frames == 0 {
                0.0
            } else {
                n as f64 / frames as f64
            }
        };
        Some(GpuStats {
            renderer,
            uploads,
            downloads,
            uploads_per_frame: per(uploads),
            downloads_per_frame: per(downloads),
            released: self.gpu_releases.load(Ordering::Relaxed),
        })
    }

    /// The master output released a frame.
    pub(crate) fn count_frame_out(&self) {
        self.frames_out.fetch_add(1, Ordering::Relaxed);
    }

    /// The master output released a frame later than the late threshold.
    pub(crate) fn count_late(&self) {
        self.late.fetch_add(1, Ordering::Relaxed);
    }

    /// The master output showed the previous frame again at `n` deadlines (live policy).
    pub(crate) fn count_repeats(&self, n: u64) {
        self.repeated.fetch_add(n, Ordering::Relaxed);
    }

    /// Frames in flight now, over every graph version alive (the scheduler, under its lock).
    pub(crate) fn set_in_flight(&self, n: usize) {
        self.in_flight.store(n, Ordering::Relaxed);
    }

    /// Whether the master output thread runs under `SCHED_FIFO`.
    pub(crate) fn set_realtime(&self, on: bool) {
        self.realtime.store(on, Ordering::Relaxed);
    }

    /// Whether the master output is paused.
    pub(crate) fn set_paused(&self, on: bool) {
        self.paused.store(on, Ordering::Relaxed);
    }

    /// The beat clock's tempo, bpm (after a `tempo` or `tap` is assigned).
    pub(crate) fn set_tempo_bpm(&self, bpm: f64) {
        let mbpm = (bpm * 1000.0).round() as u64;
        self.tempo_mbpm.store(mbpm, Ordering::Relaxed);
    }

    /// Paced runs: how long before its deadline a frame begins now, µs.
    pub(crate) fn set_latency_budget_us(&self, us: u64) {
        self.latency_budget_us.store(us, Ordering::Relaxed);
    }

    /// Paced runs: the latency budget now, µs (0 before the graph's latency is known).
    pub(crate) fn latency_budget_us(&self) -> u64 {
        self.latency_budget_us.load(Ordering::Relaxed)
    }

    /// Paced runs with the default budget: its adaptive margin now, µs.
    pub(crate) fn set_latency_margin_us(&self, us: u64) {
        self.latency_margin_us.store(us, Ordering::Relaxed);
    }

    /// Paced runs: the worst lateness of a frame in the last whole second, µs.
    pub(crate) fn set_lateness_peak_us(&self, us: u64) {
        self.lateness_peak_us.store(us, Ordering::Relaxed);
    }

    /// One hold of the scheduler lock, ns (lock-free: any thread, at any time).
    pub(crate) fn record_lock_hold(&self, ns: u64) {
        self.lock_hold.record(ns);
    }

    /// One wait of the output thread for the scheduler lock, ns.
    pub(crate) fn record_output_lock_wait(&self, ns: u64) {
        self.output_lock_wait.record(ns);
    }

    /// The master output released the first frame of a live edit: `drain_ns` from its arming
    /// to its switch, `repeats` deadlines repeated from its arming to that release.
    pub(crate) fn record_edit(&self, drain_ns: i64, repeats: u64) {
        let us = (drain_ns.max(0) / 1000) as u64;
        self.edit_switches.fetch_add(1, Ordering::Relaxed);
        self.edit_repeats.fetch_add(repeats, Ordering::Relaxed);
        self.edit_drain_us_sum.fetch_add(us, Ordering::Relaxed);
        self.edit_drain_us_max.fetch_max(us, Ordering::Relaxed);
    }

    /// A live edit came back built from the edit thread `build_ns` after the master output
    /// handed it there, `repeats` deadlines repeated meanwhile.
    pub(crate) fn record_edit_build(&self, build_ns: i64, repeats: u64) {
        let us = (build_ns.max(0) / 1000) as u64;
        self.edit_builds.fetch_add(1, Ordering::Relaxed);
        self.edit_build_repeats
            .fetch_add(repeats, Ordering::Relaxed);
        self.edit_build_us_sum.fetch_add(us, Ordering::Relaxed);
    }

    /// What the live edits switched in so far cost at the master output.
    pub fn edits(&self) -> EditStats {
        let switched = self.edit_switches.load(Ordering::Relaxed);
        let sum = self.edit_drain_us_sum.load(Ordering::Relaxed);
        let builds = self.edit_builds.load(Ordering::Relaxed);
        let build_sum = self.edit_build_us_sum.load(Ordering::Relaxed);
        EditStats {
            switched,
            repeated: self.edit_repeats.load(Ordering::Relaxed),
            drain_mean_ms: if switched == 0 {
                0.0
            } else {
                sum as f64 / switched as f64 / 1000.0
            },
            drain_max_ms: self.edit_drain_us_max.load(Ordering::Relaxed) as f64 / 1000.0,
            built: builds,
            build_repeated: self.edit_build_repeats.load(Ordering::Relaxed),
            build_mean_ms: if builds == 0 {
                0.0
            } else {
                build_sum as f64 / builds as f64 / 1000.0
            },
        }
    }

    /// One per node of the running graph, in execution order: source(s), effects, ...,
    /// sink(s). A live edit replaces the list; hold the `Arc` for a consistent view.
    pub fn stages(&self) -> Arc<[Arc<StageCounters>]> {
        Arc::clone(&self.stages.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The list of a new graph version.
    pub(crate) fn set_stages(&self, stages: Arc<[Arc<StageCounters>]>) {
        *self.stages.lock().unwrap_or_else(|p| p.into_inner()) = stages;
    }

    /// Paced runs: how long before its deadline a frame begins now (ms; 0 before the graph's
    /// latency is known): the bound on how late a command reaches the output.
    pub fn latency_budget_ms(&self) -> f64 {
        self.latency_budget_us.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// Paced runs with the default budget: its adaptive margin now (ms; 0 until frames are
    /// held back, and with `--latency`): what the budget adds to the graph's latency and a
    /// quarter of it, grown by frames that were ready with little to spare.
    pub fn latency_margin_ms(&self) -> f64 {
        self.latency_margin_us.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// Paced runs: the worst lateness of a released frame during the last whole second, µs
    /// (updated once a second by the master output thread; 0 before the first second). For
    /// live displays: a history of it shows when the output was late, and by how much.
    pub fn lateness_peak_us(&self) -> u64 {
        self.lateness_peak_us.load(Ordering::Relaxed)
    }

    /// Frames released later than the late threshold so far (paced runs).
    pub fn late(&self) -> u64 {
        self.late.load(Ordering::Relaxed)
    }

    /// Deadlines at which the previous frame was shown again so far (live overload policy).
    pub fn repeated(&self) -> u64 {
        self.repeated.load(Ordering::Relaxed)
    }

    /// Whether the output thread runs under `SCHED_FIFO`.
    pub fn realtime(&self) -> bool {
        self.realtime.load(Ordering::Relaxed)
    }

    /// Whether output is paused (by a `pause` or `step` command).
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// The show's audio as of the last frame begun (`frames` 0: no audio, or no frame yet):
    /// level, peak, bands, onsets so far, tempo estimate. Lock-free; for the surfaces.
    pub fn audio(&self) -> framepipe_audio::MeterReading {
        self.audio.read()
    }

    /// The show's audio has `n` bands.
    pub(crate) fn set_audio_bands(&self, n: usize) {
        self.audio.set_bands(n);
    }

    /// Writes a frame's audio analysis (the worker beginning the frame).
    pub(crate) fn set_audio(&self, a: &framepipe_audio::AudioFrame) {
        self.audio.store(a);
    }

    /// The beat clock's tempo, bpm (as of the last command assigned, or the last frame
    /// under `tempo auto`).
    pub fn tempo_bpm(&self) -> f64 {
        self.tempo_mbpm.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// What the show holds against `--max-memory` now, as the budget counts it.
    pub fn memory(&self) -> crate::memory::MemoryStats {
        self.memory.stats()
    }

    /// Frames in flight right now (between leaving the source and leaving the sink).
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Frames the sink has consumed so far.
    pub fn frames_out(&self) -> u64 {
        self.frames_out.load(Ordering::Relaxed)
    }

    /// A snapshot of everything.
    pub fn snapshot(&self) -> RunStats {
        let wall = self.started.elapsed();
        let frames = self.frames_out();
        RunStats {
            frames,
            wall_s: wall.as_secs_f64(),
            fps: if wall.as_secs_f64() > 0.0 {
                frames as f64 / wall.as_secs_f64()
            } else {
                0.0
            },
            stages: self.stages().iter().map(|s| s.snapshot()).collect(),
            in_flight: self.in_flight(),
            pacing: None,
            tempo_bpm: self.tempo_bpm(),
            lock_hold_us: self.lock_hold.summary(),
            output_lock_wait_us: self.output_lock_wait.summary(),
            edits: self.edits(),
            memory: self.memory.stats(),
            gpu: self.gpu(frames),
        }
    }
}

/// What a show with GPU nodes did on the GPU (its GPU thread's figures; each GPU node's GPU
/// time is in its [`StageStats::gpu_ms`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuStats {
    /// The renderer its context runs on (`llvmpipe (LLVM 19.1.7, 256 bits)`, a GPU's name).
    pub renderer: String,
    /// CPU frames uploaded into textures.
    pub uploads: u64,
    /// Textures downloaded into CPU frames.
    pub downloads: u64,
    /// Uploads per frame out (the master output's frames).
    pub uploads_per_frame: f64,
    /// Downloads per frame out.
    pub downloads_per_frame: f64,
    /// GPU node instances that live edits removed and the GPU thread released (their GL
    /// objects deleted while the show goes on).
    pub released: u64,
}

/// What live edits cost at the master output (issue #9, "no glitch"): measured per edit from
/// its arming (the built version reached the output thread; no frame begins in the running
/// version from then on) to the release of its first frame.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EditStats {
    /// Edits switched in whose first frame was released.
    pub switched: u64,
    /// Deadlines repeated (`--overload live`) between an edit's arming and the release of its
    /// first frame, over all edits (a run without edits repeats some too: compare).
    pub repeated: u64,
    /// The drain (arming to the switch: the running version's frames leaving), mean, ms.
    pub drain_mean_ms: f64,
    /// The longest drain, ms.
    pub drain_max_ms: f64,
    /// Edits built on the edit thread (sent there by a command, back built).
    pub built: u64,
    /// Deadlines repeated while they were being built (from the command's reading to the
    /// built version's arming; the show runs on meanwhile, the edit thread competing with
    /// the workers for the CPU).
    pub build_repeated: u64,
    /// How long a build took, mean, ms.
    pub build_mean_ms: f64,
}

/// Figures of a run, live or final.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStats {
    /// Frames consumed by the sink.
    pub frames: u64,
    /// Seconds since the run started.
    pub wall_s: f64,
    /// frames / wall_s.
    pub fps: f64,
    /// Per stage, in pipeline order (source first, sink last).
    pub stages: Vec<StageStats>,
    /// Frames in flight when the snapshot was taken.
    pub in_flight: usize,
    /// The frame clock's figures, for a finished paced run.
    pub pacing: Option<PacingStats>,
    /// The beat clock's tempo, bpm.
    pub tempo_bpm: f64,
    /// How long the scheduler lock was held, per acquisition (every thread), µs.
    pub lock_hold_us: LockSummary,
    /// How long the output thread waited to acquire the scheduler lock, per acquisition, µs.
    pub output_lock_wait_us: LockSummary,
    /// What the live edits cost at the master output.
    pub edits: EditStats,
    /// What the show holds against `--max-memory`, as the budget counts it: during a live
    /// edit, both versions.
    pub memory: crate::memory::MemoryStats,
    /// A show with GPU nodes: its transfers and renderer (`None` without a GPU thread).
    pub gpu: Option<GpuStats>,
}
