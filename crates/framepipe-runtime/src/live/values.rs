//! The values: what a stage's properties hold (a value set by a command, an oscillator, a
//! crossfade's ramp), how a resolved command is assigned to them, and how every value is kept
//! inside what its property declares.

use framepipe_control::{Oscillator, TapResult};
use framepipe_core::{PropKind, PropSpec, PropValue};

use super::{Fate, Live, LiveParam, LiveStage, Set};

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
    pub(super) fn at(&mut self, seq: u64) -> f64 {
        let k = seq.saturating_sub(*self.start.get_or_insert(seq));
        if k >= self.frames {
            1.0
        } else {
            k as f64 / self.frames as f64
        }
    }
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

    /// The node's name, as commands name it.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Its properties' specs, in order.
    pub(crate) fn specs(&self) -> impl Iterator<Item = &PropSpec> {
        self.params.iter().map(|p| &p.spec)
    }

    /// Whether it can be bypassed: an effect or mixer whose output has its input's shape.
    pub(crate) fn bypassable(&self) -> bool {
        self.is_effect && self.same_shape
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
        p.env = framepipe_audio::Envelope::new();
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
            held_value: value.clone(),
            base: value,
            osc: None,
            ramp: None,
            env: framepipe_audio::Envelope::new(),
            touched: 0,
            stamp: 0,
            held: None,
        });
    }
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

pub(super) fn numeric(kind: &PropKind) -> bool {
    matches!(
        kind,
        PropKind::Float { .. } | PropKind::Int { .. } | PropKind::Bool
    )
}

