//! Issue 3 at the runtime level, with in-test elements that record exactly what they saw:
//! oscillators agree across stages, commands land on one frame boundary for every stage,
//! pause/step/resume/stop, overload policies and stall reports.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use framepipe_control::{command_queue, Command, Oscillator};
use framepipe_core::{
    Effect, EffectFactory, Error, Frame, FrameCtx, FrameMut, Mode, PropKind, PropSpec, PropValue,
    Rational, Result, Sink, SliceRunner, Source, VideoInfo,
};
use framepipe_runtime::{EffectStage, Event, Options, Overload, Pipeline, RunStats};

struct Counter {
    frames: u64,
    rate: u32,
}

impl Source for Counter {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: 8,
            height: 8,
            rate: Rational::new(self.rate, 1),
        }
    }
    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        if ctx.seq >= self.frames {
            return Ok(false);
        }
        frame.words_mut().fill(ctx.seq as u32);
        Ok(true)
    }
}

type Seen = Arc<Mutex<Vec<(u64, f64)>>>;

/// Records, for every frame, the value its `value` property had when it processed it. Can be
/// slow on chosen frames.
struct Probe {
    seen: Seen,
    sleep_on: Vec<(u64, Duration)>,
}
struct ProbeInst {
    value: f64,
    seen: Seen,
    sleep_on: Vec<(u64, Duration)>,
}

fn value_spec() -> PropSpec {
    PropSpec::new(
        "value",
        PropKind::Float {
            min: -10.0,
            max: 10.0,
        },
        PropValue::Float(0.0),
        "",
    )
}

impl EffectFactory for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(input)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(ProbeInst {
            value: 0.0,
            seen: self.seen.clone(),
            sleep_on: self.sleep_on.clone(),
        }))
    }
}

impl Effect for ProbeInst {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        for (seq, d) in &self.sleep_on {
            if *seq == ctx.seq || *seq == u64::MAX {
                std::thread::sleep(*d);
            }
        }
        // Vary the time so that parallel instances finish out of order.
        std::thread::sleep(Duration::from_micros(100 + ctx.seq % 3 * 400));
        output.copy_from(input.data());
        self.seen.lock().unwrap().push((ctx.seq, self.value));
        Ok(())
    }
    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        match (name, value) {
            ("value", PropValue::Float(v)) => {
                self.value = *v;
                Ok(())
            }
            _ => Err(Error::Pipeline(format!("probe has no property {name}"))),
        }
    }
}

type Released = Arc<Mutex<Vec<(u64, Instant)>>>;

struct Record(Released);
impl Sink for Record {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        assert_eq!(
            frame.words()[0],
            ctx.seq as u32,
            "frame content matches its number"
        );
        self.0.lock().unwrap().push((ctx.seq, Instant::now()));
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

fn probe_stage(
    seen: &Seen,
    osc: Option<&str>,
    sleep_on: Vec<(u64, Duration)>,
    mode: Mode,
) -> EffectStage {
    let mut st = EffectStage::new(
        Box::new(Probe {
            seen: seen.clone(),
            sleep_on,
        }),
        mode,
    );
    st.params = vec![(value_spec(), PropValue::Float(0.0))];
    if let Some(o) = osc {
        st.oscillators = vec![("value".into(), Oscillator::parse_compact(o).unwrap())];
    }
    st
}

struct Setup {
    frames: u64,
    rate: u32,
    options: Options,
    stages: Vec<(String, EffectStage)>,
}

fn run(
    setup: Setup,
    commands: Option<framepipe_control::CommandReader>,
    events: Option<Arc<Mutex<Vec<Event>>>>,
) -> (Result<RunStats>, Released) {
    let released = Released::default();
    let p = Pipeline::new(
        (
            "counter".into(),
            Box::new(Counter {
                frames: setup.frames,
                rate: setup.rate,
            }),
        ),
        setup.stages,
        ("record".into(), Box::new(Record(released.clone()))),
    );
    let mut prepared = p.prepare(setup.options).unwrap();
    if let Some(c) = commands {
        prepared.set_commands(c);
    }
    if let Some(ev) = events {
        prepared.set_events(Arc::new(move |e: &Event| {
            ev.lock().unwrap().push(e.clone())
        }));
    }
    (prepared.run(), released)
}

fn by_seq(seen: &Seen) -> Vec<f64> {
    let mut v = seen.lock().unwrap().clone();
    v.sort_by_key(|p| p.0);
    v.iter()
        .enumerate()
        .for_each(|(i, p)| assert_eq!(p.0, i as u64, "each frame seen once"));
    v.into_iter().map(|p| p.1).collect()
}

#[test]
fn two_stages_on_one_oscillator_agree_on_every_frame() {
    let a = Seen::default();
    let b = Seen::default();
    let (tx, rx) = command_queue(16);
    let osc = "~sine:3hz:-1..1:phase=0.1";
    let setup = Setup {
        frames: 90,
        rate: 25,
        // Paced (the frames keep their 25 fps timestamps) so that the run lasts ~180 ms and
        // the speed change posted at 40 ms lands mid-run; unpaced, the run could end first and
        // the test then checked nothing about it.
        options: Options {
            threads: 3,
            pace: Some(Rational::new(500, 1)),
            ..Options::default()
        },
        stages: vec![
            (
                "a".into(),
                probe_stage(&a, Some(osc), vec![], Mode::Parallel),
            ),
            (
                "b".into(),
                probe_stage(&b, Some(osc), vec![], Mode::Parallel),
            ),
        ],
    };
    // A master speed change mid-run must also land on the same frame in both stages.
    let poster = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(40));
        tx.post(Command::Speed(2.5)).unwrap();
    });
    let (r, released) = run(setup, Some(rx), None);
    poster.join().unwrap();
    r.unwrap();
    let va = by_seq(&a);
    let vb = by_seq(&b);
    assert_eq!(va.len(), 90);
    assert_eq!(va, vb, "both stages saw the same value on every frame");
    // Before the speed change, values follow the oscillator at the frame's own timestamp.
    let o = Oscillator::parse_compact(osc).unwrap();
    assert_eq!(va[0], o.value_at(0));
    assert_eq!(va[1], o.value_at(40_000_000));
    // ... and the speed change did land mid-run (else the agreement above says nothing about
    // it): from some frame on, values leave the speed-1 curve.
    let at_speed_one = |k: usize| o.value_at(k as i64 * 40_000_000);
    let k = (0..90)
        .find(|&k| va[k] != at_speed_one(k))
        .expect("the speed change never reached the frames");
    assert!(
        k > 1,
        "the speed change landed before it was posted (frame {k})"
    );
    assert_eq!(released.lock().unwrap().len(), 90);
}

