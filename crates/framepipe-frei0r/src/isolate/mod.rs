//! Plugin isolation: a frei0r plugin run in a child process, so that its crash or hang costs
//! one node some frames instead of the whole show.
//!
//! `isolate=true` on a frei0r node (or `framepipe run --isolate-plugins`, [`set_isolate_all`])
//! makes each instance of it an [`Isolated`] runner: a child process (this program again, with
//! [`HOST_ARG`] first, see [`host_main_if_asked`]; or the program given to
//! [`set_host_program`]) that loads the plugin and makes the instance there. Frames stay where
//! they are: building an isolated node asks for shared frame pools
//! ([`framepipe_core::shm::request_shared_pools`]), so the runtime's pools keep their buffers in
//! memfds, and per frame the parent writes where the inputs and the output are (pool, offset) into
//! the instance's header ([`shm`]), stores the frame number in a shared word (`req`), pins the
//! child to its own CPU and wakes it with one byte on its stdin; the child (which maps each pool
//! once, read-only with guard pages, and makes the output frame alone writable while it runs the
//! plugin: `poolmap.rs`) unpins itself, reads the inputs and writes the output in place, stores
//! the number in another shared word (`done`) and wakes the parent with one byte on its stdout.
//! No copy per frame: two one-byte pipe wake-ups and two `sched_setaffinity` calls. A frame from
//! a heap pool (a caller that made its own pool) is copied into or out of the instance's own
//! buffers instead, and `on-crash=hold` keeps a copy of each delivered output (the pool frame
//! itself goes on down the graph). Parameter changes go down the child's stdin too (a text line
//! each, before the frame's wake-up byte).
//!
//! Why pipes and a pin rather than futexes: the worker sleeps while its child works, so the
//! child should take the worker's CPU. With futex wake-ups the scheduler often queued the child
//! behind the other (busy) core instead, and the worker's core idled until the load balancer
//! noticed: 10–17 % of the cores' time idle in the benchmark's chain on an otherwise quiet
//! 2-core machine, against 0.3–2.8 % in process. A pipe write is a *synchronous* wake-up (the
//! waker is about to sleep), which took that to 9–12 %; pinning the child to the waker's CPU for
//! its wake-up, to 1.3–3.2 % (docs/ISOLATION.md, "Cost", `scripts/bench-isolate --sched`).
//!
//! When the child dies (a signal, an exit) or does not answer within the stall timeout
//! (`stall-ms`; it is then killed), the frame is replaced as `on-crash` says: `bypass` copies
//! the input (a source gives opaque black), `hold` repeats the last good output (kept in the other
//! output slot). A line on stderr names the node, the signal or the timeout and the frame, and the
//! counters of [`summaries`] go up. The child is restarted with backoff ([`BACKOFF`]: at once,
//! then 100 ms, 1 s, 5 s) with every parameter as last set; the backoff starts again once a child
//! has served [`HEALTHY_FRAMES`] frames. A plugin that keeps state between frames loses it at a
//! restart (the report line says so).
//!
//! Real-time contract: in the steady state, a frame costs a one-byte write, a `poll` and a read
//! (and `sched_getcpu` and `sched_setaffinity`) in the parent, the copies above for heap frames
//! or `hold` and, only when the plugin takes more than 10 ms, a `waitid(WNOHANG|WNOWAIT)` per 10 ms
//! waited; nothing is allocated. A child that dies closes its end of the done pipe, which wakes
//! the parent at once. A failure (report line, kill, restart: fork+exec of the host) allocates and
//! blocks, on that node's worker only, for at most the stall timeout plus the new child's start.

mod host;
mod poolmap;
pub(crate) mod shm;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use framepipe_core::{Frame, FrameMut, PropKind, PropSpec, PropValue, Props};

pub use host::host_main_if_asked;
use shm::{futex_wait, Shm};

use crate::plugin::{ParamValue, Plugin};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::OFlags;
use rustix::process::{kill_process_group, waitid, Pid, Signal, WaitId, WaitIdOptions};
use rustix::thread::{sched_getaffinity, sched_getcpu, sched_setaffinity, CpuSet};

