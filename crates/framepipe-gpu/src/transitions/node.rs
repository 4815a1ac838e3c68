//! [`TransitionFactory`]: a gl-transition as a two-input GPU mixer, and its node.
//!
//! One pass into the output: `from` (the first input) on texture unit 1, `to` on unit 2,
//! both through a bilinear, clamped sampler; `progress` and the parameters set every frame
//! from the values last set; `ratio` the output's width over its height. Texture unit 0 is
//! left empty, so that a transition's own `sampler2D` uniforms (`luma`, `displacement`: maps
//! the collection gives no picture for) read black rather than an input.
//! Programs are compiled once at negotiate in a context of their own (refused there if they
//! do not compile, [`crate::isf::check`]) and again on the first render.

use std::sync::Arc;

use glow::HasContext;

use framepipe_core::{
    ElementKind, Error, GpuCtx, GpuFactory, GpuImage, GpuNode, Mode, PropValue, Props, Result,
    VideoInfo,
};

use super::collection::{Param, ParamType};
use super::{glsl, Transition};
use crate::isf::gl::{self, Quad, Source};

/// The current values: `progress`, then one per parameter.
#[derive(Debug, Clone)]
struct Values {
    progress: f32,
    params: Vec<[f32; 4]>,
}

/// How a node's properties are named: the property that is `progress`, and those that chose
/// the node's shader (set when it is built, not while it runs).
#[derive(Debug, Clone, Copy)]
pub struct Face {
    /// The property the transition's `progress` is: `progress` for `transition-NAME`,
    /// `fader` for `mix mode=transition`.
    pub amount: &'static str,
    /// Properties that only choose what the node is (`mode`, `transition` of `mix`).
    pub fixed: &'static [&'static str],
}

impl Face {
    /// `transition-NAME`'s: `progress`, nothing fixed.
    pub const ELEMENT: Face = Face {
        amount: "progress",
        fixed: &[],
    };
}

impl Values {
    fn set(
        &mut self,
        t: &Transition,
        face: Face,
        element: &str,
        name: &str,
        v: &PropValue,
    ) -> Result<bool> {
        let bad = |reason: String| Error::BadValue {
            element: element.to_string(),
            prop: name.to_string(),
            value: v.to_string(),
            reason,
        };
        if name == face.amount {
            let p = v.as_f64().ok_or_else(|| bad("expected a number".into()))?;
            self.progress = p.clamp(0.0, 1.0) as f32;
            return Ok(true);
        }
        let Some(i) = t.params.iter().position(|p| p.name == name) else {
            return Ok(false);
        };
        let p: &Param = &t.params[i];
        self.params[i] = p.value(v).ok_or_else(|| {
            bad(format!(
                "expected {} number(s) separated by commas{}",
                p.ty.components(),
                if p.ty == ParamType::IVec2 {
                    " (whole numbers)"
                } else {
                    ""
                }
            ))
        })?;
        Ok(true)
    }
}

/// A gl-transition configured with its properties.
pub struct TransitionFactory {
    element: String,
    face: Face,
    transition: Arc<Transition>,
    source: Arc<Source>,
    values: Values,
}

impl std::fmt::Debug for TransitionFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransitionFactory")
            .field("element", &self.element)
            .finish()
    }
}

impl TransitionFactory {
    /// `element` running `transition` with `props` (resolved against
    /// [`props`](super::props)).
    pub fn new(element: &str, transition: Arc<Transition>, props: &Props) -> Result<Self> {
        Self::with_face(element, Face::ELEMENT, transition, props)
    }

    /// `element` running `transition` with `props`, its properties named as `face` says
    /// (`mix mode=transition`: `fader` is the progress; `mode` and `transition` are ignored
    /// here, they chose the transition).
    pub fn with_face(
        element: &str,
        face: Face,
        transition: Arc<Transition>,
        props: &Props,
    ) -> Result<Self> {
        let mut values = Values {
            progress: 0.0,
            params: transition.params.iter().map(|p| p.default).collect(),
        };
        for (name, v) in props.iter() {
            values.set(&transition, face, element, name, v)?;
        }
        Ok(TransitionFactory {
            element: element.to_string(),
            face,
            source: Arc::new(glsl::source(&transition)),
            transition,
            values,
        })
    }
}

impl GpuFactory for TransitionFactory {
    fn name(&self) -> &str {
        &self.element
    }

    fn kind(&self) -> ElementKind {
        ElementKind::Mixer {
            min_inputs: 2,
            max_inputs: 2,
        }
    }

    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }

    fn negotiate(&mut self, inputs: &[VideoInfo]) -> Result<VideoInfo> {
        if inputs.len() != 2 {
            return Err(Error::Pipeline(format!(
                "{} takes 2 inputs (from, to), not {}",
                self.element,
                inputs.len()
            )));
        }
        crate::isf::check::compiles(&self.source)
            .map_err(|e| Error::element(self.element.clone(), e))?;
        Ok(inputs[0])
    }

    fn instantiate(&self) -> Result<Box<dyn GpuNode>> {
        Ok(Box::new(TransitionNode {
            element: self.element.clone(),
            face: self.face,
            transition: self.transition.clone(),
            source: self.source.clone(),
            values: self.values.clone(),
            gl: None,
        }))
    }
}

/// A node's GL objects.
#[derive(Debug)]
struct Gl {
    program: glow::Program,
    quad: Quad,
    fbo: glow::Framebuffer,
    sampler: glow::Sampler,
    from: Option<glow::UniformLocation>,
    to: Option<glow::UniformLocation>,
    progress: Option<glow::UniformLocation>,
    ratio: Option<glow::UniformLocation>,
    params: Vec<Option<glow::UniformLocation>>,
}