/// An oscillator's output as a value of the property's type, inside its range. A non-finite
/// output (an absurd frequency, a huge speed: `sin` of an infinite phase is NaN, and
/// `clamp(NaN)` is NaN) falls back to the property's `base` value, which the element already has.
pub(super) fn typed(kind: &PropKind, x: f64, base: &PropValue) -> PropValue {
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

/// An audio binding's value for a frame: `min + (max − min)·clamp(envelope(gain·feature))`,
/// the envelope stepped at the frame's audio time (once per frame and node: frames are
/// sampled in order, each once). A few float operations; no allocation.
pub(super) fn audio_value(
    osc: &framepipe_control::Oscillator,
    follow: &framepipe_control::AudioFollow,
    env: &mut framepipe_audio::Envelope,
    audio: &framepipe_audio::AudioFrame,
) -> f64 {
    let target = audio.feature(follow.feature()) * follow.gain();
    let v = env.step(
        target,
        audio.time_ns,
        follow.attack_ns(),
        follow.release_ns(),
    );
    osc.min + (osc.max - osc.min) * v.clamp(0.0, 1.0)
}

/// Puts `v` inside what `spec` declares, in place and without allocating: a non-finite float
/// becomes the spec's default (or its minimum, should the default be non-finite too), a number
/// outside the range is clamped. Every value leaving this module passes here, so whatever a
/// command, a file or an oscillator said, an element only ever gets a finite value in range.
pub(super) fn settle(spec: &PropSpec, v: &mut PropValue) {
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
    /// Writes the values in force (the last frame's), oscillators and bypasses into `out`.
    /// Without allocating when `out` already has this graph's shape (it gets it the first
    /// time, off the frame path). Returns true.
    pub fn publish(&self, out: &mut crate::stats::ValuesView) -> bool {
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

    /// Whether the beat clock follows the audio (`tempo auto`).
    pub fn tempo_auto(&self) -> bool {
        self.tempo_auto.is_some()
    }

    /// The beat clock's tempo, bpm.
    pub fn tempo(&self) -> f64 {
        self.clock.tempo()
    }

    /// Applies a resolved set: assignments only (no parsing, no formatting, no allocation: a
    /// new value is swapped in and the old one is left in `set`, to be dropped by the caller
    /// after unlocking). Seen from [`Live::first_frame_of`] on.
    pub fn apply(&mut self, set: &mut Set) {
        let epoch = self.epoch;
        if let Some(s) = set.stage() {
            let st = &mut self.stages[s];
            match set {
                Set::Value { param, .. }
                | Set::Attach { param, .. }
                | Set::Unosc { param, .. }
                | Set::Step { param, .. } => {
                    st.params[*param].touched = epoch;
                }
                Set::Bypass { .. } => st.bypass_touched = epoch,
                _ => {}
            }
        }
        if let Set::Value { stage, param, .. } | Set::Step { stage, param, .. } = set {
            // A value set now replaces one held for a later frame.
            self.serial += 1;
            let p = &mut self.stages[*stage].params[*param];
            p.stamp = self.serial;
            p.held = None;
        }
        match set {
            Set::Value {
                stage,
                param,
                value,
            } => {
                let p = &mut self.stages[*stage].params[*param];
                std::mem::swap(&mut p.base, value);
                p.osc = None;
                p.ramp = None;
            }
            Set::Attach { stage, param, osc } => {
                let p = &mut self.stages[*stage].params[*param];
                p.osc = Some(*osc);
                p.ramp = None;
                p.env = framepipe_audio::Envelope::new();
            }
            Set::Unosc { stage, param } => {
                let p = &mut self.stages[*stage].params[*param];
                let (osc, ramp) = (p.osc.take(), p.ramp.take());
                if osc.is_some() || ramp.is_some() {
                    // The property keeps the value it had at the last frame (numeric: no
                    // allocation).
                    assign(&mut p.base, &p.last);
                }
            }
            Set::Step { stage, param, by } => {
                let p = &mut self.stages[*stage].params[*param];
                // From the value in force: the one set, or the last sampled under an
                // oscillator or a ramp (which the step replaces).
                let from = if p.osc.is_some() || p.ramp.is_some() {
                    &p.last
                } else {
                    &p.base
                };
                if let Some(v) = stepped(&p.spec.kind, from, *by) {
                    p.base = v;
                    p.osc = None;
                    p.ramp = None;
                }
            }
            Set::Bypass { stage, on } => self.stages[*stage].bypass = *on,
            Set::Speed(x) => {
                // Checked by `LiveSpec::resolve`; cannot fail here.
                let _ = self.clock.set_speed(*x);
            }
            Set::Tempo(bpm) => {
                // Checked by `LiveSpec::resolve`; cannot fail here.
                let _ = self.clock.set_tempo(*bpm);
                self.tempo_auto = None;
            }
            Set::TempoAuto => {
                if self.tempo_auto.is_none() {
                    self.tempo_auto = Some(framepipe_audio::TempoFollow::new());
                }
            }
            Set::Tap { at_ns, lag_ns } => {
                self.tempo_auto = None;
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

/// `from` moved `by` places round a whole-number property's range (`next`, `prev`); `None`
/// for other kinds.
fn stepped(kind: &PropKind, from: &PropValue, by: i64) -> Option<PropValue> {
    match (kind, from.as_f64()) {
        (PropKind::Int { min, max }, Some(v)) => {
            let span = (max - min + 1).max(1);
            let v = (v as i64).clamp(*min, *max);
            Some(PropValue::Int(min + (v - min + by).rem_euclid(span)))
        }
        _ => None,
    }
}

impl Live {
    /// The beat grid of stage `s`, in beats: its `quantize` property's value in force (`beat`:
    /// 1, `bar`: 4, a whole number: that many beats; 0: none, sets apply at once). A node
    /// with such a property (a deck) has the values set on its other properties held until
    /// the first frame on the grid ([`Live::hold`]).
    pub fn quantum(&self, s: usize) -> i64 {
        let st = &self.stages[s];
        match st.params.iter().find(|p| p.spec.name == "quantize") {
            Some(p) => match &p.base {
                PropValue::Str(w) if w == "beat" => 1,
                PropValue::Str(w) if w == "bar" => 4,
                PropValue::Int(n) => (*n).max(0),
                _ => 0,
            },
            None => 0,
        }
    }

    /// Whether `set` gives a value to a property of a quantized stage ([`Live::quantum`])
    /// other than `quantize` itself: such a set is held until the grid ([`Live::hold`]).
    pub fn quantized(&self, set: &Set) -> bool {
        match set {
            Set::Value { stage, param, .. } | Set::Step { stage, param, .. } => {
                self.quantum(*stage) > 0
                    && self.stages[*stage].params[*param].spec.name != "quantize"
            }
            _ => false,
        }
    }

    /// Assigns `set` (a value or a step) from frame `at` on: the frames before it keep the
    /// value in force, frame `at` and later ones take the new one (sampled by frame number, so
    /// whichever order a parallel node starts its frames in). A later set of the property
    /// replaces it. Other sets are applied now. As [`Live::apply`]: assignments only, the old
    /// held value is left in `set` for the caller to drop after unlocking.
    pub fn hold(&mut self, set: &mut Set, at: u64) {
        let epoch = self.epoch;
        match set {
            Set::Value {
                stage,
                param,
                value,
            } => {
                self.serial += 1;
                let p = &mut self.stages[*stage].params[*param];
                p.touched = epoch;
                std::mem::swap(&mut p.held_value, value);
                p.held = Some((at, self.serial));
            }
            Set::Step { stage, param, by } => {
                let p = &mut self.stages[*stage].params[*param];
                // From the value held, else the one in force.
                let from = match (p.held, p.osc.is_some() || p.ramp.is_some()) {
                    (Some(_), _) => &p.held_value,
                    (None, true) => &p.last,
                    (None, false) => &p.base,
                };
                if let Some(v) = stepped(&p.spec.kind, from, *by) {
                    self.serial += 1;
                    p.touched = epoch;
                    p.held_value = v;
                    p.held = Some((at, self.serial));
                }
            }
            _ => self.apply(set),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framepipe_control::Oscillator;

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
                out.values(0)[0].clone()
            })
            .collect()
    }

    /// An oscillator with an absurd frequency gives NaN; every value that leaves `live` is
    /// finite and in range all the same, so no element is handed a NaN (issue #7: a frei0r
    /// plugin segfaulted on one).
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
        live.apply(&mut Set::Value {
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

    /// Issue #25: an audio binding's value for a frame is `min + (max − min)·envelope(gain ·
    /// feature)`, the feature read at the frame's time (the points ending by then) and the
    /// envelope stepped over the frames' times: the reference here is the closed form.
    #[test]
    fn an_audio_binding_follows_the_frames_analysis_through_its_envelope() {
        use framepipe_audio::{Feed, Point, Timeline};
        let tl = std::sync::Arc::new(Timeline::new());
        // Silence for 100 ms (points 0..10), then a level of 0.5.
        for k in 0..200 {
            tl.publish(&Point {
                level: if k >= 10 { 0.5 } else { 0.0 },
                ..Point::default()
            });
        }
        let osc = Oscillator::parse_compact("~audio:level:0..10:gain=2:attack=40ms").unwrap();
        let float = PropKind::Float {
            min: 0.0,
            max: 10.0,
        };
        let mut live = stage(float, PropValue::Float(3.0), Some(osc));
        live.set_audio(Feed::new(tl, true, 0));
        // Frame k at 40·k ms reads points up to 4k − 1: the level is there from frame 3 on.
        for (k, v) in sampled(&mut live, 8).into_iter().enumerate() {
            let want = if k < 3 {
                0.0
            } else {
                10.0 * (1.0 - (-((k - 2) as f64)).exp())
            };
            match v {
                PropValue::Float(x) => assert!((x - want).abs() < 1e-9, "frame {k}: {x} vs {want}"),
                other => panic!("{other:?}"),
            }
        }
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
}
