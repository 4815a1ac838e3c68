//! Whether standard output was closed when the process started (`framepipe run ... >&-`).
//!
//! Rust's runtime opens `/dev/null` on a standard descriptor that is closed before `main`
//! runs, so by then a closed stdout looks like `> /dev/null`, and a sink writing `location=-`
//! would lose every frame without an error. A constructor in `.init_array`, which the loader
//! runs before the runtime's own set-up, looks at descriptor 1 first and records what it saw.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

extern "C" fn look_at_stdout() {
    // SAFETY: fcntl(F_GETFD) on a descriptor number reads the process's descriptor table
    // only; it touches no memory of ours and is async-signal-safe, fine before main.
    let closed = unsafe { libc::fcntl(1, libc::F_GETFD) } == -1;
    STDOUT_CLOSED.store(closed, Ordering::Relaxed);
}

/// Run by the loader before `main` and before Rust's runtime replaces closed descriptors.
#[used]
#[link_section = ".init_array"]
static LOOK_AT_STDOUT: extern "C" fn() = look_at_stdout;

/// Whether descriptor 1 was closed when the process started.
pub fn stdout_was_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}
