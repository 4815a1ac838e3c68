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

/// The line of the run's stderr `err` that says `command` was refused; else fails with `what`.
fn refusal_of<'a>(err: &'a str, command: &str, what: &str) -> &'a str {
    err.lines()
        .find(|l| l.contains(&format!("refused '{command}'")))
        .unwrap_or_else(|| panic!("{what}: {err}"))
}

/// Every frame of `out` is the frame of the same number in `inside` within `span` (an edit's
/// frames: from the add's to the remove's) and in `outside` elsewhere.
fn assert_span(out: &[u8], span: std::ops::Range<usize>, inside: &[u8], outside: &[u8]) {
    for k in 0..out.len() / FRAME {
        let want = if span.contains(&k) { inside } else { outside };
        assert!(
            out[k * FRAME..(k + 1) * FRAME] == want[k * FRAME..(k + 1) * FRAME],
            "frame {k} (edit span {span:?}) is not the expected one"
        );
    }
}

// issue #9
#[test]
fn edits_on_stdin_show_from_the_frame_their_reply_names() {
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
    assert_span(&out, added..removed, &plain, &inverted);
    // The frames differ from one to the next, so that order is checked too.
    assert_ne!(plain[..FRAME], plain[FRAME..2 * FRAME]);
}

// issue #9
#[test]
fn load_switches_scene_keeping_the_running_source_and_sink() {
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
}

/// `x / 255` rounded to nearest, as `mix` computes it (docs/ELEMENTS.md).
fn div255(x: u32) -> u32 {
    let t = x + 128;
    (t + (t >> 8)) >> 8
}

/// The old project of the crossfade tests: a red frame with its frame number stamped.
fn old_project() -> String {
    format!(
        "testsrc width={W} height={H} pattern=solid color=#ff0000 ! stamp \
         ! rawsink name=out location=out.rgba"
    )
}

/// The new project: moving bars with the source's own frame counter, through the stateful
/// `frei0r-hqdn3d` (a temporal denoiser). Its sink is the running one (`location=` unused).
fn new_project() -> String {
    format!(
        "testsrc width={W} height={H} pattern=bars counter=true ! frei0r-hqdn3d name=denoise \
         ! rawsink name=out location=ignored.rgba"
    )
}

/// A running `framepipe run --threads N OLD` in `dir`, its stderr read line by line.
struct Show {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
    reader: std::thread::JoinHandle<()>,
}

impl Show {
    fn start(dir: &std::path::Path, threads: usize, fps: u32, pipeline: &str) -> Show {
        Show::start_with(dir, threads, fps, &[], pipeline)
    }

