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

use std::thread::Thread;

use framepipe_core::{
    Element, ElementDesc, ElementKind, Error, Frame, FrameCtx, Mode, PropKind, PropSpec, PropValue,
    Props, Result, Sink, VideoInfo,
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
        ],
        default_mode: Mode::Serial,
        details: vec![(
            "scaling".into(),
            "nearest neighbour, aspect kept, centred, black bars".into(),
        )],
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
    open: Option<Open>,
}

#[derive(Debug)]
struct Open {
    id: u64,
    writer: Writer,
    waker: Thread,
    stats: std::sync::Arc<WindowStats>,
}

impl WindowSink {
    /// A sink with these settings; without `link` its keys post nothing (benchmarks, tests).
    pub fn new(settings: WindowSettings, link: Option<WindowLink>) -> Self {
        WindowSink {
            settings,
            link,
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
        let opened = service::open(
            self.settings.clone(),
            (info.width, info.height),
            reader,
            self.link.clone(),
        )
        .map_err(|e| Error::element(NAME, e))?;
        self.open = Some(Open {
            id: opened.id,
            writer,
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
