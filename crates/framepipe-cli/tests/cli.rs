//! The `framepipe` binary end to end, with the real frei0r plugins and the real ffmpeg tool.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const FP: &str = env!("CARGO_BIN_EXE_framepipe");

/// A fresh temporary directory `fp-cli-NAME-XXXXXX` for one test, removed (with its files) when
/// the returned guard drops, also when the test fails; `FP_KEEP_TMP=1` keeps it.
fn tmpdir(name: &str) -> framepipe_testkit::TestDir {
    framepipe_testkit::tmpdir(&format!("fp-cli-{name}"))
}

/// Runs a command with a deadline: a hang is a test failure, not a stuck suite.
fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "command hung for {limit:?}: {cmd:?}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn fp(args: &[&str]) -> Output {
    run_with_timeout(Command::new(FP).args(args), Duration::from_secs(120))
}

fn ok(args: &[&str]) -> Output {
    let out = fp(args);
    assert!(
        out.status.success(),
        "framepipe {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Expects a clean failure: non-zero exit, one line on stderr naming the problem, no panic.
fn fails(args: &[&str], needle: &str) -> String {
    let out = fp(args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "framepipe {args:?} should fail; stderr: {err}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "exit code for {args:?}; stderr: {err}"
    );
    assert!(!err.contains("panicked"), "panic for {args:?}: {err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("framepipe: error"))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "one error line expected for {args:?}: {err}"
    );
    assert!(
        lines[0].contains(needle),
        "error for {args:?} should mention {needle:?}: {}",
        lines[0]
    );
    err
}

/// `frames` frames of ffmpeg's testsrc2 at w x h as raw RGBA.
fn ffmpeg_frames(dir: &Path, w: u32, h: u32, frames: u32) -> PathBuf {
    let path = dir.join(format!("in-{w}x{h}.rgba"));
    let st = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(format!("testsrc2=size={w}x{h}:rate=25"))
        .args([
            "-frames:v",
            &frames.to_string(),
            "-pix_fmt",
            "rgba",
            "-f",
            "rawvideo",
        ])
        .arg(&path)
        .status()
        .expect("ffmpeg is installed (scripts/install-deps)");
    assert!(st.success());
    path
}

fn ffmpeg_chain(input: &Path, w: u32, h: u32, vf: &str, out: &Path) {
    let st = Command::new("ffmpeg")
        .args([
            "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgba", "-s",
        ])
        .arg(format!("{w}x{h}"))
        .arg("-i")
        .arg(input)
        .args(["-vf", vf, "-f", "rawvideo", "-pix_fmt", "rgba"])
        .arg(out)
        .status()
        .unwrap();
    assert!(st.success(), "ffmpeg -vf {vf}");
}

#[test]
fn frei0r_chain_matches_ffmpeg_byte_for_byte_at_any_thread_count() {
    let dir = tmpdir("ffmpeg-match");
    let (w, h) = (320, 240);
    let input = ffmpeg_frames(&dir, w, h, 12);
    let reference = dir.join("ffmpeg.rgba");
    ffmpeg_chain(
        &input,
        w,
        h,
        "frei0r=glow:0.5,frei0r=sobel,frei0r=vignette",
        &reference,
    );
    let expected = std::fs::read(&reference).unwrap();
    assert_eq!(expected.len(), (w * h * 4 * 12) as usize);
    for threads in ["1", "2", "4"] {
        let out = dir.join(format!("fp-{threads}.rgba"));
        ok(&[
            "run",
            "-q",
            "--unpaced",
            "--threads",
            threads,
            &format!(
                "rawsrc location={} format=rgba width={w} height={h} ! frei0r-glow blur=0.5 ! \
                 frei0r-sobel ! frei0r-vignette ! rawsink location={} format=rgba",
                input.display(),
                out.display()
            ),
        ]);
        let got = std::fs::read(&out).unwrap();
        assert_eq!(got.len(), expected.len(), "{threads} threads: frame count");
        let first_diff = got.iter().zip(&expected).position(|(a, b)| a != b);
        assert!(
            first_diff.is_none(),
            "{threads} threads: differs from ffmpeg at byte {first_diff:?} (frame {})",
            first_diff.unwrap_or(0) / (w * h * 4) as usize
        );
    }
}

#[test]
fn stateful_plugins_run_serial_and_give_the_same_frames_whatever_the_thread_count() {
    let dir = tmpdir("stateful");
    // Scheduling modes come from the probe's data: baltan and nervous keep state.
    let stats = dir.join("modes.json");
    ok(&[
        "run",
        "-q",
        "--unpaced",
        "--stats",
        stats.to_str().unwrap(),
        "testsrc width=64 height=48 frames=4 ! frei0r-baltan ! frei0r-sobel ! frei0r-nervous ! nullsink",
    ]);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let modes: Vec<(&str, &str)> = s["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| (st["name"].as_str().unwrap(), st["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(
        modes[1..4],
        [
            ("frei0r-baltan", "serial"),
            ("frei0r-sobel", "parallel"),
            ("frei0r-nervous", "serial")
        ]
    );
    // Bytes: a stateful plugin between parallel ones. (Not nervous: its random generator's state
    // is never initialised by the plugin, so its output depends on leftover heap contents and
    // differs between runs in any host; see docs/FREI0R.md.)
    let mut outputs = Vec::new();
    for threads in ["1", "2", "5"] {
        let out = dir.join(format!("t{threads}.rgba"));
        ok(&[
            "run",
            "-q",
            "--unpaced",
            "--threads",
            threads,
            &format!(
                "testsrc width=160 height=120 frames=30 pattern=bars ! frei0r-glow blur=0.3 ! frei0r-baltan ! \
                 frei0r-sobel ! invert ! rawsink location={}",
                out.display()
            ),
        ]);
        outputs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(outputs[0].len(), 160 * 120 * 4 * 30);
    assert!(
        outputs.iter().all(|o| *o == outputs[0]),
        "outputs differ across --threads"
    );
}

#[test]
fn stats_file_has_the_promised_fields() {
    let dir = tmpdir("stats");
    let stats = dir.join("s.json");
    ok(&[
        "run",
        "-q",
        "--unpaced",
        "--threads",
        "2",
        "--stats",
        stats.to_str().unwrap(),
        "testsrc width=64 height=48 frames=40 ! frei0r-glow blur=0.3 ! frei0r-baltan mode=serial ! nullsink",
    ]);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(s["frames"], 40);
    assert!(s["wall_s"].as_f64().unwrap() > 0.0);
    assert!(s["fps"].as_f64().unwrap() > 0.0);
    let stages = s["stages"].as_array().unwrap();
    let names: Vec<&str> = stages
        .iter()
        .map(|st| st["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["testsrc", "frei0r-glow", "frei0r-baltan", "nullsink"]
    );
    let mean_ms = |i: usize| stages[i]["mean_ms"].as_f64().unwrap();
    for (i, st) in stages.iter().enumerate() {
        // Every stage did work on 40 frames, so its mean time per frame is above zero.
        assert!(mean_ms(i) > 0.0, "{}: mean_ms {}", names[i], mean_ms(i));
        assert!(st["instances"].as_u64().unwrap() >= 1);
        assert_eq!(st["frames"], 40);
    }
    // A blur over every pixel costs more than dropping the frame.
    assert!(
        mean_ms(1) > mean_ms(3),
        "glow {} ms vs nullsink {} ms",
        mean_ms(1),
        mean_ms(3)
    );
    assert_eq!(stages[1]["mode"], "parallel");
    assert_eq!(stages[2]["mode"], "serial", "mode= override applies");
    assert_eq!(stages[2]["instances"], 1);
    // The scheduler lock: every hold timed (workers: at least one per stage per frame), and the
    // output thread's waits for it (at least one per frame).
    let hold = &s["lock_hold_us"];
    assert!(hold["count"].as_u64().unwrap() >= 3 * 40, "{hold}");
    let (p50, p99, max) = (
        hold["p50"].as_f64().unwrap(),
        hold["p99"].as_f64().unwrap(),
        hold["max"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{hold}");
    assert!(s["output_lock_wait_us"]["count"].as_u64().unwrap() >= 40);
}

#[test]
fn project_file_runs_the_same_pipeline() {
    let dir = tmpdir("project");
    let a = dir.join("a.rgba");
    let b = dir.join("b.rgba");
    ok(&[
        "run",
        "-q",
        "--unpaced",
        &format!(
            "testsrc width=96 height=64 frames=8 pattern=noise seed=3 ! frei0r-glow blur=0.5 ! rawsink location={}",
            a.display()
        ),
    ]);
    let project = dir.join("show.toml");
    std::fs::write(
        &project,
        format!(
            "threads = 2\n\n[[element]]\ntype = \"testsrc\"\nwidth = 96\nheight = 64\nframes = 8\npattern = \"noise\"\nseed = 3\n\n\
             [[element]]\ntype = \"frei0r-glow\"\nblur = 0.5\n\n[[element]]\ntype = \"rawsink\"\nlocation = \"{}\"\n",
            b.display()
        ),
    )
    .unwrap();
    ok(&["run", "-q", "--unpaced", project.to_str().unwrap()]);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn plugins_and_inspect_describe_the_frei0r_plugins() {
    let out = ok(&["plugins"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let frei0r_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("frei0r-"))
        .collect();
    assert!(
        frei0r_lines.len() >= 100,
        "expected Debian's ~136 plugins, got {}",
        frei0r_lines.len()
    );
    let glow = frei0r_lines
        .iter()
        .find(|l| l.trim_start().starts_with("frei0r-glow "))
        .expect("glow listed");
    assert!(glow.contains("effect") && glow.contains("blur"), "{glow}");
    let out = ok(&["inspect", "frei0r-glow"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("blur"), "{text}");
    assert!(text.contains("parallel"), "{text}");
    let out = ok(&["inspect", "scale"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("lanczos3"), "{text}");
}

// issue #8
#[test]
fn plugins_and_inspect_list_the_frei0r_mixers() {
    let out = ok(&["plugins"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not listed:\n{text}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    // name, kind, inputs, colour model, mode, parameters
    assert_eq!(
        line("frei0r-multiply")[1..5],
        ["mixer", "2", "RGBA8888", "parallel"]
    );
    assert_eq!(
        line("frei0r-xfade0r")[1..6],
        ["mixer", "2", "BGRA8888", "parallel", "fader:float"]
    );
    assert_eq!(line("frei0r-RGB")[1..3], ["mixer", "3"]);
    let out = ok(&["inspect", "frei0r-xfade0r"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("frei0r-xfade0r  (mixer, 2 inputs)\n"),
        "{text}"
    );
    assert!(text.contains("scheduling: parallel"), "{text}");
    assert!(text.contains("fader"), "{text}");
    let out = ok(&["inspect", "frei0r-RGB"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("frei0r-RGB  (mixer, 3 inputs)\n"),
        "{text}"
    );
}

#[test]
fn bad_input_gives_one_clear_line_and_no_hang() {
    let dir = tmpdir("bad");
    fails(
        &["run", "testsrc ! frei0r-glwo ! nullsink"],
        "unknown element 'frei0r-glwo'",
    );
    fails(
        &["run", "testsrc ! frei0r-glow blurr=0.5 ! nullsink"],
        "unknown property 'blurr' on frei0r-glow; expected one of: blur",
    );
    fails(
        &["run", "testsrc ! frei0r-glow blur=lots ! nullsink"],
        "bad value 'lots'",
    );
    fails(&["run", "testsrc width=abc ! nullsink"], "bad value 'abc'");
    fails(&["run", "testsrc ! nullsink ! nullsink"], "sink");
    fails(&["run", "frei0r-glow ! nullsink"], "effect");
    fails(&["run", "testsrc !"], "ends with '!'");
    fails(
        &["run", "y4msrc location=/nonexistent/clip.y4m ! nullsink"],
        "/nonexistent/clip.y4m",
    );
    fails(
        &[
            "run",
            "testsrc width=100 height=60 frames=2 ! frei0r-glow ! nullsink",
        ],
        "100x60",
    );
    fails(&["run", "/nonexistent/show.toml"], "/nonexistent/show.toml");
    // ffmpeg exiting early: a file that is not a video.
    let junk = dir.join("junk.mp4");
    std::fs::write(&junk, b"this is not a video").unwrap();
    fails(
        &[
            "run",
            &format!("ffmpegsrc location={} ! nullsink", junk.display()),
        ],
        "ffmpeg",
    );
}

#[test]
fn truncated_input_still_writes_the_whole_frames_before_it() {
    let dir = tmpdir("truncated");
    let frame = 32 * 24 * 4;
    let input = dir.join("in.rgba");
    let mut bytes = vec![7u8; frame * 5];
    bytes.extend(vec![9u8; frame / 2]);
    std::fs::write(&input, &bytes).unwrap();
    let out = dir.join("out.rgba");
    fails(
        &[
            "run",
            "--unpaced",
            "--threads",
            "2",
            &format!(
                "rawsrc location={} format=rgba width=32 height=24 ! invert ! rawsink location={}",
                input.display(),
                out.display()
            ),
        ],
        "truncated",
    );
    let got = std::fs::read(&out).unwrap();
    assert_eq!(got.len(), frame * 5, "the five whole frames were written");
    assert!(
        got.chunks(4).all(|px| px == [248, 248, 248, 7]),
        "inverted RGB, alpha kept"
    );
}

#[test]
fn a_shared_object_that_is_not_a_frei0r_plugin_is_named() {
    let dir = tmpdir("bogus");
    std::fs::write(dir.join("bogus.so"), b"not an ELF file").unwrap();
    let out = run_with_timeout(
        Command::new(FP)
            .env("FREI0R_PATH", &dir)
            .args(["run", "testsrc frames=2 ! frei0r-bogus ! nullsink"]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("bogus.so"), "{err}");
    assert!(err.contains("frei0r"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
