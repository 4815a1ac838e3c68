//! Frames and the pool they come from.
//!
//! The engine's pixel format is RGBA, 8 bits per channel, laid out as frei0r wants it: rows of
//! `width * 4` bytes with no padding, the buffer 16-byte aligned. Other formats are converted at
//! the pipeline's edges.
//!
//! A [`FramePool`] owns at most `capacity` buffers. Each is allocated, and every page of it
//! written, **once**: either up front ([`FramePool::new`], or [`FramePool::fill`] from a helper
//! thread) or the first time [`FramePool::acquire`] finds no free frame while fewer than
//! `capacity` exist ([`FramePool::lazy`]). A buffer is never freed or replaced before the pool
//! itself, so once a pool has reached the number of frames a run really uses, acquiring and
//! dropping frames neither allocates, faults in a page nor locks: the free list is a bounded
//! lock-free queue of slot indices. [`FramePool::allocated`] says how many buffers exist.
//!
//! A pool's buffers are on the heap, or, for a pool made with [`FramePool::lazy_shared`], in one
//! `memfd` per pool ([`crate::shm`]): then every frame is also a place in that file
//! ([`Frame::shared`]), which a child process can map and read or write in place (the isolated
//! frei0r plugins do: no copy per frame). Both are allocated and touched the same way, once per
//! buffer.
//!
//! A pool may be shared by several users, each with a **quota** ([`FramePool::with_quota`]): a
//! handle on the same frames that may hold at most that many at once. A host of many shows makes
//! one pool per frame size for all of them and gives each show such a handle (the frames its own
//! plan says it holds at most), so that the frames made are what the shows have out *together*,
//! not the sum of their quotas, and one show cannot starve the others. A quota handle counts its
//! frames out in one atomic counter per handle (taken before a frame is popped, given back after
//! it is pushed back): acquiring and returning a frame stay lock-free and allocation-free. A pool made
//! by [`FramePool::new`] or [`FramePool::lazy`] has no quota: its frames are counted only by the
//! pool's capacity, as before. A frame's quota account is noted in its slot, not in its handles:
//! cloning and dropping frames costs what it did.
//!
//! Ownership is in the types:
//! * [`FrameMut`] is the only handle to its buffer; only it can write the pixels.
//! * [`Frame`] is a shared, read-only handle; cloning it bumps a reference count. To write, turn it
//!   back into a [`FrameMut`] with [`Frame::try_into_mut`] (succeeds only for the last holder) or
//!   [`Frame::into_mut`] (copies into a fresh pool frame when others still hold it: copy on write).
//! * A buffer goes back to its pool when its last handle drops, and no handle can outlive that.
//!
//! The two examples below must fail to compile with exactly these errors: E0599 (a [`Frame`] has
//! no `data_mut`) and E0505 (the frame cannot be dropped while its pixels are borrowed). rustdoc
//! checks the error codes only on a nightly toolchain or with `RUSTC_BOOTSTRAP=1`
//! (`scripts/test` runs the doctests that way); on stable it checks only that they fail.
//!
//! ```compile_fail,E0599
//! # use framepipe_core::FramePool;
//! let pool = FramePool::new(8, 8, 1);
//! let frame = pool.acquire().unwrap().freeze();
//! frame.data_mut()[0] = 1; // a shared frame cannot be written
//! ```
//!
//! ```compile_fail,E0505
//! # use framepipe_core::FramePool;
//! let pool = FramePool::new(8, 8, 1);
//! let frame = pool.acquire().unwrap();
//! let pixels = frame.data();
//! drop(frame); // back to the pool...
//! let _ = pixels[0]; // ...so its pixels can no longer be read
//! ```
#![allow(unsafe_code)] // the slot buffers are shared between handles; see the SAFETY comments

use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_queue::ArrayQueue;

use crate::error::{Error, Result};
use crate::shm::{page_size, SharedFrame, SharedRegion};

/// 16 bytes aligned to 16: the unit frame buffers are allocated in, which gives frei0r's alignment
/// without any unsafe allocation code.
#[repr(C, align(16))]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Block([u8; 16]);

/// Opaque black, four pixels: what a new buffer is filled with. Non-zero, so that the writes
/// cannot be elided and every page is faulted in when the buffer is made, not on the frame path.
const OPAQUE_BLACK: Block = Block([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255]);

/// A slot's pixels. Shared between the handles to the slot; see `PoolInner`'s SAFETY comment.
enum Buffer {
    /// On the heap.
    Heap(UnsafeCell<Box<[Block]>>),
    /// In the pool's shared memory, at the slot's place (`PoolInner::shared_offset`).
    Shared,
}

struct Slot {
    /// Number of live handles; 0 while the slot is in the free list.
    refs: AtomicUsize,
    /// Set once, by the one thread that claimed this slot (`PoolInner::grow` or
    /// `FramePool::fill`), before any handle to it exists; never replaced or freed before the
    /// pool.
    data: OnceLock<Buffer>,
    /// The account (index in `PoolInner::accounts`) of the handle that took the frame now in
    /// this slot, or [`NO_ACCOUNT`]. Written by the acquirer before the frame exists, read by
    /// the releaser of its last handle before the slot goes back to the free list.
    owner: AtomicU32,
}

/// `Slot::owner` of a frame taken through a handle without a quota, and `FramePool::account`
/// of such a handle.
const NO_ACCOUNT: u32 = u32::MAX;

