//! The window thread: one winit event loop for the whole process (winit allows one), started by
//! the first `windowsink`, serving every window.
//!
//! * `fp-window` runs the event loop: it opens and closes windows when sinks start and finish,
//!   draws the newest frame of each window (scaled, [`crate::scale`]) and presents it
//!   (softbuffer), redraws on expose and resize, and turns keys and close requests into
//!   commands. A window that takes the show's textures draws them with OpenGL instead
//!   ([`framepipe_gpu::present::Presenter`]: its own context in the show's share group, an EGL
//!   window surface, a bilinear blit); its swaps, with or without vsync, wait on this thread
//!   only. It copies each texture it takes into a texture of its own (for redraws) and lets go
//!   of the frame once the copy is done, so it keeps no frame of the show's.
//! * `fp-window-wake` relays the output threads' wake-ups to it: a sink's `consume` only
//!   `unpark`s this thread (no allocation, never blocks), which posts one user event to the
//!   event loop unless one is already pending. (winit's own event proxy goes through a channel
//!   that allocates now and then, which has no place on the output thread.)
//!
//! Neither thread ever holds anything the output thread waits for.

use std::io::Write as _;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use framepipe_control::Command;
use framepipe_core::{FrameCtx, TextureFrame};
use framepipe_gpu::present::Presenter;
use winit::application::ApplicationHandler;
use winit::dpi::{PhysicalPosition, PhysicalSize};
use winit::event::{ElementState, WindowEvent};
use winit::event_loop::{ActiveEventLoop, EventLoop, EventLoopProxy, OwnedDisplayHandle};
use winit::keyboard::{Key, NamedKey};
use winit::platform::x11::EventLoopBuilderExtX11;
use winit::raw_window_handle::{HasWindowHandle, RawWindowHandle};
use winit::window::{Fullscreen, Window, WindowId, WindowLevel};

use crate::displays::{self, Display};
use crate::handoff::Reader;
use crate::scale::Scaler;
use crate::sink::WindowSettings;
use crate::{Result, WindowError, WindowLink};

/// How long a sink's `start` waits for the window thread to open its window.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Draw times kept per window (for benchmarks); later ones are not recorded.
const TIMES_KEPT: usize = 1 << 16;

/// What one window's thread did: frames drawn, and how long drawing and presenting took.
#[derive(Debug)]
pub struct WindowStats {
    /// Frames taken from the hand-off and drawn.
    pub drawn: AtomicU64,
    /// Redraws of the last picture (expose, resize).
    pub redrawn: AtomicU64,
    /// Commands posted by keys and close requests.
    pub commands: AtomicU64,
    times: Mutex<Times>,
}

#[derive(Debug)]
struct Times {
    /// Taking the frame (copy) and scaling it into the window's buffer, ns per frame.
    draw: Vec<u64>,
    /// Presenting the buffer, ns per frame.
    present: Vec<u64>,
}

impl WindowStats {
    fn new() -> Self {
        WindowStats {
            drawn: AtomicU64::new(0),
            redrawn: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            times: Mutex::new(Times {
                draw: Vec::with_capacity(TIMES_KEPT),
                present: Vec::with_capacity(TIMES_KEPT),
            }),
        }
    }

    /// Per drawn frame (the first 65,536): (copy + scale ns, present ns).
    pub fn times_ns(&self) -> (Vec<u64>, Vec<u64>) {
        let t = self.times.lock().unwrap_or_else(|p| p.into_inner());
        (t.draw.clone(), t.present.clone())
    }

    fn record(&self, draw: Duration, present: Duration) {
        let mut t = self.times.lock().unwrap_or_else(|p| p.into_inner());
        if t.draw.len() < TIMES_KEPT {
            t.draw.push(draw.as_nanos() as u64);
            t.present.push(present.as_nanos() as u64);
        }
    }
}

/// What [`open`] gives the sink.
#[derive(Debug)]
pub struct Opened {
    /// The window's number, for [`close`].
    pub id: u64,
    /// The thread to `unpark` after each publish.
    pub waker: Thread,
    /// The window's counts.
    pub stats: Arc<WindowStats>,
}

struct OpenRequest {
    id: u64,
    settings: WindowSettings,
    frame: (u32, u32),
    reader: Reader,
    textures: Option<Textures>,
    link: Option<WindowLink>,
    stats: Arc<WindowStats>,
    reply: SyncSender<std::result::Result<(), String>>,
}

/// The queue GPU frames come through (the newest one; an unread one is replaced).
pub type Textures = Arc<ArrayQueue<(FrameCtx, TextureFrame)>>;

