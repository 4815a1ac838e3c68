//! Graphs (issue #8) with small in-test elements whose outputs are known exactly: several
//! sources in lockstep, mixers, fan-out to several sinks, feedback, leaky branches, on-end
//! policies, resampling, and the errors of graphs that cannot run. Each output is compared with
//! a reference computed frame by frame, in sequence, at several thread counts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use framepipe_core::{
    Effect, EffectFactory, Frame, FrameCtx, FrameMut, Mode, Rational, Result, SliceRunner, Source,
    VideoInfo,
};
mod common;

use common::{counter, weigh, Collect, Counter, Weigh, H, W};
use framepipe_runtime::{EffectStage, Graph, MixerStage, Node, NodeKind, OnEnd, Options, RunStats};

/// A stateless effect with a varying duration (parallel instances finish out of order); it
/// records the most jobs of any `Hash` running at once (shared counter).
struct Hash {
    sleep_us: u64,
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

fn hash_word(x: u32) -> u32 {
    x.wrapping_mul(2654435761).rotate_left(5) ^ 0x9e37
}

impl EffectFactory for Hash {
    fn name(&self) -> &str {
        "hash"
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(input)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(Hash {
            sleep_us: self.sleep_us,
            running: self.running.clone(),
            peak: self.peak.clone(),
        }))
    }
}

impl Effect for Hash {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_micros(
            self.sleep_us + (ctx.seq * 7919 % 5) * 100,
        ));
        for (o, i) in output.words_mut().iter_mut().zip(input.words()) {
            *o = hash_word(*i);
        }
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

fn hash(sleep_us: u64) -> EffectStage {
    hash_shared(sleep_us, &Default::default(), &Default::default())
}

fn hash_shared(sleep_us: u64, running: &Arc<AtomicUsize>, peak: &Arc<AtomicUsize>) -> EffectStage {
    EffectStage::new(
        Box::new(Hash {
            sleep_us,
            running: running.clone(),
            peak: peak.clone(),
        }),
        Mode::Parallel,
    )
}

/// A stateful effect: output = input + a running sum of the inputs seen so far.
struct Acc(u32);
impl EffectFactory for Acc {
    fn name(&self) -> &str {
        "acc"
    }
    fn default_mode(&self) -> Mode {
        Mode::Serial
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(input)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(Acc(0)))
    }
}
impl Effect for Acc {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        self.0 = acc_step(self.0, input.words()[0]);
        for (o, i) in output.words_mut().iter_mut().zip(input.words()) {
            *o = i.wrapping_add(self.0);
        }
        Ok(())
    }
}

fn acc_step(state: u32, x: u32) -> u32 {
    state.wrapping_mul(31).wrapping_add(x)
}

fn mixer(sleep_us: u64, inputs: usize) -> MixerStage {
    let mut m = MixerStage::new(Box::new(Weigh { sleep_us }), Mode::Parallel);
    m.inputs = (2, inputs.max(2));
    m
}

fn source(name: &str, source: Box<dyn Source>, on_end: OnEnd) -> Node {
    Node::new(name, NodeKind::Source { source, on_end }, vec![])
}

fn effect(name: &str, stage: EffectStage, input: usize) -> Node {
    Node::new(name, NodeKind::Effect(stage), vec![input])
}

fn sink(name: &str, c: &Collect, input: usize) -> Node {
    Node::new(
        name,
        NodeKind::Sink {
            sink: Box::new(c.clone()),
            master: false,
        },
        vec![input],
    )
}

fn run(nodes: Vec<Node>, threads: usize, in_flight: usize) -> RunStats {
    Graph::new(nodes)
        .unwrap()
        .prepare(Options {
            threads,
            in_flight,
            ..Options::default()
        })
        .unwrap()
        .run()
        .unwrap()
}

