//! Issue 11, requirement 1: many shows in one process ([`Host`]): one worker pool and one clock
//! thread for every show; each show gets every frame of its own, in order, at its own rate;
//! one show's failure or `stop` ends that show only, reported by name.

mod common;

use std::collections::HashSet;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use common::{bounded, Collect, Counter, H, W};
use framepipe_control::{command_queue, Command};
use framepipe_core::{Error, FrameCtx, FrameMut, Mode, Rational, Result, Sink, Source, VideoInfo};
use framepipe_runtime::{Host, Options, Pipeline, Prepared, ShowResult};

const THREADS: usize = 2;

fn counter(salt: u32, frames: u64, fps: u32) -> Box<dyn Source> {
    Box::new(Counter {
        salt,
        frames,
        fps,
        next: 0,
    })
}

fn show(source: Box<dyn Source>, sink: Box<dyn Sink>, pace: Option<u32>) -> Prepared {
    Pipeline::new(("src".into(), source), vec![], ("out".into(), sink))
        .prepare(Options {
            threads: THREADS,
            pace: pace.map(|fps| Rational::new(fps, 1)),
            ..Options::default()
        })
        .expect("prepares")
}

/// A source that notes which threads ran it.
struct Noted {
    inner: Box<dyn Source>,
    threads: Arc<Mutex<HashSet<ThreadId>>>,
}

impl Source for Noted {
    fn info(&self) -> VideoInfo {
        self.inner.info()
    }
    fn len_hint(&self) -> Option<u64> {
        self.inner.len_hint()
    }
    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        self.threads
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        self.inner.fill(ctx, frame)
    }
}

#[test]
fn every_show_gets_its_own_frames_in_order_on_one_shared_pool() {
    // Four shows: three paced at different rates and lengths, one unpaced.
    let specs: [(u32, u64, Option<u32>); 4] = [
        (1000, 30, Some(100)),
        (2000, 45, Some(150)),
        (3000, 20, Some(60)),
        (4000, 80, None),
    ];
    let sinks: Vec<Collect> = specs.iter().map(|_| Collect::default()).collect();
    let threads: Arc<Mutex<HashSet<ThreadId>>> = Arc::default();
    let mut host = Host::new(THREADS);
    for (k, ((salt, frames, pace), sink)) in specs.iter().zip(&sinks).enumerate() {
        let fps = pace.unwrap_or(30);
        let source = Box::new(Noted {
            inner: counter(*salt, *frames, fps),
            threads: Arc::clone(&threads),
        });
        let p = show(source, Box::new(sink.clone()), *pace);
        host.add(format!("show-{k}"), p).unwrap();
    }
    let started = Instant::now();
    let results = bounded(Duration::from_secs(30), move || host.run(|_| {}));
    let wall = started.elapsed();
    assert_eq!(results.len(), 4);
    for (k, (r, ((salt, frames, pace), sink))) in
        results.iter().zip(specs.iter().zip(&sinks)).enumerate()
    {
        assert_eq!(r.name, format!("show-{k}"));
        let stats = r
            .result
            .as_ref()
            .unwrap_or_else(|e| panic!("show-{k}: {e}"));
        assert_eq!(stats.frames, *frames, "show-{k}: frames out");
        let want: Vec<u32> = (0..*frames as u32).map(|i| salt + i).collect();
        assert_eq!(sink.values(), want, "show-{k}: every frame once, in order");
        assert_eq!(
            stats.pacing.is_some(),
            pace.is_some(),
            "show-{k}: paced figures exactly for the paced shows"
        );
    }
    // The slowest paced show (20 frames at 60 fps, 45 at 150 fps, 30 at 100 fps) cannot end
    // before its last deadline: the clock paced them.
    assert!(
        wall >= Duration::from_millis(300),
        "paced shows took only {wall:?}"
    );
    // One pool for all: every show's source ran on the host's workers, not on a set per show.
    let n = threads.lock().unwrap().len();
    assert!(
        (1..=THREADS).contains(&n),
        "four shows' sources ran on {n} threads; the host has {THREADS} workers"
    );
}

