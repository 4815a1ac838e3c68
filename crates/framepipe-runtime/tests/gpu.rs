//! GPU nodes in a graph, on the real GL of the machine (Mesa's llvmpipe in CI): a chain CPU →
//! GPU nodes → CPU runs through one upload and one download per frame, with the pixels the
//! test computes; the output does not depend on the worker count; a GPU node that fails at
//! render is bypassed and the show finishes. The GPU element is the test's own: a real shader
//! (add a constant to every channel, or invert), whose result is exact in 8 bits.

mod common;
mod gpu_node;

use std::sync::{Arc, Mutex};

use framepipe_core::{FrameCtx, Mode, Result, VideoInfo};
use framepipe_runtime::{Event, Graph, Node, NodeKind, OnEnd, Options, RunStats};

use common::{counter, H, W};
use gpu_node::{gpu_node, source_pixel, Keep, Op, SALT};

/// `frames` frames of counter → GPU ops → sink, on `threads` workers.
fn run_chain(ops: &[(Op, Option<u64>)], frames: u64, threads: usize) -> (Vec<Vec<u8>>, RunStats) {
    let keep = Keep::default();
    let mut nodes = vec![Node::new(
        "src",
        NodeKind::Source {
            source: counter(SALT, frames),
            on_end: OnEnd::Stop,
        },
        vec![],
    )];
    for (k, &(op, fail_at)) in ops.iter().enumerate() {
        nodes.push(gpu_node(&format!("g{k}"), op, fail_at, k));
    }
    let last = nodes.len() - 1;
    nodes.push(Node::new(
        "out",
        NodeKind::Sink {
            sink: Box::new(keep.clone()),
            master: false,
        },
        vec![last],
    ));
    let graph = Graph::new(nodes).expect("a valid graph");
    let options = Options {
        threads,
        ..Options::default()
    };
    let stats = graph
        .prepare(options)
        .expect("prepared")
        .run()
        .expect("ran");
    let got = keep.0.lock().unwrap().clone();
    (got, stats)
}

fn expected(n: u64, ops: &[Op]) -> [u8; 4] {
    let mut px = source_pixel(n);
    for op in ops {
        for c in &mut px[..3] {
            *c = op.apply(*c);
        }
    }
    px
}

fn frames_of(stats: &RunStats, name: &str) -> u64 {
    stats
        .stages
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stage {name}: {:?}", stats.stages))
        .frames
}

#[test]
fn a_chain_of_three_gpu_nodes_uploads_and_downloads_once_per_frame_with_exact_pixels() {
    let ops = [Op::Add(10.0), Op::Add(20.0), Op::Invert];
    let chain: Vec<_> = ops.iter().map(|&o| (o, None)).collect();
    let frames = 6;
    let (got, stats) = run_chain(&chain, frames, 2);
    assert_eq!(got.len(), frames as usize);
    for (n, bytes) in got.iter().enumerate() {
        let want = expected(n as u64, &ops);
        assert!(
            bytes.chunks(4).all(|px| px == want),
            "frame {n}: got {:?}, want {want:?}",
            &bytes[..4]
        );
    }
    // One transfer each way, each run once per frame; the GPU nodes between them copy
    // nothing.
    let names: Vec<&str> = stats.stages.iter().map(|s| &*s.name).collect();
    assert_eq!(
        names,
        ["src", "src:upload", "g0", "g1", "g2", "g2:download", "out"],
        "the plan's transfers"
    );
    assert_eq!(frames_of(&stats, "src:upload"), frames);
    assert_eq!(frames_of(&stats, "g2:download"), frames);
    let gpu = stats
        .gpu
        .as_ref()
        .expect("a show with GPU nodes reports its GPU");
    assert_eq!((gpu.uploads, gpu.downloads), (frames, frames));
    assert_eq!((gpu.uploads_per_frame, gpu.downloads_per_frame), (1.0, 1.0));
    // Each GPU node's time on the GPU (timestamp queries, read without waiting): measured
    // for some frames, and a duration, not a clock reading (a 16x8 pass takes well under a
    // second even on a loaded machine).
    for g in ["g0", "g1", "g2"] {
        let st = stats.stages.iter().find(|s| s.name == g).unwrap();
        assert!(
            st.gpu_ms.is_some_and(|ms| (0.0..1000.0).contains(&ms)),
            "{g}: {st:?}"
        );
    }
}

/// Counter → GPU `a` → CPU invert → GPU `b` → sink: two uploads and two downloads per frame.
fn run_gpu_cpu_gpu(frames: u64, threads: usize) -> Vec<Vec<u8>> {
    let keep = Keep::default();
    let invert = framepipe_runtime::EffectStage::new(
        Box::new(framepipe_effects::invert::InvertFactory),
        Mode::Parallel,
    );
    let nodes = vec![
        Node::new(
            "src",
            NodeKind::Source {
                source: moving(frames),
                on_end: OnEnd::Stop,
            },
            vec![],
        ),
        gpu_node("a", Op::Add(-20.0), None, 0),
        Node::new("cpu", NodeKind::Effect(invert), vec![1]),
        gpu_node("b", Op::Invert, None, 2),
        Node::new(
            "out",
            NodeKind::Sink {
                sink: Box::new(keep.clone()),
                master: false,
            },
            vec![3],
        ),
    ];
    Graph::new(nodes)
        .unwrap()
        .prepare(Options {
            threads,
            ..Options::default()
        })
        .unwrap()
        .run()
        .unwrap();
    let got = keep.0.lock().unwrap().clone();
    got
}

