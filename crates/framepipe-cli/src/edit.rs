//! The CLI's side of live edits (#9): [`DescEditor`], the engine's
//! [`Editor`](framepipe_runtime::Editor). It holds the running graph's description and the
//! registry; for an edit it works out the next description ([`GraphDesc::apply`]) and builds
//! the next version of the graph from it, on the engine's edit thread:
//!
//! * a source or sink the edit leaves as it is (same name, element and properties; a sink may
//!   take its input from another node) is a [`NodeKind::Running`] placeholder: the running one
//!   goes on (building a file sink would truncate its file, a clip would start again);
//! * a new or changed source is built; a new, changed or removed sink is refused (sinks cannot
//!   change while running);
//! * an effect or mixer with the same name, element and properties is built with
//!   [`Node::keep`](framepipe_runtime::Node), so that the running instances (and their state)
//!   move into the new version;
//! * a frei0r plugin the running registry lacks is loaded first.
//!
//! The description follows what the engine did: [`settled`](Editor::settled)`(true)` makes the
//! last one built the running one, `false` drops it.
//!
//! `load FILE fade=DURATION` builds two graphs ([`Editor::fade`], [`Editor::after_fade`]):
//!
//! 1. the crossfade: the running nodes go on, renamed `old:NAME` (their instances, state and
//!    sources move in) — except those the new project has as they are (same name, element and
//!    properties, fed by such nodes: a shared clip or camera), which go on under their name
//!    and feed both; the new project's other nodes are built; in front of each running sink a
//!    `mix mode=crossfade` named `fade:SINK` (`mix mode=transition transition=NAME` and the
//!    transition's parameters with `load ... transition=NAME`: a gl-transition on the GPU)
//!    takes the old project's frames (input 0) and the new project's (input 1), its `fader`
//!    ramped from 0 to 1 by the engine; a leaky sink (a
//!    preview, as the running show's [`ShowView`] says) takes the new project's at once, and
//!    the old nodes that only fed it are dropped;
//! 2. after the fade: the new project alone with the running sinks, every node of it going on
//!    from the crossfade (its state since the fade's first frame kept).

use anyhow::{bail, Context, Result};
use framepipe_control::{FadeTransition, GraphEdit};
use framepipe_core::{ElementKind, Registry};
use framepipe_project::{GraphDesc, NodeDescr};
use framepipe_runtime::{Editor, Fade, Graph, ShowView};

use crate::build::{build_renamed, build_with, is_structural, Fate, Purpose};
use crate::web::PreviewTap;

/// How a crossfade renames the old project's nodes it keeps running: `old:NAME`.
pub const OLD_PREFIX: &str = "old:";
/// How a crossfade names the mixer in front of running sink `S`: `fade:S`.
pub const FADE_PREFIX: &str = "fade:";

/// The running graph's description and registry, building each edit's next graph.
#[derive(Debug)]
pub struct DescEditor {
    /// What runs.
    desc: GraphDesc,
    /// Every element the running graph uses; frei0r plugins are added as edits name them.
    registry: Registry,
    /// The description of the graph last built, until the engine settles it.
    next: Option<GraphDesc>,
    /// The crossfade the graph last built begins, and the description after it.
    fade: Option<(Fade, GraphDesc)>,
    /// The running show's published graph: which sinks are leaky (a crossfade cuts those).
    view: Option<ShowView>,
    /// The web page's preview branch, in no project file: `load` keeps it (issue #22).
    preview: Option<PreviewTap>,
}

