//! The memory book: what a show holds against its budget, per memory kind, counted by guards.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use framepipe_core::limits::human_bytes;
use framepipe_core::Result;

use super::MemoryKind;

/// What a show holds against `--max-memory` right now, as the budget counts it: every graph version
/// alive (its frame pools at full capacity) and every effect instance (one output frame each, the
/// estimate of [`PoolNeeds::total`](super::PoolNeeds::total)). A live edit builds its version while
/// the running one goes on, so two versions (three during a crossfade's hand-over) can be alive at
/// once: the edit's check adds what it would make to what is held here ([`MemoryBook::admit`]).
///
/// Counted per memory kind ([`MemoryKind`]), each against its own limit; the edit checks
/// ([`admit`](Self::admit), [`fits`](Self::fits), [`refuse_over`](Self::refuse_over)) are of host
/// memory, the one kind there is.
///
/// Counted by guards ([`Held`]): a version holds one for its pools, each instance one for
/// itself, so the figure follows the objects (an instance a live edit keeps moves with its
/// guard; a replaced version is uncounted when the edit thread drops it). Written only where
/// versions and instances are made and dropped (the edit thread, the run's start and end),
/// never on the frame path.
#[derive(Debug, Default)]
pub(crate) struct MemoryBook {
    /// Per memory kind ([`MemoryKind::index`]): bytes counted now, and the most at once.
    held: [AtomicU64; MemoryKind::COUNT],
    peak: [AtomicU64; MemoryKind::COUNT],
    /// Edits refused because what they would hold with the running graph is over the budget.
    refused: AtomicU64,
    /// The last refusal by [`admit`](Self::admit) would not have been one with only the
    /// running version held: it is up to the edit thread to wait or refuse (and count it).
    later: AtomicBool,
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
    /// `--max-gpu-memory` in force, bytes.
    pub max_gpu_memory: u64,
    /// GPU memory counted now (texture pools at full capacity, GPU nodes' own buffers).
    pub gpu_held: u64,
    /// The most GPU memory counted at once so far.
    pub gpu_held_max: u64,
}

impl MemoryBook {
    /// Host memory counted now (what `--max-memory` limits), bytes.
    pub fn held(&self) -> u64 {
        self.held_in(MemoryKind::Cpu)
    }

    /// Memory of `kind` counted now, bytes.
    pub(crate) fn held_in(&self, kind: MemoryKind) -> u64 {
        self.held[kind.index()].load(Ordering::Acquire)
    }

    /// The figures for `--stats`.
    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            max_memory: MemoryKind::Cpu.limit(),
            held: self.held(),
            held_max: self.peak[MemoryKind::Cpu.index()].load(Ordering::Relaxed),
            edits_refused: self.refused.load(Ordering::Relaxed),
            max_gpu_memory: MemoryKind::Gpu.limit(),
            gpu_held: self.held_in(MemoryKind::Gpu),
            gpu_held_max: self.peak[MemoryKind::Gpu.index()].load(Ordering::Relaxed),
        }
    }

    /// A guard counting `bytes` of `kind` until it is dropped.
    pub(crate) fn hold(self: &Arc<Self>, kind: MemoryKind, bytes: u64) -> Held {
        let k = kind.index();
        let now = self.held[k]
            .fetch_add(bytes, Ordering::AcqRel)
            .saturating_add(bytes);
        self.peak[k].fetch_max(now, Ordering::AcqRel);
        Held {
            book: Arc::clone(self),
            kind,
            bytes,
        }
    }

    /// Whether `bytes` more host memory would fit in the budget now.
    pub(crate) fn fits(&self, bytes: u64) -> bool {
        self.held().saturating_add(bytes) <= MemoryKind::Cpu.limit()
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
            let later = running.saturating_add(new) <= MemoryKind::Cpu.limit();
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
                        self.later.store(true, Ordering::Relaxed);
                    } else {
                        self.count_refusal();
                    }
                });
        }
        self.refuse_over([("the running graph", held), (new_name, new)], during, hint)
    }

    /// [`admit`](Self::admit) in GPU memory, against `--max-gpu-memory`: `new` is the new
    /// version's texture pools at full capacity and its GPU nodes' own buffers, `running` the
    /// running version's. A refusal that would not be one once a version an earlier edit
    /// replaced is freed is left to the edit thread to wait for, as in host memory.
    pub(crate) fn admit_gpu(
        &self,
        running: u64,
        new: u64,
        new_name: &str,
        during: &str,
    ) -> Result<()> {
        let held = self.held_in(MemoryKind::Gpu);
        let limit = MemoryKind::Gpu.limit();
        let total = held.saturating_add(new);
        if new == 0 || total <= limit {
            return Ok(());
        }
        if held > running && running.saturating_add(new) <= limit {
            self.later.store(true, Ordering::Relaxed);
        } else {
            self.count_refusal();
        }
        let running_name = if held > running {
            "the running graph and a version an earlier edit replaced, not freed yet"
        } else {
            "the running graph"
        };
        Err(framepipe_core::Error::TooLarge {
            what: format!(
                "in GPU memory, {running_name} ({}) and {new_name} ({}), held at once {during},",
                human_bytes(held),
                human_bytes(new)
            ),
            asked: total,
            limit,
            hint: "raise --max-gpu-memory".into(),
        })
    }

    /// Whether the last refusal would not have been one with only the running version held
    /// (then it was not counted: see [`count_refusal`](Self::count_refusal)); clears it.
    pub(crate) fn take_later(&self) -> bool {
        self.later.swap(false, Ordering::Relaxed)
    }

    /// Counts an edit refused for memory (in `--stats`).
    pub(crate) fn count_refusal(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
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
        let limit = MemoryKind::Cpu.limit();
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
    kind: MemoryKind,
    bytes: u64,
}

impl Held {
    /// The bytes it counts.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.book.held[self.kind.index()].fetch_sub(self.bytes, Ordering::AcqRel);
    }
}
