//! In-test elements shared by the graph tests (`graph.rs`, `graph_edges.rs`): a counting
//! source, an order-sensitive mixer and a recording sink, whose outputs are known exactly.
#![allow(dead_code)] // each test file uses its own subset

use std::sync::{Arc, Mutex};
use std::time::Duration;

use framepipe_core::{
    Frame, FrameCtx, FrameMut, Mixer, MixerFactory, Mode, Rational, Result, Sink, SliceRunner,
    Source, VideoInfo,
};

pub const W: u32 = 16;
pub const H: u32 = 8;

/// Writes `salt + its own frame number` into every pixel; `frames` frames at `fps`; rewinds.
pub struct Counter {
    pub salt: u32,
    pub frames: u64,
    pub fps: u32,
    pub next: u64,
}

/// A 30 fps [`Counter`].
pub fn counter(salt: u32, frames: u64) -> Box<dyn Source> {
    Box::new(Counter {
        salt,
        frames,
        fps: 30,
        next: 0,
    })
}

impl Source for Counter {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: W,
            height: H,
            rate: Rational::new(self.fps, 1),
        }
    }
    fn len_hint(&self) -> Option<u64> {
        Some(self.frames)
    }
    fn fill(&mut self, _ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        if self.next >= self.frames {
            return Ok(false);
        }
        frame.words_mut().fill(self.salt + self.next as u32);
        self.next += 1;
        Ok(true)
    }
    fn rewind(&mut self) -> Result<bool> {
        self.next = 0;
        Ok(true)
    }
}

/// A mixer whose result depends on the order of its inputs: per pixel, [`weigh`] of the
/// inputs' words; sleeps a varying time (parallel instances finish out of order).
pub struct Weigh {
    pub sleep_us: u64,
}

impl MixerFactory for Weigh {
    fn name(&self) -> &str {
        "weigh"
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, inputs: &[VideoInfo]) -> Result<VideoInfo> {
        Ok(inputs[0])
    }
    fn instantiate(&self) -> Result<Box<dyn Mixer>> {
        Ok(Box::new(Weigh {
            sleep_us: self.sleep_us,
        }))
    }
}

impl Mixer for Weigh {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        inputs: &[&Frame],
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        if self.sleep_us > 0 {
            std::thread::sleep(Duration::from_micros(
                self.sleep_us + (ctx.seq * 31 % 3) * 100,
            ));
        }
        for (p, o) in output.words_mut().iter_mut().enumerate() {
            *o = weigh(inputs.iter().map(|f| f.words()[p]));
        }
        Ok(())
    }
}

/// `sum of input k * (2k + 3)`.
pub fn weigh(words: impl Iterator<Item = u32>) -> u32 {
    words.enumerate().fold(0u32, |s, (k, w)| {
        s.wrapping_add(w.wrapping_mul(2 * k as u32 + 3))
    })
}

/// Records `(seq, first word)` of every frame it gets; sleeps `sleep_ms` per frame. Checks
/// that it is started with `W`x`H` frames unless `any_size`.
#[derive(Clone, Default)]
pub struct Collect {
    pub got: Arc<Mutex<Vec<(u64, u32)>>>,
    pub sleep_ms: u64,
    pub any_size: bool,
}

impl Sink for Collect {
    fn start(&mut self, info: VideoInfo) -> Result<()> {
        if !self.any_size {
            assert_eq!((info.width, info.height), (W, H));
        }
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        std::thread::sleep(Duration::from_millis(self.sleep_ms));
        self.got.lock().unwrap().push((ctx.seq, frame.words()[0]));
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

impl Collect {
    /// A collector of frames of any size.
    pub fn any_size() -> Self {
        Collect {
            any_size: true,
            ..Collect::default()
        }
    }

    /// What it got: `(seq, first word)`.
    pub fn got(&self) -> Vec<(u64, u32)> {
        self.got.lock().unwrap().clone()
    }

    /// Every frame, in order: the values.
    pub fn values(&self) -> Vec<u32> {
        let got = self.got();
        for (i, (seq, _)) in got.iter().enumerate() {
            assert_eq!(*seq, i as u64, "frames in order, none missing");
        }
        got.into_iter().map(|g| g.1).collect()
    }
}

/// Runs `f` on its own thread and fails the test if it does not return within `limit`.
pub fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the host did not end within {limit:?}, or panicked"))
}
