//! GPU nodes in a graph, on the real GL of the machine (Mesa's llvmpipe in CI): a chain CPU →
//! GPU nodes → CPU runs through one upload and one download per frame, with the pixels the
//! test computes; the output does not depend on the worker count; a GPU node that fails at
//! render is bypassed and the show finishes. The GPU element is the test's own: a real shader
//! (add a constant to every channel, or invert), whose result is exact in 8 bits.
#![allow(unsafe_code)] // the test's shader element calls GL (see `AddNode::render`)

mod common;

use std::sync::{Arc, Mutex};

use framepipe_core::gpu::glow::{self, HasContext};
use framepipe_core::gpu::{GpuCtx, GpuFactory, GpuImage, GpuNode};
use framepipe_core::{
    ElementKind, Error, Frame, FrameCtx, Mode, PropKind, PropSpec, PropValue, Result, Sink,
    VideoInfo,
};
use framepipe_runtime::{Event, GpuStage, Graph, Node, NodeKind, OnEnd, Options, RunStats};

use common::{counter, H, W};

/// What the test's shader does to each of R, G, B (alpha is kept).
#[derive(Clone, Copy, Debug)]
enum Op {
    Add(f32),
    Invert,
}

impl Op {
    fn apply(self, v: u8) -> u8 {
        match self {
            Op::Add(k) => (f32::from(v) + k).clamp(0.0, 255.0) as u8,
            Op::Invert => 255 - v,
        }
    }
}

/// A GPU effect: `Op` on every pixel, `add` a live property; fails at render on frame
/// `fail_at`.
struct AddFactory {
    op: Op,
    fail_at: Option<u64>,
}

impl GpuFactory for AddFactory {
    fn name(&self) -> &str {
        "gpu-add"
    }
    fn kind(&self) -> ElementKind {
        ElementKind::Effect
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, inputs: &[VideoInfo]) -> Result<VideoInfo> {
        Ok(inputs[0])
    }
    fn instantiate(&self) -> Result<Box<dyn GpuNode>> {
        Ok(Box::new(AddNode {
            op: self.op,
            fail_at: self.fail_at,
            gl: None,
        }))
    }
}

struct AddNode {
    op: Op,
    fail_at: Option<u64>,
    gl: Option<(glow::Program, glow::Framebuffer)>,
}

const VS: &str = "#version 330 core
void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}";

const FS: &str = "#version 330 core
uniform sampler2D src;
uniform float add;
uniform int invert;
out vec4 color;
void main() {
    vec4 c = texelFetch(src, ivec2(gl_FragCoord.xy), 0);
    color = invert != 0 ? vec4(1.0 - c.rgb, c.a) : vec4(c.rgb + add / 255.0, c.a);
}";

impl AddNode {
    fn make(gl: &glow::Context) -> Result<(glow::Program, glow::Framebuffer)> {
        let err = |e: String| Error::Pipeline(format!("gpu-add: {e}"));
        // SAFETY: called on the GPU thread with its context current (GpuNode's contract);
        // every object used is made here, from that context.
        unsafe {
            let program = gl.create_program().map_err(err)?;
            for (kind, src) in [(glow::VERTEX_SHADER, VS), (glow::FRAGMENT_SHADER, FS)] {
                let s = gl.create_shader(kind).map_err(err)?;
                gl.shader_source(s, src);
                gl.compile_shader(s);
                if !gl.get_shader_compile_status(s) {
                    return Err(err(gl.get_shader_info_log(s)));
                }
                gl.attach_shader(program, s);
                gl.delete_shader(s);
            }
            gl.link_program(program);
            if !gl.get_program_link_status(program) {
                return Err(err(gl.get_program_info_log(program)));
            }
            let fbo = gl.create_framebuffer().map_err(err)?;
            Ok((program, fbo))
        }
    }
}

