//! Issue 11, requirement 1: the frame pools of a [`Host`]'s shows are shared per frame size,
//! each show holding a quota (what its own pool would have held): the frames made are what the
//! shows hold together, one show over its quota ends as it would alone, and frames never pass
//! from one show to another.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{bounded, Collect, Counter, H, W};
use framepipe_core::{Frame, FrameCtx, FrameMut, Rational, Result, Sink, Source, VideoInfo};
use framepipe_runtime::{Host, Options, Pipeline, Prepared, ShowResult};

const THREADS: usize = 2;

fn show(source: Box<dyn Source>, sink: Box<dyn Sink>, pace: Option<u32>) -> Prepared {
    Pipeline::new(("src".into(), source), vec![], ("out".into(), sink))
        .prepare(Options {
            threads: THREADS,
            pace: pace.map(|fps| Rational::new(fps, 1)),
            ..Options::default()
        })
        .expect("prepares")
}

fn counter(salt: u32, frames: u64, fps: u32) -> Box<dyn Source> {
    Box::new(Counter {
        salt,
        frames,
        fps,
        next: 0,
    })
}

/// `frames` frames of `w`x`h`, every pixel `salt + frame number`.
struct Sized {
    w: u32,
    h: u32,
    salt: u32,
    frames: u64,
    next: u64,
}

impl Source for Sized {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: self.w,
            height: self.h,
            rate: Rational::new(100, 1),
        }
    }
    fn len_hint(&self) -> Option<u64> {
        Some(self.frames)
    }
    fn fill(&mut self, _ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        if self.next >= self.frames {
            return Ok(false);
        }
        frame.words_mut().fill(self.salt + self.next as u32);
        self.next += 1;
        Ok(true)
    }
}

/// A sink that keeps every frame it is given (a clone of each), which no plan counts on: its
/// show runs out of frames after its pool's capacity.
#[derive(Clone, Default)]
struct Hoard {
    kept: Arc<Mutex<Vec<Frame>>>,
}

