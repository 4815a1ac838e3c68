//! An audio binding's envelope: it follows its target with a one-pole filter whose time
//! constant is the attack while rising and the release while falling, over the frames'
//! times, so the value depends on the frames' times only (not on the frame rate's
//! jitter or the wall clock): after a step, `1 − e^(−t/τ)` of the way at time `t`.

/// The state of one binding's envelope.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Envelope {
    value: f64,
    last_ns: Option<i64>,
}

impl Envelope {
    /// An envelope that has not seen a frame yet (its first frame takes the target as is).
    pub fn new() -> Self {
        Envelope::default()
    }

    /// The value at time `t_ns` for `target`, rising with time constant `attack_ns` and
    /// falling with `release_ns` (0: at once). Frames come in time order; a time that goes
    /// back counts as no time.
    pub fn step(&mut self, target: f64, t_ns: i64, attack_ns: u64, release_ns: u64) -> f64 {
        let target = if target.is_finite() { target } else { 0.0 };
        let Some(last) = self.last_ns.replace(t_ns) else {
            self.value = target;
            return target;
        };
        let tau = if target > self.value {
            attack_ns
        } else {
            release_ns
        };
        if tau == 0 {
            self.value = target;
        } else {
            let dt = t_ns.saturating_sub(last).max(0) as f64;
            self.value += (target - self.value) * (1.0 - (-dt / tau as f64).exp());
        }
        self.value
    }

    /// The last value.
    pub fn value(&self) -> f64 {
        self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step up then down, sampled at 25 fps: the value after `t` is `1 − e^(−t/τ)` of the
    /// way (the reference, computed here in closed form), whatever the frame rate.
    #[test]
    fn attack_and_release_follow_a_step_with_their_time_constants() {
        let (attack, release) = (50_000_000u64, 300_000_000u64);
        let mut env = Envelope::new();
        assert_eq!(env.step(0.0, 0, attack, release), 0.0);
        let frame = 40_000_000i64;
        for k in 1..=10 {
            let v = env.step(1.0, k * frame, attack, release);
            let want = 1.0 - (-((k * frame) as f64) / attack as f64).exp();
            assert!((v - want).abs() < 1e-9, "frame {k}: {v} vs {want}");
        }
        let top = env.value();
        let t0 = 10 * frame;
        for k in 1..=20 {
            let v = env.step(0.0, t0 + k * frame, attack, release);
            let want = top * (-((k * frame) as f64) / release as f64).exp();
            assert!((v - want).abs() < 1e-9, "release frame {k}: {v} vs {want}");
        }
        // After one release time: 37 % of the top.
        let mut e2 = Envelope::new();
        e2.step(1.0, 0, 0, release);
        let v = e2.step(0.0, release as i64, 0, release);
        assert!((v - (-1.0f64).exp()).abs() < 1e-12);
        // No envelope: the target at once.
        let mut e3 = Envelope::new();
        e3.step(0.0, 0, 0, 0);
        assert_eq!(e3.step(0.7, 1, 0, 0), 0.7);
    }
}
