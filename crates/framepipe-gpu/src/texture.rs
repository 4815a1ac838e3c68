//! Texture pools and the frames they lend.
//!
//! A [`TexturePool`] holds at most `capacity` textures of one size and format, made lazily by
//! [`TexturePool::acquire`] on the GPU thread the first time no returned one is free, and
//! never freed before the pool: once a run has made the textures it uses, acquiring and
//! returning them makes no GL call and allocates nothing.
//!
//! Each texture is made with one [`Arc`] (its [`Texture`]), which the pool keeps: every handle
//! on it is a clone of that `Arc`, and it is free when the pool's is the only one left (the
//! GPU thread, acquiring, looks for such a texture; nothing else can clone the pool's). So
//! lending, sharing and returning a texture are reference counts, never an allocation, and a
//! shared texture is an `Arc` a sink that draws textures may keep as an
//! `Arc<dyn Any + Send + Sync>` without allocating ([`SharedGpuFrame::owner`]).
//!
//! A [`GpuFrame`] is the only handle to its texture while it is out besides the pool's: the
//! one place it is written (an upload, a render). [`GpuFrame::share`] turns it into a
//! [`SharedGpuFrame`], the read-only handle a frame slot holds and its consumers clone. Both
//! are `Send`: the runtime may hold them on any thread; dropping the last one anywhere returns
//! the texture (no GL call). When the pool itself goes, each texture goes with its last handle:
//! it is queued on the context's [`Garbage`](crate::Garbage) and deleted by
//! [`Gpu::collect`](crate::Gpu::collect) on the GPU thread.

use std::any::Any;
use std::fmt;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use framepipe_core::gpu::{GpuImage, TexFormat};
use glow::HasContext;

use crate::context::{Garbage, GlObject, Gpu};
use crate::error::{GpuError, Result};

/// A pool of same-sized textures. Cloning it gives another handle on the same textures.
#[derive(Clone)]
pub struct TexturePool {
    inner: Arc<PoolInner>,
}

/// The context a pool's textures belong to, set by its first `acquire`.
struct Owner {
    context: u64,
    garbage: Garbage,
}

struct PoolInner {
    width: u32,
    height: u32,
    format: TexFormat,
    capacity: usize,
    /// Textures made so far (at most `capacity`): slots `0..made` hold one each.
    made: AtomicUsize,
    /// One per texture the pool may make, set once when it is made (on the GPU thread).
    slots: Box<[OnceLock<Arc<Texture>>]>,
    owner: OnceLock<Owner>,
}

/// One texture of a pool: what its handles share. Deleted (queued for the GPU thread) when
/// the last handle, the pool's included, is dropped.
pub struct Texture {
    name: glow::Texture,
    width: u32,
    height: u32,
    format: TexFormat,
    garbage: Garbage,
}

impl Drop for Texture {
    fn drop(&mut self) {
        self.garbage.push(GlObject::Texture(self.name));
    }
}

impl Texture {
    fn image(&self) -> GpuImage {
        GpuImage {
            texture: self.name,
            width: self.width,
            height: self.height,
            format: self.format,
        }
    }
}

impl fmt::Debug for TexturePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TexturePool")
            .field("width", &self.inner.width)
            .field("height", &self.inner.height)
            .field("format", &self.inner.format)
            .field("capacity", &self.inner.capacity)
            .field("made", &self.made())
            .field("in_use", &self.in_use())
            .finish()
    }
}

impl TexturePool {
    /// A pool of at most `capacity` (at least 1) textures of `width` x `height` (at least 1)
    /// in `format`. Makes no GL call: any thread may build one.
    pub fn new(width: u32, height: u32, format: TexFormat, capacity: usize) -> TexturePool {
        let capacity = capacity.max(1);
        TexturePool {
            inner: Arc::new(PoolInner {
                width: width.max(1),
                height: height.max(1),
                format,
                capacity,
                made: AtomicUsize::new(0),
                slots: (0..capacity).map(|_| OnceLock::new()).collect(),
                owner: OnceLock::new(),
            }),
        }
    }

    /// A texture, or `None` when all `capacity` are out (or GL could not make one: see
    /// [`try_acquire`](Self::try_acquire) for why).
    pub fn acquire(&self, gpu: &Gpu) -> Option<GpuFrame> {
        self.try_acquire(gpu).ok()
    }

