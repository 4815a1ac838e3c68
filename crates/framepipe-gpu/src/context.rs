//! The GPU context: headless EGL, an OpenGL 3.3 core (or OpenGL ES 3.0) context current on the
//! thread that opened it, and [`glow`] over it.
//!
//! [`Gpu::open`] loads `libEGL.so.1` at run time (so a framepipe binary starts on a machine
//! without GL and says what to install) and tries, in order:
//! 1. `EGL_MESA_platform_surfaceless`: Mesa without a window system (llvmpipe, or a GPU's
//!    render node);
//! 2. `EGL_EXT_platform_device`: each EGL device (NVIDIA's headless driver, Mesa's devices);
//! 3. the default display (whatever the driver picks: X11 or Wayland when they are there).
//!
//! On each display it asks for desktop OpenGL 3.3 core, then OpenGL ES 3.0, with no surface
//! at all (`EGL_KHR_surfaceless_context`: rendering goes to framebuffer objects). The first that
//! works is current on this thread from then on; [`Gpu`] is `!Send`, so every GL call happens
//! on that thread. Environment overrides: `FRAMEPIPE_EGL_LIB` (the libEGL to load),
//! `FRAMEPIPE_EGL_PLATFORM` (`surfaceless`, `device` or `default`: try only that one),
//! `FRAMEPIPE_GL_API` (`gl` or `gles`: ask only for that API).
//!
//! GL objects whose owners are dropped on other threads (a [`TexturePool`](crate::TexturePool)
//! dropped by the builder, say) cannot be deleted there: they are queued on the context's
//! [`Garbage`] and deleted by [`Gpu::collect`], which the GPU thread calls between frames.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use framepipe_core::gpu::GpuImage;
use glow::HasContext;
use khronos_egl as egl;

use crate::error::{gl_error_name, GpuError, Result};

/// The EGL entry points, loaded at run time. 1.4 is required; 1.5's platform displays are
/// used when the library has them (every libglvnd and NVIDIA libEGL does).
pub(crate) type Egl = egl::DynamicInstance<egl::EGL1_4>;

/// `EGL_PLATFORM_SURFACELESS_MESA` (EGL_MESA_platform_surfaceless).
const PLATFORM_SURFACELESS_MESA: egl::Enum = 0x31DD;
/// `EGL_PLATFORM_DEVICE_EXT` (EGL_EXT_platform_device).
const PLATFORM_DEVICE_EXT: egl::Enum = 0x313F;
/// The most EGL devices tried on the device platform.
const MAX_DEVICES: usize = 16;

/// `eglQueryDevicesEXT` (EGL_EXT_device_enumeration).
type QueryDevicesExt = unsafe extern "system" fn(
    max_devices: egl::Int,
    devices: *mut *mut c_void,
    num: *mut egl::Int,
) -> egl::Boolean;

/// Which GL API a context speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Desktop OpenGL, 3.3 core profile or later: GLSL `#version 330` (what ISF and
    /// gl-transitions are assembled for).
    Gl,
    /// OpenGL ES 3.0 or later: GLSL `#version 300 es`. A shader assembled for `330` needs its
    /// version line changed and default precisions (`precision highp float;`) added; float
    /// render targets need `EXT_color_buffer_float`, and filtering 32-bit float textures needs
    /// `OES_texture_float_linear`.
    Gles,
}

impl Api {
    /// "OpenGL" or "OpenGL ES".
    pub fn name(self) -> &'static str {
        match self {
            Api::Gl => "OpenGL",
            Api::Gles => "OpenGL ES",
        }
    }
}

/// Which EGL platform the display came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// `EGL_MESA_platform_surfaceless`.
    Surfaceless,
    /// `EGL_EXT_platform_device`.
    Device,
    /// `eglGetDisplay(EGL_DEFAULT_DISPLAY)`.
    Default,
    /// `EGL_KHR_platform_x11`: the X server the windows are on, so that windows share the
    /// context's textures ([`crate::present`]).
    X11,
}

impl Platform {
    /// The name `FRAMEPIPE_EGL_PLATFORM` takes.
    pub fn name(self) -> &'static str {
        match self {
            Platform::Surfaceless => "surfaceless",
            Platform::Device => "device",
            Platform::Default => "default",
            Platform::X11 => "x11",
        }
    }
}

