//! testsrc: every pattern is deterministic per frame, moves where it should, and looks right.

mod common;
use common::*;

fn frames(props: &[(&str, &str)], n: u64) -> Vec<Vec<u8>> {
    let (f, err) = read_all(source("testsrc", props).as_mut(), n);
    assert_eq!(err, None);
    f
}

#[test]
fn every_pattern_is_the_same_for_the_same_frame_number() {
    for pattern in ["bars", "noise", "counter", "gradient", "solid"] {
        for counter in ["false", "true"] {
            let props = [
                ("pattern", pattern),
                ("counter", counter),
                ("width", "96"),
                ("height", "64"),
            ];
            let a = frames(&props, 6);
            let b = frames(&props, 6);
            assert!(
                a == b,
                "{pattern} counter={counter} differs between two runs"
            );
            // Frames 2..6 drawn by a source that starts there (the runtime may ask any seq).
            let mut src = source("testsrc", &props);
            let pool = framepipe_core::FramePool::new(96, 64, 1);
            for seq in [5u64, 2] {
                let mut f = pool.acquire().unwrap();
                assert!(src.fill(&ctx(src.as_ref(), seq), &mut f).unwrap());
                assert!(
                    f.data() == a[seq as usize].as_slice(),
                    "{pattern} frame {seq}"
                );
            }
            let moving = pattern != "solid" || counter == "true";
            assert_eq!(a[0] != a[1], moving, "{pattern} counter={counter}");
            // Every pixel is opaque.
            assert!(a[3].chunks_exact(4).all(|p| p[3] == 255), "{pattern}");
        }
    }
}

#[test]
fn bars_move_by_speed_and_show_eight_colours() {
    let props = [("width", "80"), ("height", "8"), ("speed", "3")];
    let f = frames(&props, 2);
    let row0 = &f[0][..80 * 4];
    let row1 = &f[1][..80 * 4];
    // Frame 1 is frame 0 moved right by 3 pixels.
    assert_eq!(&row1[3 * 4..], &row0[..77 * 4]);
    let mut colours: Vec<&[u8]> = row0.chunks_exact(4).collect();
    colours.dedup();
    assert_eq!(colours.len(), 8);
    assert_eq!(colours[0], [255, 255, 255, 255]);
    // All rows alike.
    assert!(f[0].chunks_exact(80 * 4).all(|r| r == row0));
}

#[test]
fn noise_depends_on_seed_and_looks_random() {
    let a = frames(&[("pattern", "noise"), ("seed", "1")], 1);
    let b = frames(&[("pattern", "noise"), ("seed", "2")], 1);
    assert!(a != b);
    // Roughly uniform: each channel's mean near 127.5 over 640x480 pixels.
    for ch in 0..3 {
        let sum: u64 = a[0].chunks_exact(4).map(|p| p[ch] as u64).sum();
        let mean = sum as f64 / (640.0 * 480.0);
        assert!((mean - 127.5).abs() < 2.0, "channel {ch} mean {mean}");
    }
}

#[test]
fn solid_and_counter_draw_what_they_say() {
    let f = frames(
        &[
            ("pattern", "solid"),
            ("color", "#ff8000"),
            ("width", "16"),
            ("height", "16"),
        ],
        1,
    );
    assert!(f[0].chunks_exact(4).all(|p| p == [255, 128, 0, 255]));
    // The counter pattern: white digits on dark blue, and frame 8 is not frame 1.
    let f = frames(
        &[("pattern", "counter"), ("width", "320"), ("height", "240")],
        9,
    );
    let white = |d: &[u8]| {
        d.chunks_exact(4)
            .filter(|p| *p == [255, 255, 255, 255])
            .count()
    };
    assert!(
        white(&f[8]) > 320 * 240 / 50,
        "digits are not big: {}",
        white(&f[8])
    );
    assert_ne!(f[1], f[8]);
    // counter=true overlays the number in the top-left corner only.
    let plain = frames(
        &[("pattern", "solid"), ("width", "320"), ("height", "240")],
        1,
    );
    let over = frames(
        &[
            ("pattern", "solid"),
            ("width", "320"),
            ("height", "240"),
            ("counter", "true"),
        ],
        1,
    );
    let changed: Vec<usize> = plain[0]
        .chunks_exact(4)
        .zip(over[0].chunks_exact(4))
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, _)| i)
        .collect();
    assert!(!changed.is_empty());
    assert!(
        changed.iter().all(|i| i % 320 < 40 && i / 320 < 40),
        "overlay outside the corner"
    );
}

#[test]
fn frames_and_rate_are_honoured() {
    let mut src = source(
        "testsrc",
        &[
            ("frames", "3"),
            ("rate", "30000/1001"),
            ("width", "8"),
            ("height", "8"),
        ],
    );
    assert_eq!(src.info().rate, framepipe_core::Rational::new(30000, 1001));
    assert_eq!(src.len_hint(), Some(3));
    assert_eq!(read_all(src.as_mut(), 100).0.len(), 3);
    let e = source_err("testsrc", &[("rate", "fast")]);
    assert_eq!(
        e,
        "bad value 'fast' for property 'rate' of testsrc: expected a positive rate like 30, 25/1 or 30000/1001"
    );
    let e = source_err("testsrc", &[("pattern", "zebra")]);
    assert!(
        e.contains("expected one of: bars, noise, counter, gradient, solid"),
        "{e}"
    );
}