/// One user's share of a pool ([`FramePool::with_quota`]).
#[derive(Debug, Default)]
struct Account {
    /// The most frames this user may hold at once (set once, when the handle is made).
    quota: AtomicUsize,
    /// Frames held now: acquired and not yet back in the free list (counted from just before a
    /// frame is popped to just after it is pushed back, so never less than what is out).
    held: AtomicUsize,
    /// Acquisitions refused because `held` had reached `quota`.
    refused: AtomicU64,
}

struct PoolInner {
    width: u32,
    height: u32,
    bytes: usize,
    /// `capacity` slots; only the first `created` have (or are getting) a buffer.
    slots: Box<[Slot]>,
    /// Slots claimed so far (each is given its buffer by the thread that claimed it).
    created: AtomicUsize,
    /// Free slots that have a buffer.
    free: ArrayQueue<usize>,
    /// `fill` calls between claiming a slot and pushing it to the free list (the time to make one
    /// buffer). `acquire` waits for them rather than report an exhausted pool whose last frame is
    /// about to become free.
    filling: AtomicUsize,
    /// The memfd holding the buffers of a shared pool (`None`: they are on the heap).
    shared: Option<SharedRegion>,
    /// Bytes per slot in a shared pool's memfd: the frame rounded up to whole pages.
    span: usize,
    /// Bytes from the start of a shared slot to its first pixel (the pixels end at the slot's
    /// end).
    pad: usize,
    /// The quota handles' accounts: made by the first [`FramePool::with_quota`], one per slot
    /// (each quota is at least one frame); the first `next_account` are taken.
    accounts: OnceLock<Box<[Account]>>,
    next_account: AtomicUsize,
    /// The most frames out at once, as seen by acquires through quota handles.
    peak: AtomicUsize,
    /// Buffers made by [`FramePool::acquire`] itself (no free frame; not by `fill`): the frames
    /// a background filler did not make in time.
    grown_on_acquire: AtomicUsize,
}

// SAFETY: a slot's buffer is written only through the one `FrameMut` that holds it (refs == 1,
// no `Frame` exists), and read through `Frame`s only while no `FrameMut` exists; the reference
// count and the free queue's release/acquire ordering make those phases happen-before each other.
// The buffer itself is published once through its `OnceLock` (release on set, acquire on get);
// a shared slot's bytes are written first by its claimer (`fresh_buffer`) before that publication.
unsafe impl Sync for PoolInner {}

impl PoolInner {
    fn buffer(&self, idx: usize) -> &Buffer {
        self.slots[idx]
            .data
            .get()
            .expect("a slot that has a handle has its buffer")
    }

    /// Byte offset of slot `idx`'s first pixel in a shared pool's memfd.
    fn shared_offset(&self, idx: usize) -> usize {
        idx * self.span + self.pad
    }

    fn shared_ptr(&self, idx: usize) -> *mut u8 {
        let region = self
            .shared
            .as_ref()
            .expect("a shared slot is in a shared pool");
        region.at(self.shared_offset(idx))
    }

    fn bytes_of(&self, idx: usize) -> &[u8] {
        match self.buffer(idx) {
            Buffer::Heap(cell) => {
                // SAFETY: callers hold a live handle to slot `idx`, so the buffer is not being
                // written (only a unique FrameMut writes, and then the caller is that FrameMut
                // borrowed shared).
                let blocks: &[Block] = unsafe { &*cell.get() };
                &bytemuck::cast_slice(blocks)[..self.bytes]
            }
            // SAFETY: as above; the slot's `bytes` bytes lie in the pool's mapping, which lives
            // as long as the pool (so as long as the caller's handle), 16-byte aligned.
            Buffer::Shared => unsafe {
                std::slice::from_raw_parts(self.shared_ptr(idx), self.bytes)
            },
        }
    }

    /// # Safety
    /// The caller must be the unique handle (a `FrameMut`) to slot `idx`, borrowed mutably.
    #[allow(clippy::mut_from_ref)] // the exclusivity is the caller's contract, stated above
    unsafe fn bytes_of_mut(&self, idx: usize) -> &mut [u8] {
        match self.buffer(idx) {
            Buffer::Heap(cell) => {
                // SAFETY: guaranteed by the caller: nobody else can read or write this buffer
                // now.
                let blocks: &mut [Block] = unsafe { &mut *cell.get() };
                &mut bytemuck::cast_slice_mut(blocks)[..self.bytes]
            }
            // SAFETY: as above; the bytes lie in the pool's mapping, alive as long as the pool.
            Buffer::Shared => unsafe {
                std::slice::from_raw_parts_mut(self.shared_ptr(idx), self.bytes)
            },
        }
    }

    /// A new buffer of this pool's size for slot `idx`, every byte written (on the heap, or the
    /// slot's place in the shared memory). Called once per slot, by the thread that claimed it.
    fn fresh_buffer(&self, idx: usize) -> Buffer {
        let blocks = self.bytes.div_ceil(16);
        if self.shared.is_none() {
            return Buffer::Heap(UnsafeCell::new(
                vec![OPAQUE_BLACK; blocks].into_boxed_slice(),
            ));
        }
        // The caller claimed slot `idx` and no handle to it exists yet; `pad + blocks * 16` is
        // the slot's span (the pixels end at its end), inside the mapping.
        let ptr = self.shared_ptr(idx).cast::<Block>();
        // SAFETY: nobody else touches these bytes (above); in the mapping; 16-byte aligned
        // (page + pad, a multiple of 16).
        let slot: &mut [Block] = unsafe { std::slice::from_raw_parts_mut(ptr, blocks) };
        // Written, not just sized: the pages are allocated and mapped here, once.
        slot.fill(OPAQUE_BLACK);
        Buffer::Shared
    }

