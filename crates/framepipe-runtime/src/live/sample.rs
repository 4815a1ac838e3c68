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
    /// The frame's latest analysis point's window of samples and FFT magnitudes (ISF
    /// `audio` / `audioFFT`), when `arrays` (filled by [`FrameParams::read_arrays`]).
    wave: Box<[f32]>,
    fft: Box<[f32]>,
    arrays: bool,
    /// Per stage: bypassed?
    bypass: Vec<bool>,
    /// Per stage, per parameter: the value.
    values: Vec<Vec<PropValue>>,
    /// Per stage, per parameter: the stamp of the last set that gave it its value
    /// (`LiveParam::stamp`).
    stamps: Vec<Vec<u64>>,
}

impl FrameParams {
    /// Node `node`'s values for this frame, one per property.
    pub(crate) fn values(&self, node: usize) -> &[PropValue] {
        &self.values[node]
    }

    /// Node `node`'s stamps for this frame, one per property: a source is given a value whose
    /// stamp is newer than the one it was last given, even an equal value (a retrigger).
    pub(crate) fn stamps(&self, node: usize) -> &[u64] {
        &self.stamps[node]
    }

    /// Whether node `node` is bypassed for this frame.
    pub(crate) fn bypassed(&self, node: usize) -> bool {
        self.bypass[node]
    }

    /// The frame's audio analysis.
    pub(crate) fn audio(&self) -> &framepipe_audio::AudioFrame {
        &self.audio
    }

    /// Reads the arrays of the frame's analysis from `feed` (after [`Live::begin`], off the
    /// live lock): copies, no allocation.
    pub(crate) fn read_arrays(&mut self, feed: &framepipe_audio::Feed) {
        self.arrays = feed.arrays(&self.audio, &mut self.wave, &mut self.fft);
    }

    /// Copies `from`'s frame, time and values of `nodes` into this snapshot, without
    /// allocating (a leaky branch taking a frame's parameters).
    pub fn copy_nodes(&mut self, from: &FrameParams, nodes: &[usize]) {
        self.frame = from.frame;
        self.time = from.time;
        self.audio = from.audio;
        self.arrays = from.arrays;
        if from.arrays {
            self.wave.copy_from_slice(&from.wave);
            self.fft.copy_from_slice(&from.fft);
        }
        for &n in nodes {
            self.bypass[n] = from.bypass[n];
            for (d, s) in self.values[n].iter_mut().zip(&from.values[n]) {
                assign(d, s);
            }
            self.stamps[n].copy_from_slice(&from.stamps[n]);
        }
    }
}

/// The GPU thread's copy of a frame's audio arrays, for [`GpuCtx::audio`]
/// (framepipe_core::GpuCtx): made once, refilled per GPU node and frame from the frame's
/// snapshot (a copy under its lock, so that no lock is held while the node renders).
#[derive(Debug)]
pub(crate) struct GpuAudio {
    wave: Box<[f32]>,
    fft: Box<[f32]>,
    present: bool,
    /// The frame whose arrays these are (`u64::MAX`: none yet): the GPU nodes of one frame
    /// share one copy.
    frame: u64,
}

impl GpuAudio {
    pub(crate) fn new() -> Self {
        GpuAudio {
            wave: vec![0.0; framepipe_audio::FFT_SIZE].into(),
            fft: vec![0.0; framepipe_audio::SPECTRUM_BINS].into(),
            present: false,
            frame: u64::MAX,
        }
    }

    /// Takes the arrays of frame `frame`, whose snapshot is `snap`, unless they are the ones
    /// held (another GPU node of the same frame took them). No allocation.
    pub(crate) fn take(&mut self, frame: u64, snap: &Mutex<FrameParams>) {
        if self.frame == frame {
            return;
        }
        self.frame = frame;
        let snap = lock(snap);
        self.present = snap.arrays;
        if snap.arrays {
            self.wave.copy_from_slice(&snap.wave);
            self.fft.copy_from_slice(&snap.fft);
        }
    }

    /// The arrays taken, as a GPU node reads them (empty: the show has no audio).
    pub(crate) fn frame(&self) -> framepipe_core::FrameAudio<'_> {
        if self.present {
            framepipe_core::FrameAudio {
                wave: &self.wave,
                fft: &self.fft,
                sample_rate: framepipe_audio::RATE,
            }
        } else {
            framepipe_core::FrameAudio::default()
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
            wave: vec![0.0; framepipe_audio::FFT_SIZE].into(),
            fft: vec![0.0; framepipe_audio::SPECTRUM_BINS].into(),
            arrays: false,
            bypass: vec![false; self.stages.len()],
            values: self
                .stages
                .iter()
                .map(|s| s.params.iter().map(|p| p.base.clone()).collect())
                .collect(),
            stamps: self
                .stages
                .iter()
                .map(|s| vec![0; s.params.len()])
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
        if let Some(follow) = &mut self.tempo_auto {
            // `tempo auto`: the estimate sets the tempo from the next frame on; an onset near
            // a beat nudges the beat position toward it (also from the next frame).
            if let Some(bpm) = follow.step(out.audio.tempo_bpm, out.audio.time_ns) {
                let _ = self.clock.set_tempo(bpm.clamp(
                    framepipe_control::beat::MIN_BPM,
                    framepipe_control::beat::MAX_BPM,
                ));
            }
            if out.audio.onset && follow.bpm() > 0.0 {
                let age = (out.audio.onset_age_ns as f64 * self.clock.speed()) as i64;
                self.clock
                    .shift_beat(framepipe_audio::TempoFollow::phase_shift(
                        out.time.nanobeats,
                        age,
                        self.clock.tempo(),
                    ));
            }
        }
        for s in branch_nodes {
            self.sample_stage(s, out);
            self.stages[s].next = seq + 1;
        }
        seq
    }

