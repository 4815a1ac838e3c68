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
/// VVISF looks), each with [`read_text`]. I/O errors are returned as they are.
pub fn read_files(fs: &std::path::Path) -> std::io::Result<(String, Option<String>)> {
    let fragment = read_text(fs, MAX_FILE_BYTES as u64)?;
    let mut vertex = None;
    for ext in ["vs", "vert"] {
        let p = fs.with_extension(ext);
        if p.is_file() {
            vertex = Some(read_text(&p, MAX_FILE_BYTES as u64)?);
            break;
        }
    }
    Ok((fragment, vertex))
}

/// The bytes of a user's file (a shader, an imported image), checked as framepipe checks
/// project files: a regular file (a directory, FIFO or device is refused before a byte is
/// read), opened with `O_NONBLOCK` so that a FIFO swapped in meanwhile cannot block, checked
/// again on the open descriptor, and read to at most `limit` bytes (a larger file is an error
/// naming the limit).
pub fn read_bytes(path: &std::path::Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let refusal = |m: &std::fs::Metadata| -> Option<String> {
        let t = m.file_type();
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else if !t.is_file() {
            "not a regular file"
        } else if m.len() > limit {
            return Some(format!("it is {} bytes; at most {limit} are read", m.len()));
        } else {
            return None;
        };
        Some(format!("it is {what}; a regular file is needed"))
    };
    let fail = |why: String| Error::new(ErrorKind::InvalidInput, why);
    if let Some(why) = refusal(&std::fs::metadata(path)?) {
        return Err(fail(why));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if let Some(why) = refusal(&meta) {
        return Err(fail(why));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(fail(format!("it grew past {limit} bytes while being read")));
    }
    Ok(bytes)
}

/// A user's text file read with [`read_bytes`]; not UTF-8 is an error naming the offset.
pub fn read_text(path: &std::path::Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_bytes(path, limit)?).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "it is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}
