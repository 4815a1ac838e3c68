//! `PASSES`, the buffers they render into, and `IMPORTED` images.
//!
//! A pass with a `TARGET` renders into the buffer of that name, which later passes (and, when
//! `PERSISTENT`, later frames) read like an image; the pass without one renders the output.
//! Several passes may name one buffer: the first that gives an attribute (`PERSISTENT`,
//! `FLOAT`, `WIDTH`, `HEIGHT`) sets it, and a later one that gives it differently is an error.

use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::json::{flag, number, string, wrong};
use serde_json::Value;

/// The largest side of a pass's buffer that [`Buffer::size`] gives (a size expression is
/// untrusted: `$WIDTH*1000` must not ask for a texture no GPU has).
pub const MAX_BUFFER_SIDE: u32 = 16384;

/// One entry of `PASSES` (a file without `PASSES` has one pass, to the output).
#[derive(Debug, Clone, PartialEq)]
pub struct Pass {
    /// `TARGET`: the buffer it renders into; `None` renders the output.
    pub target: Option<String>,
}

/// A buffer some pass renders into (or, from an ISF 1.0 file, a persistent buffer that no pass
/// renders into: it stays transparent black, but the GLSL may read it).
#[derive(Debug, Clone, PartialEq)]
pub struct Buffer {
    /// Its name: the sampler the GLSL reads it by.
    pub name: String,
    /// `PERSISTENT`: kept from one frame to the next (feedback), else cleared every frame.
    pub persistent: bool,
    /// `FLOAT`: 32-bit float per channel instead of 8-bit.
    pub float: bool,
    /// `WIDTH`: an expression, or `None` for the render width.
    pub width: Option<Expr>,
    /// `HEIGHT`: an expression, or `None` for the render height.
    pub height: Option<Expr>,
}

impl Buffer {
    /// Its size for a render of `render` (width, height) with the inputs' current values
    /// (`input(name)`, true as 1): each expression is evaluated, cut to a whole number, and
    /// kept within 1..=[`MAX_BUFFER_SIDE`] (NaN gives 1, as VVISF does).
    pub fn size(&self, render: (u32, u32), input: &dyn Fn(&str) -> Option<f64>) -> (u32, u32) {
        let vars = |name: &str| match name {
            "WIDTH" => Some(render.0 as f64),
            "HEIGHT" => Some(render.1 as f64),
            _ => input(name),
        };
        let side = |e: &Option<Expr>, full: u32| match e {
            None => full.clamp(1, MAX_BUFFER_SIDE),
            Some(e) => {
                let v = e.eval(&vars);
                if v.is_nan() {
                    1
                } else {
                    v.clamp(1.0, MAX_BUFFER_SIDE as f64) as u32
                }
            }
        };
        (side(&self.width, render.0), side(&self.height, render.1))
    }
}

/// One entry of `IMPORTED`: an image file loaded once, read like an image input.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The sampler's name.
    pub name: String,
    /// `PATH`, as written: relative to the `.fs` file's folder.
    pub path: String,
}

/// What one place in the header says about a buffer; `None` where it says nothing.
#[derive(Debug, Default)]
pub(crate) struct Decl {
    pub(crate) persistent: Option<bool>,
    pub(crate) float: Option<bool>,
    pub(crate) width: Option<Expr>,
    pub(crate) height: Option<Expr>,
}

impl Decl {
    /// Reads `PERSISTENT`, `FLOAT`, `WIDTH` and `HEIGHT` of `obj` (a pass, or an ISF 1.0
    /// persistent buffer).
    pub(crate) fn parse(obj: &serde_json::Map<String, Value>, at: &str) -> Result<Decl> {
        let get = |k: &str| obj.get(k).filter(|v| !v.is_null());
        let size = |k: &str| -> Result<Option<Expr>> {
            let at = format!("{at} {k}");
            match get(k) {
                None => Ok(None),
                Some(Value::String(s)) => Expr::parse(s).map(Some).map_err(|e| match e {
                    Error::Expr { expr, message, .. } => Error::Expr { at, expr, message },
                    e => e,
                }),
                Some(v @ Value::Number(_)) => Ok(Some(Expr::constant(number(v, &at)?))),
                Some(v) => Err(wrong(&at, "an expression (a string) or a number", v)),
            }
        };
        Ok(Decl {
            persistent: get("PERSISTENT")
                .map(|v| flag(v, &format!("{at} PERSISTENT")))
                .transpose()?,
            float: get("FLOAT")
                .map(|v| flag(v, &format!("{at} FLOAT")))
                .transpose()?,
            width: size("WIDTH")?,
            height: size("HEIGHT")?,
        })
    }
}

/// The buffers of a file, built from the places that declare them.
#[derive(Debug, Default)]
pub(crate) struct Buffers {
    /// Each buffer's name, where it was first declared, and its merged declaration.
    entries: Vec<(String, String, Decl)>,
}

