//! Moving frames between the CPU and the GPU.
//!
//! Rows are flipped both ways: a CPU frame's row 0 is the picture's top, a texture's row 0 is
//! its bottom (GL's convention, `framepipe_core::gpu`), so shaders see the picture upright in
//! texture space (`y` up). The flip is free: it is the order rows are copied in.
//!
//! * [`Uploader`]: a small ring of pixel-unpack buffers. Each upload maps the next buffer
//!   (invalidating its old contents, so the driver never waits for the GPU to finish reading
//!   it), writes the frame's rows bottom-up, unmaps, and has GL copy it into the texture
//!   (`glTexSubImage2D` from the buffer), which the GPU does in order with the other commands.
//! * [`Downloader`]: a ring of pixel-pack buffers with fences. [`Downloader::start`] asks GL to
//!   copy a texture into a free buffer and puts a fence after it, and returns at once;
//!   [`Downloader::ready`] polls the fence with a zero timeout (it never waits);
//!   [`Downloader::finish`], once ready, maps the buffer and copies the rows, flipped, into a
//!   CPU frame. So no thread waits for the GPU: the GPU executor starts a download, renders
//!   other frames, and finishes it when it is ready. When every buffer of the ring is
//!   waiting to be finished, `start` refuses ([`GpuError::RingFull`]): the caller finishes
//!   one first. The engine sizes the ring to the frames it has in flight.
//!
//!   Where the copy happens is the driver's choice. GPU drivers queue `glReadPixels` into a
//!   buffer like any command, so `start` returns at once and the fence signals later. Mesa's
//!   llvmpipe does the copy inside the call, after waiting for the texture's pending
//!   rendering: there `start` holds the GPU thread until the frame is rendered (measured at
//!   1080p after a trivial pass: about 10-14 ms, then `ready` is true at once). Either way no
//!   CPU worker waits: only the GPU thread calls these. (A fragment shader copying into a
//!   storage buffer makes llvmpipe's `start` return at once, but costs it some 70 ms of CPU
//!   per 1080p frame against 1.3 ms for the copy, and its `glMemoryBarrier` is a `glFinish`.)
//! * [`read_back_blocking`]: a texture's bytes now, waiting for the GPU: for tests and tools.
//!
//! Neither the uploader nor the downloader allocates on the CPU per frame: their buffers are
//! made on first use (and remade only when the frame size changes).

use std::sync::atomic::{AtomicU64, Ordering};

use framepipe_core::gpu::{GpuImage, TexFormat};
use framepipe_core::{Frame, FrameMut};
use glow::HasContext;

use crate::context::{Garbage, GlObject, Gpu};
use crate::error::{GpuError, Result};
use crate::fence::Fence;
use crate::texture::{gl_size, GpuFrame};

/// Buffers in an uploader's ring unless told otherwise.
pub const DEFAULT_UPLOAD_RING: usize = 3;

/// Copies `src`'s rows of `row` bytes into `dst` in reverse order.
fn copy_rows_flipped(src: &[u8], dst: &mut [u8], row: usize) {
    for (d, s) in dst.chunks_exact_mut(row).zip(src.chunks_exact(row).rev()) {
        d.copy_from_slice(s);
    }
}

/// The byte size of an RGBA8 image, checked against a CPU frame's.
fn rgba8_size(image: &GpuImage, width: u32, height: u32, what: &str) -> Result<usize> {
    if image.format != TexFormat::Rgba8 {
        return Err(GpuError::Mismatch(format!(
            "{what}: the texture is {:?}; CPU frames move to and from Rgba8 textures only",
            image.format
        )));
    }
    if (image.width, image.height) != (width, height) {
        return Err(GpuError::Mismatch(format!(
            "{what}: the frame is {width}x{height}, the texture {}x{}",
            image.width, image.height
        )));
    }
    Ok(width as usize * height as usize * 4)
}

/// A GL buffer object of a ring, made on first use.
#[derive(Debug, Default)]
struct RingBuffer {
    buffer: Option<glow::Buffer>,
    /// Bytes of storage it has.
    size: usize,
}