/// A source whose frames all differ pixel by pixel: frame n, pixel p has R = n * 40 + p.
fn moving(frames: u64) -> Box<dyn framepipe_core::Source> {
    struct Moving(u64, u64);
    impl framepipe_core::Source for Moving {
        fn info(&self) -> VideoInfo {
            VideoInfo {
                width: W,
                height: H,
                rate: framepipe_core::Rational::new(30, 1),
            }
        }
        fn len_hint(&self) -> Option<u64> {
            Some(self.1)
        }
        fn fill(&mut self, _ctx: &FrameCtx, frame: &mut framepipe_core::FrameMut) -> Result<bool> {
            if self.0 >= self.1 {
                return Ok(false);
            }
            let n = self.0;
            for (p, px) in frame.data_mut().chunks_mut(4).enumerate() {
                px.copy_from_slice(&[(n * 40 + p as u64) as u8, 100, (n * 7) as u8, 255]);
            }
            self.0 += 1;
            Ok(true)
        }
    }
    Box::new(Moving(0, frames))
}

#[test]
fn frames_going_gpu_cpu_gpu_keep_their_order_and_pixels() {
    let reference = run_gpu_cpu_gpu(5, 1);
    for _ in 0..20 {
        assert_eq!(run_gpu_cpu_gpu(5, 2), reference);
    }
}

#[test]
fn gpu_output_does_not_depend_on_the_worker_count() {
    let chain = [(Op::Add(7.0), None), (Op::Invert, None)];
    let (one, _) = run_chain(&chain, 5, 1);
    let (three, _) = run_chain(&chain, 5, 3);
    assert_eq!(one.len(), 5);
    assert_eq!(one, three);
}

#[test]
fn a_gpu_node_failing_at_render_is_bypassed_and_the_show_finishes() {
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let ops = [Op::Add(10.0), Op::Add(100.0)];
    let keep = Keep::default();
    let nodes = vec![
        Node::new(
            "src",
            NodeKind::Source {
                source: counter(SALT, 5),
                on_end: OnEnd::Stop,
            },
            vec![],
        ),
        gpu_node("g0", ops[0], None, 0),
        gpu_node("g1", ops[1], Some(2), 1),
        Node::new(
            "out",
            NodeKind::Sink {
                sink: Box::new(keep.clone()),
                master: false,
            },
            vec![2],
        ),
    ];
    let mut p = Graph::new(nodes)
        .unwrap()
        .prepare(Options {
            threads: 2,
            in_flight: 1,
            ..Options::default()
        })
        .unwrap();
    let ev = Arc::clone(&events);
    p.set_events(Arc::new(move |e: &Event| {
        ev.lock().unwrap().push(e.clone())
    }));
    p.run().expect("the show goes on");
    let got = keep.0.lock().unwrap().clone();
    assert_eq!(got.len(), 5);
    for (n, bytes) in got.iter().enumerate() {
        // g1 works on frames 0 and 1, fails on 2 and is bypassed from then on.
        let want = if n < 2 {
            expected(n as u64, &ops)
        } else {
            expected(n as u64, &ops[..1])
        };
        assert_eq!(&bytes[..4], &want, "frame {n}");
    }
    let failed: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::GpuNodeFailed { stage, frame, .. } => Some((stage.to_string(), *frame)),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [("g1".to_string(), 2)], "reported once, by node");
}

