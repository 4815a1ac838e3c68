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
//! * [`Downloader`]: a ring of readback slots. [`Downloader::start`] returns at once with a
//!   [`Ticket`]; [`Downloader::ready`] says, without waiting, whether the pixels are in;
//!   [`Downloader::finish`], once ready, copies them, rows flipped, into a CPU frame. So no
//!   thread waits for the GPU: the GPU executor starts a download, renders other frames, and
//!   finishes it when it is ready. When every slot holds an unfinished download, `start`
//!   refuses ([`GpuError::RingFull`]): the caller finishes one first. The engine sizes the
//!   ring to the frames it has in flight. The copy takes one of two paths ([`DownloadMode`]):
//!
//!   - *inline*: `start` runs `glReadPixels` into the slot's pixel-pack buffer and puts a fence
//!     after it; `ready` polls the fence with a zero timeout; `finish` maps the buffer. GPU
//!     drivers queue that read like any command, so `start` returns at once. Mesa's llvmpipe
//!     does the copy inside the call, after waiting for the texture's pending rendering: there
//!     `start` holds the calling thread for the rest of the frame's rendering.
//!   - *thread*: the downloader has a thread of its own with a second context sharing the GPU
//!     context's objects (`eglCreateContext` with a share context). `start` only puts a fence
//!     (`glFenceSync` + `glFlush`) and hands the texture, the fence and the size to that
//!     thread; the thread waits on the fence, attaches the texture to a framebuffer of its
//!     own context and reads it into the slot's memory, then marks the slot done (an atomic,
//!     which is all `ready` reads); `finish` copies from that memory. The texture must not be
//!     rendered into until `ready` says so (the GPU executor holds the frame until then).
//!
//!   [`DownloadMode::Auto`] (what [`Downloader::new`] takes) reads `FRAMEPIPE_GPU_DOWNLOAD`
//!   (`thread` or `inline`), else takes *thread* on a software renderer and *inline* on a GPU.
//!   On llvmpipe *thread*'s `start` is some microseconds of CPU; on a busy machine its wall
//!   time at times reaches milliseconds, spent waiting for a CPU (llvmpipe's rasterizer
//!   threads and the download thread get busy as it flushes), not for the GPU.
//! * [`read_back_blocking`]: a texture's bytes now, waiting for the GPU: for tests and tools.
//!
//! Neither the uploader nor the downloader allocates on the CPU per frame: their buffers (and
//! the download thread) are made on first use, the buffers remade only when the frame size
//! changes.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use framepipe_core::gpu::{GpuImage, TexFormat};
use framepipe_core::{Frame, FrameMut};
use glow::HasContext;

use crate::context::{Garbage, GlObject, Gpu, GpuInfo, SharedContext};
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
        // Invalidating lets the driver hand out fresh memory instead of waiting for an earlier
        // upload from this buffer.
        // SAFETY: the context is current on this thread; the buffer bound to
        // PIXEL_UNPACK_BUFFER has exactly `size` bytes (RingBuffer::bind): the range is in it.
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
        // `target.texture` is this context's texture of `w` x `h` RGBA8 texels (rgba8_size), so
        // the copy from offset 0 reads exactly `size` bytes (alignment 4, no row length).
        // SAFETY: the context is current; the buffer is mapped and bound (above), `mapped` is
        // not used after the unmap, and the copy stays within the buffer (see above).
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

/// Where a [`Downloader`] reads textures back (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DownloadMode {
    /// `FRAMEPIPE_GPU_DOWNLOAD` (`thread` or `inline`) when it is set, else by renderer:
    /// [`Thread`](Self::Thread) on a software renderer (llvmpipe copies inside
    /// `glReadPixels`), [`Inline`](Self::Inline) on a GPU (which queues the copy).
    #[default]
    Auto,
    /// `glReadPixels` into a pixel-pack buffer on the calling thread, then a fence.
    Inline,
    /// A fence on the calling thread; the readback on the downloader's own thread, with a
    /// context sharing the GPU context's objects.
    Thread,
}

