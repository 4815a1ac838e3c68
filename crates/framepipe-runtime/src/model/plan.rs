//! From a checked [`Graph`] to what the scheduler runs: the nodes in execution order (tees
//! looked through, automatic scalers put in front of mixer inputs of another size), each
//! node's negotiated output shape, its consumers, and [`Layout`], the text and Graphviz views
//! `framepipe graph` prints.
//!
//! Where a GPU node meets a CPU node the plan puts a transfer between them, like an automatic
//! scaler ([`insert_transfers`]): an `upload` after a CPU node that feeds GPU nodes (one for
//! all of them), a `download` after a GPU node that feeds CPU nodes, sinks or a feedback (one
//! for all of them). Between two GPU nodes nothing is copied; a CPU node or a sink only ever
//! sees CPU frames.

use std::fmt::Write as _;

use framepipe_core::{Error, Mode, Rational, Result, Sink, Source, VideoInfo};

use super::{EffectStage, GpuStage};
use crate::model::{Graph, MixerStage, NodeKind, OnEnd};

/// The movable part of an execution node: what the scheduler takes over.
pub(crate) enum Part {
    Source {
        source: Box<dyn Source>,
        on_end: OnEnd,
    },
    Effect(EffectStage),
    Mixer(MixerStage),
    /// A GPU source, effect or mixer: runs on the GPU thread, reads and writes textures.
    Gpu(GpuStage),
    /// A CPU frame into a texture (put in by the plan in front of GPU nodes fed by a CPU
    /// node); runs on the GPU thread.
    Upload,
    /// A texture into a CPU frame, asynchronously (put in by the plan after a GPU node that
    /// feeds a CPU node, a sink or a feedback); started and finished on the GPU thread.
    Download,
    /// A texture handed as it is to a sink that takes textures (a window that draws them),
    /// once the GPU has passed every command that wrote it; started and finished on the GPU
    /// thread, like a download, without a readback.
    Present,
    Feedback {
        /// Execution index of the node fed back.
        from: usize,
        color: [u8; 4],
    },
    Sink(Box<dyn Sink>),
    /// A live edit's placeholder for the running source (`sink == false`) or sink of that name.
    Running {
        sink: bool,
    },
}

/// The name of the automatic scaler in front of input `k` of mixer `mixer`.
pub(crate) fn auto_scaler_name(mixer: &str, k: usize) -> String {
    format!("{mixer}.sink_{k}:scale")
}

/// What a live edit's plan knows of the running graph: its rate, and the output shape of each
/// running node by name.
pub(crate) struct RunningGraph<'a> {
    pub rate: Rational,
    pub info: &'a dyn Fn(&str) -> Option<VideoInfo>,
}

/// One node as the scheduler runs it.
pub(crate) struct ExecNode {
    pub name: String,
    pub element: String,
    pub part: Part,
    /// Execution indices of its inputs, in order (all smaller than its own).
    pub inputs: Vec<usize>,
    /// Execution indices of the nodes taking its output, once per input they take it on (not
    /// counting feedbacks).
    pub consumers: Vec<usize>,
    /// Execution indices of the feedback nodes yielding its output one frame later.
    pub feeds: Vec<usize>,
    /// One frame at a time, in order (sources, feedbacks, sinks, stateful effects).
    pub serial: bool,
    /// Its leaky branch (an index into the branches), if it is in one.
    pub branch: Option<usize>,
    /// First node of its leaky branch (its inputs are in the show).
    pub head: bool,
    /// The master sink.
    pub master: bool,
    /// Put in by the graph (a scaler in front of a mixer input, a transfer between CPU and
    /// GPU), not written by the user.
    pub auto: bool,
    /// A live edit leaves it as it is (see `Node::keep`).
    pub keep: bool,
    /// The running node it continues in a live edit (see `Node::was`): its own name unless
    /// the edit renamed it.
    pub was: String,
    /// Its output shape (a sink: its input's).
    pub info: VideoInfo,
    /// Output shape = its first input's (only then may it be bypassed).
    pub same_shape: bool,
}

impl ExecNode {
    /// A node the graph puts in ([`auto`](Self::auto)) on the output of execution node `src`:
    /// a scaler or a transfer, named `name`, in the show and parallel unless the caller says
    /// otherwise, with no consumer yet.
    fn auto(name: String, element: String, part: Part, src: usize, info: VideoInfo) -> Self {
        ExecNode {
            element,
            was: name.clone(),
            name,
            part,
            inputs: vec![src],
            consumers: Vec::new(),
            feeds: Vec::new(),
            serial: false,
            branch: None,
            head: false,
            master: false,
            auto: true,
            keep: false,
            info,
            same_shape: false,
        }
    }

