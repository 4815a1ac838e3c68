//! The timeline: analysis points published by the audio thread (one writer) and read by the
//! engine (any thread), lock-free: a ring of [`CAPACITY`] slots, each a seqlock of atomics
//! (the writer marks the slot busy, writes, then stamps it with the point's number; a reader
//! keeps what it read only if the stamp was the same before and after). No allocation after
//! [`Timeline::new`], no lock, no syscall on either side (but [`Feed::wait_for`] and the
//! writer's [`Timeline::wait_room`], which sleep by design: a render waiting for its audio).

use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::{AudioFeature, Point, HOP, MAX_BANDS, RATE};

/// Points the ring keeps (81.92 s of 10 ms points).
pub const CAPACITY: usize = 8192;
/// How far ahead of the engine's reads the writer may go in an exact feed: three quarters of
/// the ring (the rest is for the frames still reading behind).
const AHEAD: u64 = (CAPACITY as u64 / 4) * 3;
/// Points one frame aggregates at most (a frame rate of 0.4 fps and below sees the last 2.56 s).
const MAX_SPAN: u64 = 256;
/// A slot being written.
const BUSY: u64 = u64::MAX;
const FIELDS: usize = 5 + MAX_BANDS;

struct Slot {
    seq: AtomicU64,
    f: [AtomicU32; FIELDS],
}

/// Published analysis points (see the module doc).
pub struct Timeline {
    slots: Box<[Slot]>,
    published: AtomicU64,
    /// The engine's last frame's point count (an exact feed's writer stays within [`AHEAD`]).
    reader_at: AtomicU64,
    done: AtomicBool,
    stop: AtomicBool,
    error: OnceLock<String>,
    /// The first frame's timestamp: the audio's time 0 (`i64::MIN`: no frame yet).
    origin: AtomicI64,
}

impl std::fmt::Debug for Timeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeline")
            .field("published", &self.published())
            .field("done", &self.done.load(Ordering::Relaxed))
            .finish()
    }
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline::new()
    }
}

impl Timeline {
    /// An empty timeline; its ring is made here.
    pub fn new() -> Self {
        Timeline {
            slots: (0..CAPACITY)
                .map(|_| Slot {
                    seq: AtomicU64::new(BUSY),
                    f: std::array::from_fn(|_| AtomicU32::new(0)),
                })
                .collect(),
            published: AtomicU64::new(0),
            reader_at: AtomicU64::new(0),
            done: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            error: OnceLock::new(),
            origin: AtomicI64::new(i64::MIN),
        }
    }