/// What the opened context is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    /// `GL_VENDOR`.
    pub vendor: String,
    /// `GL_RENDERER` ("llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA H100 ...").
    pub renderer: String,
    /// `GL_VERSION`.
    pub version: String,
    /// `GL_SHADING_LANGUAGE_VERSION`.
    pub glsl: String,
    /// Desktop GL or GLES.
    pub api: Api,
    /// The context's major and minor version.
    pub major: u32,
    /// See `major`.
    pub minor: u32,
    /// The EGL platform the display came from.
    pub platform: Platform,
    /// A software rasterizer (llvmpipe, softpipe, swrast): correct, but slow at large sizes.
    pub software: bool,
}

impl fmt::Display for GpuInfo {
    /// "llvmpipe (LLVM 15.0.6, 256 bits) (OpenGL 4.5, software renderer)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} {}.{}{})",
            self.renderer,
            self.api.name(),
            self.major,
            self.minor,
            if self.software {
                ", software renderer"
            } else {
                ""
            }
        )
    }
}

/// How [`Gpu::open_with`] looks for a context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// The EGL library to load (default `libEGL.so.1`, the libglvnd loader).
    pub library: Option<String>,
    /// Only this platform (default: surfaceless, device, default display, in that order).
    pub platform: Option<Platform>,
    /// Only this API (default: desktop GL 3.3 core, then GLES 3.0).
    pub api: Option<Api>,
}

impl OpenOptions {
    /// From `FRAMEPIPE_EGL_LIB`, `FRAMEPIPE_EGL_PLATFORM` and `FRAMEPIPE_GL_API`.
    pub fn from_env() -> Result<OpenOptions> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let platform = match var("FRAMEPIPE_EGL_PLATFORM").as_deref() {
            None => None,
            Some("surfaceless") => Some(Platform::Surfaceless),
            Some("device") => Some(Platform::Device),
            Some("default") => Some(Platform::Default),
            Some(other) => {
                return Err(GpuError::Mismatch(format!(
                    "FRAMEPIPE_EGL_PLATFORM={other:?}: expected one of surfaceless, device, default"
                )))
            }
        };
        let api = match var("FRAMEPIPE_GL_API").as_deref() {
            None => None,
            Some("gl") => Some(Api::Gl),
            Some("gles") => Some(Api::Gles),
            Some(other) => {
                return Err(GpuError::Mismatch(format!(
                    "FRAMEPIPE_GL_API={other:?}: expected gl or gles"
                )))
            }
        };
        Ok(OpenOptions {
            library: var("FRAMEPIPE_EGL_LIB"),
            platform,
            api,
        })
    }
}

/// A GL object to delete on the GPU thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlObject {
    /// A texture.
    Texture(glow::Texture),
    /// A buffer object.
    Buffer(glow::Buffer),
    /// A framebuffer object.
    Framebuffer(glow::Framebuffer),
    /// A renderbuffer.
    Renderbuffer(glow::Renderbuffer),
    /// A vertex array object.
    VertexArray(glow::VertexArray),
    /// A linked program.
    Program(glow::Program),
    /// A shader object.
    Shader(glow::Shader),
}

/// The queue of GL objects to delete that a context's owners push from any thread, and
/// [`Gpu::collect`] empties on the GPU thread. Cheap to clone (an `Arc`); pushing takes a
/// mutex and may allocate, so it belongs where objects are dropped (a pool, a node going
/// away), not on the frame path. Collecting when nothing is queued is one atomic load.
#[derive(Debug, Clone, Default)]
pub struct Garbage {
    inner: Arc<GarbageInner>,
}

#[derive(Debug, Default)]
struct GarbageInner {
    /// Objects queued (read without the lock by `collect`).
    pending: AtomicUsize,
    objects: Mutex<Vec<GlObject>>,
}

impl Garbage {
    /// Queues `object` for deletion by the context it belongs to.
    pub fn push(&self, object: GlObject) {
        let mut objects = self
            .inner
            .objects
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        objects.push(object);
        self.inner.pending.store(objects.len(), Ordering::Release);
    }

    /// Objects queued and not yet deleted.
    pub fn pending(&self) -> usize {
        self.inner.pending.load(Ordering::Acquire)
    }

    fn take(&self) -> Vec<GlObject> {
        let mut objects = self
            .inner
            .objects
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.inner.pending.store(0, Ordering::Release);
        std::mem::take(&mut *objects)
    }
}