    /// [`Show::start`] with more options for `run`.
    fn start_with(
        dir: &std::path::Path,
        threads: usize,
        fps: u32,
        options: &[&str],
        pipeline: &str,
    ) -> Show {
        use std::io::BufRead;
        let mut child = Command::new(FP)
            .args(["run", "--threads", &threads.to_string()])
            .args(options)
            .args(["--fps", &fps.to_string(), pipeline])
            .current_dir(dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let reader = std::thread::spawn(move || {
            for line in stderr.lines().map_while(|l| l.ok()) {
                let _ = tx.send(line);
            }
        });
        Show {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            reader,
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
    }

    /// Waits (at most 30 s) for a line of stderr containing `what`.
    fn wait_for(&mut self, what: &str) {
        let limit = std::time::Instant::now() + Duration::from_secs(30);
        while !self.seen.iter().any(|l| l.contains(what)) {
            let left = limit.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!("no '{what}' within 30 s: {:?}", self.seen),
            }
        }
    }

    /// Stops the run; its whole stderr.
    fn stop(mut self) -> String {
        self.send("stop");
        let done = wait(self.child, Duration::from_secs(60), "a run crossfading");
        drop(self.stdin);
        self.reader.join().unwrap();
        self.seen.extend(self.lines.try_iter());
        let err = self.seen.join("\n");
        assert!(done.status.success(), "{err}");
        err
    }
}

/// `count` frames of `pipeline` (one of the projects) alone, unpaced, as raw RGBA.
fn render(dir: &std::path::Path, name: &str, pipeline: &str, count: usize) -> Vec<u8> {
    let path = dir.join(name);
    let to = format!("location={}", path.display());
    let pipeline = pipeline
        .replace("location=out.rgba", &to)
        .replace("location=ignored.rgba", &to)
        .replace(
            "location=prev.rgba",
            &format!("location={}.prev", path.display()),
        )
        .replacen("testsrc ", &format!("testsrc frames={count} "), 1);
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

/// Checks the recorded `out.rgba` of a crossfade from frame `start` over `len` frames: the old
/// project before `start`; from there the `mix mode=crossfade` blend of the old project's frame
/// and the new project's (its frame `k - start`: it starts at the fade's first frame), at
/// amount `(k - start) / len`, exactly; from `start + len` on, the new project alone. Returns
/// the number of frames.
fn check_crossfade(dir: &std::path::Path, start: usize, len: usize) -> usize {
    let out = std::fs::read(dir.join("out.rgba")).unwrap();
    assert_eq!(out.len() % FRAME, 0, "{} bytes", out.len());
    let frames = out.len() / FRAME;
    assert!(
        0 < start && start + 2 < frames,
        "fade from {start}, {frames} frames"
    );
    let a = render(dir, "old.rgba", &old_project(), frames);
    let b = render(dir, "new.rgba", &new_project(), frames - start);
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
        // The amount's 8-bit weight, round(j / len * 255), as `mix` takes its fader.
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
    frames
}

/// A crossfade (`load FILE fade=SECONDSs`) in a run paced at `fps` with `threads` workers,
/// recorded whole: see [`check_crossfade`]. Its length is in the frames' time (testsrc's 30
/// fps), whatever the pace: 30 frames a second. A second `load` during the fade is refused;
/// its end is reported with the frame the new project is alone from. At a high pace the
/// version after the fade comes in some frames after its end (the edit thread looks every
/// 2 ms): the output does not show when.
fn crossfade(threads: usize, fps: u32, seconds: usize) {
    let dir = tmpdir(&format!("live-fade-{threads}"));
    std::fs::write(
        dir.join("new.toml"),
        format!("pipeline = \"{}\"\n", new_project()),
    )
    .unwrap();
    let mut show = Show::start(&dir, threads, fps, &old_project());
    let load = format!("load new.toml fade={seconds}s");
    let load = load.as_str();
    std::thread::sleep(Duration::from_millis(500));
    show.send(load);
    show.wait_for(&format!("ok '{load}' from frame"));
    show.send(load);
    show.wait_for(&format!("refused '{load}'"));
    show.wait_for("fade to new.toml done at frame");
    // A few frames of the new project alone.
    std::thread::sleep(Duration::from_millis(400));
    let err = show.stop();
    let start = applied_at(&err, load);
    let len = 30 * seconds;
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
    let frames = check_crossfade(&dir, start, len);
    assert!(start + len < frames, "fade from {start}, {frames} frames");
}

// issue #9
#[test]
fn load_with_fade_crossfades_on_the_frame_clock_one_thread() {
    crossfade(1, 30, 1);
}

// issue #9
#[test]
fn load_with_fade_crossfades_on_the_frame_clock_three_threads() {
    crossfade(3, 300, 2);
}

// issue #9
/// A crossfade to a project of another frame size is refused (a running sink keeps its size)
/// and the show goes on unchanged; `stop` during a fade ends the run on a whole frame of it,
/// with no end reported.
#[test]
fn a_refused_fade_changes_nothing_and_stop_ends_a_fade() {
    let dir = tmpdir("live-fade-stop");
    std::fs::write(
        dir.join("new.toml"),
        format!("pipeline = \"{}\"\n", new_project()),
    )
    .unwrap();
    std::fs::write(
        dir.join("small.toml"),
        "pipeline = \"testsrc width=32 height=24 ! rawsink name=out location=x.rgba\"\n",
    )
    .unwrap();
    let mut show = Show::start(&dir, 2, 30, &old_project());
    let small = "load small.toml fade=1s";
    let load = "load new.toml fade=10s";
    std::thread::sleep(Duration::from_millis(300));
    show.send(small);
    show.wait_for(&format!("refused '{small}'"));
    show.send(load);
    show.wait_for(&format!("ok '{load}' from frame"));
    std::thread::sleep(Duration::from_millis(400));
    let err = show.stop();
    assert!(
        err.contains(&format!(
            "refused '{small}': cannot crossfade to small.toml: its frames for out are 32x24, \
             the running ones 64x48"
        )),
        "{err}"
    );
    assert!(!err.contains("done at frame"), "{err}");
    let start = applied_at(&err, load);
    // 10 s: the run stopped well before the fade's end.
    let frames = check_crossfade(&dir, start, 300);
    assert!(frames < start + 300, "fade from {start}, {frames} frames");
}

// issue #9
/// A show with a leaky preview (`monitor` into a `leaky=true` sink) beside its master: a
/// crossfade mixes the master's frames and cuts the preview (two leaky branches cannot meet in
/// a mixer) at the fade's first frame; the old preview branch is dropped.
#[test]
fn a_crossfade_cuts_a_leaky_preview_and_fades_the_master() {
    let dir = tmpdir("live-fade-preview");
    let show = |pattern: &str| {
        format!(
            "testsrc width={W} height={H} pattern={pattern} ! tee name=t t. ! rawsink name=out \
             location=out.rgba t. ! monitor width=32 height=24 ! rawsink name=prev leaky=true \
             location=prev.rgba"
        )
    };
    std::fs::write(
        dir.join("bars.toml"),
        format!("pipeline = \"{}\"\n", show("bars")),
    )
    .unwrap();
    let mut run = Show::start(&dir, 2, 30, &show("solid"));
    let load = "load bars.toml fade=500ms";
    std::thread::sleep(Duration::from_millis(400));
    run.send(load);
    run.wait_for("fade to bars.toml done at frame");
    std::thread::sleep(Duration::from_millis(300));
    let err = run.stop();
    let start = applied_at(&err, load);
    // A frame is uniform (the solid grey) or not (bars).
    let uniform = |f: &[u8]| f.chunks_exact(4).all(|p| p == &f[..4]);
    let out = std::fs::read(dir.join("out.rgba")).unwrap();
    let frames: Vec<&[u8]> = out.chunks_exact(FRAME).collect();
    assert!(
        frames.len() > start + 15,
        "{} frames, fade from {start}",
        frames.len()
    );
    for (k, f) in frames.iter().enumerate() {
        // Solid before the fade and at its first frame (amount 0), mixed with bars after.
        assert_eq!(
            uniform(f),
            k <= start,
            "master frame {k} (fade from {start})"
        );
    }
    // The master's last frame is the bars alone, exactly.
    let bars = render(&dir, "bars.rgba", &show("bars"), frames.len() - start);
    let last = frames.len() - 1;
    assert!(
        frames[last] == &bars[(last - start) * FRAME..(last - start + 1) * FRAME],
        "the master's last frame is not the new project's"
    );
    // The preview (it skips frames when behind): grey, then bars only, never a mix of both.
    let prev = std::fs::read(dir.join("prev.rgba")).unwrap();
    let kinds: Vec<bool> = prev.chunks_exact(32 * 24 * 4).map(uniform).collect();
    let cut = kinds
        .iter()
        .position(|u| !u)
        .expect("the preview shows the new project");
    assert!(cut > 0, "the preview showed the old project first");
    assert!(
        kinds[cut..].iter().all(|u| !u),
        "the preview cut once: {kinds:?}"
    );
}

/// Issue #9: `load` of a project (here the very same one) under `--overload live` ended the
/// show within a frame or two with "frame pool 64x48 exhausted": the new version's pools did
/// not count the master output's last frame (kept to show again) nor the running source's last
/// frame. One worker and a latency budget that lets every frame in flight begin ahead of its
/// deadline make the first frame after the switch need all of them at once.
#[test]
fn load_under_overload_live_does_not_exhaust_a_frame_pool() {
    let dir = tmpdir("live-load-overload");
    let pipeline = "testsrc width=64 height=48 pattern=bars ! frei0r-glow name=g blur=0.3 \
                    ! frei0r-vignette name=v ! nullsink";
    std::fs::write(
        dir.join("same.toml"),
        format!("pipeline = \"{pipeline}\"\n"),
    )
    .unwrap();
    let mut show = Show::start_with(
        &dir,
        1,
        200,
        &["--overload", "live", "--latency", "1000"],
        pipeline,
    );
    // Each reply comes once the version it names runs; the next edit's switch needs frames of
    // the previous one to have been output.
    for line in ["load same.toml", "replace g frei0r-glow blur=0.5"] {
        show.send(line);
        show.wait_for(&format!("'{line}'"));
    }
    let err = show.stop();
    assert!(
        err.contains("ok 'load same.toml' from frame")
            && err.contains("ok 'replace g frei0r-glow blur=0.5' from frame"),
        "{err}"
    );
    assert!(!err.contains("exhausted"), "{err}");
}

/// What one version of `pipeline` holds against `--max-memory` with `threads` workers (its
/// pools at full capacity and its instances' estimate), read from the run's own refusal under
/// a budget just big enough for a frame (97K: one 64x48 frame is 1/8 of it), bytes.
fn one_version(threads: usize, pipeline: &str) -> u64 {
    let out = run(
        Command::new(FP).args([
            "run",
            "-q",
            "--threads",
            &threads.to_string(),
            "--max-memory",
            "97K",
            pipeline,
        ]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "not refused under 97K: {err}");
    bytes_after(&err, " would take ")
}

/// The size written right after `marker` in `text` ("132 KiB", as framepipe writes sizes of
/// 100 units and more: whole units, three digits at least), bytes.
fn bytes_after(text: &str, marker: &str) -> u64 {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in: {text}"))
        + marker.len();
    let mut words = text[at..].split_whitespace();
    let (num, unit) = (words.next().unwrap(), words.next().unwrap());
    let unit = match unit.trim_end_matches([',', ')']) {
        "KiB" => 1u64 << 10,
        "MiB" => 1 << 20,
        other => panic!("unit {other} in: {text}"),
    };
    assert!(num.len() >= 3 && !num.contains('.'), "{num} in: {text}");
    num.parse::<u64>().unwrap() * unit
}

/// The `memory` object of a run's `--stats` file.
fn stats_memory(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["memory"].clone()
}

/// Issue #9 with `--max-memory`: a live edit builds the next version while the running one
/// goes on, and both are held until the switch is over. With a budget of exactly the running
/// project's need and the new one's (what a cut holds), a crossfade (both projects and their
/// mixers, beside the running graph) is refused with the figures and what to do, and the show
/// goes on unchanged: every frame once, in order (stamped). The same `load` without `fade=` is
/// applied, the new project from the frame its reply names; `--stats` counted both versions
/// at once, within the budget. Then, with a budget over the crossfade's graph alone but under
/// it beside the running one (what the check counted one version of before), the crossfade
/// is refused too and the output is the old project's, every frame once, in order.
#[test]
fn a_crossfade_over_max_memory_is_refused_and_a_cut_that_fits_is_applied() {
    let dir = tmpdir("live-fade-memory");
    std::fs::write(
        dir.join("new.toml"),
        format!("pipeline = \"{}\"\n", new_project()),
    )
    .unwrap();
    let old = one_version(2, &old_project());
    let new = one_version(2, &new_project());
    let limit = old + new;
    let mut show = Show::start_with(
        &dir,
        2,
        30,
        &["--max-memory", &limit.to_string(), "--stats", "stats.json"],
        &old_project(),
    );
    let fade = "load new.toml fade=1s";
    let cut = "load new.toml";
    std::thread::sleep(Duration::from_millis(500));
    show.send(fade);
    show.wait_for(&format!("'{fade}'"));
    std::thread::sleep(Duration::from_millis(300));
    show.send(cut);
    show.wait_for(&format!("'{cut}'"));
    std::thread::sleep(Duration::from_millis(300));
    let err = show.stop();
    let refusal = refusal_of(&err, fade, "the crossfade was not refused");
    for part in [
        "the running graph (",
        "the crossfade's graph",
        "would take",
        "over the limit of",
        "raise --max-memory, or load without fade=",
    ] {
        assert!(refusal.contains(part), "{part:?} not in: {refusal}");
    }
    let at = applied_at(&err, cut);
    // The old project up to the cut, the new one from its frame 0 there.
    let out = std::fs::read(dir.join("out.rgba")).unwrap();
    assert_eq!(out.len() % FRAME, 0, "{} bytes", out.len());
    let frames = out.len() / FRAME;
    assert!(0 < at && at < frames, "cut at {at} of {frames}: {err}");
    let a = render(&dir, "old.rgba", &old_project(), frames);
    let b = render(&dir, "new.rgba", &new_project(), frames - at);
    assert_ne!(a[..FRAME], a[FRAME..2 * FRAME], "stamped frames differ");
    for k in 0..frames {
        let (want, j) = if k < at { (&a, k) } else { (&b, k - at) };
        assert!(
            out[k * FRAME..(k + 1) * FRAME] == want[j * FRAME..(j + 1) * FRAME],
            "frame {k} (cut at {at}) is not the expected one"
        );
    }
    let memory = stats_memory(&dir.join("stats.json"));
    let held_max = memory["held_max"].as_u64().unwrap();
    assert!(
        (old + new..=limit).contains(&held_max),
        "held_max {held_max}: both versions ({old} + {new}) at once, within {limit}: {memory}"
    );
    assert_eq!(memory["max_memory"].as_u64(), Some(limit), "{memory}");
    assert_eq!(memory["edits_refused"].as_u64(), Some(1), "{memory}");

    // The crossfade's graph alone fits; beside the running graph it does not.
    let crossfade = bytes_after(refusal, "the crossfade's graph of both projects (");
    let limit = crossfade + old / 2;
    let _ = std::fs::remove_file(dir.join("out.rgba"));
    let mut show = Show::start_with(
        &dir,
        2,
        30,
        &["--max-memory", &limit.to_string()],
        &old_project(),
    );
    std::thread::sleep(Duration::from_millis(400));
    show.send(fade);
    show.wait_for(&format!("'{fade}'"));
    std::thread::sleep(Duration::from_millis(300));
    let err = show.stop();
    let refusal = refusal_of(
        &err,
        fade,
        &format!("the crossfade was not refused under {limit}"),
    );
    assert!(
        refusal.contains("held at once as the fade begins"),
        "{refusal}"
    );
    let out = std::fs::read(dir.join("out.rgba")).unwrap();
    assert_eq!(out.len() % FRAME, 0, "{} bytes", out.len());
    let frames = out.len() / FRAME;
    assert!(frames > 15, "{frames} frames");
    let a = render(&dir, "old.rgba", &old_project(), frames);
    assert!(
        out == a,
        "the output is not the old project's frames, once each, in order"
    );
}

/// Issue #9 with `--max-memory` under the overlapping switch (a chain: the new version's first
/// frame begins while the old one's are still made): an `add` makes the next version's pools
/// whole, for every node, beside the running version's. With a budget between one version's
/// need and two, it is refused with the figures, and the show goes on unchanged, every frame
/// once, in order.
#[test]
fn an_add_whose_version_would_not_fit_beside_the_running_one_is_refused() {
    let dir = tmpdir("live-add-memory");
    let one = one_version(2, &old_project());
    let limit = one + one / 2;
    let mut show = Show::start_with(
        &dir,
        2,
        30,
        &["--max-memory", &limit.to_string(), "--stats", "stats.json"],
        &old_project(),
    );
    let add = "add invert name=inv after stamp";
    std::thread::sleep(Duration::from_millis(400));
    show.send(add);
    show.wait_for(&format!("'{add}'"));
    std::thread::sleep(Duration::from_millis(300));
    let err = show.stop();
    let refusal = refusal_of(&err, add, "the add was not refused");
    for part in [
        "the running graph (",
        "the new one (",
        "while the edit switches, would take",
        "over the limit of",
        "raise --max-memory",
    ] {
        assert!(refusal.contains(part), "{part:?} not in: {refusal}");
    }
    let out = std::fs::read(dir.join("out.rgba")).unwrap();
    assert_eq!(out.len() % FRAME, 0, "{} bytes", out.len());
    let frames = out.len() / FRAME;
    assert!(frames > 15, "{frames} frames");
    let a = render(&dir, "old.rgba", &old_project(), frames);
    assert!(
        out == a,
        "the output is not the old project's frames, once each, in order"
    );
    let memory = stats_memory(&dir.join("stats.json"));
    assert_eq!(memory["held_max"].as_u64(), Some(one), "{memory}");
    assert_eq!(memory["edits_refused"].as_u64(), Some(1), "{memory}");
}

/// Issue #9 with `--max-memory`: a crossfade holds the running graph beside the crossfade's as
/// it begins, then the crossfade's beside the version after it (built as the fade begins),
/// never all three: with a budget of exactly the first pair (read from a refusal under a
/// smaller budget), the fade is applied and ends, frame-exact, and `--stats` never counted
/// more than the budget (the version after the fade waited for the running graph to be
/// dropped; built at once, beside both, it did not fit and the fade got stuck).
#[test]
fn a_crossfade_holds_two_versions_at_once_never_three() {
    let dir = tmpdir("live-fade-two");
    std::fs::write(
        dir.join("new.toml"),
        format!("pipeline = \"{}\"\n", new_project()),
    )
    .unwrap();
    let fade = "load new.toml fade=1s";
    let small = one_version(2, &old_project()) + one_version(2, &new_project());
    let mut show = Show::start_with(
        &dir,
        2,
        30,
        &["--max-memory", &small.to_string()],
        &old_project(),
    );
    std::thread::sleep(Duration::from_millis(300));
    show.send(fade);
    show.wait_for(&format!("'{fade}'"));
    let err = show.stop();
    let refusal = refusal_of(
        &err,
        fade,
        &format!("the crossfade was not refused under {small}"),
    );
    let limit = bytes_after(refusal, " would take ");
    let _ = std::fs::remove_file(dir.join("out.rgba"));
    let mut show = Show::start_with(
        &dir,
        2,
        30,
        &["--max-memory", &limit.to_string(), "--stats", "stats.json"],
        &old_project(),
    );
    std::thread::sleep(Duration::from_millis(500));
    show.send(fade);
    show.wait_for(&format!("ok '{fade}' from frame"));
    show.wait_for("fade to new.toml done at frame");
    std::thread::sleep(Duration::from_millis(300));
    let err = show.stop();
    assert!(!err.contains("cannot end"), "{err}");
    let start = applied_at(&err, fade);
    let frames = check_crossfade(&dir, start, 30);
    assert!(start + 30 < frames, "fade from {start}, {frames} frames");
    let memory = stats_memory(&dir.join("stats.json"));
    let held_max = memory["held_max"].as_u64().unwrap();
    assert!(
        held_max <= limit,
        "held_max {held_max} over the budget {limit}: {memory}"
    );
}

/// Issue #9 with `--max-memory`: an edit sent while the version an earlier edit replaced is
/// still held (a paused show keeps its last frames) would fit beside the running version
/// alone: it waits for that version to be freed (here: `resume`) instead of being refused, and
/// is applied; every frame is output once, in order, each edit from the frame its reply
/// names; `--stats` never counted more than the budget.
#[test]
fn an_edit_waits_for_the_version_an_earlier_edit_replaced_to_be_freed() {
    let dir = tmpdir("live-edit-waits");
    let pipeline = format!(
        "testsrc width={W} height={H} ! stamp name=st ! rawsink name=out location=out.rgba"
    );
    // The running graph and the next (as big, and an instance more) fit; three do not.
    let limit = 2 * one_version(2, &pipeline);
    let mut show = Show::start_with(
        &dir,
        2,
        30,
        &["--max-memory", &limit.to_string(), "--stats", "stats.json"],
        &pipeline,
    );
    let (add, remove) = ("add invert name=inv after st", "remove inv");
    std::thread::sleep(Duration::from_millis(400));
    show.send("pause");
    show.wait_for("'pause'");
    show.send(add);
    show.wait_for(&format!("'{add}'"));
    show.send(remove);
    // Built, found over the budget beside the version the add replaced (held while paused),
    // and parked: resuming frees that version.
    std::thread::sleep(Duration::from_millis(300));
    show.send("resume");
    show.wait_for(&format!("'{remove}'"));
    std::thread::sleep(Duration::from_millis(300));
    let err = show.stop();
    assert!(!err.contains(&format!("refused '{remove}'")), "{err}");
    let (added, removed) = (applied_at(&err, add), applied_at(&err, remove));
    let out = std::fs::read(dir.join("out.rgba")).unwrap();
    assert_eq!(out.len() % FRAME, 0, "{} bytes", out.len());
    let frames = out.len() / FRAME;
    assert!(
        0 < added && added < removed && removed < frames,
        "add at {added}, remove at {removed}, {frames} frames: {err}"
    );
    let plain = reference(&dir, "plain.rgba", "! stamp", frames);
    let inverted = reference(&dir, "inverted.rgba", "! stamp ! invert", frames);
    assert_span(&out, added..removed, &inverted, &plain);
    let memory = stats_memory(&dir.join("stats.json"));
    let held_max = memory["held_max"].as_u64().unwrap();
    assert!(
        held_max <= limit,
        "held_max {held_max} over {limit}: {memory}"
    );
    assert_eq!(memory["edits_refused"].as_u64(), Some(0), "{memory}");
}

/// The show of the stale-reply tests: the source's moving bars with `value` printed on them by
/// `stamp` (a live parameter that shows in the pixels), one decimal, 0 to begin with.
fn value_show(dir: &std::path::Path, threads: usize) -> Show {
    let pipeline = format!(
        "testsrc width={W} height={H} ! stamp name=fx what=value decimals=1 value=0 scale=2 \
         ! rawsink name=out location=out.rgba"
    );
    Show::start(dir, threads, 30, &pipeline)
}

/// `frames` frames of the source with `value` printed by `stamp` with `decimals` decimals.
fn valued(dir: &std::path::Path, value: &str, decimals: u32, frames: usize) -> Vec<u8> {
    reference(
        dir,
        &format!("v{value}-{decimals}.rgba"),
        &format!("! stamp what=value decimals={decimals} value={value} scale=2"),
        frames,
    )
}

/// The recorded `out.rgba` of a show in `dir`, and its number of frames.
fn recorded(dir: &std::path::Path) -> (Vec<u8>, usize) {
    let out = std::fs::read(dir.join("out.rgba")).unwrap();
    assert_eq!(out.len() % FRAME, 0, "{} bytes", out.len());
    let frames = out.len() / FRAME;
    (out, frames)
}

/// Which of `refs` (name, frames) frame `k` of `out` is (they differ in every frame).
fn which<'a>(out: &[u8], k: usize, refs: &[(&'a str, &[u8])]) -> &'a str {
    for (i, (a, x)) in refs.iter().enumerate() {
        for (b, y) in &refs[i + 1..] {
            assert_ne!(
                x[k * FRAME..(k + 1) * FRAME],
                y[k * FRAME..(k + 1) * FRAME],
                "{a}, {b}"
            );
        }
    }
    let f = &out[k * FRAME..(k + 1) * FRAME];
    refs.iter()
        .find(|(_, r)| r[k * FRAME..(k + 1) * FRAME] == *f)
        .map_or("none of them", |(n, _)| n)
}

