//! Paths an input or output takes, through the real binary (issue #21 items 2 and 3, #22 item
//! 8): special files as project files (at start and through a live `load`), a FIFO sink without
//! a reader, the stats path, signals while start-up waits, outputs that cannot be written, paths
//! in a project file relative to its folder, `--midi` with a relative path or a directory.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_sigterm_ends_at_once, fifo, run, run_fp, spawn, tmpdir, wait, Fp, FP};

/// `framepipe ARGS` under a 4 GiB address-space limit: a build that read a device whole would
/// fail there instead of taking the machine's memory.
fn limited(args: &[&str]) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 4194304; exec \"$0\" \"$@\"")
        .arg(FP)
        .args(args);
    cmd
}

/// Project files that are not regular files of at most 1 MiB, named `*.toml` (as `run` takes
/// project files): `/dev/zero` and `/dev/urandom` (symbolic links), a FIFO with no writer, a
/// directory, a sparse 2 GiB file. Each with the words its refusal must carry.
fn special_projects(dir: &Path) -> Vec<(String, &'static str)> {
    let zero = dir.join("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let random = dir.join("random.toml");
    std::os::unix::fs::symlink("/dev/urandom", &random).unwrap();
    let folder = dir.join("folder.toml");
    std::fs::create_dir(&folder).unwrap();
    let big = dir.join("big.toml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    vec![
        (zero.display().to_string(), "a character device"),
        (random.display().to_string(), "a character device"),
        (fifo(dir, "fifo.toml").display().to_string(), "a FIFO"),
        (folder.display().to_string(), "a directory"),
        (big.display().to_string(), "over the limit of 1048576 bytes"),
    ]
}

#[test]
fn a_project_file_that_is_a_device_fifo_directory_or_huge_is_refused_at_once() {
    let dir = tmpdir("special-projects");
    for (path, why) in special_projects(dir.path()) {
        let start = Instant::now();
        let out = run(&mut limited(&["run", &path]), Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{path}: {err}");
        assert!(
            err.contains(&format!("cannot read project file '{path}'")) && err.contains(why),
            "{path}: {err}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{path}: refused after {:?}",
            start.elapsed()
        );
    }
}

#[test]
fn a_live_load_of_a_special_file_is_refused_and_later_sets_still_work() {
    let dir = tmpdir("special-load");
    let projects = special_projects(dir.path());
    let out_path = dir.path().join("out.rgba");
    let pipeline = format!(
        "testsrc width=32 height=24 frames=0 ! stamp name=fx what=value ! rawsink name=out location={}",
        out_path.display()
    );
    let mut fp = Fp::run(&[&pipeline]);
    std::thread::sleep(Duration::from_millis(300));
    // One edit at a time (a second one while the first is prepared is refused as such), and
    // at most 3 refusals of a kind a second are printed (the rest counted): 450 ms apart.
    for (path, _) in &projects {
        fp.command(&format!("load {path}"));
        std::thread::sleep(Duration::from_millis(450));
    }
    fp.command("set fx.value 0.5");
    std::thread::sleep(Duration::from_millis(500));
    fp.command("stop");
    let ok = fp.wait_exit(Duration::from_secs(30));
    let err = fp.stderr();
    assert!(ok, "{err}");
    for (path, why) in &projects {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("refused 'load {path}'")))
            .unwrap_or_else(|| panic!("no refusal of 'load {path}': {err}"));
        assert!(
            line.contains(&format!("cannot read project file '{path}'")) && line.contains(why),
            "{line}"
        );
    }
    assert!(err.contains("ok 'set fx.value 0.5' from frame "), "{err}");
}

#[test]
fn a_fifo_sink_without_a_reader_ends_on_sigterm_with_143() {
    let dir = tmpdir("fifo-sink");
    let path = fifo(dir.path(), "out.y4m");
    let pipeline = format!(
        "testsrc width=32 height=24 frames=0 ! y4msink location={}",
        path.display()
    );
    let child = spawn(&["run", &pipeline]);
    std::thread::sleep(Duration::from_millis(800));
    assert_sigterm_ends_at_once(child, "a FIFO sink without a reader");
}

#[test]
fn a_fifo_sink_gets_every_frame_once_its_reader_comes() {
    let dir = tmpdir("fifo-sink-reader");
    let path = fifo(dir.path(), "out.rgba");
    let pipeline = format!(
        "testsrc width=8 height=8 frames=5 ! rawsink location={}",
        path.display()
    );
    let child = spawn(&["run", "-q", "--unpaced", &pipeline]);
    // The reader comes later than the sink's open.
    std::thread::sleep(Duration::from_millis(500));
    let mut got = Vec::new();
    std::fs::File::open(&path)
        .unwrap()
        .read_to_end(&mut got)
        .unwrap();
    let done = wait(child, Duration::from_secs(20), "a FIFO sink with a reader");
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert_eq!(got.len(), 5 * 8 * 8 * 4, "{err}");
}

#[test]
fn a_stats_path_that_cannot_be_written_fails_before_the_show() {
    let dir = tmpdir("stats-path");
    let stats = dir.path().join("missing").join("x.json");
    let out_path = dir.path().join("out.rgba");
    let pipeline = format!(
        "testsrc width=32 height=24 frames=0 ! rawsink location={}",
        out_path.display()
    );
    let stats_arg = stats.display().to_string();
    let out = run_fp(None, &["run", "--stats", &stats_arg, &pipeline]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot write stats to '{stats_arg}'")),
        "{err}"
    );
    assert!(!out_path.exists(), "the show ran: {err}");
}

