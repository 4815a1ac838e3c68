//! `windowsink`: the frames in a window, or borderless full screen on a chosen display.
//!
//! ```text
//! framepipe run "testsrc ! windowsink fullscreen=true display=1"
//! framepipe run "... ! tee name=t  t. ! y4msink location=show.y4m  t. ! monitor ! windowsink title=preview"
//! ```
//!
//! Properties: `title`, `display` (index or name from `framepipe displays`; empty: the primary
//! one), `fullscreen`, `width`/`height` (the window's size; 0: the frame's size, shrunk to fit
//! the display). The picture is scaled to fit with its aspect kept, black bars around it
//! ([`crate::scale`] gives the exact rule). Full screen is a borderless window covering the
//! display, above others, with the cursor hidden.
//!
//! Keys (posted as commands through the run's command queue, like stdin's lines): **space**
//! pause / resume, **→** step one frame, **f** full screen on / off, **Esc** leave full screen,
//! **q** quit (`stop`). Closing the window posts `stop` too: the run ends cleanly.
//!
//! On the output thread, [`Sink::consume`] only hands the frame over ([`crate::handoff`]) and
//! wakes the window thread; see the crate's real-time contract.
//!
//! **GPU frames**: fed by a GPU node, the window takes the show's textures themselves
//! ([`Sink::takes_textures`]) and draws them with OpenGL in the same window, scaled with
//! bilinear filtering: no download. `vsync=true` makes its swaps wait for the vertical blank
//! (on the window thread; the frame clock paces the show either way). Where the window's X
//! server has no EGL, the frames are downloaded and drawn as CPU frames, said in one line.

use std::thread::Thread;

use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use framepipe_core::{
    Element, ElementDesc, ElementKind, Error, Frame, FrameCtx, Mode, PropKind, PropSpec, PropValue,
    Props, Result, Sink, TextureFrame, VideoInfo,
};

use crate::handoff::{handoff, HandoffStats, Writer};
use crate::service::{self, WindowStats};
use crate::WindowLink;

/// The element's name.
pub const NAME: &str = "windowsink";

/// The largest window side accepted for `width`/`height`.
const MAX_SIDE: i64 = 16384;

/// The registry description of `windowsink`.
pub fn desc() -> ElementDesc {
    ElementDesc {
        name: NAME.into(),
        kind: ElementKind::Sink,
        description: "Shows frames in a window or full screen on a display (keys: space pause/resume, right step, f full screen, Esc leave it, q quit)".into(),
        props: vec![
            PropSpec::new(
                "title",
                PropKind::Str,
                PropValue::Str("framepipe".into()),
                "the window's title",
            ),
            PropSpec::new(
                "display",
                PropKind::Str,
                PropValue::Str(String::new()),
                "display index or name (framepipe displays); empty: the primary one",
            ),
            PropSpec::new(
                "fullscreen",
                PropKind::Bool,
                PropValue::Bool(false),
                "borderless full screen on the display, cursor hidden",
            ),
            PropSpec::new(
                "width",
                PropKind::Int { min: 0, max: MAX_SIDE },
                PropValue::Int(0),
                "window width; 0: the frame's, shrunk to fit the display",
            ),
            PropSpec::new(
                "height",
                PropKind::Int { min: 0, max: MAX_SIDE },
                PropValue::Int(0),
                "window height; 0: the frame's, shrunk to fit the display",
            ),
            PropSpec::new(
                "vsync",
                PropKind::Bool,
                PropValue::Bool(false),
                "GPU frames: swaps wait for the vertical blank (the frame clock paces either way)",
            ),
        ],
        default_mode: Mode::Serial,
        details: vec![
            (
                "scaling".into(),
                "CPU frames: nearest neighbour; GPU frames: bilinear; aspect kept, centred, black bars"
                    .into(),
            ),
            (
                "gpu frames".into(),
                "drawn with OpenGL in the window, no download (EGL on the X server; else downloaded)"
                    .into(),
            ),
        ],
    }
}

/// A window's settings, from its properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowSettings {
    /// Window title.
    pub title: String,
    /// Display index or name; empty: the primary one.
    pub display: String,
    /// Start in full screen.
    pub fullscreen: bool,
    /// Window size asked for (0: from the frame).
    pub width: u32,
    /// Window height asked for (0: from the frame).
    pub height: u32,
    /// GPU frames: swaps wait for the vertical blank.
    pub vsync: bool,
}

