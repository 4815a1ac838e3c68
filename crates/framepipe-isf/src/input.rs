//! `INPUTS`: each becomes a uniform of the shader and, in the engine, a property (an image input
//! becomes a frame input, see [`Role`](crate::Role)).

use crate::error::{quote, Error, Result};
use crate::json::{flag, int, number, numbers, string, wrong};
use serde_json::{Map, Value};

/// One entry of `INPUTS`.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// `NAME`: the uniform's name, a GLSL identifier.
    pub name: String,
    /// `LABEL`: a name for people, if given.
    pub label: Option<String>,
    /// `TYPE` and the values that go with it.
    pub kind: InputKind,
}

/// An input's `TYPE` with its `DEFAULT`, `MIN`, `MAX`, `IDENTITY` (`VALUES`/`LABELS` for
/// `long`), resolved as the ISF hosts do where the header leaves them out. Values are kept as
/// written, not clamped: real files have a `DEFAULT` outside `MIN`..`MAX`, and even
/// `MIN` > `MAX`; clamping is the property's business.
#[derive(Debug, Clone, PartialEq)]
pub enum InputKind {
    /// A momentary button: `uniform bool`, true for the one frame it fires.
    Event,
    /// `uniform bool`. `DEFAULT` false when left out.
    Bool {
        /// `DEFAULT` (a number reads as > 0).
        default: bool,
        /// `IDENTITY`: the value that leaves the image unchanged, if given.
        identity: Option<bool>,
    },
    /// `uniform int`, a pop-up menu when `VALUES` are given.
    Long {
        /// `DEFAULT`; else the first of `VALUES`, else `MIN`, else 0.
        default: i32,
        /// `MIN`, if given.
        min: Option<i32>,
        /// `MAX`, if given.
        max: Option<i32>,
        /// `VALUES`: the menu's values (0, 1, ... when only `LABELS` are given).
        values: Vec<i32>,
        /// `LABELS`, one per value (the values as text when only `VALUES` are given).
        labels: Vec<String>,
        /// `IDENTITY`, if given.
        identity: Option<i32>,
    },
    /// `uniform float`. `MIN`/`MAX` 0 and 1 unless both are given (as VVISF does); `DEFAULT`
    /// half way when left out.
    Float {
        /// `DEFAULT`.
        default: f64,
        /// `MIN`.
        min: f64,
        /// `MAX`.
        max: f64,
        /// `IDENTITY`, if given.
        identity: Option<f64>,
    },
    /// `uniform vec2`.
    Point2D {
        /// `DEFAULT`; else half way between `MIN` and `MAX` when both are given; else (0, 0).
        default: [f64; 2],
        /// `MIN`, if given.
        min: Option<[f64; 2]>,
        /// `MAX`, if given.
        max: Option<[f64; 2]>,
        /// `IDENTITY`, if given.
        identity: Option<[f64; 2]>,
    },
    /// `uniform vec4`, RGBA in 0..1.
    Color {
        /// `DEFAULT` (three numbers take alpha 1); opaque black when left out.
        default: [f64; 4],
        /// `MIN`, if given.
        min: Option<[f64; 4]>,
        /// `MAX`, if given.
        max: Option<[f64; 4]>,
        /// `IDENTITY`, if given.
        identity: Option<[f64; 4]>,
    },
    /// A `sampler2D` with its size.
    Image,
    /// Raw audio as an image: one row per channel, one column per sample, centred on 0.5.
    Audio {
        /// `MAX`: the samples wanted (the image's width), if given.
        samples: Option<u32>,
    },
    /// An FFT of the audio as an image: one row per channel, one column per bin.
    AudioFft {
        /// `MAX`: the bins wanted (the image's width), if given.
        samples: Option<u32>,
    },
}

impl InputKind {
    /// The `TYPE` string.
    pub fn type_name(&self) -> &'static str {
        match self {
            InputKind::Event => "event",
            InputKind::Bool { .. } => "bool",
            InputKind::Long { .. } => "long",
            InputKind::Float { .. } => "float",
            InputKind::Point2D { .. } => "point2D",
            InputKind::Color { .. } => "color",
            InputKind::Image => "image",
            InputKind::Audio { .. } => "audio",
            InputKind::AudioFft { .. } => "audioFFT",
        }
    }

    /// The GLSL type of its uniform.
    pub fn glsl_type(&self) -> &'static str {
        match self {
            InputKind::Event | InputKind::Bool { .. } => "bool",
            InputKind::Long { .. } => "int",
            InputKind::Float { .. } => "float",
            InputKind::Point2D { .. } => "vec2",
            InputKind::Color { .. } => "vec4",
            InputKind::Image | InputKind::Audio { .. } | InputKind::AudioFft { .. } => "sampler2D",
        }
    }

    /// Whether it is read as a texture (image, audio, audioFFT).
    pub fn is_texture(&self) -> bool {
        self.glsl_type() == "sampler2D"
    }

    /// Whether it has one number as its value, so that a size expression may read it
    /// (`$blurAmount`): float, long, bool and event (true is 1).
    pub fn is_number(&self) -> bool {
        matches!(
            self,
            InputKind::Event
                | InputKind::Bool { .. }
                | InputKind::Long { .. }
                | InputKind::Float { .. }
        )
    }
}

