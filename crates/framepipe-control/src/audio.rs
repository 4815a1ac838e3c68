//! Audio bindings: a property that follows the show's audio analysis (issue #25), written
//! where an oscillator is: `blur=~audio:bass:0..1`, `set glow.blur ~audio:onset`,
//! `~audio:level:0.2..0.9:attack=5ms:release=300ms:gain=2`, in TOML
//! `{ audio = "bass", min = 0, max = 1, release = "300ms" }`.
//!
//! An audio binding is an [`Oscillator`](crate::Oscillator) whose `audio` field is set: its
//! `min`/`max` are the range, and the value for a frame is
//! `min + (max − min)·clamp(envelope(gain·feature), 0, 1)`, where `feature` is the analysis of
//! the audio at the frame's time (framepipe-audio's `AudioFrame`), and `envelope` follows it
//! with the binding's attack and release times (0: at once). Riding on the oscillator type, it
//! goes wherever an oscillator goes (pipeline strings, project files, `set`, `osc`, OSC, the
//! web page) with no surface of its own.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// Number of analysis bands at most (`band0` .. `band7`).
pub const MAX_BANDS: usize = 8;
/// Longest attack or release accepted: 60 s, in µs.
pub const MAX_ENVELOPE_US: u32 = 60_000_000;
/// Largest gain accepted.
pub const MAX_GAIN: f32 = 1000.0;

/// What an audio binding follows, each in `0..=1` for a full-scale signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AudioFeature {
    /// RMS level of the analysis window (a full-scale sine: 0.707).
    Level,
    /// Peak magnitude of the samples since the previous frame.
    Peak,
    /// Amplitude of the content of band `n` (a full-scale sine inside it: 1). The default
    /// bands: 0 `bass` (20–250 Hz), 1 `low-mid` (250–2000 Hz), 2 `high-mid` (2–6 kHz),
    /// 3 `treble` (6–20 kHz).
    Band(u8),
    /// 1 on a frame with an onset (a hit) since the previous frame, else 0.
    Onset,
    /// Spectral flux (onset strength), the largest since the previous frame, scaled so that a
    /// full-scale click is about 1.
    Flux,
}

impl AudioFeature {
    /// Names accepted, for error messages.
    pub const NAMES: &'static str =
        "level, peak, bass, low-mid, high-mid, treble, band0..band7, onset, flux";

    /// Its name in bindings (`bass`, `band5`, `onset`).
    pub fn name(self) -> String {
        match self {
            AudioFeature::Level => "level".into(),
            AudioFeature::Peak => "peak".into(),
            AudioFeature::Band(0) => "bass".into(),
            AudioFeature::Band(1) => "low-mid".into(),
            AudioFeature::Band(2) => "high-mid".into(),
            AudioFeature::Band(3) => "treble".into(),
            AudioFeature::Band(n) => format!("band{n}"),
            AudioFeature::Onset => "onset".into(),
            AudioFeature::Flux => "flux".into(),
        }
    }
}

impl FromStr for AudioFeature {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let w = s.trim().to_ascii_lowercase().replace('_', "-");
        Ok(match w.as_str() {
            "level" | "rms" => AudioFeature::Level,
            "peak" => AudioFeature::Peak,
            "bass" => AudioFeature::Band(0),
            "low-mid" | "lowmid" => AudioFeature::Band(1),
            "high-mid" | "highmid" => AudioFeature::Band(2),
            "treble" => AudioFeature::Band(3),
            "onset" | "hit" => AudioFeature::Onset,
            "flux" => AudioFeature::Flux,
            other => match other.strip_prefix("band").map(str::parse::<u8>) {
                Some(Ok(n)) if (n as usize) < MAX_BANDS => AudioFeature::Band(n),
                _ => {
                    return Err(Error::BadOscillator {
                        token: s.to_string(),
                        reason: format!("unknown audio feature; expected one of: {}", Self::NAMES),
                    })
                }
            },
        })
    }
}

