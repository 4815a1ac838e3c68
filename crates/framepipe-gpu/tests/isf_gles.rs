//! ISF shaders on an OpenGL ES 3 context (`FRAMEPIPE_GL_API=gles`, Mesa's llvmpipe): the
//! assembly's GLSL 330 is compiled as GLSL ES 3.00 (`#version 300 es`, default precisions),
//! frames equal desktop GL's, and a compile error still names the author's line. One test:
//! the API is the process's environment.

use std::path::{Path, PathBuf};

use framepipe_gpu::isf::{render_frames, render_frames_with};
use framepipe_gpu::{Api, Gpu};

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
    ]
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
