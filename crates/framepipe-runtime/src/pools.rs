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
//! Several shows in one process share their pools: one per frame shape, each show (and each
//! version a live edit makes of it) holding a quota handle with the capacity computed above as
//! its quota; one filler makes the frames ahead of need by what the shows hold together and
//! their latency budgets, and drops the pools no version holds any more once their frames are
//! back ([`SharedPools`]).
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
    /// Frames of this pool that each frame a paced show has begun ahead holds once it is done
    /// (the chain's master pool: its frame; in a graph, each node's output), `idle` counting
    /// the first ([`SharedPools`] adds the others by the show's latency budget).
    pub ahead: usize,
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
                        ahead: 0,
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
            plan.ahead = waiting;
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

/// How often a host's pool filler looks at its pools (and at the shows' latency budgets).
const TOP_UP_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// Frames a paced show in a host begins this much before its latency budget says: the host's
/// clock rounds a show's "may begin" wake-ups up to its grid and lets its frames begin that
/// much earlier (`set_begin_slack` in `host.rs`).
const HOST_BEGIN_SLACK_NS: u64 = crate::host::GRID_NS as u64;

/// How long a worker may be held up (its CPU taken away, other shows' frames before this
/// one's) without the filler having seen it: the default latency budget then grows by 5/4 of
/// it, and so do the frames a show begins ahead. A show whose period is short against it (1000
/// fps) is filled for every frame it may have in flight; at 25 fps it changes nothing (10 ms is
/// under a period). A longer delay that makes a worker's acquire grow the pool raises the
/// frames kept free by as many (the pool's own evidence, `grown_on_acquire`).
const WORKER_DELAY_NS: u64 = 10_000_000;

/// A shared pool is made with room for this many times the quotas enrolled when the host
/// starts, so that a live edit can hold the new version's quota next to the old one's until the
/// old version is dropped (slots without a buffer cost a few words each; a shared-memory pool's
/// memfd is sparse). An edit that finds no room gets a new pool of that shape.
const EDIT_ROOM: usize = 2;

/// The frame pools of a [`Host`](crate::Host)'s shows: **one pool per frame shape** (width,
/// height, and whether its frames are in shared memory: what makes two frames interchangeable;
/// the format and stride are always RGBA, `width * 4`) for every show, each show holding a
/// quota handle on it ([`FramePool::with_quota`]) whose quota is the capacity its own plan
/// gives it. The quotas in force never add up to more than the pool's frames (a show within its
/// quota always gets a frame, one at its quota is refused as its own pool's end would refuse
/// it), but frames are made only for what the shows hold *together*.
///
/// **The filler.** A helper thread (`fp-pool-fill`) looks at every pool every [`TOP_UP_EVERY`]
/// until the last show is gone, and makes frames (on its own thread, never on a worker or an
/// output thread) up to a target: per paced show, what it holds between frames (its plan's
/// `idle`: the frame waiting for its deadline, the output's last frame, what nodes keep) plus
/// the frames it begins ahead beyond that one,
/// `min(in_flight, 1 + (budget + 12.5 ms + 1 ms) / period) - 1` (the latency budget now, read
/// lock-free from the show's counters, `latency_budget_us`; 12.5 ms is what a worker held up
/// for [`WORKER_DELAY_NS`] adds to the default budget; 1 ms is how much earlier a host lets a
/// frame begin), plus two frames per worker (a running stage's input and output); then at least
/// one frame per worker free, and one more for every frame a worker's acquire had to make. At
/// 25 fps the frames ahead are the one waiting frame (a budget under 26.5 ms); at 1000 fps,
/// every frame in flight.
///
/// Why the budget and not the pool's own evidence (its peak, or `grown_on_acquire`): the
/// evidence comes only once a worker has already needed the frame, while the budget comes
/// first: a show publishes it when its frame 0 is ready, half a second before its first
/// deadline lets the next frames begin, so the filler has made them before they are asked
/// for. It also costs one atomic load per show per look (400 shows: 400 loads every 20 ms),
/// and it falls again when the budget does (frames made stay made; the target only says what
/// to make next).
///
/// **Shows and versions.** Shows are enrolled when they are added to the host (their plans
/// only) and bound when the host starts: the pools are made then and each show's pools are
/// replaced by quota handles before its first frame. A live edit of a show in a host gets its
/// new version's handles here too, on the edit thread: a quota handle on the pool of each shape
/// the new version uses (the same pool when the shape is kept; a new pool, made and filled on
/// the edit thread, for a new shape or when the pool has no room left), once every check of the
/// edit has passed. What a version holds (its quota, its part of the filler's target, the
/// memory its pools count in its show's book) is given back once the version is dropped (a
/// replaced one: on the edit thread, once its frames are back) and every frame taken through
/// its handles is back, at the registry's next sweep (`Registry::sweep`: the filler's look,
/// an edit joining); a pool no version holds any more is dropped then, once no frame of it is
/// out, its buffers freed on the filler's or the edit thread. Dropping a version takes no lock
/// (`PoolLease`).
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
    /// The host's workers (set when it starts).
    threads: usize,
    /// The filler thread runs.
    filling: bool,
    next_id: u64,
    next_show: u64,
}

