//! Element properties: their specs, typed values, and parsing from `name=value` text.

use std::fmt;

use crate::error::{Error, Result};

/// The type of a property, with its range where it has one.
#[derive(Debug, Clone, PartialEq)]
pub enum PropKind {
    /// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
    Bool,
    /// A whole number within `min..=max`.
    Int {
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
    /// A number within `min..=max`.
    Float {
        /// Smallest allowed value.
        min: f64,
        /// Largest allowed value.
        max: f64,
    },
    /// Free text (a path, a pattern name...).
    Str,
    /// One of a fixed set of words.
    Enum(Vec<String>),
    /// An RGB colour, each channel 0..1: `r,g,b` or `#rrggbb`.
    Color,
    /// A 2-D position: `x,y`.
    Position,
}

impl fmt::Display for PropKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropKind::Bool => write!(f, "bool"),
            PropKind::Int { min, max } => write!(f, "int [{min}, {max}]"),
            PropKind::Float { min, max } => write!(f, "float [{min}, {max}]"),
            PropKind::Str => write!(f, "string"),
            PropKind::Enum(words) => write!(f, "one of {}", words.join("|")),
            PropKind::Color => write!(f, "color r,g,b"),
            PropKind::Position => write!(f, "position x,y"),
        }
    }
}

/// A typed property value.
#[derive(Debug, Clone, PartialEq)]
pub enum PropValue {
    /// A boolean.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number.
    Float(f64),
    /// Text, or one word of an enum.
    Str(String),
    /// An RGB colour, channels 0..1.
    Color([f32; 3]),
    /// A 2-D position.
    Position([f64; 2]),
}

impl fmt::Display for PropValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropValue::Bool(b) => write!(f, "{b}"),
            PropValue::Int(i) => write!(f, "{i}"),
            PropValue::Float(x) => write!(f, "{x}"),
            PropValue::Str(s) => write!(f, "{s}"),
            PropValue::Color([r, g, b]) => write!(f, "{r},{g},{b}"),
            PropValue::Position([x, y]) => write!(f, "{x},{y}"),
        }
    }
}

impl PropValue {
    /// The value as a number, where that makes sense (bools are 0 or 1).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            PropValue::Bool(b) => Some(*b as u8 as f64),
            PropValue::Int(i) => Some(*i as f64),
            PropValue::Float(x) => Some(*x),
            _ => None,
        }
    }
}

/// The description of one property of an element.
///
/// Every value made from text by [`PropSpec::parse`] is finite and inside the declared range:
/// NaN, infinities and out-of-range numbers (`1e308` for a `[0, 1]` float, a colour channel
/// above 1) are refused with a message naming the range, never clamped. (Oscillators are
/// different: their value is clamped to the range at each frame, since a range wider than the
/// property's is a legitimate way to hold it at an end.)
#[derive(Debug, Clone, PartialEq)]
pub struct PropSpec {
    /// Property name, lower case, words joined by `-`.
    pub name: String,
    /// Type and range.
    pub kind: PropKind,
    /// Value used when the property is not given.
    pub default: PropValue,
    /// One line for `framepipe inspect`.
    pub description: String,
    /// Whether the value names a file ([`PropSpec::path`]): a relative one in a project file
    /// is resolved against the project file's folder.
    pub path: Option<PathUse>,
    /// Whether a running node takes a new value (`set`, an oscillator): `false` for a property
    /// read once, when the node starts (a size, a colour baked into a table, how the node is
    /// run). Every surface's `set` is refused at once for such a property, with the reason
    /// ([`PropSpec::not_live_reason`]); the web page shows it read-only and OSCQuery with
    /// ACCESS 1. Declared by the element ([`PropSpec::fixed`]); `true` unless it says so.
    pub live: bool,
}

