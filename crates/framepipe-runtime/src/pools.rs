//! Frame pools sized from what a run needs, checked against the memory budget before anything is
//! allocated.
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
//! Pools are lazy ([`FramePool::lazy`]): a frame buffer is allocated and every page of it written
//! the first time a stage finds no free frame, never again after. An **unpaced** run (batch
//! rendering) grows on demand only, so it holds what it really uses and its first frame waits
//! only for the buffers that frame needs. A **paced** run (a show) cannot allocate late in the
//! show: a helper thread (`fp-pool-fill`) fills every pool to its capacity (but for the frame a
//! sink may keep: no framepipe sink does, and one that does keeps it from its first frame, so it
//! is made during the warm-up anyway) while the first frames flow, so that after the warm-up no
//! frame allocates or faults in a page again.
//! Measured with `scripts/bench-memory` (docs/RELIABILITY.md).
//!
//! # In a host
//!
//! Several shows in one process share their pools: one per frame shape, each show holding a
//! quota handle with the capacity computed above as its quota ([`SharedPools`]).
//!
//! # Where the frames live
//!
//! On the heap, unless something in the process runs frames in a child process (an isolated
//! frei0r plugin: it calls [`framepipe_core::shm::request_shared_pools`] when it is built, before
//! the pools are made): then every pool is made with [`FramePool::lazy_shared`], its buffers in
//! one memfd per pool, so that the child reads its inputs and writes its output in place instead
//! of through copies (docs/ISOLATION.md). Allocation and touching are the same either way.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use framepipe_core::limits::{frame_bytes, human_bytes};
use framepipe_core::{FramePool, Limits, Result, VideoInfo};

/// Frames in flight, by default, take at most this much (the default `2 * threads + 2` is
/// lowered for large frames, never below `threads + 1`). On two workers: 1920x1080 keeps the
/// usual 6, 3840x2160 gets 3. `threads + 1` keeps every worker busy: when one finishes a frame
/// and hands it to the sink, it can start the next without waiting for the output thread. (4K
/// glow, 2 workers, interleaved rounds: in-flight 3 against 6 ran at 0.93x and 1.03x, per-round
/// medians of two series, within the noise; docs/RELIABILITY.md.)
pub const IN_FLIGHT_BYTES: u64 = 96 << 20;

/// Frames in flight for a run: `requested` (0 = the default, see [`IN_FLIGHT_BYTES`]), never
/// more than the source will produce (`len_hint`), at least 1.
pub(crate) fn in_flight(
    threads: usize,
    requested: usize,
    infos: &[VideoInfo],
    len_hint: Option<u64>,
) -> usize {
    let wanted = if requested > 0 {
        requested
    } else {
        let largest = infos
            .iter()
            .map(|i| frame_bytes(i.width, i.height))
            .max()
            .unwrap_or(1)
            .max(1);
        let fits = usize::try_from(IN_FLIGHT_BYTES / largest).unwrap_or(usize::MAX);
        fits.clamp(threads + 1, 2 * threads + 2)
    };
    match len_hint {
        Some(n) => wanted.min(usize::try_from(n).unwrap_or(usize::MAX)).max(1),
        None => wanted.max(1),
    }
}

/// One node's part in the pools' sizes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolNode<'a> {
    /// Its output shape (a sink: its input's; it writes none).
    pub info: VideoInfo,
    pub name: &'a str,
    /// Writes frames of its own (sources, effects, mixers; not sinks or feedbacks).
    pub writes: bool,
    /// Effect or mixer instances (0 for a source: its job holds only the frame it fills).
    pub instances: usize,
    /// In a leaky branch: at most one frame of its own at a time, whatever the frames in flight.
    pub in_branch: bool,
    /// Sinks fed by this node (each may keep a clone of the frame it was given).
    pub sinks_fed: usize,
    /// Feeds the master sink.
    pub feeds_master: bool,
    /// Frames it holds beyond those: a source's last frame (hold, resampling), a feedback's
    /// frame 0 and the frames waiting for the next frame (at most the frames in flight), one
    /// per leaky branch whose first node reads it (the branch keeps that frame after the frame
    /// left flight).
    pub extra: usize,
}

