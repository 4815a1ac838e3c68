//! GLSL assembly for an OpenGL 3.3 core context (`#version 330`: what Mesa's llvmpipe and
//! NVIDIA's EGL both run): the ISF uniforms declared, the ISF functions and GLSL 1.10 names
//! rewritten, a vertex shader around the `.vs` file's (or the default one), and a [`LineMap`]
//! from each generated line back to the author's.
//!
//! What the GLSL gets, in both stages:
//! * `uniform int PASSINDEX`, `vec2 RENDERSIZE`, `float TIME`, `float TIMEDELTA`,
//!   `vec4 DATE`, `int FRAMEINDEX`;
//! * one uniform per input of its GLSL type (`bool` for event and bool, `int` long, `float`,
//!   `vec2` point2D, `vec4` color, `sampler2D` image/audio/audioFFT);
//! * per image (image and audio inputs, imported images, pass buffers) its `sampler2D NAME`,
//!   `vec2 _NAME_imgSize` (its size in pixels) and `vec4 _NAME_imgRect` (0, 0, width, height:
//!   a few shaders written for VVISF read it);
//! * `isf_FragNormCoord` (0..1 across the render, set by `isf_vertShaderInit()`); the
//!   fragment shader writes `out vec4 isf_FragColor`, which `gl_FragColor` is renamed to.
//!
//! Rewritten in the author's GLSL (comments left alone), each on its own line so that every
//! line keeps its number:
//! * `IMG_NORM_PIXEL(img, c[, bias])` → `texture(img, c[, bias])`;
//!   `IMG_PIXEL(img, c[, bias])` → `texture(img, (c) / _img_imgSize[, bias])`;
//!   `IMG_THIS_PIXEL(img)` and `IMG_THIS_NORM_PIXEL(img)` → `texture(img, isf_FragNormCoord)`
//!   (every image is a whole 2D texture, unflipped, so the pixel under the fragment is
//!   there); `IMG_SIZE(img)` → `_img_imgSize`. An image name that is none of the file's is an
//!   error naming the line;
//! * GLSL 1.10 names that core 3.3 lacks: `texture2D` (and `…Proj`, `…Lod`, `texture2DRect`)
//!   → `texture…`, `varying` → `in`/`out`, `attribute` → `in`, `gl_FragColor` →
//!   `isf_FragColor`; ISF 1.0's `vv_` names ([`RENAMES`]);
//! * `#version` lines are blanked (the assembly writes its own first); `#extension` lines
//!   move to just after it (GLSL wants them before any declaration).
//!
//! The host draws a quad or triangle covering the render with clip-space positions in the
//! vertex attribute at location 0, `isf_VertexPosition` (`vec2`).

use crate::error::{quote, Error, Result};
use crate::shader::{Shader, MAX_FILE_BYTES};
use crate::upgrade::RENAMES;

/// The first line of every generated shader.
pub const GLSL_VERSION: &str = "#version 330";
/// The vertex attribute (location 0) holding clip-space positions of the covering geometry.
pub const VERTEX_POSITION: &str = "isf_VertexPosition";
/// How deep ISF function calls may nest in one another's arguments.
const MAX_CALL_DEPTH: usize = 16;

/// A generated shader pair, each with its line map.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// The vertex shader's source.
    pub vertex: String,
    /// The fragment shader's source.
    pub fragment: String,
    /// Generated vertex lines → `.vs` lines (none when the default vertex shader is used).
    pub vertex_lines: LineMap,
    /// Generated fragment lines → `.fs` lines.
    pub fragment_lines: LineMap,
}

/// Which line of the author's file each generated line came from, so that a compiler's
/// message can name the author's line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LineMap {
    /// Index: generated line - 1; value: source line, or 0 for a line the assembly wrote.
    lines: Vec<u32>,
}

impl LineMap {
    /// A map from the source line of each generated line (1-based; 0 for a line the host
    /// wrote), for hosts that assemble GLSL of their own (gl-transitions).
    pub fn new(lines: Vec<u32>) -> LineMap {
        LineMap { lines }
    }

