//! The graph as the user builds it ([`Graph`], [`Node`], [`NodeKind`]) and its validation.
//!
//! A graph is a list of nodes, each naming its inputs by index. [`Graph::new`] checks that it
//! can run and says why not in one line naming the nodes: inputs that do not exist, a node with
//! the wrong number of inputs for its kind, a cycle that does not pass through a `feedback`, an
//! output that goes nowhere, a leaky tap that feeds the show. It also works out what the
//! scheduler needs from the shape alone: an order in which every node comes after its inputs,
//! which sink is the master output, which nodes are leaky and which leaky branch each belongs
//! to. Negotiation of frame shapes is in `plan.rs`, the scheduler in `sched/`.
//!
//! The old chain (`source ! effects ! sink`) is a graph too:
//! [`Pipeline::new`](super::Pipeline::new) builds one.

use framepipe_control::Oscillator;
use framepipe_core::{
    EffectFactory, Error, MixerFactory, Mode, PropSpec, PropValue, Rational, Result, Sink, Source,
};

use super::{EffectStage, GpuStage};

/// Most inputs a node may have (a mixer's; `mix` takes 2..=8).
pub const MAX_INPUTS: usize = 8;

/// What a source does at the end of its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnEnd {
    /// The run ends (the frames before reach every sink).
    #[default]
    Stop,
    /// The source goes back to its first frame ([`Source::rewind`]); a source that cannot
    /// rewind (a live stream, a pipe) ends the run with an error saying so.
    Loop,
    /// The last frame is given again for every later frame, until the run ends otherwise.
    Hold,
}

impl OnEnd {
    /// Parses `stop`, `loop` or `hold`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "stop" => Some(OnEnd::Stop),
            "loop" => Some(OnEnd::Loop),
            "hold" => Some(OnEnd::Hold),
            _ => None,
        }
    }

    /// `stop`, `loop` or `hold`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnEnd::Stop => "stop",
            OnEnd::Loop => "loop",
            OnEnd::Hold => "hold",
        }
    }
}

/// A mixer in a graph, with how to schedule it and what may be changed while it runs (the
/// mixer's counterpart of [`EffectStage`]).
pub struct MixerStage {
    /// The configured mixer.
    pub factory: Box<dyn MixerFactory>,
    /// Serial or parallel.
    pub mode: Mode,
    /// How many inputs the element takes: `(fewest, most)`, from its
    /// [`ElementKind::Mixer`](framepipe_core::ElementKind::Mixer).
    pub inputs: (usize, usize),
    /// Its properties and their initial values (live, like an effect's).
    pub params: Vec<(PropSpec, PropValue)>,
    /// Oscillators on properties from the start.
    pub oscillators: Vec<(String, Oscillator)>,
}

impl MixerStage {
    /// A mixer taking 2 to [`MAX_INPUTS`] inputs, with no live parameters.
    pub fn new(factory: Box<dyn MixerFactory>, mode: Mode) -> Self {
        MixerStage {
            factory,
            mode,
            inputs: (2, MAX_INPUTS),
            params: Vec::new(),
            oscillators: Vec::new(),
        }
    }
}

impl std::fmt::Debug for MixerStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MixerStage({}, {})", self.factory.name(), self.mode)
    }
}

/// What a node is.
pub enum NodeKind {
    /// Produces frames; no input.
    Source {
        /// The source.
        source: Box<dyn Source>,
        /// What happens at its end.
        on_end: OnEnd,
    },
    /// One input, one output.
    Effect(EffectStage),
    /// Several inputs, one output.
    Mixer(MixerStage),
    /// A GPU source, effect or mixer (by its factory's kind): run by the show's GPU thread;
    /// the plan puts an `upload` in front of it where a CPU node feeds it and a `download`
    /// after it where it feeds a CPU node or a sink.
    Gpu(GpuStage),
    /// One input given to every node that names the tee as input: no copy, no job (the frame
    /// is shared read-only).
    Tee,
    /// No input: yields node `from`'s output for the previous frame (`color` for frame 0). The
    /// way to close a loop: a cycle of inputs without a feedback cannot run.
    Feedback {
        /// The node whose previous output this yields (an index into the graph's nodes).
        from: usize,
        /// RGBA of frame 0's frame.
        color: [u8; 4],
    },
    /// One input, no output.
    Sink {
        /// The sink.
        sink: Box<dyn Sink>,
        /// This sink is the master output, paced by the frame clock (the first sink that is not
        /// leaky is, unless one says so).
        master: bool,
    },
    /// Only in a live edit's graph ([`Editor::build`](crate::Editor::build)): the source or sink of
    /// this name in the running graph, kept as it is (a source goes on from where it is; a sink
    /// keeps its file or connection). Its inputs are given as for a sink (one) or none for a
    /// source.
    Running {
        /// A source (no input) or a sink (one input).
        sink: bool,
    },
}

