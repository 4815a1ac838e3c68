//! Issue 11 (late frames on a VM whose host takes a vCPU away for milliseconds): a standby
//! pacing thread, pinned to another CPU than the pacing thread (a host's clock thread, a run's
//! master output thread), releases the frames that fall due while the pacing thread is away.
//! The pacing thread's absence is injected (`inject_clock_stall`, `Options::inject_stall`).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{bounded, Counter};
use framepipe_core::{FrameCtx, Rational, Result, Sink, Source, VideoInfo};
use framepipe_runtime::{Host, Options, Pipeline, Prepared};

const THREADS: usize = 2;

fn counter(salt: u32, frames: u64, fps: u32) -> Box<dyn Source> {
    Box::new(Counter {
        salt,
        frames,
        fps,
        next: 0,
    })
}

fn show(source: Box<dyn Source>, sink: Box<dyn Sink>, options: Options) -> Prepared {
    Pipeline::new(("src".into(), source), vec![], ("out".into(), sink))
        .prepare(options)
        .expect("prepares")
}

fn paced(fps: u32) -> Options {
    Options {
        threads: THREADS,
        pace: Some(Rational::new(fps, 1)),
        ..Options::default()
    }
}

fn two_cpus() -> bool {
    let n = framepipe_clock::allowed_cpus().len();
    if n < 2 {
        eprintln!("skipped: the standby needs two CPUs, this process may use {n}");
    }
    n >= 2
}

/// A sink that notes the name of the thread that released each frame, in order.
#[derive(Clone, Default)]
struct ReleasedBy {
    frames: Arc<Mutex<Vec<(u64, String)>>>,
}