    pub fn kind_word(&self) -> &'static str {
        match self.part {
            Part::Source { .. } => "source",
            Part::Effect(_) => "effect",
            Part::Mixer(_) => "mixer",
            Part::Gpu(ref g) => g.word(),
            Part::Upload => "upload",
            Part::Download => "download",
            Part::Present => "present",
            Part::Feedback { .. } => "feedback",
            Part::Sink(_) | Part::Running { sink: true } => "sink",
            Part::Running { sink: false } => "source",
        }
    }

    /// Runs on the GPU thread (a GPU node, an upload or a download).
    pub fn on_gpu(&self) -> bool {
        matches!(
            self.part,
            Part::Gpu(_) | Part::Upload | Part::Download | Part::Present
        )
    }

    /// Its output is a texture (a GPU node's, an upload's, a present's), not a CPU frame.
    pub fn gpu_output(&self) -> bool {
        matches!(self.part, Part::Gpu(_) | Part::Upload | Part::Present)
    }

    pub fn mode(&self) -> Mode {
        if self.serial {
            Mode::Serial
        } else {
            Mode::Parallel
        }
    }
}

/// The graph, negotiated, in execution order.
pub(crate) struct Plan {
    pub nodes: Vec<ExecNode>,
    /// The graph's frame rate (the first source's).
    pub rate: Rational,
    /// Leaky branches, by their head's execution index.
    pub heads: Vec<usize>,
    /// Tees as written, for the layout: (name, execution index of what they pass on).
    tees: Vec<(String, usize)>,
}

impl Plan {
    /// Negotiates every node's shape in execution order.
    pub fn new(graph: Graph) -> Result<Plan> {
        Plan::build(graph, None)
    }

