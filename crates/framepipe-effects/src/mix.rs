//! `mix`: combines 2 to 8 frames of one size into one, as layers with blend modes or as an A/B
//! crossfade. Native, stateless ([`Mode::Parallel`]), sliced by rows with
//! [`for_each_row_slice_sized`], no allocation in `process`.
//!
//! # The maths (8-bit integer, exact)
//!
//! Every channel value is an integer 0..=255. `div255(x)` is `x / 255` rounded to the nearest
//! integer (x ≤ 65025, never a tie since 255 is odd), computed as
//! `(x + 128 + ((x + 128) >> 8)) >> 8`. Floats are turned into 8-bit weights once per frame:
//! `W(v) = round(v * 255)`.
//!
//! **`mode=crossfade`**: `out = div255(A * (255 - F) + B * F)` for each of R, G, B and A, with
//! `A` = input 0, `B` = input 1 and `F = W(fader)`. Inputs 2 and up are ignored. `fader=0`
//! gives A exactly and `fader=1` gives B exactly.
//!
//! **`mode=layers`** (the default): input 0 is the base, copied as is (there is no
//! `opacity-0`: to fade the base, crossfade it with a black source). Then each input `k ≥ 1`
//! in turn is laid over the result so far `b` with its blend mode `blend-k` and its weight
//!
//! ```text
//! w = div255(s.a * W(opacity-k))          (s = input k's pixel; s.a its alpha)
//! out.c = div255(b.c * (255 - w) + f(b.c, s.c) * w)     for c in R, G, B
//! out.a = div255(b.a * (255 - w) + 255 * w)             (alpha: "over", coverage grows)
//! ```
//!
//! where `f` is the blend function of `blend-k`, on one channel:
//!
//! | blend        | `f(b, s)`                                                         |
//! |--------------|-------------------------------------------------------------------|
//! | `normal`     | `s` (with `w` this is alpha-over, using the input's alpha)        |
//! | `add`        | `min(b + s, 255)`                                                 |
//! | `multiply`   | `div255(b * s)`                                                   |
//! | `screen`     | `255 - div255((255 - b) * (255 - s))`                             |
//! | `overlay`    | `b < 128`: `div255(2 * b * s)`; else `255 - div255(2 * (255 - b) * (255 - s))` |
//! | `difference` | `abs(b - s)`                                                      |
//! | `lighten`    | `max(b, s)`                                                       |
//! | `darken`     | `min(b, s)`                                                       |
//!
//! So an opaque input at `opacity-k=1` in `normal` mode replaces the base, `opacity-k=0`
//! leaves it unchanged exactly, and an opaque base stays opaque. The alpha of a layer only
//! weighs it; the output alpha is the base's alpha with each layer's coverage `w` laid over it.
//!
//! # Speed
//!
//! The blend is chosen once per layer per frame (a function monomorphised for each blend
//! mode); the per-pixel loops work on flat byte arrays in `u16` lanes without branches on
//! the mode, so that rustc vectorises them (baseline SSE2 on x86-64). A frame is cut into row
//! slices by [`for_each_row_slice_sized`]: slices of at least
//! [`MIN_SLICE_BYTES`](crate::slices::MIN_SLICE_BYTES) of memory traffic, inline below that.
//! Within a slice, each run of [`BLOCK`] pixels goes through every layer before the next, so
//! the intermediate result stays in L1 cache.

use std::ops::Range;

use framepipe_core::{
    Element, ElementDesc, ElementKind, Error, Frame, FrameCtx, FrameMut, Mixer, MixerFactory, Mode,
    PropKind, PropSpec, PropValue, Props, Result, SliceRunner, VideoInfo,
};

use crate::error::EffectsError;
use crate::slices::for_each_row_slice_sized;

/// Element name.
pub const NAME: &str = "mix";
/// The `mode=` word of a gl-transition mix, which the builder makes as a GPU node (the
/// `framepipe-gpu` crate's `transitions::mix_entry`), never this element.
pub const TRANSITION_MODE: &str = "transition";
/// Fewest inputs.
pub const MIN_INPUTS: usize = 2;
/// Most inputs.
pub const MAX_INPUTS: usize = 8;
/// Default `fader`.
pub const DEFAULT_FADER: f64 = 0.5;
/// Default `opacity-k`.
pub const DEFAULT_OPACITY: f64 = 1.0;
/// Pixels per block: every layer is applied to one block before the next block.
pub const BLOCK: usize = 64;

/// `mode=`: how the inputs are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MixMode {
    /// Input 0 as the base, the others laid over it with their blend modes and opacities.
    Layers,
    /// `A * (1 - fader) + B * fader` of inputs 0 and 1.
    Crossfade,
}

