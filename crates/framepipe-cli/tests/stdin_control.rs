//! Issue #7, the stdin command channel, through the real binary: bounded line length, invalid
//! UTF-8 skipped, `stop` never lost to a full queue, the end of input while paused, and a
//! source reading stdin never sharing it with the command reader.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{feed, peak_rss, spawn, tmpdir, wait, FP};

/// An endless small paced run that only a command (or a signal) ends.
const ENDLESS: &str = "testsrc width=64 height=48 frames=0 ! frei0r-glow ! nullsink";

#[test]
fn a_line_without_newlines_is_skipped_without_growing_memory() {
    let mut child = spawn(&["run", "-q", ENDLESS]);
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before = peak_rss(pid);
    // 100 MB without a newline, in 1 MB writes.
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..100 {
        stdin.write_all(&chunk).unwrap();
    }
    stdin.flush().unwrap();
    // The reader has consumed all but what the pipe buffers; let it take the rest.
    std::thread::sleep(Duration::from_millis(200));
    let after = peak_rss(pid);
    // Then the command after it still works.
    stdin.write_all(b"\nstop\n").unwrap();
    let done = wait(child, Duration::from_secs(20), "stop after a 100 MB line");
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(
        after < before + (16 << 20),
        "peak RSS grew from {before} to {after} bytes reading a 100 MB line"
    );
    assert!(done.status.success(), "{err}");
    assert!(err.contains("longer than 4096 bytes; skipped"), "{err}");
}

#[test]
fn invalid_utf8_is_reported_and_later_commands_still_work() {
    let mut child = spawn(&["run", "-q", ENDLESS]);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"set 1.blur \xff\xfe\n").unwrap();
    stdin.write_all(b"set 1.blur 0.25\nstop\n").unwrap();
    // stdin stays open: only `stop` can end this run.
    let done = wait(child, Duration::from_secs(20), "stop after a bad line");
    drop(stdin);
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert!(err.contains("command line 1 is not UTF-8"), "{err}");
}

#[test]
fn stop_is_never_lost_to_a_full_queue() {
    // The sink blocks on a stdout nobody reads yet, so the engine stops reading commands: 2,000
    // lines fill the 1024-command queue and the `stop` after them finds it full. Once stdout is
    // read again the run must stop; an endless source never ends it otherwise.
    let mut child = spawn(&[
        "run",
        "-q",
        "--unpaced",
        "testsrc width=64 height=48 frames=0 ! invert ! rawsink location=-",
    ]);
    // `tap`s: commands that are not coalesced (a burst of one `set` or `bypass` reaches the
    // queue as one command, issue #21), so they fill it.
    let mut burst = "tap\n".repeat(2_000);
    burst.push_str("stop\n");
    // Let the sink block first (a few 12 KiB frames fill the pipe): otherwise the engine may
    // read half the burst at its first frame boundaries and the queue never fills.
    std::thread::sleep(Duration::from_millis(500));
    // stdin stays open: only `stop` can end this run.
    let writer = feed(&mut child, burst.into_bytes(), true);
    std::thread::sleep(Duration::from_millis(1000));
    let done = wait(child, Duration::from_secs(20), "stop after a full queue");
    drop(writer.join());
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert!(
        err.contains("command queue full; not applied: tap"),
        "the queue did fill up: {err}"
    );
    assert!(
        err.lines().count() < 10,
        "refusals are counted, not printed one by one: {err}"
    );
}

#[test]
fn end_of_input_while_paused_stops_and_says_so() {
    let child = {
        let mut c = spawn(&["run", "-q", ENDLESS]);
        c.stdin.take().unwrap().write_all(b"pause\n").unwrap(); // and closed
        c
    };
    let done = wait(child, Duration::from_secs(20), "pause then end of input");
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert!(err.contains("stdin closed while paused: stopping"), "{err}");

    // Steps asked for before the end are still released: exactly three frames.
    let dir = tmpdir("eof-steps");
    let out = dir.join("o.rgba");
    let mut c = spawn(&[
        "run",
        "-q",
        "--start-paused",
        &format!(
            "testsrc width=32 height=24 frames=0 ! rawsink location={}",
            out.display()
        ),
    ]);
    c.stdin.take().unwrap().write_all(b"step 3\n").unwrap();
    let done = wait(c, Duration::from_secs(20), "step 3 then end of input");
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert_eq!(std::fs::read(&out).unwrap().len(), 3 * 32 * 24 * 4, "{err}");
}