/// A source that fails at frame `fail_at`.
struct Breaks {
    fail_at: u64,
}

impl Source for Breaks {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: W,
            height: H,
            rate: Rational::new(100, 1),
        }
    }
    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        if ctx.seq == self.fail_at {
            return Err(Error::Pipeline(format!("camera lost at frame {}", ctx.seq)));
        }
        frame.words_mut().fill(ctx.seq as u32);
        Ok(true)
    }
}

#[test]
fn a_failing_show_ends_alone_and_is_reported_by_name() {
    let good = Collect::default();
    let bad = Collect::default();
    let mut host = Host::new(THREADS);
    host.add(
        "broken",
        show(
            Box::new(Breaks { fail_at: 7 }),
            Box::new(bad.clone()),
            Some(100),
        ),
    )
    .unwrap();
    host.add(
        "fine",
        show(counter(0, 60, 100), Box::new(good.clone()), Some(100)),
    )
    .unwrap();
    let ended: Arc<Mutex<Vec<String>>> = Arc::default();
    let order = Arc::clone(&ended);
    let results = bounded(Duration::from_secs(30), move || {
        host.run(move |r: &ShowResult| order.lock().unwrap().push(r.name.clone()))
    });
    let e = results[0]
        .result
        .as_ref()
        .expect_err("the broken show fails");
    assert_eq!(results[0].name, "broken");
    assert!(e.to_string().contains("camera lost at frame 7"), "{e}");
    // The frames before the failure reached its sink, whole and in order.
    assert_eq!(bad.values(), (0..7).collect::<Vec<u32>>());
    let fine = results[1].result.as_ref().expect("the other show goes on");
    assert_eq!(fine.frames, 60);
    assert_eq!(good.values(), (0..60).collect::<Vec<u32>>());
    // Reported as it ended, the failure first (frame 7 of 100 fps, against 60 frames).
    assert_eq!(*ended.lock().unwrap(), ["broken", "fine"]);
}

#[test]
fn stop_ends_the_show_it_is_sent_to_only() {
    let endless = Collect::default();
    let finite = Collect::default();
    let (tx, rx) = command_queue(16);
    let mut a = Pipeline::new(
        ("src".into(), counter(0, u64::MAX, 100)),
        vec![],
        ("out".into(), Box::new(endless.clone())),
    )
    .prepare(Options {
        threads: THREADS,
        pace: Some(Rational::new(100, 1)),
        ..Options::default()
    })
    .unwrap();
    a.set_commands(rx);
    let mut host = Host::new(THREADS);
    host.add("endless", a).unwrap();
    host.add(
        "finite",
        show(counter(500, 40, 100), Box::new(finite.clone()), Some(100)),
    )
    .unwrap();
    let watch = endless.clone();
    let stopper = std::thread::spawn(move || {
        let limit = Instant::now() + Duration::from_secs(20);
        while watch.got().len() < 60 && Instant::now() < limit {
            std::thread::sleep(Duration::from_millis(5));
        }
        tx.post(Command::Stop).expect("queue has room");
    });
    let results = bounded(Duration::from_secs(30), move || host.run(|_| {}));
    stopper.join().unwrap();
    let stopped = results[0].result.as_ref().expect("a stop is a clean end");
    assert!(
        stopped.frames >= 60,
        "ran until stopped: {}",
        stopped.frames
    );
    let got = endless.values();
    assert_eq!(got.len() as u64, stopped.frames);
    let fine = results[1]
        .result
        .as_ref()
        .expect("the other show ran to its end");
    assert_eq!(fine.frames, 40);
    assert_eq!(finite.values(), (500..540).collect::<Vec<u32>>());
}