impl WindowSettings {
    /// Settings from resolved properties.
    pub fn from_props(props: &Props) -> Self {
        WindowSettings {
            title: props.str("title").to_string(),
            display: props.str("display").to_string(),
            fullscreen: props.bool("fullscreen"),
            width: props.i64("width").clamp(0, MAX_SIDE) as u32,
            height: props.i64("height").clamp(0, MAX_SIDE) as u32,
            vsync: props.bool("vsync"),
        }
    }
}

/// Builds `windowsink`: checks that there is a display to go to (the window opens at `start`).
pub fn build(props: &Props, link: Option<WindowLink>) -> Result<Element> {
    let settings = WindowSettings::from_props(props);
    let Some(link) = link else {
        return Err(Error::element(
            NAME,
            "cannot be built here: its keys need the run's command queue",
        ));
    };
    let list = crate::displays().map_err(|e| Error::element(NAME, e))?;
    crate::choose(&list, &settings.display).map_err(|e| Error::element(NAME, e))?;
    Ok(Element::Sink(Box::new(WindowSink::new(
        settings,
        Some(link),
    ))))
}

/// The `windowsink` sink.
#[derive(Debug)]
pub struct WindowSink {
    settings: WindowSettings,
    link: Option<WindowLink>,
    /// Whether it takes the show's textures (asked once, when a GPU node feeds it).
    textures: Option<bool>,
    open: Option<Open>,
}

#[derive(Debug)]
struct Open {
    id: u64,
    writer: Writer,
    /// GPU frames to the window thread: the newest one, an unread one replaced.
    textures: Option<Arc<ArrayQueue<(FrameCtx, TextureFrame)>>>,
    waker: Thread,
    stats: std::sync::Arc<WindowStats>,
}

impl WindowSink {
    /// A sink with these settings; without `link` its keys post nothing (benchmarks, tests).
    pub fn new(settings: WindowSettings, link: Option<WindowLink>) -> Self {
        WindowSink {
            settings,
            link,
            textures: None,
            open: None,
        }
    }

    /// What the hand-off did so far (zeros before `start`).
    pub fn handoff_stats(&self) -> HandoffStats {
        self.open
            .as_ref()
            .map_or_else(HandoffStats::default, |o| o.writer.stats())
    }

    /// The window thread's counts and draw times (`None` before `start`).
    pub fn window_stats(&self) -> Option<std::sync::Arc<WindowStats>> {
        self.open.as_ref().map(|o| std::sync::Arc::clone(&o.stats))
    }
}

impl Sink for WindowSink {
    fn start(&mut self, info: VideoInfo) -> Result<()> {
        let (writer, reader) = handoff(info.frame_bytes());
        let textures = (self.textures == Some(true)).then(|| Arc::new(ArrayQueue::new(1)));
        let opened = service::open(
            self.settings.clone(),
            (info.width, info.height),
            reader,
            textures.clone(),
            self.link.clone(),
        )
        .map_err(|e| Error::element(NAME, e))?;
        self.open = Some(Open {
            id: opened.id,
            writer,
            textures,
            waker: opened.waker,
            stats: opened.stats,
        });
        Ok(())
    }

    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        if let Some(open) = &mut self.open {
            open.writer.publish(ctx, frame);
            open.waker.unpark();
        }
        Ok(())
    }

    fn takes_textures(&mut self) -> bool {
        *self.textures.get_or_insert_with(|| {
            match framepipe_gpu::present::window_display() {
                Ok(()) => true,
                Err(why) => {
                    service::say(&format!(
                        "GPU frames are downloaded and drawn by the CPU: no EGL for the window ({why})"
                    ));
                    false
                }
            }
        })
    }

    fn consume_texture(&mut self, ctx: &FrameCtx, frame: &TextureFrame) -> Result<()> {
        if let Some(open) = &mut self.open {
            if let Some(q) = &open.textures {
                // An unread frame is replaced (back to its pool, here).
                drop(q.force_push((*ctx, frame.clone())));
                open.waker.unpark();
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(open) = self.open.take() {
            service::close(open.id);
        }
        Ok(())
    }
}

impl Drop for WindowSink {
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            service::close(open.id);
        }
    }
}