/// What the pools are sized from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolNeeds<'a> {
    /// Every node, in execution order.
    pub nodes: &'a [PoolNode<'a>],
    /// A chain (one input and one consumer each): a frame in flight holds one frame between
    /// nodes; in a graph, every node's output for one frame may be alive at once.
    pub chain: bool,
    /// Worker threads.
    pub threads: usize,
    /// Frames in flight at most (already resolved, see [`in_flight`]).
    pub in_flight: usize,
    /// The output thread keeps its last frame (paced, `--overload live`).
    pub keep_last: bool,
}

/// One pool to make: its frame size and how many frames it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolPlan {
    pub width: u32,
    pub height: u32,
    pub capacity: usize,
    /// What a paced run fills in the background: the capacity but for the frames sinks may
    /// keep. No framepipe sink keeps one; a sink that does keeps it from its first frame on, so
    /// it grows the pool during the warm-up anyway, and the others do not pay for it.
    pub fill: usize,
    /// Frames a paced show holds of this pool while no worker runs it: a frame done and waiting
    /// for its deadline (the master's pool: its frame; in a graph, each node's output), the
    /// output thread's last frame, what nodes keep (`extra`), one per leaky branch. What a
    /// host's shared pool is filled with per show ([`SharedPools`]).
    pub idle: usize,
}

impl PoolNeeds<'_> {
    /// The distinct pools and, for each node, the index of the pool its output comes from.
    pub fn plan(&self) -> (Vec<PoolPlan>, Vec<usize>) {
        let mut plans: Vec<PoolPlan> = Vec::new();
        let mut node_pool = Vec::with_capacity(self.nodes.len());
        for node in self.nodes {
            let info = node.info;
            let idx = match plans
                .iter()
                .position(|p| p.width == info.width && p.height == info.height)
            {
                Some(i) => i,
                None => {
                    plans.push(PoolPlan {
                        width: info.width,
                        height: info.height,
                        capacity: 0,
                        fill: 0,
                        idle: 0,
                    });
                    plans.len() - 1
                }
            };
            node_pool.push(idx);
        }
        for (p, plan) in plans.iter_mut().enumerate() {
            let node_pool = &node_pool;
            let of_pool = || (0..self.nodes.len()).filter(move |&i| node_pool[i] == p);
            let show_writers = of_pool()
                .filter(|&i| self.nodes[i].writes && !self.nodes[i].in_branch)
                .count();
            // Frames in flight: one frame each in a chain; in a graph, up to one per node.
            let per_frame = if self.chain {
                show_writers.min(1)
            } else {
                show_writers
            };
            let tokens = self.in_flight.saturating_mul(per_frame);
            let branch = of_pool()
                .filter(|&i| self.nodes[i].writes && self.nodes[i].in_branch)
                .count();
            // Running nodes writing into this pool: at most one per worker, per instance.
            let instances: usize = of_pool()
                .filter(|&i| self.nodes[i].writes)
                .map(|i| self.nodes[i].instances)
                .sum();
            let running = instances.min(self.threads).min(self.in_flight);
            let extra: usize = of_pool().map(|i| self.nodes[i].extra).sum();
            let sink_keeps: usize = of_pool().map(|i| self.nodes[i].sinks_fed).sum();
            let last = usize::from(self.keep_last && of_pool().any(|i| self.nodes[i].feeds_master));
            plan.fill = tokens
                .saturating_add(branch)
                .saturating_add(running)
                .saturating_add(extra)
                .saturating_add(last);
            plan.capacity = plan.fill.saturating_add(sink_keeps);
            let feeds_master = of_pool().any(|i| self.nodes[i].feeds_master);
            let waiting = if self.chain {
                usize::from(feeds_master)
            } else {
                show_writers
            };
            plan.idle = waiting
                .saturating_add(branch)
                .saturating_add(extra)
                .saturating_add(last)
                .min(plan.capacity);
        }
        (plans, node_pool)
    }

    /// Everything the run may hold (pools at full capacity, the instances' estimate), and its
    /// description for a refusal.
    pub fn total(&self, plans: &[PoolPlan]) -> (u64, String) {
        let pools = pool_bytes(plans);
        let instances: u64 = self
            .nodes
            .iter()
            .map(|n| (n.instances as u64).saturating_mul(frame_bytes(n.info.width, n.info.height)))
            .fold(0u64, u64::saturating_add);
        let n_instances: usize = self.nodes.iter().map(|n| n.instances).sum();
        let mut what = String::from("frame pools (");
        for (i, p) in plans.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(
                what,
                "{sep}{} frames of {}x{}",
                p.capacity, p.width, p.height
            );
        }
        let _ = write!(
            what,
            ": {}) and {n_instances} effect instance{} (estimated at one output frame each: {}) \
             for {} frames in flight on {} threads",
            human_bytes(pools),
            if n_instances == 1 { "" } else { "s" },
            human_bytes(instances),
            self.in_flight,
            self.threads
        );
        (pools.saturating_add(instances), what)
    }
}