/// Posts commands from inside the sink's `consume` of one frame (on the output thread, so that
/// they are all waiting when it next reads its queue), then records like [`Record`].
struct PostAt {
    record: Record,
    at: u64,
    tx: Option<framepipe_control::CommandSender>,
    commands: Vec<&'static str>,
}

impl Sink for PostAt {
    fn start(&mut self, info: VideoInfo) -> Result<()> {
        self.record.start(info)
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        if ctx.seq == self.at {
            let tx = self.tx.take().expect("posts once");
            for c in &self.commands {
                tx.post(Command::parse(c).unwrap()).unwrap();
            }
        }
        self.record.consume(ctx, frame)
    }
    fn finish(&mut self) -> Result<()> {
        self.record.finish()
    }
}

/// Two commands read at one boundary apply from the same frame, though their stages are at
/// different frames (a parallel one ahead of a serial one). They are posted while the output
/// thread is inside the sink (frame 40), so both wait for its next read. (Posted from another
/// thread, the first one's post now wakes the output thread, which may read it alone.)
#[test]
fn a_set_command_lands_on_one_frame_boundary() {
    let a = Seen::default();
    let b = Seen::default();
    let (tx, rx) = command_queue(16);
    let released = Released::default();
    let p = Pipeline::new(
        (
            "counter".into(),
            Box::new(Counter {
                frames: 120,
                rate: 25,
            }),
        ),
        vec![
            ("a".into(), probe_stage(&a, None, vec![], Mode::Parallel)),
            ("b".into(), probe_stage(&b, None, vec![], Mode::Serial)),
        ],
        (
            "record".into(),
            Box::new(PostAt {
                record: Record(released.clone()),
                at: 40,
                tx: Some(tx),
                commands: vec!["set a.value 0.25", "set 2.value 0.75"],
            }),
        ),
    );
    let mut prepared = p
        .prepare(Options {
            threads: 2,
            ..Options::default()
        })
        .unwrap();
    prepared.set_commands(rx);
    prepared.run().unwrap();
    assert_eq!(released.lock().unwrap().len(), 120);
    let va = by_seq(&a);
    let vb = by_seq(&b);
    let ka = va
        .iter()
        .position(|v| *v == 0.25)
        .expect("the set reached stage a");
    let kb = vb
        .iter()
        .position(|v| *v == 0.75)
        .expect("the set reached stage b");
    assert!(va[..ka].iter().all(|v| *v == 0.0) && va[ka..].iter().all(|v| *v == 0.25));
    assert!(vb[..kb].iter().all(|v| *v == 0.0) && vb[kb..].iter().all(|v| *v == 0.75));
    assert_eq!(
        ka, kb,
        "commands read at one boundary apply from the same frame"
    );
    assert!(
        ka > 40 && ka < 120,
        "took effect after frame 40 (frame {ka})"
    );
}

