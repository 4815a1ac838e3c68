//! Live edits' version switch: arming, the waiting switch, the overlapping switch, handing kept
//! nodes over, retiring the replaced version.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use framepipe_clock::now_ns;

use super::{Kind, Shared, State, Step, Version};

/// A live edit's next graph version, built off the frame path (`pipeline::prepare_edit`),
/// waiting in the state for its switch; after the switch it holds what it replaced.
pub(crate) struct Pending {
    /// The new version's scheduler state, made like a run's first (`new_state`): its version,
    /// nodes, slots and queues are swapped in at the switch.
    pub(crate) state: State,
    /// The new version's live stages (swapped into `Shared::live`).
    pub(crate) live_stages: Vec<crate::live::LiveStage>,
    /// (running node, new node) carried over: instances, source, feedback ring, live values.
    pub(crate) moves: Vec<(usize, usize)>,
    /// Per running node: what the edit does to it, for the commands read once it is armed
    /// (`Live::arm`, `Live::gone`).
    pub(crate) fates: Vec<crate::live::Fate>,
    /// The running nodes the edit removes (their names), for the refusals of commands on
    /// them after the switch.
    pub(crate) removed: Vec<Arc<str>>,
    /// Per new node: carried over (else it starts at the switch frame).
    pub(crate) moved: Vec<bool>,
    /// The edit's command, answered once switched (or refused).
    pub(crate) posted: Option<framepipe_control::Posted>,
    /// The new graph, published once switched.
    pub(crate) graph_view: Option<crate::stats::GraphView>,
    /// The new version's own pools, each once with its plan, until the edit's checks have
    /// passed: then (`pipeline::fill_edit_pools`) replaced by quota handles on a host's pools
    /// or filled.
    pub(crate) edit_pools: Vec<(framepipe_core::FramePool, crate::memory::PoolPlan)>,
    /// The frame the switch happened at.
    pub(crate) frame: u64,
    /// When it was armed and when it switched (monotonic ns): the drain, for the figures.
    pub(crate) armed_ns: i64,
    pub(crate) switched_ns: i64,
}

/// What the master output thread answers a switched edit with.
pub(crate) struct SwitchNews {
    /// The edit's command.
    pub(crate) posted: Option<framepipe_control::Posted>,
    /// The first frame of the new version.
    pub(crate) frame: u64,
    /// From its arming to its switch (ns).
    pub(crate) drain_ns: i64,
    /// The new graph, to publish.
    pub(crate) graph_view: Option<crate::stats::GraphView>,
    /// The nodes the switch removed (`Pending::removed`).
    pub(crate) removed: Vec<Arc<str>>,
}

impl State {
    /// Swaps the replaced version's state (`old`) with the running one's: the state machine's
    /// code then works on the replaced version. Moves only (pointers and counts); always
    /// undone before the lock is released (`with_old`).
    pub(super) fn swap_old(&mut self) {
        if let Some(mut p) = self.old.take() {
            swap_versions(self, &mut p.state);
            self.old = Some(p);
        }
    }

    /// Runs `f` on the replaced version's state (see `swap_old`).
    pub(super) fn with_old<R>(&mut self, f: impl FnOnce(&mut State) -> R) -> R {
        self.swap_old();
        let r = f(self);
        self.swap_old();
        r
    }

    /// Arms a live edit's switch: no frame begins in the running version from now on; once
    /// the frames in flight have left every node but the sinks holding them, the next version
    /// takes over (`maybe_switch`). The live lock is taken inside (as at the switch): a
    /// command read since the edit was read is shown from the frame its reply named, so the
    /// switch comes after that frame (`Live::arm`), and the commands read from now on know
    /// the switch frame and which nodes it ends (`Live::gone`).
    pub(crate) fn arm_switch(&mut self, mut p: Box<Pending>, shared: &Shared) {
        debug_assert!(self.pending.is_none());
        p.armed_ns = now_ns();
        // A version an edit switched in shows at least its first frame: an edit armed before
        // that frame began switches after it (else its reply would name a frame that shows
        // the next edit's graph instead).
        let at = if self.ver.number > 0 {
            self.next_seq.max(self.ver_first + 1)
        } else {
            self.next_seq
        };
        self.switch_at = shared.live.lock().arm(at, &p.fates);
        self.pending = Some(p);
    }