/// The shape with in-test elements: two sources with their own effects (one stateless
/// and slow, one stateful), mixed, teed to two sinks: both sinks get every frame in order, equal
/// to a frame-by-frame reference, whatever the thread count.
#[test]
fn two_sources_mixed_and_teed_match_a_sequential_reference_at_any_thread_count() {
    const N: u64 = 40;
    let mut acc = 0u32;
    let reference: Vec<u32> = (0..N as u32)
        .map(|n| {
            let a = hash_word(100 + n);
            acc = acc_step(acc, 5000 + n);
            let b = (5000 + n).wrapping_add(acc);
            weigh([a, b].into_iter())
        })
        .collect();
    for threads in [1, 2, 4] {
        let (out, rec) = (Collect::default(), Collect::default());
        let stats = run(
            vec![
                source("a", counter(100, N), OnEnd::Stop),
                effect("fx-a", hash(300), 0),
                source("b", counter(5000, N), OnEnd::Stop),
                effect("fx-b", EffectStage::new(Box::new(Acc(0)), Mode::Serial), 2),
                Node::new("mix", NodeKind::Mixer(mixer(200, 2)), vec![1, 3]),
                Node::new("t", NodeKind::Tee, vec![4]),
                sink("out", &out, 5),
                sink("rec", &rec, 5),
            ],
            threads,
            0,
        );
        assert_eq!(out.values(), reference, "threads={threads}");
        assert_eq!(rec.values(), reference, "threads={threads}");
        let names: Vec<&str> = stats.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "fx-a", "b", "fx-b", "mix", "out", "rec"]);
        assert!(stats.stages.iter().all(|s| s.frames == N), "{stats:?}");
    }
}

/// Independent branches of one frame run at the same time on different workers: with one frame
/// in flight, the only concurrency is between the two branches.
#[test]
fn independent_branches_of_one_frame_run_at_once() {
    let (running, peak) = (Arc::default(), Arc::default());
    let out = Collect::default();
    run(
        vec![
            source("a", counter(1, 12), OnEnd::Stop),
            effect("slow-a", hash_shared(15_000, &running, &peak), 0),
            source("b", counter(2, 12), OnEnd::Stop),
            effect("slow-b", hash_shared(15_000, &running, &peak), 2),
            Node::new("mix", NodeKind::Mixer(mixer(0, 2)), vec![1, 3]),
            sink("out", &out, 4),
        ],
        2,
        1,
    );
    assert_eq!(out.values().len(), 12);
    assert_eq!(
        peak.load(Ordering::SeqCst),
        2,
        "the two branches of a frame never overlapped"
    );
}

/// `feedback from=X` yields X's output of the previous frame (black for frame 0); the loop runs
/// in order without deadlock, at any thread count and frames in flight.
#[test]
fn feedback_matches_a_frame_by_frame_reference() {
    const N: u64 = 30;
    let mut prev = 0u32;
    let reference: Vec<u32> = (0..N as u32)
        .map(|n| {
            let e = hash_word(weigh([7 + n, prev].into_iter()));
            prev = e;
            e
        })
        .collect();
    for (threads, in_flight) in [(1, 1), (2, 0), (4, 8)] {
        let out = Collect::default();
        run(
            vec![
                source("src", counter(7, N), OnEnd::Stop),
                Node::new(
                    "fb",
                    NodeKind::Feedback {
                        from: 3,
                        color: [0, 0, 0, 0],
                    },
                    vec![],
                ),
                Node::new("mix", NodeKind::Mixer(mixer(100, 2)), vec![0, 1]),
                effect("fx", hash(200), 2),
                sink("out", &out, 3),
            ],
            threads,
            in_flight,
        );
        assert_eq!(out.values(), reference, "threads={threads}");
    }
}