impl MixMode {
    /// The words of `mode=`.
    pub const NAMES: [&'static str; 2] = ["layers", "crossfade"];

    /// Parses `layers` or `crossfade`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "layers" => Some(MixMode::Layers),
            "crossfade" => Some(MixMode::Crossfade),
            _ => None,
        }
    }
}

/// `blend-k=`: how a layer's colour combines with what is under it (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blend {
    /// Alpha-over.
    Normal,
    /// Sum, saturated.
    Add,
    /// Product.
    Multiply,
    /// Inverse of the product of the inverses.
    Screen,
    /// Multiply in the shadows, screen in the highlights (of the base).
    Overlay,
    /// Absolute difference.
    Difference,
    /// Larger of the two.
    Lighten,
    /// Smaller of the two.
    Darken,
}

impl Blend {
    /// Every blend mode, in the order of [`Blend::NAMES`].
    pub const ALL: [Blend; 8] = [
        Blend::Normal,
        Blend::Add,
        Blend::Multiply,
        Blend::Screen,
        Blend::Overlay,
        Blend::Difference,
        Blend::Lighten,
        Blend::Darken,
    ];
    /// The words of `blend-k=`.
    pub const NAMES: [&'static str; 8] = [
        "normal",
        "add",
        "multiply",
        "screen",
        "overlay",
        "difference",
        "lighten",
        "darken",
    ];

    /// Parses one of [`Blend::NAMES`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        Self::NAMES[Self::ALL.iter().position(|b| *b == self).unwrap_or(0)]
    }
}

/// `x / 255` rounded to nearest, for `x <= 65025` (in `u16` lanes).
#[inline(always)]
pub fn div255(x: u16) -> u16 {
    let t = x + 128;
    (t + (t >> 8)) >> 8
}

/// An 8-bit weight `round(v * 255)` for `v` in 0..=1.
pub fn weight(v: f64) -> u8 {
    (v.clamp(0.0, 1.0) * 255.0).round() as u8
}

/// One blend function on one channel, `b` and `s` in 0..=255.
trait BlendFn {
    fn f(b: u16, s: u16) -> u16;
}

macro_rules! blend_fn {
    ($name:ident, |$b:ident, $s:ident| $e:expr) => {
        struct $name;
        impl BlendFn for $name {
            #[inline(always)]
            fn f($b: u16, $s: u16) -> u16 {
                $e
            }
        }
    };
}

blend_fn!(NormalFn, |_b, s| s);
blend_fn!(AddFn, |b, s| (b + s).min(255));
blend_fn!(MultiplyFn, |b, s| div255(b * s));
blend_fn!(ScreenFn, |b, s| 255 - div255((255 - b) * (255 - s)));
blend_fn!(OverlayFn, |b, s| {
    // Both halves with operands below 128 on the multiplied side, so 2*x*y <= 64770 fits.
    let low = b < 128;
    let x = if low { b } else { 255 - b };
    let y = if low { s } else { 255 - s };
    let r = div255(2 * x * y);
    if low {
        r
    } else {
        255 - r
    }
});
blend_fn!(DifferenceFn, |b, s| b.abs_diff(s));
blend_fn!(LightenFn, |b, s| b.max(s));
blend_fn!(DarkenFn, |b, s| b.min(s));

/// Alpha lanes of a block: `f` is forced to 255 there (`f | 255 = 255`, `f | 0 = f`).
const ALPHA_LANES: [u16; BLOCK * 4] = {
    let mut m = [0u16; BLOCK * 4];
    let mut i = 3;
    while i < BLOCK * 4 {
        m[i] = 255;
        i += 4;
    }
    m
};

/// Lays `src` (RGBA, as many bytes as `dst`, at most one block) over `dst` in place with
/// blend `B` and 8-bit opacity `op`.
#[inline(always)]
fn layer_block<B: BlendFn>(dst: &mut [u8], src: &[u8], op: u16) {
    let n = dst.len();
    debug_assert!(n <= BLOCK * 4 && src.len() == n && n.is_multiple_of(4));
    // Per byte weight: the pixel's `div255(alpha * op)` repeated on its 4 lanes.
    let mut w = [0u16; BLOCK * 4];
    for (wp, sp) in w[..n].chunks_exact_mut(4).zip(src.chunks_exact(4)) {
        let a = div255(sp[3] as u16 * op);
        wp.copy_from_slice(&[a; 4]);
    }
    for (((d, &s), &w), &m) in dst.iter_mut().zip(src).zip(&w[..n]).zip(&ALPHA_LANES[..n]) {
        let b = *d as u16;
        let f = B::f(b, s as u16) | m;
        *d = div255(b * (255 - w) + f * w) as u8;
    }
}