/// The pools' bytes at full capacity.
pub(crate) fn pool_bytes(plans: &[PoolPlan]) -> u64 {
    plans.iter().fold(0u64, |sum, p| {
        sum.saturating_add((p.capacity as u64).saturating_mul(frame_bytes(p.width, p.height)))
    })
}

/// A run's pools: per node, the pool its output comes from; and each distinct pool once with
/// its plan (what [`ShowPools::fill_in_background`] fills, what a host's [`SharedPools`] counts).
#[derive(Debug, Default)]
pub(crate) struct ShowPools {
    pub per_node: Vec<FramePool>,
    pub distinct: Vec<(FramePool, PoolPlan)>,
    /// Their bytes at full capacity ([`pool_bytes`]).
    pub bytes: u64,
}

impl ShowPools {
    /// A paced run's pools are filled to their `fill` by a helper thread while the first frames
    /// flow (see the module documentation).
    pub fn fill_in_background(self) {
        fill_in_background(
            self.distinct
                .into_iter()
                .map(|(pool, plan)| (pool, plan.fill))
                .collect(),
        );
    }
}

/// Checks the run's frames against the memory budget, then makes one lazy pool per distinct
/// frame size: for each node, the pool its output comes from, and each pool once with its plan.
/// Nothing frame-sized is allocated before the checks pass, nor here: a paced run's pools are
/// filled by a helper thread once it starts ([`ShowPools::fill_in_background`]), or replaced by
/// a host's shared pools ([`SharedPools`]).
pub(crate) fn frame_pools(needs: &PoolNeeds<'_>) -> Result<ShowPools> {
    let limits = Limits::current();
    for node in needs.nodes {
        limits.check_frame(node.name, node.info.width, node.info.height)?;
    }
    let (plans, node_pool) = needs.plan();
    let (total, what) = needs.total(&plans);
    limits.check_total(&what, total)?;
    let shared = framepipe_core::shm::shared_pools_requested();
    let pools: Vec<FramePool> = plans
        .iter()
        .map(|p| {
            if shared {
                FramePool::lazy_shared(p.width, p.height, p.capacity)
            } else {
                Ok(FramePool::lazy(p.width, p.height, p.capacity))
            }
        })
        .collect::<Result<_>>()?;
    Ok(ShowPools {
        bytes: pool_bytes(&plans),
        per_node: node_pool.into_iter().map(|i| pools[i].clone()).collect(),
        distinct: pools.into_iter().zip(plans).collect(),
    })
}

/// Fills every pool to its target on a short-lived helper thread, one frame at a time, the
/// source's pool first; stops early when nobody else holds a pool any more (the run ended or was
/// never started). If the thread cannot be started, the pools still grow on demand.
fn fill_in_background(pools: Vec<(FramePool, usize)>) {
    let _ = std::thread::Builder::new()
        .name("fp-pool-fill".into())
        .spawn(move || {
            for (pool, target) in &pools {
                while pool.allocated() < *target {
                    // Only this thread's handles left: the pipeline is gone.
                    if pools.iter().all(|(p, _)| p.handles() == 1) {
                        return;
                    }
                    pool.fill(pool.allocated() + 1);
                }
            }
        });
}

/// What a show holds against `--max-memory` right now, as the budget counts it: every graph
/// version alive (its frame pools at full capacity) and every effect instance (one output frame
/// each, the estimate of [`PoolNeeds::total`]). A live edit builds its version while the running
/// one goes on, so two versions (three during a crossfade's hand-over) can be alive at once:
/// the edit's check adds what it would make to what is held here ([`MemoryBook::admit`]).
///
/// Counted by guards ([`Held`]): a version holds one for its pools, each instance one for
/// itself, so the figure follows the objects (an instance a live edit keeps moves with its
/// guard; a replaced version is uncounted when the edit thread drops it). Written only where
/// versions and instances are made and dropped (the edit thread, the run's start and end),
/// never on the frame path.
#[derive(Debug, Default)]
pub(crate) struct MemoryBook {
    held: std::sync::atomic::AtomicU64,
    peak: std::sync::atomic::AtomicU64,
    /// Edits refused because what they would hold with the running graph is over the budget.
    refused: std::sync::atomic::AtomicU64,
    /// The last refusal by [`admit`](Self::admit) would not have been one with only the
    /// running version held: it is up to the edit thread to wait or refuse (and count it).
    later: std::sync::atomic::AtomicBool,
}