    /// The author's line (1-based) that generated line `line` (1-based, as compilers count)
    /// came from; `None` for a line the assembly wrote (a declaration) or past the end.
    pub fn to_source(&self, line: u32) -> Option<u32> {
        let i = usize::try_from(line).ok()?.checked_sub(1)?;
        self.lines.get(i).copied().filter(|&l| l != 0)
    }

    /// The generated line count.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether nothing was generated.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// A compiler's info log with each message's location rewritten to `file:LINE:` of the
    /// author's file. Knows the forms of Mesa (`0:12(5): error: ...`), NVIDIA
    /// (`0(12) : error C0000: ...`) and AMD/Apple (`ERROR: 0:12: ...`); other lines are kept.
    /// A location on a generated line reads `file (generated line N)`.
    pub fn map_log(&self, log: &str, file: &str) -> String {
        let mut out = String::with_capacity(log.len() + 64);
        for (i, line) in log.lines().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&self.map_log_line(line, file));
        }
        out
    }

    fn place(&self, line: u32, file: &str) -> String {
        match self.to_source(line) {
            Some(l) => format!("{file}:{l}"),
            None => format!("{file} (generated line {line})"),
        }
    }

    fn map_log_line(&self, line: &str, file: &str) -> String {
        // ERROR: 0:12: ... / WARNING: 0:12: ...
        for prefix in ["ERROR: ", "WARNING: "] {
            if let Some(rest) = line.strip_prefix(prefix) {
                if let Some((n, tail)) = rest.strip_prefix("0:").and_then(number) {
                    if let Some(tail) = tail.strip_prefix(':') {
                        return format!("{prefix}{}:{tail}", self.place(n, file));
                    }
                }
            }
        }
        // Mesa: 0:12(5): error: ...
        if let Some((n, tail)) = line.strip_prefix("0:").and_then(number) {
            if let Some((col, tail)) = tail.strip_prefix('(').and_then(number) {
                if let Some(tail) = tail.strip_prefix("):") {
                    return format!("{}:{col}:{tail}", self.place(n, file));
                }
            }
        }
        // NVIDIA: 0(12) : error C0000: ...
        if let Some((n, tail)) = line.strip_prefix("0(").and_then(number) {
            if let Some(tail) = tail.strip_prefix(")") {
                return format!("{}{tail}", self.place(n, file));
            }
        }
        line.to_string()
    }
}

/// A decimal number at the start of `s`, and the rest.
fn number(s: &str) -> Option<(u32, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    Some((s[..end].parse().ok()?, &s[end..]))
}

/// A shader being written, with its line map.
#[derive(Default)]
struct Out {
    text: String,
    lines: Vec<u32>,
}

impl Out {
    /// A line of the assembly's own.
    fn own(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
        self.lines.push(0);
    }

    /// A line from the author's file.
    fn source(&mut self, line: &str, number: u32) {
        self.text.push_str(line);
        self.text.push('\n');
        self.lines.push(number);
    }

    /// The rewritten body, its first line being the author's line `first`.
    fn body(&mut self, body: &str, first: u32) {
        // A final line break ends the last line; it does not begin another.
        let body = body.strip_suffix('\n').unwrap_or(body);
        for (i, line) in body.split('\n').enumerate() {
            self.source(line, first.saturating_add(i as u32));
        }
    }

    fn finish(self) -> (String, LineMap) {
        (self.text, LineMap { lines: self.lines })
    }
}

/// Which shader stage GLSL is rewritten for.
#[derive(Clone, Copy, PartialEq)]
enum Stage {
    Vertex,
    Fragment,
}