    /// Switches to the pending version once the running one's frames are done with: every
    /// frame before the switch frame has left every node but the show's sinks that hold it
    /// (at their port, or being consumed by their output thread: a frame waiting there for
    /// its deadline does not hold the next version's first frame back), no job runs, no
    /// leaky branch holds a frame that has not reached its sink. Moves only (the new version
    /// was built off the frame path): the kept nodes' instances, sources and feedback rings,
    /// and their live values, go into the new version; what is replaced waits in `switched`
    /// to be dropped off the frame path. A sink holding a frame of the replaced version stays
    /// busy in the new one until that frame's completion (`Port::held_over`).
    pub(super) fn maybe_switch(&mut self, shared: &Shared) {
        // After the sources' end no frame begins any more: an edit switched in then would
        // be answered with a frame that is never output; it is refused at the run's end.
        if self.pending.is_none()
            || self.source_done
            || self.abort
            || self.broken
            || self.begin_busy
            || self.switched.is_some()
            || self.old.is_some()
            || self.news.is_some()
            || self.next_seq < self.switch_at
        {
            return;
        }
        if self.can_overlap() {
            self.switch_overlapping(shared);
            return;
        }
        if self.running > 0
            || !self.ready.is_empty()
            || !self.io_ready.is_empty()
            || self.slice_pending().is_some()
            || !self.only_held_at_sinks()
        {
            return;
        }
        // A leaky branch still holding a frame has, with no job running or queued and no
        // frame waiting at a port, only its sinks left: their output threads are consuming
        // that frame (a preview blocked in its I/O). The switch does not wait for them (a
        // leaky branch never holds back the show); their completion is ignored (`sink_done`).
        let mut p = self.pending.take().expect("checked");
        let n = self.next_seq;
        for port in &mut self.ports {
            port.held_over = self.nodes[port.node].busy;
        }
        let next = &mut p.state;
        for &(o, j) in &p.moves {
            let (old, new) = (&mut self.nodes[o], &mut next.nodes[j]);
            std::mem::swap(&mut new.free, &mut old.free);
            std::mem::swap(&mut new.source, &mut old.source);
            std::mem::swap(&mut new.ring, &mut old.ring);
            new.first_seq = old.first_seq;
        }
        start_new_nodes(next, &p.moved, n);
        move_live_stages(&mut shared.live.lock(), &mut p, n);
        let next = &mut p.state;
        std::mem::swap(&mut self.ver, &mut next.ver);
        std::mem::swap(&mut self.nodes, &mut next.nodes);
        std::mem::swap(&mut self.slots, &mut next.slots);
        std::mem::swap(&mut self.ready, &mut next.ready);
        std::mem::swap(&mut self.io_ready, &mut next.io_ready);
        std::mem::swap(&mut self.steps, &mut next.steps);
        std::mem::swap(&mut self.branch_busy, &mut next.branch_busy);
        std::mem::swap(&mut self.branch_inputs, &mut next.branch_inputs);
        for (port, np) in self.ports.iter_mut().zip(&next.ports) {
            port.node = np.node;
            // Its first frame of the new version (`n`) waits for the held one.
            self.nodes[port.node].busy = port.held_over;
        }
        // The frames still held by sinks are the replaced version's (its pools', its slots'):
        // the new version's frames are counted afresh.
        self.in_flight = 0;
        self.announce_switch(shared, &mut p, n);
        self.switched = Some(p);
    }

    /// Whether the pending version may switch in while the running one still has frames in
    /// flight (`switch_overlapping`): neither has a leaky branch or a feedback (a branch's
    /// slot and a feedback's ring are not handed over node by node), and no sink still waits
    /// for a frame of an earlier switch. Otherwise the switch waits for the frames in flight
    /// to be made.
    pub(super) fn can_overlap(&self) -> bool {
        let Some(next) = self.pending.as_ref().map(|p| &p.state) else {
            return false;
        };
        let simple = |v: &Version| {
            v.topo.branches.is_empty()
                && v.topo
                    .nodes
                    .iter()
                    .all(|t| !matches!(t.kind, Kind::Feedback { .. }))
        };
        simple(&self.ver) && simple(&next.ver) && !self.ports.iter().any(|p| p.held_over)
    }