impl GpuNode for AddNode {
    fn render(&mut self, gpu: &GpuCtx<'_>, inputs: &[GpuImage], output: &GpuImage) -> Result<()> {
        if self.fail_at == Some(gpu.frame.seq) {
            return Err(Error::Pipeline("gpu-add: failing on purpose".into()));
        }
        let gl = gpu.gl;
        if self.gl.is_none() {
            self.gl = Some(Self::make(gl)?);
        }
        let (program, fbo) = self.gl.expect("made above");
        // SAFETY: on the GPU thread with its context current; `program` and `fbo` are this
        // node's, the textures the runtime's, all of that context.
        unsafe {
            gl.bind_framebuffer(glow::DRAW_FRAMEBUFFER, Some(fbo));
            gl.framebuffer_texture_2d(
                glow::DRAW_FRAMEBUFFER,
                glow::COLOR_ATTACHMENT0,
                glow::TEXTURE_2D,
                Some(output.texture),
                0,
            );
            gl.viewport(0, 0, output.width as i32, output.height as i32);
            gl.use_program(Some(program));
            gl.active_texture(glow::TEXTURE0);
            gl.bind_texture(glow::TEXTURE_2D, Some(inputs[0].texture));
            gl.uniform_1_i32(gl.get_uniform_location(program, "src").as_ref(), 0);
            let (add, invert) = match self.op {
                Op::Add(k) => (k, 0),
                Op::Invert => (0.0, 1),
            };
            gl.uniform_1_f32(gl.get_uniform_location(program, "add").as_ref(), add);
            gl.uniform_1_i32(gl.get_uniform_location(program, "invert").as_ref(), invert);
            gl.draw_arrays(glow::TRIANGLES, 0, 3);
            gl.bind_texture(glow::TEXTURE_2D, None);
            gl.bind_framebuffer(glow::DRAW_FRAMEBUFFER, None);
        }
        Ok(())
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        match (name, value, &mut self.op) {
            ("add", PropValue::Float(v), Op::Add(k)) => {
                *k = *v as f32;
                Ok(())
            }
            _ => Err(Error::Pipeline(format!("gpu-add: cannot set {name}"))),
        }
    }

    fn release(&mut self, gl: &glow::Context) {
        if let Some((program, fbo)) = self.gl.take() {
            // SAFETY: on the GPU thread with its context current; both are this node's.
            unsafe {
                gl.delete_program(program);
                gl.delete_framebuffer(fbo);
            }
        }
    }
}

/// A GPU node doing `op`, with `add` as a live property.
fn gpu_node(name: &str, op: Op, fail_at: Option<u64>, input: usize) -> Node {
    let mut stage = GpuStage::new(Box::new(AddFactory { op, fail_at }));
    if let Op::Add(k) = op {
        stage.params = vec![(
            PropSpec::new(
                "add",
                PropKind::Float {
                    min: -255.0,
                    max: 255.0,
                },
                PropValue::Float(f64::from(k)),
                "added to R, G and B",
            ),
            PropValue::Float(f64::from(k)),
        )];
    }
    Node::new(name, NodeKind::Gpu(stage), vec![input])
}

/// Keeps every frame's bytes, in order.
#[derive(Clone, Default)]
struct Keep(Arc<Mutex<Vec<Vec<u8>>>>);

