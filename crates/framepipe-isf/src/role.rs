//! What a shader is, from its header alone, as the ISF hosts decide it (the spec's
//! "ISF Conventions", and VVISF's file types):
//!
//! * `startImage` and `endImage` (images) and `progress` (a float): a [`Role::Transition`],
//!   a mixer of those two frames;
//! * else an image input named `inputImage`: a [`Role::Effect`], or a [`Role::Mixer`] when it
//!   has other image inputs too (`inputImage` is its first);
//! * else other image inputs: a [`Role::Mixer`] of them;
//! * else (no image input): a [`Role::Source`], a generator.
//!
//! Audio inputs are not frames: they do not count ([`Shader::frame_inputs`]).

use crate::input::Input;
use crate::shader::{is_image, Shader};

/// What an ISF shader is in a graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// No image input: a source of frames.
    Source,
    /// One image input, `inputImage`: an effect.
    Effect,
    /// `startImage`, `endImage` and `progress`: a transition between two frames.
    Transition,
    /// Several image inputs (or one not named `inputImage`): a mixer.
    Mixer,
}

impl Shader {
    /// The shader's role ([`role`](crate::role) explains the rule).
    pub fn role(&self) -> Role {
        let images = self
            .inputs
            .iter()
            .filter(|i| i.kind == crate::InputKind::Image)
            .count();
        let progress = self
            .input("progress")
            .is_some_and(|i| matches!(i.kind, crate::InputKind::Float { .. }));
        if is_image(self, "startImage") && is_image(self, "endImage") && progress {
            Role::Transition
        } else if images == 0 {
            Role::Source
        } else if images == 1 && is_image(self, "inputImage") {
            Role::Effect
        } else {
            Role::Mixer
        }
    }

    /// The image inputs in the order a node's links feed them: `inputImage` first for an
    /// effect or a mixer that has it, `startImage` then `endImage` first for a transition,
    /// then the others in the header's order.
    pub fn frame_inputs(&self) -> Vec<&Input> {
        let first: &[&str] = match self.role() {
            Role::Transition => &["startImage", "endImage"],
            _ => &["inputImage"],
        };
        let images = || {
            self.inputs
                .iter()
                .filter(|i| i.kind == crate::InputKind::Image)
        };
        let mut out: Vec<&Input> = first
            .iter()
            .filter_map(|n| images().find(|i| i.name == *n))
            .collect();
        out.extend(images().filter(|i| !first.contains(&i.name.as_str())));
        out
    }
}