    /// Points published so far.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Acquire)
    }

    /// Publishes the next point (one writer only).
    pub fn publish(&self, p: &Point) {
        let k = self.published.load(Ordering::Relaxed);
        let slot = &self.slots[(k % CAPACITY as u64) as usize];
        slot.seq.store(BUSY, Ordering::Relaxed);
        fence(Ordering::Release);
        let head = [p.level, p.peak, p.flux, p.onset as u8 as f32, p.tempo_bpm];
        for (a, v) in slot.f.iter().zip(head.iter().chain(&p.bands)) {
            a.store(v.to_bits(), Ordering::Relaxed);
        }
        slot.seq.store(k, Ordering::Release);
        self.published.store(k + 1, Ordering::Release);
    }

    /// Point `k`, if it is still in the ring and not being rewritten.
    pub fn read(&self, k: u64) -> Option<Point> {
        let slot = &self.slots[(k % CAPACITY as u64) as usize];
        if slot.seq.load(Ordering::Acquire) != k {
            return None;
        }
        let mut v = [0.0f32; FIELDS];
        for (d, a) in v.iter_mut().zip(&slot.f) {
            *d = f32::from_bits(a.load(Ordering::Relaxed));
        }
        fence(Ordering::Acquire);
        if slot.seq.load(Ordering::Relaxed) != k {
            return None;
        }
        let mut bands = [0.0; MAX_BANDS];
        bands.copy_from_slice(&v[5..]);
        Some(Point {
            level: v[0],
            peak: v[1],
            flux: v[2],
            onset: v[3] != 0.0,
            tempo_bpm: v[4],
            bands,
        })
    }

    /// The input ended (no more points will come); `error`: why, when it failed.
    pub fn finish(&self, error: Option<String>) {
        if let Some(e) = error {
            let _ = self.error.set(e);
        }
        self.done.store(true, Ordering::Release);
    }

    /// Whether the input ended.
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Why the input failed, if it did.
    pub fn error(&self) -> Option<&str> {
        self.error.get().map(String::as_str)
    }

    /// Asks the writer to stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// Whether the writer was asked to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// The writer of an exact feed, before publishing: waits (1 ms sleeps) while it is
    /// [`AHEAD`] points ahead of the engine's reads. Returns false when asked to stop.
    pub fn wait_room(&self) -> bool {
        loop {
            if self.stopped() {
                return false;
            }
            let ahead = self.published.load(Ordering::Relaxed)
                - self.reader_at.load(Ordering::Acquire).min(self.published());
            if ahead < AHEAD {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The analysis a frame reads: the latest point's level, bands and tempo at the frame's
/// time, and the onsets, peaks and flux of every point since the previous frame.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AudioFrame {
    /// The frame's audio time, ns (its timestamp less the first frame's).
    pub time_ns: i64,
    /// Points that end at or before it.
    pub points: u64,
    /// RMS level.
    pub level: f32,
    /// Peak since the previous frame.
    pub peak: f32,
    /// Band amplitudes.
    pub bands: [f32; MAX_BANDS],
    /// An onset since the previous frame.
    pub onset: bool,
    /// Largest flux since the previous frame.
    pub flux: f32,
    /// Tempo estimate, bpm (0: none).
    pub tempo_bpm: f32,
}

impl AudioFrame {
    /// The value of `f` (see [`AudioFeature`]).
    pub fn feature(&self, f: AudioFeature) -> f64 {
        (match f {
            AudioFeature::Level => self.level,
            AudioFeature::Peak => self.peak,
            AudioFeature::Onset => self.onset as u8 as f32,
            AudioFeature::Flux => self.flux,
            band => band
                .band_index()
                .and_then(|n| self.bands.get(n).copied())
                .unwrap_or(0.0),
        }) as f64
    }
}

/// The engine's handle on a timeline. `exact` (a file or stream decoded as fast as it
/// goes): a frame reads the points up to its time, waiting for them ([`Feed::wait_for`]);
/// otherwise (live capture) the newest points there are, less `latency_ns`.
#[derive(Debug, Clone)]
pub struct Feed {
    timeline: Arc<Timeline>,
    exact: bool,
    latency_ns: i64,
}

impl Feed {
    /// A feed over `timeline`.
    pub fn new(timeline: Arc<Timeline>, exact: bool, latency_ns: i64) -> Self {
        Feed {
            timeline,
            exact,
            latency_ns,
        }
    }

    /// The timeline.
    pub fn timeline(&self) -> &Arc<Timeline> {
        &self.timeline
    }

    /// Whether frames wait for their audio.
    pub fn exact(&self) -> bool {
        self.exact
    }

    /// The audio time of a frame stamped `pts_ns` (the first frame asked about is time 0).
    fn time_of(&self, pts_ns: i64) -> i64 {
        let origin = match self.timeline.origin.compare_exchange(
            i64::MIN,
            pts_ns,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => pts_ns,
            Err(o) => o,
        };
        pts_ns.saturating_sub(origin).max(0)
    }

    /// Points that end at or before audio time `t_ns`.
    fn points_at(t_ns: i64) -> u64 {
        (t_ns.max(0) as i128 * RATE as i128 / 1_000_000_000 / HOP as i128) as u64
    }

    /// An exact feed: waits (200 µs sleeps) until the points up to the frame's time are
    /// published, or the input ended. Call it in frame order before [`Feed::frame`], off
    /// every lock. Nothing for a live feed.
    pub fn wait_for(&self, pts_ns: i64) {
        if !self.exact {
            return;
        }
        let want = Self::points_at(self.time_of(pts_ns));
        // The frame reads no point before `want - MAX_SPAN`: the writer may go on to `want`
        // (and beyond) however far it is from the previous frame's (a frame every minute).
        self.timeline
            .reader_at
            .fetch_max(want.saturating_sub(MAX_SPAN), Ordering::AcqRel);
        while self.timeline.published() < want && !self.timeline.is_done() {
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// The analysis for the frame stamped `pts_ns`; `cursor` (the show's, starting at 0)
    /// is the point count of the previous frame. Frames in order; no allocation, no lock.
    pub fn frame(&self, pts_ns: i64, cursor: &mut u64) -> AudioFrame {
        let t = self.time_of(pts_ns);
        let tl = &self.timeline;
        let published = tl.published();
        // A live feed reads the newest the capture has (less `latency_ns`): its point 0 is
        // when the capture began, during the show's setup, not the first frame, so the
        // frame's own time would read audio as old as the setup took.
        let want = if self.exact {
            Self::points_at(t)
        } else {
            published.saturating_sub(Self::points_at(self.latency_ns))
        };
        let mut out = AudioFrame {
            time_ns: t,
            points: want,
            ..AudioFrame::default()
        };
        let from = (*cursor).max(want.saturating_sub(MAX_SPAN));
        for k in from..want.min(published) {
            if let Some(p) = tl.read(k) {
                out.onset |= p.onset;
                out.peak = out.peak.max(p.peak);
                out.flux = out.flux.max(p.flux);
            }
        }
        if want >= 1 && want <= published {
            if let Some(p) = tl.read(want - 1) {
                out.level = p.level;
                out.bands = p.bands;
                out.tempo_bpm = p.tempo_bpm;
                if from >= want {
                    // No new point since the last frame (a frame rate above 100 fps).
                    out.peak = p.peak;
                }
            }
        }
        *cursor = (*cursor).max(want);
        tl.reader_at.fetch_max(*cursor, Ordering::AcqRel);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame 150 s after the previous one (a very slow pace) is further ahead than the
    /// writer may run ahead of the last frame read: waiting for it must let the writer on,
    /// not wait for a writer that waits for it.
    #[test]
    fn a_frame_far_ahead_of_the_last_does_not_deadlock_with_the_writer() {
        let tl = Arc::new(Timeline::new());
        let writer = {
            let tl = Arc::clone(&tl);
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    if !tl.wait_room() {
                        return;
                    }
                    tl.publish(&Point::default());
                }
                tl.finish(None);
            })
        };
        let feed = Feed::new(Arc::clone(&tl), true, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut cursor = 0;
            for pts in [0, 150_000_000_000i64] {
                feed.wait_for(pts);
                feed.frame(pts, &mut cursor);
            }
            let _ = tx.send(cursor);
        });
        let got = rx.recv_timeout(Duration::from_secs(20));
        tl.stop();
        let _ = writer.join();
        assert_eq!(got, Ok(15_000), "the reader never got to 150 s");
    }

    /// A live capture starts during the show's setup, before the first frame: the first
    /// frame reads the newest point, not the capture's first (which is as old as the setup).
    #[test]
    fn a_live_feed_reads_the_newest_points_whatever_the_frame_time() {
        let tl = Arc::new(Timeline::new());
        for k in 0..300u64 {
            tl.publish(&Point {
                level: k as f32,
                onset: k == 298,
                ..Point::default()
            });
        }
        let feed = Feed::new(Arc::clone(&tl), false, 0);
        let mut cursor = 0;
        let f0 = feed.frame(0, &mut cursor);
        assert_eq!((f0.points, f0.level, f0.onset), (300, 299.0, true));
        // Less the feed's latency: 50 ms is 5 points.
        let late = Feed::new(Arc::clone(&tl), false, 50_000_000);
        let mut cursor = 0;
        let f = late.frame(0, &mut cursor);
        assert_eq!((f.points, f.level), (295, 294.0));
    }

    #[test]
    fn a_frame_reads_the_points_up_to_its_time_and_the_onsets_since_the_last_frame() {
        let tl = Arc::new(Timeline::new());
        for k in 0..100u64 {
            tl.publish(&Point {
                level: k as f32,
                onset: k == 5 || k == 6,
                peak: k as f32 / 100.0,
                ..Point::default()
            });
        }
        let feed = Feed::new(Arc::clone(&tl), true, 0);
        let mut cursor = 0;
        // Frame 0 at pts 1 s (the origin): no point yet.
        let f0 = feed.frame(1_000_000_000, &mut cursor);
        assert_eq!((f0.points, f0.level, f0.onset), (0, 0.0, false));
        // 40 ms later: points 0..4 (ends at 10, 20, 30, 40 ms).
        let f1 = feed.frame(1_040_000_000, &mut cursor);
        assert_eq!((f1.points, f1.level, f1.onset), (4, 3.0, false));
        let f2 = feed.frame(1_080_000_000, &mut cursor);
        assert_eq!((f2.points, f2.level, f2.onset), (8, 7.0, true));
        assert_eq!(f2.peak, 0.07);
        let f3 = feed.frame(1_120_000_000, &mut cursor);
        assert!(!f3.onset);
        // After the end: silence.
        tl.finish(None);
        let f4 = feed.frame(3_000_000_000, &mut cursor);
        assert_eq!((f4.level, f4.onset), (0.0, false));
    }
}
