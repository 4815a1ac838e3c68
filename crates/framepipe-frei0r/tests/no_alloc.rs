//! No heap allocation per frame in the frei0r host: a counting global allocator watches the
//! frame loop of an RGBA8888 filter, a BGRA8888 filter (scratch-buffer path), a source, and
//! (issue #8) an RGBA8888 mixer2, a BGRA8888 mixer2 (one scratch buffer per input) and a mixer3.

use std::path::PathBuf;

use framepipe_core::{Element, FrameCtx, FramePool, InlineSlices, Rational, Registry, VideoInfo};

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

#[test]
fn the_frame_loop_does_not_allocate() {
    let (w, h) = (160u32, 120u32);
    let mut r = Registry::new();
    framepipe_frei0r::register_from(&mut r, &[PathBuf::from("/usr/lib/frei0r-1")]);
    let info = VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(25, 1),
    };
    let pool = FramePool::new(w, h, 4);
    let given = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let Element::Source(mut src) = r
        .create(
            "frei0r-test_pat_B",
            &given(&[("width", "160"), ("height", "120"), ("frames", "0")]),
        )
        .unwrap()
    else {
        panic!("not a source")
    };
    let mut effects = Vec::new();
    for name in ["frei0r-glow", "frei0r-primaries", "frei0r-vignette"] {
        let Element::Effect(mut f) = r.create(name, &[]).unwrap() else {
            panic!("not an effect")
        };
        f.negotiate(info).unwrap();
        effects.push(f.instantiate().unwrap());
    }
    let mut mixers = Vec::new();
    for name in ["frei0r-multiply", "frei0r-xfade0r", "frei0r-RGB"] {
        let Element::Mixer(mut m) = r.create(name, &[]).unwrap() else {
            panic!("not a mixer")
        };
        let inputs = if name == "frei0r-RGB" { 3 } else { 2 };
        m.negotiate(&vec![info; inputs]).unwrap();
        mixers.push((inputs, m.instantiate().unwrap()));
    }
    let mut step = |k: u64| {
        let ctx = FrameCtx::new(k, info.rate.frame_time_ns(k));
        let mut f = pool.acquire().unwrap();
        assert!(src.fill(&ctx, &mut f).unwrap());
        let source = f.freeze();
        let mut frame = source.clone();
        for e in effects.iter_mut() {
            let mut o = pool.acquire().unwrap();
            e.process(&ctx, &frame, &mut o, &InlineSlices).unwrap();
            frame = o.freeze();
        }
        for (inputs, m) in mixers.iter_mut() {
            let all = [&frame, &source, &source];
            let mut o = pool.acquire().unwrap();
            m.process(&ctx, &all[..*inputs], &mut o, &InlineSlices)
                .unwrap();
            frame = o.freeze();
        }
        frame.data()[0]
    };
    // Warm up (plugins may allocate lazily on their first frame), then count.
    step(0);
    let before = framepipe_testkit::total();
    let mut sum = 0u64;
    for k in 1..40 {
        sum += step(k) as u64;
    }
    let after = framepipe_testkit::total();
    assert_eq!(
        after - before,
        0,
        "allocations in 39 frames (checksum {sum})"
    );
}
