//! frei0r plugins as framepipe elements: filters as effects, mixers (mixer2, mixer3) as mixers,
//! sources as sources.

use std::ffi::CString;
use std::sync::Arc;

use framepipe_core::{
    Effect, EffectFactory, Error, Frame, FrameCtx, FrameMut, LoopOrigin, Mixer, MixerFactory, Mode,
    PropKind, PropSpec, PropValue, Props, Rational, SliceRunner, Source, VideoInfo,
};

use crate::error::Frei0rError;
use crate::isolate::{Isolated, Settings};
use crate::plugin::{ColorModel, Instance, Param, ParamKind, ParamValue, Plugin};

/// The `time` argument given to `f0r_update` for a frame: its timestamp in **milliseconds**, as
/// FFmpeg's `frei0r` filter passes it (`pts * time_base * 1000`), so that time-dependent plugins
/// give the same output as under FFmpeg. (The frei0r header says seconds; GStreamer passes
/// seconds.)
pub fn frei0r_time(ctx: &FrameCtx) -> f64 {
    ctx.pts_ns as f64 / 1e6
}

/// Checks that frei0r can take a `width` x `height` frame (both non-zero multiples of 8).
pub fn check_size(element: &str, width: u32, height: u32) -> framepipe_core::Result<()> {
    if !crate::plugin::size_ok(width, height) {
        return Err(Error::Unsupported {
            element: element.to_string(),
            what: Frei0rError::BadSize { width, height }.to_string(),
        });
    }
    Ok(())
}

/// Swaps bytes 0 and 2 of every pixel (RGBA <-> BGRA), from `src` into `dst`.
fn swap_rb_into(src: &[u32], dst: &mut [u32]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = swap_rb(s);
    }
}

/// Swaps bytes 0 and 2 of every pixel in place.
fn swap_rb_in_place(buf: &mut [u32]) {
    for p in buf.iter_mut() {
        *p = swap_rb(*p);
    }
}

#[inline(always)]
fn swap_rb(w: u32) -> u32 {
    // Bytes 0 and 2 trade places whatever the endianness: rotate the word's bytes 0 and 2.
    let b = w.to_ne_bytes();
    u32::from_ne_bytes([b[2], b[1], b[0], b[3]])
}

/// The property spec for one frei0r parameter, with the plugin's own default.
pub(crate) fn param_spec(param: &Param, default: &ParamValue) -> PropSpec {
    let (kind, value) = match default {
        ParamValue::Bool(b) => (PropKind::Bool, PropValue::Bool(*b)),
        ParamValue::Double(x) => (
            // frei0r doubles are nominally in [0, 1]; widened when a plugin's default lies outside.
            PropKind::Float {
                min: x.min(0.0),
                max: x.max(1.0),
            },
            PropValue::Float(*x),
        ),
        ParamValue::Color(c) => (PropKind::Color, PropValue::Color(*c)),
        ParamValue::Position(p) => (PropKind::Position, PropValue::Position(*p)),
        ParamValue::String(s) => (PropKind::Str, PropValue::Str(s.to_string_lossy().into())),
    };
    let description = if param.explanation.is_empty() {
        param.name.clone()
    } else {
        param.explanation.clone()
    };
    PropSpec::new(param.prop_name.clone(), kind, value, description)
}

/// Converts a property value into the parameter's frei0r type.
///
/// Defence in depth: whatever the caller checked, a value that is not finite (NaN, ±inf: some
/// plugins crash on them, e.g. a NaN radius cast to an int) is refused here and never reaches
/// the plugin.
pub(crate) fn to_param(
    param: &Param,
    value: &PropValue,
) -> std::result::Result<ParamValue, Frei0rError> {
    let bad = || Frei0rError::BadParam {
        param: param.prop_name.clone(),
        expected: param.kind.describe(),
        value: value.to_string(),
    };
    let finite = |x: f64| if x.is_finite() { Ok(x) } else { Err(bad()) };
    Ok(match (param.kind, value) {
        (ParamKind::Bool, PropValue::Bool(b)) => ParamValue::Bool(*b),
        (ParamKind::Bool, v) => ParamValue::Bool(finite(v.as_f64().ok_or_else(bad)?)? >= 0.5),
        (ParamKind::Double, PropValue::Str(s)) => {
            ParamValue::Double(finite(s.trim().parse().map_err(|_| bad())?)?)
        }
        (ParamKind::Double, v) => ParamValue::Double(finite(v.as_f64().ok_or_else(bad)?)?),
        (ParamKind::Color, PropValue::Color(c)) => {
            for ch in c {
                finite(f64::from(*ch))?;
            }
            ParamValue::Color(*c)
        }
        (ParamKind::Position, PropValue::Position(p)) => {
            finite(p[0])?;
            finite(p[1])?;
            ParamValue::Position(*p)
        }
        (ParamKind::String, v) => {
            ParamValue::String(CString::new(v.to_string()).map_err(|_| bad())?)
        }
        _ => return Err(bad()),
    })
}