/// The properties of a crossfade's mixers (`fade:SINK`), their `fader` at 0: `mix
/// mode=crossfade`, or `mix mode=transition` with the gl-transition and its parameters, which
/// are checked here (an unknown name or parameter refuses the `load` before anything is built).
fn fade_mixer_props(transition: Option<&FadeTransition>) -> Result<Vec<(String, String)>> {
    let fader = ("fader".to_string(), "0".to_string());
    let Some(t) = transition else {
        return Ok(vec![("mode".into(), "crossfade".into()), fader]);
    };
    use framepipe_gpu::transitions::mix;
    let mut props = vec![
        ("mode".to_string(), mix::MODE.to_string()),
        (mix::TRANSITION.to_string(), t.name.clone()),
        fader,
    ];
    for (k, v) in &t.params {
        if ["mode", mix::TRANSITION, mix::AMOUNT].contains(&k.as_str()) {
            bail!(
                "{k}= is not a parameter of the transition (the crossfade sets it); its                  parameters are listed by framepipe inspect mix transition={}",
                t.name
            );
        }
        props.push((k.clone(), v.clone()));
    }
    let entry = framepipe_gpu::transitions::mix_entry(framepipe_effects::mix::NAME, &props)?
        .expect("mode=transition makes a transition mix");
    framepipe_core::Props::resolve(&entry.desc.name, &entry.desc.props, &props)?;
    Ok(props)
}

/// `nodes` without the old project's nodes (the first `old` ones, but the sinks' places) whose
/// output nothing takes any more (what only fed a leaky sink that a crossfade cuts), inputs
/// renumbered; `fates` and `was` follow.
fn without_unused(
    nodes: Vec<NodeDescr>,
    fates: Vec<Fate>,
    was: Vec<Option<String>>,
    old: usize,
    sinks: &[usize],
) -> (Vec<NodeDescr>, Vec<Fate>, Vec<Option<String>>) {
    let mut alive = vec![true; nodes.len()];
    loop {
        let used = |i: usize| {
            nodes.iter().enumerate().any(|(c, n)| {
                alive[c]
                    && (n.inputs.contains(&i)
                        || (n.element == "feedback"
                            && n.props
                                .iter()
                                .any(|(k, v)| k == "from" && *v == nodes[i].name)))
            })
        };
        let Some(dead) = (0..old).find(|&i| alive[i] && !sinks.contains(&i) && !used(i)) else {
            break;
        };
        alive[dead] = false;
    }
    if alive.iter().all(|&a| a) {
        return (nodes, fates, was);
    }
    let mut index = vec![usize::MAX; nodes.len()];
    let mut k = 0;
    for (i, &a) in alive.iter().enumerate() {
        if a {
            index[i] = k;
            k += 1;
        }
    }
    let keep = |i: &usize| alive[*i];
    let nodes = nodes
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep(i))
        .map(|(_, mut n)| {
            n.inputs.iter_mut().for_each(|j| *j = index[*j]);
            n
        })
        .collect();
    let fates = fates
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep(i))
        .map(|(_, f)| f)
        .collect();
    let was = was
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep(i))
        .map(|(_, w)| w)
        .collect();
    (nodes, fates, was)
}

/// What a node is, by its element (`None`: a structural node or an unknown element).
fn kind_of(registry: &Registry, d: &NodeDescr) -> Option<ElementKind> {
    registry.find(&d.element).map(|e| e.desc.kind)
}

impl DescEditor {
    /// An editor of the running graph described by `desc`, whose elements `registry` has.
    pub fn new(desc: GraphDesc, registry: Registry) -> Self {
        DescEditor {
            desc,
            registry,
            next: None,
            fade: None,
            view: None,
            preview: None,
        }
    }

    /// The same, keeping the web page's preview branch `tap` through `load`: the new project
    /// gets it back, reading the node it read when the new project has one of that name (not
    /// a sink), else the new master sink's input.
    pub fn with_preview(mut self, tap: Option<PreviewTap>) -> Self {
        self.preview = tap;
        self
    }

    /// `edit` applied to the running description ([`GraphDesc::apply`]); a `load` keeps the
    /// preview branch (see [`with_preview`](Self::with_preview)).
    fn apply(&self, edit: &GraphEdit) -> Result<GraphDesc> {
        let (Some(tap), GraphEdit::Load { .. }) = (&self.preview, edit) else {
            return Ok(self.desc.apply(edit)?);
        };
        let Some(base) = crate::web::without_preview_tap(&self.desc, tap) else {
            return Ok(self.desc.apply(edit)?);
        };
        let read = self
            .desc
            .find(&tap.monitor)
            .and_then(|m| self.desc.nodes[m].inputs.first())
            .map(|&i| self.desc.nodes[i].name.clone());
        let mut next = base.apply(edit)?;
        let same = read.filter(|name| {
            next.find(name)
                .is_some_and(|i| kind_of(&self.registry, &next.nodes[i]) != Some(ElementKind::Sink))
        });
        crate::web::add_preview_tap(&mut next, &self.registry, same.as_deref())?;
        Ok(next)
    }

