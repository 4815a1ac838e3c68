//! Which frame of a clip comes next: the play head, in integer fixed point.
//!
//! A clip plays the frames `[in, out)` of its file. The play head `u` moves along an *unfolded*
//! timeline of `period` frames, by `speed` per output frame, and wraps around at both ends:
//! * plain play: `period = len`, frame `in + floor(u)`;
//! * ping-pong: `period = 2 (len − 1)`, the second half read backwards
//!   (`0, 1, …, len−1, len−2, …, 1`, then `0` again), so a turn never shows a frame twice.
//!
//! Positions and speeds are in 1/[`ONE`] of a frame, so that speed 0.5 gives every frame
//! exactly twice and the sequence is a function of the start and the speed only (no float
//! drift over hours). A step that wraps marks the next frame as the first of a new loop
//! ([`Step::wrapped`]): a clip that plays once ends there; a looping one just goes on.

/// One frame in fixed point.
pub const ONE: i64 = 1 << 16;

/// The shape of the timeline: fixed for a running clip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First frame played (the `in` point).
    pub first: u64,
    /// Frames played: `out − in`, at least 1.
    pub len: u64,
    /// Forward then backward.
    pub ping_pong: bool,
}

impl Span {
    /// Frames on the unfolded timeline.
    pub fn period(&self) -> u64 {
        if self.ping_pong && self.len > 1 {
            2 * (self.len - 1)
        } else {
            self.len
        }
    }

    fn period_fixed(&self) -> i64 {
        self.period() as i64 * ONE
    }

    /// The clip frame at play head `u`.
    pub fn frame_at(&self, u: i64) -> u64 {
        let k = (u.rem_euclid(self.period_fixed()) / ONE) as u64;
        let k = if k >= self.len {
            2 * (self.len - 1) - k
        } else {
            k
        };
        self.first + k
    }

    /// The play head showing `position` (0 = the first frame, 1 = the last, rounded to the
    /// nearest frame), on the forward half of a ping-pong.
    pub fn head_at(&self, position: f64) -> i64 {
        let p = if position.is_finite() {
            position.clamp(0.0, 1.0)
        } else {
            0.0
        };
        ((p * (self.len - 1) as f64).round() as i64) * ONE
    }

    /// Where play starts at `speed`: the first frame forward, the last backward.
    pub fn start(&self, speed: i64) -> i64 {
        if speed < 0 {
            (self.len as i64 - 1) * ONE
        } else {
            0
        }
    }

    /// Output frames from head `u` at `speed` until the first wrap: a clip played once.
    /// `None` when it never wraps (speed 0).
    pub fn frames_until_wrap(&self, u: i64, speed: i64) -> Option<u64> {
        let p = self.period_fixed();
        let u = u.rem_euclid(p);
        match speed {
            0 => None,
            s if s > 0 => Some(((p - u + s - 1) / s) as u64),
            s => Some((u / -s) as u64 + 1),
        }
    }
}

/// A play head moving at a speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The head, in `[0, period)` fixed point.
    pub u: i64,
    /// Fixed-point frames per output frame; negative plays backwards.
    pub speed: i64,
    /// The last step wrapped: the frame at `u` begins a new loop.
    pub wrapped: bool,
}

/// One output frame: which clip frame, where the head was, and whether a loop began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The clip frame (absolute index in the file).
    pub frame: u64,
    /// The head at this frame.
    pub u: i64,
    /// This frame is the first of a new loop.
    pub wrapped: bool,
}

impl Cursor {
    /// A head at `u` (wrapped into the timeline), moving at `speed`.
    pub fn new(span: &Span, u: i64, speed: i64) -> Self {
        Cursor {
            u: u.rem_euclid(span.period_fixed()),
            speed,
            wrapped: false,
        }
    }

    /// The frame at the head, then moves the head one output frame on.
    pub fn next(&mut self, span: &Span) -> Step {
        let step = Step {
            frame: span.frame_at(self.u),
            u: self.u,
            wrapped: self.wrapped,
        };
        self.advance(span);
        step
    }

    /// Moves the head one output frame on without giving a frame.
    pub fn advance(&mut self, span: &Span) {
        let p = span.period_fixed();
        let u = self.u + self.speed;
        self.wrapped = !(0..p).contains(&u);
        self.u = u.rem_euclid(p);
    }
}

/// `speed` (frames of the clip per output frame) in fixed point, clamped to ±64.
pub fn speed_fixed(speed: f64) -> i64 {
    if !speed.is_finite() {
        return ONE;
    }
    (speed.clamp(-64.0, 64.0) * ONE as f64).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(span: Span, speed: f64, n: usize) -> Vec<(u64, bool)> {
        let s = speed_fixed(speed);
        let mut c = Cursor::new(&span, span.start(s), s);
        (0..n)
            .map(|_| {
                let st = c.next(&span);
                (st.frame, st.wrapped)
            })
            .collect()
    }

    fn frames(v: &[(u64, bool)]) -> Vec<u64> {
        v.iter().map(|f| f.0).collect()
    }

    const PLAIN: Span = Span {
        first: 0,
        len: 5,
        ping_pong: false,
    };

    #[test]
    fn speed_one_loops_and_marks_each_new_loop() {
        let v = take(PLAIN, 1.0, 11);
        assert_eq!(frames(&v), [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0]);
        let wraps: Vec<usize> = (0..v.len()).filter(|&i| v[i].1).collect();
        assert_eq!(wraps, [5, 10]);
    }

    #[test]
    fn speed_two_half_and_reverse_give_the_expected_frames() {
        assert_eq!(frames(&take(PLAIN, 2.0, 6)), [0, 2, 4, 1, 3, 0]);
        assert_eq!(
            frames(&take(PLAIN, 0.5, 11)),
            [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 0]
        );
        assert_eq!(frames(&take(PLAIN, -1.0, 7)), [4, 3, 2, 1, 0, 4, 3]);
    }

    #[test]
    fn ping_pong_turns_without_showing_a_frame_twice() {
        let span = Span {
            ping_pong: true,
            ..PLAIN
        };
        assert_eq!(frames(&take(span, 1.0, 10)), [0, 1, 2, 3, 4, 3, 2, 1, 0, 1]);
        assert_eq!(frames(&take(span, -1.0, 6)), [4, 3, 2, 1, 0, 1]);
    }

    #[test]
    fn in_point_offsets_every_frame() {
        let span = Span {
            first: 10,
            len: 3,
            ping_pong: false,
        };
        assert_eq!(frames(&take(span, 1.0, 4)), [10, 11, 12, 10]);
    }

    #[test]
    fn frames_until_wrap_counts_one_play() {
        assert_eq!(PLAIN.frames_until_wrap(0, ONE), Some(5));
        assert_eq!(PLAIN.frames_until_wrap(0, 2 * ONE), Some(3));
        assert_eq!(PLAIN.frames_until_wrap(0, ONE / 2), Some(10));
        assert_eq!(PLAIN.frames_until_wrap(4 * ONE, -ONE), Some(5));
        assert_eq!(PLAIN.frames_until_wrap(0, 0), None);
    }

    #[test]
    fn position_rounds_to_the_nearest_frame() {
        assert_eq!(PLAIN.frame_at(PLAIN.head_at(0.0)), 0);
        assert_eq!(PLAIN.frame_at(PLAIN.head_at(1.0)), 4);
        assert_eq!(PLAIN.frame_at(PLAIN.head_at(0.5)), 2);
        assert_eq!(PLAIN.frame_at(PLAIN.head_at(0.6)), 2);
        assert_eq!(PLAIN.frame_at(PLAIN.head_at(0.7)), 3);
    }
}