enum UserEvent {
    Open(Box<OpenRequest>),
    Close(u64),
    Frames,
}

struct Service {
    proxy: Mutex<EventLoopProxy<UserEvent>>,
    waker: Thread,
    next_id: AtomicU64,
}

static SERVICE: OnceLock<std::result::Result<Service, String>> = OnceLock::new();

fn service() -> Result<&'static Service> {
    displays::display_name()?;
    SERVICE
        .get_or_init(start)
        .as_ref()
        .map_err(|e| WindowError::Window(e.clone()))
}

fn start() -> std::result::Result<Service, String> {
    let (tx, rx) = sync_channel(1);
    let pending = Arc::new(AtomicBool::new(false));
    let app_pending = Arc::clone(&pending);
    std::thread::Builder::new()
        .name("fp-window".into())
        .spawn(move || {
            let built = EventLoop::<UserEvent>::with_user_event()
                .with_x11()
                .with_any_thread(true)
                .build();
            let event_loop = match built {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(Err(format!("cannot start the window event loop: {e}")));
                    return;
                }
            };
            let _ = tx.send(Ok(event_loop.create_proxy()));
            let mut app = App {
                windows: Vec::new(),
                context: None,
                pending: app_pending,
            };
            if let Err(e) = event_loop.run_app(&mut app) {
                say(&format!("window event loop ended: {e}"));
            }
        })
        .map_err(|e| format!("cannot start the window thread: {e}"))?;
    let proxy = rx
        .recv_timeout(OPEN_TIMEOUT)
        .map_err(|_| "the window thread did not start".to_string())??;
    let wake_proxy = proxy.clone();
    let waker = std::thread::Builder::new()
        .name("fp-window-wake".into())
        .spawn(move || loop {
            std::thread::park();
            if !pending.swap(true, Ordering::AcqRel)
                && wake_proxy.send_event(UserEvent::Frames).is_err()
            {
                return;
            }
        })
        .map_err(|e| format!("cannot start the window waker thread: {e}"))?;
    Ok(Service {
        proxy: Mutex::new(proxy),
        waker: waker.thread().clone(),
        next_id: AtomicU64::new(1),
    })
}

/// Opens a window for a sink whose frames are `frame` (width, height), fed through `reader`,
/// or as textures through `textures` (the window then draws with OpenGL). Waits (at most
/// 10 s) until the window exists, so that an error names the sink at start.
pub fn open(
    settings: WindowSettings,
    frame: (u32, u32),
    reader: Reader,
    textures: Option<Textures>,
    link: Option<WindowLink>,
) -> Result<Opened> {
    let svc = service()?;
    let id = svc.next_id.fetch_add(1, Ordering::Relaxed);
    let stats = Arc::new(WindowStats::new());
    let (reply, answer) = sync_channel(1);
    let request = OpenRequest {
        id,
        settings,
        frame,
        reader,
        textures,
        link,
        stats: Arc::clone(&stats),
        reply,
    };
    svc.proxy
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send_event(UserEvent::Open(Box::new(request)))
        .map_err(|_| WindowError::Window("the window thread has ended".into()))?;
    match answer.recv_timeout(OPEN_TIMEOUT) {
        Ok(Ok(())) => Ok(Opened {
            id,
            waker: svc.waker.clone(),
            stats,
        }),
        Ok(Err(e)) => Err(WindowError::Window(e)),
        Err(_) => Err(WindowError::Window(
            "the window thread did not open the window within 10 s".into(),
        )),
    }
}

/// Closes window `id` (its sink finished). Does not wait.
pub fn close(id: u64) {
    if let Some(Ok(svc)) = SERVICE.get() {
        let _ = svc
            .proxy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send_event(UserEvent::Close(id));
    }
}

/// One line on stderr, naming the element.
pub(crate) fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "\rframepipe: windowsink: {line}");
}

struct App {
    windows: Vec<Win>,
    context: Option<softbuffer::Context<OwnedDisplayHandle>>,
    pending: Arc<AtomicBool>,
}

struct Win {
    id: u64,
    window: Arc<Window>,
    /// CPU frames' surface, made when the first one is drawn.
    surface: Option<softbuffer::Surface<OwnedDisplayHandle, Arc<Window>>>,
    /// GPU frames' drawing, when the window takes textures.
    gpu: Option<GpuView>,
    reader: Reader,
    scaler: Scaler,
    frame: (u32, u32),
    display: Display,
    /// The window's place when not full screen: (x, y, width, height).
    windowed: (i32, i32, u32, u32),
    fullscreen: bool,
    link: Option<WindowLink>,
    /// Space's own idea of the pause, when the run's is not known.
    paused: bool,
    /// `stop` was posted for a close request (posted once).
    stopping: bool,
    stats: Arc<WindowStats>,
}

