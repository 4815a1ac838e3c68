//! [`IsfNode`]: one running ISF shader on the GPU executor's thread.
//!
//! Per frame ([`GpuNode::render`]): the uniforms are set once (`TIME` from the frame's own
//! timestamp, `TIMEDELTA` the show's period, 0 on frame 0, `FRAMEINDEX` its sequence number,
//! `DATE` the wall clock when the node started plus `TIME`, in UTC, and every input's value),
//! every image is bound to a texture unit with a bilinear, clamped sampler, and each pass is
//! drawn as a quad covering its target: a buffer's texture (its `WIDTH`/`HEIGHT` evaluated
//! with the inputs' current values) or, for a pass without `TARGET`, the output. When the
//! last pass renders into a buffer, that buffer is copied (scaled bilinearly) to the output,
//! as the ISF hosts show the last pass.
//!
//! Buffers: each has two textures; a pass renders into the back one while the GLSL reads the
//! front one (the previous frame's, or an earlier pass's of this frame), then they swap, so
//! a pass may read its own target (feedback) without reading and writing one texture. A
//! `PERSISTENT` buffer keeps its front texture from frame to frame (the node is then
//! [`Mode::Serial`](framepipe_core::Mode)); another is cleared to transparent black when the
//! frame begins. `FLOAT` buffers are RGBA32F.
//!
//! Audio inputs (issue #25): an `audio` input is an image one row high whose columns are the
//! latest samples of the show's audio (`0.5 + 0.5·sample`), an `audioFFT` input one whose
//! columns are FFT magnitudes from 0 Hz up to half the sample rate (a sine of amplitude `a`
//! reads `a` in its column), as wide as the input's `MAX` (512 when not given): the last
//! `MAX` samples of the frame's window, or its bins grouped `n/MAX` to a column (the largest
//! of each group); a smaller source is stretched. Values are in R, G and B (A is 1), RGBA32F.
//! The frame's arrays come in [`GpuCtx::audio`]; without audio an input stays silent (0.5,
//! or 0 for the FFT).
//!
//! GL objects are made on the first render and freed in [`GpuNode::release`]; in steady state
//! a frame allocates nothing and never waits on the GPU.

use std::sync::Arc;

use glow::HasContext;

use framepipe_core::{Error, GpuCtx, GpuImage, GpuNode, PropValue, Result, TexFormat};
use framepipe_isf::InputKind;

use super::gl::{self, Quad};
use super::inputs::{Value, Values};
use super::loaded::Loaded;
use super::reload::{Reload, Watcher};

/// Width of the silent texture an `audio`/`audioFFT` input reads when its `MAX` is not given.
const AUDIO_SAMPLES: u32 = 512;

/// Where an image uniform's texture comes from.
#[derive(Debug, Clone, Copy)]
enum ImageSrc {
    /// The node's `i`-th frame input.
    Frame(usize),
    /// The `i`-th imported image.
    Imported(usize),
    /// The `i`-th audio input's texture.
    Audio(usize),
    /// The `i`-th buffer's front texture.
    Buffer(usize),
}

/// An image's uniforms and texture unit.
#[derive(Debug)]
struct ImageUniform {
    src: ImageSrc,
    unit: u32,
    sampler: Option<glow::UniformLocation>,
    size: Option<glow::UniformLocation>,
    rect: Option<glow::UniformLocation>,
}

/// A pass buffer's textures.
#[derive(Debug)]
struct BufTex {
    front: glow::Texture,
    back: glow::Texture,
    width: u32,
    height: u32,
    format: TexFormat,
    persistent: bool,
}

/// An `audio` / `audioFFT` input's texture (`width` x 1, RGBA32F) and its staging row.
#[derive(Debug)]
struct AudioTex {
    tex: glow::Texture,
    width: u32,
    /// `audioFFT` (else `audio`).
    fft: bool,
    /// One row of RGBA texels, refilled per frame.
    row: Vec<f32>,
    /// Whether the texture holds audio (else silence).
    fed: bool,
}

