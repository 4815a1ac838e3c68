//! Reloading a running `isf location=FILE` node when its file changes on disk.
//!
//! A watcher thread per node (started with the node, ended when the node drops) looks at the
//! `.fs` and `.vs` files' modification times four times a second. When one changed and then
//! stayed the same for one more look (an editor's write is finished), it reads and parses the
//! file, decodes its images and compiles the program once in a GL context of its own
//! ([`check`](super::check)), all off the GPU thread. A shader that loads and compiles is
//! handed to the node, which takes it between two frames ([`Watcher::poll`]: a `try_recv`,
//! nothing else on the frame path), compiles it on the engine's context and keeps the values
//! the show set (by input name). One that does not is reported, on standard error (by this
//! thread) and as the node's message to the operator
//! ([`GpuNode::take_message`](framepipe_core::GpuNode::take_message)), and the previous shader
//! goes on; so is one whose role changed (an effect that became a source cannot take its
//! links: replace the node).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::loaded::Loaded;

/// How often the watcher looks at the files.
pub const POLL: Duration = Duration::from_millis(250);

/// What a watcher hands its node.
#[derive(Debug)]
pub enum Reload {
    /// The changed file, loaded and compiled once.
    Loaded(Arc<Loaded>),
    /// Why the changed file was refused (the previous shader goes on).
    Failed(String),
}

/// The node's end of a watcher thread: dropping it ends the thread (within [`POLL`]).
#[derive(Debug)]
pub struct Watcher {
    rx: Receiver<Reload>,
    _stop: Sender<()>,
}

impl Watcher {
    /// A reloaded shader or a refusal, if the file changed since the last call. Never waits.
    pub fn poll(&self) -> Option<Reload> {
        self.rx.try_recv().ok()
    }

    /// Starts watching `current`'s file for `element`.
    pub fn start(element: &str, current: &Loaded) -> Watcher {
        let (tx, rx) = mpsc::channel();
        let (stop, stop_rx) = mpsc::channel::<()>();
        let name = element.to_string();
        let path = current.path.clone();
        let role = current.role();
        let frames = current.frame_inputs();
        let spawned = std::thread::Builder::new()
            .name(format!("isf-reload {}", short(&path)))
            .spawn(move || watch(&name, &path, role, frames, &tx, &stop_rx));
        if let Err(e) = spawned {
            eprintln!("framepipe: {element}: cannot watch its file for changes: {e}");
        }
        Watcher { rx, _stop: stop }
    }
}

fn short(p: &Path) -> String {
    p.file_name()
        .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into())
}

/// The modification times and sizes of the files a shader is read from (a missing one: `None`).
type Stamp = [Option<(SystemTime, u64)>; 3];

/// The files a shader is read from: the `.fs`, and a `.vs` or `.vert` beside it.
fn files(fs: &Path) -> [PathBuf; 3] {
    [
        fs.to_path_buf(),
        fs.with_extension("vs"),
        fs.with_extension("vert"),
    ]
}

/// Their stamps now. Allocates nothing (a path short enough for the standard library's stack
/// buffer), so the watcher's looks cost the process no allocation in a steady show.
fn stamp(files: &[PathBuf; 3]) -> Stamp {
    files.each_ref().map(|p| {
        std::fs::metadata(p)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())))
    })
}

fn watch(
    element: &str,
    path: &Path,
    role: framepipe_isf::Role,
    frames: usize,
    tx: &Sender<Reload>,
    stop: &Receiver<()>,
) {
    let files = files(path);
    let mut seen = stamp(&files);
    let mut changed: Option<Stamp> = None;
    loop {
        match stop.recv_timeout(POLL) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = stamp(&files);
        if now == seen {
            changed = None;
            continue;
        }
        // Changed: wait until it stays the same for one more look.
        if changed.as_ref() != Some(&now) {
            changed = Some(now);
            continue;
        }
        seen = now;
        changed = None;
        let result = Loaded::read(path).and_then(|next| {
            if next.role() != role || next.frame_inputs() != frames {
                return Err(format!(
                    "{}: it is now a {:?} with {} image inputs, not a {role:?} with {frames}; \
                     replace the node to change what it is",
                    path.display(),
                    next.role(),
                    next.frame_inputs()
                ));
            }
            super::check::compiles(&next.source)?;
            Ok(next)
        });
        let msg = match result {
            Ok(next) => Reload::Loaded(Arc::new(next)),
            Err(why) => {
                eprintln!(
                    "framepipe: {element}: {} changed but is refused; the previous shader goes on: {why}",
                    path.display()
                );
                Reload::Failed(why)
            }
        };
        if tx.send(msg).is_err() {
            return;
        }
    }
}
