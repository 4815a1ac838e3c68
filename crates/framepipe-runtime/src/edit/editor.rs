//! [`Editor`] (the CLI's side: an edit into the next version's graph) and [`Fade`].

use framepipe_control::GraphEdit;

use crate::model::Graph;

/// Builds the next version of the running graph for a live edit.
pub trait Editor: Send {
    /// The graph after `edit`: every node of the new version, sources and sinks the edit keeps
    /// as `NodeKind::Running`, untouched nodes with `keep` set. An error (one line, naming what
    /// is wrong) refuses the edit; the show goes on unchanged.
    fn build(&mut self, edit: &GraphEdit) -> std::result::Result<Graph, String>;

    /// The engine switched to the graph last built (`true`), or refused it (`false`, e.g. it
    /// would change a sink's frame size): the editor's description follows the running graph.
    fn settled(&mut self, accepted: bool);

    /// After a successful [`build`](Self::build): the crossfade that graph begins, if it is
    /// one (`load FILE fade=`). Default: none.
    fn fade(&self) -> Option<Fade> {
        None
    }

    /// The crossfade [`fade`](Self::fade) announced is over (its graph runs, its amounts are 1):
    /// the graph that follows it, the new project alone, built as [`build`](Self::build)'s
    /// against the running (crossfading) graph and settled the same way. Default: refused.
    fn after_fade(&mut self) -> std::result::Result<Graph, String> {
        Err("this editor makes no crossfades".into())
    }

    /// After a successful [`build`](Self::build) of a crossfade: the graph
    /// [`after_fade`](Self::after_fade) will give once the crossfade's graph runs, without
    /// settling anything, so that the engine can check before the fade begins that the
    /// version after it will fit in the memory budget beside the crossfade's. Default: none
    /// (then that version is checked only when it is built, during the fade).
    fn peek_after_fade(&self) -> Option<std::result::Result<Graph, String>> {
        None
    }
}

/// A crossfade between the running graph and the next (see [`Editor::fade`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fade {
    /// What it fades to (the project file), for the messages.
    pub to: String,
    /// Its length, ns of the frame clock: made a whole number of frames at the graph's rate
    /// (rounded, at least one).
    pub ns: u64,
    /// The crossfade mixers' amounts, `(node, property)`: each goes from 0 at the fade's first
    /// frame N to 1 at frame N + frames (`k / frames` at N + k), a function of the frame
    /// number only.
    pub ramps: Vec<(String, String)>,
}

impl Fade {
    /// Its length in frames at `rate`: `ns × rate` rounded, at least 1.
    pub fn frames(&self, rate: framepipe_core::Rational) -> u64 {
        let num = u128::from(self.ns) * u128::from(rate.num);
        let den = 1_000_000_000u128 * u128::from(rate.den.max(1));
        u64::try_from((num + den / 2) / den)
            .unwrap_or(u64::MAX)
            .max(1)
    }
}
