//! What `framepipe doctor` says about the GPU: which renderer a show would use and what its
//! CPU↔GPU edges and one shader pass cost there, measured on the spot.
//!
//! [`probe`] opens a context (on the calling thread), then times, at each size asked:
//! * an upload ([`Uploader::upload`]) followed by a wait for the GPU (`glFinish`), so the
//!   figure is the whole move into the texture, not just the CPU's share;
//! * a download: [`Downloader::start`], polling [`Downloader::ready`], then
//!   [`Downloader::finish`] (start to pixels in a CPU frame); and how long `start` itself held
//!   the calling thread, which is what a GPU thread pays per download;
//! * one full-screen pass of a trivial shader at 1920x1080 ([`FullScreenPass`]), `glFinish`ed.
//!
//! Each figure is the median of several runs after one warm-up.

use std::time::{Duration, Instant};

use framepipe_core::gpu::{GpuImage, TexFormat};
use framepipe_core::FramePool;
use glow::HasContext;

use crate::context::{Api, Gpu, GpuInfo};
use crate::error::{GpuError, Result};
use crate::texture::TexturePool;
use crate::transfer::{Downloader, Uploader};

/// A fragment shader drawn over a whole texture: a triangle that covers it, from `gl_VertexID`
/// with the context's empty vertex array. For probes, benchmarks and tests.
#[derive(Debug)]
pub struct FullScreenPass {
    program: glow::Program,
}

/// The vertex shader of [`FullScreenPass`] (after the `#version` line).
const VERTEX: &str = "
out vec2 uv;
void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    uv = p;
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
";

/// A trivial fragment shader: a gradient, one multiply-add per channel.
pub const TRIVIAL_FRAGMENT: &str = "
in vec2 uv;
out vec4 color;
void main() { color = vec4(uv, 0.5, 1.0); }
";

impl FullScreenPass {
    /// Compiles `fragment` (GLSL without a `#version` line: the context's is prepended, with
    /// a default precision on GLES). It reads `in vec2 uv` (0..1) and writes `out vec4`.
    pub fn new(gpu: &Gpu, fragment: &str) -> Result<FullScreenPass> {
        let header = match gpu.info().api {
            Api::Gl => "#version 330 core\n",
            Api::Gles => "#version 300 es\nprecision highp float;\nprecision highp int;\n",
        };
        let gl = gpu.gl();
        let fail = |what: &'static str, detail: String| GpuError::Gl { what, detail };
        // SAFETY: the context is current on this thread; the objects are new and this
        // function's until it returns the program (the shaders are deleted once linked).
        unsafe {
            let program = gl
                .create_program()
                .map_err(|e| fail("glCreateProgram", e))?;
            let mut shaders = Vec::new();
            for (kind, body) in [
                (glow::VERTEX_SHADER, VERTEX),
                (glow::FRAGMENT_SHADER, fragment),
            ] {
                let shader = gl
                    .create_shader(kind)
                    .map_err(|e| fail("glCreateShader", e))?;
                gl.shader_source(shader, &format!("{header}{body}"));
                gl.compile_shader(shader);
                if !gl.get_shader_compile_status(shader) {
                    let log = gl.get_shader_info_log(shader);
                    gl.delete_shader(shader);
                    for s in shaders {
                        gl.delete_shader(s);
                    }
                    gl.delete_program(program);
                    return Err(fail("compiling a shader", log));
                }
                gl.attach_shader(program, shader);
                shaders.push(shader);
            }
            gl.link_program(program);
            let linked = gl.get_program_link_status(program);
            for s in shaders {
                gl.detach_shader(program, s);
                gl.delete_shader(s);
            }
            if !linked {
                let log = gl.get_program_info_log(program);
                gl.delete_program(program);
                return Err(fail("linking a program", log));
            }
            Ok(FullScreenPass { program })
        }
    }

    /// Draws the pass into `target` (a renderable texture of this context). Queues the work
    /// and returns; nothing waits for the GPU.
    pub fn draw(&self, gpu: &Gpu, target: &GpuImage) -> Result<()> {
        gpu.bind_scratch(glow::DRAW_FRAMEBUFFER, target)?;
        let gl = gpu.gl();
        // SAFETY: the context is current; the program is this context's and linked; the
        // scratch framebuffer is complete with `target`; the empty VAO lets a core context
        // draw 3 vertices from gl_VertexID with no attributes.
        unsafe {
            gl.viewport(0, 0, target.width as i32, target.height as i32);
            gl.disable(glow::BLEND);
            gl.disable(glow::DEPTH_TEST);
            gl.use_program(Some(self.program));
            gl.bind_vertex_array(Some(gpu.empty_vao()));
            gl.draw_arrays(glow::TRIANGLES, 0, 3);
            gl.bind_vertex_array(None);
            gl.use_program(None);
            gl.bind_framebuffer(glow::DRAW_FRAMEBUFFER, None);
        }
        gpu.check("draw")
    }