#[test]
fn pause_then_steps_release_exactly_the_next_frames_and_resume_has_no_burst() {
    let seen = Seen::default();
    let (tx, rx) = command_queue(16);
    tx.post(Command::Pause).unwrap();
    let setup = Setup {
        frames: 40,
        rate: 100,
        options: Options {
            threads: 2,
            pace: Some(Rational::new(100, 1)),
            ..Options::default()
        },
        stages: vec![("p".into(), probe_stage(&seen, None, vec![], Mode::Parallel))],
    };
    // The moments each command was posted: what the engine released is judged against them
    // (not against fixed times), so a loaded machine delaying this thread changes nothing.
    let posted: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let driver = {
        let tx = tx.clone();
        let posted = Arc::clone(&posted);
        std::thread::spawn(move || {
            for cmd in [Command::Step(3), Command::Step(1), Command::Resume] {
                std::thread::sleep(Duration::from_millis(300));
                posted.lock().unwrap().push(Instant::now());
                tx.post(cmd).unwrap();
            }
        })
    };
    let (r, released) = run(setup, Some(rx), None);
    driver.join().unwrap();
    let stats = r.unwrap();
    assert_eq!(stats.frames, 40);
    let rel = released.lock().unwrap().clone();
    let seqs: Vec<u64> = rel.iter().map(|r| r.0).collect();
    assert_eq!(
        seqs,
        (0..40).collect::<Vec<_>>(),
        "every frame once, in order"
    );
    let posted = posted.lock().unwrap().clone();
    let (step3, step1, resume) = (posted[0], posted[1], posted[2]);
    let at = |i: usize| rel[i].1;
    // Nothing before the first step; its three frames before the second step (300 ms later: 30
    // periods); one frame for the second step, before resume; the rest after resume.
    assert!(at(0) >= step3, "frame 0 released while paused");
    assert!(
        at(2) < step1,
        "the three steps' frames came only after the next step, {:?} after theirs",
        at(2).duration_since(step3)
    );
    assert!(at(3) >= step1, "frame 3 released before its step");
    assert!(
        at(3) < resume,
        "the second step's frame came only after resume"
    );
    assert!(at(4) >= resume, "frame 4 released before resume");
    // Never two at once; after resume, frame 4 + i comes no earlier than i periods (10 ms) after
    // frame 4, give or take a period of jitter: no burst of the frames that waited.
    for w in rel.windows(2) {
        let gap = w[1].1.duration_since(w[0].1);
        assert!(
            gap >= Duration::from_millis(2),
            "two frames {:?} apart at {}",
            gap,
            w[1].0
        );
    }
    for i in 1..36 {
        let since = rel[4 + i].1.duration_since(rel[4].1);
        assert!(
            since + Duration::from_millis(10) >= Duration::from_millis(10 * i as u64),
            "frame {} only {since:?} after frame 4: a burst",
            4 + i
        );
    }
    let pacing = stats.pacing.expect("paced run");
    assert_eq!(pacing.lateness.repeated, 0);
}

#[test]
fn stop_ends_the_run_cleanly() {
    let seen = Seen::default();
    let (tx, rx) = command_queue(4);
    let setup = Setup {
        frames: 100_000,
        rate: 25,
        options: Options {
            threads: 2,
            ..Options::default()
        },
        stages: vec![("p".into(), probe_stage(&seen, None, vec![], Mode::Parallel))],
    };
    let poster = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        tx.post(Command::Stop).unwrap();
    });
    let t0 = Instant::now();
    let (r, released) = run(setup, Some(rx), None);
    poster.join().unwrap();
    let stats = r.expect("a stopped run is not an error");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let n = released.lock().unwrap().len() as u64;
    assert!(n > 0 && n < 100_000);
    assert_eq!(stats.frames, n);
}

fn overload(policy: Overload) -> RunStats {
    let seen = Seen::default();
    // 200 fps wanted; a serial stage that needs 12 ms per frame makes at most ~80.
    let setup = Setup {
        frames: 30,
        rate: 200,
        options: Options {
            threads: 2,
            pace: Some(Rational::new(200, 1)),
            overload: policy,
            ..Options::default()
        },
        stages: vec![(
            "slow".into(),
            probe_stage(
                &seen,
                None,
                vec![(u64::MAX, Duration::from_millis(12))],
                Mode::Serial,
            ),
        )],
    };
    let (r, released) = run(setup, None, None);
    let stats = r.unwrap();
    let seqs: Vec<u64> = released.lock().unwrap().iter().map(|r| r.0).collect();
    let distinct: std::collections::BTreeSet<u64> = seqs.iter().copied().collect();
    assert_eq!(distinct.len(), 30, "every frame reached the sink");
    stats
}

#[test]
fn overload_slow_slips_the_clock_and_live_repeats_frames() {
    let slow = overload(Overload::Slow);
    let p = slow.pacing.unwrap();
    assert_eq!(p.lateness.repeated, 0, "slow never repeats");
    assert!(
        slow.fps < 150.0,
        "slow: the rate falls ({:.1} fps)",
        slow.fps
    );
    let live = overload(Overload::Live);
    let p = live.pacing.unwrap();
    assert!(
        p.lateness.repeated > 10,
        "live repeats the previous frame: {}",
        p.lateness.repeated
    );
}

