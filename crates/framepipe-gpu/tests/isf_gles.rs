//! ISF shaders and gl-transitions on an OpenGL ES 3 context (`FRAMEPIPE_GL_API=gles`, Mesa's
//! llvmpipe): the assembly's GLSL 330 is compiled as GLSL ES 3.00 (`#version 300 es`, default
//! precisions), frames equal desktop GL's, and a compile error still names the author's line.
//! One test: the API is the process's environment.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use framepipe_core::{FrameCtx, GpuCtx, GpuFactory, PropValue, Props, TexFormat};
use framepipe_gpu::isf::{render_frames, render_frames_with};
use framepipe_gpu::transitions::{self, TransitionFactory};
use framepipe_gpu::{read_back_blocking, Api, Gpu, TexturePool, Uploader};

fn shader(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/isf")
        .join(name)
}

/// Renders each shader of the test on the context `Gpu::open` gives now.
fn render_all() -> Vec<Vec<Vec<u8>>> {
    let input: Vec<u8> = (0..64 * 48 * 4).map(|i| (i * 7 % 251) as u8).collect();
    vec![
        render_frames(&shader("passes.fs"), &[], (64, 48), 3).unwrap(),
        render_frames(&shader("time.fs"), &[], (64, 48), 3).unwrap(),
        render_frames_with(&shader("inputs.fs"), &[], (64, 48), 2, &[&input]).unwrap(),
        transition("crosswarp", &input),
        transition("wind", &input),
    ]
}

/// gl-transition `name` from `input` to its inverse at progress 0.3 and 0.7.
fn transition(name: &str, input: &[u8]) -> Vec<Vec<u8>> {
    let file = transitions::find_json()
        .unwrap_or_else(|| panic!("{}", transitions::collection::not_found()));
    let all: Vec<_> = transitions::load(&file)
        .unwrap()
        .into_iter()
        .map(Arc::new)
        .collect();
    let t = transitions::find(&all, name).unwrap();
    let props = Props::resolve("t", &transitions::props(t), &[]).unwrap();
    let mut node = TransitionFactory::new("t", t.clone(), &props)
        .unwrap()
        .instantiate()
        .unwrap();
    let gpu = Gpu::open().unwrap();
    let pool = TexturePool::new(64, 48, TexFormat::Rgba8, 3);
    let (a, b, out) = (
        pool.try_acquire(&gpu).unwrap(),
        pool.try_acquire(&gpu).unwrap(),
        pool.try_acquire(&gpu).unwrap(),
    );
    let inverse: Vec<u8> = input.iter().map(|v| 255 - v).collect();
    let mut up = Uploader::new(1);
    up.upload_bytes(&gpu, input, 64, 48, &a.image()).unwrap();
    up.upload_bytes(&gpu, &inverse, 64, 48, &b.image()).unwrap();
    let frames = [0.3, 0.7]
        .iter()
        .enumerate()
        .map(|(seq, &p)| {
            node.set_property("progress", &PropValue::Float(p)).unwrap();
            let ctx = GpuCtx {
                gl: gpu.gl(),
                frame: FrameCtx::new(seq as u64, 0),
                period_ns: 33_333_333,
                empty_vao: gpu.empty_vao(),
                audio: framepipe_core::FrameAudio::default(),
            };
            node.render(&ctx, &[a.image(), b.image()], &out.image())
                .unwrap();
            read_back_blocking(&gpu, &out.image())
        })
        .collect();
    node.release(gpu.gl());
    up.release(&gpu);
    frames
}

#[test]
fn isf_shaders_compile_as_glsl_es_on_a_gles_context_with_desktop_gls_frames() {
    let gl = render_all();
    // SAFETY: this test binary's only test; no other thread reads the environment now.
    unsafe { std::env::set_var("FRAMEPIPE_GL_API", "gles") };
    let gpu = Gpu::open().expect("a GLES 3 context (Mesa: libgles2, llvmpipe)");
    assert_eq!(gpu.info().api, Api::Gles, "{:?}", gpu.info());
    drop(gpu);
    let gles = render_all();
    assert_eq!(gles.len(), gl.len());
    for (k, (a, b)) in gl.iter().zip(&gles).enumerate() {
        assert_eq!(a.len(), b.len());
        for (n, (fa, fb)) in a.iter().zip(b).enumerate() {
            let max = fa
                .iter()
                .zip(fb)
                .map(|(x, y)| x.abs_diff(*y))
                .max()
                .unwrap_or(0);
            assert!(
                max <= 1,
                "shader {k} frame {n}: GLES differs from GL by {max}"
            );
        }
    }
    let e = render_frames(&shader("bad.fs"), &[], (64, 48), 1).unwrap_err();
    assert!(e.contains("bad.fs:7"), "{e}");
}
