//! No allocation per frame: a counting allocator (per thread, so other tests running at the same
//! time do not count) around the steady-state frame loop of each source and sink.

mod common;
use common::*;

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

/// Allocations made so far by this thread.
fn allocs() -> u64 {
    framepipe_testkit::this_thread()
}

/// Runs `src` into `sink` for `warm` frames, then counts allocations over `n` more.
fn allocations_per_run(
    mut src: Box<dyn framepipe_core::Source>,
    mut sink: Box<dyn framepipe_core::Sink>,
    warm: u64,
    n: u64,
) -> u64 {
    let info = src.info();
    sink.start(info).unwrap();
    let pool = framepipe_core::FramePool::new(info.width, info.height, 2);
    let mut step = |seq: u64| {
        let mut f = pool.acquire().unwrap();
        assert!(
            src.fill(&ctx(src.as_ref(), seq), &mut f).unwrap(),
            "frame {seq}"
        );
        sink.consume(&ctx(src.as_ref(), seq), &f.freeze()).unwrap();
    };
    for seq in 0..warm {
        step(seq);
    }
    let before = allocs();
    for seq in warm..warm + n {
        step(seq);
    }
    let used = allocs() - before;
    sink.finish().unwrap();
    used
}

#[test]
fn sources_and_sinks_do_not_allocate_per_frame() {
    // The counter counts (so that a zero below means something).
    let before = allocs();
    let v = std::hint::black_box(vec![1u8; 64]);
    assert_eq!(allocs() - before, 1);
    drop(v);
    let d = dir("no-alloc");
    let size = [("width", "64"), ("height", "48")];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut v = size.to_vec();
        v.extend_from_slice(extra);
        v
    };
    for pattern in ["bars", "noise", "counter", "gradient", "solid"] {
        let src = source(
            "testsrc",
            &with(&[("pattern", pattern), ("counter", "true")]),
        );
        assert_eq!(
            allocations_per_run(src, sink("nullsink", &[]), 2, 20),
            0,
            "testsrc {pattern}"
        );
    }
    for format in ["rgba", "bgra", "rgb24"] {
        let path = d.join(format!("f.{format}"));
        let src = source("testsrc", &with(&[("pattern", "noise")]));
        let snk = sink("rawsink", &[("location", s(&path)), ("format", format)]);
        assert_eq!(allocations_per_run(src, snk, 2, 20), 0, "rawsink {format}");
        let mut props = with(&[("format", format)]);
        props.push(("location", s(&path)));
        let src = source("rawsrc", &props);
        assert_eq!(
            allocations_per_run(src, sink("nullsink", &[]), 2, 18),
            0,
            "rawsrc {format}"
        );
    }
    for chroma in ["420", "444"] {
        let path = d.join(format!("f{chroma}.y4m"));
        let src = source("testsrc", &with(&[("pattern", "noise")]));
        let snk = sink("y4msink", &[("location", s(&path)), ("chroma", chroma)]);
        assert_eq!(allocations_per_run(src, snk, 2, 20), 0, "y4msink {chroma}");
        let src = source("y4msrc", &[("location", s(&path))]);
        assert_eq!(
            allocations_per_run(src, sink("nullsink", &[]), 2, 18),
            0,
            "y4msrc {chroma}"
        );
    }
    let src = source(
        "ffmpegsrc",
        &[
            ("location", "testsrc2=size=64x48:rate=25"),
            ("format", "lavfi"),
            ("frames", "30"),
        ],
    );
    let snk = sink(
        "ffmpegsink",
        &[
            ("location", s(&d.join("f.nut"))),
            ("codec", "ffv1"),
            ("pix-fmt", ""),
        ],
    );
    assert_eq!(
        allocations_per_run(src, snk, 2, 20),
        0,
        "ffmpegsrc -> ffmpegsink"
    );
}

/// `on-end=loop`: a rewind of testsrc, or of rawsrc / y4msrc on a regular file (a seek), and the
/// frames after it allocate nothing (ffmpegsrc's rewind starts a process, which does).
#[test]
fn file_sources_rewind_without_allocating() {
    let d = dir("no-alloc-rewind");
    let size = [("width", "64"), ("height", "48")];
    let noise = || {
        let mut p = size.to_vec();
        p.extend_from_slice(&[("pattern", "noise"), ("frames", "3")]);
        source("testsrc", &p)
    };
    let raw = d.join("f.rgba");
    let y4m = d.join("f.y4m");
    let (n, err) = pump(
        noise().as_mut(),
        sink("rawsink", &[("location", s(&raw))]).as_mut(),
        100,
    );
    assert_eq!((n, err), (3, None));
    let (n, err) = pump(
        noise().as_mut(),
        sink("y4msink", &[("location", s(&y4m))]).as_mut(),
        100,
    );
    assert_eq!((n, err), (3, None));
    let mut raw_props = size.to_vec();
    raw_props.push(("location", s(&raw)));
    for (what, mut src) in [
        ("testsrc", noise()),
        ("rawsrc", source("rawsrc", &raw_props)),
        ("y4msrc", source("y4msrc", &[("location", s(&y4m))])),
    ] {
        let info = src.info();
        let pool = framepipe_core::FramePool::new(info.width, info.height, 2);
        let mut seq = 0;
        let mut to_end = |src: &mut Box<dyn framepipe_core::Source>| {
            let mut n = 0;
            loop {
                let mut f = pool.acquire().unwrap();
                seq += 1;
                if !src.fill(&ctx(src.as_ref(), seq - 1), &mut f).unwrap() {
                    return n;
                }
                n += 1;
            }
        };
        assert_eq!(to_end(&mut src), 3, "{what}");
        let before = allocs();
        for _ in 0..3 {
            assert!(src.rewind().unwrap(), "{what}");
            assert_eq!(to_end(&mut src), 3, "{what}");
        }
        assert_eq!(allocs() - before, 0, "{what}: allocations across 3 loops");
    }
}
