//! Presenting textures in windows: the EGL display of the X server the windows live on, shared
//! by the show's GPU context and every window's context, so that a window draws the show's
//! textures without a download.
//!
//! EGL contexts share objects only within one `EGLDisplay`. [`window_display`] opens, once per
//! process, EGL's X11 platform display of `$DISPLAY` (`EGL_KHR_platform_x11`; EGL makes its own
//! connection to the server, so no Xlib handle crosses crates) and a *root* context on it that
//! is never current. Every context made with the root as its share context is in one share
//! group: each window's ([`Presenter`]) and the show's GPU context, which [`Gpu::open`]
//! makes on this display, sharing with the root, once a window display is open in the process
//! (and `FRAMEPIPE_EGL_PLATFORM` names no other platform). The window display does everything
//! the headless ones do (framebuffer objects, no surface: `EGL_KHR_surfaceless_context`).
//!
//! Synchronisation, across the two contexts: a window reads a texture only once the GPU has
//! passed every command that wrote it (the runtime's `present` transfer sees to that), and
//! [`Presenter::take`] copies it into the window's own texture and waits for that copy to be
//! done, so that the frame goes back to its pool at once: a window keeps no frame of the
//! show's but the one waiting to be taken. GL rebinds the texture at each draw, which makes the
//! other context's writes visible.
//!
//! [`Gpu::open`]: crate::Gpu::open

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use framepipe_core::gpu::GpuImage;
use glow::HasContext;
use khronos_egl as egl;

use crate::context::{context_attribs, egl_api, Api, Egl};
use crate::error::{GpuError, Result};

/// `EGL_PLATFORM_X11_KHR` (EGL_KHR_platform_x11).
const PLATFORM_X11_KHR: egl::Enum = 0x31D5;

/// The process's window display: EGL's X11 platform display, its config (window surfaces,
/// 8-bit RGB), the API every context on it speaks, and the root of its share group.
pub(crate) struct WindowDisplay {
    pub(crate) egl: Arc<Egl>,
    pub(crate) display: egl::Display,
    pub(crate) config: egl::Config,
    pub(crate) api: Api,
    pub(crate) root: egl::Context,
}

// SAFETY: EGL display, config and context handles are process-wide and valid on any thread;
// the root context is never made current, only named as the share context of new contexts
// (eglCreateContext is thread-safe). The EGL instance is Send + Sync (khronos-egl).
unsafe impl Send for WindowDisplay {}
// SAFETY: as above: nothing here is mutated after it is made.
unsafe impl Sync for WindowDisplay {}

static WINDOW_DISPLAY: OnceLock<std::result::Result<WindowDisplay, String>> = OnceLock::new();

/// Opens (once per process) the window display: EGL on the X server of `$DISPLAY`, with a
/// context that can share the show's textures. The error says why windows cannot draw
/// textures (they then take downloaded frames).
pub fn window_display() -> std::result::Result<(), String> {
    WINDOW_DISPLAY
        .get_or_init(open_window_display)
        .as_ref()
        .map(|_| ())
        .map_err(Clone::clone)
}

/// The window display, if one was opened successfully in this process.
pub(crate) fn opened() -> Option<&'static WindowDisplay> {
    WINDOW_DISPLAY.get().and_then(|r| r.as_ref().ok())
}

