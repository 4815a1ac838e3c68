//! Issue 3 through the real binary: oscillators agree across a parallel chain, pause and single
//! step from stdin, paced output statistics.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FP: &str = env!("CARGO_BIN_EXE_framepipe");

/// A fresh temporary directory `fp-live-NAME-XXXXXX` for one test, removed (with its files) when
/// the returned guard drops, also when the test fails; `FP_KEEP_TMP=1` keeps it.
fn tmpdir(name: &str) -> framepipe_testkit::TestDir {
    framepipe_testkit::tmpdir(&format!("fp-live-{name}"))
}

fn run_ok(args: &[&str]) {
    let out = Command::new(FP)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "framepipe {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Pixels of rows `y0..y1` whose RGB is exactly `rgb`: the shape of the printed digits.
fn glyph_mask(frame: &[u8], w: usize, y0: usize, y1: usize, rgb: [u8; 3]) -> Vec<bool> {
    frame[y0 * w * 4..y1 * w * 4]
        .chunks(4)
        .map(|px| px[..3] == rgb)
        .collect()
}

#[test]
fn two_stamps_on_one_oscillator_print_the_same_value_on_every_frame() {
    let dir = tmpdir("stamps");
    let out = dir.join("out.rgba");
    let (w, h) = (160usize, 64usize);
    // The same oscillator drives two stamps with parallel stages between them (which delay the
    // second stamp relative to the first, on other workers).
    run_ok(&[
        "run",
        "-q",
        "--unpaced",
        "--threads",
        "3",
        &format!(
            "testsrc width={w} height={h} frames=48 pattern=solid color=0,0,0 ! \
             stamp what=value value=~sine:1.5hz:0..1 x=0 y=0 scale=3 ! invert ! invert ! invert ! \
             stamp what=value value=~sine:1.5hz:0..1 x=0 y=32 scale=3 color=1,0,0 ! rawsink location={}",
            out.display()
        ),
    ]);
    let bytes = std::fs::read(&out).unwrap();
    let frame = w * h * 4;
    assert_eq!(bytes.len(), frame * 48);
    let mut distinct = std::collections::HashSet::new();
    for (i, f) in bytes.chunks(frame).enumerate() {
        // Upper stamp: drawn first, then inverted and glowed; lower stamp drawn last. Compare
        // the digits' shapes (rows 0..21 of each box: 7 font rows x scale 3).
        // Upper text: white, inverted three times -> black. Lower text: red.
        let a = glyph_mask(f, w, 0, 21, [0, 0, 0]);
        let b = glyph_mask(f, w, 32, 53, [255, 0, 0]);
        assert!(
            a.iter().any(|p| *p),
            "frame {i}: no digits in the upper stamp"
        );
        assert!(a == b, "frame {i}: the two stamps printed different values");
        distinct.insert(b);
    }
    assert!(
        distinct.len() > 10,
        "the oscillator moved ({} distinct values)",
        distinct.len()
    );
}

#[test]
fn pause_and_single_step_from_stdin_release_exactly_the_next_frames() {
    let (w, h, n) = (32usize, 32usize, 60usize);
    let frame = w * h * 4;
    let pipeline = format!(
        "testsrc width={w} height={h} frames={n} pattern=noise seed=7 ! rawsink location=-"
    );
    // Reference: every frame, to recognise frames by content.
    let reference = Command::new(FP)
        .args(["run", "-q", "--unpaced", "--control", "none", &pipeline])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(reference.status.success());
    let index: HashMap<Vec<u8>, usize> = reference
        .stdout
        .chunks(frame)
        .enumerate()
        .map(|(i, f)| (f.to_vec(), i))
        .collect();
    assert_eq!(index.len(), n, "noise frames are all different");

    let mut child = Command::new(FP)
        .args(["run", "-q", "--fps", "50", "--start-paused", &pipeline])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let start = Instant::now();
    let reader = std::thread::spawn(move || {
        // The gaps below are measured here, on arrival: a reader kept off the CPU by the rest of
        // a loaded machine would read two frames back to back that were released 20 ms apart.
        // Run it as framepipe's output thread runs, under SCHED_FIFO, where permitted.
        realtime_if_permitted();
        let mut got = Vec::new();
        let mut buf = vec![0u8; frame];
        while stdout.read_exact(&mut buf).is_ok() {
            got.push((start.elapsed(), buf.clone()));
        }
        got
    });
    std::thread::sleep(Duration::from_millis(400));
    stdin.write_all(b"step 3\n").unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    stdin.write_all(b"step\n").unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    stdin.write_all(b"resume\n").unwrap();
    stdin.flush().unwrap();
    drop(stdin);
    let got = reader.join().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    let seqs: Vec<usize> = got.iter().map(|(_, f)| index[f]).collect();
    assert_eq!(
        seqs,
        (0..n).collect::<Vec<_>>(),
        "every frame once, in order, none stale"
    );
    let t = |i: usize| got[i].0;
    // Started paused: nothing came out before the first step.
    assert!(t(0) >= Duration::from_millis(380), "frame 0 at {:?}", t(0));
    // Three frames for `step 3`, then exactly one for `step`, the rest after `resume`.
    assert!(
        t(2) < Duration::from_millis(780),
        "third stepped frame at {:?}",
        t(2)
    );
    assert!(
        t(3) >= Duration::from_millis(780),
        "frame 3 before its step: {:?}",
        t(3)
    );
    assert!(
        t(3) < Duration::from_millis(1180),
        "frame 3 after resume: {:?}",
        t(3)
    );
    assert!(
        t(4) >= Duration::from_millis(1180),
        "frame 4 before resume: {:?}",
        t(4)
    );
    // Never two at once: each frame is its own release (a late release followed by an on-time
    // one may come closer than a period, but never back to back).
    for pair in got.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            gap >= Duration::from_millis(3),
            "two frames only {gap:?} apart"
        );
    }
    // Resume without a burst: frame 4 + i is released no earlier than i periods (20 ms) after
    // frame 4, give or take one period of jitter.
    for i in 1..n - 4 {
        let since = t(4 + i) - t(4);
        assert!(
            since + Duration::from_millis(20) >= Duration::from_millis(20 * i as u64),
            "frame {} only {since:?} after frame 4: a burst",
            4 + i
        );
    }
}

