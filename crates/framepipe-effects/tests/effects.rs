//! Native effects on real pixels, through the registry like a pipeline builds them.

use std::sync::atomic::{AtomicUsize, Ordering};

use framepipe_core::{
    Effect, Element, FrameCtx, FramePool, InlineSlices, PropValue, Rational, Registry, SliceRunner,
    VideoInfo,
};

/// Runs slices on real threads, several at once (stands in for the runtime's worker pool).
struct Threads(usize);
impl SliceRunner for Threads {
    fn workers(&self) -> usize {
        self.0
    }
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..self.0 {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    job(i);
                });
            }
        });
    }
}

fn registry() -> Registry {
    let mut r = Registry::new();
    framepipe_effects::register(&mut r);
    r
}

fn info(w: u32, h: u32) -> VideoInfo {
    VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(25, 1),
    }
}

/// Builds effect `name`, negotiates `input`, returns (output info, one instance).
fn effect(name: &str, props: &[(&str, &str)], input: VideoInfo) -> (VideoInfo, Box<dyn Effect>) {
    let given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let Element::Effect(mut f) = registry().create(name, &given).unwrap() else {
        panic!("{name} is not an effect");
    };
    let out = f.negotiate(input).unwrap();
    (out, f.instantiate().unwrap())
}

/// A frame with a pseudo-random but fixed picture.
fn picture(pool: &FramePool, seed: u32) -> framepipe_core::Frame {
    let mut f = pool.acquire().unwrap();
    let mut x = seed.wrapping_mul(2654435761).max(1);
    for b in f.data_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    f.freeze()
}

fn ctx(seq: u64) -> FrameCtx {
    FrameCtx::new(seq, 0)
}

#[test]
fn scale_gives_the_asked_size_and_derives_the_missing_side() {
    let input = info(64, 48);
    let pool_in = FramePool::new(64, 48, 2);
    let src = picture(&pool_in, 1);
    for (props, want) in [
        (vec![("width", "32"), ("height", "16")], (32, 16)),
        (vec![("width", "128")], (128, 96)),
        (vec![("height", "24"), ("algorithm", "box")], (32, 24)),
        (
            vec![("width", "7"), ("height", "5"), ("algorithm", "lanczos3")],
            (7, 5),
        ),
    ] {
        let (out, mut e) = effect("scale", &props, input);
        assert_eq!((out.width, out.height), want, "{props:?}");
        let pool_out = FramePool::new(out.width, out.height, 1);
        let mut dst = pool_out.acquire().unwrap();
        e.process(&ctx(0), &src, &mut dst, &InlineSlices).unwrap();
        // A real picture came out: not all zero, and not constant.
        let d = dst.data();
        assert!(d.iter().any(|&b| b != d[0]), "{props:?} gave a flat frame");
    }
}

#[test]
fn lanczos3_of_a_flat_colour_stays_flat() {
    let input = info(40, 30);
    let pool_in = FramePool::new(40, 30, 1);
    let mut f = pool_in.acquire().unwrap();
    for px in f.data_mut().chunks_exact_mut(4) {
        px.copy_from_slice(&[200, 17, 99, 255]);
    }
    let src = f.freeze();
    for (w, h) in [(97, 61), (13, 9)] {
        let (out, mut e) = effect(
            "scale",
            &[
                ("width", &w.to_string()),
                ("height", &h.to_string()),
                ("algorithm", "lanczos3"),
            ],
            input,
        );
        let pool_out = FramePool::new(out.width, out.height, 1);
        let mut dst = pool_out.acquire().unwrap();
        e.process(&ctx(0), &src, &mut dst, &InlineSlices).unwrap();
        for (i, px) in dst.data().chunks_exact(4).enumerate() {
            assert_eq!(px, [200, 17, 99, 255], "pixel {i} at {w}x{h}");
        }
    }
}

#[test]
fn invert_twice_is_identity_and_keeps_alpha() {
    let input = info(33, 17);
    let pool = FramePool::new(33, 17, 3);
    let src = picture(&pool, 7);
    let (_, mut e) = effect("invert", &[], input);
    let mut once = pool.acquire().unwrap();
    e.process(&ctx(0), &src, &mut once, &Threads(3)).unwrap();
    for (a, b) in src.data().chunks_exact(4).zip(once.data().chunks_exact(4)) {
        assert_eq!([255 - a[0], 255 - a[1], 255 - a[2], a[3]], b);
    }
    let once = once.freeze();
    let mut twice = pool.acquire().unwrap();
    e.process(&ctx(1), &once, &mut twice, &Threads(2)).unwrap();
    assert_eq!(src.data(), twice.data());
}

