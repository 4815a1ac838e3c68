//! A running `isf location=FILE` node reloads its file when it changes; a file that does not
//! compile is refused with its line and the previous shader goes on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use framepipe_core::{FrameCtx, GpuCtx, GpuNode, TexFormat};
use framepipe_gpu::isf::inputs::Values;
use framepipe_gpu::isf::reload::Watcher;
use framepipe_gpu::isf::{IsfNode, Loaded, OWN_PROPS};
use framepipe_gpu::{read_back_blocking, Gpu, TexturePool};

fn solid(rgb: &str) -> String {
    format!(
        "/*{{ \"ISFVSN\": \"2\", \"INPUTS\": [ {{ \"NAME\": \"gain\", \"TYPE\": \"float\", \"DEFAULT\": 1.0 }} ] }}*/\n\
         void main() {{\n    gl_FragColor = vec4({rgb}, 1.0) * gain;\n}}\n"
    )
}

#[test]
fn a_changed_file_is_reloaded_and_a_broken_one_keeps_the_previous_shader() {
    let dir = framepipe_testkit::tmp::tmpdir("isf-reload");
    let path = dir.path().join("live.fs");
    std::fs::write(&path, solid("1.0, 0.0, 0.0")).unwrap();
    let loaded = Arc::new(Loaded::read(&path).unwrap());
    let values = Values::defaults(&loaded.shader, OWN_PROPS);
    let watcher = Watcher::start("isf", &loaded);
    let mut node = IsfNode::new("isf", loaded, values, Some(watcher));
    let gpu = Gpu::open().unwrap();
    let pool = TexturePool::new(64, 48, TexFormat::Rgba8, 1);
    let out = pool.try_acquire(&gpu).unwrap();
    let mut seq = 0;
    let mut frame = |node: &mut IsfNode| {
        let ctx = GpuCtx {
            gl: gpu.gl(),
            frame: FrameCtx::new(seq, 0),
            period_ns: 33_333_333,
            empty_vao: gpu.empty_vao(),
            audio: framepipe_core::FrameAudio::default(),
        };
        seq += 1;
        node.render(&ctx, &[], &out.image()).unwrap();
        let p = read_back_blocking(&gpu, &out.image());
        [p[0], p[1], p[2], p[3]]
    };
    assert_eq!(frame(&mut node), [255, 0, 0, 255]);
    node.set_property("gain", &framepipe_core::PropValue::Float(0.5))
        .unwrap();

    std::fs::write(&path, solid("0.0, 1.0, 0.0")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = frame(&mut node);
    while last[1] == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        last = frame(&mut node);
    }
    // The new shader, with the value the show set before the reload.
    assert!(last[0] == 0 && (127..=128).contains(&last[1]), "{last:?}");
    assert!(node.last_reload_error().is_none());
    assert_eq!(
        node.take_message(),
        None,
        "a reload that worked is not a message"
    );

    std::fs::write(
        &path,
        "/*{ \"ISFVSN\": \"2\" }*/\nvoid main() {\n    gl_FragColor = nope;\n}\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.last_reload_error().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(frame(&mut node), last, "the previous shader goes on");
    }
    let why = node
        .last_reload_error()
        .expect("the broken file is reported");
    assert!(why.contains("live.fs:3") && why.contains("nope"), "{why}");
    // Once, to the executor, for the operator.
    let msg = node.take_message().expect("a message for the operator");
    assert!(
        msg.contains("changed but is refused; the previous shader goes on")
            && msg.contains("live.fs:3"),
        "{msg}"
    );
    assert_eq!(node.take_message(), None);
    assert_eq!(frame(&mut node), last);
    node.release(gpu.gl());
}

/// A reloaded file with a new input: it runs at its default, and the operator is told it is
/// not a property of the running show until the node is replaced.
#[test]
fn a_reload_that_adds_an_input_says_how_to_make_it_a_property() {
    let dir = framepipe_testkit::tmp::tmpdir("isf-reload-input");
    let path = dir.path().join("grow.fs");
    std::fs::write(&path, solid("1.0, 0.0, 0.0")).unwrap();
    let loaded = Arc::new(Loaded::read(&path).unwrap());
    let values = Values::defaults(&loaded.shader, OWN_PROPS);
    let watcher = Watcher::start("isf", &loaded);
    let mut node = IsfNode::new("isf", loaded, values, Some(watcher));
    let gpu = Gpu::open().unwrap();
    let pool = TexturePool::new(64, 48, TexFormat::Rgba8, 1);
    let out = pool.try_acquire(&gpu).unwrap();
    let mut seq = 0;
    let mut frame = |node: &mut IsfNode| {
        let ctx = GpuCtx {
            gl: gpu.gl(),
            frame: FrameCtx::new(seq, 0),
            period_ns: 33_333_333,
            empty_vao: gpu.empty_vao(),
            audio: framepipe_core::FrameAudio::default(),
        };
        seq += 1;
        node.render(&ctx, &[], &out.image()).unwrap();
        let p = read_back_blocking(&gpu, &out.image());
        [p[0], p[1], p[2], p[3]]
    };
    assert_eq!(frame(&mut node), [255, 0, 0, 255]);
    std::fs::write(
        &path,
        "/*{ \"ISFVSN\": \"2\", \"INPUTS\": [\n\
         { \"NAME\": \"gain\", \"TYPE\": \"float\", \"DEFAULT\": 1.0 },\n\
         { \"NAME\": \"blue\", \"TYPE\": \"float\", \"DEFAULT\": 0.5 } ] }*/\n\
         void main() {\n    gl_FragColor = vec4(1.0, 0.0, blue, 1.0) * gain;\n}\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = frame(&mut node);
    while last[2] == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        last = frame(&mut node);
    }
    assert!(
        (127..=128).contains(&last[2]),
        "the new input at its default: {last:?}"
    );
    let msg = node.take_message().expect("the operator is told");
    assert!(
        msg.contains("new inputs (blue)") && msg.contains("replace NODE isf location="),
        "{msg}"
    );
    node.release(gpu.gl());
}
