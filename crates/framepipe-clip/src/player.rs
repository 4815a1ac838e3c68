//! Clips played by a decoder thread of their own, ahead of the frames asked for: one clip
//! (`clip`), or one at a time of a bank (`clips`), all given at one picture size.
//!
//! The **decoder thread** (`fp-clip`) runs the play head ([`Cursor`]) ahead of the show: for
//! each coming output frame it gets the clip frame's picture (from its cache of decoded
//! pictures, or by decoding forward, or by seeking), hands it over in a free buffer and
//! queues it: a picture the next frame does not show again is *swapped* into the queue (its
//! cache place takes the free buffer), so that a picture is converted once and copied once,
//! into the pool frame; one shown again (speeds below 1) is copied. The **player** (the source, on the show's thread) takes the next queued picture in
//! [`Player::next`], copies it into the pool frame and gives the buffer back.
//!
//! Memory is fixed when the player starts: `depth + 1` RGBA buffers go round between the two
//! sides through two lock-free queues (a `Vec` moved through a queue is not copied and not
//! allocated), and the cache holds `cache` RGBA pictures allocated once by FFmpeg. The
//! player's side, the frame path, allocates nothing and takes no lock; the decoder thread
//! allocates what libavformat allocates for each packet it reads (outside the frame path).
//!
//! Loops cost nothing: the head wraps on the decoder thread, which decodes the next loop's
//! first frames while the last ones of this loop wait in the queue. A frame that begins a new
//! loop is marked ([`Step::wrapped`]); a clip that plays once stops before it
//! ([`Player::next`] returns `None`), and an `on-end=loop` rewind then gives it at once.
//!
//! Live changes (speed, position) start a new *generation*: the player sends the decoder
//! thread a new head, and drops queued pictures of older generations when it meets them.
//!
//! Reverse play decodes in *windows*: to give frame `i` going backwards, the thread seeks to
//! the keyframe at or before `i − (window − 1)`, decodes forward to `i`, keeps the window's
//! pictures in the cache and gives them from the cache backwards. An intra-only codec (HAP,
//! ProRes, DNxHR, MJPEG) decodes each frame once; a long-GOP one (H.264, H.265) decodes on
//! average `GOP / (2 · window) + 1` frames per frame given (the frames between the keyframe
//! and the window), so a clip meant to be played backwards is best cut with short GOPs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use ffmpeg_next as ff;

use crate::cursor::{Cursor, Span, Step, ONE};
use crate::decode::{copy_rgba, rgba_frame, ClipFile, Closed};
use crate::error::ClipError;

/// How far forward the decoder reads on rather than seeking (frames).
const READ_ON: u64 = 48;
/// How long the player sleeps between looks at an empty queue.
const POLL: Duration = Duration::from_micros(100);
/// How long the decoder thread sleeps when it has nothing to do (it is woken earlier).
const IDLE: Duration = Duration::from_millis(5);

/// A decoded picture on its way to the show.
struct Msg {
    generation: u64,
    clip: usize,
    step: Step,
    buf: ff::frame::Video,
}

/// A new head for the decoder thread.
#[derive(Debug, Clone, Copy)]
struct Command {
    generation: u64,
    clip: usize,
    cursor: Cursor,
}

/// What the two sides share.
#[derive(Debug)]
struct Shared {
    ready: ArrayQueue<Msg>,
    free: ArrayQueue<ff::frame::Video>,
    command: Mutex<Option<Command>>,
    commanded: AtomicBool,
    stop: AtomicBool,
    /// Per clip of the bank: it failed mid-play and was dropped.
    broken: Vec<AtomicBool>,
    /// Set when the thread ended on an error (its message in `error`).
    failed: AtomicBool,
    error: Mutex<Option<String>>,
}

/// How a player is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    /// Pictures queued ahead of the show.
    pub depth: usize,
    /// Pictures in the decoder's cache (the reverse window, repeats at speeds below 1).
    pub cache: usize,
}

impl Sizing {
    /// Bytes a player of this sizing holds for pictures of `frame_bytes`.
    pub fn bytes(&self, frame_bytes: u64) -> u64 {
        (self.depth as u64 + 1 + self.cache as u64) * frame_bytes
    }
}

