//! ISF, the Interactive Shader Format (<https://github.com/mrRay/ISF_Spec>, version 2.0): a GLSL
//! fragment shader after a `/*{ JSON }*/` header that says what the shader takes (its
//! `INPUTS`), how it renders (`PASSES`, into buffers that may persist across frames) and what
//! it loads (`IMPORTED`). This crate reads such files; it draws nothing (the GL side, the GPU
//! executor and textures are the engine's, issue #24):
//!
//! * [`Shader::parse`]: the header into a typed description ([`Input`]/[`InputKind`] for every
//!   input type, [`Pass`], [`Buffer`] with its `WIDTH`/`HEIGHT` [`Expr`]essions, [`Imported`]),
//!   ISF 1.0 files upgraded ([`upgrade`]);
//! * [`Shader::role`]: source, effect, transition or mixer, from the header alone ([`role`]);
//! * [`Shader::assemble`]: GLSL 330 vertex and fragment shaders with the ISF uniforms and
//!   functions, and [`LineMap`]s from the generated lines back to the author's ([`glsl`]).
//!
//! Input is untrusted: a malformed file is an [`Error`] naming the place and the value, never a
//! panic, and nothing is allocated in proportion to a number in the file (sizes are bounded:
//! [`MAX_FILE_BYTES`], [`MAX_INPUTS`], [`MAX_PASSES`], [`MAX_BUFFER_SIDE`]). A fuzz target
//! (`fuzz/fuzz_targets/isf_parser.rs`) and a seeded randomized test check it.
#![forbid(unsafe_code)]

mod error;
pub mod expr;
pub mod glsl;
mod input;
mod json;
mod pass;
pub mod role;
mod shader;
pub mod upgrade;

pub use error::{Error, Result};
pub use expr::Expr;
pub use glsl::{LineMap, Program};
pub use input::{Input, InputKind};
pub use pass::{Buffer, Imported, Pass, MAX_BUFFER_SIDE};
pub use role::Role;
pub use shader::{Shader, Version, MAX_FILE_BYTES, MAX_INPUTS, MAX_PASSES};

/// Reads an ISF file and the vertex shader beside it (same name, `.vs`, else `.vert`, as
/// VVISF looks), each at most [`MAX_FILE_BYTES`]. I/O errors are returned as they are.
pub fn read_files(fs: &std::path::Path) -> std::io::Result<(String, Option<String>)> {
    use std::io::Read;
    let read = |p: &std::path::Path| -> std::io::Result<String> {
        let mut text = String::new();
        std::fs::File::open(p)?
            .take(MAX_FILE_BYTES as u64 + 1)
            .read_to_string(&mut text)?;
        Ok(text)
    };
    let fragment = read(fs)?;
    let mut vertex = None;
    for ext in ["vs", "vert"] {
        let p = fs.with_extension(ext);
        if p.is_file() {
            vertex = Some(read(&p)?);
            break;
        }
    }
    Ok((fragment, vertex))
}
