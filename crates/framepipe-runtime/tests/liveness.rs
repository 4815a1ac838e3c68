//! Issue 7, requirement 5 (liveness) with the real runtime and small in-test elements: a panic
//! anywhere ends the run with an error naming where, within a bounded time; `stop` is acted on
//! while the output thread waits for a frame that does not come; the calling thread gets its
//! scheduling policy back. Every run goes through [`bounded`], so a hang fails the test instead
//! of hanging the suite.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use framepipe_control::{command_queue, Command, CommandReader};
use framepipe_core::{
    Effect, EffectFactory, Frame, FrameCtx, FrameMut, Mode, Rational, Result, Sink, SliceRunner,
    Source, VideoInfo,
};
use framepipe_runtime::{EffectStage, Event, Options, Pipeline, RunStats};

const W: u32 = 16;
const H: u32 = 16;

/// Runs `f` on its own thread and fails the test if it does not return within `limit`.
fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the run did not end within {limit:?}: it hangs")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("the run panicked instead of returning an error")
        }
    }
}

/// Numbers frames; panics at `panic_at`; blocks (until `unblock` is set) at `block_at`.
struct Numbers {
    frames: u64,
    rate: u32,
    panic_at: Option<u64>,
    block_at: Option<(u64, Arc<AtomicBool>)>,
}

impl Source for Numbers {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: W,
            height: H,
            rate: Rational::new(self.rate, 1),
        }
    }
    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        if Some(ctx.seq) == self.panic_at {
            panic!("numbers exploded at frame {}", ctx.seq);
        }
        if let Some((at, unblock)) = &self.block_at {
            if ctx.seq == *at {
                // A source waiting for a peer that does not come (until the test lets it go).
                while !unblock.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        if ctx.seq >= self.frames {
            return Ok(false);
        }
        frame.words_mut().fill(ctx.seq as u32);
        Ok(true)
    }
}

/// Copies its input; panics at `panic_at`, inside one of the frame's slices when `in_slice`;
/// takes `slow` per frame from frame 2 on.
struct Copy {
    panic_at: Option<u64>,
    in_slice: bool,
    slow: Duration,
}
struct CopyInst(Option<u64>, bool, Duration);

impl EffectFactory for Copy {
    fn name(&self) -> &str {
        "copy"
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(input)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(CopyInst(self.panic_at, self.in_slice, self.slow)))
    }
}

impl Effect for CopyInst {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        slices: &dyn SliceRunner,
    ) -> Result<()> {
        let boom = Some(ctx.seq) == self.0;
        if boom && !self.1 {
            panic!("copy exploded at frame {}", ctx.seq);
        }
        if ctx.seq >= 2 {
            std::thread::sleep(self.2);
        }
        let seq = ctx.seq;
        slices.run(8, &|i| {
            if boom && i == 5 {
                panic!("slice {i} of frame {seq} exploded");
            }
            std::thread::sleep(Duration::from_micros(100));
        });
        output.copy_from(input.data());
        Ok(())
    }
}

/// Keeps the sequence numbers it got; panics at `panic_at`; counts `finish` calls.
#[derive(Clone, Default)]
struct Got {
    seqs: Arc<Mutex<Vec<u64>>>,
    finished: Arc<AtomicU64>,
}
struct Keep {
    got: Got,
    panic_at: Option<u64>,
    panic_on_repeat: bool,
    panic_in_finish: bool,
    slow: Duration,
}
impl Sink for Keep {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        if Some(ctx.seq) == self.panic_at {
            panic!("keep exploded at frame {}", ctx.seq);
        }
        assert_eq!(frame.words()[0], ctx.seq as u32, "whole frames, in order");
        let mut seqs = self.got.seqs.lock().unwrap();
        if self.panic_on_repeat && seqs.last() == Some(&ctx.seq) {
            panic!("keep exploded on a repeat of frame {}", ctx.seq);
        }
        seqs.push(ctx.seq);
        drop(seqs);
        std::thread::sleep(self.slow);
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        self.got.finished.fetch_add(1, Ordering::SeqCst);
        if self.panic_in_finish {
            panic!("keep exploded while finishing");
        }
        Ok(())
    }
}

#[derive(Default)]
struct Setup {
    frames: u64,
    rate: u32,
    source_panic: Option<u64>,
    block_at: Option<(u64, Arc<AtomicBool>)>,
    effect_panic: Option<u64>,
    effect_panic_in_slice: bool,
    effect_slow: Duration,
    sink_panic: Option<u64>,
    sink_panic_on_repeat: bool,
    sink_panic_in_finish: bool,
    sink_slow: Duration,
    options: Options,
    commands: Option<CommandReader>,
    events: Option<framepipe_runtime::EventFn>,
}

