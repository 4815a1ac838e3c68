//! What fuzzing the parsers found (docs/RELIABILITY.md), through the real `framepipe`
//! binary and real files: each bad input ends the run with exit status 1 and one line naming the
//! problem, never a panic (exit status 101).

use std::process::{Command, Stdio};

const FP: &str = env!("CARGO_BIN_EXE_framepipe");

/// A fresh temporary directory `fp-fuzz-findings-NAME-XXXXXX` for one test, removed (with its files) when
/// the returned guard drops, also when the test fails; `FP_KEEP_TMP=1` keeps it.
fn tmpdir(name: &str) -> framepipe_testkit::TestDir {
    framepipe_testkit::tmpdir(&format!("fp-fuzz-findings-{name}"))
}

/// Runs `framepipe run -q ARGS` (stdin closed) and expects exit status 1 with `needle` on the
/// only line of stderr.
fn refused_with(args: &[&str], needle: &str) {
    let out = Command::new(FP)
        .args(["run", "-q"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

fn refused(arg: &str, needle: &str) {
    refused_with(&[arg], needle)
}

/// A y4m header tag whose first character is not ASCII panicked the header parser.
#[test]
fn a_y4m_header_tag_that_is_not_ascii_ends_the_run_with_an_error_not_a_panic() {
    let d = tmpdir("y4m-tag");
    let path = d.join("bad.y4m");
    let mut bytes = "YUV4MPEG2 W2 H2 F25:1 é\nFRAME\n".as_bytes().to_vec();
    bytes.extend([128u8; 6]);
    std::fs::write(&path, bytes).unwrap();
    refused(
        &format!("y4msrc location={} ! nullsink", path.display()),
        "unknown tag (tag 4 after YUV4MPEG2",
    );
}

/// A project file could name a property that no pipeline string can hold (`"a=b" = 1`).
#[test]
fn a_project_file_property_name_with_equals_is_refused_naming_it() {
    let d = tmpdir("toml-name");
    let path = d.join("p.toml");
    std::fs::write(
        &path,
        "[[element]]\ntype = \"testsrc\"\n\"frames=3\" = 1\n[[element]]\ntype = \"nullsink\"\n",
    )
    .unwrap();
    refused(
        path.to_str().unwrap(),
        "property name 'frames=3' on testsrc may not contain '='",
    );
}

/// A frame rate of one frame in 136 years (`1/4294967295`), from a y4m header, `--fps` or a
/// `rate=` property, overflowed the runtime's stall timeout (five periods) and panicked it; a
/// `--fps` fraction of more than six digits ending in a non-ASCII character panicked the rate
/// parser. Both are refused where they enter.
#[test]
fn absurd_frame_rates_end_the_run_with_an_error_not_a_panic() {
    let d = tmpdir("rates");
    let path = d.join("slow.y4m");
    let mut bytes = b"YUV4MPEG2 W2 H2 F1:4294967295 C444\nFRAME\n".to_vec();
    bytes.extend([128u8; 12]);
    std::fs::write(&path, bytes).unwrap();
    refused(
        &format!("y4msrc location={} ! nullsink", path.display()),
        "the frame rate F1:4294967295 is out of range",
    );
    refused_with(
        &["--fps", "1/4294967295", "testsrc frames=2 ! nullsink"],
        "1/4294967295",
    );
    refused_with(
        &["--fps", "1.00000é", "testsrc frames=2 ! nullsink"],
        "1.00000é",
    );
    refused(
        "testsrc frames=2 rate=1/4294967295 ! nullsink",
        "1/4294967295",
    );
}
