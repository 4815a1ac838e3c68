//! Oscillators on parameters, evaluated at a frame's timestamp, never at wall-clock time.
//!
//! An [`Oscillator`] is a pure function of an *oscillator time* in integer nanoseconds. The
//! runtime computes that time once per frame, at the source, with an [`OscClock`]: it advances
//! by the frame's pts delta times the master speed, so a speed change never makes the phase
//! jump. The osc time travels with the frame; every stage that evaluates an oscillator for that
//! frame passes the same osc time and so gets the same value, whenever it runs.
//!
//! # Shapes
//! With `p` the position in the cycle, `p = frac(t·freq + phase)` in `0..1`, and
//! `u` the unit output in `0..=1`, the value is `min + (max − min)·u`:
//!
//! | shape        | `u`                                                           |
//! |--------------|---------------------------------------------------------------|
//! | `sine`       | `0.5 + 0.5·sin(2πp)`: mid-range at p=0, max at ¼, min at ¾     |
//! | `triangle`   | `2p` for p<½, `2 − 2p` after: min at p=0, max at ½            |
//! | `ramp-up`    | `p`                                                           |
//! | `ramp-down`  | `1 − p`                                                       |
//! | `square`     | 1 for p<½, 0 after                                            |
//! | `pulse`      | 1 for p<width, 0 after                                        |
//! | `random`     | a seeded random number per cycle, held for the cycle          |
//! | `random-ramp`| straight line from this cycle's random number to the next one |
//!
//! Random numbers are a hash of (seed, cycle number): the same seed gives the same sequence in
//! every run, in every stage, at any frame rate.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The waveform of an [`Oscillator`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// Sine, starting mid-range and rising.
    Sine,
    /// Triangle, min at the cycle start, max half-way.
    Triangle,
    /// Rising sawtooth.
    RampUp,
    /// Falling sawtooth.
    RampDown,
    /// Square: max for the first half of the cycle, min for the second.
    Square,
    /// Pulse: max for the first `width` of the cycle, min for the rest.
    Pulse,
    /// Random value per cycle (sample and hold), repeatable by seed.
    Random,
    /// Random values per cycle joined by straight lines.
    RandomRamp,
}

impl Shape {
    /// Every shape, in documentation order.
    pub const ALL: [Shape; 8] = [
        Shape::Sine,
        Shape::Triangle,
        Shape::RampUp,
        Shape::RampDown,
        Shape::Square,
        Shape::Pulse,
        Shape::Random,
        Shape::RandomRamp,
    ];

    /// The shape's name in commands and pipeline strings (`ramp-up`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Shape::Sine => "sine",
            Shape::Triangle => "triangle",
            Shape::RampUp => "ramp-up",
            Shape::RampDown => "ramp-down",
            Shape::Square => "square",
            Shape::Pulse => "pulse",
            Shape::Random => "random",
            Shape::RandomRamp => "random-ramp",
        }
    }
}

impl FromStr for Shape {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let want = s.trim().to_ascii_lowercase().replace('_', "-");
        Shape::ALL
            .into_iter()
            .find(|sh| sh.name() == want)
            .ok_or_else(|| Error::UnknownShape {
                name: s.to_string(),
            })
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An oscillator: shape, frequency, range, phase, pulse width and random seed.
///
/// Build one with [`Oscillator::new`] and the `with_*` methods, parse the compact form
/// `~sine:0.5hz:0..1:phase=0.25` with [`Oscillator::parse_compact`] (see `docs/CONTROL.md`), the
/// command form `sine freq=0.5 min=0 max=1` with [`Oscillator::parse_words`], or deserialize an
/// [`OscSpec`] from a project file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Oscillator {
    /// Waveform.
    pub shape: Shape,
    /// Cycles per second of oscillator time (≥ 0); cycles per *beat* when `per_beat`.
    pub freq_hz: f64,
    /// Whether the oscillator follows the beat clock: `freq_hz` then counts cycles per beat and
    /// the phase follows the beat position ([`OscTime::nanobeats`]), not the oscillator time.
    pub per_beat: bool,
    /// Value at the bottom of the cycle.
    pub min: f64,
    /// Value at the top of the cycle.
    pub max: f64,
    /// Phase offset, in cycles (0..=1).
    pub phase: f64,
    /// Pulse width, fraction of the cycle at max (0..=1); only `pulse` uses it.
    pub width: f64,
    /// Seed of `random` and `random-ramp`.
    pub seed: u64,
    /// When set, an audio binding (`~audio:bass:0..1`): the value follows the show's audio
    /// analysis between `min` and `max` (see [`crate::audio`]), and `shape`, `freq_hz`,
    /// `phase`, `width` and `seed` are unused (left at their defaults).
    pub audio: Option<crate::audio::AudioFollow>,
}

/// Default frequency: 1 Hz.
pub const DEFAULT_FREQ_HZ: f64 = 1.0;
/// Default range bottom.
pub const DEFAULT_MIN: f64 = 0.0;
/// Default range top.
pub const DEFAULT_MAX: f64 = 1.0;
/// Highest frequency accepted, Hz. Above half the frame rate an oscillator only aliases, and
/// 1000 Hz is above that for any output up to 2000 fps; bounding it keeps `t·freq` finite for
/// every oscillator time (|t| < 2^63 ns gives < 1e25 cycles·1e9) and exact for 104 days.
pub const MAX_FREQ_HZ: f64 = 1000.0;
/// Largest magnitude accepted for `min` and `max`. Every property range in framepipe lies well
/// inside it; bounding it keeps `max − min` (and so every value) finite.
pub const MAX_LEVEL: f64 = 1e9;
/// Largest magnitude of the master speed. At 100× the oscillator time (an `i64` of ns) lasts
/// 2.9 years of frames before it wraps; faster motion is a matter of `freq`.
pub const MAX_SPEED: f64 = 100.0;
/// Default pulse width.
pub const DEFAULT_WIDTH: f64 = 0.5;

impl Oscillator {
    /// A `shape` oscillator at 1 Hz over 0..1, phase 0, width 0.5, seed 0.
    pub fn new(shape: Shape) -> Self {
        Oscillator {
            shape,
            freq_hz: DEFAULT_FREQ_HZ,
            per_beat: false,
            min: DEFAULT_MIN,
            max: DEFAULT_MAX,
            phase: 0.0,
            width: DEFAULT_WIDTH,
            seed: 0,
            audio: None,
        }
    }

    /// An audio binding following `follow`, over 0..1 (set the range with
    /// [`with_range`](Self::with_range)).
    pub fn audio(follow: crate::audio::AudioFollow) -> Self {
        Oscillator {
            audio: Some(follow),
            ..Oscillator::new(Shape::Sine)
        }
    }

    /// Sets the frequency, in Hz (the oscillator then follows the oscillator time).
    pub fn with_freq(mut self, hz: f64) -> Self {
        self.freq_hz = hz;
        self.per_beat = false;
        self
    }

    /// Sets the period in beats (`4.0`: one cycle every 4 beats); the oscillator then follows
    /// the beat clock.
    pub fn with_beats(mut self, period: f64) -> Self {
        self.freq_hz = 1.0 / period;
        self.per_beat = true;
        self
    }

