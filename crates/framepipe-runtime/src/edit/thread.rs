//! The edit thread: builds each live edit's version off the frame path and hands it to the master
//! output to switch in at a frame boundary; drops replaced versions once their frames are back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use framepipe_control::{Command, Posted};

use super::{fill_edit_pools, need_after, prepare_edit};
use super::{Editor, Fade};
use crate::build::Admit;
use crate::exec::catch_panic;
use crate::model::Options;
use crate::sched::{NextVersion, Replaced, Shared};
use crate::Event;

/// To the edit thread.
// A version moves by value (a bounded channel's slot): boxing it would free on the output thread.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ToEditor {
    /// Build the next version for this `Command::Edit`.
    Build(Posted),
    /// The engine switched to the version last built, at this frame: publish its graph and
    /// tell the editor (the next edit is built against it).
    Switched {
        frame: u64,
        graph_view: Option<crate::stats::GraphView>,
        /// The names of the nodes the switch before removed, which the output thread kept
        /// until now (for its refusals): dropped here.
        dropped: Vec<Arc<str>>,
    },
    /// What a switch replaced, once its frames are done: dropped here, off the frame path.
    Bury(Replaced),
}

/// From the edit thread.
// A version moves by value (a bounded channel's slot): boxing it would free on the output thread.
#[allow(clippy::large_enum_variant)]
pub(crate) enum FromEditor {
    /// Built; to be switched in at the next frame boundary.
    Ready(NextVersion),
    /// Refused (the editor's or the engine's reason); the show goes on unchanged.
    Refused(Posted, String),
}

/// The master output thread's end of the edit thread: it never blocks on it.
pub(crate) struct EditLink {
    tx: SyncSender<ToEditor>,
    rx: Receiver<FromEditor>,
    /// A message waits in `rx` (the output thread looks only when set).
    ready: Arc<AtomicBool>,
    /// An edit is being built or waits for its switch: the next is refused until it is
    /// answered (one edit at a time keeps every version built against the running one).
    busy: bool,
}

