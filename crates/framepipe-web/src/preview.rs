//! `webpreview`: a sink that makes the page's preview image. It heads nothing and holds nothing
//! back: the CLI puts it after a `monitor` tap on a leaky branch (`NODE. ! monitor !
//! webpreview`), so the show never waits for it.
//!
//! On its output thread, `consume` only copies the frame (at most [`MAX_FPS`] a second) into a
//! buffer made in `start`, with a `try_lock` (a busy encoder means this frame is skipped), and
//! wakes the `fp-web-jpeg` thread; that thread encodes the JPEG (jpeg-encoder, pure Rust) and
//! publishes it in the [`PreviewSlot`] the server serves. So `consume` never allocates and never
//! waits for the encoder, and the encoding costs the engine nothing.
//!
//! It paces itself: after a copy, `consume` returns only when the 100 ms period is over. On a
//! leaky branch that is what makes the graph skip the frames in between for the whole branch,
//! so the `monitor` tap before it runs 10 times a second instead of at the show's rate (measured
//! by `scripts/bench-web`: a 1280x720 → 320x180 box downscale costs ~5 ms a frame in a debug
//! build, a third of a core at 60 fps). The wait is on the sink's own output thread: no worker,
//! no frame of the show and no command waits for it; the end of a run waits at most one
//! period for it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use framepipe_core::{
    Element, ElementDesc, ElementKind, Error, Frame, FrameCtx, Mode, PropKind, PropSpec, PropValue,
    Props, Registry, Result, Sink, VideoInfo,
};

use crate::counters::{bump, WebCounters};

/// Element name.
pub const NAME: &str = "webpreview";
/// Images a second at most.
pub const MAX_FPS: u32 = 10;
/// Default JPEG quality.
pub const DEFAULT_QUALITY: i64 = 70;

/// The latest preview image, shared by the `webpreview` sink (writer) and the server (reader).
#[derive(Debug, Default)]
pub struct PreviewSlot {
    /// The JPEG and its serial number (0: none yet).
    latest: Mutex<(u64, Arc<Vec<u8>>)>,
    /// The serial number of the latest image, readable without the lock.
    seq: AtomicU64,
}

impl PreviewSlot {
    /// An empty slot.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The serial number of the latest image (0: none yet).
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// The latest image and its serial number.
    pub fn latest(&self) -> (u64, Arc<Vec<u8>>) {
        let l = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        (l.0, Arc::clone(&l.1))
    }

    fn publish(&self, jpeg: Vec<u8>) {
        let mut l = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        l.0 += 1;
        l.1 = Arc::new(jpeg);
        self.seq.store(l.0, Ordering::Release);
    }
}

/// The registry description of `webpreview`.
pub fn desc() -> ElementDesc {
    ElementDesc {
        name: NAME.into(),
        kind: ElementKind::Sink,
        description:
            "The web page's preview: JPEG at most 10 a second (put it after a leaky monitor tap)"
                .into(),
        props: vec![PropSpec::new(
            "quality",
            PropKind::Int { min: 1, max: 100 },
            PropValue::Int(DEFAULT_QUALITY),
            "JPEG quality",
        )],
        default_mode: Mode::Serial,
        details: vec![("rate".into(), format!("at most {MAX_FPS} images/s"))],
    }
}

/// Registers `webpreview`, publishing into `slot` and counting images in `counters`.
pub fn register(registry: &mut Registry, slot: Arc<PreviewSlot>, counters: Arc<WebCounters>) {
    registry.register(
        desc(),
        Box::new(move |props: &Props| {
            Ok(Element::Sink(Box::new(WebPreview {
                slot: Arc::clone(&slot),
                counters: Arc::clone(&counters),
                quality: props.i64("quality").clamp(1, 100) as u8,
                shared: None,
                thread: None,
                last: None,
            })))
        }),
    );
}

/// The frame handed from `consume` to the encoder thread.
struct Handoff {
    width: u32,
    height: u32,
    rgba: Vec<u8>,
    /// A frame waiting to be encoded.
    fresh: bool,
}

struct Shared {
    handoff: Mutex<Handoff>,
    stop: AtomicBool,
}

/// The time between two copies.
const PERIOD: Duration = Duration::from_millis(1000 / MAX_FPS as u64);