    /// Claims a slot that has no buffer yet: `None` when all `capacity` slots are claimed. The
    /// counter hands each index out once, so the claimer is the only one who may give that slot
    /// its buffer, and no handle to it exists before it does.
    fn claim(&self) -> Option<usize> {
        let cap = self.slots.len();
        self.created
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            })
            .ok()
    }

    /// Claims a slot and gives it a new buffer; the caller owns the slot (it is in no free
    /// list and has no handle yet). `None` when all `capacity` slots exist.
    fn grow(&self) -> Option<usize> {
        let idx = self.claim()?;
        // The cell is empty (only the claimer sets it), so this runs `fresh_buffer` exactly once.
        let _ = self.slots[idx].data.get_or_init(|| self.fresh_buffer(idx));
        Some(idx)
    }

    fn release(&self, idx: usize) {
        let slot = &self.slots[idx];
        if slot.refs.fetch_sub(1, Ordering::Release) == 1 {
            // Make every other holder's reads happen before the next owner's writes.
            fence(Ordering::Acquire);
            // Read before the push: then the slot may be someone else's.
            let owner = slot.owner.load(Ordering::Relaxed);
            // Cannot fail: the queue holds every slot index at most once and has room for all.
            let _ = self.free.push(idx);
            // After the push: a quota never counts fewer frames than are out of the free list,
            // so the pool always has a frame for a user within its quota (its capacity is the
            // sum of the quotas).
            if owner != NO_ACCOUNT {
                self.account(owner).held.fetch_sub(1, Ordering::Release);
            }
        }
    }

    /// Account `k` (a quota handle exists for it, so the table does).
    fn account(&self, k: u32) -> &Account {
        &self
            .accounts
            .get()
            .expect("a quota handle made the accounts")[k as usize]
    }
}

/// How a pool is shared through quota handles ([`FramePool::sharing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolSharing {
    /// Quota handles made on the pool ([`FramePool::with_quota`]): one per show in a host.
    pub handles: usize,
    /// Frames out through quota handles now.
    pub out: usize,
    /// The most frames out through quota handles at once so far.
    pub peak: usize,
    /// Buffers made by an acquire that found no free frame (rather than by a filler ahead of
    /// need), over every handle.
    pub grown_on_acquire: usize,
}

/// A pool of equally sized RGBA frames, each allocated and touched once, up front or the first
/// time it is needed, up to a fixed capacity.
///
/// Cloning the pool is cheap (a reference count); frames keep their pool alive.
#[derive(Clone)]
pub struct FramePool {
    inner: Arc<PoolInner>,
    /// A quota handle's account ([`with_quota`](Self::with_quota)); [`NO_ACCOUNT`]: the whole
    /// pool.
    account: u32,
}

impl std::fmt::Debug for FramePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FramePool")
            .field("width", &self.inner.width)
            .field("height", &self.inner.height)
            .field("capacity", &self.capacity())
            .field("allocated", &self.allocated())
            .field("available", &self.available())
            .field("quota", &self.quota())
            .finish()
    }
}

impl FramePool {
    /// Allocates `capacity` frames of `width` x `height` and writes every byte of them (opaque
    /// black) so that their pages are resident before the first frame is processed.
    ///
    /// # Panics
    /// If `width`, `height` or `capacity` is zero. Sizes are validated by the caller (sources check
    /// them against [`Limits`](crate::Limits) before a pool is made).
    pub fn new(width: u32, height: u32, capacity: usize) -> Self {
        let pool = Self::lazy(width, height, capacity);
        pool.fill(capacity);
        pool
    }

    /// A pool of at most `capacity` frames of `width` x `height` with none allocated yet: a frame
    /// buffer is allocated (and every page written) the first time [`acquire`](Self::acquire)
    /// finds no free frame, until `capacity` exist. Only the slot table (a few words per slot)
    /// is allocated now.
    ///
    /// # Panics
    /// As [`new`](Self::new).
    pub fn lazy(width: u32, height: u32, capacity: usize) -> Self {
        Self::make(width, height, capacity, false).expect("a heap pool cannot fail to be made")
    }

    /// Like [`lazy`](Self::lazy), but the buffers live in shared memory: one `memfd` for the
    /// pool, sized for its whole capacity now (sparse: only address space until a buffer is
    /// made) and mapped once. Each frame is then also a place in that file ([`Frame::shared`]),
    /// for a child process to read or write in place. Buffers are allocated and touched exactly
    /// as in a heap pool, once each, the first time they are needed.
    ///
    /// # Errors
    /// [`Error::Io`] when the memfd cannot be made or mapped.
    ///
    /// # Panics
    /// As [`new`](Self::new).
    pub fn lazy_shared(width: u32, height: u32, capacity: usize) -> Result<Self> {
        Self::make(width, height, capacity, true)
    }