fn open_window_display() -> std::result::Result<WindowDisplay, String> {
    let options = crate::OpenOptions::from_env().map_err(|e| e.to_string())?;
    if let Some(p) = options.platform {
        return Err(format!(
            "FRAMEPIPE_EGL_PLATFORM={} puts the show's GPU context on another EGL display",
            p.name()
        ));
    }
    if std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty()) {
        return Err("$DISPLAY is not set".into());
    }
    let library = options.library.as_deref().unwrap_or("libEGL.so.1");
    // SAFETY: as in Gpu::open_with: the system's EGL loader (or the one named), whose exports
    // khronos-egl's signatures describe, opened RTLD_NODELETE.
    let egl = unsafe { Egl::load_required_from_filename(library) }
        .map_err(|e| format!("cannot load {library}: {e}"))?;
    let client = egl
        .query_string(None, egl::EXTENSIONS)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !client
        .split_ascii_whitespace()
        .any(|e| e == "EGL_KHR_platform_x11" || e == "EGL_EXT_platform_x11")
    {
        return Err(format!(
            "{library} has no X11 platform (EGL_KHR_platform_x11)"
        ));
    }
    let Some(egl15) = egl.upcast::<egl::EGL1_5>() else {
        return Err(format!("{library} is older than EGL 1.5"));
    };
    // SAFETY: a null native display asks EGL to connect to $DISPLAY itself; the attribute
    // list is terminated.
    let display = unsafe {
        egl15.get_platform_display(PLATFORM_X11_KHR, egl::DEFAULT_DISPLAY, &[egl::ATTRIB_NONE])
    }
    .map_err(|e| format!("no EGL display for the X server: {e}"))?;
    egl.initialize(display)
        .map_err(|e| format!("eglInitialize on the X server: {e}"))?;
    let ext = egl
        .query_string(Some(display), egl::EXTENSIONS)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !ext
        .split_ascii_whitespace()
        .any(|e| e == "EGL_KHR_surfaceless_context")
    {
        return Err("the X server's EGL display has no EGL_KHR_surfaceless_context".into());
    }
    let apis: &[Api] = match options.api {
        Some(ref a) => std::slice::from_ref(a),
        None => &[Api::Gl, Api::Gles],
    };
    let mut tried = Vec::new();
    for &api in apis {
        match root_context(&egl, display, api) {
            Ok((config, root)) => {
                return Ok(WindowDisplay {
                    egl: Arc::new(egl),
                    display,
                    config,
                    api,
                    root,
                })
            }
            Err(why) => tried.push(format!("{}: {why}", api.name())),
        }
    }
    Err(format!(
        "no context on the X server's EGL display ({})",
        tried.join("; ")
    ))
}

/// A window-capable 8-bit RGB config without alpha (the depth of an ordinary window) for
/// `api`, and a context of it that is never made current: the share group's root.
fn root_context(
    egl: &Egl,
    display: egl::Display,
    api: Api,
) -> std::result::Result<(egl::Config, egl::Context), String> {
    let renderable = match api {
        Api::Gl => egl::OPENGL_BIT,
        Api::Gles => egl::OPENGL_ES3_BIT,
    };
    egl.bind_api(egl_api(api))
        .map_err(|e| format!("eglBindAPI: {e}"))?;
    let mut configs = Vec::with_capacity(64);
    egl.choose_config(
        display,
        &[
            egl::RENDERABLE_TYPE,
            renderable,
            egl::SURFACE_TYPE,
            egl::WINDOW_BIT,
            egl::RED_SIZE,
            8,
            egl::GREEN_SIZE,
            8,
            egl::BLUE_SIZE,
            8,
            egl::NONE,
        ],
        &mut configs,
    )
    .map_err(|e| format!("eglChooseConfig: {e}"))?;
    let alpha = |c: egl::Config| {
        egl.get_config_attrib(display, c, egl::ALPHA_SIZE)
            .unwrap_or(0)
    };
    let config = configs
        .iter()
        .copied()
        .find(|&c| alpha(c) == 0)
        .or_else(|| configs.first().copied())
        .ok_or_else(|| format!("no EGL config draws {} in a window", api.name()))?;
    let root = egl
        .create_context(display, config, None, context_attribs(api))
        .map_err(|e| format!("eglCreateContext: {e}"))?;
    Ok((config, root))
}

/// The blit: a quad from `gl_VertexID` (triangle strip), the texture sampled bilinearly.
const VERTEX: &str = r#"
out vec2 uv;
void main() {
    vec2 p = vec2(float(gl_VertexID & 1), float(gl_VertexID >> 1));
    uv = p;
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
"#;
const FRAGMENT: &str = r#"
uniform sampler2D tex;
in vec2 uv;
out vec4 color;
void main() {
    color = vec4(texture(tex, uv).rgb, 1.0);
}
"#;

/// One window's context, in the window display's share group, drawing into the window's EGL
/// surface. Lives on the thread that made it (`!Send`): the window thread.
pub struct Presenter {
    wd: &'static WindowDisplay,
    context: egl::Context,
    surface: egl::Surface,
    gl: glow::Context,
    program: glow::Program,
    vao: glow::VertexArray,
    sampler: glow::Sampler,
    /// The picture taken last: the window's own 8-bit copy, its framebuffer, its size.
    picture: Option<(glow::Texture, glow::Framebuffer, u32, u32)>,
    vsync: bool,
    _thread_bound: PhantomData<*const ()>,
}

impl std::fmt::Debug for Presenter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presenter")
            .field("vsync", &self.vsync)
            .finish_non_exhaustive()
    }
}