#[test]
fn a_stalled_stage_is_reported_once_by_name() {
    let seen = Seen::default();
    let events = Arc::new(Mutex::new(Vec::new()));
    let setup = Setup {
        frames: 12,
        rate: 25,
        options: Options {
            threads: 2,
            stall_timeout_ns: 100_000_000,
            ..Options::default()
        },
        stages: vec![(
            "sleepy".into(),
            probe_stage(
                &seen,
                None,
                vec![
                    (3, Duration::from_millis(400)),
                    (6, Duration::from_millis(400)),
                ],
                Mode::Serial,
            ),
        )],
    };
    let (r, released) = run(setup, None, Some(events.clone()));
    r.expect("a stall does not kill the run");
    assert_eq!(released.lock().unwrap().len(), 12);
    let ev = events.lock().unwrap().clone();
    // Only the sleepy stage's reports count: on a loaded machine another stage may also pass
    // the timeout now and then, which is a correct report too.
    let stalls: Vec<&Event> = ev
        .iter()
        .filter(|e| matches!(e, Event::Stalled { stage, .. } if &**stage == "sleepy"))
        .collect();
    assert_eq!(stalls.len(), 1, "reported once: {ev:?}");
    match stalls[0] {
        Event::Stalled { stage, elapsed_ms } => {
            assert_eq!(&**stage, "sleepy");
            assert!(*elapsed_ms >= 100);
        }
        _ => unreachable!(),
    }
}

#[test]
fn bad_commands_are_rejected_with_a_reason_and_the_run_goes_on() {
    let seen = Seen::default();
    let events = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = command_queue(8);
    tx.post(Command::parse("set p.nosuch 1").unwrap()).unwrap();
    tx.post(Command::parse("set p.value 99").unwrap()).unwrap();
    tx.post(Command::parse("bypass 0 on").unwrap()).unwrap();
    let setup = Setup {
        frames: 10,
        rate: 25,
        options: Options {
            threads: 2,
            ..Options::default()
        },
        stages: vec![("p".into(), probe_stage(&seen, None, vec![], Mode::Parallel))],
    };
    let (r, released) = run(setup, Some(rx), Some(events.clone()));
    r.unwrap();
    assert_eq!(released.lock().unwrap().len(), 10);
    let reasons: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::CommandRejected { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons[0].contains("unknown property 'nosuch'"),
        "{}",
        reasons[0]
    );
    assert!(reasons[1].contains("out of range"), "{}", reasons[1]);
    // `bypass 0` is the source (a counter): only effects and generators are controlled.
    assert!(
        reasons[2].contains("only effects and generators can be controlled"),
        "{}",
        reasons[2]
    );
}

/// Issue 7: an oscillator with an absurd frequency gave NaN, which reached the element (a frei0r
/// plugin then segfaulted). Through the whole runtime, every value the element gets is finite
/// and inside the property's range; where the oscillator is NaN the base value is used.
#[test]
fn an_absurd_oscillator_reaches_the_element_finite_and_in_range() {
    let seen = Seen::default();
    let setup = Setup {
        frames: 30,
        rate: 25,
        options: Options {
            threads: 2,
            ..Options::default()
        },
        stages: vec![("p".into(), {
            let mut st = probe_stage(&seen, None, vec![], Mode::Parallel);
            // Built directly: the parser refuses such a frequency, and the engine must not
            // rely on that.
            let osc = Oscillator::new(framepipe_control::Shape::Sine)
                .with_freq(1e308)
                .with_range(-10.0, 10.0);
            st.oscillators = vec![("value".into(), osc)];
            st
        })],
    };
    let (r, _) = run(setup, None, None);
    r.unwrap();
    let values = by_seq(&seen);
    assert_eq!(values.len(), 30);
    assert!(
        values
            .iter()
            .all(|v| v.is_finite() && (-10.0..=10.0).contains(v)),
        "{values:?}"
    );
    // From frame 1 on the phase is infinite: the base value (0) stands in.
    assert!(values[1..].iter().all(|v| *v == 0.0), "{values:?}");
}

/// Issue #9, low-latency control: in a paced run frames begin just in time for their deadline
/// (the graph's measured latency ahead, in whole periods), not as far ahead as frames in flight
/// allow, so a `set` reaches the output within a frame or two of being posted, not `in_flight`
/// frames later. Before this, with 8 frames in flight, it landed 8 frames after.
#[test]
fn a_set_reaches_the_output_within_a_frame_or_two_in_a_paced_run() {
    let seen = Seen::default();
    let released = Released::default();
    let (tx, rx) = command_queue(16);
    let p = Pipeline::new(
        (
            "counter".into(),
            Box::new(Counter {
                frames: 90,
                rate: 100,
            }),
        ),
        vec![("a".into(), probe_stage(&seen, None, vec![], Mode::Parallel))],
        ("record".into(), Box::new(Record(released.clone()))),
    );
    let mut prepared = p
        .prepare(Options {
            threads: 2,
            in_flight: 8,
            pace: Some(Rational::new(100, 1)),
            ..Options::default()
        })
        .unwrap();
    prepared.set_commands(rx);
    let watch = released.clone();
    let poster = std::thread::spawn(move || {
        let t0 = Instant::now();
        loop {
            let n = watch.lock().unwrap().len();
            if n >= 50 {
                tx.post(Command::parse("set a.value 0.5").unwrap()).unwrap();
                return n as u64;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "the run stalled");
            std::thread::sleep(Duration::from_micros(200));
        }
    });
    let stats = prepared.run().unwrap();
    let posted_after = poster.join().unwrap();
    let values = by_seq(&seen);
    let k = values
        .iter()
        .position(|v| *v == 0.5)
        .expect("the set reached the effect") as u64;
    let pacing = stats.pacing.expect("a paced run");
    assert!(
        pacing.frames_ahead >= 1 && pacing.frames_ahead < 8,
        "frames began {} ahead",
        pacing.frames_ahead
    );
    assert!(
        k <= posted_after + 1 + pacing.frames_ahead as u64,
        "posted after frame {} was released, first shown on frame {k} ({} ahead)",
        posted_after - 1,
        pacing.frames_ahead
    );
}

