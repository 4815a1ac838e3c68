//! Issue 11, requirement 1 (the CLI side): `framepipe run SHOW SHOW ...`, several shows in one
//! process. Real binary, real files, real UDP: each show's frames are compared byte for byte
//! with a run of the same pipeline alone; commands addressed by name reach only that show; one
//! show's failure ends only it; `--stats` has one object per show; 50 paced shows complete.

mod common;

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{tmpdir, wait, wait_until, FP};
use rosc::{encoder, OscMessage, OscPacket, OscType};

const LIMIT: Duration = Duration::from_secs(60);

/// `framepipe ARGS` run to its end (stdin closed), checked to exit with `code`.
fn framepipe(args: &[&str], code: i32) -> std::process::Output {
    let out = common::run(Command::new(FP).args(args), LIMIT);
    assert_eq!(
        out.status.code(),
        Some(code),
        "framepipe {args:?}: stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The frames `pipeline` writes when it runs alone, unpaced (its sink's `location` is
/// `{out}`).
fn alone(pipeline: &str, dir: &Path, name: &str) -> Vec<u8> {
    let path = dir.join(format!("alone-{name}.raw"));
    let p = pipeline.replace("{out}", &path.display().to_string());
    framepipe(&["run", "--unpaced", "-q", "--control", "none", &p], 0);
    let bytes = std::fs::read(&path).unwrap();
    assert!(!bytes.is_empty(), "{p} wrote nothing");
    bytes
}

fn stats(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Three shows, each with its own rate, size and chain (native effects, a frei0r plugin),
/// one from a project file that names it and sets its own rate (which wins over --fps) and
/// stats file: each writes exactly the frames it writes alone, and `--stats` has each one's
/// figures by name.
#[test]
fn shows_with_their_own_rates_and_chains_write_what_they_write_alone() {
    let dir = tmpdir("shows-three");
    let left = "testsrc width=64 height=48 frames=15 ! stamp ! rawsink location={out}";
    let bars =
        "testsrc width=32 height=32 pattern=bars frames=25 ! invert ! rawsink location={out}";
    let sobel =
        "testsrc width=48 height=32 frames=10 ! frei0r-sobel ! stamp ! rawsink location={out}";
    let at = |name: &str| dir.join(format!("{name}.raw")).display().to_string();
    let project = dir.join("cam.toml");
    std::fs::write(
        &project,
        format!(
            "name = \"left\"\nfps = 50\nstats = \"{}\"\npipeline = \"{}\"\n",
            dir.join("left-stats.json").display(),
            left.replace("{out}", &at("left"))
        ),
    )
    .unwrap();
    let stats_path = dir.join("stats.json");
    framepipe(
        &[
            "run",
            "--fps",
            "100",
            "-q",
            "--stats",
            &stats_path.display().to_string(),
            &project.display().to_string(),
            &bars.replace("{out}", &at("bars")),
            &sobel.replace("{out}", &at("sobel")),
        ],
        0,
    );
    for (name, p) in [("left", left), ("bars", bars), ("sobel", sobel)] {
        let got = std::fs::read(dir.join(format!("{name}.raw"))).unwrap();
        assert!(
            got == alone(p, &dir, name),
            "show {name}: its frames differ from the same pipeline run alone"
        );
    }
    let s = stats(&stats_path);
    let shows = s["shows"].as_array().expect("a list of shows");
    let got: Vec<(&str, u64, f64)> = shows
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap(),
                s["frames"].as_u64().unwrap(),
                s["paced_fps"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("left", 15, 50.0),
            ("show-2", 25, 100.0),
            ("show-3", 10, 100.0)
        ]
    );
    assert!(shows.iter().all(|s| s.get("error").is_none()), "{s}");
    // The project's own stats file: its show alone, in the one-show format.
    let own = stats(&dir.join("left-stats.json"));
    assert_eq!(own["frames"], 15, "{own}");
    assert_eq!(own["paced_fps"], 50.0, "{own}");
    assert!(
        own.get("shows").is_none() && own.get("name").is_none(),
        "{own}"
    );
}

/// Three shows of one frame size with different pictures and chains share one frame pool
/// (`--stats`'s `pools`: one, three shows, fewer frames made than their quotas add up to), and
/// each still writes exactly the frames it writes alone: no frame passes from one to another.
#[test]
fn shows_of_one_size_share_one_pool_and_write_what_they_write_alone() {
    let dir = tmpdir("shows-one-size");
    let pipelines = [
        (
            "plain",
            "testsrc width=64 height=48 frames=30 ! stamp ! rawsink location={out}",
        ),
        (
            "bars",
            "testsrc width=64 height=48 pattern=bars frames=30 ! invert ! rawsink location={out}",
        ),
        (
            "sobel",
            "testsrc width=64 height=48 frames=30 ! frei0r-sobel ! stamp ! rawsink location={out}",
        ),
    ];
    let at = |name: &str| dir.join(format!("{name}.raw")).display().to_string();
    let stats_path = dir.join("stats.json");
    let mut args = vec![
        "run".to_string(),
        "--fps".into(),
        "100".into(),
        "-q".into(),
        "--stats".into(),
        stats_path.display().to_string(),
    ];
    args.extend(pipelines.iter().map(|(n, p)| p.replace("{out}", &at(n))));
    framepipe(&args.iter().map(String::as_str).collect::<Vec<_>>(), 0);
    for (name, p) in pipelines {
        let got = std::fs::read(dir.join(format!("{name}.raw"))).unwrap();
        assert!(
            got == alone(p, &dir, name),
            "show {name}: its frames differ from the same pipeline run alone"
        );
    }
    let s = stats(&stats_path);
    let pools = s["pools"].as_array().expect("a list of pools");
    assert_eq!(pools.len(), 1, "one pool for one frame size: {s}");
    let pool = &pools[0];
    assert_eq!(
        (&pool["width"], &pool["height"], &pool["shows"]),
        (&64.into(), &48.into(), &3.into())
    );
    let (made, capacity) = (
        pool["allocated"].as_u64().unwrap(),
        pool["capacity"].as_u64().unwrap(),
    );
    assert!(pool["peak"].as_u64().unwrap() >= 1, "{pool}");
    assert!(made < capacity, "every frame of the quotas made: {pool}");
}

/// Isolated plugins (their frames in shared memory, read and written in place by a child
/// process) in three shows of one size: one shared-memory pool for the three, and each show
/// still writes exactly what it writes alone.
#[test]
fn isolated_shows_of_one_size_share_one_shared_memory_pool() {
    let dir = tmpdir("shows-one-size-isolated");
    let pipeline = |pattern: &str| {
        format!(
            "testsrc width=64 height=48 frames=20 pattern={pattern} ! frei0r-sobel isolate=true \
             ! stamp ! rawsink location={{out}}"
        )
    };
    let shows = [("grad", pipeline("gradient")), ("noise", pipeline("noise"))];
    let at = |name: &str| dir.join(format!("{name}.raw")).display().to_string();
    let stats_path = dir.join("stats.json");
    let mut args = vec![
        "run".to_string(),
        "--fps".into(),
        "100".into(),
        "-q".into(),
        "--stats".into(),
        stats_path.display().to_string(),
    ];
    args.extend(shows.iter().map(|(n, p)| p.replace("{out}", &at(n))));
    framepipe(&args.iter().map(String::as_str).collect::<Vec<_>>(), 0);
    for (name, p) in &shows {
        let got = std::fs::read(dir.join(format!("{name}.raw"))).unwrap();
        assert!(
            got == alone(p, &dir, name),
            "show {name}: its frames differ from the same pipeline run alone"
        );
    }
    let s = stats(&stats_path);
    let pools = s["pools"].as_array().expect("a list of pools");
    assert_eq!(pools.len(), 1, "one pool for one frame size: {s}");
    assert_eq!(pools[0]["shared_memory"], true, "{s}");
    assert_eq!(pools[0]["shows"], 2, "{s}");
}

/// Two identical shows, started paused; `@show-1 bypass i on` then `@* resume` on stdin: show 1
/// is inverted until the frame its reply names and plain from there, show 2 inverted
/// throughout. A line without `@NAME` and an unknown name are refused, saying how to address.
#[test]
fn commands_addressed_by_name_reach_only_that_show() {
    let dir = tmpdir("shows-stdin");
    let inv = "testsrc width=64 height=48 frames=20 ! invert name=i ! rawsink location={out}";
    let plain = "testsrc width=64 height=48 frames=20 ! rawsink location={out}";
    let at = |name: &str| dir.join(format!("{name}.raw")).display().to_string();
    let mut child = Command::new(FP)
        .args([
            "run",
            "--start-paused",
            "--fps",
            "50",
            &inv.replace("{out}", &at("a")),
            &inv.replace("{out}", &at("b")),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::feed(
        &mut child,
        b"bypass i on\n@nope pause\n@show-1 bypass i on\n@* resume\n".to_vec(),
        false,
    );
    let out = wait(child, LIMIT, "two shows with stdin commands");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("refused command line 1 'bypass i on': 2 shows run; address one as '@NAME bypass i on' (shows: show-1, show-2)"),
        "{err}"
    );
    assert!(
        err.contains("refused command line 2: no show named 'nope' (shows: show-1, show-2)"),
        "{err}"
    );
    assert!(!err.contains("show show-2: ok 'bypass"), "{err}");
    let from = frame_of(&err, "show show-1: ok 'bypass i on' from frame ");
    let (inverted, plain) = (alone(inv, &dir, "inv"), alone(plain, &dir, "plain"));
    let frame = inverted.len() / 20;
    assert!(from < 20, "the bypass came after the last frame: {err}");
    let a = std::fs::read(at("a")).unwrap();
    assert_eq!(a.len(), inverted.len(), "{err}");
    for (k, f) in a.chunks(frame).enumerate() {
        let want = if (k as u64) < from { &inverted } else { &plain };
        assert!(
            f == &want[k * frame..(k + 1) * frame],
            "show-1 frame {k} (bypass from frame {from}): wrong bytes"
        );
    }
    assert!(
        std::fs::read(at("b")).unwrap() == inverted,
        "show-2 changed: a command for show-1 reached it"
    );
}

/// The frame number after `prefix` in `text`.
fn frame_of(text: &str, prefix: &str) -> u64 {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("no '{prefix}' in: {text}"));
    text[at + prefix.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// A show whose sink fails (a rawsink on /dev/full) ends with its name in the report; another
/// show goes on to its end with every frame, a third ends early and normally; the exit status
/// is 1 and `--stats` carries the failure on the failed show only.
#[test]
fn one_failing_show_ends_only_itself() {
    let dir = tmpdir("shows-fail");
    let good = "testsrc width=32 height=32 frames=30 ! stamp ! rawsink location={out}";
    let at = |name: &str| dir.join(format!("{name}.raw")).display().to_string();
    let stats_path = dir.join("stats.json");
    let out = framepipe(
        &[
            "run",
            "--fps",
            "50",
            "--control",
            "none",
            "--stats",
            &stats_path.display().to_string(),
            "testsrc width=32 height=32 frames=100000 ! rawsink location=/dev/full",
            &good.replace("{out}", &at("good")),
            "testsrc width=16 height=16 frames=3 ! nullsink",
        ],
        1,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("framepipe: show show-1: error: "), "{err}");
    assert!(err.contains("'/dev/full'"), "{err}");
    assert!(!err.contains("show show-2: error"), "{err}");
    assert!(!err.contains("show show-3: error"), "{err}");
    assert!(err.contains("3 shows: 2 ended, 1 failed (show-1)"), "{err}");
    assert!(
        std::fs::read(at("good")).unwrap() == alone(good, &dir, "good"),
        "the good show's frames differ from its run alone"
    );
    let s = stats(&stats_path);
    let shows = s["shows"].as_array().unwrap();
    assert!(
        shows[0]["error"].as_str().unwrap().contains("/dev/full"),
        "{s}"
    );
    assert!(shows[0]["frames"].as_u64().unwrap() < 100000, "{s}");
    assert_eq!(shows[1]["frames"], 30, "{s}");
    assert_eq!(shows[2]["frames"], 3, "{s}");
    assert!(shows[1].get("error").is_none() && shows[2].get("error").is_none());
}

/// What cannot run is refused before anything runs, naming the show: a show that cannot be
/// built, two shows of one name, a file stem that is no name, a surface that serves one show.
#[test]
fn what_cannot_run_is_refused_naming_the_show() {
    let dir = tmpdir("shows-refused");
    let first = dir.join("first.raw");
    let out = framepipe(
        &[
            "run",
            "--fps",
            "25",
            &format!(
                "testsrc width=8 height=8 frames=5 ! rawsink location={}",
                first.display()
            ),
            "testsrc ! frei0r-nosuchplugin ! nullsink",
        ],
        1,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("framepipe: error: show show-2: ") && err.contains("frei0r-nosuchplugin"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&first).map_or(0, |m| m.len()),
        0,
        "show 1 ran although show 2 could not be built"
    );
    for sub in ["a", "b"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        std::fs::write(
            dir.join(sub).join("cam.toml"),
            "pipeline = \"testsrc frames=1 ! nullsink\"\n",
        )
        .unwrap();
    }
    let (a, b) = (dir.join("a/cam.toml"), dir.join("b/cam.toml"));
    let out = framepipe(
        &["run", &a.display().to_string(), &b.display().to_string()],
        1,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "shows 1 ('{}') and 2 ('{}') are both named 'cam'",
            a.display(),
            b.display()
        )),
        "{err}"
    );
    let spaced = dir.join("my cam.toml");
    std::fs::write(&spaced, "pipeline = \"testsrc frames=1 ! nullsink\"\n").unwrap();
    let out = framepipe(
        &[
            "run",
            &spaced.display().to_string(),
            &a.display().to_string(),
        ],
        1,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot name its show 'my cam'") && err.contains("name = \"...\""),
        "{err}"
    );
    // The web page serves every show; a preview node one show lacks is refused naming it.
    let out = framepipe(
        &[
            "run",
            "--web",
            "127.0.0.1:0",
            "--web-preview",
            "invert",
            "testsrc frames=1 ! invert ! nullsink",
            "testsrc frames=1 ! nullsink",
        ],
        1,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("show show-2") && err.contains("invert") && !err.contains("show show-1"),
        "{err}"
    );
}

/// OSC addresses are prefixed with the show's name: `/show-1/framepipe/i/bypass` reaches show 1
/// only, `/*/framepipe/resume` every show; an unknown show's address is refused and counted.
#[test]
fn osc_addresses_name_the_show() {
    let dir = tmpdir("shows-osc");
    let inv = "testsrc width=64 height=48 frames=20 ! invert name=i ! rawsink location={out}";
    let plain = "testsrc width=64 height=48 frames=20 ! rawsink location={out}";
    let at = |name: &str| dir.join(format!("{name}.raw")).display().to_string();
    let mut child = Command::new(FP)
        .args([
            "run",
            "--start-paused",
            "--control",
            "none",
            "--osc",
            "127.0.0.1:0",
            "--fps",
            "50",
            &inv.replace("{out}", &at("a")),
            &inv.replace("{out}", &at("b")),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = Arc::new(Mutex::new(String::new()));
    let reader = {
        let err = Arc::clone(&err);
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut e = err.lock().unwrap();
                e.push_str(&line);
                e.push('\n');
            }
        })
    };
    // The port is said once the socket is bound.
    let mut port = None;
    wait_until(Duration::from_secs(30), "OSC port", || {
        let text = err.lock().unwrap().clone();
        port = text
            .split("OSC on udp 127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|p| p.parse::<u16>().ok());
        port.is_some() || child.try_wait().unwrap().is_some()
    });
    let port = port.unwrap_or_else(|| panic!("no OSC port: {}", err.lock().unwrap()));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let send = |addr: &str, args: Vec<OscType>| {
        let bytes = encoder::encode(&OscPacket::Message(OscMessage {
            addr: addr.into(),
            args,
        }))
        .unwrap();
        sock.send_to(&bytes, ("127.0.0.1", port)).unwrap();
    };
    send("/nope/framepipe/stop", vec![]);
    send("/show-1/framepipe/i/bypass", vec![OscType::Int(1)]);
    // The bypass is read before the resume (one queue, in order) once both are posted.
    wait_until(Duration::from_secs(30), "bypass applied", || {
        err.lock()
            .unwrap()
            .contains("show show-1: ok 'bypass i on'")
    });
    send("/*/framepipe/resume", vec![]);
    let status = {
        let mut st = None;
        wait_until(LIMIT, "the shows end", || {
            st = child.try_wait().unwrap();
            st.is_some()
        });
        st.unwrap()
    };
    reader.join().unwrap();
    let err = err.lock().unwrap().clone();
    assert!(status.success(), "{err}");
    assert!(
        err.contains("address '/nope/framepipe/stop': no show named 'nope'"),
        "{err}"
    );
    assert!(err.contains("osc: 3 ok, 1 bad"), "{err}");
    assert!(!err.contains("show show-2: ok 'bypass"), "{err}");
    let from = frame_of(&err, "show show-1: ok 'bypass i on' from frame ");
    assert!(from < 20, "{err}");
    let (inverted, plain) = (alone(inv, &dir, "inv"), alone(plain, &dir, "plain"));
    let frame = inverted.len() / 20;
    let a = std::fs::read(at("a")).unwrap();
    assert_eq!(a.len(), inverted.len(), "{err}");
    for (k, f) in a.chunks(frame).enumerate() {
        let want = if (k as u64) < from { &inverted } else { &plain };
        assert!(f == &want[k * frame..(k + 1) * frame], "show-1 frame {k}");
    }
    assert!(
        std::fs::read(at("b")).unwrap() == inverted,
        "show-2 changed"
    );
}

/// SIGINT stops every show at a frame boundary: each file holds whole frames, `--stats` has
/// every show, the exit status is 130.
#[test]
fn sigint_stops_every_show() {
    let dir = tmpdir("shows-sigint");
    let at = |name: &str| dir.join(format!("{name}.raw")).display().to_string();
    let stats_path = dir.join("stats.json");
    let show = |name: &str| {
        format!(
            "testsrc width=32 height=16 frames=100000 ! stamp ! rawsink location={}",
            at(name)
        )
    };
    let child = Command::new(FP)
        .args([
            "run",
            "--fps",
            "50",
            "--control",
            "none",
            "--stats",
            &stats_path.display().to_string(),
            &show("a"),
            &show("b"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(30), "both shows write", || {
        ["a", "b"]
            .iter()
            .all(|n| std::fs::metadata(at(n)).is_ok_and(|m| m.len() >= 3 * 32 * 16 * 4))
    });
    common::kill(child.id(), "INT");
    let out = wait(child, LIMIT, "two shows stopped by SIGINT");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let s = stats(&stats_path);
    for (i, name) in ["a", "b"].iter().enumerate() {
        let len = std::fs::metadata(at(name)).unwrap().len();
        let frames = s["shows"][i]["frames"].as_u64().unwrap();
        assert!((3..100000).contains(&frames), "{s}");
        assert_eq!(len, frames * 32 * 16 * 4, "show {name}: not whole frames");
    }
}

/// Fifty small shows paced at 25 fps in one process all complete, each with its own figures.
#[test]
fn fifty_paced_shows_complete() {
    let dir = tmpdir("shows-fifty");
    let stats_path = dir.join("stats.json");
    let stats_arg = stats_path.display().to_string();
    let show = "testsrc width=64 height=64 frames=25 ! stamp ! nullsink";
    let mut args = vec![
        "run",
        "-q",
        "--fps",
        "25",
        "--control",
        "none",
        "--stats",
        &stats_arg,
    ];
    args.extend(std::iter::repeat_n(show, 50));
    framepipe(&args, 0);
    let s = stats(&stats_path);
    let shows = s["shows"].as_array().unwrap();
    assert_eq!(shows.len(), 50);
    for (i, show) in shows.iter().enumerate() {
        assert_eq!(show["name"], format!("show-{}", i + 1));
        assert_eq!(show["frames"], 25, "{show}");
        assert_eq!(show["paced_fps"], 25.0, "{show}");
    }
}
