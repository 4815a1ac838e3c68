//! The gl-transitions collection: `gl-transitions.json` of the npm package (every
//! transition's `name`, `glsl`, `paramsTypes`, `defaultParams`, `author`, `license`).
//!
//! Where it is looked for ([`find_json`]), in order: `$FRAMEPIPE_GLT_PATH` (the JSON file,
//! or a folder holding `gl-transitions.json` or `node_modules/gl-transitions/...`), then
//! `node_modules/gl-transitions/gl-transitions.json` under `~/.local/share/framepipe/npm`,
//! `/usr/local/share/framepipe/npm` (where `scripts/install-deps` puts it) and
//! `/usr/share/framepipe/npm`.

use std::path::{Path, PathBuf};

use framepipe_core::{PropKind, PropSpec, PropValue};
use serde_json::Value;

/// The largest collection file read (the 1.71.0 one is 164 KB).
pub const MAX_JSON_BYTES: u64 = 16 << 20;

const IN_PREFIX: &str = "node_modules/gl-transitions/gl-transitions.json";

/// The type of a transition's parameter (a GLSL uniform).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// `float`.
    Float,
    /// `int`.
    Int,
    /// `bool`.
    Bool,
    /// `vec2`.
    Vec2,
    /// `vec3`.
    Vec3,
    /// `vec4`.
    Vec4,
    /// `ivec2`.
    IVec2,
}

impl ParamType {
    fn parse(t: &str) -> Option<ParamType> {
        Some(match t {
            "float" => ParamType::Float,
            "int" => ParamType::Int,
            "bool" => ParamType::Bool,
            "vec2" => ParamType::Vec2,
            "vec3" => ParamType::Vec3,
            "vec4" => ParamType::Vec4,
            "ivec2" => ParamType::IVec2,
            _ => return None,
        })
    }

    /// How many numbers a value has.
    pub fn components(self) -> usize {
        match self {
            ParamType::Float | ParamType::Int | ParamType::Bool => 1,
            ParamType::Vec2 | ParamType::IVec2 => 2,
            ParamType::Vec3 => 3,
            ParamType::Vec4 => 4,
        }
    }
}

/// One parameter of a transition.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The uniform's (and property's) name.
    pub name: String,
    /// Its type.
    pub ty: ParamType,
    /// Its default, as numbers (true is 1).
    pub default: [f32; 4],
}

/// The text of a vector value: `a,b,c`.
fn vector_text(v: &[f32]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `n` comma-separated finite numbers.
pub fn parse_vector(t: &str, n: usize) -> Option<[f32; 4]> {
    let mut out = [0.0; 4];
    let mut count = 0;
    for part in t.split(',') {
        if count == n {
            return None;
        }
        let v: f32 = part.trim().parse().ok().filter(|v: &f32| v.is_finite())?;
        out[count] = v;
        count += 1;
    }
    (count == n).then_some(out)
}

impl Param {
    /// Its property.
    pub fn spec(&self) -> PropSpec {
        let d = &self.default;
        let (kind, default, what) = match self.ty {
            ParamType::Float => (
                PropKind::Float {
                    min: -1e9,
                    max: 1e9,
                },
                PropValue::Float(d[0] as f64),
                "float",
            ),
            ParamType::Int => (
                PropKind::Int {
                    min: i32::MIN as i64,
                    max: i32::MAX as i64,
                },
                PropValue::Int(d[0] as i64),
                "int",
            ),
            ParamType::Bool => (PropKind::Bool, PropValue::Bool(d[0] != 0.0), "bool"),
            ParamType::Vec2 => (
                PropKind::Position,
                PropValue::Position([d[0] as f64, d[1] as f64]),
                "vec2 x,y",
            ),
            ParamType::Vec3 => (
                PropKind::Str,
                PropValue::Str(vector_text(&d[..3])),
                "vec3 x,y,z",
            ),
            ParamType::Vec4 => (
                PropKind::Str,
                PropValue::Str(vector_text(d)),
                "vec4 x,y,z,w",
            ),
            ParamType::IVec2 => (
                PropKind::Str,
                PropValue::Str(vector_text(&d[..2])),
                "ivec2 x,y (whole numbers)",
            ),
        };
        PropSpec::new(
            self.name.clone(),
            kind,
            default,
            format!("the transition's {what} parameter"),
        )
    }

    /// A property value as this parameter's numbers; `None` if it is not one.
    pub fn value(&self, v: &PropValue) -> Option<[f32; 4]> {
        match (self.ty, v) {
            (ParamType::Vec2, PropValue::Position(p)) => Some([p[0] as f32, p[1] as f32, 0.0, 0.0]),
            (ParamType::Vec3 | ParamType::Vec4 | ParamType::IVec2, PropValue::Str(s)) => {
                let v = parse_vector(s, self.ty.components())?;
                if self.ty == ParamType::IVec2 && v.iter().any(|x| x.fract() != 0.0) {
                    return None;
                }
                Some(v)
            }
            (_, v) => v.as_f64().map(|x| [x as f32, 0.0, 0.0, 0.0]),
        }
    }
}

/// One transition of the collection.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// Its name, as in the collection (`crosswarp`, `GridFlip`).
    pub name: String,
    /// Its GLSL: uniforms of its parameters and `vec4 transition(vec2 uv)`.
    pub glsl: String,
    /// Its parameters, by name.
    pub params: Vec<Param>,
    /// `author`.
    pub author: Option<String>,
    /// `license`.
    pub license: Option<String>,
}

