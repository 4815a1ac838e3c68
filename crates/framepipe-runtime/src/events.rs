//! [`Event`]s: what a running pipeline reports (stalls, rejected commands and properties), and
//! how they are delivered: always outside the scheduler lock (a callback is user code), with
//! names as `Arc<str>` so that reporting a stall clones a pointer rather than a string.

use std::sync::Arc;

use crate::state::Shared;

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
}

/// Receives [`Event`]s; called from the output thread or a worker, so it must be quick.
pub type EventFn = Arc<dyn Fn(&Event) + Send + Sync>;

impl Shared {
    /// Delivers `e` to the callback, if any. Never called with the scheduler lock held.
    pub(crate) fn emit(&self, e: Event) {
        if let Some(f) = &self.events {
            f(&e);
        }
    }
}
