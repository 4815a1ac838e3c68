//! The cost of the CPU↔GPU edges on this machine's GL: upload and download ms per 720p and
//! 1080p frame (median of N), whether a download holds the calling thread, and one full-screen
//! pass at 1080p.
//!
//! ```text
//! cargo run --release -p framepipe-gpu --example transfer [N]
//! ```
//!
//! The first table uses the path `Downloader::new` picks here (`FRAMEPIPE_GPU_DOWNLOAD`, else by
//! renderer). The second runs both paths, `inline` (`glReadPixels` into a pixel-pack buffer in
//! `start`) and `thread` (`start` puts a fence; the downloader's thread reads): "start" is the
//! `Downloader::start` call, "held" that plus the first `ready`, both what the calling (GPU)
//! thread pays; "ready" is from the start call to the first `ready` that says the pixels are
//! in. With a pass queued before the download (as in a show: a shader renders the frame, then
//! it is downloaded), an asynchronous readback returns from `start` long before "ready".

use std::time::{Duration, Instant};

use framepipe_core::FramePool;
use framepipe_gpu::probe::{
    finish, measure_pass, measure_transfers, FullScreenPass, TRIVIAL_FRAGMENT,
};
use framepipe_gpu::{DownloadMode, Downloader, Gpu, TexFormat, TexturePool};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spread(v: &[f64]) -> (f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    (min, max)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One row of the second table: `runs` downloads of a `w` x `h` texture on `mode`'s path,
/// after `pass` is queued into it when `queued_pass`; medians.
fn download_path(
    gpu: &Gpu,
    pass: &FullScreenPass,
    mode: DownloadMode,
    w: u32,
    h: u32,
    queued_pass: bool,
    runs: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let textures = TexturePool::new(w, h, TexFormat::Rgba8, 1);
    let texture = textures.try_acquire(gpu)?;
    let frames = FramePool::new(w, h, 1);
    let mut back = frames.acquire().expect("a frame");
    let mut down = Downloader::with_mode(1, mode);
    down.prepare(gpu)?;
    let (mut queued, mut start, mut held, mut done, mut copy, mut unready) =
        (vec![], vec![], vec![], vec![], vec![], 0);
    for run in 0..=runs {
        finish(gpu);
        let t0 = Instant::now();
        if queued_pass {
            pass.draw(gpu, &texture.image())?;
        }
        let t1 = Instant::now();
        let ticket = down.start(gpu, &texture)?;
        let ts = Instant::now();
        let first = down.ready(gpu, &ticket);
        let t2 = Instant::now();
        let mut ready = first;
        while !ready {
            std::thread::sleep(Duration::from_micros(50));
            ready = down.ready(gpu, &ticket);
        }
        let t3 = Instant::now();
        down.finish(gpu, ticket, &mut back)?;
        let t4 = Instant::now();
        if run > 0 {
            queued.push(ms(t1 - t0));
            start.push(ms(ts - t1));
            held.push(ms(t2 - t1));
            done.push(ms(t3 - t1));
            copy.push(ms(t4 - t3));
            unready += usize::from(!first);
        }
    }
    down.release(gpu);
    let (smin, smax) = spread(&start);
    Ok(format!(
        "{:>7} {:>10} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>10.2} {:>9}/{runs}   (start {smin:.2}..{smax:.2})",
        match mode {
            DownloadMode::Thread => "thread",
            _ => "inline",
        },
        format!("{w}x{h}"),
        if queued_pass { "pass" } else { "idle" },
        median(queued),
        median(start),
        median(held),
        median(done),
        median(copy),
        unready
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::args().nth(1).map_or(Ok(20), |a| a.parse())?;
    let gpu = Gpu::open()?;
    println!(
        "renderer: {} ({:?} platform)",
        gpu.info(),
        gpu.info().platform
    );
    println!(
        "GL_VERSION {}; GLSL {}; {runs} runs each, medians\n",
        gpu.info().version,
        gpu.info().glsl
    );
    println!(
        "{:>10} {:>10} {:>12} {:>14}",
        "size", "upload ms", "download ms", "start held ms"
    );
    for (w, h) in [(1280, 720), (1920, 1080)] {
        let t = measure_transfers(&gpu, w, h, runs)?;
        println!(
            "{:>10} {:>10.2} {:>12.2} {:>14.2}",
            format!("{w}x{h}"),
            t.upload_ms,
            t.download_ms,
            t.download_start_ms
        );
    }

    println!(
        "\ndownloads on each path (the GPU thread's view; texture idle, or a pass queued just before):"
    );
    println!(
        "{:>7} {:>10} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>12}",
        "path",
        "size",
        "before",
        "pass ms",
        "start ms",
        "held ms",
        "ready ms",
        "finish ms",
        "ready false"
    );
    let pass = FullScreenPass::new(&gpu, TRIVIAL_FRAGMENT)?;
    for mode in [DownloadMode::Inline, DownloadMode::Thread] {
        for (w, h) in [(1280, 720), (1920, 1080)] {
            for queued_pass in [false, true] {
                let row = download_path(&gpu, &pass, mode, w, h, queued_pass, runs)?;
                println!("{row}");
            }
        }
    }
    pass.release(&gpu);

    let fill = measure_pass(&gpu, TRIVIAL_FRAGMENT, 1920, 1080, runs)?;
    println!("\none full-screen pass of a trivial shader at 1920x1080: {fill:.2} ms (glFinish'ed)");
    gpu.collect();
    Ok(())
}