/// A running gl-transition.
struct TransitionNode {
    element: String,
    face: Face,
    transition: Arc<Transition>,
    source: Arc<Source>,
    values: Values,
    gl: Option<Gl>,
}

fn make_gl(gl: &glow::Context, t: &Transition, src: &Source) -> std::result::Result<Gl, String> {
    let program = gl::compile(gl, src)?;
    let loc = |name: &str| {
        // SAFETY: `program` is a linked program of this context.
        unsafe { gl.get_uniform_location(program, name) }
    };
    // SAFETY: the context is current on this thread.
    let fbo = unsafe { gl.create_framebuffer()? };
    Ok(Gl {
        from: loc("from"),
        to: loc("to"),
        progress: loc("progress"),
        ratio: loc("ratio"),
        params: t.params.iter().map(|p| loc(&p.name)).collect(),
        quad: Quad::new(gl)?,
        sampler: gl::linear_sampler(gl)?,
        fbo,
        program,
    })
}

impl GpuNode for TransitionNode {
    fn render(&mut self, gpu: &GpuCtx<'_>, inputs: &[GpuImage], output: &GpuImage) -> Result<()> {
        let gl = gpu.gl;
        if self.gl.is_none() {
            let state = make_gl(gl, &self.transition, &self.source)
                .map_err(|e| Error::element(self.element.clone(), e))?;
            self.gl = Some(state);
        }
        let (Some(st), [from, to, ..]) = (self.gl.as_ref(), inputs) else {
            return Err(Error::element(
                self.element.clone(),
                format!("2 inputs needed, {} given", inputs.len()),
            ));
        };
        // SAFETY: the context is current on this (the GPU executor's) thread; the program,
        // framebuffer, sampler and quad are this node's, the textures the call's; the state
        // changed here is put back at the end.
        unsafe {
            gl.disable(glow::BLEND);
            gl.disable(glow::DEPTH_TEST);
            gl.disable(glow::SCISSOR_TEST);
            gl.disable(glow::CULL_FACE);
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(st.fbo));
            gl.framebuffer_texture_2d(
                glow::FRAMEBUFFER,
                glow::COLOR_ATTACHMENT0,
                glow::TEXTURE_2D,
                Some(output.texture),
                0,
            );
            gl.viewport(0, 0, output.width as i32, output.height as i32);
            gl.use_program(Some(st.program));
            st.quad.bind(gl);
            for (unit, img, loc) in [(1u32, from, &st.from), (2, to, &st.to)] {
                gl.active_texture(glow::TEXTURE0 + unit);
                gl.bind_texture(glow::TEXTURE_2D, Some(img.texture));
                gl.bind_sampler(unit, Some(st.sampler));
                gl.uniform_1_i32(loc.as_ref(), unit as i32);
            }
            gl.uniform_1_f32(st.progress.as_ref(), self.values.progress);
            gl.uniform_1_f32(
                st.ratio.as_ref(),
                output.width as f32 / output.height.max(1) as f32,
            );
            for ((p, v), loc) in self
                .transition
                .params
                .iter()
                .zip(&self.values.params)
                .zip(&st.params)
            {
                let loc = loc.as_ref();
                match p.ty {
                    ParamType::Float => gl.uniform_1_f32(loc, v[0]),
                    ParamType::Int | ParamType::Bool => gl.uniform_1_i32(loc, v[0] as i32),
                    ParamType::Vec2 => gl.uniform_2_f32(loc, v[0], v[1]),
                    ParamType::Vec3 => gl.uniform_3_f32(loc, v[0], v[1], v[2]),
                    ParamType::Vec4 => gl.uniform_4_f32(loc, v[0], v[1], v[2], v[3]),
                    ParamType::IVec2 => gl.uniform_2_i32(loc, v[0] as i32, v[1] as i32),
                }
            }
            st.quad.draw(gl);
            for unit in [1u32, 2] {
                gl.active_texture(glow::TEXTURE0 + unit);
                gl.bind_texture(glow::TEXTURE_2D, None);
                gl.bind_sampler(unit, None);
            }
            gl.active_texture(glow::TEXTURE0);
            gl.framebuffer_texture_2d(
                glow::FRAMEBUFFER,
                glow::COLOR_ATTACHMENT0,
                glow::TEXTURE_2D,
                None,
                0,
            );
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            gl.use_program(None);
            gl.bind_vertex_array(Some(gpu.empty_vao));
        }
        Ok(())
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        if self.face.fixed.contains(&name) {
            return Err(Error::BadValue {
                element: self.element.clone(),
                prop: name.to_string(),
                value: value.to_string(),
                reason: format!(
                    "{name} chooses the node's shader and cannot change while it runs; \
                     replace the node (replace NODE {} mode=... transition=...)",
                    self.element
                ),
            });
        }
        if self
            .values
            .set(&self.transition, self.face, &self.element, name, value)?
        {
            Ok(())
        } else {
            Err(Error::UnknownProperty {
                element: self.element.clone(),
                prop: name.to_string(),
                expected: std::iter::once(self.face.amount)
                    .chain(self.transition.params.iter().map(|p| p.name.as_str()))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    }

    fn release(&mut self, gl: &glow::Context) {
        if let Some(st) = self.gl.take() {
            // SAFETY: every object is this node's, made on this context, not used after this.
            unsafe {
                gl.delete_program(st.program);
                gl.delete_framebuffer(st.fbo);
                gl.delete_sampler(st.sampler);
            }
            st.quad.delete(gl);
        }
    }
}
