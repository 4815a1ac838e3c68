//! Video geometry, rates and per-frame context. Time is integer nanoseconds.

use std::fmt;

/// The longest frame period a rate may have: one frame a day. Where a rate enters from outside
/// (a flag, a property, a stream header) a slower one is refused: a paced run would wait that long
/// for its next frame, and the runtime's timeouts (a few periods) would overflow `u64`.
pub const MAX_PERIOD_NS: u64 = 86_400 * 1_000_000_000;

/// A positive rational number, used for frame rates (`30000/1001`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rational {
    /// Numerator.
    pub num: u32,
    /// Denominator (never zero).
    pub den: u32,
}

impl Rational {
    /// `num/den`; `den` must not be zero.
    pub const fn new(num: u32, den: u32) -> Self {
        Rational { num, den }
    }

    /// Duration of one period (one frame at this rate) in nanoseconds, rounded down.
    pub fn period_ns(self) -> u64 {
        if self.num == 0 {
            return 0;
        }
        1_000_000_000u64 * self.den as u64 / self.num as u64
    }

    /// Timestamp in nanoseconds of frame `n` at this rate (exact, no accumulated rounding).
    pub fn frame_time_ns(self, n: u64) -> i64 {
        if self.num == 0 {
            return 0;
        }
        (n as u128 * 1_000_000_000u128 * self.den as u128 / self.num as u128) as i64
    }

    /// Whether this is a usable frame rate: positive, and at least one frame per
    /// [`MAX_PERIOD_NS`] (one a day).
    pub fn is_usable(self) -> bool {
        self.num > 0 && self.den > 0 && self.period_ns() <= MAX_PERIOD_NS
    }

    /// As a float, for display only.
    pub fn as_f64(self) -> f64 {
        self.num as f64 / self.den.max(1) as f64
    }

    /// Parses `30`, `30/1`, `29.97` (as 2997/100) or `30000/1001`; `None` for anything else and
    /// for rates that are not [usable](Self::is_usable).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let r = if let Some((n, d)) = s.split_once('/') {
            Rational::new(n.trim().parse().ok()?, d.trim().parse().ok()?)
        } else if let Some((i, f)) = s.split_once('.') {
            // Digits only: slicing below is by bytes (`1.abcdeé` once panicked mid-character).
            if !f.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let digits = f.len().min(6) as u32;
            let den = 10u32.pow(digits);
            let int: u32 = if i.is_empty() { 0 } else { i.parse().ok()? };
            let frac: u32 = f[..digits as usize].parse().ok()?;
            Rational::new(int.checked_mul(den)?.checked_add(frac)?, den)
        } else {
            Rational::new(s.parse().ok()?, 1)
        };
        r.is_usable().then_some(r)
    }
}

impl fmt::Display for Rational {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}

/// The shape of a video stream between two elements. Pixels are always RGBA8 inside the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VideoInfo {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Nominal frame rate.
    pub rate: Rational,
}

impl VideoInfo {
    /// Bytes in one RGBA frame.
    pub fn frame_bytes(&self) -> usize {
        self.width as usize * self.height as usize * 4
    }
}

/// What an element knows about the frame it is working on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameCtx {
    /// Sequence number, 0-based, in source order.
    pub seq: u64,
    /// Presentation timestamp in nanoseconds from the stream's start.
    pub pts_ns: i64,
    /// The show's beat clock at this frame (what a deck triggering on the next beat, or a loop
    /// locked to N beats, reads). [`BeatCtx::default`] where no beat clock runs (a tool or a
    /// test driving an element by hand).
    pub beat: BeatCtx,
}

/// The beat clock at one frame: where the show is, in beats, and how fast beats go. Every node
/// of a frame sees the same values (the runtime samples the clock once per frame, with the
/// oscillators), so a source and the oscillators agree on where the beat falls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BeatCtx {
    /// Beat position in nanobeats (`1_000_000_000` is one beat) since the show's start, as the
    /// oscillators' beat clock counts it (scaled by the master speed, realigned by `beat`).
    pub nanobeats: i64,
    /// The tempo in force, thousandths of a beat per minute (`120_000` is 120 bpm); 0 where no
    /// beat clock runs.
    pub millibpm: u32,
}