/// The first argument that makes a program that calls [`host_main_if_asked`] serve as the
/// host of an isolated plugin instead of being itself.
pub const HOST_ARG: &str = "__frei0r-host";

/// Restart delays after consecutive failures: the first restart is immediate; the last delay
/// repeats.
pub const BACKOFF: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_millis(100),
    Duration::from_secs(1),
    Duration::from_secs(5),
];

/// Frames a child must serve without failing before the backoff starts again from zero.
pub const HEALTHY_FRAMES: u64 = 100;

/// Default stall timeout of an isolated plugin, in milliseconds (`stall-ms`).
pub const DEFAULT_STALL_MS: i64 = 1000;

/// A child gets at least this long to load the plugin and make its instance.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The byte that wakes a child for a frame, on its stdin between parameter lines (which are
/// text: it never occurs in them).
pub(crate) const WAKE: u8 = 0;

/// How often a waiting parent checks whether the child is still alive.
const POLL: Duration = Duration::from_millis(10);

static ISOLATE_ALL: AtomicBool = AtomicBool::new(false);
static ISOLATE_BY_DEFAULT: AtomicBool = AtomicBool::new(false);
static HOST: OnceLock<PathBuf> = OnceLock::new();
static STATS: Mutex<Vec<Arc<Counters>>> = Mutex::new(Vec::new());
/// The process group of every child running now (each child leads its own group): what
/// [`end_all`] ends.
static GROUPS: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

/// Ends every isolated child still running and every process it started (its whole process
/// group, SIGKILL): for exit paths that do not drop the graph (`std::process::exit` after an
/// error, a panic). Dropping an [`Isolated`] does the same for its own child. A child whose
/// parent dies without either (SIGKILL) ends its group itself within half a second.
pub fn end_all() {
    // The lock is held while killing: a group is removed from GROUPS (under it) before its
    // leader is reaped, so every group killed here still has its unreaped leader.
    let mut groups = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    for pgid in groups.drain(..) {
        // The group is one of our children's, its leader not reaped (above), so the id cannot
        // name another group.
        let _ = kill_process_group(pgid, Signal::KILL);
    }
}

/// Ends `child`'s whole process group (SIGKILL) and reaps the child. The group is killed before
/// the leader is reaped: until then its id cannot be reused by another process group.
fn end_group(child: &mut Child) -> Option<std::process::ExitStatus> {
    let pgid = pid_of(child);
    GROUPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&g| g != pgid);
    // As in `end_all`: our unreaped child leads this group.
    let _ = kill_process_group(pgid, Signal::KILL);
    child.wait().ok()
}

/// Whether `child` has ended, without reaping it (`waitid(WNOWAIT)`): its group id stays ours
/// until [`end_group`] has killed what is left in it.
fn has_exited(child: &Child) -> bool {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    matches!(waitid(WaitId::Pid(pid_of(child)), options), Ok(Some(_)))
}

/// A running child's process id (never 0).
fn pid_of(child: &Child) -> Pid {
    Pid::from_child(child)
}

/// Isolates every frei0r node built from now on (`framepipe run --isolate-plugins`), as if each
/// had `isolate=true`.
pub fn set_isolate_all(on: bool) {
    ISOLATE_ALL.store(on, Ordering::Relaxed);
}

/// Makes `isolate` default to `true` for every frei0r element registered from now on (a run of
/// several shows: one show's plugin crash must not end the others). Unlike
/// [`set_isolate_all`], a node's own `isolate=false` still runs it in process.
pub fn set_isolate_by_default(on: bool) {
    ISOLATE_BY_DEFAULT.store(on, Ordering::Relaxed);
}

/// The program to run as the host of isolated plugins, with [`HOST_ARG`] as its first argument
/// (e.g. the `frei0r-host` binary, for test programs that are not `framepipe`). Without it,
/// `FRAMEPIPE_FREI0R_HOST` if set, else the running program itself ([`std::env::current_exe`]),
/// which must then call [`host_main_if_asked`] first thing in `main` (the `framepipe` binary
/// does). Only the first call counts.
pub fn set_host_program(path: PathBuf) {
    let _ = HOST.set(path);
}

