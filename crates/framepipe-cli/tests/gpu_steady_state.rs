//! Real-time rule for GPU shows (issue #24): in steady state a show with GPU nodes makes no
//! heap allocation per frame, on any thread. The show: a CPU source → upload → two ISF
//! shaders → download → sink, paced fast, at 64x48. A counting global allocator is read by
//! the sink once warm (frame `WARMUP`, pools filled) and at every frame after; everything
//! between, on every thread (workers, the GPU thread, the frame clock), must be zero. The
//! driver's own mallocs (llvmpipe's, in C) are not Rust's and not counted.

use std::sync::{Arc, Mutex};

use framepipe_core::{Element, Frame, FrameCtx, Registry, Result, Sink, VideoInfo};
use framepipe_runtime::{GpuStage, Graph, Node, NodeKind, OnEnd, Options};

#[path = "common/shaders.rs"]
mod shaders;
use shaders::{ADD, INVERT};

#[global_allocator]
static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

const WARMUP: u64 = 30;
const MEASURED: u64 = 120;

#[derive(Debug, Default, Clone, Copy)]
struct Marks {
    at_warmup: u64,
    at_end: u64,
    marked_at: Option<u64>,
    frames: u64,
    /// The last frame's first pixel (the shaders ran: not the source's).
    first: [u8; 4],
}

/// Reads the allocation count once warm and at every frame after (reading an atomic
/// allocates nothing).
struct MarkSink(Arc<Mutex<Marks>>, Marks);

impl Sink for MarkSink {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        let pool = frame.pool();
        let filled = pool.allocated() + 1 >= pool.capacity();
        if self.1.marked_at.is_none() && ctx.seq >= WARMUP && filled {
            self.1.marked_at = Some(ctx.seq);
            self.1.at_warmup = framepipe_testkit::total();
            // FP_ALLOC_TRACE=1: a backtrace for each allocation from here on.
            framepipe_testkit::trace(std::env::var_os("FP_ALLOC_TRACE").is_some());
        } else if self.1.marked_at.is_some() {
            self.1.at_end = framepipe_testkit::total();
        }
        self.1.frames = ctx.seq + 1;
        self.1.first.copy_from_slice(&frame.data()[..4]);
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        framepipe_testkit::trace(false);
        *self.0.lock().unwrap() = self.1;
        Ok(())
    }
}

fn main() {
    let dir = std::env::temp_dir().join(format!("fp-gpu-steady-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let add = dir.join("add.fs");
    let invert = dir.join("invert.fs");
    std::fs::write(&add, ADD).unwrap();
    std::fs::write(&invert, INVERT).unwrap();

    let mut r = Registry::new();
    framepipe_io::register(&mut r);
    framepipe_gpu::register(&mut r);
    let s = |v: &str| v.to_string();
    let frames = WARMUP + MEASURED;
    let Element::Source(source) = r
        .create(
            "testsrc",
            &[
                (s("width"), s("64")),
                (s("height"), s("48")),
                (s("frames"), frames.to_string()),
                (s("pattern"), s("bars")),
            ],
        )
        .unwrap()
    else {
        panic!("testsrc is not a source")
    };
    let isf = |file: &std::path::Path| {
        let Element::Gpu(f) = r
            .create("isf", &[(s("location"), file.display().to_string())])
            .unwrap()
        else {
            panic!("isf is not a GPU element")
        };
        NodeKind::Gpu(GpuStage::new(f))
    };
    let marks = Arc::new(Mutex::new(Marks::default()));
    let graph = Graph::new(vec![
        Node::new(
            "src",
            NodeKind::Source {
                source,
                on_end: OnEnd::Stop,
            },
            vec![],
        ),
        Node::new("add", isf(&add), vec![0]),
        Node::new("invert", isf(&invert), vec![1]),
        Node::new(
            "marks",
            NodeKind::Sink {
                sink: Box::new(MarkSink(marks.clone(), Marks::default())),
                master: true,
            },
            vec![2],
        ),
    ])
    .unwrap();
    let stats = graph
        .prepare(Options {
            threads: 2,
            // Paced (fast) so that the frame clock's path is measured too.
            pace: Some(framepipe_core::Rational::new(1000, 1)),
            // A stall report allocates its message; on a loaded machine one could fire.
            stall_timeout_ns: 60_000_000_000,
            ..Options::default()
        })
        .unwrap()
        .run()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let m = *marks.lock().unwrap();
    assert_eq!(m.frames, frames);
    let gpu = stats.gpu.expect("a show with GPU nodes reports its GPU");
    assert_eq!((gpu.uploads, gpu.downloads), (frames, frames));
    // The shaders ran: the last frame is the source's, plus 10, inverted (bars start white).
    assert_ne!(m.first, [255, 255, 255, 255], "the shaders did not run");
    let at = m.marked_at.expect("the sink's pool was never filled");
    assert!(
        frames - at >= 60,
        "warm-up lasted until frame {at} of {frames}"
    );
    let made = m.at_end - m.at_warmup;
    eprintln!(
        "GPU show (src -> upload -> 2 isf -> download -> sink): {made} allocations in {} frames after warm-up",
        frames - 1 - at
    );
    if made != 0 {
        eprintln!("a GPU show allocates per frame in steady state");
        std::process::exit(1);
    }
}