impl NodeKind {
    /// `source`, `effect`, `mixer`, `tee`, `feedback` or `sink`.
    pub fn word(&self) -> &'static str {
        match self {
            NodeKind::Source { .. } => "source",
            NodeKind::Effect(_) => "effect",
            NodeKind::Mixer(_) => "mixer",
            NodeKind::Gpu(g) => g.word(),
            NodeKind::Tee => "tee",
            NodeKind::Feedback { .. } => "feedback",
            NodeKind::Sink { .. } => "sink",
            NodeKind::Running { sink: false } => "source",
            NodeKind::Running { sink: true } => "sink",
        }
    }

    /// A source, or a live edit's placeholder for a running one.
    pub(crate) fn is_source(&self) -> bool {
        match self {
            NodeKind::Source { .. } | NodeKind::Running { sink: false } => true,
            NodeKind::Gpu(g) => g.inputs() == (0, 0),
            _ => false,
        }
    }

    /// A sink, or a live edit's placeholder for a running one.
    pub(crate) fn is_sink(&self) -> bool {
        matches!(
            self,
            NodeKind::Sink { .. } | NodeKind::Running { sink: true }
        )
    }

    fn inputs(&self) -> (usize, usize) {
        match self {
            NodeKind::Source { .. }
            | NodeKind::Feedback { .. }
            | NodeKind::Running { sink: false } => (0, 0),
            NodeKind::Effect(_)
            | NodeKind::Tee
            | NodeKind::Sink { .. }
            | NodeKind::Running { sink: true } => (1, 1),
            NodeKind::Mixer(m) => m.inputs,
            NodeKind::Gpu(g) => g.inputs(),
        }
    }
}

/// One node of a graph.
pub struct Node {
    /// Unique name: shown in stats and errors, and how live commands name it (`set NAME.prop`).
    pub name: String,
    /// The element it was made from (`frei0r-glow`, `tee`...), for `framepipe graph`.
    pub element: String,
    /// What it is.
    pub kind: NodeKind,
    /// Its inputs, in order (indices into the graph's nodes).
    pub inputs: Vec<usize>,
    /// Whether it may skip frames rather than hold back the master output. `None`: the
    /// element's default (a `monitor` is leaky, nothing else is).
    pub leaky: Option<bool>,
    /// Only in a live edit's graph: the node is unchanged by the edit (same name, element and
    /// properties as written), so the running node's instances move into the new version with
    /// their state, if its input and output shapes stay the same (otherwise it is made afresh
    /// from this node's factory).
    pub keep: bool,
    /// Only in a live edit's graph: the name of the running node this one continues, when it
    /// is renamed by the edit (a crossfade calls the old project's nodes `old:NAME`); `None`:
    /// the running node of its own name. It picks the running node a placeholder stands for
    /// and whose instances a `keep` node takes over.
    pub was: Option<String>,
}

impl Node {
    /// A node with its name also as element name and no explicit leakiness.
    pub fn new(name: impl Into<String>, kind: NodeKind, inputs: Vec<usize>) -> Self {
        let name = name.into();
        Node {
            element: name.clone(),
            name,
            kind,
            inputs,
            leaky: None,
            keep: false,
            was: None,
        }
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Node({} {} <- {:?})",
            self.kind.word(),
            self.name,
            self.inputs
        )
    }
}

/// A graph that can run: every check of [`Graph::new`] passed.
pub struct Graph {
    pub(crate) nodes: Vec<Node>,
    pub(crate) shape: Shape,
    pub(crate) auto_scale: Option<AutoScale>,
}