fn host_program() -> std::io::Result<PathBuf> {
    if let Some(p) = HOST.get() {
        return Ok(p.clone());
    }
    if let Some(p) = std::env::var_os("FRAMEPIPE_FREI0R_HOST") {
        return Ok(p.into());
    }
    std::env::current_exe()
}

/// What replaces an isolated node's output for a frame its plugin did not deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCrash {
    /// The (first) input frame, unchanged; opaque black for a source.
    Bypass,
    /// The last output the plugin delivered (the input, or black, before the first).
    Hold,
}

/// How an isolated node behaves, from its properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// What replaces a lost frame.
    pub on_crash: OnCrash,
    /// A frame not delivered within this long counts as a stall: the child is killed.
    pub stall: Duration,
    /// The plugin keeps state between frames (or was not shown not to): a restart loses it.
    pub stateful: bool,
}

/// The node properties isolation adds to every frei0r element: `isolate` (default `isolated`,
/// or `true` after [`set_isolate_by_default`]), `on-crash`, `stall-ms`.
pub(crate) fn prop_specs(isolated: bool) -> Vec<PropSpec> {
    let isolated = isolated || ISOLATE_BY_DEFAULT.load(Ordering::Relaxed);
    vec![
        PropSpec::new(
            "isolate",
            PropKind::Bool,
            PropValue::Bool(isolated),
            "run the plugin in a child process: a crash or hang is reported and contained \
             (docs/ISOLATION.md)",
        )
        .fixed(),
        PropSpec::new(
            "on-crash",
            PropKind::Enum(vec!["bypass".into(), "hold".into()]),
            PropValue::Str("bypass".into()),
            "isolated: a frame the plugin did not deliver is the input (bypass) or the last good \
             output (hold)",
        )
        .fixed(),
        PropSpec::new(
            "stall-ms",
            PropKind::Int {
                min: 10,
                max: 3_600_000,
            },
            PropValue::Int(DEFAULT_STALL_MS),
            "isolated: a frame taking longer than this many ms kills and restarts the plugin",
        )
        .fixed(),
    ]
}

/// The settings when the node is to be isolated (`isolate=true` or [`set_isolate_all`]).
pub(crate) fn settings(props: &Props, stateful: bool) -> Option<Settings> {
    let on = props
        .get("isolate")
        .is_some_and(|v| v == &PropValue::Bool(true));
    if !on && !ISOLATE_ALL.load(Ordering::Relaxed) {
        return None;
    }
    // The pools made from now on keep their frames in shared memory: the child reads and writes
    // them in place.
    framepipe_core::shm::request_shared_pools();
    let on_crash = match props.get("on-crash") {
        Some(PropValue::Str(s)) if s == "hold" => OnCrash::Hold,
        _ => OnCrash::Bypass,
    };
    let ms = match props.get("stall-ms") {
        Some(PropValue::Int(n)) => *n,
        _ => DEFAULT_STALL_MS,
    };
    Some(Settings {
        on_crash,
        stall: Duration::from_millis(ms.max(1) as u64),
        stateful,
    })
}

/// An isolated node's counters, live.
#[derive(Debug)]
struct Counters {
    name: String,
    crashes: AtomicU64,
    stalls: AtomicU64,
    restarts: AtomicU64,
    substituted: AtomicU64,
    frames: AtomicU64,
    copied: AtomicU64,
}

/// What isolation saw for one element over the run, summed over its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The element (`frei0r-partik0l`).
    pub name: String,
    /// Child processes that died (a signal or an exit).
    pub crashes: u64,
    /// Child processes killed for exceeding the stall timeout.
    pub stalls: u64,
    /// Child processes started again after a failure.
    pub restarts: u64,
    /// Frames given out bypassed or held instead of the plugin's output.
    pub substituted: u64,
    /// Frames run (delivered or replaced).
    pub frames: u64,
    /// Bytes copied to get frames to and from the child when it delivered them (0 when every
    /// frame came from and went to a shared pool and `on-crash` is `bypass`: zero-copy).
    pub bytes_copied: u64,
}