    fn make(width: u32, height: u32, capacity: usize, shared: bool) -> Result<Self> {
        assert!(width > 0 && height > 0 && capacity > 0, "empty frame pool");
        let bytes = width as usize * height as usize * 4;
        let span = (bytes.div_ceil(16) * 16).next_multiple_of(page_size());
        let pad = span - bytes.div_ceil(16) * 16;
        let shared = if shared {
            let region = SharedRegion::create(&format!("{width}x{height}"), span, capacity)
                .map_err(|e| {
                    Error::io(
                        format!("making a shared frame pool of {capacity} x {width}x{height}"),
                        e,
                    )
                })?;
            Some(region)
        } else {
            None
        };
        let slots: Box<[Slot]> = (0..capacity)
            .map(|_| Slot {
                refs: AtomicUsize::new(0),
                data: OnceLock::new(),
                owner: AtomicU32::new(NO_ACCOUNT),
            })
            .collect();
        Ok(FramePool {
            inner: Arc::new(PoolInner {
                width,
                height,
                bytes,
                slots,
                created: AtomicUsize::new(0),
                free: ArrayQueue::new(capacity),
                filling: AtomicUsize::new(0),
                shared,
                span,
                pad,
                accounts: OnceLock::new(),
                next_account: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
                grown_on_acquire: AtomicUsize::new(0),
            }),
            account: NO_ACCOUNT,
        })
    }

    /// A handle on this pool's frames that may hold at most `quota` of them at once: its
    /// [`acquire`](Self::acquire) returns `None` (and [`try_acquire`](Self::try_acquire)
    /// [`Error::PoolExhausted`] with `quota` as the capacity) while `quota` frames taken through
    /// it (or through its clones, or copies made by [`Frame::into_mut`] of its frames) are out,
    /// whatever the pool has free. Several handles share the pool's buffers: the pool makes only
    /// as many as they hold together. For a pool shared this way, make its capacity the sum of
    /// the quotas: then a handle within its quota always gets a frame.
    ///
    /// A frame's handle counts in its slot (no reference count of its own: a frame taken through
    /// a quota handle costs one compare-and-swap more on acquire, one decrement more on return).
    ///
    /// # Panics
    /// If `quota` is zero, or the pool already has as many quota handles as it has frames
    /// (each quota is at least one frame: the capacity is too small for the sum of the quotas).
    pub fn with_quota(&self, quota: usize) -> FramePool {
        assert!(quota > 0, "a frame quota of zero");
        let inner = &*self.inner;
        let table = inner
            .accounts
            .get_or_init(|| (0..inner.slots.len()).map(|_| Account::default()).collect());
        let k = inner.next_account.fetch_add(1, Ordering::Relaxed);
        assert!(
            k < table.len(),
            "more quota handles than the {} frames of the pool",
            table.len()
        );
        table[k].quota.store(quota, Ordering::Relaxed);
        FramePool {
            inner: Arc::clone(&self.inner),
            account: u32::try_from(k).expect("fewer accounts than slots"),
        }
    }

    fn my_account(&self) -> Option<&Account> {
        (self.account != NO_ACCOUNT).then(|| self.inner.account(self.account))
    }

    /// This handle's quota (`None`: a handle on the whole pool).
    pub fn quota(&self) -> Option<usize> {
        self.my_account().map(|a| a.quota.load(Ordering::Relaxed))
    }

    /// Frames out through this handle now: for a quota handle, what it holds; for the whole
    /// pool, every frame made and not free.
    pub fn in_use(&self) -> usize {
        match self.my_account() {
            Some(a) => a.held.load(Ordering::Acquire),
            None => self.allocated().saturating_sub(self.available()),
        }
    }

    /// Acquisitions this quota handle refused because its quota was reached (0 for a handle on
    /// the whole pool).
    pub fn refused(&self) -> u64 {
        self.my_account()
            .map_or(0, |a| a.refused.load(Ordering::Relaxed))
    }

    /// How the pool is shared: quota handles made on it, frames out now and the most at once
    /// (as seen by acquires through quota handles), and the buffers `acquire` had to make itself
    /// (no free frame).
    pub fn sharing(&self) -> PoolSharing {
        let i = &*self.inner;
        PoolSharing {
            handles: i.next_account.load(Ordering::Relaxed),
            out: self.allocated().saturating_sub(self.available()),
            peak: i.peak.load(Ordering::Relaxed),
            grown_on_acquire: i.grown_on_acquire.load(Ordering::Relaxed),
        }
    }

    /// Allocates (and touches) buffers until `target` exist (at most the capacity), putting them
    /// in the free list; returns how many exist. Meant for a helper thread that fills a pool while
    /// frames are already in use. Each slot is claimed *before* its buffer is made, so the pool
    /// never holds more buffers than its capacity, not even for a moment (making the buffer first
    /// and dropping it when a worker had grown the pool meanwhile cost a transient extra frame:
    /// 91 MiB instead of 63 for a paced one-frame 4K run). While a buffer is
    /// being made, an [`acquire`](Self::acquire) that finds no free frame waits for it instead of
    /// making one more (warm-up only).
    pub fn fill(&self, target: usize) -> usize {
        let inner = &*self.inner;
        while self.allocated() < target.min(self.capacity()) {
            inner.filling.fetch_add(1, Ordering::SeqCst);
            let grown = inner.grow();
            if let Some(idx) = grown {
                // Cannot fail: the queue has room for every slot and holds each at most once.
                let _ = inner.free.push(idx);
            }
            inner.filling.fetch_sub(1, Ordering::SeqCst);
            if grown.is_none() {
                // Someone else grew the pool to its capacity meanwhile.
                break;
            }
        }
        self.allocated()
    }

