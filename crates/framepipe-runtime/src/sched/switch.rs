//! Live edits' version switch. A version goes through three types: a [`NextVersion`] (built
//! by the edit thread, then armed in the state until its switch), the running [`Flight`], and,
//! once replaced, a [`Retiring`] version finishing its frames beside the running one (an
//! overlapping switch) and a [`Replaced`] one handed to the edit thread to be dropped off the
//! frame path. Every step is moves and assignments only: nothing allocates or frees here.
//!
//! * [`Scheduler::arm_switch`] (master output thread): no frame begins in the running version from
//!   the switch frame on.
//! * `maybe_switch` (whoever changed the state last): when the switch frame is next, either
//!   at once (`switch_overlapping`, neither version has a leaky branch or a feedback) or once
//!   the frames in flight have left every node but the sinks holding them (the waiting
//!   switch).
//! * `hand_over` (after a retiring version's job or sink completes): a kept node the retiring
//!   version no longer owes a frame moves to the running version.
//! * `maybe_retire`: the retiring version's last frame has left every node: it becomes
//!   [`Replaced`], taken by the master output thread ([`Scheduler::take_replaced`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use framepipe_clock::now_ns;
use framepipe_core::FramePool;

use crate::live::{Fate, Live, LiveStage};
use crate::memory::PoolPlan;
use crate::stats::GraphView;

use super::{Flight, NodeState, Scheduler, Shared, Step, Version};

/// What a live edit does at its switch besides bringing its version (built with it by the
/// edit's builder, `edit::prepare_edit`).
pub(crate) struct EditPlan {
    /// The new version's live stages (they become `Live::stages` at the switch; the replaced
    /// ones go with the replaced version).
    pub(crate) live_stages: Vec<LiveStage>,
    /// (running node, new node) carried over: instances, source, feedback ring, live values.
    pub(crate) moves: Vec<(usize, usize)>,
    /// Per running node: what the edit does to it, for the commands read once it is armed
    /// (`Live::arm`, `Live::gone`).
    pub(crate) fates: Vec<Fate>,
    /// The running nodes the edit removes (their names), for the refusals of commands on
    /// them after the switch.
    pub(crate) removed: Vec<Arc<str>>,
    /// Per new node: carried over (else it starts at the switch frame).
    pub(crate) moved: Vec<bool>,
    /// The new graph, published once switched.
    pub(crate) graph_view: Option<GraphView>,
    /// The new version's own pools, each once with its plan, until the edit's checks have
    /// passed: then (`edit::fill_edit_pools`) replaced by quota handles on a host's pools
    /// or filled.
    pub(crate) edit_pools: Vec<(FramePool, PoolPlan)>,
}

/// A live edit's next graph version: built off the frame path (on the edit thread), then armed
/// in the state ([`Scheduler::arm_switch`]) until it switches in. Moved by value (the channels to
/// and from the edit thread are bounded: nothing allocates or frees on the way).
pub(crate) struct NextVersion {
    flight: Flight,
    plan: EditPlan,
    /// The edit's command, answered once switched (or refused).
    posted: Option<framepipe_control::Posted>,
    /// When it was armed (monotonic ns): the drain, for the figures.
    armed_ns: i64,
}

impl NextVersion {
    /// The next version `ver` (its sinks' nodes per output port, its nodes' states) and what
    /// the edit does at the switch.
    pub(crate) fn new(
        ver: Arc<Version>,
        port_nodes: Vec<usize>,
        nodes: Vec<NodeState>,
        plan: EditPlan,
    ) -> Self {
        NextVersion {
            flight: Flight::new(ver, port_nodes, nodes),
            plan,
            posted: None,
            armed_ns: 0,
        }
    }

    /// The version it brings.
    pub(crate) fn version(&self) -> &Arc<Version> {
        &self.flight.ver
    }

    /// The version it brings, while nothing else holds it (on the edit thread, before it is
    /// sent).
    pub(crate) fn version_mut(&mut self) -> Option<&mut Version> {
        Arc::get_mut(&mut self.flight.ver)
    }

    /// The new version's live stages (a crossfade sets its ramps on them).
    pub(crate) fn live_stages_mut(&mut self) -> &mut [LiveStage] {
        &mut self.plan.live_stages
    }

    /// The new version's own pools and their plans, taken once to be filled or shared.
    pub(crate) fn take_edit_pools(&mut self) -> Vec<(FramePool, PoolPlan)> {
        std::mem::take(&mut self.plan.edit_pools)
    }

    /// The edit's command, answered when it switches in.
    pub(crate) fn set_posted(&mut self, posted: framepipe_control::Posted) {
        self.posted = Some(posted);
    }

    /// The edit's command, to refuse it (it never switched in).
    pub(crate) fn take_posted(&mut self) -> Option<framepipe_control::Posted> {
        self.posted.take()
    }
}