#[test]
fn two_shows_with_one_name_are_refused() {
    let mut host = Host::new(THREADS);
    host.add(
        "cam",
        show(counter(0, 5, 30), Box::new(Collect::default()), None),
    )
    .unwrap();
    let e = host
        .add(
            "cam",
            show(counter(0, 5, 30), Box::new(Collect::default()), None),
        )
        .unwrap_err();
    assert!(e.to_string().contains("two shows are named 'cam'"), "{e}");
    let p = Pipeline::new(
        ("src".into(), counter(0, 5, 30)),
        vec![],
        ("out".into(), Box::new(Collect::default())),
    )
    .prepare(Options {
        threads: THREADS + 1,
        ..Options::default()
    })
    .unwrap();
    let e = host.add("other", p).unwrap_err();
    assert!(
        e.to_string().contains("prepared for 3 worker threads"),
        "{e}"
    );
}

/// A source fed by a peer (as a socket or a pipe is): its first `fill` waits until the peer
/// says go, then it gives `frames` frames. It says it blocks, and notes the threads it ran on.
struct Peer {
    go: std::sync::mpsc::Receiver<()>,
    started: bool,
    salt: u32,
    frames: u64,
    ran_on: Arc<Mutex<HashSet<String>>>,
}

/// What the in-test blocking sources give: `W`x`H` at 100 fps.
fn blocking_info() -> VideoInfo {
    VideoInfo {
        width: W,
        height: H,
        rate: Rational::new(100, 1),
    }
}

/// Notes the calling thread's name in `ran_on`.
fn note_thread(ran_on: &Mutex<HashSet<String>>) {
    let name = std::thread::current().name().unwrap_or("").to_string();
    ran_on.lock().unwrap().insert(name);
}

impl Source for Peer {
    fn info(&self) -> VideoInfo {
        blocking_info()
    }
    fn blocks(&self) -> bool {
        true
    }
    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        note_thread(&self.ran_on);
        if !self.started {
            self.go
                .recv()
                .map_err(|_| Error::Pipeline("the peer went away".into()))?;
            self.started = true;
        }
        if ctx.seq >= self.frames {
            return Ok(false);
        }
        frame.words_mut().fill(self.salt + ctx.seq as u32);
        Ok(true)
    }
}

fn peer(salt: u32, frames: u64, ran_on: &Arc<Mutex<HashSet<String>>>) -> (Peer, Sender<()>) {
    let (tx, go) = std::sync::mpsc::channel();
    let p = Peer {
        go,
        started: false,
        salt,
        frames,
        ran_on: Arc::clone(ran_on),
    };
    (p, tx)
}

/// Issue 11: "Sources that block (network, pipes) do not hold a compute worker." More shows
/// wait on a silent peer than the host has workers; a show computing its frames still runs to
/// its end, and only then do the peers speak. Were the waiting sources on the workers, both
/// would be held and the computing show would never end (`bounded` fails the test).
#[test]
fn sources_waiting_on_a_peer_hold_no_worker_of_the_host() {
    let ran_on: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut host = Host::new(THREADS);
    let mut peers = Vec::new();
    let mut waiting_sinks = Vec::new();
    for k in 0..THREADS + 1 {
        let (p, go) = peer(1000 * (k as u32 + 1), 5, &ran_on);
        let sink = Collect::default();
        host.add(
            format!("peer-{k}"),
            show(Box::new(p), Box::new(sink.clone()), None),
        )
        .unwrap();
        peers.push(go);
        waiting_sinks.push(sink);
    }
    let free = Collect::default();
    host.add(
        "computing",
        show(counter(0, 40, 100), Box::new(free.clone()), None),
    )
    .unwrap();
    let ended: Arc<Mutex<Vec<String>>> = Arc::default();
    let order = Arc::clone(&ended);
    let results = bounded(Duration::from_secs(60), move || {
        let mut peers = Some(peers);
        host.run(move |r: &ShowResult| {
            order.lock().unwrap().push(r.name.clone());
            // The peers speak once the computing show is over.
            if r.name == "computing" {
                for go in peers.take().into_iter().flatten() {
                    go.send(()).unwrap();
                }
            }
        })
    });
    assert_eq!(
        ended.lock().unwrap()[0],
        "computing",
        "{:?}",
        ended.lock().unwrap()
    );
    for r in &results {
        let stats = r
            .result
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: {e}", r.name));
        let want = if r.name == "computing" { 40 } else { 5 };
        assert_eq!(stats.frames, want, "{}", r.name);
    }
    assert_eq!(free.values(), (0..40).collect::<Vec<u32>>());
    for (k, sink) in waiting_sinks.iter().enumerate() {
        let salt = 1000 * (k as u32 + 1);
        assert_eq!(
            sink.values(),
            (salt..salt + 5).collect::<Vec<u32>>(),
            "peer-{k}"
        );
    }
    // Every frame of the waiting sources came from their shows' IO threads.
    assert_eq!(
        *ran_on.lock().unwrap(),
        HashSet::from(["fp-io".to_string()]),
        "blocking sources ran on these threads"
    );
}

