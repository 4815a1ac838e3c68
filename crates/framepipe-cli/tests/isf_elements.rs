//! The ISF and gl-transitions elements as the CLI sees them: `plugins` lists the shaders of
//! the ISF folders and the transitions, `inspect FILE.fs` describes a shader by its inputs,
//! and `isf location=FILE` takes the file's inputs as properties.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{tmpdir, FP};

const LIMIT: Duration = Duration::from_secs(60);

fn shaders() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../framepipe-gpu/tests/isf")
}

/// `framepipe ARGS` with `FRAMEPIPE_ISF_PATH=isf_path` and a `HOME` of its own: (success,
/// stdout, stderr).
fn framepipe(args: &[&str], isf_path: &Path, home: &Path) -> (bool, String, String) {
    let out = common::run(
        Command::new(FP)
            .args(args)
            .env("FRAMEPIPE_ISF_PATH", isf_path)
            .env("HOME", home),
        LIMIT,
    );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn plugins_lists_the_isf_folders_shaders_and_the_gl_transitions() {
    let dir = tmpdir("isf-plugins");
    let folder = dir.join("isf");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(shaders().join("inputs.fs"), folder.join("Every Input.fs")).unwrap();
    std::fs::write(
        folder.join("broken.fs"),
        "/*{ \"INPUTS\": [ }*/\nvoid main() {}\n",
    )
    .unwrap();
    let (ok, out, err) = framepipe(&["plugins"], &folder, dir.path());
    assert!(ok, "{err}");
    let line = |name: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
            .to_string()
    };
    let l = line("isf-every-input");
    assert!(
        l.contains("effect")
            && l.contains("Test: one input of every ISF type")
            && l.contains("tint"),
        "{l}"
    );
    assert!(line("isf-broken").contains("cannot be used"), "{out}");
    assert!(line("isf").contains("location"), "{out}");
    let t = line("transition-crosswarp");
    assert!(t.contains("mixer") && t.contains("progress"), "{t}");
}

#[test]
fn inspect_describes_an_isf_file_and_a_pipeline_takes_its_inputs_as_properties() {
    let dir = tmpdir("isf-inspect");
    let fs = shaders().join("inputs.fs");
    let fs_text = fs.display().to_string();
    let (ok, out, err) = framepipe(&["inspect", &fs_text], dir.path(), dir.path());
    assert!(ok, "{err}");
    for want in [
        "isf  (effect)",
        "Test: one input of every ISF type",
        "mode (one of: 0 = Off, 1 = Soft, 4 = Hard)",
        "input-width",
        "wave (audio), spectrum (audioFFT): fed per frame from the show's --audio",
    ] {
        assert!(out.contains(want), "no {want:?} in:\n{out}");
    }
    // An input the file does not have is refused, naming the file's.
    let p = format!("testsrc frames=1 ! isf location={fs_text} blurr=1 ! nullsink");
    let (ok, _, err) = framepipe(
        &["run", "-q", "--control", "none", &p],
        dir.path(),
        dir.path(),
    );
    assert!(!ok);
    assert!(
        err.contains("unknown property 'blurr' on isf") && err.contains("amount, center, tint"),
        "{err}"
    );
    // A long outside its VALUES is refused with them.
    let p = format!("testsrc frames=1 ! isf location={fs_text} mode=3 ! nullsink");
    let (ok, _, err) = framepipe(
        &["run", "-q", "--control", "none", &p],
        dir.path(),
        dir.path(),
    );
    assert!(!ok);
    assert!(err.contains("expected one of: 0, 1, 4"), "{err}");
}
