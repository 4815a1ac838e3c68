//! Issue 7, requirement 1: nothing untrusted decides an allocation alone, and pools hold what the
//! run needs. One test per input path, each running the real `framepipe` binary and reading its
//! peak resident memory from `wait4` (`framepipe_testkit::child::run`): the bad input must be
//! refused with a message naming what was asked, the limit and how to raise it, *while peak RSS
//! stays far below what the old code took* (it allocated and wrote `2 * in_flight + 4` frames
//! per pool before the first frame).

use std::process::Command;
use std::time::Duration;

use framepipe_testkit::child::{self, Finished};

const FP: &str = env!("CARGO_BIN_EXE_framepipe");
const MIB: u64 = 1 << 20;
/// One 3840x2160 RGBA frame.
const UHD_FRAME: u64 = 3840 * 2160 * 4;
/// What the binary takes with small frames (code, libraries, threads' stacks touched), with
/// room: measured 35-36 MiB for a refused run (debug build) since the binary links FFmpeg's
/// libraries for in-process decoding (framepipe-clip: 137 shared libraries mapped and
/// relocated at start; 5 MiB before). Still under one 4K frame (32 MiB) of room: a frame
/// allocated where none should be fails every bound below.
const BASE_RSS: u64 = 48 * MIB;

/// A fresh temporary directory `fp-mem-NAME-XXXXXX` for one test, removed (with its files) when
/// the returned guard drops, also when the test fails; `FP_KEEP_TMP=1` keeps it.
fn tmpdir(name: &str) -> framepipe_testkit::TestDir {
    framepipe_testkit::tmpdir(&format!("fp-mem-{name}"))
}

fn framepipe(args: &[&str]) -> Finished {
    child::run(Command::new(FP).args(args), Duration::from_secs(120))
}

/// A refusal: exit status 1, one error line holding every `needles`, no panic.
fn refused(f: &Finished, needles: &[&str]) -> String {
    assert_eq!(f.code, Some(1), "exit status; stderr: {}", f.stderr);
    assert!(!f.stderr.contains("panicked"), "{}", f.stderr);
    let line = f
        .stderr
        .lines()
        .find(|l| l.starts_with("framepipe: error"))
        .unwrap_or_else(|| panic!("no error line: {}", f.stderr))
        .to_string();
    for n in needles {
        assert!(line.contains(n), "error should mention {n:?}: {line}");
    }
    line
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / MIB as f64)
}

#[test]
fn a_y4m_file_whose_header_claims_more_than_it_holds_is_refused_at_once() {
    // 1 KiB on disk claiming 16384x16384 frames (384 MiB of 4:2:0 each, 1 GiB in RGBA): the old
    // code made 16 such RGBA frames before reading a byte of picture.
    let dir = tmpdir("y4m-short");
    let path = dir.join("in.y4m");
    let header = b"YUV4MPEG2 W16384 H16384 F25:1 C420jpeg\n";
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(b"FRAME\n");
    bytes.resize(1024, 0x80);
    let holds = format!(
        "the file holds {} B, not one whole frame",
        1024 - header.len()
    );
    std::fs::write(&path, &bytes).unwrap();
    let f = framepipe(&[
        "run",
        "-q",
        &format!("y4msrc location={} ! nullsink", path.display()),
    ]);
    refused(&f, &["in.y4m: header says 16384x16384", &holds]);
    assert!(
        f.max_rss_bytes < BASE_RSS,
        "peak RSS {} while refusing a 1 KiB file",
        mib(f.max_rss_bytes)
    );
}

#[test]
fn a_raw_file_shorter_than_one_frame_of_the_given_size_is_refused_at_once() {
    let dir = tmpdir("raw-short");
    let path = dir.join("in.rgba");
    std::fs::write(&path, vec![7u8; 4096]).unwrap();
    let f = framepipe(&[
        "run",
        "-q",
        &format!(
            "rawsrc location={} width=8192 height=8192 format=rgb24 ! nullsink",
            path.display()
        ),
    ]);
    refused(
        &f,
        &[
            "width=8192 height=8192 format=rgb24 (192 MiB a frame)",
            "the file holds 4.0 KiB, not one whole frame",
        ],
    );
    assert!(
        f.max_rss_bytes < BASE_RSS,
        "peak RSS {}",
        mib(f.max_rss_bytes)
    );
}