/// Issue #9, the default latency budget's adaptive margin: a frame that takes 20 ms longer
/// than the others (as when a CPU is taken away from a worker) is late, since frames begin the
/// graph's latency and a margin (2 ms at the start, less once frames have room) ahead; the
/// master output feeds its slack to the margin, which grows to cover such a delay (1.5 times
/// it, at most half a period). Fed nothing, the margin would stay at its 2 ms start.
#[test]
fn a_delayed_frame_grows_the_latency_margin() {
    const HICCUP: Duration = Duration::from_millis(20);
    let seen = Seen::default();
    let setup = Setup {
        frames: 120,
        rate: 30,
        options: Options {
            threads: 2,
            pace: Some(Rational::new(30, 1)),
            ..Options::default()
        },
        stages: vec![(
            "a".into(),
            probe_stage(&seen, None, vec![(100, HICCUP)], Mode::Parallel),
        )],
    };
    let (r, released) = run(setup, None, None);
    let stats = r.unwrap();
    assert_eq!(released.lock().unwrap().len(), 120);
    let pacing = stats.pacing.expect("a paced run");
    let late: Vec<_> = pacing.late_log.frames().collect();
    // Frame 100 was late (whatever the margin then: at most half a period, 16.7 ms).
    assert!(
        late.iter().any(|f| f.ready_ns > 2_000_000),
        "the delayed frame was not late: {late:?}"
    );
    // What its delay took (~20 ms less the budget, more than 10) times 1.5, capped at 16.7.
    assert!(
        pacing.latency_margin_peak_ms >= 10.0,
        "margin peak {} ms",
        pacing.latency_margin_peak_ms
    );
    // (Its decay and its place in the budget: the unit tests of `output/gate.rs`;
    // judged here at the run's end they would depend on the last frames' timing, which a
    // loaded machine moves.)
}

/// Issue #9, commands get replies: the frame an `Applied` reply names is exactly the first
/// frame that saw the new value (the frame before it did not), at 1 and 2 threads, paced and
/// unpaced; a refused command's reply names the reason.
#[test]
fn an_applied_reply_names_the_first_frame_that_saw_the_value() {
    for threads in [1, 2] {
        for paced in [false, true] {
            applied_reply_is_exact(threads, paced);
        }
    }
}

fn applied_reply_is_exact(threads: usize, paced: bool) {
    use framepipe_control::Outcome;
    const FRAMES: u64 = 80;
    let seen = Seen::default();
    let (tx, rx) = command_queue(16);
    let replies = tx.replies();
    // Unpaced, each frame takes 2 ms so that the commands land mid-run.
    let slow = if paced {
        vec![]
    } else {
        vec![(u64::MAX, Duration::from_millis(2))]
    };
    let setup = Setup {
        frames: FRAMES,
        rate: 100,
        options: Options {
            threads,
            pace: paced.then(|| Rational::new(100, 1)),
            ..Options::default()
        },
        stages: vec![("a".into(), probe_stage(&seen, None, slow, Mode::Parallel))],
    };
    let watch = seen.clone();
    let poster = std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut tickets = Vec::new();
        for (i, at) in [10usize, 25, 40, 55].into_iter().enumerate() {
            while watch.lock().unwrap().len() < at {
                assert!(t0.elapsed() < Duration::from_secs(20), "the run stalled");
                std::thread::sleep(Duration::from_micros(200));
            }
            let value = (i + 1) as f64;
            let cmd = Command::parse(&format!("set a.value {value}")).unwrap();
            tickets.push((tx.post(cmd).unwrap(), Some(value)));
            if i == 1 {
                let bad = Command::parse("set a.nosuch 1").unwrap();
                tickets.push((tx.post(bad).unwrap(), None));
            }
        }
        tickets
    });
    let (r, released) = run(setup, Some(rx), None);
    r.unwrap();
    let tickets = poster.join().unwrap();
    assert_eq!(released.lock().unwrap().len() as u64, FRAMES);
    let values = by_seq(&seen);
    let got: Vec<_> = std::iter::from_fn(|| replies.take()).collect();
    assert_eq!(got.len(), tickets.len(), "one reply per command: {got:?}");
    assert_eq!(replies.dropped(), 0);
    let what = format!("threads {threads}, paced {paced}");
    for (ticket, value) in tickets {
        let reply = got.iter().find(|r| r.ticket == ticket).expect("its reply");
        match (value, &reply.outcome) {
            (Some(v), Outcome::Applied { frame }) => {
                let f = *frame as usize;
                assert!(f > 0 && f < values.len(), "{what}: frame {f}");
                assert_eq!(values[f], v, "{what}: frame {f} did not see {v}");
                assert_ne!(values[f - 1], v, "{what}: frame {} already saw {v}", f - 1);
            }
            (None, Outcome::Refused { reason }) => {
                assert!(reason.contains("unknown property 'nosuch'"), "{reason}");
            }
            (_, other) => panic!("{what}: {} got {other:?}", reply.command),
        }
    }
}

