//! Real-time rule: once a node has made its GL objects, rendering a frame allocates nothing
//! on the GPU thread (Rust allocations, counted; the driver's own are not ours). Checked on a
//! multi-pass shader with persistent, float and sized buffers, watched for reload, on a
//! shader with `audio` and `audioFFT` inputs fed a frame's audio, and on a gl-transition.

use std::path::Path;
use std::sync::Arc;

use framepipe_core::{Element, FrameAudio, FrameCtx, GpuCtx, GpuNode, Props, TexFormat};
use framepipe_gpu::{Gpu, TexturePool};
use framepipe_testkit::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn frames(
    node: &mut dyn GpuNode,
    gpu: &Gpu,
    inputs: &[framepipe_core::GpuImage],
    out: &framepipe_core::GpuImage,
    seqs: std::ops::Range<u64>,
) {
    frames_with(node, gpu, inputs, out, seqs, FrameAudio::default());
}

fn frames_with(
    node: &mut dyn GpuNode,
    gpu: &Gpu,
    inputs: &[framepipe_core::GpuImage],
    out: &framepipe_core::GpuImage,
    seqs: std::ops::Range<u64>,
    audio: FrameAudio<'_>,
) {
    for seq in seqs {
        let ctx = GpuCtx {
            gl: gpu.gl(),
            frame: FrameCtx::new(seq, seq as i64 * 33_333_333),
            period_ns: 33_333_333,
            empty_vao: gpu.empty_vao(),
            audio,
        };
        node.render(&ctx, inputs, out).unwrap();
    }
}

#[test]
fn rendering_a_frame_allocates_nothing_once_warm() {
    let gpu = Gpu::open().unwrap();
    let pool = TexturePool::new(64, 48, TexFormat::Rgba8, 3);
    let (a, b, out) = (
        pool.try_acquire(&gpu).unwrap(),
        pool.try_acquire(&gpu).unwrap(),
        pool.try_acquire(&gpu).unwrap(),
    );

    let fs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/isf/passes.fs");
    let given = [("location".to_string(), fs.display().to_string())];
    let entry = framepipe_gpu::isf::file_entry("isf", &given)
        .unwrap()
        .unwrap();
    // A source: 64x48 from its properties.
    let given_size = [
        ("location".to_string(), fs.display().to_string()),
        ("width".to_string(), "64".to_string()),
        ("height".to_string(), "48".to_string()),
    ];
    let props = Props::resolve("isf", &entry.desc.props, &given_size).unwrap();
    let Element::Gpu(mut f) = (entry.build)(&props).unwrap() else {
        panic!("not a GPU element")
    };
    f.negotiate(&[]).unwrap();
    let mut isf = f.instantiate().unwrap();

    let file = framepipe_gpu::transitions::find_json()
        .unwrap_or_else(|| panic!("{}", framepipe_gpu::transitions::collection::not_found()));
    let all: Vec<_> = framepipe_gpu::transitions::load(&file)
        .unwrap()
        .into_iter()
        .map(Arc::new)
        .collect();
    let t = framepipe_gpu::transitions::find(&all, "crosswarp").unwrap();
    let tprops = Props::resolve("t", &framepipe_gpu::transitions::props(t), &[]).unwrap();
    let tf = framepipe_gpu::transitions::TransitionFactory::new("t", t.clone(), &tprops).unwrap();
    let mut tr = framepipe_core::GpuFactory::instantiate(&tf).unwrap();

    // An effect with audio inputs, fed a waveform and a spectrum (ISF audio/audioFFT).
    let fs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/isf/inputs.fs");
    let given = [("location".to_string(), fs.display().to_string())];
    let entry = framepipe_gpu::isf::file_entry("isf", &given)
        .unwrap()
        .unwrap();
    let props = Props::resolve("isf", &entry.desc.props, &[]).unwrap();
    let Element::Gpu(mut f) = (entry.build)(&props).unwrap() else {
        panic!("not a GPU element")
    };
    f.negotiate(&[framepipe_core::VideoInfo {
        width: 64,
        height: 48,
        rate: framepipe_core::Rational::new(30, 1),
    }])
    .unwrap();
    let mut heard = f.instantiate().unwrap();
    let wave: Vec<f32> = (0..2048).map(|i| (i as f32 * 0.01).sin()).collect();
    let fft: Vec<f32> = (0..1024).map(|i| 1.0 / (1.0 + i as f32)).collect();
    let audio = FrameAudio {
        wave: &wave,
        fft: &fft,
        sample_rate: 48_000,
    };

    let inputs = [a.image(), b.image()];
    frames(isf.as_mut(), &gpu, &[], &out.image(), 0..3);
    frames(tr.as_mut(), &gpu, &inputs, &out.image(), 0..3);
    frames_with(
        heard.as_mut(),
        &gpu,
        &inputs[..1],
        &out.image(),
        0..3,
        audio,
    );
    let before = framepipe_testkit::this_thread();
    frames(isf.as_mut(), &gpu, &[], &out.image(), 3..13);
    frames(tr.as_mut(), &gpu, &inputs, &out.image(), 3..13);
    frames_with(
        heard.as_mut(),
        &gpu,
        &inputs[..1],
        &out.image(),
        3..13,
        audio,
    );
    let made = framepipe_testkit::this_thread() - before;
    isf.release(gpu.gl());
    tr.release(gpu.gl());
    heard.release(gpu.gl());
    assert_eq!(made, 0, "allocations in 30 warm frames");
}
