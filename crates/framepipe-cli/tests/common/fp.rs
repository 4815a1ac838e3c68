//! [`Fp`]: one running `framepipe` that a test talks to while it runs (commands on its stdin,
//! lines awaited on its stderr, the ports it prints), killed when dropped. One helper for every
//! test file that drives a live process (`web_security.rs`, `true_replies.rs`,
//! `special_files.rs`, the browser tests through `browser::Fp`).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{wait_until, FP};

/// How long a line or a port awaited on stderr may take to come.
const SAY_LIMIT: Duration = Duration::from_secs(20);

/// A running `framepipe`, its stderr collected line by line, its stdin kept open for
/// [`command`](Self::command) (when piped); killed when dropped, printing its stderr first when
/// the test is failing.
pub struct Fp {
    /// The process.
    pub child: Child,
    /// Its stderr so far, whole lines each ending with `\n`.
    pub stderr: Arc<Mutex<String>>,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<()>>,
}

impl Fp {
    /// `framepipe run ARGS`, stdin piped for commands, stdout discarded.
    pub fn run(args: &[&str]) -> Fp {
        Fp::start(Command::new(FP).arg("run").args(args).stdin(Stdio::piped()))
    }

    /// [`run`](Self::run) with `dir` as the working directory.
    pub fn run_in(dir: &Path, args: &[&str]) -> Fp {
        Fp::start(
            Command::new(FP)
                .current_dir(dir)
                .arg("run")
                .args(args)
                .stdin(Stdio::piped()),
        )
    }

    /// Starts `cmd` as it is set up for stdin; stdout is discarded, stderr collected.
    pub fn start(cmd: &mut Command) -> Fp {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn framepipe");
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(|l| l.ok()) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Fp {
            stdin: child.stdin.take(),
            child,
            stderr,
            reader: Some(reader),
        }
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Writes `line` and a newline to its stdin.
    pub fn command(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin piped");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// The rest of the first stderr line that starts with `prefix` (a leading `\r` of a status
    /// line skipped); waits 20 s for it.
    pub fn line_after(&self, prefix: &str) -> String {
        self.await_line(prefix, |l| {
            l.trim_start_matches('\r')
                .strip_prefix(prefix)
                .map(str::to_string)
        })
    }

    /// The text after `needle` on the first stderr line that holds it, trimmed; waits 20 s.
    pub fn after(&self, needle: &str) -> String {
        self.await_line(needle, |l| {
            l.split(needle).nth(1).map(|s| s.trim().to_string())
        })
    }

    /// The port of the URL after `needle` on stderr (`web control on http://127.0.0.1:P/`);
    /// waits 20 s.
    pub fn port_after(&self, needle: &str) -> u16 {
        self.await_line(needle, |l| {
            l.split(needle)
                .nth(1)?
                .trim_start_matches("http://")
                .split('/')
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()
        })
    }

    /// The web page's port.
    pub fn web_port(&self) -> u16 {
        self.port_after("web control on ")
    }

    /// How many times `needle` is on stderr so far.
    pub fn count(&self, needle: &str) -> usize {
        self.stderr().matches(needle).count()
    }

    /// Waits until `needle` is on stderr more than `n` times.
    pub fn wait_more(&self, needle: &str, n: usize) {
        wait_until(
            SAY_LIMIT,
            &format!("more than {n} lines with '{needle}'"),
            || self.count(needle) > n,
        );
    }

    /// Waits for the exit, at most `limit` (the test fails with its stderr after that), then
    /// for the rest of its stderr; returns how it ended.
    pub fn wait_status(&mut self, limit: Duration) -> ExitStatus {
        let start = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                start.elapsed() < limit,
                "framepipe still running after {limit:?}; stderr: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // Its last lines: the pipe ends with the process (and any child it left holding it).
        if let Some(reader) = self.reader.take() {
            let read = Instant::now();
            while !reader.is_finished() && read.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(5));
            }
            if reader.is_finished() {
                reader.join().unwrap();
            }
        }
        status
    }

    /// Waits for the exit as [`wait_status`](Self::wait_status) does; whether it succeeded.
    pub fn wait_exit(&mut self, limit: Duration) -> bool {
        self.wait_status(limit).success()
    }

    /// Waits 20 s at most for a successful exit; the test fails with its stderr otherwise.
    pub fn wait_success(&mut self) {
        let ok = self.wait_exit(SAY_LIMIT);
        assert!(ok, "{}", self.stderr());
    }

    /// Waits 20 s for a stderr line that `find` picks something from.
    fn await_line<T>(&self, what: &str, mut find: impl FnMut(&str) -> Option<T>) -> T {
        let mut found = None;
        wait_until(SAY_LIMIT, what, || {
            found = self.stderr().lines().find_map(&mut find);
            found.is_some()
        });
        found.unwrap()
    }
}

impl Drop for Fp {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "framepipe ({:?}), its stderr:\n{}",
                self.child.try_wait(),
                self.stderr()
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