    /// A texture: a returned one if any, else a new one while fewer than `capacity` exist.
    /// Its contents are undefined (whatever the last user left). Textures are lent and made
    /// only by the one thread whose context is current (a pool belongs to one context), so
    /// a texture seen free here stays free until lent.
    ///
    /// # Panics
    /// If the pool was used with another context (texture names belong to one context).
    pub fn try_acquire(&self, gpu: &Gpu) -> Result<GpuFrame> {
        let inner = &self.inner;
        let owner = inner.owner.get_or_init(|| Owner {
            context: gpu.id(),
            garbage: gpu.garbage().clone(),
        });
        assert_eq!(
            owner.context,
            gpu.id(),
            "a texture pool is used with a second GPU context"
        );
        let made = inner.made.load(Ordering::Acquire);
        for slot in &inner.slots[..made] {
            let texture = slot.get().expect("a made slot holds its texture");
            // Only the pool's handle left: free. (The last other handle's drop released its
            // uses of the texture; this fence acquires them, as `Arc::get_mut` would.)
            if Arc::strong_count(texture) == 1 {
                fence(Ordering::Acquire);
                return Ok(GpuFrame(Arc::clone(texture)));
            }
        }
        if made >= inner.capacity {
            return Err(GpuError::Exhausted {
                width: inner.width,
                height: inner.height,
                capacity: inner.capacity,
            });
        }
        let name = make_texture(gpu, inner.width, inner.height, inner.format)?;
        let texture = Arc::new(Texture {
            name,
            width: inner.width,
            height: inner.height,
            format: inner.format,
            garbage: owner.garbage.clone(),
        });
        let lent = GpuFrame(Arc::clone(&texture));
        if inner.slots[made].set(texture).is_err() {
            unreachable!("slot {made} is made once, by the one thread acquiring");
        }
        inner.made.store(made + 1, Ordering::Release);
        Ok(lent)
    }

    /// Texture width.
    pub fn width(&self) -> u32 {
        self.inner.width
    }

    /// Texture height.
    pub fn height(&self) -> u32 {
        self.inner.height
    }

    /// Texel format.
    pub fn format(&self) -> TexFormat {
        self.inner.format
    }

    /// The most textures the pool makes.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Textures made so far.
    pub fn made(&self) -> usize {
        self.inner.made.load(Ordering::Acquire)
    }

    /// Textures lent out now.
    pub fn in_use(&self) -> usize {
        let made = self.made();
        self.inner.slots[..made]
            .iter()
            .filter_map(OnceLock::get)
            .filter(|t| Arc::strong_count(t) > 1)
            .count()
    }

    /// Bytes of one texture.
    pub fn texture_bytes(&self) -> u64 {
        u64::from(self.inner.width) * u64::from(self.inner.height) * self.inner.format.texel_bytes()
    }

    /// GPU memory the pool's textures take now (made ones, lent or free).
    pub fn bytes(&self) -> u64 {
        self.made() as u64 * self.texture_bytes()
    }

    /// GPU memory the pool may take at most.
    pub fn capacity_bytes(&self) -> u64 {
        self.inner.capacity as u64 * self.texture_bytes()
    }

    /// Whether `self` and `other` are handles on the same textures.
    pub fn same_pool(&self, other: &TexturePool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// A texture lent by a [`TexturePool`]: the only handle to it while out besides the pool's,
/// the one that writes it. `Send`; dropped on any thread it goes back to its pool without a GL
/// call. [`share`](Self::share) makes it a [`SharedGpuFrame`] once written.
pub struct GpuFrame(Arc<Texture>);

/// A written texture, shared read-only by the holders of its clones (a clone is an `Arc`
/// count: no allocation). `Send`; the last one dropped, on any thread, returns the texture to
/// its pool without a GL call.
#[derive(Clone)]
pub struct SharedGpuFrame(Arc<Texture>);

impl fmt::Debug for GpuFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("GpuFrame").field(&self.0.image()).finish()
    }
}

impl fmt::Debug for SharedGpuFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SharedGpuFrame")
            .field(&self.0.image())
            .finish()
    }
}

impl GpuFrame {
    /// The texture as GPU nodes see it (valid on the GPU thread while this frame is held).
    pub fn image(&self) -> GpuImage {
        self.0.image()
    }

    /// This frame, written, as a handle its readers share.
    pub fn share(self) -> SharedGpuFrame {
        SharedGpuFrame(self.0)
    }

