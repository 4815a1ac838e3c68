//! The scheduler with small in-test elements whose behaviour is known exactly: order, statefulness,
//! thread-count independence, errors, slices. Real-plugin pipelines are tested in framepipe-cli.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use framepipe_core::{
    Effect, EffectFactory, Error, Frame, FrameCtx, FrameMut, Mode, Rational, Result, Sink,
    SliceRunner, Source, VideoInfo,
};
use framepipe_runtime::{EffectStage, Options, Pipeline};

const W: u32 = 16;
const H: u32 = 8;

/// Writes the sequence number into every pixel; fails at `fail_at` if set.
struct Counter {
    frames: u64,
    fail_at: Option<u64>,
}

impl Source for Counter {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: W,
            height: H,
            rate: Rational::new(25, 1),
        }
    }
    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        if Some(ctx.seq) == self.fail_at {
            return Err(Error::Pipeline(format!(
                "source broke at frame {}",
                ctx.seq
            )));
        }
        if ctx.seq >= self.frames {
            return Ok(false);
        }
        frame.words_mut().fill(ctx.seq as u32);
        Ok(true)
    }
}

/// A stateless effect that takes a varying time (so parallel instances finish out of order) and
/// computes a hash-like function of its input; it records the most instances running at once.
struct Mix {
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    fail_at: Option<u64>,
}
struct MixInst(Arc<AtomicUsize>, Arc<AtomicUsize>, Option<u64>);

impl EffectFactory for Mix {
    fn name(&self) -> &str {
        "mix"
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(input)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(MixInst(
            self.running.clone(),
            self.peak.clone(),
            self.fail_at,
        )))
    }
}

impl Effect for MixInst {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        if Some(ctx.seq) == self.2 {
            return Err(Error::Pipeline(format!("mix broke at frame {}", ctx.seq)));
        }
        let now = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        self.1.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_micros(200 + (ctx.seq * 7919 % 5) * 300));
        for (o, i) in output.words_mut().iter_mut().zip(input.words()) {
            *o = i.wrapping_mul(2654435761).rotate_left(5) ^ 0x9e37;
        }
        self.0.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A stateful effect: output = input + running sum of inputs seen so far. Frames out of order or
/// two instances would change the result.
struct Accumulate;
struct AccInst(u32);
impl EffectFactory for Accumulate {
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
        Ok(Box::new(AccInst(0)))
    }
}
impl Effect for AccInst {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        self.0 = self.0.wrapping_mul(31).wrapping_add(input.words()[0]);
        for (o, i) in output.words_mut().iter_mut().zip(input.words()) {
            *o = i.wrapping_add(self.0);
        }
        Ok(())
    }
}

/// Splits the frame into one slice per row through the runtime's slice runner.
struct Rows;
struct RowsInst;
impl EffectFactory for Rows {
    fn name(&self) -> &str {
        "rows"
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(input)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(RowsInst))
    }
}
impl Effect for RowsInst {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        slices: &dyn SliceRunner,
    ) -> Result<()> {
        let rows: Vec<Mutex<&mut [u32]>> = output
            .words_mut()
            .chunks_mut(W as usize)
            .map(Mutex::new)
            .collect();
        let src = input.words();
        slices.run(rows.len(), &|r| {
            let mut row = rows[r].lock().unwrap();
            for (x, px) in row.iter_mut().enumerate() {
                *px = src[r * W as usize + x] ^ ((r as u32) << 16 | x as u32);
            }
            std::thread::sleep(Duration::from_micros(50));
        });
        Ok(())
    }
}

/// Frames received (sequence number, pixels).
type Received = Arc<Mutex<Vec<(u64, Vec<u32>)>>>;

#[derive(Default, Clone)]
struct Collected(Received, Arc<AtomicUsize>);

