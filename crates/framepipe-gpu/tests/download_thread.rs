//! The downloader's two paths on the machine's GL (Mesa's llvmpipe here and in CI): on the
//! download thread (a context sharing the GPU context's objects) `start` only puts a fence
//! and returns, however heavy the render it follows; both paths give the frame back byte-exact
//! with rows flipped; cancelling or dropping a downloader while a readback is under way is
//! safe. Frames are small (64x48, 256x144) to keep the suite fast.

use std::time::{Duration, Instant};

use framepipe_core::{FrameMut, FramePool};
use framepipe_gpu::probe::FullScreenPass;
use framepipe_gpu::{
    read_back_blocking, DownloadMode, Downloader, Fence, Gpu, GpuError, GpuFrame, TexFormat,
    TexturePool, Ticket, Uploader,
};

fn open() -> Gpu {
    match Gpu::open() {
        Ok(gpu) => gpu,
        Err(e) => panic!("no GL context: {e}"),
    }
}

/// Enough arithmetic per pixel that llvmpipe takes tens of milliseconds on 256x144; its
/// output's alpha is always 1.
const HEAVY: &str = "
in vec2 uv;
out vec4 color;
void main() {
    float a = 0.0;
    for (int i = 0; i < 300; i++) { a += sin(uv.x * float(i) + a); }
    color = vec4(fract(a), uv, 1.0);
}
";

/// A heavy pass compiled and run once (llvmpipe compiles a shader's code on its first draw).
fn heavy_pass(gpu: &Gpu, target: &GpuFrame) -> FullScreenPass {
    let pass = FullScreenPass::new(gpu, HEAVY).unwrap();
    pass.draw(gpu, &target.image()).unwrap();
    let warm = Fence::insert(gpu).unwrap();
    warm.wait(gpu);
    warm.delete(gpu);
    pass
}

/// Polls `ready` until true (at most 20 s); returns when it was first true.
fn wait_ready(gpu: &Gpu, down: &Downloader, ticket: &Ticket) -> Instant {
    let t = Instant::now();
    while !down.ready(gpu, ticket) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the download never completed"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    Instant::now()
}

#[test]
fn on_the_download_thread_start_returns_long_before_a_heavy_pending_render_is_done() {
    let gpu = open();
    let (w, h) = (256, 144);
    let textures = TexturePool::new(w, h, TexFormat::Rgba8, 1);
    let target = textures.acquire(&gpu).unwrap();
    let pass = heavy_pass(&gpu, &target);
    let mut down = Downloader::with_mode(2, DownloadMode::Thread);
    assert_eq!(down.prepare(&gpu).unwrap(), DownloadMode::Thread);
    let frames = FramePool::new(w, h, 1);
    // On a busy machine the GPU thread may simply not get a CPU for a while (llvmpipe's
    // rasterizer threads take them as the render starts): a few tries, the first that shows
    // `start` returning early passes. The inline path never does (start holds ~all of it).
    let mut tries = Vec::new();
    for _ in 0..5 {
        // Alpha 0 everywhere: a readback that ran before the render would show it.
        gpu.clear(&target.image(), [1.0, 0.0, 0.0, 0.0]).unwrap();
        let queued = Instant::now();
        pass.draw(&gpu, &target.image()).unwrap();
        let t = Instant::now();
        let ticket = down.start(&gpu, &target).unwrap();
        let held = t.elapsed();
        let ready_at_once = down.ready(&gpu, &ticket);
        let work = wait_ready(&gpu, &down, &ticket) - queued;
        let mut back = frames.acquire().unwrap();
        down.finish(&gpu, ticket, &mut back).unwrap();
        assert!(
            back.data().chunks_exact(4).all(|px| px[3] == 255),
            "the download thread read the texture before the render it follows was done"
        );
        let mut gl_rows = read_back_blocking(&gpu, &target.image());
        flip_rows(&mut gl_rows, w as usize * 4);
        assert!(
            back.data() == gl_rows.as_slice(),
            "the download differs from the rendered texture"
        );
        tries.push((held, work, ready_at_once));
        if held * 4 < work && !ready_at_once {
            break;
        }
    }
    let (held, work, ready_at_once) = *tries.last().unwrap();
    assert!(
        held * 4 < work && !ready_at_once,
        "start held the GPU thread {held:?} (ready at once: {ready_at_once}) of a render and \
         readback that took {work:?}: it waited for the render (all tries, held/work/ready at \
         once: {tries:?})"
    );
    pass.release(&gpu);
    down.release(&gpu);
}

