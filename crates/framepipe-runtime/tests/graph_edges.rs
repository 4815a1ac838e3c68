//! Graph shapes at the edges of the scheduler (issue #8 review): a leaky sink fed straight by
//! the show, a mixer taking one frame on two inputs, a slow tap holding a source frame beyond the
//! frames in flight, and a feedback from a node that only a monitor watches. Each run has a
//! deadline, so that a deadlock fails the test instead of hanging the suite.

use std::sync::mpsc;
use std::time::Duration;

use framepipe_core::{
    Effect, EffectFactory, Frame, FrameCtx, FrameMut, Mode, Result, SliceRunner, VideoInfo,
};
mod common;

use common::{weigh, Collect, Weigh, H, W};
use framepipe_runtime::{EffectStage, Graph, MixerStage, Node, NodeKind, OnEnd, Options, RunStats};

fn counter(salt: u32, frames: u64) -> Node {
    Node::new(
        "src",
        NodeKind::Source {
            source: common::counter(salt, frames),
            on_end: OnEnd::Stop,
        },
        vec![],
    )
}

/// Output `(w, h)`: every pixel = the input's first word * 3 + 1; sleeps `sleep_ms` first.
struct Resize {
    w: u32,
    h: u32,
    sleep_ms: u64,
    leaky: bool,
}

fn step(x: u32) -> u32 {
    x.wrapping_mul(3).wrapping_add(1)
}

impl EffectFactory for Resize {
    fn name(&self) -> &str {
        "resize"
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(VideoInfo {
            width: self.w,
            height: self.h,
            ..input
        })
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(Resize { ..*self }))
    }
    fn leaky_by_default(&self) -> bool {
        self.leaky
    }
}

impl Effect for Resize {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        std::thread::sleep(Duration::from_millis(self.sleep_ms));
        output.words_mut().fill(step(input.words()[0]));
        Ok(())
    }
}

fn resize(name: &str, w: u32, h: u32, sleep_ms: u64, leaky: bool, input: usize) -> Node {
    let stage = EffectStage::new(
        Box::new(Resize {
            w,
            h,
            sleep_ms,
            leaky,
        }),
        Mode::Parallel,
    );
    let mut node = Node::new(name, NodeKind::Effect(stage), vec![input]);
    node.element = "resize".into();
    node
}

fn mixer(name: &str, inputs: Vec<usize>) -> Node {
    Node::new(
        name,
        NodeKind::Mixer(MixerStage::new(
            Box::new(Weigh { sleep_us: 0 }),
            Mode::Parallel,
        )),
        inputs,
    )
}

fn sink(name: &str, c: &Collect, input: usize, leaky: Option<bool>) -> Node {
    let mut node = Node::new(
        name,
        NodeKind::Sink {
            sink: Box::new(c.clone()),
            master: false,
        },
        vec![input],
    );
    node.leaky = leaky;
    node
}

/// Runs the graph on another thread; a run that has not ended after 20 s is a deadlock.
fn run_within(nodes: Vec<Node>, threads: usize, in_flight: usize) -> Result<RunStats> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = Graph::new(nodes).and_then(|g| {
            g.prepare(Options {
                threads,
                in_flight,
                ..Options::default()
            })?
            .run()
        });
        let _ = tx.send(r);
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the run did not end within 20 s (deadlock)")
}