impl AudioTex {
    /// Fills the row from the frame's arrays (silence when they are empty); no allocation.
    fn fill(&mut self, audio: &framepipe_core::FrameAudio<'_>) {
        let src = if self.fft { audio.fft } else { audio.wave };
        let w = self.width as usize;
        let n = src.len();
        for (j, px) in self.row.chunks_exact_mut(4).enumerate() {
            let v = if n == 0 {
                0.0
            } else if self.fft {
                if n >= w {
                    // Bins [j·n/w, (j+1)·n/w): their largest, so a sine keeps its amplitude.
                    let (a, b) = (j * n / w, ((j + 1) * n / w).max(j * n / w + 1));
                    src[a..b.min(n)].iter().fold(0.0f32, |m, &x| m.max(x))
                } else {
                    src[(j * n / w).min(n - 1)]
                }
            } else if n >= w {
                src[n - w + j]
            } else {
                src[(j * n / w).min(n - 1)]
            };
            let v = if self.fft {
                v.clamp(0.0, 1.0)
            } else {
                (0.5 + 0.5 * v).clamp(0.0, 1.0)
            };
            let v = if v.is_finite() { v } else { 0.0 };
            px.copy_from_slice(&[v, v, v, 1.0]);
        }
    }

    /// Uploads the row (the texture is `width` x 1 RGBA32F).
    fn upload(&self, gl: &glow::Context) {
        // SAFETY: the context is current; the texture is this node's, `width` x 1 RGBA32F, and
        // `row` holds exactly `width` RGBA float texels.
        unsafe {
            gl.bind_texture(glow::TEXTURE_2D, Some(self.tex));
            gl.tex_sub_image_2d(
                glow::TEXTURE_2D,
                0,
                0,
                0,
                self.width as i32,
                1,
                glow::RGBA,
                glow::FLOAT,
                glow::PixelUnpackData::Slice(Some(bytemuck_f32(&self.row))),
            );
            gl.bind_texture(glow::TEXTURE_2D, None);
        }
    }
}

/// A float slice's bytes.
fn bytemuck_f32(v: &[f32]) -> &[u8] {
    // SAFETY: any f32 is 4 valid bytes; the slice covers exactly the floats' memory and
    // lives as long as `v`; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Every GL object of a node, made on its first render.
#[derive(Debug)]
struct Gl {
    program: glow::Program,
    quad: Quad,
    fbo: glow::Framebuffer,
    /// The output, when the last pass renders into a buffer that is then copied to it.
    fbo_out: glow::Framebuffer,
    sampler: glow::Sampler,
    passindex: Option<glow::UniformLocation>,
    rendersize: Option<glow::UniformLocation>,
    time: Option<glow::UniformLocation>,
    timedelta: Option<glow::UniformLocation>,
    date: Option<glow::UniformLocation>,
    frameindex: Option<glow::UniformLocation>,
    /// One per [`Values::slots`] entry.
    inputs: Vec<Option<glow::UniformLocation>>,
    images: Vec<ImageUniform>,
    buffers: Vec<BufTex>,
    imported: Vec<(glow::Texture, u32, u32)>,
    audio: Vec<AudioTex>,
    /// Where each pass renders: a buffer's index, or the output.
    targets: Vec<Option<usize>>,
}

/// A running ISF shader.
pub struct IsfNode {
    element: String,
    loaded: Arc<Loaded>,
    values: Values,
    gl: Option<Gl>,
    /// The wall clock (seconds since the Unix epoch, UTC) when the node was made: `DATE`.
    date_origin: f64,
    reload: Option<Watcher>,
    /// Why the last reload was refused, until one succeeds.
    last_reload_error: Option<String>,
    /// A refused reload not yet taken by the executor ([`GpuNode::take_message`]).
    message: Option<String>,
}

impl std::fmt::Debug for IsfNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IsfNode")
            .field("element", &self.element)
            .field("file", &self.loaded.path)
            .finish()
    }
}