/// Frame `k` of the `frames` in `out` is the reference (of `refs`, by name) of the first span
/// `(until, name)` with `k < until`; `what` says where the spans come from.
fn assert_frames(
    out: &[u8],
    frames: usize,
    refs: &[(&str, &[u8])],
    spans: &[(usize, &str)],
    what: &str,
) {
    for k in 0..frames {
        let want = spans.iter().find(|s| k < s.0).map_or("none", |s| s.1);
        let got = which(out, k, refs);
        assert_eq!(got, want, "frame {k} ({what})");
    }
}

/// Issue #9, a `set` racing the live edit that replaces its node: a paused show reads
/// `replace fx ...` and, before that edit is built and switched in, `set fx.value 0.9`. The
/// set is answered "from frame N" and the replace "from frame M" (N <= M): the set was read
/// after the replace, so it is the performer's last word on `fx.value`, in the old instance
/// from N and in the new one from M (whose other property, 2 decimals, shows that it is the
/// new one). Before the fix the new instance started with the replace's own `value=0.5`: the
/// set's reply named frame N = M, and no frame showed 0.9. With `load` (a project whose `fx`
/// has those properties), the same. A set sent after the edit's reply shows in the new node
/// from its frame.
fn set_racing_replace(threads: usize, load: bool) {
    let dir = tmpdir(&format!("stale-replace-{threads}-{load}"));
    let fx = "stamp what=value decimals=2 value=0.5 scale=2";
    std::fs::write(
        dir.join("scene2.toml"),
        format!(
            "pipeline = \"testsrc width={W} height={H} ! {fx} name=fx \
             ! rawsink name=out location=out.rgba\"\n"
        ),
    )
    .unwrap();
    let mut show = value_show(&dir, threads);
    std::thread::sleep(Duration::from_millis(300));
    show.send("pause");
    show.wait_for("'pause'");
    let replace = if load {
        "load scene2.toml".to_string()
    } else {
        format!("replace fx {fx}")
    };
    let set = "set fx.value 0.9";
    // One write: the set is read while the replace is being built.
    show.send(&format!("{replace}\n{set}"));
    show.wait_for(&format!("'{set}'"));
    // (The switch may wait for the set's frame to begin: after the resume.)
    show.send("resume");
    show.wait_for(&format!("'{replace}'"));
    // A command sent after the edit's reply is the new node's.
    std::thread::sleep(Duration::from_millis(200));
    let later = "set fx.value 0.7";
    show.send(later);
    show.wait_for(&format!("'{later}'"));
    std::thread::sleep(Duration::from_millis(200));
    let err = show.stop();
    let (n, m) = (applied_at(&err, set), applied_at(&err, &replace));
    let l = applied_at(&err, later);
    let (out, frames) = recorded(&dir);
    assert!(
        0 < n && n <= m && m < l && l < frames,
        "set {n}, replace {m}, later set {l}, {frames}: {err}"
    );
    let refs = [
        ("0.0", valued(&dir, "0", 1, frames)),
        ("0.9", valued(&dir, "0.9", 1, frames)),
        ("0.90", valued(&dir, "0.9", 2, frames)),
        ("0.50", valued(&dir, "0.5", 2, frames)),
        ("0.70", valued(&dir, "0.7", 2, frames)),
        ("0.7", valued(&dir, "0.7", 1, frames)),
    ];
    let refs: Vec<(&str, &[u8])> = refs.iter().map(|(n, r)| (*n, &r[..])).collect();
    assert_frames(
        &out,
        frames,
        &refs,
        &[(n, "0.0"), (m, "0.9"), (l, "0.90"), (usize::MAX, "0.70")],
        &format!("set from {n}, replace from {m}, later set from {l}: {err}"),
    );
}