#[test]
fn paced_runs_report_lateness_in_stats() {
    let dir = tmpdir("paced");
    let stats = dir.join("s.json");
    let t0 = Instant::now();
    run_ok(&[
        "run",
        "-q",
        "--fps",
        "100",
        "--stats",
        stats.to_str().unwrap(),
        "testsrc width=64 height=64 frames=50 ! nullsink",
    ]);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(480),
        "50 frames at 100 fps took {took:?}"
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(s["frames"], 50);
    assert_eq!(s["paced_fps"], 100.0);
    // Percentiles in order, and the worst no more than a generous 0.5 s late (a broken
    // histogram or a clock that ran away gives NaN, disorder, or seconds).
    let lat = |k: &str| s["lateness_us"][k].as_f64().unwrap_or(f64::NAN);
    let (p50, p99, max) = (lat("p50"), lat("p99"), lat("max"));
    assert!(
        p50 <= p99 && p99 <= max,
        "p50 {p50} <= p99 {p99} <= max {max}"
    );
    assert!(max < 500_000.0, "a frame {max} us late");
    assert!(lat("mean") <= max, "mean {} above max {max}", lat("mean"));
    assert_eq!(s["repeated"], 0);
    assert!(s["late"].as_u64().is_some());
}

/// Puts the calling thread under SCHED_FIFO (priority 10) when the process may; quietly not
/// otherwise.
fn realtime_if_permitted() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler on the calling thread (0) with a valid, initialised parameter.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        eprintln!("reader not real-time: {}", std::io::Error::last_os_error());
    }
}