    /// The same for a live edit's graph, whose running sources and sinks (placeholders) have
    /// the shapes they have in the running graph, and whose rate is the running graph's.
    pub fn build(graph: Graph, running: Option<&RunningGraph<'_>>) -> Result<Plan> {
        let Graph {
            nodes,
            shape,
            auto_scale,
        } = graph;
        let n = nodes.len();
        let running_info = |name: &str| -> Result<VideoInfo> {
            running.and_then(|r| (r.info)(name)).ok_or_else(|| {
                Error::Graph(format!(
                    "{name} stands for a running node, but the running graph has no such \
                         source or sink"
                ))
            })
        };
        let mut first_info = None;
        for n in &nodes {
            first_info = match &n.kind {
                NodeKind::Source { source, .. } => Some(source.info()),
                NodeKind::Running { sink: false } => {
                    Some(running_info(n.was.as_deref().unwrap_or(&n.name))?)
                }
                NodeKind::Gpu(g) if g.source_info.is_some() => g.source_info,
                _ => continue,
            };
            break;
        }
        let first_info = first_info.expect("a checked graph has a source");
        let rate = running.map_or(first_info.rate, |r| r.rate);
        // Execution index of each graph node (tees: of what they pass on).
        let mut exec_of: Vec<Option<usize>> = vec![None; n];
        let mut slots: Vec<Option<crate::model::Node>> = nodes.into_iter().map(Some).collect();
        let mut out: Vec<ExecNode> = Vec::with_capacity(n + 4);
        let mut branch_index: Vec<Option<usize>> = vec![None; n];
        for (b, &h) in shape.heads.iter().enumerate() {
            branch_index[h] = Some(b);
        }
        let is_tee: Vec<bool> = slots
            .iter()
            .map(|s| s.as_ref().is_some_and(|n| matches!(n.kind, NodeKind::Tee)))
            .collect();
        let mut tees = Vec::new();
        let mut pending_feedback: Vec<(usize, usize, VideoInfo)> = Vec::new();
        for (gi, slot) in slots.iter().enumerate() {
            if let Some(node) = slot {
                if matches!(node.kind, NodeKind::Tee) {
                    tees.push((node.name.clone(), gi));
                }
            }
        }
        for &gi in &shape.order {
            let node = slots[gi].take().expect("each node once");
            let inputs: Vec<usize> = shape.inputs[gi]
                .iter()
                .map(|&j| exec_of[j].expect("inputs come first"))
                .collect();
            let branch = shape.branch[gi].map(|h| branch_index[h].expect("a head"));
            let head = shape.heads.contains(&gi);
            let input_infos: Vec<VideoInfo> = inputs.iter().map(|&i| out[i].info).collect();
            let name = node.name;
            let element = node.element;
            let keep = node.keep;
            let was = node.was.unwrap_or_else(|| name.clone());
            let (part, info, serial) = match node.kind {
                NodeKind::Tee => unreachable!("tees are not in the order"),
                NodeKind::Source { source, on_end } => {
                    let info = VideoInfo {
                        rate,
                        ..source.info()
                    };
                    (Part::Source { source, on_end }, info, true)
                }
                NodeKind::Feedback { from, color } => {
                    // The node fed back comes later when the loop passes through it: assume the
                    // first source's shape and check once it is negotiated.
                    let resolved = if is_tee[from] {
                        shape.inputs[from][0]
                    } else {
                        from
                    };
                    let info = match exec_of[resolved] {
                        Some(e) => out[e].info,
                        None => {
                            pending_feedback.push((out.len(), from, first_info));
                            VideoInfo { rate, ..first_info }
                        }
                    };
                    (Part::Feedback { from, color }, info, true)
                }
                NodeKind::Effect(mut stage) => {
                    let info = stage
                        .factory
                        .negotiate(input_infos[0])
                        .map_err(|e| in_node(&name, e))?;
                    check_size(&name, info)?;
                    let serial = stage.mode == Mode::Serial;
                    (Part::Effect(stage), info, serial)
                }
                NodeKind::Mixer(mut stage) => {
                    let mut inputs = inputs.clone();
                    let mut infos = input_infos.clone();
                    if stage.factory.needs_equal_sizes() {
                        let at = Front {
                            name: &name,
                            head,
                            branch,
                        };
                        scale_inputs(&mut out, auto_scale.as_ref(), &at, &mut inputs, &mut infos)?;
                    }
                    let info = stage
                        .factory
                        .negotiate(&infos)
                        .map_err(|e| in_node(&name, e))?;
                    check_size(&name, info)?;
                    let serial = stage.mode == Mode::Serial;
                    let e = out.len();
                    exec_of[gi] = Some(e);
                    let same_shape = (info.width, info.height) == (infos[0].width, infos[0].height);
                    out.push(ExecNode {
                        name,
                        element,
                        part: Part::Mixer(stage),
                        inputs,
                        consumers: Vec::new(),
                        feeds: Vec::new(),
                        serial,
                        branch,
                        head,
                        master: false,
                        auto: false,
                        keep,
                        was,
                        info,
                        same_shape,
                    });
                    continue;
                }
                NodeKind::Gpu(mut stage) => {
                    let mut inputs = inputs.clone();
                    let mut infos = input_infos.clone();
                    let info = if let Some(own) = stage.source_info {
                        VideoInfo { rate, ..own }
                    } else {
                        if infos.len() > 1 && stage.factory.needs_equal_sizes() {
                            let at = Front {
                                name: &name,
                                head,
                                branch,
                            };
                            scale_inputs(
                                &mut out,
                                auto_scale.as_ref(),
                                &at,
                                &mut inputs,
                                &mut infos,
                            )?;
                        }
                        stage
                            .factory
                            .negotiate(&infos)
                            .map_err(|e| in_node(&name, e))?
                    };
                    check_size(&name, info)?;
                    let serial = stage.mode == Mode::Serial;
                    let same_shape = infos
                        .first()
                        .is_some_and(|i| (i.width, i.height) == (info.width, info.height));
                    exec_of[gi] = Some(out.len());
                    out.push(ExecNode {
                        name,
                        element,
                        part: Part::Gpu(stage),
                        inputs,
                        consumers: Vec::new(),
                        feeds: Vec::new(),
                        serial,
                        branch,
                        head,
                        master: false,
                        auto: false,
                        keep,
                        was,
                        info,
                        same_shape,
                    });
                    continue;
                }
                NodeKind::Sink { sink, .. } => (Part::Sink(sink), input_infos[0], true),
                NodeKind::Running { sink } => {
                    if running.is_none() {
                        return Err(Error::Graph(format!(
                            "{name} stands for a running node: only a live edit's graph may \
                             have one"
                        )));
                    }
                    let info = if sink {
                        input_infos[0]
                    } else {
                        VideoInfo {
                            rate,
                            ..running_info(&was)?
                        }
                    };
                    (Part::Running { sink }, info, true)
                }
            };
            let same_shape = input_infos
                .first()
                .is_some_and(|i| (i.width, i.height) == (info.width, info.height));
            exec_of[gi] = Some(out.len());
            out.push(ExecNode {
                name,
                element,
                part,
                inputs,
                consumers: Vec::new(),
                feeds: Vec::new(),
                serial,
                branch,
                head,
                master: gi == shape.master,
                auto: false,
                keep,
                was,
                info,
                same_shape,
            });
        }
        // A tee's execution index is that of what it passes on.
        let placed = |gi: usize| match exec_of[gi] {
            Some(e) => e,
            None => exec_of[shape.inputs[gi][0]].expect("a tee passes on a placed node"),
        };
        // Feedback sources now that every node is placed.
        for node in out.iter_mut() {
            if let Part::Feedback { from, .. } = &mut node.part {
                *from = placed(*from);
            }
        }
        for (fb, from_g, assumed) in pending_feedback {
            let from = placed(from_g);
            let got = out[from].info;
            if (got.width, got.height) != (assumed.width, assumed.height) {
                return Err(Error::Graph(format!(
                    "{}: feedback from {}, which gives {}x{} frames, but a feedback ahead of \
                     its node is taken to have the first source's size ({}x{}); scale {} to \
                     that size",
                    out[fb].name,
                    out[from].name,
                    got.width,
                    got.height,
                    assumed.width,
                    assumed.height,
                    out[from].name
                )));
            }
        }
        // Tees resolved to the execution index of what they pass on.
        let mut tees: Vec<(String, usize)> = tees
            .into_iter()
            .map(|(name, gi)| (name, placed(gi)))
            .collect();
        let mut out = insert_transfers(out, &mut tees);
        for e in 0..out.len() {
            for k in 0..out[e].inputs.len() {
                // Once per input it is on (a mixer may take one frame on two inputs): the
                // scheduler counts inputs missing and consumers yet to take a frame by it.
                let i = out[e].inputs[k];
                out[i].consumers.push(e);
            }
            if let Part::Feedback { from, .. } = out[e].part {
                out[from].feeds.push(e);
            }
        }
        let heads = (0..out.len()).filter(|&e| out[e].head).collect();
        Ok(Plan {
            nodes: out,
            rate,
            heads,
            tees,
        })
    }

