//! Issue 2, requirement 1: in steady state the engine makes no heap allocation and takes no page
//! fault per frame. A counting global allocator and getrusage's minor-fault count are read by the
//! sink at frame `WARMUP` and at the last frame; everything between (all threads) must be zero
//! allocations, and page faults must not grow with the number of frames.

use std::sync::{Arc, Mutex};

use framepipe_core::{Element, Frame, FrameCtx, Registry, Result, Sink, VideoInfo};
use framepipe_runtime::{EffectStage, Graph, MixerStage, Node, NodeKind, OnEnd, Options, Pipeline};

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

fn minor_faults() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a complete rusage into the pointer it is given; RUSAGE_SELF is valid.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: initialised by the successful call above (and zeroed before).
    unsafe { ru.assume_init() }.ru_minflt as u64
}

const WARMUP: u64 = 60;

#[derive(Debug, Default, Clone, Copy)]
struct Marks {
    allocs_at_warmup: u64,
    faults_at_warmup: u64,
    allocs_at_end: u64,
    faults_at_end: u64,
    frames: u64,
    /// The frame at which warm-up was taken to end.
    marked_at: Option<u64>,
}

/// Reads the counters at frame WARMUP and at every frame after (the last read wins). Reading an
/// atomic and calling getrusage allocate nothing.
/// `.3`: frames of the master's pool that sinks may keep (the pool's fill stops short of them).
struct MarkSink(Arc<Mutex<Marks>>, Marks, bool, usize);

impl Sink for MarkSink {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        std::hint::black_box(frame.data()[0]);
        // Warm-up ends at frame WARMUP, or later if the paced run's `fp-pool-fill` thread has not
        // yet made every buffer of the pool (it may lag on a loaded machine; its allocations are
        // warm-up, not per frame). A pool that is never filled fails the test below.
        let pool = frame.pool();
        let filled = pool.allocated() + self.3 >= pool.capacity();
        if self.1.marked_at.is_none() && ctx.seq >= WARMUP && filled {
            self.1.marked_at = Some(ctx.seq);
            self.1.allocs_at_warmup = framepipe_testkit::total();
            self.1.faults_at_warmup = minor_faults();
            framepipe_testkit::trace(self.2);
        } else if self.1.marked_at.is_some() {
            self.1.allocs_at_end = framepipe_testkit::total();
            self.1.faults_at_end = minor_faults();
        }
        self.1.frames = ctx.seq + 1;
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        framepipe_testkit::trace(false);
        *self.0.lock().unwrap() = self.1;
        Ok(())
    }
}

fn registry() -> Registry {
    let mut r = Registry::new();
    framepipe_io::register(&mut r);
    framepipe_effects::register(&mut r);
    framepipe_frei0r::register(&mut r);
    r
}