/// A layer kernel: one block of one layer.
type LayerKernel = fn(&mut [u8], &[u8], u16);

fn kernel(blend: Blend) -> LayerKernel {
    match blend {
        Blend::Normal => layer_block::<NormalFn>,
        Blend::Add => layer_block::<AddFn>,
        Blend::Multiply => layer_block::<MultiplyFn>,
        Blend::Screen => layer_block::<ScreenFn>,
        Blend::Overlay => layer_block::<OverlayFn>,
        Blend::Difference => layer_block::<DifferenceFn>,
        Blend::Lighten => layer_block::<LightenFn>,
        Blend::Darken => layer_block::<DarkenFn>,
    }
}

/// `out = div255(a * (255 - f) + b * f)` on every byte.
fn crossfade_bytes(out: &mut [u8], a: &[u8], b: &[u8], f: u16) {
    for ((o, &a), &b) in out.iter_mut().zip(a).zip(b) {
        *o = div255(a as u16 * (255 - f) + b as u16 * f) as u8;
    }
}

/// The settings of one `mix`, copied once per frame so a live change never lands halfway.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixSettings {
    /// `mode=`.
    pub mode: MixMode,
    /// `fader=`, 0..1.
    pub fader: f64,
    /// `blend-k=` for k = 1..=7 (index 0 unused).
    pub blend: [Blend; MAX_INPUTS],
    /// `opacity-k=` for k = 1..=7 (index 0 unused), 0..1.
    pub opacity: [f64; MAX_INPUTS],
}

impl Default for MixSettings {
    fn default() -> Self {
        MixSettings {
            mode: MixMode::Layers,
            fader: DEFAULT_FADER,
            blend: [Blend::Normal; MAX_INPUTS],
            opacity: [DEFAULT_OPACITY; MAX_INPUTS],
        }
    }
}

/// Names of the live properties, for messages.
pub const LIVE: &str = "mode, fader, blend-1..blend-7, opacity-1..opacity-7";

/// `blend-k` / `opacity-k` → `k` when `1 <= k <= 7`.
fn layer_index(name: &str, prefix: &str) -> Option<usize> {
    let k: usize = name.strip_prefix(prefix)?.parse().ok()?;
    (1..MAX_INPUTS).contains(&k).then_some(k)
}

impl MixSettings {
    /// From resolved properties.
    pub fn from_props(props: &Props) -> std::result::Result<Self, EffectsError> {
        let mut s = MixSettings::default();
        for (name, value) in props.iter() {
            s.set(name, value)?;
        }
        Ok(s)
    }

    /// Applies a change of `name` (any property of `mix`; all are live). A number outside
    /// 0..1, a word not in the list or a property `mix` does not have is refused, naming it.
    pub fn set(&mut self, name: &str, value: &PropValue) -> std::result::Result<(), EffectsError> {
        let bad = |reason| EffectsError::BadLiveValue {
            prop: name.into(),
            value: value.to_string(),
            reason,
        };
        let unit = || {
            value
                .as_f64()
                .filter(|v| (0.0..=1.0).contains(v))
                .ok_or_else(|| bad("expected a number in [0, 1]"))
        };
        let word = || match value {
            PropValue::Str(s) => Some(s.as_str()),
            _ => None,
        };
        if name == "mode" {
            self.mode = word().and_then(MixMode::parse).ok_or_else(|| {
                bad(
                    "expected layers or crossfade (mode=transition, a gl-transition on the \
                         GPU, is another node: replace NODE mix mode=transition transition=NAME)",
                )
            })?;
        } else if name == "fader" {
            self.fader = unit()?;
        } else if let Some(k) = layer_index(name, "blend-") {
            self.blend[k] = word().and_then(Blend::parse).ok_or_else(|| {
                bad("expected normal, add, multiply, screen, overlay, difference, lighten or darken")
            })?;
        } else if let Some(k) = layer_index(name, "opacity-") {
            self.opacity[k] = unit()?;
        } else {
            return Err(EffectsError::NotLive {
                prop: name.into(),
                live: LIVE,
            });
        }
        Ok(())
    }
}