/// The show's side of a playing clip.
pub struct Player {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    spans: Vec<Span>,
    active: usize,
    generation: u64,
    /// The picture shown last (kept for pause and for repeats).
    current: Option<Msg>,
    /// A picture taken from the queue that begins a new loop, held back at the end of a play.
    held: Option<Msg>,
    locations: Vec<String>,
}

impl std::fmt::Debug for Player {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Player")
            .field("locations", &self.locations)
            .field("active", &self.active)
            .finish()
    }
}

impl Player {
    /// Starts the decoder thread on one clip, playing `span` from head `cursor`.
    pub fn start(
        file: ClipFile,
        span: Span,
        cursor: Cursor,
        sizing: Sizing,
    ) -> Result<Self, ClipError> {
        let size = (file.info().width, file.info().height);
        Self::start_bank(vec![Place::Open(file)], vec![span], size, 0, cursor, sizing)
    }

    /// Starts the decoder thread on a bank of clips, all giving pictures of `size`, playing
    /// clip `active`'s `spans[active]` from head `cursor`. The decoder keeps one clip open at
    /// a time: the one playing.
    pub fn start_bank(
        files: Vec<Place>,
        spans: Vec<Span>,
        size: (u32, u32),
        active: usize,
        cursor: Cursor,
        sizing: Sizing,
    ) -> Result<Self, ClipError> {
        let depth = sizing.depth.max(1);
        let shared = Arc::new(Shared {
            ready: ArrayQueue::new(depth + 1),
            free: ArrayQueue::new(depth + 1),
            command: Mutex::new(None),
            commanded: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            broken: files.iter().map(|_| AtomicBool::new(false)).collect(),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
        });
        // `depth` queued ahead plus the one the player shows (kept for pause): with only
        // `depth`, an `ahead=1` player would hold the one buffer while waiting for the next.
        for _ in 0..=depth {
            let _ = shared.free.push(rgba_frame(size.0, size.1));
        }
        let locations = files.iter().map(|f| f.location().to_string()).collect();
        let cache = (0..sizing.cache.max(2))
            .map(|_| Slot {
                index: None,
                used: 0,
                pic: rgba_frame(size.0, size.1),
            })
            .collect();
        let mut worker = Worker {
            files,
            spans: spans.clone(),
            active,
            cursor,
            generation: 0,
            cache,
            clock: 0,
            last: None,
        };
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("fp-clip".into())
            .spawn(move || {
                if let Err(e) = worker.run(&theirs) {
                    *theirs.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    theirs.failed.store(true, Ordering::Release);
                }
            })
            .map_err(ClipError::Thread)?;
        Ok(Player {
            shared,
            thread: Some(thread),
            spans,
            active,
            generation: 0,
            current: None,
            held: None,
            locations,
        })
    }

    /// The span of the clip playing.
    pub fn span(&self) -> Span {
        self.spans[self.active]
    }

    /// The span of clip `clip` of the bank.
    pub fn span_of(&self, clip: usize) -> Option<Span> {
        self.spans.get(clip).copied()
    }

    /// The clip playing (its place in the bank).
    pub fn active(&self) -> usize {
        self.active
    }

    /// Whether clip `clip` of the bank failed mid-play (the decoder dropped it).
    pub fn broken(&self, clip: usize) -> bool {
        self.shared
            .broken
            .get(clip)
            .is_some_and(|b| b.load(Ordering::Acquire))
    }

    /// The clip and head of the picture shown last, if any.
    pub fn head(&self) -> Option<(usize, Step)> {
        self.current.as_ref().map(|m| (m.clip, m.step))
    }

    /// Waits until `frames` pictures are queued (or the queue is full, or the thread
    /// failed): the first frames then cost no decoding.
    pub fn wait_ahead(&self, frames: usize) -> Result<(), ClipError> {
        let want = frames.min(self.shared.free.capacity()).max(1);
        loop {
            if self.shared.ready.len() >= want || self.shared.free.is_empty() {
                return Ok(());
            }
            self.check()?;
            std::thread::sleep(POLL);
        }
    }