/// A window's OpenGL side: its presenter (which keeps its own copy of the picture shown), and
/// the queue textures come through.
struct GpuView {
    presenter: Presenter,
    queue: Textures,
    /// A picture was taken (else redraws show black, or the CPU path's picture).
    shown: bool,
}

/// The X window id of `window` (winit on X11 gives an Xlib or an XCB handle).
fn x_window(window: &Window) -> std::result::Result<u64, String> {
    let handle = window
        .window_handle()
        .map_err(|e| format!("no window handle: {e}"))?;
    match handle.as_raw() {
        RawWindowHandle::Xlib(h) => Ok(h.window),
        RawWindowHandle::Xcb(h) => Ok(u64::from(h.window.get())),
        _ => Err("not an X11 window".into()),
    }
}

/// The window's size when not full screen: as asked, or the frame's shrunk to 90% of the
/// display; centred on the display.
fn windowed_place(s: &WindowSettings, frame: (u32, u32), d: &Display) -> (i32, i32, u32, u32) {
    let (fw, fh) = (frame.0.max(1), frame.1.max(1));
    let (w, h) = match (s.width, s.height) {
        (0, 0) => {
            let (mw, mh) = ((d.width * 9 / 10).max(1), (d.height * 9 / 10).max(1));
            if fw <= mw && fh <= mh {
                (fw, fh)
            } else {
                let f = crate::scale::fit(fw, fh, mw, mh);
                (f.w, f.h)
            }
        }
        (w, 0) => (
            w,
            ((u64::from(fh) * u64::from(w)) / u64::from(fw)).max(1) as u32,
        ),
        (0, h) => (
            ((u64::from(fw) * u64::from(h)) / u64::from(fh)).max(1) as u32,
            h,
        ),
        (w, h) => (w, h),
    };
    let x = d.x + (i64::from(d.width) - i64::from(w)).max(0) as i32 / 2;
    let y = d.y + (i64::from(d.height) - i64::from(h)).max(0) as i32 / 2;
    (x, y, w, h)
}

impl App {
    fn open(&mut self, event_loop: &ActiveEventLoop, req: OpenRequest) {
        let result = self.try_open(event_loop, req);
        if let Err((reply, e)) = result {
            let _ = reply.send(Err(e));
        }
    }

    fn try_open(
        &mut self,
        event_loop: &ActiveEventLoop,
        req: OpenRequest,
    ) -> std::result::Result<(), (SyncSender<std::result::Result<(), String>>, String)> {
        let OpenRequest {
            id,
            settings,
            frame,
            reader,
            textures,
            link,
            stats,
            reply,
        } = req;
        let list = match displays::displays() {
            Ok(l) => l,
            Err(e) => return Err((reply, e.to_string())),
        };
        let display = match displays::choose(&list, &settings.display) {
            Ok(d) => d.clone(),
            Err(e) => return Err((reply, e.to_string())),
        };
        let windowed = windowed_place(&settings, frame, &display);
        let (x, y, w, h) = if settings.fullscreen {
            (display.x, display.y, display.width, display.height)
        } else {
            windowed
        };
        let attrs = Window::default_attributes()
            .with_title(settings.title.clone())
            .with_inner_size(PhysicalSize::new(w.max(1), h.max(1)))
            .with_position(PhysicalPosition::new(x, y))
            .with_decorations(!settings.fullscreen)
            .with_window_level(if settings.fullscreen {
                WindowLevel::AlwaysOnTop
            } else {
                WindowLevel::Normal
            });
        let window = match event_loop.create_window(attrs) {
            Ok(w) => Arc::new(w),
            Err(e) => return Err((reply, format!("cannot open a window: {e}"))),
        };
        if self.context.is_none() {
            match softbuffer::Context::new(event_loop.owned_display_handle()) {
                Ok(c) => self.context = Some(c),
                Err(e) => return Err((reply, format!("cannot draw on this display: {e}"))),
            }
        }
        let gpu = match textures {
            None => None,
            Some(queue) => {
                let made = x_window(&window).and_then(|xid| {
                    Presenter::new(xid, settings.vsync)
                        .map_err(|e| format!("cannot draw GPU frames in the window: {e}"))
                });
                match made {
                    Ok(presenter) => Some(GpuView {
                        presenter,
                        queue,
                        shown: false,
                    }),
                    Err(e) => return Err((reply, e)),
                }
            }
        };
        let mut win = Win {
            id,
            window,
            surface: None,
            gpu,
            reader,
            scaler: Scaler::default(),
            frame,
            display,
            windowed,
            fullscreen: false,
            link,
            paused: false,
            stopping: false,
            stats,
        };
        if settings.fullscreen {
            win.set_fullscreen(event_loop, true);
        }
        win.window.request_redraw();
        self.windows.push(win);
        let _ = reply.send(Ok(()));
        Ok(())
    }
}