#[test]
fn a_gpu_node_that_hangs_is_named_by_the_stall_check() {
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let keep = Keep::default();
    let stalling = gpu_node::AddFactory {
        op: Op::Add(5.0),
        // Frame 4 begins once frame 2 is out (2 frames in flight): the show has started.
        stall: Some((4, std::time::Duration::from_millis(600))),
        ..gpu_node::AddFactory::default()
    };
    let nodes = vec![
        Node::new(
            "src",
            NodeKind::Source {
                source: counter(SALT, 8),
                on_end: OnEnd::Stop,
            },
            vec![],
        ),
        gpu_node("g0", Op::Add(1.0), None, 0),
        gpu_node::gpu_node_with("hangs", stalling, 1),
        Node::new(
            "out",
            NodeKind::Sink {
                sink: Box::new(keep.clone()),
                master: true,
            },
            vec![2],
        ),
    ];
    let mut p = Graph::new(nodes)
        .unwrap()
        .prepare(Options {
            threads: 2,
            in_flight: 2,
            stall_timeout_ns: 150_000_000,
            ..Options::default()
        })
        .unwrap();
    let ev = Arc::clone(&events);
    p.set_events(Arc::new(move |e: &Event| {
        ev.lock().unwrap().push(e.clone())
    }));
    p.run().expect("the show goes on");
    assert_eq!(keep.0.lock().unwrap().len(), 8);
    let stalled: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::Stalled { stage, .. } => Some(stage.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(stalled, ["hangs"], "the GPU node is named");
}

/// `word`'s bytes with `op` on R, G and B.
fn op_word(word: u32, op: Op) -> u32 {
    let mut px = word.to_le_bytes();
    for c in &mut px[..3] {
        *c = op.apply(*c);
    }
    u32::from_le_bytes(px)
}

fn sink_of(name: &str, sink: &common::Collect, master: bool, input: usize) -> Node {
    Node::new(
        name,
        NodeKind::Sink {
            sink: Box::new(sink.clone()),
            master,
        },
        vec![input],
    )
}

fn src_of(frames: u64) -> Node {
    Node::new(
        "src",
        NodeKind::Source {
            source: counter(SALT, frames),
            on_end: OnEnd::Stop,
        },
        vec![],
    )
}

fn run_nodes(nodes: Vec<Node>) -> RunStats {
    Graph::new(nodes)
        .unwrap()
        .prepare(Options {
            threads: 2,
            ..Options::default()
        })
        .unwrap()
        .run()
        .unwrap()
}

/// A feedback loop closed through a GPU node: frame n's feedback is the GPU node's output of
/// frame n - 1 (downloaded for the feedback, uploaded again), exact.
#[test]
fn a_feedback_loop_through_a_gpu_node_feeds_back_its_last_frame() {
    const N: u64 = 8;
    let color = [9u8, 0, 0, 255];
    let out = common::Collect::default();
    run_nodes(vec![
        src_of(N),
        Node::new("fb", NodeKind::Feedback { from: 3, color }, vec![]),
        Node::new(
            "mix",
            NodeKind::Mixer(framepipe_runtime::MixerStage::new(
                Box::new(common::Weigh { sleep_us: 0 }),
                Mode::Parallel,
            )),
            vec![0, 1],
        ),
        gpu_node("g", Op::Add(1.0), None, 2),
        sink_of("out", &out, true, 3),
    ]);
    let mut fb = u32::from_le_bytes(color);
    let mut want = Vec::new();
    for n in 0..N {
        let src = u32::from_le_bytes(source_pixel(n));
        let g = op_word(common::weigh([src, fb].into_iter()), Op::Add(1.0));
        want.push(g);
        fb = g;
    }
    assert_eq!(out.values(), want);
}

/// A GPU node's output teed to two sinks: each gets every frame, exact.
#[test]
fn a_gpu_node_teed_to_two_sinks_feeds_both() {
    const N: u64 = 6;
    let (a, b) = (common::Collect::default(), common::Collect::default());
    run_nodes(vec![
        src_of(N),
        gpu_node("g", Op::Add(3.0), None, 0),
        Node::new("t", NodeKind::Tee, vec![1]),
        sink_of("a", &a, true, 2),
        sink_of("b", &b, false, 2),
    ]);
    let want: Vec<u32> = (0..N)
        .map(|n| op_word(u32::from_le_bytes(source_pixel(n)), Op::Add(3.0)))
        .collect();
    assert_eq!(a.values(), want, "a");
    assert_eq!(b.values(), want, "b");
}

/// A slow leaky monitor branch with a GPU node: the master gets every frame; the branch
/// skips frames while busy, and each frame it shows is that frame's, through its GPU node.
#[test]
fn a_leaky_branch_with_a_gpu_node_skips_frames_and_shows_exact_ones() {
    const N: u64 = 30;
    let master = common::Collect::default();
    let preview = common::Collect {
        sleep_ms: 10,
        ..common::Collect::default()
    };
    let mut tap = gpu_node("tap", Op::Invert, None, 2);
    tap.leaky = Some(true);
    let mut preview_sink = sink_of("preview", &preview, false, 3);
    preview_sink.leaky = Some(true);
    run_nodes(vec![
        src_of(N),
        gpu_node("g", Op::Add(2.0), None, 0),
        Node::new("t", NodeKind::Tee, vec![1]),
        tap,
        preview_sink,
        sink_of("master", &master, true, 2),
    ]);
    let show = |n: u64| op_word(u32::from_le_bytes(source_pixel(n)), Op::Add(2.0));
    let want: Vec<u32> = (0..N).map(show).collect();
    assert_eq!(master.values(), want, "the master got every frame");
    let shown = preview.got();
    assert!(!shown.is_empty() && shown.len() < N as usize, "{shown:?}");
    for w in shown.windows(2) {
        assert!(w[0].0 < w[1].0, "in order: {shown:?}");
    }
    for &(seq, v) in &shown {
        assert_eq!(v, op_word(show(seq), Op::Invert), "preview frame {seq}");
    }
}
