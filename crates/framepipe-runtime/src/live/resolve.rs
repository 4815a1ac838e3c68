//! Command resolution: a parameter command (`set`, `osc`, `unosc`, `bypass`, `speed`,
//! `tempo`, `tap`) resolved against the stages' names and property specs ([`LiveSpec`]),
//! without any lock, into a [`Set`] ready to be assigned under the live lock.

use framepipe_control::{Command, OscClock, Oscillator, Target};
use framepipe_core::{PropKind, PropSpec, PropValue};

use super::values::numeric;
use super::Live;

/// A set: a parameter command resolved against the pipeline (stage and property by index,
/// value parsed, oscillator checked), ready to be assigned under the live lock
/// ([`Live::apply`]). ("Edit" is a graph change only: `crate::edit`.)
#[derive(Debug)]
pub(crate) enum Set {
    /// A fixed value (replaces an oscillator).
    Value {
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
    /// A whole-number property moved by `by`, wrapping around its range (`set deck.clip
    /// next`, `prev`): from the value it has when the set is assigned.
    Step { stage: usize, param: usize, by: i64 },
    /// Bypass on or off.
    Bypass { stage: usize, on: bool },
    /// Master oscillator speed.
    Speed(f64),
    /// Beat clock tempo, bpm (ends `tempo auto`).
    Tempo(f64),
    /// `tempo auto`: the beat clock follows the audio's tempo estimate and onsets.
    TempoAuto,
    /// A tap, posted at `at_ns` (monotonic), `lag_ns` before it was resolved.
    Tap { at_ns: i64, lag_ns: i64 },
}

impl Set {
    /// The stage it changes (`None`: the oscillator clock's speed, tempo or beat).
    pub(crate) fn stage(&self) -> Option<usize> {
        match self {
            Set::Value { stage, .. }
            | Set::Attach { stage, .. }
            | Set::Unosc { stage, .. }
            | Set::Step { stage, .. }
            | Set::Bypass { stage, .. } => Some(*stage),
            Set::Speed(_) | Set::Tempo(_) | Set::TempoAuto | Set::Tap { .. } => None,
        }
    }
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

    /// A whole-number property also takes `next` and `prev` (wrapping around its range), and,
    /// when its node lists names for it in a fixed property `PROP-names` (one of a set of
    /// words: a deck's `clip-names`, its clips' file stems), a name for its place in the list.
    /// `None`: the value is for the property's own parser.
    fn step_or_label(
        &self,
        stage: usize,
        param: usize,
        value: &str,
    ) -> Result<Option<Set>, String> {
        let st = &self.stages[stage];
        let spec = &st.props[param];
        if !matches!(spec.kind, PropKind::Int { .. }) || value.parse::<i64>().is_ok() {
            return Ok(None);
        }
        let by = match value.to_ascii_lowercase().as_str() {
            "next" => 1,
            "prev" => -1,
            _ => {
                let names = format!("{}-names", spec.name);
                let Some(PropKind::Enum(words)) =
                    st.props.iter().find(|p| p.name == names).map(|p| &p.kind)
                else {
                    return Ok(None);
                };
                let Some(i) = words.iter().position(|w| w == value) else {
                    return Err(format!(
                        "{} has no {} named '{value}'; expected a number, next, prev or one \
                         of: {}",
                        st.label,
                        spec.name,
                        words.join(", ")
                    ));
                };
                return Ok(Some(Set::Value {
                    stage,
                    param,
                    value: PropValue::Int(i as i64),
                }));
            }
        };
        Ok(Some(Set::Step { stage, param, by }))
    }

    fn attach(&self, stage: usize, param: usize, osc: Oscillator) -> Result<Set, String> {
        let st = &self.stages[stage];
        let spec = &st.props[param];
        if !numeric(&spec.kind) {
            return Err(format!(
                "property '{}' of {} is {}; only numeric properties can have an oscillator",
                spec.name, st.label, spec.kind
            ));
        }
        osc.validate().map_err(|e| e.to_string())?;
        Ok(Set::Attach { stage, param, osc })
    }

    /// Resolves a parameter command (`set`, `osc`, `unosc`, `bypass`, `speed`, `tempo`, `tap`):
    /// finds the stage
    /// and property, parses and checks the value. Errors name what was wrong. No lock is needed.
    pub fn resolve(&self, cmd: &Command) -> Result<Set, String> {
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
                if let Some(set) = self.step_or_label(stage, param, value.trim())? {
                    return Ok(set);
                }
                let value = st.props[param]
                    .parse(&st.label, value)
                    .map_err(|e| e.to_string())?;
                Ok(Set::Value {
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
                Ok(Set::Unosc { stage, param })
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
                Ok(Set::Bypass { stage, on: *on })
            }
            Command::Speed(x) => {
                OscClock::new().set_speed(*x).map_err(|e| e.to_string())?;
                Ok(Set::Speed(*x))
            }
            Command::Tempo(bpm) => {
                framepipe_control::beat::check_tempo(*bpm).map_err(|e| e.to_string())?;
                Ok(Set::Tempo(*bpm))
            }
            Command::TempoAuto => Ok(Set::TempoAuto),
            Command::Tap { at_ns } => {
                let now = framepipe_control::monotonic_ns();
                let at_ns = at_ns.unwrap_or(now);
                Ok(Set::Tap {
                    at_ns,
                    lag_ns: now.saturating_sub(at_ns).max(0),
                })
            }
            other => Err(format!("'{other}' is not a parameter command")),
        }
    }
}

impl Live {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::LiveStage;
    use framepipe_core::PropKind;

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
}