impl Win {
    /// Draws the newest frame (`fresh`) or the last one again, and presents it. Returns whether
    /// anything was presented.
    fn draw(
        &mut self,
        fresh: bool,
        context: Option<&softbuffer::Context<OwnedDisplayHandle>>,
    ) -> bool {
        if let Some(g) = &mut self.gpu {
            let size = self.window.inner_size();
            let (w, h) = (size.width, size.height);
            if w == 0 || h == 0 {
                return false;
            }
            let (fw, fh) = self.frame;
            let f = crate::scale::fit(fw, fh, w, h);
            let rect = (f.x0, f.y0, f.w, f.h);
            if fresh {
                let t0 = Instant::now();
                let Some((_, frame)) = g.queue.pop() else {
                    return self.draw_cpu(true, context);
                };
                // Copied into the window's own texture; the frame goes back to its pool here.
                let taken = g.presenter.take(frame.image());
                drop(frame);
                let t1 = Instant::now();
                let presented = taken.and_then(|()| g.presenter.present((w, h), rect));
                g.shown = true;
                self.stats.drawn.fetch_add(1, Ordering::Relaxed);
                self.stats.record(t1 - t0, t1.elapsed());
                if let Err(e) = &presented {
                    say(&format!("{e}"));
                }
                return presented.is_ok();
            }
            if g.shown || self.surface.is_none() {
                // The picture taken last, or black before the first.
                self.stats.redrawn.fetch_add(1, Ordering::Relaxed);
                return g.presenter.present((w, h), rect).is_ok();
            }
        }
        self.draw_cpu(fresh, context)
    }

    /// [`draw`](Self::draw) for CPU frames (softbuffer).
    fn draw_cpu(
        &mut self,
        fresh: bool,
        context: Option<&softbuffer::Context<OwnedDisplayHandle>>,
    ) -> bool {
        let size = self.window.inner_size();
        let (Some(w), Some(h)) = (NonZeroU32::new(size.width), NonZeroU32::new(size.height)) else {
            return false;
        };
        if self.gpu.is_some() && fresh && !self.reader.fresh() {
            // A window drawing textures, and no CPU frame either.
            return false;
        }
        if self.surface.is_none() {
            let Some(context) = context else {
                return false;
            };
            match softbuffer::Surface::new(context, Arc::clone(&self.window)) {
                Ok(s) => self.surface = Some(s),
                Err(e) => {
                    say(&format!("cannot draw in the window: {e}"));
                    return false;
                }
            }
        }
        let Some(surface) = self.surface.as_mut() else {
            return false;
        };
        if surface.resize(w, h).is_err() {
            return false;
        }
        let (fw, fh) = self.frame;
        if !self.scaler.is_for(fw, fh, w.get(), h.get()) {
            self.scaler = Scaler::new(fw, fh, w.get(), h.get());
        }
        let Ok(mut buffer) = surface.buffer_mut() else {
            return false;
        };
        let t0 = Instant::now();
        let scaler = &self.scaler;
        let drawn = if fresh {
            self.reader.take(|_, px| scaler.draw(px, &mut buffer))
        } else {
            let again = self.reader.last(|_, px| scaler.draw(px, &mut buffer));
            if !again {
                buffer.fill(0);
            }
            true
        };
        if !drawn {
            return false;
        }
        let t1 = Instant::now();
        let presented = buffer.present().is_ok();
        if fresh {
            self.stats.drawn.fetch_add(1, Ordering::Relaxed);
            self.stats.record(t1 - t0, t1.elapsed());
        } else {
            self.stats.redrawn.fetch_add(1, Ordering::Relaxed);
        }
        presented
    }

    fn post(&mut self, cmd: Command) {
        let Some(link) = &self.link else {
            return;
        };
        match link.commands.post(cmd) {
            Ok(_) => {
                self.stats.commands.fetch_add(1, Ordering::Relaxed);
            }
            Err(full) => say(&format!("{full}")),
        }
    }

