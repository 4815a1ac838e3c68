//! Issue #9, live edits: the next version's pools are made (allocated, touched) on the edit
//! thread, and what a switch replaces (the old version's pools, ...) is dropped there, never
//! on a worker or an output thread (REALTIME.md "Live edits"), however long a frame of it
//! lives on. A global allocator counts allocations and frees of frame buffers (a size no other
//! allocation has) on the threads that run the frames.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use framepipe_control::{command_queue, Command, GraphEdit, Outcome};
use framepipe_core::{
    Effect, EffectFactory, Frame, FrameCtx, FrameMut, Mode, Rational, Result, Sink, SliceRunner,
    Source, VideoInfo,
};
use framepipe_runtime::{Editor, EffectStage, Graph, Node, NodeKind, Options, Overload};

/// Frames of this size (bytes): no other allocation of the run has it.
const FW: u32 = 200;
const FH: u32 = 100;
const FRAME_BYTES: usize = (FW * FH * 4) as usize;

thread_local! {
    /// This thread runs frames (set by the test's elements on workers and output threads).
    static FRAME_PATH: Cell<bool> = const { Cell::new(false) };
}
/// Frame buffers freed on a frame-path thread while `WATCH` is on.
static FREED: AtomicU64 = AtomicU64::new(0);
static WATCH: AtomicBool = AtomicBool::new(false);
/// Frame buffers allocated on a frame-path thread while `WATCH_ALLOC` is on (from the first
/// edit: the graph the run starts with fills its pools as it warms up).
static MADE: AtomicU64 = AtomicU64::new(0);
static WATCH_ALLOC: AtomicBool = AtomicBool::new(false);

struct Watching;

// SAFETY: every operation is forwarded to the system allocator unchanged; the bookkeeping
// touches only atomics and a const-initialised thread-local without Drop (no allocation).
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() == FRAME_BYTES
            && WATCH_ALLOC.load(Ordering::Relaxed)
            && FRAME_PATH.try_with(Cell::get).unwrap_or(false)
        {
            MADE.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: our caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() == FRAME_BYTES
            && WATCH_ALLOC.load(Ordering::Relaxed)
            && FRAME_PATH.try_with(Cell::get).unwrap_or(false)
        {
            MADE.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: our caller's contract is System's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() == FRAME_BYTES
            && WATCH.load(Ordering::Relaxed)
            && FRAME_PATH.try_with(Cell::get).unwrap_or(false)
        {
            FREED.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: `ptr` came from System with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Watching = Watching;

/// The tests of this file share the counters above: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn on_frame_path() {
    FRAME_PATH.with(|c| c.set(true));
}

struct Src {
    next: u64,
    frames: u64,
}

impl Source for Src {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: FW,
            height: FH,
            rate: Rational::new(200, 1),
        }
    }
    fn len_hint(&self) -> Option<u64> {
        Some(self.frames)
    }
    fn fill(&mut self, _ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        on_frame_path();
        if self.next >= self.frames {
            return Ok(false);
        }
        frame.words_mut().fill(self.next as u32);
        self.next += 1;
        Ok(true)
    }
}

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
        on_frame_path();
        for (o, i) in output.words_mut().iter_mut().zip(input.words()) {
            *o = i.wrapping_add(self.0);
        }
        Ok(())
    }
}

/// Counts frames; stops watching a few frames before the end (the run's own teardown frees
/// on the calling thread).
#[derive(Clone)]
struct Out {
    got: Arc<AtomicU64>,
    stop_watching_at: u64,
}

impl Sink for Out {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, _frame: &Frame) -> Result<()> {
        on_frame_path();
        if ctx.seq + 1 >= self.stop_watching_at {
            WATCH.store(false, Ordering::SeqCst);
            WATCH_ALLOC.store(false, Ordering::SeqCst);
        }
        self.got.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        WATCH.store(false, Ordering::SeqCst);
        WATCH_ALLOC.store(false, Ordering::SeqCst);
        FRAME_PATH.with(|c| c.set(false));
        Ok(())
    }
}