    /// The same, reading the running show's graph from `view` (the engine publishes each
    /// version's): a crossfade then cuts the leaky sinks (previews) instead of mixing.
    pub fn with_view(mut self, view: ShowView) -> Self {
        self.view = Some(view);
        self
    }

    /// The description of the running graph.
    #[cfg(test)]
    pub fn desc(&self) -> &GraphDesc {
        &self.desc
    }

    /// Loads the frei0r plugins `desc` names that the registry lacks; if one is still not
    /// found, every plugin, so that the builder's error can suggest a close name.
    fn load_plugins(&mut self, desc: &GraphDesc) {
        let missing: Vec<&str> = desc
            .nodes
            .iter()
            .filter(|n| self.registry.find(&n.element).is_none())
            .filter_map(|n| n.element.strip_prefix("frei0r-"))
            .collect();
        if missing.is_empty() {
            return;
        }
        framepipe_frei0r::register_named(&mut self.registry, &missing);
        if desc
            .nodes
            .iter()
            .any(|n| !is_structural(&n.element) && self.registry.find(&n.element).is_none())
        {
            framepipe_frei0r::register(&mut self.registry);
        }
    }

    /// The next description for `edit` ([`apply`](Self::apply)), a loaded project's relative
    /// paths resolved against its folder (but the sinks': they are the running ones, as
    /// written where the show started).
    fn applied(&self, edit: &GraphEdit) -> Result<GraphDesc> {
        let mut next = self.apply(edit)?;
        if let GraphEdit::Load { path, .. } = edit {
            let folder = framepipe_project::project_folder(path);
            let sinks: Vec<String> = next
                .sinks()
                .into_iter()
                .map(|i| next.nodes[i].name.clone())
                .collect();
            crate::load::resolve_paths(&mut next, folder, &self.registry, &sinks);
        }
        Ok(next)
    }

    /// The next description and graph for `edit`.
    fn next_graph(&mut self, edit: &GraphEdit) -> Result<(GraphDesc, Graph)> {
        let next = self.applied(edit)?;
        self.load_plugins(&next);
        if let GraphEdit::Add { element, .. } = edit {
            if !is_structural(element) {
                let kind = self.registry.lookup(element)?.desc.kind;
                if kind != ElementKind::Effect {
                    bail!(
                        "cannot add {element}: it is a {kind}; only a one-input element (an \
                         effect, a tee) can be added (replace a source, link a mixer's inputs)"
                    );
                }
            }
        }
        let fates = self.fates(&next)?;
        let graph = build_with(&next, &self.registry, Purpose::Run, &|i| fates[i])?;
        Ok((next, graph))
    }

