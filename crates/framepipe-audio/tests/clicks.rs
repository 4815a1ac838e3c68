//! The analysis on click tracks made here: one onset per click on the right point, the tempo
//! within ±1 bpm, and no allocation per point or per frame.

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

use std::sync::Arc;

use framepipe_audio::{Analyzer, BandEdges, Feed, Timeline, HOP, RATE};

/// `seconds` of clicks at `bpm` (a 5 ms burst of 1 kHz at 0.8, the first at `offset_s`) over
/// quiet noise; returns the samples and the clicks' first samples.
fn click_track(bpm: f64, seconds: f64, offset_s: f64) -> (Vec<f32>, Vec<usize>) {
    let n = (seconds * RATE as f64) as usize;
    let mut seed = 0x1234_5678u32;
    let mut x: Vec<f32> = (0..n)
        .map(|_| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 * 0.01 - 0.005
        })
        .collect();
    let mut clicks = Vec::new();
    let period = 60.0 / bpm;
    let mut t = offset_s;
    while t < seconds - 0.01 {
        let s0 = (t * RATE as f64).round() as usize;
        clicks.push(s0);
        for i in 0..(RATE as usize / 200) {
            let a = std::f64::consts::TAU * 1000.0 * i as f64 / RATE as f64;
            x[s0 + i] += (0.8 * a.sin()) as f32;
        }
        t += period;
    }
    (x, clicks)
}

fn analyse(x: &[f32]) -> (Vec<bool>, Vec<f32>) {
    let mut an = Analyzer::new(&BandEdges::default());
    let (mut onsets, mut tempo) = (Vec::new(), Vec::new());
    for chunk in x.chunks(512) {
        an.push(chunk, 1, |an| {
            onsets.push(an.point().onset);
            tempo.push(an.point().tempo_bpm);
        });
    }
    (onsets, tempo)
}

#[test]
fn a_click_track_gives_one_onset_per_click_on_its_point() {
    let (x, clicks) = click_track(128.0, 6.0, 0.25);
    let (onsets, _) = analyse(&x);
    let mut found: Vec<usize> = (0..onsets.len()).filter(|&k| onsets[k]).collect();
    // The noise starting from digital silence is an onset too, at the start.
    assert!(found[0] <= 2, "{found:?}");
    found.remove(0);
    assert_eq!(found.len(), clicks.len(), "onsets at points {found:?}");
    for (&k, &s) in found.iter().zip(&clicks) {
        // The first point whose window holds the click ends after it; the onset is taken on
        // it or up to two points (20 ms) later, as the click crosses the window's rising edge.
        let first = s / HOP;
        assert!(
            (first..=first + 2).contains(&k),
            "click at sample {s} (point {first}): onset at point {k}"
        );
    }
}

#[test]
fn the_tempo_settles_within_one_bpm_of_a_click_track() {
    for bpm in [128.0, 90.0, 174.0, 100.0] {
        let (x, _) = click_track(bpm, 10.0, 0.1);
        let (_, tempo) = analyse(&x);
        // After 8 s every estimate is within ±1 bpm.
        for (k, &t) in tempo.iter().enumerate().skip(800) {
            assert!(
                (t as f64 - bpm).abs() <= 1.0,
                "{bpm} bpm: estimate {t} at point {k}"
            );
        }
    }
}

#[test]
fn analysing_and_reading_frames_allocate_nothing() {
    let (x, _) = click_track(120.0, 4.0, 0.1);
    let mut an = Analyzer::new(&BandEdges::default());
    let tl = Arc::new(Timeline::new());
    let feed = Feed::new(Arc::clone(&tl), true, 0);
    // Warm up: the first point and frame.
    an.push(&x[..4096], 1, |an| tl.publish(an.point()));
    let mut cursor = 0;
    feed.frame(0, &mut cursor);
    let before = framepipe_testkit::this_thread();
    an.push(&x[4096..], 1, |an| tl.publish(an.point()));
    let mut onsets = 0;
    for n in 1..100i64 {
        onsets += feed.frame(n * 40_000_000, &mut cursor).onset as u32;
    }
    let allocs = framepipe_testkit::this_thread() - before;
    assert_eq!(allocs, 0, "allocations over {} points", tl.published());
    assert!(onsets >= 7, "{onsets} onsets in 4 s at 120 bpm");
}
