//! Project files on disk: checked before they are read, read with a bounded read, and the
//! relative paths they name resolved against their folder.
//!
//! A project file is a regular file of at most [`MAX_PROJECT_BYTES`]. Anything else (a
//! directory, a FIFO, a device such as `/dev/zero`, a socket, a 2 GB file) is refused at once
//! with the path and the reason, before a byte is read: [`std::fs::metadata`] says what the
//! path is, the file is opened with `O_NONBLOCK` (a FIFO put in its place meanwhile cannot block
//! the open) and checked again on the open descriptor, and the read stops after
//! `MAX_PROJECT_BYTES + 1` bytes whatever the file does.

use std::fs::{File, FileType, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::desc::{shown_path, GraphDesc, NodeDescr};
use crate::{parse_project, Error, Result};

/// The largest project file read, in bytes (1 MiB: a show of a thousand nodes takes well under
/// 100 KiB).
pub const MAX_PROJECT_BYTES: u64 = 1 << 20;

/// What a path is, in words, when it is not a regular file.
fn not_regular(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Why a file of this type and size is not read as a project file, if it is not.
fn refusal(t: FileType, len: u64) -> Option<String> {
    if !t.is_file() {
        return Some(format!(
            "it is {}; a project file must be a regular file",
            not_regular(t)
        ));
    }
    (len > MAX_PROJECT_BYTES).then(|| {
        format!(
            "it is {len} bytes, over the limit of {MAX_PROJECT_BYTES} bytes (1 MiB) for a \
             project file"
        )
    })
}

/// The text of the project file at `path`, checked and read as the module says.
pub fn read_project_text(path: &str) -> Result<String> {
    let fail = |reason: String| Error::ReadProject {
        path: shown_path(path),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
    if let Some(why) = refusal(meta.file_type(), meta.len()) {
        return Err(fail(why));
    }
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| fail(e.to_string()))?;
    // The path may name something else since it was looked at: the open file decides.
    let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
    if let Some(why) = refusal(meta.file_type(), meta.len()) {
        return Err(fail(why));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_PROJECT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 > MAX_PROJECT_BYTES {
        return Err(fail(format!(
            "it grew over the limit of {MAX_PROJECT_BYTES} bytes (1 MiB) for a project file \
             while being read"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        fail(format!(
            "it is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// The project file at `path`, read ([`read_project_text`]) and parsed, its `stats` path
/// resolved against the file's folder. The nodes' paths are resolved by the caller, who knows
/// which properties are paths ([`GraphDesc::resolve_paths`] with [`project_folder`]).
pub fn read_project(path: &str) -> Result<GraphDesc> {
    let text = read_project_text(path)?;
    let mut desc = parse_project(&text).map_err(|e| Error::InProject {
        path: shown_path(path),
        error: Box::new(e),
    })?;
    let folder = project_folder(path);
    if let Some(stats) = &mut desc.settings.stats {
        *stats = resolved(folder, stats);
    }
    if let Some(audio) = &mut desc.settings.audio {
        if !is_live_audio_or_url(audio) {
            *audio = resolved(folder, audio);
        }
    }
    Ok(desc)
}

/// Whether a project's `audio` names a live input (`default`, `jack`, `alsa`, `alsa:NAME`)
/// or a stream (`scheme://...`) rather than a file relative to the project.
fn is_live_audio_or_url(audio: &str) -> bool {
    matches!(audio, "default" | "jack" | "alsa")
        || audio.starts_with("alsa:")
        || audio.contains("://")
}

/// The folder a project file's relative paths are relative to: the file's own (empty for a
/// file named without a folder: the working folder).
pub fn project_folder(path: &str) -> &Path {
    Path::new(path).parent().unwrap_or(Path::new(""))
}

/// `value` resolved against `folder`: unchanged when absolute, `-`, empty, or when `folder` is
/// empty (the working folder).
fn resolved(folder: &Path, value: &str) -> String {
    if folder.as_os_str().is_empty() || value.is_empty() || value == "-" || value.starts_with('/') {
        return value.to_string();
    }
    folder.join(value).to_string_lossy().into_owned()
}

impl GraphDesc {
    /// Resolves, in place, every property value that `is_path(node, property, value)` says is a
    /// relative path, against `folder` (see [`project_folder`]): `location = "clip.mp4"` in
    /// `/shows/a/show.toml` becomes `/shows/a/clip.mp4`. Absolute paths and `-` are kept.
    pub fn resolve_paths(
        &mut self,
        folder: &Path,
        is_path: impl Fn(&NodeDescr, &str, &str) -> bool,
    ) {
        for i in 0..self.nodes.len() {
            for k in 0..self.nodes[i].props.len() {
                let (key, value) = &self.nodes[i].props[k];
                if is_path(&self.nodes[i], key, value) {
                    let new = resolved(folder, value);
                    self.nodes[i].props[k].1 = new;
                }
            }
        }
    }
}

impl GraphDesc {
    /// Resolves, in place, every property value that `is_list(node, property)` says is a list
    /// of files separated by commas (`locations = "a.mp4,b.mov"`), item by item, as
    /// [`GraphDesc::resolve_paths`] resolves one.
    pub fn resolve_path_lists(
        &mut self,
        folder: &Path,
        is_list: impl Fn(&NodeDescr, &str) -> bool,
    ) {
        for i in 0..self.nodes.len() {
            for k in 0..self.nodes[i].props.len() {
                let (key, value) = &self.nodes[i].props[k];
                if is_list(&self.nodes[i], key) {
                    let new: Vec<String> = value
                        .split(',')
                        .map(|v| resolved(folder, v.trim()))
                        .collect();
                    self.nodes[i].props[k].1 = new.join(",");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_are_refused_before_they_are_read() {
        let dir = framepipe_testkit::tmpdir("fp-project-file");
        let refused = |path: &str| read_project_text(path).unwrap_err().to_string();
        let e = refused("/dev/zero");
        assert!(
            e.contains("'/dev/zero'") && e.contains("a character device"),
            "{e}"
        );
        let d = dir.path().display().to_string();
        let e = refused(&d);
        assert!(e.contains(&d) && e.contains("a directory"), "{e}");
        let big = dir.path().join("big.toml");
        File::create(&big)
            .unwrap()
            .set_len(MAX_PROJECT_BYTES + 1)
            .unwrap();
        let e = refused(&big.display().to_string());
        assert!(e.contains("over the limit of 1048576 bytes"), "{e}");
        let ok = dir.path().join("ok.toml");
        std::fs::write(&ok, "pipeline = \"testsrc ! nullsink\"\n").unwrap();
        assert!(read_project_text(&ok.display().to_string()).is_ok());
    }

    #[test]
    fn a_refused_project_file_is_named_by_its_whole_path_however_long() {
        let dir = framepipe_testkit::tmpdir("fp-project-file-long");
        let deep = dir
            .path()
            .join("a-folder-whose-name-alone-is-longer-than-sixty-characters-x");
        std::fs::create_dir(&deep).unwrap();
        let d = deep.display().to_string();
        let e = read_project_text(&d).unwrap_err().to_string();
        assert!(e.contains(&format!("'{d}'")), "{e}");
    }

    #[test]
    fn relative_paths_resolve_against_the_folder_and_others_are_kept() {
        let folder = Path::new("/shows/a");
        assert_eq!(resolved(folder, "clip.mp4"), "/shows/a/clip.mp4");
        assert_eq!(resolved(folder, "../b/clip.mp4"), "/shows/a/../b/clip.mp4");
        assert_eq!(resolved(folder, "/abs/clip.mp4"), "/abs/clip.mp4");
        assert_eq!(resolved(folder, "-"), "-");
        assert_eq!(resolved(Path::new(""), "clip.mp4"), "clip.mp4");
        let mut d =
            crate::parse_pipeline("y4msrc location=in.y4m ! y4msink location=/tmp/x.y4m").unwrap();
        d.resolve_paths(folder, |_, k, _| k == "location");
        assert_eq!(d.nodes[0].props[0].1, "/shows/a/in.y4m");
        assert_eq!(d.nodes[1].props[0].1, "/tmp/x.y4m");
        let mut d =
            crate::parse_pipeline("clips locations=a.mp4,/abs/b.mp4,c/d.mov ! nullsink").unwrap();
        d.resolve_path_lists(folder, |_, k| k == "locations");
        assert_eq!(
            d.nodes[0].props[0].1,
            "/shows/a/a.mp4,/abs/b.mp4,/shows/a/c/d.mov"
        );
    }

    /// Issue #25: `audio` and `audio-bands` are run settings; a file's path resolves against
    /// the project's folder, a live input or a stream is kept; both are written back.
    #[test]
    fn a_projects_audio_is_read_resolved_and_written_back() {
        let dir = framepipe_testkit::tmpdir("fp-project-audio");
        let project = dir.path().join("show.toml");
        let write = |audio: &str| {
            std::fs::write(
                &project,
                format!(
                    "audio = \"{audio}\"\naudio-bands = \"20,200,4000\"\n\
                     pipeline = \"testsrc ! nullsink\"\n"
                ),
            )
            .unwrap();
            read_project(&project.display().to_string()).unwrap()
        };
        let d = write("track.wav");
        let want = dir.path().join("track.wav").display().to_string();
        assert_eq!(d.settings.audio.as_deref(), Some(want.as_str()));
        assert_eq!(d.settings.audio_bands.as_deref(), Some("20,200,4000"));
        for live in ["default", "jack", "alsa:hw:1", "http://radio/x.mp3"] {
            assert_eq!(write(live).settings.audio.as_deref(), Some(live));
        }
        let text = crate::project_text(&d);
        let back = crate::parse_project(&text).unwrap();
        assert_eq!(back.settings, d.settings);
        let e = crate::parse_project("audio = 3\npipeline = \"testsrc ! nullsink\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("audio"), "{e}");
    }
}
