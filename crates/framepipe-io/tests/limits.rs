//! Sizes from outside (file headers, properties) are checked before anything frame-sized is
//! allocated: against what a regular file holds and against the memory budget.
//!
//! This file is its own test binary, so the process-wide budget it sets ([`BUDGET`], the same
//! in every test) does not leak into other tests.

mod common;
use common::*;

use framepipe_core::Limits;

/// 64 MiB: one frame may take 8 MiB (1448x1448 RGBA fits, 2048x2048 does not).
const BUDGET: u64 = 64 << 20;

fn budget() {
    Limits { max_memory: BUDGET }.set();
}

fn y4m_file(d: &std::path::Path, name: &str, header: &str, body: usize) -> String {
    let path = d.join(name);
    let mut bytes = format!("{header}\n").into_bytes();
    bytes.resize(bytes.len() + body, 0x10);
    std::fs::write(&path, bytes).unwrap();
    s(&path).to_string()
}

#[test]
fn a_y4m_header_claiming_more_than_the_file_holds_is_refused_at_once() {
    budget();
    let d = dir("limits-y4m-short");
    // Within the budget (64x64), but 10 bytes cannot hold "FRAME\n" and 6144 bytes of 4:2:0.
    let path = y4m_file(&d, "short.y4m", "YUV4MPEG2 W64 H64 F25:1", 10);
    let e = try_create("y4msrc", &[("location", &path)]).unwrap_err();
    assert_eq!(
        e,
        format!(
            "y4msrc: {path}: header says 64x64 (6.0 KiB a frame) but the file holds 10 B, \
             not one whole frame"
        )
    );
    // A header and nothing else is an empty stream, not an error.
    let empty = y4m_file(&d, "empty.y4m", "YUV4MPEG2 W64 H64 F25:1", 0);
    let mut src = source("y4msrc", &[("location", &empty)]);
    let (frames, err) = read_all(src.as_mut(), 10);
    assert_eq!((frames.len(), err), (0, None));
}

#[test]
fn a_y4m_header_over_the_budget_is_refused_before_reading_a_frame() {
    budget();
    let d = dir("limits-y4m-budget");
    // One whole frame of 2048x2048 4:2:0 is there, so only the budget can refuse it.
    let path = y4m_file(
        &d,
        "big.y4m",
        "YUV4MPEG2 W2048 H2048 F25:1",
        6 + 2048 * 2048 * 3 / 2,
    );
    let e = try_create("y4msrc", &[("location", &path)]).unwrap_err();
    assert_eq!(
        e,
        format!(
            "y4msrc: {path}: header: a frame of 2048x2048 would take 16.0 MiB, over the limit of \
             8.0 MiB; one frame may take 1/8 of --max-memory (64.0 MiB); raise it with --max-memory"
        )
    );
    let ok = y4m_file(&d, "ok.y4m", "YUV4MPEG2 W1024 H1024 F25:1", 0);
    assert!(try_create("y4msrc", &[("location", &ok)]).is_ok());
}

#[test]
fn raw_sizes_are_checked_against_the_file_and_the_budget() {
    budget();
    let d = dir("limits-raw");
    let path = d.join("in.raw");
    std::fs::write(&path, vec![1u8; 1000]).unwrap();
    let loc = s(&path);
    let e = try_create(
        "rawsrc",
        &[
            ("location", loc),
            ("width", "32"),
            ("height", "32"),
            ("format", "rgb24"),
        ],
    )
    .unwrap_err();
    assert_eq!(
        e,
        format!(
            "rawsrc: {loc}: width=32 height=32 format=rgb24 (3.0 KiB a frame) but the file holds \
             1000 B, not one whole frame"
        )
    );
    let e = try_create(
        "rawsrc",
        &[("location", loc), ("width", "4096"), ("height", "4096")],
    )
    .unwrap_err();
    assert!(
        e.starts_with(&format!(
            "rawsrc: {loc}: a frame of 4096x4096 would take 64.0 MiB, over the limit of 8.0 MiB"
        )),
        "{e}"
    );
    // 1000 bytes of 10x10 rgb24 frames: three whole frames and a cut one, as before.
    assert!(try_create(
        "rawsrc",
        &[
            ("location", loc),
            ("width", "10"),
            ("height", "10"),
            ("format", "rgb24"),
        ],
    )
    .is_ok());
}

#[test]
fn testsrc_checks_its_size_against_the_budget() {
    budget();
    let e = try_create("testsrc", &[("width", "4096"), ("height", "4096")]).unwrap_err();
    assert!(
        e.starts_with(
            "testsrc: a frame of 4096x4096 would take 64.0 MiB, over the limit of 8.0 MiB"
        ),
        "{e}"
    );
    assert!(try_create("testsrc", &[("width", "1024"), ("height", "1024")]).is_ok());
}
