//! The memory an isolated plugin shares with its host process: one `memfd` per instance, mapped
//! by both, holding a small header (the handshake words and where this frame's inputs and output
//! are) and the instance's own frame buffers; and the futex calls with which the parent waits
//! for a new child's `ready` (frames themselves are asked for and reported over pipes: see
//! `Isolated::exchange`).
//!
//! A frame from a shared pool ([`framepipe_core::FramePool::lazy_shared`], what the runtime makes
//! once an isolated node exists) is not copied: the header names its place in the pool's memfd
//! ([`FrameRef`]) and the child reads or writes it there (`poolmap.rs`). The instance's own
//! buffers serve frames from heap pools (copied in and out, as before zero-copy) and keep the
//! last good output for `on-crash=hold`.
//!
//! Layout: the [`Header`] in the first 4 KiB page, then `inputs` input buffers (each starting on
//! a page), then two output slots (the child writes the one the parent names; the other keeps the
//! last good output for `on-crash=hold`). Each output slot *ends* where a guard page begins, which
//! the child maps with no access ([`Shm::guard_outputs`]): a plugin writing past the end of its
//! output frame (partik0l at small sizes) dies of SIGSEGV at that write, reported as a crash,
//! instead of corrupting something quietly. (A pool frame gets the same guard in the child's
//! mapping of the pool.)

use std::fs::File;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use framepipe_core::SharedFrame;
use rustix::fs::MemfdFlags;
use rustix::mm;
use rustix::thread::futex;

/// Bytes kept for the header.
const HEADER_BYTES: usize = 4096;
const _: () = assert!(std::mem::size_of::<Header>() <= HEADER_BYTES);

/// The handshake words at the start of the shared memory. Both processes only ever touch them
/// through atomics.
#[repr(C)]
pub(crate) struct Header {
    /// The parent stores a new (incremented) frame number here to ask for a frame.
    pub req: AtomicU32,
    /// The child stores the frame number here once the frame's output is written.
    pub done: AtomicU32,
    /// The child stores 1 once the plugin is loaded and its instance made.
    pub ready: AtomicU32,
    /// The output slot (0 or 1) the child is to write for the requested frame.
    pub slot: AtomicU32,
    /// The frame's time argument (`f64::to_bits`).
    pub time: AtomicU64,
    /// Where this frame's inputs are (as many as the plugin takes).
    pub inputs: [FrameRef; 3],
    /// Where this frame's output goes.
    pub output: FrameRef,
}

/// Where one frame of a request is: a place in one of the parent's shared pools, or (`pool` 0)
/// the instance's own buffer (input buffer `i`, or the output slot `Header::slot`). Written by the
/// parent before it stores `req`, read by the child after it loads `req`.
#[repr(C)]
pub(crate) struct FrameRef {
    /// [`SharedFrame::pool_id`], or 0.
    pool: AtomicU64,
    offset: AtomicU64,
    span: AtomicU64,
    slots: AtomicU32,
    fd: AtomicU32,
}

impl FrameRef {
    /// Names a pool frame (`Some`) or the instance's own buffer (`None`).
    pub(crate) fn set(&self, frame: Option<SharedFrame>) {
        match frame {
            Some(f) => {
                self.offset.store(f.offset as u64, Ordering::Relaxed);
                self.span.store(f.span as u64, Ordering::Relaxed);
                self.slots.store(f.slots as u32, Ordering::Relaxed);
                self.fd.store(f.fd as u32, Ordering::Relaxed);
                self.pool.store(f.pool_id, Ordering::Relaxed);
            }
            None => self.pool.store(0, Ordering::Relaxed),
        }
    }

    /// What [`set`](Self::set) stored (the child, after loading `req` with acquire).
    pub(crate) fn get(&self) -> Option<SharedFrame> {
        let pool = self.pool.load(Ordering::Relaxed);
        (pool != 0).then(|| SharedFrame {
            pool_id: pool,
            fd: self.fd.load(Ordering::Relaxed) as i32,
            span: self.span.load(Ordering::Relaxed) as usize,
            slots: self.slots.load(Ordering::Relaxed) as usize,
            offset: self.offset.load(Ordering::Relaxed) as usize,
        })
    }
}

/// A shared mapping of a memfd.
pub(crate) struct Shm {
    file: File,
    ptr: *mut u8,
    len: usize,
    /// Bytes in one frame buffer (rounded up to whole pages).
    stride: usize,
    /// u32 words in one frame.
    words: usize,
    inputs: usize,
}

// SAFETY: the mapping is plain memory valid until `drop`; which process writes which part when
// is the handshake's contract (see `input_mut`, `output`, `output_mut`), not the thread's.
unsafe impl Send for Shm {}

fn page_round(n: usize) -> usize {
    n.div_ceil(HEADER_BYTES) * HEADER_BYTES
}

/// Total length of the region for `inputs` inputs of `words` u32 each.
pub(crate) fn region_len(inputs: usize, words: usize) -> usize {
    let frame = page_round(words * 4);
    HEADER_BYTES + inputs * frame + 2 * (frame + HEADER_BYTES)
}

impl Shm {
    /// A new anonymous shared memory file of the right size, mapped here (parent side).
    pub(crate) fn create(name: &str, inputs: usize, words: usize) -> std::io::Result<Shm> {
        let file = framepipe_core::shm::memfd(&format!("framepipe-{name}"), MemfdFlags::empty())?;
        let len = region_len(inputs, words);
        file.set_len(len as u64)?;
        Shm::map(file, inputs, words)
    }

