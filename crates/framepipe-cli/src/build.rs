//! From a parsed description ([`GraphDesc`]) to the runtime's [`Graph`]: every node's element
//! looked up and built, the node-level properties taken out, the structural nodes (`tee`,
//! `feedback`) made here.
//!
//! Node-level properties are the builder's, never the element's (unless the element has a
//! property of that name itself, which then wins):
//!
//! | property | on | meaning |
//! |---|---|---|
//! | `name=X` | any | the node's name (taken by the parser) |
//! | `mode=serial\|parallel` | effects, mixers | scheduling, instead of the element's default |
//! | `leaky=true\|false` | effects, mixers, sinks | skip frames when behind rather than hold the show back |
//! | `master=true` | sinks (one at most) | the output paced by the frame clock |
//! | `on-end=stop\|loop\|hold` | sources | what the source does at its end (default `stop`) |
//!
//! Errors are one line, `NAME (node N): what is wrong`; the runtime's own checks of the whole
//! graph ([`Graph::new`]) name the nodes the same way.

use anyhow::{bail, Context, Result};
use framepipe_control::Oscillator;
use framepipe_core::{
    Element, ElementDesc, ElementKind, Frame, FrameCtx, Mode, Props, Registry, Sink, VideoInfo,
};
use framepipe_project::{GraphDesc, NodeDescr};
use framepipe_runtime::{EffectStage, GpuStage, Graph, MixerStage, Node, NodeKind, OnEnd};

/// The structural elements: made by the builder, not found in the registry.
pub const STRUCTURAL: [(&str, &str); 2] = [
    (
        "tee",
        "fans its one input out to every node that links from it (tee name=t ... t. ! a  t. ! b); \
         no copy, no job: the frame is shared read-only",
    ),
    (
        "feedback",
        "a source that yields node from=NAME's output of the previous frame (color=R,G,B[,A] or \
         #rrggbb, default black, for frame 0): the way to close a loop",
    ),
];

/// Properties of `feedback`: `(name, kind, default, description)` for `inspect`.
pub const FEEDBACK_PROPS: [(&str, &str, &str, &str); 2] = [
    (
        "from",
        "node name",
        "(required)",
        "the node whose previous output this yields",
    ),
    (
        "color",
        "R,G,B[,A] or #rrggbb[aa]",
        "0,0,0,255",
        "frame 0's colour, before there is a previous frame",
    ),
];

/// Whether `element` is a structural element (`tee`, `feedback`).
pub fn is_structural(element: &str) -> bool {
    STRUCTURAL.iter().any(|(n, _)| *n == element)
}

/// The node-level properties.
const NODE_PROPS: [&str; 4] = ["mode", "leaky", "master", "on-end"];

/// How a node is called in errors: `NAME (node N)`, N from 1 in the order written.
pub fn who(desc: &GraphDesc, i: usize) -> String {
    format!("{} (node {})", desc.nodes[i].name, i + 1)
}

/// What the graph is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Running it: every element built.
    Run,
    /// Showing it (`framepipe graph`): sinks are checked (their properties) but not built, so
    /// that nothing is created, truncated or connected; sources are built (their shapes are
    /// needed).
    Layout,
}

/// What becomes of a node when a graph is built ([`build_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Built from its element; `keep`: a live edit leaves it unchanged, so the running node's
    /// instances move into the new version ([`Node::keep`]).
    Build {
        /// The running node's instances move in.
        keep: bool,
    },
    /// A live edit's placeholder for the running source (`sink: false`) or sink of this name,
    /// which goes on as it is: not built (building a file sink would truncate its file).
    Running {
        /// A sink.
        sink: bool,
    },
}

/// Builds the runtime graph: looks every element up, builds it with its properties, takes the
/// node-level ones, makes tees and feedbacks, and lets the runtime check the whole.
pub fn build(desc: &GraphDesc, registry: &Registry, purpose: Purpose) -> Result<Graph> {
    build_with(desc, registry, purpose, &|_| Fate::Build { keep: false })
}

/// [`build`], with each node's [`Fate`] (by index): a live edit's graph, where the running
/// sources and sinks are placeholders and unchanged nodes keep their instances.
pub fn build_with(
    desc: &GraphDesc,
    registry: &Registry,
    purpose: Purpose,
    fate: &dyn Fn(usize) -> Fate,
) -> Result<Graph> {
    build_renamed(desc, registry, purpose, fate, &|_| None)
}