impl DownloadMode {
    /// The environment variable [`Auto`](Self::Auto) reads.
    pub const ENV: &'static str = "FRAMEPIPE_GPU_DOWNLOAD";

    /// [`Inline`](Self::Inline) or [`Thread`](Self::Thread): `Auto` decided by the
    /// environment, then the renderer.
    pub fn resolve(self, info: &GpuInfo) -> Result<DownloadMode> {
        if self != DownloadMode::Auto {
            return Ok(self);
        }
        match std::env::var(Self::ENV)
            .ok()
            .filter(|v| !v.is_empty())
            .as_deref()
        {
            None if info.software => Ok(DownloadMode::Thread),
            None => Ok(DownloadMode::Inline),
            Some("thread") => Ok(DownloadMode::Thread),
            Some("inline") => Ok(DownloadMode::Inline),
            Some(other) => Err(GpuError::Mismatch(format!(
                "{}={other:?}: expected thread or inline",
                Self::ENV
            ))),
        }
    }
}

/// Downloads textures into CPU frames without waiting for the GPU (see the module).
///
/// Lives on the GPU thread (its fences are the context's): `!Send`. Call
/// [`release`](Self::release) when done; dropping it instead queues its buffers for
/// [`Gpu::collect`] but leaves the fences of unfinished inline downloads to the context's end.
/// Either way its download thread, if it has one, is stopped and joined.
#[derive(Debug)]
pub struct Downloader {
    id: u64,
    ring: Box<[PackSlot]>,
    owner: Owner,
    asked: DownloadMode,
    /// The path taken, decided on first use.
    path: Option<Path>,
}

#[derive(Debug)]
enum Path {
    Inline,
    Thread(Worker),
}

impl Downloader {
    /// A downloader with `ring` (at least 1) buffers: at most that many downloads pending.
    /// Its path is [`DownloadMode::Auto`].
    pub fn new(ring: usize) -> Downloader {
        Downloader::with_mode(ring, DownloadMode::Auto)
    }

    /// A downloader with `ring` (at least 1) buffers, reading back as `mode` says.
    pub fn with_mode(ring: usize, mode: DownloadMode) -> Downloader {
        Downloader {
            id: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
            ring: (0..ring.max(1)).map(|_| PackSlot::default()).collect(),
            owner: Owner::default(),
            asked: mode,
            path: None,
        }
    }

    /// Decides the path ([`DownloadMode::resolve`]) and, for [`DownloadMode::Thread`], starts
    /// the download thread with its shared context; the first [`start`](Self::start) does it
    /// otherwise. Returns the path taken ([`DownloadMode::Inline`] or
    /// [`DownloadMode::Thread`]). With `Auto`, a driver that will not share its context falls
    /// back to `Inline`; an explicit `Thread` reports the error.
    pub fn prepare(&mut self, gpu: &Gpu) -> Result<DownloadMode> {
        self.owner.check(gpu);
        if self.path.is_none() {
            let path = match self.asked.resolve(gpu.info())? {
                DownloadMode::Thread => match Worker::spawn(gpu, self.ring.len()) {
                    Ok(w) => Path::Thread(w),
                    Err(_) if self.asked == DownloadMode::Auto => Path::Inline,
                    Err(e) => return Err(e),
                },
                _ => Path::Inline,
            };
            self.path = Some(path);
        }
        Ok(self.mode().unwrap_or(DownloadMode::Inline))
    }

    /// The path taken, once decided ([`prepare`](Self::prepare) or the first `start`).
    pub fn mode(&self) -> Option<DownloadMode> {
        self.path.as_ref().map(|p| match p {
            Path::Inline => DownloadMode::Inline,
            Path::Thread(_) => DownloadMode::Thread,
        })
    }

