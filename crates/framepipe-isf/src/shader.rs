//! An ISF file read: the header (`/*{ JSON }*/`) into a [`Shader`], the GLSL after it kept as
//! written with the line it starts on.

use crate::error::{describe, quote, Error, Result};
use crate::input::{Input, InputKind};
use crate::json::{string, wrong};
use crate::pass::{self, Buffer, Buffers, Imported, Pass};
use crate::upgrade;
use serde_json::Value;

/// The most bytes of an `.fs` or `.vs` file read (real ones are under 30 KB).
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// The most `INPUTS` an ISF file may have.
pub const MAX_INPUTS: usize = 256;
/// The most `PASSES` an ISF file may have (each may need a texture).
pub const MAX_PASSES: usize = 64;

/// An ISF spec version (`ISFVSN`), or a file's own (`VSN`): "2", "2.1", "2.1.1".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// The first number.
    pub major: u32,
    /// The second, 0 when left out.
    pub minor: u32,
    /// The third, 0 when left out.
    pub patch: u32,
}

impl Version {
    /// Parses "2", "2.1" or "2.1.1".
    pub fn parse(text: &str) -> Option<Version> {
        let mut parts = text.trim().split('.');
        let mut next = |required: bool| match parts.next() {
            None if !required => Some(0),
            Some(p) => p.parse::<u32>().ok(),
            None => None,
        };
        let v = Version {
            major: next(true)?,
            minor: next(false)?,
            patch: next(false)?,
        };
        parts.next().is_none().then_some(v)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A parsed ISF file: what its header describes, and its GLSL.
#[derive(Debug, Clone, PartialEq)]
pub struct Shader {
    /// `ISFVSN`: the spec version the file was written for; 1.0.0 when left out.
    pub isf_version: Version,
    /// Whether the file was upgraded from ISF 1.0 ([`upgrade`](crate::upgrade)).
    pub upgraded: bool,
    /// `VSN`: the file's own version, as written.
    pub vsn: Option<String>,
    /// `DESCRIPTION`.
    pub description: Option<String>,
    /// `CREDIT`.
    pub credit: Option<String>,
    /// `CATEGORIES`.
    pub categories: Vec<String>,
    /// `INPUTS`, in the header's order.
    pub inputs: Vec<Input>,
    /// `PASSES`: at least one.
    pub passes: Vec<Pass>,
    /// The buffers the passes render into, in order of first mention.
    pub buffers: Vec<Buffer>,
    /// `IMPORTED` images.
    pub imported: Vec<Imported>,
    glsl: String,
    glsl_line: u32,
}

impl Shader {
    /// Reads an ISF fragment shader's text (the `.fs` file). A malformed header is an
    /// [`Error`] naming the place and the value, never a panic.
    pub fn parse(text: &str) -> Result<Shader> {
        if text.len() > MAX_FILE_BYTES {
            return Err(Error::TooLarge {
                what: "the .fs file",
                size: text.len(),
                limit: MAX_FILE_BYTES,
            });
        }
        let split = split(text)?;
        let header: Value = serde_json::from_str(split.json).map_err(|e| Error::Json {
            line: split.json_line + e.line().saturating_sub(1) as u32,
            column: e.column() as u32,
            message: strip_position(&e.to_string()),
        })?;
        let top = header.as_object().ok_or_else(|| Error::Header {
            at: "the header".into(),
            message: format!("expected a JSON object, found {}", describe(&header)),
        })?;
        let text_of = |key: &str| -> Result<Option<String>> {
            match top.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Number(n)) if key.ends_with("VSN") => Ok(Some(n.to_string())),
                Some(v) => string(v, key).map(Some),
            }
        };
        let (isf_version, upgraded) = match text_of("ISFVSN")? {
            None => (
                Version {
                    major: 1,
                    minor: 0,
                    patch: 0,
                },
                true,
            ),
            Some(t) => {
                let v = Version::parse(&t).ok_or_else(|| Error::Header {
                    at: "ISFVSN".into(),
                    message: format!("expected a version like \"2.0\", found {}", quote(&t)),
                })?;
                (v, v.major < 2)
            }
        };
        let categories = match top.get("CATEGORIES") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, c)| string(c, &format!("CATEGORIES[{i}]")))
                .collect::<Result<_>>()?,
            Some(v) => return Err(wrong("CATEGORIES", "an array of strings", v)),
        };
        let inputs = match top.get("INPUTS") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if a.len() > MAX_INPUTS => {
                return Err(Error::Header {
                    at: "INPUTS".into(),
                    message: format!("{} inputs; at most {MAX_INPUTS} are read", a.len()),
                })
            }
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| Input::parse(i, v))
                .collect::<Result<_>>()?,
            Some(v) => return Err(wrong("INPUTS", "an array", v)),
        };
        let mut buffers = Buffers::default();
        let passes = pass::passes(top.get("PASSES"), &mut buffers)?;
        let had_v1_buffers =
            upgrade::persistent_buffers(top.get("PERSISTENT_BUFFERS"), &mut buffers)?;
        let imported = pass::imported(top.get("IMPORTED"))?;
        let buffers = buffers.finish();
        check_names(&inputs, &buffers, &imported)?;
        check_expressions(&inputs, &buffers)?;
        Ok(Shader {
            isf_version,
            upgraded: upgraded || had_v1_buffers,
            vsn: text_of("VSN")?,
            description: text_of("DESCRIPTION")?,
            credit: text_of("CREDIT")?,
            categories,
            inputs,
            passes,
            buffers: buffers.into_iter().map(|(b, _)| b).collect(),
            imported,
            glsl: split.body.to_string(),
            glsl_line: split.body_line,
        })
    }

    /// The GLSL after the header, as written (it begins right after the `*/`).
    pub fn glsl(&self) -> &str {
        &self.glsl
    }

    /// The `.fs` line [`glsl`](Self::glsl) begins on (the line of the header's `*/`).
    pub fn glsl_line(&self) -> u32 {
        self.glsl_line
    }

    /// The input named `name`.
    pub fn input(&self, name: &str) -> Option<&Input> {
        self.inputs.iter().find(|i| i.name == name)
    }

    /// The buffer named `name`.
    pub fn buffer(&self, name: &str) -> Option<&Buffer> {
        self.buffers.iter().find(|b| b.name == name)
    }

    /// Every name the GLSL may read as an image: image and audio inputs, imported images,
    /// buffers.
    pub fn image_names(&self) -> impl Iterator<Item = &str> {
        self.inputs
            .iter()
            .filter(|i| i.kind.is_texture())
            .map(|i| i.name.as_str())
            .chain(self.imported.iter().map(|i| i.name.as_str()))
            .chain(self.buffers.iter().map(|b| b.name.as_str()))
    }
}