type Build = Box<dyn FnOnce() -> std::result::Result<Graph, String> + Send>;

struct Script(VecDeque<Build>);

impl Editor for Script {
    fn build(&mut self, _edit: &GraphEdit) -> std::result::Result<Graph, String> {
        (self.0.pop_front().expect("a build per edit"))()
    }
    fn settled(&mut self, _accepted: bool) {}
}

fn fx(name: &str, k: u32, input: usize, keep: bool) -> Node {
    let mut n = Node::new(
        name,
        NodeKind::Effect(EffectStage::new(Box::new(Add(k)), Mode::Parallel)),
        vec![input],
    );
    n.keep = keep;
    n
}

/// `src ! a ! out`: `frames` frames of [`Src`] through `a` (adds 1) into `sink`, paced at
/// `rate`.
fn src_a_out(
    frames: u64,
    sink: Box<dyn Sink>,
    rate: u32,
    threads: usize,
    overload: Overload,
) -> framepipe_runtime::Prepared {
    let nodes = vec![
        Node::new(
            "src",
            NodeKind::Source {
                source: Box::new(Src { next: 0, frames }),
                on_end: framepipe_runtime::OnEnd::Stop,
            },
            vec![],
        ),
        fx("a", 1, 0, false),
        Node::new("out", NodeKind::Sink { sink, master: true }, vec![1]),
    ];
    Graph::new(nodes)
        .unwrap()
        .prepare(Options {
            threads,
            pace: Some(Rational::new(rate, 1)),
            overload,
            ..Options::default()
        })
        .unwrap()
}

/// The edit that replaces `a` with one that adds `k` (new pools: a new instance).
fn replace_a(k: u32) -> Build {
    Box::new(move || {
        Graph::new(vec![
            Node::new("src", NodeKind::Running { sink: false }, vec![]),
            fx("a", k, 0, false),
            Node::new("out", NodeKind::Running { sink: true }, vec![1]),
        ])
        .map_err(|e| e.to_string())
    })
}