/// Where the collection is, if anywhere ([the module](self) gives the order).
pub fn find_json() -> Option<PathBuf> {
    let mut tries: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("FRAMEPIPE_GLT_PATH").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        tries.push(p.clone());
        tries.push(p.join("gl-transitions.json"));
        tries.push(p.join(IN_PREFIX));
    }
    if let Some(home) = std::env::var_os("HOME") {
        tries.push(
            Path::new(&home)
                .join(".local/share/framepipe/npm")
                .join(IN_PREFIX),
        );
    }
    tries.push(Path::new("/usr/local/share/framepipe/npm").join(IN_PREFIX));
    tries.push(Path::new("/usr/share/framepipe/npm").join(IN_PREFIX));
    tries.into_iter().find(|p| p.is_file())
}

/// Why no collection was found, naming the fix.
pub fn not_found() -> String {
    "the gl-transitions collection (gl-transitions.json) was not found: run scripts/install-deps \
     (it installs the npm package gl-transitions under /usr/local/share/framepipe/npm), or set \
     FRAMEPIPE_GLT_PATH to the file"
        .into()
}

/// Reads the collection at `path`. A transition whose entry is malformed is an error naming
/// it (the file is the package's: it is whole or it is not that file).
pub fn load(path: &Path) -> Result<Vec<Transition>, String> {
    let shown = path.display();
    let text = framepipe_isf::read_text(path, MAX_JSON_BYTES)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("{shown} is not JSON: {e}"))?;
    let list = json
        .as_array()
        .ok_or_else(|| format!("{shown}: expected an array of transitions"))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let at = |what: &str| format!("{shown}: transition {i}: {what}");
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| at("no name"))?
            .to_string();
        let glsl = t
            .get("glsl")
            .and_then(Value::as_str)
            .ok_or_else(|| at("no glsl"))?
            .to_string();
        let defaults = t.get("defaultParams").and_then(Value::as_object);
        let mut params = Vec::new();
        if let Some(types) = t.get("paramsTypes").and_then(Value::as_object) {
            for (pname, ty) in types {
                let ty = ty
                    .as_str()
                    .and_then(ParamType::parse)
                    .ok_or_else(|| at(&format!("parameter {pname}: unknown type {ty}")))?;
                let mut default = [0.0f32; 4];
                match defaults.and_then(|d| d.get(pname)) {
                    Some(Value::Array(a)) => {
                        for (slot, v) in default.iter_mut().zip(a) {
                            *slot = v.as_f64().unwrap_or(0.0) as f32;
                        }
                    }
                    Some(Value::Bool(b)) => default[0] = *b as u8 as f32,
                    Some(v) => default[0] = v.as_f64().unwrap_or(0.0) as f32,
                    None => {}
                }
                params.push(Param {
                    name: pname.clone(),
                    ty,
                    default,
                });
            }
        }
        let text = |k: &str| t.get(k).and_then(Value::as_str).map(str::to_string);
        out.push(Transition {
            name,
            glsl,
            params,
            author: text("author"),
            license: text("license"),
        });
    }
    Ok(out)
}