impl RingBuffer {
    /// Binds the buffer to `target` with exactly `size` bytes of storage (made, or remade
    /// when the size changes). The caller unbinds.
    fn bind(&mut self, gpu: &Gpu, target: u32, size: usize, usage: u32) -> Result<()> {
        let gl = gpu.gl();
        let bytes = i32::try_from(size).map_err(|_| {
            GpuError::Mismatch(format!("a frame of {size} bytes is too large for GL"))
        })?;
        let buffer = match self.buffer {
            Some(b) => b,
            None => {
                // SAFETY: the context is current on this thread; creating a name has no
                // preconditions.
                let b = unsafe { gl.create_buffer() }.map_err(|e| GpuError::Gl {
                    what: "glGenBuffers",
                    detail: e,
                })?;
                self.buffer = Some(b);
                self.size = 0;
                b
            }
        };
        // SAFETY: the context is current on this thread and `buffer` is this context's
        // (rings are tied to one context by `Owner`); the size is a positive GLsizeiptr.
        unsafe {
            gl.bind_buffer(target, Some(buffer));
            if self.size != size {
                gl.buffer_data_size(target, bytes, usage);
            }
        }
        if self.size != size {
            gpu.check("buffer storage")?;
            self.size = size;
        }
        Ok(())
    }
}

/// The context a ring's buffers belong to, set on first use.
#[derive(Debug, Default)]
struct Owner {
    context: Option<(u64, Garbage)>,
}

impl Owner {
    /// # Panics
    /// If the ring is used with a second context.
    fn check(&mut self, gpu: &Gpu) {
        let (context, _) = self
            .context
            .get_or_insert_with(|| (gpu.id(), gpu.garbage().clone()));
        assert_eq!(
            *context,
            gpu.id(),
            "a transfer ring is used with a second GPU context"
        );
    }

    fn queue(&self, buffer: Option<glow::Buffer>) {
        if let (Some((_, garbage)), Some(b)) = (&self.context, buffer) {
            garbage.push(GlObject::Buffer(b));
        }
    }
}

/// Uploads CPU frames into textures through a ring of pixel-unpack buffers (see the module).
/// Makes no GL call until the first upload; `Send`, so it may be built on another thread.
#[derive(Debug)]
pub struct Uploader {
    ring: Box<[RingBuffer]>,
    next: usize,
    owner: Owner,
}

impl Default for Uploader {
    fn default() -> Self {
        Uploader::new(DEFAULT_UPLOAD_RING)
    }
}

impl Uploader {
    /// An uploader cycling through `ring` (at least 1) buffers.
    pub fn new(ring: usize) -> Uploader {
        Uploader {
            ring: (0..ring.max(1)).map(|_| RingBuffer::default()).collect(),
            next: 0,
            owner: Owner::default(),
        }
    }

    /// Copies `frame` into `target`'s texture (same size; an Rgba8 texture), flipping rows.
    /// Returns once the pixels are in a GL buffer; the GPU copies them into the texture in
    /// order with the commands that follow, so a node may sample it right away.
    pub fn upload(&mut self, gpu: &Gpu, frame: &Frame, target: &GpuFrame) -> Result<()> {
        self.upload_bytes(
            gpu,
            frame.data(),
            frame.width(),
            frame.height(),
            &target.image(),
        )
    }

