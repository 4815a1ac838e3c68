//! Frames and the pool they come from.
//!
//! The engine's pixel format is RGBA, 8 bits per channel, laid out as frei0r wants it: rows of
//! `width * 4` bytes with no padding, the buffer 16-byte aligned. Other formats are converted at
//! the pipeline's edges.
//!
//! A [`FramePool`] allocates all its buffers once, when it is made, and writes every page of them
//! so that no page fault happens later. After that, [`FramePool::acquire`] and dropping a frame
//! neither allocate nor lock: the free list is a bounded lock-free queue of slot indices.
//!
//! Ownership is in the types:
//! * [`FrameMut`] is the only handle to its buffer; only it can write the pixels.
//! * [`Frame`] is a shared, read-only handle; cloning it bumps a reference count. To write, turn it
//!   back into a [`FrameMut`] with [`Frame::try_into_mut`] (succeeds only for the last holder) or
//!   [`Frame::into_mut`] (copies into a fresh pool frame when others still hold it: copy on write).
//! * A buffer goes back to its pool when its last handle drops, and no handle can outlive that:
//!
//! ```compile_fail
//! # use framepipe_core::FramePool;
//! let pool = FramePool::new(8, 8, 1);
//! let frame = pool.acquire().unwrap().freeze();
//! frame.data_mut()[0] = 1; // a shared frame cannot be written
//! ```
//!
//! ```compile_fail
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
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use crate::error::{Error, Result};

/// 16 bytes aligned to 16: the unit frame buffers are allocated in, which gives frei0r's alignment
/// without any unsafe allocation code.
#[repr(C, align(16))]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Block([u8; 16]);

struct Slot {
    /// Number of live handles; 0 while the slot is in the free list.
    refs: AtomicUsize,
    data: UnsafeCell<Box<[Block]>>,
}

struct PoolInner {
    width: u32,
    height: u32,
    bytes: usize,
    slots: Box<[Slot]>,
    free: ArrayQueue<usize>,
}

// SAFETY: a slot's buffer is written only through the one `FrameMut` that holds it (refs == 1,
// no `Frame` exists), and read through `Frame`s only while no `FrameMut` exists; the reference
// count and the free queue's release/acquire ordering make those phases happen-before each other.
unsafe impl Sync for PoolInner {}

impl PoolInner {
    fn bytes_of(&self, idx: usize) -> &[u8] {
        // SAFETY: callers hold a live handle to slot `idx`, so the buffer is not being written
        // (only a unique FrameMut writes, and then the caller is that FrameMut borrowed shared).
        let blocks: &[Block] = unsafe { &*self.slots[idx].data.get() };
        &bytemuck::cast_slice(blocks)[..self.bytes]
    }

    /// # Safety
    /// The caller must be the unique handle (a `FrameMut`) to slot `idx`, borrowed mutably.
    #[allow(clippy::mut_from_ref)] // the exclusivity is the caller's contract, stated above
    unsafe fn bytes_of_mut(&self, idx: usize) -> &mut [u8] {
        // SAFETY: guaranteed by the caller: nobody else can read or write this buffer now.
        let blocks: &mut [Block] = unsafe { &mut *self.slots[idx].data.get() };
        &mut bytemuck::cast_slice_mut(blocks)[..self.bytes]
    }

    fn release(&self, idx: usize) {
        if self.slots[idx].refs.fetch_sub(1, Ordering::Release) == 1 {
            // Make every other holder's reads happen before the next owner's writes.
            fence(Ordering::Acquire);
            // Cannot fail: the queue holds every slot index at most once and has room for all.
            let _ = self.free.push(idx);
        }
    }
}

/// A pool of equally sized RGBA frames, allocated and touched once.
///
/// Cloning the pool is cheap (a reference count); frames keep their pool alive.
#[derive(Clone)]
pub struct FramePool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for FramePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FramePool")
            .field("width", &self.inner.width)
            .field("height", &self.inner.height)
            .field("capacity", &self.capacity())
            .field("available", &self.available())
            .finish()
    }
}

impl FramePool {
    /// Allocates `capacity` frames of `width` x `height` and writes every byte of them (opaque
    /// black) so that their pages are resident before the first frame is processed.
    ///
    /// # Panics
    /// If `width`, `height` or `capacity` is zero. Sizes are validated by the caller (sources check
    /// them against their limits before a pool is made).
    pub fn new(width: u32, height: u32, capacity: usize) -> Self {
        assert!(width > 0 && height > 0 && capacity > 0, "empty frame pool");
        let bytes = width as usize * height as usize * 4;
        let blocks = bytes.div_ceil(16);
        let free = ArrayQueue::new(capacity);
        let slots: Box<[Slot]> = (0..capacity)
            .map(|i| {
                // Opaque black: a non-zero pattern, so the writes cannot be elided and every
                // page is faulted in now rather than on the frame path.
                let data =
                    vec![Block([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255]); blocks];
                let _ = free.push(i);
                Slot {
                    refs: AtomicUsize::new(0),
                    data: UnsafeCell::new(data.into_boxed_slice()),
                }
            })
            .collect();
        FramePool {
            inner: Arc::new(PoolInner {
                width,
                height,
                bytes,
                slots,
                free,
            }),
        }
    }

    /// Takes a free frame, or `None` when all are in use. Lock-free, allocation-free.
    pub fn acquire(&self) -> Option<FrameMut> {
        let idx = self.inner.free.pop()?;
        self.inner.slots[idx].refs.store(1, Ordering::Relaxed);
        Some(FrameMut {
            pool: Arc::clone(&self.inner),
            idx,
        })
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

    /// Number of frames the pool owns.
    pub fn capacity(&self) -> usize {
        self.inner.slots.len()
    }

    /// Number of frames free right now.
    pub fn available(&self) -> usize {
        self.inner.free.len()
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
        /// The pool this frame belongs to.
        pub fn pool(&self) -> FramePool {
            FramePool {
                inner: Arc::clone(&self.pool),
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