impl IsfNode {
    /// A node of `loaded` with these input values; `reload` watches its file.
    pub fn new(
        element: &str,
        loaded: Arc<Loaded>,
        values: Values,
        reload: Option<Watcher>,
    ) -> IsfNode {
        let date_origin = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        IsfNode {
            element: element.to_string(),
            loaded,
            values,
            gl: None,
            date_origin,
            reload,
            last_reload_error: None,
            message: None,
        }
    }

    /// Why the last reload of its file was refused (the previous shader goes on), if it was.
    pub fn last_reload_error(&self) -> Option<&str> {
        self.last_reload_error.as_deref()
    }

    /// The shader it runs now.
    pub fn loaded(&self) -> &Arc<Loaded> {
        &self.loaded
    }

    fn fail(&self, message: String) -> Error {
        Error::element(self.element.clone(), message)
    }

    /// Takes a reloaded file if the watcher has one: compiled here (the watcher compiled it
    /// once in a context of its own), the old GL objects freed, the values kept by name.
    fn take_reload(&mut self, gl: &glow::Context) {
        let Some(w) = &self.reload else { return };
        match w.poll() {
            None => {}
            Some(Reload::Failed(why)) => {
                self.message = Some(format!(
                    "{} changed but is refused; the previous shader goes on: {why}",
                    self.loaded.path.display()
                ));
                self.last_reload_error = Some(why);
            }
            Some(Reload::Loaded(next)) => {
                let mut values = Values::defaults(&next.shader, super::OWN_PROPS);
                values.keep_from(&self.values);
                match make_gl(gl, &next, &values) {
                    Ok(state) => {
                        if let Some(old) = self.gl.replace(state) {
                            free(gl, old);
                        }
                        // Inputs the file gained run at their defaults: the show's properties
                        // are fixed for its graph version (its parameter tables, per-frame
                        // snapshots and published controls are sized when it is built), so
                        // only a version built anew (a live edit) makes them properties.
                        let added: Vec<&str> = values
                            .slots
                            .iter()
                            .filter(|s| !self.values.slots.iter().any(|o| o.name == s.name))
                            .map(|s| s.prop.as_str())
                            .collect();
                        if !added.is_empty() {
                            let replace = if self.element == "isf" {
                                format!("replace NODE isf location={}", next.path.display())
                            } else {
                                format!("replace NODE {}", self.element)
                            };
                            self.message = Some(format!(
                                "{} reloaded with new inputs ({}): they run at their defaults \
                                 and are not properties of the running show; replace the node \
                                 ({replace}) to make them properties",
                                next.path.display(),
                                added.join(", "),
                            ));
                        }
                        self.loaded = next;
                        self.values = values;
                        self.last_reload_error = None;
                    }
                    Err(why) => {
                        self.message = Some(format!(
                            "{} changed but the new shader cannot run; the previous one goes on: {why}",
                            next.path.display()
                        ));
                        self.last_reload_error = Some(why);
                    }
                }
            }
        }
    }
}

