//! `--midi PORT`: the MIDI surface (framepipe-midi) wired to the run: the graph's properties
//! with their ranges and written values, the engine's published values (`ShowView`) where
//! relative encoders and toggles start from, the frame period for coalescing, the project file
//! for `save`, and `framepipe midi-ports`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use framepipe_core::{PropKind, Rational, Registry};
use framepipe_midi::{
    LiveValues, MidiInput, Port, Props, Range, SaveContext, ShowSurface, Surface,
};
use framepipe_project::GraphDesc;
use framepipe_runtime::{GraphView, ShowView, ValuesView};

/// A continuous value is posted at most once per this period per mapping when the run is
/// unpaced (a paced run uses its frame period).
const UNPACED_PERIOD: Duration = Duration::from_millis(10);

/// Every node of the graph with its properties as MIDI sees them: numbers and booleans with
/// their range and their value as written (else the default); the first node of an element also
/// answers to the element's name, as commands allow.
pub fn props(desc: &GraphDesc, registry: &Registry) -> Props {
    let mut p = Props::new();
    let mut seen = std::collections::HashSet::new();
    for n in &desc.nodes {
        let mut names = vec![n.name.as_str()];
        if seen.insert(n.element.clone()) && n.name != n.element {
            names.push(n.element.as_str());
        }
        for name in &names {
            p.node(name);
        }
        // A node with properties of its own (`isf location=`, `mix mode=transition`): its
        // entry; one that cannot be made is left to the build to report.
        let own = crate::build::node_entry(&n.element, &n.props)
            .ok()
            .flatten();
        let Some(entry) = own.as_ref().or_else(|| registry.find(&n.element)) else {
            continue;
        };
        for spec in &entry.desc.props {
            let range = match spec.kind {
                PropKind::Float { min, max } => Some(Range::Float { min, max }),
                PropKind::Int { min, max } => Some(Range::Int { min, max }),
                PropKind::Bool => Some(Range::Bool),
                _ => None,
            };
            let written = n
                .props
                .iter()
                .rev()
                .find(|(k, _)| *k == spec.name)
                .map(|(_, v)| v.clone());
            // An oscillator or an unreadable value: start from the default.
            let value = written
                .filter(|w| range.is_some_and(|r| r.parse(w).is_some()))
                .unwrap_or_else(|| spec.default.to_string());
            for name in &names {
                match range {
                    Some(r) => p.prop(name, &spec.name, r, Some(&value)),
                    None => p.other_prop(name, &spec.name),
                }
            }
        }
    }
    p
}

/// The engine's published values ([`ShowView`]) for the MIDI surface: copied at most once per
/// publication, looked up by node and property name (the element's name answers for its first
/// node, as in commands).
struct ViewValues {
    view: ShowView,
    graph: Arc<GraphView>,
    values: ValuesView,
}

impl ViewValues {
    fn new(view: ShowView) -> Self {
        ViewValues {
            graph: view.graph(),
            view,
            values: ValuesView::default(),
        }
    }

    /// The index of the node `name` names in the latest values (read now) and their graph.
    fn node(&mut self, name: &str) -> Option<usize> {
        self.view.read(&mut self.values);
        if self.graph.version != self.values.version {
            self.graph = self.view.graph();
        }
        if self.graph.version != self.values.version {
            return None;
        }
        self.graph
            .node(name)
            .map(|(i, _)| i)
            .or_else(|| self.graph.nodes.iter().position(|n| n.element == name))
    }
}

impl LiveValues for ViewValues {
    fn value(&mut self, node: &str, prop: &str) -> Option<f64> {
        let i = self.node(node)?;
        let k = self.graph.nodes[i]
            .props
            .iter()
            .position(|p| p.name == prop)?;
        self.values.values.get(i)?.get(k)?.as_f64()
    }

    fn bypassed(&mut self, node: &str) -> Option<bool> {
        let i = self.node(node)?;
        self.values.bypass.get(i).copied()
    }
}

/// The MIDI surface of one show: the graph `desc`'s properties and its project's `[[midi]]`
/// mappings, its published values, its pause state.
pub fn surface(
    desc: &GraphDesc,
    registry: &Registry,
    project: Option<PathBuf>,
    pace: Option<Rational>,
    start_paused: bool,
    counters: Arc<framepipe_runtime::Counters>,
    view: ShowView,
) -> Result<Surface> {
    let period = pace
        .filter(|r| r.num > 0)
        .map(|r| Duration::from_nanos(1_000_000_000 * u64::from(r.den) / u64::from(r.num)))
        .unwrap_or(UNPACED_PERIOD);
    let mut surface = Surface::new(
        props(desc, registry),
        period,
        start_paused,
        SaveContext {
            project,
            desc: desc.clone(),
        },
    );
    surface.set_paused_probe(Box::new(move || counters.paused()));
    surface.set_live_values(Box::new(ViewValues::new(view)));
    surface
        .load(&desc.midi)
        .map_err(|e| anyhow::anyhow!("in the project's MIDI mappings: {e}"))?;
    Ok(surface)
}

/// Starts the one MIDI input on `port` for every show's surface (one show or several, issue
/// #11): each show's own mappings post to its own queue.
pub fn start(port: &str, shows: Vec<ShowSurface>) -> Result<MidiInput> {
    let notify: framepipe_midi::input::Notify = Arc::new(|line: &str| {
        crate::say!("\rframepipe: {line}");
    });
    framepipe_midi::spawn_shows(&Port::parse(port), shows, notify)
        .with_context(|| format!("--midi '{port}'"))
}

/// `framepipe midi-ports`: the ALSA sequencer's input ports, one per line.
pub fn list_ports() -> Result<()> {
    use std::io::Write;
    let ports = framepipe_midi::list_ports()?;
    let mut out = std::io::stdout().lock();
    if ports.is_empty() {
        writeln!(out, "(no MIDI input ports)")?;
    }
    for p in ports {
        writeln!(out, "{p}")?;
    }
    Ok(())
}