    /// Sets the range.
    pub fn with_range(mut self, min: f64, max: f64) -> Self {
        self.min = min;
        self.max = max;
        self
    }

    /// Sets the phase (cycles).
    pub fn with_phase(mut self, phase: f64) -> Self {
        self.phase = phase;
        self
    }

    /// Sets the pulse width.
    pub fn with_width(mut self, width: f64) -> Self {
        self.width = width;
        self
    }

    /// Sets the random seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Checks the fields: `freq` in `0..=`[`MAX_FREQ_HZ`], `min` and `max` within
    /// ±[`MAX_LEVEL`], `phase` and `width` in `0..=1` (NaN and infinities are outside every
    /// range). (`min > max` is allowed: it turns the shape upside down.) Every oscillator that
    /// passes gives a finite value in its range at every oscillator time.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &'static str, value: f64, reason: &'static str| {
            // 1e300 as 1e300, not as 301 digits.
            let shown = if value != 0.0 && !(1e-4..1e6).contains(&value.abs()) {
                format!("{value:e}")
            } else {
                value.to_string()
            };
            Err(Error::BadOscillator {
                token: format!("{field}={shown}"),
                reason: reason.into(),
            })
        };
        if !(0.0..=MAX_FREQ_HZ).contains(&self.freq_hz) {
            return bad(
                "freq",
                self.freq_hz,
                if self.per_beat {
                    "frequency must be within 0..=1000 cycles per beat (a period of at least \
                     0.001 beat)"
                } else {
                    "frequency must be within 0..=1000 Hz (a period of at least 1 ms)"
                },
            );
        }
        if !(-MAX_LEVEL..=MAX_LEVEL).contains(&self.min) {
            return bad("min", self.min, "must be a number within ±1e9");
        }
        if !(-MAX_LEVEL..=MAX_LEVEL).contains(&self.max) {
            return bad("max", self.max, "must be a number within ±1e9");
        }
        if !(0.0..=1.0).contains(&self.phase) {
            return bad("phase", self.phase, "phase is in cycles, 0..1");
        }
        if !(0.0..=1.0).contains(&self.width) {
            return bad(
                "width",
                self.width,
                "pulse width is a fraction of the cycle, 0..1",
            );
        }
        Ok(())
    }

    /// The cycle count at oscillator time `osc_time_ns`: `t·freq + phase`, split into the cycle
    /// number and the position in it (0..1). Computed as `t_ns·freq mod 1e9` so the position
    /// keeps its precision over long runs.
    fn cycle(&self, osc_time_ns: i64) -> (i64, f64) {
        let scaled = osc_time_ns as f64 * self.freq_hz; // cycles × 1e9
        let whole = (scaled / 1e9).floor();
        let frac = scaled.rem_euclid(1e9) / 1e9 + self.phase;
        let carry = frac.floor();
        (whole as i64 + carry as i64, frac - carry)
    }

    /// The unit output `u` (0..=1) at oscillator time `osc_time_ns`.
    pub fn unit_at(&self, osc_time_ns: i64) -> f64 {
        let (k, p) = self.cycle(osc_time_ns);
        match self.shape {
            Shape::Sine => 0.5 + 0.5 * (std::f64::consts::TAU * p).sin(),
            Shape::Triangle => {
                if p < 0.5 {
                    2.0 * p
                } else {
                    2.0 - 2.0 * p
                }
            }
            Shape::RampUp => p,
            Shape::RampDown => 1.0 - p,
            Shape::Square => (p < 0.5) as u8 as f64,
            Shape::Pulse => (p < self.width) as u8 as f64,
            Shape::Random => random_unit(self.seed, k),
            Shape::RandomRamp => {
                let a = random_unit(self.seed, k);
                let b = random_unit(self.seed, k + 1);
                a + (b - a) * p
            }
        }
    }

    /// The value at a frame's [`OscTime`]: at its beat position for a beat oscillator
    /// (`per_beat`), at its oscillator time otherwise. This is what the engine evaluates.
    /// (An audio binding's value needs the frame's audio analysis: the engine computes it
    /// from [`Oscillator::audio`]; here it is its shape's, unused.)
    pub fn value_in(&self, t: OscTime) -> f64 {
        self.value_at(if self.per_beat { t.nanobeats } else { t.ns })
    }

    /// The value (`min + (max − min)·u`) at oscillator time `osc_time_ns` (for a beat
    /// oscillator: at beat position `osc_time_ns` nanobeats; see [`value_in`](Self::value_in)).
    /// Pure: the same time always gives the same value.
    ///
    /// For an oscillator that passed [`validate`](Self::validate) the value is finite and
    /// within `min..=max` (either order) at every time: the bounds on `freq`, `min` and `max`
    /// keep every intermediate finite, and the result is clamped against rounding.
    pub fn value_at(&self, osc_time_ns: i64) -> f64 {
        let v = self.min + (self.max - self.min) * self.unit_at(osc_time_ns);
        let (lo, hi) = (self.min.min(self.max), self.min.max(self.max));
        // Not f64::clamp: it panics on NaN bounds, which an unvalidated oscillator may have.
        if v < lo {
            lo
        } else if v > hi {
            hi
        } else {
            v
        }
    }
}

/// A repeatable random number in `0..1` for (seed, cycle): SplitMix64's finaliser over both.
fn random_unit(seed: u64, cycle: i64) -> f64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(cycle as u64)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

fn parse_f64(token: &str, text: &str) -> Result<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| Error::BadOscillator {
            token: token.to_string(),
            reason: format!("'{text}' is not a number"),
        })
}

/// Parses `0.5hz`, `0.5Hz`, `0.5` (Hz), `2s` (a period in seconds), `4beats` / `1beat` (a
/// period in beats) or `2/beat` (cycles per beat). Returns the frequency and whether it is per
/// beat.
fn parse_freq(token: &str, text: &str) -> Result<(f64, bool)> {
    let t = text.trim().to_ascii_lowercase();
    let period = |n: &str, unit: &str| {
        let period = parse_f64(token, n)?;
        if period <= 0.0 {
            return Err(Error::BadOscillator {
                token: token.to_string(),
                reason: format!("a period must be > 0 {unit}"),
            });
        }
        Ok(1.0 / period)
    };
    if let Some(n) = t.strip_suffix("/beat") {
        Ok((parse_f64(token, n)?, true))
    } else if let Some(n) = t.strip_suffix("beats").or_else(|| t.strip_suffix("beat")) {
        Ok((period(n, "beats")?, true))
    } else {
        parse_hz(token, &t).map(|hz| (hz, false))
    }
}

/// The Hz forms of [`parse_freq`] (`t` lowercase).
fn parse_hz(token: &str, t: &str) -> Result<f64> {
    if let Some(n) = t.strip_suffix("hz") {
        parse_f64(token, n)
    } else if let Some(n) = t.strip_suffix('s') {
        let period = parse_f64(token, n)?;
        if period <= 0.0 {
            return Err(Error::BadOscillator {
                token: token.to_string(),
                reason: "a period must be > 0 s".into(),
            });
        }
        Ok(1.0 / period)
    } else {
        parse_f64(token, t)
    }
}