/// Makes a node's GL objects for `loaded`.
fn make_gl(
    gl: &glow::Context,
    loaded: &Loaded,
    values: &Values,
) -> std::result::Result<Gl, String> {
    let program = gl::compile(gl, &loaded.source)?;
    let shader = &loaded.shader;
    let loc = |name: &str| {
        // SAFETY: `program` is a linked program of this context.
        unsafe { gl.get_uniform_location(program, name) }
    };
    let mut images = Vec::new();
    let mut unit = 0u32;
    let mut image = |name: &str, src: ImageSrc, images: &mut Vec<ImageUniform>| {
        images.push(ImageUniform {
            src,
            unit,
            sampler: loc(name),
            size: loc(&format!("_{name}_imgSize")),
            rect: loc(&format!("_{name}_imgRect")),
        });
        unit += 1;
    };
    for (i, input) in shader.frame_inputs().iter().enumerate() {
        image(&input.name, ImageSrc::Frame(i), &mut images);
    }
    let mut audio = Vec::new();
    for input in &shader.inputs {
        let (samples, fft) = match input.kind {
            InputKind::Audio { samples } => (samples, false),
            InputKind::AudioFft { samples } => (samples, true),
            _ => continue,
        };
        let w = samples.unwrap_or(AUDIO_SAMPLES).clamp(1, 16384);
        let tex = gl::texture(gl, w, 1, TexFormat::Rgba32F, None)?;
        image(&input.name, ImageSrc::Audio(audio.len()), &mut images);
        let mut a = AudioTex {
            tex,
            width: w,
            fft,
            row: vec![0.0; w as usize * 4],
            fed: false,
        };
        a.fill(&framepipe_core::FrameAudio::default());
        a.upload(gl);
        audio.push(a);
    }
    let mut imported = Vec::new();
    for (i, m) in loaded.images.iter().enumerate() {
        let p = &m.picture;
        let t = gl::texture(gl, p.width, p.height, TexFormat::Rgba8, Some(&p.rgba))?;
        imported.push((t, p.width, p.height));
        image(&m.name, ImageSrc::Imported(i), &mut images);
    }
    for (i, b) in shader.buffers.iter().enumerate() {
        image(&b.name, ImageSrc::Buffer(i), &mut images);
    }
    // SAFETY: the context is current; plain queries and object creation.
    let (max_units, fbo, fbo_out) = unsafe {
        (
            gl.get_parameter_i32(glow::MAX_TEXTURE_IMAGE_UNITS),
            gl.create_framebuffer()?,
            gl.create_framebuffer()?,
        )
    };
    let used = images.iter().filter(|i| i.sampler.is_some()).count();
    if unit as i32 > max_units {
        // SAFETY: objects made above, not used after this.
        unsafe {
            gl.delete_framebuffer(fbo);
            gl.delete_framebuffer(fbo_out);
            gl.delete_program(program);
        }
        return Err(format!(
            "{}: {} images (inputs, imported images and pass buffers; {used} read by the GLSL), \
             but this GPU has {max_units} texture units",
            loaded.source.fragment_file, unit
        ));
    }
    let state = Gl {
        passindex: loc("PASSINDEX"),
        rendersize: loc("RENDERSIZE"),
        time: loc("TIME"),
        timedelta: loc("TIMEDELTA"),
        date: loc("DATE"),
        frameindex: loc("FRAMEINDEX"),
        inputs: values.slots.iter().map(|s| loc(&s.name)).collect(),
        images,
        buffers: Vec::with_capacity(shader.buffers.len()),
        imported,
        audio,
        targets: shader
            .passes
            .iter()
            .map(|p| {
                p.target
                    .as_ref()
                    .and_then(|t| shader.buffers.iter().position(|b| &b.name == t))
            })
            .collect(),
        quad: Quad::new(gl)?,
        sampler: gl::linear_sampler(gl)?,
        fbo,
        fbo_out,
        program,
    };
    Ok(state)
}

/// Frees every object of `state`.
fn free(gl: &glow::Context, state: Gl) {
    // SAFETY: every object is this node's, made on this context, and not used after this.
    unsafe {
        gl.delete_program(state.program);
        gl.delete_framebuffer(state.fbo);
        gl.delete_framebuffer(state.fbo_out);
        gl.delete_sampler(state.sampler);
    }
    state.quad.delete(gl);
    for b in state.buffers {
        gl::delete_texture(gl, b.front);
        gl::delete_texture(gl, b.back);
    }
    for (t, ..) in state.imported {
        gl::delete_texture(gl, t);
    }
    for a in state.audio {
        gl::delete_texture(gl, a.tex);
    }
}

