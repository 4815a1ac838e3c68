//! Issue #7, values at the boundary and flags, through the real binary with a real frei0r
//! plugin: every value that reaches an element is finite and in range; absurd oscillators,
//! properties, commands, flags and project values are refused with one line naming them, and
//! nothing crashes.
//!
//! The plugin is frei0r-cartoon: given NaN for `diffspace` (an oscillator at 1e308 Hz) it
//! segfaulted the whole process (exit by signal 11) before these checks.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{spawn, tmpdir, wait, FP};

fn fp(args: &[&str]) -> Output {
    let child = Command::new(FP)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait(child, Duration::from_secs(60), &format!("{args:?}"))
}

/// Expects exit 1 with one error line containing every needle, no panic, no crash.
fn refused(args: &[&str], needles: &[&str]) {
    let out = fp(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?} ended {}: {err}",
        out.status
    );
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("framepipe: error"))
        .collect();
    assert_eq!(lines.len(), 1, "{args:?}: {err}");
    for n in needles {
        assert!(lines[0].contains(n), "{args:?}: {:?} lacks {n:?}", lines[0]);
    }
}

fn cartoon(prop: &str) -> String {
    format!("testsrc width=64 height=48 frames=5 ! frei0r-cartoon {prop} ! nullsink")
}

