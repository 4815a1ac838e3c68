//! The GPU context on the machine's GL (Mesa's llvmpipe here and in CI): opening it, textures
//! from pools, clears, uploads and downloads. Frames are small (64x48) to keep the suite fast.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use framepipe_core::{FrameMut, FramePool};
use framepipe_gpu::glow::HasContext;
use framepipe_gpu::probe::FullScreenPass;
use framepipe_gpu::{
    read_back_blocking, DownloadMode, Downloader, Fence, Gpu, GpuError, TexFormat, TexturePool,
    Uploader,
};

/// Counts the Rust allocations of each thread (the driver's own mallocs are not Rust's).
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every call is passed on to the system allocator unchanged; counting touches only a
// const-initialized thread-local Cell, which allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

fn open() -> Gpu {
    match Gpu::open() {
        Ok(gpu) => gpu,
        Err(e) => panic!("no GL context: {e}"),
    }
}

#[test]
fn a_cleared_texture_reads_back_as_its_colour() {
    let gpu = open();
    let info = gpu.info();
    assert!(
        !info.renderer.is_empty() && !info.glsl.is_empty(),
        "{info:?}"
    );
    let pool = TexturePool::new(64, 48, TexFormat::Rgba8, 2);
    let frame = pool.acquire(&gpu).expect("a texture");
    gpu.clear(&frame.image(), [1.0, 0.5, 0.0, 1.0]).unwrap();
    let pixels = read_back_blocking(&gpu, &frame.image());
    assert_eq!(pixels.len(), 64 * 48 * 4);
    // 0.5 * 255 = 127.5: GL rounds to 127 or 128.
    for px in pixels.chunks_exact(4) {
        assert!(
            px[0] == 255 && (127..=128).contains(&px[1]) && px[2] == 0 && px[3] == 255,
            "{px:?}"
        );
    }
    // Another colour on the same texture: the readback is not stale.
    gpu.clear(&frame.image(), [0.0, 0.0, 1.0, 0.0]).unwrap();
    assert!(read_back_blocking(&gpu, &frame.image())
        .chunks_exact(4)
        .all(|px| px == [0, 0, 255, 0]));
}

/// A frame whose every byte depends on its row and column, so that a flipped, shifted or
/// swapped row shows.
fn pattern(pool: &FramePool, seed: u8) -> FrameMut {
    let mut frame = pool.acquire().expect("a frame");
    let stride = frame.stride();
    for (y, row) in frame.data_mut().chunks_exact_mut(stride).enumerate() {
        for (x, byte) in row.iter_mut().enumerate() {
            *byte = (y as u8).wrapping_mul(7) ^ (x as u8).wrapping_mul(13) ^ seed;
        }
    }
    frame
}

#[test]
fn an_upload_then_download_gives_the_frame_back_byte_exact_with_row_0_at_the_bottom_of_the_texture()
{
    let gpu = open();
    let (w, h) = (64usize, 48usize);
    let frames = FramePool::new(w as u32, h as u32, 4);
    let textures = TexturePool::new(w as u32, h as u32, TexFormat::Rgba8, 2);
    let mut up = Uploader::new(2);
    let mut down = Downloader::new(2);
    // Three frames through a ring of two: buffers are reused.
    for seed in [0u8, 0x55, 0xa3] {
        let src = pattern(&frames, seed).freeze();
        let texture = textures.acquire(&gpu).unwrap();
        up.upload(&gpu, &src, &texture).unwrap();

        // In GL's order the texture's row 0 is the picture's bottom row.
        let gl_rows = read_back_blocking(&gpu, &texture.image());
        let row = w * 4;
        for y in 0..h {
            assert_eq!(
                &gl_rows[y * row..(y + 1) * row],
                &src.data()[(h - 1 - y) * row..(h - y) * row],
                "texture row {y} is not picture row {}",
                h - 1 - y
            );
        }

        let ticket = down.start(&gpu, &texture).unwrap();
        let mut back = frames.acquire().unwrap();
        back.data_mut().fill(0);
        down.finish(&gpu, ticket, &mut back).unwrap();
        assert!(
            back.data() == src.data(),
            "round trip changed the frame (seed {seed})"
        );
    }
    assert_eq!(down.pending(), 0);
    assert_eq!(textures.made(), 1, "a returned texture is reused");
    up.release(&gpu);
    down.release(&gpu);
}

