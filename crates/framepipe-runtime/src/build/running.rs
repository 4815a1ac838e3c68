//! The running version as a live edit's build sees it ([`RunningVersion`]).

use framepipe_core::VideoInfo;

use crate::model::{Part, Plan};
use crate::sched::Version;

/// Per node: the running node it continues with its instances, source or ring (a live edit's
/// kept node), if any.
pub(super) fn kept_nodes(plan: &Plan, running: Option<&RunningVersion<'_>>) -> Vec<Option<usize>> {
    let infos: Vec<VideoInfo> = plan.nodes.iter().map(|e| e.info).collect();
    plan.nodes
        .iter()
        .map(|e| {
            let named = running.and_then(|r| r.index_of(&e.was));
            match e.part {
                // A running source or sink is the one of that name (its shape is checked when
                // the version is built).
                Part::Running { .. } => named,
                _ => named.filter(|&o| running.is_some_and(|r| r.same_node(o, e, &infos))),
            }
        })
        .collect()
}

/// The running version as a live edit sees it.
pub(crate) struct RunningVersion<'a> {
    pub ver: &'a Version,
    /// Per output port, its sink's node in the running version.
    pub ports: &'a [usize],
}

impl RunningVersion<'_> {
    pub(crate) fn index_of(&self, name: &str) -> Option<usize> {
        self.ver.names.iter().position(|n| &**n == name)
    }

    pub(super) fn port_of(&self, node: usize) -> Option<usize> {
        self.ports.iter().position(|&p| p == node)
    }

    /// Whether running node `o` can be carried into the new version as execution node `e`:
    /// the edit keeps it (a running placeholder, or `keep`), it is the same element, of the
    /// same kind, with the same output shape and mode, fed by inputs of the same shapes.
    /// `infos`: the new version's output shape per node.
    pub(super) fn same_node(
        &self,
        o: usize,
        e: &crate::model::ExecNode,
        infos: &[VideoInfo],
    ) -> bool {
        let v = self.ver;
        // A feedback's state is its ring (the loop's previous frame): kept only when the edit
        // keeps the node, like an effect's instances (a replaced one starts afresh).
        let kept = matches!(e.part, Part::Running { .. }) || e.keep;
        let old_inputs = &v.topo.nodes[o].inputs;
        kept && v.elements[o] == e.element
            && v.kinds[o] == e.kind_word()
            && v.infos[o] == e.info
            && v.topo.nodes[o].serial == e.serial
            && old_inputs.len() == e.inputs.len()
            && old_inputs
                .iter()
                .zip(&e.inputs)
                .all(|(&a, &b)| v.infos[a] == infos[b])
    }
}