    /// Deletes the program.
    pub fn release(self, gpu: &Gpu) {
        // SAFETY: the context is current; the program is ours and not used after this.
        unsafe { gpu.gl().delete_program(self.program) };
    }
}

/// Waits until the GPU has done everything queued (`glFinish`). Probes and tools only.
pub fn finish(gpu: &Gpu) {
    // SAFETY: the context is current on this thread; glFinish has no preconditions.
    unsafe { gpu.gl().finish() };
}

/// Transfer costs at one frame size, in milliseconds (medians).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferCost {
    /// Frame width.
    pub width: u32,
    /// Frame height.
    pub height: u32,
    /// An upload, until the GPU has the texture.
    pub upload_ms: f64,
    /// A download, from start to the pixels in a CPU frame.
    pub download_ms: f64,
    /// How long `Downloader::start` held the calling thread.
    pub download_start_ms: f64,
}

/// What [`probe`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuProbe {
    /// The context.
    pub info: GpuInfo,
    /// Transfer costs at each size asked for.
    pub transfers: Vec<TransferCost>,
    /// One full-screen pass of a trivial shader at 1920x1080, ms (median).
    pub pass_1080p_ms: f64,
}

fn median_ms(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Times uploads and downloads of `width` x `height` frames, `runs` times each (median) after
/// one warm-up.
pub fn measure_transfers(gpu: &Gpu, width: u32, height: u32, runs: usize) -> Result<TransferCost> {
    let runs = runs.max(1);
    let frames = FramePool::new(width, height, 2);
    let textures = TexturePool::new(width, height, TexFormat::Rgba8, 1);
    let texture = textures.try_acquire(gpu)?;
    let mut source = frames.acquire().expect("a fresh pool has frames");
    for (i, b) in source.data_mut().iter_mut().enumerate() {
        *b = i as u8;
    }
    let source = source.freeze();
    let mut back = frames.acquire().expect("a fresh pool has two frames");
    let mut up = Uploader::new(2);
    let mut down = Downloader::new(2);
    let (mut ups, mut downs, mut starts) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..=runs {
        finish(gpu);
        let t = Instant::now();
        up.upload(gpu, &source, &texture)?;
        finish(gpu);
        let up_time = t.elapsed();

        let t = Instant::now();
        let ticket = down.start(gpu, &texture)?;
        let start_time = t.elapsed();
        while !down.ready(gpu, &ticket) {
            std::thread::sleep(Duration::from_micros(50));
        }
        down.finish(gpu, ticket, &mut back)?;
        let down_time = t.elapsed();
        if run > 0 {
            ups.push(up_time);
            downs.push(down_time);
            starts.push(start_time);
        }
    }
    if back.data() != source.data() {
        return Err(GpuError::Mismatch(
            "probe: a frame came back from the GPU changed".into(),
        ));
    }
    up.release(gpu);
    down.release(gpu);
    Ok(TransferCost {
        width,
        height,
        upload_ms: median_ms(ups),
        download_ms: median_ms(downs),
        download_start_ms: median_ms(starts),
    })
}

/// Times one full-screen pass of `fragment` into a `width` x `height` texture, `runs` times
/// (median) after a warm-up, each `glFinish`ed.
pub fn measure_pass(
    gpu: &Gpu,
    fragment: &str,
    width: u32,
    height: u32,
    runs: usize,
) -> Result<f64> {
    let pass = FullScreenPass::new(gpu, fragment)?;
    let textures = TexturePool::new(width, height, TexFormat::Rgba8, 1);
    let texture = textures.try_acquire(gpu)?;
    let mut times = Vec::new();
    for run in 0..=runs.max(1) {
        finish(gpu);
        let t = Instant::now();
        pass.draw(gpu, &texture.image())?;
        finish(gpu);
        if run > 0 {
            times.push(t.elapsed());
        }
    }
    pass.release(gpu);
    Ok(median_ms(times))
}

/// Opens a context on this thread and measures it: transfers at each of `sizes`, a trivial
/// pass at 1080p; `runs` samples each.
pub fn probe(sizes: &[(u32, u32)], runs: usize) -> Result<GpuProbe> {
    let gpu = Gpu::open()?;
    let mut transfers = Vec::new();
    for &(w, h) in sizes {
        transfers.push(measure_transfers(&gpu, w, h, runs)?);
    }
    let pass_1080p_ms = measure_pass(&gpu, TRIVIAL_FRAGMENT, 1920, 1080, runs)?;
    gpu.collect();
    Ok(GpuProbe {
        info: gpu.info().clone(),
        transfers,
        pass_1080p_ms,
    })
}
