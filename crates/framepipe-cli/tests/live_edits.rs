//! Issue #9, live edits through the real binary: edit commands on stdin reach the running
//! graph; each is in the output from the frame its reply names; a refused edit changes nothing;
//! the running sink goes on writing the same file.

mod common;

use std::io::Write;
use std::process::Command;
use std::time::Duration;

use common::{run, spawn, tmpdir, wait, FP};

const W: usize = 64;
const H: usize = 48;
const FRAME: usize = W * H * 4;

/// The frame number in the reply line `ok 'LINE' from frame N`.
fn applied_at(stderr: &str, line: &str) -> usize {
    let prefix = format!("ok '{line}' from frame ");
    let at = stderr
        .find(&prefix)
        .unwrap_or_else(|| panic!("no reply applying '{line}': {stderr}"));
    let rest = &stderr[at + prefix.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// `frames` frames of `chain` (after the test source) as raw RGBA.
fn reference(dir: &std::path::Path, name: &str, chain: &str, frames: usize) -> Vec<u8> {
    let path = dir.join(name);
    let pipeline = format!(
        "testsrc width={W} height={H} frames={frames} {chain} ! rawsink location={}",
        path.display()
    );
    let out = run(
        Command::new(FP).args(["run", "-q", "--unpaced", &pipeline]),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(path).unwrap()
}

#[test]
fn issue_9_edits_on_stdin_show_from_the_frame_their_reply_names() {
    let dir = tmpdir("live-edits");
    let out_path = dir.join("out.rgba");
    let pipeline = format!(
        "testsrc width={W} height={H} frames=0 ! invert name=fx ! rawsink name=out location={}",
        out_path.display()
    );
    let mut child = spawn(&["run", &pipeline]);
    let mut stdin = child.stdin.take().unwrap();
    let add = "add invert name=back after fx";
    let bad = "add testsrc after fx";
    let remove = "remove back";
    for line in [add, bad, remove, "stop"] {
        std::thread::sleep(Duration::from_millis(500));
        writeln!(stdin, "{line}").unwrap();
    }
    // stdin stays open: only `stop` ends this run.
    let done = wait(child, Duration::from_secs(60), "a run with live edits");
    drop(stdin);
    let err = String::from_utf8_lossy(&done.stderr).into_owned();
    assert!(done.status.success(), "{err}");
    let added = applied_at(&err, add);
    let removed = applied_at(&err, remove);
    assert!(
        err.contains(&format!(
            "refused '{bad}': cannot add testsrc: it is a source"
        )),
        "{err}"
    );
    let out = std::fs::read(&out_path).unwrap();
    assert_eq!(out.len() % FRAME, 0, "{} bytes", out.len());
    let frames = out.len() / FRAME;
    assert!(
        0 < added && added < removed && removed < frames,
        "add at {added}, remove at {removed}, {frames} frames: {err}"
    );
    // Every frame once, in order: frame k is the source's frame k, inverted once outside the
    // edit's span and twice (as the source) inside it.
    let plain = reference(&dir, "plain.rgba", "", frames);
    let inverted = reference(&dir, "inverted.rgba", "! invert", frames);
    for k in 0..frames {
        let want = if (added..removed).contains(&k) {
            &plain
        } else {
            &inverted
        };
        assert!(
            out[k * FRAME..(k + 1) * FRAME] == want[k * FRAME..(k + 1) * FRAME],
            "frame {k} (add at {added}, remove at {removed}) is not the expected one"
        );
    }
    // The frames differ from one to the next, so that order is checked too.
    assert_ne!(plain[..FRAME], plain[FRAME..2 * FRAME]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn issue_9_load_switches_scene_keeping_the_running_source_and_sink() {
    let dir = tmpdir("live-load");
    // The next scene, loaded by a path relative to the working directory: the same source
    // (so it goes on) and sink, without the invert.
    std::fs::write(
        dir.join("scene2.toml"),
        format!(
            "pipeline = \"testsrc width={W} height={H} frames=0 ! invert name=a ! invert name=b \
             ! rawsink name=out location=out.rgba\"\n"
        ),
    )
    .unwrap();
    let pipeline = format!(
        "testsrc width={W} height={H} frames=0 ! invert name=fx ! rawsink name=out location=out.rgba"
    );
    let mut child = Command::new(FP)
        .args(["run", &pipeline])
        .current_dir(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let load = "load scene2.toml";
    for line in [load, "stop"] {
        std::thread::sleep(Duration::from_millis(500));
        writeln!(stdin, "{line}").unwrap();
    }
    let done = wait(child, Duration::from_secs(60), "a run loading a scene");
    drop(stdin);
    let err = String::from_utf8_lossy(&done.stderr).into_owned();
    assert!(done.status.success(), "{err}");
    let loaded = applied_at(&err, load);
    let out = std::fs::read(dir.join("out.rgba")).unwrap();
    let frames = out.len() / FRAME;
    assert!(
        0 < loaded && loaded < frames,
        "loaded at {loaded} of {frames}: {err}"
    );
    let plain = reference(&dir, "plain.rgba", "", frames);
    let inverted = reference(&dir, "inverted.rgba", "! invert", frames);
    for k in 0..frames {
        // The source went on: frame k is its frame k, inverted once before the load and
        // twice (as it is) after.
        let want = if k < loaded { &inverted } else { &plain };
        assert!(
            out[k * FRAME..(k + 1) * FRAME] == want[k * FRAME..(k + 1) * FRAME],
            "frame {k} (loaded at {loaded}) is not the expected one"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
