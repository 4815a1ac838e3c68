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
    Effect, EffectFactory, Error, Frame, FrameCtx, FrameMut, Mode, Rational, Result, Sink,
    SliceRunner, Source, VideoInfo,
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
        Err(_) => panic!("the run did not end within {limit:?}: it hangs"),
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

/// Copies its input; panics at `panic_at`, inside one of the frame's slices when `in_slice`.
struct Copy {
    panic_at: Option<u64>,
    in_slice: bool,
}
struct CopyInst(Option<u64>, bool);

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
        Ok(Box::new(CopyInst(self.panic_at, self.in_slice)))
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
        self.got.seqs.lock().unwrap().push(ctx.seq);
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        self.got.finished.fetch_add(1, Ordering::SeqCst);
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
    sink_panic: Option<u64>,
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
                }),
                Mode::Parallel,
            ),
        )],
        (
            "keep".into(),
            Box::new(Keep {
                got,
                panic_at: s.sink_panic,
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