/// One pool of a shape (a shape may have several: see [`EDIT_ROOM`]).
#[derive(Debug)]
struct Shape {
    width: u32,
    height: u32,
    shared: bool,
    /// The versions holding a quota handle on it (before the host starts: enrolled).
    members: Vec<Member>,
    /// The shows that held one so far (a show's live edits count once).
    seen: Vec<u64>,
    /// The sum of their quotas: the most frames they may hold together.
    quota: usize,
    /// The most the quotas ever added up to (what `stats` calls its capacity).
    quota_peak: usize,
    /// The most the filler aimed at so far (its frames are made, never freed).
    target: usize,
    /// Frames the filler keeps free beyond one per worker: what workers' acquires had to make
    /// themselves (no free frame) since the host started, as the filler saw.
    extra_free: usize,
    /// `grown_on_acquire` at the filler's last look.
    grown_seen: usize,
    pool: Option<FramePool>,
    /// The pool was dropped (no version held a quota handle on it any more and every frame of
    /// it was back: see [`Registry::sweep`]); its last figures.
    retired: Option<(usize, usize, usize)>,
}

impl Shape {
    fn key(&self) -> (u32, u32, bool) {
        (self.width, self.height, self.shared)
    }

    /// Whether a new quota handle of `quota` frames fits: a handle left (one per frame of the
    /// pool) and frames for every quota in force.
    fn room_for(&self, quota: usize) -> bool {
        self.pool.as_ref().is_some_and(|p| {
            p.sharing().handles < p.pool_capacity()
                && self.quota.saturating_add(quota) <= p.pool_capacity()
        })
    }

    fn join(&mut self, m: Member, show: u64) {
        if !self.seen.contains(&show) {
            self.seen.push(show);
        }
        self.quota = self.quota.saturating_add(m.quota);
        self.quota_peak = self.quota_peak.max(self.quota);
        self.members.push(m);
    }

    /// What the filler makes ahead of need now (see [`SharedPools`]): at most the quotas.
    fn fill_target(&self, threads: usize) -> usize {
        self.members
            .iter()
            .map(Member::holds)
            .fold(0usize, usize::saturating_add)
            .saturating_add(2 * threads)
            .min(self.quota)
    }
}

/// A version's quota handle on a shared pool, as the registry counts it.
#[derive(Debug)]
struct Member {
    id: u64,
    quota: usize,
    /// A clone of the version's quota handle (`None` while enrolled: the pool is not made
    /// yet): what it holds is read before its quota is given back.
    handle: Option<FramePool>,
    /// Its lease's life: once the lease is dropped, the member leaves at the registry's next
    /// sweep after every frame of its handle is back.
    life: Arc<LeaseLife>,
    /// Frames of this pool the show holds between frames (`PoolPlan::idle`).
    idle: usize,
    /// Frames of this pool each frame begun ahead holds (`PoolPlan::ahead`).
    ahead: usize,
    /// A paced show's figures (the frames it begins ahead); `None`: unpaced, it grows the pool
    /// on demand only.
    pace: Option<Pace>,
}

impl Member {
    /// What it may hold at once (see [`SharedPools`]): its idle frames, and the frames it
    /// begins ahead by its latency budget now (read lock-free) grown by a worker's delay; 0
    /// when unpaced.
    fn holds(&self) -> usize {
        let Some(p) = &self.pace else { return 0 };
        let budget_ns = p
            .counters
            .latency_budget_us
            .load(std::sync::atomic::Ordering::Relaxed)
            .saturating_mul(1000)
            .saturating_add(WORKER_DELAY_NS.saturating_mul(5) / 4);
        let begun = budget_ns
            .saturating_add(HOST_BEGIN_SLACK_NS)
            .checked_div(p.period_ns)
            .unwrap_or(0)
            .saturating_add(1);
        let begun = usize::try_from(begun)
            .unwrap_or(usize::MAX)
            .min(p.in_flight);
        // The one waiting frame is in `idle`.
        self.idle
            .saturating_add(self.ahead.saturating_mul(begun.saturating_sub(1)))
            .min(self.quota)
    }
}