    /// [`upload`](Self::upload) from RGBA rows (`width * 4` bytes each, top row first).
    pub fn upload_bytes(
        &mut self,
        gpu: &Gpu,
        pixels: &[u8],
        width: u32,
        height: u32,
        target: &GpuImage,
    ) -> Result<()> {
        self.owner.check(gpu);
        let size = rgba8_size(target, width, height, "upload")?;
        if pixels.len() != size {
            return Err(GpuError::Mismatch(format!(
                "upload: {} bytes for a {width}x{height} frame (expected {size})",
                pixels.len()
            )));
        }
        let (w, h) = (gl_size(width)?, gl_size(height)?);
        let index = self.next;
        self.next = (index + 1) % self.ring.len();
        let slot = &mut self.ring[index];
        slot.bind(gpu, glow::PIXEL_UNPACK_BUFFER, size, glow::STREAM_DRAW)?;
        let gl = gpu.gl();
        // SAFETY: the context is current on this thread and the buffer bound to
        // PIXEL_UNPACK_BUFFER has exactly `size` bytes (RingBuffer::bind), so the range mapped
        // is within it; invalidating lets the driver hand out fresh memory instead of waiting
        // for an earlier upload from this buffer.
        let ptr = unsafe {
            gl.map_buffer_range(
                glow::PIXEL_UNPACK_BUFFER,
                0,
                size as i32,
                glow::MAP_WRITE_BIT | glow::MAP_INVALIDATE_BUFFER_BIT,
            )
        };
        if ptr.is_null() {
            // SAFETY: unbinding is always valid with the context current.
            unsafe { gl.bind_buffer(glow::PIXEL_UNPACK_BUFFER, None) };
            gpu.check("glMapBufferRange (upload)")?;
            return Err(GpuError::Gl {
                what: "glMapBufferRange (upload)",
                detail: "the driver mapped nothing".into(),
            });
        }
        // SAFETY: GL mapped `size` writable bytes at `ptr`, which stay mapped and are touched
        // by nothing else until the unmap below.
        let mapped = unsafe { std::slice::from_raw_parts_mut(ptr, size) };
        copy_rows_flipped(pixels, mapped, width as usize * 4);
        // SAFETY: the context is current; the buffer is mapped and bound (above), and
        // `mapped` is not used after the unmap. `target.texture` is this context's texture of
        // `w` x `h` RGBA8 texels (checked by rgba8_size), so the copy from buffer offset 0
        // reads exactly `size` bytes (rows of `w * 4` bytes, alignment 4, no row length).
        unsafe {
            gl.unmap_buffer(glow::PIXEL_UNPACK_BUFFER);
            gl.pixel_store_i32(glow::UNPACK_ALIGNMENT, 4);
            gl.pixel_store_i32(glow::UNPACK_ROW_LENGTH, 0);
            gl.bind_texture(glow::TEXTURE_2D, Some(target.texture));
            gl.tex_sub_image_2d(
                glow::TEXTURE_2D,
                0,
                0,
                0,
                w,
                h,
                glow::RGBA,
                glow::UNSIGNED_BYTE,
                glow::PixelUnpackData::BufferOffset(0),
            );
            gl.bind_texture(glow::TEXTURE_2D, None);
            gl.bind_buffer(glow::PIXEL_UNPACK_BUFFER, None);
        }
        gpu.check("upload")
    }

    /// Deletes the buffers now (on the GPU thread). Dropping the uploader instead queues them
    /// for [`Gpu::collect`].
    pub fn release(mut self, gpu: &Gpu) {
        for slot in self.ring.iter_mut() {
            if let Some(b) = slot.buffer.take() {
                // SAFETY: the context is current; the buffer is this ring's and unused now.
                unsafe { gpu.gl().delete_buffer(b) };
            }
        }
    }
}

impl Drop for Uploader {
    fn drop(&mut self) {
        for slot in self.ring.iter_mut() {
            self.owner.queue(slot.buffer.take());
        }
    }
}

/// A download under way: what [`Downloader::start`] returns, to be given back to
/// [`Downloader::ready`] and consumed by [`Downloader::finish`] or [`Downloader::cancel`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a started download holds a ring buffer until it is finished or cancelled"]
pub struct Ticket {
    downloader: u64,
    slot: usize,
    serial: u64,
    width: u32,
    height: u32,
}

impl Ticket {
    /// The size of the frame being downloaded.
    pub fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }
}