impl Presenter {
    /// A context drawing into X window `xid` (a window of `$DISPLAY`'s server), current on
    /// this thread; swaps wait for the vertical blank when `vsync`. Needs [`window_display`].
    pub fn new(xid: u64, vsync: bool) -> Result<Presenter> {
        let Some(wd) = opened() else {
            return Err(GpuError::NoDisplay {
                tried: "no window display: call present::window_display first".into(),
            });
        };
        let egl = &wd.egl;
        let fail = |what: &str, e: egl::Error| GpuError::NoContext {
            tried: format!("window surface: {what}: {e}"),
        };
        egl.bind_api(egl_api(wd.api))
            .map_err(|e| fail("eglBindAPI", e))?;
        let context = egl
            .create_context(
                wd.display,
                wd.config,
                Some(wd.root),
                context_attribs(wd.api),
            )
            .map_err(|e| fail("eglCreateContext", e))?;
        // SAFETY: on EGL's X11 platform, eglCreateWindowSurface takes the X window id itself
        // as its native window; `xid` is a live window of the server this display is on (the
        // caller's), which outlives the surface (the window thread drops the presenter first).
        let surface = unsafe {
            egl.create_window_surface(wd.display, wd.config, xid as usize as *mut c_void, None)
        };
        let surface = match surface {
            Ok(s) => s,
            Err(e) => {
                let _ = egl.destroy_context(wd.display, context);
                return Err(fail("eglCreateWindowSurface", e));
            }
        };
        let release = |e: GpuError| {
            let _ = egl.make_current(wd.display, None, None, None);
            let _ = egl.destroy_surface(wd.display, surface);
            let _ = egl.destroy_context(wd.display, context);
            e
        };
        if let Err(e) = egl.make_current(wd.display, Some(surface), Some(surface), Some(context)) {
            return Err(release(fail("eglMakeCurrent", e)));
        }
        let _ = egl.swap_interval(wd.display, i32::from(vsync));
        // SAFETY: the context is current on this thread, so eglGetProcAddress gives its entry
        // points; a name it does not know gives null, which glow records as not loaded.
        let gl = unsafe {
            glow::Context::from_loader_function(|name| {
                egl.get_proc_address(name)
                    .map_or(std::ptr::null(), |f| f as *const c_void)
            })
        };
        let objects = blit_objects(&gl, wd.api);
        let (program, vao, sampler) = match objects {
            Ok(o) => o,
            Err(e) => return Err(release(e)),
        };
        Ok(Presenter {
            wd,
            context,
            surface,
            gl,
            program,
            vao,
            sampler,
            picture: None,
            vsync,
            _thread_bound: PhantomData,
        })
    }

    /// Makes this window's context current on this thread (several windows share a thread).
    fn make_current(&self) -> Result<()> {
        let wd = self.wd;
        wd.egl
            .bind_api(egl_api(wd.api))
            .and_then(|()| {
                wd.egl.make_current(
                    wd.display,
                    Some(self.surface),
                    Some(self.surface),
                    Some(self.context),
                )
            })
            .map_err(|e| GpuError::NoContext {
                tried: format!("making the window's context current: {e}"),
            })
    }

