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
    // At 10 fps (a source's rate), frame 1 is at 0.1 s: red 0.1/4 (6), blue 1/10*15 (all).
    let slow = render_frames(&shader("time.fs"), &[("rate", "10")], (64, 48), 2).unwrap();
    assert_eq!(px(&slow[1], 0, 0, 64), [6, 1, 255, 255]);
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

#[test]
fn every_input_type_becomes_the_right_property() {
    use framepipe_core::{ElementKind, PropKind, PropValue};
    let d = framepipe_gpu::isf::isf_desc(&shader("inputs.fs")).unwrap();
    assert_eq!(d.kind, ElementKind::Effect);
    assert_eq!(d.description, "Test: one input of every ISF type");
    let spec = |n: &str| {
        d.props
            .iter()
            .find(|p| p.name == n)
            .unwrap_or_else(|| panic!("no property {n} in {:?}", d.props))
    };
    let names: Vec<&str> = d.props.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "location",
            "flash",
            "invert",
            "mode",
            "count",
            "amount",
            "center",
            "tint",
            "input-width"
        ]
    );
    assert!(!spec("location").live);
    assert_eq!(spec("flash").kind, PropKind::Bool);
    assert_eq!(spec("flash").default, PropValue::Bool(false));
    assert_eq!(spec("invert").default, PropValue::Bool(true));
    assert_eq!(spec("mode").kind, PropKind::Int { min: 0, max: 4 });
    assert_eq!(spec("mode").default, PropValue::Int(1));
    assert!(
        spec("mode")
            .description
            .contains("0 = Off, 1 = Soft, 4 = Hard"),
        "{}",
        spec("mode").description
    );
    assert_eq!(spec("count").kind, PropKind::Int { min: 1, max: 8 });
    assert_eq!(spec("amount").kind, PropKind::Float { min: 0.0, max: 2.0 });
    assert_eq!(spec("amount").default, PropValue::Float(0.5));
    assert_eq!(spec("center").kind, PropKind::Position);
    assert_eq!(spec("center").default, PropValue::Position([32.0, 24.0]));
    assert_eq!(spec("tint").default, PropValue::Str("1,0.5,0.25,1".into()));
    let details = format!("{:?}", d.details);
    assert!(
        details
            .contains("wave (audio), spectrum (audioFFT): fed per frame from the show's --audio"),
        "{details}"
    );
    assert!(
        details.contains("framepipe tests") && details.contains("Test"),
        "{details}"
    );

    // The values reach the uniforms: mode/4, amount/2, the silent audio (0.5) and FFT (0).
    let grey = vec![128u8; 64 * 48 * 4];
    let f = framepipe_gpu::isf::render_frames_with(
        &shader("inputs.fs"),
        &[("mode", "4"), ("amount", "1"), ("tint", "#ff000080")],
        (64, 48),
        1,
        &[&grey],
    )
    .unwrap();
    let p = px(&f[0], 5, 5, 64);
    assert_eq!(p[0], 255, "{p:?}");
    assert!(
        (127..=128).contains(&p[1]) && (127..=129).contains(&p[2]) && p[3] == 0,
        "{p:?}"
    );
    // A long outside its VALUES, a colour out of range: refused, naming the value.
    let e = framepipe_gpu::isf::render_frames(&shader("inputs.fs"), &[("mode", "2")], (64, 48), 1)
        .unwrap_err();
    assert!(e.contains("expected one of: 0, 1, 4"), "{e}");
    let e =
        framepipe_gpu::isf::render_frames(&shader("inputs.fs"), &[("tint", "2,0,0")], (64, 48), 1)
            .unwrap_err();
    assert!(e.contains("bad value '2,0,0'"), "{e}");
}

#[test]
fn an_event_fires_for_the_one_frame_after_it_is_set() {
    use framepipe_core::{FrameCtx, GpuCtx, PropValue, Props, TexFormat};
    use framepipe_gpu::{read_back_blocking, Gpu, TexturePool};
    let entry = framepipe_gpu::isf::file_entry(
        "isf",
        &[("location".into(), shader("inputs.fs").display().to_string())],
    )
    .unwrap()
    .unwrap();
    let props = Props::resolve("isf", &entry.desc.props, &[]).unwrap();
    let framepipe_core::Element::Gpu(mut f) = (entry.build)(&props).unwrap() else {
        panic!("not a GPU element")
    };
    let info = framepipe_core::VideoInfo {
        width: 64,
        height: 48,
        rate: framepipe_core::Rational::new(30, 1),
    };
    f.negotiate(&[info]).unwrap();
    let mut node = f.instantiate().unwrap();
    let gpu = Gpu::open().unwrap();
    let pool = TexturePool::new(64, 48, TexFormat::Rgba8, 2);
    let (input, out) = (
        pool.try_acquire(&gpu).unwrap(),
        pool.try_acquire(&gpu).unwrap(),
    );
    let alpha = |node: &mut Box<dyn framepipe_core::GpuNode>, seq: u64| {
        let ctx = GpuCtx {
            gl: gpu.gl(),
            frame: FrameCtx::new(seq, 0),
            period_ns: 33_333_333,
            empty_vao: gpu.empty_vao(),
            audio: framepipe_core::FrameAudio::default(),
        };
        node.render(&ctx, &[input.image()], &out.image()).unwrap();
        read_back_blocking(&gpu, &out.image())[3]
    };
    assert_eq!(alpha(&mut node, 0), 0);
    node.set_property("flash", &PropValue::Bool(true)).unwrap();
    assert_eq!(alpha(&mut node, 1), 255);
    assert_eq!(alpha(&mut node, 2), 0);
    node.release(gpu.gl());
}