/// Issue #10, the beat clock: at the default 120 bpm a beat lasts 0.5 s of frame time, 15
/// frames at 30 fps. `~square:1beat` is one cycle per beat (high for the first half of each
/// beat: frames 0–7 of every 15, low 8–14); `~square:2beats` flips every beat, every 15 frames.
#[test]
fn beat_oscillators_follow_the_default_tempo_in_frame_time() {
    let one = Seen::default();
    let two = Seen::default();
    let setup = Setup {
        frames: 90,
        rate: 30,
        options: Options {
            threads: 2,
            ..Options::default()
        },
        stages: vec![
            (
                "one".into(),
                probe_stage(&one, Some("~square:1beat:0..1"), vec![], Mode::Parallel),
            ),
            (
                "two".into(),
                probe_stage(&two, Some("~square:2beats:0..1"), vec![], Mode::Parallel),
            ),
        ],
    };
    let (r, _) = run(setup, None, None);
    assert_eq!(r.unwrap().tempo_bpm, 120.0);
    let one = by_seq(&one);
    let two = by_seq(&two);
    assert_eq!(one.len(), 90);
    for k in 0..90 {
        let high = k % 15 <= 7;
        assert_eq!(one[k], if high { 1.0 } else { 0.0 }, "1beat, frame {k}");
        let high = (k / 15) % 2 == 0;
        assert_eq!(two[k], if high { 1.0 } else { 0.0 }, "2beats, frame {k}");
    }
}

/// Issue #10: `tempo 60` mid-run halves a beat oscillator's rate from exactly the frame its
/// reply names, without a jump, and a later `speed 2` doubles it again from its own frame.
/// A ramp over 32 beats with range 0..8 reads as the beat position / 4: at 120 bpm and 30 fps
/// it rises 1/60 per frame, at 60 bpm 1/120.
#[test]
fn a_tempo_change_changes_the_beat_rate_from_its_frame_without_a_jump() {
    use framepipe_control::Outcome;
    const FRAMES: u64 = 240;
    let seen = Seen::default();
    let (tx, rx) = command_queue(16);
    let replies = tx.replies();
    let setup = Setup {
        frames: FRAMES,
        rate: 30,
        // Paced at 300 fps (the frames keep their 30 fps timestamps): the run lasts ~0.8 s,
        // long enough for commands posted after frames 30 and 100 were seen to land mid-run.
        options: Options {
            threads: 2,
            pace: Some(Rational::new(300, 1)),
            ..Options::default()
        },
        stages: vec![(
            "p".into(),
            probe_stage(&seen, Some("~ramp-up:32beats:0..8"), vec![], Mode::Parallel),
        )],
    };
    let poster = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let wait_for = |n: usize| {
                while seen.lock().unwrap().len() < n {
                    std::thread::sleep(Duration::from_millis(1));
                }
            };
            wait_for(30);
            let tempo = tx.post(Command::parse("tempo 60").unwrap()).unwrap();
            wait_for(100);
            let speed = tx.post(Command::parse("speed 2").unwrap()).unwrap();
            (tempo, speed)
        })
    };
    let (r, _) = run(setup, Some(rx), None);
    let (tempo_ticket, speed_ticket) = poster.join().unwrap();
    assert_eq!(r.unwrap().tempo_bpm, 60.0);
    let v = by_seq(&seen);
    assert_eq!(v.len(), FRAMES as usize);
    let frame_of = |ticket| {
        let r = std::iter::from_fn(|| replies.take())
            .find(|r| r.ticket == ticket)
            .expect("a reply");
        match r.outcome {
            Outcome::Applied { frame } => frame as usize,
            other => panic!("{other:?}"),
        }
    };
    let f = frame_of(tempo_ticket);
    let g = frame_of(speed_ticket);
    assert!(
        f >= 30 && g >= 100 && g > f && (g as u64) < FRAMES,
        "commands landed mid-run: tempo at {f}, speed at {g}"
    );
    for k in 1..v.len() {
        let step = v[k] - v[k - 1];
        let want = if k < f {
            1.0 / 60.0
        } else if k < g {
            1.0 / 120.0
        } else {
            1.0 / 60.0
        };
        assert!(
            (step - want).abs() < 1e-6,
            "frame {k}: step {step}, want {want} (tempo from {f}, speed from {g})"
        );
    }
}