impl Sink for Keep {
    fn start(&mut self, info: VideoInfo) -> Result<()> {
        assert_eq!((info.width, info.height), (W, H));
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        let mut got = self.0.lock().unwrap();
        assert_eq!(ctx.seq, got.len() as u64, "frames in order");
        got.push(frame.data().to_vec());
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// The source's frame `n`: every pixel the word `SALT + n` (R = 0x10 + n, G, B, A).
const SALT: u32 = 0x4030_2010;

fn source_pixel(n: u64) -> [u8; 4] {
    (SALT + n as u32).to_le_bytes()
}

/// `frames` frames of counter → GPU ops → sink, on `threads` workers.
fn run_chain(ops: &[(Op, Option<u64>)], frames: u64, threads: usize) -> (Vec<Vec<u8>>, RunStats) {
    let keep = Keep::default();
    let mut nodes = vec![Node::new(
        "src",
        NodeKind::Source {
            source: counter(SALT, frames),
            on_end: OnEnd::Stop,
        },
        vec![],
    )];
    for (k, &(op, fail_at)) in ops.iter().enumerate() {
        nodes.push(gpu_node(&format!("g{k}"), op, fail_at, k));
    }
    let last = nodes.len() - 1;
    nodes.push(Node::new(
        "out",
        NodeKind::Sink {
            sink: Box::new(keep.clone()),
            master: false,
        },
        vec![last],
    ));
    let graph = Graph::new(nodes).expect("a valid graph");
    let options = Options {
        threads,
        ..Options::default()
    };
    let stats = graph
        .prepare(options)
        .expect("prepared")
        .run()
        .expect("ran");
    let got = keep.0.lock().unwrap().clone();
    (got, stats)
}

fn expected(n: u64, ops: &[Op]) -> [u8; 4] {
    let mut px = source_pixel(n);
    for op in ops {
        for c in &mut px[..3] {
            *c = op.apply(*c);
        }
    }
    px
}

fn frames_of(stats: &RunStats, name: &str) -> u64 {
    stats
        .stages
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stage {name}: {:?}", stats.stages))
        .frames
}

#[test]
fn a_chain_of_three_gpu_nodes_uploads_and_downloads_once_per_frame_with_exact_pixels() {
    let ops = [Op::Add(10.0), Op::Add(20.0), Op::Invert];
    let chain: Vec<_> = ops.iter().map(|&o| (o, None)).collect();
    let frames = 6;
    let (got, stats) = run_chain(&chain, frames, 2);
    assert_eq!(got.len(), frames as usize);
    for (n, bytes) in got.iter().enumerate() {
        let want = expected(n as u64, &ops);
        assert!(
            bytes.chunks(4).all(|px| px == want),
            "frame {n}: got {:?}, want {want:?}",
            &bytes[..4]
        );
    }
    // One transfer each way, each run once per frame; the GPU nodes between them copy
    // nothing.
    let names: Vec<&str> = stats.stages.iter().map(|s| &*s.name).collect();
    assert_eq!(
        names,
        ["src", "src:upload", "g0", "g1", "g2", "g2:download", "out"],
        "the plan's transfers"
    );
    assert_eq!(frames_of(&stats, "src:upload"), frames);
    assert_eq!(frames_of(&stats, "g2:download"), frames);
    let gpu = stats
        .gpu
        .as_ref()
        .expect("a show with GPU nodes reports its GPU");
    assert_eq!((gpu.uploads, gpu.downloads), (frames, frames));
    assert_eq!((gpu.uploads_per_frame, gpu.downloads_per_frame), (1.0, 1.0));
    // Each GPU node's time on the GPU (timer queries, read without waiting): measured for
    // at least some frames.
    for g in ["g0", "g1", "g2"] {
        let st = stats.stages.iter().find(|s| s.name == g).unwrap();
        assert!(st.gpu_ms.is_some_and(|ms| ms >= 0.0), "{g}: {st:?}");
    }
}

/// Counter → GPU `a` → CPU invert → GPU `b` → sink: two uploads and two downloads per frame.
fn run_gpu_cpu_gpu(frames: u64, threads: usize) -> Vec<Vec<u8>> {
    let keep = Keep::default();
    let invert = framepipe_runtime::EffectStage::new(
        Box::new(framepipe_effects::invert::InvertFactory),
        Mode::Parallel,
    );
    let nodes = vec![
        Node::new(
            "src",
            NodeKind::Source {
                source: moving(frames),
                on_end: OnEnd::Stop,
            },
            vec![],
        ),
        gpu_node("a", Op::Add(-20.0), None, 0),
        Node::new("cpu", NodeKind::Effect(invert), vec![1]),
        gpu_node("b", Op::Invert, None, 2),
        Node::new(
            "out",
            NodeKind::Sink {
                sink: Box::new(keep.clone()),
                master: false,
            },
            vec![3],
        ),
    ];
    Graph::new(nodes)
        .unwrap()
        .prepare(Options {
            threads,
            ..Options::default()
        })
        .unwrap()
        .run()
        .unwrap();
    let got = keep.0.lock().unwrap().clone();
    got
}

/// A source whose frames all differ pixel by pixel: frame n, pixel p has R = n * 40 + p.
fn moving(frames: u64) -> Box<dyn framepipe_core::Source> {
    struct Moving(u64, u64);
    impl framepipe_core::Source for Moving {
        fn info(&self) -> VideoInfo {
            VideoInfo {
                width: W,
                height: H,
                rate: framepipe_core::Rational::new(30, 1),
            }
        }
        fn len_hint(&self) -> Option<u64> {
            Some(self.1)
        }
        fn fill(&mut self, _ctx: &FrameCtx, frame: &mut framepipe_core::FrameMut) -> Result<bool> {
            if self.0 >= self.1 {
                return Ok(false);
            }
            let n = self.0;
            for (p, px) in frame.data_mut().chunks_mut(4).enumerate() {
                px.copy_from_slice(&[(n * 40 + p as u64) as u8, 100, (n * 7) as u8, 255]);
            }
            self.0 += 1;
            Ok(true)
        }
    }
    Box::new(Moving(0, frames))
}

#[test]
fn frames_going_gpu_cpu_gpu_keep_their_order_and_pixels() {
    let reference = run_gpu_cpu_gpu(5, 1);
    for _ in 0..20 {
        assert_eq!(run_gpu_cpu_gpu(5, 2), reference);
    }
}

#[test]
fn gpu_output_does_not_depend_on_the_worker_count() {
    let chain = [(Op::Add(7.0), None), (Op::Invert, None)];
    let (one, _) = run_chain(&chain, 5, 1);
    let (three, _) = run_chain(&chain, 5, 3);
    assert_eq!(one.len(), 5);
    assert_eq!(one, three);
}

#[test]
fn a_gpu_node_failing_at_render_is_bypassed_and_the_show_finishes() {
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let ops = [Op::Add(10.0), Op::Add(100.0)];
    let keep = Keep::default();
    let nodes = vec![
        Node::new(
            "src",
            NodeKind::Source {
                source: counter(SALT, 5),
                on_end: OnEnd::Stop,
            },
            vec![],
        ),
        gpu_node("g0", ops[0], None, 0),
        gpu_node("g1", ops[1], Some(2), 1),
        Node::new(
            "out",
            NodeKind::Sink {
                sink: Box::new(keep.clone()),
                master: false,
            },
            vec![2],
        ),
    ];
    let mut p = Graph::new(nodes)
        .unwrap()
        .prepare(Options {
            threads: 2,
            in_flight: 1,
            ..Options::default()
        })
        .unwrap();
    let ev = Arc::clone(&events);
    p.set_events(Arc::new(move |e: &Event| {
        ev.lock().unwrap().push(e.clone())
    }));
    p.run().expect("the show goes on");
    let got = keep.0.lock().unwrap().clone();
    assert_eq!(got.len(), 5);
    for (n, bytes) in got.iter().enumerate() {
        // g1 works on frames 0 and 1, fails on 2 and is bypassed from then on.
        let want = if n < 2 {
            expected(n as u64, &ops)
        } else {
            expected(n as u64, &ops[..1])
        };
        assert_eq!(&bytes[..4], &want, "frame {n}");
    }
    let failed: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::GpuNodeFailed { stage, frame, .. } => Some((stage.to_string(), *frame)),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [("g1".to_string(), 2)], "reported once, by node");
}