/// [`build_with`], where a node may continue a running node of another name (`was(i)`, see
/// [`Node::was`]): a crossfade's graph renames the old project's nodes.
pub fn build_renamed(
    desc: &GraphDesc,
    registry: &Registry,
    purpose: Purpose,
    fate: &dyn Fn(usize) -> Fate,
    was: &dyn Fn(usize) -> Option<String>,
) -> Result<Graph> {
    if desc.nodes.is_empty() {
        bail!("a pipeline needs at least a source and a sink, e.g. \"testsrc ! nullsink\"");
    }
    let mut nodes = Vec::with_capacity(desc.nodes.len());
    let mut master: Option<usize> = None;
    for i in 0..desc.nodes.len() {
        let node = match fate(i) {
            Fate::Build { keep } => build_node(desc, i, registry, purpose).map(|mut n| {
                n.keep = keep;
                n
            }),
            Fate::Running { sink } => running_node(desc, i, registry, sink),
        }
        .map(|mut n| {
            n.was = was(i);
            n
        })
        .with_context(|| who(desc, i))?;
        if matches!(node.kind, NodeKind::Sink { master: true, .. }) {
            if let Some(first) = master {
                bail!(
                    "{} and {} both say master=true; one sink is the master output",
                    who(desc, first),
                    who(desc, i)
                );
            }
            master = Some(i);
        }
        nodes.push(node);
    }
    let mut graph = Graph::new(nodes)?;
    graph.set_auto_scale(Box::new(|width, height| {
        Ok(Box::new(framepipe_effects::scale::ScaleFactory::new(
            width,
            height,
            framepipe_effects::scale::Algorithm::Bilinear,
        )))
    }));
    Ok(graph)
}

/// What the builder takes out of a node's properties.
#[derive(Debug, Default)]
struct NodeProps {
    mode: Option<Mode>,
    leaky: Option<bool>,
    master: bool,
    on_end: OnEnd,
}

/// Splits `props` into the node-level ones (checked for `kind`) and the element's; a property
/// the element declares itself is the element's.
fn node_props(d: &NodeDescr, element: &ElementDesc) -> Result<(NodeProps, Vec<(String, String)>)> {
    let mut node = NodeProps::default();
    let mut rest = Vec::with_capacity(d.props.len());
    let mut seen: Vec<&str> = Vec::new();
    let kind = element.kind;
    for (k, v) in &d.props {
        let Some(&key) = NODE_PROPS.iter().find(|p| **p == k) else {
            rest.push((k.clone(), v.clone()));
            continue;
        };
        if element.props.iter().any(|p| p.name == key) {
            rest.push((k.clone(), v.clone()));
            continue;
        }
        if seen.contains(&key) {
            bail!("{key}= is given twice");
        }
        seen.push(key);
        let applies = match key {
            "mode" => matches!(kind, ElementKind::Effect | ElementKind::Mixer { .. }),
            "leaky" => !matches!(kind, ElementKind::Source),
            "master" => kind == ElementKind::Sink,
            _ => kind == ElementKind::Source,
        };
        if !applies {
            let on = match key {
                "mode" => "effects and mixers",
                "leaky" => "effects, mixers and sinks",
                "master" => "sinks",
                _ => "sources",
            };
            bail!("{key}={v} applies to {on}; {} is a {kind}", d.element);
        }
        match key {
            "mode" => {
                node.mode = Some(Mode::parse(v).with_context(|| {
                    format!("bad value '{v}' for mode: expected serial or parallel")
                })?)
            }
            "leaky" => node.leaky = Some(boolean(key, v)?),
            "master" => node.master = boolean(key, v)?,
            _ => {
                node.on_end = OnEnd::parse(v).with_context(|| {
                    format!("bad value '{v}' for on-end: expected stop, loop or hold")
                })?
            }
        }
    }
    Ok((node, rest))
}

fn boolean(key: &str, v: &str) -> Result<bool> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => bail!("bad value '{v}' for {key}: expected true or false"),
    }
}

/// A node that needs an input and has none: often meant to follow the one before (`a b` is two
/// branches, gst-launch's rule; `a ! b` one). Said before the element is built.
fn no_input(desc: &GraphDesc, i: usize, kind: &str) -> Result<()> {
    let d = &desc.nodes[i];
    if !d.inputs.is_empty() {
        return Ok(());
    }
    let hint = if i > 0 {
        format!(
            " (missing '!' between {} and {}? elements written without '!' start a new branch)",
            desc.nodes[i - 1].name,
            d.name
        )
    } else {
        String::new()
    };
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    bail!(
        "{} is {article} {kind}: it needs an input, it has none{hint}",
        d.element
    )
}