/// Issue #10 (OSC bundles): a batch's commands take effect at the same frame in every stage,
/// the one its reply names; a batch with one bad command is refused whole and changes nothing.
#[test]
fn a_batch_applies_at_one_frame_or_not_at_all() {
    use framepipe_control::Outcome;
    for threads in [1, 2] {
        const FRAMES: u64 = 60;
        let a = Seen::default();
        let b = Seen::default();
        let (tx, rx) = command_queue(16);
        let replies = tx.replies();
        let slow = vec![(u64::MAX, Duration::from_millis(2))];
        let setup = Setup {
            frames: FRAMES,
            rate: 100,
            options: Options {
                threads,
                ..Options::default()
            },
            stages: vec![
                (
                    "a".into(),
                    probe_stage(&a, None, slow.clone(), Mode::Parallel),
                ),
                ("b".into(), probe_stage(&b, None, slow, Mode::Serial)),
            ],
        };
        let watch = a.clone();
        let poster = std::thread::spawn(move || {
            let t0 = Instant::now();
            while watch.lock().unwrap().len() < 15 {
                assert!(t0.elapsed() < Duration::from_secs(20), "the run stalled");
                std::thread::sleep(Duration::from_micros(200));
            }
            let bad = Command::parse("batch set a.value 9; set b.nosuch 9").unwrap();
            let bad = tx.post(bad).unwrap();
            let good = Command::parse("batch set a.value 5; set b.value 7").unwrap();
            (bad, tx.post(good).unwrap())
        });
        let (r, released) = run(setup, Some(rx), None);
        r.unwrap();
        let (bad, good) = poster.join().unwrap();
        assert_eq!(released.lock().unwrap().len() as u64, FRAMES);
        let (va, vb) = (by_seq(&a), by_seq(&b));
        let got: Vec<_> = std::iter::from_fn(|| replies.take()).collect();
        let reply = |t| &got.iter().find(|r| r.ticket == t).expect("a reply").outcome;
        match reply(bad) {
            Outcome::Refused { reason } => {
                assert!(reason.contains("unknown property 'nosuch'"), "{reason}")
            }
            other => panic!("the bad batch got {other:?}"),
        }
        assert!(!va.contains(&9.0), "nothing of a refused batch applies");
        let Outcome::Applied { frame } = reply(good) else {
            panic!("the good batch got {:?}", reply(good));
        };
        let f = *frame as usize;
        assert!(f > 0 && f < va.len(), "frame {f}");
        let first = |v: &[f64], x: f64| v.iter().position(|&y| y == x);
        assert_eq!(
            first(&va, 5.0),
            Some(f),
            "threads {threads}: a from frame {f}"
        );
        assert_eq!(
            first(&vb, 7.0),
            Some(f),
            "threads {threads}: b from frame {f}"
        );
    }
}

/// Issue #9 (state can be read without the scheduler's lock): the published view names the
/// graph's nodes and properties, and its values follow an oscillated property while running.
#[test]
fn the_published_view_follows_the_values_while_running() {
    let seen = Seen::default();
    let p = Pipeline::new(
        (
            "counter".into(),
            Box::new(Counter {
                frames: 40,
                rate: 50,
            }),
        ),
        vec![(
            "a".into(),
            probe_stage(&seen, Some("~triangle:1hz:0..1"), vec![], Mode::Parallel),
        )],
        ("record".into(), Box::new(Record(Released::default()))),
    );
    let prepared = p
        .prepare(Options {
            pace: Some(Rational::new(50, 1)),
            ..Options::default()
        })
        .unwrap();
    let view = prepared.view();
    let graph = view.graph();
    let names: Vec<&str> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["counter", "a", "record"]);
    let (ai, a) = graph.node("a").unwrap();
    assert_eq!(a.inputs, ["counter"]);
    assert_eq!(a.props[0].name, "value");
    assert!(a.bypassable && !graph.nodes[2].bypassable);
    let reader = std::thread::spawn(move || {
        let mut v = framepipe_runtime::ValuesView::default();
        let mut samples = Vec::new();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(3) {
            if view.read(&mut v) {
                assert!(v.oscillators[ai][0].is_some(), "the oscillator is shown");
                if let framepipe_core::PropValue::Float(x) = v.values[ai][0] {
                    samples.push((v.frame, x));
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        samples
    });
    prepared.run().unwrap();
    let samples = reader.join().unwrap();
    let values = by_seq(&seen);
    // Several publications during the 0.8 s run, each the value its frame was processed with.
    assert!(samples.len() >= 5, "{samples:?}");
    let distinct: std::collections::BTreeSet<u64> = samples.iter().map(|s| s.1.to_bits()).collect();
    assert!(distinct.len() >= 4, "the value moves: {samples:?}");
    // (A frame begun after the source's end is sampled but never processed.)
    for (frame, x) in samples.into_iter().filter(|s| s.0 < 40) {
        assert_eq!(values[frame as usize], x, "frame {frame}");
    }
}

/// Issue #10 (the web page's lateness history): `Counters::lateness_peak_us` shows the worst
/// lateness of each whole second while the run goes on. One frame held 80 ms in a stage of a
/// 50 fps run is released about that late, and the second it falls in says so.
#[test]
fn the_worst_lateness_of_each_second_is_published_while_running() {
    let seen = Seen::default();
    let p = Pipeline::new(
        (
            "counter".into(),
            Box::new(Counter {
                frames: 115,
                rate: 50,
            }),
        ),
        vec![(
            "a".into(),
            probe_stage(
                &seen,
                None,
                vec![(60, Duration::from_millis(80))],
                Mode::Serial,
            ),
        )],
        ("record".into(), Box::new(Record(Released::default()))),
    );
    let prepared = p
        .prepare(Options {
            pace: Some(Rational::new(50, 1)),
            ..Options::default()
        })
        .unwrap();
    let counters = prepared.counters();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = Arc::clone(&done);
    let reader = std::thread::spawn(move || {
        let mut peaks = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            peaks.push(counters.lateness_peak_us());
            std::thread::sleep(Duration::from_millis(10));
        }
        peaks
    });
    prepared.run().unwrap();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peaks = reader.join().unwrap();
    let worst = peaks.iter().copied().max().unwrap_or(0);
    assert!(
        worst >= 40_000,
        "the held frame's second shows it: {worst} µs"
    );
}

/// Holds frame `at` until the test lets it go, saying when it has it. Serial: the frames after
/// it wait behind it, so the nodes after the gate have run only the frames before `at`.
struct Gate {
    at: u64,
    state: GateState,
}

/// (the gate holds its frame, the test let it go), and the condition variable for both.
type GateState = Arc<(Mutex<(bool, bool)>, std::sync::Condvar)>;

impl EffectFactory for Gate {
    fn name(&self) -> &str {
        "gate"
    }
    fn default_mode(&self) -> Mode {
        Mode::Serial
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(input)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(Gate {
            at: self.at,
            state: self.state.clone(),
        }))
    }
}