    /// Maps an existing region (child side: the file opened through `/proc/PPID/fd/N`), checking
    /// its size against what `inputs` and `words` need.
    pub(crate) fn open(file: File, inputs: usize, words: usize) -> std::io::Result<Shm> {
        let have = file.metadata()?.len();
        let want = region_len(inputs, words) as u64;
        if have != want {
            return Err(std::io::Error::other(format!(
                "shared memory of {have} bytes, expected {want}"
            )));
        }
        Shm::map(file, inputs, words)
    }

    fn map(file: File, inputs: usize, words: usize) -> std::io::Result<Shm> {
        let len = region_len(inputs, words);
        // A file at least `len` long: made so (`create`) or checked (`open`).
        let ptr = framepipe_core::shm::map_shared(&file, len)?.as_ptr();
        Ok(Shm {
            file,
            ptr: ptr.cast(),
            len,
            stride: page_round(words * 4),
            words,
            inputs,
        })
    }

    /// The memfd (for the child to open through `/proc`).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// The handshake words.
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the first page is mapped for as long as `self`, page-aligned, and only accessed
        // through the atomics of `Header` (all-zero bytes are a valid `Header`).
        unsafe { &*self.ptr.cast::<Header>() }
    }

    /// Byte offset of input `i` (page-aligned) or output slot `i - inputs` (ending at its guard
    /// page; 16-byte aligned since a frame is a multiple of 8x8 pixels).
    fn offset(&self, index: usize) -> usize {
        debug_assert!(index < self.inputs + 2);
        if index < self.inputs {
            HEADER_BYTES + index * self.stride
        } else {
            let slot = index - self.inputs;
            let span = self.stride + HEADER_BYTES;
            HEADER_BYTES + self.inputs * self.stride + slot * span + self.stride - self.words * 4
        }
    }

    fn buffer_ptr(&self, index: usize) -> *mut u32 {
        // SAFETY: within the mapping (region_len counts every buffer and guard page).
        unsafe { self.ptr.add(self.offset(index)).cast() }
    }

    /// Makes the page after each output slot inaccessible in this process's mapping (the child
    /// calls it once): writing past the end of an output frame is then a SIGSEGV.
    pub(crate) fn guard_outputs(&self) -> std::io::Result<()> {
        for slot in 0..2 {
            let end = self.offset(self.inputs + slot) + self.words * 4;
            // SAFETY: `end` is page-aligned (each slot ends on a page boundary) and the guard
            // page lies inside our mapping; nothing of ours lives in it.
            unsafe {
                mm::mprotect(
                    self.ptr.add(end).cast(),
                    HEADER_BYTES,
                    mm::MprotectFlags::empty(),
                )
            }?;
        }
        Ok(())
    }

    /// Input buffer `i`, to write.
    ///
    /// # Safety
    /// Only while the other process does not read or write it: the parent between frames (the
    /// child has set `done` for the last request, or is dead).
    #[allow(clippy::mut_from_ref)] // exclusivity is the handshake's contract, stated above
    pub(crate) unsafe fn input_mut(&self, i: usize) -> &mut [u32] {
        assert!(i < self.inputs);
        // SAFETY: mapped, aligned, `words` u32 long; exclusive per the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.buffer_ptr(i), self.words) }
    }

    /// Input buffer `i`, to read.
    ///
    /// # Safety
    /// Only while the other process does not write it (the child during a frame).
    pub(crate) unsafe fn input(&self, i: usize) -> &[u32] {
        assert!(i < self.inputs);
        // SAFETY: mapped, aligned, `words` u32 long; not written meanwhile per the contract.
        unsafe { std::slice::from_raw_parts(self.buffer_ptr(i), self.words) }
    }

    /// Output slot `s` (0 or 1), to read.
    ///
    /// # Safety
    /// Only while the other process does not write it: the parent after `done` (or once the
    /// child is dead), or the slot the child was not asked to write.
    pub(crate) unsafe fn output(&self, s: usize) -> &[u32] {
        assert!(s < 2);
        // SAFETY: mapped, aligned, `words` u32 long; not written meanwhile per the contract.
        unsafe { std::slice::from_raw_parts(self.buffer_ptr(self.inputs + s), self.words) }
    }

    /// Output slot `s`, to write.
    ///
    /// # Safety
    /// Only by the child, for the slot the current request names, between `req` and `done`.
    #[allow(clippy::mut_from_ref)] // exclusivity is the handshake's contract, stated above
    pub(crate) unsafe fn output_mut(&self, s: usize) -> &mut [u32] {
        assert!(s < 2);
        // SAFETY: mapped, aligned, `words` u32 long; exclusive per the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.buffer_ptr(self.inputs + s), self.words) }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: our own mapping; no slice into it outlives `self` (they borrow it).
        let _ = unsafe { mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// Waits until `word` no longer holds `expected`, a wake-up, or `timeout` (whichever first;
/// spurious returns are possible: callers re-check). A shared (not process-private) futex.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = futex::Timespec {
        tv_sec: timeout.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: timeout.subsec_nanos().into(),
    };
    // Every outcome (woken, `word` changed, timed out, interrupted) leads the caller to re-check.
    let _ = futex::wait(word, futex::Flags::empty(), expected, Some(&ts));
}

/// Wakes the waiters on `word` (in either process).
pub(crate) fn futex_wake(word: &AtomicU32) {
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}

/// Stores `value` (release) and wakes the other side.
pub(crate) fn publish(word: &AtomicU32, value: u32) {
    word.store(value, Ordering::Release);
    futex_wake(word);
}
