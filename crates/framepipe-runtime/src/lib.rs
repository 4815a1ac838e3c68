//! framepipe's runtime: runs a pipeline (source → effects → sink) on **one** pool of worker threads.
//!
//! The model is oneTBB's `parallel_pipeline`:
//! * a bounded number of frames ("tokens") is in flight at once;
//! * *serial* stages (the source, the sink, effects that keep state between frames) take frames
//!   strictly in sequence order, one at a time, with a single instance;
//! * *parallel* stages (stateless effects) run on several frames at once, each worker using its own
//!   instance (one per worker, made at prepare);
//! * a worker that finishes a stage carries its frame straight on to the next stage when it can
//!   (cache-warm); if the next stage is serial and busy or the frame is not next in order, the frame
//!   is parked there and the worker looks for other work instead of waiting;
//! * native effects can split one frame into slices ([`framepipe_core::SliceRunner`]) that idle
//!   workers of the same pool help with.
//!
//! Output order is the source order, and because parallel stages are stateless and every instance
//! is configured identically, output bytes do not depend on the number of threads.
//!
//! Real-time contract: [`Pipeline::prepare`] checks everything the run may hold against the
//! memory budget, makes the frame pools (sized from the run; their buffers are allocated once,
//! the first time each is needed, during warm-up), the scheduler's queues and every effect
//! instance (one per serial effect, one per worker per parallel effect); after warm-up, running
//! a frame allocates nothing in the runtime. Workers take one short mutex to complete a
//! job and pick the next (queue bookkeeping only, once per stage per frame); they never hold it
//! while an element runs, and nothing under it allocates, prints or calls user code. The output
//! thread takes it once per frame; it is priority-inheriting, and every hold is measured
//! (`RunStats::lock_hold_us`). A panic anywhere ends the run with an error naming where. See
//! docs/REALTIME.md and docs/RELIABILITY.md.
#![deny(unsafe_code)]

mod build;
mod edit;
mod exec;
mod host;
mod live;
mod memory;
mod model;
mod output;
mod sched;
mod show;
mod stats;

pub use edit::{Editor, Fade};
pub use host::{ClockCounters, Host, ShowResult};
pub use memory::{
    max_gpu_memory, set_max_gpu_memory, MemoryStats, SharedPoolStats, SharedPools,
    DEFAULT_MAX_GPU_MEMORY, IN_FLIGHT_BYTES,
};
pub use model::{
    AutoScale, EffectStage, GpuStage, Graph, Layout, MixerStage, Node, NodeKind, OnEnd, Options,
    Overload, Pipeline, JOIN_GRACE, MAX_INPUTS,
};
pub use sched::LockSummary;
pub use show::Prepared;
pub use stats::{Counters, EditStats, GpuStats, RunStats, StageCounters, StageStats};
pub use stats::{Event, EventFn};
pub use stats::{GraphView, NodeView, ShowView, ValuesView, PUBLISH_EVERY_NS};
pub use stats::{LateFrame, LateLog, PacingStats};