/// A sink marked leaky=true on a tee of the show heads its own leaky branch: it gets frames in
/// order (it is not run on a worker) and skips, counted, those that come while it is busy.
#[test]
fn a_leaky_sink_fed_by_the_show_gets_frames_and_skips_the_rest() {
    const N: u64 = 40;
    let master = Collect::any_size();
    let preview = Collect {
        sleep_ms: 10,
        ..Collect::any_size()
    };
    let stats = run_within(
        vec![
            counter(0, N),
            Node::new("t", NodeKind::Tee, vec![0]),
            sink("master", &master, 1, None),
            sink("preview", &preview, 1, Some(true)),
        ],
        2,
        0,
    )
    .expect("a leaky sink on the show runs");
    assert_eq!(master.values(), (0..N as u32).collect::<Vec<_>>());
    let shown = preview.got();
    assert!(!shown.is_empty(), "the preview showed nothing");
    assert!(shown.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    assert!(shown.iter().all(|&(seq, v)| v == seq as u32), "{shown:?}");
    let skipped = stats
        .stages
        .iter()
        .find(|s| s.name == "preview")
        .unwrap()
        .skipped;
    assert_eq!(
        skipped + shown.len() as u64,
        N,
        "shown or counted as skipped"
    );
}

/// A mixer may take one node's frame on two of its inputs (`t. ! m.  t. ! m.`): it runs once
/// per frame with that frame on both inputs.
#[test]
fn a_mixer_taking_one_frame_on_two_inputs_runs_every_frame() {
    const N: u64 = 12;
    for (threads, in_flight) in [(1, 1), (2, 0)] {
        let out = Collect::any_size();
        run_within(
            vec![
                counter(5, N),
                Node::new("t", NodeKind::Tee, vec![0]),
                mixer("m", vec![1, 1]),
                sink("out", &out, 2, None),
            ],
            threads,
            in_flight,
        )
        .expect("runs");
        let want: Vec<u32> = (0..N as u32)
            .map(|n| weigh([5 + n, 5 + n].into_iter()))
            .collect();
        assert_eq!(out.values(), want, "threads={threads}");
    }
}

/// A slow leaky tap reading a source keeps that source's frame after the frame left flight:
/// the source's pool must have room for it, or the show fails with PoolExhausted while the
/// tap works. (The master's branch changes the size, so that only the source writes into the
/// source's pool, and one frame in flight makes the shortage certain.)
#[test]
fn a_slow_tap_on_a_source_never_exhausts_the_source_pool() {
    const N: u64 = 8;
    let (master, preview) = (Collect::any_size(), Collect::any_size());
    let stats = run_within(
        vec![
            counter(0, N),
            Node::new("t", NodeKind::Tee, vec![0]),
            resize("up", 2 * W, 2 * H, 0, false, 1),
            sink("master", &master, 2, None),
            resize("tap", W / 2, H / 2, 30, true, 1),
            sink("preview", &preview, 4, Some(true)),
        ],
        2,
        1,
    )
    .expect("the tap holds a source frame the pool was not sized for");
    let want: Vec<u32> = (0..N as u32).map(step).collect();
    assert_eq!(master.values(), want);
    let tap = stats.stages.iter().find(|s| s.name == "tap").unwrap();
    assert!(tap.skipped > 0, "a 30 ms tap kept up with instant frames");
    assert_eq!(tap.skipped + preview.got().len() as u64, N);
}

/// A node fed back (the loop's output) that only a monitor watches stays in the show: the
/// feedback needs every frame of it, so it is not made leaky by its only consumer being leaky.
#[test]
fn a_node_fed_back_and_watched_by_a_monitor_stays_in_the_show() {
    const N: u64 = 10;
    let (master, preview) = (Collect::any_size(), Collect::any_size());
    run_within(
        vec![
            counter(1, N),
            Node::new(
                "fb",
                NodeKind::Feedback {
                    from: 3,
                    color: [0, 0, 0, 0],
                },
                vec![],
            ),
            mixer("m", vec![0, 1]),
            resize("fx", W, H, 0, false, 2),
            sink("master", &master, 2, None),
            resize("monitor", W / 2, H / 2, 0, true, 3),
            sink("preview", &preview, 5, Some(true)),
        ],
        2,
        0,
    )
    .expect("a valid feedback loop watched by a monitor");
    let mut prev = 0u32;
    let want: Vec<u32> = (0..N as u32)
        .map(|n| {
            let m = weigh([1 + n, prev].into_iter());
            prev = step(m);
            m
        })
        .collect();
    assert_eq!(master.values(), want);
    assert!(!preview.got().is_empty(), "the monitor showed nothing");
}
