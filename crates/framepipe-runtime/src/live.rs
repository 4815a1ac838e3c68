//! Live parameters: values set by commands or driven by oscillators, sampled **once per frame
//! and node**, when that node starts the frame (issue #9, low-latency control).
//!
//! A frame's beginning fixes its oscillator time (derived from its timestamp, never from the
//! wall clock) in the frame's snapshot slot (`seq % in_flight`). Each node of the show, when
//! it starts the frame, writes the values in force *then* for itself into that snapshot and
//! brings its instance's properties to them. So a command reaches every frame whose node has
//! not started yet, also frames that began before it (a fader on the last node of a long chain
//! shows in the next frame out, not a whole chain later), and still each node uses one value
//! per frame, and a value once shown stays (frames in order for every node):
//!
//! * each stage keeps the next frame it samples (`LiveStage::next`); a node starting frame
//!   `s` first gives the frames before `s` it has not started yet (a parallel node may start
//!   frames out of order) the same values, then samples `s`: a command assigned later is seen
//!   from `s + 1` on, by every frame of that node;
//! * a command is answered with its stage's next frame; commands read together (a batch, or
//!   one frame boundary's worth) with the latest of their stages' next frames, the stages
//!   behind it first sampling the values before the commands for the frames in between
//!   (`Live::catch_up`): all of them are seen from the frame the reply names;
//! * the clock commands (`speed`, `tempo`, `tap`) act on the oscillator time, fixed when a
//!   frame begins: they apply from the next frame to begin;
//! * the nodes of a leaky branch (a monitor, a preview) are sampled when the frame begins, as
//!   before: the branch takes the frame's values into its own slot and runs on its own time.
//! * a command read while a live edit is on its way applies at once to the running node; its
//!   reply stays true across the switch: a node the edit replaces by one of the same element
//!   takes the values set since the edit was read ([`Live::carry`]), one it removes shows the
//!   command until the switch, which waits for the command's frame ([`Live::arm`]), or the
//!   command is refused when no frame of the node is left ([`Live::gone`]).
//!
//! Two stages driven by the same oscillator agree on every frame even though they process it
//! at different moments: the value is a function of the frame's oscillator time.

use std::sync::Mutex;

use framepipe_control::{Command, OscClock, OscTime, Oscillator, TapResult, TapTempo, Target};
use framepipe_core::{PropKind, PropSpec, PropValue};

/// One controllable property of one stage.
pub(crate) struct LiveParam {
    pub spec: PropSpec,
    /// Value set by the user (initial property or last `set`).
    base: PropValue,
    osc: Option<Oscillator>,
    /// A one-shot ramp on the frame clock (a crossfade's amount), instead of `base`.
    ramp: Option<Ramp>,
    /// Value in force for the last frame sampled.
    last: PropValue,
    /// The command epoch ([`Live::epoch`]) of the last command that changed it (`set`, `osc`,
    /// `unosc`); 0: none did.
    touched: u64,
}

/// A one-shot ramp from 0 to 1 on the frame clock: the value for frame `start + k` is
/// `k / frames` (then 1 for good), where `start` is the first frame sampled with it (the first
/// frame of the graph version that brought it). A function of the frame number only: the same
/// on every run, whatever the threads or the timing. `load FILE fade=` ramps its crossfade
/// mixers' `fader` with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ramp {
    /// Frames from 0 to 1 (at least 1).
    frames: u64,
    /// The frame it is 0 at, once sampled.
    start: Option<u64>,
}

impl Ramp {
    /// A ramp over `frames` frames (at least 1), starting at the next frame sampled.
    pub(crate) fn new(frames: u64) -> Self {
        Ramp {
            frames: frames.max(1),
            start: None,
        }
    }

    /// Its value for frame `seq` (the first call fixes the start).
    fn at(&mut self, seq: u64) -> f64 {
        let k = seq.saturating_sub(*self.start.get_or_insert(seq));
        if k >= self.frames {
            1.0
        } else {
            k as f64 / self.frames as f64
        }
    }
}

/// The controllable state of one stage (effects only; the source and sink have none).
pub(crate) struct LiveStage {
    /// Name shown in stats (`frei0r-glow`, or `frei0r-glow#2` for a second one).
    pub label: String,
    /// Element name as registered.
    pub element: String,
    pub is_effect: bool,
    /// Whether output shape == input shape (only then may the stage be bypassed).
    pub same_shape: bool,
    pub bypass: bool,
    /// The command epoch of the last `bypass` on it (0: none).
    bypass_touched: u64,
    pub params: Vec<LiveParam>,
    /// What the armed live edit does to this node (see [`Live::arm`]).
    pub(crate) fate: Fate,
    /// The latest first frame of a command on it read since the live edit on its way was read
    /// (`None`: none): if the edit removes the node, it switches after that frame, which then
    /// shows the command (see [`Live::arm`]).
    since_edit: Option<u64>,
    /// The next frame this stage samples: frames before it have their values, an edit
    /// assigned now is seen from it on (see the module doc).
    next: u64,
}

impl LiveStage {
    pub fn new(label: String, element: String, is_effect: bool, same_shape: bool) -> Self {
        LiveStage {
            label,
            element,
            is_effect,
            same_shape,
            bypass: false,
            bypass_touched: 0,
            params: Vec::new(),
            fate: Fate::GoesOn,
            since_edit: None,
            next: 0,
        }
    }

