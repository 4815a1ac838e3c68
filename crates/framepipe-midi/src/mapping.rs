//! Mappings: a control ([`Control`]) read in a [`MidiMode`] and what it drives ([`Action`]),
//! and the arithmetic from MIDI values to property values.
//!
//! * Absolute 7-bit: `min + value / 127 × (max − min)`; 14-bit: `(msb × 128 + lsb) / 16383`.
//! * Relative: each message is a step of `(max − min) / 127` up or down (at least 1 for
//!   integers), from the value the property has now, clamped to the range.
//! * Integers round to the nearest; booleans are `true` from the middle up (value ≥ 64).

use std::fmt;

use framepipe_control::Encoding;
use framepipe_project::{MidiBinding, MidiControlKind, MidiMode};

/// A property's range, from its spec.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Range {
    /// A float in `min..=max`.
    Float {
        /// Lowest value.
        min: f64,
        /// Highest value.
        max: f64,
    },
    /// An integer in `min..=max`.
    Int {
        /// Lowest value.
        min: i64,
        /// Highest value.
        max: i64,
    },
    /// A boolean.
    Bool,
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Range::Float { min, max } => write!(f, "[{min}..{max}]"),
            Range::Int { min, max } => write!(f, "[{min}..{max}]"),
            Range::Bool => f.write_str("[off/on]"),
        }
    }
}

/// A property value as a mapping sets it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A float.
    Float(f64),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

impl fmt::Display for Value {
    /// As the `set` command takes it (`0.5`, `12`, `true`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Float(x) => write!(f, "{x}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl Range {
    /// The value at `unit` (0..=1, clamped) of the range.
    pub fn at(&self, unit: f64) -> Value {
        let u = if unit.is_nan() {
            0.0
        } else {
            unit.clamp(0.0, 1.0)
        };
        match *self {
            Range::Float { min, max } => {
                Value::Float(if u >= 1.0 { max } else { min + u * (max - min) })
            }
            Range::Int { min, max } => {
                let span = max as f64 - min as f64;
                Value::Int(((min as f64 + (u * span).round()) as i64).clamp(min, max))
            }
            Range::Bool => Value::Bool(u >= 0.5 - 1e-9),
        }
    }

    /// `value` moved by `steps` relative steps (see the module documentation), clamped.
    pub fn step(&self, value: Value, steps: i64) -> Value {
        match (*self, value) {
            (Range::Float { min, max }, Value::Float(x)) => {
                Value::Float((x + steps as f64 * (max - min) / 127.0).clamp(min, max))
            }
            (Range::Int { min, max }, Value::Int(i)) => {
                let per = ((max as f64 - min as f64) / 127.0).round().max(1.0) as i64;
                Value::Int(i.saturating_add(steps.saturating_mul(per)).clamp(min, max))
            }
            (Range::Bool, Value::Bool(b)) => Value::Bool(match steps.signum() {
                1 => true,
                -1 => false,
                _ => b,
            }),
            // A value of another kind (never made by this crate): start from the middle.
            (r, _) => r.step(r.at(0.5), steps),
        }
    }

    /// `text` (a property's value as written) as a value of this range, if it is one.
    pub fn parse(&self, text: &str) -> Option<Value> {
        let t = text.trim();
        match *self {
            Range::Float { min, max } => t
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .map(|x| Value::Float(x.clamp(min, max))),
            Range::Int { min, max } => t.parse::<i64>().ok().map(|i| Value::Int(i.clamp(min, max))),
            Range::Bool => match t.to_ascii_lowercase().as_str() {
                "true" | "1" | "on" | "yes" => Some(Value::Bool(true)),
                "false" | "0" | "off" | "no" => Some(Value::Bool(false)),
                _ => None,
            },
        }
    }

    /// The other end of a toggle: `min` ↔ `max` (`false` ↔ `true`); a value in between goes
    /// to `max`.
    pub fn toggle(&self, value: Value) -> Value {
        match (*self, value) {
            (Range::Bool, Value::Bool(b)) => Value::Bool(!b),
            (Range::Float { min, max }, Value::Float(x)) => {
                Value::Float(if x >= max { min } else { max })
            }
            (Range::Int { min, max }, Value::Int(i)) => {
                Value::Int(if i >= max { min } else { max })
            }
            (r, _) => r.at(1.0),
        }
    }
}

/// The step a relative encoder's value means.
pub fn relative_steps(encoding: Encoding, value: u8) -> i64 {
    let v = i64::from(value & 0x7F);
    match encoding {
        Encoding::Twos => {
            if v < 64 {
                v
            } else {
                v - 128
            }
        }
        Encoding::Offset => v - 64,
        Encoding::Signed => {
            if v & 0x40 != 0 {
                -(v & 0x3F)
            } else {
                v
            }
        }
    }
}