/// How a property follows an [`AudioFeature`]: gain, then an attack/release envelope.
/// (16 bytes: it rides in every [`Oscillator`](crate::Oscillator), which commands carry by
/// value.)
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AudioFollow {
    /// The feature followed.
    pub feature: AudioFeature,
    /// Multiplies the feature before the envelope (and the clamp to 0..1).
    pub gain: f32,
    /// Time to rise by 63 % of a step up, µs (0: at once).
    pub attack_us: u32,
    /// Time to fall by 63 % of a step down, µs (0: at once); modV's "fall", Veejay's
    /// cooldown.
    pub release_us: u32,
}

impl AudioFollow {
    /// Follows `feature` at gain 1, with no envelope.
    pub fn new(feature: AudioFeature) -> Self {
        AudioFollow {
            feature,
            gain: 1.0,
            attack_us: 0,
            release_us: 0,
        }
    }

    /// Checks gain and envelope times.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=MAX_GAIN).contains(&self.gain) {
            return Err(Error::BadOscillator {
                token: format!("gain={}", self.gain),
                reason: "gain must be a number within 0..=1000".into(),
            });
        }
        for (k, v) in [("attack", self.attack_us), ("release", self.release_us)] {
            if v > MAX_ENVELOPE_US {
                return Err(Error::BadOscillator {
                    token: format!("{k}={}ms", v / 1000),
                    reason: "an envelope time is at most 60s".into(),
                });
            }
        }
        if let AudioFeature::Band(n) = self.feature {
            if n as usize >= MAX_BANDS {
                return Err(Error::BadOscillator {
                    token: format!("band{n}"),
                    reason: "bands are band0..band7".into(),
                });
            }
        }
        Ok(())
    }

    /// Sets one `key=value` field (`gain`, `attack`, `release`, `feature`); `token` is what
    /// errors name.
    pub(crate) fn set_key(&mut self, token: &str, key: &str, value: &str) -> Result<()> {
        match key.trim() {
            "gain" => {
                self.gain = value.trim().parse().map_err(|_| Error::BadOscillator {
                    token: token.to_string(),
                    reason: "gain is a number, e.g. gain=2".into(),
                })?
            }
            "attack" => self.attack_us = parse_duration_us(token, value)?,
            "release" => self.release_us = parse_duration_us(token, value)?,
            "feature" => self.feature = value.parse()?,
            other => {
                return Err(Error::BadOscillator {
                    token: token.to_string(),
                    reason: format!(
                        "unknown key '{other}' of an audio binding; expected min, max, gain, \
                         attack or release"
                    ),
                })
            }
        }
        Ok(())
    }

    /// Writes the fields after the feature and range (`:gain=2:attack=5ms`), those that
    /// differ from the defaults.
    pub(crate) fn fmt_fields(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.gain != 1.0 {
            write!(f, ":gain={}", self.gain)?;
        }
        if self.attack_us != 0 {
            write!(f, ":attack={}", Ms(self.attack_us))?;
        }
        if self.release_us != 0 {
            write!(f, ":release={}", Ms(self.release_us))?;
        }
        Ok(())
    }
}

/// A duration in µs written in ms (`300ms`) or µs (`2500us`), read back exactly by
/// [`parse_duration_us`].
struct Ms(u32);

impl fmt::Display for Ms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 / 1000 * 1000 == self.0 {
            write!(f, "{}ms", self.0 / 1000)
        } else {
            write!(f, "{}us", self.0)
        }
    }
}

/// Parses `300ms`, `0.3s`, `250us` into µs; `token` is what errors name.
pub fn parse_duration_us(token: &str, text: &str) -> Result<u32> {
    let t = text.trim().to_ascii_lowercase();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e6)
    } else {
        return Err(Error::BadOscillator {
            token: token.to_string(),
            reason: "a duration needs a unit: 300ms, 0.3s or 250us".into(),
        });
    };
    match num.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 && x * scale <= MAX_ENVELOPE_US as f64 => {
            Ok((x * scale).round() as u32)
        }
        _ => Err(Error::BadOscillator {
            token: token.to_string(),
            reason: "a duration is a number ≥ 0 and at most 60s, e.g. 300ms".into(),
        }),
    }
}

