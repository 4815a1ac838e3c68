//! Live edits (#9): the engine's side of `add`, `remove`, `replace`, `link` and `load` (graph
//! changes; a parameter change is a `set`, `live/`).
//!
//! * `editor.rs`: what the engine asks of the CLI ([`Editor`], [`Fade`]).
//! * `thread.rs`: the edit thread (`fp-edit`), which builds every edit off the frame path, hands
//!   it to the master output thread to switch in at a frame boundary, and drops what a switch
//!   replaced once its frames are back.
//! * `version.rs`: an edit's next version (`prepare_edit`, `fill_edit_pools`, `need_after`).
//!
//! The engine knows no registry: an [`Editor`] (the CLI's) turns an edit into the next version's
//! [`Graph`](crate::Graph), built on the engine's edit thread, never on a worker or an output
//! thread. Sources and sinks that the edit keeps are [`NodeKind::Running`](crate::NodeKind)
//! placeholders (the running ones go on), and nodes the edit does not touch are marked
//! [`Node::keep`](crate::Node) so that their instances move into the new version with their state.
//!
//! A crossfade (`load FILE fade=DURATION`) is two versions: the editor's first graph runs both
//! projects, with a crossfade mixer in front of each running sink whose amount ramps from 0 to 1 on
//! the frame clock over DURATION ([`Editor::fade`] names them); once the frames of the fade have
//! begun, the edit thread switches to the editor's second graph ([`Editor::after_fade`]), the new
//! project alone, and reports [`Event::FadeDone`](crate::Event::FadeDone).

mod editor;
mod thread;
mod version;

pub use editor::{Editor, Fade};

pub(crate) use thread::{spawn, EditLink, FromEditor, ToEditor};
pub(crate) use version::{fill_edit_pools, need_after, prepare_edit};