    /// Takes a free frame, or `None` when all `capacity` frames are in use. Lock-free; allocates
    /// (one frame buffer, once) only when no frame is free and the pool has not reached its
    /// capacity yet.
    pub fn acquire(&self) -> Option<FrameMut> {
        let inner = &*self.inner;
        let Some(account) = self.my_account() else {
            let idx = self.take_slot()?;
            inner.slots[idx].owner.store(NO_ACCOUNT, Ordering::Relaxed);
            return Some(FrameMut {
                pool: Arc::clone(&self.inner),
                idx,
            });
        };
        // The quota first: a user at its quota takes nothing from the others.
        let quota = account.quota.load(Ordering::Relaxed);
        let reserved = account
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < quota).then_some(n + 1)
            });
        if reserved.is_err() {
            account.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let Some(idx) = self.take_slot() else {
            // Only when the pool is smaller than the sum of its quotas.
            account.held.fetch_sub(1, Ordering::Release);
            account.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        inner.slots[idx]
            .owner
            .store(self.account, Ordering::Relaxed);
        // Loads only, but when a new high comes.
        let out = inner
            .created
            .load(Ordering::Relaxed)
            .saturating_sub(inner.free.len());
        if out > inner.peak.load(Ordering::Relaxed) {
            inner.peak.fetch_max(out, Ordering::Relaxed);
        }
        Some(FrameMut {
            pool: Arc::clone(&self.inner),
            idx,
        })
    }

    /// A free slot (growing the pool when none is and it may), its handle count set to 1.
    fn take_slot(&self) -> Option<usize> {
        let inner = &*self.inner;
        let idx = loop {
            if let Some(idx) = inner.free.pop() {
                break idx;
            }
            if inner.filling.load(Ordering::SeqCst) > 0 {
                // A `fill` is making a buffer that will be free in a moment: wait for it rather
                // than make one more (no longer than making our own would take; warm-up only).
                std::thread::yield_now();
                continue;
            }
            if let Some(idx) = inner.grow() {
                inner.grown_on_acquire.fetch_add(1, Ordering::Relaxed);
                break idx;
            }
            if inner.filling.load(Ordering::SeqCst) == 0 {
                // Every claimed slot has been pushed by now: one last look, then it is full.
                break inner.free.pop()?;
            }
        };
        inner.slots[idx].refs.store(1, Ordering::Relaxed);
        Some(idx)
    }

    /// Like [`acquire`](Self::acquire), but an exhausted pool is an [`Error::PoolExhausted`].
    pub fn try_acquire(&self) -> Result<FrameMut> {
        self.acquire().ok_or(Error::PoolExhausted {
            width: self.inner.width,
            height: self.inner.height,
            capacity: self.capacity(),
        })
    }

    /// Frame width in pixels.
    pub fn width(&self) -> u32 {
        self.inner.width
    }

    /// Frame height in pixels.
    pub fn height(&self) -> u32 {
        self.inner.height
    }

    /// The most frames this handle may hold: its quota, or the pool's capacity.
    pub fn capacity(&self) -> usize {
        self.quota().unwrap_or(self.inner.slots.len())
    }

    /// The most frames the pool may hold, over every handle (its capacity, whatever the quota
    /// of this handle).
    pub fn pool_capacity(&self) -> usize {
        self.inner.slots.len()
    }

    /// Frames whose buffer has been allocated so far (at most
    /// [`pool_capacity`](Self::pool_capacity)), over every handle.
    pub fn allocated(&self) -> usize {
        self.inner.created.load(Ordering::Relaxed)
    }

    /// Frames allocated and free right now, over every handle.
    pub fn available(&self) -> usize {
        self.inner.free.len()
    }

    /// Whether the frames live in shared memory ([`lazy_shared`](Self::lazy_shared)).
    pub fn is_shared(&self) -> bool {
        self.inner.shared.is_some()
    }

    /// Whether `other` is a handle to the same pool (whatever their quotas).
    pub fn same_pool(&self, other: &FramePool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Whether `other` is this very handle or a clone of it: the same pool and the same quota
    /// account (two handles made by two [`with_quota`](Self::with_quota) calls are not).
    pub fn same_handle(&self, other: &FramePool) -> bool {
        self.same_pool(other) && self.account == other.account
    }

    /// Handles to this pool (the pool, its clones and every frame from it), for a helper that
    /// should stop working on a pool nobody else holds any more.
    pub fn handles(&self) -> usize {
        Arc::strong_count(&self.inner)
    }
}

macro_rules! common_accessors {
    () => {
        /// Width in pixels.
        pub fn width(&self) -> u32 {
            self.pool.width
        }
        /// Height in pixels.
        pub fn height(&self) -> u32 {
            self.pool.height
        }
        /// Bytes per row (always `width * 4`).
        pub fn stride(&self) -> usize {
            self.pool.width as usize * 4
        }
        /// The pixels, RGBA, row after row.
        pub fn data(&self) -> &[u8] {
            self.pool.bytes_of(self.idx)
        }
        /// The pixels as 32-bit words (one per pixel, native endian), 16-byte aligned.
        pub fn words(&self) -> &[u32] {
            bytemuck::cast_slice(self.data())
        }
        /// Where the pixels are in the pool's shared memory: `None` for a heap pool's frame.
        /// Valid as long as this handle (the memfd stays open and the frame stays at that place
        /// while any handle to it exists).
        pub fn shared(&self) -> Option<SharedFrame> {
            let region = self.pool.shared.as_ref()?;
            Some(region.locate(self.pool.shared_offset(self.idx)))
        }
        /// The pool this frame belongs to.
        pub fn pool(&self) -> FramePool {
            FramePool {
                inner: Arc::clone(&self.pool),
                account: self.pool.slots[self.idx].owner.load(Ordering::Relaxed),
            }
        }
    };
}

/// A frame held exclusively: the only handle to its buffer, so it may be written.
pub struct FrameMut {
    pool: Arc<PoolInner>,
    idx: usize,
}

impl std::fmt::Debug for FrameMut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FrameMut({}x{} #{})",
            self.pool.width, self.pool.height, self.idx
        )
    }
}