/// An audio binding as written in a TOML project file:
/// `{ audio = "bass", min = 0, max = 1, gain = 2, attack = "5ms", release = "300ms" }`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioSpec {
    /// The feature's name (`bass`, `onset`, `band5`, ...).
    pub audio: String,
    /// Range bottom.
    #[serde(default)]
    pub min: f64,
    /// Range top.
    #[serde(default = "one")]
    pub max: f64,
    /// Gain.
    #[serde(default = "one_f32")]
    pub gain: f32,
    /// Attack time (`"5ms"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attack: Option<String>,
    /// Release time (`"300ms"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

fn one() -> f64 {
    1.0
}
fn one_f32() -> f32 {
    1.0
}

impl TryFrom<AudioSpec> for crate::Oscillator {
    type Error = Error;

    fn try_from(s: AudioSpec) -> Result<Self> {
        let mut follow = AudioFollow::new(s.audio.parse()?);
        follow.gain = s.gain;
        if let Some(a) = &s.attack {
            follow.attack_us = parse_duration_us(&format!("attack={a}"), a)?;
        }
        if let Some(r) = &s.release {
            follow.release_us = parse_duration_us(&format!("release={r}"), r)?;
        }
        let osc = crate::Oscillator::audio(follow).with_range(s.min, s.max);
        osc.validate()?;
        Ok(osc)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Oscillator, ParamSpec, ParamValue};

    #[test]
    fn an_audio_binding_reads_back_from_its_compact_form() {
        for text in [
            "~audio:bass:0..1",
            "~audio:onset:0..1",
            "~audio:level:0.2..0.9:attack=5ms:release=300ms",
            "~audio:band5:-1..3:gain=2.5:release=1500us",
            "~audio:flux:0..1:attack=1us",
        ] {
            let o = Oscillator::parse_compact(text).unwrap();
            assert!(o.audio.is_some(), "{text}");
            assert_eq!(o.to_string(), text);
            assert_eq!(Oscillator::parse_compact(&o.to_string()).unwrap(), o);
        }
        let o = Oscillator::parse_compact("~audio:level:0.2..0.9:attack=5ms:release=0.3s").unwrap();
        let a = o.audio.unwrap();
        assert_eq!((a.attack_us, a.release_us), (5_000, 300_000));
        assert_eq!((o.min, o.max), (0.2, 0.9));
        // The command form.
        let w = Oscillator::parse_words(&["audio", "feature=treble", "max=4", "gain=3"]).unwrap();
        assert_eq!(w.to_string(), "~audio:treble:0..4:gain=3");
    }

    #[test]
    fn a_bad_audio_binding_names_the_field() {
        for (text, needle) in [
            ("~audio:bas", "unknown audio feature"),
            ("~audio:band8", "unknown audio feature"),
            ("~audio:bass:release=300", "needs a unit"),
            ("~audio:bass:gain=-1", "gain"),
            ("~audio:bass:attack=61s", "at most 60s"),
            ("~audio:bass:freq=2", "unknown key 'freq'"),
            ("~audio", "needs a feature"),
        ] {
            let e = Oscillator::parse_compact(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn a_toml_audio_table_is_an_audio_binding() {
        #[derive(serde::Deserialize)]
        struct P {
            blur: ParamSpec,
        }
        let p: P =
            toml::from_str(r#"blur = { audio = "bass", min = 0, max = 1, release = "300ms" }"#)
                .unwrap();
        let ParamValue::Osc(o) = ParamValue::try_from(p.blur).unwrap() else {
            panic!("not a binding")
        };
        assert_eq!(o.to_string(), "~audio:bass:0..1:release=300ms");
        let p: P = toml::from_str(r#"blur = "~audio:onset""#).unwrap();
        assert!(matches!(
            ParamValue::try_from(p.blur).unwrap(),
            ParamValue::Osc(Oscillator { audio: Some(_), .. })
        ));
    }
}
