//! Real-time rule: once a node has made its GL objects, rendering a frame allocates nothing
//! on the GPU thread (Rust allocations, counted; the driver's own are not ours). Checked on a
//! multi-pass shader with persistent, float and sized buffers, watched for reload, and on a
//! gl-transition.

use std::path::Path;
use std::sync::Arc;

use framepipe_core::{Element, FrameCtx, GpuCtx, GpuNode, Props, TexFormat};
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
    for seq in seqs {
        let ctx = GpuCtx {
            gl: gpu.gl(),
            frame: FrameCtx::new(seq, seq as i64 * 33_333_333),
            period_ns: 33_333_333,
            empty_vao: gpu.empty_vao(),
            audio: framepipe_core::FrameAudio::default(),
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

    let inputs = [a.image(), b.image()];
    frames(isf.as_mut(), &gpu, &[], &out.image(), 0..3);
    frames(tr.as_mut(), &gpu, &inputs, &out.image(), 0..3);
    let before = framepipe_testkit::this_thread();
    frames(isf.as_mut(), &gpu, &[], &out.image(), 3..13);
    frames(tr.as_mut(), &gpu, &inputs, &out.image(), 3..13);
    let made = framepipe_testkit::this_thread() - before;
    isf.release(gpu.gl());
    tr.release(gpu.gl());
    assert_eq!(made, 0, "allocations in 20 warm frames");
}
