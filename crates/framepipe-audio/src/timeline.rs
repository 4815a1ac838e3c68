//! The timeline: analysis points published by the audio thread (one writer) and read by the
//! engine (any thread), lock-free: a ring of [`CAPACITY`] slots, each a seqlock of atomics
//! (the writer marks the slot busy, writes, then stamps it with the point's number; a reader
//! keeps what it read only if the stamp was the same before and after). No allocation after
//! [`Timeline::new`], no lock, no syscall on either side (but [`Feed::wait_for`] and the
//! writer's [`Timeline::wait_room`], which sleep by design: a render waiting for its audio).
//!
//! The arrays of a point (its window of samples and its FFT magnitudes, for ISF `audio` and
//! `audioFFT` inputs) are kept for the last [`ARRAY_POINTS`] points only, in a second ring
//! of seqlocked slots ([`Feed::arrays`]); an exact feed's writer stays within that ring of
//! the frame being read.

use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::{AudioFeature, Point, FFT_SIZE, HOP, MAX_BANDS, RATE, SPECTRUM_BINS};

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
/// Points whose arrays (waveform, FFT) the timeline keeps (5.12 s; 6 MiB).
pub const ARRAY_POINTS: usize = 512;
/// How far ahead of the frame being read an exact feed's writer may go in the arrays' ring.
const ARRAY_AHEAD: u64 = ARRAY_POINTS as u64 - 64;
/// Floats per point's arrays: the window of samples, then the magnitudes.
const ARRAY_LEN: usize = FFT_SIZE + SPECTRUM_BINS;

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
    /// Per slot of the arrays' ring: the point it holds ([`BUSY`] while written).
    array_seq: Box<[AtomicU64]>,
    /// [`ARRAY_POINTS`] × [`ARRAY_LEN`] floats (as bits).
    arrays: Box<[AtomicU32]>,
    /// The point whose arrays the engine's last frame reads (an exact feed's writer stays
    /// within [`ARRAY_AHEAD`] of it).
    array_reader_at: AtomicU64,
    /// Bands the analysis has (the rest of a point's bands are 0).
    bands: AtomicU32,
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
            array_seq: (0..ARRAY_POINTS).map(|_| AtomicU64::new(BUSY)).collect(),
            arrays: (0..ARRAY_POINTS * ARRAY_LEN)
                .map(|_| AtomicU32::new(0))
                .collect(),
            array_reader_at: AtomicU64::new(0),
            bands: AtomicU32::new(crate::DEFAULT_BAND_EDGES.len() as u32 - 1),
        }
    }

    /// The analysis has `n` bands (its input says so when it starts).
    pub fn set_bands(&self, n: usize) {
        self.bands.store(n.min(MAX_BANDS) as u32, Ordering::Relaxed);
    }

    /// Bands the analysis has (the first `n` of a point's `bands`).
    pub fn bands(&self) -> usize {
        self.bands.load(Ordering::Relaxed) as usize
    }

    /// Points published so far.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Acquire)
    }

    /// Publishes the next point (one writer only), with zero arrays.
    pub fn publish(&self, p: &Point) {
        self.publish_with(p, &[], &[]);
    }

    /// Publishes the next point (one writer only) with its arrays: `wave`, its window of
    /// samples (the last [`FFT_SIZE`] are kept), and `fft`, its magnitudes (the first
    /// [`SPECTRUM_BINS`]); what is missing is zero.
    pub fn publish_with(&self, p: &Point, wave: &[f32], fft: &[f32]) {
        let k = self.published.load(Ordering::Relaxed);
        let at = (k % ARRAY_POINTS as u64) as usize;
        let seq = &self.array_seq[at];
        seq.store(BUSY, Ordering::Relaxed);
        fence(Ordering::Release);
        let dst = &self.arrays[at * ARRAY_LEN..(at + 1) * ARRAY_LEN];
        let (dw, df) = dst.split_at(FFT_SIZE);
        let wave = &wave[wave.len().saturating_sub(FFT_SIZE)..];
        let pad = FFT_SIZE - wave.len();
        for (i, a) in dw.iter().enumerate() {
            let v = if i < pad { 0.0 } else { wave[i - pad] };
            a.store(v.to_bits(), Ordering::Relaxed);
        }
        for (i, a) in df.iter().enumerate() {
            a.store(
                fft.get(i).copied().unwrap_or(0.0).to_bits(),
                Ordering::Relaxed,
            );
        }
        seq.store(k, Ordering::Release);
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
            let published = self.published.load(Ordering::Relaxed);
            let ahead = published - self.reader_at.load(Ordering::Acquire).min(published);
            let arrays_ahead =
                published - self.array_reader_at.load(Ordering::Acquire).min(published);
            if ahead < AHEAD && arrays_ahead < ARRAY_AHEAD {
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
    /// With `onset`: how long before the frame's audio time the latest onset was, ns (its
    /// point's middle: an onset is known to 10 ms).
    pub onset_age_ns: i64,
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

    /// The time `points` points take, ns.
    fn end_ns(points: u64) -> i64 {
        (points as i128 * HOP as i128 * 1_000_000_000 / RATE as i128) as i64
    }

    /// The arrays of the frame's latest point (`frame.points - 1`, see [`Feed::frame`]) into
    /// `wave` (its window of samples, oldest first, [`FFT_SIZE`] of them at most) and `fft`
    /// (its magnitudes, [`SPECTRUM_BINS`] at most). False, with both zeroed, when there is no
    /// such point or it has left the ring (a frame more than [`ARRAY_POINTS`] behind the
    /// newest). No allocation, no lock.
    pub fn arrays(&self, frame: &AudioFrame, wave: &mut [f32], fft: &mut [f32]) -> bool {
        let tl = &self.timeline;
        let ok = frame.points >= 1 && frame.points <= tl.published() && {
            let k = frame.points - 1;
            let at = (k % ARRAY_POINTS as u64) as usize;
            let seq = &tl.array_seq[at];
            let src = &tl.arrays[at * ARRAY_LEN..(at + 1) * ARRAY_LEN];
            let (sw, sf) = src.split_at(FFT_SIZE);
            seq.load(Ordering::Acquire) == k && {
                let sw = &sw[FFT_SIZE - wave.len().min(FFT_SIZE)..];
                for (d, a) in wave.iter_mut().zip(sw) {
                    *d = f32::from_bits(a.load(Ordering::Relaxed));
                }
                for (d, a) in fft.iter_mut().zip(sf) {
                    *d = f32::from_bits(a.load(Ordering::Relaxed));
                }
                fence(Ordering::Acquire);
                seq.load(Ordering::Relaxed) == k
            }
        };
        if !ok {
            wave.fill(0.0);
            fft.fill(0.0);
        }
        ok
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
        self.timeline
            .array_reader_at
            .fetch_max(want.saturating_sub(1), Ordering::AcqRel);
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
        // Point `k` ends `(want - k - 1)` points before the frame's time (exact: less the part
        // of a point the frame's time is past `want`'s end).
        let past = if self.exact {
            t - Self::end_ns(want)
        } else {
            0
        };
        for k in from..want.min(published) {
            if let Some(p) = tl.read(k) {
                if p.onset {
                    out.onset_age_ns = past + Self::end_ns(want - k - 1) + Self::end_ns(1) / 2;
                }
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

    /// A frame's arrays are its latest point's (window and magnitudes), read without
    /// allocating; a point that has left the arrays' ring reads as zeros, and says so.
    #[test]
    fn a_frame_reads_the_arrays_of_its_latest_point() {
        let tl = Arc::new(Timeline::new());
        let wave: Vec<f32> = (0..crate::FFT_SIZE).map(|i| i as f32).collect();
        for k in 0..100u64 {
            let fft = vec![k as f32; crate::SPECTRUM_BINS];
            tl.publish_with(&Point::default(), &wave, &fft);
        }
        let feed = Feed::new(Arc::clone(&tl), true, 0);
        let mut cursor = 0;
        feed.frame(0, &mut cursor);
        let f = feed.frame(400_000_000, &mut cursor);
        assert_eq!(f.points, 40);
        let (mut w, mut m) = (vec![0.0; 16], vec![0.0; crate::SPECTRUM_BINS]);
        assert!(feed.arrays(&f, &mut w, &mut m));
        assert_eq!(
            w[15],
            (crate::FFT_SIZE - 1) as f32,
            "the newest samples last"
        );
        assert_eq!(w[0], (crate::FFT_SIZE - 16) as f32);
        assert!(m.iter().all(|&x| x == 39.0), "point 39's magnitudes");
        for _ in 0..ARRAY_POINTS {
            tl.publish(&Point::default());
        }
        assert!(!feed.arrays(&f, &mut w, &mut m));
        assert!(w.iter().chain(&m).all(|&x| x == 0.0));
    }
}