impl Buffers {
    /// Adds what `at` says about buffer `name`.
    pub(crate) fn declare(&mut self, name: &str, at: &str, d: Decl) -> Result<()> {
        let Some((_, first, old)) = self.entries.iter_mut().find(|(n, ..)| n == name) else {
            self.entries.push((name.to_string(), at.to_string(), d));
            return Ok(());
        };
        let clash = |what: &str, a: String, b: String| Error::Header {
            at: at.to_string(),
            message: format!(
                "renders into {} with {what} {b}, but {first} gave it {a}",
                crate::error::quote(name)
            ),
        };
        merge(&mut old.persistent, d.persistent, |a, b| {
            clash("PERSISTENT", a.to_string(), b.to_string())
        })?;
        merge(&mut old.float, d.float, |a, b| {
            clash("FLOAT", a.to_string(), b.to_string())
        })?;
        merge(&mut old.width, d.width, |a, b| {
            clash("WIDTH", a.text().into(), b.text().into())
        })?;
        merge(&mut old.height, d.height, |a, b| {
            clash("HEIGHT", a.text().into(), b.text().into())
        })?;
        Ok(())
    }

    /// The buffers, with their declaring places.
    pub(crate) fn finish(self) -> Vec<(Buffer, String)> {
        self.entries
            .into_iter()
            .map(|(name, at, d)| {
                let b = Buffer {
                    name,
                    persistent: d.persistent.unwrap_or(false),
                    float: d.float.unwrap_or(false),
                    width: d.width,
                    height: d.height,
                };
                (b, at)
            })
            .collect()
    }
}

fn merge<T: PartialEq>(
    old: &mut Option<T>,
    new: Option<T>,
    clash: impl FnOnce(&T, &T) -> Error,
) -> Result<()> {
    match (old.as_ref(), new) {
        (_, None) => Ok(()),
        (None, Some(n)) => {
            *old = Some(n);
            Ok(())
        }
        (Some(o), Some(n)) if *o == n => Ok(()),
        (Some(o), Some(n)) => Err(clash(o, &n)),
    }
}

/// Reads `PASSES` into the passes and the buffers they declare.
pub(crate) fn passes(v: Option<&Value>, buffers: &mut Buffers) -> Result<Vec<Pass>> {
    let list = match v {
        None | Some(Value::Null) => return Ok(vec![Pass { target: None }]),
        Some(Value::Array(a)) => a,
        Some(v) => return Err(wrong("PASSES", "an array", v)),
    };
    if list.len() > crate::MAX_PASSES {
        return Err(Error::Header {
            at: "PASSES".into(),
            message: format!(
                "{} passes; at most {} are run",
                list.len(),
                crate::MAX_PASSES
            ),
        });
    }
    let mut passes = Vec::with_capacity(list.len().max(1));
    for (i, p) in list.iter().enumerate() {
        let at = format!("PASSES[{i}]");
        let obj = p.as_object().ok_or_else(|| wrong(&at, "an object", p))?;
        let target = match obj.get("TARGET") {
            None | Some(Value::Null) => None,
            Some(t) => Some(string(t, &format!("{at} TARGET"))?).filter(|t| !t.is_empty()),
        };
        if let Some(t) = &target {
            buffers.declare(t, &at, Decl::parse(obj, &at)?)?;
        }
        passes.push(Pass { target });
    }
    if passes.is_empty() {
        passes.push(Pass { target: None });
    }
    Ok(passes)
}

/// Reads `IMPORTED`: an object (name → `{ "PATH": ... }`) or an array of
/// `{ "NAME": ..., "PATH": ... }`.
pub(crate) fn imported(v: Option<&Value>) -> Result<Vec<Imported>> {
    let one = |name: Option<&str>, v: &Value, at: &str| -> Result<Imported> {
        let obj = v.as_object().ok_or_else(|| wrong(at, "an object", v))?;
        let name = match obj.get("NAME") {
            Some(n) => string(n, &format!("{at} NAME"))?,
            None => match name {
                Some(n) => n.to_string(),
                None => {
                    return Err(Error::Header {
                        at: at.into(),
                        message: "no NAME".into(),
                    })
                }
            },
        };
        if let Some(t) = obj.get("TYPE").and_then(Value::as_str) {
            if t == "cube" {
                return Err(Error::Header {
                    at: format!("{at} TYPE"),
                    message: "cube maps are not supported (ISF 2.0 has none)".into(),
                });
            }
        }
        let path = match obj.get("PATH") {
            Some(p) => string(p, &format!("{at} PATH"))?,
            None => {
                return Err(Error::Header {
                    at: at.into(),
                    message: "no PATH".into(),
                })
            }
        };
        Ok(Imported { name, path })
    };
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| one(Some(k), v, &format!("IMPORTED {}", crate::error::quote(k))))
            .collect(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| one(None, v, &format!("IMPORTED[{i}]")))
            .collect(),
        Some(v) => Err(wrong("IMPORTED", "an object or an array", v)),
    }
}
