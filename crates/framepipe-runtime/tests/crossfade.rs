//! Issue #9, requirement 3: a crossfade between two graphs (`load FILE fade=`), the engine's
//! side. The editor's first graph runs both (a mixer whose `fader` the engine ramps from 0 to 1
//! over the fade's frames), its second the new one alone; whatever the threads, the pace, or
//! when the second switch lands, every frame reaches the output once, in order, with the
//! amount for frame N a function of N; the new source starts at the fade's first frame; an edit
//! during the fade is refused; the end is reported with its frame.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{counter, Collect};
use framepipe_control::{command_queue, Command, GraphEdit, Outcome};
use framepipe_core::{
    Frame, FrameCtx, FrameMut, Mixer, MixerFactory, Mode, PropKind, PropSpec, PropValue, Rational,
    Result, SliceRunner, VideoInfo,
};
use framepipe_runtime::{Editor, Event, Fade, Graph, MixerStage, Node, NodeKind, OnEnd, Options};

/// A crossfade whose output tells what it mixed: at `fader` 1 input 1 as it is (as `mix`
/// gives B exactly), else `round(fader × 1000) × 10^6 + a × 1000 + b` of the inputs' words.
struct Fader {
    amount: f64,
}

impl MixerFactory for Fader {
    fn name(&self) -> &str {
        "fader"
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, inputs: &[VideoInfo]) -> Result<VideoInfo> {
        Ok(inputs[0])
    }
    fn instantiate(&self) -> Result<Box<dyn Mixer>> {
        Ok(Box::new(Fader {
            amount: self.amount,
        }))
    }
}

impl Mixer for Fader {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        inputs: &[&Frame],
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        let (a, b) = (inputs[0].words(), inputs[1].words());
        for ((o, &a), &b) in output.words_mut().iter_mut().zip(a).zip(b) {
            *o = if self.amount >= 1.0 {
                b
            } else {
                (self.amount * 1000.0).round() as u32 * 1_000_000 + a * 1000 + b
            };
        }
        Ok(())
    }
    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        match (name, value) {
            ("fader", PropValue::Float(x)) => self.amount = *x,
            _ => panic!("unexpected property {name}={value:?}"),
        }
        Ok(())
    }
}

fn fader_node(name: &str, inputs: Vec<usize>) -> Node {
    let mut stage = MixerStage::new(Box::new(Fader { amount: 0.0 }), Mode::Parallel);
    let spec = PropSpec::new(
        "fader",
        PropKind::Float { min: 0.0, max: 1.0 },
        PropValue::Float(0.0),
        "amount of input 1",
    );
    stage.params = vec![(spec, PropValue::Float(0.0))];
    Node::new(name, NodeKind::Mixer(stage), inputs)
}

fn source(name: &str, salt: u32, frames: u64) -> Node {
    Node::new(
        name,
        NodeKind::Source {
            source: counter(salt, frames),
            on_end: OnEnd::Stop,
        },
        vec![],
    )
}

fn running(name: &str, sink: bool, inputs: Vec<usize>) -> Node {
    Node::new(name, NodeKind::Running { sink }, inputs)
}

/// The new source's salt: its frame j is `NEW + j`.
const NEW: u32 = 500;
/// Frames of the fade: 2 s at the counters' 30 fps.
const LEN: u64 = 60;
/// Frames of the new source (the run ends with it).
const NEW_FRAMES: u64 = 150;

/// Fades from `src` (salt 0) to `src2` (salt [`NEW`]) through `fade:out`.
struct Crossfader {
    /// The graphs still to build: the crossfade's, then the one after it.
    step: usize,
}

impl Editor for Crossfader {
    fn build(&mut self, _edit: &GraphEdit) -> std::result::Result<Graph, String> {
        assert_eq!(self.step, 0, "one crossfade (the second edit is refused)");
        self.step = 1;
        let mut old = running("old:src", false, vec![]);
        old.was = Some("src".into());
        Graph::new(vec![
            old,
            source("src2", NEW, NEW_FRAMES),
            fader_node("fade:out", vec![0, 1]),
            running("out", true, vec![2]),
        ])
        .map_err(|e| e.to_string())
    }
    fn settled(&mut self, accepted: bool) {
        assert!(accepted);
    }
    fn fade(&self) -> Option<Fade> {
        Some(Fade {
            to: "b.toml".into(),
            ns: 2_000_000_000,
            ramps: vec![("fade:out".into(), "fader".into())],
        })
    }
    fn after_fade(&mut self) -> std::result::Result<Graph, String> {
        assert_eq!(self.step, 1);
        self.step = 2;
        Graph::new(vec![
            running("src2", false, vec![]),
            running("out", true, vec![0]),
        ])
        .map_err(|e| e.to_string())
    }
}

