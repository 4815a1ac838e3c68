//! [`IsfFactory`]: an ISF shader as a GPU element, and its [`ElementDesc`].
//!
//! The element's kind comes from the shader's image inputs ([`framepipe_isf::Role`]): none
//! make a source (with `width`, `height`, `rate` and `frames` like `testsrc`; endless unless
//! `frames` is given), one an effect, several a mixer of that many inputs (a transition's
//! `startImage` then `endImage`, else `inputImage` first, then the others in the header's
//! order).

use std::sync::Arc;

use framepipe_core::{
    ElementDesc, ElementKind, Error, GpuFactory, GpuNode, Limits, Mode, PathUse, PropKind,
    PropSpec, PropValue, Props, Rational, Result, TexFormat, VideoInfo,
};
use framepipe_isf::{InputKind, Role, Shader};

use super::inputs::{specs, Values};
use super::loaded::Loaded;
use super::node::IsfNode;
use super::reload::Watcher;
use super::OWN_PROPS;

/// A source's size when `width`/`height` are not given (as `testsrc`).
pub const DEFAULT_SIZE: (u32, u32) = (640, 480);
/// A source's rate when `rate` is not given.
pub const DEFAULT_RATE: &str = "30";

/// The element kind of a shader: by its number of image inputs.
pub fn kind(shader: &Shader) -> ElementKind {
    match shader.frame_inputs().len() {
        0 => ElementKind::Source,
        1 => ElementKind::Effect,
        n => ElementKind::Mixer {
            min_inputs: n,
            max_inputs: n,
        },
    }
}

/// Whether the shader keeps state across frames (a `PERSISTENT` buffer).
fn persistent(shader: &Shader) -> bool {
    shader.buffers.iter().any(|b| b.persistent)
}

/// The properties of an element running `shader`: `location` first when it is `isf`, a
/// source's size, rate and length, then one per input ([`super::inputs`]).
pub fn props(shader: &Shader, location: bool) -> Vec<PropSpec> {
    let mut out = Vec::new();
    if location {
        out.push(
            PropSpec::new(
                "location",
                PropKind::Str,
                PropValue::Str(String::new()),
                "the ISF file (.fs); its inputs become this node's properties",
            )
            .path(PathUse::File)
            .fixed(),
        );
    }
    if kind(shader) == ElementKind::Source {
        let dim = PropKind::Int {
            min: 1,
            max: framepipe_core::limits::MAX_DIMENSION as i64,
        };
        out.push(
            PropSpec::new(
                "width",
                dim.clone(),
                PropValue::Int(DEFAULT_SIZE.0 as i64),
                "width",
            )
            .fixed(),
        );
        out.push(
            PropSpec::new(
                "height",
                dim,
                PropValue::Int(DEFAULT_SIZE.1 as i64),
                "height",
            )
            .fixed(),
        );
        out.push(
            PropSpec::new(
                "rate",
                PropKind::Str,
                PropValue::Str(DEFAULT_RATE.into()),
                "frame rate: 30, 25/1, 30000/1001",
            )
            .fixed(),
        );
        out.push(
            PropSpec::new(
                "frames",
                PropKind::Int {
                    min: 0,
                    max: i64::MAX,
                },
                PropValue::Int(0),
                "number of frames; 0 = endless",
            )
            .fixed(),
        );
    }
    out.extend(specs(shader, OWN_PROPS));
    out
}

/// What `framepipe inspect` shows besides the properties.
pub fn details(shader: &Shader, file: &str) -> Vec<(String, String)> {
    let mut d = vec![("file".to_string(), file.to_string())];
    let role = match shader.role() {
        Role::Source => "source (a generator: no image input)".to_string(),
        Role::Effect => "effect (inputImage)".to_string(),
        Role::Transition => "transition: a mixer of startImage and endImage by progress".into(),
        Role::Mixer => format!(
            "mixer of {}",
            shader
                .frame_inputs()
                .iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    d.push(("role".into(), role));
    if let Some(c) = &shader.credit {
        d.push(("credit".into(), c.clone()));
    }
    if !shader.categories.is_empty() {
        d.push(("categories".into(), shader.categories.join(", ")));
    }
    let mut version = shader.isf_version.to_string();
    if shader.upgraded {
        version.push_str(" (upgraded to 2.0)");
    }
    if let Some(v) = &shader.vsn {
        version.push_str(&format!("; the file's own version {v}"));
    }
    d.push(("ISF version".into(), version));
    let passes: Vec<String> = shader
        .passes
        .iter()
        .map(|p| match &p.target {
            None => "output".to_string(),
            Some(t) => {
                let b = shader.buffers.iter().find(|b| &b.name == t);
                let mut s = t.clone();
                if let Some(b) = b {
                    let mut f = Vec::new();
                    if b.persistent {
                        f.push("persistent".to_string());
                    }
                    if b.float {
                        f.push("float".to_string());
                    }
                    if let Some(w) = &b.width {
                        f.push(format!("WIDTH {}", w.text()));
                    }
                    if let Some(h) = &b.height {
                        f.push(format!("HEIGHT {}", h.text()));
                    }
                    if !f.is_empty() {
                        s.push_str(&format!(" ({})", f.join(", ")));
                    }
                }
                s
            }
        })
        .collect();
    d.push(("passes".into(), passes.join(" -> ")));
    let audio: Vec<String> = shader
        .inputs
        .iter()
        .filter(|i| matches!(i.kind, InputKind::Audio { .. } | InputKind::AudioFft { .. }))
        .map(|i| format!("{} ({})", i.name, i.kind.type_name()))
        .collect();
    if !audio.is_empty() {
        d.push((
            "audio inputs".into(),
            format!(
                "{}: fed per frame from the show's --audio (silent without it: audio reads as 0.5, an FFT as 0)",
                audio.join(", ")
            ),
        ));
    }
    if !shader.imported.is_empty() {
        let list: Vec<String> = shader
            .imported
            .iter()
            .map(|m| format!("{} = {}", m.name, m.path))
            .collect();
        d.push(("imported images".into(), list.join(", ")));
    }
    d
}

/// The description of element `name` running `loaded`.
pub fn desc(name: &str, shader: &Shader, file: &str, location: bool) -> ElementDesc {
    ElementDesc {
        name: name.to_string(),
        kind: kind(shader),
        description: shader
            .description
            .clone()
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_else(|| format!("ISF shader {file}")),
        props: props(shader, location),
        default_mode: if persistent(shader) {
            Mode::Serial
        } else {
            Mode::Parallel
        },
        details: details(shader, file),
    }
}

/// A source's own settings.
#[derive(Debug, Clone, Copy)]
struct SourceSettings {
    info: VideoInfo,
    frames: Option<u64>,
}

/// An ISF shader configured with its properties: a [`GpuFactory`].
pub struct IsfFactory {
    element: String,
    loaded: Arc<Loaded>,
    values: Values,
    source: Option<SourceSettings>,
    render: Option<(u32, u32)>,
    watch: bool,
}

impl std::fmt::Debug for IsfFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IsfFactory")
            .field("element", &self.element)
            .field("file", &self.loaded.path)
            .finish()
    }
}

