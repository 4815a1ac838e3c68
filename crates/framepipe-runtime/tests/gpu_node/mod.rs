//! The GPU tests' own GPU element: a real shader (add a constant to every channel, or
//! invert), whose result is exact in 8 bits; a sink keeping every frame's bytes; the counting
//! source's pixels. Shared by `gpu.rs` and `gpu_edits.rs`.
#![allow(dead_code)] // each test file uses its own subset
#![allow(unsafe_code)] // the shader element calls GL (see `AddNode::render`)

use std::sync::{Arc, Mutex};

use framepipe_core::gpu::glow::{self, HasContext};
use framepipe_core::gpu::{GpuCtx, GpuFactory, GpuImage, GpuNode};
use framepipe_core::{
    ElementKind, Error, Frame, FrameCtx, Mode, PropKind, PropSpec, PropValue, Result, Sink,
    VideoInfo,
};
use framepipe_runtime::{GpuStage, Node, NodeKind};

use crate::common::{H, W};
/// What the test's shader does to each of R, G, B (alpha is kept).
#[derive(Clone, Copy, Debug, Default)]
pub enum Op {
    #[default]
    Nothing,
    Add(f32),
    Invert,
}

impl Op {
    pub fn apply(self, v: u8) -> u8 {
        match self {
            Op::Add(k) => (f32::from(v) + k).clamp(0.0, 255.0) as u8,
            Op::Invert => 255 - v,
            Op::Nothing => v,
        }
    }
}

/// A GPU effect: `Op` on every pixel, `add` a live property; fails at render on frame
/// `fail_at`.
#[derive(Default)]
pub struct AddFactory {
    pub op: Op,
    pub fail_at: Option<u64>,
    /// Sleeps this long at render on this frame (a GPU node that hangs).
    pub stall: Option<(u64, std::time::Duration)>,
    /// GPU memory it says an instance keeps besides its output.
    pub own_bytes: u64,
}

/// The threads `release` was called on, one entry per call of a node that had rendered.
pub static RELEASED_ON: Mutex<Vec<String>> = Mutex::new(Vec::new());

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
    fn gpu_bytes(&self) -> u64 {
        self.own_bytes
    }
    fn instantiate(&self) -> Result<Box<dyn GpuNode>> {
        Ok(Box::new(AddNode {
            op: self.op,
            fail_at: self.fail_at,
            stall: self.stall,
            gl: None,
        }))
    }
}

struct AddNode {
    op: Op,
    fail_at: Option<u64>,
    stall: Option<(u64, std::time::Duration)>,
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
        if let Some((seq, d)) = self.stall {
            if seq == gpu.frame.seq {
                std::thread::sleep(d);
            }
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
                Op::Nothing => (0.0, 0),
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
            let thread = std::thread::current().name().unwrap_or("").to_string();
            RELEASED_ON.lock().unwrap().push(thread);
            // SAFETY: on the GPU thread with its context current; both are this node's.
            unsafe {
                gl.delete_program(program);
                gl.delete_framebuffer(fbo);
            }
        }
    }
}

/// A GPU node doing `op`, with `add` as a live property.
pub fn gpu_node(name: &str, op: Op, fail_at: Option<u64>, input: usize) -> Node {
    gpu_node_with(
        name,
        AddFactory {
            op,
            fail_at,
            ..AddFactory::default()
        },
        input,
    )
}

/// A GPU node of `factory`, with `add` as a live property when it adds.
pub fn gpu_node_with(name: &str, factory: AddFactory, input: usize) -> Node {
    let op = factory.op;
    let mut stage = GpuStage::new(Box::new(factory));
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
pub struct Keep(pub Arc<Mutex<Vec<Vec<u8>>>>);

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
pub const SALT: u32 = 0x4030_2010;

pub fn source_pixel(n: u64) -> [u8; 4] {
    (SALT + n as u32).to_le_bytes()
}
