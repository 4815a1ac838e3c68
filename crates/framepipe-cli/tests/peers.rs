//! Issue 7, requirements 6 and 7, through the `framepipe` binary: ffmpeg gets paths, never
//! options; a damaged clip is reported; a frei0r plugin other than the build the probe measured
//! runs serial and says so. Real ffmpeg, real frei0r plugins, real files.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{ffprobe_frames, tmpdir, FP};

const FREI0R: &str = "/usr/lib/frei0r-1";

/// Commands here finish in seconds; a hang fails the test.
const LIMIT: Duration = Duration::from_secs(60);

fn run(cmd: &mut Command) -> Output {
    common::run(cmd, LIMIT)
}

/// `framepipe run -q ARGS...` in directory `cwd`.
fn framepipe(cwd: &Path, args: &[&str]) -> (bool, String) {
    let out = run(Command::new(FP)
        .current_dir(cwd)
        .args(["run", "-q"])
        .args(args));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ffmpeg(cwd: &Path, args: &[&str]) {
    let out = run(Command::new("ffmpeg")
        .current_dir(cwd)
        .args(["-v", "error", "-y"])
        .args(args));
    assert!(
        out.status.success(),
        "ffmpeg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ffmpeg_and_ffprobe_get_a_location_starting_with_a_dash_as_a_file() {
    let d = tmpdir("dash");
    // A clip named like ffmpeg's "-i" option, and a victim file an option could clobber.
    ffmpeg(
        &d,
        &[
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=64x48:rate=25",
            "-frames:v",
            "10",
            "-c:v",
            "ffv1",
            "./-i.mkv",
        ],
    );
    let input = std::fs::read(d.join("-i.mkv")).unwrap();
    std::fs::write(d.join("victim.mkv"), b"keep me").unwrap();

    let (ok, err) = framepipe(
        &d,
        &["ffmpegsrc location=-i.mkv ! ffmpegsink location=-y.mkv codec=ffv1"],
    );
    assert!(ok, "{err}");
    assert_eq!(
        ffprobe_frames(&d, "./-y.mkv"),
        10,
        "every frame in '-y.mkv'"
    );
    assert_eq!(std::fs::read(d.join("-i.mkv")).unwrap(), input);
    assert_eq!(std::fs::read(d.join("victim.mkv")).unwrap(), b"keep me");

    // "-y" alone is ffmpeg's overwrite option: as a location it is a file named "-y".
    let (ok, err) = framepipe(
        &d,
        &["testsrc width=64 height=48 frames=5 ! ffmpegsink location=-y codec=ffv1 args=\"-f matroska\""],
    );
    assert!(ok, "{err}");
    assert_eq!(ffprobe_frames(&d, "./-y"), 5);
    assert_eq!(std::fs::read(d.join("victim.mkv")).unwrap(), b"keep me");
}

/// A 50-frame H.264 mp4 with its index in front, and a copy cut in the middle (`head -c`).
fn cut_clip(d: &Path) {
    ffmpeg(
        d,
        &[
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=160x120:rate=25",
            "-frames:v",
            "50",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-movflags",
            "+faststart",
            "whole.mp4",
        ],
    );
    let size = std::fs::metadata(d.join("whole.mp4")).unwrap().len();
    let out = run(Command::new("sh")
        .current_dir(d)
        .args(["-c", &format!("head -c {} whole.mp4 > cut.mp4", size / 2)]));
    assert!(out.status.success());
}

#[test]
fn a_truncated_clip_is_a_warning_naming_the_frames_and_the_first_decode_error() {
    let d = tmpdir("cut");
    cut_clip(&d);
    let (ok, err) = framepipe(
        &d,
        &["--stats", "s.json", "ffmpegsrc location=cut.mp4 ! nullsink"],
    );
    assert!(ok, "a damaged clip is a warning by default: {err}");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("s.json")).unwrap()).unwrap();
    let delivered = stats["frames"].as_u64().unwrap();
    assert!((1..50).contains(&delivered), "{delivered}");
    let warning = err
        .lines()
        .find(|l| l.starts_with("ffmpegsrc: warning: "))
        .unwrap_or_else(|| panic!("no warning in: {err}"));
    let want = format!(
        "ffmpegsrc: warning: 'cut.mp4' is damaged: ffmpeg delivered {delivered} of 50 frames (announced by ffprobe); ffmpeg reported "
    );
    assert!(warning.starts_with(&want), "{warning}");
    assert!(warning.contains(", the first: "), "{warning}");
    assert!(
        warning.ends_with("(strict=true makes this an error)"),
        "{warning}"
    );

    let (ok, err) = framepipe(&d, &["ffmpegsrc location=cut.mp4 strict=true ! nullsink"]);
    assert!(!ok, "strict=true: a damaged clip fails the run");
    assert!(
        err.contains("'cut.mp4' is damaged: ffmpeg delivered"),
        "{err}"
    );

    // The whole clip: no warning.
    let (ok, err) = framepipe(&d, &["ffmpegsrc location=whole.mp4 strict=true ! nullsink"]);
    assert!(ok, "{err}");
    assert!(!err.contains("damaged"), "{err}");
}

