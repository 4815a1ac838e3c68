//! Allocations per frame of the native effects, counted per thread around the steady state.

use std::cell::Cell;

use framepipe_core::{
    Element, Frame, FrameCtx, FramePool, InlineSlices, PropValue, Rational, Registry, SliceRunner,
    VideoInfo,
};

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

/// Allocations made so far by this thread.
fn allocs() -> u64 {
    framepipe_testkit::this_thread()
}

/// Allocations made by effect `name` over 10 frames of 64x48 after 2 warm-up frames.
fn allocations(name: &str, props: &[(&str, &str)]) -> u64 {
    allocations_at(name, props, 64, 48)
}

/// Allocations made by effect `name` over 10 frames of `w` x `h` after 2 warm-up frames.
fn allocations_at(name: &str, props: &[(&str, &str)], w: u32, h: u32) -> u64 {
    let mut r = Registry::new();
    framepipe_effects::register(&mut r);
    let given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let Element::Effect(mut f) = r.create(name, &given).unwrap() else {
        panic!("{name} is not an effect")
    };
    let input = VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(25, 1),
    };
    let out = f.negotiate(input).unwrap();
    let mut e = f.instantiate().unwrap();
    let pool_in = FramePool::new(w, h, 1);
    let pool_out = FramePool::new(out.width, out.height, 1);
    let src = pool_in.acquire().unwrap().freeze();
    let mut count = 0;
    for seq in 0..12u64 {
        let mut dst = pool_out.acquire().unwrap();
        let before = allocs();
        let ctx = FrameCtx::new(seq, 0);
        e.process(&ctx, &src, &mut dst, &InlineSlices).unwrap();
        if seq >= 2 {
            count += allocs() - before;
        }
    }
    count
}

#[test]
fn invert_and_stamp_do_not_allocate_per_frame() {
    let before = allocs();
    let v = std::hint::black_box(vec![1u8; 64]);
    assert_eq!(allocs() - before, 1, "the counter counts");
    drop(v);
    assert_eq!(allocations("invert", &[]), 0);
    assert_eq!(allocations("stamp", &[]), 0);
    assert_eq!(
        allocations("stamp", &[("what", "value"), ("value", "-12.5")]),
        0
    );
    // Same size: scale only copies.
    assert_eq!(
        allocations("scale", &[("width", "64"), ("height", "48")]),
        0
    );
}

#[test]
fn scale_allocates_only_small_per_line_buffers() {
    // fast_image_resize computes its filter coefficients on each call: about one small
    // allocation per output row and column (measured: out_w + out_h + 6), never a frame-sized
    // buffer. Bounded here so that a change (better or worse) shows.
    for (w, h, ow, oh) in [
        (64u32, 48u32, 32u32, 24u32),
        (320, 240, 160, 120),
        (320, 240, 640, 480),
    ] {
        for alg in ["box", "bilinear", "lanczos3"] {
            let props = [
                ("width", ow.to_string()),
                ("height", oh.to_string()),
                ("algorithm", alg.to_string()),
            ];
            let props: Vec<(&str, &str)> = props.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let n = allocations_at("scale", &props, w, h) / 10;
            eprintln!("scale {alg} {w}x{h} -> {ow}x{oh}: {n} allocations per frame");
            assert!(
                n as u32 <= ow + oh + 16,
                "scale {alg}: {n} allocations per frame"
            );
        }
    }
}

#[test]
fn monitor_does_not_allocate_per_frame() {
    // Not after the first frame, and not on it either: everything is made at instantiation.
    assert_eq!(
        allocations_at("monitor", &[("width", "20"), ("height", "15")], 640, 360),
        0
    );
    assert_eq!(allocations_at("monitor", &[], 64, 48), 0);
}

/// Runs the slices one after another on this thread, in reverse order (so the allocation
/// counter, which is per thread, sees the slicing machinery too).
struct Reverse(Cell<usize>);
impl SliceRunner for Reverse {
    fn workers(&self) -> usize {
        4
    }
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        self.0.set(self.0.get() + n);
        (0..n).rev().for_each(job);
    }
}

#[test]
fn mix_does_not_allocate_per_frame_sliced_or_not() {
    let mut r = Registry::new();
    framepipe_effects::register(&mut r);
    let (w, h) = (1024, 512);
    let pool = FramePool::new(w, h, 8);
    let inputs: Vec<Frame> = (0..4).map(|_| pool.acquire().unwrap().freeze()).collect();
    let refs: Vec<&Frame> = inputs.iter().collect();
    let slices = Reverse(Cell::new(0));
    let runners: [&dyn SliceRunner; 2] = [&InlineSlices, &slices];
    for mode in ["layers", "crossfade"] {
        for runner in runners {
            let given = vec![("mode".to_string(), mode.to_string())];
            let Element::Mixer(mut f) = r.create("mix", &given).unwrap() else {
                panic!("mix is not a mixer")
            };
            let info = VideoInfo {
                width: w,
                height: h,
                rate: Rational::new(25, 1),
            };
            f.negotiate(&[info; 4]).unwrap();
            let mut m = f.instantiate().unwrap();
            let before = allocs();
            for seq in 0..5u64 {
                let mut out = pool.acquire().unwrap();
                // A live change between frames, as a fader or an oscillator makes them.
                m.set_property("fader", &PropValue::Float(seq as f64 / 5.0))
                    .unwrap();
                m.set_property("opacity-2", &PropValue::Float(seq as f64 / 5.0))
                    .unwrap();
                let ctx = FrameCtx::new(seq, 0);
                m.process(&ctx, &refs, &mut out, runner).unwrap();
            }
            assert_eq!(allocs() - before, 0, "mix mode={mode}");
        }
    }
    assert!(slices.0.get() > 5, "the sliced runs were not sliced");
}
