//! A gl-transition as GLSL 330: the collection's calling convention around the author's
//! code, as the reference renderer (`gl-transition`) writes it:
//!
//! ```glsl
//! uniform sampler2D from, to;     // the two inputs
//! uniform float progress;         // 0..1
//! uniform float ratio;            // the output's width / height
//! vec4 getFromColor(vec2 uv) { return texture(from, uv); }
//! vec4 getToColor(vec2 uv) { return texture(to, uv); }
//! // the transition's code: its parameters' uniforms and vec4 transition(vec2 uv)
//! void main() { fragColor = transition(uv); }
//! ```
//!
//! The author's code is GLSL ES 1.0 (WebGL): `texture2D` is defined as `texture`, and
//! `gl_FragColor` is not used by it. `#version` and `precision` lines are left as they are
//! (a `precision` is accepted and ignored by desktop GLSL). A line map leads compiler
//! messages back to the transition's own lines (`crosswarp.glsl:12: ...`).

use framepipe_isf::{LineMap, Program};

use crate::isf::gl::Source;

use super::Transition;

/// The vertex shader: the quad's corners in attribute 0, `uv` 0..1 across the output.
const VERTEX: &str = "#version 330
layout(location = 0) in vec2 isf_VertexPosition;
out vec2 _glt_uv;
void main() {
    gl_Position = vec4(isf_VertexPosition, 0.0, 1.0);
    _glt_uv = isf_VertexPosition * 0.5 + 0.5;
}
";

/// The lines before the author's.
const PRELUDE: &[&str] = &[
    "#version 330",
    "#define texture2D texture",
    "uniform sampler2D from;",
    "uniform sampler2D to;",
    "uniform float progress;",
    "uniform float ratio;",
    "in vec2 _glt_uv;",
    "out vec4 _glt_color;",
    "vec4 getFromColor(vec2 uv) { return texture(from, uv); }",
    "vec4 getToColor(vec2 uv) { return texture(to, uv); }",
];

/// The program of `t`.
pub fn source(t: &Transition) -> Source {
    let mut fragment = String::with_capacity(t.glsl.len() + 512);
    let mut lines = Vec::new();
    for l in PRELUDE {
        fragment.push_str(l);
        fragment.push('\n');
        lines.push(0);
    }
    for (i, l) in t.glsl.lines().enumerate() {
        // A #version line of the author's would come after the prelude's: blank it.
        if l.trim_start().starts_with("#version") {
            fragment.push('\n');
        } else {
            fragment.push_str(l);
            fragment.push('\n');
        }
        lines.push(i as u32 + 1);
    }
    for l in [
        "void main() {",
        "    _glt_color = transition(_glt_uv);",
        "}",
    ] {
        fragment.push_str(l);
        fragment.push('\n');
        lines.push(0);
    }
    let vertex_lines = LineMap::new(vec![0; VERTEX.lines().count()]);
    Source {
        program: Program {
            vertex: VERTEX.to_string(),
            fragment,
            vertex_lines,
            fragment_lines: LineMap::new(lines),
        },
        fragment_file: format!("{}.glsl", t.name),
        vertex_file: format!("{}.glsl (the vertex shader)", t.name),
    }
}