fn run(s: Setup, got: Got) -> Result<RunStats> {
    let p = Pipeline::new(
        (
            "numbers".into(),
            Box::new(Numbers {
                frames: s.frames,
                rate: s.rate.max(1),
                panic_at: s.source_panic,
                block_at: s.block_at,
            }),
        ),
        vec![(
            "copy".into(),
            EffectStage::new(
                Box::new(Copy {
                    panic_at: s.effect_panic,
                    in_slice: s.effect_panic_in_slice,
                    slow: s.effect_slow,
                }),
                Mode::Parallel,
            ),
        )],
        (
            "keep".into(),
            Box::new(Keep {
                got,
                panic_at: s.sink_panic,
                panic_on_repeat: s.sink_panic_on_repeat,
                panic_in_finish: s.sink_panic_in_finish,
                slow: s.sink_slow,
            }),
        ),
    );
    let mut prepared = p.prepare(s.options)?;
    if let Some(c) = s.commands {
        prepared.set_commands(c);
    }
    if let Some(e) = s.events {
        prepared.set_events(e);
    }
    prepared.run()
}

fn threads(n: usize) -> Options {
    // (Every test here sets what it needs; the rest is the default.)
    Options {
        threads: n,
        ..Options::default()
    }
}

fn sched_policy_of_this_thread() -> i32 {
    // SAFETY: sched_getscheduler(0) queries the calling thread; no memory is passed.
    unsafe { libc::sched_getscheduler(0) }
}

/// Issue 7: the SCHED_FIFO policy set on the thread that called `run` was never restored.
#[test]
fn the_calling_thread_gets_its_scheduling_policy_back_after_a_paced_run() {
    bounded(Duration::from_secs(20), || {
        let before = sched_policy_of_this_thread();
        let got = Got::default();
        let stats = run(
            Setup {
                frames: 10,
                rate: 200,
                options: Options {
                    threads: 2,
                    pace: Some(Rational::new(200, 1)),
                    realtime: true,
                    ..Options::default()
                },
                ..Setup::default()
            },
            got.clone(),
        )
        .expect("paced run");
        let pacing = stats.pacing.expect("paced");
        // Where SCHED_FIFO is permitted (root here), the run did use it; either way it is gone.
        eprintln!("realtime during the run: {}", pacing.realtime);
        assert_eq!(
            sched_policy_of_this_thread(),
            before,
            "policy after the run (SCHED_FIFO = {})",
            libc::SCHED_FIFO
        );
        assert_eq!(got.seqs.lock().unwrap().len(), 10);
    });
}