/// One buffer of a downloader's ring.
#[derive(Debug, Default)]
struct PackSlot {
    buffer: RingBuffer,
    /// The fence after the readback, while a download is pending.
    fence: Option<Fence>,
    /// The pending ticket's serial; 0 when the slot is free.
    serial: u64,
}

/// Numbers downloaders and tickets, so that a ticket is only ever redeemed where it was issued.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// Downloads textures into CPU frames without waiting for the GPU (see the module).
///
/// Lives on the GPU thread (its fences are the context's): `!Send`. Call
/// [`release`](Self::release) when done; dropping it instead queues its buffers for
/// [`Gpu::collect`] but leaves the fences of unfinished downloads to the context's end.
#[derive(Debug)]
pub struct Downloader {
    id: u64,
    ring: Box<[PackSlot]>,
    owner: Owner,
}

impl Downloader {
    /// A downloader with `ring` (at least 1) buffers: at most that many downloads pending.
    pub fn new(ring: usize) -> Downloader {
        Downloader {
            id: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
            ring: (0..ring.max(1)).map(|_| PackSlot::default()).collect(),
            owner: Owner::default(),
        }
    }

    /// Buffers in the ring.
    pub fn capacity(&self) -> usize {
        self.ring.len()
    }

    /// Downloads started and not yet finished or cancelled.
    pub fn pending(&self) -> usize {
        self.ring.iter().filter(|s| s.serial != 0).count()
    }

    /// Starts copying `frame`'s texture (Rgba8) into a free buffer of the ring and returns at
    /// once. [`GpuError::RingFull`] when every buffer holds an unfinished download.
    pub fn start(&mut self, gpu: &Gpu, frame: &GpuFrame) -> Result<Ticket> {
        self.start_image(gpu, &frame.image())
    }

    /// [`start`](Self::start) for any Rgba8 texture of this context.
    pub fn start_image(&mut self, gpu: &Gpu, image: &GpuImage) -> Result<Ticket> {
        self.owner.check(gpu);
        let size = rgba8_size(image, image.width, image.height, "download")?;
        let (w, h) = (gl_size(image.width)?, gl_size(image.height)?);
        let Some(index) = self.ring.iter().position(|s| s.serial == 0) else {
            return Err(GpuError::RingFull {
                capacity: self.ring.len(),
            });
        };
        gpu.bind_scratch(glow::READ_FRAMEBUFFER, image)?;
        let slot = &mut self.ring[index];
        let gl = gpu.gl();
        if let Err(e) = slot
            .buffer
            .bind(gpu, glow::PIXEL_PACK_BUFFER, size, glow::STREAM_READ)
        {
            // SAFETY: the context is current; unbinding is always valid.
            unsafe { gl.bind_framebuffer(glow::READ_FRAMEBUFFER, None) };
            return Err(e);
        }
        // SAFETY: the context is current on this thread; the read framebuffer is complete
        // with `image` (w x h RGBA8) attached, and the buffer bound to PIXEL_PACK_BUFFER has
        // exactly w * h * 4 bytes, which is what the read writes from offset 0 (alignment 4,
        // no row length).
        unsafe {
            gl.read_buffer(glow::COLOR_ATTACHMENT0);
            gl.pixel_store_i32(glow::PACK_ALIGNMENT, 4);
            gl.pixel_store_i32(glow::PACK_ROW_LENGTH, 0);
            gl.read_pixels(
                0,
                0,
                w,
                h,
                glow::RGBA,
                glow::UNSIGNED_BYTE,
                glow::PixelPackData::BufferOffset(0),
            );
            gl.bind_buffer(glow::PIXEL_PACK_BUFFER, None);
            gl.bind_framebuffer(glow::READ_FRAMEBUFFER, None);
        }
        gpu.check("download start")?;
        // After the read: it signals once the copy into the buffer is done.
        let fence = Fence::insert(gpu)?;
        let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
        slot.fence = Some(fence);
        slot.serial = serial;
        Ok(Ticket {
            downloader: self.id,
            slot: index,
            serial,
            width: image.width,
            height: image.height,
        })
    }