    /// Attaches an oscillator to numeric property `prop`.
    pub fn attach(&mut self, prop: &str, osc: Oscillator) -> Result<(), String> {
        let Some(i) = self.params.iter().position(|p| p.spec.name == prop) else {
            return Err(self.unknown(prop));
        };
        let p = &mut self.params[i];
        if !numeric(&p.spec.kind) {
            return Err(format!(
                "property '{prop}' of {} is {}; only numeric properties can have an oscillator",
                self.label, p.spec.kind
            ));
        }
        if !p.spec.live {
            return Err(format!(
                "{} (an oscillator changes it every frame)",
                p.spec.not_live_reason(&self.label)
            ));
        }
        p.osc = Some(osc);
        Ok(())
    }

    /// Ramps numeric property `prop` from 0 to 1 over `frames` frames from the first frame
    /// sampled with it (see [`Ramp`]); the value is then clamped to the property's range.
    pub fn ramp(&mut self, prop: &str, frames: u64) -> Result<(), String> {
        let Some(i) = self.params.iter().position(|p| p.spec.name == prop) else {
            return Err(self.unknown(prop));
        };
        let p = &mut self.params[i];
        if !numeric(&p.spec.kind) {
            return Err(format!(
                "property '{prop}' of {} is {}; only a numeric property can be ramped",
                self.label, p.spec.kind
            ));
        }
        p.osc = None;
        p.ramp = Some(Ramp::new(frames));
        Ok(())
    }

    /// The message for a property this stage does not have (built only on that error path).
    fn unknown(&self, prop: &str) -> String {
        let names: Vec<&str> = self.params.iter().map(|p| p.spec.name.as_str()).collect();
        format!(
            "unknown property '{prop}' on {}; expected one of: {}",
            self.label,
            if names.is_empty() {
                "(none)".to_string()
            } else {
                names.join(", ")
            }
        )
    }

    pub fn add_param(&mut self, spec: PropSpec, value: PropValue) {
        self.params.push(LiveParam {
            spec,
            last: value.clone(),
            base: value,
            osc: None,
            ramp: None,
            touched: 0,
        });
    }
}

/// What a live edit does to a running node, as far as the commands on it are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// The node goes on in the next version (kept, or replaced by a node of the same name and
    /// element, which takes the values commands set on it while the edit was on its way).
    GoesOn,
    /// The next version has no node of its name.
    Removed,
    /// The next version's node of its name is of another element.
    Replaced,
}

/// The values one frame is processed with. Preallocated per slot; refilled without allocating
/// (text values reuse their buffers).
#[derive(Debug)]
pub(crate) struct FrameParams {
    /// The frame in this slot (set when it begins; `u64::MAX` before the first).
    pub frame: u64,
    /// Oscillator time and beat position of the frame.
    pub time: OscTime,
    /// Per stage: bypassed?
    pub bypass: Vec<bool>,
    /// Per stage, per parameter: the value.
    pub values: Vec<Vec<PropValue>>,
}

impl FrameParams {
    /// Copies `from`'s frame, time and values of `nodes` into this snapshot, without
    /// allocating (a leaky branch taking a frame's parameters).
    pub fn copy_nodes(&mut self, from: &FrameParams, nodes: &[usize]) {
        self.frame = from.frame;
        self.time = from.time;
        for &n in nodes {
            self.bypass[n] = from.bypass[n];
            for (d, s) in self.values[n].iter_mut().zip(&from.values[n]) {
                assign(d, s);
            }
        }
    }
}

/// All live state, under its own lock (never the scheduler's).
pub(crate) struct Live {
    pub stages: Vec<LiveStage>,
    clock: OscClock,
    /// Tap tempo over the taps' posting times.
    taps: TapTempo,
    /// Frames begun so far. Frames begin one at a time and in order of their sequence number,
    /// from 0 (the scheduler's `begin_busy`), so this is also the sequence number of the next
    /// frame to begin: the first whose oscillator time sees a clock command assigned now.
    sampled: u64,
    /// The graph version the stages belong to (set by a live edit's switch, with them).
    pub(crate) version: u64,
    /// The command epoch: +1 when a live edit is read and at each switch. A command stamps
    /// what it changes with it, so that the switch knows which values were set while the edit
    /// was on its way (read after it: see [`Live::carry`]).
    epoch: u64,
    /// The armed live edit's switch frame (no frame from it on begins in these stages'
    /// version), while one is armed.
    pub(crate) switch_at: Option<u64>,
}

/// Copies `src` into `dst`, reusing `dst`'s text buffer when both are text.
pub(crate) fn assign(dst: &mut PropValue, src: &PropValue) {
    match (dst, src) {
        (PropValue::Str(d), PropValue::Str(s)) => {
            if d != s {
                d.clear();
                d.push_str(s);
            }
        }
        (d, s) => *d = s.clone(),
    }
}

fn numeric(kind: &PropKind) -> bool {
    matches!(
        kind,
        PropKind::Float { .. } | PropKind::Int { .. } | PropKind::Bool
    )
}