/// What the filler needs of a paced show: its latency budget (read lock-free), its period and
/// the most frames it has in flight.
#[derive(Debug, Clone)]
pub(crate) struct Pace {
    pub counters: Arc<crate::stats::Counters>,
    pub period_ns: u64,
    pub in_flight: usize,
}

/// A version's place in a host's [`SharedPools`]: its members (one per pool it uses), counted
/// until it is dropped and every frame taken through its handles is back (then the quotas, the
/// filler's target and the memory its version counted are given back, at the registry's next
/// sweep: [`Registry::sweep`]).
///
/// Dropping it takes no lock and frees no frame buffer (one atomic store, its small list of
/// member ids, and two `Arc` counts: at a host's teardown the last of those may free the
/// registry on whichever thread drops it): whoever drops the version last, even a worker or an
/// output thread, does not touch the registry's lock, and a frame of the version still out
/// keeps its quota counted (a show within its quota always gets a frame).
#[derive(Debug)]
pub(crate) struct PoolLease {
    reg: SharedPools,
    /// The show (its versions' leases share it).
    show: u64,
    /// (shape, member id) per pool of the version, in its order.
    ids: Vec<(usize, u64)>,
    life: Arc<LeaseLife>,
}

/// What a [`PoolLease`]'s members share with it: whether it was dropped, and the memory its
/// version counted for its pools ([`Held`]), kept counted until its last member leaves.
#[derive(Debug, Default)]
struct LeaseLife {
    dropped: std::sync::atomic::AtomicBool,
    held: std::sync::OnceLock<Held>,
}

impl PoolLease {
    /// The host's pools this version's are on.
    pub(crate) fn pools(&self) -> &SharedPools {
        &self.reg
    }

    /// Keeps `held` (what the version's pools count in its show's memory book) counted until
    /// the lease's last member has left, its frames back, rather than until the version is
    /// dropped.
    pub(crate) fn count(&self, held: Held) {
        let _ = self.life.held.set(held);
    }
}

impl Drop for PoolLease {
    fn drop(&mut self) {
        self.life
            .dropped
            .store(true, std::sync::atomic::Ordering::Release);
    }
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
    /// Shows that held a quota handle on it so far (before the host starts: enrolled; a show
    /// counts once, whatever its live edits).
    pub shows: usize,
    /// Quota handles on it now: one per running show, two for a show between a live edit's
    /// switch and the drop of the version it replaced (once that version is dropped and every
    /// frame of it is back, at the registry's next sweep: within 20 ms).
    pub holders: usize,
    /// The most frames the quotas in force ever added up to (the shows' own pools' capacity).
    pub capacity: usize,
    /// The sum of the quotas in force now (0 once every show is gone).
    pub quota: usize,
    /// The most its filler aimed at so far (see [`SharedPools`]).
    pub target: usize,
    /// Frames made so far.
    pub allocated: usize,
    /// Frames the shows hold now.
    pub in_use: usize,
    /// The most frames the shows held at once so far.
    pub peak: usize,
    /// Frames made by a show's acquire (no free frame) rather than by the filler.
    pub grown_on_acquire: usize,
    /// The pool was dropped, its frames freed: no version held a quota handle on it any more
    /// (an edit changed the frame size, its shows ended) and every frame of it was back. Its
    /// figures are its last.
    pub dropped: bool,
}