    /// `framepipe graph`'s views.
    pub fn layout(&self) -> Layout {
        let mut text = String::new();
        let master = self
            .nodes
            .iter()
            .find(|n| n.master)
            .map_or("?", |n| n.name.as_str());
        let _ = writeln!(
            text,
            "graph: {} nodes at {} fps; master output: {master}",
            self.nodes.len() + self.tees.len(),
            self.rate
        );
        let width = self
            .nodes
            .iter()
            .map(|n| n.name.len())
            .chain(self.tees.iter().map(|t| t.0.len()))
            .max()
            .unwrap_or(4);
        let ewidth = self
            .nodes
            .iter()
            .map(|n| n.element.len() + if n.auto { 7 } else { 0 })
            .max()
            .unwrap_or(4);
        for n in &self.nodes {
            let element = if n.auto {
                format!("{} (auto)", n.element)
            } else {
                n.element.clone()
            };
            let mut extra = Vec::new();
            match &n.part {
                Part::Source { on_end, .. } => extra.push(format!("on-end={}", on_end.as_str())),
                Part::Feedback { from, .. } => {
                    extra.push(format!("previous frame of {}", self.nodes[*from].name))
                }
                Part::Sink(_) if n.master => extra.push("master".into()),
                Part::Effect(_) | Part::Mixer(_) => extra.push(n.mode().to_string()),
                Part::Gpu(_) => extra.push(format!("gpu, {}", n.mode())),
                Part::Upload => extra.push("cpu -> gpu".into()),
                Part::Download => extra.push("gpu -> cpu".into()),
                Part::Present => extra.push("gpu -> sink, no download".into()),
                Part::Sink(_) => {}
                Part::Running { .. } => extra.push("running".into()),
            }
            if let Some(b) = n.branch {
                extra.push(format!(
                    "leaky (branch of {})",
                    self.nodes[self.heads[b]].name
                ));
            }
            let inputs: Vec<&str> = n.inputs.iter().map(|&i| &*self.nodes[i].name).collect();
            let from = if inputs.is_empty() {
                String::new()
            } else {
                format!("  <- {}", inputs.join(", "))
            };
            let _ = writeln!(
                text,
                "  {:width$}  {:ewidth$}  {:8}  {:>9}  {}{}",
                n.name,
                element,
                n.kind_word(),
                format!("{}x{}", n.info.width, n.info.height),
                extra.join(", "),
                from
            );
        }
        for (name, input) in &self.tees {
            let _ = writeln!(
                text,
                "  {:width$}  {:ewidth$}  {:8}  {:>9}  shares {}'s frames (no copy)",
                name, "tee", "tee", "", self.nodes[*input].name
            );
        }
        let mut dot = String::from("digraph framepipe {\n  rankdir=LR;\n  node [shape=box];\n");
        for (i, n) in self.nodes.iter().enumerate() {
            let style = match (&n.part, n.branch.is_some(), n.auto) {
                (Part::Gpu(_), _, _) => ", style=filled, fillcolor=lightblue",
                (_, _, true) => ", style=dotted",
                (_, true, _) => ", style=dashed",
                (Part::Sink(_), _, _) if n.master => ", style=bold",
                _ => "",
            };
            let _ = writeln!(
                dot,
                "  n{i} [label=\"{}\\n{}\\n{}x{}\"{style}];",
                escape(&n.name),
                escape(&n.element),
                n.info.width,
                n.info.height
            );
        }
        for (i, n) in self.nodes.iter().enumerate() {
            for (k, &j) in n.inputs.iter().enumerate() {
                let label = if n.inputs.len() > 1 {
                    format!(" [label=\"sink_{k}\"]")
                } else {
                    String::new()
                };
                let _ = writeln!(dot, "  n{j} -> n{i}{label};");
            }
            if let Part::Feedback { from, .. } = n.part {
                let _ = writeln!(
                    dot,
                    "  n{from} -> n{i} [style=dashed, label=\"previous frame\", constraint=false];"
                );
            }
        }
        dot.push_str("}\n");
        Layout { text, dot }
    }
}

