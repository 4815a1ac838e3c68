//! The crate's one error type.

/// What the Debian packages a headless GL context needs are, for messages.
pub const PACKAGES: &str = "libegl1 (the EGL loader), libegl-mesa0 (Mesa's EGL) and \
                            libgl1-mesa-dri (Mesa's drivers, llvmpipe included)";

/// Why the GPU context or a GPU operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// The EGL library could not be loaded.
    #[error(
        "cannot load the EGL library '{library}': {reason}; install {PACKAGES} \
         (apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri), or point FRAMEPIPE_EGL_LIB \
         at your driver's libEGL.so.1"
    )]
    LoadEgl {
        /// The file name or path tried.
        library: String,
        /// What the loader said.
        reason: String,
    },
    /// No EGL display could be initialized, or none made a context: every platform tried,
    /// with what each said.
    #[error(
        "no usable EGL display ({tried}); install {PACKAGES} \
         (apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri) or your GPU's EGL driver"
    )]
    NoDisplay {
        /// Each platform tried and why it failed, joined by "; ".
        tried: String,
    },
    /// A display was found but no OpenGL 3.3 core or GLES 3.0 context could be made on it.
    #[error(
        "no OpenGL 3.3 core or OpenGL ES 3.0 context ({tried}); install {PACKAGES} \
         (apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri) or a newer GPU driver"
    )]
    NoContext {
        /// Each platform and API tried and why it failed, joined by "; ".
        tried: String,
    },
    /// A GL call failed (`glGetError`, an incomplete framebuffer, a failed map).
    #[error("GL error in {what}: {detail}")]
    Gl {
        /// The operation.
        what: &'static str,
        /// The GL error or status, by name.
        detail: String,
    },
    /// A texture pool has all its textures out.
    #[error("texture pool of {width}x{height} exhausted: all {capacity} textures are in use")]
    Exhausted {
        /// Texture width.
        width: u32,
        /// Texture height.
        height: u32,
        /// The pool's capacity.
        capacity: usize,
    },
    /// A downloader's ring has every buffer waiting to be finished.
    #[error("download ring full: all {capacity} buffers are waiting for finish()")]
    RingFull {
        /// Buffers in the ring.
        capacity: usize,
    },
    /// Sizes or formats of a frame and a texture do not match, or a ticket is not this
    /// downloader's.
    #[error("{0}")]
    Mismatch(String),
}

/// This crate's result.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;

/// A GL error code by name.
pub(crate) fn gl_error_name(code: u32) -> String {
    match code {
        glow::INVALID_ENUM => "GL_INVALID_ENUM".into(),
        glow::INVALID_VALUE => "GL_INVALID_VALUE".into(),
        glow::INVALID_OPERATION => "GL_INVALID_OPERATION".into(),
        glow::INVALID_FRAMEBUFFER_OPERATION => "GL_INVALID_FRAMEBUFFER_OPERATION".into(),
        glow::OUT_OF_MEMORY => "GL_OUT_OF_MEMORY".into(),
        other => format!("GL error 0x{other:04x}"),
    }
}
