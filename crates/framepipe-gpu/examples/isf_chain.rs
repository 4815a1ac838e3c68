//! Times a chain of ISF effects on this machine's GL, texture to texture (no uploads or
//! downloads in the loop): `cargo run --release -p framepipe-gpu --example isf_chain --
//! WIDTHxHEIGHT FRAMES a.fs b.fs c.fs`. Each frame is finished (`glFinish`) before the clock
//! stops, so the figure is the GPU's time for the chain; a tool, never the frame path.
//! Prints one line: the mean and the spread (min, max) of the per-frame time in ms.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use framepipe_core::{FrameCtx, GpuCtx, GpuFactory, Props, Rational, TexFormat, VideoInfo};
use framepipe_gpu::glow::HasContext;
use framepipe_gpu::isf::{factory, IsfFactory, Loaded};
use framepipe_gpu::{Gpu, TexturePool, Uploader};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: isf_chain WIDTHxHEIGHT FRAMES effect.fs [effect.fs ...]";
    let (size, frames, files) = match args.as_slice() {
        [size, frames, files @ ..] if !files.is_empty() => (size, frames, files),
        _ => return Err(usage.into()),
    };
    let (w, h) = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .ok_or(usage)?;
    let frames: u64 = frames.parse().map_err(|_| usage)?;
    let info = VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(60, 1),
    };
    let mut nodes = Vec::new();
    for f in files {
        let loaded = Arc::new(Loaded::read(Path::new(f))?);
        let props = Props::resolve("isf", &factory::props(&loaded.shader, false), &[])
            .map_err(|e| e.to_string())?;
        let mut fac = IsfFactory::new("isf", loaded, &props, false).map_err(|e| e.to_string())?;
        fac.negotiate(&[info]).map_err(|e| e.to_string())?;
        nodes.push(fac.instantiate().map_err(|e| e.to_string())?);
    }
    let gpu = Gpu::open().map_err(|e| e.to_string())?;
    eprintln!("{}", gpu.info());
    let pool = TexturePool::new(w, h, TexFormat::Rgba8, 2);
    let textures = [
        pool.try_acquire(&gpu).map_err(|e| e.to_string())?,
        pool.try_acquire(&gpu).map_err(|e| e.to_string())?,
    ];
    let picture: Vec<u8> = (0..w * h * 4).map(|i| (i % 251) as u8).collect();
    let mut up = Uploader::new(1);
    up.upload_bytes(&gpu, &picture, w, h, &textures[0].image())
        .map_err(|e| e.to_string())?;
    let mut times = Vec::with_capacity(frames as usize);
    for seq in 0..frames + 5 {
        let start = Instant::now();
        let ctx = GpuCtx {
            gl: gpu.gl(),
            frame: FrameCtx::new(seq, info.rate.frame_time_ns(seq)),
            period_ns: info.rate.period_ns() as i64,
            empty_vao: gpu.empty_vao(),
            audio: framepipe_core::FrameAudio::default(),
        };
        for (i, node) in nodes.iter_mut().enumerate() {
            let (src, dst) = (&textures[i % 2], &textures[(i + 1) % 2]);
            node.render(&ctx, &[src.image()], &dst.image())
                .map_err(|e| e.to_string())?;
        }
        // SAFETY: the context is current on this thread; a tool waiting for its own work.
        unsafe { gpu.gl().finish() };
        if seq >= 5 {
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    for n in &mut nodes {
        n.release(gpu.gl());
    }
    up.release(&gpu);
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let min = times.iter().copied().fold(f64::MAX, f64::min);
    let max = times.iter().copied().fold(0.0, f64::max);
    println!(
        "{}x{} chain of {}: {mean:.2} ms/frame (min {min:.2}, max {max:.2}) over {} frames",
        w,
        h,
        nodes.len(),
        times.len()
    );
    Ok(())
}