/// Runs `testsrc ! frei0r-glow ! nullsink` with plugins from `dir` only; returns stderr and
/// the glow stage's scheduling mode from `--stats`.
fn glow_from(dir: &Path) -> (String, String) {
    let stats = dir.join("s.json");
    let out = run(Command::new(FP)
        .env("FREI0R_PATH", dir)
        .args(["run", "-q", "--unpaced", "--stats"])
        .arg(&stats)
        .arg("testsrc width=64 height=48 frames=4 ! frei0r-glow ! nullsink"));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let mode = s["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["name"] == "frei0r-glow")
        .unwrap_or_else(|| panic!("no glow stage in {s}"))["mode"]
        .as_str()
        .unwrap()
        .to_string();
    (err, mode)
}

#[test]
fn a_frei0r_plugin_other_than_the_probed_build_runs_serial_with_a_message() {
    let real = Path::new(FREI0R).join("glow.so");
    if !real.exists() {
        eprintln!("SKIPPED: {} not installed", real.display());
        return;
    }
    // The probed build, copied: same bytes, same verdict (parallel), no message.
    let same = tmpdir("probe-same");
    std::fs::copy(&real, same.join("glow.so")).unwrap();
    let (err, mode) = glow_from(&same);
    assert_eq!(mode, "parallel");
    assert!(!err.contains("not the build"), "{err}");

    // The same plugin with one byte more (another build as far as anyone can tell).
    let changed = tmpdir("probe-changed");
    let mut bytes = std::fs::read(&real).unwrap();
    bytes.push(0);
    std::fs::write(changed.join("glow.so"), &bytes).unwrap();
    let (err, mode) = glow_from(&changed);
    assert_eq!(mode, "serial", "an unprobed build runs serial");
    let line = err
        .lines()
        .find(|l| l.contains("is not the build the probe measured"))
        .unwrap_or_else(|| panic!("no message in: {err}"));
    assert!(
        line.starts_with(&format!(
            "frei0r-glow: {} is not the build the probe measured (crc32 ",
            changed.join("glow.so").display()
        )),
        "{line}"
    );
    assert!(line.ends_with(
        "running it serial. Re-probe: cargo run --release -p framepipe-frei0r --bin frei0r-probe -- --write crates/framepipe-frei0r/data/modes.tsv"
    ), "{line}");
    assert_eq!(err.matches("not the build").count(), 1, "said once: {err}");

    // Another plugin under glow's name (sobel, stateless too): not glow's verdict either.
    let other = tmpdir("probe-other");
    std::fs::copy(Path::new(FREI0R).join("sobel.so"), other.join("glow.so")).unwrap();
    let (err, mode) = glow_from(&other);
    assert_eq!(mode, "serial");
    assert!(err.contains("is not the build the probe measured"), "{err}");
}

#[test]
fn ffmpegsink_encodes_every_repeated_frame_under_live_overload() {
    // A live recording shows what was on screen: a frame the output thread gives again at a
    // deadline with nothing new is encoded again, so the file keeps the stream's timing. Eight
    // glows on one worker against a quick sink (small frames, no compression), so that repeats
    // reach the sink rather than being skipped while it is busy.
    let d = tmpdir("repeat-ffmpeg");
    let (ok, err) = framepipe(
        &d,
        &[
            "--threads",
            "1",
            "--fps",
            "1000",
            "--overload",
            "live",
            "--stats",
            "s.json",
            "testsrc width=320 height=176 frames=30 ! frei0r-glow ! frei0r-glow ! frei0r-glow ! \
             frei0r-glow ! frei0r-glow ! frei0r-glow ! frei0r-glow ! frei0r-glow ! \
             ffmpegsink location=live.nut codec=rawvideo",
        ],
    );
    assert!(ok, "{err}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("s.json")).unwrap()).unwrap();
    let (frames, repeated) = (
        s["frames"].as_u64().unwrap(),
        s["repeated"].as_u64().unwrap(),
    );
    assert_eq!(frames, 30);
    let encoded = ffprobe_frames(&d, "live.nut");
    eprintln!("ffmpegsink encoded {encoded}: {frames} frames, {repeated} repeated deadlines");
    assert!(
        encoded > frames && encoded <= frames + repeated,
        "encoded {encoded}, {frames} frames + {repeated} repeated"
    );
}