// issue #9
#[test]
fn a_set_read_while_a_replace_is_pending_shows_from_its_frame_one_thread() {
    set_racing_replace(1, false);
}

// issue #9
#[test]
fn a_set_read_while_a_replace_is_pending_shows_from_its_frame_two_threads() {
    set_racing_replace(2, false);
}

// issue #9
#[test]
fn a_set_read_while_a_load_is_pending_shows_from_its_frame() {
    set_racing_replace(2, true);
}

/// Issue #9, a `set` racing the live edit that removes its node: read after `remove fx` (the
/// show paused, so that no frame begins in between), it is either answered "from frame N" and
/// shown from N until the remove's frame M > N, or refused because `fx` is gone by then,
/// naming the frame, and shown nowhere. Before the fix it was answered "from frame N" with
/// N = M: no frame showed it.
fn set_racing_remove(threads: usize) {
    let dir = tmpdir(&format!("stale-remove-{threads}"));
    let mut show = value_show(&dir, threads);
    std::thread::sleep(Duration::from_millis(300));
    show.send("pause");
    show.wait_for("'pause'");
    let (remove, set) = ("remove fx", "set fx.value 0.9");
    show.send(&format!("{remove}\n{set}"));
    show.wait_for(&format!("'{set}'"));
    show.send("resume");
    show.wait_for(&format!("'{remove}'"));
    std::thread::sleep(Duration::from_millis(300));
    let err = show.stop();
    let m = applied_at(&err, remove);
    let (out, frames) = recorded(&dir);
    let refs = [
        ("0.0", valued(&dir, "0", 1, frames)),
        ("0.9", valued(&dir, "0.9", 1, frames)),
        ("plain", reference(&dir, "plain.rgba", "", frames)),
    ];
    let refs: Vec<(&str, &[u8])> = refs.iter().map(|(n, r)| (*n, &r[..])).collect();
    // From the set's frame (none when refused) to the remove's: 0.9.
    let n = if err.contains(&format!("ok '{set}' from frame ")) {
        let n = applied_at(&err, set);
        assert!(
            n < m,
            "set from {n}, remove from {m}: no frame shows the set: {err}"
        );
        n
    } else {
        let refusal = refusal_of(&err, set, "the set is neither applied nor refused");
        assert!(
            refusal.contains(&format!("no node 'fx' (removed at frame {m})")),
            "{refusal}"
        );
        m
    };
    assert!(0 < m && m < frames, "remove from {m}, {frames}: {err}");
    assert_frames(
        &out,
        frames,
        &refs,
        &[(n, "0.0"), (m, "0.9"), (usize::MAX, "plain")],
        &format!("set from {n}, remove from {m}: {err}"),
    );
}