    /// The ring slot a ticket of this downloader names.
    fn slot_of(&self, ticket: &Ticket) -> Result<usize> {
        let ok = ticket.downloader == self.id
            && self
                .ring
                .get(ticket.slot)
                .is_some_and(|s| s.serial == ticket.serial);
        if ok {
            Ok(ticket.slot)
        } else {
            Err(GpuError::Mismatch(
                "a download ticket given to a downloader that did not issue it".into(),
            ))
        }
    }

    /// Whether the GPU has finished the copy, so that [`finish`](Self::finish) will not wait.
    /// Polls the fence with a zero timeout ([`Fence::signalled`]): never waits. A ticket that is not this
    /// downloader's reads as ready (its `finish` reports the mistake).
    pub fn ready(&self, gpu: &Gpu, ticket: &Ticket) -> bool {
        let Ok(index) = self.slot_of(ticket) else {
            return true;
        };
        let Some(fence) = &self.ring[index].fence else {
            return true;
        };
        fence.signalled(gpu)
    }

    /// Copies the downloaded pixels into `frame` (same size), rows flipped back, and frees the
    /// buffer. Call it once [`ready`](Self::ready) says so; before that it waits for the GPU.
    pub fn finish(&mut self, gpu: &Gpu, ticket: Ticket, frame: &mut FrameMut) -> Result<()> {
        let index = self.slot_of(&ticket)?;
        let (width, height) = (frame.width(), frame.height());
        let result = if (width, height) != (ticket.width, ticket.height) {
            Err(GpuError::Mismatch(format!(
                "download: the texture was {}x{}, the frame is {width}x{height}",
                ticket.width, ticket.height
            )))
        } else {
            self.copy_out(gpu, index, frame.data_mut(), width as usize * 4)
        };
        self.free(gpu, index);
        result
    }

    /// Drops a started download without reading it, freeing its buffer.
    pub fn cancel(&mut self, gpu: &Gpu, ticket: Ticket) {
        if let Ok(index) = self.slot_of(&ticket) {
            self.free(gpu, index);
        }
    }

    fn copy_out(&mut self, gpu: &Gpu, index: usize, dst: &mut [u8], row: usize) -> Result<()> {
        let slot = &self.ring[index];
        let (Some(buffer), size) = (slot.buffer.buffer, slot.buffer.size) else {
            return Err(GpuError::Mismatch("download: no buffer".into()));
        };
        if dst.len() != size {
            return Err(GpuError::Mismatch(format!(
                "download: {} bytes of frame for {size} bytes read",
                dst.len()
            )));
        }
        let gl = gpu.gl();
        // SAFETY: the context is current; the buffer is this ring's with `size` bytes of
        // storage written by the readback, so mapping [0, size) for reading is in range.
        let ptr = unsafe {
            gl.bind_buffer(glow::PIXEL_PACK_BUFFER, Some(buffer));
            gl.map_buffer_range(glow::PIXEL_PACK_BUFFER, 0, size as i32, glow::MAP_READ_BIT)
        };
        if ptr.is_null() {
            // SAFETY: unbinding is always valid with the context current.
            unsafe { gl.bind_buffer(glow::PIXEL_PACK_BUFFER, None) };
            gpu.check("glMapBufferRange (download)")?;
            return Err(GpuError::Gl {
                what: "glMapBufferRange (download)",
                detail: "the driver mapped nothing".into(),
            });
        }
        // SAFETY: GL mapped `size` readable bytes at `ptr`, valid until the unmap below; no
        // one writes them meanwhile (the readback they came from is complete once mapped).
        let mapped = unsafe { std::slice::from_raw_parts(ptr.cast_const(), size) };
        copy_rows_flipped(mapped, dst, row);
        // SAFETY: the buffer is mapped and bound; `mapped` is not used after this.
        unsafe {
            gl.unmap_buffer(glow::PIXEL_PACK_BUFFER);
            gl.bind_buffer(glow::PIXEL_PACK_BUFFER, None);
        }
        gpu.check("download finish")
    }