/// The registry entry of a node whose kind and properties are its own rather than its
/// element's, `None` for every other node: `isf location=FILE` (the file's) and
/// `mix mode=transition transition=NAME` (the gl-transition's, a GPU mixer).
pub fn node_entry(
    element: &str,
    props: &[(String, String)],
) -> framepipe_core::Result<Option<framepipe_core::RegistryEntry>> {
    match framepipe_gpu::isf::file_entry(element, props)? {
        Some(e) => Ok(Some(e)),
        None => framepipe_gpu::transitions::mix_entry(element, props),
    }
}

/// Builds node `i` of `desc`.
fn build_node(desc: &GraphDesc, i: usize, registry: &Registry, purpose: Purpose) -> Result<Node> {
    let d = &desc.nodes[i];
    let structural = |kind: NodeKind| Node {
        name: d.name.clone(),
        element: d.element.clone(),
        kind,
        inputs: d.inputs.clone(),
        leaky: None,
        keep: false,
        was: None,
    };
    match d.element.as_str() {
        "tee" => {
            if let Some((k, v)) = d.props.first() {
                bail!("tee has no properties ({k}={v}); it gives its input to every branch");
            }
            no_input(desc, i, "tee")?;
            return Ok(structural(NodeKind::Tee));
        }
        "feedback" => {
            if !d.inputs.is_empty() {
                bail!(
                    "feedback takes no input (it is linked from {}); it yields from=NAME's \
                     previous frame",
                    desc.nodes[d.inputs[0]].name
                );
            }
            let mut from = None;
            let mut color = [0, 0, 0, 255];
            for (k, v) in &d.props {
                match k.as_str() {
                    "from" => from = Some(desc.resolve(v, &format!("from={v} of {}", d.name))?),
                    "color" => color = parse_color(v)?,
                    other => bail!(
                        "unknown property '{other}' on feedback; expected one of: from, color"
                    ),
                }
            }
            let from = from.context("feedback needs from=NAME, the node it feeds back")?;
            return Ok(structural(NodeKind::Feedback { from, color }));
        }
        _ => {}
    }
    let file_entry = node_entry(&d.element, &d.props)?;
    let entry = match &file_entry {
        Some(e) => e,
        None => registry.lookup(&d.element)?,
    };
    if entry.desc.kind != ElementKind::Source {
        no_input(desc, i, &entry.desc.kind.to_string())?;
    }
    let (node, given) = node_props(d, &entry.desc)?;
    let mut props = Vec::with_capacity(given.len());
    let mut oscillators = Vec::new();
    for (k, v) in given {
        if v.trim_start().starts_with('~') {
            if !matches!(
                entry.desc.kind,
                ElementKind::Effect | ElementKind::Mixer { .. }
            ) {
                bail!("only effect and mixer properties can have an oscillator ({k}={v})");
            }
            let osc = Oscillator::parse_compact(&v)
                .with_context(|| format!("bad oscillator for {k} of {}", d.element))?;
            oscillators.push((k, osc));
        } else {
            props.push((k, v));
        }
    }
    let resolved = Props::resolve(&d.element, &entry.desc.props, &props)?;
    if let Some((k, _)) = oscillators
        .iter()
        .find(|(k, _)| !entry.desc.props.iter().any(|p| p.name == *k))
    {
        let names: Vec<&str> = entry.desc.props.iter().map(|p| p.name.as_str()).collect();
        return Err(framepipe_core::Error::UnknownProperty {
            element: d.element.clone(),
            prop: k.clone(),
            expected: names.join(", "),
        }
        .into());
    }
    let params = || {
        entry
            .desc
            .props
            .iter()
            .map(|spec| {
                let value = resolved
                    .get(&spec.name)
                    .cloned()
                    .unwrap_or(spec.default.clone());
                (spec.clone(), value)
            })
            .collect()
    };
    if purpose == Purpose::Layout && entry.desc.kind == ElementKind::Sink {
        return Ok(Node {
            name: d.name.clone(),
            element: d.element.clone(),
            kind: NodeKind::Sink {
                sink: Box::new(NotBuilt(d.element.clone())),
                master: node.master,
            },
            inputs: d.inputs.clone(),
            leaky: node.leaky,
            keep: false,
            was: None,
        });
    }
    let kind = match (entry.build)(&resolved)? {
        Element::Source(source) => NodeKind::Source {
            source,
            on_end: node.on_end,
        },
        Element::Effect(f) => {
            let mode = node.mode.unwrap_or_else(|| f.default_mode());
            let mut stage = EffectStage::new(f, mode);
            stage.params = params();
            stage.oscillators = oscillators;
            NodeKind::Effect(stage)
        }
        Element::Mixer(f) => {
            let mode = node.mode.unwrap_or_else(|| f.default_mode());
            let mut stage = MixerStage::new(f, mode);
            if let ElementKind::Mixer {
                min_inputs,
                max_inputs,
            } = entry.desc.kind
            {
                stage.inputs = (min_inputs, max_inputs);
            }
            stage.params = params();
            stage.oscillators = oscillators;
            NodeKind::Mixer(stage)
        }
        Element::Sink(sink) => NodeKind::Sink {
            sink,
            master: node.master,
        },
        Element::Gpu(f) => {
            let mut stage = GpuStage::new(f);
            if let Some(mode) = node.mode {
                stage.mode = mode;
            }
            stage.params = params();
            stage.oscillators = oscillators;
            NodeKind::Gpu(stage)
        }
    };
    Ok(Node {
        name: d.name.clone(),
        element: d.element.clone(),
        kind,
        inputs: d.inputs.clone(),
        leaky: node.leaky,
        keep: false,
        was: None,
    })
}

