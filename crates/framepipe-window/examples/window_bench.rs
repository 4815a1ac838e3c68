//! The cost of showing frames in a `windowsink` (run by `scripts/bench-window`, under Xvfb):
//!
//! * on the output thread: `Sink::consume` of a frame (the hand-off and the waker's `unpark`),
//!   timed around each call, paced at `--fps`, on a thread set up as framepipe's output thread
//!   is (`SCHED_FIFO` when permitted, said in the output as `realtime=1`); beside it, in the same run and on the same
//!   frames, a plain `memcpy` of the frame into a preallocated buffer: what a hand-off by copy
//!   would cost the output thread;
//! * on the window thread: taking the frame and scaling it into the window's buffer
//!   (copy + scale), and presenting it, per frame drawn.
//!
//! ```text
//! DISPLAY=:N cargo run --release -p framepipe-window --example window_bench -- \
//!     [--frames 600] [--fps 60] [--size 1920x1080] [--window 960x540|full]
//! ```
//!
//! Prints one line of `key=value` figures (µs), read by the script.

use std::time::{Duration, Instant};

use framepipe_core::{FrameCtx, FramePool, Rational, Sink, VideoInfo};
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

/// (median, p99, max) of `v`, in µs from ns.
fn summary(mut v: Vec<u64>) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
    (at(0.5), at(0.99), at(1.0))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let frames: usize = arg(&args, "--frames", "600").parse().expect("--frames");
    let fps: u32 = arg(&args, "--fps", "60").parse().expect("--fps");
    let (w, h) = size(arg(&args, "--size", "1920x1080"));
    let window = arg(&args, "--window", "960x540");
    let (fullscreen, (ww, wh)) = if window == "full" {
        (true, (0, 0))
    } else {
        (false, size(window))
    };

    // Three distinct frames, made before the run (a pattern per frame).
    let pool = FramePool::new(w, h, 4);
    let pictures: Vec<_> = (0..3u8)
        .map(|k| {
            let mut f = pool.try_acquire().expect("frame");
            for (i, px) in f.data_mut().chunks_exact_mut(4).enumerate() {
                let (x, y) = (i as u32 % w, i as u32 / w);
                px.copy_from_slice(&[(x / 4) as u8 ^ (k * 80), (y / 4) as u8, k * 100, 255]);
            }
            f.freeze()
        })
        .collect();
    let mut sink = WindowSink::new(
        WindowSettings {
            title: "framepipe bench".into(),
            display: String::new(),
            fullscreen,
            width: ww,
            height: wh,
            vsync: false,
        },
        None,
    );
    sink.start(VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(fps, 1),
    })
    .expect("windowsink start");
    // Let the window map before timing.
    std::thread::sleep(Duration::from_millis(300));

    let mut copy = vec![0u8; pictures[0].data().len()];
    let mut consume_ns = Vec::with_capacity(frames);
    let mut memcpy_ns = Vec::with_capacity(frames);
    let period = Duration::from_secs(1) / fps;
    let setup = framepipe_clock::sys::prepare_pacing_thread(true);
    let start = Instant::now();
    for i in 0..frames {
        let frame = &pictures[i % 3];
        let ctx = FrameCtx::new(i as u64, (period * i as u32).as_nanos() as i64);
        let t = Instant::now();
        sink.consume(&ctx, frame).expect("consume");
        consume_ns.push(t.elapsed().as_nanos() as u64);
        let t = Instant::now();
        copy.copy_from_slice(frame.data());
        std::hint::black_box(&copy);
        memcpy_ns.push(t.elapsed().as_nanos() as u64);
        let next = start + period * (i as u32 + 1);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let realtime = u8::from(setup.realtime);
    drop(setup);
    // Let the window thread draw the last frame.
    std::thread::sleep(Duration::from_millis(300));
    let handoff = sink.handoff_stats();
    let stats = sink.window_stats().expect("started");
    sink.finish().expect("finish");
    let (draw, present) = stats.times_ns();
    let drawn = draw.len();
    let (c50, c99, cmax) = summary(consume_ns);
    let (m50, m99, mmax) = summary(memcpy_ns);
    let (d50, d99, _) = summary(draw);
    let (p50, p99, _) = summary(present);
    println!(
        "realtime={realtime} frames={frames} drawn={drawn} shared={} copied={} replaced={} \
         consume_p50={c50:.2} consume_p99={c99:.2} consume_max={cmax:.2} \
         memcpy_p50={m50:.2} memcpy_p99={m99:.2} memcpy_max={mmax:.2} \
         draw_p50={d50:.2} draw_p99={d99:.2} present_p50={p50:.2} present_p99={p99:.2}",
        handoff.shared, handoff.copied, handoff.replaced
    );
}