struct Collect(Collected);
impl Sink for Collect {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        self.0
             .0
            .lock()
            .unwrap()
            .push((ctx.seq, frame.words().to_vec()));
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        self.0 .1.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

struct Chain {
    frames: u64,
    source_fail: Option<u64>,
    mix_fail: Option<u64>,
}

fn run_chain(c: &Chain, threads: usize) -> (Result<framepipe_runtime::RunStats>, Collected, usize) {
    let out = Collected::default();
    let peak = Arc::new(AtomicUsize::new(0));
    let mix = |fail| {
        EffectStage::new(
            Box::new(Mix {
                running: Arc::new(AtomicUsize::new(0)),
                peak: peak.clone(),
                fail_at: fail,
            }),
            Mode::Parallel,
        )
    };
    let effects = vec![
        ("mix".to_string(), mix(c.mix_fail)),
        (
            "acc".to_string(),
            EffectStage::new(Box::new(Accumulate), Mode::Serial),
        ),
        (
            "rows".to_string(),
            EffectStage::new(Box::new(Rows), Mode::Parallel),
        ),
        ("mix2".to_string(), mix(None)),
    ];
    let p = Pipeline::new(
        (
            "counter".into(),
            Box::new(Counter {
                frames: c.frames,
                fail_at: c.source_fail,
            }),
        ),
        effects,
        ("collect".into(), Box::new(Collect(out.clone()))),
    );
    let r = p
        .prepare(Options {
            threads,
            ..Options::default()
        })
        .and_then(|p| p.run());
    (r, out, peak.load(Ordering::SeqCst))
}

#[test]
fn output_is_in_order_and_identical_for_any_thread_count() {
    let chain = Chain {
        frames: 60,
        source_fail: None,
        mix_fail: None,
    };
    let (r1, one, _) = run_chain(&chain, 1);
    let stats = r1.expect("single-threaded run");
    assert_eq!(stats.frames, 60);
    let reference = one.0.lock().unwrap().clone();
    assert_eq!(
        reference.iter().map(|f| f.0).collect::<Vec<_>>(),
        (0..60).collect::<Vec<_>>()
    );
    for threads in [2, 3, 4, 8] {
        let (r, out, peak) = run_chain(&chain, threads);
        let stats = r.expect("run");
        assert_eq!(stats.frames, 60);
        assert_eq!(out.1.load(Ordering::SeqCst), 1, "sink finished once");
        assert_eq!(
            *out.0.lock().unwrap(),
            reference,
            "{threads} threads gave different frames"
        );
        assert!(
            peak >= 2,
            "{threads} threads never ran a parallel stage on two frames at once (peak {peak})"
        );
        let acc = &stats.stages[2];
        assert_eq!((acc.name.as_str(), acc.instances), ("acc", 1));
        assert!(stats.stages[1].instances <= threads);
    }
}

#[test]
fn source_error_still_delivers_earlier_frames() {
    let chain = Chain {
        frames: 100,
        source_fail: Some(17),
        mix_fail: None,
    };
    let (r, out, _) = run_chain(&chain, 3);
    let err = r.unwrap_err().to_string();
    assert!(err.contains("source broke at frame 17"), "{err}");
    let seqs: Vec<u64> = out.0.lock().unwrap().iter().map(|f| f.0).collect();
    assert_eq!(seqs, (0..17).collect::<Vec<_>>());
    assert_eq!(out.1.load(Ordering::SeqCst), 1, "sink was finished");
}

#[test]
fn effect_error_stops_the_run_with_that_error() {
    let chain = Chain {
        frames: 1000,
        source_fail: None,
        mix_fail: Some(30),
    };
    let (r, out, _) = run_chain(&chain, 2);
    let err = r.unwrap_err().to_string();
    assert!(err.contains("mix broke at frame 30"), "{err}");
    let seqs: Vec<u64> = out.0.lock().unwrap().iter().map(|f| f.0).collect();
    assert!(seqs.len() <= 30, "nothing after the failed frame: {seqs:?}");
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
}

/// A source that records, each time it starts a frame, how many frames are in flight at that
/// moment: the frames it has started (this one included) minus those the sink has finished.
/// A frame leaves the flight only after the sink returns, so this is never above the true
/// count; with a sink slower than the rest the source is always waiting for room, so the peak
/// is the bound exactly.
struct Watched {
    frames: u64,
    sink_done: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Source for Watched {
    fn info(&self) -> VideoInfo {
        Counter {
            frames: 0,
            fail_at: None,
        }
        .info()
    }
    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        if ctx.seq >= self.frames {
            return Ok(false);
        }
        let in_flight = ctx.seq as usize + 1 - self.sink_done.load(Ordering::SeqCst);
        self.peak.fetch_max(in_flight, Ordering::SeqCst);
        frame.words_mut().fill(ctx.seq as u32);
        Ok(true)
    }
}

/// Counts frames whose `consume` has returned, after a delay that makes the sink the slowest.
struct CountingSlowSink(Arc<AtomicUsize>, Duration);
impl Sink for CountingSlowSink {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, _ctx: &FrameCtx, _frame: &Frame) -> Result<()> {
        std::thread::sleep(self.1);
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Issue 7: the old test only checked that nothing was in flight at the end, so it could not
/// fail. The bound must be reached (peak == bound) and never exceeded, with and without a
/// serial stage where frames park.
#[test]
fn the_in_flight_bound_is_reached_and_never_exceeded() {
    for (bound, threads, serial_stage) in [(3, 4, false), (5, 3, true), (1, 2, false)] {
        let sink_done = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let effects = if serial_stage {
            vec![
                (
                    "mix".to_string(),
                    EffectStage::new(
                        Box::new(Mix {
                            running: Arc::default(),
                            peak: Arc::default(),
                            fail_at: None,
                        }),
                        Mode::Parallel,
                    ),
                ),
                (
                    "acc".to_string(),
                    EffectStage::new(Box::new(Accumulate), Mode::Serial),
                ),
            ]
        } else {
            vec![]
        };
        let p = Pipeline::new(
            (
                "watched".into(),
                Box::new(Watched {
                    frames: 40,
                    sink_done: sink_done.clone(),
                    peak: peak.clone(),
                }),
            ),
            effects,
            (
                "slow".into(),
                Box::new(CountingSlowSink(
                    sink_done.clone(),
                    Duration::from_millis(3),
                )),
            ),
        );
        let prepared = p
            .prepare(Options {
                threads,
                in_flight: bound,
                ..Options::default()
            })
            .unwrap();
        assert_eq!(prepared.max_in_flight(), bound);
        let stats = prepared.run().unwrap();
        assert_eq!(stats.frames, 40);
        assert_eq!(stats.in_flight, 0);
        assert_eq!(
            peak.load(Ordering::SeqCst),
            bound,
            "peak frames in flight with bound {bound}, {threads} threads, serial stage: {serial_stage}"
        );
    }
}

/// A sink slower than the pipeline, so that the next frame is always waiting when it is done.
struct SlowCollect(Collected, Duration);
impl Sink for SlowCollect {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        std::thread::sleep(self.1);
        Collect(self.0.clone()).consume(ctx, frame)
    }
    fn finish(&mut self) -> Result<()> {
        self.0 .1.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Issue 7: the (SCHED_FIFO) output thread took the workers' mutex several times per frame.
/// It now returns the previous frame and takes the next in one critical section, and waits for
/// a frame without the lock; every acquisition is timed and counted in the stats.
#[test]
fn the_output_thread_takes_the_scheduler_lock_about_once_per_frame() {
    let out = Collected::default();
    let frames = 60;
    let p = Pipeline::new(
        (
            "counter".into(),
            Box::new(Counter {
                frames,
                fail_at: None,
            }),
        ),
        vec![(
            "acc".to_string(),
            EffectStage::new(Box::new(Accumulate), Mode::Serial),
        )],
        (
            "slow".into(),
            Box::new(SlowCollect(out.clone(), Duration::from_millis(2))),
        ),
    );
    let stats = p
        .prepare(Options {
            threads: 2,
            ..Options::default()
        })
        .unwrap()
        .run()
        .unwrap();
    assert_eq!(stats.frames, frames);
    let w = stats.output_lock_wait_us;
    // One per frame, plus one more for the frames that were not ready yet (the first; any a
    // descheduled worker delayed) and the end. The old loop took it 2-3 times per frame.
    assert!(
        w.count >= frames && w.count <= frames + frames / 5 + 2,
        "{} acquisitions by the output thread for {frames} frames",
        w.count
    );
    // Every acquisition by anyone is timed: at least the workers' two per stage per frame.
    let h = stats.lock_hold_us;
    assert!(h.count >= w.count + 2 * frames, "{h:?}");
    assert!(
        h.max_us >= h.p99_us && h.p99_us >= h.p50_us && h.p50_us > 0.0,
        "{h:?}"
    );
}