/// Whether a compact field is a frequency: `…hz`, `…s` (includes `…beats`), `…beat`.
fn is_freq_field(f: &str) -> bool {
    let l = f.to_ascii_lowercase();
    l.ends_with("hz") || l.ends_with('s') || l.ends_with("beat")
}

impl Oscillator {
    /// Sets one field from `key=value` text (`freq`, `min`, `max`, `phase`, `width`, `seed`).
    fn set_key(&mut self, token: &str, key: &str, value: &str) -> Result<()> {
        match key.trim().to_ascii_lowercase().as_str() {
            "freq" | "f" => (self.freq_hz, self.per_beat) = parse_freq(token, value)?,
            "min" => self.min = parse_f64(token, value)?,
            "max" => self.max = parse_f64(token, value)?,
            "phase" => self.phase = parse_f64(token, value)?,
            "width" | "pw" => self.width = parse_f64(token, value)?,
            "seed" => {
                self.seed = value.trim().parse().map_err(|_| Error::BadOscillator {
                    token: token.to_string(),
                    reason: format!("seed '{value}' is not a whole number ≥ 0"),
                })?
            }
            other => {
                return Err(Error::BadOscillator {
                    token: token.to_string(),
                    reason: format!(
                        "unknown key '{other}'; expected freq, min, max, phase, width or seed"
                    ),
                })
            }
        }
        Ok(())
    }

    /// Parses the compact form used in pipeline strings: `~SHAPE` followed by `:`-separated
    /// fields in any order: `0.5hz` (or `2s`, a period), `4beats` / `1beat` / `0.5beat` (a
    /// period in beats of the beat clock) or `2/beat` (cycles per beat), `MIN..MAX`, and
    /// `key=value` for `freq`, `min`, `max`, `phase`, `width`, `seed`. Examples:
    /// `~sine:0.5hz:0..1:phase=0.25`, `~square:4beats`.
    /// The leading `~` is required; errors name the offending field.
    pub fn parse_compact(text: &str) -> Result<Self> {
        let body = text
            .trim()
            .strip_prefix('~')
            .ok_or_else(|| Error::BadOscillator {
                token: text.to_string(),
                reason: "an oscillator starts with '~', e.g. ~sine:1hz:0..1".into(),
            })?;
        if body == "audio" || body.starts_with("audio:") {
            return Oscillator::parse_audio(body.split(':').skip(1));
        }
        let mut fields = body.split(':');
        let shape: Shape = fields.next().unwrap_or("").parse()?;
        let mut osc = Oscillator::new(shape);
        for field in fields {
            let f = field.trim();
            if let Some((k, v)) = f.split_once('=') {
                osc.set_key(f, k, v)?;
            } else if let Some((lo, hi)) = f.split_once("..") {
                osc.min = parse_f64(f, lo)?;
                osc.max = parse_f64(f, hi)?;
            } else if is_freq_field(f) {
                (osc.freq_hz, osc.per_beat) = parse_freq(f, f)?;
            } else {
                return Err(Error::BadOscillator {
                    token: f.to_string(),
                    reason: "expected a frequency (0.5hz, 2/beat), a period (2s, 4beats), a \
                             range (0..1) or key=value"
                        .into(),
                });
            }
        }
        osc.validate()?;
        Ok(osc)
    }

    /// Parses an audio binding's fields (after `~audio`): the feature first, then `MIN..MAX`
    /// and `key=value` for `min`, `max`, `gain`, `attack`, `release`, in any order.
    fn parse_audio<'a>(mut fields: impl Iterator<Item = &'a str>) -> Result<Self> {
        let feature = fields.next().unwrap_or("").trim();
        if feature.is_empty() {
            return Err(Error::BadOscillator {
                token: "~audio".into(),
                reason: format!(
                    "an audio binding needs a feature, e.g. ~audio:bass:0..1; one of: {}",
                    crate::audio::AudioFeature::NAMES
                ),
            });
        }
        let mut osc = Oscillator::audio(crate::audio::AudioFollow::new(feature.parse()?));
        for field in fields {
            let f = field.trim();
            if let Some((k, v)) = f.split_once('=') {
                osc.set_audio_key(f, k, v)?;
            } else if let Some((lo, hi)) = f.split_once("..") {
                osc.min = parse_f64(f, lo)?;
                osc.max = parse_f64(f, hi)?;
            } else {
                return Err(Error::BadOscillator {
                    token: f.to_string(),
                    reason: "expected a range (0..1) or key=value (gain, attack, release)".into(),
                });
            }
        }
        osc.validate()?;
        Ok(osc)
    }

    /// One `key=value` of an audio binding: the range here, the rest in its [`AudioFollow`].
    ///
    /// [`AudioFollow`]: crate::audio::AudioFollow
    fn set_audio_key(&mut self, token: &str, key: &str, value: &str) -> Result<()> {
        match key.trim() {
            "min" => self.min = parse_f64(token, value)?,
            "max" => self.max = parse_f64(token, value)?,
            _ => {
                if let Some(a) = self.audio.as_mut() {
                    a.set_key(token, key, value)?;
                }
            }
        }
        Ok(())
    }

    /// Parses the command form: a shape word then `key=value` words, e.g.
    /// `["sine", "freq=0.5", "min=0", "max=1", "phase=0"]`. A single word starting with `~` is
    /// taken as the compact form.
    pub fn parse_words<S: AsRef<str>>(words: &[S]) -> Result<Self> {
        let first = words.first().map(|w| w.as_ref()).unwrap_or("");
        if first.starts_with('~') {
            if let Some(extra) = words.get(1) {
                return Err(Error::BadOscillator {
                    token: extra.as_ref().to_string(),
                    reason: "nothing may follow a compact ~oscillator".into(),
                });
            }
            return Oscillator::parse_compact(first);
        }
        if first.eq_ignore_ascii_case("audio") {
            let mut osc = Oscillator::audio(crate::audio::AudioFollow::new(
                crate::audio::AudioFeature::Level,
            ));
            for w in &words[1..] {
                let w = w.as_ref();
                let (k, v) = w.split_once('=').ok_or_else(|| Error::BadOscillator {
                    token: w.to_string(),
                    reason: "expected key=value (feature, min, max, gain, attack, release)".into(),
                })?;
                osc.set_audio_key(w, k, v)?;
            }
            osc.validate()?;
            return Ok(osc);
        }
        let mut osc = Oscillator::new(first.parse()?);
        for w in &words[1..] {
            let w = w.as_ref();
            let (k, v) = w.split_once('=').ok_or_else(|| Error::BadOscillator {
                token: w.to_string(),
                reason: "expected key=value (freq, min, max, phase, width, seed)".into(),
            })?;
            osc.set_key(w, k, v)?;
        }
        osc.validate()?;
        Ok(osc)
    }
}

