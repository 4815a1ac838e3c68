//! From a command-line argument to a graph description and the registry that builds it: a
//! project file or a pipeline string loaded ([`load_desc`]), its relative paths resolved, the
//! elements it names registered ([`registry_for`]), and the checks on files made before a run
//! (a stats path, a sink writing a closed standard output).

use std::path::Path;

use anyhow::{bail, Context, Result};
use framepipe_core::{ElementKind, PathUse, Registry};
use framepipe_project::{parse_pipeline, GraphDesc};
use framepipe_window::WindowLink;

use crate::build;

/// Every element framepipe knows, plus warnings about plugins that could not be loaded.
/// `window`: what a `windowsink` posts its keys to (none: one cannot be built).
pub(crate) fn registry(window: Option<&WindowLink>) -> (Registry, Vec<String>) {
    let mut r = native_registry(window);
    let warnings = framepipe_frei0r::register(&mut r);
    (r, warnings)
}

/// Every element that is not a frei0r plugin.
pub(crate) fn native_registry(window: Option<&WindowLink>) -> Registry {
    let mut r = Registry::new();
    framepipe_io::register(&mut r);
    framepipe_net::register(&mut r);
    framepipe_effects::register(&mut r);
    framepipe_window::register(&mut r, window.cloned());
    // isf, isf-NAME, transition-NAME (none when the gl-transitions collection cannot be
    // read: a show naming one is then told the element is unknown).
    let _ = framepipe_gpu::register(&mut r);
    framepipe_clip::register(&mut r);
    r
}

/// Whether the `run`/`graph` argument names a project file rather than a pipeline string.
pub(crate) fn looks_like_project(arg: &str) -> bool {
    arg.ends_with(".toml") && !arg.contains('!')
}

/// The description `arg` gives: a project file (checked and read with a bounded read, its
/// relative paths resolved against its folder) or a pipeline string.
pub(crate) fn load_desc(arg: &str) -> Result<GraphDesc> {
    if looks_like_project(arg) {
        let mut desc = framepipe_project::read_project(arg)?;
        resolve_paths(
            &mut desc,
            framepipe_project::project_folder(arg),
            &native_registry(None),
            &[],
        );
        Ok(desc)
    } else {
        Ok(parse_pipeline(arg)?)
    }
}

/// Tries the `--stats` (or project `stats`) path at start, so that one that cannot be written
/// is an error before the show rather than after it: opened for writing (created, then removed
/// again if it was not there; an existing file is not changed), without blocking on a FIFO.
pub(crate) fn try_stats_path(path: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let existed = std::fs::symlink_metadata(path).is_ok();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot write stats to '{path}'"))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Resolves the relative paths of `desc`'s nodes (the properties their elements declare as
/// paths, [`framepipe_core::PathUse`]) against `folder`, a project file's.
/// Nodes named in `keep` are left as they are (a live `load`'s running sinks).
pub(crate) fn resolve_paths(
    desc: &mut GraphDesc,
    folder: &Path,
    registry: &Registry,
    keep: &[String],
) {
    desc.resolve_paths(folder, |node, key, value| {
        !keep.contains(&node.name)
            && registry.find(&node.element).is_some_and(|e| {
                e.desc.props.iter().any(|spec| {
                    spec.name == key
                        && spec.path.is_some_and(|p| {
                            p != PathUse::Files && p.is_relative_file(value, &node.props)
                        })
                })
            })
    });
    desc.resolve_path_lists(folder, |node, key| {
        !keep.contains(&node.name)
            && registry.find(&node.element).is_some_and(|e| {
                e.desc
                    .props
                    .iter()
                    .any(|spec| spec.name == key && spec.path == Some(PathUse::Files))
            })
    });
}

/// The registry for running `desc`: every native element, and only the frei0r plugins the
/// pipeline names (loading all of them costs ~50 ms). When a name is not found that way, the
/// full registry, so that the error can suggest a close name.
pub(crate) fn registry_for(desc: &GraphDesc, window: Option<&WindowLink>) -> Registry {
    let stems: Vec<&str> = desc
        .nodes
        .iter()
        .filter_map(|n| n.element.strip_prefix("frei0r-"))
        .collect();
    let mut r = native_registry(window);
    framepipe_frei0r::register_named(&mut r, &stems);
    if desc
        .nodes
        .iter()
        .all(|n| build::is_structural(&n.element) || r.find(&n.element).is_some())
    {
        r
    } else {
        registry(window).0
    }
}

/// Whether a sink of the graph writes standard output.
pub(crate) fn writes_stdout(desc: &GraphDesc, registry: &Registry) -> bool {
    stdout_sink(desc, registry).is_some()
}

/// The first sink of the graph that writes standard output, by name.
fn stdout_sink<'d>(desc: &'d GraphDesc, registry: &Registry) -> Option<&'d str> {
    desc.nodes
        .iter()
        .find(|n| {
            registry
                .find(&n.element)
                .is_some_and(|e| e.desc.kind == ElementKind::Sink)
                && n.props.iter().any(|(k, v)| {
                    k == "location" && matches!(v.as_str(), "-" | "/dev/stdout" | "/dev/fd/1")
                })
        })
        .map(|n| n.name.as_str())
}

/// Refuses a graph with a sink writing standard output when it was closed at start (`>&-`):
/// every frame would be lost without an error.
pub(crate) fn check_stdout(desc: &GraphDesc, registry: &Registry) -> Result<()> {
    match stdout_sink(desc, registry) {
        Some(sink) if crate::stdio::stdout_was_closed() => bail!(
            "{sink}: its location writes standard output, which was closed when framepipe \
             started: every frame would be lost (no frame written)"
        ),
        _ => Ok(()),
    }
}

/// The screen output element (its runs get a window link).
pub(crate) const WINDOWSINK: &str = framepipe_window::sink::NAME;