impl FrameMut {
    common_accessors!();

    /// The pixels, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: a FrameMut is the unique handle to its slot, and we hold it mutably.
        unsafe { self.pool.bytes_of_mut(self.idx) }
    }

    /// The pixels as writable 32-bit words (one per pixel, native endian).
    pub fn words_mut(&mut self) -> &mut [u32] {
        bytemuck::cast_slice_mut(self.data_mut())
    }

    /// Gives up the right to write, so that the frame can be shared. Costs nothing.
    pub fn freeze(self) -> Frame {
        let me = ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again, so the Arc is moved, not duplicated.
        let pool = unsafe { std::ptr::read(&me.pool) };
        Frame { pool, idx: me.idx }
    }

    /// Copies `src`'s pixels into this frame. Both must have the same size.
    ///
    /// # Panics
    /// If the sizes differ.
    pub fn copy_from(&mut self, src: &[u8]) {
        self.data_mut().copy_from_slice(src);
    }
}

impl Drop for FrameMut {
    fn drop(&mut self) {
        self.pool.release(self.idx);
    }
}

/// A shared, read-only frame. Clones share the buffer; the buffer returns to the pool when the last
/// clone drops.
pub struct Frame {
    pool: Arc<PoolInner>,
    idx: usize,
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Frame({}x{} #{})",
            self.pool.width, self.pool.height, self.idx
        )
    }
}

impl Frame {
    common_accessors!();

    /// Turns this handle into the writable one if it is the last; otherwise gives it back.
    pub fn try_into_mut(self) -> std::result::Result<FrameMut, Frame> {
        if self.pool.slots[self.idx].refs.load(Ordering::Acquire) == 1 {
            let me = ManuallyDrop::new(self);
            // SAFETY: `me` is never used or dropped again, so the Arc is moved, not duplicated.
            let pool = unsafe { std::ptr::read(&me.pool) };
            Ok(FrameMut { pool, idx: me.idx })
        } else {
            Err(self)
        }
    }

    /// Copy on write: the writable frame itself when this is the last handle, else a copy in a
    /// fresh frame from the same pool. An exhausted pool hands the frame back with the error.
    pub fn into_mut(self) -> std::result::Result<FrameMut, (Frame, Error)> {
        match self.try_into_mut() {
            Ok(m) => Ok(m),
            Err(shared) => match shared.pool().try_acquire() {
                Ok(mut copy) => {
                    copy.copy_from(shared.data());
                    Ok(copy)
                }
                Err(e) => Err((shared, e)),
            },
        }
    }

    /// Number of handles sharing this frame's buffer (for tests and diagnostics).
    pub fn ref_count(&self) -> usize {
        self.pool.slots[self.idx].refs.load(Ordering::Relaxed)
    }
}

