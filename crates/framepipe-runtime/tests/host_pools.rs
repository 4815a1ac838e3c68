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

// issue #11
#[test]
fn at_1000_fps_no_frame_is_made_after_the_warm_up() {
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

/// Counts the allocations of exactly one frame buffer of [`EDIT_W`] x [`EDIT_H`] (no other
/// test of this file uses that size): every frame of that size made in the process, whatever
/// pool it is for.
struct FrameAllocs;

static EDIT_FRAMES_MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

const EDIT_W: u32 = 96;
const EDIT_H: u32 = 72;

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl std::alloc::GlobalAlloc for FrameAllocs {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.size() == (EDIT_W * EDIT_H * 4) as usize {
            EDIT_FRAMES_MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        // SAFETY: the caller's layout, as given.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: allocated by `alloc` above, with this layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: FrameAllocs = FrameAllocs;

type Build = Box<dyn FnOnce() -> std::result::Result<framepipe_runtime::Graph, String> + Send>;

/// Hands out the next versions in order (the CLI's editor turns edits into graphs; this one
/// checks the engine's side).
struct Script(std::collections::VecDeque<Build>);

impl framepipe_runtime::Editor for Script {
    fn build(
        &mut self,
        _edit: &framepipe_control::GraphEdit,
    ) -> std::result::Result<framepipe_runtime::Graph, String> {
        (self.0.pop_front().expect("a build per edit"))()
    }
    fn settled(&mut self, _accepted: bool) {}
}

/// A frame's number, its quota handle's quota, whether it came from frame 0's pool.
type FramePoolSeen = (u64, Option<usize>, bool);

/// What the master sink of the edited show saw of each frame's pool: its quota handle's quota
/// (`None`: a show's own pool) and whether it is the pool of the show's frame 0.
#[derive(Clone, Default)]
struct PoolOf {
    first: Arc<Mutex<Option<framepipe_core::FramePool>>>,
    seen: Arc<Mutex<Vec<FramePoolSeen>>>,
}

impl Sink for PoolOf {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        let pool = frame.pool();
        let mut first = self.first.lock().unwrap();
        let first = first.get_or_insert_with(|| pool.clone());
        let same = first.same_pool(&pool);
        self.seen
            .lock()
            .unwrap()
            .push((ctx.seq, pool.quota(), same));
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

fn edit_shape(
    pools: &framepipe_runtime::SharedPools,
    w: u32,
    h: u32,
) -> Vec<framepipe_runtime::SharedPoolStats> {
    pools
        .stats()
        .into_iter()
        .filter(|s| (s.width, s.height) == (w, h))
        .collect()
}

/// Waits until the pools of `w`x`h` have `holders` quota handles in all (a replaced version's
/// is given back once it is dropped, on the edit thread).
fn wait_holders(pools: &framepipe_runtime::SharedPools, w: u32, h: u32, holders: usize) {
    let t0 = std::time::Instant::now();
    while edit_shape(pools, w, h)
        .iter()
        .map(|s| s.holders)
        .sum::<usize>()
        != holders
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the replaced version's quota was not given back: {:?}",
            pools.stats()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

// issue #11
#[test]
fn a_live_edit_in_a_host_takes_its_frames_from_the_shared_pools() {
    use framepipe_control::{command_queue, Command, GraphEdit, Outcome};
    use framepipe_runtime::{Graph, Node, NodeKind, OnEnd};
    const FPS: u32 = 100;
    const FRAMES: u64 = 300;
    let (w, h) = (EDIT_W, EDIT_H);
    let r = Arc::new(registry());
    let node = |r: &framepipe_core::Registry,
                name: &str,
                element: &str,
                given: &[(&str, &str)],
                input: usize,
                keep: bool| {
        let mut n = Node::new(
            name,
            NodeKind::Effect(effect(r, element, given)),
            vec![input],
        );
        n.keep = keep;
        n
    };
    let running = |name: &str, sink: bool, inputs: Vec<usize>| {
        Node::new(name, NodeKind::Running { sink }, inputs)
    };
    let paced = Options {
        threads: THREADS,
        pace: Some(Rational::new(FPS, 1)),
        ..Options::default()
    };
    // The edited show: testsrc ! invert name=a ! out.
    let out = PoolOf::default();
    let mut edited = Graph::new(vec![
        Node::new(
            "src",
            NodeKind::Source {
                source: testsrc(&r, w, h, FRAMES, FPS),
                on_end: OnEnd::Stop,
            },
            vec![],
        ),
        node(&r, "a", "invert", &[], 0, false),
        Node::new(
            "out",
            NodeKind::Sink {
                sink: Box::new(out.clone()),
                master: true,
            },
            vec![1],
        ),
    ])
    .unwrap()
    .prepare(paced)
    .unwrap();
    // Edit 1 (`add stamp after a`): the same frame size. Edit 2 (`replace`): a 48x36 stage.
    let (r1, r2) = (Arc::clone(&r), Arc::clone(&r));
    let builds: Vec<Build> = vec![
        Box::new(move || {
            Graph::new(vec![
                running("src", false, vec![]),
                node(&r1, "a", "invert", &[], 0, true),
                node(&r1, "b", "stamp", &[], 1, false),
                running("out", true, vec![2]),
            ])
            .map_err(|e| e.to_string())
        }),
        Box::new(move || {
            let (hw, hh) = ((w / 2).to_string(), (h / 2).to_string());
            let (fw, fh) = (w.to_string(), h.to_string());
            Graph::new(vec![
                running("src", false, vec![]),
                node(
                    &r2,
                    "down",
                    "scale",
                    &[("width", &hw), ("height", &hh)],
                    0,
                    false,
                ),
                node(
                    &r2,
                    "up",
                    "scale",
                    &[("width", &fw), ("height", &fh)],
                    1,
                    false,
                ),
                running("out", true, vec![2]),
            ])
            .map_err(|e| e.to_string())
        }),
    ];
    let (tx, rx) = command_queue(16);
    let replies = tx.replies();
    edited.set_commands(rx);
    edited.set_editor(Box::new(Script(builds.into())));
    // Another show of the same size shares the pool.
    let other = Pipeline::new(
        ("testsrc".into(), testsrc(&r, w, h, FRAMES, FPS)),
        vec![],
        ("marks".into(), Box::new(PoolOf::default())),
    )
    .prepare(paced)
    .unwrap();
    let mut host = Host::new(THREADS);
    host.add("edited", edited).unwrap();
    host.add("other", other).unwrap();
    let pools = host.pools();
    let quota0 = edit_shape(&pools, w, h)[0].quota;

    let watch = out.clone();
    let stats = pools.clone();
    let poster = std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        let frames_seen = || watch.seen.lock().unwrap().len();
        let wait_frames = |at: usize| {
            while frames_seen() < at {
                assert!(t0.elapsed() < Duration::from_secs(20), "the show stalled");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        let edit = || {
            tx.post(Command::Edit(GraphEdit::Remove { node: "x".into() }))
                .unwrap();
            loop {
                assert!(
                    t0.elapsed() < Duration::from_secs(20),
                    "no answer to the edit"
                );
                if let Some(r) = replies.take() {
                    match r.outcome {
                        Outcome::Applied { frame } => return frame,
                        other => panic!("the edit was not applied: {other:?}"),
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        wait_frames(40);
        let before = (
            EDIT_FRAMES_MADE.load(std::sync::atomic::Ordering::SeqCst),
            edit_shape(&stats, w, h)[0].allocated,
        );
        let f1 = edit();
        wait_holders(&stats, w, h, 2);
        let after = (
            EDIT_FRAMES_MADE.load(std::sync::atomic::Ordering::SeqCst),
            edit_shape(&stats, w, h)[0].allocated,
        );
        let after_1 = edit_shape(&stats, w, h);
        wait_frames(120);
        let f2 = edit();
        wait_holders(&stats, w, h, 2);
        wait_holders(&stats, w / 2, h / 2, 1);
        (f1, f2, before, after, after_1, stats.stats())
    });
    let results = bounded(Duration::from_secs(40), move || host.run(|_| {}));
    for r in &results {
        assert_eq!(ok_frames(r), FRAMES, "{}", r.name);
    }
    let (f1, f2, before, after, after_1, during_2) = poster.join().expect("the edits");
    let seen = out.seen.lock().unwrap().clone();
    assert_eq!(seen.len() as u64, FRAMES);
    // Every frame the edited show released, before and after both edits, came from the one
    // shared pool of its size, through a quota handle.
    for &(seq, quota, same) in &seen {
        assert!(
            quota.is_some() && same,
            "frame {seq}: not from the shared pool"
        );
    }
    let quota_of = |from: u64, to: u64| {
        let q: Vec<usize> = seen
            .iter()
            .filter(|(s, _, _)| (from..to).contains(s))
            .filter_map(|(_, q, _)| *q)
            .collect();
        assert!(q.windows(2).all(|p| p[0] == p[1]), "{q:?}");
        q[0]
    };
    let (q_v0, q_v1) = (quota_of(0, f1), quota_of(f1, f2));
    eprintln!(
        "edits at frames {f1} and {f2}; quotas {q_v0} then {q_v1}; frames of {w}x{h} made \
         during edit 1: {} in the process, {} in the shared pool; after edit 1: {after_1:?}; \
         after edit 2: {during_2:?}",
        after.0 - before.0,
        after.1 - before.1
    );
    // Edit 1 kept the frame size: its version got a quota handle on the same pool, and made no
    // frame of that size outside it (the show's own pools of the new version were not made).
    assert_eq!(after_1.len(), 1, "one pool of {w}x{h}: {after_1:?}");
    let s = &after_1[0];
    assert_eq!((s.shows, s.holders), (2, 2), "{s:?}");
    assert_eq!(
        after.0 - before.0,
        after.1 - before.1,
        "frames of {w}x{h} made during the edit outside the shared pool: {s:?}"
    );
    // The replaced version's quota was given back: the quotas in force are the other show's
    // and the new version's.
    assert_eq!(s.quota, quota0 - q_v0 + q_v1, "{s:?}");
    // Edit 2 added a 48x36 stage: a shared pool of that shape, made and filled on the edit
    // thread (no worker's acquire made a frame of it), the show's frames still of its size.
    let half: Vec<_> = during_2
        .iter()
        .filter(|p| (p.width, p.height) == (w / 2, h / 2))
        .collect();
    assert_eq!(half.len(), 1, "{during_2:?}");
    assert_eq!((half[0].shows, half[0].holders), (1, 1), "{half:?}");
    let half = edit_shape(&pools, w / 2, h / 2);
    assert!(half[0].peak >= 1 && half[0].allocated >= 1, "{half:?}");
    assert_eq!(half[0].grown_on_acquire, 0, "{half:?}");
    assert_eq!(edit_shape(&pools, w, h).len(), 1, "{:?}", pools.stats());
}

// What live edits in a host got wrong before (docs/SHOWS.md, "Live edits in a host"): what a refused edit makes, a pool
// no version holds any more, a replaced version whose frame outlives its burial. Each test has
// a frame size of its own (tests of this file run at once, on hosts of their own).

/// `mix mode=crossfade` (framepipe-effects'), as the CLI makes it.
fn crossfade_mixer(r: &framepipe_core::Registry) -> framepipe_runtime::MixerStage {
    match r
        .create("mix", &props(&[("mode", "crossfade")]))
        .expect("mix")
    {
        framepipe_core::Element::Mixer(f) => {
            let mode = f.default_mode();
            framepipe_runtime::MixerStage::new(f, mode)
        }
        _ => panic!("mix is not a mixer"),
    }
}

/// A live edit's answer, waited for (at most 20 s).
fn answer(
    tx: &framepipe_control::CommandSender,
    replies: &framepipe_control::Replies,
    command: framepipe_control::Command,
) -> framepipe_control::Outcome {
    let t0 = std::time::Instant::now();
    tx.post(command).unwrap();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no answer to the command"
        );
        if let Some(r) = replies.take() {
            return r.outcome;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Any edit: the test's editor decides what it builds.
fn an_edit() -> framepipe_control::Command {
    framepipe_control::Command::Edit(framepipe_control::GraphEdit::Remove { node: "x".into() })
}

/// Waits (at most 10 s) until `ok` holds of the host's pools.
fn wait_pools(
    pools: &framepipe_runtime::SharedPools,
    what: &str,
    ok: impl Fn(&[framepipe_runtime::SharedPoolStats]) -> bool,
) {
    let t0 = std::time::Instant::now();
    while !ok(&pools.stats()) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{what}: {:?}",
            pools.stats()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until the show's sink has seen `frames` frames.
fn wait_seen(sink: &PoolOf, frames: usize) {
    let t0 = std::time::Instant::now();
    while sink.seen.lock().unwrap().len() < frames {
        assert!(t0.elapsed() < Duration::from_secs(20), "the show stalled");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `src` (a `testsrc` of `w`x`h`, `frames` frames at `fps`, ending as `on_end` says) ! `out`,
/// in a host of its own with `editor`; its command sender and replies.
fn edited_show(
    r: &framepipe_core::Registry,
    (w, h): (u32, u32),
    (frames, fps): (u64, u32),
    on_end: framepipe_runtime::OnEnd,
    out: &PoolOf,
    editor: Box<dyn framepipe_runtime::Editor>,
) -> (
    Prepared,
    framepipe_control::CommandSender,
    framepipe_control::Replies,
) {
    use framepipe_runtime::{Graph, Node, NodeKind};
    let mut show = Graph::new(vec![
        Node::new(
            "src",
            NodeKind::Source {
                source: testsrc(r, w, h, frames, fps),
                on_end,
            },
            vec![],
        ),
        Node::new(
            "out",
            NodeKind::Sink {
                sink: Box::new(out.clone()),
                master: true,
            },
            vec![0],
        ),
    ])
    .unwrap()
    .prepare(Options {
        threads: THREADS,
        pace: Some(Rational::new(fps, 1)),
        ..Options::default()
    })
    .unwrap();
    let (tx, rx) = framepipe_control::command_queue(16);
    let replies = tx.replies();
    show.set_commands(rx);
    show.set_editor(editor);
    (show, tx, replies)
}

/// Crossfades from the running `src` to a `testsrc` of half its size: refused by the
/// crossfade's own check (its frames for the running sink are of another size), after the
/// version is built and its memory admitted.
struct HalfSizeFade(Arc<framepipe_core::Registry>, (u32, u32));

impl framepipe_runtime::Editor for HalfSizeFade {
    fn build(
        &mut self,
        _edit: &framepipe_control::GraphEdit,
    ) -> std::result::Result<framepipe_runtime::Graph, String> {
        use framepipe_runtime::{Graph, Node, NodeKind, OnEnd};
        let (w, h) = self.1;
        let mut old = Node::new("old:src", NodeKind::Running { sink: false }, vec![]);
        old.was = Some("src".into());
        let mut g = Graph::new(vec![
            old,
            Node::new(
                "src2",
                NodeKind::Source {
                    source: testsrc(&self.0, w / 2, h / 2, 1000, 100),
                    on_end: OnEnd::Stop,
                },
                vec![],
            ),
            Node::new(
                "fade:out",
                NodeKind::Mixer(crossfade_mixer(&self.0)),
                vec![0, 1],
            ),
            Node::new("out", NodeKind::Running { sink: true }, vec![2]),
        ])
        .map_err(|e| e.to_string())?;
        g.set_auto_scale(Box::new(|w, h| {
            let given = props(&[("width", &w.to_string()), ("height", &h.to_string())]);
            match registry().create("scale", &given)? {
                framepipe_core::Element::Effect(f) => Ok(f),
                _ => panic!("scale is not an effect"),
            }
        }));
        Ok(g)
    }
    fn settled(&mut self, accepted: bool) {
        assert!(!accepted, "the crossfade is refused");
    }
    fn fade(&self) -> Option<framepipe_runtime::Fade> {
        Some(framepipe_runtime::Fade {
            to: "half.toml".into(),
            ns: 1_000_000_000,
            ramps: vec![("fade:out".into(), "fader".into())],
        })
    }
}

// issue #11
#[test]
fn a_refused_crossfade_in_a_host_makes_nothing_in_its_pools() {
    // Gap 1: the edit thread took its quota handles (making and filling the new shape's
    // shared pool) before the crossfade's own checks, so a refused crossfade had made that
    // pool's frames already. Now nothing is taken before every check has passed.
    const FRAMES: u64 = 150;
    let (w, h) = (80, 60);
    let r = Arc::new(registry());
    let out = PoolOf::default();
    let editor = Box::new(HalfSizeFade(Arc::clone(&r), (w, h)));
    let (show, tx, replies) = edited_show(
        &r,
        (w, h),
        (FRAMES, 100),
        framepipe_runtime::OnEnd::Stop,
        &out,
        editor,
    );
    let mut host = Host::new(THREADS);
    host.add("edited", show).unwrap();
    let pools = host.pools();
    let watch = out.clone();
    let stats = pools.clone();
    let poster = std::thread::spawn(move || {
        wait_seen(&watch, 20);
        let before = stats.stats();
        let outcome = answer(&tx, &replies, an_edit());
        (before, outcome, stats.stats())
    });
    let results = bounded(Duration::from_secs(30), move || host.run(|_| {}));
    assert_eq!(ok_frames(&results[0]), FRAMES, "the show went on unchanged");
    let (before, outcome, after) = poster.join().expect("the edit");
    eprintln!("before the crossfade: {before:?}; after its refusal: {after:?}");
    match outcome {
        framepipe_control::Outcome::Refused { reason } => {
            assert!(reason.contains("cannot crossfade to half.toml"), "{reason}")
        }
        other => panic!("the crossfade was not refused: {other:?}"),
    }
    // No pool of the new project's shape was made, no frame of it: the host holds what it
    // held before the edit.
    let half: Vec<_> = after
        .iter()
        .filter(|p| (p.width, p.height) == (w / 2, h / 2))
        .collect();
    assert!(
        half.is_empty(),
        "the refused crossfade made a pool of {}x{}: {half:?}",
        w / 2,
        h / 2
    );
    assert_eq!(after.len(), before.len(), "{after:?}");
    let quota = |s: &[framepipe_runtime::SharedPoolStats]| s.iter().map(|p| p.quota).sum::<usize>();
    assert_eq!(quota(&after), quota(&before), "{after:?}");
}

/// The next versions of `src ! out`, in order: each a chain of these effects between the
/// running source and the running sink.
fn chains(r: &Arc<framepipe_core::Registry>, steps: Vec<Vec<Step>>) -> Script {
    use framepipe_runtime::{Graph, Node, NodeKind};
    let builds = steps.into_iter().map(|chain| {
        let r = Arc::clone(r);
        Box::new(move || {
            let mut nodes = vec![Node::new("src", NodeKind::Running { sink: false }, vec![])];
            for (k, (element, given)) in chain.iter().enumerate() {
                let given: Vec<(&str, &str)> = given
                    .iter()
                    .map(|(a, b)| (a.as_str(), b.as_str()))
                    .collect();
                nodes.push(Node::new(
                    format!("e{k}"),
                    NodeKind::Effect(effect(&r, element, &given)),
                    vec![k],
                ));
            }
            let last = nodes.len() - 1;
            nodes.push(Node::new(
                "out",
                NodeKind::Running { sink: true },
                vec![last],
            ));
            Graph::new(nodes).map_err(|e| e.to_string())
        }) as Build
    });
    Script(builds.collect())
}

/// An effect and its properties.
type Step = (&'static str, Vec<(String, String)>);

fn scale_to(w: u32, h: u32) -> Step {
    (
        "scale",
        props(&[("width", &w.to_string()), ("height", &h.to_string())]),
    )
}

fn applied(outcome: framepipe_control::Outcome) -> u64 {
    match outcome {
        framepipe_control::Outcome::Applied { frame } => frame,
        other => panic!("the edit was not applied: {other:?}"),
    }
}

fn of_shape(
    stats: &[framepipe_runtime::SharedPoolStats],
    (w, h): (u32, u32),
) -> Vec<framepipe_runtime::SharedPoolStats> {
    stats
        .iter()
        .filter(|s| (s.width, s.height) == (w, h))
        .copied()
        .collect()
}

// issue #11
#[test]
fn a_pool_no_version_holds_any_more_is_dropped_once_its_frames_are_back() {
    // Gap 2: a pool no version held any more was dropped only when a newer pool of its shape
    // existed, so a frame size an edit stopped using kept its frames until the host ended
    // (and the memory book no longer counted them). Now it is dropped (on the filler's or the
    // edit thread) once no version holds it and every frame of it is back.
    // 4 s at 100 fps: time enough for both edits on a loaded machine (they take milliseconds).
    const FRAMES: u64 = 400;
    let (w, h) = (112, 64);
    let half = (w / 2, h / 2);
    let r = Arc::new(registry());
    let out = PoolOf::default();
    // Edit 1: a stage of half the size (a pool of that shape); edit 2: back to `src ! out`.
    let editor = chains(
        &r,
        vec![vec![scale_to(half.0, half.1), scale_to(w, h)], vec![]],
    );
    let (show, tx, replies) = edited_show(
        &r,
        (w, h),
        (FRAMES, 100),
        framepipe_runtime::OnEnd::Stop,
        &out,
        Box::new(editor),
    );
    let counters = show.counters();
    let mut host = Host::new(THREADS);
    host.add("edited", show).unwrap();
    let pools = host.pools();
    let watch = out.clone();
    let stats = pools.clone();
    let poster = std::thread::spawn(move || {
        wait_seen(&watch, 20);
        let held_0 = counters.memory().held;
        applied(answer(&tx, &replies, an_edit()));
        // The half-size pool is in use, the replaced version's quota given back.
        wait_pools(&stats, "edit 1 settled", |s| {
            of_shape(s, half).iter().map(|p| p.holders).sum::<usize>() == 1
                && of_shape(s, (w, h)).iter().map(|p| p.holders).sum::<usize>() == 1
        });
        let made = of_shape(&stats.stats(), half)[0];
        let held_1 = counters.memory().held;
        applied(answer(&tx, &replies, an_edit()));
        // No version uses that size any more: its pool is dropped, and until then the memory
        // book counts it (the version that used it is counted until its frames are back).
        let t0 = std::time::Instant::now();
        loop {
            let held = counters.memory().held;
            let s = stats.stats();
            let gone = of_shape(&s, half)[0].dropped
                && of_shape(&s, (w, h))
                    .iter()
                    .map(|p| p.holders)
                    .sum::<usize>()
                    == 1;
            if gone {
                break;
            }
            assert!(
                held > held_0,
                "the half-size pool is alive but not counted ({held} bytes held): {s:?}"
            );
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the pool no version holds was not dropped: {s:?}"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        let after = stats.stats();
        let held_2 = counters.memory().held;
        (made, after, held_0, held_1, held_2)
    });
    let results = bounded(Duration::from_secs(30), move || host.run(|_| {}));
    assert_eq!(ok_frames(&results[0]), FRAMES);
    let (made, after, held_0, held_1, held_2) = poster.join().expect("the edits");
    eprintln!(
        "half-size pool in use: {made:?}; after edit 2: {after:?}; memory held {held_0}, \
         {held_1}, {held_2}"
    );
    assert!(made.allocated >= 1 && !made.dropped, "{made:?}");
    let gone = of_shape(&after, half);
    assert_eq!(gone.len(), 1, "{after:?}");
    assert!(gone[0].dropped, "{gone:?}");
    assert_eq!(
        (gone[0].holders, gone[0].quota, gone[0].in_use),
        (0, 0, 0),
        "{gone:?}"
    );
    // The pool of the show's own size that the running version holds is still there (the
    // first one may have been dropped too: an edit that finds no room in a pool gets a new
    // one of its shape).
    let kept: Vec<_> = of_shape(&after, (w, h))
        .into_iter()
        .filter(|p| !p.dropped)
        .collect();
    assert_eq!(kept.len(), 1, "{after:?}");
    assert_eq!(kept[0].holders, 1, "{after:?}");
    // What the book counts is the running version's again: the graph of version 0.
    assert!(
        held_1 > held_0,
        "the half-size stage counts: {held_0} {held_1}"
    );
    assert_eq!(held_2, held_0, "the book counts what version 0 counted");
    // Every pool is dropped once the host's last show is gone.
    wait_pools(&pools, "after the host's end", |s| {
        s.iter().all(|p| p.dropped)
    });
}

// issue #11
#[test]
fn a_replaced_version_keeps_its_quota_while_a_frame_of_it_is_out() {
    // Gap 3: a replaced version whose frame outlived the edit thread's 2 s burial (here: the
    // held source's last frame, which the new version keeps) was dropped anyway, giving its
    // quota back while that frame was still out (then by whoever let go of the version
    // last, on the frame path). Now the edit thread keeps it, however long, and the quota,
    // and the memory the version counts, are given back only once the frame is home (here:
    // at the host's end).
    let (w, h) = (128, 48);
    let r = Arc::new(registry());
    let out = PoolOf::default();
    let editor = chains(&r, vec![vec![("invert", vec![])]]);
    // Ten frames, then the last one held (given again for every later frame) until `stop`.
    let (show, tx, replies) = edited_show(
        &r,
        (w, h),
        (10, 100),
        framepipe_runtime::OnEnd::Hold,
        &out,
        Box::new(editor),
    );
    let counters = show.counters();
    let mut host = Host::new(THREADS);
    host.add("held", show).unwrap();
    let pools = host.pools();
    let watch = out.clone();
    let stats = pools.clone();
    let poster = std::thread::spawn(move || {
        wait_seen(&watch, 30);
        applied(answer(&tx, &replies, an_edit()));
        let switched = std::time::Instant::now();
        let holders = move |s: &[framepipe_runtime::SharedPoolStats]| {
            of_shape(s, (w, h)).iter().map(|p| p.holders).sum::<usize>()
        };
        let quota = move |s: &[framepipe_runtime::SharedPoolStats]| {
            of_shape(s, (w, h)).iter().map(|p| p.quota).sum::<usize>()
        };
        let at_switch = (stats.stats(), counters.memory().held);
        // Past the burial's 2 s (BURY_MAX in edit.rs), when it used to give up.
        while switched.elapsed() < Duration::from_millis(2500) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let later = (stats.stats(), counters.memory().held);
        let stop = answer(&tx, &replies, framepipe_control::Command::Stop);
        assert!(
            matches!(stop, framepipe_control::Outcome::Applied { .. }),
            "{stop:?}"
        );
        (at_switch, later, holders, quota)
    });
    let results = bounded(Duration::from_secs(30), move || host.run(|_| {}));
    assert!(results[0].result.is_ok(), "{:?}", results[0].result);
    let ((at_switch, held_at_switch), (later, held_later), holders, quota) =
        poster.join().expect("the edit");
    eprintln!("at the switch: {at_switch:?} ({held_at_switch} bytes held); 2.5 s later: {later:?} ({held_later} bytes held)");
    assert_eq!(holders(&at_switch), 2, "{at_switch:?}");
    // The replaced version's frame (the source's last) is still out: its quota, and what it
    // counts against --max-memory, are kept.
    assert_eq!(
        holders(&later),
        2,
        "the replaced version's quota was given back while its frame was out: {later:?}"
    );
    assert_eq!(quota(&later), quota(&at_switch), "{later:?}");
    assert_eq!(held_later, held_at_switch);
    // The host's end tears it down: once the show is gone and that frame home, the quotas are
    // given back and the pool dropped.
    wait_pools(&pools, "after the host's end", |s| {
        holders(s) == 0 && quota(s) == 0 && s.iter().all(|p| p.dropped)
    });
}
