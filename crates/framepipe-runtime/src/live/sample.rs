//! Per-frame sampling: each node writes the values in force when it starts a frame into that
//! frame's snapshot ([`FrameParams`]), once per frame and node (see the module doc of `live`).

use std::sync::Mutex;

use framepipe_control::OscTime;
use framepipe_core::PropValue;

use super::values::{audio_value, settle, typed};
use super::{assign, Live, Set};

/// The values one frame is processed with. Preallocated per slot; refilled without allocating
/// (text values reuse their buffers).
#[derive(Debug)]
pub(crate) struct FrameParams {
    /// The frame in this slot (set when it begins; `u64::MAX` before the first).
    frame: u64,
    /// Oscillator time and beat position of the frame.
    time: OscTime,
    /// The audio analysis at the frame's time (all zero without audio).
    audio: framepipe_audio::AudioFrame,
    /// Per stage: bypassed?
    bypass: Vec<bool>,
    /// Per stage, per parameter: the value.
    values: Vec<Vec<PropValue>>,
}

impl FrameParams {
    /// Node `node`'s values for this frame, one per property.
    pub(crate) fn values(&self, node: usize) -> &[PropValue] {
        &self.values[node]
    }

    /// Whether node `node` is bypassed for this frame.
    pub(crate) fn bypassed(&self, node: usize) -> bool {
        self.bypass[node]
    }

    /// Copies `from`'s frame, time and values of `nodes` into this snapshot, without
    /// allocating (a leaky branch taking a frame's parameters).
    pub fn copy_nodes(&mut self, from: &FrameParams, nodes: &[usize]) {
        self.frame = from.frame;
        self.time = from.time;
        self.audio = from.audio;
        for &n in nodes {
            self.bypass[n] = from.bypass[n];
            for (d, s) in self.values[n].iter_mut().zip(&from.values[n]) {
                assign(d, s);
            }
        }
    }
}