/// Puts the transfers between CPU and GPU nodes (see the module documentation): an `upload`
/// after each CPU node that feeds a GPU node, a `download` after each GPU node that feeds a
/// CPU node, a sink or a feedback, a `present` in front of a sink that takes textures
/// ([`Sink::takes_textures`]: a window drawing them); each shared by every consumer of its
/// kind. A transfer is
/// in its producer's leaky branch, or in the show (in front of a leaky branch's first node,
/// it runs with the show, like an automatic scaler). `tees` (execution indices) are
/// renumbered. A plan without GPU nodes is returned as it is.
///
/// A walk of its own after placement, unlike the scalers ([`scale_inputs`]), which go in
/// while the nodes are negotiated (a mixer negotiates with its inputs scaled): a transfer
/// depends on where each edge's two ends run, and a feedback's on the node it reads, known
/// once every node is placed. Both make their node with [`ExecNode::auto`].
fn insert_transfers(nodes: Vec<ExecNode>, tees: &mut [(String, usize)]) -> Vec<ExecNode> {
    if !nodes.iter().any(|e| e.on_gpu()) {
        return nodes;
    }
    let n = nodes.len();
    let gpu_out: Vec<bool> = nodes.iter().map(ExecNode::gpu_output).collect();
    // Per old index: its new index, and its transfer's (upload or download), once made.
    let mut new_of = vec![usize::MAX; n];
    let mut transfer_of: Vec<Option<usize>> = vec![None; n];
    let mut present_of: Vec<Option<usize>> = vec![None; n];
    let mut out: Vec<ExecNode> = Vec::with_capacity(n + 4);
    let make = |out: &mut Vec<ExecNode>, src: usize, present: bool| -> usize {
        let from = &out[src];
        let (word, part) = if present {
            ("present", Part::Present)
        } else if from.gpu_output() {
            ("download", Part::Download)
        } else {
            ("upload", Part::Upload)
        };
        let name = format!("{}:{word}", from.name);
        // Not serial: jobs of the GPU thread, which runs one at a time; several downloads of
        // one node may be under way at once (a download's job ends when its readback is in).
        let node = ExecNode {
            branch: from.branch,
            same_shape: true,
            ..ExecNode::auto(name, word.to_string(), part, src, from.info)
        };
        out.push(node);
        out.len() - 1
    };
    let transfer = |out: &mut Vec<ExecNode>, src: usize| make(out, src, false);
    for (i, mut e) in nodes.into_iter().enumerate() {
        let wants_gpu = e.on_gpu();
        // A sink that draws textures itself is asked only when a GPU node feeds it.
        let takes_textures = |e: &mut ExecNode| match &mut e.part {
            Part::Sink(s) => s.takes_textures(),
            _ => false,
        };
        for k in 0..e.inputs.len() {
            let j = e.inputs[k];
            e.inputs[k] = if gpu_out[j] == wants_gpu {
                new_of[j]
            } else if gpu_out[j] && takes_textures(&mut e) {
                *present_of[j].get_or_insert_with(|| make(&mut out, new_of[j], true))
            } else {
                *transfer_of[j].get_or_insert_with(|| transfer(&mut out, new_of[j]))
            };
        }
        new_of[i] = out.len();
        out.push(e);
    }
    // A feedback holds CPU frames: one fed back from a GPU node reads its download (made
    // after every node, so after the node it reads).
    for f in 0..out.len() {
        if let Part::Feedback { from, .. } = out[f].part {
            let to = if gpu_out[from] {
                match transfer_of[from] {
                    Some(t) => t,
                    None => {
                        let t = transfer(&mut out, new_of[from]);
                        transfer_of[from] = Some(t);
                        t
                    }
                }
            } else {
                new_of[from]
            };
            if let Part::Feedback { from, .. } = &mut out[f].part {
                *from = to;
            }
        }
    }
    for (_, t) in tees.iter_mut() {
        *t = new_of[*t];
    }
    out
}

