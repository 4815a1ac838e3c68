//! A paced show starts on time (#22 item 6): every sink and source is ready before the frame
//! clock starts, so the first frames do not wait for an ffmpeg encoder to load, and the
//! start-up is not reported as a stall. Through the real binary and the real ffmpeg.
//!
//! `ffmpegsink` holds up to 8 frames ahead of its encoder, so an encoder that loads in less
//! than 8 periods would hide a clock started too early. The ffmpeg run here is the real one,
//! started late: `PATH` first names a script `ffmpeg` that sleeps [`SLOW_START_S`] (a loaded
//! machine's start-up), then execs the real ffmpeg. Started before ffmpeg reads its pipe, the
//! clock would have the 9th frame wait for it, and the next ones late by a few hundred ms; the
//! rate is low (25 fps, 160x120) so that this machine's noise makes no frame late.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{ffprobe_frames, run, tmpdir, FP};
use serde_json::Value;

/// How long the wrapped ffmpeg sleeps before it starts: well over the sink's 8 frames ahead
/// at 25 fps (320 ms).
const SLOW_START_S: &str = "0.6";

/// The real ffmpeg on `PATH`.
fn real_ffmpeg() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("ffmpeg"))
        .find(|p| p.is_file())
        .expect("ffmpeg on PATH")
}

#[test]
fn a_paced_run_into_a_slow_starting_ffmpeg_encoder_has_no_late_frame_and_no_start_up_stall() {
    let dir = tmpdir("start-on-time");
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let wrapper = bin.join("ffmpeg");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nsleep {SLOW_START_S}\nexec '{}' \"$@\"\n",
            real_ffmpeg().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.clone())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let stats = dir.join("stats.json");
    let out = run(
        Command::new(FP)
            .current_dir(dir.path())
            .env("PATH", path)
            .args([
                "run",
                "--control",
                "none",
                "--stats",
                stats.to_str().unwrap(),
                // Each frame begins 50 ms before its deadline: a worker that loses its CPU for a
                // few ms on this shared machine does not make a frame late; an encoder's start-up
                // would.
                "--latency",
                "50",
                "testsrc width=160 height=120 rate=25 frames=20 ! ffmpegsink location=out.mp4",
            ]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert_eq!(doc["frames"].as_u64(), Some(20), "{doc}");
    assert_eq!(doc["paced_fps"].as_f64(), Some(25.0), "{doc}");
    assert_eq!(
        doc["late"].as_u64(),
        Some(0),
        "frames late at the start: {}; stderr: {err}",
        doc["late_frames"]
    );
    assert!(
        !err.contains("stalled"),
        "a start-up reported as a stall: {err}"
    );
    assert_eq!(ffprobe_frames(dir.path(), "out.mp4"), 20);
}