    /// Copies `image` (a texture of the share group, fully rendered) into the window's own
    /// texture, the picture [`present`](Self::present) draws, and waits (this thread) until
    /// the copy is done: the caller may then let go of the frame.
    pub fn take(&mut self, image: GpuImage) -> Result<()> {
        self.make_current()?;
        let (w, h) = (image.width.max(1), image.height.max(1));
        if self.picture.is_some_and(|p| (p.2, p.3) != (w, h)) {
            self.drop_picture();
        }
        let fbo = match self.picture {
            Some((_, f, _, _)) => f,
            None => {
                let (t, f) = self.make_picture(w, h)?;
                self.picture = Some((t, f, w, h));
                f
            }
        };
        let gl = &self.gl;
        // SAFETY: this presenter's context is current on this thread; the objects named are its
        // own or `image.texture`, a live texture of its share group (the caller holds it).
        unsafe {
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
            gl.disable(glow::SCISSOR_TEST);
            gl.disable(glow::BLEND);
            // At the texture's own size every fragment samples one texel's centre: a copy.
            gl.viewport(0, 0, w as i32, h as i32);
            self.draw(image.texture);
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            let fence = gl
                .fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0)
                .map_err(|e| GpuError::Gl {
                    what: "glFenceSync",
                    detail: e,
                })?;
            while gl.client_wait_sync(fence, glow::SYNC_FLUSH_COMMANDS_BIT, 1_000_000_000)
                == glow::TIMEOUT_EXPIRED
            {}
            gl.delete_sync(fence);
        }
        Ok(())
    }

    /// The window's own `w` x `h` RGBA8 texture and a framebuffer drawing into it.
    fn make_picture(&self, w: u32, h: u32) -> Result<(glow::Texture, glow::Framebuffer)> {
        let gl = &self.gl;
        let err = |what: &'static str, detail: String| GpuError::Gl { what, detail };
        // SAFETY: the context is current on this thread (the caller made it so); the objects
        // are made here and deleted on failure or by `drop_picture`.
        unsafe {
            let t = gl.create_texture().map_err(|e| err("glGenTextures", e))?;
            gl.bind_texture(glow::TEXTURE_2D, Some(t));
            gl.tex_image_2d(
                glow::TEXTURE_2D,
                0,
                glow::RGBA8 as i32,
                w as i32,
                h as i32,
                0,
                glow::RGBA,
                glow::UNSIGNED_BYTE,
                glow::PixelUnpackData::Slice(None),
            );
            gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MAX_LEVEL, 0);
            gl.bind_texture(glow::TEXTURE_2D, None);
            let f = match gl.create_framebuffer() {
                Ok(f) => f,
                Err(e) => {
                    gl.delete_texture(t);
                    return Err(err("glGenFramebuffers", e));
                }
            };
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(f));
            gl.framebuffer_texture_2d(
                glow::FRAMEBUFFER,
                glow::COLOR_ATTACHMENT0,
                glow::TEXTURE_2D,
                Some(t),
                0,
            );
            let status = gl.check_framebuffer_status(glow::FRAMEBUFFER);
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            if status != glow::FRAMEBUFFER_COMPLETE {
                gl.delete_framebuffer(f);
                gl.delete_texture(t);
                return Err(err(
                    "the window's picture",
                    format!("a {w}x{h} RGBA8 framebuffer is incomplete (0x{status:04x})"),
                ));
            }
            Ok((t, f))
        }
    }

    /// Draws `texture` with the blit into the bound framebuffer's viewport.
    ///
    /// # Safety
    /// The context is current on this thread and `texture` is a live texture of its share
    /// group.
    unsafe fn draw(&self, texture: glow::Texture) {
        let gl = &self.gl;
        // SAFETY: the caller's contract; the program, VAO and sampler are this context's.
        unsafe {
            gl.use_program(Some(self.program));
            gl.bind_vertex_array(Some(self.vao));
            gl.active_texture(glow::TEXTURE0);
            gl.bind_texture(glow::TEXTURE_2D, Some(texture));
            gl.bind_sampler(0, Some(self.sampler));
            gl.draw_arrays(glow::TRIANGLE_STRIP, 0, 4);
            gl.bind_texture(glow::TEXTURE_2D, None);
        }
    }

    /// Deletes the window's copy of the picture (the context is current).
    fn drop_picture(&mut self) {
        if let Some((t, f, _, _)) = self.picture.take() {
            // SAFETY: the context is current on this thread (every caller made it so); these
            // are its objects, used by nothing after this.
            unsafe {
                self.gl.delete_framebuffer(f);
                self.gl.delete_texture(t);
            }
        }
    }

    /// Draws the picture taken last ([`take`](Self::take)) into the window, which is `window`
    /// (width, height) big, at `rect` (x, y from the top-left, width, height), black around
    /// it, filtered bilinearly; then swaps (waiting for the vertical blank with vsync). Before
    /// the first picture: black.
    pub fn present(&mut self, window: (u32, u32), rect: (u32, u32, u32, u32)) -> Result<()> {
        self.make_current()?;
        let gl = &self.gl;
        let (ww, wh) = (window.0 as i32, window.1 as i32);
        let (x, y, w, h) = (rect.0 as i32, rect.1 as i32, rect.2 as i32, rect.3 as i32);
        // SAFETY: this presenter's context is current on this thread; every object named is
        // this context's (program, VAO, sampler, the picture's texture).
        unsafe {
            gl.disable(glow::SCISSOR_TEST);
            gl.disable(glow::BLEND);
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            gl.viewport(0, 0, ww, wh);
            gl.clear_color(0.0, 0.0, 0.0, 1.0);
            gl.clear(glow::COLOR_BUFFER_BIT);
            if let Some((picture, ..)) = self.picture {
                // GL's window origin is the bottom-left corner; texture row 0 is the bottom row.
                gl.viewport(x, wh - y - h, w, h);
                self.draw(picture);
            }
        }
        let wd = self.wd;
        wd.egl
            .swap_buffers(wd.display, self.surface)
            .map_err(|e| GpuError::Gl {
                what: "eglSwapBuffers",
                detail: e.to_string(),
            })
    }

    /// The renderer this window's context runs on.
    pub fn renderer(&self) -> String {
        // SAFETY: a constant query; the context was current on this thread when made, and a
        // string query of another current context of the share group gives the same driver.
        unsafe { self.gl.get_parameter_string(glow::RENDERER) }
    }
}

