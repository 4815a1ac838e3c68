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
/// Longest attack or release accepted, ms (60 s).
pub const MAX_ENVELOPE_MS: u16 = 60_000;
/// Largest gain accepted (gains are kept in hundredths, in 12 bits).
pub const MAX_GAIN: f64 = 40.0;

/// What an audio binding follows, each in `0..=1` for a full-scale signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AudioFeature {
    /// RMS level of the analysis window (a full-scale sine: 0.707).
    Level,
    /// Peak magnitude of the samples since the previous frame.
    Peak,
    /// Amplitude of the content of band 0 (a full-scale sine inside it: 1); by default
    /// `bass`, 20–250 Hz.
    Band0,
    /// Band 1; by default `low-mid`, 250–2000 Hz.
    Band1,
    /// Band 2; by default `high-mid`, 2–6 kHz.
    Band2,
    /// Band 3; by default `treble`, 6–20 kHz.
    Band3,
    /// Band 4 (with `--audio-bands`).
    Band4,
    /// Band 5.
    Band5,
    /// Band 6.
    Band6,
    /// Band 7.
    Band7,
    /// 1 on a frame with an onset (a hit) since the previous frame, else 0.
    Onset,
    /// Spectral flux (onset strength), the largest since the previous frame.
    Flux,
}

impl AudioFeature {
    /// Names accepted, for error messages.
    pub const NAMES: &'static str =
        "level, peak, bass, low-mid, high-mid, treble, band0..band7, onset, flux";

    const BANDS: [AudioFeature; MAX_BANDS] = [
        AudioFeature::Band0,
        AudioFeature::Band1,
        AudioFeature::Band2,
        AudioFeature::Band3,
        AudioFeature::Band4,
        AudioFeature::Band5,
        AudioFeature::Band6,
        AudioFeature::Band7,
    ];

    const ALL: [AudioFeature; 12] = [
        AudioFeature::Level,
        AudioFeature::Peak,
        AudioFeature::Band0,
        AudioFeature::Band1,
        AudioFeature::Band2,
        AudioFeature::Band3,
        AudioFeature::Band4,
        AudioFeature::Band5,
        AudioFeature::Band6,
        AudioFeature::Band7,
        AudioFeature::Onset,
        AudioFeature::Flux,
    ];

    /// Band `n` (`None` past [`MAX_BANDS`]).
    pub fn band(n: usize) -> Option<Self> {
        Self::BANDS.get(n).copied()
    }

    /// The band's number, for a band.
    pub fn band_index(self) -> Option<usize> {
        Self::BANDS.iter().position(|&b| b == self)
    }

