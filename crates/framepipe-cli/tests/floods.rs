//! Issue #21, floods on the control surfaces and a sink that blocks, through the real binary:
//! a flood of `set`s on stdin reaches the engine coalesced (one per property per read, not one
//! per line) and its replies stay few; OSC packets with 60 KB strings and unknown addresses
//! cost stderr a few lines a second, never the values; a megabyte of random MIDI bytes does not
//! lose the valid control change after it; a `tcpsink` whose receiver never reads ends the run
//! at the first SIGTERM with status 143 and `--stats` written. The lateness under each flood is
//! a benchmark (`scripts/bench-floods`), not a test.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{feed, fifo, free_udp_port, kill, spawn, tmpdir, wait, FP};
use rosc::{encoder, OscMessage, OscPacket, OscType};

/// Lines of `text` that contain `needle`.
fn count(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle)).count()
}

/// A flood of `set`s of one property on stdin (20,000 lines, as fast as the pipe takes them)
/// during a 3 s paced run reaches the engine as at most one `set` per read of the engine: the
/// `ok` replies are a few per frame, not one per line, the rest are counted as coalesced, and
/// the last value sent is the one applied.
#[test]
fn a_flood_of_sets_on_stdin_reaches_the_engine_coalesced() {
    const FRAMES: usize = 180;
    const LINES: usize = 20_000;
    let mut child = spawn(&[
        "run",
        "--fps",
        "60",
        &format!("testsrc width=32 height=16 frames={FRAMES} ! stamp what=value ! nullsink"),
    ]);
    let mut flood = String::new();
    for i in 0..LINES {
        flood.push_str(&format!("set stamp.value {}\n", i % 1000));
    }
    flood.push_str("set stamp.value 4242\n");
    let writer = feed(&mut child, flood.into_bytes(), false);
    let done = wait(child, Duration::from_secs(60), "a flood of sets");
    drop(writer.join());
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(
        done.status.success(),
        "{}",
        &err[err.len().saturating_sub(2000)..]
    );
    let ok = count(&err, "ok 'set stamp.value");
    // The engine reads at each frame boundary and while it waits for a frame: a few reads a
    // frame at most.
    assert!(
        (1..=4 * FRAMES).contains(&ok),
        "{ok} 'ok' replies for {LINES} lines in {FRAMES} frames: {}",
        &err[..err.len().min(3000)]
    );
    assert!(
        err.contains("ok 'set stamp.value 4242'"),
        "the last value is applied: {}",
        &err[err.len().saturating_sub(2000)..]
    );
    let coalesced: usize = err
        .lines()
        .find_map(|l| {
            l.split("framepipe: ")
                .nth(1)?
                .strip_suffix(" (coalesced: a frame shows one value per property)")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| {
            panic!(
                "no coalesced count: {}",
                &err[err.len().saturating_sub(2000)..]
            )
        });
    // Every line was either posted (and answered) or replaced by a later one; none refused.
    assert_eq!(
        ok + coalesced,
        LINES + 1,
        "{}",
        &err[err.len().saturating_sub(2000)..]
    );
    assert_eq!(
        count(&err, "queue full"),
        0,
        "{}",
        &err[..err.len().min(3000)]
    );
}

/// Sends `bytes` to `port` on loopback from `sock`.
fn send(sock: &UdpSocket, port: u16, packet: &OscPacket) {
    let bytes = encoder::encode(packet).unwrap();
    let _ = sock.send_to(&bytes, ("127.0.0.1", port));
}

fn msg(addr: &str, args: Vec<OscType>) -> OscPacket {
    OscPacket::Message(OscMessage {
        addr: addr.into(),
        args,
    })
}

/// 2 s of OSC packets carrying 60 KB strings (for a property, and for a node that does not
/// exist) and of unknown addresses write a few KB to stderr, not the values (issue #21: 1.3 GB
/// in 2 s); each refusal that is shown cuts the value with its length; the run still stops
/// over OSC and counts what it refused.
#[test]
fn an_osc_flood_of_huge_strings_and_unknown_addresses_writes_little_to_stderr() {
    let port = free_udp_port();
    let mut child = spawn(&[
        "run",
        "--fps",
        "60",
        "--control",
        "none",
        "--osc",
        &format!("127.0.0.1:{port}"),
        "testsrc width=32 height=16 frames=0 ! stamp what=value ! nullsink",
    ]);
    let stderr = child.stderr.take().unwrap();
    let (up_tx, up_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stderr).split(b'\n') {
            let Ok(line) = line else { break };
            if line.windows(10).any(|w| w == b"OSC on udp") {
                let _ = up_tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    up_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("framepipe says where OSC listens");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let huge = "a".repeat(60_000);
    // The first refusal shown is a huge string's.
    send(
        &sock,
        port,
        &msg(
            "/framepipe/stamp/value",
            vec![OscType::String(huge.clone())],
        ),
    );
    std::thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < Duration::from_secs(2) {
        for k in 0..20u64 {
            let i = sent + k;
            send(
                &sock,
                port,
                &msg(
                    "/framepipe/stamp/value",
                    vec![OscType::String(format!("{huge}{i}"))],
                ),
            );
            send(
                &sock,
                port,
                &msg(
                    &format!("/framepipe/node{i}/x"),
                    vec![OscType::String(huge.clone())],
                ),
            );
            send(
                &sock,
                port,
                &msg(&format!("/bogus/{i}"), vec![OscType::Int(1)]),
            );
            send(
                &sock,
                port,
                &msg(
                    &format!("/framepipe/nonode{i}/x"),
                    vec![OscType::Float(1.0)],
                ),
            );
        }
        sent += 20;
        std::thread::sleep(Duration::from_millis(1));
    }
    // The run still answers: stop it over OSC (repeated: UDP may drop one under the flood).
    let mut status = None;
    let stop_at = Instant::now();
    while status.is_none() && stop_at.elapsed() < Duration::from_secs(20) {
        send(&sock, port, &msg("/framepipe/stop", vec![]));
        std::thread::sleep(Duration::from_millis(100));
        status = child.try_wait().unwrap();
    }
    let status = status.unwrap_or_else(|| {
        let _ = child.kill();
        child.wait().unwrap()
    });
    let lines = reader.join().unwrap();
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    let text = String::from_utf8_lossy(&lines.concat()).to_string();
    let all: Vec<String> = lines
        .iter()
        .map(|l| String::from_utf8_lossy(l).to_string())
        .collect();
    assert!(status.success(), "{status}: {}", all.join("\n"));
    assert!(sent >= 1000, "the flood sent {sent} packets of each kind");
    assert!(
        bytes < 64 * 1024,
        "{bytes} bytes on stderr for {sent} packets of each kind:\n{}",
        all.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
    assert!(!text.contains(&"a".repeat(100)), "a value quoted whole");
    assert!(
        all.iter()
            .any(|l| l.contains("(60000 bytes)") || l.contains("(6000")),
        "a refusal names the cut value's length:\n{}",
        all.join("\n")
    );
    let summary = all
        .iter()
        .find(|l| l.contains("framepipe: osc: ") && l.contains(" ok, "))
        .unwrap_or_else(|| panic!("no OSC summary:\n{}", all.join("\n")));
    let bad: u64 = summary
        .split(" ok, ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(
        bad >= sent,
        "every huge string and bogus address is counted: {summary}"
    );
}

/// Writes all of `bytes` to a non-blocking FIFO writer, waiting while the pipe is full.
fn write_all(w: &mut std::fs::File, mut bytes: &[u8]) {
    let start = Instant::now();
    while !bytes.is_empty() {
        match w.write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "the FIFO stays full"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("write: {e}"),
        }
    }
}

/// Issue #21: a megabyte of random bytes on a `--midi` FIFO, then one valid control change on
/// a mapped control: its value is applied (the parser resynchronises on its status byte, and
/// the message is not lost behind the garbage's).
#[test]
fn a_valid_control_change_after_a_megabyte_of_random_midi_bytes_lands() {
    let dir = tmpdir("floods-midi");
    let path = fifo(&dir, "midi");
    let project = dir.join("show.toml");
    std::fs::write(
        &project,
        "pipeline = \"testsrc width=32 height=16 frames=0 ! stamp what=value ! nullsink\"\n\
         [[midi]]\ncontrol = \"cc\"\nchannel = 1\nnumber = 7\ntarget = \"stamp.value\"\n",
    )
    .unwrap();
    let mut child = Command::new(FP)
        .args(["run", "--fps", "60", "--midi", path.to_str().unwrap()])
        .arg(&project)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut lines: Vec<String> = Vec::new();
    let start = Instant::now();
    let mut w = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
        {
            Ok(f) => break f,
            Err(_) => {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "nobody reads the FIFO"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    };
    // The value a CC 7 of 127 sets, and one of 0, before any garbage.
    let want = "ok 'set stamp.value ";
    let settle = |lines: &mut Vec<String>, quiet: Duration| {
        let mut last = None;
        let deadline = Instant::now() + Duration::from_secs(40);
        while Instant::now() < deadline {
            match rx.recv_timeout(quiet) {
                Ok(line) => {
                    if let Some(v) = line.split(want).nth(1) {
                        last = v.split('\'').next().map(str::to_string);
                    }
                    lines.push(line);
                }
                Err(_) => break,
            }
        }
        last
    };
    write_all(&mut w, &[0xB0, 7, 127]);
    let top = settle(&mut lines, Duration::from_millis(1500))
        .unwrap_or_else(|| panic!("CC 7 127 set nothing:\n{}", lines.join("\n")));
    write_all(&mut w, &[0xB0, 7, 0]);
    let bottom = settle(&mut lines, Duration::from_millis(1500))
        .unwrap_or_else(|| panic!("CC 7 0 set nothing:\n{}", lines.join("\n")));
    assert_ne!(top, bottom);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let garbage: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    write_all(&mut w, &garbage);
    write_all(&mut w, &[0xB0, 7, 127]);
    // The garbage moves the control too: once the replies settle, the last value applied must
    // be the valid message's.
    let last = settle(&mut lines, Duration::from_millis(3000));
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(b"stop\n");
    drop(stdin);
    let st = child.wait().unwrap();
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
        lines.push(line);
    }
    let tail = lines[lines.len().saturating_sub(30)..].join("\n");
    assert!(st.success(), "{tail}");
    assert_eq!(last.as_deref(), Some(top.as_str()), "{tail}");
    // No message was dropped on its way to the surface: the reader waits for it instead.
    let summary = lines
        .iter()
        .find(|l| l.contains("framepipe: midi: ") && l.contains(" messages, "))
        .unwrap_or_else(|| panic!("no MIDI summary: {tail}"));
    let dropped: u64 = summary
        .split(", ")
        .find_map(|p| p.strip_suffix(" dropped"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert_eq!(dropped, 0, "{summary}");
}

/// Issue #21: a `tcpsink` whose receiver accepts and never reads blocks in its write; the first
/// SIGTERM ends the run (status 143, `--stats` written with the frames sent), without the second
/// signal a service manager would not send.
#[test]
fn a_tcpsink_whose_receiver_never_reads_stops_at_the_first_sigterm_with_stats() {
    let dir = tmpdir("floods-tcpsink");
    let stats = dir.join("stats.json");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let child = spawn(&[
        "run",
        "-q",
        "--fps",
        "100",
        "--stats",
        stats.to_str().unwrap(),
        &format!("testsrc width=320 height=240 frames=0 ! tcpsink host={addr}"),
    ]);
    let pid = child.id();
    // Accept, and never read: the socket buffers fill within a second or so (300 KB frames).
    let (conn, _) = listener.accept().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    kill(pid, "TERM");
    let start = Instant::now();
    let done = wait(
        child,
        Duration::from_secs(15),
        "SIGTERM with a receiver that never reads",
    );
    let took = start.elapsed();
    drop(conn);
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(143), "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}: {err}");
    let s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&stats)
            .unwrap_or_else(|e| panic!("stats not written: {e}; {err}")),
    )
    .unwrap();
    assert!(s["frames"].as_u64().is_some(), "{s}");
    assert!(err.contains("has not read for"), "{err}");
}