/// A 14-bit value (MSB, LSB) as 0..=1.
pub fn unit14(msb: u8, lsb: u8) -> f64 {
    f64::from((u16::from(msb & 0x7F) << 7) | u16::from(lsb & 0x7F)) / 16383.0
}

/// A 7-bit value as 0..=1.
pub fn unit7(value: u8) -> f64 {
    f64::from(value & 0x7F) / 127.0
}

/// One control of one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Control {
    /// CC, 14-bit CC (number and number + 32) or note.
    pub kind: MidiControlKind,
    /// 0..=15.
    pub channel: u8,
    /// Controller or note number (a 14-bit CC's MSB number, 0..=31).
    pub number: u8,
}

impl fmt::Display for Control {
    /// `cc 7 ch 1`, `cc14 1 ch 1`, `note 36 ch 10`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ch {}",
            self.kind.as_str(),
            self.number,
            self.channel + 1
        )
    }
}

/// What a mapping drives.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A node's property (`set NODE.PROP VALUE`).
    Param {
        /// Node name.
        node: String,
        /// Property name.
        prop: String,
        /// Its range.
        range: Range,
    },
    /// One value set on each press (`set NODE.PROP VALUE`): a deck's clip, `deck.clip=2` or
    /// `deck.clip=intro` (a note per clip). The value is the runtime's to check.
    Trigger {
        /// Node name.
        node: String,
        /// Property name (a whole-number property).
        prop: String,
        /// The value, as `set` takes it.
        value: String,
    },
    /// A node's bypass, toggled (`bypass NODE on|off`).
    Bypass {
        /// Node name.
        node: String,
    },
    /// Pause / resume, toggled.
    Pause,
    /// One `step`.
    Step,
    /// One `tap`.
    Tap,
}

impl Action {
    /// The target as `learn` and `[[midi]]` write it.
    pub fn target(&self) -> String {
        match self {
            Action::Param { node, prop, .. } => format!("{node}.{prop}"),
            Action::Trigger { node, prop, value } => format!("{node}.{prop}={value}"),
            Action::Bypass { node } => format!("{node}.bypass"),
            Action::Pause => "pause".into(),
            Action::Step => "step".into(),
            Action::Tap => "tap".into(),
        }
    }

    /// Whether the action takes a continuous value (a property that is not toggled).
    pub fn is_continuous(&self) -> bool {
        matches!(self, Action::Param { .. })
    }
}

impl fmt::Display for Action {
    /// `glow.blur [0..1]`, `invert.bypass`, `step`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Param { range, .. } => write!(f, "{} {range}", self.target()),
            _ => f.write_str(&self.target()),
        }
    }
}

/// A control, how it is read, and what it drives.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    /// The control.
    pub control: Control,
    /// Absolute or relative (7-bit CCs only).
    pub mode: MidiMode,
    /// What it drives.
    pub action: Action,
}

impl fmt::Display for Mapping {
    /// `cc 7 ch 1 absolute -> glow.blur [0..1]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.control)?;
        if self.control.kind != MidiControlKind::Note {
            write!(f, " {}", self.mode.as_str())?;
        }
        write!(f, " -> {}", self.action)
    }
}