/// How a text property names a file: a relative path written in a project file means the file
/// beside the project file, not one in the working folder (absolute paths and `-`, standard
/// input or output, are as written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathUse {
    /// A file, or `-`.
    File,
    /// A file or a URL (`scheme:...`: `rtmp://host/x`, `pipe:1`, `file:a.mp4`, which are as
    /// written), unless the node sets the property `unless` (`ffmpegsrc`'s `format`: the
    /// location is then whatever that format reads, a device or a lavfi graph).
    FileOrUrl {
        /// The property that, when given, makes the value something else than a file.
        unless: Option<&'static str>,
    },
    /// Files separated by commas (`a.mp4,b.mov`, a deck's bank): each relative one is
    /// resolved, item by item.
    Files,
}

impl PathUse {
    /// Whether `value`, given on a node whose properties are `props` (as written), names a file
    /// whose relative path is to be resolved: not `-`, not absolute, not empty, and for
    /// [`PathUse::FileOrUrl`] not a URL and not with `unless` given.
    pub fn is_relative_file(self, value: &str, props: &[(String, String)]) -> bool {
        if value.is_empty() || value == "-" || value.starts_with('/') {
            return false;
        }
        match self {
            PathUse::File => true,
            PathUse::Files => value
                .split(',')
                .map(str::trim)
                .any(|v| PathUse::File.is_relative_file(v, props)),
            PathUse::FileOrUrl { unless } => {
                let scheme = value.split_once(':').map(|(s, _)| s);
                let url = scheme.is_some_and(|s| {
                    s.len() >= 2
                        && s.starts_with(|c: char| c.is_ascii_alphabetic())
                        && s.chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                });
                let other =
                    unless.is_some_and(|u| props.iter().any(|(k, v)| k == u && !v.is_empty()));
                !url && !other
            }
        }
    }
}

impl PropSpec {
    /// A spec; see the field docs.
    pub fn new(
        name: impl Into<String>,
        kind: PropKind,
        default: PropValue,
        description: impl Into<String>,
    ) -> Self {
        PropSpec {
            name: name.into(),
            kind,
            default,
            description: description.into(),
            path: None,
            live: true,
        }
    }

    /// The same spec for a value that names a file (see [`PathUse`]).
    pub fn path(mut self, use_: PathUse) -> Self {
        self.path = Some(use_);
        self
    }

    /// The same spec for a property read when the node starts, which a running node cannot
    /// take ([`PropSpec::live`] false).
    #[must_use]
    pub fn fixed(mut self) -> Self {
        self.live = false;
        self
    }

    /// Why `set NODE.PROP` is refused while running, for a property that is not live:
    /// `st.color cannot change while running: it is read when the node starts; replace the node
    /// to change it`.
    pub fn not_live_reason(&self, node: &str) -> String {
        format!(
            "{node}.{} cannot change while running: it is read when the node starts; replace \
             the node to change it",
            self.name
        )
    }

    /// Parses `text` as a value of this property for `element`, checking its range.
    pub fn parse(&self, element: &str, text: &str) -> Result<PropValue> {
        let bad = |reason: String| Error::BadValue {
            element: element.to_string(),
            prop: self.name.clone(),
            value: text.to_string(),
            reason,
        };
        let t = text.trim();
        Ok(match &self.kind {
            PropKind::Bool => PropValue::Bool(match t.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => true,
                "false" | "0" | "no" | "off" => false,
                _ => return Err(bad("expected true or false".into())),
            }),
            PropKind::Int { min, max } => {
                let v: i64 = t
                    .parse()
                    .map_err(|_| bad(format!("expected a whole number in [{min}, {max}]")))?;
                if v < *min || v > *max {
                    return Err(bad(format!("out of range [{min}, {max}]")));
                }
                PropValue::Int(v)
            }
            PropKind::Float { min, max } => {
                let v: f64 = t
                    .parse()
                    .map_err(|_| bad(format!("expected a number in [{min}, {max}]")))?;
                if !v.is_finite() {
                    return Err(bad(format!(
                        "not a finite number; expected a number in [{min}, {max}]"
                    )));
                }
                if v < *min || v > *max {
                    return Err(bad(format!("out of range [{min}, {max}]")));
                }
                PropValue::Float(v)
            }
            PropKind::Str => PropValue::Str(text.to_string()),
            PropKind::Enum(words) => {
                if !words.iter().any(|w| w == t) {
                    return Err(bad(format!("expected one of: {}", words.join(", "))));
                }
                PropValue::Str(t.to_string())
            }
            PropKind::Color => PropValue::Color(parse_color(t).ok_or_else(|| {
                bad("expected a colour as r,g,b (each in [0, 1]) or #rrggbb".into())
            })?),
            PropKind::Position => {
                let v = parse_floats::<2>(t)
                    .ok_or_else(|| bad("expected a position x,y (finite numbers)".into()))?;
                PropValue::Position(v)
            }
        })
    }
}