impl Drop for Presenter {
    fn drop(&mut self) {
        let wd = self.wd;
        if self.make_current().is_ok() {
            self.drop_picture();
            // SAFETY: the context is current on this thread; these are its objects.
            unsafe {
                self.gl.delete_program(self.program);
                self.gl.delete_vertex_array(self.vao);
                self.gl.delete_sampler(self.sampler);
            }
        }
        let _ = wd.egl.make_current(wd.display, None, None, None);
        let _ = wd.egl.destroy_surface(wd.display, self.surface);
        let _ = wd.egl.destroy_context(wd.display, self.context);
    }
}

/// The blit's program, an empty VAO and a bilinear, edge-clamped sampler (the texture's own
/// parameters are left as they are: other contexts sample it too).
fn blit_objects(
    gl: &glow::Context,
    api: Api,
) -> Result<(glow::Program, glow::VertexArray, glow::Sampler)> {
    let header = match api {
        Api::Gl => "#version 330 core\n",
        Api::Gles => "#version 300 es\nprecision highp float;\n",
    };
    let err = |what: &'static str, detail: String| GpuError::Gl { what, detail };
    // SAFETY: the context is current on this thread (the caller's); the sources are
    // complete strings and every object made is deleted on failure or by the presenter.
    unsafe {
        let program = gl.create_program().map_err(|e| err("glCreateProgram", e))?;
        let mut shaders = Vec::with_capacity(2);
        for (kind, src) in [
            (glow::VERTEX_SHADER, VERTEX),
            (glow::FRAGMENT_SHADER, FRAGMENT),
        ] {
            let s = gl
                .create_shader(kind)
                .map_err(|e| err("glCreateShader", e))?;
            gl.shader_source(s, &format!("{header}{src}"));
            gl.compile_shader(s);
            if !gl.get_shader_compile_status(s) {
                let log = gl.get_shader_info_log(s);
                gl.delete_shader(s);
                gl.delete_program(program);
                return Err(err("the window's blit shader", log));
            }
            gl.attach_shader(program, s);
            shaders.push(s);
        }
        gl.link_program(program);
        for s in shaders {
            gl.detach_shader(program, s);
            gl.delete_shader(s);
        }
        if !gl.get_program_link_status(program) {
            let log = gl.get_program_info_log(program);
            gl.delete_program(program);
            return Err(err("the window's blit program", log));
        }
        gl.use_program(Some(program));
        if let Some(loc) = gl.get_uniform_location(program, "tex") {
            gl.uniform_1_i32(Some(&loc), 0);
        }
        let vao = gl
            .create_vertex_array()
            .map_err(|e| err("glGenVertexArrays", e))?;
        let sampler = gl.create_sampler().map_err(|e| err("glGenSamplers", e))?;
        for (name, value) in [
            (glow::TEXTURE_MIN_FILTER, glow::LINEAR),
            (glow::TEXTURE_MAG_FILTER, glow::LINEAR),
            (glow::TEXTURE_WRAP_S, glow::CLAMP_TO_EDGE),
            (glow::TEXTURE_WRAP_T, glow::CLAMP_TO_EDGE),
        ] {
            gl.sampler_parameter_i32(sampler, name, value as i32);
        }
        Ok((program, vao, sampler))
    }
}