/// An oscillator's output as a value of the property's type, inside its range. A non-finite
/// output (an absurd frequency, a huge speed: `sin` of an infinite phase is NaN, and
/// `clamp(NaN)` is NaN) falls back to the property's `base` value, which the element already has.
fn typed(kind: &PropKind, x: f64, base: &PropValue) -> PropValue {
    if !x.is_finite() {
        return base.clone();
    }
    match kind {
        PropKind::Float { min, max } => PropValue::Float(x.clamp(*min, *max)),
        // `as` saturates (and the clamp keeps the declared range).
        PropKind::Int { min, max } => PropValue::Int((x.round() as i64).clamp(*min, *max)),
        PropKind::Bool => PropValue::Bool(x >= 0.5),
        // Not reachable: oscillators are only attached to numeric properties.
        _ => base.clone(),
    }
}

/// Puts `v` inside what `spec` declares, in place and without allocating: a non-finite float
/// becomes the spec's default (or its minimum, should the default be non-finite too), a number
/// outside the range is clamped. Every value leaving this module passes here, so whatever a
/// command, a file or an oscillator said, an element only ever gets a finite value in range.
fn settle(spec: &PropSpec, v: &mut PropValue) {
    match (&spec.kind, v) {
        (PropKind::Float { min, max }, PropValue::Float(x)) => {
            if !x.is_finite() {
                *x = match spec.default {
                    PropValue::Float(d) if d.is_finite() => d,
                    _ => *min,
                };
            }
            *x = x.clamp(*min, *max);
        }
        (PropKind::Int { min, max }, PropValue::Int(i)) => *i = (*i).clamp(*min, *max),
        (PropKind::Color, PropValue::Color(c)) => {
            for ch in c.iter_mut() {
                *ch = if ch.is_finite() {
                    ch.clamp(0.0, 1.0)
                } else {
                    0.0
                };
            }
        }
        (PropKind::Position, PropValue::Position(xy)) => {
            for a in xy.iter_mut() {
                if !a.is_finite() {
                    *a = 0.0;
                }
            }
        }
        _ => {}
    }
}

impl Live {
    pub fn new(stages: Vec<LiveStage>) -> Self {
        Live {
            stages,
            clock: OscClock::new(),
            taps: TapTempo::new(),
            sampled: 0,
            version: 0,
            epoch: 1,
            switch_at: None,
        }
    }

    /// A live edit was read (after every command read before it, before every command read
    /// after it): the commands from now on are the ones its switch carries into a replaced
    /// node (see [`Live::carry`]).
    pub fn edit_read(&mut self) {
        self.epoch += 1;
        for st in &mut self.stages {
            st.since_edit = None;
        }
    }

    /// A command on stage `s` was assigned from frame `first` (its reply's frame).
    pub fn commanded(&mut self, s: usize, first: u64) {
        let st = &mut self.stages[s];
        st.since_edit = Some(st.since_edit.map_or(first, |f| f.max(first)));
    }

    /// The edit on its way is armed (under the scheduler lock, which is taken first): it may
    /// switch at frame `at` at the earliest, but after the first frame of the commands read
    /// since it was read on the nodes it removes or replaces by another element (so that such
    /// a command, answered with that frame, shows there; a node that goes on shows it in
    /// either version). Notes each running node's `fates` (indexed like the stages; an edit
    /// without them changes no fate) and the switch frame; returns that frame.
    pub fn arm(&mut self, at: u64, fates: &[Fate]) -> u64 {
        let mut at = at;
        for (st, &f) in self.stages.iter_mut().zip(fates) {
            st.fate = f;
            if let (Fate::Removed | Fate::Replaced, Some(first)) = (f, st.since_edit) {
                at = at.max(first.saturating_add(1));
            }
        }
        self.switch_at = Some(at);
        at
    }

    /// Whether a command on stage `s`, whose first frame would be `first`, cannot apply: the
    /// armed edit removes its node, or replaces it by a node of another element, from a frame
    /// at or before `first`, so no frame would show it. The fate and the switch frame (for
    /// [`gone_reason`], after unlocking).
    pub fn gone(&self, s: usize, first: u64) -> Option<(Fate, u64)> {
        let at = self.switch_at.filter(|&at| first >= at)?;
        match self.stages[s].fate {
            Fate::GoesOn => None,
            f => Some((f, at)),
        }
    }

    /// At a live edit's switch, before the new stages `new` take over: a node that the edit
    /// replaced by a new instance of the same element under the same name (`moved[j]` false)
    /// takes the values, oscillators and bypass that commands read *after the edit* set on
    /// the running node (they are the performer's later word; the replace's own values give
    /// way to them), property by property (same name and type). What was set before the edit
    /// was read gives way to the edit's node as written. Stages that move into the new version
    /// whole (`moves`' first) are left alone: their values go with them. Swaps only, no
    /// allocation.
    pub fn carry(&mut self, new: &mut [LiveStage], moved: &[bool], moves: &[(usize, usize)]) {
        let epoch = self.epoch;
        for (j, ns) in new.iter_mut().enumerate() {
            if moved.get(j).copied().unwrap_or(true) {
                continue;
            }
            let Some(o) = self
                .stages
                .iter()
                .position(|os| os.label == ns.label && os.element == ns.element)
            else {
                continue;
            };
            if moves.iter().any(|&(from, _)| from == o) {
                continue;
            }
            let os = &mut self.stages[o];
            if os.bypass_touched == epoch && ns.same_shape {
                ns.bypass = os.bypass;
                ns.bypass_touched = epoch;
            }
            for np in &mut ns.params {
                let Some(op) = os
                    .params
                    .iter_mut()
                    .find(|op| op.spec.name == np.spec.name && op.spec.kind == np.spec.kind)
                else {
                    continue;
                };
                if op.touched == epoch {
                    std::mem::swap(&mut np.base, &mut op.base);
                    std::mem::swap(&mut np.last, &mut op.last);
                    np.osc = op.osc;
                    np.ramp = op.ramp;
                    np.touched = epoch;
                }
            }
        }
    }

