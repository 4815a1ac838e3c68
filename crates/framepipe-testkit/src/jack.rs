//! A JACK server for the live-audio tests: Debian's jackd2 with its dummy backend (no sound
//! card), stopped with SIGTERM. Never SIGKILL a JACK server: a killed server's entry stays in
//! JACK's shared registry, which holds 8 servers at most, and after 8 of them no server starts
//! on the machine ("Too many servers already active"). An entry is reclaimed only by a server
//! of the same name, so the tests' servers take their names from a pool of [`POOL`]
//! (`fp-test-jack-0` ..): a stale entry left by a crashed run is reclaimed by the next run that
//! picks its name, and a name whose server runs (another test) is skipped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process ended with [`terminate`] when dropped, however the test ends.
#[derive(Debug)]
pub struct Terminated(pub Child);

impl Drop for Terminated {
    fn drop(&mut self) {
        terminate(&mut self.0);
    }
}

/// Ends `child` with SIGTERM (a JACK process then leaves JACK's shared registry), waiting up
/// to 5 s before SIGKILL, and reaps it.
pub fn terminate(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Names a test server may take: `fp-test-jack-0` .. `fp-test-jack-{POOL - 1}`.
pub const POOL: usize = 8;

/// A JACK dummy server (48 kHz, 1024-frame periods), started and waited for (10 s at most:
/// the test fails with what to install otherwise). Stopped when dropped.
#[derive(Debug)]
pub struct JackServer {
    name: String,
    child: Option<Terminated>,
}

impl JackServer {
    /// Starts a server under the first free name of the pool and waits until it answers.
    pub fn start() -> Self {
        for k in 0..POOL {
            let mut s = JackServer {
                name: format!("fp-test-jack-{k}"),
                child: None,
            };
            if s.try_start() {
                return s;
            }
        }
        panic!(
            "no JACK dummy server could start under any of the names fp-test-jack-0..{}: \
             are {POOL} tests running one, or is JACK's registry full of other servers?",
            POOL - 1
        );
    }

    /// The server's name (what `JACK_DEFAULT_SERVER` names).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stops the server (SIGTERM) and waits for it to end.
    pub fn stop(&mut self) {
        drop(self.child.take());
    }

    /// Starts the server again under the same name (after [`JackServer::stop`]).
    pub fn restart(&mut self) {
        assert!(
            self.try_start(),
            "the JACK dummy server {} did not start again",
            self.name
        );
    }

    /// Starts the server under its name: false if it exits at once (the name is taken) or
    /// does not answer within 10 s (then it is stopped).
    fn try_start(&mut self) -> bool {
        self.stop();
        let child = Command::new("jackd")
            .args(["--no-realtime", "-n", &self.name])
            .args(["-d", "dummy", "-r", "48000", "-p", "1024"])
            .env("JACK_NO_AUDIO_RESERVATION", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot run jackd; install it: apt-get install jackd2");
        let mut child = Terminated(child);
        let start = Instant::now();
        loop {
            if let Ok(Some(_)) = child.0.try_wait() {
                return false;
            }
            if jack_tool(&self.name, "jack_lsp", &[]) {
                self.child = Some(child);
                return true;
            }
            if start.elapsed() > Duration::from_secs(10) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's ports, with their connections (`jack_lsp -c`).
    /// Empty when `jack_lsp` did not answer within [`TOOL_TIMEOUT`] (killed: see there).
    pub fn ports(&self) -> String {
        let mut cmd = Command::new("jack_lsp");
        cmd.arg("-c").env("JACK_DEFAULT_SERVER", &self.name);
        run_tool(cmd, "jack_lsp")
            .map(|(_, out)| out)
            .unwrap_or_default()
    }

    /// The ports of client `client`, waiting up to 15 s for it to have one.
    pub fn ports_of(&self, client: &str) -> Vec<String> {
        let start = Instant::now();
        loop {
            let ports: Vec<String> = self
                .ports()
                .lines()
                .filter(|l| l.starts_with(&format!("{client}:")))
                .map(str::to_string)
                .collect();
            if !ports.is_empty() {
                return ports;
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "no JACK client {client} within 15 s; ports: {}",
                self.ports()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Connects port `from` to port `to` (`jack_connect`).
    pub fn connect(&self, from: &str, to: &str) -> bool {
        jack_tool(&self.name, "jack_connect", &[from, to])
    }
}

/// Runs JACK tool `tool` against server `server`: whether it succeeded.
pub fn jack_tool(server: &str, tool: &str, args: &[&str]) -> bool {
    let mut cmd = Command::new(tool);
    cmd.args(args).env("JACK_DEFAULT_SERVER", server);
    run_tool(cmd, tool).is_some_and(|(ok, _)| ok)
}

/// How long a JACK tool may take. A libjack client can hang for good while connecting to a
/// server another client is registering with or leaving (seen once: `jack_lsp` blocked in a
/// futex for 12 minutes while the tone generator connected); callers retry instead.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(3);

/// Runs `cmd` (a JACK tool named `tool`) with its output captured: its success and stdout, or
/// `None` when it did not end within [`TOOL_TIMEOUT`] (it is killed and reaped).
fn run_tool(mut cmd: Command, tool: &str) -> Option<(bool, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}; install it: apt-get install jackd2"));
    let start = Instant::now();
    loop {
        // The tools print a few lines: far less than a pipe holds, so waiting before reading
        // cannot block the child.
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < TOOL_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(10))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}