/// The error of a run that must fail, within a bounded time, having finished the sink once.
fn fails_naming(setup: impl FnOnce() -> Setup + Send + 'static, names: &[&str]) -> (String, Got) {
    let got = Got::default();
    let g = got.clone();
    let t0 = Instant::now();
    let err = bounded(Duration::from_secs(20), move || {
        run(setup(), g).map(|_| ()).map_err(|e| e.to_string())
    })
    .expect_err("the run must fail");
    for name in names {
        assert!(err.contains(name), "error '{err}' does not name '{name}'");
    }
    assert_eq!(
        got.finished.load(Ordering::SeqCst),
        1,
        "the sink was finished once"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    (err, got)
}

#[test]
fn a_panicking_source_ends_the_run_with_an_error_naming_it() {
    let (_, got) = fails_naming(
        || Setup {
            frames: 100,
            source_panic: Some(4),
            options: threads(3),
            ..Setup::default()
        },
        &["numbers", "panicked", "numbers exploded at frame 4"],
    );
    assert_eq!(*got.seqs.lock().unwrap(), (0..4).collect::<Vec<_>>());
}

#[test]
fn an_effect_panicking_inside_a_slice_ends_the_run_with_an_error_naming_it() {
    fails_naming(
        || Setup {
            frames: 100,
            effect_panic: Some(6),
            effect_panic_in_slice: true,
            options: threads(3),
            ..Setup::default()
        },
        &["copy", "panicked", "slice 5 of frame 6 exploded"],
    );
}

#[test]
fn a_panicking_sink_ends_the_run_with_an_error_naming_it() {
    fails_naming(
        || Setup {
            frames: 100,
            sink_panic: Some(5),
            options: threads(2),
            ..Setup::default()
        },
        &["keep", "keep exploded at frame 5"],
    );
}

/// Under `--overload live` a frame is given to the sink again at a deadline with no new frame;
/// that call was not guarded, and its panic left the workers waiting for ever (a hang).
#[test]
fn a_sink_panicking_on_a_repeated_frame_ends_the_run_with_an_error_naming_it() {
    fails_naming(
        || Setup {
            frames: 30,
            rate: 200,
            effect_slow: Duration::from_millis(25),
            sink_panic_on_repeat: true,
            options: Options {
                threads: 2,
                pace: Some(Rational::new(200, 1)),
                overload: framepipe_runtime::Overload::Live,
                ..Options::default()
            },
            ..Setup::default()
        },
        &["keep", "on a repeat of frame"],
    );
}

/// `Sink::finish` was called unguarded: its panic unwound out of `run`.
#[test]
fn a_sink_panicking_in_finish_ends_the_run_with_an_error_naming_it() {
    fails_naming(
        || Setup {
            frames: 10,
            sink_panic_in_finish: true,
            options: threads(2),
            ..Setup::default()
        },
        &["keep", "while finishing"],
    );
}

/// A callback panicking on the output thread (here on a rejected command) unwound through the
/// output loop and left the workers waiting for ever.
#[test]
fn an_event_callback_that_panics_ends_the_run_with_an_error_naming_it() {
    fails_naming(
        || {
            let (tx, rx) = command_queue(4);
            tx.post(Command::parse("set copy.nosuch 1").unwrap())
                .unwrap();
            Setup {
                frames: 1_000_000,
                rate: 25,
                options: threads(2),
                commands: Some(rx),
                events: Some(Arc::new(|e: &Event| panic!("callback exploded on {e:?}"))),
                ..Setup::default()
            }
        },
        &["event callback", "callback exploded", "CommandRejected"],
    );
}

/// `stop` while the output thread waits for a frame that does not come (the source is blocked,
/// say on a network peer): the run ends at once with the frames delivered so far, whole, and
/// the sink finished; the blocked worker is left running (reported) and exits when the source
/// returns. Before, `stop` was only acted on when the next frame arrived: a hang.
#[test]
fn stop_is_acted_on_while_the_source_is_blocked() {
    let unblock = Arc::new(AtomicBool::new(false));
    let got = Got::default();
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let (tx, rx) = command_queue(4);
    let (g, u, ev) = (got.clone(), unblock.clone(), events.clone());
    let runner = std::thread::spawn(move || {
        let setup = Setup {
            frames: 100,
            rate: 25,
            block_at: Some((5, u)),
            options: threads(2),
            commands: Some(rx),
            events: Some(Arc::new(move |e: &Event| {
                ev.lock().unwrap().push(e.clone())
            })),
            ..Setup::default()
        };
        let t = Instant::now();
        let r = run(setup, g);
        (r.map(|s| s.frames), t.elapsed())
    });
    // Wait until the five frames before the blocked one are out.
    let t0 = Instant::now();
    while got.seqs.lock().unwrap().len() < 5 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "frames 0..5 never came"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(50));
    let stop_at = Instant::now();
    tx.post(Command::Stop).unwrap();
    let waited = bounded(Duration::from_secs(10), move || runner.join().unwrap());
    let stopped_in = stop_at.elapsed();
    unblock.store(true, Ordering::SeqCst);
    let (frames, _) = waited;
    assert_eq!(frames.expect("a stopped run is not an error"), 5);
    assert_eq!(*got.seqs.lock().unwrap(), (0..5).collect::<Vec<_>>());
    assert_eq!(
        got.finished.load(Ordering::SeqCst),
        1,
        "the sink was finished"
    );
    // The sink is finished at once; `run` returns after the join grace.
    assert!(
        stopped_in < framepipe_runtime::JOIN_GRACE + Duration::from_secs(2),
        "stop took {stopped_in:?}"
    );
    let left: Vec<Event> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, Event::LeftRunning { .. }))
        .cloned()
        .collect();
    assert!(
        matches!(&left[..], [Event::LeftRunning { stage, .. }] if &**stage == "numbers"),
        "{left:?}"
    );
}

/// Found when merging issue 7's branches: under `--overload live`, a sink slower than the frame
/// period made the output thread show the previous frame again at every deadline without ever
/// looking for the next frame or the end of the stream: the run never ended (a tcpsink to a
/// receiver writing to disk streamed repeats for ever).
#[test]
fn a_sink_slower_than_the_frame_period_under_live_overload_still_ends_with_every_frame() {
    let got = Got::default();
    let g = got.clone();
    let stats = bounded(Duration::from_secs(20), move || {
        run(
            Setup {
                frames: 12,
                rate: 1000,
                // No new frame at most deadlines (repeats), and each repeat outlasts a period.
                effect_slow: Duration::from_millis(8),
                sink_slow: Duration::from_millis(3),
                options: Options {
                    threads: 1,
                    pace: Some(Rational::new(1000, 1)),
                    overload: framepipe_runtime::Overload::Live,
                    ..Options::default()
                },
                ..Setup::default()
            },
            g,
        )
    })
    .expect("the run ends");
    let seqs = got.seqs.lock().unwrap().clone();
    let mut distinct = seqs.clone();
    distinct.dedup();
    assert_eq!(
        distinct,
        (0..12).collect::<Vec<_>>(),
        "every frame, in order: {seqs:?}"
    );
    assert_eq!(stats.frames, 12);
}