/// The version an overlapping switch replaced, finishing its frames beside the running one
/// (its jobs name its version number; they go first) until its last frame has left every
/// node (`maybe_retire`).
pub(crate) struct Retiring {
    pub(super) flight: Flight,
    /// The edit that replaced it: its moves say which of its nodes go on in the running
    /// version (`hand_over`).
    plan: EditPlan,
}

/// A version a switch replaced, with no frame left in flight: handed by the master output
/// thread to the edit thread, which drops it off the frame path (its removed nodes' instances,
/// its slots, the replaced live stages, its pools once their frames are back).
pub(crate) struct Replaced {
    flight: Flight,
    /// The edit's remains (the replaced live stages among them): dropped with it.
    _plan: EditPlan,
}

impl Replaced {
    /// Lets go of what it still holds of its pools' frames: its sources (a held source's last
    /// frame), feedback rings and slots' outputs (no free: the version holds the pools).
    pub(crate) fn release_frames(&mut self) {
        for n in &mut self.flight.nodes {
            n.ring.iter_mut().for_each(|r| *r = None);
            n.source = None;
        }
        for s in &mut self.flight.slots {
            s.outputs.iter_mut().for_each(|o| *o = None);
        }
    }

    /// The instances of its nodes the running version did not take over (removed or
    /// replaced nodes'), taken out.
    pub(crate) fn take_instances(&mut self) -> impl Iterator<Item = crate::exec::Instance> + '_ {
        self.flight.nodes.iter_mut().flat_map(|n| n.free.drain(..))
    }

    /// Its version, once nothing else holds it.
    pub(crate) fn version_mut(&mut self) -> Option<&mut Version> {
        Arc::get_mut(&mut self.flight.ver)
    }
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
    pub(crate) graph_view: Option<GraphView>,
    /// The nodes the switch removed (`EditPlan::removed`).
    pub(crate) removed: Vec<Arc<str>>,
}

impl Scheduler {
    /// Arms a live edit's switch: no frame begins in the running version from now on; once
    /// the frames in flight have left every node but the sinks holding them, the next version
    /// takes over (`maybe_switch`). The live lock is taken inside, under this one (as at the
    /// switch; the lock order is in `lock.rs`): a command read since the edit was read is
    /// shown from the frame its reply named, so the switch comes after that frame
    /// (`Live::arm`), and the commands read from now on know the switch frame and which nodes
    /// it ends (`Live::gone`).
    pub(crate) fn arm_switch(&mut self, mut next: NextVersion, shared: &Shared) {
        debug_assert!(self.next.is_none());
        next.armed_ns = now_ns();
        // A version an edit switched in shows at least its first frame: an edit armed before
        // that frame began switches after it (else its reply would name a frame that shows
        // the next edit's graph instead).
        let at = if self.flight.ver.number > 0 {
            self.next_seq.max(self.ver_first + 1)
        } else {
            self.next_seq
        };
        self.switch_at = shared.live.lock().arm(at, &next.plan.fates);
        self.next = Some(next);
    }

    /// The armed edit, if any, taken out (the run ended before it switched in).
    pub(crate) fn take_next_version(&mut self) -> Option<NextVersion> {
        self.next.take()
    }

    /// The news of a switch, for the master output thread to answer (at the switch, before
    /// the replaced version is done).
    pub(crate) fn take_switch_news(&mut self) -> Option<SwitchNews> {
        self.news.take()
    }

    /// A replaced version with no frame left, for the master output thread to hand to the
    /// edit thread.
    pub(crate) fn take_replaced(&mut self) -> Option<Replaced> {
        self.replaced.take()
    }

