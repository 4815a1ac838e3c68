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
//! Real-time contract: after [`Pipeline::prepare`] (which allocates the frame pools, the scheduler's
//! queues and every effect instance: one per serial effect, one per worker per parallel effect),
//! running a frame allocates nothing in the runtime. Workers take one short mutex to pick and
//! complete a job (queue bookkeeping only, twice per stage per frame); they never hold it while
//! an element runs. See docs/REALTIME.md.
#![deny(unsafe_code)]

mod live;
mod output;
mod pools;
mod sched;
mod stats;

pub use output::PacingStats;
pub use pools::IN_FLIGHT_BYTES;
pub use sched::{EffectStage, Event, EventFn, Options, Overload, Pipeline, Prepared};
pub use stats::{Counters, RunStats, StageCounters, StageStats};