impl Sink for Hoard {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, _ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        self.kept.lock().unwrap().push(frame.clone());
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

fn ok_frames(r: &ShowResult) -> u64 {
    r.result
        .as_ref()
        .unwrap_or_else(|e| panic!("{}: {e}", r.name))
        .frames
}

#[test]
fn shows_of_one_size_share_one_pool_and_it_holds_what_they_hold_together() {
    // Three paced shows of W x H and one of another size, 1 s each (at 25 fps, a period of
    // 40 ms: a frame's work, even on a loaded machine, is far shorter).
    const FRAMES: u64 = 25;
    let sinks: Vec<Collect> = (0..3).map(|_| Collect::default()).collect();
    let other = Collect::any_size();
    let mut host = Host::new(THREADS);
    for (k, sink) in sinks.iter().enumerate() {
        let salt = 1000 * (k as u32 + 1);
        let p = show(counter(salt, FRAMES, 25), Box::new(sink.clone()), Some(25));
        host.add(format!("show-{k}"), p).unwrap();
    }
    let source = Box::new(Sized {
        w: 2 * W,
        h: H,
        salt: 9000,
        frames: FRAMES,
        next: 0,
    });
    host.add("wide", show(source, Box::new(other.clone()), Some(25)))
        .unwrap();
    let pools = host.pools();
    assert!(
        pools.stats().iter().all(|s| s.allocated == 0),
        "nothing made before the run"
    );
    let results = bounded(Duration::from_secs(30), move || host.run(|_| {}));
    for r in &results {
        assert_eq!(ok_frames(r), FRAMES, "{}", r.name);
    }
    // Every show got its own frames, every one, in order: none came from another show.
    for (k, sink) in sinks.iter().enumerate() {
        let salt = 1000 * (k as u32 + 1);
        let want: Vec<u32> = (salt..salt + FRAMES as u32).collect();
        assert_eq!(sink.values(), want, "show-{k}");
    }
    assert_eq!(
        other.values(),
        (9000..9000 + FRAMES as u32).collect::<Vec<_>>()
    );

    let stats = pools.stats();
    assert_eq!(stats.len(), 2, "one pool per frame size: {stats:?}");
    let (small, wide) = (&stats[0], &stats[1]);
    assert_eq!((small.width, small.height, small.shows), (W, H, 3));
    assert_eq!((wide.width, wide.height, wide.shows), (2 * W, H, 1));
    for s in &stats {
        assert_eq!(s.in_use, 0, "every frame back: {s:?}");
        // Paced shows begin each frame just in time: together they held no more than what
        // the filler made ahead of need (their frames waiting for a deadline, the workers').
        assert!(s.peak >= 1 && s.peak <= s.target, "{s:?}");
        // Made: what the shows held together (the filler's target, the spare it keeps, what
        // was held at once), not the sum of the quotas.
        assert!(
            s.allocated <= s.target.max(s.peak) + THREADS,
            "more frames made than needed: {s:?}"
        );
    }
    assert!(
        small.allocated < small.capacity,
        "three shows' pool made all {} frames of their quotas: {small:?}",
        small.capacity
    );
    // The same shows each alone would each have made their own pool, their quota each.
    assert_eq!(small.capacity, 3 * wide.capacity);
}

#[test]
fn a_show_over_its_quota_ends_as_it_would_alone_while_the_others_go_on() {
    // Alone: a show whose sink keeps every frame runs out of its pool.
    let alone = show(counter(1, 1000, 100), Box::new(Hoard::default()), None)
        .run()
        .expect_err("a hoarding sink exhausts its pool");
    let alone = alone.to_string();
    assert!(alone.contains("exhausted"), "{alone}");

    // In a host: the same show fails the same way, sharing its pool with a paced show of the
    // same size that goes on to its end.
    let hoard = Hoard::default();
    let steady = Collect::default();
    let mut host = Host::new(THREADS);
    host.add(
        "hoarder",
        show(counter(1, 1000, 100), Box::new(hoard.clone()), None),
    )
    .unwrap();
    host.add(
        "steady",
        show(counter(500, 30, 100), Box::new(steady.clone()), Some(100)),
    )
    .unwrap();
    let pools = host.pools();
    let ended: Arc<Mutex<Vec<String>>> = Arc::default();
    let order = Arc::clone(&ended);
    let results = bounded(Duration::from_secs(30), move || {
        host.run(move |r| order.lock().unwrap().push(r.name.clone()))
    });
    let e = results[0]
        .result
        .as_ref()
        .expect_err("the hoarder goes over its quota");
    assert_eq!(
        e.to_string(),
        alone,
        "as alone: its own pool's end, its quota"
    );
    assert_eq!(ok_frames(&results[1]), 30);
    assert_eq!(steady.values(), (500..530).collect::<Vec<_>>());
    assert_eq!(
        *ended.lock().unwrap(),
        ["hoarder", "steady"],
        "the steady show went on after the hoarder ended"
    );
    let stats = pools.stats();
    assert_eq!((stats.len(), stats[0].shows), (1, 2));
    let kept = hoard.kept.lock().unwrap().len();
    assert!(
        stats[0].peak >= kept && kept >= 1,
        "the hoarder held {kept} frames: {stats:?}"
    );
}

/// Real elements (framepipe-io's and framepipe-effects'), as the CLI makes them.
fn registry() -> framepipe_core::Registry {
    let mut r = framepipe_core::Registry::new();
    framepipe_io::register(&mut r);
    framepipe_effects::register(&mut r);
    r
}

fn props(given: &[(&str, &str)]) -> Vec<(String, String)> {
    given
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `testsrc WxH frames=N rate=FPS`.
fn testsrc(r: &framepipe_core::Registry, w: u32, h: u32, frames: u64, fps: u32) -> Box<dyn Source> {
    let given = props(&[
        ("width", &w.to_string()),
        ("height", &h.to_string()),
        ("frames", &frames.to_string()),
        ("rate", &fps.to_string()),
    ]);
    match r.create("testsrc", &given).expect("testsrc") {
        framepipe_core::Element::Source(s) => s,
        _ => panic!("testsrc is not a source"),
    }
}

fn effect(
    r: &framepipe_core::Registry,
    name: &str,
    given: &[(&str, &str)],
) -> framepipe_runtime::EffectStage {
    match r.create(name, &props(given)).expect(name) {
        framepipe_core::Element::Effect(f) => {
            let mode = f.default_mode();
            framepipe_runtime::EffectStage::new(f, mode)
        }
        _ => panic!("{name} is not an effect"),
    }
}

/// What the master sink of a show saw of its frames' pool at two frames late in the run
/// (lock-free reads of the frame's own pool: no lock, no allocation on the output thread).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct PoolMark {
    allocated: usize,
    grown_on_acquire: usize,
}

#[derive(Clone)]
struct MarkPools {
    at: [u64; 2],
    marks: Arc<Mutex<[Option<PoolMark>; 2]>>,
    frames: Arc<std::sync::atomic::AtomicU64>,
}

impl MarkPools {
    fn new(at: [u64; 2]) -> Self {
        MarkPools {
            at,
            marks: Arc::default(),
            frames: Arc::default(),
        }
    }
}

impl Sink for MarkPools {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        self.frames
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(k) = self.at.iter().position(|&a| a == ctx.seq) {
            let pool = frame.pool();
            assert!(pool.quota().is_some(), "a frame of the host's shared pool");
            let mark = PoolMark {
                allocated: pool.allocated(),
                grown_on_acquire: pool.sharing().grown_on_acquire,
            };
            self.marks.lock().unwrap()[k] = Some(mark);
        }
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn issue_11_at_1000_fps_no_frame_is_made_after_the_warm_up() {
    // Three shows of `testsrc 64x64 ! stamp` at 1000 fps in one host, 2.5 s each: once warm
    // (1 s), their shared pool makes no frame any more, neither by the filler nor by a
    // worker's acquire (an allocation and page faults on the frame path).
    const FPS: u32 = 1000;
    const FRAMES: u64 = 2500;
    let r = registry();
    let sinks: Vec<MarkPools> = (0..3).map(|_| MarkPools::new([1000, 2400])).collect();
    let mut host = Host::new(THREADS);
    for (k, sink) in sinks.iter().enumerate() {
        let p = Pipeline::new(
            ("testsrc".into(), testsrc(&r, 64, 64, FRAMES, FPS)),
            vec![("stamp".into(), effect(&r, "stamp", &[]))],
            ("marks".into(), Box::new(sink.clone())),
        )
        .prepare(Options {
            threads: THREADS,
            pace: Some(Rational::new(FPS, 1)),
            ..Options::default()
        })
        .expect("prepares");
        host.add(format!("fast-{k}"), p).unwrap();
    }
    let pools = host.pools();
    let results = bounded(Duration::from_secs(30), move || host.run(|_| {}));
    for r in &results {
        assert_eq!(ok_frames(r), FRAMES, "{}", r.name);
    }
    let stats = pools.stats();
    assert_eq!(stats.len(), 1, "{stats:?}");
    let s = &stats[0];
    eprintln!("pool after the run: {s:?}");
    for (k, sink) in sinks.iter().enumerate() {
        let [warm, late] = *sink.marks.lock().unwrap();
        let (warm, late) = (
            warm.expect("frame 1000 seen"),
            late.expect("frame 2400 seen"),
        );
        eprintln!("fast-{k}: at frame 1000 {warm:?}, at 2400 {late:?}");
        assert_eq!(
            late.grown_on_acquire, warm.grown_on_acquire,
            "fast-{k}: a worker's acquire made a frame after the warm-up: {s:?}"
        );
        assert_eq!(
            late.allocated, warm.allocated,
            "fast-{k}: frames made between frames 1000 and 2400: {s:?}"
        );
    }
    assert_eq!(s.grown_on_acquire, 0, "{s:?}");
    assert!(
        s.allocated < s.capacity,
        "the shows' pool made every frame of their quotas: {s:?}"
    );
}