/// The registry description of `mix`.
pub fn desc() -> ElementDesc {
    let unit = PropKind::Float { min: 0.0, max: 1.0 };
    let blends = PropKind::Enum(Blend::NAMES.iter().map(|s| s.to_string()).collect());
    let mut props = vec![
        PropSpec::new(
            "mode",
            PropKind::Enum(
                MixMode::NAMES
                    .iter()
                    .chain(&[TRANSITION_MODE])
                    .map(|s| s.to_string())
                    .collect(),
            ),
            PropValue::Str("layers".into()),
            "layers: input 0 is the base, the others laid over it; crossfade: inputs 0 and 1; \
             transition: inputs 0 and 1 through a gl-transition on the GPU (with transition=NAME)",
        ),
        PropSpec::new(
            "fader",
            unit.clone(),
            PropValue::Float(DEFAULT_FADER),
            "crossfade position: 0 = input 0, 1 = input 1",
        ),
    ];
    for k in 1..MAX_INPUTS {
        props.push(PropSpec::new(
            format!("blend-{k}"),
            blends.clone(),
            PropValue::Str("normal".into()),
            format!("layers: how input {k} combines with what is under it"),
        ));
        props.push(PropSpec::new(
            format!("opacity-{k}"),
            unit.clone(),
            PropValue::Float(DEFAULT_OPACITY),
            format!("layers: weight of input {k} (times its alpha)"),
        ));
    }
    ElementDesc {
        name: NAME.into(),
        kind: ElementKind::Mixer {
            min_inputs: MIN_INPUTS,
            max_inputs: MAX_INPUTS,
        },
        description: "Mixes 2-8 inputs: layers with blend modes and opacities, or an A/B crossfade"
            .into(),
        props,
        default_mode: Mode::Parallel,
        details: vec![
            (
                "slices".into(),
                "row slices of at least 2 MiB of traffic".into(),
            ),
            ("all properties".into(), "live".into()),
            (
                "mode=transition".into(),
                "a GPU mixer of inputs 0 and 1: transition=NAME picks the gl-transition \
                 (framepipe plugins lists them as transition-NAME), fader is its progress, its \
                 parameters are properties of the node (framepipe inspect mix transition=NAME); \
                 mode and transition are fixed while it runs"
                    .into(),
            ),
        ],
    }
}

/// Builds `mix` from its properties.
pub fn build(props: &Props) -> Result<Element> {
    let settings = MixSettings::from_props(props).map_err(|e| Error::element(NAME, e))?;
    Ok(Element::Mixer(Box::new(MixFactory {
        settings,
        info: None,
        inputs: 0,
    })))
}

/// The `mix` factory.
#[derive(Debug, Clone)]
pub struct MixFactory {
    settings: MixSettings,
    info: Option<VideoInfo>,
    inputs: usize,
}

impl MixFactory {
    /// A factory with these settings.
    pub fn new(settings: MixSettings) -> Self {
        MixFactory {
            settings,
            info: None,
            inputs: 0,
        }
    }
}

impl MixerFactory for MixFactory {
    fn name(&self) -> &str {
        NAME
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, inputs: &[VideoInfo]) -> Result<VideoInfo> {
        if !(MIN_INPUTS..=MAX_INPUTS).contains(&inputs.len()) {
            return Err(Error::element(
                NAME,
                EffectsError::Inputs {
                    count: inputs.len(),
                    min: MIN_INPUTS,
                    max: MAX_INPUTS,
                },
            ));
        }
        let first = inputs[0];
        if first.width == 0 || first.height == 0 {
            return Err(Error::element(
                NAME,
                EffectsError::BadSize {
                    width: first.width,
                    height: first.height,
                    reason: "empty input 0".into(),
                },
            ));
        }
        if let Some((k, other)) = inputs
            .iter()
            .enumerate()
            .find(|(_, i)| (i.width, i.height) != (first.width, first.height))
        {
            return Err(Error::element(
                NAME,
                EffectsError::BadSize {
                    width: other.width,
                    height: other.height,
                    reason: format!(
                        "input {k} is not the size of input 0 ({}x{}); scale it first",
                        first.width, first.height
                    ),
                },
            ));
        }
        self.info = Some(first);
        self.inputs = inputs.len();
        Ok(first)
    }
    fn instantiate(&self) -> Result<Box<dyn Mixer>> {
        let Some(info) = self.info else {
            return Err(Error::Pipeline(
                "mix: instantiate called before negotiate".into(),
            ));
        };
        Ok(Box::new(Mix {
            settings: self.settings,
            info,
            inputs: self.inputs,
        }))
    }
}

/// One `mix` instance.
#[derive(Debug, Clone)]
pub struct Mix {
    settings: MixSettings,
    info: VideoInfo,
    inputs: usize,
}

/// One layer of a frame: its input, kernel and 8-bit opacity, fixed for the frame.
#[derive(Clone, Copy)]
struct Layer {
    input: usize,
    kernel: LayerKernel,
    opacity: u16,
}