    fn free(&mut self, gpu: &Gpu, index: usize) {
        let slot = &mut self.ring[index];
        if let Some(fence) = slot.fence.take() {
            fence.delete(gpu);
        }
        slot.serial = 0;
    }

    /// Deletes the buffers and the fences of unfinished downloads now (on the GPU thread).
    pub fn release(mut self, gpu: &Gpu) {
        for index in 0..self.ring.len() {
            self.free(gpu, index);
            if let Some(b) = self.ring[index].buffer.buffer.take() {
                // SAFETY: the context is current; the buffer is this ring's and unused now.
                unsafe { gpu.gl().delete_buffer(b) };
            }
        }
    }
}

impl Drop for Downloader {
    fn drop(&mut self) {
        for slot in self.ring.iter_mut() {
            self.owner.queue(slot.buffer.buffer.take());
        }
    }
}

/// `image`'s texels as RGBA8, in GL's row order: the first row returned is texture row 0,
/// the picture's bottom. Waits for the GPU: for tests and tools, never the frame path. Float
/// textures are converted (clamped to 0..=1) by desktop GL; on GLES read them with
/// [`read_back_blocking_f32`].
///
/// # Panics
/// If GL cannot read the texture (not renderable, a GL error): a tool's bug.
pub fn read_back_blocking(gpu: &Gpu, image: &GpuImage) -> Vec<u8> {
    let mut out = vec![0u8; image.width as usize * image.height as usize * 4];
    read_into(
        gpu,
        image,
        glow::UNSIGNED_BYTE,
        glow::PixelPackData::Slice(Some(&mut out)),
    );
    out
}

/// `image`'s texels as RGBA 32-bit floats, in GL's row order (see [`read_back_blocking`]).
///
/// # Panics
/// As [`read_back_blocking`].
pub fn read_back_blocking_f32(gpu: &Gpu, image: &GpuImage) -> Vec<f32> {
    let mut out = vec![0f32; image.width as usize * image.height as usize * 4];
    let bytes: &mut [u8] = bytemuck_f32(&mut out);
    read_into(
        gpu,
        image,
        glow::FLOAT,
        glow::PixelPackData::Slice(Some(bytes)),
    );
    out
}

/// The bytes of a float slice (f32 has no padding and any byte pattern is a valid f32).
fn bytemuck_f32(v: &mut [f32]) -> &mut [u8] {
    let len = std::mem::size_of_val(v);
    // SAFETY: the byte view covers exactly the floats' memory, borrowed mutably for the same
    // lifetime; u8 has alignment 1 and every byte pattern is a valid f32 to read back.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), len) }
}

fn read_into(gpu: &Gpu, image: &GpuImage, ty: u32, pixels: glow::PixelPackData<'_>) {
    let (w, h) = (
        gl_size(image.width).expect("texture width fits GL"),
        gl_size(image.height).expect("texture height fits GL"),
    );
    if let Err(e) = gpu.bind_scratch(glow::READ_FRAMEBUFFER, image) {
        panic!("read_back_blocking: {e}");
    }
    let gl = gpu.gl();
    // SAFETY: the context is current; the read framebuffer is complete with `image`
    // attached; no pack buffer is bound, so GL writes w * h * 4 components of `ty` into the
    // slice, which the callers sized exactly so (alignment 4, no row length).
    unsafe {
        gl.bind_buffer(glow::PIXEL_PACK_BUFFER, None);
        gl.read_buffer(glow::COLOR_ATTACHMENT0);
        gl.pixel_store_i32(glow::PACK_ALIGNMENT, 4);
        gl.pixel_store_i32(glow::PACK_ROW_LENGTH, 0);
        gl.read_pixels(0, 0, w, h, glow::RGBA, ty, pixels);
        gl.bind_framebuffer(glow::READ_FRAMEBUFFER, None);
    }
    if let Err(e) = gpu.check("read_back_blocking") {
        panic!("read_back_blocking: {e}");
    }
}
