//! Helpers shared by the CLI's tests: the real binary, temporary directories, waiting with a
//! deadline, a live process to talk to ([`Fp`]), FIFOs, real signals, peak memory of a live
//! child.
#![allow(dead_code)] // each test file uses its own subset

mod fp;
pub mod shaders;
#[allow(unused_imports)] // used by the files that drive a live process
pub use fp::Fp;

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const FP: &str = env!("CARGO_BIN_EXE_framepipe");

/// A fresh temporary directory `fp-hard-NAME-XXXXXX` for one test, removed (with its files) when
/// the returned guard drops, also when the test fails; `FP_KEEP_TMP=1` keeps it.
pub fn tmpdir(name: &str) -> framepipe_testkit::TestDir {
    framepipe_testkit::tmpdir(&format!("fp-hard-{name}"))
}

/// `framepipe ARGS` with stdin, stdout and stderr piped.
pub fn spawn(args: &[&str]) -> Child {
    Command::new(FP)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn framepipe")
}

/// Waits for `child` at most `limit`; a child still running then is killed and the test fails
/// (a hang is a failure, not a stuck suite). Reads its stdout and stderr meanwhile, so that a
/// chatty child never blocks on a full pipe.
pub fn wait(mut child: Child, limit: Duration, what: &str) -> Output {
    fn drain(r: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let err = err.join().unwrap();
            panic!(
                "{what}: still running after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Runs `cmd` (stdin closed, output captured) with a deadline, as [`wait`] does.
pub fn run(cmd: &mut Command, limit: Duration) -> Output {
    let what = format!("{cmd:?}");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    wait(child, limit, &what)
}

/// Frames ffprobe counts by decoding `file` whole (relative paths from `cwd`): a file ffmpeg
/// did not finish (an mp4 without its index) fails here.
pub fn ffprobe_frames(cwd: &std::path::Path, file: &str) -> u64 {
    let out = run(
        Command::new("ffprobe").current_dir(cwd).args([
            "-v",
            "error",
            "-count_frames",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=nb_read_frames",
            "-of",
            "csv=p=0",
            "-i",
            file,
        ]),
        Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ffprobe on {file}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("ffprobe on {file}: {text:?}"))
}

/// Writes `bytes` to the child's stdin from a thread (the child may read slowly) and keeps
/// stdin open afterwards when `keep_open`, until the returned handle is joined... and dropped.
pub fn feed(
    child: &mut Child,
    bytes: Vec<u8>,
    keep_open: bool,
) -> std::thread::JoinHandle<Option<ChildStdin>> {
    let mut stdin = child.stdin.take().expect("stdin piped");
    std::thread::spawn(move || {
        let _ = stdin.write_all(&bytes);
        keep_open.then_some(stdin)
    })
}

/// Sends signal `sig` (`INT`, `TERM`, ...) to `pid` with kill(1).
pub fn kill(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(st.success(), "kill -{sig} {pid}");
}

/// Sends SIGTERM to `child` and asserts that it exits 143 (the signal's status) within 3 s.
pub fn assert_sigterm_ends_at_once(child: Child, what: &str) {
    let pid = child.id();
    let sent = Instant::now();
    kill(pid, "TERM");
    let done = wait(child, Duration::from_secs(10), what);
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(143), "{err}");
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "{:?} after SIGTERM",
        sent.elapsed()
    );
}

/// A FIFO `dir/name` made with mkfifo(1).
pub fn fifo(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    let st = Command::new("mkfifo").arg(&p).status().expect("mkfifo");
    assert!(st.success(), "mkfifo {}", p.display());
    p
}

/// Runs `framepipe ARGS` (in `dir`, when given) to its end, 20 s at most, as [`run`] does.
pub fn run_fp(dir: Option<&std::path::Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(FP);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    run(cmd.args(args), Duration::from_secs(20))
}

/// Peak resident memory of a live process so far (`VmHWM`), bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/PID/status");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Waits until `cond` holds, at most `limit`.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The size of a file, 0 when it does not exist yet.
pub fn file_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// A free UDP port on loopback (bound, then released for framepipe to bind).
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
