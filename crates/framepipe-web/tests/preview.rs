//! The `webpreview` sink: `consume` allocates nothing after the first frame (it only copies
//! under a `try_lock`), and the `fp-web-jpeg` thread publishes a JPEG of the frame's size.

use std::time::{Duration, Instant};

use framepipe_core::{Element, FrameCtx, FramePool, Rational, Registry, VideoInfo};

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

/// The width and height in a baseline JPEG's SOF0 segment.
fn jpeg_size(j: &[u8]) -> Option<(u16, u16)> {
    let at = j.windows(2).position(|w| w == [0xFF, 0xC0])?;
    let b = &j[at + 5..at + 9];
    Some((
        u16::from_be_bytes([b[2], b[3]]),
        u16::from_be_bytes([b[0], b[1]]),
    ))
}

#[test]
fn webpreview_consume_does_not_allocate_and_publishes_jpegs() {
    let slot = framepipe_web::PreviewSlot::new();
    let counters = std::sync::Arc::new(framepipe_web::WebCounters::default());
    let mut r = Registry::new();
    framepipe_web::preview::register(&mut r, std::sync::Arc::clone(&slot), counters);
    let Element::Sink(mut sink) = r.create("webpreview", &[]).unwrap() else {
        panic!("webpreview is a sink")
    };
    let (w, h) = (64, 32);
    sink.start(VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(30, 1),
    })
    .unwrap();
    let pool = FramePool::new(w, h, 1);
    let mut f = pool.acquire().unwrap();
    f.data_mut().fill(200);
    let frame = f.freeze();
    let ctx = FrameCtx::new(0, 0);
    sink.consume(&ctx, &frame).unwrap();
    // Frames 1..: each copied, the sink pacing itself at 10 a second; none allocates.
    let mut allocs = 0;
    let start = Instant::now();
    let mut seq = 1;
    while start.elapsed() < Duration::from_millis(450) {
        let before = framepipe_testkit::this_thread();
        sink.consume(&FrameCtx::new(seq, 0), &frame).unwrap();
        allocs += framepipe_testkit::this_thread() - before;
        seq += 1;
    }
    assert_eq!(allocs, 0, "allocations in consume over {seq} frames");
    // Each consume that copies lasts a period: the leaky branch is busy, the graph skips.
    assert!(
        seq <= 6,
        "{seq} frames taken in 450 ms: the sink does not pace itself"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while slot.seq() < 2 {
        assert!(Instant::now() < deadline, "no JPEGs published");
        std::thread::sleep(Duration::from_millis(10));
    }
    // At most 10 a second: ~5 in 450 ms, never one per frame.
    assert!(
        slot.seq() <= 6,
        "{} images for {seq} frames in 450 ms",
        slot.seq()
    );
    let (_, jpeg) = slot.latest();
    assert_eq!(&jpeg[..2], &[0xFF, 0xD8], "a JPEG");
    assert_eq!(jpeg_size(&jpeg), Some((w as u16, h as u16)));
    sink.finish().unwrap();
}