#[test]
fn a_source_reading_stdin_never_shares_it_with_the_command_reader() {
    let dir = tmpdir("stdin-source");
    let frame = 32 * 24 * 4;
    // Five frames whose bytes are command lines: a command reader on the same stdin would
    // take some of them (and stop the run).
    let line = b"stop\n";
    let input: Vec<u8> = line.iter().copied().cycle().take(5 * frame).collect();
    for location in ["/dev/fd/0", "/proc/self/fd/0", "/dev/stdin", "-"] {
        let out = dir.join("o.rgba");
        let mut c = Command::new(FP)
            .args([
                "run",
                "--unpaced",
                &format!(
                    "rawsrc location={location} format=rgba width=32 height=24 ! rawsink location={}",
                    out.display()
                ),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(&input).unwrap();
        let done = wait(c, Duration::from_secs(20), location);
        let err = String::from_utf8_lossy(&done.stderr);
        assert!(done.status.success(), "{location}: {err}");
        let got = std::fs::read(&out).unwrap();
        assert!(
            got == input,
            "{location}: every byte goes to the source, got {} of {}",
            got.len(),
            input.len()
        );
        assert!(
            err.contains(&format!(
                "rawsrc location={location} reads stdin, so commands are not read"
            )),
            "the user is told where commands went: {err}"
        );
    }
    // Asking for both is an error naming the source.
    let out = Command::new(FP)
        .args([
            "run",
            "--control",
            "stdin",
            "rawsrc location=- format=rgba width=32 height=24 ! nullsink",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("rawsrc location=- reads stdin too"), "{err}");
}

/// The reply lines of one run given `lines` on stdin, one every 200 ms (`stop` ends it).
fn replies_of(quiet: bool, lines: &[&str]) -> String {
    let mut args = vec!["run"];
    if quiet {
        args.push("-q");
    }
    args.push(ENDLESS);
    let mut child = spawn(&args);
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for l in lines {
        stdin.write_all(format!("{l}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
    let done = wait(child, Duration::from_secs(20), "stop after commands");
    drop(stdin);
    let err = String::from_utf8_lossy(&done.stderr).into_owned();
    assert!(done.status.success(), "{err}");
    err
}

/// The frame number of `framepipe: ok 'CMD' from frame N` in `err`.
fn ok_frame(err: &str, cmd: &str) -> u64 {
    let prefix = format!("framepipe: ok '{cmd}' from frame ");
    let line = err
        .lines()
        .map(|l| l.trim_start_matches('\r'))
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no reply to '{cmd}' in:\n{err}"));
    line[prefix.len()..]
        .parse()
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Issue #9: every stdin command gets one reply line on stderr, `ok ... from frame N` or
/// `refused ...: REASON`, and a refusal is reported once (no separate warning).
#[test]
fn every_stdin_command_gets_one_reply_line() {
    let err = replies_of(
        false,
        &["set 1.blur 0.3", "set 1.blurr 1", "bypass 1 on", "stop"],
    );
    let set = ok_frame(&err, "set 1.blur 0.3");
    let bypass = ok_frame(&err, "bypass 1 on");
    let stop = ok_frame(&err, "stop");
    assert!(
        set < bypass && bypass <= stop,
        "{set} {bypass} {stop}\n{err}"
    );
    let refused: Vec<&str> = err
        .lines()
        .map(|l| l.trim_start_matches('\r'))
        .filter(|l| l.contains("blurr"))
        .collect();
    assert_eq!(
        refused,
        ["framepipe: refused 'set 1.blurr 1': unknown property 'blurr' on frei0r-glow; expected one of: blur, isolate, on-crash, stall-ms"],
        "{err}"
    );
    assert_eq!(err.matches("framepipe: ok '").count(), 3, "{err}");
    // The summary comes after every reply.
    let summary = err.find(" frames in ").expect("summary");
    assert!(
        err.rfind("framepipe: ok 'stop'").unwrap() < summary,
        "{err}"
    );
}

// issue #9
/// With `-q`, applied commands are silent and refusals still said.
#[test]
fn quiet_prints_only_refusals() {
    let err = replies_of(true, &["set 1.blur 0.3", "set 1.nosuch 1", "stop"]);
    assert!(!err.contains("framepipe: ok '"), "{err}");
    assert!(
        err.contains("framepipe: refused 'set 1.nosuch 1': unknown property 'nosuch'"),
        "{err}"
    );
    assert_eq!(err.matches("refused").count(), 1, "{err}");
}
