//! An effect stage as the user configures it.

use framepipe_control::Oscillator;
use framepipe_core::{EffectFactory, Mode, PropSpec, PropValue};

/// An effect in a pipeline, with how to schedule it and what may be changed while it runs.
pub struct EffectStage {
    /// The configured effect.
    pub factory: Box<dyn EffectFactory>,
    /// Serial or parallel (the element's default unless the user overrode it).
    pub mode: Mode,
    /// Its properties and their initial values: these can be set, oscillated or bypassed live.
    pub params: Vec<(PropSpec, PropValue)>,
    /// Oscillators on properties from the start (property name, oscillator).
    pub oscillators: Vec<(String, Oscillator)>,
}

impl EffectStage {
    /// A stage with no live parameters.
    pub fn new(factory: Box<dyn EffectFactory>, mode: Mode) -> Self {
        EffectStage {
            factory,
            mode,
            params: Vec::new(),
            oscillators: Vec::new(),
        }
    }
}

impl std::fmt::Debug for EffectStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EffectStage({}, {})", self.factory.name(), self.mode)
    }
}
