//! Per-frame cost of `mix` and `monitor` on one core, beside peers in the same run. Prints a
//! table; not a test (the machines are shared and noisy).
//!
//! ```text
//! cargo run --release -p framepipe-effects --example effects_bench [-- ROUNDS]
//! ```
//!
//! * `mix`: each blend mode (2 inputs, layers) and crossfade at 1920x1080, ms per frame and the
//!   memory traffic per second (bytes read + written), beside a plain per-pixel scalar version
//!   of the same maths (the mode matched per pixel), to show what vectorising buys.
//! * `monitor`: 3840x2160 and 6000x4500 to 200x150, beside fast_image_resize's box and
//!   bilinear convolution (what `scale` runs) on the same frame.
//!
//! Each figure is the median of ROUNDS (default 7) rounds, with the min-max spread; a round is
//! the mean over enough frames to take about 100 ms.

use std::hint::black_box;
use std::time::Instant;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use framepipe_core::InlineSlices;
use framepipe_effects::mix::{Blend, Mix, MixMode, MixSettings};
use framepipe_effects::monitor::Monitor;

fn random_bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761).max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 7) as u8
        })
        .collect()
}

/// (median, min, max) of `rounds` rounds of ms per call of `f`.
fn time(rounds: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    let t = Instant::now();
    f();
    let once = t.elapsed().as_secs_f64();
    let reps = ((0.1 / once.max(1e-6)) as usize).clamp(1, 1000);
    let mut ms: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed().as_secs_f64() * 1e3 / reps as f64
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() / 2], ms[0], ms[ms.len() - 1])
}

fn rdiv(x: u32) -> u32 {
    (x + 127) / 255
}

/// The scalar version: one pixel at a time, the blend matched per pixel.
fn scalar_layer(out: &mut [u8], src: &[u8], blend: Blend, op: u32) {
    for (d, s) in out.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
        let w = rdiv(s[3] as u32 * op);
        for c in 0..4 {
            let (b, sv) = (d[c] as u32, s[c] as u32);
            let f = if c == 3 {
                255
            } else {
                match blend {
                    Blend::Normal => sv,
                    Blend::Add => (b + sv).min(255),
                    Blend::Multiply => rdiv(b * sv),
                    Blend::Screen => 255 - rdiv((255 - b) * (255 - sv)),
                    Blend::Overlay if b < 128 => rdiv(2 * b * sv),
                    Blend::Overlay => 255 - rdiv(2 * (255 - b) * (255 - sv)),
                    Blend::Difference => b.abs_diff(sv),
                    Blend::Lighten => b.max(sv),
                    Blend::Darken => b.min(sv),
                }
            };
            d[c] = rdiv(b * (255 - w) + f * w) as u8;
        }
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(7);
    let fmt = |(m, lo, hi): (f64, f64, f64)| format!("{m:7.3} ms ({lo:.3}-{hi:.3})");

    let (w, h) = (1920usize, 1080usize);
    let bytes = w * h * 4;
    let a = random_bytes(bytes, 1);
    let b = random_bytes(bytes, 2);
    let mut out = vec![0u8; bytes];
    println!("mix, 1920x1080, 2 inputs, one core (median of {rounds}, min-max)");
    println!(
        "{:<12} {:>34} {:>10} {:>34} {:>8}",
        "mode", "mix", "GB/s", "scalar", "speedup"
    );
    let mut rows: Vec<(String, MixSettings)> = Blend::ALL
        .iter()
        .map(|&bl| {
            let mut s = MixSettings::default();
            s.blend[1] = bl;
            s.opacity[1] = 0.7;
            (bl.name().to_string(), s)
        })
        .collect();
    let cf = MixSettings {
        mode: MixMode::Crossfade,
        fader: 0.3,
        ..Default::default()
    };
    rows.push(("crossfade".into(), cf));
    for (name, s) in rows {
        let fast = time(rounds, || {
            Mix::run(&s, &[&a, &b], &mut out, w * 4, &InlineSlices);
            black_box(&out);
        });
        let scalar = time(rounds, || {
            if s.mode == MixMode::Crossfade {
                let f = (s.fader * 255.0).round() as u32;
                for ((o, &x), &y) in out.iter_mut().zip(&a).zip(&b) {
                    *o = rdiv(x as u32 * (255 - f) + y as u32 * f) as u8;
                }
            } else {
                out.copy_from_slice(&a);
                scalar_layer(
                    &mut out,
                    &b,
                    s.blend[1],
                    (s.opacity[1] * 255.0).round() as u32,
                );
            }
            black_box(&out);
        });
        let gbs = (3 * bytes) as f64 / (fast.0 * 1e-3) / 1e9;
        println!(
            "{name:<12} {:>34} {gbs:>10.2} {:>34} {:>7.1}x",
            fmt(fast),
            fmt(scalar),
            scalar.0 / fast.0
        );
    }

    println!();
    println!("monitor to 200x150, one core (median of {rounds}, min-max)");
    println!(
        "{:<11} {:>30} {:>30} {:>30}",
        "input", "monitor (box)", "fir box", "fir bilinear"
    );
    for (iw, ih) in [(3840u32, 2160u32), (6000, 4500)] {
        let (ow, oh) = (200u32, 150u32);
        let src = random_bytes(iw as usize * ih as usize * 4, 3);
        let mut dst = vec![0u8; (ow * oh * 4) as usize];
        let mut mon = Monitor::new(iw, ih, ow, oh);
        let ours = time(rounds, || {
            mon.resize(&src, &mut dst);
            black_box(&dst);
        });
        let mut peer = |filter| {
            let mut resizer = Resizer::new();
            let opts = ResizeOptions::new()
                .resize_alg(ResizeAlg::Convolution(filter))
                .use_alpha(false);
            time(rounds, || {
                let s = ImageRef::new(iw, ih, &src, PixelType::U8x4).unwrap();
                let mut d = Image::from_slice_u8(ow, oh, &mut dst, PixelType::U8x4).unwrap();
                resizer.resize(&s, &mut d, &opts).unwrap();
                black_box(&dst);
            })
        };
        let fir_box = peer(FilterType::Box);
        let fir_bil = peer(FilterType::Bilinear);
        println!(
            "{:<11} {:>30} {:>30} {:>30}",
            format!("{iw}x{ih}"),
            fmt(ours),
            fmt(fir_box),
            fmt(fir_bil)
        );
    }
}
