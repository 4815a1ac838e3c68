//! `mix mode=transition transition=NAME`: the `mix` element's transition mode, a gl-transition
//! of inputs 0 and 1 whose `progress` is the mix's `fader` (live and oscillator-drivable as the
//! crossfade's), with the transition's parameters as properties of the node:
//!
//! ```text
//! mix name=m mode=transition transition=directional fader=~0.25hz direction=0,1
//! ```
//!
//! The node is a GPU mixer (a [`TransitionFactory`]): frames stay on the GPU where its inputs
//! and consumers are GPU nodes, and the plan inserts the uploads and downloads where they are
//! not. The `mix` of the registry is the CPU one (`layers`, `crossfade`); the builder asks
//! [`mix_entry`] first, as it asks `isf::file_entry` for `isf location=`, and uses its entry
//! for a node with `mode=transition`. `mode` and `transition` choose the node's shader: they
//! are fixed while it runs ([`PropSpec::fixed`]: a `set` is refused at once; `replace` the
//! node to change them).

use std::path::Path;
use std::sync::Arc;

use framepipe_core::{
    Element, ElementDesc, ElementKind, Error, Mode, PropKind, PropSpec, PropValue, Props,
    RegistryEntry, Result,
};

use super::node::Face;
use super::{collection, find_json, load, lookup, Param, Transition, TransitionFactory};

/// The element whose mode this is.
pub const MIX: &str = "mix";
/// The `mode=` word.
pub const MODE: &str = "transition";
/// The property that is the transition's `progress`.
pub const AMOUNT: &str = "fader";
/// The property naming the transition.
pub const TRANSITION: &str = "transition";
/// `fader`'s default, as the CPU `mix`'s.
pub const DEFAULT_FADER: f64 = 0.5;

/// The mix's modes, as `mode=` takes them (`layers` and `crossfade` are the CPU `mix`'s).
pub const MIX_MODES: [&str; 3] = ["layers", "crossfade", MODE];

/// The properties of `mix mode=transition transition=NAME`, given `NAME`'s transition.
fn face() -> Face {
    Face {
        amount: AMOUNT,
        fixed: &["mode", TRANSITION],
    }
}

/// The description of `mix mode=transition` running `t` (from the collection `file`).
pub fn mix_desc(t: &Transition, file: &Path) -> ElementDesc {
    let mut props = vec![
        PropSpec::new(
            "mode",
            PropKind::Enum(MIX_MODES.iter().map(|s| s.to_string()).collect()),
            PropValue::Str(MODE.into()),
            "transition: a gl-transition of inputs 0 and 1 (fixed while the node runs)",
        )
        .fixed(),
        PropSpec::new(
            TRANSITION,
            PropKind::Str,
            PropValue::Str(t.name.clone()),
            "the gl-transition's name (framepipe plugins lists them as transition-NAME; fixed \
             while the node runs)",
        )
        .fixed(),
        PropSpec::new(
            AMOUNT,
            PropKind::Float { min: 0.0, max: 1.0 },
            PropValue::Float(DEFAULT_FADER),
            "the transition's progress: 0 = input 0, 1 = input 1",
        ),
    ];
    props.extend(t.params.iter().map(Param::spec));
    let mut d = super::desc(t, file);
    d.name = MIX.into();
    d.description = format!(
        "Mixes inputs 0 and 1 with the gl-transition {} by {} on the GPU, at fader",
        t.name,
        t.author.as_deref().unwrap_or("an unnamed author")
    );
    d.props = props;
    d.kind = ElementKind::Mixer {
        min_inputs: 2,
        max_inputs: 2,
    };
    d.default_mode = Mode::Parallel;
    d
}

/// For a node of element `element` with properties `given` (as written): when it is `mix`
/// with `mode=transition`, the registry entry of that node (its properties are the
/// transition's, its build a GPU mixer), which the builder uses instead of the registry's
/// CPU `mix`; `None` for every other node. An unknown transition is refused with the closest
/// names; a collection not found names how to install it.
pub fn mix_entry(element: &str, given: &[(String, String)]) -> Result<Option<RegistryEntry>> {
    if element != MIX || !given.iter().any(|(k, v)| k == "mode" && v == MODE) {
        return Ok(None);
    }
    let fail = |why: String| Error::element(MIX, why);
    let Some((_, name)) = given.iter().find(|(k, _)| k == TRANSITION) else {
        return Err(fail(
            "mode=transition needs transition=NAME, the gl-transition to run (e.g. \
             transition=fade; framepipe plugins lists them as transition-NAME)"
                .into(),
        ));
    };
    let file = find_json().ok_or_else(|| fail(collection::not_found()))?;
    let all: Vec<Arc<Transition>> = load(&file)
        .map_err(fail)?
        .into_iter()
        .map(Arc::new)
        .collect();
    let t = lookup(&all, name).map_err(fail)?.clone();
    let desc = mix_desc(&t, &file);
    Ok(Some(RegistryEntry {
        desc,
        build: Box::new(move |props: &Props| {
            let f = TransitionFactory::with_face(MIX, face(), t.clone(), props)?;
            Ok(Element::Gpu(Box::new(f)))
        }),
    }))
}