impl Input {
    /// Reads `INPUTS[index]`.
    pub(crate) fn parse(index: usize, v: &Value) -> Result<Input> {
        let here = format!("INPUTS[{index}]");
        let obj = v.as_object().ok_or_else(|| wrong(&here, "an object", v))?;
        let name = match obj.get("NAME") {
            Some(n) => string(n, &format!("{here} NAME"))?,
            None => {
                return Err(Error::Header {
                    at: here,
                    message: "no NAME".into(),
                })
            }
        };
        let at = format!("{here} {}", quote(&name));
        let ty = match obj.get("TYPE") {
            Some(t) => string(t, &format!("{at} TYPE"))?,
            None => {
                return Err(Error::Header {
                    at,
                    message: "no TYPE".into(),
                })
            }
        };
        let label = opt(obj, "LABEL", &at, string)?;
        let kind = match ty.as_str() {
            "event" => InputKind::Event,
            "bool" => InputKind::Bool {
                default: opt(obj, "DEFAULT", &at, flag)?.unwrap_or(false),
                identity: opt(obj, "IDENTITY", &at, flag)?,
            },
            "long" => long(obj, &at)?,
            "float" => {
                let (min, max) =
                    match (opt(obj, "MIN", &at, number)?, opt(obj, "MAX", &at, number)?) {
                        (Some(min), Some(max)) => (min, max),
                        _ => (0.0, 1.0),
                    };
                InputKind::Float {
                    default: opt(obj, "DEFAULT", &at, number)?.unwrap_or((min + max) / 2.0),
                    min,
                    max,
                    identity: opt(obj, "IDENTITY", &at, number)?,
                }
            }
            "point2D" => {
                let vec2 = |v: &Value, at: &str| numbers::<2>(v, at, None);
                let min = opt(obj, "MIN", &at, vec2)?;
                let max = opt(obj, "MAX", &at, vec2)?;
                let middle = match (min, max) {
                    (Some(a), Some(b)) => [(a[0] + b[0]) / 2.0, (a[1] + b[1]) / 2.0],
                    _ => [0.0; 2],
                };
                InputKind::Point2D {
                    default: opt(obj, "DEFAULT", &at, vec2)?.unwrap_or(middle),
                    min,
                    max,
                    identity: opt(obj, "IDENTITY", &at, vec2)?,
                }
            }
            "color" => {
                let rgba = |v: &Value, at: &str| numbers::<4>(v, at, Some(1.0));
                InputKind::Color {
                    default: opt(obj, "DEFAULT", &at, rgba)?.unwrap_or([0.0, 0.0, 0.0, 1.0]),
                    min: opt(obj, "MIN", &at, rgba)?,
                    max: opt(obj, "MAX", &at, rgba)?,
                    identity: opt(obj, "IDENTITY", &at, rgba)?,
                }
            }
            "image" => InputKind::Image,
            "audio" => InputKind::Audio {
                samples: samples(obj, &at)?,
            },
            "audioFFT" => InputKind::AudioFft {
                samples: samples(obj, &at)?,
            },
            other => {
                return Err(Error::UnknownInputType {
                    at,
                    found: quote(other),
                })
            }
        };
        Ok(Input { name, label, kind })
    }
}

/// An optional key, read with `read` when present and not null.
fn opt<T>(
    obj: &Map<String, Value>,
    key: &str,
    at: &str,
    read: impl Fn(&Value, &str) -> Result<T>,
) -> Result<Option<T>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => read(v, &format!("{at} {key}")).map(Some),
    }
}

fn long(obj: &Map<String, Value>, at: &str) -> Result<InputKind> {
    let list = |key: &str| -> Result<Option<&Vec<Value>>> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(wrong(&format!("{at} {key}"), "an array", v)),
        }
    };
    let values = match list("VALUES")? {
        Some(a) => Some(
            a.iter()
                .enumerate()
                .map(|(i, v)| int(v, &format!("{at} VALUES[{i}]")))
                .collect::<Result<Vec<i32>>>()?,
        ),
        None => None,
    };
    let labels = match list("LABELS")? {
        Some(a) => Some(
            a.iter()
                .enumerate()
                .map(|(i, v)| string(v, &format!("{at} LABELS[{i}]")))
                .collect::<Result<Vec<String>>>()?,
        ),
        None => None,
    };
    let (values, labels) = match (values, labels) {
        (Some(v), Some(l)) if v.len() != l.len() => {
            return Err(Error::Header {
                at: at.to_string(),
                message: format!(
                    "{} VALUES but {} LABELS; each value needs its label",
                    v.len(),
                    l.len()
                ),
            })
        }
        (Some(v), Some(l)) => (v, l),
        (Some(v), None) => {
            let l = v.iter().map(|x| x.to_string()).collect();
            (v, l)
        }
        (None, Some(l)) => ((0..l.len() as i32).collect(), l),
        (None, None) => (Vec::new(), Vec::new()),
    };
    let min = opt(obj, "MIN", at, int)?;
    let max = opt(obj, "MAX", at, int)?;
    let default = opt(obj, "DEFAULT", at, int)?
        .or(values.first().copied())
        .or(min)
        .unwrap_or(0);
    Ok(InputKind::Long {
        default,
        min,
        max,
        values,
        labels,
        identity: opt(obj, "IDENTITY", at, int)?,
    })
}

fn samples(obj: &Map<String, Value>, at: &str) -> Result<Option<u32>> {
    opt(obj, "MAX", at, |v, at| {
        let n = int(v, at)?;
        u32::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| wrong(at, "a positive number of samples", v))
    })
}