#[test]
fn absurd_oscillators_are_refused_before_they_reach_a_plugin() {
    refused(
        &[
            "run",
            "-q",
            "--unpaced",
            &cartoon("diffspace=~sine:1e308hz:0..1"),
        ],
        &["freq=1e308", "0..=1000 Hz", "diffspace"],
    );
    refused(
        &[
            "run",
            "-q",
            "--unpaced",
            &cartoon("diffspace=~sine:1hz:-1e308..1e308"),
        ],
        &["min=-1e308", "±1e9"],
    );
    refused(
        &[
            "run",
            "-q",
            "--unpaced",
            &cartoon("diffspace=~sine:freq=nan"),
        ],
        &["freq=nan"],
    );
    // The same at the top of the accepted ranges runs, every frame.
    let out = fp(&[
        "run",
        "-q",
        "--unpaced",
        &cartoon("diffspace=~sine:1000hz:-1e9..1e9"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn properties_that_are_not_finite_or_out_of_range_are_refused_naming_the_range() {
    refused(
        &["run", "-q", &cartoon("diffspace=1e308")],
        &["'1e308'", "out of range [0, 1]"],
    );
    refused(
        &["run", "-q", &cartoon("diffspace=nan")],
        &["'nan'", "not a finite number", "[0, 1]"],
    );
    refused(
        &["run", "-q", "testsrc color=1e308,0,0 frames=1 ! nullsink"],
        &["'1e308,0,0'", "[0, 1]"],
    );
}

#[test]
fn commands_with_absurd_values_are_refused_and_the_run_goes_on() {
    let dir = tmpdir("bad-commands");
    let out = dir.join("o.rgba");
    let mut child = spawn(&[
        "run",
        "-q",
        "--start-paused",
        &format!(
            "testsrc width=64 height=48 frames=0 ! frei0r-cartoon ! rawsink location={}",
            out.display()
        ),
    ]);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"set 1.diffspace nan\n\
              set 1.diffspace 1e308\n\
              speed 1e308\n\
              speed 101\n\
              osc 1.diffspace sine freq=1e308\n\
              set 1.diffspace ~sine:1e308hz\n\
              osc 1.diffspace sine min=-1e308 max=1e308\n\
              step 4\n",
        )
        .unwrap();
    let done = wait(child, Duration::from_secs(30), "absurd commands");
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert_eq!(
        std::fs::read(&out).unwrap().len(),
        4 * 64 * 48 * 4,
        "the four frames asked for: {err}"
    );
    for needle in [
        "refused 'set 1.diffspace nan'",
        "refused 'set 1.diffspace 1e308'",
        "bad command 'speed 1e308'",
        "bad command 'speed 101'",
        "bad command 'osc 1.diffspace sine freq=1e308'",
        "bad command 'set 1.diffspace ~sine:1e308hz'",
        "bad command 'osc 1.diffspace sine min=-1e308 max=1e308'",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

#[test]
fn flag_values_that_once_panicked_or_aborted_are_errors_naming_the_value() {
    let p = "testsrc width=64 height=48 frames=2 ! nullsink";
    refused(&["run", "--fps", "1.abcdeé", p], &["'1.abcdeé'"]);
    refused(
        &["run", "--fps", "1/4294967295", p],
        &["'1/4294967295'", "1/3600..=10000"],
    );
    refused(&["run", "--fps", "4294967295", p], &["'4294967295'"]);
    refused(
        &["run", "--stall-timeout", "18446744073709551615", p],
        &["18446744073709551615", "at most 3600000 ms"],
    );
    refused(
        &["run", "--in-flight", "1000000000", p],
        &["1000000000", "at most 256"],
    );
    refused(
        &["run", "--threads", "100000", p],
        &["100000", "4 per core"],
    );
    refused(
        &["run", "--max-memory", "lots", p],
        &["--max-memory", "'lots'"],
    );
    refused(&["run", "--max-memory", "1e400G", p], &["--max-memory"]);
    // A source rate slower than one frame a day is refused by the source itself (paced or not:
    // its timestamps and the stall timeout would overflow); one that cannot be paced, here.
    refused(
        &["run", "testsrc rate=1/4294967295 frames=2 ! nullsink"],
        &["'1/4294967295'", "property 'rate' of testsrc"],
    );
    refused(
        &["run", "testsrc rate=1/7200 frames=2 ! nullsink"],
        &["source's rate", "--fps"],
    );
    // The same limits in a project file, named as such.
    let dir = tmpdir("project-limits");
    for (key, value, needle) in [
        ("threads", "100000", "'threads' in the project file 100000"),
        (
            "in-flight",
            "1000000000",
            "'in-flight' in the project file 1000000000",
        ),
        ("fps", "\"1/4294967295\"", "'fps' in the project file"),
    ] {
        let path = dir.join(format!("{key}.toml"));
        std::fs::write(&path, format!("{key} = {value}\npipeline = \"{p}\"\n")).unwrap();
        refused(&["run", path.to_str().unwrap()], &[needle]);
    }
}

#[test]
fn the_documented_oscillator_table_runs_like_the_compact_form() {
    let dir = tmpdir("osc-table");
    let a = dir.join("a.rgba");
    let b = dir.join("b.rgba");
    let src = "testsrc width=64 height=48 frames=12 pattern=solid color=0,0,0";
    let out = fp(&[
        "run",
        "-q",
        "--unpaced",
        &format!(
            "{src} ! stamp what=value value=~sine:2hz:0..1:phase=0.25 ! rawsink location={}",
            a.display()
        ),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let project = dir.join("show.toml");
    std::fs::write(
        &project,
        format!(
            "unpaced = true\n\
             [[element]]\ntype = \"testsrc\"\nwidth = 64\nheight = 48\nframes = 12\npattern = \"solid\"\ncolor = [0, 0, 0]\n\
             [[element]]\ntype = \"stamp\"\nwhat = \"value\"\nvalue = {{ osc = \"sine\", freq = 2, min = 0, max = 1, phase = 0.25 }}\n\
             [[element]]\ntype = \"rawsink\"\nlocation = \"{}\"\n",
            b.display()
        ),
    )
    .unwrap();
    let out = fp(&["run", "-q", project.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (a, b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_eq!(a.len(), 12 * 64 * 48 * 4);
    assert!(
        a == b,
        "the table drives the stamp exactly like the compact form"
    );

    // Both forms of pipeline in one file: an error, not one silently ignored.
    let both = dir.join("both.toml");
    std::fs::write(
        &both,
        "pipeline = \"testsrc frames=1 ! nullsink\"\n[[element]]\ntype = \"testsrc\"\n",
    )
    .unwrap();
    refused(&["run", both.to_str().unwrap()], &["both", "keep one"]);
}
