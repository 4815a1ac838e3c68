//! Live parameters: values set by commands or driven by oscillators, sampled **once per frame**
//! when the source starts that frame, and carried with it to every stage.
//!
//! The source's start of frame `seq` is the frame boundary: the values in force then are written
//! into the frame's snapshot slot (`seq % in_flight`), and each stage, before processing the
//! frame, brings its instance's properties to that snapshot. So a command takes effect on the
//! same frame in every stage, and two stages driven by the same oscillator agree on every frame
//! even though they process it at different moments (oscillators are evaluated at the frame's
//! oscillator time, derived from its timestamp, never from the wall clock).

use framepipe_control::{Command, OscClock, Oscillator, Target};
use framepipe_core::{PropKind, PropSpec, PropValue};

/// One controllable property of one stage.
pub(crate) struct LiveParam {
    pub spec: PropSpec,
    /// Value set by the user (initial property or last `set`).
    base: PropValue,
    osc: Option<Oscillator>,
    /// Value in force for the last frame sampled.
    last: PropValue,
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
    pub params: Vec<LiveParam>,
}

impl LiveStage {
    pub fn new(label: String, element: String, is_effect: bool, same_shape: bool) -> Self {
        LiveStage {
            label,
            element,
            is_effect,
            same_shape,
            bypass: false,
            params: Vec::new(),
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
        p.osc = Some(osc);
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
        });
    }
}

/// The values one frame is processed with. Preallocated per slot; refilled without allocating
/// (text values reuse their buffers).
#[derive(Debug, Default)]
pub(crate) struct FrameParams {
    /// Oscillator time of the frame (ns).
    pub osc_time_ns: i64,
    /// Per stage: bypassed?
    pub bypass: Vec<bool>,
    /// Per stage, per parameter: the value.
    pub values: Vec<Vec<PropValue>>,
}

/// All live state; lives under the scheduler lock.
pub(crate) struct Live {
    pub stages: Vec<LiveStage>,
    clock: OscClock,
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

/// An oscillator's output as a value of the property's type, clamped to its range.
fn typed(kind: &PropKind, x: f64) -> PropValue {
    match kind {
        PropKind::Float { min, max } => PropValue::Float(x.clamp(*min, *max)),
        PropKind::Int { min, max } => PropValue::Int((x.round() as i64).clamp(*min, *max)),
        PropKind::Bool => PropValue::Bool(x >= 0.5),
        // Not reachable: oscillators are only attached to numeric properties.
        _ => PropValue::Float(x),
    }
}

impl Live {
    pub fn new(stages: Vec<LiveStage>) -> Self {
        Live {
            stages,
            clock: OscClock::new(),
        }
    }

    /// A snapshot slot shaped for these stages.
    pub fn empty_frame(&self) -> FrameParams {
        FrameParams {
            osc_time_ns: 0,
            bypass: vec![false; self.stages.len()],
            values: self
                .stages
                .iter()
                .map(|s| s.params.iter().map(|p| p.base.clone()).collect())
                .collect(),
        }
    }

    /// Samples every parameter for the frame with timestamp `pts_ns` into `out`.
    pub fn sample(&mut self, pts_ns: i64, out: &mut FrameParams) {
        let t = self.clock.advance(pts_ns);
        out.osc_time_ns = t;
        for (s, st) in self.stages.iter_mut().enumerate() {
            out.bypass[s] = st.bypass;
            for (j, p) in st.params.iter_mut().enumerate() {
                match &p.osc {
                    Some(osc) => p.last = typed(&p.spec.kind, osc.value_at(t)),
                    None => assign(&mut p.last, &p.base),
                }
                assign(&mut out.values[s][j], &p.last);
            }
        }
    }

    fn attach(&mut self, stage: usize, prop: &str, osc: Oscillator) -> Result<(), String> {
        self.param(stage, prop)?;
        self.stages[stage].attach(prop, osc)
    }

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
        if !self.stages[idx].is_effect {
            return Err(format!(
                "{} is not an effect; only effects can be controlled",
                self.stages[idx].label
            ));
        }
        Ok(idx)
    }

    fn param(&mut self, stage: usize, prop: &str) -> Result<&mut LiveParam, String> {
        let st = &mut self.stages[stage];
        match st.params.iter().position(|p| p.spec.name == prop) {
            Some(i) => Ok(&mut st.params[i]),
            None => Err(st.unknown(prop)),
        }
    }

    /// Applies a parameter command (`set`, `osc`, `unosc`, `bypass`, `speed`). The change is
    /// seen from the next frame the source starts. Errors name what was wrong.
    pub fn apply(&mut self, cmd: &Command) -> Result<(), String> {
        match cmd {
            Command::Set {
                element,
                prop,
                value,
            } => {
                let s = self.stage_index(element)?;
                let label = self.stages[s].label.clone();
                let p = self.param(s, prop)?;
                if value.trim_start().starts_with('~') {
                    let osc = Oscillator::parse_compact(value).map_err(|e| e.to_string())?;
                    return self.attach(s, prop, osc);
                }
                let v = p.spec.parse(&label, value).map_err(|e| e.to_string())?;
                p.base = v;
                p.osc = None;
                Ok(())
            }
            Command::Osc { element, prop, osc } => {
                let s = self.stage_index(element)?;
                self.attach(s, prop, *osc)
            }
            Command::Unosc { element, prop } => {
                let s = self.stage_index(element)?;
                let p = self.param(s, prop)?;
                if p.osc.take().is_some() {
                    // The property keeps the value it had at the last frame.
                    p.base = p.last.clone();
                }
                Ok(())
            }
            Command::Bypass { element, on } => {
                let s = self.stage_index(element)?;
                if *on && !self.stages[s].same_shape {
                    return Err(format!(
                        "{} changes the frame size; it cannot be bypassed",
                        self.stages[s].label
                    ));
                }
                self.stages[s].bypass = *on;
                Ok(())
            }
            Command::Speed(x) => self.clock.set_speed(*x).map_err(|e| e.to_string()),
            other => Err(format!("'{other}' is not a parameter command")),
        }
    }
}
