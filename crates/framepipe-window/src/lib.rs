//! framepipe's screen output: `windowsink` shows the frames in a window, or borderless full
//! screen on a chosen display, scaled to fit with the aspect kept; `framepipe displays` lists
//! the displays ([`displays::displays`]).
//!
//! * [`sink`]: the `windowsink` element and its keys (space pause/resume, → step, `f` full
//!   screen, Esc leave full screen, `q` quit; closing the window stops the run): keys are
//!   posted as commands through a [`CommandSender`], like every other surface.
//! * [`handoff`]: the wait-free hand-off of frames from the output thread to the window thread.
//! * [`scale`]: the letterbox rectangle and the nearest-neighbour scaler (the documented rule).
//! * [`service`]: the one window thread of the process (`fp-window`, winit's event loop) and its
//!   waker (`fp-window-wake`).
//! * [`displays`]: XRandR monitors by index or name.
//!
//! # Why winit + softbuffer (and X11)
//! winit is the window library the Rust ecosystem keeps (keyboard, close requests, monitors,
//! cursor, full screen), softbuffer puts a CPU-drawn `u32` buffer on screen without a GPU
//! context (Xvfb in the tests, any projector machine), using MIT-SHM on X11. Both are
//! built for X11 only: placing a window on a chosen monitor is something Wayland does not let a
//! client do, so on a Wayland desktop the window goes through XWayland (`$DISPLAY` is set there).
//! Monitors come from XRandR directly ([`displays`] says why).
//!
//! # Real-time contract
//! The output thread's part ([`WindowSink`]'s `consume`) is a publish into the hand-off (a
//! frame clone and an atomic compare-and-swap; a copy of the frame only when the window thread
//! still holds the previous one) and an `unpark` of the waker: no lock the window thread can
//! hold, no allocation, no system call that can block. Everything that touches X (scaling,
//! presenting, events) runs on `fp-window`. No vsync pacing: softbuffer on X11 offers no
//! vsync clock, so the output keeps the engine's frame clock and the window shows the newest
//! frame each time it draws.
//!
//! # GPU frames
//! A window fed by a GPU node takes the show's textures ([`Sink::takes_textures`]) and draws
//! them with OpenGL ([`framepipe_gpu::present`]: an EGL window surface and a context sharing
//! the show's textures), scaled bilinearly; `consume_texture` on the output thread is a
//! wait-free push into a one-slot queue (a reference count, the unread frame replaced) and the
//! waker's `unpark`. `vsync=true` makes the window thread's swaps wait for the vertical blank;
//! the engine's frame clock still paces the show. Without EGL on the X server the frames are
//! downloaded and drawn as above (one line says why).
//!
//! [`Sink::takes_textures`]: framepipe_core::Sink::takes_textures
#![forbid(unsafe_code)]

pub mod displays;
pub mod handoff;
pub mod scale;
pub mod service;
pub mod sink;

use std::sync::{Arc, OnceLock};

pub use displays::{choose, displays, Display};
pub use sink::{desc, WindowSettings, WindowSink};

use framepipe_control::CommandSender;
use framepipe_core::Registry;

/// Errors of the window crate; each names what it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowError {
    /// `$DISPLAY` is not set.
    #[error("no display: $DISPLAY is not set (windows need an X server; on Wayland, XWayland)")]
    NoDisplay,
    /// The X server could not be reached.
    #[error("cannot connect to X display '{display}': {reason}")]
    Connect {
        /// `$DISPLAY`.
        display: String,
        /// Why.
        reason: String,
    },
    /// XRandR's monitor list could not be read.
    #[error("cannot list the monitors of X display '{display}' (XRandR 1.5): {reason}")]
    Randr {
        /// `$DISPLAY`.
        display: String,
        /// Why.
        reason: String,
    },
    /// `display=` names no display.
    #[error("unknown display '{given}'; expected one of: {expected} (see 'framepipe displays')")]
    UnknownDisplay {
        /// What was given.
        given: String,
        /// The displays there are.
        expected: String,
    },
    /// The window thread could not start or make the window.
    #[error("window: {0}")]
    Window(String),
}

/// Result with [`WindowError`].
pub type Result<T> = std::result::Result<T, WindowError>;

/// Tells the window whether the run is paused, so that space can post `pause` or `resume`.
/// The engine's live counters exist only once the run is prepared, after the sink was built:
/// the CLI [`set`](PauseProbe::set)s the probe then. Until it is set (or without it), space
/// alternates between `pause` and `resume` from the window's own presses.
#[derive(Clone, Default)]
pub struct PauseProbe(Arc<OnceLock<Box<dyn Fn() -> bool + Send + Sync>>>);

impl std::fmt::Debug for PauseProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PauseProbe")
            .field(&self.0.get().map(|p| p()))
            .finish()
    }
}

impl PauseProbe {
    /// Sets the function that says whether the run is paused (once; later calls are ignored).
    pub fn set(&self, paused: impl Fn() -> bool + Send + Sync + 'static) {
        let _ = self.0.set(Box::new(paused));
    }

    /// Whether the run is paused, if known.
    pub fn paused(&self) -> Option<bool> {
        self.0.get().map(|p| p())
    }
}

/// What a window needs from the run: where to post its keys' commands, and the pause state.
#[derive(Debug, Clone)]
pub struct WindowLink {
    /// The run's command queue (a clone per window; each counts as a command source).
    pub commands: CommandSender,
    /// Whether the run is paused.
    pub paused: PauseProbe,
}

/// Registers `windowsink`. With `link`, windows post their keys' commands to it; without
/// (listing elements, `framepipe graph`), building a `windowsink` is refused.
///
/// The registry keeps a clone of the link's sender for as long as it lives: a run should drop
/// its registry once the graph is built, so that the end of the other command sources is seen
/// by the engine (a `CommandSender` alive keeps a paused run waiting for input).
pub fn register(registry: &mut Registry, link: Option<WindowLink>) {
    registry.register(
        sink::desc(),
        Box::new(move |props| sink::build(props, link.clone())),
    );
}
