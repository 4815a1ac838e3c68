//! The sinks' output ports: the frame whose turn it is at each sink, the signal its output
//! thread waits on, and a sink's completion.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;

use framepipe_core::{Frame, FrameCtx, Result};

use super::{Shared, State, Step};

/// One sink's hand-off: the frame whose turn it is at that sink.
pub(crate) struct Port {
    /// The sink's node.
    pub(crate) node: usize,
    pub(crate) ready: Option<PortItem>,
    /// A live edit switched while this sink held a frame of the replaced version (waiting at
    /// the port or being consumed by its output thread): the sink's node in the running
    /// version is kept busy, so that the new version's first frame waits for that one's
    /// completion (`sink_done`) and the sink still takes its frames in order.
    pub(crate) held_over: bool,
}

/// A frame for a sink.
pub(crate) struct PortItem {
    pub(crate) slot: usize,
    pub(crate) ctx: FrameCtx,
    pub(crate) frame: Frame,
    /// When the frame reached the sink, fully processed (monotonic ns): the slow overload
    /// policy slips the clock only for frames that were not ready by their deadline.
    pub(crate) ready_ns: i64,
    /// When the frame began (monotonic ns).
    pub(crate) begun_ns: i64,
    /// The graph version it was handed in: a leaky sink may still be consuming a frame of
    /// the version a live edit replaced (the switch does not wait for it), whose completion
    /// then has nothing to update.
    pub(crate) version: u64,
}

/// Where a port's signal goes instead of to its own thread: a queue of the shows whose port was
/// raised, served by one thread for many shows (a host's clock thread, `host::HostSignals`).
pub(crate) trait PortQueue: Send + Sync + std::fmt::Debug {
    /// Show `show`'s port was raised.
    fn port_raised(&self, show: usize);
}

/// What the output thread of a port waits on instead of the scheduler mutex: a flag set (after
/// unlocking) whenever its port or the run's end changed, and an unpark of its thread. It
/// checks the flag, and takes the lock only when there is something to take.
#[derive(Debug, Default)]
pub(crate) struct PortSignal {
    flag: AtomicBool,
    thread: OnceLock<Thread>,
    /// In a host, the master port's signal goes to the clock thread's queue, naming the show.
    queue: OnceLock<(Arc<dyn PortQueue>, usize)>,
}

impl PortSignal {
    /// Registers the calling thread as this port's output thread.
    pub(crate) fn register_current(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    pub(crate) fn raise(&self) {
        if let Some((q, show)) = self.queue.get() {
            // Queued once per raise after the last `take`: the clock thread polls the show.
            if !self.flag.swap(true, Ordering::AcqRel) {
                q.port_raised(*show);
            }
            return;
        }
        self.flag.store(true, Ordering::Release);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Routes this signal to `queue`, as show `show` (before the show starts).
    pub(crate) fn route_to(&self, queue: Arc<dyn PortQueue>, show: usize) {
        let _ = self.queue.set((queue, show));
    }

    /// Whether the port was signalled since the last call (clears it).
    pub(crate) fn take(&self) -> bool {
        self.flag.swap(false, Ordering::AcqRel)
    }

    /// Waits up to `timeout` for a signal; returns whether there was one.
    pub(crate) fn wait(&self, timeout: std::time::Duration) -> bool {
        if self.take() {
            return true;
        }
        std::thread::park_timeout(timeout);
        self.take()
    }
}

impl State {
    /// Hands `frame` of frame `slot` to sink `port`; the sink will finish it at `out_slot`
    /// (the frame's, or its leaky branch's).
    pub(super) fn hand_to_port(
        &mut self,
        port: usize,
        slot: usize,
        out_slot: usize,
        frame: Frame,
        ready_ns: i64,
    ) {
        let p = &mut self.ports[port];
        debug_assert!(p.ready.is_none(), "one frame at a time for a sink");
        p.ready = Some(PortItem {
            slot: out_slot,
            ctx: self.slots[slot].ctx,
            frame,
            ready_ns,
            begun_ns: self.slots[slot].begun_ns,
            version: self.ver.number,
        });
        self.wake.ports = true;
    }

    /// The frame whose turn it is at sink `port`, if it has arrived.
    pub(crate) fn take_ready(&mut self, port: usize) -> Option<PortItem> {
        self.ports[port].ready.take()
    }

    /// The output thread of `port` has consumed (or failed to consume) the frame of `slot`.
    pub(crate) fn sink_done(
        &mut self,
        shared: &Shared,
        port: usize,
        slot: usize,
        version: u64,
        result: Result<()>,
    ) {
        // A frame of a replaced version (see `maybe_switch`): its bookkeeping went with that
        // version. A show sink's next frame, the new version's first, waited for it.
        if !self.abort && version == self.ver.number {
            let node = self.ports[port].node;
            self.steps.push_back(Step::Finished(node, slot, None));
            self.drain();
        } else if !self.abort
            && self
                .old
                .as_ref()
                .is_some_and(|p| p.state.ver.number == version)
        {
            // A frame of the version an overlapping switch replaced, still finishing: its
            // sink may now be handed over to the running version.
            self.with_old(|st| {
                let node = st.ports[port].node;
                st.steps.push_back(Step::Finished(node, slot, None));
                st.drain();
            });
            self.hand_over();
        } else if !self.abort && self.ports[port].held_over {
            self.ports[port].held_over = false;
            let node = self.ports[port].node;
            self.let_in(node);
            self.drain();
        }
        if let Err(e) = result {
            self.fail(e);
        }
        self.after_change(shared);
    }
}