/// The isolation counters of every isolated element made in this process, one per element name.
pub fn summaries() -> Vec<Summary> {
    let all = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<Summary> = Vec::new();
    for c in all.iter() {
        let idx = match out.iter().position(|s| s.name == c.name) {
            Some(i) => i,
            None => {
                out.push(Summary {
                    name: c.name.clone(),
                    crashes: 0,
                    stalls: 0,
                    restarts: 0,
                    substituted: 0,
                    frames: 0,
                    bytes_copied: 0,
                });
                out.len() - 1
            }
        };
        let s = &mut out[idx];
        s.crashes += c.crashes.load(Ordering::Relaxed);
        s.stalls += c.stalls.load(Ordering::Relaxed);
        s.restarts += c.restarts.load(Ordering::Relaxed);
        s.substituted += c.substituted.load(Ordering::Relaxed);
        s.frames += c.frames.load(Ordering::Relaxed);
        s.bytes_copied += c.copied.load(Ordering::Relaxed);
    }
    out
}

/// One text line per parameter for the child's stdin: `INDEX KIND VALUES...`.
pub(crate) fn encode_param(index: usize, value: &ParamValue) -> String {
    match value {
        ParamValue::Bool(b) => format!("{index} b {}\n", u8::from(*b)),
        ParamValue::Double(x) => format!("{index} d {x:?}\n"),
        ParamValue::Color([r, g, b]) => format!("{index} c {r:?} {g:?} {b:?}\n"),
        ParamValue::Position([x, y]) => format!("{index} p {x:?} {y:?}\n"),
        ParamValue::String(s) => {
            let hex: String = s.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
            format!("{index} s {hex}\n")
        }
    }
}

/// The inverse of [`encode_param`] (without the newline).
pub(crate) fn decode_param(line: &str) -> Option<(usize, ParamValue)> {
    let mut f = line.split_ascii_whitespace();
    let index = f.next()?.parse().ok()?;
    let kind = f.next()?;
    let mut num = || f.next().and_then(|s| s.parse::<f64>().ok());
    let v = match kind {
        "b" => ParamValue::Bool(num()? != 0.0),
        "d" => ParamValue::Double(num()?),
        "c" => ParamValue::Color([num()? as f32, num()? as f32, num()? as f32]),
        "p" => ParamValue::Position([num()?, num()?]),
        "s" => {
            let hex = f.next().unwrap_or("");
            if !hex.len().is_multiple_of(2) {
                return None;
            }
            let bytes: Option<Vec<u8>> = (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
                .collect();
            ParamValue::String(std::ffi::CString::new(bytes?).ok()?)
        }
        _ => return None,
    };
    Some((index, v))
}

#[inline(always)]
pub(crate) fn swap_rb(w: u32) -> u32 {
    let b = w.to_ne_bytes();
    u32::from_ne_bytes([b[2], b[1], b[0], b[3]])
}

/// Why a frame was not delivered.
enum Failure {
    /// The child died: how.
    Died(String),
    /// No answer within the stall timeout (the child was killed).
    Stalled(Duration),
    /// The child could not be started.
    Spawn(String),
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(sig) => {
            let name = match sig {
                libc::SIGSEGV => " SIGSEGV",
                libc::SIGABRT => " SIGABRT",
                libc::SIGFPE => " SIGFPE",
                libc::SIGBUS => " SIGBUS",
                libc::SIGILL => " SIGILL",
                libc::SIGKILL => " SIGKILL",
                libc::SIGTERM => " SIGTERM",
                _ => "",
            };
            format!("crashed (signal {sig}{name})")
        }
        None => format!("exited (status {})", status.code().unwrap_or(-1)),
    }
}

/// A running child and the two pipes of its hand-off: its stdin carries parameter lines and one
/// [`WAKE`] byte per frame asked for, its stdout one byte per frame done (read without blocking).
struct ChildIo {
    child: Child,
    stdin: ChildStdin,
    done: ChildStdout,
}

