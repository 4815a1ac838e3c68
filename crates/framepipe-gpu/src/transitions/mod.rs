//! gl-transitions (<https://gl-transitions.com>, the npm package `gl-transitions`, MIT): the
//! open collection of GLSL transitions, as `transition-NAME` mixers of two inputs (the frame
//! transitioned from, then the one transitioned to) with `progress` (0..1) and the
//! transition's own parameters as properties.
//!
//! | file | job |
//! |---|---|
//! | [`collection`] | finding and reading `gl-transitions.json`: [`Transition`]s and their [`Param`]s |
//! | [`glsl`] | a transition wrapped in the calling convention (`getFromColor`, `getToColor`, `progress`, `ratio`) for GLSL 330 |
//! | [`node`] | [`TransitionFactory`] and its node: one pass, two inputs |
//! | [`mix`] | `mix mode=transition transition=NAME`: the same node as the `mix` element's transition mode |
//!
//! Element names are `transition-` and the transition's name in lower case
//! (`transition-crosswarp`, `transition-gridflip`, `transition-directional-easing`).
//! A crossfade of `load FILE fade=2s transition=NAME` is a `mix mode=transition` per sink.

pub mod collection;
pub mod glsl;
pub mod mix;
pub mod node;

use std::path::Path;
use std::sync::Arc;

use framepipe_core::{
    edit_distance, Element, ElementDesc, ElementKind, Mode, PropKind, PropSpec, PropValue, Props,
    Rational, Registry,
};

pub use collection::{find_json, load, Param, ParamType, Transition};
pub use mix::mix_entry;
pub use node::{Face, TransitionFactory};

/// The element name of a transition.
pub fn element_name(transition: &str) -> String {
    format!("transition-{}", transition.to_lowercase())
}

/// The transition called `name` (its gl-transitions name, in any case, or its element name)
/// in `all`.
pub fn find<'a>(all: &'a [Arc<Transition>], name: &str) -> Option<&'a Arc<Transition>> {
    let name = name.strip_prefix("transition-").unwrap_or(name);
    all.iter().find(|t| t.name.eq_ignore_ascii_case(name))
}

/// The transition called `name` in `all` ([`find`]), or why not: the closest names, or where
/// the list is.
pub fn lookup<'a>(all: &'a [Arc<Transition>], name: &str) -> Result<&'a Arc<Transition>, String> {
    if let Some(t) = find(all, name) {
        return Ok(t);
    }
    let key = name
        .strip_prefix("transition-")
        .unwrap_or(name)
        .to_lowercase();
    let mut near: Vec<(usize, &str)> = all
        .iter()
        .map(|t| (edit_distance(&key, &t.name.to_lowercase()), t.name.as_str()))
        .filter(|&(d, _)| d <= 3.max(key.len() / 3))
        .collect();
    near.sort();
    let hint = if near.is_empty() {
        format!(
            "; the {} transitions are listed by 'framepipe plugins' as transition-NAME",
            all.len()
        )
    } else {
        let names: Vec<&str> = near.iter().take(3).map(|&(_, n)| n).collect();
        format!("; did you mean {}?", names.join(", "))
    };
    Err(format!("no gl-transition called '{name}'{hint}"))
}

/// The properties of a transition element: `progress`, then its parameters.
pub fn props(t: &Transition) -> Vec<PropSpec> {
    let mut out = vec![PropSpec::new(
        "progress",
        PropKind::Float { min: 0.0, max: 1.0 },
        PropValue::Float(0.0),
        "how far the transition is: 0 shows the first input, 1 the second",
    )];
    out.extend(t.params.iter().map(Param::spec));
    out
}

/// The description of `transition-NAME`.
pub fn desc(t: &Transition, file: &Path) -> framepipe_core::ElementDesc {
    let mut details = vec![
        ("transition".to_string(), t.name.clone()),
        ("collection".to_string(), file.display().to_string()),
    ];
    if let Some(a) = &t.author {
        details.push(("author".into(), a.clone()));
    }
    if let Some(l) = &t.license {
        details.push(("license".into(), l.clone()));
    }
    details.push((
        "inputs".into(),
        "2: the frame transitioned from, then the one transitioned to".into(),
    ));
    ElementDesc {
        name: element_name(&t.name),
        kind: ElementKind::Mixer {
            min_inputs: 2,
            max_inputs: 2,
        },
        description: format!(
            "gl-transition {} by {}",
            t.name,
            t.author.as_deref().unwrap_or("an unnamed author")
        ),
        props: props(t),
        default_mode: Mode::Parallel,
        details,
    }
}