impl SharedPools {
    /// No pools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One line per pool, in the order they were made (first enrolled).
    pub fn stats(&self) -> Vec<SharedPoolStats> {
        let reg = self.lock();
        reg.shapes
            .iter()
            .map(|s| {
                let (allocated, in_use, peak, grown) = match (&s.pool, s.retired) {
                    (Some(p), _) => {
                        let sh = p.sharing();
                        (p.allocated(), sh.out, sh.peak, sh.grown_on_acquire)
                    }
                    (None, Some((a, peak, grown))) => (a, 0, peak, grown),
                    (None, None) => (0, 0, 0, 0),
                };
                SharedPoolStats {
                    width: s.width,
                    height: s.height,
                    shared_memory: s.shared,
                    shows: s.seen.len(),
                    holders: s.members.len(),
                    capacity: s.quota_peak,
                    quota: s.quota,
                    target: s.target,
                    allocated,
                    in_use,
                    peak,
                    grown_on_acquire: grown,
                    dropped: s.pool.is_none() && s.retired.is_some(),
                }
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a show's pools in (at `Host::add`), one member per pool; `None` once the pools
    /// are made (the host started). Dropping the lease unbound counts them out again.
    pub(crate) fn enroll(
        &self,
        pools: &[(FramePool, PoolPlan)],
        pace: Option<Pace>,
    ) -> Option<PoolLease> {
        let mut reg = self.lock();
        if reg.open {
            return None;
        }
        let mut ids = Vec::with_capacity(pools.len());
        let show = reg.next_show;
        reg.next_show += 1;
        let life = Arc::new(LeaseLife::default());
        for (pool, plan) in pools {
            let key = (pool.width(), pool.height(), pool.is_shared());
            let s = match reg.shapes.iter().position(|s| s.key() == key) {
                Some(s) => s,
                None => {
                    reg.shapes.push(new_shape(key));
                    reg.shapes.len() - 1
                }
            };
            let id = reg.next_id;
            reg.next_id += 1;
            reg.shapes[s].join(
                Member {
                    id,
                    quota: pool.capacity(),
                    handle: None,
                    life: Arc::clone(&life),
                    idle: plan.idle,
                    ahead: plan.ahead,
                    pace: pace.clone(),
                },
                show,
            );
            ids.push((s, id));
        }
        Some(PoolLease {
            reg: self.clone(),
            show,
            ids,
            life,
        })
    }

    /// An enrolled show's handles, one per pool it enrolled (same order as `own`), each with
    /// that pool's capacity as its quota. The first call makes every pool (room for
    /// [`EDIT_ROOM`] times the quotas enrolled) and starts the filler; `threads`: the host's
    /// workers. `None` for a pool that could not be made (the show keeps its own).
    pub(crate) fn bind(
        &self,
        lease: &PoolLease,
        own: &[FramePool],
        threads: usize,
    ) -> Vec<Option<FramePool>> {
        let mut reg = self.lock();
        let mut first = Vec::new();
        if !reg.open {
            // Shows dropped since they were enrolled are not counted.
            reg.sweep(&mut Vec::new());
            reg.open = true;
            reg.threads = threads;
            for shape in &mut reg.shapes {
                let slots = shape.quota.saturating_mul(EDIT_ROOM).max(1);
                shape.pool = make_pool(shape.key(), slots);
            }
            // What the shows hold first is made now, before any show starts (below, outside
            // the lock); the filler goes on from there.
            reg.look(&mut first);
        }
        let handles = own
            .iter()
            .zip(&lease.ids)
            .map(|(p, &(s, id))| {
                let shape = &mut reg.shapes[s];
                let handle = shape
                    .pool
                    .as_ref()
                    .map(|pool| pool.with_quota(p.capacity()));
                if let Some(m) = shape.members.iter_mut().find(|m| m.id == id) {
                    m.handle.clone_from(&handle);
                }
                handle
            })
            .collect();
        drop(reg);
        fill_all(&first);
        self.keep_filled(&mut self.lock());
        handles
    }

    /// A live edit's new version (on the edit thread): a quota handle per pool of `own` (each
    /// with its plan; the pool's capacity as the quota) on the host's pool of that shape, or
    /// on a new one when the shape is new or its pools have no room left; a new pool is filled
    /// here (to its plan's `fill`, as a show alone fills an edit's pools), and an existing one
    /// gets the frames the version will hold ahead of its first frames. `None` for a pool
    /// that could not be made (the version keeps its own).
    pub(crate) fn join(
        &self,
        show: u64,
        own: &[(FramePool, PoolPlan)],
        pace: Option<Pace>,
    ) -> (Vec<Option<FramePool>>, PoolLease) {
        let mut gone = Vec::new();
        let mut reg = self.lock();
        // Quotas given back and pools dropped since the filler's last look count now.
        reg.sweep(&mut gone);
        let mut handles = Vec::with_capacity(own.len());
        let mut ids = Vec::with_capacity(own.len());
        let mut fill = Vec::new();
        let life = Arc::new(LeaseLife::default());
        for (own_pool, plan) in own {
            let key = (own_pool.width(), own_pool.height(), own_pool.is_shared());
            let quota = own_pool.capacity();
            let found = reg
                .shapes
                .iter()
                .position(|s| s.key() == key && s.room_for(quota));
            let (s, new) = match found {
                Some(s) => (s, false),
                None => {
                    let mut shape = new_shape(key);
                    shape.pool = make_pool(key, quota.saturating_mul(EDIT_ROOM));
                    if shape.pool.is_none() {
                        handles.push(None);
                        continue;
                    }
                    reg.shapes.push(shape);
                    (reg.shapes.len() - 1, true)
                }
            };
            let id = reg.next_id;
            reg.next_id += 1;
            let pool = reg.shapes[s]
                .pool
                .clone()
                .expect("a shape with room has its pool");
            let handle = pool.with_quota(quota);
            let member = Member {
                id,
                quota,
                handle: Some(handle.clone()),
                life: Arc::clone(&life),
                idle: plan.idle,
                ahead: plan.ahead,
                pace: pace.clone(),
            };
            let ahead_of_need = if new { plan.fill } else { member.holds() };
            let shape = &mut reg.shapes[s];
            shape.join(member, show);
            let cap = shape.quota;
            fill.push((pool.clone(), ahead_of_need, cap));
            handles.push(Some(handle));
            ids.push((s, id));
        }
        self.keep_filled(&mut reg);
        drop(reg);
        // Dropped here, on the edit thread, outside the lock (a pool nobody holds any more).
        drop(gone);
        // Made here, on the edit thread, outside the lock: enough free frames for what the
        // new version holds ahead of need (never more than the quotas in force).
        for (pool, free, cap) in fill {
            let out = pool.allocated().saturating_sub(pool.available());
            pool.fill(out.saturating_add(free).min(cap));
        }
        let lease = PoolLease {
            reg: self.clone(),
            show,
            ids,
            life,
        };
        (handles, lease)
    }

    /// Starts the filler unless it runs (see [`SharedPools`]); it ends when no version holds a
    /// handle any more and every pool is dropped.
    fn keep_filled(&self, reg: &mut Registry) {
        if reg.filling {
            return;
        }
        let pools = self.clone();
        let started = std::thread::Builder::new()
            .name("fp-pool-fill".into())
            .spawn(move || pools.filler());
        reg.filling = started.is_ok();
    }

    /// The filler's loop: every [`TOP_UP_EVERY`], the registry's sweep (the members of dropped
    /// versions whose frames are back leave; pools nobody holds any more are dropped, here),
    /// then each pool to its target, then enough frames free (within the quotas in force).
    /// Nothing is allocated per look once its lists have grown to the number of pools.
    fn filler(&self) {
        let mut work = Vec::new();
        let mut gone = Vec::new();
        loop {
            work.clear();
            {
                let mut reg = self.lock();
                reg.sweep(&mut gone);
                if reg
                    .shapes
                    .iter()
                    .all(|s| s.members.is_empty() && s.pool.is_none())
                {
                    reg.filling = false;
                    drop(reg);
                    gone.clear();
                    return;
                }
                reg.look(&mut work);
            }
            // Their buffers are freed here, outside the lock.
            gone.clear();
            fill_all(&work);
            std::thread::sleep(TOP_UP_EVERY);
        }
    }
}

/// What the filler does for one pool after a look: (the pool, its target, frames to keep
/// free, the most frames it may make: the quotas in force).
type FillWork = (FramePool, usize, usize, usize);

impl Registry {
    /// Members whose lease was dropped (their version is gone) leave once every frame taken
    /// through their handle is back: their quota, their part of the filler's target and the
    /// memory their version counted ([`PoolLease::count`]) are given back then, never while a
    /// frame of theirs is out. A pool with no member left and no frame out is dropped: moved
    /// to `gone`, whose caller lets go of it outside the lock (the filler's or the edit
    /// thread: never a worker or an output thread; its buffers are freed there unless a
    /// handle is still held elsewhere). Only once the pools are made (the host started).
    fn sweep(&mut self, gone: &mut Vec<FramePool>) {
        use std::sync::atomic::Ordering::Acquire;
        for shape in &mut self.shapes {
            let mut k = 0;
            while k < shape.members.len() {
                let m = &shape.members[k];
                let home = m.handle.as_ref().is_none_or(|h| h.in_use() == 0);
                if m.life.dropped.load(Acquire) && home {
                    let m = shape.members.swap_remove(k);
                    shape.quota = shape.quota.saturating_sub(m.quota);
                } else {
                    k += 1;
                }
            }
            if !self.open || !shape.members.is_empty() {
                continue;
            }
            if let Some(p) = shape.pool.take_if(|p| p.sharing().out == 0) {
                let sh = p.sharing();
                shape.retired = Some((p.allocated(), sh.peak, sh.grown_on_acquire));
                gone.push(p);
            }
        }
    }

    /// Reads every show's latency budget and every pool's evidence, and lists what to make
    /// (one atomic load per show, one per pool: no lock a show takes, nothing allocated once
    /// `work` has room for every pool).
    fn look(&mut self, work: &mut Vec<FillWork>) {
        work.clear();
        let threads = self.threads;
        for shape in &mut self.shapes {
            let Some(pool) = &shape.pool else { continue };
            let grown = pool.sharing().grown_on_acquire;
            if grown > shape.grown_seen {
                shape.extra_free = shape.extra_free.saturating_add(grown - shape.grown_seen);
                shape.grown_seen = grown;
            }
            let target = shape.fill_target(threads);
            shape.target = shape.target.max(target);
            let free = threads.saturating_add(shape.extra_free);
            work.push((pool.clone(), target, free, shape.quota));
        }
    }
}

/// Makes each pool's frames up to its target, then until it has its frames free (on the
/// filler's or the host's starting thread, never a worker's or an output's).
fn fill_all(work: &[FillWork]) {
    for (pool, target, free, cap) in work {
        pool.fill((*target).min(*cap));
        while pool.available() < *free && pool.allocated() < *cap {
            pool.fill(pool.allocated() + 1);
        }
    }
}

fn new_shape((width, height, shared): (u32, u32, bool)) -> Shape {
    Shape {
        width,
        height,
        shared,
        members: Vec::new(),
        seen: Vec::new(),
        quota: 0,
        quota_peak: 0,
        target: 0,
        extra_free: 0,
        grown_seen: 0,
        pool: None,
        retired: None,
    }
}

/// A shared pool of `slots` frames of this shape, nothing allocated (`None`: its shared memory
/// could not be made).
fn make_pool((width, height, shared): (u32, u32, bool), slots: usize) -> Option<FramePool> {
    let slots = slots.max(1);
    if shared {
        FramePool::lazy_shared(width, height, slots).ok()
    } else {
        Some(FramePool::lazy(width, height, slots))
    }
}

/// Replaces a version's pools by quota handles (`handles[k]` for `own[k]`; `None` keeps that
/// one), copying a feedback's frame 0 over (within the quota: the version holds nothing else
/// yet; on failure it stays in its own pool, which it keeps alive).
pub(crate) fn rebind(
    pools: &mut [FramePool],
    first_frames: &mut [Option<framepipe_core::Frame>],
    own: &[FramePool],
    handles: &[Option<FramePool>],
) {
    for pool in pools.iter_mut() {
        let k = own.iter().position(|p| p.same_pool(pool));
        if let Some(h) = k.and_then(|k| handles[k].clone()) {
            *pool = h;
        }
    }
    for (frame, pool) in first_frames.iter_mut().zip(pools.iter()) {
        let Some(old) = frame.as_ref() else { continue };
        if old.pool().same_pool(pool) {
            continue;
        }
        if let Ok(mut copy) = pool.try_acquire() {
            copy.copy_from(old.data());
            *frame = Some(copy.freeze());
        }
    }
}

/// A live edit's new version of a show in a host (on the edit thread, once the edit's checks
/// have passed: nothing is made for an edit that is refused): its pools become quota handles
/// on the host's ([`SharedPools::join`]), held until the version is dropped and its frames are
/// back, and the memory its pools count stays counted as long. A show alone (no lease on the
/// running version) keeps its own; returns whether the version's pools are the host's.
pub(crate) fn share_edit(
    next: &mut crate::sched::Version,
    own: &[(FramePool, PoolPlan)],
    running: &crate::sched::Version,
    pace: Option<Pace>,
) -> bool {
    let Some((reg, show)) = running
        .pool_lease
        .as_ref()
        .map(|l| (l.pools().clone(), l.show))
    else {
        return false;
    };
    let (handles, lease) = reg.join(show, own, pace);
    let own: Vec<FramePool> = own.iter().map(|(p, _)| p.clone()).collect();
    rebind(&mut next.pools, &mut next.first_frames, &own, &handles);
    if let Some(held) = next.pools_held.take() {
        lease.count(held);
    }
    next.pool_lease = Some(lease);
    true
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