    /// The decoder thread's error, if it stopped on one.
    fn check(&self) -> Result<(), ClipError> {
        if self.shared.failed.load(Ordering::Acquire) {
            let e = self.shared.error.lock().unwrap_or_else(|p| p.into_inner());
            return Err(ClipError::Stopped(
                e.clone().unwrap_or_else(|| "the decoder stopped".into()),
            ));
        }
        Ok(())
    }

    fn wake(&self) {
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }

    /// Takes the next picture of this generation, waiting for the decoder if it is behind.
    fn take(&mut self) -> Result<Msg, ClipError> {
        if let Some(m) = self.held.take() {
            return Ok(m);
        }
        loop {
            if let Some(m) = self.shared.ready.pop() {
                if m.generation == self.generation {
                    // The decoder may have moved on from a clip that failed.
                    self.active = m.clip;
                    return Ok(m);
                }
                let _ = self.shared.free.push(m.buf);
                self.wake();
                continue;
            }
            self.check()?;
            std::thread::sleep(POLL);
        }
    }

    /// Makes the next picture the current one and writes it into `out`; `Ok(false)` (nothing
    /// written) when it begins a new loop: the next call gives it.
    pub fn next(&mut self, out: &mut [u8]) -> Result<bool, ClipError> {
        let msg = self.take()?;
        if msg.step.wrapped {
            self.held = Some(Msg {
                step: Step {
                    wrapped: false,
                    ..msg.step
                },
                ..msg
            });
            return Ok(false);
        }
        copy_rgba(&msg.buf, out);
        if let Some(old) = self.current.replace(msg) {
            let _ = self.shared.free.push(old.buf);
        }
        self.wake();
        Ok(true)
    }

    /// Writes the current picture again into `out` (pause); `false` when there is none yet.
    pub fn repeat(&self, out: &mut [u8]) -> bool {
        match &self.current {
            Some(m) => {
                copy_rgba(&m.buf, out);
                true
            }
            None => false,
        }
    }

    /// From the next frame on, plays from head `cursor` (a new generation).
    pub fn restart(&mut self, cursor: Cursor) {
        self.play(self.active, cursor);
    }

    /// From the next frame on, plays clip `clip` of the bank from head `cursor` (a new
    /// generation).
    pub fn play(&mut self, clip: usize, cursor: Cursor) {
        self.generation += 1;
        self.held = None;
        self.active = clip;
        *self
            .shared
            .command
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Command {
            generation: self.generation,
            clip,
            cursor,
        });
        self.shared.commanded.store(true, Ordering::Release);
        self.wake();
    }

    /// From the next frame on, plays at `speed` (fixed point), from the frame after the
    /// current one (from the start, before the first frame).
    pub fn set_speed(&mut self, speed: i64) {
        let u = match (&self.held, &self.current) {
            (Some(h), _) => h.step.u - speed,
            (None, Some(c)) => c.step.u,
            (None, None) => {
                // Not a step back over the start: that would count as a loop's end.
                let span = self.span();
                self.restart(Cursor::new(&span, span.start(speed), speed));
                return;
            }
        };
        self.set_speed_from(u, speed);
    }

    /// From the next frame on, plays at `speed` from the frame after head `u`.
    pub fn set_speed_from(&mut self, u: i64, speed: i64) {
        let span = self.span();
        let mut c = Cursor::new(&span, u, speed);
        c.advance(&span);
        self.restart(c);
    }

    /// From the next frame on, plays from `position` (0..1) at `speed`.
    pub fn seek(&mut self, position: f64, speed: i64) {
        let span = self.span();
        self.restart(Cursor::new(&span, span.head_at(position), speed));
    }
}

impl Drop for Player {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// A clip of a bank, as the decoder thread holds it.
#[derive(Debug)]
pub enum Place {
    /// Open: demuxer and decoder ready.
    Open(ClipFile),
    /// Closed, its decoder's memory given back; opened again when it plays.
    Closed(Closed),
    /// Could not be opened, or failed: skipped.
    Gone,
}

impl Place {
    /// Whether the place has a clip to play.
    pub fn playable(&self) -> bool {
        !matches!(self, Place::Gone)
    }