    /// Switches to the pending version at frame `n` (the next to begin) at once, while the
    /// running version's frames before `n` are still being made: those finish in their
    /// version, which moves to `old` and runs beside the new one (its jobs name it; its frames
    /// go first) until its last frame has left every node (`maybe_retire`). A kept node the
    /// old version still owes frames to is *held* in the new one (its frames from `n` park)
    /// and handed over (instances, source: one of each, moved) once it has finished the old
    /// version's last frame (`hand_over`), so it still takes every frame once, in order; a
    /// kept sink likewise takes `n` only after the old version's last frame. The old frames'
    /// nodes that have not started yet take their parameter values now (the live stages go
    /// to the new version). Moves and assignments only, like the waiting switch.
    pub(super) fn switch_overlapping(&mut self, shared: &Shared) {
        let mut p = self.pending.take().expect("checked");
        let n = self.next_seq;
        let next = &mut p.state;
        for &(o, j) in &p.moves {
            let (old, new) = (&mut self.nodes[o], &mut next.nodes[j]);
            new.first_seq = old.first_seq;
            if old.owed == 0 {
                std::mem::swap(&mut new.free, &mut old.free);
                std::mem::swap(&mut new.source, &mut old.source);
                std::mem::swap(&mut new.ring, &mut old.ring);
            } else {
                new.held = true;
            }
        }
        start_new_nodes(next, &p.moved, n);
        {
            let mut live = shared.live.lock();
            live.catch_up_all(n, &self.ver.snapshots, self.ver.topo.cap);
            move_live_stages(&mut live, &mut p, n);
        }
        swap_versions(self, &mut p.state);
        self.announce_switch(shared, &mut p, n);
        self.old = Some(p);
    }

    /// The end of both switches, at frame `n`: the version is `p`'s now (published for the
    /// stats readers), its first frame `n`; the switch's news (the replies, the drain, the
    /// graph's view) is left for the output thread, and every port and worker looks again.
    pub(super) fn announce_switch(&mut self, shared: &Shared, p: &mut Pending, n: u64) {
        self.switch_at = u64::MAX;
        self.ver_first = n;
        p.frame = n;
        p.switched_ns = now_ns();
        shared.version.store(self.ver.number, Ordering::Release);
        self.news = Some(SwitchNews {
            posted: p.posted.take(),
            frame: n,
            drain_ns: p.switched_ns - p.armed_ns,
            graph_view: p.graph_view.take(),
            removed: std::mem::take(&mut p.removed),
        });
        self.wake.ports = true;
        self.wake.work_all = true;
    }

    /// Hands the kept nodes that the replaced version no longer owes a frame over to the
    /// running one: their instances, source and ring move in, and their parked frames become
    /// runnable (in order: a serial node parks again what is not its turn).
    pub(super) fn hand_over(&mut self) {
        let Some(mut p) = self.old.take() else {
            return;
        };
        let mut any = false;
        for &(o, j) in &p.moves {
            if !self.nodes[j].held || p.state.nodes[o].owed > 0 {
                continue;
            }
            let (old, new) = (&mut p.state.nodes[o], &mut self.nodes[j]);
            std::mem::swap(&mut new.free, &mut old.free);
            std::mem::swap(&mut new.source, &mut old.source);
            std::mem::swap(&mut new.ring, &mut old.ring);
            new.held = false;
            for (k, parked) in new.parked.iter_mut().enumerate() {
                if *parked && self.slots[k].active {
                    *parked = false;
                    self.steps.push_back(Step::Runnable(j, k));
                    any = true;
                }
            }
        }
        self.old = Some(p);
        if any {
            self.drain();
        }
    }

