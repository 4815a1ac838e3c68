//! The shared memory a shared frame pool ([`FramePool::lazy_shared`]) keeps its buffers in: one
//! `memfd` per pool, sized for the pool's whole capacity when the pool is made and mapped once, in
//! full, into this process. Sizing it costs nothing: a memfd is sparse, and a buffer's pages are
//! allocated when the pool writes them the first time (the pool stays lazy, as a heap pool is).
//!
//! Layout: slot `k` of the pool is the `span` bytes at `k * span` (`span`: the frame's bytes
//! rounded up to whole pages), and its pixels *end* where the slot ends (exactly for frames whose
//! bytes are a multiple of 16, frei0r's sizes; else within 15 bytes). A process that maps each
//! slot with a no-access page after it (the isolated plugin host does) therefore catches a write
//! past the end of a frame at that write.
//!
//! [`FramePool::lazy_shared`]: crate::FramePool::lazy_shared
#![allow(unsafe_code)] // mmap, munmap and the mapped slots; see the SAFETY comments

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm;

/// Pool ids: unique in this process, never reused (0 means "no pool").
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Set once something in this process runs frames in another process (an isolated plugin).
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks that the frame pools made from now on live in shared memory
/// ([`FramePool::lazy_shared`](crate::FramePool::lazy_shared)), so that a child process can read
/// and write their frames in place. The frei0r host calls it when it builds an isolated node; the
/// runtime reads it ([`shared_pools_requested`]) when it makes a run's pools. It stays on for the
/// rest of the process.
pub fn request_shared_pools() {
    REQUESTED.store(true, Ordering::Relaxed);
}

/// Whether [`request_shared_pools`] was called in this process.
pub fn shared_pools_requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// A new anonymous shared memory file (`memfd_create`, close-on-exec, plus `flags`), empty.
/// A name holding a NUL byte is replaced by `framepipe-shm`.
pub fn memfd(name: &str, flags: MemfdFlags) -> std::io::Result<File> {
    let name = if name.contains('\0') {
        "framepipe-shm"
    } else {
        name
    };
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | flags)?;
    Ok(File::from(fd))
}

/// Maps the first `len` bytes of `file` shared, readable and writable. The caller unmaps it
/// (`munmap(ptr, len)`) and reads or writes it only within a file at least `len` long.
pub fn map_shared(file: &File, len: usize) -> std::io::Result<NonNull<u8>> {
    // SAFETY: a new mapping at an address the kernel picks (no MAP_FIXED): it aliases no Rust
    // object.
    let ptr = unsafe {
        mm::mmap(
            std::ptr::null_mut(),
            len,
            mm::ProtFlags::READ | mm::ProtFlags::WRITE,
            mm::MapFlags::SHARED,
            file,
            0,
        )
    }?;
    NonNull::new(ptr.cast()).ok_or_else(|| std::io::Error::other("mmap returned null"))
}

/// The page size of this machine.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// Where a frame of a shared pool lives: enough for another process to map the pool's memfd
/// (opening `/proc/PID/fd/FD` of this process) and find the frame in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedFrame {
    /// The pool's id, unique in this process and never reused: a mapping of the pool made once
    /// can be found again by it (the descriptor number may be reused by a later pool).
    pub pool_id: u64,
    /// The pool's memfd, a descriptor of this process, open as long as the pool (and so as long
    /// as this frame) exists.
    pub fd: RawFd,
    /// Bytes per slot, a multiple of the page size; slot `k` starts at `k * span`.
    pub span: usize,
    /// Slots in the memfd (the pool's capacity): the file is `slots * span` bytes long.
    pub slots: usize,
    /// Byte offset of the frame's first pixel in the memfd (16-byte aligned; the pixels end at
    /// the end of their slot, within 15 bytes).
    pub offset: usize,
}

/// A pool's memfd, mapped read-write here in full.
pub(crate) struct SharedRegion {
    file: File,
    ptr: NonNull<u8>,
    len: usize,
    id: u64,
    span: usize,
    slots: usize,
}

// SAFETY: the mapping is plain memory that stays valid until `drop`; who writes which slot when
// is the pool's contract (a slot's bytes are reached only through its handles), not the thread's.
unsafe impl Send for SharedRegion {}
// SAFETY: as above; `&SharedRegion` hands out only addresses, never references into the memory.
unsafe impl Sync for SharedRegion {}

impl SharedRegion {
    /// A memfd of `slots` slots of `span` bytes, mapped here. Nothing is allocated but the
    /// address space: the pages come when they are first written.
    pub(crate) fn create(name: &str, span: usize, slots: usize) -> std::io::Result<SharedRegion> {
        let len = span
            .checked_mul(slots)
            .filter(|&l| l > 0 && span.is_multiple_of(page_size()))
            .ok_or_else(|| {
                std::io::Error::other(format!("bad pool size: {slots} x {span} bytes"))
            })?;
        let file = memfd(&format!("framepipe-pool-{name}"), MemfdFlags::ALLOW_SEALING)?;
        file.set_len(len as u64)?;
        // Nobody (a child process that opened it included) may shrink or grow it now: a shrunk
        // file would make this process's reads of its frames fault.
        rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        let ptr = map_shared(&file, len)?;
        Ok(SharedRegion {
            file,
            ptr,
            len,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            span,
            slots,
        })
    }

    /// The address of byte `offset` of the memfd in this process (`offset` < the file's length).
    pub(crate) fn at(&self, offset: usize) -> *mut u8 {
        assert!(offset < self.len);
        // SAFETY: within the mapping, checked just above.
        unsafe { self.ptr.as_ptr().add(offset) }
    }

    /// Where byte `offset` of the file is, for another process.
    pub(crate) fn locate(&self, offset: usize) -> SharedFrame {
        SharedFrame {
            pool_id: self.id,
            fd: self.file.as_raw_fd(),
            span: self.span,
            slots: self.slots,
            offset,
        }
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        // SAFETY: our own mapping; it is dropped with the pool, after every frame handle (each
        // holds the pool), so no slice into it remains.
        let _ = unsafe { mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