/// A run of its own runs a blocking source on its IO thread too, every frame once, in order.
#[test]
fn a_single_run_reads_a_blocking_source_on_its_io_thread() {
    let ran_on: Arc<Mutex<HashSet<String>>> = Arc::default();
    let (p, go) = peer(7, 30, &ran_on);
    go.send(()).unwrap();
    let sink = Collect::default();
    let stats = bounded(Duration::from_secs(30), {
        let sink = sink.clone();
        move || show(Box::new(p), Box::new(sink), None).run()
    })
    .expect("runs");
    assert_eq!(stats.frames, 30);
    assert_eq!(sink.values(), (7..37).collect::<Vec<u32>>());
    assert_eq!(
        *ran_on.lock().unwrap(),
        HashSet::from(["fp-io".to_string()])
    );
}

/// A sink whose reader is away until told to come (a pipe nobody reads yet): its first
/// `consume` waits. It says it blocks.
struct Stuck {
    go: std::sync::mpsc::Receiver<()>,
    waited: bool,
    got: Collect,
}

impl Sink for Stuck {
    fn start(&mut self, info: VideoInfo) -> Result<()> {
        self.got.start(info)
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &framepipe_core::Frame) -> Result<()> {
        if !self.waited {
            self.go
                .recv()
                .map_err(|_| Error::Pipeline("the reader went away".into()))?;
            self.waited = true;
        }
        self.got.consume(ctx, frame)
    }
    fn finish(&mut self) -> Result<()> {
        self.got.finish()
    }
    fn blocks(&self) -> bool {
        true
    }
}

/// A paced show whose sink waits on its reader keeps an output thread of its own: the clock
/// thread goes on serving the other shows, which run to their end first; only then does the
/// reader come. (Were the stuck sink on the clock thread, no other show's frame would be
/// released and `bounded` would fail the test.)
#[test]
fn a_sink_waiting_on_its_reader_holds_back_its_own_show_only() {
    let (go, rx) = std::sync::mpsc::channel();
    let stuck = Collect::default();
    let free = Collect::default();
    let mut host = Host::new(THREADS);
    host.add(
        "stuck",
        show(
            counter(500, 20, 100),
            Box::new(Stuck {
                go: rx,
                waited: false,
                got: stuck.clone(),
            }),
            Some(100),
        ),
    )
    .unwrap();
    host.add(
        "free",
        show(counter(0, 30, 100), Box::new(free.clone()), Some(100)),
    )
    .unwrap();
    let ended: Arc<Mutex<Vec<String>>> = Arc::default();
    let order = Arc::clone(&ended);
    let results = bounded(Duration::from_secs(60), move || {
        let mut go = Some(go);
        host.run(move |r: &ShowResult| {
            order.lock().unwrap().push(r.name.clone());
            if r.name == "free" {
                go.take().unwrap().send(()).unwrap();
            }
        })
    });
    assert_eq!(*ended.lock().unwrap(), ["free", "stuck"]);
    assert_eq!(free.values(), (0..30).collect::<Vec<u32>>());
    let s = results[0]
        .result
        .as_ref()
        .expect("the stuck show ends well");
    assert!(s.pacing.is_some(), "paced on its own thread");
    // Every frame once, in order: the live policy's default (slow) waited for the sink.
    assert_eq!(stuck.values(), (500..520).collect::<Vec<u32>>());
}

