//! The child's mappings of its parent's shared frame pools: how an isolated plugin reads its
//! inputs and writes its output in place, without a copy.
//!
//! A pool is mapped the first time a request names it (by its id; the memfd is opened through
//! `/proc/PPID/fd/FD`), all of it at once: the memfd is sized for the pool's whole capacity when
//! the pool is made and never grows, so one mapping serves for as long as the pool lives. Each
//! slot gets its own mapping with a **no-access page before and after it** (the rest of a
//! `PROT_NONE` reservation), and a frame's pixels end where their slot ends: a plugin writing past
//! the end of its output (or reading past an input) dies of SIGSEGV at that access, as with the
//! guarded output slots of the instance's own memory.
//!
//! Every slot is mapped **read-only**. Only the slot holding the output of the frame being served
//! is made writable (`mprotect`), for that frame only, and read-only again before the frame is
//! reported done. So a plugin cannot write its inputs, nor any other frame of the pool (frames
//! other nodes are reading), nor its own output once delivered: any such write is a SIGSEGV,
//! reported and replaced like any crash. (This guards against bugs, not malice: a child that
//! wanted to could open the memfd again for writing.)
//!
//! Mappings unused for two frames are dropped, and at most [`MAX_POOLS`] are kept, so a pool the
//! parent has dropped (a graph edit made new ones) does not stay alive in the child.

use std::fs::File;
use std::ptr::NonNull;

use framepipe_core::SharedFrame;
use rustix::mm;

/// Pools mapped at once at most (a request names at most four: three inputs and the output).
pub(crate) const MAX_POOLS: usize = 8;

struct PoolMap {
    id: u64,
    /// Start of the reservation: a guard page, then each slot followed by a guard page.
    base: NonNull<u8>,
    len: usize,
    span: usize,
    slots: usize,
    page: usize,
    /// The last frame (`PoolMaps::stamp`) that named this pool.
    used: u64,
}

impl PoolMap {
    fn open(ppid: i32, f: &SharedFrame, page: usize) -> Result<PoolMap, String> {
        let bad = || format!("pool {} named with a bad shape: {f:?}", f.pool_id);
        if f.span == 0 || !f.span.is_multiple_of(page) || f.slots == 0 {
            return Err(bad());
        }
        let stride = f.span.checked_add(page).ok_or_else(bad)?;
        let len = stride
            .checked_mul(f.slots)
            .and_then(|n| n.checked_add(page))
            .ok_or_else(bad)?;
        let file = File::options()
            .read(true)
            .write(true)
            .open(format!("/proc/{ppid}/fd/{}", f.fd))
            .map_err(|e| format!("cannot open the parent's frame pool {}: {e}", f.pool_id))?;
        let have = file.metadata().map_err(|e| e.to_string())?.len();
        if have != (f.span * f.slots) as u64 {
            return Err(format!(
                "frame pool {} is {have} bytes, expected {} slots of {}",
                f.pool_id, f.slots, f.span
            ));
        }
        // SAFETY: a fresh private reservation of address space (no access, no memory) at an
        // address the kernel picks: it aliases nothing.
        let base = unsafe {
            mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                mm::ProtFlags::empty(),
                mm::MapFlags::PRIVATE | mm::MapFlags::NORESERVE,
            )
        }
        .map_err(|e| {
            format!(
                "cannot reserve {len} bytes for frame pool {}: {}",
                f.pool_id,
                std::io::Error::from(e)
            )
        })?;
        let map = PoolMap {
            id: f.pool_id,
            base: NonNull::new(base.cast()).expect("mmap never returns null on success"),
            len,
            span: f.span,
            slots: f.slots,
            page,
            used: 0,
        };
        for k in 0..f.slots {
            // SAFETY: replaces pages of our own reservation (MAP_FIXED inside it, leaving the
            // guard pages around the slot as they are) with slot k of a file that long (checked).
            let r = unsafe {
                mm::mmap(
                    map.slot_addr(k).cast(),
                    f.span,
                    mm::ProtFlags::READ,
                    mm::MapFlags::SHARED | mm::MapFlags::FIXED,
                    &file,
                    (k * f.span) as u64,
                )
            };
            if let Err(e) = r {
                // `map` drops: the whole reservation is unmapped.
                return Err(format!(
                    "cannot map frame pool {}: {}",
                    f.pool_id,
                    std::io::Error::from(e)
                ));
            }
        }
        // The mappings keep the memfd; the descriptor is closed here.
        Ok(map)
    }

    fn slot_addr(&self, k: usize) -> *mut u8 {
        debug_assert!(k < self.slots);
        // SAFETY: inside the reservation: page + k * (span + page) + span + page <= len.
        unsafe {
            self.base
                .as_ptr()
                .add(self.page + k * (self.span + self.page))
        }
    }

    /// The slot and the offset in it of the `bytes` bytes at `offset` in the file, checked to lie
    /// within one slot.
    fn place(&self, f: &SharedFrame, bytes: usize) -> Result<(usize, usize), String> {
        if f.span != self.span || f.slots != self.slots {
            return Err(format!(
                "frame pool {} named with another shape: {f:?}",
                self.id
            ));
        }
        let (k, within) = (f.offset / self.span, f.offset % self.span);
        if k >= self.slots || within + bytes > self.span || !within.is_multiple_of(16) {
            return Err(format!(
                "frame of {bytes} bytes at {} is not inside a slot of pool {} ({} x {})",
                f.offset, self.id, self.slots, self.span
            ));
        }
        Ok((k, within))
    }
}

