//! An ISF file's `INPUTS` as element properties, and their current values as uniforms.
//!
//! | ISF type | property | text form | uniform |
//! |---|---|---|---|
//! | `event` | bool, false | `true` fires it | `bool`, true for the one frame after it fired |
//! | `bool` | bool | `true`/`false` | `bool` |
//! | `long` | int within `MIN`..`MAX` or the `VALUES` | a value (`VALUES`, labels in `inspect`) | `int` |
//! | `float` | float within `MIN`..`MAX` (widened to hold a `DEFAULT` outside them) | a number | `float` |
//! | `point2D` | position | `x,y` | `vec2` |
//! | `color` | text | `r,g,b,a` (each 0..1; alpha may be left out) or `#rrggbb[aa]` | `vec4` |
//! | `image` | a frame input (a link), no property | | `sampler2D` |
//! | `audio`, `audioFFT` | none: a silent texture until audio is fed | | `sampler2D` |
//!
//! A property is named as the input (`blurAmount`), but for an input whose name is one of
//! the element's own properties (`location`, a source's `width`, `height`, `rate`, `frames`):
//! it is then `input-NAME`.

use framepipe_core::{Error, PropKind, PropSpec, PropValue, Result};
use framepipe_isf::{Input, InputKind, Shader};

/// An input's current value, as its uniform takes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// `bool` (bool and event).
    Bool(bool),
    /// `int` (long).
    Int(i32),
    /// `float`.
    Float(f32),
    /// `vec2` (point2D).
    Vec2([f32; 2]),
    /// `vec4` (color).
    Vec4([f32; 4]),
}

impl Value {
    /// As one number, for a size expression (`$name`): true is 1.
    pub fn number(self) -> Option<f64> {
        match self {
            Value::Bool(b) => Some(b as u8 as f64),
            Value::Int(i) => Some(i as f64),
            Value::Float(f) => Some(f as f64),
            Value::Vec2(_) | Value::Vec4(_) => None,
        }
    }
}

/// One property-valued input.
#[derive(Debug, Clone)]
pub struct Slot {
    /// The input's (and uniform's) name.
    pub name: String,
    /// The property's name.
    pub prop: String,
    /// An event: fires for one frame.
    pub event: bool,
    /// The current value.
    pub value: Value,
    /// `long` with `VALUES`: the values allowed.
    allowed: Vec<i32>,
}

/// Every property-valued input of a shader with its current value, in the header's order.
#[derive(Debug, Clone, Default)]
pub struct Values {
    /// The inputs.
    pub slots: Vec<Slot>,
}

/// The property name of `input`, given the element's own property names.
pub fn prop_name(input: &str, own: &[&str]) -> String {
    if own.contains(&input) {
        format!("input-{input}")
    } else {
        input.to_string()
    }
}

fn f32s<const N: usize>(v: [f64; N]) -> [f32; N] {
    v.map(|x| x as f32)
}

/// The text form of a colour, `r,g,b,a`.
pub fn color_text(c: [f64; 4]) -> String {
    format!("{},{},{},{}", c[0], c[1], c[2], c[3])
}

/// Parses a colour: `r,g,b` or `r,g,b,a` (each within 0..1) or `#rrggbb` / `#rrggbbaa`.
pub fn parse_color(t: &str) -> Option<[f32; 4]> {
    let t = t.trim();
    if let Some(hex) = t.strip_prefix('#') {
        if !(hex.len() == 6 || hex.len() == 8) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let ch = |i: usize| {
            u8::from_str_radix(&hex[i..i + 2], 16)
                .ok()
                .map(|v| v as f32 / 255.0)
        };
        return Some([
            ch(0)?,
            ch(2)?,
            ch(4)?,
            if hex.len() == 8 { ch(6)? } else { 1.0 },
        ]);
    }
    let mut out = [0.0, 0.0, 0.0, 1.0];
    let mut n = 0;
    for part in t.split(',') {
        if n == 4 {
            return None;
        }
        let v: f32 = part.trim().parse().ok()?;
        if !(0.0..=1.0).contains(&v) {
            return None;
        }
        out[n] = v;
        n += 1;
    }
    (n >= 3).then_some(out)
}