#[test]
fn sigterm_while_tcpsrc_waits_for_its_sender_exits_143_at_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = spawn(&[
        "run",
        &format!("tcpsrc listen=127.0.0.1:{port} timeout=60 ! nullsink"),
    ]);
    // Listening: a connection is accepted (and left without a header).
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(20), "never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_sigterm_ends_at_once(child, "tcpsrc waiting for its sender");
}

#[test]
fn a_sink_writing_a_stdout_closed_at_start_is_an_error_naming_it() {
    for sink in ["y4msink", "rawsink"] {
        let pipeline = format!("testsrc width=32 height=24 frames=5 ! {sink} location=-");
        let out = run(
            Command::new("sh")
                .arg("-c")
                .arg("exec \"$0\" run --unpaced \"$1\" >&-")
                .arg(FP)
                .arg(&pipeline),
            Duration::from_secs(20),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{sink}: {err}");
        assert!(
            err.contains(&format!(
                "{sink}: its location writes standard output, which was closed"
            )),
            "{sink}: {err}"
        );
    }
}

#[test]
fn a_sink_on_a_full_disk_names_itself_and_the_frames_kept() {
    for sink in ["y4msink", "rawsink"] {
        let pipeline = format!("testsrc width=32 height=24 frames=5 ! {sink} location=/dev/full");
        let out = run_fp(None, &["run", "--unpaced", &pipeline]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{sink}: {err}");
        assert!(
            err.contains(&format!(
                "{sink}: writing '/dev/full': No space left on device (os error 28); the output \
                 holds 0 whole frames"
            )),
            "{sink}: {err}"
        );
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_run_naming_the_sink_and_the_frames_kept() {
    const FRAME: usize = 32 * 24 * 4;
    let mut child = Command::new(FP)
        .args([
            "run",
            "-q",
            "--unpaced",
            "testsrc width=32 height=24 frames=0 ! rawsink location=-",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut two = vec![0u8; 2 * FRAME];
    child.stdout.take().unwrap().read_exact(&mut two).unwrap();
    let done = wait(child, Duration::from_secs(20), "a reader that went away");
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(141), "{err}");
    let kept: u64 = err
        .split("the output holds ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no frames kept said: {err}"));
    assert!(err.contains("rawsink: writing 'stdout'"), "{err}");
    assert!(kept >= 2, "{kept} frames kept, 2 were read: {err}");
}

#[test]
fn relative_paths_in_a_project_file_resolve_against_its_folder() {
    let dir = tmpdir("project-folder");
    let show = dir.path().join("shows").join("a");
    std::fs::create_dir_all(&show).unwrap();
    let frames: Vec<u8> = (0..2 * 8 * 8 * 4).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(show.join("in.rgba"), &frames).unwrap();
    std::fs::write(
        show.join("show.toml"),
        "stats = \"stats.json\"\n\
         pipeline = \"rawsrc location=in.rgba width=8 height=8 ! rawsink location=out.rgba\"\n",
    )
    .unwrap();
    let out = run_fp(
        Some(dir.path()),
        &["run", "-q", "--unpaced", "shows/a/show.toml"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(std::fs::read(show.join("out.rgba")).unwrap(), frames);
    assert!(
        show.join("stats.json").exists(),
        "stats not beside the project"
    );
    assert!(!dir.path().join("out.rgba").exists());
}

#[test]
fn midi_given_as_a_relative_path_is_read_as_a_file() {
    let dir = tmpdir("midi-path");
    // One control change, then the end of the file.
    std::fs::write(dir.path().join("ctl.mid"), [0xb0, 7, 64]).unwrap();
    let out = run_fp(
        Some(dir.path()),
        &[
            "run",
            "--unpaced",
            "--midi",
            "./ctl.mid",
            "testsrc width=32 height=24 frames=5 ! nullsink",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("MIDI from ./ctl.mid"), "{err}");
}

#[test]
fn midi_on_a_directory_is_refused_at_start() {
    let dir = tmpdir("midi-dir");
    let out = run_fp(
        Some(dir.path()),
        &[
            "run",
            "--unpaced",
            "--midi",
            "./",
            "testsrc width=32 height=24 frames=5 ! nullsink",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot read MIDI from './': it is a directory"),
        "{err}"
    );
    assert!(err.lines().count() < 5, "{err}");
}

#[test]
fn a_project_loaded_live_reads_its_relative_paths_from_its_own_folder() {
    let dir = tmpdir("load-folder");
    let scene = dir.path().join("scenes").join("b");
    std::fs::create_dir_all(&scene).unwrap();
    std::fs::write(scene.join("in.rgba"), vec![7u8; 8 * 8 * 4]).unwrap();
    std::fs::write(
        scene.join("scene.toml"),
        "pipeline = \"rawsrc location=in.rgba width=8 height=8 on-end=loop ! rawsink name=out \
         location=out.rgba\"\n",
    )
    .unwrap();
    let mut fp = Fp::run_in(
        dir.path(),
        &["testsrc width=8 height=8 frames=0 ! rawsink name=out location=out.rgba"],
    );
    std::thread::sleep(Duration::from_millis(300));
    fp.command("load scenes/b/scene.toml");
    std::thread::sleep(Duration::from_millis(500));
    fp.command("stop");
    let ok = fp.wait_exit(Duration::from_secs(30));
    let err = fp.stderr();
    assert!(ok, "{err}");
    assert!(
        err.contains("ok 'load scenes/b/scene.toml' from frame "),
        "{err}"
    );
}
