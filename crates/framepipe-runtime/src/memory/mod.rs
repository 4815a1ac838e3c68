//! Frame pools sized from what a run needs, checked against the memory budget before anything is
//! allocated.
//!
//! Contract: nothing frame-sized is allocated before the budget check passes; after the
//! warm-up, taking a frame from a pool on the frame path allocates nothing and takes no lock
//! but the pool's own; what a show holds is counted in its [`MemoryBook`] by guards, per
//! [`MemoryKind`], and given back when the objects holding it are dropped (never on the frame
//! path); no worker or output thread ever takes a host's registry lock.
//!
//! * `sizing.rs`: how many frames each pool may need ([`PoolNeeds`] → [`PoolPlan`]).
//! * `kind.rs`: where a frame's memory lives ([`MemoryKind`]) and the one place a pool is made
//!   ([`PoolShape::make`]).
//! * `book.rs`: what a show holds against its budget ([`MemoryBook`], [`Held`]).
//! * `fill.rs`: a show's own pools, made lazy ([`frame_pools`]) and filled in the background.
//! * `version.rs`: one graph version's pools ([`VersionPools`]).
//! * `shared.rs`: a host's pools, shared by its shows ([`SharedPools`], [`PoolLease`]).
//! * `filler.rs`: a host's pool filler thread, which makes their frames ahead of need.
//!
//! # How many frames a pool can need at once
//!
//! Frames are held only by:
//! * **tokens** (frames in flight): at most `in_flight` exist, and between stages each holds one
//!   frame, the output of the last stage it went through (a bypassed stage passes its input on);
//! * **a running stage**, which holds its input (the token's frame, counted above) *and* the
//!   output it is writing. Stages run on the workers, so at most `threads` run at once, and never
//!   more than there are tokens; a serial effect runs one frame at a time, a parallel one at most
//!   one per worker (its instance count). The source's job holds only the frame it fills (the
//!   token's). Slices of a frame hold no frames;
//! * **the output thread**, which under the `live` overload policy of a paced run keeps the last
//!   frame it released, to show it again (after that frame's token is gone);
//! * **the sink**, which may keep a clone of the frame it was given ([`framepipe_core::Sink`]);
//!   `tcpsink`'s link threads drop theirs just after `consume` returns, for example.
//!
//! Not counted: a copy made by [`Frame::into_mut`](framepipe_core::Frame::into_mut) of a frame
//! that is still shared (copy on write). No element does that (an effect writes the output frame
//! it is given); one that did would find the pool exhausted and fail with `PoolExhausted`, which
//! names the pool, rather than allocate.
//!
//! A pool serves the nodes whose output has its size (one pool per distinct size). In a graph
//! it counts, per frame in flight, every show node's output (a frame may hold all of them at
//! once), one frame per writer in a leaky branch, the running instances, and what is kept
//! beyond the frames in flight (`PoolNode::extra`); `PoolNeeds::plan` computes it and
//! docs/REALTIME.md writes the formula out. For a chain it comes down to:
//!
//! ```text
//! capacity(P) = in_flight                                   tokens
//!             + min(threads, in_flight, instances of the    running stages writing into P
//!                   effects whose output is P)
//!             + 1 if P feeds the sink                       a frame the sink keeps
//!             + 1 if P feeds the sink, paced, overload=live the output thread's last frame
//! ```
//!
//! `in_flight` itself is capped by the source's `len_hint()` (a run of N frames never has more
//! than N in flight), so a one-frame `testsrc ! glow ! nullsink` has a pool of 3 (the source's
//! frame, glow's output, what a sink may keep) of which it allocates 2. When `--in-flight` is not
//! given, its default (`2 * threads + 2`) is lowered for large frames so that the frames in flight
//! take at most [`IN_FLIGHT_BYTES`], but never below `threads + 1`: one frame per busy worker and
//! one waiting for the sink, so that every worker can still be busy.
//!
//! # What is checked, when
//!
//! Before any pool is made, each stage's output frame is checked with
//! [`Limits::check_frame`](framepipe_core::Limits::check_frame) and everything the run may hold
//! with [`Limits::check_total`](framepipe_core::Limits::check_total): every pool at its **full
//! capacity**, plus one output frame per effect instance. That last term is an *estimate* of the
//! instances' own buffers (a frei0r glow keeps a few frames' worth of sums, a BGRA plugin a swap
//! buffer, `invert` nothing); the engine cannot see inside a plugin, and one frame each is the
//! common case of an effect with a scratch buffer. A refusal names the pools, the limit and how
//! to raise it (`--max-memory`, or lower `--in-flight` / `--threads`).
//!
//! # When the frames are allocated
//!
//! Pools are lazy ([`FramePool::lazy`](framepipe_core::FramePool::lazy)): a frame buffer is
//! allocated and every page of it written the first time a stage finds no free frame, never again
//! after. An **unpaced** run (batch rendering) grows on demand only, so it holds what it really
//! uses and its first frame waits only for the buffers that frame needs. A **paced** run (a show)
//! cannot allocate late in the show: a helper thread (`fp-pool-fill`) fills every pool to its
//! capacity (but for the frame a sink may keep: no framepipe sink does, and one that does keeps it
//! from its first frame, so it is made during the warm-up anyway) while the first frames flow, so
//! that after the warm-up no frame allocates or faults in a page again. Measured with
//! `scripts/bench-memory` (docs/RELIABILITY.md).
//!
//! # In a host
//!
//! Several shows in one process share their pools: one per frame shape, each show (and each
//! version a live edit makes of it) holding a quota handle with the capacity computed above as
//! its quota; one filler makes the frames ahead of need by what the shows hold together and
//! their latency budgets, and drops the pools no version holds any more once their frames are
//! back ([`SharedPools`]).
//!
//! # Where the frames live
//!
//! On the heap, unless something in the process runs frames in a child process (an isolated frei0r
//! plugin: it calls [`framepipe_core::shm::request_shared_pools`] when it is built, before the
//! pools are made): then every pool is made with
//! [`FramePool::lazy_shared`](framepipe_core::FramePool::lazy_shared), its buffers in one memfd per
//! pool, so that the child reads its inputs and writes its output in place instead of through
//! copies (docs/ISOLATION.md). Allocation and touching are the same either way.

mod book;
mod fill;
mod filler;
mod kind;
mod shared;
mod sizing;
#[cfg(test)]
mod tests;
mod version;

pub use book::MemoryStats;
pub use shared::{SharedPoolStats, SharedPools};
pub use sizing::IN_FLIGHT_BYTES;

pub(crate) use book::{Held, MemoryBook};
pub(crate) use fill::{fill_in_background, frame_pools, ShowPools};
pub(crate) use filler::Pace;
pub use kind::{max_gpu_memory, set_max_gpu_memory, DEFAULT_MAX_GPU_MEMORY};
pub(crate) use kind::{MemoryKind, PoolShape};
pub(crate) use shared::{PoolLease, HOST_BEGIN_SLACK_NS};
pub(crate) use sizing::{in_flight, pool_bytes, PoolNeeds, PoolNode, PoolPlan, GPU_HELD_TEXTURES};
pub(crate) use version::VersionPools;

use shared::rebind;