/// The property of one input (`None` for image and audio inputs).
pub fn spec(input: &Input, own: &[&str]) -> Option<PropSpec> {
    let name = prop_name(&input.name, own);
    let label = input.label.as_deref().unwrap_or(&input.name);
    let identity = |i: Option<String>| i.map(|i| format!("; identity {i}")).unwrap_or_default();
    Some(match &input.kind {
        InputKind::Event => PropSpec::new(
            name,
            PropKind::Bool,
            PropValue::Bool(false),
            format!("{label} (event: set true to fire it for one frame)"),
        ),
        InputKind::Bool {
            default,
            identity: id,
        } => PropSpec::new(
            name,
            PropKind::Bool,
            PropValue::Bool(*default),
            format!("{label}{}", identity(id.map(|v| v.to_string()))),
        ),
        InputKind::Long {
            default,
            min,
            max,
            values,
            labels,
            identity: id,
        } => {
            let (lo, hi) = if values.is_empty() {
                (
                    min.unwrap_or(i32::MIN).min(*default),
                    max.unwrap_or(i32::MAX).max(*default),
                )
            } else {
                let lo = values.iter().copied().min().unwrap_or(0).min(*default);
                let hi = values.iter().copied().max().unwrap_or(0).max(*default);
                (lo, hi)
            };
            let menu = if values.is_empty() {
                String::new()
            } else {
                let items: Vec<String> = values
                    .iter()
                    .zip(labels)
                    .map(|(v, l)| format!("{v} = {l}"))
                    .collect();
                format!(" (one of: {})", items.join(", "))
            };
            PropSpec::new(
                name,
                PropKind::Int {
                    min: lo as i64,
                    max: hi as i64,
                },
                PropValue::Int(*default as i64),
                format!("{label}{menu}{}", identity(id.map(|v| v.to_string()))),
            )
        }
        InputKind::Float {
            default,
            min,
            max,
            identity: id,
        } => {
            let (lo, hi) = (min.min(*max).min(*default), max.max(*min).max(*default));
            PropSpec::new(
                name,
                PropKind::Float { min: lo, max: hi },
                PropValue::Float(*default),
                format!("{label}{}", identity(id.map(|v| v.to_string()))),
            )
        }
        InputKind::Point2D {
            default,
            min,
            max,
            identity: id,
        } => {
            let range = match (min, max) {
                (Some(a), Some(b)) => format!(" ({},{} to {},{})", a[0], a[1], b[0], b[1]),
                _ => String::new(),
            };
            PropSpec::new(
                name,
                PropKind::Position,
                PropValue::Position(*default),
                format!(
                    "{label}: a point x,y{range}{}",
                    identity(id.map(|v| format!("{},{}", v[0], v[1])))
                ),
            )
        }
        InputKind::Color {
            default,
            identity: id,
            ..
        } => PropSpec::new(
            name,
            PropKind::Str,
            PropValue::Str(color_text(*default)),
            format!(
                "{label}: a colour r,g,b,a (each 0..1, alpha may be left out) or #rrggbb[aa]{}",
                identity(id.map(color_text))
            ),
        ),
        InputKind::Image | InputKind::Audio { .. } | InputKind::AudioFft { .. } => return None,
    })
}

/// The properties of every input that has one.
pub fn specs(shader: &Shader, own: &[&str]) -> Vec<PropSpec> {
    shader.inputs.iter().filter_map(|i| spec(i, own)).collect()
}