    /// The replaced version of an overlapping switch has no frame left in flight and no job
    /// running: it goes to `switched`, for the master output thread to hand to the edit thread
    /// (which drops it off the frame path).
    pub(super) fn maybe_retire(&mut self) {
        let done = self
            .old
            .as_ref()
            .is_some_and(|p| p.state.in_flight == 0 && p.state.running == 0);
        if !done || self.switched.is_some() {
            return;
        }
        debug_assert!(
            self.abort || self.nodes.iter().all(|n| !n.held),
            "every kept node was handed over"
        );
        self.switched = self.old.take();
        self.wake.ports = true;
    }

    /// Whether the running version's frames in flight have left every node but the show's
    /// sinks holding them, as `maybe_switch` needs: each one's remaining nodes are exactly
    /// the sinks that hold it (a sink still waiting for its turn, at a serial node, does not
    /// count: its frame must reach it in this version's bookkeeping first); no frame waits at
    /// a leaky sink's port (its branch may take the next one only once that one is taken);
    /// each holding sink's port is a show sink in the next version too (it will wait there);
    /// no sink still waits for the frame of an earlier switch.
    pub(super) fn only_held_at_sinks(&self) -> bool {
        let v = &self.ver;
        let Some(next) = self.pending.as_ref().map(|p| &p.state) else {
            return false;
        };
        let holding = |node: usize, seq: u64| {
            let st = &self.nodes[node];
            v.topo.nodes[node].branch.is_none() && st.busy && st.next_seq == seq
        };
        for (i, port) in self.ports.iter().enumerate() {
            let leaky = v.topo.nodes[port.node].branch.is_some();
            if port.held_over || (leaky && port.ready.is_some()) {
                return false;
            }
            let held = self.nodes[port.node].busy && !leaky;
            let np = next.ports[i].node;
            if held && next.ver.topo.nodes[np].branch.is_some() {
                return false;
            }
        }
        self.slots[..v.topo.cap].iter().all(|s| {
            !s.active
                || s.left
                    == self
                        .ports
                        .iter()
                        .filter(|p| holding(p.node, s.ctx.seq))
                        .count()
        })
    }
}

/// Swaps what belongs to one graph version between two states: the version, its nodes,
/// slots, queues, frames in flight and running jobs, and the sinks' nodes of the ports. What
/// is the show's whatever the version stays (frame numbers, the end, the ports' frames, the
/// IO thread, slices, wake-ups). Moves only.
/// Both switches: the new version's nodes take frames from `n`; those not kept from the old
/// one (`moved[j]` false) also count their first frame (and a source its origin) from `n`.
pub(super) fn start_new_nodes(next: &mut State, moved: &[bool], n: u64) {
    for (j, st) in next.nodes.iter_mut().enumerate() {
        st.next_seq = n;
        if !moved[j] {
            st.first_seq = n;
            if let Some(src) = st.source.as_mut() {
                src.origin = n;
            }
        }
    }
}

/// Both switches: the new version's live stages take over from frame `n` (`Live::switch_to`:
/// the kept nodes' values move to their new place, a replaced node takes what was set on it
/// since the edit was read); the running ones are left in `p`, dropped off the frame path.
pub(super) fn move_live_stages(live: &mut crate::live::Live, p: &mut Pending, n: u64) {
    live.switch_to(
        &mut p.live_stages,
        &p.moved,
        &p.moves,
        p.state.ver.number,
        n,
    );
}

pub(super) fn swap_versions(a: &mut State, b: &mut State) {
    std::mem::swap(&mut a.ver, &mut b.ver);
    std::mem::swap(&mut a.nodes, &mut b.nodes);
    std::mem::swap(&mut a.slots, &mut b.slots);
    std::mem::swap(&mut a.ready, &mut b.ready);
    std::mem::swap(&mut a.io_ready, &mut b.io_ready);
    std::mem::swap(&mut a.steps, &mut b.steps);
    std::mem::swap(&mut a.branch_busy, &mut b.branch_busy);
    std::mem::swap(&mut a.branch_inputs, &mut b.branch_inputs);
    std::mem::swap(&mut a.in_flight, &mut b.in_flight);
    std::mem::swap(&mut a.max_in_flight, &mut b.max_in_flight);
    std::mem::swap(&mut a.running, &mut b.running);
    for (x, y) in a.ports.iter_mut().zip(b.ports.iter_mut()) {
        std::mem::swap(&mut x.node, &mut y.node);
    }
}