// issue #9
#[test]
fn a_set_read_while_a_remove_is_pending_is_shown_or_refused_one_thread() {
    set_racing_remove(1);
}

// issue #9
#[test]
fn a_set_read_while_a_remove_is_pending_is_shown_or_refused_two_threads() {
    set_racing_remove(2);
}

/// Issue #9, the reverse: a `set` on the node that a pending `add` brings is refused (the node
/// is not there yet when the set is read) with a reason that says so, and shows nowhere; the
/// add itself is applied.
#[test]
fn a_set_on_a_node_a_pending_add_brings_is_refused_saying_so() {
    let dir = tmpdir("stale-add");
    let mut show = value_show(&dir, 2);
    std::thread::sleep(Duration::from_millis(300));
    show.send("pause");
    show.wait_for("'pause'");
    let (add, set) = (
        "add stamp name=new what=value decimals=2 value=0.5 y=30 scale=2 after fx",
        "set new.value 0.9",
    );
    show.send(&format!("{add}\n{set}"));
    show.wait_for(&format!("'{set}'"));
    show.send("resume");
    show.wait_for(&format!("'{add}'"));
    std::thread::sleep(Duration::from_millis(300));
    let err = show.stop();
    let refusal = refusal_of(&err, set, "the set on the added node is not refused");
    assert!(
        refusal.contains("no element 'new'") && refusal.contains("once it is answered"),
        "{refusal}"
    );
    let m = applied_at(&err, add);
    let (out, frames) = recorded(&dir);
    assert!(0 < m && m < frames, "add from {m}, {frames}: {err}");
    let before = valued(&dir, "0", 1, frames);
    let after = reference(
        &dir,
        "added.rgba",
        "! stamp what=value decimals=1 value=0 scale=2 ! stamp what=value decimals=2 value=0.5 y=30 scale=2",
        frames,
    );
    assert_span(&out, m..frames, &after, &before);
}
