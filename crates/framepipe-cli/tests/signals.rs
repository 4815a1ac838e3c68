//! Issue #7, signals, through the real binary and real signals: SIGINT and SIGTERM stop the run
//! at a frame boundary (every sink ends on a whole frame, an mp4 stays playable), `--stats` is
//! written and the exit status is 128 + the signal; a second SIGINT quits at once; a closed
//! stdout or stderr ends the run with a clear status, never a panic.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{ffprobe_frames, file_len, kill, spawn, tmpdir, wait, wait_until, FP};

const W: u64 = 320;
const H: u64 = 240;

/// Runs `pipeline` (paced at 50 fps, endless), waits for `min_bytes` of output in `out`, sends
/// `sig`, and returns the exit code, stderr and the stats file's frame count.
fn stop_with(
    sig: &str,
    dir: &Path,
    pipeline: &str,
    out: &Path,
    min_bytes: u64,
) -> (i32, String, u64) {
    let stats = dir.join(format!("stats-{sig}.json"));
    let child = spawn(&[
        "run",
        "-q",
        "--fps",
        "50",
        "--stats",
        stats.to_str().unwrap(),
        pipeline,
    ]);
    let pid = child.id();
    wait_until(Duration::from_secs(30), "output grows", || {
        file_len(out) >= min_bytes
    });
    kill(pid, sig);
    let done = wait(child, Duration::from_secs(20), pipeline);
    let err = String::from_utf8_lossy(&done.stderr).to_string();
    assert!(!err.contains("panicked"), "{err}");
    let s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&stats)
            .unwrap_or_else(|e| panic!("stats not written: {e}; {err}")),
    )
    .unwrap();
    let frames = s["frames"].as_u64().unwrap();
    (done.status.code().expect("exited, not killed"), err, frames)
}

#[test]
fn sigint_stops_a_y4m_recording_on_a_whole_frame_writes_stats_and_exits_130() {
    let dir = tmpdir("sigint-y4m");
    let out = dir.join("o.y4m");
    let frame = 6 + W * H * 3 / 2; // "FRAME\n" + 4:2:0
    let (code, err, frames) = stop_with(
        "INT",
        &dir,
        &format!(
            "testsrc width={W} height={H} frames=0 ! y4msink location={}",
            out.display()
        ),
        &out,
        10 * frame,
    );
    assert_eq!(code, 130, "{err}");
    assert!(err.contains("SIGINT"), "{err}");
    let bytes = std::fs::read(&out).unwrap();
    let header = bytes.iter().position(|&b| b == b'\n').unwrap() as u64 + 1;
    let body = bytes.len() as u64 - header;
    assert_eq!(
        body % frame,
        0,
        "ends on a whole frame: {body} bytes after the header"
    );
    assert_eq!(
        body / frame,
        frames,
        "the stats count the frames in the file"
    );
    assert!(frames >= 10);
}

#[test]
fn sigterm_stops_a_raw_recording_on_a_whole_frame_writes_stats_and_exits_143() {
    let dir = tmpdir("sigterm-raw");
    let out = dir.join("o.rgba");
    let frame = W * H * 4;
    let (code, err, frames) = stop_with(
        "TERM",
        &dir,
        &format!(
            "testsrc width={W} height={H} frames=0 ! rawsink location={}",
            out.display()
        ),
        &out,
        10 * frame,
    );
    assert_eq!(code, 143, "{err}");
    assert!(err.contains("SIGTERM"), "{err}");
    let len = file_len(&out);
    assert_eq!(len % frame, 0, "ends on a whole frame: {len} bytes");
    assert_eq!(len / frame, frames);
}

#[test]
fn sigint_leaves_an_mp4_from_ffmpegsink_playable() {
    let dir = tmpdir("sigint-mp4");
    let out = dir.join("o.mp4");
    let (code, err, frames) = stop_with(
        "INT",
        &dir,
        &format!(
            "testsrc width={W} height={H} frames=0 ! ffmpegsink location={}",
            out.display()
        ),
        &out,
        1, // ffmpeg has written something
    );
    assert_eq!(code, 130, "{err}");
    // ffprobe decodes the whole file: a missing moov atom (ffmpeg killed) fails here.
    let decoded = ffprobe_frames(&dir, &out.display().to_string());
    assert_eq!(
        decoded, frames,
        "every frame that left the pipeline is in the file"
    );
    assert!(frames > 0);
}

#[test]
fn a_second_sigint_quits_at_once_with_130() {
    // A source blocked reading an empty stdin: the first SIGINT asks for a stop at a frame
    // boundary that may never come; the second quits.
    let child = spawn(&[
        "run",
        "-q",
        "rawsrc location=- format=rgba width=32 height=24 ! nullsink",
    ]);
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(500));
    kill(pid, "INT");
    std::thread::sleep(Duration::from_millis(300));
    // Still running or already stopped by the first: either way it ends with 130 now.
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    let done = wait(child, Duration::from_secs(5), "second SIGINT");
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(130), "{err}");
    assert!(err.contains("SIGINT"), "{err}");
}

#[test]
fn a_closed_stdout_ends_the_run_with_status_141_and_a_message() {
    let mut child = Command::new(FP)
        .args([
            "run",
            "-q",
            "--unpaced",
            "testsrc width=64 height=48 frames=0 ! rawsink location=-",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `| head -c 100`: read a little, then close the pipe.
    let mut first = [0u8; 100];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let done = wait(child, Duration::from_secs(20), "closed stdout");
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(141), "{err}");
    assert!(err.contains("stdout was closed"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn an_error_printed_to_a_closed_stderr_does_not_panic() {
    let mut child = Command::new(FP)
        .args(["run", "testsrc ! frei0r-glwo ! nullsink"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the error is printed: writing it gives EPIPE.
    drop(child.stderr.take());
    let done = wait(child, Duration::from_secs(30), "closed stderr");
    assert_eq!(
        done.status.code(),
        Some(1),
        "an error status, not a panic (101)"
    );
}