    /// Buffers in the ring.
    pub fn capacity(&self) -> usize {
        self.ring.len()
    }

    /// Downloads started and not yet finished or cancelled.
    pub fn pending(&self) -> usize {
        self.ring.iter().filter(|s| s.serial != 0).count()
    }

    /// Starts copying `frame`'s texture (Rgba8), as it is once the commands issued so far are
    /// done, into a free buffer of the ring and returns at once.
    /// [`GpuError::RingFull`] when every buffer holds an unfinished download (or a cancelled
    /// one the download thread has not let go of yet).
    ///
    /// The texture must not be rendered into or deleted until [`ready`](Self::ready) says the
    /// copy is done (the GPU executor holds the frame until then): the download thread reads
    /// it after this call returns.
    pub fn start(&mut self, gpu: &Gpu, frame: &GpuFrame) -> Result<Ticket> {
        self.start_image(gpu, &frame.image())
    }

    /// [`start`](Self::start) for any Rgba8 texture of this context.
    pub fn start_image(&mut self, gpu: &Gpu, image: &GpuImage) -> Result<Ticket> {
        self.prepare(gpu)?;
        rgba8_size(image, image.width, image.height, "download")?;
        let (w, h) = (gl_size(image.width)?, gl_size(image.height)?);
        let worker = match &self.path {
            Some(Path::Thread(w)) => Some(w),
            _ => None,
        };
        let Some(index) = self
            .ring
            .iter()
            .enumerate()
            .position(|(i, s)| s.serial == 0 && worker.is_none_or(|w| w.idle(i)))
        else {
            return Err(GpuError::RingFull {
                capacity: self.ring.len(),
            });
        };
        if let Some(worker) = worker {
            // After the commands that render the texture: the download thread reads once it
            // has signalled.
            let fence = Fence::insert(gpu)?;
            worker.send(index, image.texture, w, h, fence)?;
        } else {
            self.read_inline(gpu, index, image, w, h)?;
        }
        let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
        self.ring[index].serial = serial;
        Ok(Ticket {
            downloader: self.id,
            slot: index,
            serial,
            width: image.width,
            height: image.height,
        })
    }

    /// The inline path: `glReadPixels` into slot `index`'s buffer, then a fence.
    fn read_inline(
        &mut self,
        gpu: &Gpu,
        index: usize,
        image: &GpuImage,
        w: i32,
        h: i32,
    ) -> Result<()> {
        let size = w as usize * h as usize * 4;
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
        // The read writes w * h * 4 bytes from offset 0 (alignment 4, no row length).
        // SAFETY: the context is current; the read framebuffer is complete with `image` (w x h
        // RGBA8) attached, and the PIXEL_PACK_BUFFER has exactly w * h * 4 bytes.
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
        slot.fence = Some(Fence::insert(gpu)?);
        Ok(())
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

    /// Whether the copy is done, so that [`finish`](Self::finish) will not wait. Never waits:
    /// inline, a zero-timeout poll of the fence ([`Fence::signalled`]); on the download
    /// thread, one atomic load. A ticket that is not this downloader's reads as ready (its
    /// `finish` reports the mistake).
    pub fn ready(&self, gpu: &Gpu, ticket: &Ticket) -> bool {
        let Ok(index) = self.slot_of(ticket) else {
            return true;
        };
        if let Some(Path::Thread(w)) = &self.path {
            return w.done(index);
        }
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
        } else if let Some(Path::Thread(w)) = &self.path {
            w.copy_out(index, frame.data_mut(), width as usize * 4)
        } else {
            self.copy_out(gpu, index, frame.data_mut(), width as usize * 4)
        };
        self.free(gpu, index);
        result
    }