/// Sleeps, when dropped, until [`PERIOD`] after the instant it holds.
struct Pace(Instant);

impl Drop for Pace {
    fn drop(&mut self) {
        if let Some(rest) = PERIOD.checked_sub(self.0.elapsed()) {
            std::thread::sleep(rest);
        }
    }
}

/// The `webpreview` sink.
struct WebPreview {
    slot: Arc<PreviewSlot>,
    counters: Arc<WebCounters>,
    quality: u8,
    shared: Option<Arc<Shared>>,
    thread: Option<JoinHandle<()>>,
    last: Option<Instant>,
}

impl Sink for WebPreview {
    fn start(&mut self, info: VideoInfo) -> Result<()> {
        if info.width > u16::MAX as u32 || info.height > u16::MAX as u32 {
            return Err(Error::Unsupported {
                element: NAME.into(),
                what: format!(
                    "a {}x{} preview (JPEG takes at most 65535 per side; put a monitor before it)",
                    info.width, info.height
                ),
            });
        }
        let shared = Arc::new(Shared {
            handoff: Mutex::new(Handoff {
                width: info.width,
                height: info.height,
                rgba: vec![0; info.frame_bytes()],
                fresh: false,
            }),
            stop: AtomicBool::new(false),
        });
        let thread = {
            let (shared, slot, counters) = (
                Arc::clone(&shared),
                Arc::clone(&self.slot),
                Arc::clone(&self.counters),
            );
            let quality = self.quality;
            std::thread::Builder::new()
                .name("fp-web-jpeg".into())
                .spawn(move || encode_loop(&shared, &slot, &counters, quality))
                .map_err(|e| Error::Io {
                    context: "webpreview: starting the fp-web-jpeg thread".into(),
                    source: e,
                })?
        };
        self.shared = Some(shared);
        self.thread = Some(thread);
        Ok(())
    }

    fn consume(&mut self, _ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        let now = Instant::now();
        if self.last.is_some_and(|l| now.duration_since(l) < PERIOD) {
            return Ok(());
        }
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        // After the copy, this (leaky) branch stays busy until the period is over, so the graph
        // skips the frames in between for the whole branch: the `monitor` before it then
        // downscales 10 frames a second, not every frame. This thread is the sink's own
        // output thread; no worker and no frame of the show waits for it.
        let _pace = Pace(now);
        // The encoder holds the lock only while copying out: if it does now, skip this frame.
        let Ok(mut h) = shared.handoff.try_lock() else {
            return Ok(());
        };
        let row = h.width as usize * 4;
        let stride = frame.stride();
        let data = frame.data();
        for (y, dst) in h.rgba.chunks_exact_mut(row).enumerate() {
            dst.copy_from_slice(&data[y * stride..y * stride + row]);
        }
        h.fresh = true;
        drop(h);
        self.last = Some(now);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(shared) = &self.shared {
            shared.stop.store(true, Ordering::Release);
        }
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        Ok(())
    }
}

impl Drop for WebPreview {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// The `fp-web-jpeg` thread: waits for a fresh frame, copies it out as RGB, encodes, publishes.
fn encode_loop(shared: &Shared, slot: &PreviewSlot, counters: &WebCounters, quality: u8) {
    let mut rgb: Vec<u8> = Vec::new();
    while !shared.stop.load(Ordering::Acquire) {
        std::thread::park_timeout(Duration::from_millis(200));
        let size = {
            let mut h = shared.handoff.lock().unwrap_or_else(|p| p.into_inner());
            if !h.fresh {
                continue;
            }
            h.fresh = false;
            rgb.clear();
            for px in h.rgba.chunks_exact(4) {
                rgb.extend_from_slice(&px[..3]);
            }
            (h.width as u16, h.height as u16)
        };
        let mut jpeg = Vec::with_capacity(rgb.len() / 8 + 1024);
        let encoder = jpeg_encoder::Encoder::new(&mut jpeg, quality);
        if encoder
            .encode(&rgb, size.0, size.1, jpeg_encoder::ColorType::Rgb)
            .is_ok()
        {
            slot.publish(jpeg);
            bump(&counters.previews);
        }
    }
}
