//! Live edits (#9): the engine's side of `add`, `remove`, `replace`, `link` and `load`.
//!
//! The engine knows no registry: an [`Editor`] (the CLI's) turns an edit into the next
//! version's [`Graph`], built on the engine's edit thread, never on a worker or an output
//! thread. Sources and sinks that the edit keeps are [`NodeKind::Running`](crate::NodeKind)
//! placeholders (the running ones go on), and nodes the edit does not touch are marked
//! [`Node::keep`](crate::Node) so that their instances move into the new version with their
//! state.

use framepipe_control::GraphEdit;

use crate::graph::Graph;

/// Builds the next version of the running graph for a live edit.
pub trait Editor: Send {
    /// The graph after `edit`: every node of the new version, sources and sinks the edit keeps
    /// as `NodeKind::Running`, untouched nodes with `keep` set. An error (one line, naming what
    /// is wrong) refuses the edit; the show goes on unchanged.
    fn build(&mut self, edit: &GraphEdit) -> std::result::Result<Graph, String>;

    /// The engine switched to the graph last built (`true`), or refused it (`false`, e.g. it
    /// would change a sink's frame size): the editor's description follows the running graph.
    fn settled(&mut self, accepted: bool);
}