/// The parameter values to set on each new instance: those that differ from the plugin's own
/// defaults (setting a default again would be a no-op for a well-behaved plugin; not setting it
/// is what FFmpeg does for parameters not given).
pub(crate) fn params_to_set(
    plugin: &Plugin,
    defaults: &[ParamValue],
    props: &Props,
    key: impl Fn(&Param) -> String,
) -> std::result::Result<Vec<(usize, ParamValue)>, Frei0rError> {
    let mut out = Vec::new();
    for (param, default) in plugin.params().iter().zip(defaults) {
        if let Some(v) = props.get(&key(param)) {
            let pv = to_param(param, v)?;
            if &pv != default {
                out.push((param.index, pv));
            }
        }
    }
    Ok(out)
}

/// A configured frei0r filter: makes [`Frei0rEffect`] instances.
pub struct Frei0rFilter {
    name: String,
    plugin: Arc<Plugin>,
    mode: Mode,
    clear_output: bool,
    params: Vec<(usize, ParamValue)>,
    size: Option<(u32, u32)>,
    isolation: Option<Settings>,
}

impl Frei0rFilter {
    pub(crate) fn new(
        name: String,
        plugin: Arc<Plugin>,
        mode: Mode,
        clear_output: bool,
        params: Vec<(usize, ParamValue)>,
        isolation: Option<Settings>,
    ) -> Self {
        Frei0rFilter {
            name,
            plugin,
            mode,
            clear_output,
            params,
            size: None,
            isolation,
        }
    }
}

impl EffectFactory for Frei0rFilter {
    fn name(&self) -> &str {
        &self.name
    }

    fn default_mode(&self) -> Mode {
        self.mode
    }

    fn negotiate(&mut self, input: VideoInfo) -> framepipe_core::Result<VideoInfo> {
        check_size(&self.name, input.width, input.height)?;
        self.size = Some((input.width, input.height));
        Ok(input)
    }

    fn instantiate(&self) -> framepipe_core::Result<Box<dyn Effect>> {
        let (w, h) = self.size.ok_or_else(|| {
            Error::Pipeline(format!("{}: instantiated before negotiation", self.name))
        })?;
        if let Some(settings) = self.isolation {
            let runner = isolated(
                &self.name,
                &self.plugin,
                (w, h),
                1,
                self.clear_output,
                settings,
                &self.params,
            )?;
            return Ok(Box::new(IsolatedEffect {
                name: self.name.clone(),
                plugin: Arc::clone(&self.plugin),
                runner,
            }));
        }
        let mut inst =
            Instance::new(&self.plugin, w, h).map_err(|e| Error::element(&self.name, e))?;
        for (idx, v) in &self.params {
            inst.set_param(*idx, v)
                .map_err(|e| Error::element(&self.name, e))?;
        }
        let scratch = if self.plugin.info().color_model == ColorModel::Bgra8888 {
            vec![0u32; w as usize * h as usize]
        } else {
            Vec::new()
        };
        Ok(Box::new(Frei0rEffect {
            name: self.name.clone(),
            inst,
            scratch,
            clear_output: self.clear_output,
        }))
    }
}

/// One instance of a frei0r filter.
///
/// Frames pass straight to the plugin for RGBA8888 and PACKED32 plugins. For BGRA8888 plugins the
/// input is swapped into a scratch buffer (allocated once, here), the plugin writes the output
/// frame, and the output is swapped back in place. Nothing is allocated per frame.
pub struct Frei0rEffect {
    name: String,
    inst: Instance,
    scratch: Vec<u32>,
    clear_output: bool,
}