impl Mix {
    /// An instance for `inputs` frames of `info`'s size.
    pub fn new(settings: MixSettings, info: VideoInfo, inputs: usize) -> Self {
        Mix {
            settings,
            info,
            inputs,
        }
    }

    /// Its current settings.
    pub fn settings(&self) -> &MixSettings {
        &self.settings
    }

    /// Mixes `inputs` (RGBA rows of `row_bytes` bytes, each as long as `out`) into `out`, sliced
    /// through `slices`. `inputs.len()` must be 2..=8.
    pub fn run(
        settings: &MixSettings,
        inputs: &[&[u8]],
        out: &mut [u8],
        row_bytes: usize,
        slices: &dyn SliceRunner,
    ) {
        match settings.mode {
            MixMode::Crossfade => {
                let (a, b) = (inputs[0], inputs[1]);
                let f = weight(settings.fader) as u16;
                // Traffic per row: two rows read, one written.
                for_each_row_slice_sized(slices, out, row_bytes, row_bytes * 3, &|rows, o| {
                    let r = byte_range(&rows, row_bytes);
                    crossfade_bytes(o, &a[r.clone()], &b[r], f);
                });
            }
            MixMode::Layers => {
                let mut layers = [None::<Layer>; MAX_INPUTS];
                for (k, slot) in layers.iter_mut().enumerate().take(inputs.len()).skip(1) {
                    let opacity = weight(settings.opacity[k]) as u16;
                    if opacity > 0 {
                        *slot = Some(Layer {
                            input: k,
                            kernel: kernel(settings.blend[k]),
                            opacity,
                        });
                    }
                }
                let layers = &layers;
                let traffic = row_bytes * (inputs.len() + 1);
                for_each_row_slice_sized(slices, out, row_bytes, traffic, &|rows, o| {
                    let r = byte_range(&rows, row_bytes);
                    o.copy_from_slice(&inputs[0][r.clone()]);
                    for (i, block) in o.chunks_mut(BLOCK * 4).enumerate() {
                        let at = r.start + i * BLOCK * 4;
                        for l in layers.iter().flatten() {
                            (l.kernel)(block, &inputs[l.input][at..at + block.len()], l.opacity);
                        }
                    }
                });
            }
        }
    }
}

fn byte_range(rows: &Range<usize>, row_bytes: usize) -> Range<usize> {
    rows.start * row_bytes..rows.end * row_bytes
}

impl Mixer for Mix {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        inputs: &[&Frame],
        output: &mut FrameMut,
        slices: &dyn SliceRunner,
    ) -> Result<()> {
        if inputs.len() != self.inputs {
            return Err(Error::element(
                NAME,
                EffectsError::Inputs {
                    count: inputs.len(),
                    min: self.inputs,
                    max: self.inputs,
                },
            ));
        }
        let (w, h) = (self.info.width, self.info.height);
        let sizes = inputs.iter().map(|f| (f.width(), f.height()));
        if let Some((k, (fw, fh))) = sizes
            .chain(std::iter::once((output.width(), output.height())))
            .enumerate()
            .find(|(_, s)| *s != (w, h))
        {
            let which = if k == inputs.len() {
                "the output".to_string()
            } else {
                format!("input {k}")
            };
            return Err(Error::element(
                NAME,
                EffectsError::BadSize {
                    width: fw,
                    height: fh,
                    reason: format!("{which} is not the negotiated {w}x{h}"),
                },
            ));
        }
        let mut data = [&[][..]; MAX_INPUTS];
        for (d, f) in data.iter_mut().zip(inputs) {
            *d = f.data();
        }
        let settings = self.settings;
        Mix::run(
            &settings,
            &data[..inputs.len()],
            output.data_mut(),
            w as usize * 4,
            slices,
        );
        Ok(())
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        self.settings
            .set(name, value)
            .map_err(|e| Error::element(NAME, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn div255_rounds_to_nearest_over_its_whole_range() {
        for x in 0..=65025u32 {
            assert_eq!(div255(x as u16) as u32, (x + 127) / 255, "x={x}");
        }
    }

    #[test]
    fn weights_cover_0_to_255() {
        assert_eq!(weight(0.0), 0);
        assert_eq!(weight(1.0), 255);
        assert_eq!(weight(0.5), 128);
    }

    #[test]
    fn blend_names_round_trip() {
        for (b, n) in Blend::ALL.iter().zip(Blend::NAMES) {
            assert_eq!(Blend::parse(n), Some(*b));
            assert_eq!(b.name(), n);
        }
        assert_eq!(Blend::parse("burn"), None);
    }
}
