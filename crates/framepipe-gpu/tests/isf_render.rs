//! ISF shaders rendered on the machine's GL (llvmpipe in CI) through the in-crate harness:
//! multi-pass and persistent buffers, sized passes, the clock uniforms, compile errors.
//! Frames are 64x48, a few of them.

use std::path::{Path, PathBuf};

use framepipe_gpu::isf::render_frames;

fn shader(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/isf")
        .join(name)
}

fn px(frame: &[u8], x: usize, y: usize, w: usize) -> [u8; 4] {
    let i = (y * w + x) * 4;
    [frame[i], frame[i + 1], frame[i + 2], frame[i + 3]]
}

#[test]
fn a_persistent_float_buffer_accumulates_and_a_sized_pass_has_its_size() {
    let frames = render_frames(&shader("passes.fs"), &[], (64, 48), 5).unwrap();
    for (n, f) in frames.iter().enumerate() {
        let acc = ((n + 1) as f64 * 0.0625 * 255.0).round() as u8;
        for (x, y) in [(0, 0), (63, 47), (31, 20)] {
            assert_eq!(px(f, x, y, 64), [acc, 32, 24, 255], "frame {n} at {x},{y}");
        }
    }
}

#[test]
fn time_frameindex_and_timedelta_come_from_the_frame_so_output_is_deterministic() {
    let a = render_frames(&shader("time.fs"), &[], (64, 48), 4).unwrap();
    let b = render_frames(&shader("time.fs"), &[], (64, 48), 4).unwrap();
    assert_eq!(a, b);
    for (n, f) in a.iter().enumerate() {
        let time = n as f64 / 30.0;
        let r = (time / 4.0 * 255.0).round() as i32;
        let delta = if n == 0 { 0.0 } else { 1.0 / 30.0 };
        let blue = (delta * 15.0 * 255.0_f64).round() as i32;
        let p = px(f, 10, 10, 64);
        assert!((p[0] as i32 - r).abs() <= 1, "frame {n}: {p:?} red {r}");
        assert_eq!(p[1] as usize, n, "frame {n}: {p:?}");
        assert!(
            (p[2] as i32 - blue).abs() <= 1,
            "frame {n}: {p:?} blue {blue}"
        );
    }
}

#[test]
fn a_shader_that_does_not_compile_is_refused_naming_the_fs_line() {
    let e = render_frames(&shader("bad.fs"), &[], (64, 48), 1).unwrap_err();
    assert!(e.contains("bad.fs:7"), "{e}");
    assert!(e.contains("undefinedThing"), "{e}");
}
