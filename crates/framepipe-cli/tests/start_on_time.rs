//! A paced show starts on time (#22 item 6): every sink and source is ready before the frame
//! clock starts, so the first frames do not wait for an ffmpeg encoder to load, and the
//! start-up is not reported as a stall. Through the real binary and the real ffmpeg.
//!
//! The rate is low (10 fps, 160x120) on purpose: the encoder's start-up (tens to hundreds of ms)
//! is then far above this shared machine's noise, so a late frame means the start, not the noise.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{ffprobe_frames, run, tmpdir, FP};
use serde_json::Value;

#[test]
fn a_paced_run_into_an_ffmpeg_encoder_has_no_late_frame_and_no_start_up_stall() {
    let dir = tmpdir("start-on-time");
    let stats = dir.join("stats.json");
    let out = run(
        Command::new(FP).current_dir(dir.path()).args([
            "run",
            "--control",
            "none",
            "--stats",
            stats.to_str().unwrap(),
            // Each frame begins 50 ms before its deadline: a worker that loses its CPU for a
            // few ms on this shared machine does not make a frame late; an encoder's start-up
            // (80 ms to seconds here) would.
            "--latency",
            "50",
            "testsrc width=160 height=120 rate=10 frames=12 ! ffmpegsink location=out.mp4",
        ]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert_eq!(doc["frames"].as_u64(), Some(12), "{doc}");
    assert_eq!(doc["paced_fps"].as_f64(), Some(10.0), "{doc}");
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
    assert_eq!(ffprobe_frames(dir.path(), "out.mp4"), 12);
}
