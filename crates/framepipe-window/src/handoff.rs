//! The hand-off of frames from the output thread to the window thread: a wait-free triple
//! buffer whose slots hold either a shared [`Frame`] (no copy) or a copy of its pixels.
//!
//! # The contract
//! * **The writer never waits** ([`Writer::publish`], on the output thread): one atomic
//!   compare-and-swap loop that only retries when the reader changed the state in between (at
//!   most twice per publish: the reader takes once and releases once per frame it reads), no
//!   lock that the reader can hold, no allocation. The reader never waits for the writer either.
//! * **The newest frame is never lost**: a publish replaces an unread frame; the reader always
//!   gets the last frame published (so a paused show shows the frame it paused on).
//! * **At most one pool frame is kept** between publishes ([`framepipe_core::Sink`]'s rule: a
//!   sink may keep one clone; the runtime's pools count exactly one). Normally the writer
//!   publishes a clone of the frame (a reference count, nothing copied). When the reader is
//!   still holding the previous frame, publishing another clone would keep two, so the writer
//!   copies the pixels into its slot's own buffer instead (one `memcpy` of the frame, made
//!   rare by the reader: it copies a frame it takes into its own slot and lets go of it at once).
//!
//! Three slots: the writer owns one (`back`), the reader owns one (`front`), and one is in the
//! middle. An atomic byte holds the middle's index, whether it is fresh (published and not yet
//! taken), whether it holds a frame, and whether the reader holds a frame. Each slot's contents
//! sit behind a `Mutex` that only the slot's current owner ever takes, so `try_lock` never
//! finds it taken; that keeps the crate free of `unsafe` (a failed `try_lock` would be a bug:
//! it is counted, never waited on).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use framepipe_core::{Frame, FrameCtx};

const INDEX: u8 = 0b0011;
const FRESH: u8 = 0b0100;
const MIDDLE_FRAME: u8 = 0b1000;
const READER_FRAME: u8 = 0b1_0000;

/// One slot's contents.
#[derive(Debug)]
struct Slot {
    /// A shared frame (nothing copied), or `None` when the pixels are in `bytes`.
    frame: Option<Frame>,
    /// Room for one frame's pixels, allocated once.
    bytes: Box<[u8]>,
    /// The frame's context.
    ctx: FrameCtx,
    /// Whether the slot holds a picture at all.
    full: bool,
}

#[derive(Debug)]
struct Shared {
    state: AtomicU8,
    slots: [Mutex<Slot>; 3],
    /// Frames published as a clone.
    shared: AtomicU64,
    /// Frames published as a copy (the reader held the previous frame).
    copied: AtomicU64,
    /// Frames replaced before the reader took them (the window was slower than the show).
    replaced: AtomicU64,
    /// `try_lock` failures (a bug if ever non-zero; the frame was not shown).
    contended: AtomicU64,
}

/// Counts of what the hand-off did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandoffStats {
    /// Frames handed over as a shared clone.
    pub shared: u64,
    /// Frames handed over as a copy.
    pub copied: u64,
    /// Frames replaced by a newer one before the window took them.
    pub replaced: u64,
    /// Slots found locked (should be 0).
    pub contended: u64,
}

/// Makes the two ends of a hand-off for frames of `bytes` bytes each (allocated here, three
/// times).
pub fn handoff(bytes: usize) -> (Writer, Reader) {
    let slot = || {
        Mutex::new(Slot {
            frame: None,
            bytes: vec![0u8; bytes].into_boxed_slice(),
            ctx: FrameCtx::new(0, 0),
            full: false,
        })
    };
    let shared = Arc::new(Shared {
        // Middle = slot 1; the writer owns 0, the reader 2.
        state: AtomicU8::new(1),
        slots: [slot(), slot(), slot()],
        shared: AtomicU64::new(0),
        copied: AtomicU64::new(0),
        replaced: AtomicU64::new(0),
        contended: AtomicU64::new(0),
    });
    (
        Writer {
            shared: Arc::clone(&shared),
            back: 0,
        },
        Reader {
            shared,
            front: 2,
            holds_frame: false,
        },
    )
}

/// The output thread's end.
#[derive(Debug)]
pub struct Writer {
    shared: Arc<Shared>,
    back: usize,
}