impl Shader {
    /// The uniform declarations both stages get, one per line.
    pub fn uniform_declarations(&self) -> String {
        let mut d = String::new();
        for (ty, name) in [
            ("int", "PASSINDEX"),
            ("vec2", "RENDERSIZE"),
            ("float", "TIME"),
            ("float", "TIMEDELTA"),
            ("vec4", "DATE"),
            ("int", "FRAMEINDEX"),
        ] {
            d.push_str(&format!("uniform {ty} {name};\n"));
        }
        let image = |d: &mut String, name: &str| {
            d.push_str(&format!("uniform sampler2D {name};\n"));
            d.push_str(&format!("uniform vec2 _{name}_imgSize;\n"));
            d.push_str(&format!("uniform vec4 _{name}_imgRect;\n"));
        };
        for i in &self.inputs {
            if i.kind.is_texture() {
                image(&mut d, &i.name);
            } else {
                d.push_str(&format!("uniform {} {};\n", i.kind.glsl_type(), i.name));
            }
        }
        for m in &self.imported {
            image(&mut d, &m.name);
        }
        for b in &self.buffers {
            image(&mut d, &b.name);
        }
        d
    }

    /// The fragment and vertex shaders for GLSL 330, with line maps; `vertex` is the `.vs`
    /// file's text, if the shader has one (it calls `isf_vertShaderInit()` first in its
    /// `main`). An ISF function call that is malformed or reads an unknown image is an error
    /// naming the author's line.
    pub fn assemble(&self, vertex: Option<&str>) -> Result<Program> {
        let decls = self.uniform_declarations();
        let images: Vec<&str> = self.image_names().collect();

        let fs =
            Rewriter::new(".fs", Stage::Fragment, &images).run(self.glsl(), self.glsl_line())?;
        let mut f = Out::default();
        f.own(GLSL_VERSION);
        for (line, text) in &fs.extensions {
            f.source(text, *line);
        }
        decls.lines().for_each(|l| f.own(l));
        f.own("in vec2 isf_FragNormCoord;");
        f.own("out vec4 isf_FragColor;");
        f.body(&fs.text, self.glsl_line());
        let (fragment, fragment_lines) = f.finish();

        let vs = match vertex {
            Some(text) if text.len() > MAX_FILE_BYTES => {
                return Err(Error::TooLarge {
                    what: "the .vs file",
                    size: text.len(),
                    limit: MAX_FILE_BYTES,
                })
            }
            Some(text) => Some(Rewriter::new(".vs", Stage::Vertex, &images).run(text, 1)?),
            None => None,
        };
        let mut v = Out::default();
        v.own(GLSL_VERSION);
        for (line, text) in vs.iter().flat_map(|vs| &vs.extensions) {
            v.source(text, *line);
        }
        decls.lines().for_each(|l| v.own(l));
        v.own(&format!("layout(location = 0) in vec2 {VERTEX_POSITION};"));
        v.own("out vec2 isf_FragNormCoord;");
        v.own("void isf_vertShaderInit();");
        match &vs {
            Some(vs) => v.body(&vs.text, 1),
            None => {
                v.own("void main() {");
                v.own("    isf_vertShaderInit();");
                v.own("}");
            }
        }
        v.own("void isf_vertShaderInit() {");
        v.own(&format!(
            "    gl_Position = vec4({VERTEX_POSITION}, 0.0, 1.0);"
        ));
        v.own(&format!(
            "    isf_FragNormCoord = {VERTEX_POSITION} * 0.5 + 0.5;"
        ));
        v.own("}");
        let (vertex, vertex_lines) = v.finish();

        Ok(Program {
            vertex,
            fragment,
            vertex_lines,
            fragment_lines,
        })
    }
}

/// The author's GLSL, rewritten.
struct Rewritten {
    /// Same line count as the input.
    text: String,
    /// `#extension` lines taken out, with their lines.
    extensions: Vec<(u32, String)>,
}

struct Rewriter<'a> {
    file: &'static str,
    stage: Stage,
    images: &'a [&'a str],
}

/// The ISF functions: name, argument counts allowed.
const FUNCTIONS: &[(&str, &[usize])] = &[
    ("IMG_PIXEL", &[2, 3]),
    ("IMG_NORM_PIXEL", &[2, 3]),
    ("IMG_THIS_PIXEL", &[1]),
    ("IMG_THIS_NORM_PIXEL", &[1]),
    ("IMG_SIZE", &[1]),
];

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn newlines(s: &str) -> usize {
    s.bytes().filter(|&b| b == b'\n').count()
}