#[test]
fn a_huge_in_flight_on_an_endless_source_is_refused_with_the_figures() {
    // 200 frames of 4K in flight is 6.2 GiB, over a 4 GiB budget (--in-flight itself is capped
    // at 256). The old code began allocating 404 frames per pool.
    let f = framepipe(&[
        "run",
        "-q",
        "--unpaced",
        "--max-memory",
        "4G",
        "--threads",
        "2",
        "--in-flight",
        "200",
        "testsrc width=3840 height=2160 ! invert ! nullsink",
    ]);
    refused(
        &f,
        &[
            "frame pools (203 frames of 3840x2160",
            "200 frames in flight",
            "over the limit of",
            "--max-memory",
        ],
    );
    assert!(
        f.max_rss_bytes < BASE_RSS,
        "peak RSS {} while refusing",
        mib(f.max_rss_bytes)
    );
}

#[test]
fn a_4k_run_holds_only_the_frames_it_uses() {
    // Unpaced: pools grow on demand. Two workers, one parallel effect: at most 3 frames in
    // flight (the 4K default) + 2 being written = 5 (the pool's sixth is for a sink that keeps
    // a frame; nullsink does not). Measured: 163 MiB. The old code wrote 2 * 6 + 4 = 16 frames
    // (511 MiB) before the first frame.
    let f = framepipe(&[
        "run",
        "-q",
        "--unpaced",
        "--threads",
        "2",
        "testsrc width=3840 height=2160 frames=12 ! invert ! nullsink",
    ]);
    assert_eq!(f.code, Some(0), "{}", f.stderr);
    let bound = BASE_RSS + 5 * UHD_FRAME;
    assert!(
        f.max_rss_bytes < bound,
        "peak RSS {} over {} (5 frames of 4K)",
        mib(f.max_rss_bytes),
        mib(bound)
    );
}

#[test]
fn a_one_frame_run_allocates_no_more_than_it_needs() {
    // One frame: one in flight, the source's frame and invert's output, whether paced (the
    // pools are filled ahead, but only with what the run can use: the pool's third frame is for
    // a sink that keeps one, and nullsink does not) or unpaced (grown on demand). Measured
    // 68 MiB both. The old code wrote 16 frames (511 MiB).
    for pacing in ["--unpaced", "--fps=30"] {
        let f = framepipe(&[
            "run",
            "-q",
            pacing,
            "--threads",
            "2",
            "testsrc width=3840 height=2160 frames=1 ! invert ! nullsink",
        ]);
        assert_eq!(f.code, Some(0), "{pacing}: {}", f.stderr);
        let bound = BASE_RSS + 2 * UHD_FRAME;
        assert!(
            f.max_rss_bytes < bound,
            "{pacing}: peak RSS {} over {} (2 frames of 4K)",
            mib(f.max_rss_bytes),
            mib(bound)
        );
    }
}

// The two tests below need `--max-memory`: with the
// machine's default budget (at most 8 GiB, so at most 1 GiB a frame) no y4m header can be over
// budget on a large machine.

#[test]
fn a_y4m_header_over_the_budget_from_a_pipe_is_refused_before_reading_a_frame() {
    // A pipe has no size to compare with: the header alone is checked against the budget.
    // 8192x8192 RGBA is 256 MiB, over 1/8 of 1 GiB. The old code wrote 16 such frames.
    let f = child::run(
        Command::new("sh").args([
            "-c",
            "printf 'YUV4MPEG2 W8192 H8192 F25:1\\nFRAME\\n' | \
             exec \"$0\" run -q --max-memory 1G 'y4msrc location=- ! nullsink'",
            FP,
        ]),
        Duration::from_secs(120),
    );
    refused(
        &f,
        &[
            "y4msrc: stdin: header: a frame of 8192x8192 would take 256 MiB",
            "over the limit of 128 MiB",
            "1/8 of --max-memory (1.0 GiB)",
            "raise it with --max-memory",
        ],
    );
    assert!(
        f.max_rss_bytes < BASE_RSS,
        "peak RSS {} while refusing",
        mib(f.max_rss_bytes)
    );
}

#[test]
fn a_4k_pipeline_over_max_memory_is_refused_with_the_figures() {
    // 256 MiB holds one 4K frame per 1/8 share, but not 40 in flight.
    let f = framepipe(&[
        "run",
        "-q",
        "--max-memory",
        "256M",
        "--threads",
        "2",
        "--in-flight",
        "40",
        "testsrc width=3840 height=2160 ! frei0r-glow ! nullsink",
    ]);
    refused(
        &f,
        &[
            "frame pools (43 frames of 3840x2160",
            "40 frames in flight on 2 threads",
            "over the limit of 256 MiB",
            "--max-memory",
        ],
    );
    assert!(
        f.max_rss_bytes < BASE_RSS,
        "peak RSS {} while refusing",
        mib(f.max_rss_bytes)
    );
}