#[test]
fn invert_sliced_on_threads_equals_inline() {
    for (w, h) in [(64u32, 64u32), (31, 97), (8, 1), (1, 300)] {
        let pool = FramePool::new(w, h, 3);
        let src = picture(&pool, w + h);
        let (_, mut e) = effect("invert", &[], info(w, h));
        let mut a = pool.acquire().unwrap();
        let mut b = pool.acquire().unwrap();
        e.process(&ctx(0), &src, &mut a, &InlineSlices).unwrap();
        e.process(&ctx(0), &src, &mut b, &Threads(4)).unwrap();
        assert_eq!(a.data(), b.data(), "{w}x{h}");
    }
}

/// Region [x0, x1) x [y0, y1) of an RGBA frame of width `w`, as bytes.
fn region(data: &[u8], w: u32, x0: u32, x1: u32, y0: u32, y1: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for y in y0..y1 {
        let row = (y * w * 4) as usize;
        out.extend_from_slice(&data[row + (x0 * 4) as usize..row + (x1 * 4) as usize]);
    }
    out
}

#[test]
fn stamp_writes_visible_digits_that_differ_per_frame() {
    let (w, h) = (120u32, 40u32);
    let pool = FramePool::new(w, h, 4);
    let mut black = pool.acquire().unwrap();
    black.data_mut().fill(0);
    let black = black.freeze();
    let (_, mut e) = effect(
        "stamp",
        &[
            ("x", "2"),
            ("y", "2"),
            ("scale", "2"),
            ("background", "false"),
        ],
        info(w, h),
    );
    let mut f7 = pool.acquire().unwrap();
    e.process(&ctx(7), &black, &mut f7, &InlineSlices).unwrap();
    let mut f8 = pool.acquire().unwrap();
    e.process(&ctx(8), &black, &mut f8, &InlineSlices).unwrap();
    let white = |d: &[u8]| {
        d.chunks_exact(4)
            .filter(|p| *p == [255, 255, 255, 255])
            .count()
    };
    // Something is drawn, only inside the text's box (1 glyph: 5x7 font pixels of 2x2).
    let lit7 = white(f7.data());
    assert!(lit7 >= 4 * 7, "only {lit7} lit pixels");
    assert_eq!(white(&region(f7.data(), w, 2, 12, 2, 16)), lit7);
    // '7' and '8' are different glyphs.
    assert_ne!(f7.data(), f8.data());
    // The rest of the frame is untouched.
    assert!(region(f7.data(), w, 20, w, 0, h).iter().all(|&b| b == 0));
}

#[test]
fn two_stamps_with_the_same_value_write_the_same_pixels() {
    let (w, h) = (160u32, 60u32);
    let pool = FramePool::new(w, h, 6);
    let a_in = picture(&pool, 1);
    let b_in = picture(&pool, 2);
    let props = [("what", "value"), ("x", "4"), ("y", "4"), ("scale", "3")];
    let (_, mut a) = effect("stamp", &props, info(w, h));
    let (_, mut b) = effect("stamp", &props, info(w, h));
    // The value arrives live, as an oscillator would set it.
    a.set_property("value", &PropValue::Float(0.25)).unwrap();
    b.set_property("value", &PropValue::Float(0.25)).unwrap();
    let mut ao = pool.acquire().unwrap();
    let mut bo = pool.acquire().unwrap();
    a.process(&ctx(3), &a_in, &mut ao, &InlineSlices).unwrap();
    b.process(&ctx(9), &b_in, &mut bo, &InlineSlices).unwrap();
    // "0.250" at scale 3 with a 3-pixel black border: x 1..(4+29*3+3), y 1..(4+21+3).
    let (x1, y1) = (4 + 29 * 3 + 3, 4 + 7 * 3 + 3);
    let ra = region(ao.data(), w, 1, x1, 1, y1);
    assert_eq!(ra, region(bo.data(), w, 1, x1, 1, y1));
    assert!(ra.chunks_exact(4).any(|p| p == [255, 255, 255, 255]));
    // A different value gives different pixels.
    b.set_property("value", &PropValue::Float(0.5)).unwrap();
    b.process(&ctx(3), &b_in, &mut bo, &InlineSlices).unwrap();
    assert_ne!(ra, region(bo.data(), w, 1, x1, 1, y1));
    // Properties that cannot change live say so.
    let e = a
        .set_property("color", &PropValue::Color([1.0, 0.0, 0.0]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("'color' cannot be changed while running"), "{e}");
}