#[test]
fn imported_png_and_jpeg_images_are_read_upright_beside_the_shader() {
    let dir = framepipe_testkit::tmp::tmpdir("isf-imported");
    std::fs::copy(shader("imported.fs"), dir.path().join("imported.fs")).unwrap();
    // stamp.png, 2x2: red, green on the top row; blue, white below.
    let png_file = std::fs::File::create(dir.path().join("stamp.png")).unwrap();
    let mut enc = png::Encoder::new(png_file, 2, 2);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().unwrap();
    w.write_image_data(&[
        255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255, 255, 255, 255, 255,
    ])
    .unwrap();
    w.finish().unwrap();
    // photo.jpg, 16x8 solid yellow.
    let yellow: Vec<u8> = [250u8, 250, 0].repeat(16 * 8);
    jpeg_encoder::Encoder::new_file(dir.path().join("photo.jpg"), 95)
        .unwrap()
        .encode(&yellow, 16, 8, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    // The input: top half magenta, bottom half cyan.
    let mut input = Vec::with_capacity(64 * 48 * 4);
    for y in 0..48 {
        let c = if y < 24 {
            [255, 0, 255, 255]
        } else {
            [0, 255, 255, 255]
        };
        for _ in 0..64 {
            input.extend_from_slice(&c);
        }
    }
    let f = framepipe_gpu::isf::render_frames_with(
        &dir.path().join("imported.fs"),
        &[],
        (64, 48),
        1,
        &[&input],
    )
    .unwrap();
    let f = &f[0];
    assert_eq!(px(f, 0, 0, 64), [255, 0, 255, 255], "input, top");
    assert_eq!(px(f, 0, 47, 64), [0, 255, 255, 255], "input, bottom");
    assert_eq!(px(f, 32, 0, 64), [255, 0, 0, 255], "png top left");
    assert_eq!(px(f, 63, 0, 64), [0, 255, 0, 255], "png top right");
    assert_eq!(px(f, 32, 35, 64), [0, 0, 255, 255], "png bottom left");
    let y = px(f, 63, 47, 64);
    assert!(
        y[0] > 240 && y[1] > 240 && y[2] < 16 && y[3] == 16,
        "jpeg: {y:?}"
    );
    // A missing image is refused naming it.
    std::fs::remove_file(dir.path().join("photo.jpg")).unwrap();
    let e = framepipe_gpu::isf::render_frames(&dir.path().join("imported.fs"), &[], (64, 48), 1)
        .unwrap_err();
    assert!(
        e.contains("IMPORTED \"photo\"") && e.contains("photo.jpg"),
        "{e}"
    );
}

#[test]
fn a_shader_that_needs_glsl_400_runs_where_the_context_has_gl_4() {
    let f = render_frames(&shader("glsl400.fs"), &[], (64, 48), 1).unwrap();
    assert_eq!(px(&f[0], 3, 3, 64), [51, 0, 0, 255]);
}

#[test]
fn a_last_pass_into_a_buffer_makes_that_buffer_the_output_also_in_an_isf_1_file() {
    for file in ["last_target.fs", "v1.fs"] {
        let frames = render_frames(&shader(file), &[], (64, 48), 5).unwrap();
        accumulates(file, &frames);
    }
}

fn accumulates(file: &str, frames: &[Vec<u8>]) {
    // An 8-bit buffer: each frame adds 0.25 to what the last one stored (rounded to 1/255).
    let mut v = 0u8;
    for (n, f) in frames.iter().enumerate() {
        v = ((v as f64 / 255.0 + 0.25).min(1.0) * 255.0).round() as u8;
        assert_eq!(px(f, 7, 40, 64), [v; 4], "{file}, frame {n}");
    }
}

/// The Vidvox shaders kept as framepipe-isf's fixtures (a generator with a `.vs` and a
/// persistent buffer, a transition, a float-buffer history, a glitch effect) compile and run.
#[test]
fn the_vidvox_fixtures_compile_and_run() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../framepipe-isf/tests/fixtures");
    let grey = vec![100u8; 64 * 48 * 4];
    let white = vec![255u8; 64 * 48 * 4];
    for (file, inputs) in [
        ("life.fs", 0),
        ("fade.fs", 2),
        ("color_history.fs", 0),
        ("poly_glitch.fs", 1),
    ] {
        let pictures: Vec<&[u8]> = [&grey[..], &white[..]][..inputs].to_vec();
        let frames =
            framepipe_gpu::isf::render_frames_with(&dir.join(file), &[], (64, 48), 3, &pictures)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(frames.len(), 3, "{file}");
        assert!(frames.iter().all(|f| f.len() == 64 * 48 * 4), "{file}");
    }
    // fade at progress 0.25: a quarter of the way from grey to white.
    let f = framepipe_gpu::isf::render_frames_with(
        &dir.join("fade.fs"),
        &[("progress", "0.25")],
        (64, 48),
        1,
        &[&grey, &white],
    )
    .unwrap();
    let p = px(&f[0], 10, 10, 64);
    let want = 100.0 + 0.25 * 155.0;
    assert!((p[0] as f64 - want).abs() <= 1.5, "{p:?}, want {want}");
}

#[test]
fn an_effect_rendered_with_a_rate_runs_at_that_rate() {
    let grey = vec![100u8; 64 * 48 * 4];
    let f = framepipe_gpu::isf::render_frames_with(
        &shader("inputs.fs"),
        &[("rate", "10")],
        (64, 48),
        1,
        &[&grey],
    );
    assert!(f.is_ok(), "{f:?}");
}