/// Adds a `transition-NAME` element for every transition of the collection, when it is
/// found ([`find_json`]). A collection found but unreadable is returned as a warning.
pub fn register(registry: &mut Registry) -> Option<String> {
    let file = find_json()?;
    let all = match load(&file) {
        Ok(all) => all,
        Err(why) => return Some(why),
    };
    for t in all {
        let t = Arc::new(t);
        let d = desc(&t, &file);
        let element = d.name.clone();
        if registry.find(&element).is_some() {
            continue;
        }
        registry.register(
            d,
            Box::new(move |props: &Props| {
                let f = TransitionFactory::new(&element, t.clone(), props)?;
                Ok(Element::Gpu(Box::new(f)))
            }),
        );
    }
    None
}

/// The frames of transition `name` (from the collection [`find_json`] finds) between the
/// pictures `from` and `to` (RGBA8, top row first, of `size`), with properties `props`
/// (`progress` among them, as text), `frames` of them at 30 fps: RGBA8, top row first. For
/// tests and the peer checks.
pub fn render_frames(
    name: &str,
    props: &[(&str, &str)],
    size: (u32, u32),
    frames: usize,
    from: &[u8],
    to: &[u8],
) -> Result<Vec<Vec<u8>>, String> {
    let file = find_json().ok_or_else(collection::not_found)?;
    let all: Vec<Arc<Transition>> = load(&file)?.into_iter().map(Arc::new).collect();
    let t =
        find(&all, name).ok_or_else(|| format!("no transition {name:?} in {}", file.display()))?;
    render_transition(t, props, size, frames, from, to)
}

/// [`render_frames`] of a transition already read.
pub fn render_transition(
    t: &Arc<Transition>,
    props: &[(&str, &str)],
    size: (u32, u32),
    frames: usize,
    from: &[u8],
    to: &[u8],
) -> Result<Vec<Vec<u8>>, String> {
    let element = element_name(&t.name);
    let given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let resolved = Props::resolve(&element, &self::props(t), &given).map_err(|e| e.to_string())?;
    let f = TransitionFactory::new(&element, t.clone(), &resolved).map_err(|e| e.to_string())?;
    crate::isf::harness::run(
        Box::new(f),
        size,
        Rational::new(30, 1),
        2,
        frames,
        &[from, to],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(names: &[&str]) -> Vec<Arc<Transition>> {
        names
            .iter()
            .map(|n| {
                Arc::new(Transition {
                    name: n.to_string(),
                    glsl: String::new(),
                    params: Vec::new(),
                    author: None,
                    license: None,
                })
            })
            .collect()
    }

    #[test]
    fn a_transition_is_found_in_any_case_or_by_its_element_name() {
        let all = named(&["wipeLeft", "Directional"]);
        for name in ["wipeLeft", "wipeleft", "transition-wipeleft"] {
            assert_eq!(lookup(&all, name).unwrap().name, "wipeLeft", "{name}");
        }
        assert_eq!(lookup(&all, "directional").unwrap().name, "Directional");
    }

    #[test]
    fn an_unknown_transition_names_the_closest_ones_or_where_the_list_is() {
        let all = named(&["wipeLeft", "wipeRight", "wipeUp", "crosswarp", "fade"]);
        assert_eq!(
            lookup(&all, "wipeLft").unwrap_err(),
            "no gl-transition called 'wipeLft'; did you mean wipeLeft, wipeUp?"
        );
        assert_eq!(
            lookup(&all, "kaleidoscope").unwrap_err(),
            "no gl-transition called 'kaleidoscope'; the 5 transitions are listed by \
             'framepipe plugins' as transition-NAME"
        );
    }
}