/// Makes a scaler to a given size, for mixer inputs of another size than the mixer's first
/// input (see [`Graph::set_auto_scale`]).
pub type AutoScale = Box<dyn Fn(u32, u32) -> Result<Box<dyn EffectFactory>> + Send>;

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").field("nodes", &self.nodes).finish()
    }
}

/// What the shape of a graph tells, worked out once by [`Graph::new`].
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    /// Every node but tees, each after its inputs (ties broken by the order written).
    pub order: Vec<usize>,
    /// Per node: its inputs with tees looked through.
    pub inputs: Vec<Vec<usize>>,
    /// Per node: the leaky branch it belongs to (by the branch's head), if leaky.
    pub branch: Vec<Option<usize>>,
    /// The heads of the leaky branches: leaky nodes whose inputs are all in the show.
    pub heads: Vec<usize>,
    /// The master sink.
    pub master: usize,
}

impl Graph {
    /// Checks that `nodes` can run, in one line naming the nodes when not.
    pub fn new(mut nodes: Vec<Node>) -> Result<Graph> {
        let shape = check(&nodes)?;
        // A GPU source's shape is known once negotiated: now, so that the graph's rate is
        // known (negotiation happens once per element).
        for node in &mut nodes {
            if let NodeKind::Gpu(g) = &mut node.kind {
                if g.inputs() == (0, 0) && g.source_info.is_none() {
                    let info = g
                        .factory
                        .negotiate(&[])
                        .map_err(|e| Error::Graph(format!("{}: {e}", node.name)))?;
                    g.source_info = Some(info);
                }
            }
        }
        Ok(Graph {
            nodes,
            shape,
            auto_scale: None,
        })
    }

    /// How to scale a mixer's input that has another size than its first input: without it,
    /// such a graph is refused at negotiation, naming the sizes.
    pub fn set_auto_scale(&mut self, f: AutoScale) {
        self.auto_scale = Some(f);
    }

    /// The graph's frame rate: the first source's. Output frame N has the timestamp N / rate;
    /// a source at another rate is resampled to it (its nearest frame at or before).
    pub fn source_rate(&self) -> Rational {
        self.nodes
            .iter()
            .find_map(|n| match &n.kind {
                NodeKind::Source { source, .. } => Some(source.info().rate),
                NodeKind::Gpu(g) => g.source_info.map(|i| i.rate),
                _ => None,
            })
            .expect("a checked graph has a source")
    }

    /// The nodes, as given.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
}

fn bad(msg: String) -> Error {
    Error::Graph(msg)
}