impl Values {
    /// The inputs' values at their defaults.
    pub fn defaults(shader: &Shader, own: &[&str]) -> Values {
        let slots = shader
            .inputs
            .iter()
            .filter_map(|i| {
                let value = match &i.kind {
                    InputKind::Event => Value::Bool(false),
                    InputKind::Bool { default, .. } => Value::Bool(*default),
                    InputKind::Long { default, .. } => Value::Int(*default),
                    InputKind::Float { default, .. } => Value::Float(*default as f32),
                    InputKind::Point2D { default, .. } => Value::Vec2(f32s(*default)),
                    InputKind::Color { default, .. } => Value::Vec4(f32s(*default)),
                    _ => return None,
                };
                let allowed = match &i.kind {
                    InputKind::Long { values, .. } => values.clone(),
                    _ => Vec::new(),
                };
                Some(Slot {
                    name: i.name.clone(),
                    prop: prop_name(&i.name, own),
                    event: i.kind == InputKind::Event,
                    value,
                    allowed,
                })
            })
            .collect();
        Values { slots }
    }

    /// Sets the input whose property is `prop`. `Ok(false)` when no input has that property
    /// (the caller's own, or an input a reloaded file no longer has). An event's `true`
    /// fires it; its `false` does nothing.
    pub fn set(&mut self, element: &str, prop: &str, v: &PropValue) -> Result<bool> {
        let Some(slot) = self.slots.iter_mut().find(|s| s.prop == prop) else {
            return Ok(false);
        };
        let bad = |reason: String| Error::BadValue {
            element: element.to_string(),
            prop: prop.to_string(),
            value: v.to_string(),
            reason,
        };
        slot.value = match (slot.value, v) {
            (Value::Bool(_), PropValue::Bool(b)) if slot.event => {
                if !*b {
                    return Ok(true);
                }
                Value::Bool(true)
            }
            (Value::Bool(_), p) => Value::Bool(
                p.as_f64()
                    .map(|x| x != 0.0)
                    .ok_or_else(|| bad("expected true or false".into()))?,
            ),
            (Value::Int(_), p) => {
                let x = p
                    .as_f64()
                    .ok_or_else(|| bad("expected a whole number".into()))?
                    .round();
                let x = x.clamp(i32::MIN as f64, i32::MAX as f64) as i32;
                if !slot.allowed.is_empty() && !slot.allowed.contains(&x) {
                    let list: Vec<String> = slot.allowed.iter().map(|v| v.to_string()).collect();
                    return Err(bad(format!("expected one of: {}", list.join(", "))));
                }
                Value::Int(x)
            }
            (Value::Float(_), p) => {
                Value::Float(p.as_f64().ok_or_else(|| bad("expected a number".into()))? as f32)
            }
            (Value::Vec2(_), PropValue::Position(p)) => Value::Vec2(f32s(*p)),
            (Value::Vec4(_), PropValue::Str(s)) => {
                Value::Vec4(parse_color(s).ok_or_else(|| {
                    bad("expected a colour r,g,b,a (each in [0, 1]) or #rrggbb[aa]".into())
                })?)
            }
            (Value::Vec4(_), PropValue::Color(c)) => Value::Vec4([c[0], c[1], c[2], 1.0]),
            _ => return Err(bad("a value of the wrong type".into())),
        };
        Ok(true)
    }

    /// The value of number-valued input `name` (for size expressions).
    pub fn number(&self, name: &str) -> Option<f64> {
        self.slots
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.value.number())
    }

    /// Ends the frame: fired events go back to false.
    pub fn frame_done(&mut self) {
        for s in &mut self.slots {
            if s.event {
                s.value = Value::Bool(false);
            }
        }
    }

    /// Takes the values of `old`'s inputs that this shader still has, by name and type (a
    /// reloaded file keeps what the show set).
    pub fn keep_from(&mut self, old: &Values) {
        for s in &mut self.slots {
            if let Some(o) = old.slots.iter().find(|o| o.name == s.name) {
                if std::mem::discriminant(&o.value) == std::mem::discriminant(&s.value) {
                    s.value = o.value;
                }
            }
        }
    }
}
