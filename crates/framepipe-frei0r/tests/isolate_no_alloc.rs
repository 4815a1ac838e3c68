//! Issue #11: no heap allocation per frame in the parent of an isolated plugin: a counting global
//! allocator watches the frame loop of an isolated filter, BGRA8888 filter and mixer2, on frames
//! of a heap pool (copied through the instance's memory) and of a shared pool (zero-copy: nothing
//! copied either) (the child is another process; its own loop allocates nothing either, see
//! src/isolate/host.rs).

use std::path::PathBuf;

use framepipe_core::{Element, FrameCtx, FramePool, InlineSlices, Rational, Registry, VideoInfo};

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

// issue #11
#[test]
fn the_isolated_frame_loop_does_not_allocate() {
    framepipe_frei0r::isolate::set_host_program(PathBuf::from(env!("CARGO_BIN_EXE_frei0r-host")));
    let (w, h) = (160u32, 120u32);
    let mut r = Registry::new();
    framepipe_frei0r::register_from(&mut r, &[PathBuf::from("/usr/lib/frei0r-1")]);
    let info = VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(25, 1),
    };
    let iso = [("isolate".to_string(), "true".to_string())];
    let mut effects = Vec::new();
    for name in ["frei0r-glow", "frei0r-cartoon"] {
        let Element::Effect(mut f) = r.create(name, &iso).unwrap() else {
            panic!("not an effect")
        };
        f.negotiate(info).unwrap();
        effects.push(f.instantiate().unwrap());
    }
    let Element::Mixer(mut m) = r.create("frei0r-multiply", &iso).unwrap() else {
        panic!("not a mixer")
    };
    m.negotiate(&[info, info]).unwrap();
    let mut mixer = m.instantiate().unwrap();
    let shared = FramePool::lazy_shared(w, h, 4).unwrap();
    shared.fill(4);
    for pool in [FramePool::new(w, h, 4), shared] {
        frame_loop(&mut effects, mixer.as_mut(), &pool, info);
    }
    assert!(framepipe_frei0r::isolate::summaries()
        .iter()
        .all(|s| s.crashes + s.stalls == 0));
}

fn frame_loop(
    effects: &mut [Box<dyn framepipe_core::Effect>],
    mixer: &mut dyn framepipe_core::Mixer,
    pool: &FramePool,
    info: VideoInfo,
) {
    let copied_before: u64 = framepipe_frei0r::isolate::summaries()
        .iter()
        .map(|s| s.bytes_copied)
        .sum();
    let mut source = pool.acquire().unwrap();
    for (i, b) in source.data_mut().iter_mut().enumerate() {
        *b = (i * 13) as u8;
    }
    let source = source.freeze();
    let mut step = |k: u64| {
        let ctx = FrameCtx::new(k, info.rate.frame_time_ns(k));
        let mut frame = source.clone();
        for e in effects.iter_mut() {
            let mut o = pool.acquire().unwrap();
            e.process(&ctx, &frame, &mut o, &InlineSlices).unwrap();
            frame = o.freeze();
        }
        let mut o = pool.acquire().unwrap();
        mixer
            .process(&ctx, &[&frame, &source], &mut o, &InlineSlices)
            .unwrap();
        o.data()[0]
    };
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
        "allocations in 39 frames (checksum {sum}), {} pool",
        if pool.is_shared() { "shared" } else { "heap" }
    );
    let copied: u64 = framepipe_frei0r::isolate::summaries()
        .iter()
        .map(|s| s.bytes_copied)
        .sum::<u64>()
        - copied_before;
    if pool.is_shared() {
        assert_eq!(copied, 0, "bytes copied in 40 frames of a shared pool");
    } else {
        assert!(copied > 0, "the heap pool's frames are copied");
    }
}