    /// Its name in bindings (`bass`, `band5`, `onset`).
    pub fn name(self) -> String {
        match self {
            AudioFeature::Level => "level".into(),
            AudioFeature::Peak => "peak".into(),
            AudioFeature::Band0 => "bass".into(),
            AudioFeature::Band1 => "low-mid".into(),
            AudioFeature::Band2 => "high-mid".into(),
            AudioFeature::Band3 => "treble".into(),
            AudioFeature::Onset => "onset".into(),
            AudioFeature::Flux => "flux".into(),
            band => format!("band{}", band.band_index().unwrap_or(0)),
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
            "bass" => AudioFeature::Band0,
            "low-mid" | "lowmid" => AudioFeature::Band1,
            "high-mid" | "highmid" => AudioFeature::Band2,
            "treble" => AudioFeature::Band3,
            "onset" | "hit" => AudioFeature::Onset,
            "flux" => AudioFeature::Flux,
            other => match other
                .strip_prefix("band")
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(AudioFeature::band)
            {
                Some(b) => b,
                None => {
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
///
/// Six bytes, packed: it rides in every [`Oscillator`](crate::Oscillator) (in what was its
/// padding), and commands carry oscillators by value and are handed back whole when a queue
/// is full, so a binding must not make them larger. `head` is the feature (its index + 1, so
/// never 0: an `Option<AudioFollow>` is six bytes too) in the top 4 bits and the gain in
/// hundredths in the low 12; the times are whole ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioFollow {
    head: std::num::NonZeroU16,
    attack_ms: u16,
    release_ms: u16,
}

/// The `head` of a feature and a gain in hundredths (at most 4095).
fn head(feature: AudioFeature, gain_centi: u16) -> std::num::NonZeroU16 {
    let f = AudioFeature::ALL
        .iter()
        .position(|&a| a == feature)
        .unwrap_or(0) as u16;
    std::num::NonZeroU16::new(((f + 1) << 12) | (gain_centi & 0x0fff))
        .unwrap_or(std::num::NonZeroU16::MIN)
}

impl AudioFollow {
    /// Follows `feature` at gain 1, with no envelope.
    pub fn new(feature: AudioFeature) -> Self {
        AudioFollow {
            head: head(feature, 100),
            attack_ms: 0,
            release_ms: 0,
        }
    }

    /// The feature followed.
    pub fn feature(&self) -> AudioFeature {
        AudioFeature::ALL[((self.head.get() >> 12) as usize - 1).min(11)]
    }

    fn gain_centi(&self) -> u16 {
        self.head.get() & 0x0fff
    }

    /// Multiplies the feature before the envelope (and the clamp to 0..1).
    pub fn gain(&self) -> f64 {
        self.gain_centi() as f64 / 100.0
    }

    /// Time constant of a rise, ns: 63 % of a step up after it (0: at once).
    pub fn attack_ns(&self) -> u64 {
        self.attack_ms as u64 * 1_000_000
    }

    /// Time constant of a fall, ns (0: at once); modV's "fall", Veejay's cooldown.
    pub fn release_ns(&self) -> u64 {
        self.release_ms as u64 * 1_000_000
    }

    /// Sets the gain (0..=[`MAX_GAIN`], to a hundredth).
    pub fn with_gain(mut self, gain: f64) -> Result<Self> {
        if !(0.0..=MAX_GAIN).contains(&gain) {
            return Err(Error::BadOscillator {
                token: format!("gain={gain}"),
                reason: format!("gain must be a number within 0..={MAX_GAIN}"),
            });
        }
        self.head = head(self.feature(), (gain * 100.0).round() as u16);
        Ok(self)
    }

    /// Sets one `key=value` field (`gain`, `attack`, `release`, `feature`); `token` is what
    /// errors name.
    pub(crate) fn set_key(&mut self, token: &str, key: &str, value: &str) -> Result<()> {
        match key.trim() {
            "gain" => {
                let g: f64 = value.trim().parse().map_err(|_| Error::BadOscillator {
                    token: token.to_string(),
                    reason: "gain is a number, e.g. gain=2".into(),
                })?;
                *self = self.with_gain(g)?;
            }
            "attack" => self.attack_ms = parse_duration_ms(token, value)?,
            "release" => self.release_ms = parse_duration_ms(token, value)?,
            "feature" => self.head = head(value.parse()?, self.gain_centi()),
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
        if self.gain_centi() != 100 {
            write!(f, ":gain={}", self.gain())?;
        }
        if self.attack_ms != 0 {
            write!(f, ":attack={}ms", self.attack_ms)?;
        }
        if self.release_ms != 0 {
            write!(f, ":release={}ms", self.release_ms)?;
        }
        Ok(())
    }
}

/// Parses `300ms` or `0.3s` into whole ms (at most [`MAX_ENVELOPE_MS`]); `token` is what
/// errors name.
pub fn parse_duration_ms(token: &str, text: &str) -> Result<u16> {
    let t = text.trim().to_ascii_lowercase();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e3)
    } else {
        return Err(Error::BadOscillator {
            token: token.to_string(),
            reason: "a duration needs a unit: 300ms or 0.3s".into(),
        });
    };
    match num.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 && x * scale <= MAX_ENVELOPE_MS as f64 => {
            Ok((x * scale).round() as u16)
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
    #[serde(default = "one")]
    pub gain: f64,
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

impl TryFrom<AudioSpec> for crate::Oscillator {
    type Error = Error;

    fn try_from(s: AudioSpec) -> Result<Self> {
        let mut follow = AudioFollow::new(s.audio.parse()?).with_gain(s.gain)?;
        if let Some(a) = &s.attack {
            follow.attack_ms = parse_duration_ms(&format!("attack={a}"), a)?;
        }
        if let Some(r) = &s.release {
            follow.release_ms = parse_duration_ms(&format!("release={r}"), r)?;
        }
        let osc = crate::Oscillator::audio(follow).with_range(s.min, s.max);
        osc.validate()?;
        Ok(osc)
    }
}

#[cfg(test)]
mod tests {
    use super::AudioFollow;
    use crate::{Oscillator, ParamSpec, ParamValue};

    #[test]
    fn an_audio_binding_reads_back_from_its_compact_form() {
        for text in [
            "~audio:bass:0..1",
            "~audio:onset:0..1",
            "~audio:level:0.2..0.9:attack=5ms:release=300ms",
            "~audio:band5:-1..3:gain=2.5:release=1500ms",
        ] {
            let o = Oscillator::parse_compact(text).unwrap();
            assert!(o.audio.is_some(), "{text}");
            assert_eq!(o.to_string(), text);
            assert_eq!(Oscillator::parse_compact(&o.to_string()).unwrap(), o);
        }
        let o = Oscillator::parse_compact("~audio:level:0.2..0.9:attack=5ms:release=0.3s").unwrap();
        let a = o.audio.unwrap();
        assert_eq!((a.attack_ns(), a.release_ns()), (5_000_000, 300_000_000));
        assert_eq!((o.min, o.max), (0.2, 0.9));
        assert_eq!(a.gain(), 1.0);
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
            ("~audio:bass:gain=41", "gain"),
            ("~audio:bass:freq=2", "unknown key 'freq'"),
            ("~audio", "needs a feature"),
        ] {
            let e = Oscillator::parse_compact(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    /// Commands carry oscillators by value, and a command is handed back whole when a queue
    /// is full: a binding must not make them larger than they were (an oscillator is 56
    /// bytes: six of them were its padding).
    #[test]
    fn an_audio_binding_keeps_the_oscillator_at_56_bytes() {
        assert_eq!(std::mem::size_of::<Option<AudioFollow>>(), 6);
        assert_eq!(std::mem::size_of::<Oscillator>(), 56);
        for f in super::AudioFeature::ALL {
            let a = AudioFollow::new(f).with_gain(40.0).unwrap();
            assert_eq!((a.feature(), a.gain()), (f, 40.0));
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
