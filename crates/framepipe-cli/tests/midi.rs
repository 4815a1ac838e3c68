//! Issue 10, MIDI (requirements 4 and 6) through the real binary: real MIDI bytes written into a
//! FIFO that `framepipe run --midi FIFO` reads on its raw-device path, and through an ALSA
//! virtual port (midir) where the machine has /dev/snd/seq. `learn` commands come on stdin;
//! what a control does is checked on the engine's replies (`ok 'set ...' from frame N`) and on
//! the output's pixels from that frame on.

mod common;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{fifo, tmpdir, FP};

const W: usize = 64;
const H: usize = 32;
const FRAME: usize = W * H * 4;
const LIMIT: Duration = Duration::from_secs(20);

/// A grey frame through `frei0r-brightness` (0 to start) and `invert`, written to `out`.
fn pipeline(out: &Path) -> String {
    pipeline_to(&out.display().to_string())
}

/// The same, to a `location` (`-`: stdout, a pipe: flushed frame by frame).
fn pipeline_to(location: &str) -> String {
    format!(
        "testsrc width={W} height={H} frames=100000 pattern=solid color=0.5,0.5,0.5 ! \
         frei0r-brightness brightness=0 ! invert ! rawsink location={location}"
    )
}

/// The writing end of a FIFO, opened once framepipe reads it (non-blocking: a framepipe that
/// never opens it fails the test instead of hanging it).
struct Writer(File);

impl Writer {
    fn open(path: &Path) -> Writer {
        let start = Instant::now();
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
            {
                Ok(f) => return Writer(f),
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                    assert!(start.elapsed() < LIMIT, "nobody reads {}", path.display());
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("open {}: {e}", path.display()),
            }
        }
    }

    /// Writes all of `bytes`, waiting while the pipe is full.
    fn send(&mut self, mut bytes: &[u8]) {
        let start = Instant::now();
        while !bytes.is_empty() {
            match self.0.write(bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(start.elapsed() < LIMIT, "the FIFO stays full");
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("write: {e}"),
            }
        }
    }
}

/// A running framepipe whose stderr lines are collected as they come; killed on drop (a
/// failing test leaves no process behind).
struct Run {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    /// Everything written on stdout so far.
    stdout: Arc<Mutex<Vec<u8>>>,
    stdout_reader: Option<std::thread::JoinHandle<()>>,
    /// Lines already matched by `expect`.
    seen: usize,
}