impl EditLink {
    /// Whether the edit thread's message is waiting (no lock, no syscall).
    pub(crate) fn has_message(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Whether an edit is being built or waits for its switch (the next one is refused).
    pub(crate) fn is_busy(&self) -> bool {
        self.busy
    }

    /// Sends edit `p` to be built; the link is busy until it is answered. A full or closed
    /// channel hands the message back.
    #[allow(
        clippy::result_large_err,
        reason = "the message comes back by value so that the edit can be refused; boxing it would allocate on the output thread"
    )]
    pub(crate) fn build(
        &mut self,
        p: framepipe_control::Posted,
    ) -> Result<(), std::sync::mpsc::TrySendError<ToEditor>> {
        self.tx.try_send(ToEditor::Build(p))?;
        self.busy = true;
        Ok(())
    }

    /// The edit in progress was refused (answered): the next may come.
    pub(crate) fn refused(&mut self) {
        self.busy = false;
    }

    /// The edit in progress switched in at `frame`: the next may come; the edit thread is told
    /// (a full channel cannot be: see its size; the message is then dropped here).
    pub(crate) fn switched(
        &mut self,
        frame: u64,
        graph_view: Option<crate::stats::GraphView>,
        dropped: Vec<Arc<str>>,
    ) {
        self.busy = false;
        let _ = self.tx.try_send(ToEditor::Switched {
            frame,
            graph_view,
            dropped,
        });
    }

    /// Hands a replaced version to the edit thread, to drop off the frame path.
    pub(crate) fn bury(&self, replaced: crate::sched::Replaced) {
        let _ = self.tx.try_send(ToEditor::Bury(replaced));
    }

    /// Ends the link at the run's end: the edit thread is let go (this sender dropped, so it
    /// ends once it is done); when an edit is still on it and `wait` is set, its answer is
    /// waited for up to `grace` (off the frame path: the run is over), so that it too gets a
    /// reply.
    pub(crate) fn close(self, wait: bool, grace: std::time::Duration) -> Option<FromEditor> {
        let EditLink { tx, rx, busy, .. } = self;
        drop(tx);
        if busy && wait {
            rx.recv_timeout(grace).ok()
        } else {
            None
        }
    }

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
    // At most: an answered switch, the next edit, the replaced version of the first.
    let (tx, from_output) = sync_channel::<ToEditor>(4);
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
            let mut fading = Fading::No;
            // An edit that would fit once a version an earlier edit replaced is freed: built
            // again then (see `try_edit`).
            let mut parked: Option<Parked> = None;
            loop {
                let poll = match (&fading, graveyard.is_empty()) {
                    _ if parked.is_some() => Some(BURY_POLL),
                    (
                        Fading::Running {
                            end, next: Some(_), ..
                        },
                        empty,
                    ) => {
                        let wait = fade_poll(&shared, options, *end);
                        Some(if empty {
                            wait
                        } else {
                            wait.min(bury_poll(&graveyard))
                        })
                    }
                    (Fading::Waiting { .. }, _) => Some(BURY_POLL),
                    (_, false) => Some(bury_poll(&graveyard)),
                    // GPU instances on their way to release come back to be dropped.
                    (_, true) => shared.gpu_release.busy().then_some(BURY_POLL),
                };
                let msg = if let Some(poll) = poll {
                    match from_output.recv_timeout(poll) {
                        Ok(m) => Some(m),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                } else {
                    match from_output.recv() {
                        Ok(m) => Some(m),
                        Err(_) => break,
                    }
                };
                graveyard.retain_mut(|b| !b.released());
                shared.gpu_release.drop_released();
                // A parked edit is built again once something was freed (or refused once it
                // waited long enough).
                if let Some(p) = &parked {
                    if shared.counters.memory.held() < p.held || p.since.elapsed() > BURY_MAX {
                        let p = parked.take().expect("checked");
                        try_edit(
                            &mut *editor,
                            &shared,
                            options,
                            p.posted,
                            p.since,
                            &mut fading,
                            &mut parked,
                            &send,
                        );
                    }
                }
                // The version after a crossfade, waiting for the version the crossfade
                // replaced to be dropped: built once it fits (or once that had time enough;
                // then its own check says why it does not).
                if let Fading::Waiting { need, since, .. } = &fading {
                    if shared.counters.memory.fits(*need) || since.elapsed() > BURY_MAX {
                        if let Fading::Waiting { fade, end, .. } =
                            std::mem::replace(&mut fading, Fading::No)
                        {
                            fading = build_after_fade(&mut *editor, &shared, options, fade, end);
                        }
                    }
                }
                // Every frame of a crossfade has begun: the version after it (the new project
                // alone) may take over. It is armed at the next frame boundary, so no frame of
                // the fade begins in it; frames after the fade's end show the new project
                // alone in either version.
                if let Fading::Running { end, next, .. } = &mut fading {
                    if next.is_some() && shared.live.lock().next_frame() >= *end {
                        let p = next.take().expect("checked");
                        send(FromEditor::Ready(p));
                        fading = fading.ending();
                    }
                }
                let Some(msg) = msg else { continue };
                match msg {
                    ToEditor::Build(posted) => {
                        if let Some(reason) = fading.refusal() {
                            send(FromEditor::Refused(posted, reason));
                            continue;
                        }
                        try_edit(
                            &mut *editor,
                            &shared,
                            options,
                            posted,
                            Instant::now(),
                            &mut fading,
                            &mut parked,
                            &send,
                        );
                    }
                    ToEditor::Bury(mut p) => {
                        // What the switch replaced is dropped here: instances of removed
                        // nodes, the old pools and slots, once nothing else holds them. GPU
                        // instances go to the GPU thread first, to release their GL objects.
                        if shared.gpu_release.hand_over(p.take_instances()) {
                            shared.gpu_signal.raise();
                        }
                        graveyard.push(Buried::new(p));
                    }
                    ToEditor::Switched {
                        frame,
                        graph_view,
                        dropped,
                    } => {
                        drop(dropped);
                        if let Some(g) = graph_view {
                            let live = shared.live.lock();
                            shared.view.set_graph(g, &live);
                        }
                        editor.settled(true);
                        fading = match std::mem::replace(&mut fading, Fading::No) {
                            // The crossfade runs from `frame`: the version after it is built
                            // against it, and waits for the fade's last frame to begin. Built
                            // now if it fits beside what is held; else once the version the
                            // crossfade replaced is dropped (three versions are never held
                            // at once for a fade).
                            Fading::Starting { fade, after } => {
                                let end = frame.saturating_add(fade.frames(shared.rate));
                                if shared.counters.memory.fits(after) {
                                    build_after_fade(&mut *editor, &shared, options, fade, end)
                                } else {
                                    Fading::Waiting {
                                        fade,
                                        end,
                                        need: after,
                                        since: Instant::now(),
                                    }
                                }
                            }
                            Fading::Ending { to, end } => {
                                shared.emit(Event::FadeDone { to, frame: end });
                                Fading::No
                            }
                            other => other,
                        };
                    }
                }
            }
            // The run ended (the output thread waits for this edit's answer).
            if let Some(p) = parked.take() {
                let _ = catch_panic(|| editor.settled(false));
                shared.counters.memory.count_refusal();
                send(FromEditor::Refused(p.posted, p.reason));
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

/// An edit refused for memory only because a version an earlier edit replaced is not freed
/// yet (beside the running version alone it would fit): built again once something is freed,
/// refused after [`BURY_MAX`] (a paused show keeps the replaced version's last frames).
struct Parked {
    posted: Posted,
    /// When it first came to the edit thread.
    since: Instant,
    /// What the show held when it was refused.
    held: u64,
    /// The refusal, for when it has waited long enough.
    reason: String,
}

/// Builds the edit `posted` (which came at `since`) and sends it to the output thread built
/// (a crossfade's start moves `fading` on) or refused; or parks it (see [`Parked`]).
#[allow(clippy::too_many_arguments)] // the edit thread's state, passed apart to borrow apart
fn try_edit(
    editor: &mut dyn Editor,
    shared: &Arc<Shared>,
    options: Options,
    posted: Posted,
    since: Instant,
    fading: &mut Fading,
    parked: &mut Option<Parked>,
    send: &dyn Fn(FromEditor),
) {
    let Command::Edit(edit) = &posted.command else {
        send(FromEditor::Refused(posted, "not an edit".into()));
        return;
    };
    // The editor and the plugins' constructors are user code: a panic there refuses this
    // edit; the thread goes on taking edits.
    let built = guarded(|| {
        let g = editor.build(edit)?;
        let fade = editor.fade();
        let admit = match fade {
            Some(_) => Admit::FadeStart,
            None => Admit::Edit,
        };
        let mut p = prepare_edit(g, shared, options, admit).map_err(one_line)?;
        let mut after = 0;
        if let Some(fade) = &fade {
            start_fade(&mut p, fade, fade.frames(shared.rate))?;
            after = after_fade_fits(&*editor, &p, shared, options)?;
        }
        fill_edit_pools(&mut p, shared, options);
        Ok((p, fade, after))
    });
    let memory = &shared.counters.memory;
    match built {
        Ok((mut p, fade, after)) => {
            if let Some(fade) = fade {
                *fading = Fading::Starting { fade, after };
            }
            p.set_posted(posted);
            send(FromEditor::Ready(p));
        }
        Err(reason) => {
            let _ = catch_panic(|| editor.settled(false));
            if memory.take_later() {
                if since.elapsed() <= BURY_MAX {
                    *parked = Some(Parked {
                        posted,
                        since,
                        held: memory.held(),
                        reason,
                    });
                    return;
                }
                memory.count_refusal();
            }
            send(FromEditor::Refused(posted, reason));
        }
    }
}

/// Runs `f` (the editor's and the elements' code), a panic refusing what it was building.
fn guarded<T>(
    f: impl FnOnce() -> std::result::Result<T, String>,
) -> std::result::Result<T, String> {
    catch_panic(f).unwrap_or_else(|p| {
        Err(format!(
            "building the edit panicked: {}",
            crate::exec::panic_message(&*p)
        ))
    })
}

/// Checks, before a crossfade begins (`p`: its version, built, its pools not filled yet), that
/// the version after it will fit beside it: both are held at the fade's end (the version after
/// it is built during the fade). Returns what that version will add (0 when the editor cannot
/// say).
fn after_fade_fits(
    editor: &dyn Editor,
    p: &NextVersion,
    shared: &Shared,
    options: Options,
) -> std::result::Result<u64, String> {
    let Some(graph) = editor.peek_after_fade() else {
        return Ok(0);
    };
    let need = need_after(graph?, p, shared, options).map_err(one_line)?;
    let fade = p.version().pools.bytes() + p.version().instance_bytes;
    shared
        .counters
        .memory
        .refuse_over(
            [
                ("the crossfade's graph of both projects", fade),
                ("the new project's", need.added()),
            ],
            "at the fade's end",
            ", or load without fade= (a cut holds the running graph and the new one only)",
        )
        .map_err(one_line)?;
    Ok(need.added())
}

/// Builds the version after a crossfade (the new project alone, against the crossfade's
/// version, which runs from its frame `end - LEN`): it then waits for frame `end - 1` to
/// begin. A refusal leaves the show in the crossfade's graph (its amounts stay at 1: the
/// output is the new project) and is reported.
fn build_after_fade(
    editor: &mut dyn Editor,
    shared: &Arc<Shared>,
    options: Options,
    fade: Fade,
    end: u64,
) -> Fading {
    let next = guarded(|| {
        let g = editor.after_fade()?;
        let mut p = prepare_edit(g, shared, options, Admit::FadeEnd).map_err(one_line)?;
        fill_edit_pools(&mut p, shared, options);
        Ok(p)
    });
    match next {
        Ok(next) => Fading::Running {
            to: fade.to,
            end,
            next: Some(next),
        },
        Err(reason) => {
            let _ = catch_panic(|| editor.settled(false));
            if shared.counters.memory.take_later() {
                shared.counters.memory.count_refusal();
            }
            shared.emit(Event::FadeStuck {
                to: fade.to,
                reason,
            });
            Fading::No
        }
    }
}

/// Where a crossfade is, on the edit thread.
#[allow(clippy::large_enum_variant)] // as `FromEditor`: the version it holds is sent by value
enum Fading {
    /// None under way.
    No,
    /// The crossfading version was sent to the output thread; its switch is awaited. `after`:
    /// what the version after it will add to what is held (see `after_fade_fits`).
    Starting { fade: Fade, after: u64 },
    /// The crossfading version runs; the version after it waits to be built until it fits
    /// beside what is held (`need`), which it does once the version the crossfade replaced is
    /// dropped.
    Waiting {
        fade: Fade,
        end: u64,
        need: u64,
        since: Instant,
    },
    /// The crossfading version runs; the version after it (`next`, until it is sent) waits
    /// for frame `end - 1`, the fade's last, to have begun.
    Running {
        to: String,
        end: u64,
        next: Option<NextVersion>,
    },
    /// The version after the fade was sent; its switch is awaited.
    Ending { to: String, end: u64 },
}

impl Fading {
    /// `Running` → `Ending`, once its next version was sent.
    fn ending(&mut self) -> Fading {
        match std::mem::replace(self, Fading::No) {
            Fading::Running { to, end, .. } => Fading::Ending { to, end },
            other => other,
        }
    }

    /// Why an edit is refused now: one crossfade at a time, and no other edit during one
    /// (its two versions are built from the graphs before and after it).
    fn refusal(&self) -> Option<String> {
        let (to, end) = match self {
            Fading::No => return None,
            Fading::Starting { fade, .. } => (&fade.to, None),
            Fading::Waiting { fade, end, .. } => (&fade.to, Some(*end)),
            Fading::Running { to, end, .. } | Fading::Ending { to, end } => (to, Some(*end)),
        };
        Some(format!(
            "a crossfade to {to} is under way{}; send this edit once it is done",
            end.map_or(String::new(), |e| format!(" (until frame {e})"))
        ))
    }
}

/// How long the edit thread may wait before looking again whether frame `end - 1` has begun:
/// [`BURY_POLL`] when it is near (or the run is unpaced), else the time of all but the last
/// two frames before it at the pace, at most [`FADE_POLL_MAX`].
fn fade_poll(shared: &Shared, options: Options, end: u64) -> Duration {
    let now = shared.live.lock().next_frame();
    let left = end.saturating_sub(now);
    match options.pace {
        Some(rate) if left > 2 => Duration::from_nanos(rate.period_ns().saturating_mul(left - 2))
            .clamp(BURY_POLL, FADE_POLL_MAX),
        _ => BURY_POLL,
    }
}

/// The longest the edit thread sleeps while a crossfade runs (a paused run, a long fade).
const FADE_POLL_MAX: Duration = Duration::from_millis(50);

/// Makes `p`, a crossfade's version, ramp its mixers' amounts over `frames` frames from its
/// first frame. Refused when a mixer's new input needed an automatic scaler: the new project
/// alone could not feed that running sink after the fade (a running sink keeps its size).
fn start_fade(p: &mut NextVersion, fade: &Fade, frames: u64) -> std::result::Result<(), String> {
    let ver = p.version();
    for (node, _) in &fade.ramps {
        let Some(j) = ver.names.iter().position(|n| &**n == node) else {
            return Err(format!("the crossfade has no node {node}"));
        };
        let ins = &ver.topo.nodes[j].inputs;
        let scaler = crate::model::auto_scaler_name(node, 1);
        if let (Some(&old), Some(&new)) = (ins.first(), ins.get(1)) {
            if *ver.names[new] == *scaler {
                let from = ver.topo.nodes[new].inputs[0];
                let (a, b) = (ver.infos[old], ver.infos[from]);
                let sink = ver.topo.nodes[j]
                    .consumers
                    .first()
                    .map_or(node.as_str(), |&c| &ver.names[c]);
                return Err(format!(
                    "cannot crossfade to {}: its frames for {sink} are {}x{}, the running ones \
                     {}x{}; a running sink keeps its size (scale to it in the project)",
                    fade.to, b.width, b.height, a.width, a.height
                ));
            }
        }
    }
    for (node, prop) in &fade.ramps {
        let stage = p
            .live_stages_mut()
            .iter_mut()
            .find(|s| s.label() == node)
            .ok_or_else(|| format!("the crossfade has no node {node}"))?;
        stage.ramp(prop, frames)?;
    }
    Ok(())
}

/// How often the edit thread looks whether a replaced version can be dropped, in its first
/// [`BURY_MAX`].
const BURY_POLL: Duration = Duration::from_millis(2);

/// How often it looks after that (a frame of the version kept for long: a held source's last
/// frame, a paused show): it keeps the version until it can be dropped, cheaply.
const BURY_POLL_SLOW: Duration = Duration::from_millis(50);

/// How long the edit thread waits for what a parked edit or a crossfade's end wait for (a
/// version an earlier edit replaced to be freed) before it refuses, or builds and lets the
/// check say why not; and how long a buried version is looked at every [`BURY_POLL`].
const BURY_MAX: Duration = Duration::from_secs(2);

/// How long the edit thread may wait before it looks at its buried versions again.
fn bury_poll(graveyard: &[Buried]) -> Duration {
    if graveyard.iter().any(|b| b.since.elapsed() <= BURY_MAX) {
        BURY_POLL
    } else {
        BURY_POLL_SLOW
    }
}

/// A version a switch replaced. Threads may still hold it for a moment (a worker's or an output
/// thread's reference, taken before the switch and let go at its next job or frame; a paused
/// show's output thread until it runs again), and frames of its pools may live on in the new
/// version (the master's last frame under the `live` policy, a feedback ring, a held source's
/// last frame): whoever let go of the last of them would free the version, or a pool's
/// buffers, on the frame path, and in a host give the version's quota on the shared pools back
/// while its frame is out. So it is kept here, however long that takes, and dropped on this
/// thread only once it holds the only reference and every frame of its pools is back (its
/// quota handles hold nothing). The edit thread looks every [`BURY_POLL`], then every
/// [`BURY_POLL_SLOW`]; it never waits for it at the show's end: a version still buried then is
/// dropped as the edit thread ends (its frames are the ending show's; in a host its lease keeps
/// the quota counted until they are back, `memory/`).
struct Buried {
    p: Replaced,
    since: Instant,
}

impl Buried {
    fn new(mut p: Replaced) -> Self {
        // Frames the replaced state still holds go back to their pools now (no free: the
        // version holds the pools).
        p.release_frames();
        Buried {
            p,
            since: Instant::now(),
        }
    }

    /// Whether it may be dropped now (then it is dropped by the caller, on this thread).
    fn released(&mut self) -> bool {
        let Some(ver) = self.p.version_mut() else {
            return false;
        };
        ver.pools.release()
    }
}

fn one_line(e: framepipe_core::Error) -> String {
    e.to_string()
}