fn parse_floats<const N: usize>(t: &str) -> Option<[f64; N]> {
    let mut out = [0.0; N];
    let mut parts = t.split(',');
    for slot in out.iter_mut() {
        *slot = parts
            .next()?
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())?;
    }
    parts.next().is_none().then_some(out)
}

fn parse_color(t: &str) -> Option<[f32; 3]> {
    if let Some(hex) = t.strip_prefix('#') {
        if hex.len() != 6 {
            return None;
        }
        let v = u32::from_str_radix(hex, 16).ok()?;
        let ch = |s: u32| ((v >> s) & 0xff) as f32 / 255.0;
        return Some([ch(16), ch(8), ch(0)]);
    }
    let rgb = parse_floats::<3>(t)?;
    if rgb.iter().any(|c| !(0.0..=1.0).contains(c)) {
        return None;
    }
    let [r, g, b] = rgb;
    Some([r as f32, g as f32, b as f32])
}

/// The resolved properties of one element: every spec'd property with its given or default value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Props {
    element: String,
    values: Vec<(String, PropValue)>,
}

impl Props {
    /// Resolves `given` (`name`, `text` pairs in the order written) against `specs` for `element`.
    /// Unknown names and malformed values are errors that name the offending text.
    pub fn resolve(element: &str, specs: &[PropSpec], given: &[(String, String)]) -> Result<Self> {
        let mut values: Vec<(String, PropValue)> = specs
            .iter()
            .map(|s| (s.name.clone(), s.default.clone()))
            .collect();
        for (name, text) in given {
            let Some(idx) = specs.iter().position(|s| &s.name == name) else {
                let expected = if specs.is_empty() {
                    "(no properties)".to_string()
                } else {
                    specs
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(Error::UnknownProperty {
                    element: element.to_string(),
                    prop: name.clone(),
                    expected,
                });
            };
            values[idx].1 = specs[idx].parse(element, text)?;
        }
        Ok(Props {
            element: element.to_string(),
            values,
        })
    }

    /// The element these properties belong to.
    pub fn element(&self) -> &str {
        &self.element
    }

    /// All values, in spec order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &PropValue)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The value of `name`, if it is a property of this element.
    pub fn get(&self, name: &str) -> Option<&PropValue> {
        self.values.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// A numeric property (float, int or bool) as f64; 0 when absent.
    pub fn f64(&self, name: &str) -> f64 {
        self.get(name).and_then(PropValue::as_f64).unwrap_or(0.0)
    }

    /// A whole-number property; 0 when absent.
    pub fn i64(&self, name: &str) -> i64 {
        match self.get(name) {
            Some(PropValue::Int(i)) => *i,
            Some(v) => v.as_f64().unwrap_or(0.0) as i64,
            None => 0,
        }
    }

    /// A boolean property; false when absent.
    pub fn bool(&self, name: &str) -> bool {
        matches!(self.get(name), Some(PropValue::Bool(true)))
    }

    /// A text or enum property; empty when absent.
    pub fn str(&self, name: &str) -> &str {
        match self.get(name) {
            Some(PropValue::Str(s)) => s,
            _ => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_relative_files_are_resolved_not_urls_stdio_or_what_a_format_reads() {
        let file = PathUse::File;
        let url = PathUse::FileOrUrl {
            unless: Some("format"),
        };
        let none: [(String, String); 0] = [];
        assert!(file.is_relative_file("clip.y4m", &none));
        assert!(file.is_relative_file("../clip.y4m", &none));
        assert!(!file.is_relative_file("/abs/clip.y4m", &none));
        assert!(!file.is_relative_file("-", &none));
        assert!(url.is_relative_file("clip.mp4", &none));
        assert!(!url.is_relative_file("rtmp://host/live", &none));
        assert!(!url.is_relative_file("pipe:1", &none));
        let lavfi = [("format".to_string(), "lavfi".to_string())];
        assert!(!url.is_relative_file("color", &lavfi));
    }

    fn specs() -> Vec<PropSpec> {
        vec![
            PropSpec::new(
                "blur",
                PropKind::Float { min: 0.0, max: 1.0 },
                PropValue::Float(0.0),
                "",
            ),
            PropSpec::new("on", PropKind::Bool, PropValue::Bool(false), ""),
            PropSpec::new("tint", PropKind::Color, PropValue::Color([0.0; 3]), ""),
        ]
    }

    #[test]
    fn unknown_property_names_the_alternatives() {
        let err = Props::resolve("frei0r-glow", &specs(), &[("blurr".into(), "1".into())])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "unknown property 'blurr' on frei0r-glow; expected one of: blur, on, tint"
        );
    }

    #[test]
    fn values_are_typed_and_range_checked() {
        let p = Props::resolve(
            "x",
            &specs(),
            &[
                ("blur".into(), "0.5".into()),
                ("tint".into(), "#ff0000".into()),
            ],
        )
        .unwrap();
        assert_eq!(p.f64("blur"), 0.5);
        assert_eq!(p.get("tint"), Some(&PropValue::Color([1.0, 0.0, 0.0])));
        assert!(!p.bool("on"));
        let e = Props::resolve("x", &specs(), &[("blur".into(), "2".into())]).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        let e = Props::resolve("x", &specs(), &[("blur".into(), "abc".into())]).unwrap_err();
        assert!(e.to_string().contains("bad value 'abc'"), "{e}");
    }

    /// Issue #7: values from text are finite and inside the declared range, or refused with a
    /// message that names the range.
    #[test]
    fn non_finite_and_out_of_range_text_is_refused_naming_the_range() {
        let specs = specs();
        let err = |prop: &str, text: &str| {
            Props::resolve("frei0r-glow", &specs, &[(prop.into(), text.into())])
                .unwrap_err()
                .to_string()
        };
        for text in ["nan", "NaN", "inf", "-inf", "infinity"] {
            let e = err("blur", text);
            assert!(
                e.contains("not a finite number") && e.contains("[0, 1]"),
                "{e}"
            );
        }
        for text in ["1e308", "-1e-300", "1.0000001"] {
            let e = err("blur", text);
            assert!(e.contains("out of range [0, 1]"), "{e}");
        }
        for text in ["1e308,0,0", "0,-0.5,0", "0,0,nan", "2,2,2"] {
            let e = err("tint", text);
            assert!(
                e.contains(&format!("bad value '{text}'")) && e.contains("[0, 1]"),
                "{e}"
            );
        }
        let pos = PropSpec::new("at", PropKind::Position, PropValue::Position([0.0; 2]), "");
        assert!(pos.parse("x", "nan,0").is_err());
        assert!(pos.parse("x", "0,inf").is_err());
        assert_eq!(
            pos.parse("x", "0.5,1e3").unwrap(),
            PropValue::Position([0.5, 1e3])
        );
        let int = PropSpec::new(
            "n",
            PropKind::Int { min: 0, max: 10 },
            PropValue::Int(0),
            "",
        );
        for text in ["1e308", "11", "-1", "nan", "99999999999999999999"] {
            assert!(int.parse("x", text).is_err(), "{text}");
        }
    }
}
