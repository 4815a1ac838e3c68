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

use anyhow::{bail, Result};
use framepipe_control::GraphEdit;
use framepipe_core::{ElementKind, Registry};
use framepipe_project::{GraphDesc, NodeDescr};
use framepipe_runtime::{Editor, Graph};

use crate::build::{build_with, is_structural, Fate, Purpose};

/// The running graph's description and registry, building each edit's next graph.
#[derive(Debug)]
pub struct DescEditor {
    /// What runs.
    desc: GraphDesc,
    /// Every element the running graph uses; frei0r plugins are added as edits name them.
    registry: Registry,
    /// The description of the graph last built, until the engine settles it.
    next: Option<GraphDesc>,
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
        }
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

    /// The next description and graph for `edit`.
    fn next_graph(&mut self, edit: &GraphEdit) -> Result<(GraphDesc, Graph)> {
        let next = self.desc.apply(edit)?;
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

    /// Each node of `next`'s [`Fate`], or why the edit cannot run (a sink added, removed or
    /// changed).
    fn fates(&self, next: &GraphDesc) -> Result<Vec<Fate>> {
        let sink = |d: &NodeDescr| kind_of(&self.registry, d) == Some(ElementKind::Sink);
        for old in self.desc.nodes.iter().filter(|d| sink(d)) {
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
                let same = self
                    .desc
                    .find(&d.name)
                    .map(|i| &self.desc.nodes[i])
                    .filter(|old| old.element == d.element && old.props == d.props);
                Ok(match kind_of(&self.registry, d) {
                    Some(ElementKind::Sink) => {
                        if same.is_none() {
                            bail!(
                                "sinks cannot be added, removed or changed while running: {} ({})",
                                d.name,
                                if self.desc.find(&d.name).is_some() {
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
        if let GraphEdit::Load {
            fade_ns: Some(_), ..
        } = edit
        {
            // Said plainly rather than cutting when a crossfade was asked for.
            return Err(
                "load with fade=: crossfading between projects is not available yet; \
                        `load FILE` without fade= switches with a cut at a frame boundary"
                    .into(),
            );
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
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

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

    /// A directory for the test's files, removed on drop.
    struct Dir(PathBuf);

    impl Dir {
        fn new(tag: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("framepipe-editor-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
        fn file(&self, name: &str) -> String {
            self.0.join(name).display().to_string()
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
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
        let registry = crate::registry_for(&desc, None);
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
        let refused = ed
            .build(&edit(&format!("load {scene} fade=2s")))
            .unwrap_err();
        assert!(refused.contains("crossfading"), "{refused}");
        let g = ed.build(&edit(&format!("load {scene}"))).unwrap();
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
}