impl Effect for Gate {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        if ctx.seq == self.at {
            let (m, cv) = &*self.state;
            let mut s = m.lock().unwrap();
            s.0 = true;
            cv.notify_all();
            // (Bounded, so that a broken test fails instead of hanging.)
            let (s, _) = cv
                .wait_timeout_while(s, Duration::from_secs(20), |s| !s.1)
                .unwrap();
            assert!(s.1, "the test never let frame {} go", self.at);
        }
        output.copy_from(input.data());
        Ok(())
    }
}

/// Issue #9 (low-latency control), per-node sampling: a `set` posted while frame N has begun
/// and is held before the node it changes shows from frame N itself, and its reply names N.
/// (When the values were sampled as a frame began, it came a frame or more later: frame N had
/// begun, the reply named a later one.) By frame numbers, at 1, 2 and 3 threads.
#[test]
fn a_set_reaches_a_frame_begun_before_it_whose_node_had_not_run() {
    use framepipe_control::Outcome;
    const AT: u64 = 20;
    for threads in [1, 2, 3] {
        let seen = Seen::default();
        let state = GateState::default();
        let (tx, rx) = command_queue(16);
        let replies = tx.replies();
        let gate = EffectStage::new(
            Box::new(Gate {
                at: AT,
                state: state.clone(),
            }),
            Mode::Serial,
        );
        let setup = Setup {
            frames: 40,
            rate: 100,
            options: Options {
                threads,
                ..Options::default()
            },
            stages: vec![
                ("gate".into(), gate),
                ("b".into(), probe_stage(&seen, None, vec![], Mode::Parallel)),
            ],
        };
        let poster = std::thread::spawn(move || {
            let (m, cv) = &*state;
            let held = cv
                .wait_timeout_while(m.lock().unwrap(), Duration::from_secs(20), |s| !s.0)
                .unwrap()
                .0;
            assert!(held.0, "the gate never got frame {AT}");
            drop(held);
            let ticket = tx.post(Command::parse("set b.value 1").unwrap()).unwrap();
            let t0 = Instant::now();
            let outcome = loop {
                if let Some(r) = std::iter::from_fn(|| replies.take()).find(|r| r.ticket == ticket)
                {
                    break r.outcome;
                }
                assert!(t0.elapsed() < Duration::from_secs(20), "no reply");
                std::thread::sleep(Duration::from_millis(1));
            };
            m.lock().unwrap().1 = true;
            cv.notify_all();
            outcome
        });
        let (r, released) = run(setup, Some(rx), None);
        let outcome = poster.join().unwrap();
        r.unwrap();
        assert_eq!(released.lock().unwrap().len(), 40);
        let values = by_seq(&seen);
        assert_eq!(
            outcome,
            Outcome::Applied { frame: AT },
            "threads {threads}: the reply names the frame held before the node"
        );
        assert_eq!(values[AT as usize - 1], 0.0, "threads {threads}");
        assert!(
            values[AT as usize..].iter().all(|&v| v == 1.0),
            "threads {threads}: shown from frame {AT} on: {values:?}"
        );
    }
}