impl Sink for ReleasedBy {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, _frame: &framepipe_core::Frame) -> Result<()> {
        let name = std::thread::current().name().unwrap_or("?").to_string();
        self.frames.lock().unwrap().push((ctx.seq, name));
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Runs two paced shows whose clock thread is kept away for 300 ms (7 deadlines at 25 fps)
/// after 1 s; returns each show's (frame, releasing thread) in order, and the deadlines the
/// standby rescued.
fn stalled_clock(standby: bool) -> (Vec<Vec<(u64, String)>>, u64) {
    let sinks = [ReleasedBy::default(), ReleasedBy::default()];
    let mut host = Host::new(THREADS);
    host.set_standby(standby);
    host.inject_clock_stall(Duration::from_secs(1), Duration::from_millis(300));
    for (k, sink) in sinks.iter().enumerate() {
        host.add(
            format!("show-{k}"),
            show(counter(k as u32, 50, 25), Box::new(sink.clone()), paced(25)),
        )
        .unwrap();
    }
    let clock = host.clock_counters();
    let results = bounded(Duration::from_secs(60), move || host.run(|_| {}));
    for r in &results {
        assert!(r.result.is_ok(), "{}: {:?}", r.name, r.result);
    }
    let frames = sinks
        .iter()
        .map(|s| s.frames.lock().unwrap().clone())
        .collect();
    (
        frames,
        clock.rescued.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// Issue 11 (late frames on a VM whose host takes a vCPU away for milliseconds): while the
/// clock thread is away, the standby thread, pinned to the other CPU, releases the frames
/// that fall due, every frame once and in order. Without the standby every frame waits for
/// the clock thread (the control: the stall is seen, no frame is released by anything else).
#[test]
fn the_standby_releases_the_frames_due_while_the_clock_thread_is_away() {
    if !two_cpus() {
        return;
    }
    let (with, rescued) = stalled_clock(true);
    for frames in &with {
        let seqs: Vec<u64> = frames.iter().map(|f| f.0).collect();
        assert_eq!(
            seqs,
            (0..50).collect::<Vec<_>>(),
            "every frame once, in order"
        );
        let by_standby = frames.iter().filter(|f| f.1 == "fp-clock-standby").count();
        // 300 ms away is 7 or 8 deadlines at 25 fps: the standby goes on releasing while the
        // clock thread stays away, not once.
        assert!(
            by_standby >= 2,
            "frames released by the standby: {frames:?}"
        );
        assert!(frames
            .iter()
            .all(|f| f.1 == "fp-clock" || f.1 == "fp-clock-standby"));
    }
    let by_standby: usize = with
        .iter()
        .flatten()
        .filter(|f| f.1 == "fp-clock-standby")
        .count();
    assert_eq!(rescued, by_standby as u64, "frames counted as rescued");
    let (without, rescued) = stalled_clock(false);
    assert_eq!(rescued, 0);
    for frames in &without {
        assert_eq!(frames.len(), 50);
        assert!(
            frames.iter().all(|f| f.1 == "fp-clock"),
            "released by another thread than the clock: {frames:?}"
        );
    }
}

/// Runs one paced show whose master output thread is kept away for 300 ms after 1 s; returns
/// its (frame, releasing thread) in order and the `standby_rescued` figure.
fn stalled_output(no_standby: bool) -> (Vec<(u64, String)>, Option<u64>) {
    let sink = ReleasedBy::default();
    let p = show(
        counter(7, 50, 25),
        Box::new(sink.clone()),
        Options {
            no_standby,
            inject_stall: Some((Duration::from_secs(1), Duration::from_millis(300))),
            ..paced(25)
        },
    );
    // Its own thread, named as a run's output would be anywhere (the calling thread).
    let stats = bounded(Duration::from_secs(60), move || p.run().expect("runs"));
    let rescued = stats.pacing.as_ref().and_then(|p| p.standby_rescued);
    let frames = sink.frames.lock().unwrap().clone();
    (frames, rescued)
}

/// A run of its own: while its output thread is away, the standby (`fp-out-standby`) releases
/// the frames that fall due, every frame once and in order; without it (`no_standby`), every
/// frame waits for the output thread.
#[test]
fn a_runs_standby_releases_the_frames_due_while_its_output_thread_is_away() {
    if !two_cpus() {
        return;
    }
    let (frames, rescued) = stalled_output(false);
    let seqs: Vec<u64> = frames.iter().map(|f| f.0).collect();
    assert_eq!(
        seqs,
        (0..50).collect::<Vec<_>>(),
        "every frame once, in order"
    );
    let by_standby = frames.iter().filter(|f| f.1 == "fp-out-standby").count();
    assert!(by_standby >= 2, "released by the standby: {frames:?}");
    assert_eq!(rescued, Some(by_standby as u64));
    let output = &frames[0].1;
    assert!(frames
        .iter()
        .all(|f| f.1 == *output || f.1 == "fp-out-standby"));
    let (frames, rescued) = stalled_output(true);
    assert_eq!(rescued, None);
    assert_eq!(frames.len(), 50);
    assert!(
        frames
            .iter()
            .all(|f| f.1 == frames[0].1 && f.1 != "fp-out-standby"),
        "released by another thread than the output thread: {frames:?}"
    );
}

/// A sink on the clock thread (it says it does not block, as a null sink or a file does) that
/// gets stuck in one `consume`: at frame `at` it waits until the other show has had
/// `frames_wanted` frames released by the other clock thread since (whichever of the two is
/// stuck here: usually the clock thread, the standby if it happened to release this frame), or
/// [`STUCK_MAX`] has passed.
struct StuckOnce {
    at: u64,
    other: ReleasedBy,
    frames_wanted: usize,
    /// How many frames the other clock thread released to the other show while this sink was
    /// stuck.
    seen: Arc<Mutex<Option<usize>>>,
    inner: ReleasedBy,
}

const STUCK_MAX: Duration = Duration::from_secs(3);

impl Sink for StuckOnce {
    fn start(&mut self, info: VideoInfo) -> Result<()> {
        self.inner.start(info)
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &framepipe_core::Frame) -> Result<()> {
        if ctx.seq == self.at {
            let stuck = std::thread::current().name().unwrap_or("?").to_string();
            let by_other_thread = |r: &ReleasedBy| {
                r.frames
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|f| f.1 != stuck)
                    .count()
            };
            let before = by_other_thread(&self.other);
            let until = std::time::Instant::now() + STUCK_MAX;
            let mut got = 0;
            while std::time::Instant::now() < until {
                got = by_other_thread(&self.other) - before;
                if got >= self.frames_wanted {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            *self.seen.lock().unwrap() = Some(got);
        }
        self.inner.consume(ctx, frame)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Issue 11 (P8's late frames): the clock thread stuck inside one show's poll (here its sink's
/// `consume`, on a VM: the clock thread losing its CPU in the middle of a round) holds back
/// that show only. The standby serves the other shows meanwhile: each show's state is behind
/// a lock of its own, and the wake-ups behind a short one. (With one lock over every show, as
/// before, the standby waited on it and the other show got no frame until the stuck one let
/// go: `seen` stayed 0 and the stuck sink waited the whole `STUCK_MAX`.)
#[test]
fn a_clock_thread_stuck_in_one_show_holds_back_that_show_only() {
    if !two_cpus() {
        return;
    }
    let other = ReleasedBy::default();
    let stuck = ReleasedBy::default();
    let seen = Arc::new(Mutex::new(None));
    let mut host = Host::new(THREADS);
    host.set_standby(true);
    host.add(
        "stuck",
        show(
            counter(1, 40, 25),
            Box::new(StuckOnce {
                at: 20,
                other: other.clone(),
                frames_wanted: 3,
                seen: Arc::clone(&seen),
                inner: stuck.clone(),
            }),
            paced(25),
        ),
    )
    .unwrap();
    host.add(
        "other",
        show(counter(2, 60, 25), Box::new(other.clone()), paced(25)),
    )
    .unwrap();
    let results = bounded(Duration::from_secs(60), move || host.run(|_| {}));
    for r in &results {
        assert!(r.result.is_ok(), "{}: {:?}", r.name, r.result);
    }
    let seen = seen.lock().unwrap().expect("the stuck sink got frame 20");
    assert!(
        seen >= 3,
        "frames of the other show released by the other clock thread while one was stuck in the \
         first show's sink: {seen} (it waited on the stuck show)"
    );
    // Both shows: every frame once, in order, whoever released it.
    for (sink, n) in [(&stuck, 40), (&other, 60)] {
        let seqs: Vec<u64> = sink.frames.lock().unwrap().iter().map(|f| f.0).collect();
        assert_eq!(seqs, (0..n).collect::<Vec<_>>());
    }
}