    /// The file, or empty.
    pub fn location(&self) -> &str {
        match self {
            Place::Open(f) => f.location(),
            Place::Closed(c) => c.location(),
            Place::Gone => "",
        }
    }

    /// Closes an open clip (its decoder's memory is given back).
    pub fn close(&mut self) {
        if let Place::Open(_) = self {
            if let Place::Open(f) = std::mem::replace(self, Place::Gone) {
                *self = Place::Closed(f.close());
            }
        }
    }
}

/// A decoded picture in the cache.
struct Slot {
    /// (clip, frame).
    index: Option<(usize, u64)>,
    used: u64,
    pic: ff::frame::Video,
}

/// The decoder thread's state.
struct Worker {
    files: Vec<Place>,
    spans: Vec<Span>,
    active: usize,
    cursor: Cursor,
    generation: u64,
    cache: Vec<Slot>,
    clock: u64,
    /// The slot of the last picture decoded (given when the clip ends early).
    last: Option<usize>,
}

impl Worker {
    fn run(&mut self, shared: &Shared) -> Result<(), ClipError> {
        loop {
            if shared.stop.load(Ordering::Acquire) {
                return Ok(());
            }
            if shared.commanded.swap(false, Ordering::AcqRel) {
                if let Some(c) = shared
                    .command
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                {
                    // A clip that stopped meanwhile: the one playing goes on, under the
                    // new generation (the player waits for that).
                    self.generation = c.generation;
                    if self.files.get(c.clip).is_some_and(Place::playable) {
                        if c.clip != self.active {
                            // The clip left gives its decoder's memory back.
                            self.files[self.active].close();
                        }
                        self.active = c.clip;
                        self.cursor = c.cursor;
                    }
                }
            }
            let Some(mut buf) = shared.free.pop() else {
                std::thread::park_timeout(IDLE);
                continue;
            };
            let mut ahead = self.cursor;
            let step = ahead.next(&self.spans[self.active]);
            let slot = match self.fetch(step.frame, self.backward(step.u)) {
                Ok(s) => s,
                Err(e) => {
                    let _ = shared.free.push(buf);
                    self.move_on(shared, e)?;
                    continue;
                }
            };
            if shared.commanded.load(Ordering::Acquire) {
                // A new head came meanwhile: this picture is not wanted.
                let _ = shared.free.push(buf);
                continue;
            }
            if self.spans[self.active].frame_at(ahead.u) == step.frame {
                copy_picture(&self.cache[slot].pic, &mut buf);
            } else {
                std::mem::swap(&mut self.cache[slot].pic, &mut buf);
                self.cache[slot].index = None;
                if self.last == Some(slot) {
                    self.last = None;
                }
            }
            self.cursor = ahead;
            let msg = Msg {
                generation: self.generation,
                clip: self.active,
                step,
                buf,
            };
            if let Err(m) = shared.ready.push(msg) {
                // Cannot happen (as many places as buffers): keep the buffer anyway.
                let _ = shared.free.push(m.buf);
            }
        }
    }

    /// After clip `active` failed mid-play with `e`: in a bank with another playable clip,
    /// says so on stderr (this thread is off the frame path) and goes on with the next one
    /// from its start; alone, the error ends the player.
    fn move_on(&mut self, shared: &Shared, e: ClipError) -> Result<(), ClipError> {
        let n = self.files.len();
        let Some(next) = (1..n)
            .map(|k| (self.active + k) % n)
            .find(|&i| self.files[i].playable())
        else {
            return Err(e);
        };
        eprintln!(
            "framepipe: clips: clip {} stopped: {e}; the deck goes on with clip {next}",
            self.active
        );
        if let Some(b) = shared.broken.get(self.active) {
            b.store(true, Ordering::Release);
        }
        self.files[self.active] = Place::Gone;
        self.last = None;
        self.active = next;
        let span = self.spans[next];
        self.cursor = Cursor::new(&span, span.start(self.cursor.speed), self.cursor.speed);
        Ok(())
    }

    /// Whether the head at `u` is moving to lower frames.
    fn backward(&self, u: i64) -> bool {
        let span = &self.spans[self.active];
        let second_half = span.ping_pong && u >= (span.len as i64 - 1) * ONE;
        (self.cursor.speed < 0) != second_half
    }