    /// The beat clock at the frame begun last ([`Live::begin`]): the beat position its
    /// oscillators read and the tempo in force, for that frame's [`FrameCtx`](framepipe_core::FrameCtx).
    pub fn beat(&self) -> framepipe_core::BeatCtx {
        // The tempo is held in whole millibpm: the round trip through f64 is exact.
        let millibpm = (self.clock.tempo() * 1000.0).round();
        framepipe_core::BeatCtx {
            nanobeats: self.clock.time().nanobeats,
            millibpm: millibpm.clamp(0.0, f64::from(u32::MAX)) as u32,
        }
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
            if let Some((at, stamp)) = p.held {
                // Frames are sampled in order per stage: the held value lands once, at its
                // frame, and stays.
                if seq >= at {
                    std::mem::swap(&mut p.base, &mut p.held_value);
                    p.held = None;
                    p.stamp = stamp;
                    p.osc = None;
                    p.ramp = None;
                }
            }
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
            out.stamps[s][j] = p.stamp;
        }
    }

    /// The first frame at or after `from` on the beat grid of `beats` beats: the first whose
    /// beat position has reached the grid line at or after frame `from`'s. Frames begun
    /// already read their snapshot's position (`snaps`, `cap` slots); later ones the clock
    /// advanced to their timestamps (`rate`), at the speed and tempo in force now. A grid the
    /// beat does not move towards (master speed 0 or negative) within 4096 frames gives
    /// `from`. Under the live lock: integer steps, no allocation.
    pub fn beat_frame(
        &self,
        from: u64,
        beats: i64,
        rate: framepipe_core::Rational,
        snaps: &[Mutex<FrameParams>],
        cap: usize,
    ) -> u64 {
        let grid = beats.max(1).saturating_mul(framepipe_core::BeatCtx::ONE);
        let cap64 = cap.max(1) as u64;
        let mut clock = self.clock;
        let mut beat_at = |k: u64| -> Option<i64> {
            if k < self.sampled {
                let snap = lock(&snaps[(k % cap64) as usize]);
                return (snap.frame == k).then_some(snap.time.nanobeats);
            }
            clock.advance(rate.frame_time_ns(k));
            Some(clock.time().nanobeats)
        };
        let Some(start) = beat_at(from) else {
            return from;
        };
        // The grid line at or after frame `from`'s position.
        let line =
            start.div_euclid(grid) * grid + if start.rem_euclid(grid) == 0 { 0 } else { grid };
        let mut k = from;
        let mut nb = start;
        for _ in 0..4096 {
            if nb >= line {
                return k;
            }
            k += 1;
            match beat_at(k) {
                Some(b) => nb = b,
                None => return from,
            }
        }
        from
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

    /// Issue #26, quantized triggers: a set held until frame 6 reaches frames 6 and later
    /// only, even when the node starts a later frame first and catches the earlier ones up;
    /// it lands with a newer stamp (a retrigger of the same value still reaches a source).
    #[test]
    fn a_held_set_lands_on_its_frame_whatever_order_the_frames_start_in() {
        let (mut live, snaps) = two_stages(8, 8);
        let mut e = set(0, 0.5);
        live.hold(&mut e, 6);
        assert!(live.start_node(0, 7, 7, &snaps, 8));
        let got: Vec<_> = (0..8).map(|k| value(&snaps, k, 0).1).collect();
        let want: Vec<_> = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5]
            .into_iter()
            .map(PropValue::Float)
            .collect();
        assert_eq!(got, want);
        let stamp = |k: usize| lock(&snaps[k]).stamps(0)[0];
        assert!(stamp(6) > stamp(5) && stamp(7) == stamp(6));
    }

    /// Issue #26: at 25 fps and 120 bpm a frame is 0.08 beat; from frame 2 (begun) the next
    /// beat is reached on frame 13 (1.04 beats: predicted past the frames begun), the next bar
    /// on frame 50 (exactly 4 beats); frame 0, on the grid, is its own.
    #[test]
    fn the_beat_frame_is_the_first_at_or_after_the_next_grid_line() {
        let (live, snaps) = two_stages(4, 4);
        let rate = framepipe_core::Rational::new(25, 1);
        assert_eq!(live.beat_frame(2, 1, rate, &snaps, 4), 13);
        assert_eq!(live.beat_frame(2, 4, rate, &snaps, 4), 50);
        assert_eq!(live.beat_frame(0, 1, rate, &snaps, 4), 0);
    }
}
