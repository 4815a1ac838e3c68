//! frei0r generators (sources) as a performer uses them (issue #22, item 3), through the real
//! `framepipe` binary and Debian's `onecol0r` (one colour, its parameter `color`): endless by
//! default like testsrc, `frames=N` still ending the run, and then one line saying which source
//! ended it after how many frames; their parameters set while running like an effect's, and
//! the size refused (it is read when the node starts).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{file_len, tmpdir, wait_until};

const SIDE: usize = 16;
const FRAME: usize = SIDE * SIDE * 4;

/// The first pixel (RGBA) of every whole frame in `path`.
fn first_pixels(path: &Path) -> Vec<[u8; 4]> {
    let b = std::fs::read(path).unwrap_or_default();
    b.chunks_exact(FRAME)
        .map(|f| [f[0], f[1], f[2], f[3]])
        .collect()
}

#[test]
fn a_frei0r_generator_is_endless_by_default() {
    let dir = tmpdir("gen-endless");
    let out = dir.join("a.rgba");
    let child = common::spawn(&[
        "run",
        "-q",
        "--unpaced",
        "--control",
        "none",
        &format!(
            "frei0r-onecol0r width={SIDE} height={SIDE} ! rawsink location={}",
            out.display()
        ),
    ]);
    // Far past the 300 frames that used to end it (12 s at 25 fps).
    let pid = child.id();
    wait_until(Duration::from_secs(30), "1000 frames", || {
        file_len(&out) as usize >= 1000 * FRAME
    });
    common::kill(pid, "INT");
    let done = common::wait(child, Duration::from_secs(20), "framepipe");
    assert_eq!(
        done.status.code(),
        Some(130),
        "stopped by SIGINT, not ended: {}",
        String::from_utf8_lossy(&done.stderr)
    );
}

#[test]
fn a_source_that_ends_the_run_says_so_once() {
    let dir = tmpdir("gen-frames");
    let out = dir.join("b.rgba");
    let done = common::run(
        std::process::Command::new(common::FP).args([
            "run",
            "--unpaced",
            "--control",
            "none",
            &format!(
                "frei0r-onecol0r name=gen width={SIDE} height={SIDE} frames=10 ! rawsink location={}",
                out.display()
            ),
        ]),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert_eq!(first_pixels(&out).len(), 10);
    assert_eq!(
        err.matches("framepipe: gen ended after 10 frames: the run ends")
            .count(),
        1,
        "{err}"
    );
}

#[test]
fn a_frei0r_generators_parameter_changes_while_running() {
    let dir = tmpdir("gen-set");
    let out = dir.join("c.rgba");
    let mut child = common::spawn(&[
        "run",
        "--fps",
        "30",
        &format!(
            "frei0r-onecol0r name=gen width={SIDE} height={SIDE} color=0,0,1 ! rawsink location={}",
            out.display()
        ),
    ]);
    let err = Arc::new(Mutex::new(String::new()));
    {
        let err = Arc::clone(&err);
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut e = err.lock().unwrap();
                e.push_str(&line);
                e.push('\n');
            }
        });
    }
    let said = |needle: &str| err.lock().unwrap().contains(needle);
    wait_until(Duration::from_secs(20), "5 frames", || {
        first_pixels(&out).len() >= 5
    });
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"set gen.color 1,0,0\n").unwrap();
    stdin.flush().unwrap();
    wait_until(Duration::from_secs(20), "a red frame", || {
        first_pixels(&out).last() == Some(&[255, 0, 0, 255])
    });
    // The size is read when the node starts: refused at once, with the reason.
    stdin.write_all(b"set gen.width 32\n").unwrap();
    stdin.flush().unwrap();
    wait_until(Duration::from_secs(20), "the refusal", || {
        said("gen.width cannot change while running: it is read when the node starts")
    });
    stdin.write_all(b"stop\n").unwrap();
    drop(stdin);
    let done = common::wait(child, Duration::from_secs(20), "framepipe");
    let err = err.lock().unwrap().clone();
    assert!(done.status.success(), "{err}");
    assert!(!err.contains("not an effect"), "{err}");
    // Blue until the set, red from the frame its reply named on, and nothing else.
    let px = first_pixels(&out);
    let from: usize = err
        .lines()
        .find(|l| l.contains("set gen.color"))
        .and_then(|l| l.split("from frame ").nth(1))
        .and_then(|n| n.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no 'from frame N' reply: {err}"));
    for (i, p) in px.iter().enumerate() {
        let want = if i < from {
            [0, 0, 255, 255]
        } else {
            [255, 0, 0, 255]
        };
        assert_eq!(*p, want, "frame {i} (the set from frame {from}): {err}");
    }
}
