//! Every transition of the gl-transitions collection (installed by scripts/install-deps)
//! compiles and runs on the machine's GL (llvmpipe in CI), at 64x48; one GL context for all.

use std::sync::Arc;

use framepipe_core::{FrameCtx, GpuCtx, GpuFactory, PropValue, Props, TexFormat};
use framepipe_gpu::transitions::{self, find_json, load, Transition, TransitionFactory};
use framepipe_gpu::{read_back_blocking, Gpu, TexturePool, Uploader};

const W: u32 = 64;
const H: u32 = 48;

fn solid(rgba: [u8; 4]) -> Vec<u8> {
    rgba.repeat((W * H) as usize)
}

fn collection() -> Vec<Arc<Transition>> {
    let file = find_json().unwrap_or_else(|| panic!("{}", transitions::collection::not_found()));
    load(&file).unwrap().into_iter().map(Arc::new).collect()
}

#[test]
fn every_gl_transition_compiles_and_runs_and_goes_from_its_first_input_to_its_second() {
    let all = collection();
    assert!(all.len() >= 100, "only {} transitions", all.len());
    let gpu = Gpu::open().expect("a GL context");
    let pool = TexturePool::new(W, H, TexFormat::Rgba8, 3);
    let (a, b, out) = (
        pool.try_acquire(&gpu).unwrap(),
        pool.try_acquire(&gpu).unwrap(),
        pool.try_acquire(&gpu).unwrap(),
    );
    let mut up = Uploader::new(1);
    let (red, blue) = (solid([255, 0, 0, 255]), solid([0, 0, 255, 255]));
    up.upload_bytes(&gpu, &red, W, H, &a.image()).unwrap();
    up.upload_bytes(&gpu, &blue, W, H, &b.image()).unwrap();
    let inputs = [a.image(), b.image()];
    let mut failed = Vec::new();
    let mut ends_differ = Vec::new();
    for t in &all {
        let element = transitions::element_name(&t.name);
        let props = Props::resolve(&element, &transitions::props(t), &[]).unwrap();
        let factory = TransitionFactory::new(&element, t.clone(), &props).unwrap();
        let mut node = factory.instantiate().unwrap();
        let mut frame = |seq: u64, progress: f64| -> Result<Vec<u8>, String> {
            node.set_property("progress", &PropValue::Float(progress))
                .map_err(|e| e.to_string())?;
            let ctx = GpuCtx {
                gl: gpu.gl(),
                frame: FrameCtx::new(seq, 0),
                period_ns: 33_333_333,
                empty_vao: gpu.empty_vao(),
                audio: framepipe_core::FrameAudio::default(),
            };
            node.render(&ctx, &inputs, &out.image())
                .map_err(|e| e.to_string())?;
            Ok(read_back_blocking(&gpu, &out.image()))
        };
        let result = (|| -> Result<(), String> {
            let start = frame(0, 0.0)?;
            frame(1, 0.5)?;
            let end = frame(2, 1.0)?;
            // GL reports an error the node's calls made (a bad uniform type) here.
            gpu.check("a transition's frame")
                .map_err(|e| e.to_string())?;
            let near = |f: &[u8], c: &[u8]| {
                f.chunks_exact(4)
                    .zip(c.chunks_exact(4))
                    .filter(|(p, q)| p.iter().zip(*q).any(|(x, y)| x.abs_diff(*y) > 8))
                    .count()
            };
            let (s, e) = (near(&start, &red), near(&end, &blue));
            if s + e > 0 {
                ends_differ.push(format!(
                    "{} ({s} pixels at progress 0 are not the first input, {e} at 1 not the second)",
                    t.name
                ));
            }
            Ok(())
        })();
        node.release(gpu.gl());
        if let Err(why) = result {
            failed.push(format!("{}: {why}", t.name));
        }
    }
    up.release(&gpu);
    eprintln!(
        "{} transitions ran; {} do not show exactly their inputs at progress 0 and 1 (their \
         design, not an error): {}",
        all.len() - failed.len(),
        ends_differ.len(),
        ends_differ.join("; ")
    );
    assert!(
        failed.is_empty(),
        "{} of {} gl-transitions fail:\n{}",
        failed.len(),
        all.len(),
        failed.join("\n")
    );
}

#[test]
fn a_transition_is_a_mixer_whose_parameters_are_properties() {
    let all = collection();
    let t = transitions::find(&all, "transition-fadecolor").expect("fadecolor");
    let specs = transitions::props(t);
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["progress", "color", "colorPhase"]);
    assert_eq!(specs[1].default, PropValue::Str("0,0,0".into()));
    // Half way through fadecolor (colorPhase 0.4) both inputs are faded into the colour.
    let (red, blue) = (solid([255, 0, 0, 255]), solid([0, 0, 255, 255]));
    let f = transitions::render_transition(
        t,
        &[("progress", "0.5"), ("color", "0,1,0")],
        (W, H),
        1,
        &red,
        &blue,
    )
    .unwrap();
    let p = &f[0][..4];
    assert!(p[1] > 200 && p[0] < 60 && p[2] < 60, "{p:?}");
    let e =
        transitions::render_transition(t, &[("color", "0,1")], (W, H), 1, &red, &blue).unwrap_err();
    assert!(e.contains("expected 3 number"), "{e}");
}