/// Locks a snapshot (never poisoned in practice: nothing panics while holding one).
pub(crate) fn lock(m: &Mutex<FrameParams>) -> std::sync::MutexGuard<'_, FrameParams> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Live {
    /// A snapshot slot shaped for these stages.
    pub fn empty_frame(&self) -> FrameParams {
        FrameParams {
            frame: u64::MAX,
            time: OscTime::default(),
            audio: framepipe_audio::AudioFrame::default(),
            bypass: vec![false; self.stages.len()],
            values: self
                .stages
                .iter()
                .map(|s| s.params.iter().map(|p| p.base.clone()).collect())
                .collect(),
        }
    }

    /// Frame `out` begins (its timestamp `pts_ns`): the oscillator clock advances to it, and
    /// its number and time go into its snapshot; the nodes of leaky branches (`branch_nodes`)
    /// sample their values for it now. Called once per frame, in frame order.
    pub fn begin(
        &mut self,
        pts_ns: i64,
        out: &mut FrameParams,
        branch_nodes: impl Iterator<Item = usize>,
    ) -> u64 {
        let seq = self.sampled;
        self.sampled += 1;
        self.clock.advance(pts_ns);
        out.frame = seq;
        out.time = self.clock.time();
        out.audio = match &mut self.audio {
            // Once per frame, in frame order: every node reads this one analysis.
            Some((feed, cursor)) => feed.frame(pts_ns, cursor),
            None => framepipe_audio::AudioFrame::default(),
        };
        if let Some(m) = &self.meter {
            m.publish(seq, &out.audio);
        }
        for s in branch_nodes {
            self.sample_stage(s, out);
            self.stages[s].next = seq + 1;
        }
        seq
    }

    /// Node `s` starts frame `seq`, whose snapshot is `snaps[slot]` (one per frame slot, `cap`
    /// of them, then the leaky branches'): unless the frame has its values already (a later
    /// frame of the node started first and sampled it with its own), the frames before it
    /// that the node has not started get the values in force now, and so does this one.
    /// Returns whether it sampled. Not for the nodes of leaky branches (see [`Live::begin`]).
    pub fn start_node(
        &mut self,
        s: usize,
        seq: u64,
        slot: usize,
        snaps: &[Mutex<FrameParams>],
        cap: usize,
    ) -> bool {
        if seq < self.stages[s].next {
            return false;
        }
        self.catch_up(s, seq, snaps, cap);
        let mut snap = lock(&snaps[slot]);
        debug_assert_eq!(snap.frame, seq, "a started frame's snapshot names it");
        self.sample_stage(s, &mut snap);
        self.stages[s].next = seq + 1;
        true
    }

    /// Brings stage `s` to frame `until`: the frames from its next one to `until - 1` that are
    /// still in flight (their slot's snapshot names them) get the values in force now, and
    /// the stage's next frame becomes `until`. Nothing when it is there already. At most `cap`
    /// frames (no more are in flight); assignments only, no allocation.
    pub fn catch_up(&mut self, s: usize, until: u64, snaps: &[Mutex<FrameParams>], cap: usize) {
        let next = self.stages[s].next;
        if until <= next {
            return;
        }
        let cap64 = cap.max(1) as u64;
        for seq in next.max(until.saturating_sub(cap64))..until {
            let mut snap = lock(&snaps[(seq % cap64) as usize]);
            if snap.frame == seq {
                self.sample_stage(s, &mut snap);
            }
        }
        self.stages[s].next = until;
    }

    /// Brings every stage to frame `until` ([`Live::catch_up`]): at an overlapping switch, the
    /// running version's frames still in flight take the values in force now for the nodes
    /// that have not started them (under the scheduler lock: `switch_overlapping`).
    pub(crate) fn catch_up_all(&mut self, until: u64, snaps: &[Mutex<FrameParams>], cap: usize) {
        for s in 0..self.stages.len() {
            self.catch_up(s, until, snaps, cap);
        }
    }

    /// The first frame that sees `set` if it is assigned now: its stage's next frame, or for
    /// the clock commands the next frame to begin.
    pub fn first_frame_of(&self, set: &Set) -> u64 {
        match set.stage() {
            Some(s) => self.stages[s].next,
            None => self.sampled,
        }
    }

    /// Samples stage `s`'s parameters for the frame of snapshot `out` (at its oscillator
    /// time) into it.
    pub(super) fn sample_stage(&mut self, s: usize, out: &mut FrameParams) {
        let (seq, t) = (out.frame, out.time);
        let st = &mut self.stages[s];
        out.bypass[s] = st.bypass;
        for (j, p) in st.params.iter_mut().enumerate() {
            match (&p.osc, &mut p.ramp) {
                (Some(osc), _) => {
                    let x = match &osc.audio {
                        Some(follow) => audio_value(osc, follow, &mut p.env, &out.audio),
                        None => osc.value_in(t),
                    };
                    p.last = typed(&p.spec.kind, x, &p.base);
                }
                (None, Some(ramp)) => p.last = typed(&p.spec.kind, ramp.at(seq), &p.base),
                (None, None) => assign(&mut p.last, &p.base),
            }
            settle(&p.spec, &mut p.last);
            assign(&mut out.values[s][j], &p.last);
        }
    }

    /// The sequence number of the next frame to begin: every stage samples its values for
    /// that frame and later ones after now (a set assigned now is seen from there at the
    /// latest; see [`Live::first_frame_of`] for the exact frame).
    pub fn next_frame(&self) -> u64 {
        self.sampled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::LiveStage;
    use framepipe_core::{PropKind, PropSpec};

    /// Two stages, `cap` snapshot slots, frames `0..begun` begun.
    fn two_stages(cap: usize, begun: u64) -> (Live, Vec<Mutex<FrameParams>>) {
        let float = PropKind::Float { min: 0.0, max: 1.0 };
        let stages = ["a", "b"]
            .into_iter()
            .map(|n| {
                let mut st = LiveStage::new(n.into(), n.into(), true, true);
                st.add_param(
                    PropSpec::new("p", float.clone(), PropValue::Float(0.0), ""),
                    PropValue::Float(0.0),
                );
                st
            })
            .collect();
        let mut live = Live::new(stages);
        let snaps: Vec<_> = (0..cap).map(|_| Mutex::new(live.empty_frame())).collect();
        for seq in 0..begun {
            let mut snap = lock(&snaps[seq as usize % cap]);
            live.begin(seq as i64 * 40_000_000, &mut snap, std::iter::empty());
        }
        (live, snaps)
    }

    fn set(stage: usize, x: f64) -> Set {
        Set::Value {
            stage,
            param: 0,
            value: PropValue::Float(x),
        }
    }

    fn value(snaps: &[Mutex<FrameParams>], seq: u64, stage: usize) -> (u64, PropValue) {
        let snap = lock(&snaps[seq as usize % snaps.len()]);
        (snap.frame, snap.values[stage][0].clone())
    }

    /// Issue #9, per-node sampling: a node starting a frame ahead of earlier ones (a parallel
    /// node) gives those the values in force then, and samples none of them again, so a `set`
    /// assigned after is seen from the node's next frame, which is what its reply names.
    #[test]
    fn a_node_starting_a_later_frame_first_fixes_the_earlier_ones_and_a_set_follows_it() {
        let (mut live, snaps) = two_stages(4, 4);
        assert_eq!(live.first_frame_of(&set(0, 0.5)), 0);
        assert!(live.start_node(0, 2, 2, &snaps, 4));
        let mut e = set(0, 0.5);
        assert_eq!(live.first_frame_of(&e), 3);
        live.apply(&mut e);
        // Frames 0 and 1 were given the old value when frame 2 started; starting them now
        // samples nothing.
        assert!(!live.start_node(0, 0, 0, &snaps, 4));
        assert!(!live.start_node(0, 1, 1, &snaps, 4));
        assert!(live.start_node(0, 3, 3, &snaps, 4));
        let got: Vec<_> = (0..4).map(|k| value(&snaps, k, 0).1).collect();
        let want: Vec<_> = [0.0, 0.0, 0.0, 0.5]
            .into_iter()
            .map(PropValue::Float)
            .collect();
        assert_eq!(got, want);
        // The other stage has started nothing: a `set` on it is seen from frame 0.
        assert_eq!(live.first_frame_of(&set(1, 0.5)), 0);
        // A clock command applies from the next frame to begin.
        assert_eq!(live.first_frame_of(&Set::Speed(2.0)), 4);
    }

    /// Issue #9: commands read together apply from the latest of their stages' next frames;
    /// the stage behind first takes its old values for the frames in between. A slot already
    /// reused by a later frame is left alone.
    #[test]
    fn catching_up_gives_the_frames_in_between_the_old_values_and_skips_reused_slots() {
        let (mut live, snaps) = two_stages(4, 6);
        // Frames 2..6 in flight (slots 2, 3, 0, 1); stage a has started frame 4, b nothing
        // since frame 2 (its next).
        live.stages[1].next = 2;
        assert!(live.start_node(0, 4, 0, &snaps, 4));
        let mut batch = [set(0, 0.25), set(1, 0.75)];
        let first = batch.iter().map(|e| live.first_frame_of(e)).max().unwrap();
        assert_eq!(first, 5);
        for e in &mut batch {
            live.catch_up(e.stage().unwrap(), first, &snaps, 4);
            live.apply(e);
        }
        // b: frames 2, 3 and 4 have the old value (0.0), and its next frame is 5.
        for k in 2..5 {
            assert_eq!(value(&snaps, k, 1), (k, PropValue::Float(0.0)), "frame {k}");
        }
        assert!(!live.start_node(1, 4, 0, &snaps, 4));
        assert!(live.start_node(1, 5, 1, &snaps, 4));
        assert_eq!(value(&snaps, 5, 1), (5, PropValue::Float(0.75)));
        assert!(live.start_node(0, 5, 1, &snaps, 4));
        assert_eq!(value(&snaps, 5, 0), (5, PropValue::Float(0.25)));
        // Catching a stage up over frames whose slots now hold later frames touches nothing
        // of them: slot 0 holds frame 4, not frame 0.
        let (mut live, snaps) = two_stages(4, 6);
        {
            let mut s = lock(&snaps[0]);
            s.values[1][0] = PropValue::Float(0.9);
        }
        live.catch_up(1, 4, &snaps, 4);
        assert_eq!(value(&snaps, 4, 1), (4, PropValue::Float(0.9)));
        assert_eq!(live.stages[1].next, 4);
    }
}
