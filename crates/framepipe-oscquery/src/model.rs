//! What the OSCQuery server describes: the show's nodes and their properties
//! ([`ShowModel`], versioned), their latest values ([`Values`]), and where both come from
//! ([`ShowSource`], polled by the server ~30 times a second).

use std::sync::Arc;

use framepipe_control::osc_in::{PropRange, Ranges};
use framepipe_core::{PropKind, PropSpec, PropValue};

/// One node of the show, as surfaces see it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeModel {
    /// The node's name: the address part (`/framepipe/<name>/<prop>`).
    pub name: String,
    /// The element it runs (`frei0r-glow`, `stamp`, ...).
    pub element: String,
    /// `source`, `effect`, `mixer`, `sink`, ... (for DESCRIPTION).
    pub kind: String,
    /// Its properties, with types and ranges.
    pub props: Vec<PropSpec>,
    /// Whether `/framepipe/<name>/bypass` applies (effects and mixers).
    pub bypassable: bool,
}

/// The show's graph as surfaces see it. A new `version` means the address space changed
/// (a live edit): listeners get `PATH_CHANGED`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShowModel {
    /// Changes whenever the graph does.
    pub version: u64,
    /// Every node, in the graph's order.
    pub nodes: Vec<NodeModel>,
    /// The show's audio bands (`--audio-bands`; 0: the show has no audio, and no
    /// `/framepipe/audio`).
    pub audio_bands: usize,
}

impl ShowModel {
    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<(usize, &NodeModel)> {
        self.nodes.iter().enumerate().find(|(_, n)| n.name == name)
    }
}

/// The latest value of everything the tree shows. `props[n][p]` belongs to
/// `model.nodes[n].props[p]`; a missing entry (a source that does not know it) is left out of
/// VALUE.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Values {
    /// Per node, per property.
    pub props: Vec<Vec<Option<PropValue>>>,
    /// Per node: bypassed now.
    pub bypassed: Vec<bool>,
    /// The master speed.
    pub speed: Option<f64>,
    /// The beat clock's tempo, BPM.
    pub tempo_bpm: Option<f64>,
    /// Whether the run is paused.
    pub paused: Option<bool>,
    /// The show's audio, as of the last frame (`None`: no audio, or no frame yet).
    pub audio: Option<AudioValues>,
}

/// The show's audio analysis as `/framepipe/audio` shows it (read-only).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AudioValues {
    /// RMS level of the last frame.
    pub level: f64,
    /// Peak since the frame before.
    pub peak: f64,
    /// Spectral flux.
    pub flux: f64,
    /// Frames with an onset so far (a listener sees every onset as a change).
    pub onsets: u64,
    /// The tempo estimate, bpm (0: none yet).
    pub tempo_bpm: f64,
    /// Band amplitudes, [`ShowModel::audio_bands`] of them.
    pub bands: Vec<f64>,
}

impl Values {
    /// Every property's default, nothing bypassed: what a source without live values shows.
    pub fn defaults(model: &ShowModel) -> Self {
        Values {
            props: model
                .nodes
                .iter()
                .map(|n| n.props.iter().map(|p| Some(p.default.clone())).collect())
                .collect(),
            bypassed: vec![false; model.nodes.len()],
            ..Values::default()
        }
    }

    /// `node`'s property `prop` (by index).
    pub fn prop(&self, node: usize, prop: usize) -> Option<&PropValue> {
        self.props.get(node)?.get(prop)?.as_ref()
    }
}

/// Where the server gets the show from. Called by one task, ~30 times a second; must not
/// block (the engine's state is read lock-free or with a try-lock).
pub trait ShowSource: Send + 'static {
    /// The graph as it is now (an `Arc` clone when unchanged).
    fn model(&mut self) -> Arc<ShowModel>;
    /// Writes the latest values for `model` into `values` (sized by the source); returns
    /// whether anything changed since the last call.
    fn read(&mut self, model: &ShowModel, values: &mut Values) -> bool;
}

/// A show whose graph and values never change: the model and the values given at start (no
/// live values). For tests, and for runs without a live view.
#[derive(Debug, Clone)]
pub struct FixedShow {
    model: Arc<ShowModel>,
    values: Values,
    read: bool,
}

impl FixedShow {
    /// A fixed show.
    pub fn new(model: ShowModel, values: Values) -> Self {
        FixedShow {
            model: Arc::new(model),
            values,
            read: false,
        }
    }
}

impl ShowSource for FixedShow {
    fn model(&mut self) -> Arc<ShowModel> {
        Arc::clone(&self.model)
    }

    fn read(&mut self, _model: &ShowModel, values: &mut Values) -> bool {
        let first = !self.read;
        self.read = true;
        if first {
            values.clone_from(&self.values);
        }
        first
    }
}

/// The `/norm` table of `model`: every int and float property's range, by the node's name and,
/// for the first node of an element, by the element's name too (as commands name nodes); and
/// every node's text properties, which no OSC message sets
/// ([`TEXT_PROPERTY_RULE`](framepipe_control::osc_in::TEXT_PROPERTY_RULE)).
pub fn norm_ranges(model: &ShowModel) -> Ranges {
    let mut r = Ranges::new();
    let mut seen = std::collections::HashSet::new();
    for n in &model.nodes {
        let first_of_element = seen.insert(n.element.as_str());
        r.add_node(
            &n.name,
            &n.element,
            n.props
                .iter()
                .filter(|p| p.kind == PropKind::Str)
                .map(|p| p.name.as_str()),
        );
        for p in &n.props {
            let range = match p.kind {
                PropKind::Float { min, max } => PropRange {
                    min,
                    max,
                    int: false,
                },
                PropKind::Int { min, max } => PropRange {
                    min: min as f64,
                    max: max as f64,
                    int: true,
                },
                _ => continue,
            };
            r.insert(&n.name, &p.name, range);
            if first_of_element && n.name != n.element {
                r.insert(&n.element, &p.name, range);
            }
        }
    }
    r
}
