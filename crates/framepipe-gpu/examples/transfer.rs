//! The cost of the CPU↔GPU edges on this machine's GL: upload and download ms per 720p and
//! 1080p frame (median of N), whether a download holds the calling thread, and one full-screen
//! pass at 1080p.
//!
//! ```text
//! cargo run --release -p framepipe-gpu --example transfer [N]
//! ```
//!
//! "held" is the time `Downloader::start` plus the first `ready` keep the calling (GPU) thread;
//! "done" is when `ready` first says the pixels are in the buffer. With a pass queued before the
//! download (as in a show: a shader renders the frame, then it is downloaded), a driver that
//! reads back asynchronously returns from `start` long before "done".

use std::time::{Duration, Instant};

use framepipe_core::FramePool;
use framepipe_gpu::probe::{
    finish, measure_pass, measure_transfers, FullScreenPass, TRIVIAL_FRAGMENT,
};
use framepipe_gpu::{Downloader, Gpu, TexFormat, TexturePool};

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

    println!("\ndownload after a queued pass (the thread's view):");
    println!(
        "{:>10} {:>9} {:>9} {:>9} {:>10} {:>12}",
        "size", "pass ms", "held ms", "done ms", "finish ms", "ready false"
    );
    let pass = FullScreenPass::new(&gpu, TRIVIAL_FRAGMENT)?;
    for (w, h) in [(1280, 720), (1920, 1080)] {
        let textures = TexturePool::new(w, h, TexFormat::Rgba8, 1);
        let texture = textures.try_acquire(&gpu)?;
        let frames = FramePool::new(w, h, 1);
        let mut back = frames.acquire().expect("a frame");
        let mut down = Downloader::new(1);
        let (mut queued, mut held, mut done, mut copy, mut unready) =
            (vec![], vec![], vec![], vec![], 0);
        for run in 0..=runs {
            finish(&gpu);
            let t0 = Instant::now();
            pass.draw(&gpu, &texture.image())?;
            let t1 = Instant::now();
            let ticket = down.start(&gpu, &texture)?;
            let first = down.ready(&gpu, &ticket);
            let t2 = Instant::now();
            let mut ready = first;
            while !ready {
                std::thread::sleep(Duration::from_micros(50));
                ready = down.ready(&gpu, &ticket);
            }
            let t3 = Instant::now();
            down.finish(&gpu, ticket, &mut back)?;
            let t4 = Instant::now();
            if run > 0 {
                queued.push(ms(t1 - t0));
                held.push(ms(t2 - t1));
                done.push(ms(t3 - t1));
                copy.push(ms(t4 - t3));
                unready += usize::from(!first);
            }
        }
        let (hmin, hmax) = spread(&held);
        println!(
            "{:>10} {:>9.2} {:>9.2} {:>9.2} {:>10.2} {:>9}/{runs}   (held {hmin:.2}..{hmax:.2})",
            format!("{w}x{h}"),
            median(queued),
            median(held),
            median(done),
            median(copy),
            unready
        );
        down.release(&gpu);
    }
    pass.release(&gpu);

    let fill = measure_pass(&gpu, TRIVIAL_FRAGMENT, 1920, 1080, runs)?;
    println!("\none full-screen pass of a trivial shader at 1920x1080: {fill:.2} ms (glFinish'ed)");
    gpu.collect();
    Ok(())
}