/// `DATE`: year, month (1..12), day (1..31), seconds since midnight, of `secs` after the Unix
/// epoch (UTC; days to the civil date as in Howard Hinnant's `civil_from_days`).
pub fn date(secs: f64) -> [f32; 4] {
    let days = (secs / 86_400.0).floor();
    let in_day = secs - days * 86_400.0;
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    [year as f32, month as f32, day as f32, in_day as f32]
}

impl Gl {
    /// Makes or remakes the buffers whose size (from the render's size and the inputs'
    /// values) or format changed; a new buffer is transparent black.
    fn size_buffers(
        &mut self,
        gl: &glow::Context,
        loaded: &Loaded,
        values: &Values,
        render: (u32, u32),
    ) -> std::result::Result<(), String> {
        for (i, b) in loaded.shader.buffers.iter().enumerate() {
            let (w, h) = b.size(render, &|n| values.number(n));
            let format = if b.float {
                TexFormat::Rgba32F
            } else {
                TexFormat::Rgba8
            };
            if let Some(t) = self.buffers.get(i) {
                if (t.width, t.height, t.format) == (w, h, format) {
                    continue;
                }
            }
            let front = gl::texture(gl, w, h, format, None)?;
            let back = gl::texture(gl, w, h, format, None)?;
            let new = BufTex {
                front,
                back,
                width: w,
                height: h,
                format,
                persistent: b.persistent,
            };
            // SAFETY: the framebuffer is this node's; the texture is complete (its one level
            // was given above); the check is a query.
            let status = unsafe {
                gl.bind_framebuffer(glow::FRAMEBUFFER, Some(self.fbo));
                gl.framebuffer_texture_2d(
                    glow::FRAMEBUFFER,
                    glow::COLOR_ATTACHMENT0,
                    glow::TEXTURE_2D,
                    Some(new.back),
                    0,
                );
                gl.check_framebuffer_status(glow::FRAMEBUFFER)
            };
            if status != glow::FRAMEBUFFER_COMPLETE {
                gl::delete_texture(gl, new.front);
                gl::delete_texture(gl, new.back);
                return Err(format!(
                    "{}: the buffer {:?} ({w}x{h}, {format:?}) cannot be rendered into on this GPU \
                     (framebuffer status 0x{status:x})",
                    loaded.source.fragment_file, b.name
                ));
            }
            if i < self.buffers.len() {
                let old = std::mem::replace(&mut self.buffers[i], new);
                gl::delete_texture(gl, old.front);
                gl::delete_texture(gl, old.back);
            } else {
                self.buffers.push(new);
            }
        }
        Ok(())
    }

    /// Binds image `img`'s texture to its unit and sets its size uniforms.
    fn bind_image(&self, gl: &glow::Context, img: &ImageUniform, inputs: &[GpuImage]) {
        let (tex, w, h) = match img.src {
            ImageSrc::Frame(i) => match inputs.get(i) {
                Some(g) => (g.texture, g.width, g.height),
                None => return,
            },
            ImageSrc::Imported(i) => self.imported[i],
            ImageSrc::Audio(i) => (self.audio[i].tex, self.audio[i].width, 1),
            ImageSrc::Buffer(i) => {
                let b = &self.buffers[i];
                (b.front, b.width, b.height)
            }
        };
        // SAFETY: the program is in use; the texture is alive for this call (an input's for
        // the render call, the others this node's); the unit is below the limit checked when
        // the program was made.
        unsafe {
            gl.active_texture(glow::TEXTURE0 + img.unit);
            gl.bind_texture(glow::TEXTURE_2D, Some(tex));
            gl.bind_sampler(img.unit, Some(self.sampler));
            gl.uniform_1_i32(img.sampler.as_ref(), img.unit as i32);
            gl.uniform_2_f32(img.size.as_ref(), w as f32, h as f32);
            gl.uniform_4_f32(img.rect.as_ref(), 0.0, 0.0, w as f32, h as f32);
        }
    }
}