impl IsfFactory {
    /// The element `element` running `loaded` with `props` (resolved against [`props`]);
    /// `watch`: reload the file when it changes (`isf location=`).
    pub fn new(element: &str, loaded: Arc<Loaded>, props: &Props, watch: bool) -> Result<Self> {
        let mut values = Values::defaults(&loaded.shader, OWN_PROPS);
        for (name, v) in props.iter() {
            values.set(element, name, v)?;
        }
        let source = if kind(&loaded.shader) == ElementKind::Source {
            let width = props.i64("width").clamp(1, u32::MAX as i64) as u32;
            let height = props.i64("height").clamp(1, u32::MAX as i64) as u32;
            let rate_text = match props.get("rate") {
                Some(PropValue::Str(s)) => s.clone(),
                _ => DEFAULT_RATE.to_string(),
            };
            let rate = Rational::parse(&rate_text).ok_or_else(|| Error::BadValue {
                element: element.to_string(),
                prop: "rate".into(),
                value: rate_text.clone(),
                reason: "expected a frame rate: 30, 25/1, 30000/1001".into(),
            })?;
            Limits::current().check_frame(element, width, height)?;
            let frames = props.i64("frames");
            Some(SourceSettings {
                info: VideoInfo {
                    width,
                    height,
                    rate,
                },
                frames: (frames > 0).then_some(frames as u64),
            })
        } else {
            None
        };
        Ok(IsfFactory {
            element: element.to_string(),
            loaded,
            values,
            source,
            render: None,
            watch,
        })
    }

    /// The shader it runs.
    pub fn loaded(&self) -> &Arc<Loaded> {
        &self.loaded
    }

    /// The buffers' and the node's own textures' bytes for a render of `size`.
    fn bytes(&self, size: (u32, u32)) -> u64 {
        let shader = &self.loaded.shader;
        let mut total = 0u64;
        for b in &shader.buffers {
            let (w, h) = b.size(size, &|n| self.values.number(n));
            let format = if b.float {
                TexFormat::Rgba32F
            } else {
                TexFormat::Rgba8
            };
            total += 2 * w as u64 * h as u64 * format.texel_bytes();
        }
        for m in &self.loaded.images {
            total += m.picture.rgba.len() as u64;
        }
        total
    }
}

impl GpuFactory for IsfFactory {
    fn name(&self) -> &str {
        &self.element
    }

    fn kind(&self) -> ElementKind {
        kind(&self.loaded.shader)
    }

    fn default_mode(&self) -> Mode {
        if persistent(&self.loaded.shader) {
            Mode::Serial
        } else {
            Mode::Parallel
        }
    }

    fn negotiate(&mut self, inputs: &[VideoInfo]) -> Result<VideoInfo> {
        let wanted = self.loaded.frame_inputs();
        let info = match self.source {
            Some(s) => s.info,
            None => {
                if inputs.len() != wanted {
                    return Err(Error::Pipeline(format!(
                        "{} takes {wanted} input(s) ({}), not {}",
                        self.element,
                        self.loaded
                            .shader
                            .frame_inputs()
                            .iter()
                            .map(|i| i.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                        inputs.len()
                    )));
                }
                inputs[0]
            }
        };
        super::check::compiles(&self.loaded.source)
            .map_err(|e| Error::element(self.element.clone(), e))?;
        self.render = Some((info.width, info.height));
        Ok(info)
    }

    fn len_hint(&self) -> Option<u64> {
        self.source.and_then(|s| s.frames)
    }

    fn gpu_bytes(&self) -> u64 {
        self.render.map_or(0, |r| self.bytes(r))
    }

    fn instantiate(&self) -> Result<Box<dyn GpuNode>> {
        let watcher = self
            .watch
            .then(|| Watcher::start(&self.element, &self.loaded));
        Ok(Box::new(IsfNode::new(
            &self.element,
            self.loaded.clone(),
            self.values.clone(),
            watcher,
        )))
    }
}
