//! The analysis' cost: µs per 10 ms point (the audio thread's work) and per frame read (the
//! engine's, under the live lock), and allocations per point and per frame (0), over 60 s
//! of a synthetic mix (kick at 128 bpm, a bass line, hats as noise bursts). Run by
//! `scripts/bench-audio`; prints one table.

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

use std::sync::Arc;
use std::time::Instant;

use framepipe_audio::{Analyzer, BandEdges, Feed, Timeline, FFT_SIZE, RATE, SPECTRUM_BINS};

fn mix(seconds: usize) -> Vec<f32> {
    let n = seconds * RATE as usize;
    let mut seed = 1u32;
    (0..n)
        .map(|i| {
            let t = i as f64 / RATE as f64;
            let beat = (t * 128.0 / 60.0).fract() * 60.0 / 128.0;
            let kick = (-beat * 30.0).exp() * (std::f64::consts::TAU * 60.0 * t).sin();
            let bass = 0.2 * (std::f64::consts::TAU * 110.0 * t).sin();
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let noise = (seed >> 8) as f64 / (1u32 << 24) as f64 - 0.5;
            let hat = if (beat * 4.0).fract() < 0.1 {
                0.2 * noise
            } else {
                0.0
            };
            (0.5 * kick + bass + hat) as f32
        })
        .collect()
}

fn main() {
    let runs = 5;
    let x = mix(60);
    let mut per_point = Vec::new();
    let mut per_frame = Vec::new();
    let (mut point_allocs, mut frame_allocs) = (0, 0);
    for _ in 0..runs {
        let mut an = Analyzer::new(&BandEdges::default());
        let tl = Arc::new(Timeline::new());
        an.push(&x[..4800], 1, |an| {
            tl.publish_with(an.point(), an.waveform(), an.spectrum())
        });
        let before = framepipe_testkit::this_thread();
        let start = Instant::now();
        an.push(&x[4800..], 1, |an| {
            tl.publish_with(an.point(), an.waveform(), an.spectrum())
        });
        let took = start.elapsed();
        point_allocs += framepipe_testkit::this_thread() - before;
        per_point.push(took.as_secs_f64() * 1e6 / (an.points() - 10) as f64);
        // Frames at 60 fps over the same minute, each reading its analysis and its arrays
        // (the ISF inputs' waveform and FFT), interleaved with the points as a show reads them.
        let mut an = Analyzer::new(&BandEdges::default());
        let tl = Arc::new(Timeline::new());
        let feed = Feed::new(Arc::clone(&tl), true, 0);
        let (mut wave, mut fft) = (vec![0.0f32; FFT_SIZE], vec![0.0f32; SPECTRUM_BINS]);
        let mut cursor = 0;
        feed.frame(0, &mut cursor);
        let frames = 3600i64;
        let (mut pushed, mut took, mut onsets, mut with_arrays) = (0usize, 0.0f64, 0u32, 0u32);
        for n in 1..frames {
            let t = n * 16_666_667;
            let upto = ((t as u128 * RATE as u128 / 1_000_000_000) as usize).min(x.len());
            if upto > pushed {
                an.push(&x[pushed..upto], 1, |an| {
                    tl.publish_with(an.point(), an.waveform(), an.spectrum())
                });
                pushed = upto;
            }
            let before = framepipe_testkit::this_thread();
            let start = Instant::now();
            let f = feed.frame(t, &mut cursor);
            with_arrays += feed.arrays(&f, &mut wave, &mut fft) as u32;
            took += start.elapsed().as_secs_f64();
            frame_allocs += framepipe_testkit::this_thread() - before;
            onsets += f.onset as u32;
        }
        assert!(
            with_arrays as i64 >= frames - 2,
            "{with_arrays} frames had arrays"
        );
        per_frame.push(took * 1e6 / (frames - 1) as f64);
        assert!(onsets > 100, "{onsets} onsets in a minute at 128 bpm");
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (pm, plo, phi) = stats(&mut per_point);
    let (fm, flo, fhi) = stats(&mut per_frame);
    println!("| what | median µs | min..max µs | allocations |");
    println!("|---|---|---|---|");
    println!("| analysis per 10 ms point (FFT 2048, bands, onset, tempo; published with its arrays) | {pm:.2} | {plo:.2}..{phi:.2} | {point_allocs} over {runs} × 6000 points |");
    println!("| read per frame (Feed::frame + Feed::arrays: 2048 + 1024 floats, 60 fps) | {fm:.3} | {flo:.3}..{fhi:.3} | {frame_allocs} over {runs} × 3599 frames |");
    println!(
        "| analysis per 60 fps frame (1.67 points) | {:.2} | | |",
        pm * 100.0 / 60.0
    );
}