/// Names that ISF declares itself, or that the assembled GLSL uses.
pub(crate) const BUILT_IN: &[&str] = &[
    "PASSINDEX",
    "RENDERSIZE",
    "TIME",
    "TIMEDELTA",
    "DATE",
    "FRAMEINDEX",
    "isf_FragNormCoord",
    "isf_FragColor",
    "isf_VertexPosition",
    "isf_vertShaderInit",
    "main",
];

/// GLSL 330's keywords and type names that a header might try as a name.
const GLSL_WORDS: &[&str] = &[
    "attribute",
    "const",
    "uniform",
    "varying",
    "layout",
    "centroid",
    "flat",
    "smooth",
    "noperspective",
    "break",
    "continue",
    "do",
    "for",
    "while",
    "switch",
    "case",
    "default",
    "if",
    "else",
    "in",
    "out",
    "inout",
    "float",
    "int",
    "void",
    "bool",
    "true",
    "false",
    "invariant",
    "discard",
    "return",
    "mat2",
    "mat3",
    "mat4",
    "vec2",
    "vec3",
    "vec4",
    "ivec2",
    "ivec3",
    "ivec4",
    "bvec2",
    "bvec3",
    "bvec4",
    "uint",
    "uvec2",
    "uvec3",
    "uvec4",
    "sampler2D",
    "sampler3D",
    "samplerCube",
    "struct",
    "precision",
    "highp",
    "mediump",
    "lowp",
    "texture",
    "double",
    "common",
    "class",
    "union",
    "enum",
    "typedef",
    "template",
    "this",
    "goto",
    "inline",
    "long",
    "short",
    "half",
    "fixed",
    "unsigned",
    "input",
    "output",
    "sizeof",
    "cast",
    "namespace",
    "using",
    "patch",
    "sample",
    "subroutine",
    "filter",
    "image",
];

