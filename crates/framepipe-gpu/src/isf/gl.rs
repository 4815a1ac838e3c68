//! The GL pieces a shader node is made of, shared by ISF shaders and gl-transitions: a program
//! compiled from generated GLSL with the compiler's log mapped to the author's lines, the
//! covering quad, a linear clamp sampler, and textures of its own (pass buffers, imported
//! images).
//!
//! Every function here runs on the thread whose context is current (the GPU executor's, or a
//! check's own short-lived context) and makes or frees GL objects; none waits on the GPU.

use glow::HasContext;

use framepipe_core::TexFormat;

/// A compiled and linked program's source: the two stages and, for the compiler's log, how
/// to name their lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// The generated shaders and their line maps.
    pub program: framepipe_isf::Program,
    /// How the fragment shader's file is named in messages (`blur.fs`).
    pub fragment_file: String,
    /// How the vertex shader's file is named in messages (`blur.vs`, or `blur.fs (default
    /// vertex shader)`).
    pub vertex_file: String,
}

/// Compiles and links `src`. The error is the compiler's (or linker's) log with every
/// location rewritten to the author's file and line ([`framepipe_isf::LineMap::map_log`]).
///
/// A program that does not compile as `#version 330` is tried once more as `#version 400`
/// where the context has GL 4 (llvmpipe and the GPU drivers do): GLSL 4.00 converts ints to
/// uints and a few other things that shaders written for lenient compilers rely on. The error
/// shown is the 330 one.
///
/// On an OpenGL ES context the program is compiled as GLSL ES 3.00 ([`for_gles`]).
pub fn compile(gl: &glow::Context, src: &Source) -> Result<glow::Program, String> {
    if gl.version().is_embedded {
        return compile_as(gl, &for_gles(src));
    }
    let first = compile_as(gl, src);
    let Err(why) = first else { return first };
    let version = gl.version();
    let prefix = framepipe_isf::glsl::GLSL_VERSION;
    let retry = !version.is_embedded
        && version.major >= 4
        && src.program.fragment.starts_with(prefix)
        && src.program.vertex.starts_with(prefix);
    if !retry {
        return Err(why);
    }
    let mut v400 = src.clone();
    for text in [&mut v400.program.fragment, &mut v400.program.vertex] {
        text.replace_range(..prefix.len(), "#version 400");
    }
    compile_as(gl, &v400).map_err(|_| why)
}

/// The program as GLSL ES 3.00, for an OpenGL ES 3 context: the first line `#version 330`
/// becomes `#version 300 es`, and one line of default precisions (`highp` float, int and
/// sampler2D: ES has no default float precision in fragment shaders, and lowp samplers) goes
/// after the directives that open the shader (the version, `#extension` lines). The line maps
/// gain that line, so the compiler's messages still name the author's lines. GLSL 330 and
/// GLSL ES 3.00 share the rest of what the assembly writes (`in`/`out`, `texture`, an `out
/// vec4`); an author's GLSL that desktop GL accepts and ES does not (implicit int to float
/// conversions, `double`) is refused by the compiler with its line.
pub fn for_gles(src: &Source) -> Source {
    let mut out = src.clone();
    let p = &mut out.program;
    for (text, map) in [
        (&mut p.vertex, &mut p.vertex_lines),
        (&mut p.fragment, &mut p.fragment_lines),
    ] {
        let Some(rest) = text.strip_prefix(framepipe_isf::glsl::GLSL_VERSION) else {
            continue;
        };
        let mut lines: Vec<&str> = std::iter::once("#version 300 es")
            .chain(rest.split('\n').skip(1))
            .collect();
        // After the opening directives: the version line, then any `#extension` lines.
        let at = 1 + lines[1..]
            .iter()
            .take_while(|l| l.trim_start().starts_with("#extension"))
            .count();
        lines.insert(
            at,
            "precision highp float; precision highp int; precision highp sampler2D;",
        );
        let joined = lines.join("\n");
        let mut sources: Vec<u32> = (1..=map.len() as u32)
            .map(|l| map.to_source(l).unwrap_or(0))
            .collect();
        if !sources.is_empty() {
            sources.insert(at.min(sources.len()), 0);
            *map = framepipe_isf::LineMap::new(sources);
        }
        *text = joined;
    }
    out
}