    /// Switches to the armed version once the running one's frames are done with: every
    /// frame before the switch frame has left every node but the show's sinks that hold it
    /// (at their port, or being consumed by their output thread: a frame waiting there for
    /// its deadline does not hold the next version's first frame back), no job runs, no
    /// leaky branch holds a frame that has not reached its sink. Moves only (the new version
    /// was built off the frame path): the kept nodes' instances, sources and feedback rings,
    /// and their live values, go into the new version; what is replaced waits in `replaced`
    /// to be dropped off the frame path. A sink finishing a frame of the replaced version
    /// stays busy in the new one until that frame's completion (`Port::finishing_replaced`).
    pub(super) fn maybe_switch(&mut self, shared: &Shared) {
        // After the sources' end no frame begins any more: an edit switched in then would
        // be answered with a frame that is never output; it is refused at the run's end.
        if self.next.is_none()
            || self.run.source_done
            || self.run.abort
            || self.broken
            || self.begin_busy
            || self.replaced.is_some()
            || self.retiring.is_some()
            || self.news.is_some()
            || self.next_seq < self.switch_at
        {
            return;
        }
        if self.can_overlap() {
            self.switch_overlapping(shared);
            return;
        }
        if self.flight.running > 0
            || !self.flight.ready.is_empty()
            || !self.flight.io_ready.is_empty()
            || self.slice_pending().is_some()
            || !self.frames_only_at_sinks()
        {
            return;
        }
        // A leaky branch still holding a frame has, with no job running or queued and no
        // frame waiting at a port, only its sinks left: their output threads are consuming
        // that frame (a preview blocked in its I/O). The switch does not wait for them (a
        // leaky branch never holds back the show); their completion is ignored (`sink_done`).
        let NextVersion {
            flight: mut next,
            mut plan,
            posted,
            armed_ns,
        } = self.next.take().expect("checked");
        let n = self.next_seq;
        for (port, &node) in self.run.ports.iter_mut().zip(&self.flight.port_nodes) {
            port.finishing_replaced = self.flight.nodes[node].busy;
        }
        for &(o, j) in &plan.moves {
            next.take_node(j, &mut self.flight, o);
            next.nodes[j].first_seq = self.flight.nodes[o].first_seq;
        }
        start_new_nodes(&mut next, &plan.moved, n);
        move_live_stages(&mut shared.live.lock(), &mut plan, next.ver.number, n);
        // The frames still held by sinks are the replaced version's (its pools', its slots'):
        // the new version's frames are counted afresh.
        let replaced = std::mem::replace(&mut self.flight, next);
        for (port, &node) in self.run.ports.iter().zip(&self.flight.port_nodes) {
            // Its first frame of the new version (`n`) waits for the one it is finishing.
            self.flight.nodes[node].busy = port.finishing_replaced;
        }
        self.announce_switch(shared, &mut plan, posted, armed_ns, n);
        self.replaced = Some(Replaced {
            flight: replaced,
            _plan: plan,
        });
    }

    /// Whether the armed version may switch in while the running one still has frames in
    /// flight (`switch_overlapping`): neither has a leaky branch or a feedback (a branch's
    /// slot and a feedback's ring are not handed over node by node), and no sink is still
    /// finishing a frame of an earlier switch. Otherwise the switch waits for the frames in
    /// flight to be made.
    fn can_overlap(&self) -> bool {
        let Some(next) = self.next.as_ref() else {
            return false;
        };
        self.flight.overlappable()
            && next.flight.overlappable()
            && !self.run.ports.iter().any(|p| p.finishing_replaced)
    }

    /// Switches to the armed version at frame `n` (the next to begin) at once, while the
    /// running version's frames before `n` are still being made: those finish in their
    /// version, which becomes [`Retiring`] and runs beside the new one (its jobs name it; its
    /// frames go first) until its last frame has left every node (`maybe_retire`). A kept
    /// node the retiring version still owes frames to awaits its hand-over in the new one (its
    /// frames from `n` park) and is handed over (instances, source: one of each, moved) once
    /// it has finished the retiring version's last frame (`hand_over`), so it still takes
    /// every frame once, in order; a kept sink likewise takes `n` only after the retiring
    /// version's last frame. The retiring frames' nodes that have not started yet take their
    /// parameter values now (the live stages go to the new version). Moves and assignments
    /// only, like the waiting switch.
    fn switch_overlapping(&mut self, shared: &Shared) {
        let NextVersion {
            flight: mut next,
            mut plan,
            posted,
            armed_ns,
        } = self.next.take().expect("checked");
        let n = self.next_seq;
        for &(o, j) in &plan.moves {
            next.nodes[j].first_seq = self.flight.nodes[o].first_seq;
            if self.flight.nodes[o].owed == 0 {
                next.take_node(j, &mut self.flight, o);
            } else {
                next.nodes[j].awaiting_hand_over = true;
            }
        }
        start_new_nodes(&mut next, &plan.moved, n);
        {
            let mut live = shared.live.lock();
            live.catch_up_all(n, &self.flight.ver.snapshots, self.flight.ver.topo.cap);
            move_live_stages(&mut live, &mut plan, next.ver.number, n);
        }
        let replaced = std::mem::replace(&mut self.flight, next);
        self.announce_switch(shared, &mut plan, posted, armed_ns, n);
        self.retiring = Some(Retiring {
            flight: replaced,
            plan,
        });
    }

