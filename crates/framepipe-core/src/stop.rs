//! The process's stop request (SIGINT/SIGTERM, issue #21): a flag that waits the engine cannot
//! interrupt look at, so that a signal ends them instead of being ignored until a second one.
//!
//! The engine stops at a frame boundary (an urgent `stop` on its command queue); a thread
//! blocked inside an element never reaches one: a sink writing to a receiver that does not
//! read, a start-up wait. Such a wait is made in short steps (a write timeout, a poll) and
//! gives up once [`requested`] says so, with an error naming what it was waiting for; the run
//! then ends as a signal's run does (its exit status, `--stats` written).
//!
//! Set by whoever catches the signals (the CLI's `fp-signals` thread), never cleared: one
//! process, one run of its signals.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks every interruptible wait of the process to give up (a signal was received).
pub fn request() {
    REQUESTED.store(true, Ordering::Release);
}

/// Whether the process was asked to stop.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Acquire)
}
