//! [`Event`]s: what a running pipeline reports (stalls, rejected commands and properties), and
//! how they are delivered: always outside the scheduler lock (a callback is user code), with
//! names as `Arc<str>` so that reporting a stall clones a pointer rather than a string.

use std::sync::Arc;

use crate::exec::{catch_panic, panic_error};
use crate::sched::Shared;

/// Something a running pipeline reports (to a status line, a log, a control surface).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A stage has been running one frame for longer than the stall timeout (reported once).
    Stalled {
        /// Stage name.
        stage: Arc<str>,
        /// How long it had been running when noticed, ms.
        elapsed_ms: u64,
    },
    /// A command could not be applied.
    CommandRejected {
        /// The command as text.
        command: String,
        /// Why.
        reason: String,
    },
    /// A live property change was refused by the element itself (reported once per property).
    PropertyRejected {
        /// Stage name.
        stage: Arc<str>,
        /// Property.
        prop: Arc<str>,
        /// The element's error.
        reason: String,
    },
    /// The run has ended but a worker is still inside this stage (blocked in an element, e.g. a
    /// source waiting for a peer) and cannot be interrupted: it was left running, detached, and
    /// exits when the element returns (or with the process).
    LeftRunning {
        /// Stage name.
        stage: Arc<str>,
        /// The worker (`fp-worker-N`), or for a follower sink's output thread `fp-out-P`,
        /// `threads + P`, or for IO thread K `fp-io` (the IO threads run the sources that
        /// block, one per such source), `threads + sinks + K`.
        worker: usize,
    },
    /// A source reached its end (`on-end=stop`, or `hold` before its first frame) and so ends
    /// the run: which one, and after how many of its frames (for a render, the normal end).
    SourceEnded {
        /// Stage name.
        stage: Arc<str>,
        /// Frames it produced.
        frames: u64,
    },
    /// A GPU node failed at render (its error, a GL error, a panic): it is bypassed from this
    /// frame on (its first input passes; a source gives black) and the show goes on.
    GpuNodeFailed {
        /// Stage name.
        stage: Arc<str>,
        /// The frame it failed on.
        frame: u64,
        /// Why.
        reason: String,
    },
    /// A crossfade (`load FILE fade=`) is over: from `frame` on the output is the new project
    /// alone, and the old project's nodes were taken out of the graph (the fade's start is the
    /// frame the `load`'s reply named).
    FadeDone {
        /// What was faded to (the project file).
        to: String,
        /// The first frame of the new project alone (the fade's start plus its length).
        frame: u64,
    },
    /// A crossfade's end could not be switched in (the graph after it failed to build): the
    /// show goes on in the crossfade's graph, whose amounts stay at 1 (the output is the new
    /// project), with the old project's nodes still running.
    FadeStuck {
        /// What was faded to.
        to: String,
        /// Why (one line).
        reason: String,
    },
}

/// Receives [`Event`]s; called from the output thread or a worker, so it must be quick.
pub type EventFn = Arc<dyn Fn(&Event) + Send + Sync>;

impl Shared {
    /// Delivers `e` to the callback, if any. Never called with the scheduler lock held. A panic
    /// in the callback ends the run with an error saying so (instead of unwinding through the
    /// output thread or a worker and leaving the others waiting).
    pub(crate) fn emit(&self, e: Event) {
        let Some(f) = &self.events else { return };
        if let Err(p) = catch_panic(|| f(&e)) {
            let e = panic_error("event callback", &p);
            let mut st = self.lock();
            st.fail(e);
            st.after_change(self);
        }
    }
}
