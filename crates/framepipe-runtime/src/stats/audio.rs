//! The show's audio analysis as control surfaces read it (the web page's meters, OSCQuery):
//! the [`AudioFrame`] of the latest frame begun, its frame number, and a running count of
//! onsets, published once per frame by the worker beginning it (`Live::begin`) and read by any
//! thread, at any time.
//!
//! Contract: a seqlock of atomics, one writer (frames begin one at a time, in order), any
//! readers. Publishing is a few relaxed atomic stores between two fences: no lock, no
//! allocation, no syscall, and the writer never waits for a reader. A reader retries a copy
//! that a publication overlapped, a few times at most, and otherwise reports nothing for this
//! poll. The onset count is the writer's own, so a reader polling slower than the frame rate
//! still sees every onset (as a change of the count), which the latest frame alone would not
//! show.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use framepipe_audio::{AudioFrame, MAX_BANDS};

/// Level, peak, flux, tempo, then the bands.
const FIELDS: usize = 4 + MAX_BANDS;
/// A reader's tries at a copy that no publication overlapped.
const TRIES: usize = 8;

/// What a surface reads: the latest frame's analysis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AudioReading {
    /// The frame it belongs to (its sequence number).
    pub frame: u64,
    /// The frame's analysis (its `onset`: an onset since the frame before).
    pub audio: AudioFrame,
    /// Frames with an onset, from the first frame to this one.
    pub onsets: u64,
}

/// The latest frame's analysis, published lock-free (see the module doc).
#[derive(Debug, Default)]
pub struct AudioMeter {
    /// Even: stable; odd: being written. 0: nothing published yet.
    seq: AtomicU64,
    frame: AtomicU64,
    time_ns: AtomicU64,
    points: AtomicU64,
    onset: AtomicU32,
    onsets: AtomicU64,
    f: [AtomicU32; FIELDS],
}

impl AudioMeter {
    /// Publishes frame `frame`'s analysis (the one writer: the worker beginning frames).
    pub(crate) fn publish(&self, frame: u64, a: &AudioFrame) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.frame.store(frame, Ordering::Relaxed);
        self.time_ns.store(a.time_ns as u64, Ordering::Relaxed);
        self.points.store(a.points, Ordering::Relaxed);
        self.onset.store(a.onset as u32, Ordering::Relaxed);
        if a.onset {
            let n = self.onsets.load(Ordering::Relaxed);
            self.onsets.store(n + 1, Ordering::Relaxed);
        }
        let head = [a.level, a.peak, a.flux, a.tempo_bpm];
        for (d, v) in self.f.iter().zip(head.iter().chain(&a.bands)) {
            d.store(v.to_bits(), Ordering::Relaxed);
        }
        self.seq.store(s + 2, Ordering::Release);
    }

    /// The latest frame's analysis; `None` before the first publication (a show without
    /// audio never has one), or when publications overlapped every try.
    pub fn read(&self) -> Option<AudioReading> {
        for _ in 0..TRIES {
            let s = self.seq.load(Ordering::Acquire);
            if s == 0 {
                return None;
            }
            if s % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut v = [0.0f32; FIELDS];
            for (d, a) in v.iter_mut().zip(&self.f) {
                *d = f32::from_bits(a.load(Ordering::Relaxed));
            }
            let frame = self.frame.load(Ordering::Relaxed);
            let time_ns = self.time_ns.load(Ordering::Relaxed) as i64;
            let points = self.points.load(Ordering::Relaxed);
            let onset = self.onset.load(Ordering::Relaxed) != 0;
            let onsets = self.onsets.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) != s {
                continue;
            }
            let mut bands = [0.0; MAX_BANDS];
            bands.copy_from_slice(&v[4..]);
            return Some(AudioReading {
                frame,
                onsets,
                audio: AudioFrame {
                    time_ns,
                    points,
                    level: v[0],
                    peak: v[1],
                    flux: v[2],
                    tempo_bpm: v[3],
                    bands,
                    onset,
                },
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_the_latest_frame_with_every_onset_counted() {
        let m = AudioMeter::default();
        assert_eq!(m.read(), None, "nothing before the first frame");
        let mut a = AudioFrame {
            level: 0.5,
            bands: [0.1, 0.2, 0.3, 0.4, 0.0, 0.0, 0.0, 0.7],
            tempo_bpm: 120.0,
            onset: true,
            ..AudioFrame::default()
        };
        m.publish(0, &a);
        a.onset = false;
        m.publish(1, &a);
        a.onset = true;
        a.level = 0.25;
        m.publish(2, &a);
        let r = m.read().unwrap();
        assert_eq!((r.frame, r.onsets), (2, 2));
        assert_eq!(r.audio, a);
    }

    /// A reader racing the writer never sees a torn copy: every field of a frame's analysis
    /// is written from the frame number, and each copy read must agree with its own number.
    #[test]
    fn a_reader_racing_the_writer_never_sees_a_torn_copy() {
        let m = std::sync::Arc::new(AudioMeter::default());
        let w = std::sync::Arc::clone(&m);
        let writer = std::thread::spawn(move || {
            for k in 0..200_000u64 {
                let x = k as f32;
                w.publish(
                    k,
                    &AudioFrame {
                        time_ns: k as i64,
                        level: x,
                        peak: x,
                        bands: [x; MAX_BANDS],
                        ..AudioFrame::default()
                    },
                );
            }
        });
        let mut seen = 0;
        while !writer.is_finished() {
            if let Some(r) = m.read() {
                let x = r.frame as f32;
                assert_eq!((r.audio.time_ns, r.audio.level), (r.frame as i64, x));
                assert_eq!(r.audio.bands, [x; MAX_BANDS]);
                seen += 1;
            }
        }
        writer.join().unwrap();
        assert!(seen > 0);
    }
}