impl fmt::Display for Oscillator {
    /// The canonical compact form, which [`Oscillator::parse_compact`] reads back exactly.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(a) = &self.audio {
            write!(
                f,
                "~audio:{}:{}..{}",
                a.feature().name(),
                self.min,
                self.max
            )?;
            return a.fmt_fields(f);
        }
        write!(f, "~{}:", self.shape)?;
        if !self.per_beat {
            write!(f, "{}hz", self.freq_hz)?;
        } else if self.freq_hz > 0.0 && 1.0 / (1.0 / self.freq_hz) == self.freq_hz {
            // A period in beats where it reads back exactly (`4beats`), else cycles per beat.
            write!(f, "{}beats", 1.0 / self.freq_hz)?;
        } else {
            write!(f, "{}/beat", self.freq_hz)?;
        }
        write!(f, ":{}..{}:phase={}", self.min, self.max, self.phase)?;
        // Width and seed where the shape uses them, and wherever they differ from the default
        // (an oscillator reads back equal, whatever its shape).
        if self.shape == Shape::Pulse || self.width != DEFAULT_WIDTH {
            write!(f, ":width={}", self.width)?;
        }
        if matches!(self.shape, Shape::Random | Shape::RandomRamp) || self.seed != 0 {
            write!(f, ":seed={}", self.seed)?;
        }
        Ok(())
    }
}

impl FromStr for Oscillator {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Oscillator::parse_compact(s)
    }
}

/// An oscillator as written in a TOML project file:
/// `value = { osc = "sine", freq = 0.5, min = 0, max = 1, phase = 0.25 }`, or on the beat clock
/// `value = { osc = "square", beats = 4 }` (a period of 4 beats; `freq` and `beats` exclude
/// each other). Omitted fields take the defaults of [`Oscillator::new`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OscSpec {
    /// Shape name.
    pub osc: Shape,
    /// Frequency in Hz (1 when neither it nor `beats` is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq: Option<f64>,
    /// Period in beats of the beat clock, instead of `freq`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beats: Option<f64>,
    /// Range bottom.
    #[serde(default)]
    pub min: f64,
    /// Range top.
    #[serde(default = "default_max")]
    pub max: f64,
    /// Phase in cycles.
    #[serde(default)]
    pub phase: f64,
    /// Pulse width.
    #[serde(default = "default_width")]
    pub width: f64,
    /// Random seed.
    #[serde(default)]
    pub seed: u64,
}

fn default_max() -> f64 {
    DEFAULT_MAX
}
fn default_width() -> f64 {
    DEFAULT_WIDTH
}

impl TryFrom<OscSpec> for Oscillator {
    type Error = Error;

    fn try_from(s: OscSpec) -> Result<Self> {
        let (freq_hz, per_beat) = match (s.freq, s.beats) {
            (Some(_), Some(b)) => {
                return Err(Error::BadOscillator {
                    token: format!("beats={b}"),
                    reason: "give freq (Hz) or beats (a period in beats), not both".into(),
                })
            }
            (Some(hz), None) => (hz, false),
            (None, Some(b)) if b > 0.0 && b.is_finite() => (1.0 / b, true),
            (None, Some(b)) => {
                return Err(Error::BadOscillator {
                    token: format!("beats={b}"),
                    reason: "a period in beats must be a number > 0".into(),
                })
            }
            (None, None) => (DEFAULT_FREQ_HZ, false),
        };
        let osc = Oscillator {
            shape: s.osc,
            freq_hz,
            per_beat,
            min: s.min,
            max: s.max,
            phase: s.phase,
            width: s.width,
            seed: s.seed,
            audio: None,
        };
        osc.validate()?;
        Ok(osc)
    }
}

impl From<Oscillator> for OscSpec {
    fn from(o: Oscillator) -> Self {
        let (freq, beats) = if o.per_beat {
            (None, Some(1.0 / o.freq_hz))
        } else {
            (Some(o.freq_hz), None)
        };
        OscSpec {
            osc: o.shape,
            freq,
            beats,
            min: o.min,
            max: o.max,
            phase: o.phase,
            width: o.width,
            seed: o.seed,
        }
    }
}

/// A property value as given in a pipeline string or project file: fixed, or driven by an
/// oscillator.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// A fixed value, as text for the element's own property parser.
    Fixed(String),
    /// An oscillator.
    Osc(Oscillator),
}

impl ParamValue {
    /// Parses a property value from a pipeline string: text starting with `~` is an oscillator
    /// in the compact form, anything else is a fixed value.
    pub fn parse(text: &str) -> Result<Self> {
        if text.trim_start().starts_with('~') {
            Ok(ParamValue::Osc(Oscillator::parse_compact(text)?))
        } else {
            Ok(ParamValue::Fixed(text.to_string()))
        }
    }

    /// The value as pipeline-string text: the fixed text, or the oscillator's compact form
    /// (which [`ParamValue::parse`] reads back).
    pub fn to_text(&self) -> String {
        match self {
            ParamValue::Fixed(t) => t.clone(),
            ParamValue::Osc(o) => o.to_string(),
        }
    }
}

/// A property value in a TOML project file: a number, a bool, a string (which may be a compact
/// `~oscillator`) or an oscillator table. Convert with [`ParamValue::try_from`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamSpec {
    /// `{ osc = "sine", ... }`.
    Osc(OscSpec),
    /// `{ audio = "bass", ... }`: an audio binding.
    Audio(crate::audio::AudioSpec),
    /// `true` / `false`.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number.
    Float(f64),
    /// Text, or a compact oscillator `"~sine:1hz"`.
    Text(String),
}

impl TryFrom<ParamSpec> for ParamValue {
    type Error = Error;

    fn try_from(p: ParamSpec) -> Result<Self> {
        Ok(match p {
            ParamSpec::Osc(o) => ParamValue::Osc(o.try_into()?),
            ParamSpec::Audio(a) => ParamValue::Osc(a.try_into()?),
            ParamSpec::Bool(b) => ParamValue::Fixed(b.to_string()),
            ParamSpec::Int(i) => ParamValue::Fixed(i.to_string()),
            ParamSpec::Float(x) => ParamValue::Fixed(x.to_string()),
            ParamSpec::Text(t) => ParamValue::parse(&t)?,
        })
    }
}

/// Fixed-point scale of the master speed: speed is held as an integer count of 1/65536.
const SPEED_ONE: i64 = 1 << 16;

/// Turns frame timestamps into oscillator time under a master speed.
///
/// Oscillator time advances by `(pts − previous pts) × speed`, accumulated exactly in integer
/// fixed point (speed is quantised to 1/65536), so changing the speed changes the rate at which
/// the phase moves from that frame on, never the phase itself. Call [`advance`](Self::advance)
/// once per frame, at the source, and carry the result with the frame; all stages evaluate
/// their oscillators at that one osc time. Speed 0 freezes the oscillators; negative speeds
/// run them backwards.
///
/// It also keeps the **beat clock**: a beat position (in nanobeats, 1e9 = one beat) that
/// advances with the oscillator time at the tempo in force (one beat = 60/tempo s of oscillator
/// time, so the master speed scales it too). Like the speed, a tempo change only changes how
/// fast the position moves from the next frame on: beat oscillators never jump. The tempo is
/// quantised to 1/1000 bpm and the position accumulated exactly in integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OscClock {
    speed_q: i64,
    last_pts_ns: Option<i64>,
    /// Oscillator time × 65536.
    acc: i128,
    /// Tempo, 1/1000 bpm.
    tempo_mbpm: i64,
    /// Beat position in nanobeats × [`BEAT_SCALE`].
    beat_acc: i128,
}