/// Numbers contexts, so that a pool used with one is never used with another.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Contexts alive that are not on the window display: their textures cannot be shared with a
/// window ([`crate::present::window_display`] refuses while there are any and it is not open).
pub(crate) static HEADLESS_ALIVE: AtomicUsize = AtomicUsize::new(0);

/// The engine's GPU context: current on the thread that opened it, which makes every GL call.
///
/// `!Send` and `!Sync`: it cannot leave that thread. Textures, pools and frames made with it
/// may ([`GpuFrame`](crate::GpuFrame) is `Send`), and go back through [`Garbage`].
pub struct Gpu {
    gl: glow::Context,
    info: GpuInfo,
    empty_vao: glow::VertexArray,
    /// A framebuffer for clears and readbacks of one texture at a time.
    scratch_fbo: glow::Framebuffer,
    garbage: Garbage,
    id: u64,
    tex_storage: bool,
    egl: Arc<Egl>,
    display: egl::Display,
    context: egl::Context,
    /// The config the context was made with (contexts sharing its objects use it too).
    config: egl::Config,
    /// `*const ()` is neither Send nor Sync: the context is current on this thread only.
    _thread_bound: PhantomData<*const ()>,
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("id", &self.id)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Gpu {
    /// Opens a headless context as the environment says ([`OpenOptions::from_env`]) and makes
    /// it current on this thread. The error names the Debian packages to install when no EGL
    /// library, display or context can be had.
    pub fn open() -> Result<Gpu> {
        Gpu::open_with(&OpenOptions::from_env()?)
    }

    /// Opens a headless context as `options` say (see the module for the order tried).
    pub fn open_with(options: &OpenOptions) -> Result<Gpu> {
        if options.platform.is_none() {
            if let Some(wd) = crate::present::opened() {
                return Gpu::open_on_window_display(wd);
            }
        }
        let library = options.library.as_deref().unwrap_or("libEGL.so.1");
        // SAFETY: loading a shared library runs its initializers; the file is the system's EGL
        // loader or the one the user named, whose exports khronos-egl's signatures describe.
        // The library is opened RTLD_NODELETE, so its code stays mapped for the process's life.
        let egl = unsafe { Egl::load_required_from_filename(library) }.map_err(|e| {
            GpuError::LoadEgl {
                library: library.to_owned(),
                reason: e.to_string(),
            }
        })?;
        let client_extensions = egl
            .query_string(None, egl::EXTENSIONS)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let platforms: &[Platform] = match &options.platform {
            Some(p) => std::slice::from_ref(p),
            None => &[Platform::Surfaceless, Platform::Device, Platform::Default],
        };
        let apis: &[Api] = match &options.api {
            Some(a) => std::slice::from_ref(a),
            None => &[Api::Gl, Api::Gles],
        };
        let mut tried = Vec::new();
        let mut displays = 0;
        for &platform in platforms {
            let candidates = match platform_displays(&egl, platform, &client_extensions) {
                Ok(d) => d,
                Err(why) => {
                    tried.push(format!("{}: {why}", platform.name()));
                    continue;
                }
            };
            for display in candidates {
                displays += 1;
                for &api in apis {
                    match make_context(&egl, display, api) {
                        Ok((context, config)) => {
                            return Gpu::with_context(
                                Arc::new(egl),
                                display,
                                context,
                                config,
                                platform,
                                api,
                            )
                        }
                        Err(why) => {
                            tried.push(format!("{} {}: {why}", platform.name(), api.name()))
                        }
                    }
                }
            }
        }
        let tried = tried.join("; ");
        Err(if displays == 0 {
            GpuError::NoDisplay { tried }
        } else {
            GpuError::NoContext { tried }
        })
    }

    /// A context on the window display ([`crate::present`]), in its share group, current on
    /// this thread without a surface.
    fn open_on_window_display(wd: &crate::present::WindowDisplay) -> Result<Gpu> {
        let what = |e: egl::Error| GpuError::NoContext {
            tried: format!("x11 {}: {e}", wd.api.name()),
        };
        wd.egl.bind_api(egl_api(wd.api)).map_err(what)?;
        let context = wd
            .egl
            .create_context(
                wd.display,
                wd.config,
                Some(wd.root),
                context_attribs(wd.api),
            )
            .map_err(what)?;
        if let Err(e) = wd.egl.make_current(wd.display, None, None, Some(context)) {
            let _ = wd.egl.destroy_context(wd.display, context);
            return Err(what(e));
        }
        Gpu::with_context(
            Arc::clone(&wd.egl),
            wd.display,
            context,
            wd.config,
            Platform::X11,
            wd.api,
        )
    }

    /// The context is current; load GL, check its version, make the shared objects.
    fn with_context(
        egl: Arc<Egl>,
        display: egl::Display,
        context: egl::Context,
        config: egl::Config,
        platform: Platform,
        api: Api,
    ) -> Result<Gpu> {
        // SAFETY: the context is current on this thread, so eglGetProcAddress gives its entry
        // points (EGL 1.5 / EGL_KHR_get_all_proc_addresses cover core functions too); a name
        // it does not know gives null, which glow records as not loaded.
        let gl = unsafe {
            glow::Context::from_loader_function(|name| {
                egl.get_proc_address(name)
                    .map_or(std::ptr::null(), |f| f as *const c_void)
            })
        };
        let release = |why: String| {
            let _ = egl.make_current(display, None, None, None);
            let _ = egl.destroy_context(display, context);
            GpuError::NoContext { tried: why }
        };
        let version = gl.version();
        let (major, minor) = (version.major, version.minor);
        let enough = match api {
            Api::Gl => (major, minor) >= (3, 3),
            Api::Gles => major >= 3,
        };
        if !enough {
            return Err(release(format!(
                "{} {major}.{minor} is older than {} needs",
                api.name(),
                if api == Api::Gl { "3.3" } else { "3.0" }
            )));
        }
        let tex_storage = match api {
            Api::Gles => true,
            Api::Gl => {
                (major, minor) >= (4, 2)
                    || gl.supported_extensions().contains("GL_ARB_texture_storage")
            }
        };
        // SAFETY: the context is current on this thread; these queries take constant enums.
        let (vendor, renderer, version, glsl) = unsafe {
            (
                gl.get_parameter_string(glow::VENDOR),
                gl.get_parameter_string(glow::RENDERER),
                gl.get_parameter_string(glow::VERSION),
                gl.get_parameter_string(glow::SHADING_LANGUAGE_VERSION),
            )
        };
        let lower = renderer.to_ascii_lowercase();
        let software = ["llvmpipe", "softpipe", "swrast", "software rasterizer"]
            .iter()
            .any(|s| lower.contains(s));
        // SAFETY: the context is current on this thread; creating objects has no preconditions.
        let objects = unsafe { (gl.create_vertex_array(), gl.create_framebuffer()) };
        let (empty_vao, scratch_fbo) = match objects {
            (Ok(v), Ok(f)) => (v, f),
            (v, f) => {
                let why = v.err().or(f.err()).unwrap_or_default();
                return Err(release(format!("cannot create GL objects: {why}")));
            }
        };
        if platform != Platform::X11 {
            HEADLESS_ALIVE.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Gpu {
            gl,
            info: GpuInfo {
                vendor,
                renderer,
                version,
                glsl,
                api,
                major,
                minor,
                platform,
                software,
            },
            empty_vao,
            scratch_fbo,
            garbage: Garbage::default(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            tex_storage,
            egl,
            display,
            context,
            config,
            _thread_bound: PhantomData,
        })
    }

    /// The GL context (current on this thread).
    pub fn gl(&self) -> &glow::Context {
        &self.gl
    }

    /// What the context is.
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// A vertex array object with no attributes, for drawing full-screen triangles from
    /// `gl_VertexID` (core profiles draw nothing without a VAO bound).
    pub fn empty_vao(&self) -> glow::VertexArray {
        self.empty_vao
    }

    /// The queue that owners dropped on other threads push their GL objects to.
    pub fn garbage(&self) -> &Garbage {
        &self.garbage
    }

    /// Deletes the GL objects queued on [`garbage`](Self::garbage). Call it on the GPU thread
    /// between frames: with nothing queued it is one atomic load.
    pub fn collect(&self) {
        if self.garbage.pending() == 0 {
            return;
        }
        for object in self.garbage.take() {
            // SAFETY: the context is current on this thread, and every queued name was made
            // by this context (pools and owners are tied to one context by `id`) and is no
            // longer used by anyone: its owner queued it when it was dropped.
            unsafe {
                match object {
                    GlObject::Texture(t) => self.gl.delete_texture(t),
                    GlObject::Buffer(b) => self.gl.delete_buffer(b),
                    GlObject::Framebuffer(f) => self.gl.delete_framebuffer(f),
                    GlObject::Renderbuffer(r) => self.gl.delete_renderbuffer(r),
                    GlObject::VertexArray(v) => self.gl.delete_vertex_array(v),
                    GlObject::Program(p) => self.gl.delete_program(p),
                    GlObject::Shader(s) => self.gl.delete_shader(s),
                }
            }
        }
    }

    /// This context's number (unique in the process).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// A second context in this context's share group (textures, buffers and fences are
    /// common to both; framebuffers and vertex arrays are not), current nowhere yet: the
    /// downloader's thread makes it current there ([`SharedContext::make_current`]).
    pub(crate) fn share(&self) -> Result<SharedContext> {
        let api = self.info.api;
        let what = |e: egl::Error| GpuError::NoContext {
            tried: format!("a context sharing the GPU context's objects: {e}"),
        };
        self.egl.bind_api(egl_api(api)).map_err(what)?;
        let context = self
            .egl
            .create_context(
                self.display,
                self.config,
                Some(self.context),
                context_attribs(api),
            )
            .map_err(what)?;
        Ok(SharedContext {
            egl: Arc::clone(&self.egl),
            display: self.display,
            context,
            api,
        })
    }

    /// Whether immutable texture storage (`glTexStorage2D`) is available.
    pub(crate) fn has_tex_storage(&self) -> bool {
        self.tex_storage
    }

    /// Fills `image` with one colour (components 0..=1).
    pub fn clear(&self, image: &GpuImage, rgba: [f32; 4]) -> Result<()> {
        self.bind_scratch(glow::DRAW_FRAMEBUFFER, image)?;
        // SAFETY: the context is current on this thread and the scratch framebuffer (this
        // context's) is complete with `image` attached; clearing needs nothing else bound.
        unsafe {
            self.gl.disable(glow::SCISSOR_TEST);
            self.gl.color_mask(true, true, true, true);
            self.gl.clear_color(rgba[0], rgba[1], rgba[2], rgba[3]);
            self.gl.clear(glow::COLOR_BUFFER_BIT);
            self.gl.bind_framebuffer(glow::DRAW_FRAMEBUFFER, None);
        }
        self.check("clear")
    }

    /// Attaches `image` to the scratch framebuffer and binds it to `target`; checks that it is
    /// complete. The caller unbinds.
    pub(crate) fn bind_scratch(&self, target: u32, image: &GpuImage) -> Result<()> {
        // SAFETY: the context is current on this thread; the framebuffer is this context's and
        // `image.texture` is a texture of this context (GpuImage's contract), level 0 exists.
        let status = unsafe {
            self.gl.bind_framebuffer(target, Some(self.scratch_fbo));
            self.gl.framebuffer_texture_2d(
                target,
                glow::COLOR_ATTACHMENT0,
                glow::TEXTURE_2D,
                Some(image.texture),
                0,
            );
            self.gl.check_framebuffer_status(target)
        };
        if status != glow::FRAMEBUFFER_COMPLETE {
            // SAFETY: as above; unbinding is always valid.
            unsafe { self.gl.bind_framebuffer(target, None) };
            return Err(GpuError::Gl {
                what: "framebuffer",
                detail: format!(
                    "a {}x{} {:?} texture is not renderable (status 0x{status:04x})",
                    image.width, image.height, image.format
                ),
            });
        }
        Ok(())
    }

    /// The first pending GL error, as an error naming `what`.
    pub fn check(&self, what: &'static str) -> Result<()> {
        // SAFETY: the context is current on this thread; glGetError has no preconditions.
        let code = unsafe { self.gl.get_error() };
        if code == glow::NO_ERROR {
            return Ok(());
        }
        // Drain the others, so that the next check reports its own.
        // SAFETY: as above.
        while unsafe { self.gl.get_error() } != glow::NO_ERROR {}
        Err(GpuError::Gl {
            what,
            detail: gl_error_name(code),
        })
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        if self.info.platform != Platform::X11 {
            HEADLESS_ALIVE.fetch_sub(1, Ordering::Relaxed);
        }
        self.collect();
        // SAFETY: the context is current on this thread (Gpu is !Send) and these are its
        // objects; nothing uses them after this.
        unsafe {
            self.gl.delete_vertex_array(self.empty_vao);
            self.gl.delete_framebuffer(self.scratch_fbo);
        }
        // The display is not terminated: EGL displays are per process and per platform, so
        // another Gpu of this process may be using the same one.
        let _ = self.egl.make_current(self.display, None, None, None);
        let _ = self.egl.destroy_context(self.display, self.context);
    }
}

/// A context sharing a [`Gpu`]'s objects ([`Gpu::share`]), to be made current on one other
/// thread. Destroyed on drop (on the thread it is current on, if any).
pub(crate) struct SharedContext {
    egl: Arc<Egl>,
    display: egl::Display,
    context: egl::Context,
    api: Api,
}

// EGL display and context handles are process-wide and valid on any thread; EGL itself
// checks that a context is current on at most one thread. This one is made current only by
// `make_current`, on the thread that owns the SharedContext then, and released by its drop on
// that same thread. The EGL instance is Send + Sync (khronos-egl).
// SAFETY: moving the handles to another thread is sound for the reasons above.
unsafe impl Send for SharedContext {}

impl SharedContext {
    /// Makes the context current on this thread (with no surface) and loads GL for it.
    pub(crate) fn make_current(&self) -> Result<glow::Context> {
        let what = |e: egl::Error| GpuError::NoContext {
            tried: format!("making the shared context current: {e}"),
        };
        self.egl.bind_api(egl_api(self.api)).map_err(what)?;
        self.egl
            .make_current(self.display, None, None, Some(self.context))
            .map_err(what)?;
        // SAFETY: the context is current on this thread, so eglGetProcAddress gives its entry
        // points; a name it does not know gives null, which glow records as not loaded.
        Ok(unsafe {
            glow::Context::from_loader_function(|name| {
                self.egl
                    .get_proc_address(name)
                    .map_or(std::ptr::null(), |f| f as *const c_void)
            })
        })
    }
}

impl Drop for SharedContext {
    fn drop(&mut self) {
        // Releasing is a no-op where the context is not current on this thread.
        if self.egl.get_current_context() == Some(self.context) {
            let _ = self.egl.make_current(self.display, None, None, None);
        }
        let _ = self.egl.destroy_context(self.display, self.context);
    }
}

/// The EGL API enum for `api`.
pub(crate) fn egl_api(api: Api) -> egl::Enum {
    match api {
        Api::Gl => egl::OPENGL_API,
        Api::Gles => egl::OPENGL_ES_API,
    }
}

/// `eglCreateContext`'s attributes for `api`: 3.3 core, or ES 3.0.
pub(crate) fn context_attribs(api: Api) -> &'static [egl::Int] {
    match api {
        Api::Gl => &[
            egl::CONTEXT_MAJOR_VERSION,
            3,
            egl::CONTEXT_MINOR_VERSION,
            3,
            egl::CONTEXT_OPENGL_PROFILE_MASK,
            egl::CONTEXT_OPENGL_CORE_PROFILE_BIT,
            egl::NONE,
        ],
        Api::Gles => &[
            egl::CONTEXT_MAJOR_VERSION,
            3,
            egl::CONTEXT_MINOR_VERSION,
            0,
            egl::NONE,
        ],
    }
}

/// The initialized displays of one platform that can run without a surface.
fn platform_displays(
    egl: &Egl,
    platform: Platform,
    client_ext: &str,
) -> Result<Vec<egl::Display>, String> {
    let has = |name: &str| client_ext.split_ascii_whitespace().any(|e| e == name);
    let mut raw = Vec::new();
    match platform {
        Platform::Surfaceless | Platform::Device => {
            let Some(egl15) = egl.upcast::<egl::EGL1_5>() else {
                return Err("the EGL library is older than 1.5 (no platform displays)".into());
            };
            if platform == Platform::Surfaceless {
                if !has("EGL_MESA_platform_surfaceless") {
                    return Err("no EGL_MESA_platform_surfaceless".into());
                }
                // SAFETY: the surfaceless platform takes EGL_DEFAULT_DISPLAY as its native
                // display; the attribute list is terminated.
                let d = unsafe {
                    egl15.get_platform_display(
                        PLATFORM_SURFACELESS_MESA,
                        egl::DEFAULT_DISPLAY,
                        &[egl::ATTRIB_NONE],
                    )
                };
                raw.push(d.map_err(|e| e.to_string())?);
            } else {
                if !has("EGL_EXT_platform_device") || !has("EGL_EXT_device_enumeration") {
                    return Err("no EGL_EXT_platform_device / EGL_EXT_device_enumeration".into());
                }
                let Some(query) = egl.get_proc_address("eglQueryDevicesEXT") else {
                    return Err("no eglQueryDevicesEXT".into());
                };
                // SAFETY: EGL_EXT_device_enumeration (advertised above) defines
                // eglQueryDevicesEXT with exactly this signature.
                let query: QueryDevicesExt = unsafe { std::mem::transmute(query) };
                let mut devices = [std::ptr::null_mut::<c_void>(); MAX_DEVICES];
                let mut count: egl::Int = 0;
                // SAFETY: `devices` holds MAX_DEVICES entries, the count we pass; `count` is
                // a valid place for the number written.
                let ok =
                    unsafe { query(MAX_DEVICES as egl::Int, devices.as_mut_ptr(), &mut count) };
                if ok != egl::TRUE || count <= 0 {
                    return Err("no EGL device".into());
                }
                for &device in &devices[..(count as usize).min(MAX_DEVICES)] {
                    // SAFETY: `device` is an EGLDeviceEXT the driver just listed, which the
                    // device platform takes as its native display; the list is terminated.
                    let d = unsafe {
                        egl15.get_platform_display(PLATFORM_DEVICE_EXT, device, &[egl::ATTRIB_NONE])
                    };
                    if let Ok(d) = d {
                        raw.push(d);
                    }
                }
            }
        }
        Platform::X11 => {
            return Err(
                "the X11 display is opened for windows only (present::window_display)".into(),
            )
        }
        Platform::Default => {
            // SAFETY: EGL_DEFAULT_DISPLAY is always a valid argument to eglGetDisplay.
            let d = unsafe { egl.get_display(egl::DEFAULT_DISPLAY) };
            raw.push(d.ok_or("eglGetDisplay(EGL_DEFAULT_DISPLAY) gave no display")?);
        }
    }
    let mut displays = Vec::new();
    let mut why = String::new();
    for d in raw {
        match egl.initialize(d) {
            Err(e) => why = format!("eglInitialize: {e}"),
            Ok(_) => {
                let ext = egl
                    .query_string(Some(d), egl::EXTENSIONS)
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if ext
                    .split_ascii_whitespace()
                    .any(|e| e == "EGL_KHR_surfaceless_context")
                {
                    displays.push(d);
                } else {
                    why = "no EGL_KHR_surfaceless_context".into();
                }
            }
        }
    }
    if displays.is_empty() {
        return Err(if why.is_empty() {
            "no display".into()
        } else {
            why
        });
    }
    Ok(displays)
}

/// A context of `api` on `display`, current on this thread with no surface, and its config.
fn make_context(
    egl: &Egl,
    display: egl::Display,
    api: Api,
) -> Result<(egl::Context, egl::Config), String> {
    let renderable = match api {
        Api::Gl => egl::OPENGL_BIT,
        Api::Gles => egl::OPENGL_ES3_BIT,
    };
    let attribs = context_attribs(api);
    egl.bind_api(egl_api(api))
        .map_err(|e| format!("eglBindAPI: {e}"))?;
    // SURFACE_TYPE 0: any config (the default asks for window surfaces, which headless
    // displays do not have); rendering goes to framebuffer objects.
    let config = egl
        .choose_first_config(
            display,
            &[
                egl::RENDERABLE_TYPE,
                renderable,
                egl::SURFACE_TYPE,
                0,
                egl::NONE,
            ],
        )
        .map_err(|e| format!("eglChooseConfig: {e}"))?
        .ok_or_else(|| format!("no EGL config renders {}", api.name()))?;
    let context = egl
        .create_context(display, config, None, attribs)
        .map_err(|e| format!("eglCreateContext: {e}"))?;
    if let Err(e) = egl.make_current(display, None, None, Some(context)) {
        let _ = egl.destroy_context(display, context);
        return Err(format!("eglMakeCurrent without a surface: {e}"));
    }
    Ok((context, config))
}