impl Effect for Frei0rEffect {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> framepipe_core::Result<()> {
        let time = frei0r_time(ctx);
        let out = output.words_mut();
        if self.clear_output {
            out.fill(0);
        }
        if self.scratch.is_empty() {
            self.inst.update(time, Some(input.words()), out);
        } else {
            swap_rb_into(input.words(), &mut self.scratch);
            self.inst.update(time, Some(&self.scratch), out);
            swap_rb_in_place(out);
        }
        Ok(())
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> framepipe_core::Result<()> {
        set_instance_property(&self.name, &mut self.inst, name, value)
    }
}

/// Sets a running instance's parameter by property name (filters and mixers alike).
fn set_instance_property(
    element: &str,
    inst: &mut Instance,
    name: &str,
    value: &PropValue,
) -> framepipe_core::Result<()> {
    let plugin = Arc::clone(inst.plugin());
    let (index, v) = resolve_property(element, &plugin, name, value)?;
    inst.set_param(index, &v)
        .map_err(|e| Error::element(element, e))
}

/// The parameter index and frei0r value a property change names.
fn resolve_property(
    element: &str,
    plugin: &Plugin,
    name: &str,
    value: &PropValue,
) -> framepipe_core::Result<(usize, ParamValue)> {
    let param = plugin.param(name).ok_or_else(|| {
        let expected = plugin
            .params()
            .iter()
            .map(|p| p.prop_name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        Error::element(
            element,
            Frei0rError::UnknownParam {
                param: name.to_string(),
                expected,
            },
        )
    })?;
    let v = to_param(param, value).map_err(|e| Error::element(element, e))?;
    Ok((param.index, v))
}

/// Starts an isolated runner, the error naming the element.
fn isolated(
    name: &str,
    plugin: &Arc<Plugin>,
    size: (u32, u32),
    inputs: usize,
    clear_output: bool,
    settings: Settings,
    params: &[(usize, ParamValue)],
) -> framepipe_core::Result<Isolated> {
    Isolated::new(name, plugin, size, inputs, clear_output, settings, params)
        .map_err(|e| Error::Pipeline(format!("{name}: cannot run the plugin isolated: {e}")))
}

/// One instance of a frei0r filter run in a child process ([`crate::isolate`]): never fails a
/// frame; what the plugin does not deliver is replaced as `on-crash` says.
pub struct IsolatedEffect {
    name: String,
    plugin: Arc<Plugin>,
    runner: Isolated,
}

impl Effect for IsolatedEffect {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> framepipe_core::Result<()> {
        self.runner.run(ctx.seq, frei0r_time(ctx), &[input], output);
        Ok(())
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> framepipe_core::Result<()> {
        let (index, v) = resolve_property(&self.name, &self.plugin, name, value)?;
        self.runner.set_param(index, v);
        Ok(())
    }
}

/// One instance of a frei0r mixer run in a child process ([`crate::isolate`]); `bypass` gives
/// the first input.
pub struct IsolatedMixer {
    name: String,
    plugin: Arc<Plugin>,
    runner: Isolated,
    inputs: usize,
    words: usize,
}

impl Mixer for IsolatedMixer {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        inputs: &[&Frame],
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> framepipe_core::Result<()> {
        if inputs.len() != self.inputs || inputs.iter().any(|f| f.words().len() != self.words) {
            return Err(Error::Pipeline(format!(
                "{}: given {} inputs, not {} of {} pixels as negotiated",
                self.name,
                inputs.len(),
                self.inputs,
                self.words
            )));
        }
        self.runner.run(ctx.seq, frei0r_time(ctx), inputs, output);
        Ok(())
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> framepipe_core::Result<()> {
        let (index, v) = resolve_property(&self.name, &self.plugin, name, value)?;
        self.runner.set_param(index, v);
        Ok(())
    }
}

/// A configured frei0r mixer (mixer2 or mixer3 plugin): makes [`Frei0rMixer`] instances.
///
/// It takes exactly as many inputs as the plugin (2 or 3), all of one size, a multiple of 8 in
/// both directions; the output has the first input's shape.
pub struct Frei0rMixerFactory {
    name: String,
    plugin: Arc<Plugin>,
    inputs: usize,
    mode: Mode,
    clear_output: bool,
    params: Vec<(usize, ParamValue)>,
    size: Option<(u32, u32)>,
    isolation: Option<Settings>,
}

impl Frei0rMixerFactory {
    pub(crate) fn new(
        name: String,
        plugin: Arc<Plugin>,
        inputs: usize,
        mode: Mode,
        clear_output: bool,
        params: Vec<(usize, ParamValue)>,
        isolation: Option<Settings>,
    ) -> Self {
        Frei0rMixerFactory {
            name,
            plugin,
            inputs,
            mode,
            clear_output,
            params,
            size: None,
            isolation,
        }
    }

    /// How many inputs it takes: 2 for a mixer2 plugin, 3 for a mixer3.
    pub fn inputs(&self) -> usize {
        self.inputs
    }
}

impl MixerFactory for Frei0rMixerFactory {
    fn name(&self) -> &str {
        &self.name
    }

    fn default_mode(&self) -> Mode {
        self.mode
    }

    fn negotiate(&mut self, inputs: &[VideoInfo]) -> framepipe_core::Result<VideoInfo> {
        if inputs.len() != self.inputs {
            return Err(Error::Unsupported {
                element: self.name.clone(),
                what: format!(
                    "{} inputs; this frei0r mixer takes exactly {}",
                    inputs.len(),
                    self.inputs
                ),
            });
        }
        let first = inputs[0];
        check_size(&self.name, first.width, first.height)?;
        if let Some((i, other)) = inputs
            .iter()
            .enumerate()
            .find(|(_, v)| (v.width, v.height) != (first.width, first.height))
        {
            return Err(Error::Unsupported {
                element: self.name.clone(),
                what: format!(
                    "input {i} of {}x{} with input 0 of {}x{}: frei0r mixers need inputs of one size",
                    other.width, other.height, first.width, first.height
                ),
            });
        }
        self.size = Some((first.width, first.height));
        Ok(first)
    }

    fn instantiate(&self) -> framepipe_core::Result<Box<dyn Mixer>> {
        let (w, h) = self.size.ok_or_else(|| {
            Error::Pipeline(format!("{}: instantiated before negotiation", self.name))
        })?;
        if let Some(settings) = self.isolation {
            let runner = isolated(
                &self.name,
                &self.plugin,
                (w, h),
                self.inputs,
                self.clear_output,
                settings,
                &self.params,
            )?;
            return Ok(Box::new(IsolatedMixer {
                name: self.name.clone(),
                plugin: Arc::clone(&self.plugin),
                runner,
                inputs: self.inputs,
                words: w as usize * h as usize,
            }));
        }
        let mut inst =
            Instance::new(&self.plugin, w, h).map_err(|e| Error::element(&self.name, e))?;
        for (idx, v) in &self.params {
            inst.set_param(*idx, v)
                .map_err(|e| Error::element(&self.name, e))?;
        }
        let scratch = if self.plugin.info().color_model == ColorModel::Bgra8888 {
            vec![vec![0u32; w as usize * h as usize]; self.inputs]
        } else {
            Vec::new()
        };
        Ok(Box::new(Frei0rMixer {
            name: self.name.clone(),
            inst,
            inputs: self.inputs,
            scratch,
            clear_output: self.clear_output,
        }))
    }
}

/// One instance of a frei0r mixer, run with `f0r_update2(instance, time, in1, in2, in3, out)`
/// (`in3` NULL for a mixer2), the time as for filters ([`frei0r_time`]).
///
/// Frames pass straight to the plugin for RGBA8888 and PACKED32 plugins. For BGRA8888 plugins
/// each input is swapped into its own scratch buffer (allocated once, at instantiation), the
/// plugin writes the output frame, and the output is swapped back in place. Nothing is allocated
/// per frame.
pub struct Frei0rMixer {
    name: String,
    inst: Instance,
    inputs: usize,
    scratch: Vec<Vec<u32>>,
    clear_output: bool,
}

impl Mixer for Frei0rMixer {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        inputs: &[&Frame],
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> framepipe_core::Result<()> {
        let n = self.inst.width() as usize * self.inst.height() as usize;
        if inputs.len() != self.inputs || inputs.iter().any(|f| f.words().len() != n) {
            return Err(Error::Pipeline(format!(
                "{}: given {} inputs, not {} of {}x{} as negotiated",
                self.name,
                inputs.len(),
                self.inputs,
                self.inst.width(),
                self.inst.height()
            )));
        }
        let time = frei0r_time(ctx);
        let out = output.words_mut();
        if self.clear_output {
            out.fill(0);
        }
        // At most three inputs: a fixed array of slices, no allocation.
        let mut bufs: [&[u32]; 3] = [&[]; 3];
        if self.scratch.is_empty() {
            for (b, f) in bufs.iter_mut().zip(inputs) {
                *b = f.words();
            }
            self.inst.update2(time, &bufs[..self.inputs], out);
        } else {
            for (s, f) in self.scratch.iter_mut().zip(inputs) {
                swap_rb_into(f.words(), s);
            }
            for (b, s) in bufs.iter_mut().zip(&self.scratch) {
                *b = s;
            }
            self.inst.update2(time, &bufs[..self.inputs], out);
            swap_rb_in_place(out);
        }
        Ok(())
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> framepipe_core::Result<()> {
        set_instance_property(&self.name, &mut self.inst, name, value)
    }
}

/// A frei0r source plugin as a framepipe source (extra properties: width, height, frames, rate).
pub struct Frei0rSource {
    name: String,
    plugin: Arc<Plugin>,
    /// Every property with its value at build: what `set` reaches (the plugin's parameters;
    /// the size, rate, frames and isolation are listed, not live).
    live: Vec<(PropSpec, PropValue)>,
    inst: SourceRunner,
    info: VideoInfo,
    frames: u64,
    bgra: bool,
    origin: LoopOrigin,
}

/// Where a source's plugin runs.
enum SourceRunner {
    /// In this process.
    Local(Instance),
    /// In a child process ([`crate::isolate`]).
    Isolated(Box<Isolated>),
}

/// Extra properties every frei0r source gets.
pub(crate) fn source_specs() -> Vec<PropSpec> {
    vec![
        PropSpec::new(
            "width",
            PropKind::Int { min: 8, max: 16384 },
            PropValue::Int(640),
            "frame width (a multiple of 8)",
        )
        .fixed(),
        PropSpec::new(
            "height",
            PropKind::Int { min: 8, max: 16384 },
            PropValue::Int(480),
            "frame height (a multiple of 8)",
        )
        .fixed(),
        PropSpec::new(
            "frames",
            PropKind::Int {
                min: 0,
                max: i64::MAX,
            },
            PropValue::Int(0),
            "number of frames to produce (0, the default: endless, like testsrc)",
        )
        .fixed(),
        PropSpec::new(
            "rate",
            PropKind::Str,
            PropValue::Str("25".into()),
            "frame rate: 25, 30000/1001, 29.97",
        )
        .fixed(),
    ]
}

/// The property name of a source plugin's parameter: its own, or `param-<name>` when that
/// clashes with one of the extra source properties.
pub(crate) fn source_prop_name(param: &Param) -> String {
    if ["width", "height", "frames", "rate"].contains(&param.prop_name.as_str()) {
        format!("param-{}", param.prop_name)
    } else {
        param.prop_name.clone()
    }
}

impl Frei0rSource {
    pub(crate) fn build(
        name: &str,
        plugin: &Arc<Plugin>,
        defaults: &[ParamValue],
        specs: &[PropSpec],
        props: &Props,
        isolation: Option<Settings>,
    ) -> framepipe_core::Result<Self> {
        let live = specs
            .iter()
            .map(|s| {
                let v = props.get(&s.name).cloned().unwrap_or(s.default.clone());
                (s.clone(), v)
            })
            .collect();
        let width = props.i64("width") as u32;
        let height = props.i64("height") as u32;
        check_size(name, width, height)?;
        // The plugin allocates its own frame-sized buffers in `Instance::new`, below.
        framepipe_core::Limits::current().check_frame(name, width, height)?;
        let rate_text = props.str("rate");
        let rate = Rational::parse(rate_text).ok_or_else(|| Error::BadValue {
            element: name.to_string(),
            prop: "rate".into(),
            value: rate_text.to_string(),
            reason: "expected a frame rate like 25, 30000/1001 or 29.97".into(),
        })?;
        let params = params_to_set(plugin, defaults, props, source_prop_name)
            .map_err(|e| Error::element(name, e))?;
        let inst = match isolation {
            Some(settings) => SourceRunner::Isolated(Box::new(isolated(
                name,
                plugin,
                (width, height),
                0,
                false,
                settings,
                &params,
            )?)),
            None => {
                let mut inst =
                    Instance::new(plugin, width, height).map_err(|e| Error::element(name, e))?;
                for (idx, v) in params {
                    inst.set_param(idx, &v)
                        .map_err(|e| Error::element(name, e))?;
                }
                SourceRunner::Local(inst)
            }
        };
        Ok(Frei0rSource {
            name: name.to_string(),
            plugin: Arc::clone(plugin),
            live,
            inst,
            info: VideoInfo {
                width,
                height,
                rate,
            },
            frames: props.i64("frames").max(0) as u64,
            bgra: plugin.info().color_model == ColorModel::Bgra8888,
            origin: LoopOrigin::default(),
        })
    }
}

impl Source for Frei0rSource {
    fn info(&self) -> VideoInfo {
        self.info
    }

    fn len_hint(&self) -> Option<u64> {
        (self.frames > 0).then_some(self.frames)
    }

    fn live_props(&self) -> Vec<(PropSpec, PropValue)> {
        self.live.clone()
    }

    /// A parameter of the plugin (by its property name: `param-NAME` where it clashes with
    /// `width`, `height`, `frames` or `rate`), in the running instance or child.
    fn set_property(&mut self, name: &str, value: &PropValue) -> framepipe_core::Result<()> {
        let param = self
            .plugin
            .params()
            .iter()
            .find(|p| source_prop_name(p) == name)
            .ok_or_else(|| {
                Error::Pipeline(format!(
                    "property '{name}' of {} cannot be changed while running",
                    self.name
                ))
            })?;
        let v = to_param(param, value).map_err(|e| Error::element(&self.name, e))?;
        match &mut self.inst {
            SourceRunner::Local(inst) => inst
                .set_param(param.index, &v)
                .map_err(|e| Error::element(&self.name, e))?,
            SourceRunner::Isolated(runner) => runner.set_param(param.index, v),
        }
        Ok(())
    }

    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> framepipe_core::Result<bool> {
        let local = self.origin.local(ctx);
        if self.frames > 0 && local.seq >= self.frames {
            return Ok(false);
        }
        match &mut self.inst {
            SourceRunner::Local(inst) => {
                let out = frame.words_mut();
                inst.update(frei0r_time(&local), None, out);
                if self.bgra {
                    swap_rb_in_place(out);
                }
            }
            SourceRunner::Isolated(runner) => runner.run(ctx.seq, frei0r_time(&local), &[], frame),
        }
        Ok(true)
    }

    /// Starts again from the first frame: the `frames` limit and the `time` given to the plugin
    /// count from the loop point, so a plugin that draws from its parameters and the time
    /// (test_pat_*, lissajous0r, onecol0r, nois0r) gives its first frames again. The plugin
    /// instance is kept: one that keeps its own state from frame to frame (plasma, ising0r,
    /// partik0l, which also differ from one instance to the next) goes on from where it was.
    fn rewind(&mut self) -> framepipe_core::Result<bool> {
        self.origin.rewind();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_exchanges_red_and_blue_only() {
        let src = [
            u32::from_ne_bytes([1, 2, 3, 4]),
            u32::from_ne_bytes([9, 8, 7, 6]),
        ];
        let mut dst = [0u32; 2];
        swap_rb_into(&src, &mut dst);
        assert_eq!(dst[0].to_ne_bytes(), [3, 2, 1, 4]);
        assert_eq!(dst[1].to_ne_bytes(), [7, 8, 9, 6]);
        swap_rb_in_place(&mut dst);
        assert_eq!(dst, src);
    }

    #[test]
    fn frame_time_is_milliseconds() {
        let ctx = FrameCtx::new(3, 120_000_000);
        assert_eq!(frei0r_time(&ctx), 120.0);
    }

    /// Issue #7: a NaN reached a frei0r plugin and crashed the process. Whatever the caller
    /// checked, `to_param` refuses values that are not finite, so the plugin never sees one.
    #[test]
    fn values_that_are_not_finite_never_become_parameters() {
        let param = |kind| Param {
            index: 0,
            name: "Blur".into(),
            prop_name: "blur".into(),
            kind,
            explanation: String::new(),
        };
        let double = param(ParamKind::Double);
        for v in [
            PropValue::Float(f64::NAN),
            PropValue::Float(f64::INFINITY),
            PropValue::Float(f64::NEG_INFINITY),
            PropValue::Str("nan".into()),
            PropValue::Str("inf".into()),
            PropValue::Str("1e999".into()),
        ] {
            let e = to_param(&double, &v).unwrap_err().to_string();
            assert!(e.contains("'blur'"), "{v:?}: {e}");
        }
        assert_eq!(
            to_param(&double, &PropValue::Float(0.25)).unwrap(),
            ParamValue::Double(0.25)
        );
        assert!(to_param(&param(ParamKind::Bool), &PropValue::Float(f64::NAN)).is_err());
        assert!(to_param(
            &param(ParamKind::Color),
            &PropValue::Color([0.0, f32::NAN, 0.0])
        )
        .is_err());
        assert!(to_param(
            &param(ParamKind::Position),
            &PropValue::Position([f64::INFINITY, 0.0])
        )
        .is_err());
    }
}
