//! No allocation on the frame path: `fill` of `clip` and `clips` in steady state, across loop
//! points, a live speed change and a deck trigger, counted by a per-thread counting allocator
//! (the decoder thread's work, and FFmpeg's own C allocations, are not on this thread).

use framepipe_core::{Element, FrameCtx, FramePool, PropValue, Props, Source};

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

fn make_clip(dir: &std::path::Path, name: &str) -> String {
    let path = dir.join(name);
    let out = std::process::Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=64x48:rate=30",
        ])
        .args(["-frames:v", "20", "-c:v", "libx264", "-g", "5"])
        .arg(&path)
        .output()
        .expect("ffmpeg on PATH");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path.to_string_lossy().into_owned()
}

fn source(
    desc: framepipe_core::ElementDesc,
    build: fn(&Props) -> framepipe_core::Result<Element>,
    given: &[(&str, &str)],
) -> Box<dyn Source> {
    let given: Vec<(String, String)> = given
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let props = Props::resolve(&desc.name, &desc.props, &given).unwrap();
    match build(&props).unwrap() {
        Element::Source(s) => s,
        other => panic!("{other:?}"),
    }
}

/// Allocations by this thread while `src` gives `n` frames; `at(k, src)` runs before frame k.
fn allocations(src: &mut dyn Source, n: u64, at: &mut dyn FnMut(u64, &mut dyn Source)) -> u64 {
    let info = src.info();
    let pool = FramePool::new(info.width, info.height, 2);
    src.ready().unwrap();
    let step = |seq: u64, src: &mut dyn Source| {
        let mut f = pool.acquire().unwrap();
        let ctx = FrameCtx::new(seq, 0);
        assert!(src.fill(&ctx, &mut f).unwrap(), "frame {seq}");
    };
    for seq in 0..3 {
        step(seq, src);
    }
    let before = framepipe_testkit::this_thread();
    for seq in 3..3 + n {
        at(seq, src);
        step(seq, src);
    }
    framepipe_testkit::this_thread() - before
}

#[test]
fn clip_and_deck_fill_without_allocating() {
    let before = framepipe_testkit::this_thread();
    let v = std::hint::black_box(vec![1u8; 64]);
    assert_eq!(
        framepipe_testkit::this_thread() - before,
        1,
        "the counter counts"
    );
    drop(v);
    let dir = framepipe_testkit::tmpdir("fp-clip-no-alloc");
    let a = make_clip(dir.path(), "a.mp4");
    let b = make_clip(dir.path(), "b.mp4");

    let mut clip = source(
        framepipe_clip::clip::desc(),
        framepipe_clip::clip::build,
        &[("location", &a), ("loop", "true")],
    );
    let used = allocations(clip.as_mut(), 60, &mut |k, s| {
        if k == 30 {
            s.set_property("speed", &PropValue::Float(-1.0)).unwrap();
        }
    });
    assert_eq!(used, 0, "clip: 60 frames, 3 loop points, a speed change");

    let locations = format!("{a},{b}");
    let mut deck = source(
        framepipe_clip::deck::desc(),
        framepipe_clip::deck::build,
        &[("locations", &locations)],
    );
    let used = allocations(deck.as_mut(), 60, &mut |k, s| {
        if k == 20 || k == 45 {
            s.set_property("clip", &PropValue::Int((k / 20 % 2) as i64))
                .unwrap();
        }
    });
    assert_eq!(used, 0, "clips: 60 frames, two triggers");
}