/// An effect and its properties.
type Step<'a> = (&'a str, &'a [(&'a str, &'a str)]);
type Chain<'a> = &'a [Step<'a>];

/// The chain `chain`, or (None) the graph of issue #8: two sources, frei0r-glow on one and
/// invert on the other, the native `mix` (crossfade), a tee to the marking sink and a
/// nullsink, and a leaky `monitor` tap to another nullsink.
fn run_graph(frames: u64, chain: Option<Chain>) -> Marks {
    let r = registry();
    let src = |s: &str| s.to_string();
    let source = match r
        .create(
            "testsrc",
            &[
                (src("width"), src("320")),
                (src("height"), src("240")),
                (src("frames"), frames.to_string()),
                (src("pattern"), src("bars")),
            ],
        )
        .unwrap()
    {
        Element::Source(s) => s,
        other => panic!("testsrc is not a source: {other:?}"),
    };
    let effect = |name: &str, props: &[(&str, &str)]| {
        let given: Vec<(String, String)> = props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match r.create(name, &given).unwrap() {
            Element::Effect(f) => {
                let mode = f.default_mode();
                (name.to_string(), EffectStage::new(f, mode))
            }
            other => panic!("{name} is not an effect: {other:?}"),
        }
    };
    let marks = Arc::new(Mutex::new(Marks::default()));
    let sink = MarkSink(
        marks.clone(),
        Marks::default(),
        std::env::var_os("FP_ALLOC_TRACE").is_some(),
        // The graph's mix feeds two sinks (marks and rec), the chain's last stage one.
        if chain.is_some() { 1 } else { 2 },
    );
    let graph = match chain {
        Some(chain) => {
            let effects = chain
                .iter()
                .map(|(name, props)| effect(name, props))
                .collect();
            Pipeline::new(
                ("testsrc".into(), source),
                effects,
                ("marks".into(), Box::new(sink)),
            )
            .into_graph()
        }
        None => {
            let second = match r
                .create(
                    "testsrc",
                    &[
                        (src("width"), src("320")),
                        (src("height"), src("240")),
                        (src("frames"), frames.to_string()),
                        (src("pattern"), src("gradient")),
                    ],
                )
                .unwrap()
            {
                Element::Source(s) => s,
                other => panic!("testsrc is not a source: {other:?}"),
            };
            let mixer = match r
                .create(
                    "mix",
                    &[(src("mode"), src("crossfade")), (src("fader"), src("0.4"))],
                )
                .unwrap()
            {
                Element::Mixer(m) => {
                    let mode = m.default_mode();
                    MixerStage::new(m, mode)
                }
                other => panic!("mix is not a mixer: {other:?}"),
            };
            let null = || match r.create("nullsink", &[]).unwrap() {
                Element::Sink(s) => s,
                other => panic!("nullsink is not a sink: {other:?}"),
            };
            let source_node = |name: &str, s| {
                Node::new(
                    name,
                    NodeKind::Source {
                        source: s,
                        on_end: OnEnd::Stop,
                    },
                    vec![],
                )
            };
            let effect_node = |name: &str, props: &[(&str, &str)], input| {
                let (_, stage) = effect(name, props);
                Node::new(name, NodeKind::Effect(stage), vec![input])
            };
            let sink_node = |name: &str, s, master, input| {
                Node::new(name, NodeKind::Sink { sink: s, master }, vec![input])
            };
            let mut monitor = effect_node("monitor", &[("width", "80"), ("height", "60")], 5);
            monitor.leaky = Some(true);
            let mut preview = sink_node("preview", null(), false, 6);
            preview.leaky = Some(true);
            Graph::new(vec![
                source_node("a", source),
                effect_node("frei0r-glow", &[("blur", "0.5")], 0),
                source_node("b", second),
                effect_node("invert", &[], 2),
                Node::new("mix", NodeKind::Mixer(mixer), vec![1, 3]),
                Node::new("t", NodeKind::Tee, vec![4]),
                monitor,
                preview,
                sink_node("marks", Box::new(sink), true, 5),
                sink_node("rec", null(), false, 5),
            ])
            .unwrap()
        }
    };
    let stats = graph
        .prepare(Options {
            threads: 2,
            // Paced (fast) so that the frame clock's path is measured too.
            pace: Some(framepipe_core::Rational::new(1000, 1)),
            // A stall report allocates its message; on a loaded machine one could fire.
            stall_timeout_ns: 60_000_000_000,
            ..Options::default()
        })
        .unwrap()
        .run()
        .unwrap();
    assert_eq!(stats.frames, frames);
    let m = *marks.lock().unwrap();
    assert_eq!(m.frames, frames);
    let at = m
        .marked_at
        .expect("the frame pools were never filled to capacity in a paced run");
    assert!(
        frames - at >= 20,
        "warm-up (pool fill) lasted until frame {at} of {frames}: too few frames measured"
    );
    m
}

const FULL: Chain = &[
    ("frei0r-glow", &[("blur", "0.5")]),
    ("invert", &[]),
    (
        "scale",
        &[
            ("width", "160"),
            ("height", "120"),
            ("algorithm", "lanczos3"),
        ],
    ),
    ("stamp", &[]),
    ("frei0r-baltan", &[]),
    ("frei0r-vignette", &[]),
];

/// Allocations and minor faults after warm-up for 30 and for 300 frames (a chain, or the graph).
fn measure(chain: Option<Chain>) -> (u64, u64, u64, u64) {
    let short = run_graph(WARMUP + 30, chain);
    let long = run_graph(WARMUP + 300, chain);
    (
        short.allocs_at_end - short.allocs_at_warmup,
        long.allocs_at_end - long.allocs_at_warmup,
        short.faults_at_end - short.faults_at_warmup,
        long.faults_at_end - long.faults_at_warmup,
    )
}

/// Elements whose dependency allocates per frame, with why; measured and reported, not hidden.
/// `scale`: fast_image_resize 6 recomputes its filter coefficients (a few hundred small
/// vectors) on every `resize` call and has no API to keep them; see docs/REALTIME.md.
const KNOWN_ALLOCATING: &[&str] = &["scale"];

fn main() {
    // The engine alone, each element alone (so that a failure names the culprit), then the chain
    // without and with the known exception.
    let mut cases: Vec<(String, Option<Vec<Step>>)> =
        vec![("engine (testsrc -> sink)".into(), Some(vec![]))];
    for e in FULL {
        cases.push((e.0.to_string(), Some(vec![*e])));
    }
    let clean: Vec<_> = FULL
        .iter()
        .copied()
        .filter(|e| !KNOWN_ALLOCATING.contains(&e.0))
        .collect();
    cases.push(("the chain without scale".into(), Some(clean)));
    cases.push(("the whole chain".into(), Some(FULL.to_vec())));
    cases.push(("graph: 2 sources, mix, tee, monitor".into(), None));
    let mut failures = Vec::new();
    for (name, chain) in &cases {
        let (a30, a300, f30, f300) = measure(chain.as_deref());
        eprintln!(
            "{name:<28} after warm-up: 30 frames -> {a30} allocations, {f30} minor faults; \
             300 frames -> {a300} allocations, {f300} minor faults"
        );
        let exempt = chain
            .iter()
            .flatten()
            .any(|e| KNOWN_ALLOCATING.contains(&e.0));
        if !exempt && (a30 != 0 || a300 != 0) {
            failures.push(format!("{name}: {a300} allocations over 300 frames"));
        }
        // Page faults must not grow with the frame count: ten times the frames may not cost more
        // than a handful of faults more (a fault per frame would be 270 more). The exempt
        // element's own per-frame mallocs can grow the heap now and then, so they are exempt
        // here too (and reported above).
        if !exempt && f300 > f30 + 16 {
            failures.push(format!(
                "{name}: minor faults grow with frames ({f30} over 30, {f300} over 300)"
            ));
        }
    }
    if !failures.is_empty() {
        eprintln!(
            "steady state is not allocation/fault free:\n{}",
            failures.join("\n")
        );
        std::process::exit(1);
    }
    eprintln!("steady state: no allocation and no page-fault growth per frame (scale excepted as documented)");
}
