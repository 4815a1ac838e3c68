//! What a run tells while it runs (#22 items 8 and 9), through the real binary: `--progress`
//! blocks like ffmpeg's `-progress` (also with `-q` and without a terminal), the total taken from
//! the sources' length (`frames=`, a clip's own count), and no `\r` or status line in stderr
//! when it is not a terminal (a log file).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{run, tmpdir, wait, FP};

const LIMIT: Duration = Duration::from_secs(60);
const KEYS: [&str; 7] = [
    "frame",
    "total_frames",
    "fps",
    "out_time_us",
    "speed",
    "eta_us",
    "progress",
];

/// The `key=value` blocks of a progress stream, each ending with its `progress=` line.
fn blocks(text: &str) -> Vec<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for line in text.lines() {
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a key=value line: {line:?} in {text}"));
        cur.push((k.to_string(), v.to_string()));
        if k == "progress" {
            out.push(std::mem::take(&mut cur));
        }
    }
    assert!(cur.is_empty(), "an unfinished block at the end: {text}");
    out
}

fn get<'a>(block: &'a [(String, String)], key: &str) -> &'a str {
    block
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {key}= in {block:?}"))
}

/// Every block has every key in ffmpeg's order; frame= never goes back and grows during the
/// run; only the last block says progress=end, with the whole run's frames.
fn check_stream(text: &str, total: u64) {
    let blocks = blocks(text);
    assert!(
        blocks.len() >= 3,
        "a block every 0.5 s of a 2 s run: {text}"
    );
    for b in &blocks {
        let keys: Vec<&str> = b.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, KEYS, "{text}");
        assert_eq!(get(b, "total_frames"), total.to_string(), "{text}");
    }
    let frames: Vec<u64> = blocks
        .iter()
        .map(|b| get(b, "frame").parse().unwrap())
        .collect();
    assert!(frames.windows(2).all(|w| w[0] <= w[1]), "{frames:?}");
    assert!(
        frames[0] < frames[frames.len() - 2],
        "frame= grows while running: {frames:?}"
    );
    let (last, rest) = blocks.split_last().unwrap();
    assert!(
        rest.iter().all(|b| get(b, "progress") == "continue"),
        "{text}"
    );
    assert_eq!(get(last, "progress"), "end", "{text}");
    assert_eq!(get(last, "frame"), total.to_string(), "{text}");
    assert_eq!(get(last, "eta_us"), "0", "{text}");
    // 20 fps: frame N ends at N * 50 ms.
    assert_eq!(
        get(last, "out_time_us"),
        (total * 50_000).to_string(),
        "{text}"
    );
}

#[test]
fn progress_to_stdout_with_quiet_counts_up_to_the_sources_frames_and_ends() {
    let out = run(
        Command::new(FP).args([
            "run",
            "-q",
            "--control",
            "none",
            "--progress",
            "-",
            "testsrc width=64 height=48 rate=20 frames=40 ! nullsink",
        ]),
        LIMIT,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    check_stream(&String::from_utf8_lossy(&out.stdout), 40);
}

#[test]
fn progress_to_a_file_takes_its_total_from_the_clip() {
    let dir = tmpdir("progress-clip");
    // A clip of 40 frames at 20 fps: its count comes from ffprobe, no frames= given.
    let made = run(
        Command::new("ffmpeg").current_dir(dir.path()).args([
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=64x48:rate=20",
            "-frames:v",
            "40",
            "-pix_fmt",
            "yuv420p",
            "clip.mp4",
        ]),
        LIMIT,
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let out = run(
        Command::new(FP).current_dir(dir.path()).args([
            "run",
            "--control",
            "none",
            "--progress",
            "progress.txt",
            "ffmpegsrc location=clip.mp4 ! nullsink",
        ]),
        LIMIT,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    check_stream(
        &std::fs::read_to_string(dir.join("progress.txt")).unwrap(),
        40,
    );
}

/// stderr is a pipe here, as a log file would be: the replies and the end line come without
/// the `\r` that clears a status line, and no status line is drawn.
#[test]
fn stderr_that_is_not_a_terminal_gets_no_carriage_return() {
    let mut child = Command::new(FP)
        .args([
            "run",
            "testsrc width=64 height=48 rate=20 frames=20 ! nullsink",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"frobnicate\npause\nresume\n").unwrap();
    drop(stdin);
    let out = wait(child, LIMIT, "framepipe run with commands");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("frobnicate"),
        "the bad command is answered: {err}"
    );
    assert!(err.contains("20 frames in"), "{err}");
    assert!(!err.contains('\r'), "a \\r in stderr: {err:?}");
    assert!(!err.contains('\x1b'), "an escape code in stderr: {err:?}");
}

/// On a terminal of 80 columns (a pty made by `script`, sized with `stty`), every redraw of
/// the status line fits in 79 columns: a longer one wraps and leaves a line per redraw. The
/// line still shows the frames done of the total.
#[test]
fn the_status_line_fits_an_80_column_terminal() {
    let command = format!(
        "stty cols 80 rows 24; exec {FP} run --control none \
         'testsrc width=64 height=48 rate=10 frames=15 ! invert ! invert name=second-invert \
         ! invert name=third-invert ! invert name=fourth-invert ! nullsink'"
    );
    let out = run(
        Command::new("script").args(["-qec", &command, "/dev/null"]),
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let redraws: Vec<String> = text
        .split(['\r', '\n'])
        .map(|piece| piece.replace("\x1b[K", ""))
        // The status line's redraws; the end's summary line is not one.
        .filter(|piece| piece.contains(" fps") && !piece.starts_with("framepipe:"))
        .collect();
    assert!(!redraws.is_empty(), "no status line drawn: {text:?}");
    for r in &redraws {
        assert!(
            r.chars().count() < 80,
            "{} columns: {r:?}",
            r.chars().count()
        );
    }
    assert!(
        redraws.iter().any(|r| r.contains("/15 (")),
        "the status line shows frames of the total: {text:?}"
    );
}