fn compile_as(gl: &glow::Context, src: &Source) -> Result<glow::Program, String> {
    let stage = |kind: u32, text: &str| -> Result<glow::Shader, String> {
        // SAFETY: the context is current on this thread (module contract); the shader object
        // is made, given its source and compiled here, and deleted on failure.
        unsafe {
            let sh = gl.create_shader(kind)?;
            gl.shader_source(sh, text);
            gl.compile_shader(sh);
            if gl.get_shader_compile_status(sh) {
                Ok(sh)
            } else {
                let log = gl.get_shader_info_log(sh);
                gl.delete_shader(sh);
                Err(log)
            }
        }
    };
    let p = &src.program;
    let vs = stage(glow::VERTEX_SHADER, &p.vertex).map_err(|log| {
        format!(
            "the vertex shader does not compile:\n{}",
            p.vertex_lines.map_log(log.trim_end(), &src.vertex_file)
        )
    })?;
    let fs = match stage(glow::FRAGMENT_SHADER, &p.fragment) {
        Ok(fs) => fs,
        Err(log) => {
            // SAFETY: `vs` was made above on this context and is no longer needed.
            unsafe { gl.delete_shader(vs) };
            return Err(format!(
                "the shader does not compile:\n{}",
                p.fragment_lines.map_log(log.trim_end(), &src.fragment_file)
            ));
        }
    };
    // SAFETY: both shaders are valid objects of this context; the program is made, linked,
    // and the shaders detached and deleted (the program keeps what it needs); a program that
    // does not link is deleted.
    unsafe {
        let prog = gl.create_program()?;
        gl.attach_shader(prog, vs);
        gl.attach_shader(prog, fs);
        gl.link_program(prog);
        gl.detach_shader(prog, vs);
        gl.detach_shader(prog, fs);
        gl.delete_shader(vs);
        gl.delete_shader(fs);
        if gl.get_program_link_status(prog) {
            Ok(prog)
        } else {
            let log = gl.get_program_info_log(prog);
            gl.delete_program(prog);
            Err(format!(
                "the shader does not link:\n{}",
                p.fragment_lines.map_log(log.trim_end(), &src.fragment_file)
            ))
        }
    }
}

/// Two triangles covering clip space (a strip of four vertices) in attribute 0,
/// [`framepipe_isf::glsl::VERTEX_POSITION`].
#[derive(Debug)]
pub struct Quad {
    vao: glow::VertexArray,
    vbo: glow::Buffer,
}

impl Quad {
    /// Makes the vertex array and its buffer (leaves the new vertex array bound).
    pub fn new(gl: &glow::Context) -> Result<Quad, String> {
        const CORNERS: [f32; 8] = [-1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0];
        let bytes: Vec<u8> = CORNERS.iter().flat_map(|f| f.to_ne_bytes()).collect();
        // SAFETY: the context is current; the objects are made and filled here and owned by
        // the returned value, which frees them in `delete`.
        unsafe {
            let vao = gl.create_vertex_array()?;
            let vbo = gl.create_buffer()?;
            gl.bind_vertex_array(Some(vao));
            gl.bind_buffer(glow::ARRAY_BUFFER, Some(vbo));
            gl.buffer_data_u8_slice(glow::ARRAY_BUFFER, &bytes, glow::STATIC_DRAW);
            gl.enable_vertex_attrib_array(0);
            gl.vertex_attrib_pointer_f32(0, 2, glow::FLOAT, false, 8, 0);
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
            Ok(Quad { vao, vbo })
        }
    }

    /// Binds its vertex array.
    pub fn bind(&self, gl: &glow::Context) {
        // SAFETY: the vertex array is this context's, alive until `delete`.
        unsafe { gl.bind_vertex_array(Some(self.vao)) };
    }