/// The placeholder of node `i`, a running source or sink: its name, element, inputs (a
/// sink's one) and leakiness (`leaky=` on a sink), nothing built.
fn running_node(desc: &GraphDesc, i: usize, registry: &Registry, sink: bool) -> Result<Node> {
    let d = &desc.nodes[i];
    let entry = registry.lookup(&d.element)?;
    let (node, _) = node_props(d, &entry.desc)?;
    Ok(Node {
        name: d.name.clone(),
        element: d.element.clone(),
        kind: NodeKind::Running { sink },
        inputs: if sink { d.inputs.clone() } else { Vec::new() },
        leaky: if sink { node.leaky } else { None },
        keep: false,
        was: None,
    })
}

/// The sink of a graph built to be shown, not run: its properties were checked, the element
/// was not built (a file sink would create its file).
struct NotBuilt(String);

impl Sink for NotBuilt {
    fn start(&mut self, _info: VideoInfo) -> framepipe_core::Result<()> {
        Err(framepipe_core::Error::Pipeline(format!(
            "{} was not built: the graph was built to be shown, not run",
            self.0
        )))
    }
    fn consume(&mut self, ctx: &FrameCtx, _frame: &Frame) -> framepipe_core::Result<()> {
        Err(framepipe_core::Error::Pipeline(format!(
            "{} was not built (frame {}): the graph was built to be shown, not run",
            self.0, ctx.seq
        )))
    }
    fn finish(&mut self) -> framepipe_core::Result<()> {
        Ok(())
    }
}

/// A colour: `R,G,B` or `R,G,B,A` (0..255 each), or `#rrggbb` / `#rrggbbaa`.
pub fn parse_color(v: &str) -> Result<[u8; 4]> {
    let bad = || {
        anyhow::anyhow!(
            "bad value '{v}' for color: expected R,G,B or R,G,B,A (0..255 each) or #rrggbb"
        )
    };
    let mut rgba = [0, 0, 0, 255];
    if let Some(hex) = v.strip_prefix('#') {
        if !(hex.len() == 6 || hex.len() == 8) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        for (k, c) in rgba.iter_mut().enumerate().take(hex.len() / 2) {
            *c = u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).map_err(|_| bad())?;
        }
        return Ok(rgba);
    }
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    if !(parts.len() == 3 || parts.len() == 4) {
        return Err(bad());
    }
    for (c, p) in rgba.iter_mut().zip(&parts) {
        *c = p.parse().map_err(|_| bad())?;
    }
    Ok(rgba)
}

#[cfg(test)]
mod tests {
    use super::parse_color;

    #[test]
    fn colours_are_rgb_rgba_or_hex() {
        assert_eq!(parse_color("255,128,0").unwrap(), [255, 128, 0, 255]);
        assert_eq!(parse_color("1, 2, 3, 4").unwrap(), [1, 2, 3, 4]);
        assert_eq!(parse_color("#ff8000").unwrap(), [255, 128, 0, 255]);
        assert_eq!(parse_color("#ff800080").unwrap(), [255, 128, 0, 128]);
        for bad in [
            "256,0,0",
            "1,2",
            "#ff80",
            "#gg8000",
            "red",
            "",
            "1,2,3,4,5",
            "-1,0,0",
        ] {
            let e = parse_color(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("'{bad}'")) && e.contains("#rrggbb"),
                "{bad}: {e}"
            );
        }
    }
}