/// One plugin instance living in a child process, restarted when it fails. Never fails a
/// frame: what the plugin did not deliver is replaced ([`OnCrash`]).
pub struct Isolated {
    name: String,
    plugin: Arc<Plugin>,
    width: u32,
    height: u32,
    inputs: usize,
    clear_output: bool,
    settings: Settings,
    /// Every parameter as last set (index, value): given to each new child.
    params: Vec<(usize, ParamValue)>,
    shm: Shm,
    child: Option<ChildIo>,
    /// A child started and not yet known ready: the deadline for its instance.
    starting: Option<Instant>,
    /// The last frame number asked for (the `req` word).
    seq: u32,
    /// The output slot holding the last good output.
    last_good: Option<usize>,
    /// Consecutive failures (restarts since the last healthy child).
    failures: usize,
    /// Frames served by the current child.
    served: u64,
    /// When the next restart may happen (after a failure).
    restart_at: Option<Instant>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for Isolated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Isolated({} {}x{})", self.name, self.width, self.height)
    }
}

impl Isolated {
    /// Makes the shared memory and starts the child; its first frame waits until its instance
    /// exists (the children of a graph start side by side). A child that fails at once (the
    /// plugin crashes in `f0r_construct`) is reported at that frame and restarted like any other
    /// failure; an error only when the host program cannot be started at all or the shared memory
    /// not made.
    pub(crate) fn new(
        name: &str,
        plugin: &Arc<Plugin>,
        size: (u32, u32),
        inputs: usize,
        clear_output: bool,
        settings: Settings,
        params: &[(usize, ParamValue)],
    ) -> std::io::Result<Isolated> {
        let words = size.0 as usize * size.1 as usize;
        let shm = Shm::create(name, inputs, words)?;
        let counters = Arc::new(Counters {
            name: name.to_string(),
            crashes: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            substituted: AtomicU64::new(0),
            frames: AtomicU64::new(0),
            copied: AtomicU64::new(0),
        });
        STATS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&counters));
        let mut me = Isolated {
            name: name.to_string(),
            plugin: Arc::clone(plugin),
            width: size.0,
            height: size.1,
            inputs,
            clear_output,
            settings,
            params: params.to_vec(),
            shm,
            child: None,
            starting: None,
            seq: 0,
            last_good: None,
            failures: 0,
            served: 0,
            restart_at: None,
            counters,
        };
        match me.start() {
            Ok(()) => {}
            Err(Failure::Spawn(e)) => return Err(std::io::Error::other(e)),
            Err(f) => me.failed(f, 0),
        }
        Ok(me)
    }

    /// Starts a child (and writes it every parameter); [`await_ready`](Self::await_ready) waits
    /// for its instance before its first frame.
    fn start(&mut self) -> Result<(), Failure> {
        self.shm.header().ready.store(0, Ordering::Release);
        let exe = host_program().map_err(|e| Failure::Spawn(format!("no host program: {e}")))?;
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(&exe)
            .arg(HOST_ARG)
            .arg(self.plugin.path())
            .arg(self.width.to_string())
            .arg(self.height.to_string())
            .arg(self.inputs.to_string())
            .arg(u8::from(self.clear_output).to_string())
            .arg(std::process::id().to_string())
            .arg(self.shm.file().as_raw_fd().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own process group: a plugin that starts processes (a fork) leaves them in it,
            // and the group is ended with the child.
            .process_group(0)
            .spawn()
            .map_err(|e| Failure::Spawn(format!("cannot start {}: {e}", exe.display())))?;
        GROUPS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pid_of(&child));
        let mut stdin = child.stdin.take().expect("stdin was piped");
        let done = child.stdout.take().expect("stdout was piped");
        // The parent's end of the done pipe is read without blocking (`wait_done` polls it).
        if let Ok(flags) = rustix::fs::fcntl_getfl(&done) {
            let _ = rustix::fs::fcntl_setfl(&done, flags | OFlags::NONBLOCK);
        }
        let mut lines = String::new();
        for (i, v) in &self.params {
            lines.push_str(&encode_param(*i, v));
        }
        // A dead child shows at the first frame; a failed write here says nothing more.
        let _ = stdin.write_all(lines.as_bytes());
        self.child = Some(ChildIo { child, stdin, done });
        self.served = 0;
        self.starting = Some(Instant::now() + self.settings.stall.max(STARTUP_TIMEOUT));
        Ok(())
    }

    /// Waits until a child just started is ready (its instance made), if it is not yet: at its
    /// first frame, so that the children of a graph start side by side, while it is prepared.
    fn await_ready(&mut self) -> Result<(), Failure> {
        let Some(deadline) = self.starting else {
            return Ok(());
        };
        loop {
            let header = self.shm.header();
            if header.ready.load(Ordering::Acquire) == 1 {
                self.starting = None;
                return Ok(());
            }
            futex_wait(&header.ready, 0, POLL);
            if header.ready.load(Ordering::Acquire) == 1 {
                self.starting = None;
                return Ok(());
            }
            if let Some(f) = self.check_child(deadline) {
                self.starting = None;
                return Err(f);
            }
        }
    }

    /// `Some` when the child has died (reaped) or `deadline` passed (then it is killed).
    fn check_child(&mut self, deadline: Instant) -> Option<Failure> {
        let io = self.child.as_mut()?;
        if has_exited(&io.child) {
            // Whatever the plugin started in the child's group goes with it.
            let status = end_group(&mut io.child);
            self.child = None;
            return Some(Failure::Died(
                status.map_or_else(|| "gone".to_string(), describe_exit),
            ));
        }
        if Instant::now() >= deadline {
            self.kill();
            return Some(Failure::Stalled(self.settings.stall));
        }
        None
    }

    fn kill(&mut self) {
        self.starting = None;
        if let Some(ChildIo {
            mut child,
            stdin,
            done,
        }) = self.child.take()
        {
            drop(stdin);
            drop(done);
            // Our own child and whatever it started (its process group), reaped so that it
            // cannot touch the memory again.
            end_group(&mut child);
        }
    }

    /// Records a failure at frame `seq`: counters, the report line, the next restart time.
    fn failed(&mut self, f: Failure, frame: u64) {
        self.kill();
        let what = match &f {
            Failure::Died(how) => {
                self.counters.crashes.fetch_add(1, Ordering::Relaxed);
                format!("plugin {how}")
            }
            Failure::Stalled(d) => {
                self.counters.stalls.fetch_add(1, Ordering::Relaxed);
                format!(
                    "plugin stalled (no frame within {} ms; killed)",
                    d.as_millis()
                )
            }
            Failure::Spawn(e) => {
                self.counters.crashes.fetch_add(1, Ordering::Relaxed);
                format!("plugin host failed to start: {e}")
            }
        };
        let delay = BACKOFF[self.failures.min(BACKOFF.len() - 1)];
        self.failures += 1;
        self.restart_at = Some(Instant::now() + delay);
        let policy = match self.settings.on_crash {
            OnCrash::Bypass => "output bypassed",
            OnCrash::Hold => "output held",
        };
        let state = if self.settings.stateful {
            "; it keeps state between frames: restarted, it starts again from its initial state"
        } else {
            ""
        };
        eprintln!(
            "framepipe: {} (isolated): {what} at frame {frame}; {policy}; restarting {}{state}",
            self.name,
            if delay.is_zero() {
                "now".to_string()
            } else {
                format!("in {} ms", delay.as_millis())
            },
        );
    }

    /// Updates a parameter: now in the running child, and in every child started later.
    pub(crate) fn set_param(&mut self, index: usize, value: ParamValue) {
        if let Some(io) = self.child.as_mut() {
            let _ = io.stdin.write_all(encode_param(index, &value).as_bytes());
        }
        match self.params.iter_mut().find(|(i, _)| *i == index) {
            Some(p) => p.1 = value,
            None => self.params.push((index, value)),
        }
    }

    /// Runs one frame: `inputs` (as many as the plugin takes) into `out`. `frame` numbers the
    /// frame in reports. Frames of shared pools are read and written in place by the child;
    /// others are copied through the instance's own buffers.
    pub(crate) fn run(&mut self, frame: u64, time: f64, inputs: &[&Frame], out: &mut FrameMut) {
        self.counters.frames.fetch_add(1, Ordering::Relaxed);
        if self.child.is_none() && self.restart_at.is_some_and(|t| Instant::now() >= t) {
            self.counters.restarts.fetch_add(1, Ordering::Relaxed);
            self.restart_at = None;
            if let Err(f) = self.start() {
                self.failed(f, frame);
            }
        }
        if self.child.is_some() {
            match self
                .await_ready()
                .and_then(|()| self.exchange(time, inputs, out))
            {
                Ok(slot) => {
                    let bytes = out.data().len() as u64;
                    if out.shared().is_none() {
                        // SAFETY: the child has set `done` for this frame and writes nothing
                        // until the next request.
                        out.words_mut()
                            .copy_from_slice(unsafe { self.shm.output(slot) });
                        self.counters.copied.fetch_add(bytes, Ordering::Relaxed);
                    } else if self.settings.on_crash == OnCrash::Hold {
                        // The pool frame goes on down the graph: keep a copy to hold.
                        // SAFETY: the child is idle (it answered) and was not asked to write
                        // this slot (its output was the pool frame).
                        unsafe { self.shm.output_mut(slot) }.copy_from_slice(out.words());
                        self.counters.copied.fetch_add(bytes, Ordering::Relaxed);
                    }
                    self.last_good = Some(slot);
                    self.served += 1;
                    if self.served >= HEALTHY_FRAMES {
                        self.failures = 0;
                    }
                    return;
                }
                Err(f) => self.failed(f, frame),
            }
        }
        // Not delivered: the whole output frame is written again (the dead child may have left
        // it half written; it is reaped, so it writes nothing more).
        self.counters.substituted.fetch_add(1, Ordering::Relaxed);
        let out = out.words_mut();
        match (self.settings.on_crash, self.last_good, inputs.first()) {
            // SAFETY: the child is dead (reaped) or was never asked to write this slot.
            (OnCrash::Hold, Some(slot), _) => out.copy_from_slice(unsafe { self.shm.output(slot) }),
            (_, _, Some(input)) => out.copy_from_slice(input.words()),
            (_, _, None) => out.fill(u32::from_ne_bytes([0, 0, 0, 255])),
        }
    }

    /// Hands one frame to the child and waits for it: `out` (a pool frame) or the returned
    /// output slot written.
    fn exchange(
        &mut self,
        time: f64,
        inputs: &[&Frame],
        out: &mut FrameMut,
    ) -> Result<usize, Failure> {
        let slot = self.last_good.map_or(0, |s| 1 - s);
        let header = self.shm.header();
        for (i, input) in inputs.iter().enumerate().take(self.inputs) {
            let place = input.shared();
            if place.is_none() {
                // SAFETY: the child is idle: it has answered every earlier request (or is new).
                unsafe { self.shm.input_mut(i) }.copy_from_slice(input.words());
                self.counters
                    .copied
                    .fetch_add(input.data().len() as u64, Ordering::Relaxed);
            }
            header.inputs[i].set(place);
        }
        // The child writes the pool frame in place (the parent makes no slice of it until
        // `done` or the child's death), or the instance's output slot.
        header.output.set(out.shared());
        header.slot.store(slot as u32, Ordering::Relaxed);
        header.time.store(time.to_bits(), Ordering::Relaxed);
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        // Release: the places above, and the inputs' pixels, before the child sees `req`.
        header.req.store(seq, Ordering::Release);
        // The wake-up: a byte on the child's stdin (after any parameter line: the child reads
        // those before it runs the frame), with the child pinned to this CPU, which this thread
        // leaves right after (see the module's doc for why: a core idling while the child waits
        // on the other). A pipe write is also a synchronous wake-up, which the scheduler takes
        // the same way when it can. A failed write (the child died) shows below.
        if let Some(io) = self.child.as_mut() {
            pin_to_this_cpu(io.child.id());
            let _ = io.stdin.write_all(&[WAKE]);
        }
        self.wait_done(seq).map(|()| slot)
    }

    /// Waits until the child has stored `seq` in `done` (its byte on the done pipe wakes this
    /// thread), it died, or the stall timeout passed (it is then killed). Without a wake-up it
    /// checks every [`POLL`] whether the child is still alive.
    fn wait_done(&mut self, seq: u32) -> Result<(), Failure> {
        let deadline = Instant::now() + self.settings.stall;
        // The done pipe was closed: the child is dying (its exit closes it before it can be
        // reaped); from then on, wait by sleeping a little.
        let mut closed = false;
        loop {
            if self.shm.header().done.load(Ordering::Acquire) == seq {
                return Ok(());
            }
            let Some(io) = self.child.as_mut() else {
                return Err(Failure::Died("gone".into()));
            };
            let wait = POLL.min(deadline.saturating_duration_since(Instant::now()));
            if closed {
                std::thread::sleep(wait.min(Duration::from_millis(1)));
            } else {
                // Whole milliseconds, at least one (`wait` is at most POLL, 10 ms).
                let ms = wait.as_millis().max(1) as i64;
                let timeout = Timespec {
                    tv_sec: ms / 1000,
                    tv_nsec: ms % 1000 * 1_000_000,
                };
                let mut pfd = [PollFd::new(&io.done, PollFlags::IN)];
                if poll(&mut pfd, Some(&timeout)).is_ok_and(|n| n > 0) {
                    // Take the bytes waiting (one per frame done; `done` says which frame).
                    let mut buf = [0u8; 64];
                    if rustix::io::read(&io.done, &mut buf) == Ok(0) {
                        closed = true;
                    }
                }
            }
            if self.shm.header().done.load(Ordering::Acquire) == seq {
                return Ok(());
            }
            if let Some(f) = self.check_child(deadline) {
                return Err(f);
            }
        }
    }
}

