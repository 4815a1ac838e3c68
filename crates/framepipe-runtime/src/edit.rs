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

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use framepipe_control::{Command, Posted};

use crate::pipeline::{prepare_edit, Options};
use crate::state::{Pending, Shared};

/// To the edit thread.
pub(crate) enum ToEditor {
    /// Build the next version for this `Command::Edit`.
    Build(Posted),
    /// The engine switched to the version last built: publish its graph, tell the editor, and
    /// drop what the switch replaced (here, off the frame path).
    Switched(Box<Pending>),
}

/// From the edit thread.
pub(crate) enum FromEditor {
    /// Built; to be switched in at the next frame boundary.
    Ready(Box<Pending>),
    /// Refused (the editor's or the engine's reason); the show goes on unchanged.
    Refused(Posted, String),
}

/// The master output thread's end of the edit thread: it never blocks on it.
pub(crate) struct EditLink {
    pub tx: SyncSender<ToEditor>,
    pub rx: Receiver<FromEditor>,
    /// A message waits in `rx` (the output thread looks only when set).
    pub ready: Arc<AtomicBool>,
    /// An edit is being built or waits for its switch: the next is refused until it is
    /// answered (one edit at a time keeps every version built against the running one).
    pub busy: bool,
}

impl EditLink {
    /// The edit thread's message, if one is there.
    pub(crate) fn take(&mut self) -> Option<FromEditor> {
        if !self.ready.swap(false, Ordering::AcqRel) {
            return None;
        }
        match self.rx.try_recv() {
            Ok(m) => {
                // Another may follow; look again next time.
                self.ready.store(true, Ordering::Release);
                Some(m)
            }
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => None,
        }
    }
}

/// Starts the edit thread (`fp-edit`) with `editor`.
pub(crate) fn spawn(
    mut editor: Box<dyn Editor>,
    shared: Arc<Shared>,
    options: Options,
) -> std::io::Result<(EditLink, JoinHandle<()>)> {
    let (tx, from_output) = sync_channel::<ToEditor>(2);
    let (to_output, rx) = sync_channel::<FromEditor>(2);
    let ready = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ready);
    let handle = std::thread::Builder::new()
        .name("fp-edit".into())
        .spawn(move || {
            let send = |m: FromEditor| {
                if to_output.send(m).is_ok() {
                    flag.store(true, Ordering::Release);
                    shared.port_signals[0].raise();
                }
            };
            // Versions a switch replaced, kept until nothing outside them uses them (see
            // `Buried`): then they are dropped here, never on a worker or an output thread.
            let mut graveyard: Vec<Buried> = Vec::new();
            loop {
                let msg = if graveyard.is_empty() {
                    match from_output.recv() {
                        Ok(m) => Some(m),
                        Err(_) => break,
                    }
                } else {
                    match from_output.recv_timeout(BURY_POLL) {
                        Ok(m) => Some(m),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                };
                graveyard.retain_mut(|b| !b.released());
                let Some(msg) = msg else { continue };
                match msg {
                    ToEditor::Build(posted) => {
                        let Command::Edit(edit) = &posted.command else {
                            send(FromEditor::Refused(posted, "not an edit".into()));
                            continue;
                        };
                        // The editor and the plugins' constructors are user code: a panic
                        // there refuses this edit; the thread goes on taking edits.
                        let built = std::panic::catch_unwind(AssertUnwindSafe(|| {
                            editor
                                .build(edit)
                                .and_then(|g| prepare_edit(g, &shared, options).map_err(one_line))
                        }))
                        .unwrap_or_else(|p| {
                            Err(format!(
                                "building the edit panicked: {}",
                                crate::worker::panic_message(&*p)
                            ))
                        });
                        match built {
                            Ok(mut p) => {
                                p.posted = Some(posted);
                                send(FromEditor::Ready(p));
                            }
                            Err(reason) => {
                                let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
                                    editor.settled(false)
                                }));
                                send(FromEditor::Refused(posted, reason));
                            }
                        }
                    }
                    ToEditor::Switched(mut p) => {
                        if let Some(g) = p.graph_view.take() {
                            let live = shared.live.lock();
                            shared.view.set_graph(g, &live);
                        }
                        editor.settled(true);
                        // What the switch replaced is dropped here: instances of removed
                        // nodes, the old pools and slots, once nothing else holds them.
                        graveyard.push(Buried::new(p));
                    }
                }
            }
        })?;
    Ok((
        EditLink {
            tx,
            rx,
            ready,
            busy: false,
        },
        handle,
    ))
}

/// How often the edit thread looks whether a replaced version can be dropped.
const BURY_POLL: Duration = Duration::from_millis(2);

/// The longest a replaced version is kept waiting for its last frame (a frame it made may be
/// kept by the new version for a long time: a held source's last frame); after that it is
/// dropped anyway, and its pool's buffers go when that frame does.
const BURY_MAX: Duration = Duration::from_secs(2);

/// A version a switch replaced. Threads may still hold it for a moment (a worker's or an output
/// thread's reference, taken before the switch and let go at its next job or frame), and
/// frames of its pools may live on in the new version (the master's last frame under the
/// `live` policy, a feedback ring, a source's last frame): whoever let go of the last of them
/// would free the version, or a pool's buffers, on the frame path. So it is dropped here only
/// once the edit thread holds the only reference and every frame of its pools is back.
struct Buried {
    p: Box<Pending>,
    since: Instant,
}

impl Buried {
    fn new(mut p: Box<Pending>) -> Self {
        // Frames the replaced state still holds go back to their pools now (no free: the
        // version holds the pools).
        for n in &mut p.state.nodes {
            n.ring.iter_mut().for_each(|r| *r = None);
            n.source = None;
        }
        for s in &mut p.state.slots {
            s.outputs.iter_mut().for_each(|o| *o = None);
        }
        Buried {
            p,
            since: Instant::now(),
        }
    }

    /// Whether it may be dropped now (then it is dropped by the caller, on this thread).
    fn released(&mut self) -> bool {
        if self.since.elapsed() > BURY_MAX {
            return true;
        }
        let Some(ver) = Arc::get_mut(&mut self.p.state.ver) else {
            return false;
        };
        ver.first_frames.iter_mut().for_each(|f| *f = None);
        ver.pools.iter().enumerate().all(|(i, pool)| {
            ver.pools[..i].iter().any(|q| q.same_pool(pool)) || pool.available() == pool.allocated()
        })
    }
}

fn one_line(e: framepipe_core::Error) -> String {
    e.to_string()
}