    /// Draws it with the bound program into the bound framebuffer.
    pub fn draw(&self, gl: &glow::Context) {
        // SAFETY: its vertex array is bound (`bind`) and holds four vertices.
        unsafe { gl.draw_arrays(glow::TRIANGLE_STRIP, 0, 4) };
    }

    /// Frees its objects.
    pub fn delete(self, gl: &glow::Context) {
        // SAFETY: both objects are this context's and not used after this.
        unsafe {
            gl.delete_vertex_array(self.vao);
            gl.delete_buffer(self.vbo);
        }
    }
}

/// A sampler object that reads bilinearly and clamps to the edge, bound to every texture
/// unit a node reads, so that the engine's textures' own parameters do not matter.
pub fn linear_sampler(gl: &glow::Context) -> Result<glow::Sampler, String> {
    // SAFETY: the context is current; the sampler is made and set here.
    unsafe {
        let s = gl.create_sampler()?;
        gl.sampler_parameter_i32(s, glow::TEXTURE_MIN_FILTER, glow::LINEAR as i32);
        gl.sampler_parameter_i32(s, glow::TEXTURE_MAG_FILTER, glow::LINEAR as i32);
        gl.sampler_parameter_i32(s, glow::TEXTURE_WRAP_S, glow::CLAMP_TO_EDGE as i32);
        gl.sampler_parameter_i32(s, glow::TEXTURE_WRAP_T, glow::CLAMP_TO_EDGE as i32);
        Ok(s)
    }
}

/// GL's (internal format, format, type) for a texel format.
pub fn formats(format: TexFormat) -> (i32, u32, u32) {
    match format {
        TexFormat::Rgba8 => (glow::RGBA8 as i32, glow::RGBA, glow::UNSIGNED_BYTE),
        TexFormat::Rgba16F => (glow::RGBA16F as i32, glow::RGBA, glow::HALF_FLOAT),
        TexFormat::Rgba32F => (glow::RGBA32F as i32, glow::RGBA, glow::FLOAT),
    }
}

/// A texture of `width` x `height` of `format`, holding `pixels` (RGBA8 rows, row 0 the
/// texture's bottom row: callers that hold top-down pictures pass their rows reversed) or
/// transparent black when `None`.
pub fn texture(
    gl: &glow::Context,
    width: u32,
    height: u32,
    format: TexFormat,
    pixels: Option<&[u8]>,
) -> Result<glow::Texture, String> {
    let (internal, fmt, ty) = formats(format);
    let zeros;
    let data = match pixels {
        Some(p) => {
            debug_assert_eq!(format, TexFormat::Rgba8);
            p
        }
        None => {
            zeros = vec![0u8; width as usize * height as usize * format.texel_bytes() as usize];
            &zeros[..]
        }
    };
    // SAFETY: the context is current; `data` holds exactly width*height texels of `format`
    // (the caller's pixels are RGBA8 of that size; zeros are made to the format's size) and
    // rows are tightly packed (UNPACK_ALIGNMENT 1 for the call).
    unsafe {
        let t = gl.create_texture()?;
        gl.bind_texture(glow::TEXTURE_2D, Some(t));
        crate::texture::set_linear_clamp(gl);
        gl.pixel_store_i32(glow::UNPACK_ALIGNMENT, 1);
        gl.tex_image_2d(
            glow::TEXTURE_2D,
            0,
            internal,
            width as i32,
            height as i32,
            0,
            fmt,
            ty,
            glow::PixelUnpackData::Slice(Some(data)),
        );
        gl.pixel_store_i32(glow::UNPACK_ALIGNMENT, 4);
        gl.bind_texture(glow::TEXTURE_2D, None);
        Ok(t)
    }
}

/// Deletes a texture this node made.
pub fn delete_texture(gl: &glow::Context, t: glow::Texture) {
    // SAFETY: the texture is this context's and its owner drops its handle now.
    unsafe { gl.delete_texture(t) };
}

/// Deletes a program this node made.
pub fn delete_program(gl: &glow::Context, p: glow::Program) {
    // SAFETY: the program is this context's and its owner drops its handle now.
    unsafe { gl.delete_program(p) };
}
