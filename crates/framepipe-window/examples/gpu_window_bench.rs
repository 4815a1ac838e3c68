//! What showing a GPU frame in a `windowsink` costs, drawn as a texture (no download) against
//! the download + CPU path, in the same run, on the same textures (under Xvfb; llvmpipe here):
//!
//! * **texture path**: `Sink::consume_texture` on the calling thread (as the output thread
//!   does), then on the window thread: `take` (the window's copy of the texture, waited for)
//!   and `present` (the bilinear draw into the window and the swap), per frame drawn;
//! * **download path**: on the calling thread (the GPU thread's share of it), the download of
//!   the texture (`Downloader::start` until `ready`, then `finish` into a CPU frame), then on
//!   the window thread: copy + nearest-neighbour scale and softbuffer's present.
//!
//! Both windows are `--window` big, side by side on a screen wide enough for both.
//!
//! ```text
//! Xvfb :N -screen 0 2600x800x24 &
//! DISPLAY=:N cargo run --release -p framepipe-window --example gpu_window_bench -- \
//!     [--frames 120] [--fps 30] [--size 1280x720] [--window 1280x720]
//! ```
//!
//! Prints one line of `key=value` figures (µs: median and p99).

use std::time::{Duration, Instant};

use framepipe_core::{FrameCtx, FramePool, Rational, Sink, TexFormat, VideoInfo};
use framepipe_gpu::{Downloader, Fence, Gpu, TexturePool, Uploader};
use framepipe_window::{WindowSettings, WindowSink};

fn arg<'a>(args: &'a [String], name: &str, default: &'a str) -> &'a str {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |s| s.as_str())
}

fn size(text: &str) -> (u32, u32) {
    let (w, h) = text.split_once('x').expect("WxH");
    (w.parse().expect("width"), h.parse().expect("height"))
}

/// (median, p99) of `v`, in µs from ns.
fn summary(mut v: Vec<u64>) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
    (at(0.5), at(0.99))
}

fn window(title: &str, (w, h): (u32, u32)) -> WindowSink {
    WindowSink::new(
        WindowSettings {
            title: title.into(),
            display: String::new(),
            fullscreen: false,
            width: w,
            height: h,
            vsync: false,
        },
        None,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let frames: usize = arg(&args, "--frames", "120").parse().expect("--frames");
    let fps: u32 = arg(&args, "--fps", "30").parse().expect("--fps");
    let (w, h) = size(arg(&args, "--size", "1280x720"));
    let win = size(arg(&args, "--window", "1280x720"));
    let info = VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(fps, 1),
    };

    // The window that takes textures opens the window display; the GPU context opens on it.
    let mut gpu_sink = window("gpu path", win);
    assert!(
        gpu_sink.takes_textures(),
        "no EGL for the window: see the line above"
    );
    let gpu = Gpu::open().expect("GPU context");
    let mut cpu_sink = window("download path", win);

    // Three distinct textures, uploaded before the run.
    let cpu_pool = FramePool::new(w, h, 4);
    let tex_pool = TexturePool::new(w, h, TexFormat::Rgba8, 3);
    let mut uploader = Uploader::new(2);
    let textures: Vec<_> = (0..3u8)
        .map(|k| {
            let mut f = cpu_pool.try_acquire().expect("frame");
            for (i, px) in f.data_mut().chunks_exact_mut(4).enumerate() {
                let (x, y) = (i as u32 % w, i as u32 / w);
                px.copy_from_slice(&[(x / 4) as u8 ^ (k * 80), (y / 4) as u8, k * 100, 255]);
            }
            let t = tex_pool.try_acquire(&gpu).expect("texture");
            uploader.upload(&gpu, &f.freeze(), &t).expect("upload");
            t.share()
        })
        .collect();
    Fence::insert(&gpu).expect("fence").wait(&gpu);

    gpu_sink.start(info).expect("gpu window");
    cpu_sink.start(info).expect("cpu window");
    std::thread::sleep(Duration::from_millis(300));

    let mut downloader = Downloader::new(2);
    let mut consume_ns = Vec::with_capacity(frames);
    let mut download_ns = Vec::with_capacity(frames);
    let period = Duration::from_secs(1) / fps;
    let start = Instant::now();
    for i in 0..frames {
        let tex = &textures[i % 3];
        let ctx = FrameCtx::new(i as u64, (period * i as u32).as_nanos() as i64);
        let t = Instant::now();
        gpu_sink
            .consume_texture(&ctx, &tex.texture_frame())
            .expect("consume_texture");
        consume_ns.push(t.elapsed().as_nanos() as u64);

        let t = Instant::now();
        let ticket = downloader
            .start_image(&gpu, &tex.image())
            .expect("download");
        while !downloader.ready(&gpu, &ticket) {
            std::thread::sleep(Duration::from_micros(100));
        }
        let mut frame = cpu_pool.try_acquire().expect("frame");
        downloader
            .finish(&gpu, ticket, &mut frame)
            .expect("download");
        download_ns.push(t.elapsed().as_nanos() as u64);
        cpu_sink.consume(&ctx, &frame.freeze()).expect("consume");

        let next = start + period * (i as u32 + 1);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let gstats = gpu_sink.window_stats().expect("started");
    let cstats = cpu_sink.window_stats().expect("started");
    gpu_sink.finish().expect("finish");
    cpu_sink.finish().expect("finish");
    std::thread::sleep(Duration::from_millis(200));
    drop(textures);
    downloader.release(&gpu);
    uploader.release(&gpu);
    gpu.collect();

    let (gtake, gpresent) = gstats.times_ns();
    let (cdraw, cpresent) = cstats.times_ns();
    let gdrawn = gtake.len();
    let cdrawn = cdraw.len();
    let (c50, c99) = summary(consume_ns);
    let (t50, t99) = summary(gtake);
    let (p50, p99) = summary(gpresent);
    let (d50, d99) = summary(download_ns);
    let (s50, s99) = summary(cdraw);
    let (q50, q99) = summary(cpresent);
    println!(
        "renderer={:?} size={w}x{h} window={}x{} frames={frames} \
         gpu_drawn={gdrawn} consume_texture_p50={c50:.1} consume_texture_p99={c99:.1} \
         take_p50={t50:.1} take_p99={t99:.1} gl_present_p50={p50:.1} gl_present_p99={p99:.1} \
         cpu_drawn={cdrawn} download_p50={d50:.1} download_p99={d99:.1} \
         scale_p50={s50:.1} scale_p99={s99:.1} sb_present_p50={q50:.1} sb_present_p99={q99:.1}",
        gpu.info().renderer,
        win.0,
        win.1
    );
}