fn flip_rows(bytes: &mut [u8], row: usize) {
    let rows = bytes.len() / row;
    for y in 0..rows / 2 {
        let (top, bottom) = bytes.split_at_mut((rows - 1 - y) * row);
        top[y * row..(y + 1) * row].swap_with_slice(&mut bottom[..row]);
    }
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
fn both_paths_give_frames_back_byte_exact_with_rows_flipped() {
    let gpu = open();
    let (w, h) = (64usize, 48usize);
    let frames = FramePool::new(w as u32, h as u32, 5);
    let textures = TexturePool::new(w as u32, h as u32, TexFormat::Rgba8, 3);
    let mut up = Uploader::new(2);
    for mode in [DownloadMode::Thread, DownloadMode::Inline] {
        let mut down = Downloader::with_mode(2, mode);
        // Three frames through a ring of two, two under way at once.
        let mut under_way = Vec::new();
        for seed in [0u8, 0x55, 0xa3] {
            let src = pattern(&frames, seed).freeze();
            let texture = textures.acquire(&gpu).unwrap();
            up.upload(&gpu, &src, &texture).unwrap();
            // The texture's row 0 is the picture's bottom row.
            let gl_rows = read_back_blocking(&gpu, &texture.image());
            assert!(gl_rows[..w * 4] == src.data()[(h - 1) * w * 4..]);
            if under_way.len() == 2 {
                let (ticket, src, texture): (Ticket, framepipe_core::Frame, GpuFrame) =
                    under_way.remove(0);
                let mut back = frames.acquire().unwrap();
                back.data_mut().fill(0);
                // `finish` before `ready`: it waits for the copy.
                down.finish(&gpu, ticket, &mut back).unwrap();
                drop(texture);
                assert!(back.data() == src.data(), "{mode:?}: frame changed");
            }
            let ticket = down.start(&gpu, &texture).unwrap();
            under_way.push((ticket, src, texture));
        }
        assert_eq!(down.mode(), Some(mode));
        for (ticket, src, texture) in under_way {
            wait_ready(&gpu, &down, &ticket);
            let mut back = frames.acquire().unwrap();
            down.finish(&gpu, ticket, &mut back).unwrap();
            drop(texture);
            assert!(back.data() == src.data(), "{mode:?}: frame changed");
        }
        assert_eq!(down.pending(), 0);
        down.release(&gpu);
    }
    up.release(&gpu);
}

#[test]
fn cancelling_or_dropping_a_downloader_while_a_readback_is_under_way_is_safe() {
    let gpu = open();
    let (w, h) = (256, 144);
    let textures = TexturePool::new(w, h, TexFormat::Rgba8, 1);
    let frames = FramePool::new(w, h, 1);
    let target = textures.acquire(&gpu).unwrap();
    let pass = heavy_pass(&gpu, &target);
    let mut down = Downloader::with_mode(1, DownloadMode::Thread);

    // Cancelled behind a heavy render: the slot comes back once the thread lets go of it.
    pass.draw(&gpu, &target.image()).unwrap();
    let ticket = down.start(&gpu, &target).unwrap();
    down.cancel(&gpu, ticket);
    assert_eq!(down.pending(), 0);
    drop(target);
    let target = textures.acquire(&gpu).unwrap();
    gpu.clear(&target.image(), [0.0, 1.0, 0.0, 1.0]).unwrap();
    let t = Instant::now();
    let ticket = loop {
        match down.start(&gpu, &target) {
            Ok(ticket) => break ticket,
            Err(GpuError::RingFull { .. }) => {
                assert!(
                    t.elapsed() < Duration::from_secs(20),
                    "a cancelled slot never came back"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("{e}"),
        }
    };
    wait_ready(&gpu, &down, &ticket);
    let mut back = frames.acquire().unwrap();
    down.finish(&gpu, ticket, &mut back).unwrap();
    assert!(
        back.data().chunks_exact(4).all(|px| px == [0, 255, 0, 255]),
        "the download after a cancel read the wrong picture"
    );

    // Released, then dropped, each with a readback under way behind a heavy render.
    pass.draw(&gpu, &target.image()).unwrap();
    let _ticket = down.start(&gpu, &target).unwrap();
    down.release(&gpu);
    let mut down = Downloader::with_mode(1, DownloadMode::Thread);
    pass.draw(&gpu, &target.image()).unwrap();
    let _ticket = down.start(&gpu, &target).unwrap();
    drop(down);

    // The context goes on.
    gpu.clear(&target.image(), [0.0, 0.0, 1.0, 1.0]).unwrap();
    assert!(read_back_blocking(&gpu, &target.image())
        .chunks_exact(4)
        .all(|px| px == [0, 0, 255, 255]));
    pass.release(&gpu);
}
