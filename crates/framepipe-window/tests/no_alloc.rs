//! The output thread's part of `windowsink` allocates nothing per frame: a counting allocator
//! (this thread only) around `consume` of 1280x720 frames into a real window on Xvfb, while the
//! window thread draws them. Skipped, with a message, when Xvfb cannot start.
//!
//! The measurement runs in a child process (this test binary again): the window thread lives as
//! long as its process, and Xlib ends a process whose X server goes away, so the X server must
//! outlive the process that opened a window. The parent holds the Xvfb and kills it after the
//! child has exited.

use std::time::Duration;

use framepipe_core::{FrameCtx, FramePool, Rational, Sink, VideoInfo};
use framepipe_testkit::xvfb::Xvfb;
use framepipe_window::{WindowSettings, WindowSink};

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

/// Set in the child that measures.
const CHILD: &str = "FRAMEPIPE_NO_ALLOC_CHILD";

#[test]
fn consume_does_not_allocate_per_frame() {
    if std::env::var_os(CHILD).is_some() {
        measure();
        return;
    }
    let Some(x) = Xvfb::start(1280, 720) else {
        return;
    };
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "consume_does_not_allocate_per_frame",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("DISPLAY", &x.display)
        .output()
        .expect("run the measuring child");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "measuring child failed: {text}");
    let line = text.lines().find(|l| l.starts_with("measured: "));
    assert!(
        line.is_some_and(|l| l.starts_with("measured: 0 allocations")),
        "{text}"
    );
    println!("{}", line.unwrap_or_default());
    drop(x);
}

/// In the child: a window, 300 frames consumed, allocations counted on this thread.
fn measure() {
    let (w, h) = (1280u32, 720u32);
    let pool = FramePool::new(w, h, 6);
    let frames: Vec<_> = (0..3u8)
        .map(|k| {
            let mut f = pool.try_acquire().unwrap();
            f.data_mut().fill(k * 70);
            f.freeze()
        })
        .collect();
    let mut sink = WindowSink::new(
        WindowSettings {
            title: "no-alloc".into(),
            display: String::new(),
            fullscreen: false,
            width: 640,
            height: 360,
            vsync: false,
        },
        None,
    );
    sink.start(VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(60, 1),
    })
    .unwrap();
    let ctx = |seq: u64| FrameCtx::new(seq, 0);
    for seq in 0..20 {
        sink.consume(&ctx(seq), &frames[seq as usize % 3]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    // The counter counts (so that a zero below means something).
    let before = framepipe_testkit::this_thread();
    drop(std::hint::black_box(vec![1u8; 64]));
    assert_eq!(framepipe_testkit::this_thread() - before, 1);
    let before = framepipe_testkit::this_thread();
    for seq in 20..320 {
        sink.consume(&ctx(seq), &frames[seq as usize % 3]).unwrap();
        // Now and then give the window thread time to take a frame, so that both hand-off
        // paths (a shared frame, a copy while the window holds one) are crossed.
        if seq % 4 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let used = framepipe_testkit::this_thread() - before;
    std::thread::sleep(Duration::from_millis(200));
    let drawn = sink
        .window_stats()
        .unwrap()
        .drawn
        .load(std::sync::atomic::Ordering::Relaxed);
    let handoff = sink.handoff_stats();
    sink.finish().unwrap();
    assert_eq!(used, 0, "allocations in 300 consume calls ({handoff:?})");
    assert!(drawn > 0, "the window drew frames ({handoff:?})");
    assert_eq!(handoff.contended, 0);
    println!(
        "measured: {used} allocations in 300 consume calls; {drawn} frames drawn; {handoff:?}"
    );
    // Leave before the harness's teardown; the parent then stops the X server.
    std::process::exit(0);
}