/// A frame's time as oscillators read it: its oscillator time and its beat position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OscTime {
    /// Oscillator time, ns (frame timestamps × master speed).
    pub ns: i64,
    /// Beat position, nanobeats (1e9 = one beat of the beat clock).
    pub nanobeats: i64,
}

/// `beat_acc` per nanobeat: the oscillator time's 65536 times 60,000 (millibpm per beat/s).
const BEAT_SCALE: i128 = SPEED_ONE as i128 * 60_000;

impl Default for OscClock {
    fn default() -> Self {
        OscClock::new()
    }
}

impl OscClock {
    /// A clock at speed 1, oscillator time 0 at the first frame.
    pub fn new() -> Self {
        OscClock {
            speed_q: SPEED_ONE,
            last_pts_ns: None,
            acc: 0,
            tempo_mbpm: (crate::beat::DEFAULT_BPM * 1000.0) as i64,
            beat_acc: 0,
        }
    }

    /// Sets the tempo of the beat clock, bpm, effective from the next
    /// [`advance`](Self::advance): the beat position keeps its value and moves at the new rate
    /// from there. Refuses tempos outside 20..=999 bpm (and NaN).
    pub fn set_tempo(&mut self, bpm: f64) -> Result<()> {
        crate::beat::check_tempo(bpm)?;
        self.tempo_mbpm = (bpm * 1000.0).round() as i64;
        Ok(())
    }

    /// The tempo, bpm (as quantised to 1/1000).
    pub fn tempo(&self) -> f64 {
        self.tempo_mbpm as f64 / 1000.0
    }

    /// Re-aligns the beat phase to a tap made `lag_osc_ns` of oscillator time before the last
    /// frame advanced to: the beat position is moved by the least amount (at most half a beat,
    /// either way) that puts the tap on a whole beat. Effective from the next frame: the phase
    /// jumps once there, by design.
    pub fn align_beat(&mut self, lag_osc_ns: i64) {
        const BEAT: i128 = 1_000_000_000;
        let lag_beats = lag_osc_ns as i128 * self.tempo_mbpm as i128 / 60_000;
        let at_tap = self.beat_acc.div_euclid(BEAT_SCALE) - lag_beats;
        let r = at_tap.rem_euclid(BEAT);
        let shift = if r < BEAT / 2 { -r } else { BEAT - r };
        self.beat_acc = self.beat_acc.wrapping_add(shift * BEAT_SCALE);
    }

    /// Moves the beat position by `nanobeats` (either way), effective from the next frame:
    /// `tempo auto`'s phase correction, a small step toward an onset.
    pub fn shift_beat(&mut self, nanobeats: i64) {
        self.beat_acc = self.beat_acc.wrapping_add(nanobeats as i128 * BEAT_SCALE);
    }

    /// The beat position of the last frame advanced to, nanobeats (wraps like
    /// [`osc_time_ns`](Self::osc_time_ns)).
    pub fn nanobeats(&self) -> i64 {
        self.beat_acc.div_euclid(BEAT_SCALE) as i64
    }

    /// The [`OscTime`] of the last frame advanced to.
    pub fn time(&self) -> OscTime {
        OscTime {
            ns: self.osc_time_ns(),
            nanobeats: self.nanobeats(),
        }
    }

    /// Sets the master speed, effective from the next [`advance`](Self::advance). Refuses
    /// speeds outside ±[`MAX_SPEED`] (and NaN).
    pub fn set_speed(&mut self, speed: f64) -> Result<()> {
        if !(-MAX_SPEED..=MAX_SPEED).contains(&speed) {
            return Err(Error::BadArgument {
                command: "speed".into(),
                token: speed.to_string(),
                reason: "speed must be a number within ±100".into(),
            });
        }
        self.speed_q = (speed * SPEED_ONE as f64).round() as i64;
        Ok(())
    }

    /// The master speed (as quantised).
    pub fn speed(&self) -> f64 {
        self.speed_q as f64 / SPEED_ONE as f64
    }

    /// The oscillator time of the frame with timestamp `pts_ns`. The first frame is at osc
    /// time 0; each later one adds its pts delta times the speed in force. Integer and exact.
    pub fn advance(&mut self, pts_ns: i64) -> i64 {
        if let Some(last) = self.last_pts_ns {
            let step = (pts_ns as i128 - last as i128) * self.speed_q as i128;
            self.acc = self.acc.wrapping_add(step);
            self.beat_acc = self
                .beat_acc
                .wrapping_add(step.wrapping_mul(self.tempo_mbpm as i128));
        }
        self.last_pts_ns = Some(pts_ns);
        self.osc_time_ns()
    }

