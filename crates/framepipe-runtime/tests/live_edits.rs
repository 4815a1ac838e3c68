//! Issue #9, live edits: the running graph switches to a new version at a frame boundary.
//! Every frame reaches the output once, in order; each edit is seen from the frame its reply
//! names; kept nodes keep their state; a refused edit changes nothing.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{counter, Collect, H, W};
use framepipe_control::{command_queue, Command, GraphEdit, Outcome};
use framepipe_core::{
    Effect, EffectFactory, Frame, FrameCtx, FrameMut, Mode, Rational, Result, SliceRunner,
    VideoInfo,
};
use framepipe_runtime::{Editor, EffectStage, Graph, Node, NodeKind, Options};

/// Adds `k` to every word; parallel.
struct Add(u32);

impl EffectFactory for Add {
    fn name(&self) -> &str {
        "add"
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(input)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(Add(self.0)))
    }
}

impl Effect for Add {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        for (o, i) in output.words_mut().iter_mut().zip(input.words()) {
            *o = i.wrapping_add(self.0);
        }
        Ok(())
    }
}

/// Stateful (serial): adds 1000 × the frames it has processed before this one.
struct Count(u32);

impl EffectFactory for Count {
    fn name(&self) -> &str {
        "count"
    }
    fn default_mode(&self) -> Mode {
        Mode::Serial
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(input)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(Count(0)))
    }
}

impl Effect for Count {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        for (o, i) in output.words_mut().iter_mut().zip(input.words()) {
            *o = i.wrapping_add(1000 * self.0);
        }
        self.0 += 1;
        Ok(())
    }
}

/// Halves the frame's width: a sink fed by it would change size.
struct Half;

impl EffectFactory for Half {
    fn name(&self) -> &str {
        "half"
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(VideoInfo {
            width: input.width / 2,
            ..input
        })
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(Add(0)))
    }
}

fn fx(name: &str, f: impl EffectFactory + 'static, input: usize, keep: bool) -> Node {
    let mode = f.default_mode();
    let stage = EffectStage::new(Box::new(f), mode);
    let mut n = Node::new(name, NodeKind::Effect(stage), vec![input]);
    n.keep = keep;
    n
}

fn running(name: &str, sink: bool, inputs: Vec<usize>) -> Node {
    Node::new(name, NodeKind::Running { sink }, inputs)
}

type Build = Box<dyn FnOnce() -> std::result::Result<Graph, String> + Send>;

/// Hands out the prepared next versions in order (whatever the edit says: the CLI's editor
/// turns edits into graphs; this one only checks the engine side).
struct Script {
    builds: VecDeque<Build>,
    settled: Arc<Mutex<Vec<bool>>>,
}

impl Editor for Script {
    fn build(&mut self, _edit: &GraphEdit) -> std::result::Result<Graph, String> {
        (self.builds.pop_front().expect("a build per edit"))()
    }
    fn settled(&mut self, accepted: bool) {
        self.settled.lock().unwrap().push(accepted);
    }
}

fn graph(nodes: Vec<Node>) -> std::result::Result<Graph, String> {
    Graph::new(nodes).map_err(|e| e.to_string())
}

/// Runs `first`, posting an edit (any: the script decides) after each frame count in `at`;
/// returns the values the sink got, the replies (in posting order) and the editor's settled
/// calls.
fn run(
    first: Vec<Node>,
    builds: Vec<Build>,
    at: &[usize],
    frames: u64,
    threads: usize,
    paced: bool,
) -> (Vec<u32>, Vec<Outcome>, Vec<bool>) {
    let _ = frames;
    // Unpaced, the sink takes 2 ms a frame so that the edits land mid-run.
    let sink = Collect {
        sleep_ms: if paced { 0 } else { 2 },
        ..Collect::default()
    };
    let mut nodes = first;
    // The source and the sink of the first version are real; later versions name them.
    nodes.insert(
        0,
        Node::new(
            "src",
            NodeKind::Source {
                source: counter(0, frames),
                on_end: framepipe_runtime::OnEnd::Stop,
            },
            vec![],
        ),
    );
    let last = nodes.len() - 1;
    nodes.push(Node::new(
        "out",
        NodeKind::Sink {
            sink: Box::new(sink.clone()),
            master: true,
        },
        vec![last],
    ));
    let settled = Arc::new(Mutex::new(Vec::new()));
    let mut prepared = Graph::new(nodes)
        .unwrap()
        .prepare(Options {
            threads,
            pace: paced.then(|| Rational::new(200, 1)),
            ..Options::default()
        })
        .unwrap();
    let (tx, rx) = command_queue(16);
    let replies = tx.replies();
    prepared.set_commands(rx);
    prepared.set_editor(Box::new(Script {
        builds: builds.into(),
        settled: Arc::clone(&settled),
    }));
    let watch = sink.clone();
    let at = at.to_vec();
    let poster = std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut outcomes: Vec<Outcome> = Vec::new();
        for n in at {
            while watch.got.lock().unwrap().len() < n {
                assert!(t0.elapsed() < Duration::from_secs(30), "the run stalled");
                std::thread::sleep(Duration::from_micros(300));
            }
            let edit = Command::Edit(GraphEdit::Remove { node: "x".into() });
            let t = tx.post(edit).unwrap();
            // One edit at a time: wait for its answer before the next.
            let reply = loop {
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "no answer to the edit"
                );
                if let Some(r) = replies.take() {
                    break r;
                }
                std::thread::sleep(Duration::from_micros(300));
            };
            assert_eq!(reply.ticket, t);
            outcomes.push(reply.outcome);
        }
        outcomes
    });
    prepared.run().unwrap();
    let outcomes = poster.join().unwrap();
    let s = settled.lock().unwrap().clone();
    (sink.values(), outcomes, s)
}

