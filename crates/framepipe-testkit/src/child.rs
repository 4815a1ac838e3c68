//! Running a child process (the real `framepipe` binary, ffmpeg...) with a time limit and reading
//! what it cost: its peak resident memory from `wait4`'s rusage, as the kernel counted it.
//!
//! This is how the memory-budget tests prove that a bad input is refused *before* anything large
//! is allocated: the child's peak RSS stays small while its error names the limit.
//!
//! Why through GNU `time` (Debian's `time` package, installed by `scripts/install-deps`): Linux
//! counts a process's peak RSS from before its `exec`, so a child forked from a large test
//! process (a test harness running other tests in parallel) reports at least the parent's RSS
//! (seen: 47 MiB for a child that took 5 MiB). `time` is small when it forks the command, and
//! reports the command's own `ru_maxrss` from `wait4`. Without `/usr/bin/time` the child is
//! waited for directly and the figure includes that floor.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// GNU time: runs the command as its own child and writes its exit and peak RSS to a file.
const GNU_TIME: &str = "/usr/bin/time";

/// What a finished child did.
#[derive(Debug)]
pub struct Finished {
    /// Exit code, or `None` when killed by a signal.
    pub code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    /// Peak resident set size, bytes (`ru_maxrss`).
    pub max_rss_bytes: u64,
    /// Wall time from spawn to exit.
    pub wall: Duration,
    /// Everything it wrote on stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote on stderr, as text (lossy).
    pub stderr: String,
}

/// Runs `cmd` (stdin closed, stdout and stderr captured) and waits at most `timeout`; a child
/// still running then is killed and this panics, so a hang fails the test instead of the suite.
// The child is reaped with `wait4` (for its rusage), which std's lint cannot see.
#[allow(clippy::zombie_processes)]
pub fn run(cmd: &mut Command, timeout: Duration) -> Finished {
    // GNU time's report, in a directory removed on drop (also when this panics on a timeout).
    let report_dir = crate::tmpdir("fp-child");
    let report = report_dir.join("report.time");
    let mut wrapped;
    let cmd: &mut Command = if Path::new(GNU_TIME).exists() {
        wrapped = Command::new(GNU_TIME);
        wrapped
            .arg("-f")
            .arg("FPTIME %x %M")
            .arg("-o")
            .arg(&report)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        if let Some(d) = cmd.get_current_dir() {
            wrapped.current_dir(d);
        }
        &mut wrapped
    } else {
        cmd
    };
    // Its own process group, so that a timeout kills the command too, not only `time`.
    cmd.process_group(0);
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let pid = child.id() as libc::pid_t;
    let (status, rusage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child, not yet reaped (std's Child is never waited on here);
        // both out-pointers point to live locals of the right types.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut rusage) };
        if r == pid {
            break (status, rusage);
        }
        assert!(r == 0, "wait4 failed: {}", std::io::Error::last_os_error());
        if started.elapsed() > timeout {
            // SAFETY: kill(2) on our child's process group (made above); no memory is passed.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = child.kill();
            panic!("{cmd:?} still running after {timeout:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = started.elapsed();
    let stdout = out_reader.join().expect("reader thread");
    let stderr = String::from_utf8_lossy(&err_reader.join().expect("reader thread")).into_owned();
    let (mut code, mut signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    // Linux reports ru_maxrss in KiB.
    let mut max_rss_kib = rusage.ru_maxrss.max(0) as u64;
    if let Ok(text) = std::fs::read_to_string(&report) {
        let _ = std::fs::remove_file(&report);
        for line in text.lines() {
            if let Some(n) = line.strip_prefix("Command terminated by signal ") {
                signal = n.trim().parse().ok();
                code = None;
            } else if let Some(rest) = line.strip_prefix("FPTIME ") {
                let mut f = rest.split_whitespace();
                let exit: Option<i32> = f.next().and_then(|x| x.parse().ok());
                if signal.is_none() {
                    code = exit;
                }
                if let Some(kib) = f.next().and_then(|x| x.parse().ok()) {
                    max_rss_kib = kib;
                }
            }
        }
    }
    Finished {
        code,
        signal,
        max_rss_bytes: max_rss_kib * 1024,
        wall,
        stdout,
        stderr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_rss_follows_what_the_child_touched() {
        // python3 is on every machine of this project (the benchmark scripts use it).
        let small = run(
            Command::new("python3").args(["-c", "pass"]),
            Duration::from_secs(30),
        );
        let big = run(
            Command::new("python3").args([
                "-c",
                "b = bytearray(300 * 1024 * 1024)\nb[::4096] = b'x' * len(b[::4096])",
            ]),
            Duration::from_secs(30),
        );
        assert_eq!(small.code, Some(0), "{}", small.stderr);
        assert_eq!(big.code, Some(0), "{}", big.stderr);
        assert!(small.max_rss_bytes < 100 << 20, "{}", small.max_rss_bytes);
        assert!(big.max_rss_bytes > 300 << 20, "{}", big.max_rss_bytes);
    }

    #[test]
    fn a_childs_peak_rss_is_its_own_not_its_large_parents() {
        // This process touches 200 MiB, then runs a small child: Linux would count the parent's
        // RSS from before the child's exec as the child's peak, unless it runs through `time`.
        let big = vec![1u8; 200 << 20];
        let small = run(
            Command::new("python3").args(["-c", "pass"]),
            Duration::from_secs(30),
        );
        assert_eq!(
            big.iter().step_by(4096).map(|&b| b as usize).sum::<usize>(),
            51200
        );
        assert_eq!(small.code, Some(0), "{}", small.stderr);
        assert!(
            small.max_rss_bytes < 100 << 20,
            "the child's own peak: {} bytes",
            small.max_rss_bytes
        );
    }

    #[test]
    fn exit_codes_and_signals_are_told_apart() {
        let f = run(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
        );
        assert_eq!((f.code, f.signal), (Some(3), None));
        assert_eq!(f.stdout, b"out\n");
        assert_eq!(f.stderr, "err\n");
        let k = run(
            Command::new("sh").args(["-c", "kill -TERM $$"]),
            Duration::from_secs(10),
        );
        assert_eq!((k.code, k.signal), (None, Some(libc::SIGTERM)));
    }
}