/// All the checks of [`Graph::new`].
fn check(nodes: &[Node]) -> Result<Shape> {
    let n = nodes.len();
    let name = |i: usize| nodes[i].name.as_str();
    // Names.
    for (i, node) in nodes.iter().enumerate() {
        if node.name.is_empty() {
            return Err(bad(format!(
                "node {} ({}) has no name",
                i + 1,
                node.element
            )));
        }
        if let Some(j) = nodes[..i].iter().position(|o| o.name == node.name) {
            return Err(bad(format!(
                "two nodes are named '{}' (nodes {} and {})",
                node.name,
                j + 1,
                i + 1
            )));
        }
    }
    // Inputs: in range, as many as the kind takes.
    for node in nodes {
        if let Some(&i) = node.inputs.iter().find(|&&i| i >= n) {
            return Err(bad(format!(
                "{} links to node {}, which does not exist ({} nodes)",
                node.name,
                i + 1,
                n
            )));
        }
        let (lo, hi) = node.kind.inputs();
        let got = node.inputs.len();
        if got < lo || got > hi {
            let wants = match (lo, hi) {
                (0, 0) => "no input".to_string(),
                (l, h) if l == h => format!("{l} input{}", if l == 1 { "" } else { "s" }),
                (l, h) => format!("{l} to {h} inputs"),
            };
            let from: Vec<&str> = node.inputs.iter().map(|&i| name(i)).collect();
            return Err(bad(format!(
                "{} ({}) takes {wants}, it has {got}{}",
                node.name,
                node.kind.word(),
                if from.is_empty() {
                    String::new()
                } else {
                    format!(": {}", from.join(", "))
                }
            )));
        }
        for &i in &node.inputs {
            if nodes[i].kind.is_sink() {
                return Err(bad(format!(
                    "{} takes its input from {}, a sink, which has no output",
                    node.name,
                    name(i)
                )));
            }
        }
        if let NodeKind::Feedback { from, .. } = node.kind {
            if from >= n {
                return Err(bad(format!(
                    "{}: feedback from node {}, which does not exist",
                    node.name,
                    from + 1
                )));
            }
            if nodes[from].kind.is_sink() {
                return Err(bad(format!(
                    "{}: feedback from {}, a sink, which has no output",
                    node.name,
                    name(from)
                )));
            }
        }
    }
    if !nodes.iter().any(|n| n.kind.is_source()) {
        return Err(bad("a graph needs at least one source".into()));
    }
    // Consumers (feedback counts: it uses its node's output).
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in nodes.iter().enumerate() {
        for &j in &node.inputs {
            if !consumers[j].contains(&i) {
                consumers[j].push(i);
            }
        }
        if let NodeKind::Feedback { from, .. } = node.kind {
            if !consumers[from].contains(&i) {
                consumers[from].push(i);
            }
        }
    }
    for (i, node) in nodes.iter().enumerate() {
        if !node.kind.is_sink() && consumers[i].is_empty() {
            return Err(bad(format!(
                "the output of {} goes nowhere (every branch must end in a sink)",
                node.name
            )));
        }
    }
    // Order: inputs first (Kahn's algorithm, the earliest written first); what is left is a
    // cycle.
    let mut missing: Vec<usize> = nodes.iter().map(|n| n.inputs.len()).collect();
    let mut done = vec![false; n];
    let mut order_all = Vec::with_capacity(n);
    while order_all.len() < n {
        let Some(i) = (0..n).find(|&i| !done[i] && missing[i] == 0) else {
            return Err(bad(cycle_message(nodes, &done)));
        };
        done[i] = true;
        order_all.push(i);
        for (c, node) in nodes.iter().enumerate() {
            missing[c] -= node.inputs.iter().filter(|&&j| j == i).count();
        }
    }
    // Tees looked through.
    let resolve = |mut i: usize| {
        while matches!(nodes[i].kind, NodeKind::Tee) {
            i = nodes[i].inputs[0];
        }
        i
    };
    let inputs: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| n.inputs.iter().map(|&i| resolve(i)).collect())
        .collect();
    let order: Vec<usize> = order_all
        .into_iter()
        .filter(|&i| !matches!(nodes[i].kind, NodeKind::Tee))
        .collect();
    let mut exec_consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &i in &order {
        for &j in &inputs[i] {
            exec_consumers[j].push(i);
        }
    }
    // Leaky: as marked (or the element's default); then a node every consumer of which is
    // leaky is leaky too (the branch feeding a leaky sink), up to sources and feedbacks,
    // which are never leaky (they run in step with the show).
    let mut leaky: Vec<bool> = nodes
        .iter()
        .map(|n| {
            n.leaky.unwrap_or(match &n.kind {
                NodeKind::Effect(e) => e.factory.leaky_by_default(),
                _ => false,
            })
        })
        .collect();
    // A node a feedback reads stays in the show whatever its consumers: the feedback needs
    // every frame of it.
    let mut fed_back = vec![false; n];
    for node in nodes {
        if let NodeKind::Feedback { from, .. } = node.kind {
            fed_back[resolve(from)] = true;
        }
    }
    // What follows a leaky node is leaky unless it says otherwise (the sink after a monitor).
    for &i in &order {
        if nodes[i].leaky.is_none() && !leaky[i] && inputs[i].iter().any(|&j| leaky[j]) {
            leaky[i] = true;
        }
    }
    for &i in order.iter().rev() {
        let can = matches!(nodes[i].kind, NodeKind::Effect(_) | NodeKind::Mixer(_));
        if can
            && !fed_back[i]
            && nodes[i].leaky.is_none()
            && !leaky[i]
            && !exec_consumers[i].is_empty()
            && exec_consumers[i].iter().all(|&c| leaky[c])
        {
            leaky[i] = true;
        }
    }
    for (i, node) in nodes.iter().enumerate() {
        if leaky[i]
            && matches!(
                node.kind,
                NodeKind::Source { .. }
                    | NodeKind::Feedback { .. }
                    | NodeKind::Running { sink: false }
            )
        {
            return Err(bad(format!(
                "{} is a {} and cannot be leaky: it runs in step with the show",
                node.name,
                node.kind.word()
            )));
        }
    }
    // Branches: a leaky node with every input in the show heads one; a leaky node with leaky
    // inputs is in their branch (all the same one); the show never takes a leaky output.
    let mut branch: Vec<Option<usize>> = vec![None; n];
    let mut heads = Vec::new();
    for &i in &order {
        let ins = &inputs[i];
        if !leaky[i] {
            if let Some(&j) = ins.iter().find(|&&j| leaky[j]) {
                return Err(bad(format!(
                    "{} is leaky (it skips frames when behind) but feeds {}, which is not: \
                     mark {} leaky=true, or {} leaky=false",
                    name(j),
                    name(i),
                    name(i),
                    name(j)
                )));
            }
            continue;
        }
        let from_branches: Vec<usize> = ins.iter().filter_map(|&j| branch[j]).collect();
        if from_branches.is_empty() {
            branch[i] = Some(i);
            heads.push(i);
        } else if ins.iter().any(|&j| !leaky[j]) {
            return Err(bad(format!(
                "{} mixes the leaky branch of {} with frames of the show: a leaky branch \
                 starts at one node",
                name(i),
                name(from_branches[0])
            )));
        } else if from_branches.iter().any(|&b| b != from_branches[0]) {
            return Err(bad(format!(
                "{} mixes two leaky branches ({} and {}): a leaky branch starts at one node",
                name(i),
                name(from_branches[0]),
                name(
                    *from_branches
                        .iter()
                        .find(|&&b| b != from_branches[0])
                        .expect("found")
                )
            )));
        } else {
            branch[i] = Some(from_branches[0]);
        }
    }
    for node in nodes {
        if let NodeKind::Feedback { from, .. } = node.kind {
            let from = resolve(from);
            if leaky[from] {
                return Err(bad(format!(
                    "{}: feedback from {}, which is leaky (skips frames): a feedback needs \
                     every frame",
                    node.name,
                    name(from)
                )));
            }
        }
    }
    // The master output.
    let sinks: Vec<usize> = (0..n).filter(|&i| nodes[i].kind.is_sink()).collect();
    let marked: Vec<usize> = sinks
        .iter()
        .copied()
        .filter(|&i| matches!(nodes[i].kind, NodeKind::Sink { master: true, .. }))
        .collect();
    let master = match marked.as_slice() {
        [m] => *m,
        [a, b, ..] => {
            return Err(bad(format!(
                "two sinks say master=true ({} and {}); one is the master output",
                name(*a),
                name(*b)
            )))
        }
        [] => *sinks.iter().find(|&&i| !leaky[i]).ok_or_else(|| {
            bad("every sink is leaky: one must be the master output (leaky=false)".into())
        })?,
    };
    if leaky[master] {
        return Err(bad(format!(
            "{} is the master output and cannot be leaky",
            name(master)
        )));
    }
    Ok(Shape {
        order,
        inputs,
        branch,
        heads,
        master,
    })
}

/// "a cycle without feedback: a -> b -> a", for the nodes not yet ordered (each of which waits
/// for an input in a cycle).
fn cycle_message(nodes: &[Node], done: &[bool]) -> String {
    // Walk back from any unordered node along unordered inputs until a node repeats.
    let start = (0..nodes.len())
        .find(|&i| !done[i])
        .expect("a node is left");
    let mut path = vec![start];
    let mut at = start;
    loop {
        let next = *nodes[at]
            .inputs
            .iter()
            .find(|&&j| !done[j])
            .expect("an unordered node waits for an unordered input");
        if let Some(p) = path.iter().position(|&x| x == next) {
            // `path` runs against the links: forward, the cycle is path[p], then path[p+1..]
            // backwards, then path[p] again.
            let mut cycle: Vec<&str> = vec![&nodes[next].name];
            cycle.extend(path[p + 1..].iter().rev().map(|&i| &*nodes[i].name));
            cycle.push(&nodes[next].name);
            let closer = path.get(p + 1).copied().unwrap_or(next);
            return format!(
                "a cycle without feedback: {} (use 'feedback from={}' to feed a frame back)",
                cycle.join(" -> "),
                nodes[closer].name
            );
        }
        path.push(next);
        at = next;
    }
}