#[test]
fn a_pool_lends_at_most_its_capacity_and_takes_textures_back_from_other_threads() {
    let gpu = open();
    let pool = TexturePool::new(16, 8, TexFormat::Rgba8, 2);
    assert_eq!(pool.made(), 0, "new makes no texture");
    let a = pool.acquire(&gpu).unwrap();
    let b = pool.acquire(&gpu).unwrap();
    assert_ne!(a.image().texture, b.image().texture);
    assert!(matches!(
        pool.try_acquire(&gpu),
        Err(GpuError::Exhausted { capacity: 2, .. })
    ));
    assert_eq!((pool.in_use(), pool.bytes()), (2, 2 * 16 * 8 * 4));

    let name = a.image().texture;
    std::thread::spawn(move || drop(a)).join().unwrap();
    assert_eq!(pool.in_use(), 1);
    let again = pool
        .acquire(&gpu)
        .expect("the texture dropped on another thread is back");
    assert_eq!(again.image().texture, name);
    assert_eq!(pool.made(), 2);

    // A shared texture is out while any clone (or its opaque owner) is held, anywhere.
    let shared = again.share();
    let (clone, owner) = (shared.clone(), shared.owner());
    drop(shared);
    std::thread::spawn(move || drop(clone)).join().unwrap();
    assert_eq!(pool.in_use(), 2, "its owner still holds it");
    drop(owner);
    assert_eq!(pool.in_use(), 1, "the last handle returned it");
    let again = pool.acquire(&gpu).expect("back in the pool");
    assert_eq!(again.image().texture, name);

    // The pool's last handle and frames dropped on another thread: its textures wait for
    // collect on the GPU thread, which deletes them.
    let names = [again.image().texture, b.image().texture];
    std::thread::spawn(move || drop((pool, again, b)))
        .join()
        .unwrap();
    assert_eq!(gpu.garbage().pending(), 2);
    // SAFETY: the context is current on this thread; IsTexture accepts any name.
    assert!(names.iter().all(|&t| unsafe { gpu.gl().is_texture(t) }));
    gpu.collect();
    assert_eq!(gpu.garbage().pending(), 0);
    // SAFETY: as above.
    assert!(names.iter().all(|&t| !unsafe { gpu.gl().is_texture(t) }));
}