/// Runs the old graph (`src` ! `out`), posts the `load` after `at` frames and a second edit
/// once it is answered; returns the sink's values, the two replies and the events.
fn run(threads: usize, paced: bool, at: usize) -> (Vec<u32>, Vec<Outcome>, Vec<Event>) {
    let sink = Collect {
        // Unpaced, 2 ms a frame, so that the edits land mid-run.
        sleep_ms: if paced { 0 } else { 2 },
        ..Collect::default()
    };
    let mut prepared = Graph::new(vec![
        source("src", 0, 10_000),
        Node::new(
            "out",
            NodeKind::Sink {
                sink: Box::new(sink.clone()),
                master: true,
            },
            vec![0],
        ),
    ])
    .unwrap()
    .prepare(Options {
        threads,
        pace: paced.then(|| Rational::new(200, 1)),
        ..Options::default()
    })
    .unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    prepared.set_events(Arc::new(move |e: &Event| {
        seen.lock().unwrap().push(e.clone())
    }));
    let (tx, rx) = command_queue(16);
    let replies = tx.replies();
    prepared.set_commands(rx);
    prepared.set_editor(Box::new(Crossfader { step: 0 }));
    let watch = sink.clone();
    let poster = std::thread::spawn(move || {
        let t0 = Instant::now();
        while watch.got.lock().unwrap().len() < at {
            assert!(t0.elapsed() < Duration::from_secs(30), "the run stalled");
            std::thread::sleep(Duration::from_micros(300));
        }
        let load = GraphEdit::Load {
            path: "b.toml".into(),
            fade_ns: Some(2_000_000_000),
            transition: None,
        };
        let mut outcomes = VecDeque::new();
        for _ in 0..2 {
            tx.post(Command::Edit(load.clone())).unwrap();
            let reply = loop {
                assert!(t0.elapsed() < Duration::from_secs(30), "no answer");
                if let Some(r) = replies.take() {
                    break r;
                }
                std::thread::sleep(Duration::from_micros(300));
            };
            outcomes.push_back(reply.outcome);
        }
        outcomes
    });
    prepared.run().unwrap();
    let outcomes = poster.join().unwrap().into_iter().collect();
    let events = events.lock().unwrap().clone();
    (sink.values(), outcomes, events)
}

// issue #9
#[test]
fn a_crossfade_ramps_on_the_frame_clock_then_the_new_graph_runs_alone() {
    for threads in [1, 2, 4] {
        for paced in [false, true] {
            let what = format!("threads {threads}, paced {paced}");
            let (values, outcomes, events) = run(threads, paced, 20);
            let n = match &outcomes[0] {
                Outcome::Applied { frame } => *frame,
                other => panic!("{what}: {other:?}"),
            };
            match &outcomes[1] {
                Outcome::Refused { reason } => assert_eq!(
                    reason,
                    &format!(
                        "a crossfade to b.toml is under way (until frame {}); send this edit \
                         once it is done",
                        n + LEN
                    ),
                    "{what}"
                ),
                other => panic!("{what}: the edit during the fade: {other:?}"),
            }
            let done: Vec<&Event> = events
                .iter()
                .filter(|e| matches!(e, Event::FadeDone { .. }))
                .collect();
            assert_eq!(
                done,
                [&Event::FadeDone {
                    to: "b.toml".into(),
                    frame: n + LEN
                }],
                "{what}"
            );
            // Every frame once, in order (`values` checks the sequence numbers); the run ends
            // with the new source.
            assert_eq!(values.len() as u64, n + NEW_FRAMES, "{what}");
            for (k, &v) in values.iter().enumerate() {
                let k = k as u64;
                let want = if k < n {
                    k as u32
                } else if k < n + LEN {
                    // The old source went on (its frame k), the new one started at N (its
                    // frame k − N), the amount is (k − N) / LEN.
                    let amount = ((k - n) as f64 / LEN as f64 * 1000.0).round() as u32;
                    amount * 1_000_000 + k as u32 * 1000 + NEW + (k - n) as u32
                } else {
                    NEW + (k - n) as u32
                };
                assert_eq!(v, want, "{what}: frame {k} (fade from {n})");
            }
        }
    }
}