    /// The end of both switches, at frame `n`: the version is the running flight's now
    /// (published for the stats readers), its first frame `n`; the switch's news (the
    /// replies, the drain, the graph's view) is left for the output thread, and every port
    /// and worker looks again.
    fn announce_switch(
        &mut self,
        shared: &Shared,
        plan: &mut EditPlan,
        posted: Option<framepipe_control::Posted>,
        armed_ns: i64,
        n: u64,
    ) {
        self.switch_at = u64::MAX;
        self.ver_first = n;
        shared
            .version
            .store(self.flight.ver.number, Ordering::Release);
        self.news = Some(SwitchNews {
            posted,
            frame: n,
            drain_ns: now_ns() - armed_ns,
            graph_view: plan.graph_view.take(),
            removed: std::mem::take(&mut plan.removed),
        });
        self.run.wake.ports = true;
        self.run.wake.work_all = true;
    }

    /// Hands the kept nodes that the retiring version no longer owes a frame over to the
    /// running one: their instances, source and ring move in, and their parked frames become
    /// runnable (in order: a serial node parks again what is not its turn).
    pub(super) fn hand_over(&mut self) {
        let Some(r) = self.retiring.as_mut() else {
            return;
        };
        let mut any = false;
        for &(o, j) in &r.plan.moves {
            if !self.flight.nodes[j].awaiting_hand_over || r.flight.nodes[o].owed > 0 {
                continue;
            }
            self.flight.take_node(j, &mut r.flight, o);
            let new = &mut self.flight.nodes[j];
            new.awaiting_hand_over = false;
            for (k, parked) in new.parked.iter_mut().enumerate() {
                if *parked && self.flight.slots[k].active {
                    *parked = false;
                    self.flight.steps.push_back(Step::Runnable(j, k));
                    any = true;
                }
            }
        }
        if any {
            self.flight.drain(&mut self.run);
        }
    }

    /// The retiring version has no frame left in flight and no job running: it becomes
    /// [`Replaced`], for the master output thread to hand to the edit thread (which drops it
    /// off the frame path).
    pub(super) fn maybe_retire(&mut self) {
        let done = self.retiring.as_ref().is_some_and(|r| r.flight.idle());
        if !done || self.replaced.is_some() {
            return;
        }
        debug_assert!(
            self.run.abort || self.flight.nodes.iter().all(|n| !n.awaiting_hand_over),
            "every kept node was handed over"
        );
        let Retiring { flight, plan } = self.retiring.take().expect("checked");
        self.replaced = Some(Replaced {
            flight,
            _plan: plan,
        });
        self.run.wake.ports = true;
    }

    /// Whether the running version's frames in flight have left every node but the show's
    /// sinks holding them, as `maybe_switch` needs: each one's remaining nodes are exactly
    /// the sinks that hold it (a sink still waiting for its turn, at a serial node, does not
    /// count: its frame must reach it in this version's bookkeeping first); no frame waits at
    /// a leaky sink's port (its branch may take the next one only once that one is taken);
    /// each holding sink's port is a show sink in the next version too (it will wait there);
    /// no sink is still finishing the frame of an earlier switch.
    fn frames_only_at_sinks(&self) -> bool {
        let f = &self.flight;
        let v = &f.ver;
        let Some(next) = self.next.as_ref().map(|p| &p.flight) else {
            return false;
        };
        let holding = |node: usize, seq: u64| {
            let st = &f.nodes[node];
            v.topo.nodes[node].branch.is_none() && st.busy && st.next_seq == seq
        };
        for (i, port) in self.run.ports.iter().enumerate() {
            let node = f.port_nodes[i];
            let leaky = v.topo.nodes[node].branch.is_some();
            if port.finishing_replaced || (leaky && port.ready.is_some()) {
                return false;
            }
            let has_frame = f.nodes[node].busy && !leaky;
            let np = next.port_nodes[i];
            if has_frame && next.ver.topo.nodes[np].branch.is_some() {
                return false;
            }
        }
        f.slots[..v.topo.cap].iter().all(|s| {
            !s.active
                || s.left
                    == f.port_nodes
                        .iter()
                        .filter(|&&node| holding(node, s.ctx.seq))
                        .count()
        })
    }
}

/// Both switches: the new version's nodes take frames from `n`; those not kept from the
/// replaced one (`moved[j]` false) also count their first frame (and a source its origin)
/// from `n`.
fn start_new_nodes(next: &mut Flight, moved: &[bool], n: u64) {
    for (j, st) in next.nodes.iter_mut().enumerate() {
        st.next_seq = n;
        if !moved[j] {
            st.first_seq = n;
            if let Some(src) = st.source.as_mut() {
                src.start_at(n);
            }
        }
    }
}

/// Both switches: the new version's live stages take over from frame `n` (`Live::switch_to`:
/// the kept nodes' values move to their new place, a replaced node takes what was set on it
/// since the edit was read); the running ones are left in `plan`, dropped off the frame path.
fn move_live_stages(live: &mut Live, plan: &mut EditPlan, number: u64, n: u64) {
    live.switch_to(&mut plan.live_stages, &plan.moved, &plan.moves, number, n);
}
