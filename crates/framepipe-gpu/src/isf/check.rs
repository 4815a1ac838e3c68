//! The build-time check: a shader that does not compile is refused when the show is built,
//! not on its first frame.
//!
//! [`compiles`] opens a GL context of its own ([`Gpu::open`](crate::Gpu::open)) on a thread
//! of its own (so that whatever context is current on the caller's thread, the GPU
//! executor's included, is left alone), compiles and links the program there, and closes it.
//! The factory calls it from [`negotiate`](framepipe_core::GpuFactory::negotiate); the reload
//! watcher calls it for a changed file. A program that compiled once is remembered (by a hash
//! of its text) for the life of the process, so that building a show again, a live edit or a
//! second node of the same shader costs nothing.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use super::gl::{self, Source};

/// Hashes of the programs that compiled.
static COMPILED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

fn key(src: &Source) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    src.program.vertex.hash(&mut h);
    src.program.fragment.hash(&mut h);
    h.finish()
}

/// Whether `src` compiles and links: `Err` holds the compiler's log mapped to the author's
/// lines, or why no GL context could be opened.
pub fn compiles(src: &Source) -> Result<(), String> {
    let k = key(src);
    if COMPILED
        .lock()
        .map(|s| s.as_ref().is_some_and(|s| s.contains(&k)))
        .unwrap_or(false)
    {
        return Ok(());
    }
    let result = std::thread::scope(|s| {
        s.spawn(|| -> Result<(), String> {
            let gpu = crate::Gpu::open().map_err(|e| e.to_string())?;
            let program = gl::compile(gpu.gl(), src)?;
            gl::delete_program(gpu.gl(), program);
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err("the GL driver crashed while compiling the shader".into()))
    });
    if result.is_ok() {
        if let Ok(mut s) = COMPILED.lock() {
            s.get_or_insert_with(HashSet::new).insert(k);
        }
    }
    result
}