    fn set_fullscreen(&mut self, event_loop: &ActiveEventLoop, on: bool) {
        if on == self.fullscreen {
            return;
        }
        self.fullscreen = on;
        let d = &self.display;
        let w = &self.window;
        if on {
            w.set_decorations(false);
            w.set_window_level(WindowLevel::AlwaysOnTop);
            w.set_outer_position(PhysicalPosition::new(d.x, d.y));
            let _ = w.request_inner_size(PhysicalSize::new(d.width, d.height));
            w.set_cursor_visible(false);
            // Where the display is a whole monitor winit knows, also tell the window manager
            // (it then hides its panels); a monitor defined inside an output has no handle.
            let same = event_loop.available_monitors().find(|m| {
                let (p, s) = (m.position(), m.size());
                (p.x, p.y, s.width, s.height) == (d.x, d.y, d.width, d.height)
            });
            if let Some(m) = same {
                w.set_fullscreen(Some(Fullscreen::Borderless(Some(m))));
            }
        } else {
            let (x, y, ww, hh) = self.windowed;
            w.set_fullscreen(None);
            w.set_decorations(true);
            w.set_window_level(WindowLevel::Normal);
            w.set_outer_position(PhysicalPosition::new(x, y));
            let _ = w.request_inner_size(PhysicalSize::new(ww, hh));
            w.set_cursor_visible(true);
        }
        w.request_redraw();
    }
}

impl ApplicationHandler<UserEvent> for App {
    fn resumed(&mut self, _event_loop: &ActiveEventLoop) {}

    fn user_event(&mut self, event_loop: &ActiveEventLoop, event: UserEvent) {
        match event {
            UserEvent::Open(req) => self.open(event_loop, *req),
            UserEvent::Close(id) => self.windows.retain(|w| w.id != id),
            UserEvent::Frames => {
                // Cleared before looking, so a frame published meanwhile wakes us again.
                self.pending.swap(false, Ordering::AcqRel);
                for w in &mut self.windows {
                    w.draw(true, self.context.as_ref());
                }
            }
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, id: WindowId, event: WindowEvent) {
        let context = self.context.as_ref();
        let Some(win) = self.windows.iter_mut().find(|w| w.window.id() == id) else {
            return;
        };
        match event {
            WindowEvent::RedrawRequested => {
                win.draw(false, context);
            }
            WindowEvent::Resized(_) => win.window.request_redraw(),
            WindowEvent::CloseRequested | WindowEvent::Destroyed => {
                if !win.stopping {
                    win.stopping = true;
                    win.post(Command::Stop);
                }
                if win.link.is_none() {
                    self.windows.retain(|w| w.window.id() != id);
                }
            }
            WindowEvent::KeyboardInput { event, .. } if event.state == ElementState::Pressed => {
                match event.logical_key.as_ref() {
                    Key::Named(NamedKey::Space) if !event.repeat => {
                        let paused = win
                            .link
                            .as_ref()
                            .and_then(|l| l.paused.paused())
                            .unwrap_or(win.paused);
                        win.paused = !paused;
                        win.post(if paused {
                            Command::Resume
                        } else {
                            Command::Pause
                        });
                    }
                    Key::Named(NamedKey::ArrowRight) => win.post(Command::Step(1)),
                    Key::Named(NamedKey::Escape) => win.set_fullscreen(event_loop, false),
                    Key::Character("f") | Key::Character("F") if !event.repeat => {
                        let on = !win.fullscreen;
                        win.set_fullscreen(event_loop, on);
                    }
                    Key::Character("q") | Key::Character("Q") if !event.repeat => {
                        win.post(Command::Stop)
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn display() -> Display {
        Display {
            index: 1,
            name: "right".into(),
            x: 1000,
            y: 0,
            width: 800,
            height: 600,
            primary: false,
        }
    }

    fn settings(width: u32, height: u32) -> WindowSettings {
        WindowSettings {
            title: "t".into(),
            display: String::new(),
            fullscreen: false,
            width,
            height,
            vsync: false,
        }
    }

    #[test]
    fn windows_are_centred_on_their_display_and_fit_it() {
        // Fits: the frame's size.
        assert_eq!(
            windowed_place(&settings(0, 0), (320, 240), &display()),
            (1240, 180, 320, 240)
        );
        // Too big: shrunk to 90% of the display, aspect kept.
        assert_eq!(
            windowed_place(&settings(0, 0), (1920, 1080), &display()),
            (1040, 97, 720, 405)
        );
        // One side given: the other from the frame's aspect.
        assert_eq!(
            windowed_place(&settings(400, 0), (1920, 1080), &display()),
            (1200, 187, 400, 225)
        );
        assert_eq!(
            windowed_place(&settings(300, 100), (1920, 1080), &display()),
            (1250, 250, 300, 100)
        );
    }
}
