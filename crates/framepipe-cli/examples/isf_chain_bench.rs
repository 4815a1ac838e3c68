//! A chain of ISF filters on this machine's GL (llvmpipe here), for `scripts/bench-isf`:
//! `isf_chain_bench WIDTH HEIGHT FRAMES A.fs B.fs ...` uploads a test picture, runs the
//! shaders one after the other (each reads the previous one's texture: nothing goes back to
//! the CPU between them) and reads the last one back, every frame, as a CPU → GPU nodes → CPU
//! chain does; prints one JSON line: frames, seconds, fps, the GL renderer.
//!
//! The chain is driven here through `framepipe-gpu`'s public API (the GPU executor is the
//! engine's); the read-back is blocking, which on llvmpipe is where the rendering happens.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use framepipe_core::{FrameCtx, GpuCtx, GpuFactory, Props, Rational, TexFormat, VideoInfo};
use framepipe_gpu::isf::{factory, IsfFactory, Loaded};
use framepipe_gpu::{read_back_blocking, Gpu, TexturePool, Uploader};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        return Err("usage: isf_chain_bench WIDTH HEIGHT FRAMES A.fs [B.fs ...]".into());
    }
    let (w, h): (u32, u32) = (
        args[0].parse().map_err(|_| "WIDTH")?,
        args[1].parse().map_err(|_| "HEIGHT")?,
    );
    let frames: u64 = args[2].parse().map_err(|_| "FRAMES")?;
    let rate = Rational::new(30, 1);
    let info = VideoInfo {
        width: w,
        height: h,
        rate,
    };
    let gpu = Gpu::open().map_err(|e| e.to_string())?;
    let mut nodes = Vec::new();
    for fs in &args[3..] {
        let loaded = Arc::new(Loaded::read(Path::new(fs))?);
        let specs = factory::props(&loaded.shader, false);
        let props = Props::resolve("isf", &specs, &[]).map_err(|e| e.to_string())?;
        let mut f = IsfFactory::new("isf", loaded, &props, false).map_err(|e| e.to_string())?;
        f.negotiate(&[info]).map_err(|e| format!("{fs}: {e}"))?;
        nodes.push(f.instantiate().map_err(|e| format!("{fs}: {e}"))?);
    }
    let pool = TexturePool::new(w, h, TexFormat::Rgba8, nodes.len() + 1);
    let textures: Vec<_> = (0..=nodes.len())
        .map(|_| pool.try_acquire(&gpu).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let picture: Vec<u8> = (0..w * h)
        .flat_map(|i| {
            let (x, y) = (i % w, i / w);
            [
                (x * 255 / w) as u8,
                (y * 255 / h) as u8,
                ((x ^ y) & 255) as u8,
                255,
            ]
        })
        .collect();
    let mut uploader = Uploader::new(2);
    let mut run = |seq: u64| -> Result<Vec<u8>, String> {
        uploader
            .upload_bytes(&gpu, &picture, w, h, &textures[0].image())
            .map_err(|e| e.to_string())?;
        let ctx = GpuCtx {
            gl: gpu.gl(),
            frame: FrameCtx::new(seq, rate.frame_time_ns(seq)),
            period_ns: rate.period_ns() as i64,
            empty_vao: gpu.empty_vao(),
            audio: framepipe_core::FrameAudio::default(),
        };
        for (i, node) in nodes.iter_mut().enumerate() {
            node.render(&ctx, &[textures[i].image()], &textures[i + 1].image())
                .map_err(|e| e.to_string())?;
        }
        Ok(read_back_blocking(&gpu, &textures[nodes.len()].image()))
    };
    run(0)?; // compiles, allocates
    let start = Instant::now();
    for seq in 1..=frames {
        run(seq)?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"frames\": {frames}, \"seconds\": {secs:.3}, \"fps\": {:.2}, \"renderer\": {:?}}}",
        frames as f64 / secs,
        gpu.info().renderer
    );
    Ok(())
}