    /// The oscillator time of the last frame advanced to, ns. It wraps around at ±2^63 ns
    /// (292 years at speed 1, 2.9 years at the top speed); oscillators stay finite there too.
    pub fn osc_time_ns(&self) -> i64 {
        (self.acc.div_euclid(SPEED_ONE as i128)) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn at(osc: Oscillator, t_ns: i64) -> f64 {
        osc.value_at(t_ns)
    }

    #[test]
    fn shapes_at_known_times() {
        let sine = Oscillator::new(Shape::Sine).with_range(10.0, 20.0);
        assert_eq!(at(sine, 0), 15.0);
        assert_eq!(at(sine, S / 4), 20.0);
        assert_eq!(at(sine, 3 * S / 4), 10.0);
        assert!((at(sine, S / 2) - 15.0).abs() < 1e-12);

        let tri = Oscillator::new(Shape::Triangle).with_freq(2.0); // period 0.5 s
        assert_eq!(at(tri, 0), 0.0);
        assert_eq!(at(tri, S / 8), 0.5);
        assert_eq!(at(tri, S / 4), 1.0);
        assert_eq!(at(tri, 3 * S / 8), 0.5);
        assert_eq!(at(tri, S / 2), 0.0);

        let up = Oscillator::new(Shape::RampUp).with_range(0.0, 100.0);
        assert_eq!(at(up, S / 4), 25.0);
        assert_eq!(at(up, S + S / 2), 50.0);
        let down = Oscillator::new(Shape::RampDown).with_range(0.0, 100.0);
        assert_eq!(at(down, S / 4), 75.0);

        let sq = Oscillator::new(Shape::Square).with_range(-1.0, 1.0);
        assert_eq!(at(sq, 0), 1.0);
        assert_eq!(at(sq, S / 2 - 1), 1.0);
        assert_eq!(at(sq, S / 2), -1.0);
        assert_eq!(at(sq, S - 1), -1.0);
        assert_eq!(at(sq, S), 1.0);

        let pulse = Oscillator::new(Shape::Pulse)
            .with_width(0.1)
            .with_freq(10.0);
        assert_eq!(at(pulse, 0), 1.0);
        assert_eq!(at(pulse, S / 100 - 1), 1.0); // 10 % of a 100 ms cycle
        assert_eq!(at(pulse, S / 100), 0.0);
        assert_eq!(at(pulse, S / 10), 1.0);
    }

    #[test]
    fn phase_shifts_the_cycle() {
        let sine = Oscillator::new(Shape::Sine).with_phase(0.25);
        assert_eq!(sine.value_at(0), 1.0);
        let up = Oscillator::new(Shape::RampUp).with_phase(0.75);
        assert_eq!(up.value_at(S / 2), 0.25); // 0.5 + 0.75 = 1.25 -> 0.25
        let sq = Oscillator::new(Shape::Square).with_phase(0.5);
        assert_eq!(sq.value_at(0), 0.0);
    }

    #[test]
    fn long_runs_keep_phase_precision() {
        // After ~11.6 days at 0.5 Hz, a ramp is still exactly where it should be.
        let up = Oscillator::new(Shape::RampUp).with_freq(0.5);
        let t = 1_000_000 * S + S / 2; // 1e6 s + 0.5 s: 500000.25 cycles
        assert_eq!(up.value_at(t), 0.25);
    }

    #[test]
    fn random_is_held_per_cycle_and_repeatable_by_seed() {
        let r = Oscillator::new(Shape::Random)
            .with_seed(42)
            .with_range(0.0, 10.0);
        let a: Vec<f64> = (0..20).map(|k| r.value_at(k * S)).collect();
        // Held within a cycle.
        for k in 0..20 {
            assert_eq!(r.value_at(k * S + S / 3), a[k as usize]);
            assert_eq!(r.value_at(k * S + S - 1), a[k as usize]);
        }
        // In range, and not constant.
        assert!(a.iter().all(|v| (0.0..10.0).contains(v)), "{a:?}");
        assert!(a.windows(2).any(|w| w[0] != w[1]), "{a:?}");
        // Repeatable: a fresh oscillator with the same seed gives the same sequence.
        let again = Oscillator::new(Shape::Random)
            .with_seed(42)
            .with_range(0.0, 10.0);
        let b: Vec<f64> = (0..20).map(|k| again.value_at(k * S)).collect();
        assert_eq!(a, b);
        // Another seed, another sequence.
        let other = Oscillator::new(Shape::Random)
            .with_seed(43)
            .with_range(0.0, 10.0);
        let c: Vec<f64> = (0..20).map(|k| other.value_at(k * S)).collect();
        assert_ne!(a, c);
        // Spread: the mean of 2000 cycles is near the middle of the range.
        let mean = (0..2000).map(|k| r.value_at(k * S)).sum::<f64>() / 2000.0;
        assert!((mean - 5.0).abs() < 0.5, "mean {mean}");
    }

    #[test]
    fn random_ramp_joins_the_held_values() {
        let held = Oscillator::new(Shape::Random).with_seed(7);
        let ramp = Oscillator::new(Shape::RandomRamp).with_seed(7);
        for k in 0..10 {
            let a = held.value_at(k * S);
            let b = held.value_at((k + 1) * S);
            assert_eq!(ramp.value_at(k * S), a);
            let mid = ramp.value_at(k * S + S / 2);
            assert!((mid - (a + b) / 2.0).abs() < 1e-12, "cycle {k}");
        }
    }

    #[test]
    fn speed_change_does_not_jump_the_phase() {
        let up = Oscillator::new(Shape::RampUp).with_freq(0.1); // 10 s cycle
        let mut clock = OscClock::new();
        let period = S / 100; // 100 fps
        let mut values = Vec::new();
        for n in 0..300i64 {
            if n == 100 {
                clock.set_speed(2.0).unwrap();
            }
            if n == 200 {
                clock.set_speed(0.5).unwrap();
            }
            let t = clock.advance(n * period);
            values.push((t, up.value_at(t)));
        }
        // Osc time: 99 steps at speed 1, then 100 at 2, then 100 at 0.5 (the step into frame n
        // uses the speed in force when frame n is advanced).
        assert_eq!(values[99].0, 99 * period);
        assert_eq!(values[100].0, 99 * period + 2 * period);
        assert_eq!(
            values[299].0,
            99 * period + 100 * 2 * period + 100 * period / 2
        );
        // No jump: every step changes the value by at most 2 frames' worth at speed 2.
        let per_frame = 0.1 * period as f64 / S as f64;
        for w in values.windows(2) {
            let step = w[1].1 - w[0].1;
            assert!(step > 0.0 && step <= 2.0 * per_frame + 1e-12, "{w:?}");
        }
        assert_eq!(clock.speed(), 0.5);
        assert!(clock.set_speed(f64::NAN).is_err());
    }

    #[test]
    fn same_osc_time_same_value_in_any_order() {
        // Two stages evaluating one frame at different moments agree: evaluation is a pure
        // function of the osc time carried with the frame.
        let osc = Oscillator::new(Shape::RandomRamp)
            .with_seed(3)
            .with_freq(7.3);
        let mut clock = OscClock::new();
        let times: Vec<i64> = (0..50).map(|n| clock.advance(n * 33_366_667)).collect();
        let first: Vec<f64> = times.iter().map(|&t| osc.value_at(t)).collect();
        let later: Vec<f64> = times.iter().rev().map(|&t| osc.value_at(t)).collect();
        assert!(first.iter().eq(later.iter().rev()));
    }

    #[test]
    fn compact_form_parses_and_round_trips() {
        let o = Oscillator::parse_compact("~sine:0.5hz:0..1:phase=0.25").unwrap();
        assert_eq!(
            o,
            Oscillator::new(Shape::Sine).with_freq(0.5).with_phase(0.25)
        );
        let o = Oscillator::parse_compact("~pulse:2s:-5..5:width=0.2").unwrap();
        assert_eq!(o.freq_hz, 0.5);
        assert_eq!((o.min, o.max, o.width), (-5.0, 5.0, 0.2));
        let o = Oscillator::parse_compact("~random-ramp:freq=3:seed=9:max=2").unwrap();
        assert_eq!((o.freq_hz, o.seed, o.min, o.max), (3.0, 9, 0.0, 2.0));
        for o in [
            Oscillator::new(Shape::Pulse)
                .with_width(0.3)
                .with_range(1.5, -2.0),
            Oscillator::new(Shape::Random)
                .with_seed(77)
                .with_freq(0.125),
            Oscillator::new(Shape::RampDown).with_phase(0.5),
        ] {
            assert_eq!(Oscillator::parse_compact(&o.to_string()).unwrap(), o, "{o}");
        }
    }

    #[test]
    fn bad_compact_forms_name_the_token() {
        let cases = [
            ("~wobble:1hz", "wobble"),
            ("sine:1hz", "sine:1hz"),
            ("~sine:fasthz", "fasthz"),
            ("~sine:0..x", "0..x"),
            ("~sine:phase=2", "phase=2"),
            ("~sine:colour=red", "colour"),
            ("~sine:-1hz", "freq=-1"),
            ("~sine:17", "17"),
            ("~pulse:width=1.5", "width=1.5"),
            ("~random:seed=-1", "seed=-1"),
        ];
        for (text, token) in cases {
            let e = Oscillator::parse_compact(text).unwrap_err().to_string();
            assert!(e.contains(token), "{text}: {e}");
        }
    }

    #[test]
    fn word_form_parses() {
        let o =
            Oscillator::parse_words(&["sine", "freq=0.5", "min=0", "max=1", "phase=0"]).unwrap();
        assert_eq!(o, Oscillator::new(Shape::Sine).with_freq(0.5));
        let o = Oscillator::parse_words(&["~square:4hz"]).unwrap();
        assert_eq!(o, Oscillator::new(Shape::Square).with_freq(4.0));
        let e = Oscillator::parse_words(&["sine", "fast"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'fast'"), "{e}");
        let e = Oscillator::parse_words(&["~sine", "min=3"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("min=3"), "{e}");
    }

    #[test]
    fn toml_project_values() {
        #[derive(Deserialize)]
        struct Props {
            value: ParamSpec,
            blur: ParamSpec,
            what: ParamSpec,
            on: ParamSpec,
            size: ParamSpec,
            other: ParamSpec,
        }
        let p: Props = toml::from_str(
            r#"
            value = { osc = "random-ramp", freq = 0.5, min = 0, max = 1, seed = 4 }
            blur = 0.7
            what = "value"
            on = true
            size = 3
            other = "~triangle:2hz:1..3"
            "#,
        )
        .unwrap();
        assert_eq!(
            ParamValue::try_from(p.value).unwrap(),
            ParamValue::Osc(
                Oscillator::new(Shape::RandomRamp)
                    .with_freq(0.5)
                    .with_seed(4)
            )
        );
        assert_eq!(
            ParamValue::try_from(p.blur).unwrap(),
            ParamValue::Fixed("0.7".into())
        );
        assert_eq!(
            ParamValue::try_from(p.what).unwrap(),
            ParamValue::Fixed("value".into())
        );
        assert_eq!(
            ParamValue::try_from(p.on).unwrap(),
            ParamValue::Fixed("true".into())
        );
        assert_eq!(
            ParamValue::try_from(p.size).unwrap(),
            ParamValue::Fixed("3".into())
        );
        assert_eq!(
            ParamValue::try_from(p.other).unwrap(),
            ParamValue::Osc(
                Oscillator::new(Shape::Triangle)
                    .with_freq(2.0)
                    .with_range(1.0, 3.0)
            )
        );
        // The text form reads back to the same value.
        let osc = ParamValue::Osc(Oscillator::new(Shape::Pulse).with_width(0.2));
        assert_eq!(ParamValue::parse(&osc.to_text()).unwrap(), osc);
        // Unknown keys and shapes are refused with the offending name.
        let e = toml::from_str::<OscSpec>(
            r#"osc = "sine"
            frq = 2"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("frq"), "{e}");
        let e = toml::from_str::<OscSpec>(r#"osc = "wobble""#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("wobble"), "{e}");
        let e =
            Oscillator::try_from(toml::from_str::<OscSpec>("osc = \"sine\"\nphase = 3").unwrap())
                .unwrap_err()
                .to_string();
        assert!(e.contains("phase=3"), "{e}");
    }

    /// Issue #7: `~sine:1e300hz` (and a huge speed) once made `t·freq` infinite, the value NaN,
    /// and a frei0r plugin crashed on it. Such parameters are now refused, naming the field.
    #[test]
    fn absurd_oscillator_parameters_are_refused_naming_the_range() {
        for (text, token) in [
            ("~sine:1e300hz", "freq=1e300"),
            ("~sine:1000.5hz", "freq=1000.5"),
            ("~sine:1e-300s", "freq="),
            ("~sine:freq=inf", "freq=inf"),
            ("~sine:freq=nan", "freq=nan"),
            ("~sine:-1e308..1e308", "min=-1e308"),
            ("~sine:0..1e10", "max=1e10"),
        ] {
            let e = Oscillator::parse_compact(text).unwrap_err().to_string();
            assert!(e.contains(token), "{text}: {e}");
            if token.starts_with("freq") && !text.contains("=inf") && !text.contains("=nan") {
                assert!(e.contains("0..=1000 Hz"), "{text}: {e}");
            }
        }
        let mut clock = OscClock::new();
        for speed in [100.5, -1e6, 1e308, f64::INFINITY, f64::NAN] {
            let e = clock.set_speed(speed).unwrap_err().to_string();
            assert!(e.contains("±100"), "{speed}: {e}");
        }
        assert_eq!(clock.speed(), 1.0, "a refused speed changes nothing");
        for line in ["speed 1e308", "speed 101", "speed -100.01", "speed nan"] {
            assert!(crate::Command::parse(line).is_err(), "{line}");
        }
        assert_eq!(
            crate::Command::parse("speed -100"),
            Ok(crate::Command::Speed(-100.0))
        );
    }

    /// Every oscillator `validate` accepts, at its extremes, gives a finite value within its
    /// range at every oscillator time an `OscClock` can produce (both ends of `i64`, around
    /// 2^53 where `f64` stops being exact, and long-run times).
    #[test]
    fn every_accepted_oscillator_is_finite_and_in_range_at_every_time() {
        let times = [
            i64::MIN,
            i64::MIN + 1,
            -S,
            -1,
            0,
            1,
            33_366_667,
            (1 << 53) + 1,
            100 * 365 * 86_400 * S,
            i64::MAX / 2,
            i64::MAX - 1,
            i64::MAX,
        ];
        let mut checked = 0;
        for shape in Shape::ALL {
            for freq in [0.0, 1e-300, 1e-9, 1.0, 999.999, MAX_FREQ_HZ] {
                for (min, max) in [
                    (-MAX_LEVEL, MAX_LEVEL),
                    (MAX_LEVEL, -MAX_LEVEL),
                    (MAX_LEVEL, MAX_LEVEL),
                    (0.0, 1.0),
                ] {
                    for (phase, width) in [(0.0, 0.0), (1.0, 1.0), (0.999_999, 0.5)] {
                        let osc = Oscillator {
                            shape,
                            freq_hz: freq,
                            per_beat: false,
                            min,
                            max,
                            phase,
                            width,
                            seed: u64::MAX,
                            audio: None,
                        };
                        osc.validate().unwrap();
                        let (lo, hi) = (min.min(max), min.max(max));
                        for t in times {
                            let v = osc.value_at(t);
                            assert!(v.is_finite() && v >= lo && v <= hi, "{osc} at {t} ns: {v}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 8 * 6 * 4 * 3 * times.len());
        // The clock at top speed over a huge timestamp jump neither panics nor leaves i64.
        let mut clock = OscClock::new();
        clock.set_speed(MAX_SPEED).unwrap();
        clock.advance(i64::MIN);
        let t = clock.advance(i64::MAX);
        assert!(Oscillator::new(Shape::Sine).value_at(t).is_finite());
    }

    /// Issue #10: oscillator frequencies in beats, in the compact, word and TOML forms.
    #[test]
    fn beat_frequencies_parse_and_round_trip() {
        let o = Oscillator::parse_compact("~sine:1beat:0..1").unwrap();
        assert_eq!(o, Oscillator::new(Shape::Sine).with_beats(1.0));
        assert!(o.per_beat && o.freq_hz == 1.0);
        let o = Oscillator::parse_compact("~square:4beats").unwrap();
        assert_eq!((o.freq_hz, o.per_beat), (0.25, true));
        let o = Oscillator::parse_compact("~ramp-up:0.5beat:2..3").unwrap();
        assert_eq!((o.freq_hz, o.per_beat, o.min, o.max), (2.0, true, 2.0, 3.0));
        let o = Oscillator::parse_compact("~triangle:freq=3/beat").unwrap();
        assert_eq!((o.freq_hz, o.per_beat), (3.0, true));
        let o = Oscillator::parse_words(&["pulse", "freq=2beats", "width=0.1"]).unwrap();
        assert_eq!((o.freq_hz, o.per_beat, o.width), (0.5, true, 0.1));
        // Hz after beats switches back.
        let o = Oscillator::parse_compact("~sine:4beats:2hz").unwrap();
        assert_eq!((o.freq_hz, o.per_beat), (2.0, false));
        // Display reads back exactly, as a period where it can.
        for o in [
            Oscillator::new(Shape::Square).with_beats(4.0),
            Oscillator::new(Shape::Sine).with_beats(3.0),
            Oscillator::new(Shape::Sine).with_beats(0.5),
            Oscillator::new(Shape::Pulse)
                .with_beats(1.0)
                .with_width(0.25),
            Oscillator {
                freq_hz: 0.0,
                ..Oscillator::new(Shape::Sine).with_beats(1.0)
            },
        ] {
            let text = o.to_string();
            assert_eq!(Oscillator::parse_compact(&text).unwrap(), o, "{text}");
            assert_eq!(Oscillator::parse_compact(&text).unwrap().to_string(), text);
        }
        assert!(Oscillator::new(Shape::Square)
            .with_beats(4.0)
            .to_string()
            .contains(":4beats:"));
        // Errors name the field.
        for (text, token) in [
            ("~sine:0beats", "0beats"),
            ("~sine:-2beats", "-2beats"),
            ("~sine:xbeat", "xbeat"),
            ("~sine:2000/beat", "freq=2000"),
            ("~sine:fast/beat", "fast/beat"),
        ] {
            let e = Oscillator::parse_compact(text).unwrap_err().to_string();
            assert!(e.contains(token), "{text}: {e}");
        }
        let e = Oscillator::parse_compact("~sine:2000/beat")
            .unwrap_err()
            .to_string();
        assert!(e.contains("per beat"), "{e}");
        // TOML: `beats` is a period in beats; `freq` and `beats` exclude each other.
        let spec: OscSpec = toml::from_str("osc = \"square\"\nbeats = 4\nmax = 2").unwrap();
        assert_eq!(
            Oscillator::try_from(spec).unwrap(),
            Oscillator::new(Shape::Square)
                .with_beats(4.0)
                .with_range(0.0, 2.0)
        );
        let spec: OscSpec = toml::from_str("osc = \"sine\"").unwrap();
        assert_eq!(
            Oscillator::try_from(spec).unwrap(),
            Oscillator::new(Shape::Sine)
        );
        for (text, token) in [
            ("osc = \"sine\"\nbeats = 4\nfreq = 2", "beats=4"),
            ("osc = \"sine\"\nbeats = 0", "beats=0"),
            ("osc = \"sine\"\nbeats = -1", "beats=-1"),
        ] {
            let spec: OscSpec = toml::from_str(text).unwrap();
            let e = Oscillator::try_from(spec).unwrap_err().to_string();
            assert!(e.contains(token), "{text}: {e}");
        }
        // The spec written from a beat oscillator reads back.
        let o = Oscillator::new(Shape::Triangle).with_beats(2.0);
        assert_eq!(Oscillator::try_from(OscSpec::from(o)).unwrap(), o);
    }

    /// A beat oscillator follows the beat position; the beat clock follows oscillator time at
    /// the tempo, so the master speed scales it, and a tempo change never moves the position.
    #[test]
    fn beat_clock_follows_tempo_and_speed_without_jumps() {
        let mut clock = OscClock::new();
        assert_eq!(clock.tempo(), 120.0);
        let frame = S / 100; // 100 fps
                             // 120 bpm: one beat per 0.5 s = 50 frames.
        for n in 0..=100 {
            clock.advance(n * frame);
        }
        assert_eq!(
            clock.time(),
            OscTime {
                ns: S,
                nanobeats: 2 * S
            }
        );
        let sq = Oscillator::new(Shape::Square).with_beats(1.0);
        assert_eq!(sq.value_in(clock.time()), 1.0);
        assert_eq!(
            sq.value_in(OscTime {
                ns: S / 4,
                nanobeats: S / 2
            }),
            0.0
        );
        // 90 bpm from here: the position continues from 2 beats at 1.5 beats/s.
        clock.set_tempo(90.0).unwrap();
        assert_eq!(
            clock.nanobeats(),
            2 * S,
            "a tempo change does not move the phase"
        );
        clock.advance(101 * frame);
        assert_eq!(clock.nanobeats(), 2 * S + S * 3 / 200);
        // Speed 2 doubles the beat rate too.
        clock.set_speed(2.0).unwrap();
        clock.advance(102 * frame);
        assert_eq!(clock.nanobeats(), 2 * S + 3 * S * 3 / 200);
        // Refused tempos change nothing and name the value.
        for bpm in [19.0, 1000.0, f64::NAN] {
            let e = clock.set_tempo(bpm).unwrap_err().to_string();
            assert!(e.contains(&bpm.to_string()), "{e}");
        }
        assert_eq!(clock.tempo(), 90.0);
    }

    /// A tap re-aligns the beat so that the tap instant falls on a whole beat, moving the
    /// position by at most half a beat.
    #[test]
    fn align_beat_puts_the_tap_on_a_whole_beat() {
        let mut clock = OscClock::new(); // 120 bpm
        let frame = S / 100;
        for n in 0..=30 {
            clock.advance(n * frame); // 0.3 s: 0.6 beat
        }
        assert_eq!(clock.nanobeats(), 6 * S / 10);
        // Tapped now: 0.6 is nearer 1 than 0: forward by 0.4 beat.
        let mut c = clock;
        c.align_beat(0);
        assert_eq!(c.nanobeats(), S);
        // Tapped 0.2 s ago (0.4 beat ago, at beat 0.2): back by 0.2 beat.
        let mut c = clock;
        c.align_beat(S / 5);
        assert_eq!(c.nanobeats(), 4 * S / 10);
        // The tempo and the osc time are untouched.
        assert_eq!((c.tempo(), c.osc_time_ns()), (120.0, 3 * S / 10));
    }
}