impl Writer {
    /// Hands `frame` over (see the module's contract). Wait-free, allocation-free. A frame of
    /// another size than the hand-off was made for is not shown (counted as contended).
    pub fn publish(&mut self, ctx: &FrameCtx, frame: &Frame) {
        let sh = &*self.shared;
        let mut s = sh.state.load(Ordering::Acquire);
        let mut as_frame = s & READER_FRAME == 0;
        // Fill the back slot, and let go of its lock before publishing it: once published the
        // reader may take it at once.
        if !self.fill(frame, ctx, as_frame) {
            return;
        }
        loop {
            let kind = if as_frame { MIDDLE_FRAME } else { 0 };
            let new = self.back as u8 | FRESH | kind | (s & READER_FRAME);
            match sh
                .state
                .compare_exchange(s, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(now) => {
                    // The reader took the middle or let go of a frame in between. The back slot
                    // is still ours: if the reader now holds a frame, copy instead of keeping a
                    // second one.
                    if as_frame && now & READER_FRAME != 0 {
                        as_frame = false;
                        if !self.fill(frame, ctx, false) {
                            return;
                        }
                    }
                    s = now;
                }
            }
        }
        if as_frame {
            sh.shared.fetch_add(1, Ordering::Relaxed);
        } else {
            sh.copied.fetch_add(1, Ordering::Relaxed);
        }
        if s & FRESH != 0 {
            sh.replaced.fetch_add(1, Ordering::Relaxed);
        }
        // The old middle is ours now; let go of a frame it held (one the reader never took).
        self.back = usize::from(s & INDEX);
        if let Ok(mut old) = sh.slots[self.back].try_lock() {
            old.frame = None;
            old.full = false;
        } else {
            sh.contended.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Puts `frame` in the back slot: a clone (`as_frame`) or a copy of its pixels. `false`
    /// (counted) if the slot is locked, which the protocol rules out, or the size is wrong.
    fn fill(&self, frame: &Frame, ctx: &FrameCtx, as_frame: bool) -> bool {
        let sh = &*self.shared;
        let Ok(mut slot) = sh.slots[self.back].try_lock() else {
            sh.contended.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        if frame.data().len() != slot.bytes.len() {
            sh.contended.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if as_frame {
            slot.frame = Some(frame.clone());
        } else {
            slot.frame = None;
            slot.bytes.copy_from_slice(frame.data());
        }
        slot.ctx = *ctx;
        slot.full = true;
        true
    }

    /// What the hand-off did so far.
    pub fn stats(&self) -> HandoffStats {
        self.shared.stats()
    }
}

impl Shared {
    fn stats(&self) -> HandoffStats {
        HandoffStats {
            shared: self.shared.load(Ordering::Relaxed),
            copied: self.copied.load(Ordering::Relaxed),
            replaced: self.replaced.load(Ordering::Relaxed),
            contended: self.contended.load(Ordering::Relaxed),
        }
    }
}

/// The window thread's end.
#[derive(Debug)]
pub struct Reader {
    shared: Arc<Shared>,
    front: usize,
    holds_frame: bool,
}

impl Reader {
    /// Takes the newest published picture, if one came since the last call, and gives its
    /// pixels (RGBA) and context to `read`. A shared frame is first copied into the reader's
    /// own slot and let go of (so the writer rarely has to copy); `read` then works on that
    /// copy at leisure. Returns whether there was a new picture.
    pub fn take(&mut self, read: impl FnOnce(&FrameCtx, &[u8])) -> bool {
        let sh = &*self.shared;
        let mut s = sh.state.load(Ordering::Acquire);
        if s & FRESH == 0 {
            return false;
        }
        loop {
            let holds = if s & MIDDLE_FRAME != 0 {
                READER_FRAME
            } else {
                0
            };
            let new = self.front as u8 | holds;
            match sh
                .state
                .compare_exchange(s, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        self.front = usize::from(s & INDEX);
        self.holds_frame = s & MIDDLE_FRAME != 0;
        let Ok(mut slot) = sh.slots[self.front].try_lock() else {
            sh.contended.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        if let Some(frame) = slot.frame.take() {
            slot.bytes.copy_from_slice(frame.data());
        }
        if self.holds_frame {
            self.holds_frame = false;
            sh.state.fetch_and(!READER_FRAME, Ordering::AcqRel);
        }
        if !slot.full {
            return false;
        }
        read(&slot.ctx, &slot.bytes);
        true
    }

    /// Whether a picture was published since the last [`take`](Self::take) (a look, nothing
    /// taken).
    pub fn fresh(&self) -> bool {
        self.shared.state.load(Ordering::Acquire) & FRESH != 0
    }

    /// Gives the picture taken last (again) to `read`, for a redraw; `false` if none yet.
    pub fn last(&self, read: impl FnOnce(&FrameCtx, &[u8])) -> bool {
        let sh = &*self.shared;
        let Ok(slot) = sh.slots[self.front].try_lock() else {
            sh.contended.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        if !slot.full {
            return false;
        }
        read(&slot.ctx, &slot.bytes);
        true
    }

    /// What the hand-off did so far.
    pub fn stats(&self) -> HandoffStats {
        self.shared.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framepipe_core::FramePool;

    fn frame(pool: &FramePool, value: u8) -> Frame {
        let mut f = pool.try_acquire().unwrap();
        f.data_mut().fill(value);
        f.freeze()
    }

    fn ctx(seq: u64) -> FrameCtx {
        FrameCtx::new(seq, 0)
    }

    #[test]
    fn the_newest_frame_wins_and_at_most_one_is_kept() {
        let pool = FramePool::new(4, 2, 8);
        let (mut w, mut r) = handoff(4 * 2 * 4);
        for v in 1..=5u8 {
            let f = frame(&pool, v);
            w.publish(&ctx(v.into()), &f);
            drop(f);
            // Only the hand-off holds a frame now: one.
            assert_eq!(pool.available(), pool.allocated() - 1, "after frame {v}");
        }
        let mut seen = None;
        assert!(r.take(|c, px| seen = Some((c.seq, px[0]))));
        assert_eq!(seen, Some((5, 5)));
        // Taken and copied: no frame is kept any more.
        assert_eq!(pool.available(), pool.allocated());
        assert!(!r.take(|_, _| panic!("nothing new")));
        let s = w.stats();
        assert_eq!((s.shared, s.copied, s.replaced, s.contended), (5, 0, 4, 0));
    }

    #[test]
    fn a_frame_published_while_the_reader_holds_one_is_copied() {
        let pool = FramePool::new(4, 2, 8);
        let (mut w, mut r) = handoff(4 * 2 * 4);
        let a = frame(&pool, 1);
        w.publish(&ctx(1), &a);
        // The reader takes the middle (state says it holds a frame) ...
        let s = r.shared.state.load(Ordering::Acquire);
        r.shared
            .state
            .compare_exchange(
                s,
                r.front as u8 | READER_FRAME,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .unwrap();
        r.front = usize::from(s & INDEX);
        r.holds_frame = true;
        // ... and while it does, the writer must not keep a second frame.
        let b = frame(&pool, 2);
        w.publish(&ctx(2), &b);
        drop(b);
        assert_eq!(w.stats().copied, 1);
        // Frames held: `a` (ours and the reader's slot): 1 buffer; `b` none.
        assert_eq!(pool.available(), pool.allocated() - 1);
        drop(a);
        // The reader finishes with its frame, then takes the copy of `b`.
        r.shared.slots[r.front].lock().unwrap().frame = None;
        r.shared.state.fetch_and(!READER_FRAME, Ordering::AcqRel);
        r.holds_frame = false;
        let mut seen = None;
        assert!(r.take(|c, px| seen = Some((c.seq, px[0]))));
        assert_eq!(seen, Some((2, 2)));
        assert_eq!(pool.available(), pool.allocated());
    }

    #[test]
    fn threads_never_lose_the_last_frame_nor_keep_two() {
        let pool = FramePool::new(8, 8, 16);
        let (mut w, mut r) = handoff(8 * 8 * 4);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut last = 0u64;
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) {
                    r.take(|c, px| {
                        assert!(c.seq >= last, "frames go forward");
                        assert!(px.iter().all(|&b| b == c.seq as u8), "a whole frame");
                        last = c.seq;
                        reads += 1;
                    });
                }
                r.take(|c, _| last = c.seq);
                (last, reads)
            })
        };
        let n = 200_000u64;
        for seq in 1..=n {
            let f = frame(&pool, seq as u8);
            w.publish(&ctx(seq), &f);
            drop(f);
            // Besides the hand-off's one, every frame went back (the reader's is a copy).
            assert!(
                pool.available() + 1 >= pool.allocated(),
                "kept two at {seq}"
            );
        }
        done.store(true, Ordering::Release);
        let (last, reads) = reader.join().unwrap();
        assert_eq!(last, n, "the last frame reached the reader");
        assert!(reads > 0);
        assert_eq!(w.stats().contended, 0);
    }
}