    /// Drops a started download without reading it, freeing its buffer (on the download
    /// thread, once that thread is done with it). The texture may be reused at once: a read
    /// still under way only goes into memory no one reads.
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
        if slot.serial != 0 {
            if let Some(Path::Thread(w)) = &self.path {
                w.let_go(index);
            }
        }
        slot.serial = 0;
    }

    /// Deletes the buffers and the fences of unfinished downloads now (on the GPU thread),
    /// and stops the download thread.
    pub fn release(mut self, gpu: &Gpu) {
        for index in 0..self.ring.len() {
            self.free(gpu, index);
            if let Some(b) = self.ring[index].buffer.buffer.take() {
                // SAFETY: the context is current; the buffer is this ring's and unused now.
                unsafe { gpu.gl().delete_buffer(b) };
            }
        }
        self.path = None;
    }
}

/// A download thread's slot is free.
const IDLE: u8 = 0;
/// Its readback is queued or under way.
const QUEUED: u8 = 1;
/// Queued, then cancelled: the thread frees it when it gets to it.
const CANCELLED: u8 = 2;
/// The pixels are in.
const DONE: u8 = 3;
/// The readback failed (the slot's `error` says why).
const FAILED: u8 = 4;

/// How long the download thread waits on a fence between looks at `quit`.
const FENCE_WAIT_NS: u64 = 50_000_000;

/// The download thread's side of one ring slot.
#[derive(Debug, Default)]
struct ThreadSlot {
    /// IDLE → QUEUED (the GPU thread, `send`) → DONE or FAILED (the download thread) → IDLE
    /// (the GPU thread, `let_go`); a cancel turns QUEUED into CANCELLED, which the download
    /// thread turns into IDLE. Both sides change it by compare-and-swap.
    state: AtomicU8,
    /// The texels in GL's row order, sized on first use (and when the frame size changes).
    /// Locked by the download thread while it reads, by `finish` once the slot is DONE: the
    /// two never contend.
    pixels: Mutex<Vec<u8>>,
    error: Mutex<Option<String>>,
}

#[derive(Debug)]
struct WorkerShared {
    slots: Box<[ThreadSlot]>,
    quit: AtomicBool,
}

/// A readback for the download thread: wait for `fence`, read `texture` into `slot`.
struct Job {
    slot: usize,
    texture: glow::Texture,
    width: i32,
    height: i32,
    fence: SendFence,
}

/// A sync object of the GPU context, handed to the download thread, which waits on it and
/// deletes it.
struct SendFence(glow::Fence);

// SAFETY: a GLsync is a handle of the share group, usable from any context in it; the download
// thread's context shares the GPU context's objects (Gpu::share), and exactly one side uses the
// handle at a time: the GPU thread makes it and gives it away in the job, the download thread
// waits on it and deletes it.
unsafe impl Send for SendFence {}

/// The download thread: its shared context, an FBO of its own, and a memory buffer per slot.
#[derive(Debug)]
struct Worker {
    shared: Arc<WorkerShared>,
    jobs: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts the thread with a context sharing `gpu`'s objects; returns once it is current
    /// there (or the error that kept it from being so).
    fn spawn(gpu: &Gpu, slots: usize) -> Result<Worker> {
        let context = gpu.share()?;
        let shared = Arc::new(WorkerShared {
            slots: (0..slots).map(|_| ThreadSlot::default()).collect(),
            quit: AtomicBool::new(false),
        });
        // One place per slot: a slot has at most one job queued, so `try_send` finds room.
        let (jobs, rx) = std::sync::mpsc::sync_channel(slots);
        let (opened_tx, opened) = std::sync::mpsc::sync_channel(1);
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("fp-gpu-download".into())
            .spawn(move || download_thread(context, &thread_shared, rx, opened_tx))
            .map_err(|e| GpuError::Gl {
                what: "download thread",
                detail: format!("cannot start it: {e}"),
            })?;
        let worker = Worker {
            shared,
            jobs: Some(jobs),
            thread: Some(thread),
        };
        match opened.recv() {
            Ok(Ok(())) => Ok(worker),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(GpuError::Gl {
                what: "download thread",
                detail: "it ended before making its context current".into(),
            }),
        }
    }