/// Why `name` cannot be a uniform's name, if it cannot.
fn bad_name(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some(
            "is not a GLSL name (ASCII letters, digits and '_', not starting with a digit)",
        );
    }
    if name.len() > 128 {
        return Some("is longer than 128 characters");
    }
    if name.starts_with("gl_") || name.contains("__") {
        return Some("is reserved by GLSL (names starting with gl_ or holding __)");
    }
    if BUILT_IN.contains(&name) {
        return Some("is a name ISF declares itself");
    }
    if GLSL_WORDS.contains(&name) {
        return Some("is a GLSL keyword or type");
    }
    None
}

fn check_names(
    inputs: &[Input],
    buffers: &[(Buffer, String)],
    imported: &[Imported],
) -> Result<()> {
    let mut seen: Vec<(&str, String)> = Vec::new();
    let named = inputs
        .iter()
        .enumerate()
        .map(|(i, x)| (x.name.as_str(), format!("INPUTS[{i}]")))
        .chain(
            buffers
                .iter()
                .map(|(b, at)| (b.name.as_str(), format!("{at} TARGET"))),
        )
        .chain(
            imported
                .iter()
                .map(|m| (m.name.as_str(), format!("IMPORTED {}", quote(&m.name)))),
        );
    for (name, at) in named {
        if let Some(why) = bad_name(name) {
            return Err(Error::BadName {
                at,
                name: quote(name),
                why,
            });
        }
        if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
            return Err(Error::DuplicateName {
                name: quote(name),
                first: first.clone(),
                second: at,
            });
        }
        seen.push((name, at));
    }
    Ok(())
}

fn check_expressions(inputs: &[Input], buffers: &[(Buffer, String)]) -> Result<()> {
    for (b, at) in buffers {
        for (key, e) in [("WIDTH", &b.width), ("HEIGHT", &b.height)] {
            let Some(e) = e else { continue };
            for v in e.variables() {
                let known = v == "WIDTH"
                    || v == "HEIGHT"
                    || inputs.iter().any(|i| i.name == v && i.kind.is_number());
                if !known {
                    let numbers: Vec<&str> = inputs
                        .iter()
                        .filter(|i| i.kind.is_number())
                        .map(|i| i.name.as_str())
                        .collect();
                    return Err(Error::Expr {
                        at: format!("{at} {key}"),
                        expr: quote(e.text()),
                        message: format!(
                            "reads ${v}, which is not $WIDTH, $HEIGHT or a number-valued input (float, long, bool, event){}",
                            if numbers.is_empty() {
                                String::new()
                            } else {
                                format!("; those here: {}", numbers.join(", "))
                            }
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}

/// A file split at its header.
struct Split<'a> {
    json: &'a str,
    json_line: u32,
    body: &'a str,
    body_line: u32,
}

fn line_of(text: &str, byte: usize) -> u32 {
    1 + text.as_bytes()[..byte]
        .iter()
        .filter(|&&b| b == b'\n')
        .count() as u32
}

fn split(text: &str) -> Result<Split<'_>> {
    let start = text
        .char_indices()
        .find(|&(_, c)| !(c.is_whitespace() || c == '\u{feff}'))
        .map_or(text.len(), |(i, _)| i);
    let rest = &text[start..];
    if !rest.starts_with("/*") {
        let found: String = rest.chars().take(30).collect();
        return Err(Error::NoHeader {
            found: if found.is_empty() {
                "nothing (the file is empty)".into()
            } else {
                quote(&found)
            },
        });
    }
    let json_start = start + 2;
    let end = text[json_start..]
        .find("*/")
        .map(|i| json_start + i)
        .ok_or(Error::UnclosedHeader {
            line: line_of(text, start),
        })?;
    Ok(Split {
        json: &text[json_start..end],
        json_line: line_of(text, start),
        body: &text[end + 2..],
        body_line: line_of(text, end),
    })
}

/// serde_json's message without its " at line L column C" (the error gives the file's line).
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// The kind of an input by name, for the role.
pub(crate) fn is_image(s: &Shader, name: &str) -> bool {
    s.input(name).is_some_and(|i| i.kind == InputKind::Image)
}