    /// A snapshot slot shaped for these stages.
    pub fn empty_frame(&self) -> FrameParams {
        FrameParams {
            frame: u64::MAX,
            time: OscTime::default(),
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

    /// The first frame that sees `edit` if it is assigned now: its stage's next frame, or for
    /// the clock commands the next frame to begin.
    pub fn first_frame_of(&self, edit: &Edit) -> u64 {
        match edit.stage() {
            Some(s) => self.stages[s].next,
            None => self.sampled,
        }
    }

    /// After a live edit's switch at frame `at`: the stages are `version`'s, and each samples
    /// from frame `at` on. Frames of the old version still in flight (an overlapping switch)
    /// took their values at the switch, for the nodes that had not started them (state.rs).
    pub fn switched(&mut self, version: u64, at: u64) {
        self.version = version;
        for st in &mut self.stages {
            st.next = at;
        }
        // The commands from now on are the new version's.
        self.epoch += 1;
        self.switch_at = None;
    }

    /// Samples stage `s`'s parameters for the frame of snapshot `out` (at its oscillator
    /// time) into it.
    fn sample_stage(&mut self, s: usize, out: &mut FrameParams) {
        let (seq, t) = (out.frame, out.time);
        let st = &mut self.stages[s];
        out.bypass[s] = st.bypass;
        for (j, p) in st.params.iter_mut().enumerate() {
            match (&p.osc, &mut p.ramp) {
                (Some(osc), _) => p.last = typed(&p.spec.kind, osc.value_in(t), &p.base),
                (None, Some(ramp)) => p.last = typed(&p.spec.kind, ramp.at(seq), &p.base),
                (None, None) => assign(&mut p.last, &p.base),
            }
            settle(&p.spec, &mut p.last);
            assign(&mut out.values[s][j], &p.last);
        }
    }

    /// What these stages are, for resolving commands without the lock on the values.
    pub fn spec(&self) -> LiveSpec {
        LiveSpec {
            stages: self
                .stages
                .iter()
                .map(|s| StageSpec {
                    label: s.label.clone(),
                    element: s.element.clone(),
                    is_effect: s.is_effect,
                    same_shape: s.same_shape,
                    props: s.params.iter().map(|p| p.spec.clone()).collect(),
                })
                .collect(),
        }
    }

    /// Writes the values in force (the last frame's), oscillators and bypasses into `out`.
    /// Without allocating when `out` already has this graph's shape (it gets it the first
    /// time, off the frame path). Returns true.
    pub fn publish(&self, out: &mut crate::view::ValuesView) -> bool {
        let shaped = out.values.len() == self.stages.len()
            && out
                .values
                .iter()
                .zip(&self.stages)
                .all(|(v, s)| v.len() == s.params.len());
        if !shaped {
            out.values = self
                .stages
                .iter()
                .map(|s| s.params.iter().map(|p| p.last.clone()).collect())
                .collect();
            out.oscillators = self
                .stages
                .iter()
                .map(|s| s.params.iter().map(|p| p.osc).collect())
                .collect();
            out.bypass = self.stages.iter().map(|s| s.bypass).collect();
            return true;
        }
        for (s, st) in self.stages.iter().enumerate() {
            out.bypass[s] = st.bypass;
            for (j, p) in st.params.iter().enumerate() {
                assign(&mut out.values[s][j], &p.last);
                out.oscillators[s][j] = p.osc;
            }
        }
        true
    }

    /// The beat clock's tempo, bpm.
    pub fn tempo(&self) -> f64 {
        self.clock.tempo()
    }

    /// The sequence number of the next frame to begin: every stage samples its values for
    /// that frame and later ones after now (an edit assigned now is seen from there at the
    /// latest; see [`Live::first_frame_of`] for the exact frame).
    pub fn next_frame(&self) -> u64 {
        self.sampled
    }

    /// Applies a resolved edit: assignments only (no parsing, no formatting, no allocation: a
    /// new value is swapped in and the old one is left in `edit`, to be dropped by the caller
    /// after unlocking). Seen from [`Live::first_frame_of`] on.
    pub fn apply(&mut self, edit: &mut Edit) {
        let epoch = self.epoch;
        if let Some(s) = edit.stage() {
            let st = &mut self.stages[s];
            match edit {
                Edit::Set { param, .. }
                | Edit::Attach { param, .. }
                | Edit::Unosc { param, .. } => {
                    st.params[*param].touched = epoch;
                }
                Edit::Bypass { .. } => st.bypass_touched = epoch,
                _ => {}
            }
        }
        match edit {
            Edit::Set {
                stage,
                param,
                value,
            } => {
                let p = &mut self.stages[*stage].params[*param];
                std::mem::swap(&mut p.base, value);
                p.osc = None;
                p.ramp = None;
            }
            Edit::Attach { stage, param, osc } => {
                let p = &mut self.stages[*stage].params[*param];
                p.osc = Some(*osc);
                p.ramp = None;
            }
            Edit::Unosc { stage, param } => {
                let p = &mut self.stages[*stage].params[*param];
                let (osc, ramp) = (p.osc.take(), p.ramp.take());
                if osc.is_some() || ramp.is_some() {
                    // The property keeps the value it had at the last frame (numeric: no
                    // allocation).
                    assign(&mut p.base, &p.last);
                }
            }
            Edit::Bypass { stage, on } => self.stages[*stage].bypass = *on,
            Edit::Speed(x) => {
                // Checked by `LiveSpec::resolve`; cannot fail here.
                let _ = self.clock.set_speed(*x);
            }
            Edit::Tempo(bpm) => {
                // Checked by `LiveSpec::resolve`; cannot fail here.
                let _ = self.clock.set_tempo(*bpm);
            }
            Edit::Tap { at_ns, lag_ns } => {
                let tempo = match self.taps.tap(*at_ns) {
                    TapResult::Ignored => return,
                    TapResult::First => None,
                    TapResult::Tempo(bpm) => Some(bpm),
                };
                if let Some(bpm) = tempo {
                    let _ = self.clock.set_tempo(bpm);
                }
                // The tap was made `lag_ns` of wall time before now; now stands for the last
                // frame sampled, and wall time becomes oscillator time at the master speed.
                let lag_osc = (*lag_ns as f64 * self.clock.speed()) as i64;
                self.clock.align_beat(lag_osc);
            }
        }
    }
}

/// The refusal of a command on node `label`, which a live edit ends at frame `at` (see
/// [`Live::gone`]).
pub(crate) fn gone_reason(label: &str, fate: Fate, at: u64) -> String {
    match fate {
        Fate::Replaced => format!(
            "'{label}' is replaced by a node of another element at frame {at}; send the command \
             again for the new one"
        ),
        _ => format!("no node '{label}' (removed at frame {at})"),
    }
}

/// A parameter command resolved against the pipeline (stage and property by index, value
/// parsed, oscillator checked), ready to be assigned under the live lock.
#[derive(Debug)]
pub(crate) enum Edit {
    /// A fixed value (replaces an oscillator).
    Set {
        stage: usize,
        param: usize,
        value: PropValue,
    },
    /// An oscillator on a numeric property.
    Attach {
        stage: usize,
        param: usize,
        osc: Oscillator,
    },
    /// Remove the property's oscillator.
    Unosc { stage: usize, param: usize },
    /// Bypass on or off.
    Bypass { stage: usize, on: bool },
    /// Master oscillator speed.
    Speed(f64),
    /// Beat clock tempo, bpm.
    Tempo(f64),
    /// A tap, posted at `at_ns` (monotonic), `lag_ns` before it was resolved.
    Tap { at_ns: i64, lag_ns: i64 },
}

impl Edit {
    /// The stage it changes (`None`: the oscillator clock's speed, tempo or beat).
    pub(crate) fn stage(&self) -> Option<usize> {
        match self {
            Edit::Set { stage, .. }
            | Edit::Attach { stage, .. }
            | Edit::Unosc { stage, .. }
            | Edit::Bypass { stage, .. } => Some(*stage),
            Edit::Speed(_) | Edit::Tempo(_) | Edit::Tap { .. } => None,
        }
    }
}

/// Locks a snapshot (never poisoned in practice: nothing panics while holding one).
pub(crate) fn lock(m: &Mutex<FrameParams>) -> std::sync::MutexGuard<'_, FrameParams> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One stage's names and property specs (immutable once prepared).
pub(crate) struct StageSpec {
    label: String,
    element: String,
    is_effect: bool,
    same_shape: bool,
    props: Vec<PropSpec>,
}

/// The names and property specs of every stage: what commands are resolved against, without
/// any lock.
pub(crate) struct LiveSpec {
    stages: Vec<StageSpec>,
}

impl LiveSpec {
    fn stage_index(&self, target: &Target) -> Result<usize, String> {
        let idx = match target {
            Target::Index(i) => {
                if *i >= self.stages.len() {
                    return Err(format!(
                        "no element at index {i}; the pipeline has {} (0 = source)",
                        self.stages.len()
                    ));
                }
                *i
            }
            Target::Name(n) => self
                .stages
                .iter()
                .position(|s| s.label == *n)
                .or_else(|| self.stages.iter().position(|s| s.element == *n))
                .ok_or_else(|| {
                    let names: Vec<&str> = self.stages.iter().map(|s| s.label.as_str()).collect();
                    format!("no element '{n}'; the pipeline has: {}", names.join(", "))
                })?,
        };
        // Effects, mixers, and sources with parameters (a frei0r generator's).
        if !self.stages[idx].is_effect && self.stages[idx].props.is_empty() {
            return Err(format!(
                "{} has no properties that can change while running; only effects and \
                 generators can be controlled",
                self.stages[idx].label
            ));
        }
        Ok(idx)
    }

    /// Stage `s`'s name (as commands name it).
    pub(crate) fn label(&self, s: usize) -> &str {
        &self.stages[s].label
    }

    /// The property `prop` of stage `stage`, which a running node must take: a property read
    /// when the node starts is refused here, the one place every surface's `set`, `osc` and
    /// `unosc` goes through, with the reason.
    fn param(&self, stage: usize, prop: &str) -> Result<usize, String> {
        let p = self.any_param(stage, prop)?;
        let spec = &self.stages[stage].props[p];
        if !spec.live {
            return Err(spec.not_live_reason(&self.stages[stage].label));
        }
        Ok(p)
    }

    fn any_param(&self, stage: usize, prop: &str) -> Result<usize, String> {
        let st = &self.stages[stage];
        st.props.iter().position(|p| p.name == prop).ok_or_else(|| {
            let names: Vec<&str> = st.props.iter().map(|p| p.name.as_str()).collect();
            format!(
                "unknown property '{prop}' on {}; expected one of: {}",
                st.label,
                if names.is_empty() {
                    "(none)".to_string()
                } else {
                    names.join(", ")
                }
            )
        })
    }

    fn attach(&self, stage: usize, param: usize, osc: Oscillator) -> Result<Edit, String> {
        let st = &self.stages[stage];
        let spec = &st.props[param];
        if !numeric(&spec.kind) {
            return Err(format!(
                "property '{}' of {} is {}; only numeric properties can have an oscillator",
                spec.name, st.label, spec.kind
            ));
        }
        osc.validate().map_err(|e| e.to_string())?;
        Ok(Edit::Attach { stage, param, osc })
    }

    /// Resolves a parameter command (`set`, `osc`, `unosc`, `bypass`, `speed`, `tempo`, `tap`):
    /// finds the stage
    /// and property, parses and checks the value. Errors name what was wrong. No lock is needed.
    pub fn resolve(&self, cmd: &Command) -> Result<Edit, String> {
        match cmd {
            Command::Set {
                element,
                prop,
                value,
            } => {
                let stage = self.stage_index(element)?;
                let param = self.param(stage, prop)?;
                if value.trim_start().starts_with('~') {
                    let osc = Oscillator::parse_compact(value).map_err(|e| e.to_string())?;
                    return self.attach(stage, param, osc);
                }
                let st = &self.stages[stage];
                let value = st.props[param]
                    .parse(&st.label, value)
                    .map_err(|e| e.to_string())?;
                Ok(Edit::Set {
                    stage,
                    param,
                    value,
                })
            }
            Command::Osc { element, prop, osc } => {
                let stage = self.stage_index(element)?;
                let param = self.param(stage, prop)?;
                self.attach(stage, param, *osc)
            }
            Command::Unosc { element, prop } => {
                let stage = self.stage_index(element)?;
                let param = self.param(stage, prop)?;
                Ok(Edit::Unosc { stage, param })
            }
            Command::Bypass { element, on } => {
                let stage = self.stage_index(element)?;
                if !self.stages[stage].is_effect {
                    return Err(format!(
                        "{} is a source; only effects and mixers can be bypassed",
                        self.stages[stage].label
                    ));
                }
                if *on && !self.stages[stage].same_shape {
                    return Err(format!(
                        "{} changes the frame size; it cannot be bypassed",
                        self.stages[stage].label
                    ));
                }
                Ok(Edit::Bypass { stage, on: *on })
            }
            Command::Speed(x) => {
                OscClock::new().set_speed(*x).map_err(|e| e.to_string())?;
                Ok(Edit::Speed(*x))
            }
            Command::Tempo(bpm) => {
                framepipe_control::beat::check_tempo(*bpm).map_err(|e| e.to_string())?;
                Ok(Edit::Tempo(*bpm))
            }
            Command::Tap { at_ns } => {
                let now = framepipe_control::monotonic_ns();
                let at_ns = at_ns.unwrap_or(now);
                Ok(Edit::Tap {
                    at_ns,
                    lag_ns: now.saturating_sub(at_ns).max(0),
                })
            }
            other => Err(format!("'{other}' is not a parameter command")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_property_read_at_the_start_is_refused_with_the_reason() {
        let mut st = LiveStage::new("st".into(), "stamp".into(), true, true);
        let float = PropKind::Float { min: 0.0, max: 9.0 };
        st.add_param(
            PropSpec::new("size", float.clone(), PropValue::Float(1.0), "").fixed(),
            PropValue::Float(1.0),
        );
        st.add_param(
            PropSpec::new("value", float, PropValue::Float(1.0), ""),
            PropValue::Float(1.0),
        );
        assert!(st
            .attach("size", Oscillator::parse_compact("~sine:1hz").unwrap())
            .is_err());
        let spec = Live::new(vec![st]).spec();
        let set = |prop: &str, value: &str| Command::Set {
            element: Target::Name("st".into()),
            prop: prop.into(),
            value: value.into(),
        };
        let reason = "st.size cannot change while running: it is read when the node starts; \
                      replace the node to change it";
        for cmd in [
            set("size", "2"),
            set("size", "~sine:1hz"),
            Command::Unosc {
                element: Target::Name("st".into()),
                prop: "size".into(),
            },
        ] {
            assert_eq!(spec.resolve(&cmd).err().as_deref(), Some(reason), "{cmd}");
        }
        assert!(spec.resolve(&set("value", "2")).is_ok());
    }

    fn stage(kind: PropKind, base: PropValue, osc: Option<Oscillator>) -> Live {
        let mut st = LiveStage::new("fx".into(), "fx".into(), true, true);
        st.add_param(PropSpec::new("p", kind, base.clone(), ""), base);
        if let Some(o) = osc {
            st.attach("p", o).unwrap();
        }
        Live::new(vec![st])
    }

    /// An oscillator whose phase overflows to infinity from the second frame on: built directly,
    /// since the parser refuses such a frequency (the boundary this module must not rely on).
    fn absurd(min: f64, max: f64) -> Oscillator {
        Oscillator::new(framepipe_control::Shape::Sine)
            .with_freq(1e308)
            .with_range(min, max)
    }

    fn sampled(live: &mut Live, frames: i64) -> Vec<PropValue> {
        let mut out = live.empty_frame();
        (0..frames)
            .map(|k| {
                live.begin(k * 40_000_000, &mut out, std::iter::empty());
                live.sample_stage(0, &mut out);
                out.values[0][0].clone()
            })
            .collect()
    }

    /// Issue 7: an oscillator with an absurd frequency produced NaN, and NaN reached a frei0r
    /// plugin (which segfaulted). Every value that leaves live.rs is finite and in range.
    #[test]
    fn an_absurd_oscillator_never_reaches_the_element_as_nan() {
        let float = PropKind::Float { min: 0.0, max: 1.0 };
        let mut live = stage(float, PropValue::Float(0.25), Some(absurd(0.0, 1.0)));
        let values = sampled(&mut live, 50);
        assert!(
            values.contains(&PropValue::Float(0.25)),
            "NaN outputs fall back to the base value"
        );
        for v in &values {
            match v {
                PropValue::Float(x) => assert!(x.is_finite() && (0.0..=1.0).contains(x), "{x}"),
                other => panic!("{other:?}"),
            }
        }
        // The same for an integer property, a range far beyond the property's, and a fast
        // master speed.
        let mut live = stage(
            PropKind::Int { min: -5, max: 5 },
            PropValue::Int(2),
            Some(absurd(-1e300, 1e300)),
        );
        live.clock.set_speed(100.0).unwrap();
        for v in sampled(&mut live, 50) {
            match v {
                PropValue::Int(i) => assert!((-5..=5).contains(&i), "{i}"),
                other => panic!("{other:?}"),
            }
        }
    }

    /// A crossfade's ramp: 0 at the first frame sampled with it, `k / frames` k frames later,
    /// then 1 for good, whatever frame it starts at; a `set` takes the property back.
    #[test]
    fn a_ramp_goes_from_0_to_1_over_its_frames_from_its_first_frame() {
        let float = PropKind::Float { min: 0.0, max: 1.0 };
        let mut live = stage(float, PropValue::Float(0.5), None);
        // Three frames before the ramp is attached (as before a live edit's switch).
        assert_eq!(sampled(&mut live, 3), vec![PropValue::Float(0.5); 3]);
        live.stages[0].ramp("p", 4).unwrap();
        let got = sampled(&mut live, 7);
        let want: Vec<PropValue> = [0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
            .into_iter()
            .map(PropValue::Float)
            .collect();
        assert_eq!(got, want);
        live.apply(&mut Edit::Set {
            stage: 0,
            param: 0,
            value: PropValue::Float(0.3),
        });
        assert_eq!(sampled(&mut live, 1), vec![PropValue::Float(0.3)]);
        // Only numeric properties, named ones.
        let mut st = LiveStage::new("fx".into(), "fx".into(), true, true);
        st.add_param(
            PropSpec::new("s", PropKind::Str, PropValue::Str("a".into()), ""),
            PropValue::Str("a".into()),
        );
        assert!(st.ramp("s", 3).unwrap_err().contains("only a numeric"));
        assert!(st
            .ramp("q", 3)
            .unwrap_err()
            .contains("unknown property 'q'"));
    }

    /// Whatever the base value (a value set before its range was checked, say), what is sampled
    /// is inside the declared range.
    #[test]
    fn sampled_values_are_inside_the_declared_range() {
        let float = PropKind::Float {
            min: -1.0,
            max: 1.0,
        };
        for (base, want) in [
            (f64::NAN, 0.5),
            (f64::INFINITY, 0.5),
            (7.0, 1.0),
            (-7.0, -1.0),
            (0.3, 0.3),
        ] {
            let mut st = LiveStage::new("fx".into(), "fx".into(), true, true);
            st.add_param(
                PropSpec::new("p", float.clone(), PropValue::Float(0.5), ""),
                PropValue::Float(base),
            );
            let mut live = Live::new(vec![st]);
            assert_eq!(
                sampled(&mut live, 1),
                vec![PropValue::Float(want)],
                "base {base}"
            );
        }
    }

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

    fn set(stage: usize, x: f64) -> Edit {
        Edit::Set {
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
        assert_eq!(live.first_frame_of(&Edit::Speed(2.0)), 4);
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

    /// A stage `label` of element `stamp` with float properties `p` and `q` at `p0`, `q0`.
    fn pq(label: &str, p0: f64, q0: f64) -> LiveStage {
        let float = PropKind::Float { min: 0.0, max: 1.0 };
        let mut st = LiveStage::new(label.into(), "stamp".into(), true, true);
        for (name, v) in [("p", p0), ("q", q0)] {
            st.add_param(
                PropSpec::new(name, float.clone(), PropValue::Float(0.0), ""),
                PropValue::Float(v),
            );
        }
        st
    }

    /// Issue #9, a command racing a live edit: at the switch, a node replaced by one of the same
    /// name and element takes what commands read *after the edit* set (`q`); what was set
    /// before it (`p`) gives way to the edit's node as written. A node that moves whole is left
    /// alone, and nothing is carried into a node of another name.
    #[test]
    fn issue_9_a_replaced_node_takes_the_values_set_after_the_edit_was_read() {
        let mut live = Live::new(vec![pq("fx", 0.0, 0.0), pq("kept", 0.0, 0.0)]);
        let set = |stage, param, x| Edit::Set {
            stage,
            param,
            value: PropValue::Float(x),
        };
        live.apply(&mut set(0, 0, 0.3));
        live.edit_read();
        live.apply(&mut set(0, 1, 0.7));
        live.apply(&mut Edit::Bypass { stage: 0, on: true });
        live.apply(&mut set(1, 1, 0.9));
        // The next version: fx replaced (as written: p = 0.5), kept moved, other new.
        let mut new = vec![
            pq("fx", 0.5, 0.0),
            pq("kept", 0.0, 0.0),
            pq("other", 0.0, 0.0),
        ];
        live.carry(&mut new, &[false, true, false], &[(1, 1)]);
        let values = |st: &LiveStage| -> Vec<PropValue> {
            st.params.iter().map(|p| p.base.clone()).collect()
        };
        assert_eq!(
            values(&new[0]),
            vec![PropValue::Float(0.5), PropValue::Float(0.7)]
        );
        assert!(
            new[0].bypass,
            "a bypass read after the edit goes with the node"
        );
        assert_eq!(
            values(&new[1]),
            vec![PropValue::Float(0.0); 2],
            "moved whole"
        );
        assert_eq!(values(&new[2]), vec![PropValue::Float(0.0); 2]);
        assert!(!new[2].bypass);
        // After a switch the epoch moves on: what is set then stays with that version.
        live.switched(1, 10);
        live.apply(&mut set(0, 0, 0.1));
        live.edit_read();
        let mut next = vec![pq("fx", 0.5, 0.5)];
        live.carry(&mut next, &[false], &[]);
        assert_eq!(values(&next[0]), vec![PropValue::Float(0.5); 2]);
        // An oscillator attached after the edit was read goes with the node too; one on a
        // property of another type does not (the same name, another element's spec).
        let osc = Oscillator::new(framepipe_control::Shape::Sine).with_range(0.0, 1.0);
        live.apply(&mut Edit::Attach {
            stage: 0,
            param: 1,
            osc,
        });
        let mut next = vec![pq("fx", 0.5, 0.5)];
        next[0].params[1].spec.kind = PropKind::Int { min: 0, max: 9 };
        let mut same = vec![pq("fx", 0.5, 0.5)];
        live.carry(&mut next, &[false], &[]);
        assert!(next[0].params[1].osc.is_none(), "another type: not carried");
        live.carry(&mut same, &[false], &[]);
        assert_eq!(same[0].params[1].osc, Some(osc));
    }

    /// Issue #9: an edit armed after a command read since it on a node it removes (answered
    /// "from frame 5", not begun yet) switches after that frame; once armed, a command on a node it removes whose
    /// first frame would be the switch frame is refused, one before it is not, and a node that
    /// goes on is never refused.
    #[test]
    fn issue_9_an_armed_edit_switches_after_the_commands_read_since_it_and_ends_its_nodes() {
        let mut live = Live::new(vec![pq("fx", 0.0, 0.0), pq("kept", 0.0, 0.0)]);
        live.edit_read();
        live.commanded(0, 5);
        live.commanded(1, 8);
        // (A node that goes on holds nothing back: frame 8 shows its command in either version.)
        assert_eq!(live.arm(5, &[Fate::Removed, Fate::GoesOn]), 6);
        assert_eq!(live.gone(0, 5), None);
        assert_eq!(live.gone(0, 6), Some((Fate::Removed, 6)));
        assert_eq!(live.gone(1, 6), None);
        assert_eq!(
            gone_reason("fx", Fate::Removed, 6),
            "no node 'fx' (removed at frame 6)"
        );
        // Without a command since the edit, it switches at the frame it is armed at.
        let mut live = Live::new(vec![pq("fx", 0.0, 0.0)]);
        live.commanded(0, 9);
        live.edit_read();
        assert_eq!(live.arm(7, &[Fate::Replaced]), 7);
        assert_eq!(live.gone(0, 7), Some((Fate::Replaced, 7)));
        live.switched(1, 7);
        assert_eq!(live.gone(0, 8), None, "the switch clears the armed edit");
    }
}