impl Clone for Frame {
    fn clone(&self) -> Self {
        self.pool.slots[self.idx]
            .refs
            .fetch_add(1, Ordering::Relaxed);
        Frame {
            pool: Arc::clone(&self.pool),
            idx: self.idx,
        }
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        self.pool.release(self.idx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_aligned_and_touched() {
        let pool = FramePool::new(64, 8, 3);
        let f = pool.acquire().unwrap();
        assert_eq!(f.data().as_ptr() as usize % 16, 0);
        assert_eq!(f.data().len(), 64 * 8 * 4);
        assert_eq!(&f.data()[..4], &[0, 0, 0, 255]);
        assert_eq!(f.stride(), 256);
    }

    #[test]
    fn frames_return_to_the_pool_when_the_last_handle_drops() {
        let pool = FramePool::new(8, 8, 2);
        let a = pool.acquire().unwrap().freeze();
        let b = a.clone();
        assert_eq!(a.ref_count(), 2);
        let _c = pool.acquire().unwrap();
        assert!(pool.acquire().is_none(), "pool of two has no third frame");
        assert!(matches!(
            pool.try_acquire(),
            Err(Error::PoolExhausted { capacity: 2, .. })
        ));
        drop(a);
        assert_eq!(pool.available(), 0, "b still holds the buffer");
        drop(b);
        assert_eq!(pool.available(), 1);
    }

    #[test]
    fn shared_frames_are_copied_only_when_written() {
        let pool = FramePool::new(8, 8, 3);
        let mut m = pool.acquire().unwrap();
        m.data_mut()[0] = 42;
        let a = m.freeze();
        let b = a.clone();
        let mut w = a.into_mut().expect("pool has room for a copy");
        w.data_mut()[0] = 7;
        assert_eq!(b.data()[0], 42, "the other holder's pixels are untouched");
        assert_eq!(pool.available(), 1, "one copy was made");
        drop(w);
        let last = b.try_into_mut().expect("last holder may write in place");
        assert_eq!(last.data()[0], 42);
        assert_eq!(pool.available(), 2, "no copy for the last holder");
    }

    #[test]
    fn exhausted_pool_hands_the_frame_back() {
        let pool = FramePool::new(8, 8, 1);
        let a = pool.acquire().unwrap().freeze();
        let b = a.clone();
        let (back, err) = a.into_mut().unwrap_err();
        assert!(matches!(err, Error::PoolExhausted { .. }));
        assert_eq!(back.ref_count(), 2);
        drop(b);
    }

    #[test]
    fn a_lazy_pool_allocates_a_frame_only_when_none_is_free() {
        let pool = FramePool::lazy(64, 8, 3);
        assert_eq!(
            (pool.capacity(), pool.allocated(), pool.available()),
            (3, 0, 0)
        );
        let a = pool.acquire().expect("grows to a first frame");
        assert_eq!(pool.allocated(), 1);
        assert_eq!(
            &a.data()[..8],
            &[0, 0, 0, 255, 0, 0, 0, 255],
            "touched: opaque black"
        );
        assert_eq!(a.data().as_ptr() as usize % 16, 0);
        let first = a.data().as_ptr();
        drop(a);
        // A free frame exists: it is reused, nothing new is allocated.
        for _ in 0..10 {
            let again = pool.acquire().unwrap();
            assert_eq!(again.data().as_ptr(), first);
        }
        assert_eq!(pool.allocated(), 1);
        let held: Vec<FrameMut> = (0..3).map(|_| pool.acquire().unwrap()).collect();
        assert_eq!(pool.allocated(), 3);
        assert!(pool.acquire().is_none(), "never beyond the capacity");
        assert!(matches!(
            pool.try_acquire(),
            Err(Error::PoolExhausted { capacity: 3, .. })
        ));
        drop(held);
        assert_eq!((pool.allocated(), pool.available()), (3, 3));
    }

    #[test]
    fn filling_up_front_stops_at_the_capacity() {
        let pool = FramePool::lazy(8, 8, 4);
        assert_eq!(pool.fill(2), 2);
        assert_eq!(pool.available(), 2);
        assert_eq!(pool.fill(100), 4);
        assert_eq!(pool.available(), 4);
        assert_eq!(FramePool::new(8, 8, 5).allocated(), 5);
    }

    /// A helper fills `pool` (capacity 8) while two workers each acquire four frames
    /// (growing it on demand); what the workers got.
    fn grown_from_three_threads(pool: &FramePool) -> Vec<FrameMut> {
        let filler = pool.clone();
        std::thread::scope(|s| {
            s.spawn(move || filler.fill(8));
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let p = pool.clone();
                    s.spawn(move || (0..4).filter_map(|_| p.acquire()).collect::<Vec<_>>())
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn growing_from_several_threads_gives_every_slot_one_buffer() {
        // Workers acquire (growing on demand) while a helper fills: each slot's buffer must be
        // made once and handed to one holder only.
        for _ in 0..50 {
            let pool = FramePool::lazy(16, 16, 8);
            let held = grown_from_three_threads(&pool);
            assert_eq!(held.len(), 8);
            let mut ptrs: Vec<usize> = held.iter().map(|f| f.data().as_ptr() as usize).collect();
            ptrs.sort_unstable();
            ptrs.dedup();
            assert_eq!(ptrs.len(), 8, "every holder has its own buffer");
            assert_eq!(pool.allocated(), 8);
            assert_eq!(pool.available(), 0);
        }
    }

    #[test]
    fn shared_frames_are_places_in_the_pools_memfd() {
        use std::os::unix::fs::FileExt;
        // 8x8: 256 bytes, far from a page; 64x16: exactly one page.
        for (w, h) in [(8u32, 8u32), (64, 16), (100, 30)] {
            let bytes = (w * h * 4) as usize;
            let pool = FramePool::lazy_shared(w, h, 3).unwrap();
            assert!(pool.is_shared());
            assert_eq!(pool.allocated(), 0, "lazy: nothing made yet");
            let mut a = pool.acquire().unwrap();
            let mut b = pool.acquire().unwrap();
            assert_eq!(pool.allocated(), 2);
            assert_eq!(&a.data()[..4], &[0, 0, 0, 255], "touched: opaque black");
            assert_eq!(a.data().as_ptr() as usize % 16, 0);
            let (la, lb) = (a.shared().unwrap(), b.shared().unwrap());
            assert_eq!(la.pool_id, lb.pool_id);
            assert_ne!(la.offset, lb.offset);
            for l in [la, lb] {
                assert_eq!(l.span % page_size(), 0);
                assert_eq!(l.slots, 3);
                assert_eq!(l.offset % 16, 0);
                // The pixels end at the end of their slot (within 15 bytes).
                let end = l.offset + bytes;
                assert!(end.next_multiple_of(l.span) - end < 16, "{l:?}");
            }
            for (i, p) in a.data_mut().iter_mut().enumerate() {
                *p = (i * 7) as u8;
            }
            b.data_mut().fill(9);
            // Another opener of the memfd (as a child process does, through /proc) sees the
            // frames' pixels at their places.
            let file = std::fs::File::open(format!("/proc/self/fd/{}", la.fd)).unwrap();
            assert_eq!(file.metadata().unwrap().len(), (la.span * la.slots) as u64);
            let mut seen = vec![0u8; bytes];
            file.read_exact_at(&mut seen, la.offset as u64).unwrap();
            assert_eq!(seen, a.data());
            file.read_exact_at(&mut seen, lb.offset as u64).unwrap();
            assert_eq!(seen, b.data());
            let a = a.freeze();
            assert_eq!(
                a.clone().shared(),
                Some(la),
                "a shared handle is at the same place"
            );
            drop((a, b));
            // Reused, not made again.
            let again = pool.acquire().unwrap();
            assert!([la, lb].contains(&again.shared().unwrap()));
            assert_eq!(pool.allocated(), 2);
        }
        assert_eq!(FramePool::new(8, 8, 1).acquire().unwrap().shared(), None);
        let (p, q) = (
            FramePool::lazy_shared(8, 8, 1).unwrap(),
            FramePool::lazy_shared(8, 8, 1).unwrap(),
        );
        let (fp, fq) = (p.acquire().unwrap(), q.acquire().unwrap());
        assert_ne!(fp.shared().unwrap().pool_id, fq.shared().unwrap().pool_id);
    }

    #[test]
    fn a_shared_pool_grows_from_several_threads_like_a_heap_pool() {
        for _ in 0..20 {
            let pool = FramePool::lazy_shared(16, 16, 8).unwrap();
            let held = grown_from_three_threads(&pool);
            assert_eq!(held.len(), 8);
            let mut offs: Vec<usize> = held.iter().map(|f| f.shared().unwrap().offset).collect();
            offs.sort_unstable();
            offs.dedup();
            assert_eq!(offs.len(), 8, "every holder has its own slot");
            assert!(pool.acquire().is_none());
        }
    }

    #[test]
    fn quota_handles_share_the_buffers_and_never_hold_more_than_their_quota() {
        let pool = FramePool::lazy(8, 8, 5);
        let (a, b) = (pool.with_quota(2), pool.with_quota(3));
        assert_eq!(
            (a.quota(), a.capacity(), a.pool_capacity()),
            (Some(2), 2, 5)
        );
        assert_eq!(pool.quota(), None);
        // One frame out and back through each: the second reuses the first's buffer.
        let first = a.acquire().unwrap();
        let ptr = first.data().as_ptr();
        drop(first);
        assert_eq!(b.acquire().unwrap().data().as_ptr(), ptr);
        assert_eq!(pool.allocated(), 1, "made for what is held together");
        // `a` at its quota is refused while the pool has room; `b` goes on.
        let held_a: Vec<FrameMut> = (0..2).map(|_| a.acquire().unwrap()).collect();
        assert!(a.acquire().is_none(), "a third frame over a quota of two");
        assert!(matches!(
            a.try_acquire(),
            Err(Error::PoolExhausted { capacity: 2, .. })
        ));
        assert_eq!(a.refused(), 2);
        assert_eq!((a.in_use(), b.in_use()), (2, 0));
        let held_b: Vec<FrameMut> = (0..3).map(|_| b.acquire().unwrap()).collect();
        assert!(b.acquire().is_none());
        assert_eq!(b.refused(), 1);
        let sharing = pool.sharing();
        assert_eq!((sharing.handles, sharing.out, sharing.peak), (2, 5, 5));
        // Clones and shared handles count once; the frame's last handle gives its quota back.
        let mut held_a = held_a.into_iter();
        let shared = held_a.next().unwrap().freeze();
        drop(held_a);
        assert_eq!(a.in_use(), 1, "the other frame of `a` went back");
        let clone = shared.clone();
        assert_eq!(a.in_use(), 1, "a clone is no second frame");
        drop(shared);
        assert_eq!(a.in_use(), 1);
        drop(clone);
        assert_eq!(a.in_use(), 0);
        drop(held_b);
        assert_eq!(
            (b.in_use(), pool.sharing().out, pool.available()),
            (0, 0, 5)
        );
    }

    #[test]
    fn a_copy_on_write_counts_against_the_frames_quota() {
        let pool = FramePool::lazy(8, 8, 4);
        let q = pool.with_quota(1);
        let f = q.acquire().unwrap().freeze();
        let other = f.clone();
        // A copy would be a second frame of a quota of one: refused, the frame handed back.
        let (back, err) = f.into_mut().unwrap_err();
        assert!(matches!(err, Error::PoolExhausted { capacity: 1, .. }));
        drop(other);
        let m = back.try_into_mut().expect("the last handle");
        assert_eq!(m.pool().quota(), Some(1), "a frame knows its quota handle");
        assert!(m.pool().same_handle(&q) && !m.pool().same_handle(&pool.with_quota(1)));
        drop(m);
        assert_eq!(q.in_use(), 0);
    }

    #[test]
    fn quota_handles_on_several_threads_stay_within_their_quotas() {
        let pool = FramePool::lazy(16, 16, 6);
        let handles: Vec<FramePool> = (0..3).map(|_| pool.with_quota(2)).collect();
        std::thread::scope(|s| {
            for h in &handles {
                for _ in 0..2 {
                    s.spawn(move || {
                        for _ in 0..2000 {
                            if let Some(f) = h.acquire() {
                                assert!(h.in_use() <= 2, "over the quota");
                                drop(f.freeze().clone());
                            }
                        }
                    });
                }
            }
        });
        for h in &handles {
            assert_eq!(h.in_use(), 0);
        }
        assert!(pool.allocated() <= 6);
        assert_eq!(pool.available(), pool.allocated());
        assert!(pool.sharing().peak <= 6);
    }

    #[test]
    fn concurrent_drops_return_every_frame() {
        let pool = FramePool::new(16, 16, 4);
        for _ in 0..200 {
            let f = pool.acquire().unwrap().freeze();
            let clones: Vec<Frame> = (0..4).map(|_| f.clone()).collect();
            drop(f);
            std::thread::scope(|s| {
                for c in clones {
                    s.spawn(move || drop(c));
                }
            });
            assert_eq!(pool.available(), 4);
        }
    }
}