impl Run {
    fn start(args: &[&str]) -> Run {
        let mut child = Command::new(FP)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn framepipe");
        let stderr = child.stderr.take().unwrap();
        let mut out = child.stdout.take().unwrap();
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stdout_reader = {
            let stdout = Arc::clone(&stdout);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = std::io::Read::read(&mut out, &mut buf) {
                    if n == 0 {
                        break;
                    }
                    stdout.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    lines
                        .lock()
                        .unwrap()
                        .push(line.trim_start_matches('\r').to_string());
                }
            })
        };
        Run {
            stdin: child.stdin.take(),
            child,
            lines,
            reader: Some(reader),
            stdout,
            stdout_reader: Some(stdout_reader),
            seen: 0,
        }
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Whole frames written on stdout so far.
    fn stdout_frames(&self) -> usize {
        self.stdout.lock().unwrap().len() / FRAME
    }

    fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits for a line after the last one matched that contains `want`; returns it.
    fn expect(&mut self, want: &str) -> String {
        let start = Instant::now();
        loop {
            {
                let lines = self.lines.lock().unwrap();
                if let Some(k) = lines[self.seen..].iter().position(|l| l.contains(want)) {
                    self.seen += k + 1;
                    return lines[self.seen - 1].clone();
                }
            }
            if start.elapsed() > LIMIT || self.child.try_wait().unwrap().is_some() {
                // One more look: the line may have come with the end.
                std::thread::sleep(Duration::from_millis(50));
                let lines = self.lines.lock().unwrap();
                if let Some(k) = lines[self.seen..].iter().position(|l| l.contains(want)) {
                    self.seen += k + 1;
                    return lines[self.seen - 1].clone();
                }
                panic!("no line with {want:?}; stderr:\n{}", lines.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `stop` on stdin; waits for the end; returns all of stderr.
    fn stop(self) -> String {
        self.stop_with("stop")
    }

    /// `line` (a stop) on stdin; waits for the end; returns all of stderr.
    fn stop_with(mut self, line: &str) -> String {
        self.say(line);
        let start = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                start.elapsed() < LIMIT,
                "no end after stop:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        for r in [self.reader.take(), self.stdout_reader.take()]
            .into_iter()
            .flatten()
        {
            let _ = r.join();
        }
        let text = self.text();
        assert!(status.success(), "{status}:\n{text}");
        text
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The frame number of an `ok '...' from frame N` line.
fn frame_of(line: &str) -> usize {
    line.rsplit("from frame ")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no frame number in {line:?}"))
}

/// The value of an `ok 'set NODE.PROP VALUE' from frame N` line.
fn value_of(line: &str) -> f64 {
    let inner = line
        .split('\'')
        .nth(1)
        .unwrap_or_else(|| panic!("{line:?}"));
    inner
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no value in {line:?}"))
}

/// The red value of every frame written (solid frames: one value each), checked solid.
fn frame_values(out: &Path) -> Vec<u8> {
    values(&std::fs::read(out).unwrap())
}

/// The red value of every frame in `bytes`, each checked solid.
fn values(bytes: &[u8]) -> Vec<u8> {
    assert_eq!(bytes.len() % FRAME, 0, "whole frames only");
    bytes
        .chunks(FRAME)
        .enumerate()
        .map(|(i, f)| {
            assert!(
                f.chunks(4).all(|p| p[..3] == f[..3]),
                "frame {i} is not solid"
            );
            f[0]
        })
        .collect()
}

/// Waits until `out` holds at least `n` frames.
fn wait_frames(out: &Path, n: usize) {
    common::wait_until(LIMIT, &format!("{n} frames"), || {
        common::file_len(out) >= (n * FRAME) as u64
    });
}

/// The summary's MIDI counts: messages, posted, coalesced, bad, dropped, disconnects.
fn counts(stderr: &str) -> [u64; 6] {
    let line = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("framepipe: midi: ")
                .filter(|l| l.contains(" posted, "))
        })
        .unwrap_or_else(|| panic!("no MIDI summary in:\n{stderr}"));
    let mut out = [0u64; 6];
    for part in line.split(", ") {
        let (n, what) = part.split_once(' ').unwrap();
        let k = [
            "messages",
            "posted",
            "coalesced",
            "bad",
            "dropped",
            "disconnects",
        ]
        .iter()
        .position(|w| *w == what)
        .unwrap_or_else(|| panic!("{line}"));
        out[k] = n.parse().unwrap();
    }
    out
}

fn cc(channel: u8, number: u8, value: u8) -> [u8; 3] {
    [0xB0 | channel, number, value]
}

fn note_on(note: u8) -> [u8; 3] {
    [0x90, note, 100]
}

const BRIGHTNESS: &str = "frei0r-brightness.brightness";

/// `learn` on stdin, then a CC moved: the learning messages are not applied, the next moves
/// are, from the frame their replies name (7-bit absolute: value / 127 of the range).
#[test]
fn midi_learn_binds_a_cc_and_moving_it_sets_the_property_from_a_frame_on() {
    let dir = tmpdir("midi-learn");
    let (out, path) = (dir.join("out.rgba"), fifo(&dir, "midi"));
    let mut run = Run::start(&[
        "run",
        "--fps",
        "60",
        "--midi",
        path.to_str().unwrap(),
        &pipeline(&out),
    ]);
    let mut w = Writer::open(&path);
    run.say(&format!("learn {BRIGHTNESS}"));
    run.expect(&format!("learning {BRIGHTNESS}"));
    w.send(&cc(0, 7, 0));
    run.expect(&format!(
        "learned cc 7 ch 1 absolute -> {BRIGHTNESS} [0..1] (mapping 1)"
    ));
    w.send(&cc(0, 7, 127));
    let n1 = frame_of(&run.expect(&format!("ok 'set {BRIGHTNESS} 1' from frame")));
    w.send(&cc(0, 7, 64));
    let half = format!("ok 'set {BRIGHTNESS} {}' from frame", 64.0 / 127.0);
    let n2 = frame_of(&run.expect(&half));
    run.say("midi");
    run.expect("1 MIDI mapping:");
    run.expect(&format!("1: cc 7 ch 1 absolute -> {BRIGHTNESS} [0..1]"));
    wait_frames(&out, n2 + 1);
    let stderr = run.stop();
    let v = frame_values(&out);
    assert!(n1 > 0 && n2 > n1, "{n1} {n2}");
    // Three values, each from the frame its reply named.
    assert!(v[..n1].iter().all(|x| *x == v[0]), "{v:?}");
    assert!(v[n1..n2].iter().all(|x| *x == v[n1]), "{v:?}");
    assert!(v[n2..].iter().all(|x| *x == v[n2]), "{v:?}");
    assert!(v[0] != v[n1] && v[n1] != v[n2] && v[0] != v[n2], "{v:?}");
    let [messages, posted, _, bad, dropped, _] = counts(&stderr);
    assert_eq!((messages, posted, bad, dropped), (3, 2, 0, 0), "{stderr}");
}

/// CC n followed by CC n+32 is learned as a 14-bit pair; a relative encoder, told or detected,
/// steps the value by 1/127 of the range from where it is.
#[test]
fn midi_14_bit_pairs_and_relative_encoders() {
    let dir = tmpdir("midi-14bit");
    let (out, path) = (dir.join("out.rgba"), fifo(&dir, "midi"));
    let mut run = Run::start(&[
        "run",
        "--fps",
        "60",
        "--midi",
        path.to_str().unwrap(),
        &pipeline(&out),
    ]);
    let mut w = Writer::open(&path);
    run.say(&format!("learn {BRIGHTNESS}"));
    run.expect("learning");
    w.send(&[cc(0, 1, 64), cc(0, 33, 0), cc(0, 1, 64)].concat());
    run.expect(&format!("learned cc14 1 ch 1 absolute -> {BRIGHTNESS}"));
    // MSB 0x20, LSB 0x10: (32 × 128 + 16) / 16383, which no 7-bit value gives.
    w.send(&[cc(0, 1, 0x20), cc(0, 33, 0x10)].concat());
    let v14 = (32.0 * 128.0 + 16.0) / 16383.0;
    run.expect(&format!("ok 'set {BRIGHTNESS} {v14}' from frame"));
    // Relative, told: the first message decides, and is not applied.
    run.say(&format!("learn {BRIGHTNESS} relative"));
    run.expect("learning");
    w.send(&cc(0, 16, 1));
    run.expect(&format!("learned cc 16 ch 1 relative-twos -> {BRIGHTNESS}"));
    w.send(&cc(0, 16, 1));
    let up = value_of(&run.expect(&format!("ok 'set {BRIGHTNESS} ")));
    assert!((up - (v14 + 1.0 / 127.0)).abs() < 1e-9, "{up}");
    // Two steps down (127 = −1 in two's complement), coalesced or not.
    w.send(&[cc(0, 16, 127), cc(0, 16, 127)].concat());
    let want = v14 - 1.0 / 127.0;
    let start = Instant::now();
    loop {
        let v = value_of(&run.expect(&format!("ok 'set {BRIGHTNESS} ")));
        if (v - want).abs() < 1e-9 {
            break;
        }
        assert!(
            (v - v14).abs() < 1e-9,
            "{v}: neither one nor two steps down"
        );
        assert!(start.elapsed() < LIMIT);
    }
    // Another surface (stdin) sets the value: the encoder goes on from there (the engine's
    // published values), not from where MIDI left it.
    run.say(&format!("set {BRIGHTNESS} 0.25"));
    run.expect(&format!("ok 'set {BRIGHTNESS} 0.25' from frame"));
    // Published (every 20 ms as frames begin), and past MIDI's own 250 ms trust.
    std::thread::sleep(Duration::from_millis(1000));
    w.send(&cc(0, 16, 1));
    let from_stdin = value_of(&run.expect(&format!("ok 'set {BRIGHTNESS} ")));
    assert!(
        (from_stdin - (0.25 + 1.0 / 127.0)).abs() < 1e-9,
        "{from_stdin}"
    );
    let want = from_stdin;
    // Detected: the same value again and again, near 64 (binary offset: 65 = +1).
    run.say(&format!("learn {BRIGHTNESS}"));
    run.expect("learning");
    w.send(&[cc(0, 17, 65), cc(0, 17, 65), cc(0, 17, 65)].concat());
    run.expect(&format!(
        "learned cc 17 ch 1 relative-offset -> {BRIGHTNESS}"
    ));
    w.send(&cc(0, 17, 63));
    let down = value_of(&run.expect(&format!("ok 'set {BRIGHTNESS} ")));
    assert!((down - (want - 1.0 / 127.0)).abs() < 1e-9, "{down}");
    let stderr = run.stop();
    assert_eq!(counts(&stderr)[3], 0, "no bad bytes: {stderr}");
}

/// A note toggles a node's bypass, another triggers `step` while paused: every press is one
/// step, and the bypass shows from the frame its reply names.
#[test]
fn midi_notes_toggle_bypass_and_trigger_steps_while_paused() {
    let dir = tmpdir("midi-notes");
    let path = fifo(&dir, "midi");
    // Frames on stdout (a pipe: each is flushed as it is released).
    let mut run = Run::start(&[
        "run",
        "--fps",
        "60",
        "--start-paused",
        "--midi",
        path.to_str().unwrap(),
        &pipeline_to("-"),
    ]);
    let mut w = Writer::open(&path);
    run.say("learn invert.bypass");
    run.expect("learning invert.bypass");
    w.send(&note_on(36));
    run.expect("learned note 36 ch 1 -> invert.bypass (mapping 1)");
    run.say("learn step");
    run.expect("learning step");
    w.send(&note_on(37));
    run.expect("learned note 37 ch 1 -> step (mapping 2)");
    // Two presses (with a note off between): two steps, frames 0 and 1.
    w.send(&[note_on(37), [0x80, 37, 0], note_on(37)].concat());
    run.expect("ok 'step 1' from frame");
    run.expect("ok 'step 1' from frame");
    common::wait_until(LIMIT, "2 frames", || run.stdout_frames() >= 2);
    w.send(&note_on(36));
    let n = frame_of(&run.expect("ok 'bypass invert on' from frame"));
    assert!(n >= 2, "{n}");
    // Step up to and including frame n.
    let presses: Vec<u8> = (2..=n).flat_map(|_| note_on(37)).collect();
    w.send(&presses);
    common::wait_until(LIMIT, "the bypassed frame", || run.stdout_frames() > n);
    // Held: no frame more than the presses asked for, even after a while.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(run.stdout_frames(), n + 1, "one frame per press");
    let bytes = run.stdout.lock().unwrap().clone();
    let stderr = run.stop();
    let v = values(&bytes);
    assert_eq!(v.len(), n + 1, "one frame per press: {stderr}");
    assert!(v[..n].iter().all(|x| *x == v[0]), "{v:?}");
    assert_eq!(v[n], 255 - v[0], "not inverted from frame {n}: {v:?}");
}

/// `save FILE` writes a project file with `[[midi]]` tables; run from it, the mappings work
/// without learning; `unlearn` and a plain `save` rewrite its tables in place.
#[test]
fn midi_save_writes_midi_tables_that_load_back() {
    let dir = tmpdir("midi-save");
    let (out, path) = (dir.join("out.rgba"), fifo(&dir, "midi"));
    let show = dir.join("show.toml");
    let mut run = Run::start(&[
        "run",
        "--fps",
        "60",
        "--midi",
        path.to_str().unwrap(),
        &pipeline(&out),
    ]);
    let mut w = Writer::open(&path);
    run.say("learn tap");
    run.expect("learning tap");
    w.send(&note_on(40));
    run.expect("learned note 40 ch 1 -> tap");
    run.say(&format!("learn {BRIGHTNESS}"));
    run.expect("learning");
    w.send(&cc(2, 7, 10));
    run.expect(&format!("learned cc 7 ch 3 absolute -> {BRIGHTNESS}"));
    run.say(&format!("save {}", show.display()));
    run.expect(&format!("saved 2 MIDI mappings to {}", show.display()));
    drop(w);
    run.stop();
    let desc = framepipe_project::parse_project(&std::fs::read_to_string(&show).unwrap()).unwrap();
    let targets: Vec<&str> = desc.midi.iter().map(|b| b.target.as_str()).collect();
    assert_eq!(targets, ["tap", BRIGHTNESS]);
    assert_eq!(desc.midi[1].channel, 3);
    // Run from the saved project: its mappings are there at start.
    let _ = std::fs::remove_file(&out);
    let path2 = fifo(&dir, "midi2");
    let mut run = Run::start(&[
        "run",
        "--midi",
        path2.to_str().unwrap(),
        show.to_str().unwrap(),
    ]);
    let mut w = Writer::open(&path2);
    run.say("midi");
    run.expect(&format!("2: cc 7 ch 3 absolute -> {BRIGHTNESS} [0..1]"));
    w.send(&cc(2, 7, 127));
    run.expect(&format!("ok 'set {BRIGHTNESS} 1' from frame"));
    w.send(&note_on(40));
    run.expect("ok 'tap' from frame");
    run.say("unlearn tap");
    run.expect("unlearned 1 mapping: 1: note 40 ch 1 -> tap");
    run.say("save");
    run.expect(&format!("saved 1 MIDI mapping to {}", show.display()));
    run.stop();
    let again = framepipe_project::parse_project(&std::fs::read_to_string(&show).unwrap()).unwrap();
    assert_eq!(again.nodes, desc.nodes);
    assert_eq!(again.midi, desc.midi[1..]);
}

/// Garbage bytes, a flood of 20,000 CCs and the FIFO's writer going away and coming back: counted,
/// coalesced, waited for; the run goes on and the control still works.
#[test]
fn midi_garbage_floods_and_unplugging_are_counted_and_the_run_goes_on() {
    let dir = tmpdir("midi-flood");
    let (out, path) = (dir.join("out.rgba"), fifo(&dir, "midi"));
    let mut run = Run::start(&[
        "run",
        "--fps",
        "60",
        "--midi",
        path.to_str().unwrap(),
        &pipeline(&out),
    ]);
    let mut w = Writer::open(&path);
    // Data bytes before any status: stray.
    w.send(&[0x12, 0x34]);
    run.say(&format!("learn {BRIGHTNESS}"));
    run.expect("learning");
    w.send(&cc(0, 7, 5));
    run.expect("learned cc 7 ch 1 absolute");
    // Random bytes (seeded), then a cut-off message and a long SysEx.
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let garbage: Vec<u8> = (0..5000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    w.send(&garbage);
    w.send(&[0xB0, 7, 0xF0]);
    w.send(&vec![0x55; 20_000]);
    w.send(&[0xF7]);
    // The flood: 20,000 CCs with running status, values 0..=100.
    let mut flood = vec![0xB0];
    for k in 0..20_000u32 {
        flood.extend([7, (k % 101) as u8]);
    }
    w.send(&flood);
    // Unplugged: the writer goes; then back, and the control still works.
    drop(w);
    run.expect("closed by its writer (unplugged?); waiting for it to come back");
    let mut w = Writer::open(&path);
    w.send(&cc(0, 7, 127));
    run.expect(&format!("ok 'set {BRIGHTNESS} 1' from frame"));
    let stderr = run.stop();
    let [messages, posted, coalesced, bad, dropped, disconnects] = counts(&stderr);
    assert!(
        bad >= 3,
        "2 stray bytes and a cut-off CC at least: {stderr}"
    );
    assert!(
        messages + dropped >= 20_000,
        "{messages} + {dropped}: {stderr}"
    );
    assert!(coalesced > 0, "{stderr}");
    // At most one set per frame, not one per message.
    assert!(posted < 2_000, "{posted} posted: {stderr}");
    assert!(disconnects >= 1, "{stderr}");
}

/// Surface commands without `--midi` are answered, not sent to the engine.
#[test]
fn midi_surface_commands_without_midi_are_refused() {
    let mut run = Run::start(&[
        "run",
        "--fps",
        "60",
        "testsrc width=16 height=16 frames=100000 ! nullsink",
    ]);
    run.say("learn nullsink.x");
    run.expect("refused 'learn nullsink.x': no MIDI input; start framepipe with --midi PORT");
    run.say("save");
    run.expect("refused 'save': no MIDI input");
    run.stop();
}

/// A `--midi` path that does not exist is an error naming it; an ALSA name where there is no
/// sequencer says why.
#[test]
fn midi_inputs_that_cannot_be_opened_are_named() {
    let out = common::run(
        Command::new(FP).args([
            "run",
            "--midi",
            "/nonexistent/midi0",
            "testsrc frames=1 ! nullsink",
        ]),
        LIMIT,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("cannot open MIDI input '/nonexistent/midi0': No such file"),
        "{stderr}"
    );
    if !Path::new("/dev/snd/seq").exists() {
        for args in [
            &["midi-ports"][..],
            &[
                "run",
                "--midi",
                "nanoKONTROL2",
                "testsrc frames=1 ! nullsink",
            ][..],
        ] {
            let out = common::run(Command::new(FP).args(args), LIMIT);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?}");
            assert!(
                stderr.contains("/dev/snd/seq is missing"),
                "{args:?}: {stderr}"
            );
            assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        }
    }
}

/// Through ALSA: a virtual output port made with midir is listed by `framepipe midi-ports`,
/// found by a part of its name, learned and moved. Skipped where there is no /dev/snd/seq.
#[test]
fn midi_through_an_alsa_virtual_port() {
    use midir::os::unix::VirtualOutput;
    if !Path::new("/dev/snd/seq").exists() {
        eprintln!(
            "skipped: no /dev/snd/seq (no ALSA sequencer here); the FIFO tests cover the raw path"
        );
        return;
    }
    let name = format!("fp-test-{}", std::process::id());
    let out_port = midir::MidiOutput::new("framepipe-test").expect("ALSA client");
    let mut conn = out_port.create_virtual(&name).expect("virtual port");
    let listed = common::run(Command::new(FP).arg("midi-ports"), LIMIT);
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&name));
    let dir = tmpdir("midi-alsa");
    let out = dir.join("out.rgba");
    let mut run = Run::start(&["run", "--fps", "60", "--midi", &name, &pipeline(&out)]);
    run.expect(&format!("MIDI from {name}"));
    run.say(&format!("learn {BRIGHTNESS}"));
    run.expect("learning");
    conn.send(&cc(0, 7, 0)).unwrap();
    run.expect("learned cc 7 ch 1 absolute");
    conn.send(&cc(0, 7, 127)).unwrap();
    let n = frame_of(&run.expect(&format!("ok 'set {BRIGHTNESS} 1' from frame")));
    wait_frames(&out, n + 1);
    run.stop();
    let v = frame_values(&out);
    assert!(v[..n].iter().all(|x| *x == v[0]) && v[n] != v[0], "{v:?}");
}

/// Issue #11, requirement 1 ("every control surface addresses a show by name"): one `--midi`
/// input for two shows, each project's own `[[midi]]` mappings applying to its own show: a CC
/// mapped in cam2's project sets cam2's property (its reply and its pixels) and not cam1's;
/// `@cam1 learn ...` on stdin learns into cam1's surface only.
#[test]
fn midi_mappings_of_each_project_reach_their_own_show() {
    let dir = tmpdir("midi-shows");
    let (out1, out2, path) = (
        dir.join("one.rgba"),
        dir.join("two.rgba"),
        fifo(&dir, "midi"),
    );
    let project = |name: &str, out: &Path, cc: u8| {
        let p = dir.join(format!("{name}.toml"));
        std::fs::write(
            &p,
            format!(
                "pipeline = \"{}\"\n\n[[midi]]\ncontrol = \"cc\"\nchannel = 1\nnumber = {cc}\ntarget = \"{BRIGHTNESS}\"\n",
                pipeline(out)
            ),
        )
        .unwrap();
        p
    };
    let (cam1, cam2) = (project("cam1", &out1, 7), project("cam2", &out2, 8));
    let mut run = Run::start(&[
        "run",
        "--fps",
        "60",
        "--midi",
        path.to_str().unwrap(),
        cam1.to_str().unwrap(),
        cam2.to_str().unwrap(),
    ]);
    let mut w = Writer::open(&path);
    wait_frames(&out1, 2);
    wait_frames(&out2, 2);
    // cam2's control: cam2's reply, from a frame on.
    w.send(&cc(0, 8, 127));
    let n2 = frame_of(&run.expect(&format!("show cam2: ok 'set {BRIGHTNESS} 1' from frame")));
    wait_frames(&out2, n2 + 2);
    let v1 = frame_values(&out1);
    assert!(
        v1.iter().all(|x| *x == v1[0]),
        "cam1 changed with cam2's control: {v1:?}"
    );
    // Learned on stdin for cam1: into cam1's surface.
    run.say(&format!("@cam1 learn {BRIGHTNESS}"));
    run.expect(&format!("show cam1: learning {BRIGHTNESS}"));
    w.send(&cc(0, 20, 0));
    run.expect(&format!(
        "show cam1: learned cc 20 ch 1 absolute -> {BRIGHTNESS} [0..1] (mapping 2)"
    ));
    w.send(&cc(0, 20, 127));
    let n1 = frame_of(&run.expect(&format!("show cam1: ok 'set {BRIGHTNESS} 1' from frame")));
    wait_frames(&out1, n1 + 2);
    run.say("@cam2 midi");
    run.expect(&format!(
        "show cam2:   1: cc 8 ch 1 absolute -> {BRIGHTNESS} [0..1]"
    ));
    drop(w);
    let stderr = run.stop_with("@* stop");
    assert!(
        !stderr.contains(&format!(
            "show cam1: ok 'set {BRIGHTNESS} 1' from frame {n2}\n"
        )) && stderr.matches(&format!("ok 'set {BRIGHTNESS} 1'")).count() == 2,
        "{stderr}"
    );
    let (v1, v2) = (frame_values(&out1), frame_values(&out2));
    assert!(v2[..n2].iter().all(|x| *x == v2[0]), "{v2:?}");
    assert!(
        v2[n2..].iter().all(|x| *x == v2[n2]) && v2[n2] != v2[0],
        "{v2:?}"
    );
    assert!(v1[..n1].iter().all(|x| *x == v1[0]), "{v1:?}");
    assert!(
        v1[n1..].iter().all(|x| *x == v1[n1]) && v1[n1] != v1[0],
        "{v1:?}"
    );
    assert_eq!(v1[0], v2[0], "both shows start alike");
}
