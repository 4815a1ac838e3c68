//! Texture pools and the frames they lend.
//!
//! A [`TexturePool`] holds at most `capacity` textures of one size and format, made lazily by
//! [`TexturePool::acquire`] on the GPU thread the first time no returned one is free, and
//! never freed before the pool: once a run has made the textures it uses, acquiring and
//! returning them makes no GL call and allocates nothing (the free list is a bounded lock-free
//! queue of slot indices, as in `framepipe_core::FramePool`).
//!
//! A [`GpuFrame`] is the only handle to its texture while it is out: the one place it is
//! written (an upload, a render). [`GpuFrame::share`] turns it into a [`SharedGpuFrame`], the
//! read-only handle a frame slot holds and its consumers clone. Both are `Send`: the runtime
//! may hold them on any thread. The count of a texture's handles lives in its pool (one slot
//! per texture), so cloning a handle is two atomic increments, never an allocation; dropping
//! the last handle anywhere pushes the texture back on the free list (no GL call). When the
//! pool itself goes (its last handle and frame dropped), its textures are queued on the
//! context's [`Garbage`](crate::Garbage) and deleted by [`Gpu::collect`](crate::Gpu::collect)
//! on the GPU thread.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_queue::ArrayQueue;
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
    /// One per texture the pool may make.
    slots: Box<[Slot]>,
    /// Slots of made textures not lent out.
    free: ArrayQueue<u32>,
    owner: OnceLock<Owner>,
}

/// One texture of a pool and the count of its handles while it is lent.
struct Slot {
    /// The texture's GL name; 0 until made (written once, by the GPU thread, before the slot
    /// is first lent).
    texture: AtomicU32,
    /// Handles ([`GpuFrame`], [`SharedGpuFrame`]) on it; back on the free list at 0.
    refs: AtomicUsize,
}

impl Slot {
    fn texture(&self) -> glow::Texture {
        let name = self.texture.load(Ordering::Acquire);
        glow::NativeTexture(NonZeroU32::new(name).expect("a lent slot's texture is made"))
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
            .field("free", &self.inner.free.len())
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
                slots: (0..capacity)
                    .map(|_| Slot {
                        texture: AtomicU32::new(0),
                        refs: AtomicUsize::new(0),
                    })
                    .collect(),
                free: ArrayQueue::new(capacity),
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
    /// Its contents are undefined (whatever the last user left). Textures are made only by
    /// the one thread whose context is current (a pool belongs to one context), so the slots
    /// fill in order.
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
        if let Some(index) = inner.free.pop() {
            return Ok(self.lend(index));
        }
        let made = inner.made.load(Ordering::Acquire);
        if made >= inner.capacity {
            return Err(GpuError::Exhausted {
                width: inner.width,
                height: inner.height,
                capacity: inner.capacity,
            });
        }
        let texture = make_texture(gpu, inner.width, inner.height, inner.format)?;
        inner.slots[made]
            .texture
            .store(texture.0.get(), Ordering::Release);
        inner.made.store(made + 1, Ordering::Release);
        Ok(self.lend(made as u32))
    }

    fn lend(&self, index: u32) -> GpuFrame {
        self.inner.slots[index as usize]
            .refs
            .store(1, Ordering::Relaxed);
        GpuFrame(Lent {
            pool: Arc::clone(&self.inner),
            index,
        })
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
        self.made().saturating_sub(self.inner.free.len())
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

impl Drop for PoolInner {
    /// Runs when the last handle and the last frame are gone: every made texture is on the
    /// free list. They are queued for deletion on the GPU thread.
    fn drop(&mut self) {
        if let Some(owner) = self.owner.get() {
            let made = *self.made.get_mut();
            for slot in &self.slots[..made] {
                owner.garbage.push(GlObject::Texture(slot.texture()));
            }
        }
    }
}

/// A handle on one lent texture: counted in its pool's slot, so that the last one dropped
/// (on any thread) returns the texture.
struct Lent {
    pool: Arc<PoolInner>,
    index: u32,
}

impl Lent {
    fn slot(&self) -> &Slot {
        &self.pool.slots[self.index as usize]
    }

    fn image(&self) -> GpuImage {
        GpuImage {
            texture: self.slot().texture(),
            width: self.pool.width,
            height: self.pool.height,
            format: self.pool.format,
        }
    }

    fn debug(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(name)
            .field("texture", &self.slot().texture())
            .field("width", &self.pool.width)
            .field("height", &self.pool.height)
            .field("format", &self.pool.format)
            .finish()
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        // The handles' uses of the texture happen before its return (Release here, Acquire
        // below), as for an `Arc`.
        if self.slot().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        // At most `capacity` slots exist and this one is not in the queue, so the push cannot
        // find it full; if it somehow did, the texture is queued for deletion instead of
        // being lost.
        if self.pool.free.push(self.index).is_err() {
            if let Some(owner) = self.pool.owner.get() {
                owner.garbage.push(GlObject::Texture(self.slot().texture()));
            }
        }
    }
}

/// A texture lent by a [`TexturePool`]: the only handle to it while out, the one that writes
/// it. `Send`; dropped on any thread it goes back to its pool without a GL call.
/// [`share`](Self::share) makes it a [`SharedGpuFrame`] once written.
pub struct GpuFrame(Lent);

impl fmt::Debug for GpuFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug("GpuFrame", f)
    }
}

/// A written texture, shared read-only by the holders of its clones (a clone is a count in
/// its pool's slot: no allocation). `Send`; the last one dropped, on any thread, returns the
/// texture to its pool without a GL call.
pub struct SharedGpuFrame(Lent);

impl fmt::Debug for SharedGpuFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug("SharedGpuFrame", f)
    }
}

impl Clone for SharedGpuFrame {
    fn clone(&self) -> Self {
        // Relaxed, as `Arc::clone`: a new handle is made from one already held.
        self.0.slot().refs.fetch_add(1, Ordering::Relaxed);
        SharedGpuFrame(Lent {
            pool: Arc::clone(&self.0.pool),
            index: self.0.index,
        })
    }
}

impl SharedGpuFrame {
    /// The texture as GPU nodes see it (valid on the GPU thread while this frame is held).
    pub fn image(&self) -> GpuImage {
        self.0.image()
    }

    /// Width in texels.
    pub fn width(&self) -> u32 {
        self.0.pool.width
    }

    /// Height in texels.
    pub fn height(&self) -> u32 {
        self.0.pool.height
    }

    /// A handle on the pool this frame came from.
    pub fn pool(&self) -> TexturePool {
        TexturePool {
            inner: Arc::clone(&self.0.pool),
        }
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
        self.0.pool.width
    }

    /// Height in texels.
    pub fn height(&self) -> u32 {
        self.0.pool.height
    }

    /// Texel format.
    pub fn format(&self) -> TexFormat {
        self.0.pool.format
    }

    /// GPU memory of this texture, in bytes.
    pub fn bytes(&self) -> u64 {
        u64::from(self.0.pool.width)
            * u64::from(self.0.pool.height)
            * self.0.pool.format.texel_bytes()
    }

    /// A handle on the pool this frame came from.
    pub fn pool(&self) -> TexturePool {
        TexturePool {
            inner: Arc::clone(&self.0.pool),
        }
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