/// A slow leaky branch (a preview) never holds back the master output: the master gets every
/// frame, the branch skips frames while busy (counted), and what it shows is in order.
#[test]
fn a_slow_leaky_branch_skips_frames_and_never_holds_back_the_master() {
    const N: u64 = 60;
    let (master, preview) = (
        Collect::default(),
        Collect {
            sleep_ms: 15,
            ..Collect::default()
        },
    );
    let mut tap = effect("tap", hash(10_000), 1);
    tap.leaky = Some(true);
    let mut preview_sink = sink("preview", &preview, 2);
    preview_sink.leaky = Some(true);
    let stats = run(
        vec![
            source("src", counter(0, N), OnEnd::Stop),
            Node::new("t", NodeKind::Tee, vec![0]),
            tap,
            preview_sink,
            sink("master", &master, 1),
        ],
        2,
        0,
    );
    let expected: Vec<u32> = (0..N as u32).collect();
    assert_eq!(master.values(), expected, "the master got every frame");
    let shown = preview.got.lock().unwrap().clone();
    let tap_stats = stats.stages.iter().find(|s| s.name == "tap").unwrap();
    assert!(
        shown.len() < N as usize / 2,
        "a 25 ms preview cannot show most of 60 instant frames: {}",
        shown.len()
    );
    assert_eq!(
        tap_stats.skipped + shown.len() as u64,
        N,
        "every frame is shown or counted as skipped"
    );
    assert!(shown.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    for (seq, v) in shown {
        assert_eq!(v, hash_word(seq as u32), "the preview shows its own frame");
    }
}

/// on-end: a short clip loops (or holds its last frame) under a longer source that ends the run.
#[test]
fn a_clip_loops_or_holds_under_a_longer_source() {
    for (on_end, expected) in [
        (OnEnd::Loop, [0u32, 1, 2, 0, 1, 2, 0, 1, 2, 0]),
        (OnEnd::Hold, [0, 1, 2, 2, 2, 2, 2, 2, 2, 2]),
    ] {
        let out = Collect::default();
        run(
            vec![
                source("long", counter(0, 10), OnEnd::Stop),
                source("clip", counter(1000, 3), on_end),
                Node::new("mix", NodeKind::Mixer(mixer(0, 2)), vec![0, 1]),
                sink("out", &out, 2),
            ],
            2,
            0,
        );
        let want: Vec<u32> = (0..10u32)
            .map(|n| weigh([n, 1000 + expected[n as usize]].into_iter()))
            .collect();
        assert_eq!(out.values(), want, "{on_end:?}");
    }
}

/// A source at another rate is resampled by timestamp: output frame N takes the source's frame
/// at or before N's time (repeated when slower, skipped when faster).
#[test]
fn a_source_at_another_rate_is_resampled_by_timestamp() {
    for (fps, expected) in [
        (15, [0u32, 0, 1, 1, 2, 2, 3, 3]),
        (60, [0, 2, 4, 6, 8, 10, 12, 14]),
    ] {
        let out = Collect::default();
        let other = Box::new(Counter {
            salt: 0,
            frames: 100,
            fps,
            next: 0,
        });
        run(
            vec![
                source("main", counter(0, 8), OnEnd::Stop),
                source("other", other, OnEnd::Stop),
                Node::new("mix", NodeKind::Mixer(mixer(0, 2)), vec![0, 1]),
                sink("out", &out, 2),
            ],
            2,
            0,
        );
        let want: Vec<u32> = (0..8u32)
            .map(|n| weigh([n, expected[n as usize]].into_iter()))
            .collect();
        assert_eq!(out.values(), want, "{fps} fps");
    }
}

/// Bad graphs get one-line errors naming the nodes.
#[test]
fn bad_graphs_are_refused_naming_the_nodes() {
    let c = Collect::default();
    let cases: Vec<(Vec<Node>, &str)> = vec![
        (
            vec![
                source("src", counter(0, 1), OnEnd::Stop),
                Node::new("m", NodeKind::Mixer(mixer(0, 2)), vec![0, 2]),
                effect("fx", hash(0), 1),
                sink("out", &c, 2),
            ],
            "a cycle without feedback: m -> fx -> m",
        ),
        (
            vec![
                source("src", counter(0, 1), OnEnd::Stop),
                effect("fx", hash(0), 7),
                sink("out", &c, 1),
            ],
            "fx links to node 8, which does not exist",
        ),
        (
            vec![
                source("src", counter(0, 1), OnEnd::Stop),
                Node::new("m", NodeKind::Mixer(mixer(0, 2)), vec![0]),
                sink("out", &c, 1),
            ],
            "m (mixer) takes 2 inputs, it has 1: src",
        ),
        (
            vec![
                source("src", counter(0, 1), OnEnd::Stop),
                effect("src", hash(0), 0),
                sink("out", &c, 1),
            ],
            "two nodes are named 'src'",
        ),
        (
            vec![
                source("src", counter(0, 1), OnEnd::Stop),
                effect("dangling", hash(0), 0),
                sink("out", &c, 0),
            ],
            "the output of dangling goes nowhere",
        ),
        (
            vec![
                source("src", counter(0, 1), OnEnd::Stop),
                effect("fx", hash(0), 0),
                Node {
                    leaky: Some(true),
                    ..effect("tap", hash(0), 1)
                },
                Node {
                    leaky: Some(false),
                    ..sink("out", &c, 2)
                },
            ],
            "tap is leaky (it skips frames when behind) but feeds out",
        ),
        (
            vec![
                source("src", counter(0, 1), OnEnd::Stop),
                Node {
                    leaky: Some(true),
                    ..sink("out", &c, 0)
                },
            ],
            "every sink is leaky",
        ),
    ];
    for (nodes, needle) in cases {
        let e = Graph::new(nodes).unwrap_err().to_string();
        assert!(e.contains(needle), "{e:?} should contain {needle:?}");
        assert!(e.starts_with("bad graph: ") && !e.contains('\n'), "{e:?}");
    }
}

/// A mixer input of another size goes through the scaler the graph was given, and the layout
/// says it was put in; without one, the sizes are named.
#[test]
fn a_mixer_input_of_another_size_is_scaled_or_named() {
    struct Half;
    impl Source for Half {
        fn info(&self) -> VideoInfo {
            VideoInfo {
                width: W / 2,
                height: H / 2,
                rate: Rational::new(30, 1),
            }
        }
        fn fill(&mut self, _ctx: &FrameCtx, _frame: &mut FrameMut) -> Result<bool> {
            Ok(false)
        }
    }
    let nodes = || {
        vec![
            source("big", counter(0, 1), OnEnd::Stop),
            source("small", Box::new(Half), OnEnd::Stop),
            Node::new("mix", NodeKind::Mixer(mixer(0, 2)), vec![0, 1]),
            sink("out", &Collect::default(), 2),
        ]
    };
    let e = Graph::new(nodes())
        .unwrap()
        .layout()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mix needs inputs of one size: input 0 (big) is 16x8, input 1 (small) is 8x4"),
        "{e}"
    );
    /// Nearest-neighbour upscale by 2, as a stand-in for the CLI's `scale`.
    struct Up(u32, u32);
    impl EffectFactory for Up {
        fn name(&self) -> &str {
            "up"
        }
        fn default_mode(&self) -> Mode {
            Mode::Parallel
        }
        fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
            Ok(VideoInfo {
                width: self.0,
                height: self.1,
                ..input
            })
        }
        fn instantiate(&self) -> Result<Box<dyn Effect>> {
            Ok(Box::new(Acc(0)))
        }
    }
    let mut g = Graph::new(nodes()).unwrap();
    g.set_auto_scale(Box::new(|w, h| {
        Ok(Box::new(Up(w, h)) as Box<dyn EffectFactory>)
    }));
    let layout = g.layout().unwrap();
    let line = layout
        .text()
        .lines()
        .find(|l| l.contains("mix.sink_1:scale"))
        .unwrap_or_else(|| panic!("no scaler in:\n{}", layout.text()));
    assert!(
        line.contains("up (auto)") && line.contains("16x8") && line.contains("<- small"),
        "{line}"
    );
    assert!(layout.dot().contains("style=dotted"), "{}", layout.dot());
}