impl Drop for PoolMap {
    fn drop(&mut self) {
        // SAFETY: the reservation and every slot mapping in it are ours; no slice into them
        // outlives the frame that made it (callers make slices only after every lookup).
        let _ = unsafe { mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// The pools mapped by this child.
pub(crate) struct PoolMaps {
    ppid: i32,
    page: usize,
    maps: Vec<PoolMap>,
    /// Frames started so far.
    stamp: u64,
}

impl PoolMaps {
    pub(crate) fn new(ppid: i32) -> PoolMaps {
        PoolMaps {
            ppid,
            page: framepipe_core::shm::page_size(),
            maps: Vec::with_capacity(MAX_POOLS),
            stamp: 0,
        }
    }

    /// Starts a frame: drops the mappings not named by this frame or the one before.
    pub(crate) fn next_frame(&mut self) {
        self.stamp += 1;
        let keep_from = self.stamp.saturating_sub(2);
        self.maps.retain(|m| m.used >= keep_from);
    }

    fn find(&mut self, f: &SharedFrame) -> Result<&PoolMap, String> {
        let i = match self.maps.iter().position(|m| m.id == f.pool_id) {
            Some(i) => i,
            None => {
                if self.maps.len() >= MAX_POOLS {
                    // The least recently named one that this frame does not use.
                    let stamp = self.stamp;
                    let old = (0..self.maps.len())
                        .filter(|&i| self.maps[i].used != stamp)
                        .min_by_key(|&i| self.maps[i].used)
                        .ok_or("more pools in one frame than can be mapped")?;
                    self.maps.swap_remove(old);
                }
                self.maps.push(PoolMap::open(self.ppid, f, self.page)?);
                self.maps.len() - 1
            }
        };
        self.maps[i].used = self.stamp;
        Ok(&self.maps[i])
    }

    /// The address in this process of the `bytes` bytes of frame `f`, mapping its pool first
    /// if needed. Valid until the next [`next_frame`](Self::next_frame) (a lookup in the same
    /// frame never unmaps a pool this frame named).
    pub(crate) fn frame(&mut self, f: &SharedFrame, bytes: usize) -> Result<*mut u8, String> {
        let map = self.find(f)?;
        let (k, within) = map.place(f, bytes)?;
        // SAFETY: inside slot k's mapping (checked by `place`).
        Ok(unsafe { map.slot_addr(k).add(within) })
    }

    /// Makes the slot holding frame `f` (already looked up this frame) writable, or read-only
    /// again.
    pub(crate) fn set_writable(&self, f: &SharedFrame, writable: bool) -> Result<(), String> {
        let map = self
            .maps
            .iter()
            .find(|m| m.id == f.pool_id)
            .ok_or("set_writable on a pool not mapped")?;
        let (k, _) = map.place(f, 0)?;
        let prot = if writable {
            mm::MprotectFlags::READ | mm::MprotectFlags::WRITE
        } else {
            mm::MprotectFlags::READ
        };
        // SAFETY: exactly slot k's own mapping (page-aligned, `span` long); only its access
        // changes, and the file was opened for writing.
        unsafe { mm::mprotect(map.slot_addr(k).cast(), map.span, prot) }.map_err(|e| {
            format!(
                "cannot change the access of an output frame: {}",
                std::io::Error::from(e)
            )
        })
    }
}