/// A show's memory as the budget counts it (`--stats`: `memory`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// `--max-memory` in force, bytes.
    pub max_memory: u64,
    /// Counted now: the versions alive (pools at full capacity) and the instances' estimate.
    pub held: u64,
    /// The most counted at once so far (during a live edit: both versions).
    pub held_max: u64,
    /// Live edits refused because they would have held more than `max_memory` with the
    /// running graph.
    pub edits_refused: u64,
}

impl MemoryBook {
    /// Counted now, bytes.
    pub fn held(&self) -> u64 {
        self.held.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The figures for `--stats`.
    pub fn stats(&self) -> MemoryStats {
        use std::sync::atomic::Ordering::Relaxed;
        MemoryStats {
            max_memory: Limits::current().max_memory,
            held: self.held(),
            held_max: self.peak.load(Relaxed),
            edits_refused: self.refused.load(Relaxed),
        }
    }

    /// A guard counting `bytes` until it is dropped.
    pub(crate) fn hold(self: &Arc<Self>, bytes: u64) -> Held {
        use std::sync::atomic::Ordering::AcqRel;
        let now = self.held.fetch_add(bytes, AcqRel).saturating_add(bytes);
        self.peak.fetch_max(now, AcqRel);
        Held {
            book: Arc::clone(self),
            bytes,
        }
    }

    /// Whether `bytes` more would fit in the budget now.
    pub(crate) fn fits(&self, bytes: u64) -> bool {
        self.held().saturating_add(bytes) <= Limits::current().max_memory
    }

    /// Refuses an edit whose new version would make what is held over the budget: `new` bytes
    /// (the new version's pools at full capacity and its new instances) besides everything
    /// held now (`running`: the running version's share of it, named apart from a replaced
    /// version still being dropped). `during` says when both are held ("while the edit
    /// switches"), `hint` what to do besides raising the limit.
    pub(crate) fn admit(
        &self,
        running: u64,
        new: u64,
        new_name: &str,
        during: &str,
        hint: &str,
    ) -> Result<()> {
        let held = self.held();
        if held > running {
            // Would it fit once the replaced version is freed (its last frames out)? Then
            // the edit thread may wait for that rather than refuse.
            let later = running.saturating_add(new) <= Limits::current().max_memory;
            return self
                .over(
                    [
                        (
                            "the running graph and a version an earlier edit replaced, not \
                             freed yet",
                            held,
                        ),
                        (new_name, new),
                    ],
                    during,
                    &format!(
                        "{hint}, or send it again once that version is freed (when its last \
                         frames are out: a paused show holds them)"
                    ),
                )
                .inspect_err(|_| {
                    if later {
                        self.later.store(true, std::sync::atomic::Ordering::Relaxed);
                    } else {
                        self.count_refusal();
                    }
                });
        }
        self.refuse_over([("the running graph", held), (new_name, new)], during, hint)
    }

    /// Whether the last refusal would not have been one with only the running version held
    /// (then it was not counted: see [`count_refusal`](Self::count_refusal)); clears it.
    pub(crate) fn take_later(&self) -> bool {
        self.later.swap(false, std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts an edit refused for memory (in `--stats`).
    pub(crate) fn count_refusal(&self) {
        self.refused
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Refuses (counting the refusal) when the two parts, held at once `during`, would be over
    /// the budget: "the running graph (1.2 GiB) and the new one (1.1 GiB), held at once while
    /// the edit switches, would take 2.3 GiB, over the limit of 2.0 GiB; raise
    /// --max-memory`hint`".
    pub(crate) fn refuse_over(
        &self,
        parts: [(&str, u64); 2],
        during: &str,
        hint: &str,
    ) -> Result<()> {
        self.over(parts, during, hint)
            .inspect_err(|_| self.count_refusal())
    }

    /// [`refuse_over`](Self::refuse_over) without counting.
    fn over(&self, parts: [(&str, u64); 2], during: &str, hint: &str) -> Result<()> {
        let limit = Limits::current().max_memory;
        let total = parts[0].1.saturating_add(parts[1].1);
        if total <= limit {
            return Ok(());
        }
        let [(a, a_bytes), (b, b_bytes)] = parts;
        Err(framepipe_core::Error::TooLarge {
            what: format!(
                "{a} ({}) and {b} ({}), held at once {during},",
                human_bytes(a_bytes),
                human_bytes(b_bytes)
            ),
            asked: total,
            limit,
            hint: format!("raise --max-memory{hint}"),
        })
    }
}

/// Counts its bytes in a [`MemoryBook`] while it lives.
#[derive(Debug)]
pub(crate) struct Held {
    book: Arc<MemoryBook>,
    bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.book
            .held
            .fetch_sub(self.bytes, std::sync::atomic::Ordering::AcqRel);
    }
}

/// How often a host's pool filler looks whether a shared pool still has frames to spare.
const TOP_UP_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// The frame pools of a [`Host`](crate::Host)'s shows: **one pool per frame shape** (width,
/// height, and whether its frames are in shared memory: what makes two frames interchangeable;
/// the format and stride are always RGBA, `width * 4`) for every show, each show holding a
/// quota handle on it ([`FramePool::with_quota`]) whose quota is the capacity its own plan
/// gives it. The pool's capacity is the sum of the quotas (a show within its quota always gets a
/// frame, one at its quota is refused as its own pool's end would refuse it), but frames are
/// made only for what the shows hold *together*: a helper thread (`fp-pool-fill`) fills each
/// pool, as the run starts, with what the paced shows hold between their frames (each show's
/// `idle` frames: the frame waiting for its deadline, the output's last frame, what nodes keep)
/// plus two frames per worker (a running stage's input and output), then keeps at least one
/// frame per worker free every [`TOP_UP_EVERY`] until the host ends.
///
/// Shows are enrolled when they are added to the host (their plans only) and bound when the
/// host starts: the pools are made then, at their final capacity, and each show's pools are
/// replaced by handles before its first frame. A live edit of a show in a host makes the new
/// version's pools of its own, as a show alone does.
///
/// Cloning it is cheap: a clone sees the same pools ([`stats`](Self::stats)).
#[derive(Debug, Clone, Default)]
pub struct SharedPools {
    inner: Arc<Mutex<Registry>>,
}

#[derive(Debug, Default)]
struct Registry {
    shapes: Vec<Shape>,
    /// The pools are made (the host started): no more shows may be enrolled.
    open: bool,
}

#[derive(Debug)]
struct Shape {
    width: u32,
    height: u32,
    shared: bool,
    /// Shows enrolled with a pool of this shape.
    shows: usize,
    /// The sum of their quotas: the pool's capacity.
    quota: usize,
    /// What the filler makes ahead of need.
    target: usize,
    pool: Option<FramePool>,
}

/// One shared pool of a host, as [`SharedPools::stats`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedPoolStats {
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// Its frames are in shared memory (an isolated plugin runs in the process).
    pub shared_memory: bool,
    /// Shows holding a quota handle on it.
    pub shows: usize,
    /// The sum of their quotas: the most frames it may make.
    pub capacity: usize,
    /// What its filler makes ahead of need (see [`SharedPools`]).
    pub target: usize,
    /// Frames made so far.
    pub allocated: usize,
    /// Frames the shows hold now.
    pub in_use: usize,
    /// The most frames the shows held at once so far.
    pub peak: usize,
    /// Frames made by a show's acquire (no free frame) rather than by the filler.
    pub grown_on_acquire: usize,
}

impl SharedPools {
    /// No pools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One line per pool, in the order their shapes were first enrolled.
    pub fn stats(&self) -> Vec<SharedPoolStats> {
        let reg = self.lock();
        reg.shapes
            .iter()
            .map(|s| {
                let (allocated, in_use, peak, grown) = s.pool.as_ref().map_or((0, 0, 0, 0), |p| {
                    let sh = p.sharing();
                    (p.allocated(), sh.out, sh.peak, sh.grown_on_acquire)
                });
                SharedPoolStats {
                    width: s.width,
                    height: s.height,
                    shared_memory: s.shared,
                    shows: s.shows,
                    capacity: s.quota,
                    target: s.target,
                    allocated,
                    in_use,
                    peak,
                    grown_on_acquire: grown,
                }
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a show's pools in (at `Host::add`): `paced` shows add their plans' `idle` frames
    /// to what is made ahead of need. `false` once the pools are made (the host started).
    pub(crate) fn enroll(&self, pools: &[(FramePool, PoolPlan)], paced: bool) -> bool {
        let mut reg = self.lock();
        if reg.open {
            return false;
        }
        for (pool, plan) in pools {
            let (w, h, shared) = (pool.width(), pool.height(), pool.is_shared());
            let i = match reg
                .shapes
                .iter()
                .position(|s| (s.width, s.height, s.shared) == (w, h, shared))
            {
                Some(i) => i,
                None => {
                    reg.shapes.push(Shape {
                        width: w,
                        height: h,
                        shared,
                        shows: 0,
                        quota: 0,
                        target: 0,
                        pool: None,
                    });
                    reg.shapes.len() - 1
                }
            };
            let shape = &mut reg.shapes[i];
            shape.shows += 1;
            shape.quota = shape.quota.saturating_add(pool.capacity());
            if paced {
                shape.target = shape.target.saturating_add(plan.idle);
            }
        }
        true
    }

    /// A show's handles, one per pool it enrolled (same order), each with that pool's capacity
    /// as its quota. The first call makes every pool (at the sum of the quotas enrolled) and
    /// starts the filler; `threads`: the host's workers. `None` for a pool that was not
    /// enrolled or could not be made (the show keeps its own).
    pub(crate) fn bind(&self, own: &[FramePool], threads: usize) -> Vec<Option<FramePool>> {
        let mut reg = self.lock();
        let mut fill = Vec::new();
        if !reg.open {
            reg.open = true;
            for shape in &mut reg.shapes {
                let made = if shape.shared {
                    FramePool::lazy_shared(shape.width, shape.height, shape.quota).ok()
                } else {
                    Some(FramePool::lazy(shape.width, shape.height, shape.quota))
                };
                if let Some(pool) = &made {
                    shape.target = shape.target.saturating_add(2 * threads).min(shape.quota);
                    fill.push((pool.clone(), shape.target));
                }
                shape.pool = made;
            }
        }
        let handles = own
            .iter()
            .map(|p| {
                let key = (p.width(), p.height(), p.is_shared());
                reg.shapes
                    .iter()
                    .find(|s| (s.width, s.height, s.shared) == key)
                    .and_then(|s| s.pool.as_ref())
                    .map(|pool| pool.with_quota(p.capacity()))
            })
            .collect();
        // Started once this show holds its handles (it stops when no show holds any).
        keep_filled(fill, threads);
        handles
    }
}

/// A host's filler (see [`SharedPools`]): fills each pool to its target, then keeps `spare`
/// frames free in each (up to its capacity), looking every [`TOP_UP_EVERY`], until only this
/// thread and the registry hold the pools (the shows are gone).
fn keep_filled(pools: Vec<(FramePool, usize)>, spare: usize) {
    if pools.is_empty() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("fp-pool-fill".into())
        .spawn(move || {
            let gone = |pools: &[(FramePool, usize)]| pools.iter().all(|(p, _)| p.handles() <= 2);
            for (pool, target) in &pools {
                while pool.allocated() < *target {
                    if gone(&pools) {
                        return;
                    }
                    pool.fill(pool.allocated() + 1);
                }
            }
            loop {
                std::thread::sleep(TOP_UP_EVERY);
                if gone(&pools) {
                    return;
                }
                for (pool, _) in &pools {
                    while pool.available() < spare && pool.allocated() < pool.pool_capacity() {
                        pool.fill(pool.allocated() + 1);
                    }
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use framepipe_core::Rational;

    fn info(width: u32, height: u32) -> VideoInfo {
        VideoInfo {
            width,
            height,
            rate: Rational::new(30, 1),
        }
    }

    /// A chain: a source, then effects with these instance counts, then a sink.
    fn chain<'a>(infos: &[VideoInfo], instances: &[usize]) -> Vec<PoolNode<'a>> {
        let n = infos.len();
        let mut nodes: Vec<PoolNode<'a>> = (0..n)
            .map(|i| PoolNode {
                info: infos[i],
                name: "stage",
                writes: true,
                instances: if i == 0 { 0 } else { instances[i - 1] },
                in_branch: false,
                sinks_fed: usize::from(i == n - 1),
                feeds_master: i == n - 1,
                extra: 0,
            })
            .collect();
        nodes.push(PoolNode {
            info: infos[n - 1],
            name: "sink",
            writes: false,
            instances: 0,
            in_branch: false,
            sinks_fed: 0,
            feeds_master: false,
            extra: 0,
        });
        nodes
    }

    #[test]
    fn the_memory_book_counts_what_is_held_until_dropped_and_names_both_parts() {
        let limit = Limits::current().max_memory;
        let book = Arc::new(MemoryBook::default());
        let running = book.hold(limit / 2);
        let instance = book.hold(limit / 8);
        assert_eq!(book.held(), limit / 2 + limit / 8);
        // The new version would add half the budget: over it beside what is held.
        let e = book
            .admit(
                limit / 2 + limit / 8,
                limit / 2,
                "the new one",
                "while the edit switches",
                "",
            )
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("the running graph ("), "{e}");
        assert!(e.contains("and the new one ("), "{e}");
        assert!(
            e.contains("held at once while the edit switches, would take"),
            "{e}"
        );
        assert!(e.ends_with("raise --max-memory"), "{e}");
        // A replaced version still held is named apart from the running one.
        let e = book
            .admit(
                limit / 2,
                limit / 2,
                "the new one",
                "while the edit switches",
                "",
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("an earlier edit replaced, not freed yet"), "{e}");
        assert!(e.ends_with("a paused show holds them)"), "{e}");
        // It would fit once the replaced version is freed: left to the edit thread.
        assert!(book.take_later() && !book.take_later());
        assert!(book.fits(limit / 4) && !book.fits(limit / 2));
        drop(running);
        assert_eq!(book.held(), limit / 8);
        assert!(book
            .admit(
                limit / 8,
                limit / 2,
                "the new one",
                "while the edit switches",
                ""
            )
            .is_ok());
        let stats = book.stats();
        assert_eq!(stats.held_max, limit / 2 + limit / 8);
        assert_eq!(stats.edits_refused, 1);
        drop(instance);
        assert_eq!(book.held(), 0);
    }

    #[test]
    fn a_one_frame_run_gets_pools_for_one_frame() {
        let infos = [info(64, 64), info(64, 64)];
        let f = in_flight(2, 0, &infos, Some(1));
        assert_eq!(f, 1);
        let nodes = chain(&infos, &[2]);
        let needs = PoolNeeds {
            nodes: &nodes,
            chain: true,
            threads: 2,
            in_flight: f,
            keep_last: false,
        };
        let (plans, node_pool) = needs.plan();
        // The source's frame, glow's output while it runs, a frame the sink may keep.
        assert_eq!(plans[0].capacity, 3);
        assert_eq!(plans[0].fill, 2, "a paced run fills what the frame uses");
        assert_eq!(node_pool, vec![0, 0, 0]);
    }

    #[test]
    fn the_default_in_flight_shrinks_for_large_frames_but_keeps_every_worker_busy() {
        let hd = [info(1280, 720)];
        let uhd = [info(3840, 2160)];
        let huge = [info(16384, 16384)];
        assert_eq!(
            in_flight(2, 0, &hd, None),
            6,
            "small frames: 2 * threads + 2"
        );
        assert_eq!(
            in_flight(2, 0, &uhd, None),
            3,
            "4K: 96 MiB of frames, threads + 1"
        );
        assert_eq!(in_flight(8, 0, &huge, None), 9, "never below threads + 1");
        assert_eq!(in_flight(2, 40, &uhd, None), 40, "asked for: as asked");
        assert_eq!(
            in_flight(2, 40, &uhd, Some(5)),
            5,
            "no more than the frames"
        );
        assert_eq!(in_flight(2, 0, &hd, Some(0)), 1);
    }

    #[test]
    fn each_pool_counts_only_the_stages_writing_into_it() {
        // 4K source -> scale to 720p (parallel) -> serial effect at 720p -> sink, paced, live.
        let infos = [info(3840, 2160), info(1280, 720), info(1280, 720)];
        let nodes = chain(&infos, &[4, 1]);
        let needs = PoolNeeds {
            nodes: &nodes,
            chain: true,
            threads: 4,
            in_flight: 10,
            keep_last: true,
        };
        let (plans, node_pool) = needs.plan();
        assert_eq!(node_pool, vec![0, 1, 1, 1]);
        // 4K: only tokens (the source writes into it, no effect does).
        assert_eq!(plans[0].capacity, 10);
        // 720p: tokens + 4 parallel scale instances and 1 serial instance, at most 4 running,
        // + the sink's frame + the output thread's last frame.
        assert_eq!(plans[1].capacity, 10 + 4 + 2);
        assert_eq!((plans[0].fill, plans[1].fill), (10, 10 + 4 + 1));
        let (total, what) = needs.total(&plans);
        let uhd = 3840 * 2160 * 4;
        let hd = 1280 * 720 * 4;
        assert_eq!(total, 10 * uhd + 16 * hd + (4 + 1) * hd);
        assert!(
            what.contains("10 frames of 3840x2160, 16 frames of 1280x720"),
            "{what}"
        );
        assert!(what.contains("5 effect instances"), "{what}");
    }

    #[test]
    fn a_graph_counts_every_node_of_a_frame_and_a_branch_once() {
        // Issue #8: two sources -> a mixer -> a sink, and a leaky monitor branch at 320x180.
        let hd = info(1280, 720);
        let small = info(320, 180);
        let node = |info, writes, instances, in_branch, sinks_fed| PoolNode {
            info,
            name: "n",
            writes,
            instances,
            in_branch,
            sinks_fed,
            feeds_master: sinks_fed > 0 && !in_branch,
            extra: 0,
        };
        let nodes = [
            node(hd, true, 0, false, 0),    // source a
            node(hd, true, 0, false, 0),    // source b
            node(hd, true, 2, false, 1),    // mix (parallel), feeds the master
            node(small, true, 2, true, 1),  // monitor, leaky, feeds a preview sink
            node(hd, false, 0, false, 0),   // master sink
            node(small, false, 0, true, 0), // preview sink
        ];
        let needs = PoolNeeds {
            nodes: &nodes,
            chain: false,
            threads: 2,
            in_flight: 6,
            keep_last: false,
        };
        let (plans, _) = needs.plan();
        // 720p: three nodes' outputs per frame in flight, two mixers running, the sink's frame.
        assert_eq!(plans[0].capacity, 6 * 3 + 2 + 1);
        // The branch holds one frame at a time: its output, one running, the preview's frame.
        assert_eq!(plans[1].capacity, 1 + 2 + 1);
    }

    #[test]
    fn pools_over_the_budget_are_refused_before_anything_is_allocated() {
        // A huge in-flight is refused by arithmetic alone: were the pools made first, this test
        // would try to allocate a billion slots.
        let infos = [info(3840, 2160), info(3840, 2160)];
        let nodes = chain(&infos, &[2]);
        let needs = PoolNeeds {
            nodes: &nodes,
            chain: true,
            threads: 2,
            in_flight: 1_000_000_000,
            keep_last: false,
        };
        let e = frame_pools(&needs).unwrap_err().to_string();
        assert!(e.contains("1000000000 frames in flight"), "{e}");
        assert!(e.contains("over the limit of"), "{e}");
        assert!(e.contains("--max-memory"), "{e}");
    }

    #[test]
    fn pools_are_in_shared_memory_once_asked_for() {
        // Process-wide and sticky: the other tests of this binary may then get shared pools
        // too, which behave the same.
        let infos = [info(32, 32), info(32, 32)];
        let nodes = chain(&infos, &[1]);
        let needs = PoolNeeds {
            nodes: &nodes,
            chain: true,
            threads: 2,
            in_flight: 2,
            keep_last: false,
        };
        framepipe_core::shm::request_shared_pools();
        let pools = frame_pools(&needs).unwrap().per_node;
        assert!(pools[0].is_shared());
        let f = pools[0].acquire().unwrap();
        assert!(f.shared().is_some());
        assert_eq!(pools[0].allocated(), 1, "still lazy");
    }

    #[test]
    fn lazy_pools_allocate_nothing_until_used_and_paced_ones_fill_up() {
        let infos = [info(32, 32), info(32, 32)];
        let nodes = chain(&infos, &[2]);
        let needs = PoolNeeds {
            nodes: &nodes,
            chain: true,
            threads: 2,
            in_flight: 4,
            keep_last: false,
        };
        let pools = frame_pools(&needs).unwrap().per_node;
        assert!(pools[0].same_pool(&pools[1]));
        assert_eq!((pools[0].capacity(), pools[0].allocated()), (4 + 2 + 1, 0));
        // A paced run's, once it starts.
        let planned = frame_pools(&needs).unwrap();
        let pools = planned.per_node.clone();
        planned.fill_in_background();
        let t0 = std::time::Instant::now();
        while pools[0].allocated() < 6 {
            assert!(
                t0.elapsed().as_secs() < 10,
                "the helper never filled the pool"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // 4 in flight + 2 being written; the seventh frame (for a sink that keeps one) is made
        // only if a sink asks for it.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!((pools[0].allocated(), pools[0].available()), (6, 6));
    }
}