impl<'a> Rewriter<'a> {
    fn new(file: &'static str, stage: Stage, images: &'a [&'a str]) -> Self {
        Rewriter {
            file,
            stage,
            images,
        }
    }

    fn error(&self, line: u32, message: String) -> Error {
        Error::Glsl {
            file: self.file,
            line,
            message,
        }
    }

    fn run(&self, src: &str, first_line: u32) -> Result<Rewritten> {
        let mut out = Rewritten {
            text: String::with_capacity(src.len() + src.len() / 4),
            extensions: Vec::new(),
        };
        self.rewrite(src, first_line, 0, &mut out)?;
        Ok(out)
    }

    /// The replacement of a plain identifier, if it has one.
    fn rename(&self, word: &str) -> Option<&'static str> {
        if let Some((_, new)) = RENAMES.iter().find(|(old, _)| *old == word) {
            return Some(new);
        }
        Some(match (word, self.stage) {
            ("texture2D" | "texture2DRect", _) => "texture",
            ("texture2DProj", _) => "textureProj",
            ("texture2DLod", _) => "textureLod",
            ("gl_FragColor", Stage::Fragment) => "isf_FragColor",
            ("varying", Stage::Fragment) => "in",
            ("varying", Stage::Vertex) => "out",
            ("attribute", Stage::Vertex) => "in",
            _ => return None,
        })
    }

    /// Rewrites `src` (which starts on line `line`) into `out`; `depth` counts the ISF calls
    /// this text is an argument of.
    fn rewrite(&self, src: &str, mut line: u32, depth: usize, out: &mut Rewritten) -> Result<()> {
        let b = src.as_bytes();
        let mut i = 0;
        let mut line_start = true;
        while i < b.len() {
            let c = b[i];
            if c == b'\n' {
                out.text.push('\n');
                line = line.saturating_add(1);
                line_start = true;
                i += 1;
                continue;
            }
            if line_start && c == b'#' && depth == 0 {
                let end = src[i..].find('\n').map_or(src.len(), |e| i + e);
                let directive = &src[i..end];
                let word = directive[1..].trim_start();
                if word.starts_with("version") {
                    i = end;
                    continue;
                }
                if word.starts_with("extension") {
                    out.extensions
                        .push((line, directive.trim_end().to_string()));
                    i = end;
                    continue;
                }
            }
            if !c.is_ascii_whitespace() {
                line_start = false;
            }
            if src[i..].starts_with("//") {
                let end = src[i..].find('\n').map_or(src.len(), |e| i + e);
                out.text.push_str(&src[i..end]);
                i = end;
                continue;
            }
            if src[i..].starts_with("/*") {
                let end = src[i + 2..].find("*/").map_or(src.len(), |e| i + 2 + e + 2);
                out.text.push_str(&src[i..end]);
                line = line.saturating_add(newlines(&src[i..end]) as u32);
                i = end;
                continue;
            }
            if c.is_ascii_digit() {
                let start = i;
                while i < b.len() && (is_ident(b[i]) || b[i] == b'.') {
                    i += 1;
                }
                out.text.push_str(&src[start..i]);
                continue;
            }
            if is_ident_start(c) {
                let start = i;
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
                let word = &src[start..i];
                if let Some(&(name, counts)) = FUNCTIONS.iter().find(|(n, _)| *n == word) {
                    i = self.call(src, i, line, name, counts, depth, out)?;
                    line = line.saturating_add(newlines(&src[start..i]) as u32);
                } else if let Some(new) = self.rename(word) {
                    out.text.push_str(new);
                } else {
                    out.text.push_str(word);
                }
                continue;
            }
            // Any other character, copied whole (it may be several bytes of UTF-8).
            let len = src[i..].chars().next().map_or(1, char::len_utf8);
            out.text.push_str(&src[i..i + len]);
            i += len;
        }
        Ok(())
    }