/// Where two blocking sources meet: each `fill` of frame k waits (up to [`MEET_WAIT`]) until
/// the other source is inside its `fill` of frame k too, as two cameras' reads overlap.
#[derive(Default)]
struct Meeting {
    /// Per source: the last frame whose `fill` it has entered (+ 1; 0 = none).
    entered: Mutex<[u64; 2]>,
    cv: std::sync::Condvar,
    /// Frames for which a source gave up waiting for the other.
    missed: Mutex<Vec<(usize, u64)>>,
}

const MEET_WAIT: Duration = Duration::from_millis(500);

/// A blocking source whose reads must overlap with its partner's ([`Meeting`]).
struct Meets {
    me: usize,
    frames: u64,
    meeting: Arc<Meeting>,
    ran_on: Arc<Mutex<HashSet<String>>>,
}

impl Source for Meets {
    fn info(&self) -> VideoInfo {
        blocking_info()
    }
    fn blocks(&self) -> bool {
        true
    }
    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        if ctx.seq >= self.frames {
            return Ok(false);
        }
        note_thread(&self.ran_on);
        let m = &self.meeting;
        let mut entered = m.entered.lock().unwrap();
        entered[self.me] = ctx.seq + 1;
        m.cv.notify_all();
        let (entered, timeout) =
            m.cv.wait_timeout_while(entered, MEET_WAIT, |e| e[1 - self.me] < ctx.seq + 1)
                .unwrap();
        drop(entered);
        if timeout.timed_out() {
            m.missed.lock().unwrap().push((self.me, ctx.seq));
        }
        frame
            .words_mut()
            .fill(1000 * (self.me as u32 + 1) + ctx.seq as u32);
        Ok(true)
    }
}

/// Issue 11: "Sources that block (network, pipes) do not hold a compute worker" — nor each
/// other. Two blocking sources of one show (two cameras into a mixer) each wait, in every
/// frame's read, until the other is reading that frame too: they meet only if each has a
/// thread of its own. With one IO thread per show, as before, the first read waited for a read
/// that could not start, every frame (a stalled camera then stalled the other's reads too).
#[test]
fn two_blocking_sources_of_one_show_read_at_the_same_time() {
    use framepipe_runtime::{Graph, MixerStage, Node, NodeKind, OnEnd};
    const FRAMES: u64 = 6;
    let meeting = Arc::new(Meeting::default());
    let ran_on: Arc<Mutex<HashSet<String>>> = Arc::default();
    let source = |me: usize| {
        Node::new(
            if me == 0 { "cam0" } else { "cam1" },
            NodeKind::Source {
                source: Box::new(Meets {
                    me,
                    frames: FRAMES,
                    meeting: Arc::clone(&meeting),
                    ran_on: Arc::clone(&ran_on),
                }),
                on_end: OnEnd::Stop,
            },
            vec![],
        )
    };
    let mut mix = MixerStage::new(Box::new(common::Weigh { sleep_us: 0 }), Mode::Parallel);
    mix.inputs = (2, 2);
    let sink = Collect::default();
    let nodes = vec![
        source(0),
        source(1),
        Node::new("mix", NodeKind::Mixer(mix), vec![0, 1]),
        Node::new(
            "out",
            NodeKind::Sink {
                sink: Box::new(sink.clone()),
                master: true,
            },
            vec![2],
        ),
    ];
    let prepared = Graph::new(nodes)
        .unwrap()
        .prepare(Options {
            threads: THREADS,
            ..Options::default()
        })
        .unwrap();
    let stats = bounded(Duration::from_secs(30), move || prepared.run()).expect("runs");
    assert_eq!(stats.frames, FRAMES);
    assert_eq!(sink.values().len(), FRAMES as usize);
    assert_eq!(
        *meeting.missed.lock().unwrap(),
        vec![],
        "(source, frame) whose read waited {MEET_WAIT:?} for the other's in vain"
    );
    assert_eq!(
        *ran_on.lock().unwrap(),
        HashSet::from(["fp-io".to_string()]),
        "blocking sources ran on these threads"
    );
}