#[test]
fn an_edit_neither_allocates_nor_frees_frames_on_a_worker_or_an_output_thread() {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: u64 = 90;
    let mut failures = Vec::new();
    for overload in [Overload::Slow, Overload::Live] {
        for threads in [1, 2, 4] {
            FREED.store(0, Ordering::SeqCst);
            MADE.store(0, Ordering::SeqCst);
            WATCH.store(true, Ordering::SeqCst);
            let out = Out {
                got: Arc::new(AtomicU64::new(0)),
                stop_watching_at: N - 5,
            };
            let mut prepared = src_a_out(N, Box::new(out.clone()), 200, threads, overload);
            let builds: Vec<Build> = (0..3).map(|k| replace_a(10 + k)).collect();
            prepared.set_editor(Box::new(Script(builds.into())));
            let (tx, rx) = command_queue(16);
            let replies = tx.replies();
            prepared.set_commands(rx);
            let got = Arc::clone(&out.got);
            let poster = std::thread::spawn(move || {
                let t0 = Instant::now();
                let mut applied = 0;
                for at in [15, 35, 55] {
                    while got.load(Ordering::SeqCst) < at {
                        assert!(t0.elapsed() < Duration::from_secs(30), "stalled");
                        std::thread::sleep(Duration::from_micros(300));
                    }
                    WATCH_ALLOC.store(true, Ordering::SeqCst);
                    tx.post(Command::Edit(GraphEdit::Remove { node: "x".into() }))
                        .unwrap();
                    let r = loop {
                        assert!(t0.elapsed() < Duration::from_secs(30), "no answer");
                        if let Some(r) = replies.take() {
                            break r;
                        }
                        std::thread::sleep(Duration::from_micros(300));
                    };
                    if matches!(r.outcome, Outcome::Applied { .. }) {
                        applied += 1;
                    }
                }
                applied
            });
            prepared.run().unwrap();
            assert_eq!(poster.join().unwrap(), 3);
            let made = MADE.load(Ordering::SeqCst);
            if made > 0 {
                failures.push(format!(
                    "{} threads {threads}: {made} frame buffers allocated on a worker or an \
                     output thread after the first edit",
                    overload.as_str()
                ));
            }
            let freed = FREED.load(Ordering::SeqCst);
            if freed > 0 {
                failures.push(format!(
                    "{} threads {threads}: {freed} frame buffers freed on a worker or an \
                     output thread",
                    overload.as_str()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Keeps a clone of frame `keep_at` until frame `drop_at`, then lets it go, on the output
/// thread (a sink may keep the frame it was given: its pool counts one for it).
struct KeepOne {
    got: Arc<AtomicU64>,
    keep_at: u64,
    drop_at: u64,
    kept: Option<Frame>,
}

impl Sink for KeepOne {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        on_frame_path();
        if ctx.seq == self.keep_at {
            self.kept = Some(frame.clone());
        }
        if ctx.seq == self.drop_at {
            self.kept = None;
        }
        self.got.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        WATCH.store(false, Ordering::SeqCst);
        FRAME_PATH.with(|c| c.set(false));
        Ok(())
    }
}

// issue #11
#[test]
fn a_replaced_version_whose_frame_outlives_2_s_is_still_dropped_off_the_frame_path() {
    // The edit thread used to give up burying a replaced version after 2 s: then the version
    // (and its pools' buffers) went with whoever let go of it last, here the output thread
    // dropping the frame its sink kept 3 s after the edit. Now the edit thread keeps the
    // version until that frame is back, and frees it itself.
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const RATE: u64 = 200;
    const KEEP_AT: u64 = 10;
    const DROP_AT: u64 = KEEP_AT + RATE * 3;
    const N: u64 = DROP_AT + 20;
    let got = Arc::new(AtomicU64::new(0));
    let sink = KeepOne {
        got: Arc::clone(&got),
        keep_at: KEEP_AT,
        drop_at: DROP_AT,
        kept: None,
    };
    let mut prepared = src_a_out(N, Box::new(sink), RATE as u32, 2, Overload::Slow);
    let builds: Vec<Build> = vec![replace_a(10)];
    prepared.set_editor(Box::new(Script(builds.into())));
    let (tx, rx) = command_queue(16);
    let replies = tx.replies();
    prepared.set_commands(rx);
    FREED.store(0, Ordering::SeqCst);
    WATCH.store(true, Ordering::SeqCst);
    let poster = std::thread::spawn(move || {
        let t0 = Instant::now();
        while got.load(Ordering::SeqCst) <= KEEP_AT {
            assert!(t0.elapsed() < Duration::from_secs(30), "stalled");
            std::thread::sleep(Duration::from_micros(300));
        }
        tx.post(Command::Edit(GraphEdit::Remove { node: "x".into() }))
            .unwrap();
        loop {
            assert!(t0.elapsed() < Duration::from_secs(30), "no answer");
            if let Some(r) = replies.take() {
                break r.outcome;
            }
            std::thread::sleep(Duration::from_micros(300));
        }
    });
    prepared.run().unwrap();
    let outcome = poster.join().unwrap();
    match outcome {
        Outcome::Applied { frame } => assert!(
            frame > KEEP_AT && frame + RATE * 2 < DROP_AT,
            "the edit at frame {frame}: the kept frame must be of the version it replaced, \
             and outlive the 2 s"
        ),
        other => panic!("the edit was not applied: {other:?}"),
    }
    let freed = FREED.load(Ordering::SeqCst);
    assert_eq!(
        freed, 0,
        "{freed} frame buffers of the replaced version freed on the output thread"
    );
}
