//! The GPU context on the machine's GL (Mesa's llvmpipe here and in CI): opening it, textures
//! from pools, clears, uploads and downloads. Frames are small (64x48) to keep the suite fast.

use framepipe_gpu::{read_back_blocking, Gpu, TexFormat, TexturePool};

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