    /// The clip playing, opened again if it was closed.
    fn file(&mut self) -> Result<&mut ClipFile, ClipError> {
        let place = self
            .files
            .get_mut(self.active)
            .ok_or_else(|| ClipError::Decode {
                location: String::new(),
                reason: "no clip at this place of the bank".into(),
            })?;
        if let Place::Closed(c) = place {
            *place = Place::Open(c.open()?);
        }
        match place {
            Place::Open(f) => Ok(f),
            _ => Err(ClipError::Decode {
                location: String::new(),
                reason: "no clip at this place of the bank".into(),
            }),
        }
    }

    fn find(&mut self, index: u64) -> Option<usize> {
        let key = (self.active, index);
        let s = self.cache.iter().position(|s| s.index == Some(key))?;
        self.clock += 1;
        self.cache[s].used = self.clock;
        Some(s)
    }

    /// The least recently used slot, for a new picture.
    fn victim(&self) -> usize {
        (0..self.cache.len())
            .min_by_key(|&i| (self.cache[i].index.is_some(), self.cache[i].used))
            .unwrap_or(0)
    }

    fn keep(&mut self, index: u64) -> Result<usize, ClipError> {
        let s = self.victim();
        let active = self.active;
        let Worker { files, cache, .. } = self;
        if let Some(Place::Open(file)) = files.get_mut(active) {
            file.convert(&mut cache[s].pic)?;
        }
        self.clock += 1;
        self.cache[s].index = Some((active, index));
        self.cache[s].used = self.clock;
        self.last = Some(s);
        Ok(s)
    }

    /// The cache slot holding frame `index`, decoding it (and, going backwards, the window
    /// before it) when it is not there.
    fn fetch(&mut self, index: u64, backward: bool) -> Result<usize, ClipError> {
        if let Some(s) = self.find(index) {
            return Ok(s);
        }
        let lo = if backward {
            let window = self.cache.len() as u64 - 1;
            index
                .saturating_sub(window - 1)
                .max(self.spans[self.active].first)
        } else {
            index
        };
        let near = self
            .file()?
            .next_index()
            .is_some_and(|n| n <= lo && lo < n + READ_ON);
        // After a seek, the first frame must be at or before `lo`: a keyframe found after it
        // (a demuxer index that rounds) means seeking again, further back.
        let mut back = 0;
        let mut first = !near;
        let mut from_start = false;
        if !near {
            self.file()?.seek_back(lo, back)?;
        }
        let mut found = None;
        while let Some(i) = self.file()?.decode_next()? {
            if std::mem::take(&mut first) && i > lo {
                if back < lo {
                    back = (back * 2).max(1);
                    self.file()?.seek_back(lo, back)?;
                    first = true;
                    continue;
                }
                if !from_start {
                    // Even a seek before frame 0 landed after `lo`: from the file's start.
                    from_start = true;
                    self.file()?.seek_start()?;
                    continue;
                }
            }
            if i < lo {
                continue;
            }
            if i > index {
                // The stream has no frame `index` (a gap): the nearest after it.
                if found.is_none() {
                    found = Some(self.keep(i)?);
                }
                break;
            }
            let s = self.keep(i)?;
            if i == index {
                found = Some(s);
                break;
            }
        }
        match found.or(self.last) {
            Some(s) => Ok(s),
            None => Err(ClipError::Decode {
                location: self.file()?.location().into(),
                reason: format!("no picture for frame {index}"),
            }),
        }
    }
}

/// Copies one RGBA picture into another of the same size.
fn copy_picture(src: &ff::frame::Video, dst: &mut ff::frame::Video) {
    let (ss, ds) = (src.stride(0), dst.stride(0));
    let row = src.width() as usize * 4;
    if ss == ds {
        dst.data_mut(0).copy_from_slice(src.data(0));
        return;
    }
    let rows = src.height() as usize;
    let (s, d) = (src.data(0), dst.data_mut(0));
    for r in 0..rows {
        d[r * ds..r * ds + row].copy_from_slice(&s[r * ss..r * ss + row]);
    }
}