    /// The crossfade's description and graph for `load` with `fade=` (see the module's
    /// docs), the [`Fade`] the engine runs, and the description after the fade.
    fn crossfade(
        &mut self,
        edit: &GraphEdit,
        path: &str,
        ns: u64,
        transition: Option<&FadeTransition>,
    ) -> Result<(GraphDesc, Graph, Fade, GraphDesc)> {
        let mixer_props =
            fade_mixer_props(transition).with_context(|| format!("cannot crossfade to {path}"))?;
        // The new project with the running sinks, as a cut would load it.
        let after = self.applied(edit)?;
        self.load_plugins(&after);
        let old = &self.desc;
        let kind = |d: &NodeDescr| kind_of(&self.registry, d);
        let is_sink = |d: &NodeDescr| kind(d) == Some(ElementKind::Sink);
        // Nodes of the new project that are running nodes as they are, fed by such nodes:
        // computed once for both projects (new index -> old index).
        let mut shared: Vec<Option<usize>> = vec![None; after.nodes.len()];
        loop {
            let mut changed = false;
            for (i, d) in after.nodes.iter().enumerate() {
                if shared[i].is_some() || is_sink(d) || d.element == "feedback" {
                    continue;
                }
                let Some(o) = old.find(&d.name) else { continue };
                let od = &old.nodes[o];
                if od.element == d.element
                    && od.props == d.props
                    && od.inputs.len() == d.inputs.len()
                    && d.inputs
                        .iter()
                        .zip(&od.inputs)
                        .all(|(&a, &b)| shared[a] == Some(b))
                {
                    shared[i] = Some(o);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut nodes: Vec<NodeDescr> = Vec::new();
        let mut fates: Vec<Fate> = Vec::new();
        let mut was: Vec<Option<String>> = Vec::new();
        // 1. The running nodes but the sinks (at their index: the old sinks' places are taken
        // by the fade mixers, step 3).
        let renamed = |o: usize| -> String {
            let name = &old.nodes[o].name;
            if shared.contains(&Some(o)) {
                name.clone()
            } else {
                format!("{OLD_PREFIX}{name}")
            }
        };
        let old_sinks: Vec<usize> = (0..old.nodes.len())
            .filter(|&o| is_sink(&old.nodes[o]))
            .collect();
        for (o, d) in old.nodes.iter().enumerate() {
            let name = renamed(o);
            let fate = match kind(d) {
                Some(ElementKind::Sink) => Fate::Build { keep: false },
                Some(ElementKind::Source) => Fate::Running { sink: false },
                Some(ElementKind::Effect | ElementKind::Mixer { .. }) => Fate::Build { keep: true },
                _ => Fate::Build {
                    keep: d.element == "feedback",
                },
            };
            let mut props = d.props.clone();
            if d.element == "feedback" {
                for (k, v) in &mut props {
                    if k == "from" {
                        if let Some(f) = old.find(v) {
                            *v = renamed(f);
                        }
                    }
                }
            }
            was.push((name != d.name).then(|| d.name.clone()));
            nodes.push(NodeDescr {
                name,
                element: d.element.clone(),
                props,
                inputs: d.inputs.clone(),
            });
            fates.push(fate);
        }
        // 2. The new project's own nodes (not the sinks, not the shared ones).
        let mut at: Vec<usize> = shared.iter().map(|s| s.unwrap_or(usize::MAX)).collect();
        for (i, d) in after.nodes.iter().enumerate() {
            if shared[i].is_none() && !is_sink(d) {
                at[i] = nodes.len();
                nodes.push(d.clone());
                fates.push(Fate::Build { keep: false });
                was.push(None);
            }
        }
        for (i, d) in after.nodes.iter().enumerate() {
            if shared[i].is_none() && !is_sink(d) {
                nodes[at[i]].inputs = d.inputs.iter().map(|&k| at[k]).collect();
            }
        }
        // 3. A crossfade mixer in front of each running sink, whose node it replaces; the sink
        // comes last, fed by the mixer.
        let mut ramps = Vec::new();
        let graph_view = self.view.as_ref().map(ShowView::graph);
        let leaky = |name: &str| {
            graph_view
                .as_ref()
                .and_then(|g| g.node(name).map(|(_, n)| n.leaky))
                .unwrap_or(false)
        };
        for &o in &old_sinks {
            let sink = &old.nodes[o];
            let n = after
                .find(&sink.name)
                .expect("load keeps the running sinks");
            let Some(&from_new) = after.nodes[n].inputs.first() else {
                bail!("{} takes no input", sink.name);
            };
            if leaky(&sink.name) {
                // A leaky sink (a preview) heads a branch of its own: two of them cannot meet
                // in a mixer. It cuts to the new project at the fade's first frame.
                nodes[o] = NodeDescr {
                    name: sink.name.clone(),
                    element: sink.element.clone(),
                    props: sink.props.clone(),
                    inputs: vec![at[from_new]],
                };
                was[o] = None;
                fates[o] = Fate::Running { sink: true };
                continue;
            }
            let mixer = format!("{FADE_PREFIX}{}", sink.name);
            ramps.push((mixer.clone(), "fader".to_string()));
            nodes[o] = NodeDescr {
                name: mixer,
                element: framepipe_effects::mix::NAME.into(),
                props: mixer_props.clone(),
                inputs: vec![sink.inputs[0], at[from_new]],
            };
            was[o] = None;
            fates[o] = Fate::Build { keep: false };
            nodes.push(NodeDescr {
                name: sink.name.clone(),
                element: sink.element.clone(),
                props: sink.props.clone(),
                inputs: vec![o],
            });
            fates.push(Fate::Running { sink: true });
            was.push(None);
        }
        let (nodes, fates, was) = without_unused(nodes, fates, was, old.nodes.len(), &old_sinks);
        for (i, n) in nodes.iter().enumerate() {
            if let Some(j) = nodes[..i].iter().position(|m| m.name == n.name) {
                bail!(
                    "cannot crossfade to {path}: its node {} has the name the crossfade gives \
                     to {}; rename it (the old project's nodes are {OLD_PREFIX}NAME during a \
                     fade, its mixers {FADE_PREFIX}SINK)",
                    n.name,
                    if j < old.nodes.len() {
                        "a running node"
                    } else {
                        "another node"
                    }
                );
            }
        }
        let desc = GraphDesc {
            nodes,
            settings: old.settings.clone(),
            midi: old.midi.clone(),
        };
        let graph = build_renamed(&desc, &self.registry, Purpose::Run, &|i| fates[i], &|i| {
            was[i].clone()
        })?;
        let fade = Fade {
            to: path.to_string(),
            ns,
            ramps,
        };
        Ok((desc, graph, fade, after))
    }

    /// Each node of `next`'s [`Fate`], or why the edit cannot run (a sink added, removed or
    /// changed).
    fn fates(&self, next: &GraphDesc) -> Result<Vec<Fate>> {
        self.fates_against(&self.desc, next)
    }

    /// [`fates`](Self::fates) against `running` instead of the running description.
    fn fates_against(&self, running: &GraphDesc, next: &GraphDesc) -> Result<Vec<Fate>> {
        let sink = |d: &NodeDescr| kind_of(&self.registry, d) == Some(ElementKind::Sink);
        for old in running.nodes.iter().filter(|d| sink(d)) {
            if next.find(&old.name).is_none() {
                bail!(
                    "sinks cannot be added, removed or changed while running: the edit removes \
                     {}",
                    old.name
                );
            }
        }
        next.nodes
            .iter()
            .map(|d| {
                let same = running
                    .find(&d.name)
                    .map(|i| &running.nodes[i])
                    .filter(|old| old.element == d.element && old.props == d.props);
                Ok(match kind_of(&self.registry, d) {
                    Some(ElementKind::Sink) => {
                        if same.is_none() {
                            bail!(
                                "sinks cannot be added, removed or changed while running: {} ({})",
                                d.name,
                                if running.find(&d.name).is_some() {
                                    format!("changed to {d}")
                                } else {
                                    format!("new: {d}")
                                }
                            );
                        }
                        Fate::Running { sink: true }
                    }
                    Some(ElementKind::Source) if same.is_some() => Fate::Running { sink: false },
                    Some(ElementKind::Effect | ElementKind::Mixer { .. }) => Fate::Build {
                        keep: same.is_some(),
                    },
                    // An unchanged feedback keeps its loop (the previous frame it holds);
                    // a new or changed one starts afresh with its colour.
                    _ if d.element == "feedback" => Fate::Build {
                        keep: same.is_some(),
                    },
                    _ => Fate::Build { keep: false },
                })
            })
            .collect()
    }
}

impl Editor for DescEditor {
    fn build(&mut self, edit: &GraphEdit) -> std::result::Result<Graph, String> {
        self.next = None;
        self.fade = None;
        if let GraphEdit::Load {
            path,
            fade_ns: Some(ns),
            transition,
        } = edit
        {
            return match self.crossfade(edit, path, *ns, transition.as_ref()) {
                Ok((desc, graph, fade, after)) => {
                    self.next = Some(desc);
                    self.fade = Some((fade, after));
                    Ok(graph)
                }
                Err(e) => Err(crate::one_line(&e)),
            };
        }
        match self.next_graph(edit) {
            Ok((desc, graph)) => {
                self.next = Some(desc);
                Ok(graph)
            }
            Err(e) => Err(crate::one_line(&e)),
        }
    }

    fn settled(&mut self, accepted: bool) {
        if let Some(next) = self.next.take() {
            if accepted {
                self.desc = next;
            } else {
                self.fade = None;
            }
        }
    }

    fn fade(&self) -> Option<Fade> {
        self.fade.as_ref().map(|(f, _)| f.clone())
    }

    fn after_fade(&mut self) -> std::result::Result<Graph, String> {
        let Some((_, after)) = self.fade.take() else {
            return Err("no crossfade is under way".into());
        };
        // Every node of `after` is in the crossfade's graph under its name, as it is: its
        // instances and sources go on; the sinks are the running ones.
        let built = self
            .fates(&after)
            .and_then(|fates| build_with(&after, &self.registry, Purpose::Run, &|i| fates[i]));
        match built {
            Ok(graph) => {
                self.next = Some(after);
                Ok(graph)
            }
            Err(e) => Err(crate::one_line(&e)),
        }
    }

    fn peek_after_fade(&self) -> Option<std::result::Result<Graph, String>> {
        // As `after_fade` will build it once the crossfade's description runs.
        let (Some(fading), Some((_, after))) = (&self.next, &self.fade) else {
            return None;
        };
        let built = self
            .fates_against(fading, after)
            .and_then(|fates| build_with(after, &self.registry, Purpose::Run, &|i| fates[i]));
        Some(built.map_err(|e| crate::one_line(&e)))
    }
}

#[cfg(test)]
mod tests {

    use framepipe_control::Command;
    use framepipe_project::parse_pipeline;
    use framepipe_runtime::{Editor, Graph, NodeKind};

    use super::DescEditor;

    fn edit(line: &str) -> framepipe_control::GraphEdit {
        match Command::parse(line) {
            Ok(Command::Edit(e)) => e,
            other => panic!("{line:?} -> {other:?}"),
        }
    }

    /// A directory for the test's files, removed on drop (also when the test fails).
    struct Dir(framepipe_testkit::TestDir);

    impl Dir {
        fn new(tag: &str) -> Self {
            Dir(framepipe_testkit::tmpdir(&format!("fp-editor-{tag}")))
        }
        fn file(&self, name: &str) -> String {
            self.0.file(name)
        }
    }

    /// The running show of the tests: a clip, two effects, a file sink whose file holds bytes
    /// that building the sink would truncate.
    fn editor(dir: &Dir) -> (DescEditor, String) {
        let out = dir.file("out.y4m");
        std::fs::write(&out, b"running output").unwrap();
        let desc = parse_pipeline(&format!(
            "testsrc name=src width=64 height=48 ! frei0r-glow name=fx1 blur=0.2 ! \
             invert name=fx2 ! y4msink name=out location={out}"
        ))
        .unwrap();
        let registry = crate::load::registry_for(&desc, None);
        (DescEditor::new(desc, registry), out)
    }

    /// `(name, kind word or "running source"/"running sink", keep, inputs by name)` per node.
    fn nodes(g: &Graph) -> Vec<String> {
        let n = g.nodes();
        n.iter()
            .map(|node| {
                let kind = match node.kind {
                    NodeKind::Running { sink: true } => "running-sink",
                    NodeKind::Running { sink: false } => "running-source",
                    ref k => k.word(),
                };
                let inputs: Vec<&str> = node.inputs.iter().map(|&i| n[i].name.as_str()).collect();
                format!(
                    "{} {kind}{} <-{}",
                    node.name,
                    if node.keep { " keep" } else { "" },
                    inputs.join(",")
                )
            })
            .collect()
    }

    #[test]
    fn an_added_effect_is_built_the_rest_runs_on_or_keeps_its_instances() {
        let dir = Dir::new("add");
        let (mut ed, out) = editor(&dir);
        // frei0r-sobel is not in the running registry (registry_for loads only glow).
        assert!(ed.registry.find("frei0r-sobel").is_none());
        let g = ed
            .build(&edit("add frei0r-sobel name=edges after fx1"))
            .unwrap();
        assert_eq!(
            nodes(&g),
            [
                "src running-source <-",
                "fx1 effect keep <-src",
                "edges effect <-fx1",
                "fx2 effect keep <-edges",
                "out running-sink <-fx2"
            ]
        );
        // The sink was not built: its file is as it was.
        assert_eq!(std::fs::read(&out).unwrap(), b"running output");
        // Refused by the engine: the description stays the running one.
        ed.settled(false);
        assert!(ed.desc().find("edges").is_none());
        ed.build(&edit("add frei0r-sobel name=edges after fx1"))
            .unwrap();
        ed.settled(true);
        assert!(ed.desc().find("edges").is_some());
        // The next edit starts from there; a changed property is a new instance.
        let g = ed.build(&edit("replace fx1 frei0r-glow blur=0.9")).unwrap();
        assert_eq!(
            nodes(&g),
            [
                "src running-source <-",
                "fx1 effect <-src",
                "edges effect keep <-fx1",
                "fx2 effect keep <-edges",
                "out running-sink <-fx2"
            ]
        );
    }

    #[test]
    fn a_replaced_source_is_built_and_a_removed_effect_is_gone() {
        let dir = Dir::new("replace");
        let (mut ed, _) = editor(&dir);
        let g = ed
            .build(&edit("replace src testsrc width=64 height=48 pattern=bars"))
            .unwrap();
        assert_eq!(
            nodes(&g),
            [
                "src source <-",
                "fx1 effect keep <-src",
                "fx2 effect keep <-fx1",
                "out running-sink <-fx2"
            ]
        );
        ed.settled(false);
        let g = ed.build(&edit("remove fx1")).unwrap();
        assert_eq!(
            nodes(&g),
            [
                "src running-source <-",
                "fx2 effect keep <-src",
                "out running-sink <-fx2"
            ]
        );
    }

    #[test]
    fn load_keeps_the_sinks_running_and_builds_the_new_scene() {
        let dir = Dir::new("load");
        let (mut ed, out) = editor(&dir);
        let scene = dir.file("scene2.toml");
        std::fs::write(
            &scene,
            "pipeline = \"testsrc width=64 height=48 pattern=bars ! frei0r-glow name=fx1 \
             blur=0.2 ! frei0r-sobel ! y4msink name=out location=elsewhere.y4m\"\n",
        )
        .unwrap();
        let g = ed.build(&edit(&format!("load {scene}"))).unwrap();
        assert_eq!(ed.fade(), None, "a cut");
        assert_eq!(
            nodes(&g),
            [
                "testsrc source <-",
                // Same name, element and properties: its instances move in.
                "fx1 effect keep <-testsrc",
                "frei0r-sobel effect <-fx1",
                "out running-sink <-frei0r-sobel"
            ]
        );
        assert_eq!(std::fs::read(&out).unwrap(), b"running output");
        ed.settled(true);
        // The running sink, not the file's.
        let o = &ed.desc().nodes[ed.desc().find("out").unwrap()];
        assert_eq!(o.props, [("location".to_string(), out)]);
    }

    #[test]
    fn refusals_are_one_line_and_leave_the_description() {
        let dir = Dir::new("refused");
        let (mut ed, out) = editor(&dir);
        let before = ed.desc().clone();
        for (line, why) in [
            ("add testsrc after fx1", "testsrc: it is a source"),
            ("add y4msink after fx1", "it is a sink"),
            ("add mix after fx1", "it is a mixer"),
            ("add frei0r-glwo after fx1", "did you mean 'frei0r-glow'"),
            ("add invert blurr=1 after fx1", "unknown property 'blurr'"),
            (
                "replace out y4msink location=other.y4m",
                "sinks cannot be added, removed or changed while running: out",
            ),
            ("remove src", "src: it has no input (a source)"),
            ("remove out", "(a sink)"),
            ("link fx1 fx2", "cycle"),
            ("load /nonexistent/scene.toml", "cannot read project file"),
        ] {
            let e = ed
                .build(&edit(line))
                .map(|g| panic!("{line}: {:?}", nodes(&g)))
                .unwrap_err();
            assert!(e.contains(why), "{line}: {e}");
            assert!(!e.contains('\n'), "{line}: {e}");
            ed.settled(false);
            assert_eq!(ed.desc(), &before, "{line}");
        }
        // A project whose sinks are not the running ones names them.
        let scene = dir.file("other.toml");
        std::fs::write(
            &scene,
            "pipeline = \"testsrc ! y4msink name=rec location=r.y4m\"\n",
        )
        .unwrap();
        let e = ed.build(&edit(&format!("load {scene}"))).unwrap_err();
        assert!(
            e.contains("it has no out") && e.contains("rec is not running"),
            "{e}"
        );
        assert_eq!(std::fs::read(&out).unwrap(), b"running output");
    }

    #[test]
    fn load_with_fade_runs_both_projects_then_the_new_one_alone() {
        let dir = Dir::new("fade");
        let (mut ed, out) = editor(&dir);
        // The same source (shared: it goes on and feeds both), the same glow fed by it
        // (shared too), a new effect named like a running one (fx2: built afresh, the running
        // one renamed old:fx2), a new effect.
        let scene = dir.file("scene2.toml");
        std::fs::write(
            &scene,
            "pipeline = \"testsrc name=src width=64 height=48 ! frei0r-glow name=fx1 blur=0.2 \
             ! invert name=fx2 mode=serial ! frei0r-sobel ! y4msink name=out location=x.y4m\"\n",
        )
        .unwrap();
        let g = ed.build(&edit(&format!("load {scene} fade=2s"))).unwrap();
        assert_eq!(
            nodes(&g),
            [
                "src running-source <-",
                "fx1 effect keep <-src",
                "old:fx2 effect keep <-fx1",
                "fade:out mixer <-old:fx2,frei0r-sobel",
                "fx2 effect <-fx1",
                "frei0r-sobel effect <-fx2",
                "out running-sink <-fade:out"
            ]
        );
        // The renamed node continues the running fx2; the others are their own names.
        let was: Vec<Option<&str>> = g.nodes().iter().map(|n| n.was.as_deref()).collect();
        assert_eq!(was, [None, None, Some("fx2"), None, None, None, None]);
        let fade = ed.fade().expect("a crossfade");
        assert_eq!(fade.ns, 2_000_000_000);
        assert_eq!(fade.ramps, [("fade:out".to_string(), "fader".to_string())]);
        assert_eq!(fade.frames(framepipe_core::Rational::new(25, 1)), 50);
        // Nothing to end before the crossfade runs; then the new project alone, every node of
        // it going on from the crossfade.
        ed.settled(true);
        assert_eq!(ed.desc().find("fade:out"), Some(3));
        let g = ed.after_fade().unwrap();
        assert_eq!(
            nodes(&g),
            [
                "src running-source <-",
                "fx1 effect keep <-src",
                "fx2 effect keep <-fx1",
                "frei0r-sobel effect keep <-fx2",
                "out running-sink <-frei0r-sobel"
            ]
        );
        assert!(ed.after_fade().is_err(), "one end per crossfade");
        ed.settled(true);
        assert!(ed.desc().find("old:fx2").is_none());
        assert_eq!(std::fs::read(&out).unwrap(), b"running output");
        // A name the crossfade needs, taken by the new project: refused, naming it.
        std::fs::write(
            &scene,
            "pipeline = \"testsrc width=64 height=48 ! invert name=fade:out \
             ! y4msink name=out location=x.y4m\"\n",
        )
        .unwrap();
        let e = ed
            .build(&edit(&format!("load {scene} fade=1s")))
            .unwrap_err();
        assert!(
            e.contains("its node fade:out has the name the crossfade gives"),
            "{e}"
        );
        assert_eq!(ed.fade(), None);
    }
}