impl GpuNode for IsfNode {
    fn render(&mut self, gpu: &GpuCtx<'_>, inputs: &[GpuImage], output: &GpuImage) -> Result<()> {
        let gl = gpu.gl;
        self.take_reload(gl);
        if self.gl.is_none() {
            let state = make_gl(gl, &self.loaded, &self.values).map_err(|e| self.fail(e))?;
            self.gl = Some(state);
        }
        let render = (output.width, output.height);
        let Some(st) = self.gl.as_mut() else {
            return Ok(());
        };
        st.size_buffers(gl, &self.loaded, &self.values, render)
            .map_err(|e| Error::element(self.element.clone(), e))?;
        let present = gpu.audio.is_present();
        for a in &mut st.audio {
            // Every frame with audio; once when it goes silent.
            if present || a.fed {
                a.fill(&gpu.audio);
                a.upload(gl);
                a.fed = present;
            }
        }
        let st = &*st;
        let frame = gpu.frame;
        let time = frame.pts_ns as f64 / 1e9;
        let delta = if frame.seq == 0 {
            0.0
        } else {
            gpu.period_ns as f64 / 1e9
        };
        let date = date(self.date_origin + time);
        // SAFETY: the context is current on this (the GPU executor's) thread; every object
        // used is this node's or the call's; the state changed here is put back at the end.
        unsafe {
            gl.disable(glow::BLEND);
            gl.disable(glow::DEPTH_TEST);
            gl.disable(glow::SCISSOR_TEST);
            gl.disable(glow::CULL_FACE);
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(st.fbo));
            gl.clear_color(0.0, 0.0, 0.0, 0.0);
            for b in st.buffers.iter().filter(|b| !b.persistent) {
                gl.framebuffer_texture_2d(
                    glow::FRAMEBUFFER,
                    glow::COLOR_ATTACHMENT0,
                    glow::TEXTURE_2D,
                    Some(b.front),
                    0,
                );
                gl.viewport(0, 0, b.width as i32, b.height as i32);
                gl.clear(glow::COLOR_BUFFER_BIT);
            }
            gl.use_program(Some(st.program));
            st.quad.bind(gl);
            gl.uniform_1_f32(st.time.as_ref(), time as f32);
            gl.uniform_1_f32(st.timedelta.as_ref(), delta as f32);
            gl.uniform_1_i32(
                st.frameindex.as_ref(),
                frame.seq.min(i32::MAX as u64) as i32,
            );
            gl.uniform_4_f32(st.date.as_ref(), date[0], date[1], date[2], date[3]);
            for (slot, loc) in self.values.slots.iter().zip(&st.inputs) {
                let loc = loc.as_ref();
                match slot.value {
                    Value::Bool(b) => gl.uniform_1_i32(loc, b as i32),
                    Value::Int(i) => gl.uniform_1_i32(loc, i),
                    Value::Float(f) => gl.uniform_1_f32(loc, f),
                    Value::Vec2([x, y]) => gl.uniform_2_f32(loc, x, y),
                    Value::Vec4([r, g, b, a]) => gl.uniform_4_f32(loc, r, g, b, a),
                }
            }
        }
        for img in &st.images {
            st.bind_image(gl, img, inputs);
        }
        // The buffers swap as passes render; `st` is re-borrowed mutably for that.
        let st = self.gl.as_mut().expect("made above");
        for pass in 0..st.targets.len() {
            let target = st.targets[pass];
            let (tex, w, h) = match target {
                Some(b) => {
                    let b = &st.buffers[b];
                    (b.back, b.width, b.height)
                }
                None => (output.texture, output.width, output.height),
            };
            // SAFETY: as above; `tex` is the output (the call's) or this node's back buffer,
            // which no unit reads (units read front textures).
            unsafe {
                gl.framebuffer_texture_2d(
                    glow::FRAMEBUFFER,
                    glow::COLOR_ATTACHMENT0,
                    glow::TEXTURE_2D,
                    Some(tex),
                    0,
                );
                gl.viewport(0, 0, w as i32, h as i32);
                gl.uniform_1_i32(st.passindex.as_ref(), pass as i32);
                gl.uniform_2_f32(st.rendersize.as_ref(), w as f32, h as f32);
            }
            st.quad.draw(gl);
            if let Some(b) = target {
                let buf = &mut st.buffers[b];
                std::mem::swap(&mut buf.front, &mut buf.back);
                if let Some(img) = st
                    .images
                    .iter()
                    .find(|i| matches!(i.src, ImageSrc::Buffer(j) if j == b))
                {
                    st.bind_image(gl, img, inputs);
                }
            }
        }
        // A last pass into a buffer: that buffer is the output (as the ISF hosts do).
        if let Some(&Some(b)) = st.targets.last() {
            let b = &st.buffers[b];
            let filter = if (b.width, b.height) == (output.width, output.height) {
                glow::NEAREST
            } else {
                glow::LINEAR
            };
            // SAFETY: both framebuffers are this node's; the buffer's front texture is its
            // own and the output the call's, of the sizes given; colour blits between
            // normalized and float formats are allowed.
            unsafe {
                gl.bind_framebuffer(glow::READ_FRAMEBUFFER, Some(st.fbo));
                gl.framebuffer_texture_2d(
                    glow::READ_FRAMEBUFFER,
                    glow::COLOR_ATTACHMENT0,
                    glow::TEXTURE_2D,
                    Some(b.front),
                    0,
                );
                gl.bind_framebuffer(glow::DRAW_FRAMEBUFFER, Some(st.fbo_out));
                gl.framebuffer_texture_2d(
                    glow::DRAW_FRAMEBUFFER,
                    glow::COLOR_ATTACHMENT0,
                    glow::TEXTURE_2D,
                    Some(output.texture),
                    0,
                );
                gl.blit_framebuffer(
                    0,
                    0,
                    b.width as i32,
                    b.height as i32,
                    0,
                    0,
                    output.width as i32,
                    output.height as i32,
                    glow::COLOR_BUFFER_BIT,
                    filter,
                );
                gl.framebuffer_texture_2d(
                    glow::DRAW_FRAMEBUFFER,
                    glow::COLOR_ATTACHMENT0,
                    glow::TEXTURE_2D,
                    None,
                    0,
                );
                gl.bind_framebuffer(glow::FRAMEBUFFER, Some(st.fbo));
            }
        }
        // SAFETY: puts back the state the executor gave: its empty vertex array, no program,
        // framebuffer, sampler or texture bound on the units used, unit 0 active.
        unsafe {
            for img in &st.images {
                gl.active_texture(glow::TEXTURE0 + img.unit);
                gl.bind_texture(glow::TEXTURE_2D, None);
                gl.bind_sampler(img.unit, None);
            }
            gl.active_texture(glow::TEXTURE0);
            gl.framebuffer_texture_2d(
                glow::FRAMEBUFFER,
                glow::COLOR_ATTACHMENT0,
                glow::TEXTURE_2D,
                None,
                0,
            );
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            gl.use_program(None);
            gl.bind_vertex_array(Some(gpu.empty_vao));
        }
        self.values.frame_done();
        Ok(())
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        if self.values.set(&self.element, name, value)? {
            Ok(())
        } else {
            Err(Error::Pipeline(format!(
                "property '{name}' of {} cannot be changed while running",
                self.element
            )))
        }
    }

    fn take_message(&mut self) -> Option<String> {
        self.message.take()
    }

    fn release(&mut self, gl: &glow::Context) {
        if let Some(state) = self.gl.take() {
            free(gl, state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::date;

    #[test]
    fn date_is_the_civil_utc_date_and_seconds_of_day() {
        // 2024-02-29 12:00:30 UTC
        assert_eq!(date(1_709_208_030.0), [2024.0, 2.0, 29.0, 43_230.0]);
        assert_eq!(date(0.0), [1970.0, 1.0, 1.0, 0.0]);
    }
}