    /// Rewrites the call of ISF function `name` whose name ends at `at`; returns where the
    /// call ends.
    #[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
    fn call(
        &self,
        src: &str,
        at: usize,
        line: u32,
        name: &str,
        counts: &[usize],
        depth: usize,
        out: &mut Rewritten,
    ) -> Result<usize> {
        let b = src.as_bytes();
        let mut i = at;
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if b.get(i) != Some(&b'(') {
            return Err(self.error(line, format!("{name} is not followed by '('")));
        }
        if depth >= MAX_CALL_DEPTH {
            return Err(self.error(
                line,
                format!("ISF functions nested more than {MAX_CALL_DEPTH} deep"),
            ));
        }
        // The arguments: split at commas outside brackets, comments skipped.
        let mut args: Vec<(usize, usize)> = Vec::new();
        let mut level = 0usize;
        let mut arg_start = i + 1;
        i += 1;
        let end = loop {
            let Some(&c) = b.get(i) else {
                return Err(self.error(line, format!("{name}( is never closed")));
            };
            // Bytes, not str: `i` may be inside a multi-byte character here.
            if b[i..].starts_with(b"//") {
                i = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |e| i + e);
                continue;
            }
            if b[i..].starts_with(b"/*") {
                i = b[i + 2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(b.len(), |e| i + 2 + e + 2);
                continue;
            }
            match c {
                b'(' | b'[' | b'{' => level += 1,
                b')' if level == 0 => {
                    args.push((arg_start, i));
                    break i + 1;
                }
                b')' | b']' | b'}' => level = level.saturating_sub(1),
                b',' if level == 0 => {
                    args.push((arg_start, i));
                    arg_start = i + 1;
                }
                _ => {}
            }
            i += 1;
        };
        let raw: Vec<&str> = args.iter().map(|&(s, e)| &src[s..e]).collect();
        if raw.len() == 1 && raw[0].trim().is_empty() && !counts.contains(&0) {
            return Err(self.error(line, format!("{name}() needs an image name")));
        }
        if !counts.contains(&raw.len()) {
            let want = match counts {
                [n] => n.to_string(),
                _ => format!("{} or {}", counts[0], counts[1]),
            };
            return Err(self.error(
                line,
                format!("{name} takes {want} arguments, found {}", raw.len()),
            ));
        }
        let image = raw[0].trim();
        if !self.images.contains(&image) {
            return Err(self.error(
                line,
                format!(
                    "{name} reads {}, which is no image input, imported image or pass buffer of this file{}",
                    quote(image),
                    if self.images.is_empty() {
                        " (it has none)".to_string()
                    } else {
                        format!("; it has: {}", self.images.join(", "))
                    }
                ),
            ));
        }
        // The other arguments, rewritten in turn (they may call ISF functions too).
        let mut rest = Vec::with_capacity(raw.len() - 1);
        for (&(start, _), r) in args.iter().zip(&raw).skip(1) {
            let arg_line = line.saturating_add(newlines(&src[at..start]) as u32);
            let mut sub = Rewritten {
                text: String::new(),
                extensions: Vec::new(),
            };
            self.rewrite(r, arg_line, depth + 1, &mut sub)?;
            rest.push(sub.text);
        }
        let text = match name {
            "IMG_NORM_PIXEL" => format!("texture({image},{})", rest.join(",")),
            "IMG_PIXEL" => {
                let bias = rest.get(1).map_or(String::new(), |b| format!(",{b}"));
                format!("texture({image}, ({}) / _{image}_imgSize{bias})", rest[0])
            }
            "IMG_SIZE" => format!("_{image}_imgSize"),
            _ => format!("texture({image}, isf_FragNormCoord)"),
        };
        out.text.push_str(&text);
        // Keep every line where it was: the call's own line breaks (around the image name,
        // in comments) come after it.
        for _ in newlines(&text)..newlines(&src[at..end]) {
            out.text.push('\n');
        }
        Ok(end)
    }
}
