//! A shader's frames without the engine: for tests, tools and the peer checks against the
//! web reference renderers. Opens a [`Gpu`] of its own, renders `frames` frames (frame `n` at
//! `n` periods of the rate), and reads each back (blocking: never on the frame path).
//!
//! ```no_run
//! // 4 frames of a generator at 64x48, an input set to 0.25:
//! let frames = framepipe_gpu::isf::render_frames(
//!     std::path::Path::new("shaders/plasma.fs"),
//!     &[("speed", "0.25")],
//!     (64, 48),
//!     4,
//! )?;
//! assert_eq!(frames[0].len(), 64 * 48 * 4); // RGBA, top row first
//! # Ok::<(), String>(())
//! ```

use std::path::Path;
use std::sync::Arc;

use framepipe_core::{
    FrameAudio, FrameCtx, GpuCtx, GpuFactory, Props, Rational, TexFormat, VideoInfo,
};

use super::factory::{self, IsfFactory};
use super::loaded::Loaded;
use crate::{read_back_blocking, Gpu, TexturePool, Uploader};

/// The frames of the ISF shader at `path` with properties `props` (`name`, `value` text as
/// in a pipeline), rendered at `size` (a source's `width`/`height` unless `props` give them;
/// an effect's or mixer's inputs' size), `frames` of them at 30 fps (or the `rate` of
/// `props`). Each frame is RGBA8, top row first (as CPU frames are). A shader with image
/// inputs reads transparent black ([`render_frames_with`] gives it pictures).
pub fn render_frames(
    path: &Path,
    props: &[(&str, &str)],
    size: (u32, u32),
    frames: usize,
) -> Result<Vec<Vec<u8>>, String> {
    render_frames_with(path, props, size, frames, &[])
}

/// [`render_frames`] with pictures for the shader's image inputs, in the order its links
/// feed them (`inputImage` first; a transition's `startImage`, then `endImage`): each RGBA8,
/// top row first, of `size`; the same picture every frame. Inputs not given read
/// transparent black.
pub fn render_frames_with(
    path: &Path,
    props: &[(&str, &str)],
    size: (u32, u32),
    frames: usize,
    inputs: &[&[u8]],
) -> Result<Vec<Vec<u8>>, String> {
    let loaded = Arc::new(Loaded::read(path)?);
    let specs = factory::props(&loaded.shader, false);
    let mut given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let is_source = loaded.frame_inputs() == 0;
    // `rate` is a source's property; for an effect or mixer it only sets the frames' times.
    if !is_source {
        given.retain(|(k, _)| k != "rate");
    }
    for (k, v) in [("width", size.0), ("height", size.1)] {
        if is_source && !given.iter().any(|(g, _)| g == k) {
            given.push((k.to_string(), v.to_string()));
        }
    }
    let resolved = Props::resolve("isf", &specs, &given).map_err(|e| e.to_string())?;
    let rate = props
        .iter()
        .find(|(k, _)| *k == "rate")
        .and_then(|(_, v)| Rational::parse(v))
        .unwrap_or(Rational::new(30, 1));
    let n_inputs = loaded.frame_inputs();
    let factory = IsfFactory::new("isf", loaded, &resolved, false).map_err(|e| e.to_string())?;
    run(Box::new(factory), size, rate, n_inputs, frames, inputs)
}

/// Renders `frames` frames of `factory` (with `n_inputs` inputs of `size`, `pictures` for
/// the first ones) and reads them back, top row first.
pub(crate) fn run(
    mut factory: Box<dyn GpuFactory>,
    size: (u32, u32),
    rate: Rational,
    n_inputs: usize,
    frames: usize,
    pictures: &[&[u8]],
) -> Result<Vec<Vec<u8>>, String> {
    let input_info = VideoInfo {
        width: size.0,
        height: size.1,
        rate,
    };
    let infos = vec![input_info; n_inputs];
    let out = factory.negotiate(&infos).map_err(|e| e.to_string())?;
    let mut node = factory.instantiate().map_err(|e| e.to_string())?;
    let gpu = Gpu::open().map_err(|e| e.to_string())?;
    let in_pool = TexturePool::new(size.0, size.1, TexFormat::Rgba8, n_inputs.max(1));
    let out_pool = TexturePool::new(out.width, out.height, TexFormat::Rgba8, 1);
    let mut uploader = Uploader::new(1);
    let mut held = Vec::with_capacity(n_inputs);
    let black = vec![0u8; size.0 as usize * size.1 as usize * 4];
    for i in 0..n_inputs {
        let t = in_pool.try_acquire(&gpu).map_err(|e| e.to_string())?;
        let pixels = pictures.get(i).copied().unwrap_or(&black);
        uploader
            .upload_bytes(&gpu, pixels, size.0, size.1, &t.image())
            .map_err(|e| e.to_string())?;
        held.push(t);
    }
    let images: Vec<_> = held.iter().map(|t| t.image()).collect();
    let target = out_pool.try_acquire(&gpu).map_err(|e| e.to_string())?;
    let mut result = Vec::with_capacity(frames);
    for seq in 0..frames as u64 {
        let ctx = GpuCtx {
            gl: gpu.gl(),
            frame: FrameCtx::new(seq, rate.frame_time_ns(seq)),
            period_ns: rate.period_ns() as i64,
            empty_vao: gpu.empty_vao(),
            audio: FrameAudio::default(),
        };
        let rendered = node.render(&ctx, &images, &target.image());
        // A GL error the node's calls raised (glGetError: this is a tool, it may ask).
        let rendered = rendered
            .map_err(|e| e.to_string())
            .and_then(|()| gpu.check("the node's render").map_err(|e| e.to_string()));
        if let Err(e) = rendered {
            node.release(gpu.gl());
            return Err(e);
        }
        let bottom_up = read_back_blocking(&gpu, &target.image());
        let row = out.width as usize * 4;
        let mut top_down = Vec::with_capacity(bottom_up.len());
        for r in bottom_up.chunks_exact(row).rev() {
            top_down.extend_from_slice(r);
        }
        result.push(top_down);
    }
    node.release(gpu.gl());
    uploader.release(&gpu);
    drop(held);
    drop(target);
    gpu.collect();
    Ok(result)
}