/// What follows a leaky node is leaky unless it says otherwise: the sink after a monitor tap
/// need not be marked, and the layout says which branch it is in.
#[test]
fn the_sink_after_a_leaky_tap_is_leaky_without_saying_so() {
    let c = Collect::default();
    let mut tap = effect("tap", hash(0), 1);
    tap.leaky = Some(true);
    let layout = Graph::new(vec![
        source("src", counter(0, 1), OnEnd::Stop),
        Node::new("t", NodeKind::Tee, vec![0]),
        tap,
        sink("preview", &c, 2),
        sink("master", &c, 1),
    ])
    .unwrap()
    .layout()
    .unwrap();
    let line = |name: &str| {
        layout
            .text()
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{}", layout.text()))
            .to_string()
    };
    assert!(
        line("preview").contains("leaky (branch of tap)"),
        "{}",
        layout.text()
    );
    assert!(line("master").contains("master") && !line("master").contains("leaky"));
    assert!(
        layout.text().contains("master output: master"),
        "{}",
        layout.text()
    );
}

/// A feedback branch with no source of its own ends with the show: frame N of a 6-frame show is
/// the node's frame N-1, and there is no 7th (the node's last frame) after the source's end.
#[test]
fn a_feedback_branch_ends_with_the_show() {
    for threads in [1, 2] {
        let (show, fb) = (Collect::default(), Collect::default());
        run(
            vec![
                source("src", counter(3, 6), OnEnd::Stop),
                effect("g", hash(100), 0),
                sink("show", &show, 1),
                Node::new(
                    "fb",
                    NodeKind::Feedback {
                        from: 1,
                        color: [9, 0, 0, 0],
                    },
                    vec![],
                ),
                sink("back", &fb, 3),
            ],
            threads,
            0,
        );
        let s = show.values();
        assert_eq!(s.len(), 6);
        let mut want = vec![9u32];
        want.extend(&s[..5]);
        assert_eq!(fb.values(), want, "threads={threads}");
    }
}