impl Mapping {
    /// The mapping as a `[[midi]]` table.
    pub fn binding(&self) -> MidiBinding {
        MidiBinding {
            kind: self.control.kind,
            channel: self.control.channel + 1,
            number: self.control.number,
            mode: self.mode,
            target: self.action.target(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Range = Range::Float {
        min: -2.0,
        max: 2.0,
    };

    #[test]
    fn absolute_7_bit_spans_the_range() {
        assert_eq!(F.at(unit7(0)), Value::Float(-2.0));
        assert_eq!(F.at(unit7(127)), Value::Float(2.0));
        assert_eq!(F.at(unit7(64)), Value::Float(-2.0 + 64.0 / 127.0 * 4.0));
        let i = Range::Int { min: 0, max: 10 };
        assert_eq!(i.at(unit7(0)), Value::Int(0));
        assert_eq!(i.at(unit7(127)), Value::Int(10));
        // 63/127 × 10 = 4.96 → 5; 6/127 × 10 = 0.47 → 0.
        assert_eq!(i.at(unit7(63)), Value::Int(5));
        assert_eq!(i.at(unit7(6)), Value::Int(0));
        // The widest integer range stays inside itself.
        let wide = Range::Int {
            min: i64::MIN,
            max: i64::MAX,
        };
        assert_eq!(wide.at(1.0), Value::Int(i64::MAX));
        assert_eq!(wide.at(0.0), Value::Int(i64::MIN));
        assert_eq!(Range::Bool.at(unit7(63)), Value::Bool(false));
        assert_eq!(Range::Bool.at(unit7(64)), Value::Bool(true));
        assert_eq!(F.at(f64::NAN), Value::Float(-2.0));
    }

    #[test]
    fn fourteen_bit_values() {
        assert_eq!(unit14(0, 0), 0.0);
        assert_eq!(unit14(127, 127), 1.0);
        assert_eq!(unit14(64, 0), 8192.0 / 16383.0);
        assert_eq!(unit14(0x20, 0x10), (32.0 * 128.0 + 16.0) / 16383.0);
        // The LSB matters: 16,384 distinct values, in order.
        let mut last = -1.0;
        for msb in 0..128u8 {
            for lsb in 0..128u8 {
                let u = unit14(msb, lsb);
                assert!(u > last, "{msb} {lsb}");
                last = u;
            }
        }
        let r = Range::Float { min: 0.0, max: 1.0 };
        assert_eq!(r.at(unit14(127, 127)), Value::Float(1.0));
    }

    #[test]
    fn relative_encodings() {
        use Encoding::*;
        assert_eq!(relative_steps(Twos, 1), 1);
        assert_eq!(relative_steps(Twos, 63), 63);
        assert_eq!(relative_steps(Twos, 127), -1);
        assert_eq!(relative_steps(Twos, 65), -63);
        assert_eq!(relative_steps(Twos, 0), 0);
        assert_eq!(relative_steps(Offset, 65), 1);
        assert_eq!(relative_steps(Offset, 63), -1);
        assert_eq!(relative_steps(Offset, 64), 0);
        assert_eq!(relative_steps(Offset, 0), -64);
        assert_eq!(relative_steps(Signed, 1), 1);
        assert_eq!(relative_steps(Signed, 65), -1);
        assert_eq!(relative_steps(Signed, 64), 0);
        assert_eq!(relative_steps(Signed, 127), -63);
    }

    #[test]
    fn relative_steps_move_and_clamp() {
        let r = Range::Float { min: 0.0, max: 1.0 };
        assert_eq!(
            r.step(Value::Float(0.5), 1),
            Value::Float(0.5 + 1.0 / 127.0)
        );
        assert_eq!(
            r.step(Value::Float(0.5), -2),
            Value::Float(0.5 - 2.0 / 127.0)
        );
        assert_eq!(r.step(Value::Float(0.99), 5), Value::Float(1.0));
        assert_eq!(r.step(Value::Float(0.01), -5), Value::Float(0.0));
        let i = Range::Int {
            min: -16384,
            max: 16384,
        };
        // 32768 / 127 = 258.02 → 258 a step.
        assert_eq!(i.step(Value::Int(0), 1), Value::Int(258));
        assert_eq!(i.step(Value::Int(16300), 3), Value::Int(16384));
        let small = Range::Int { min: 0, max: 10 };
        assert_eq!(small.step(Value::Int(3), 1), Value::Int(4), "at least 1");
        assert_eq!(small.step(Value::Int(0), i64::MIN), Value::Int(0));
        assert_eq!(Range::Bool.step(Value::Bool(false), 1), Value::Bool(true));
        assert_eq!(Range::Bool.step(Value::Bool(true), -3), Value::Bool(false));
        assert_eq!(Range::Bool.step(Value::Bool(true), 0), Value::Bool(true));
    }

    #[test]
    fn toggles_and_parsing() {
        let r = Range::Float { min: 0.0, max: 1.0 };
        assert_eq!(r.toggle(Value::Float(0.0)), Value::Float(1.0));
        assert_eq!(r.toggle(Value::Float(1.0)), Value::Float(0.0));
        assert_eq!(r.toggle(Value::Float(0.3)), Value::Float(1.0));
        assert_eq!(Range::Bool.toggle(Value::Bool(true)), Value::Bool(false));
        assert_eq!(r.parse(" 0.25 "), Some(Value::Float(0.25)));
        assert_eq!(r.parse("7"), Some(Value::Float(1.0)), "clamped");
        assert_eq!(r.parse("~sine:1hz"), None);
        assert_eq!(r.parse("inf"), None);
        assert_eq!(Range::Bool.parse("on"), Some(Value::Bool(true)));
        assert_eq!(
            Range::Int { min: 0, max: 9 }.parse("12"),
            Some(Value::Int(9))
        );
        assert_eq!(Value::Float(0.5).to_string(), "0.5");
        assert_eq!(Value::Bool(true).to_string(), "true");
    }
}
