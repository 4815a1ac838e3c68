//! Temporary directories for tests that go away with the test: [`tmpdir`] makes
//! `$TMPDIR/PREFIX-XXXXXX` (a fresh random suffix, so tests running at once never share one) and
//! the returned [`TestDir`] removes it, with everything in it, when it drops. Drop also runs
//! while a failing test's panic unwinds, so a failed test cleans up too.
//!
//! `FP_KEEP_TMP=1` keeps every directory for a post-mortem: the guard prints
//! `FP_KEEP_TMP: kept PATH` on stderr instead of removing it (shown with the test's output when
//! it fails, or always with `-- --nocapture`).
//!
//! A test that starts a child process writing into the directory must wait for the child before
//! the guard drops (declare the guard before the child's own guard, or wait explicitly).

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// The environment variable that keeps test directories instead of removing them.
pub const KEEP_VAR: &str = "FP_KEEP_TMP";

/// A temporary directory removed (with its contents) on drop, unless [`KEEP_VAR`] is set.
/// Dereferences to its [`Path`], so `dir.join("out.rgba")` and `&dir` as a `&Path` work.
#[derive(Debug)]
pub struct TestDir {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

/// A fresh, empty directory `$TMPDIR/PREFIX-XXXXXX` for one test; panics (naming it) when it
/// cannot be made.
pub fn tmpdir(prefix: &str) -> TestDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}-"))
        .tempdir()
        .unwrap_or_else(|e| {
            panic!(
                "cannot make a temporary directory {prefix}-* in {}: {e}",
                std::env::temp_dir().display()
            )
        });
    let path = dir.path().to_path_buf();
    TestDir {
        dir: Some(dir),
        path,
    }
}

/// Whether [`KEEP_VAR`] asks to keep test directories (set, and neither empty nor `0`).
pub fn keep_requested() -> bool {
    std::env::var_os(KEEP_VAR).is_some_and(|v| !v.is_empty() && v != "0")
}

impl TestDir {
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `self/name` as text, for command lines and pipeline descriptions.
    pub fn file(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }
}

impl Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<OsStr> for TestDir {
    fn as_ref(&self) -> &OsStr {
        self.path.as_os_str()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        if keep_requested() {
            eprintln!("{KEEP_VAR}: kept {}", dir.keep().display());
        }
        // Otherwise `dir` drops here and removes the tree (errors ignored: nothing to do then).
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_and_its_files_go_when_the_guard_drops() {
        let d = tmpdir("fp-testkit-drop");
        let path = d.to_path_buf();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/f.bin"), [1u8; 64]).unwrap();
        assert!(path.is_dir());
        assert!(path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("fp-testkit-drop-"));
        assert_eq!(path.parent().unwrap(), std::env::temp_dir());
        if keep_requested() {
            return; // FP_KEEP_TMP set for the whole run: the guard keeps it, as asked.
        }
        drop(d);
        assert!(!path.exists(), "{} still there", path.display());
    }

    #[test]
    fn a_failing_test_removes_its_directory_too() {
        if keep_requested() {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let failed = std::thread::spawn(move || {
            let d = tmpdir("fp-testkit-panic");
            std::fs::write(d.join("out.rgba"), [0u8; 16]).unwrap();
            tx.send(d.to_path_buf()).unwrap();
            panic!("the test fails with its directory still in scope");
        })
        .join();
        assert!(failed.is_err());
        let path = rx.recv().unwrap();
        assert!(
            !path.exists(),
            "{} left by a panicking test",
            path.display()
        );
    }

    #[test]
    fn two_guards_with_one_prefix_get_two_directories() {
        let a = tmpdir("fp-testkit-same");
        let b = tmpdir("fp-testkit-same");
        assert_ne!(a.path(), b.path());
        assert_eq!(a.file("x"), a.join("x").display().to_string());
    }
}
