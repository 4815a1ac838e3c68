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

/// `x / 255` rounded to nearest, as `mix` computes it (docs/ELEMENTS.md).
fn div255(x: u32) -> u32 {
    let t = x + 128;
    (t + (t >> 8)) >> 8
}

/// A crossfade (`load FILE fade=1s`) in a paced run with `threads` workers: the old project (a
/// red frame with its frame number stamped) before the frame the reply names; from there the
/// `mix mode=crossfade` blend of the old project's frame and the new project's, at amount
/// `k / 30` on the fade's frame k (1 s at 30 fps), exactly; from frame N + 30 on, the new
/// project alone. The new project (moving bars with the source's own frame counter, through
/// the stateful `frei0r-hqdn3d`, a temporal denoiser) is compared with a run of it alone: its
/// source and the denoiser's state start at the fade's first frame. A second `load` during the
/// fade is refused; the end is reported.
fn crossfade(threads: usize) {
    use std::io::BufRead;
    let dir = tmpdir(&format!("live-fade-{threads}"));
    let new = format!(
        "testsrc width={W} height={H} pattern=bars counter=true ! frei0r-hqdn3d name=denoise \
         ! rawsink name=out location=ignored.rgba"
    );
    std::fs::write(dir.join("new.toml"), format!("pipeline = \"{new}\"\n")).unwrap();
    let old = format!(
        "testsrc width={W} height={H} pattern=solid color=#ff0000 ! stamp \
         ! rawsink name=out location=out.rgba"
    );
    let mut child = Command::new(FP)
        .args(["run", "--threads", &threads.to_string(), &old])
        .current_dir(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        for line in stderr.lines().map_while(|l| l.ok()) {
            let _ = tx.send(line);
        }
    });
    let load = "load new.toml fade=1s";
    std::thread::sleep(Duration::from_millis(500));
    writeln!(stdin, "{load}").unwrap();
    let mut lines = Vec::new();
    let wait_for = |what: &str, lines: &mut Vec<String>| {
        let limit = std::time::Instant::now() + Duration::from_secs(30);
        while !lines.iter().any(|l| l.contains(what)) {
            let left = limit.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) => lines.push(l),
                Err(_) => panic!("no '{what}' within 30 s: {lines:?}"),
            }
        }
    };
    wait_for(&format!("ok '{load}' from frame"), &mut lines);
    writeln!(stdin, "{load}").unwrap();
    wait_for(&format!("refused '{load}'"), &mut lines);
    wait_for("fade to new.toml done at frame", &mut lines);
    // A few frames of the new project alone.
    std::thread::sleep(Duration::from_millis(400));
    writeln!(stdin, "stop").unwrap();
    let done = wait(
        child,
        Duration::from_secs(60),
        "a run crossfading to a scene",
    );
    drop(stdin);
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    let err = lines.join("\n");
    assert!(done.status.success(), "{err}");
    let start = applied_at(&err, load);
    // 1 s at testsrc's 30 fps.
    let len = 30;
    assert!(
        err.contains(&format!(
            "refused '{load}': a crossfade to new.toml is under way (until frame {})",
            start + len
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("fade to new.toml done at frame {}", start + len)),
        "{err}"
    );
    let out = std::fs::read(dir.join("out.rgba")).unwrap();
    assert_eq!(out.len() % FRAME, 0, "{} bytes", out.len());
    let frames = out.len() / FRAME;
    assert!(
        0 < start && start + len < frames,
        "fade from {start}, {frames} frames: {err}"
    );
    let render = |name: &str, pipeline: &str, count: usize| -> Vec<u8> {
        let path = dir.join(name);
        let pipeline =
            pipeline.replace("location=out.rgba", &format!("location={}", path.display()));
        let pipeline = pipeline.replace(
            "location=ignored.rgba",
            &format!("location={}", path.display()),
        );
        let pipeline = pipeline.replacen("testsrc ", &format!("testsrc frames={count} "), 1);
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
    };
    let a = render("old.rgba", &old, frames);
    let b = render("new.rgba", &new, frames - start);
    // The new project's frames differ from one to the next (a wrong start would show).
    assert_ne!(b[FRAME..2 * FRAME], b[2 * FRAME..3 * FRAME]);
    for k in 0..frames {
        let got = &out[k * FRAME..(k + 1) * FRAME];
        let old_k = &a[k * FRAME..(k + 1) * FRAME];
        if k < start {
            assert!(
                got == old_k,
                "frame {k} (fade from {start}) is not the old project's"
            );
            continue;
        }
        let j = k - start;
        let new_k = &b[j * FRAME..(j + 1) * FRAME];
        if j >= len {
            assert!(
                got == new_k,
                "frame {k} (fade from {start} to {}) is not the new project's frame {j}",
                start + len
            );
            continue;
        }
        // The amount's 8-bit weight, round(k / len * 255), as `mix` takes its fader.
        let f = ((j as f64 / len as f64) * 255.0).round() as u32;
        for (i, ((&g, &x), &y)) in got.iter().zip(old_k).zip(new_k).enumerate() {
            let want = div255(u32::from(x) * (255 - f) + u32::from(y) * f);
            assert!(
                u32::from(g) == want,
                "frame {k} (fade frame {j} of {len}), byte {i}: {g}, expected {want} \
                 (old {x}, new {y}, weight {f})"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn issue_9_load_with_fade_crossfades_on_the_frame_clock_one_thread() {
    crossfade(1);
}

#[test]
fn issue_9_load_with_fade_crossfades_on_the_frame_clock_three_threads() {
    crossfade(3);
}
