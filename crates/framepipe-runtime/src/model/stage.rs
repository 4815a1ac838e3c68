//! An effect stage and a GPU stage as the user configures them.

use framepipe_control::Oscillator;
use framepipe_core::gpu::GpuFactory;
use framepipe_core::{EffectFactory, ElementKind, Mode, PropSpec, PropValue};

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

/// A GPU element in a graph (a shader: source, effect or mixer by its factory's
/// [`kind`](GpuFactory::kind)), run by the show's GPU executor thread (see docs/GPU.md).
pub struct GpuStage {
    /// The configured element.
    pub factory: Box<dyn GpuFactory>,
    /// Serial or parallel (the element's default unless the user overrode it). The GPU thread
    /// runs one job at a time either way; a serial node also takes frames strictly in order.
    pub mode: Mode,
    /// Its properties and their initial values: set, oscillated or bypassed live like an
    /// effect's (applied on the GPU thread through [`GpuNode::set_property`]).
    ///
    /// [`GpuNode::set_property`]: framepipe_core::gpu::GpuNode::set_property
    pub params: Vec<(PropSpec, PropValue)>,
    /// Oscillators on properties from the start (property name, oscillator).
    pub oscillators: Vec<(String, Oscillator)>,
    /// A GPU source's own shape, negotiated once when the graph is checked (the graph's rate
    /// may be a GPU source's).
    pub(crate) source_info: Option<framepipe_core::VideoInfo>,
}

impl GpuStage {
    /// A stage with its element's default mode and no live parameters.
    pub fn new(factory: Box<dyn GpuFactory>) -> Self {
        let mode = factory.default_mode();
        GpuStage {
            factory,
            mode,
            params: Vec::new(),
            oscillators: Vec::new(),
            source_info: None,
        }
    }

    /// The inputs it takes: `(fewest, most)` (a source none, an effect one, a mixer its own).
    pub fn inputs(&self) -> (usize, usize) {
        match self.factory.kind() {
            ElementKind::Sink => (1, 1),
            k => k.inputs(),
        }
    }

    /// `source`, `effect` or `mixer`.
    pub fn word(&self) -> &'static str {
        match self.factory.kind() {
            ElementKind::Source => "source",
            ElementKind::Effect => "effect",
            ElementKind::Mixer { .. } => "mixer",
            ElementKind::Sink => "sink",
        }
    }
}

impl std::fmt::Debug for GpuStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuStage({}, {})", self.factory.name(), self.mode)
    }
}