/// Restricts the (sleeping) child to the CPU this thread runs on, just before waking it: this
/// thread sleeps right after, so the child takes its CPU. Left to itself the scheduler often
/// queues the child on the other, busy core (its last one) and this core goes idle, which the
/// load balancer is slow to notice (docs/ISOLATION.md, "Cost"). The child lifts the restriction
/// as soon as it runs ([`unpin_self`]). Best effort: a failure changes nothing else.
fn pin_to_this_cpu(child: u32) {
    let cpu = sched_getcpu();
    let Some(child) = i32::try_from(child).ok().and_then(Pid::from_raw) else {
        return;
    };
    if cpu < CpuSet::MAX_CPU {
        let mut set = CpuSet::new();
        set.set(cpu);
        let _ = sched_setaffinity(Some(child), &set);
    }
}

/// The child's CPUs as it was started (before any [`pin_to_this_cpu`]).
pub(crate) fn own_cpus() -> Option<CpuSet> {
    sched_getaffinity(None).ok()
}

/// Lifts [`pin_to_this_cpu`]'s restriction (the child, once running): the child stays where it
/// is and the scheduler may move it again.
pub(crate) fn unpin_self(cpus: &CpuSet) {
    let _ = sched_setaffinity(None, cpus);
}

impl Drop for Isolated {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_survive_the_text_line() {
        for v in [
            ParamValue::Bool(true),
            ParamValue::Bool(false),
            ParamValue::Double(0.1 + 0.2),
            ParamValue::Color([0.1, 0.5, 1.0 / 3.0]),
            ParamValue::Position([-1.5e-9, 7.0]),
            ParamValue::String(std::ffi::CString::new("a b\tc/ü").unwrap()),
            ParamValue::String(std::ffi::CString::new("").unwrap()),
        ] {
            let line = encode_param(7, &v);
            assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
            assert_eq!(decode_param(line.trim_end()), Some((7, v)));
        }
        assert_eq!(decode_param("3 d nope"), None);
        assert_eq!(decode_param("x d 1"), None);
        assert_eq!(decode_param("1 s 4"), None);
    }
}