fn frame_of(o: &Outcome) -> usize {
    match o {
        Outcome::Applied { frame } => *frame as usize,
        other => panic!("an applied edit, got {other:?}"),
    }
}

#[test]
fn add_remove_replace_each_seen_from_its_reply_frame_every_frame_once() {
    for threads in [1, 2, 4] {
        for paced in [false, true] {
            let builds: Vec<Build> = vec![
                // add b after a
                Box::new(|| {
                    graph(vec![
                        running("src", false, vec![]),
                        fx("a", Add(1), 0, true),
                        fx("b", Add(100), 1, false),
                        running("out", true, vec![2]),
                    ])
                }),
                // remove a
                Box::new(|| {
                    graph(vec![
                        running("src", false, vec![]),
                        fx("b", Add(100), 0, true),
                        running("out", true, vec![1]),
                    ])
                }),
                // replace b
                Box::new(|| {
                    graph(vec![
                        running("src", false, vec![]),
                        fx("b", Add(10_000), 0, false),
                        running("out", true, vec![1]),
                    ])
                }),
            ];
            let (values, outcomes, settled) = run(
                vec![fx("a", Add(1), 0, false)],
                builds,
                &[15, 35, 55],
                90,
                threads,
                paced,
            );
            let what = format!("threads {threads}, paced {paced}");
            assert_eq!(values.len(), 90, "{what}: every frame once");
            assert_eq!(settled, [true, true, true], "{what}: {outcomes:?}");
            let n: Vec<usize> = outcomes.iter().map(frame_of).collect();
            assert!(n[0] < n[1] && n[1] < n[2] && n[2] < 90, "{what}: {n:?}");
            for (f, &v) in values.iter().enumerate() {
                let f32 = f as u32;
                let want = if f < n[0] {
                    f32 + 1
                } else if f < n[1] {
                    f32 + 101
                } else if f < n[2] {
                    f32 + 100
                } else {
                    f32 + 10_000
                };
                assert_eq!(v, want, "{what}: frame {f} (edits at {n:?})");
            }
        }
    }
}

#[test]
fn a_kept_stateful_node_keeps_its_state_across_an_edit() {
    for threads in [1, 3] {
        let builds: Vec<Build> = vec![Box::new(|| {
            graph(vec![
                running("src", false, vec![]),
                fx("cnt", Count(0), 0, true),
                fx("a", Add(2), 1, false),
                running("out", true, vec![2]),
            ])
        })];
        let (values, outcomes, _) = run(
            vec![fx("cnt", Count(0), 0, false), fx("a", Add(1), 1, false)],
            builds,
            &[20],
            60,
            threads,
            false,
        );
        let n = frame_of(&outcomes[0]);
        for (f, &v) in values.iter().enumerate() {
            let f32 = f as u32;
            let add = if f < n { 1 } else { 2 };
            assert_eq!(
                v,
                f32 + 1000 * f32 + add,
                "threads {threads}: frame {f} (edit at {n})"
            );
        }
    }
}

#[test]
fn a_refused_edit_leaves_the_output_untouched() {
    let builds: Vec<Build> = vec![
        // The editor refuses.
        Box::new(|| Err("no such plugin 'frei0r-nosuch'".to_string())),
        // The engine refuses: the sink would get frames of another size.
        Box::new(|| {
            graph(vec![
                running("src", false, vec![]),
                fx("a", Add(1), 0, true),
                fx("h", Half, 1, false),
                running("out", true, vec![2]),
            ])
        }),
        // The engine refuses: the sink is gone.
        Box::new(|| {
            let mut nodes = vec![running("src", false, vec![]), fx("a", Add(1), 0, true)];
            nodes.push(Node::new(
                "other",
                NodeKind::Sink {
                    sink: Box::new(Collect::default()),
                    master: true,
                },
                vec![1],
            ));
            graph(nodes)
        }),
    ];
    let (values, outcomes, settled) = run(
        vec![fx("a", Add(1), 0, false)],
        builds,
        &[10, 20, 30],
        50,
        2,
        true,
    );
    assert_eq!(settled, [false, false, false]);
    let reasons: Vec<String> = outcomes
        .iter()
        .map(|o| match o {
            Outcome::Refused { reason } => reason.to_string(),
            other => panic!("refused, got {other:?}"),
        })
        .collect();
    assert!(reasons[0].contains("frei0r-nosuch"), "{reasons:?}");
    assert!(reasons[1].contains("keeps its size"), "{reasons:?}");
    assert!(reasons[2].contains("sink"), "{reasons:?}");
    let want: Vec<u32> = (0..50).map(|f| f + 1).collect();
    assert_eq!(values, want);
    let _ = (W, H);
}