    /// Width in texels.
    pub fn width(&self) -> u32 {
        self.0.width
    }

    /// Height in texels.
    pub fn height(&self) -> u32 {
        self.0.height
    }

    /// Texel format.
    pub fn format(&self) -> TexFormat {
        self.0.format
    }

    /// GPU memory of this texture, in bytes.
    pub fn bytes(&self) -> u64 {
        u64::from(self.0.width) * u64::from(self.0.height) * self.0.format.texel_bytes()
    }
}

impl SharedGpuFrame {
    /// The texture as GPU nodes see it (valid on the GPU thread while this frame is held).
    pub fn image(&self) -> GpuImage {
        self.0.image()
    }

    /// Width in texels.
    pub fn width(&self) -> u32 {
        self.0.width
    }

    /// Height in texels.
    pub fn height(&self) -> u32 {
        self.0.height
    }

    /// The handle as an opaque owner (a clone of the `Arc`, no allocation): the texture stays
    /// out of its pool while it is held, for a sink that draws textures itself.
    pub fn owner(&self) -> Arc<dyn Any + Send + Sync> {
        Arc::clone(&self.0) as Arc<dyn Any + Send + Sync>
    }
}

/// GL's internal format for a texel format.
pub(crate) fn internal_format(format: TexFormat) -> u32 {
    match format {
        TexFormat::Rgba8 => glow::RGBA8,
        TexFormat::Rgba16F => glow::RGBA16F,
        TexFormat::Rgba32F => glow::RGBA32F,
    }
}

/// A new texture: linear filtering, clamped to the edge, storage allocated.
fn make_texture(gpu: &Gpu, width: u32, height: u32, format: TexFormat) -> Result<glow::Texture> {
    let gl = gpu.gl();
    let (w, h) = (gl_size(width)?, gl_size(height)?);
    // SAFETY: the context is current on this thread (Gpu is !Send); the texture is new and
    // bound only for these calls; sizes are positive and fit a GLsizei; the TexImage2D path
    // passes no pixels (null), so no host memory is read.
    let texture = unsafe {
        let texture = gl.create_texture().map_err(|e| GpuError::Gl {
            what: "glGenTextures",
            detail: e,
        })?;
        gl.bind_texture(glow::TEXTURE_2D, Some(texture));
        if gpu.has_tex_storage() {
            gl.tex_storage_2d(glow::TEXTURE_2D, 1, internal_format(format), w, h);
        } else {
            let ty = match format {
                TexFormat::Rgba8 => glow::UNSIGNED_BYTE,
                TexFormat::Rgba16F => glow::HALF_FLOAT,
                TexFormat::Rgba32F => glow::FLOAT,
            };
            gl.tex_image_2d(
                glow::TEXTURE_2D,
                0,
                internal_format(format) as i32,
                w,
                h,
                0,
                glow::RGBA,
                ty,
                glow::PixelUnpackData::Slice(None),
            );
            gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MAX_LEVEL, 0);
        }
        set_linear_clamp(gl);
        gl.bind_texture(glow::TEXTURE_2D, None);
        texture
    };
    if let Err(e) = gpu.check("texture storage") {
        // SAFETY: the context is current; the texture is ours and unused.
        unsafe { gl.delete_texture(texture) };
        return Err(e);
    }
    Ok(texture)
}

/// A dimension as a GLsizei.
pub(crate) fn gl_size(n: u32) -> Result<i32> {
    i32::try_from(n).map_err(|_| GpuError::Mismatch(format!("size {n} is too large for GL")))
}

/// Linear filtering, clamped to the edge: how every texture this crate makes is sampled.
///
/// # Safety
/// The context is current on this thread and a texture of it is bound to `TEXTURE_2D`.
pub(crate) unsafe fn set_linear_clamp(gl: &glow::Context) {
    for (name, value) in [
        (glow::TEXTURE_MIN_FILTER, glow::LINEAR),
        (glow::TEXTURE_MAG_FILTER, glow::LINEAR),
        (glow::TEXTURE_WRAP_S, glow::CLAMP_TO_EDGE),
        (glow::TEXTURE_WRAP_T, glow::CLAMP_TO_EDGE),
    ] {
        // SAFETY: the caller's contract (context current, a texture bound).
        unsafe { gl.tex_parameter_i32(glow::TEXTURE_2D, name, value as i32) };
    }
}