    fn idle(&self, slot: usize) -> bool {
        self.shared.slots[slot].state.load(Ordering::Acquire) == IDLE
    }

    fn done(&self, slot: usize) -> bool {
        matches!(
            self.shared.slots[slot].state.load(Ordering::Acquire),
            DONE | FAILED
        )
    }

    /// Queues slot `slot`'s readback (the slot is IDLE).
    fn send(
        &self,
        slot: usize,
        texture: glow::Texture,
        w: i32,
        h: i32,
        fence: Fence,
    ) -> Result<()> {
        let state = &self.shared.slots[slot].state;
        state.store(QUEUED, Ordering::Release);
        let job = Job {
            slot,
            texture,
            width: w,
            height: h,
            fence: SendFence(fence.into_raw()),
        };
        let sent = match &self.jobs {
            Some(jobs) => jobs.try_send(job),
            None => Err(TrySendError::Disconnected(job)),
        };
        match sent {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                // The sync object goes with the context (a dead thread cannot take it).
                state.store(IDLE, Ordering::Release);
                Err(GpuError::Gl {
                    what: "download thread",
                    detail: "it has ended (it panicked?)".into(),
                })
            }
        }
    }

    /// Hands the slot back: a finished one at once, a queued one once the thread is done.
    fn let_go(&self, slot: usize) {
        let state = &self.shared.slots[slot].state;
        if state
            .compare_exchange(QUEUED, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            state.store(IDLE, Ordering::Release);
        }
    }

    /// Copies slot `slot`'s pixels into `dst`, rows flipped; waits for the thread first if
    /// the slot is not done yet (`finish` before `ready`).
    fn copy_out(&self, slot: usize, dst: &mut [u8], row: usize) -> Result<()> {
        let s = &self.shared.slots[slot];
        while !self.done(slot) {
            if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
                return Err(GpuError::Gl {
                    what: "download thread",
                    detail: "it has ended (it panicked?)".into(),
                });
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        if s.state.load(Ordering::Acquire) == FAILED {
            let detail = s
                .error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .unwrap_or_default();
            return Err(GpuError::Gl {
                what: "download",
                detail,
            });
        }
        let pixels = s.pixels.lock().unwrap_or_else(PoisonError::into_inner);
        if pixels.len() != dst.len() {
            return Err(GpuError::Mismatch(format!(
                "download: {} bytes of frame for {} bytes read",
                dst.len(),
                pixels.len()
            )));
        }
        copy_rows_flipped(&pixels, dst, row);
        Ok(())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.quit.store(true, Ordering::Release);
        // Closing the queue ends the thread's loop once it has dropped the jobs left.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The download thread's body: makes `context` current, then reads back each job's texture
/// once its fence has signalled, until the queue closes.
fn download_thread(
    context: SharedContext,
    shared: &WorkerShared,
    jobs: Receiver<Job>,
    opened: SyncSender<Result<()>>,
) {
    let gl = match context.make_current() {
        Ok(gl) => gl,
        Err(e) => {
            let _ = opened.send(Err(e));
            return;
        }
    };
    // SAFETY: this thread's context is current; creating a name has no preconditions.
    let fbo = match unsafe { gl.create_framebuffer() } {
        Ok(f) => f,
        Err(e) => {
            let _ = opened.send(Err(GpuError::Gl {
                what: "download thread: glGenFramebuffers",
                detail: e,
            }));
            return;
        }
    };
    let _ = opened.send(Ok(()));
    drop(opened);
    while let Ok(job) = jobs.recv() {
        let slot = &shared.slots[job.slot];
        let sync = job.fence.0;
        while !shared.quit.load(Ordering::Acquire) {
            // SAFETY: this thread's context is current and shares the GPU context's sync
            // objects; `sync` is live (only this thread deletes it, below). No flags: the GPU
            // thread flushed when it made the fence.
            let status = unsafe { gl.client_wait_sync(sync, 0, FENCE_WAIT_NS as i32) };
            if status != glow::TIMEOUT_EXPIRED {
                break;
            }
        }
        // SAFETY: as above; the sync object is not used after this (the job is consumed).
        unsafe { gl.delete_sync(sync) };
        if shared.quit.load(Ordering::Acquire) || slot.state.load(Ordering::Acquire) == CANCELLED {
            slot.state.store(IDLE, Ordering::Release);
            continue;
        }
        let result = {
            let mut pixels = slot.pixels.lock().unwrap_or_else(PoisonError::into_inner);
            read_texture(&gl, fbo, &job, &mut pixels)
        };
        let state = match result {
            Ok(()) => DONE,
            Err(e) => {
                *slot.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                FAILED
            }
        };
        if slot
            .state
            .compare_exchange(QUEUED, state, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Cancelled while it was read.
            slot.state.store(IDLE, Ordering::Release);
        }
    }
    // SAFETY: this thread's context is current; the framebuffer is its own and unused now.
    unsafe { gl.delete_framebuffer(fbo) };
    // The context is released and destroyed here, on the thread it is current on.
    drop(context);
}

/// Reads `job.texture` (RGBA8, `job.width` x `job.height`) into `pixels`, in GL's row order.
fn read_texture(
    gl: &glow::Context,
    fbo: glow::Framebuffer,
    job: &Job,
    pixels: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    let size = job.width as usize * job.height as usize * 4;
    if pixels.len() != size {
        pixels.resize(size, 0);
    }
    // `job.texture` is kept alive by the GPU thread until the download is ready
    // (Downloader::start's contract; a cancelled one is at worst deleted, which GL defers while
    // it is attached here). With the read framebuffer complete, no pack buffer bound,
    // alignment 4 and no row length, GL writes width * height * 4 bytes: `pixels`' length.
    // SAFETY: this thread's context is current, `fbo` is its own, the texture alive and
    // `pixels` as long as the read (above).
    let (status, error) = unsafe {
        gl.bind_framebuffer(glow::READ_FRAMEBUFFER, Some(fbo));
        gl.framebuffer_texture_2d(
            glow::READ_FRAMEBUFFER,
            glow::COLOR_ATTACHMENT0,
            glow::TEXTURE_2D,
            Some(job.texture),
            0,
        );
        let status = gl.check_framebuffer_status(glow::READ_FRAMEBUFFER);
        if status == glow::FRAMEBUFFER_COMPLETE {
            gl.bind_buffer(glow::PIXEL_PACK_BUFFER, None);
            gl.read_buffer(glow::COLOR_ATTACHMENT0);
            gl.pixel_store_i32(glow::PACK_ALIGNMENT, 4);
            gl.pixel_store_i32(glow::PACK_ROW_LENGTH, 0);
            gl.read_pixels(
                0,
                0,
                job.width,
                job.height,
                glow::RGBA,
                glow::UNSIGNED_BYTE,
                glow::PixelPackData::Slice(Some(pixels.as_mut_slice())),
            );
        }
        // Detached, so that the texture is not kept alive here.
        gl.framebuffer_texture_2d(
            glow::READ_FRAMEBUFFER,
            glow::COLOR_ATTACHMENT0,
            glow::TEXTURE_2D,
            None,
            0,
        );
        gl.bind_framebuffer(glow::READ_FRAMEBUFFER, None);
        (status, gl.get_error())
    };
    if status != glow::FRAMEBUFFER_COMPLETE {
        return Err(format!(
            "a {}x{} texture cannot be read (framebuffer status 0x{status:04x})",
            job.width, job.height
        ));
    }
    if error != glow::NO_ERROR {
        return Err(crate::error::gl_error_name(error));
    }
    Ok(())
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