/// `ready` polls without waiting. On llvmpipe the readback is done inside `start` (so `ready`
/// is true at once and a waiting `ready` would not show here); the next test proves on a fence
/// behind real pending work that the poll `ready` uses returns without waiting.
#[test]
fn a_1080p_download_polls_ready_without_waiting_and_a_full_ring_refuses_another() {
    let gpu = open();
    let (w, h) = (1920u32, 1080u32);
    let textures = TexturePool::new(w, h, TexFormat::Rgba8, 1);
    let texture = textures.acquire(&gpu).unwrap();
    gpu.clear(&texture.image(), [0.25, 0.5, 0.75, 1.0]).unwrap();
    let mut down = Downloader::new(1);
    let ticket = down.start(&gpu, &texture).unwrap();
    assert!(
        matches!(
            down.start(&gpu, &texture),
            Err(GpuError::RingFull { capacity: 1 })
        ),
        "a full ring refuses a second download"
    );
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut polls = 0u32;
    loop {
        let t = Instant::now();
        let ready = down.ready(&gpu, &ticket);
        slowest = slowest.max(t.elapsed());
        polls += 1;
        if ready {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the download never completed"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
    assert!(
        slowest < Duration::from_millis(1),
        "a ready() call took {slowest:?} ({polls} polls): it waited for the GPU"
    );
    let frames = FramePool::new(w, h, 1);
    let mut back = frames.acquire().unwrap();
    down.finish(&gpu, ticket, &mut back).unwrap();
    assert!(back
        .data()
        .chunks_exact(4)
        .all(|px| px[0] == 64 && px[2] == 191 && px[3] == 255));
    down.release(&gpu);
}

/// Enough arithmetic per pixel that llvmpipe takes tens of milliseconds on a small texture.
const HEAVY: &str = "
in vec2 uv;
out vec4 color;
void main() {
    float a = 0.0;
    for (int i = 0; i < 200; i++) { a += sin(uv.x * float(i) + a); }
    color = vec4(fract(a), uv, 1.0);
}
";

#[test]
fn a_fence_behind_pending_work_reads_unsignalled_and_polling_it_never_waits() {
    let gpu = open();
    let pass = FullScreenPass::new(&gpu, HEAVY).unwrap();
    let textures = TexturePool::new(256, 144, TexFormat::Rgba8, 1);
    let target = textures.acquire(&gpu).unwrap();
    // A first draw compiles the shader's code for the driver; time one whole draw.
    pass.draw(&gpu, &target.image()).unwrap();
    let warm = Fence::insert(&gpu).unwrap();
    warm.wait(&gpu);
    warm.delete(&gpu);
    let t = Instant::now();
    pass.draw(&gpu, &target.image()).unwrap();
    let fence = Fence::insert(&gpu).unwrap();
    let mut polls = Vec::new();
    loop {
        let p = Instant::now();
        let done = fence.signalled(&gpu);
        polls.push((done, p.elapsed()));
        if done {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the fence never signalled"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    let work = t.elapsed();
    fence.delete(&gpu);
    pass.release(&gpu);
    assert!(
        !polls[0].0,
        "the fence read signalled at once, {:?} after the draw was queued (the work took {work:?})",
        polls[0].1
    );
    let slowest = polls.iter().map(|p| p.1).max().unwrap();
    assert!(
        slowest < Duration::from_millis(1),
        "a poll took {slowest:?} ({} polls over {work:?}): it waited for the GPU",
        polls.len()
    );
}

/// On both download paths. The counter is per thread: this is the GPU thread's count (the
/// download thread's reads go into buffers it sized on first use).
#[test]
fn uploading_and_downloading_frames_allocates_nothing_once_warm() {
    let gpu = open();
    let frames = FramePool::new(64, 48, 4);
    let textures = TexturePool::new(64, 48, TexFormat::Rgba8, 2);
    let mut up = Uploader::new(2);
    let src = pattern(&frames, 7).freeze();
    for mode in [DownloadMode::Thread, DownloadMode::Inline] {
        let mut down = Downloader::with_mode(2, mode);
        let mut one_frame = |n: u64| {
            let texture = textures.acquire(&gpu).unwrap();
            up.upload(&gpu, &src, &texture).unwrap();
            let ticket = down.start(&gpu, &texture).unwrap();
            while !down.ready(&gpu, &ticket) {
                std::hint::spin_loop();
            }
            drop(texture); // back to the pool once read, as in a show
            let mut back = frames.acquire().unwrap();
            down.finish(&gpu, ticket, &mut back).unwrap();
            assert!(back.data() == src.data(), "{mode:?}: frame {n}");
            gpu.collect();
        };
        for n in 0..3 {
            one_frame(n); // first use makes the textures, buffers and the download thread
        }
        let before = allocations();
        for n in 3..8 {
            one_frame(n);
        }
        assert_eq!(
            allocations() - before,
            0,
            "{mode:?}: allocations in 5 warm frames"
        );
        assert_eq!(down.mode(), Some(mode));
        down.release(&gpu);
    }
    up.release(&gpu);
}