impl BeatCtx {
    /// Nanobeats in one beat.
    pub const ONE: i64 = 1_000_000_000;

    /// Whether a beat clock runs (a tempo is known).
    pub fn is_running(&self) -> bool {
        self.millibpm > 0
    }

    /// The tempo in beats per minute (0.0 where no beat clock runs).
    pub fn bpm(&self) -> f64 {
        f64::from(self.millibpm) / 1000.0
    }

    /// The beat position in beats.
    pub fn beats(&self) -> f64 {
        self.nanobeats as f64 / Self::ONE as f64
    }

    /// Nanoseconds that `nanobeats` beats last at this tempo (`None` where no beat clock
    /// runs). Saturates rather than overflowing.
    pub fn beats_to_ns(&self, nanobeats: i64) -> Option<i64> {
        if self.millibpm == 0 {
            return None;
        }
        // ns = nanobeats × 60 s / bpm = nanobeats × 60e3 / millibpm (nanobeats are 1e-9 beat).
        let ns = i128::from(nanobeats) * 60_000 / i128::from(self.millibpm);
        Some(ns.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
    }
}

impl FrameCtx {
    /// Frame `seq` at `pts_ns`, with no beat clock ([`BeatCtx::default`]).
    pub fn new(seq: u64, pts_ns: i64) -> Self {
        FrameCtx {
            seq,
            pts_ns,
            beat: BeatCtx::default(),
        }
    }

    /// The timestamp in seconds (for plugin APIs that take a double, like frei0r's `time`).
    pub fn seconds(&self) -> f64 {
        self.pts_ns as f64 / 1e9
    }
}

/// A source's own frame clock across `on-end=loop`: the runtime's `seq` and timestamp go on
/// growing past a loop point (or start again; either works), while a rewound source must count
/// its frames, and draw time-dependent pictures, from its first frame again.
///
/// [`rewind`](Self::rewind) marks the origin as pending; the next [`local`](Self::local) takes
/// that frame's `seq` and timestamp as the new zero. Before any rewind the origin is zero, so
/// a source that never loops sees the runtime's own numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopOrigin {
    seq: u64,
    pts_ns: i64,
    pending: bool,
}

impl LoopOrigin {
    /// `ctx` counted from the source's first frame since its start or last rewind.
    pub fn local(&mut self, ctx: &FrameCtx) -> FrameCtx {
        if self.pending {
            self.pending = false;
            self.seq = ctx.seq;
            self.pts_ns = ctx.pts_ns;
        }
        FrameCtx {
            seq: ctx.seq.saturating_sub(self.seq),
            pts_ns: ctx.pts_ns.saturating_sub(self.pts_ns),
            beat: ctx.beat,
        }
    }

    /// The next frame is the source's frame 0 again.
    pub fn rewind(&mut self) {
        self.pending = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse() {
        assert_eq!(Rational::parse("30"), Some(Rational::new(30, 1)));
        assert_eq!(
            Rational::parse("30000/1001"),
            Some(Rational::new(30000, 1001))
        );
        assert_eq!(Rational::parse("29.97"), Some(Rational::new(2997, 100)));
        assert_eq!(Rational::parse("0"), None);
        assert_eq!(Rational::parse("1/0"), None);
        assert_eq!(Rational::parse("x"), None);
        // Issue #7: a multi-byte character where the fraction is cut panicked.
        for bad in ["1.abcdeé", "1.éééééé", "1.abc", "1.", "1.2.3"] {
            assert_eq!(Rational::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn frame_times_do_not_drift() {
        let r = Rational::new(30000, 1001);
        assert_eq!(r.frame_time_ns(30000), 1001 * 1_000_000_000);
        assert_eq!(Rational::new(25, 1).period_ns(), 40_000_000);
    }
}
