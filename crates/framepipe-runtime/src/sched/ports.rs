//! The sinks' output ports: the frame whose turn it is at each sink, the signal its output
//! thread waits on, and a sink's completion.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;

use framepipe_core::{FrameCtx, Result};

use super::{Flight, Pixels, Run, Scheduler, Shared};

/// One sink's hand-off: the frame whose turn it is at that sink (the sink's node is the
/// running flight's: `Flight::port_nodes`).
#[derive(Default)]
pub(crate) struct Port {
    pub(super) ready: Option<PortItem>,
    /// A live edit switched while this sink was finishing a frame of the replaced version
    /// (waiting at the port or being consumed by its output thread): the sink's node in the
    /// running version is kept busy, so that the new version's first frame waits for that
    /// one's completion (`sink_done`) and the sink still takes its frames in order.
    pub(super) finishing_replaced: bool,
}

/// A frame for a sink.
pub(crate) struct PortItem {
    pub(crate) slot: usize,
    pub(crate) ctx: FrameCtx,
    /// A CPU frame, or a texture for a sink that takes textures (behind a `present`).
    pub(crate) frame: Pixels,
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

impl Flight {
    /// Hands `frame` of frame `slot` to sink `port`; the sink will finish it at `out_slot`
    /// (the frame's, or its leaky branch's).
    pub(super) fn hand_to_port(
        &mut self,
        run: &mut Run,
        port: usize,
        slot: usize,
        out_slot: usize,
        frame: Pixels,
        ready_ns: i64,
    ) {
        let p = &mut run.ports[port];
        debug_assert!(p.ready.is_none(), "one frame at a time for a sink");
        p.ready = Some(PortItem {
            slot: out_slot,
            ctx: self.slots[slot].ctx,
            frame,
            ready_ns,
            begun_ns: self.slots[slot].begun_ns,
            version: self.ver.number,
        });
        run.wake.ports = true;
    }
}

impl Scheduler {
    /// The frame whose turn it is at sink `port`, if it has arrived.
    pub(crate) fn take_ready(&mut self, port: usize) -> Option<PortItem> {
        self.run.ports[port].ready.take()
    }

    /// The sink node of output `port` in the running version.
    pub(crate) fn sink_node(&self, port: usize) -> usize {
        self.flight.port_nodes[port]
    }

    /// The output thread of `port` has consumed (or failed to consume) the frame of `slot`,
    /// handed to it in version `version`.
    pub(crate) fn sink_done(
        &mut self,
        shared: &Shared,
        port: usize,
        slot: usize,
        version: u64,
        result: Result<()>,
    ) {
        let aborted = self.run.abort;
        if aborted {
            // Every frame was dropped: nothing to finish.
        } else if version == self.flight.ver.number {
            self.flight.finish_at_sink(&mut self.run, port, slot);
        } else if let Some(r) = self
            .retiring
            .as_mut()
            .filter(|r| r.flight.ver.number == version)
        {
            // A frame of the version an overlapping switch replaced, still finishing: its
            // sink may now be handed over to the running version.
            r.flight.finish_at_sink(&mut self.run, port, slot);
            self.hand_over();
        } else if self.run.ports[port].finishing_replaced {
            // A frame of a version a waiting switch replaced (see `maybe_switch`): its
            // bookkeeping went with that version. The sink's next frame, the new version's
            // first, waited for it.
            self.run.ports[port].finishing_replaced = false;
            let node = self.flight.port_nodes[port];
            self.flight.let_in(node);
            self.flight.drain(&mut self.run);
        }
        if let Err(e) = result {
            self.fail(e);
        }
        self.after_change(shared);
    }
}