/// Where a node is, for the scalers put in front of its inputs.
struct Front<'a> {
    name: &'a str,
    head: bool,
    branch: Option<usize>,
}

/// Puts an automatic scaler in front of every input of node `at` whose size differs from its
/// first input's (`inputs`, `infos`: execution indices and shapes, replaced by the scalers'),
/// or says which sizes differ when the graph has no scaler.
fn scale_inputs(
    out: &mut Vec<ExecNode>,
    auto_scale: Option<&crate::model::AutoScale>,
    at: &Front<'_>,
    inputs: &mut [usize],
    infos: &mut [VideoInfo],
) -> Result<()> {
    let (name, head, branch) = (at.name, at.head, at.branch);
    let (w, h) = (infos[0].width, infos[0].height);
    for k in 1..inputs.len() {
        if (infos[k].width, infos[k].height) == (w, h) {
            continue;
        }
        let Some(make) = auto_scale else {
            return Err(Error::Graph(format!(
                "{name} needs inputs of one size: input 0 ({}) is {w}x{h}, \
                     input {k} ({}) is {}x{}; put a scale in front of it",
                out[inputs[0]].name, out[inputs[k]].name, infos[k].width, infos[k].height
            )));
        };
        let mut factory = make(w, h)?;
        let sinfo = factory.negotiate(infos[k]).map_err(|e| in_node(name, e))?;
        let sname = auto_scaler_name(name, k);
        let mode = factory.default_mode();
        let element = factory.name().to_string();
        let part = Part::Effect(EffectStage::new(factory, mode));
        out.push(ExecNode {
            serial: mode == Mode::Serial,
            // In front of a leaky branch's first mixer, the scaler runs with the show (so
            // that the branch still starts at one node).
            branch: if head { None } else { branch },
            ..ExecNode::auto(sname, element, part, inputs[k], sinfo)
        });
        inputs[k] = out.len() - 1;
        infos[k] = sinfo;
    }
    Ok(())
}

/// A negotiation error of node `name`: the element's message names the element, not the node
/// (two nodes may be the same element), so the node's name goes first when it is not there.
fn in_node(name: &str, e: Error) -> Error {
    let text = e.to_string();
    if text.starts_with(name) && text[name.len()..].starts_with(':') {
        e
    } else {
        Error::Graph(format!("{name}: {text}"))
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn check_size(name: &str, info: VideoInfo) -> Result<()> {
    if info.width == 0 || info.height == 0 {
        return Err(Error::Unsupported {
            element: name.to_string(),
            what: format!("an output of {}x{}", info.width, info.height),
        });
    }
    Ok(())
}

/// What `framepipe graph` prints: every node with its element, kind, negotiated size, mode,
/// inputs, leaky branch, automatic scalers; and the same as Graphviz `dot`.
#[derive(Debug, Clone)]
pub struct Layout {
    text: String,
    dot: String,
}

impl Layout {
    /// One line per node.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Graphviz `dot` source.
    pub fn dot(&self) -> &str {
        &self.dot
    }
}

impl Graph {
    /// Negotiates every node's shape without starting anything, for `framepipe graph`.
    pub fn layout(self) -> Result<Layout> {
        Ok(Plan::new(self)?.layout())
    }
}
