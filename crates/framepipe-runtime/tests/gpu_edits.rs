//! Live edits of shows with GPU nodes (issue #24): an edit whose new version would not fit
//! beside the running one in `--max-gpu-memory` is refused with a message naming GPU memory;
//! a GPU node an edit removes is released (its GL objects deleted) on the GPU thread while
//! the show goes on, and counted in the GPU figures. Its own process: the GPU memory limit is
//! the process's.

mod common;
mod gpu_node;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use framepipe_control::{command_queue, Command, GraphEdit, Outcome};
use framepipe_core::{Frame, FrameCtx, Result, Sink, VideoInfo};
use framepipe_runtime::{Editor, Graph, Node, NodeKind, OnEnd, Options, RunStats};

use common::counter;
use gpu_node::{gpu_node, gpu_node_with, source_pixel, AddFactory, Keep, Op, RELEASED_ON, SALT};

type Build = Box<dyn FnOnce() -> std::result::Result<Graph, String> + Send>;

/// Hands out the next versions in order.
struct Script(VecDeque<Build>);

impl Editor for Script {
    fn build(&mut self, _edit: &GraphEdit) -> std::result::Result<Graph, String> {
        (self.0.pop_front().expect("a build per edit"))()
    }
    fn settled(&mut self, _accepted: bool) {}
}

/// Keeps every frame, 3 ms each: slow enough that edits land mid-show.
struct Slow(Keep);

impl Sink for Slow {
    fn start(&mut self, info: VideoInfo) -> Result<()> {
        self.0.start(info)
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        std::thread::sleep(Duration::from_millis(3));
        self.0.consume(ctx, frame)
    }
    fn finish(&mut self) -> Result<()> {
        self.0.finish()
    }
}

/// Source → GPU nodes adding 10, 20, 30... (as many as `gpus`) → sink, as a first version.
fn first(gpus: usize, frames: u64, keep: &Keep) -> Vec<Node> {
    let mut nodes = vec![Node::new(
        "src",
        NodeKind::Source {
            source: counter(SALT, frames),
            on_end: OnEnd::Stop,
        },
        vec![],
    )];
    for k in 0..gpus {
        nodes.push(gpu_node(&format!("g{k}"), add(k), None, k));
    }
    nodes.push(Node::new(
        "out",
        NodeKind::Sink {
            sink: Box::new(Slow(keep.clone())),
            master: true,
        },
        vec![gpus],
    ));
    nodes
}

fn add(k: usize) -> Op {
    Op::Add(10.0 * (k + 1) as f32)
}

/// GPU memory the third node of an edit says it keeps besides its output.
const OWN: u64 = 1 << 20;

/// The same chain as a live edit's version: the source and the sink running, the first
/// `kept` GPU nodes kept, then new ones up to `gpus` (a third one keeping [`OWN`] bytes of
/// its own).
fn edited(gpus: usize, kept: usize) -> Build {
    Box::new(move || {
        let mut nodes = vec![Node::new("src", NodeKind::Running { sink: false }, vec![])];
        for k in 0..gpus {
            let factory = AddFactory {
                op: add(k),
                own_bytes: if k == 2 { OWN } else { 0 },
                ..AddFactory::default()
            };
            let mut n = gpu_node_with(&format!("g{k}"), factory, k);
            n.keep = k < kept;
            nodes.push(n);
        }
        nodes.push(Node::new(
            "out",
            NodeKind::Running { sink: true },
            vec![gpus],
        ));
        Graph::new(nodes).map_err(|e| e.to_string())
    })
}

fn options() -> Options {
    Options {
        threads: 2,
        in_flight: 2,
        ..Options::default()
    }
}

/// The GPU memory a show of `gpus` GPU nodes counts (run alone, without edits).
fn gpu_memory_of(gpus: usize) -> u64 {
    let keep = Keep::default();
    let stats: RunStats = Graph::new(first(gpus, 3, &keep))
        .unwrap()
        .prepare(options())
        .unwrap()
        .run()
        .unwrap();
    stats.memory.gpu_held_max
}

#[test]
fn an_edit_over_the_gpu_memory_is_refused_and_a_removed_gpu_node_is_released_on_the_gpu_thread() {
    // Two GPU nodes run; an edit adding a third (with its own buffers) must not fit beside
    // them, one removing the second must: the limit lies between.
    let running = gpu_memory_of(2);
    let one = gpu_memory_of(1);
    framepipe_runtime::set_max_gpu_memory(running + one + OWN / 2);

    const FRAMES: u64 = 60;
    let keep = Keep::default();
    let mut prepared = Graph::new(first(2, FRAMES, &keep))
        .unwrap()
        .prepare(options())
        .unwrap();
    let (tx, rx) = command_queue(4);
    let replies = tx.replies();
    prepared.set_commands(rx);
    prepared.set_editor(Box::new(Script(VecDeque::from([
        edited(3, 2),
        edited(1, 1),
    ]))));
    let watch = keep.clone();
    let poster = std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut outcomes = Vec::new();
        for at in [3, 6] {
            while watch.0.lock().unwrap().len() < at {
                assert!(t0.elapsed() < Duration::from_secs(30), "the run stalled");
                std::thread::sleep(Duration::from_micros(300));
            }
            // Any edit: the script decides what it builds.
            tx.post(Command::Edit(GraphEdit::Remove { node: "g1".into() }))
                .unwrap();
            let reply = loop {
                assert!(t0.elapsed() < Duration::from_secs(30), "no answer");
                if let Some(r) = replies.take() {
                    break r.outcome;
                }
                std::thread::sleep(Duration::from_micros(300));
            };
            outcomes.push(reply);
        }
        outcomes
    });
    let stats = prepared.run().expect("ran");
    let outcomes = poster.join().unwrap();

    let Outcome::Refused { reason } = &outcomes[0] else {
        panic!("the edit over the GPU memory limit is refused: {outcomes:?}")
    };
    assert!(
        reason.contains("in GPU memory") && reason.contains("raise --max-gpu-memory"),
        "{reason}"
    );
    let Outcome::Applied { frame } = outcomes[1] else {
        panic!("the removal is applied: {outcomes:?}")
    };
    assert_eq!(stats.memory.edits_refused, 1);

    // Frames before the removal went through both nodes, from its frame on through g0 alone.
    let got = keep.0.lock().unwrap().clone();
    assert_eq!(got.len() as u64, FRAMES);
    for (n, bytes) in got.iter().enumerate() {
        let mut want = source_pixel(n as u64);
        let ops: &[Op] = if (n as u64) < frame {
            &[add(0), add(1)]
        } else {
            &[add(0)]
        };
        for op in ops {
            for c in &mut want[..3] {
                *c = op.apply(*c);
            }
        }
        assert_eq!(&bytes[..4], &want, "frame {n} (removal at {frame})");
    }

    // g1 was released, once, on the GPU thread, while the show went on.
    let gpu = stats.gpu.expect("GPU figures");
    assert_eq!(gpu.released, 1, "{gpu:?}");
    assert_eq!(*RELEASED_ON.lock().unwrap(), ["fp-gpu"]);
}
