//! `framepipe doctor`: can this machine hold a show?
//!
//! Measures what decides whether frames leave on time — the timer's precision, how fast a
//! sleeping thread wakes up, how often a spinning thread loses its CPU, whether `SCHED_FIFO` is
//! permitted, timer slack, cores, frequency governors, memory copy bandwidth — and what a show
//! needs (frei0r plugins, ffmpeg). Given a project or pipeline, it runs the graph unpaced for a
//! few seconds with every sink replaced by `nullsink` (doctor never writes the user's files or
//! opens windows or sockets) and reports each node's cost against the frame period.
//!
//! Every finding has a status (`ok`, `warn`, `bad`, `info`), a summary and advice in plain
//! words. `--json` prints the same as one object; its keys are documented in docs/DOCTOR.md.
//! Progress goes to stderr as each measurement starts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use framepipe_clock::{now_ns, set_timer_slack_ns, sleep_until_ns, thread_cpu_ns};
use framepipe_control::command_queue;
use framepipe_core::{ElementKind, Mode, Rational};
use framepipe_runtime::{Event, Options, RunStats};
use serde_json::{json, Value};

use crate::build::{build, Purpose};

/// `framepipe doctor`'s arguments.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// A project file or pipeline string: also run its graph unpaced (sinks replaced by
    /// nullsink) and report each node's headroom at the show's frame rate.
    pub pipeline: Option<String>,
    /// Print the findings as one JSON object (keys in docs/DOCTOR.md).
    #[arg(long)]
    pub json: bool,
    /// How long to run the show, in seconds (1..=60).
    #[arg(long, default_value_t = 3)]
    pub seconds: u64,
    /// Shorter measurements (for tests): fewer sleeps and wake-ups, a 0.2 s spin, 2 copies.
    #[arg(long, hide = true)]
    pub quick: bool,
}

/// How a finding reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Nothing to do.
    Ok,
    /// Works, with a cost or a risk worth knowing.
    Warn,
    /// Will cost frames; fix it before a show.
    Bad,
    /// A fact, no judgement.
    Info,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Bad => "bad",
            Status::Info => "info",
        }
    }
}

/// One section of the report: its figures (JSON), the lines printed for them, and the verdict.
struct Section {
    key: &'static str,
    title: &'static str,
    figures: Value,
    lines: Vec<String>,
    status: Status,
    summary: String,
    advice: String,
}

impl Section {
    fn json(&self) -> Value {
        let mut v = self.figures.clone();
        v["status"] = json!(self.status.as_str());
        v["summary"] = json!(self.summary);
        v["advice"] = json!(self.advice);
        v
    }

    fn print(&self, out: &mut String) {
        out.push_str(&format!("\n{}\n", self.title));
        for l in &self.lines {
            out.push_str(&format!("  {l}\n"));
        }
        out.push_str(&format!("  [{}] {}\n", self.status.as_str(), self.summary));
        if !self.advice.is_empty() {
            out.push_str(&format!("       advice: {}\n", self.advice));
        }
    }
}

/// The frame periods a show usually runs at, for the advice.
const RATES: [u32; 3] = [25, 30, 60];

/// Measurement sizes.
struct Sizes {
    sleeps: usize,
    wakeups: usize,
    spin_ns: i64,
    copies: usize,
}

/// Runs `framepipe doctor`.
pub fn run(args: DoctorArgs) -> Result<()> {
    if !(1..=60).contains(&args.seconds) {
        bail!(
            "bad --seconds {}: expected 1..=60 (how long the show runs unpaced)",
            args.seconds
        );
    }
    let sizes = if args.quick {
        Sizes {
            sleeps: 60,
            wakeups: 60,
            spin_ns: 200_000_000,
            copies: 2,
        }
    } else {
        Sizes {
            sleeps: 300,
            wakeups: 300,
            spin_ns: 1_000_000_000,
            copies: 8,
        }
    };
    // The show first: a bad project is an error before seconds of measuring.
    let show_desc = args
        .pipeline
        .as_deref()
        .map(|p| prepare_show(p).map(|s| (p, s)))
        .transpose()?;
    let mut sections = Vec::new();
    let machine = machine();
    let cores = machine.1;
    sections.push(machine.0);
    sections.push(timer(&sizes));
    sections.push(wakeup(&sizes));
    sections.push(noise(&sizes));
    sections.push(realtime());
    sections.push(memory(&sizes));
    sections.push(frei0r());
    sections.push(tool(
        "ffmpeg",
        "ffmpeg",
        "-version",
        "ffmpeg (ffmpegsrc, ffmpegsink)",
    ));
    sections.push(tool(
        "gstreamer",
        "gst-launch-1.0",
        "--version",
        "gst-launch-1.0 (the peer benchmarks)",
    ));
    if let Some((text, show)) = show_desc {
        sections.push(run_show(text, show, args.seconds, cores)?);
    }
    if args.json {
        let mut doc = serde_json::Map::new();
        doc.insert("doctor_version".into(), json!(1));
        for s in &sections {
            doc.insert(s.key.into(), s.json());
        }
        if !doc.contains_key("show") {
            doc.insert("show".into(), Value::Null);
        }
        println!("{}", serde_json::to_string_pretty(&Value::Object(doc))?);
    } else {
        let mut out = String::from("framepipe doctor: can this machine hold a show?\n");
        for s in &sections {
            s.print(&mut out);
        }
        let worst: Vec<&str> = sections
            .iter()
            .filter(|s| s.status == Status::Bad)
            .map(|s| s.key)
            .collect();
        out.push_str(&if worst.is_empty() {
            "\nnothing stands in the way (see the warnings above, if any)\n".to_string()
        } else {
            format!("\nto fix before a show: {}\n", worst.join(", "))
        });
        use std::io::Write;
        std::io::stdout().lock().write_all(out.as_bytes())?;
    }
    Ok(())
}

fn progress(what: &str) {
    say!("doctor: {what} ...");
}

/// Median, p99 and max of `ns` samples, in µs.
#[derive(Debug, Clone, Copy)]
struct Dist {
    samples: usize,
    median_us: f64,
    p99_us: f64,
    max_us: f64,
}

impl Dist {
    fn of(mut ns: Vec<i64>) -> Dist {
        ns.sort_unstable();
        let at = |q: f64| {
            if ns.is_empty() {
                0.0
            } else {
                let i = ((ns.len() - 1) as f64 * q).round() as usize;
                ns[i] as f64 / 1000.0
            }
        };
        Dist {
            samples: ns.len(),
            median_us: at(0.5),
            p99_us: at(0.99),
            max_us: at(1.0),
        }
    }

    fn json(&self) -> Value {
        json!({
            "samples": self.samples,
            "median_us": round1(self.median_us),
            "p99_us": round1(self.p99_us),
            "max_us": round1(self.max_us),
        })
    }

    fn text(&self) -> String {
        format!(
            "median {}, p99 {}, max {} ({} samples)",
            us(self.median_us),
            us(self.p99_us),
            us(self.max_us),
            self.samples
        )
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// A duration in µs as words: `12.3 µs` or `1.25 ms`.
fn us(x: f64) -> String {
    if x >= 1000.0 {
        format!("{:.2} ms", x / 1000.0)
    } else {
        format!("{x:.1} µs")
    }
}

/// The frame period at `fps`, in µs.
fn period_us(fps: u32) -> f64 {
    1e6 / fps as f64
}

// ---------------------------------------------------------------------------------------------
// The machine

/// Core count (the CPUs this process may run on, as `nproc` counts them), CPU model, governors.
fn machine() -> (Section, usize) {
    progress("reading the machine (cores, CPU model, frequency governors, timer slack)");
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let allowed = field(&status, "Cpus_allowed_list:")
        .map(|l| count_cpu_list(&l))
        .unwrap_or(0);
    let cores = if allowed > 0 {
        allowed
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    };
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|l| count_cpu_list(l.trim()))
        .unwrap_or(cores);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let mut governors = serde_json::Map::new();
    for cpu in 0..online.max(cores) {
        let p = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
        if let Ok(g) = std::fs::read_to_string(&p) {
            governors.insert(format!("cpu{cpu}"), json!(g.trim()));
        }
    }
    let slack = framepipe_clock::timer_slack_of_self();
    let container = in_container();
    let mut lines = vec![
        format!("{cores} cores usable ({online} online); CPU: {model}"),
        format!(
            "timer slack of this thread: {}",
            slack.map_or("unknown".into(), |s| format!("{s} ns"))
        ),
    ];
    if container {
        lines.push("running in a container".into());
    }
    let slow: Vec<String> = governors
        .iter()
        .filter(|(_, g)| g.as_str() != Some("performance"))
        .map(|(c, g)| format!("{c}: {}", g.as_str().unwrap_or("")))
        .collect();
    let (status, summary, advice) = if governors.is_empty() {
        lines
            .push("frequency governor: not exposed under /sys/devices/system/cpu/*/cpufreq".into());
        (
            Status::Info,
            format!(
                "{cores} cores; the frequency governor is not visible here ({}): the host decides \
                 the clock speed",
                if container {
                    "a container"
                } else {
                    "a virtual machine or a kernel without cpufreq"
                }
            ),
            "on the host, set the governor to performance (sudo cpupower frequency-set -g \
             performance) so that the first frames after a quiet spell are not slow"
                .into(),
        )
    } else {
        let list: Vec<String> = governors
            .iter()
            .map(|(c, g)| format!("{c} {}", g.as_str().unwrap_or("")))
            .collect();
        lines.push(format!("frequency governor: {}", list.join(", ")));
        if slow.is_empty() {
            (
                Status::Ok,
                format!("{cores} cores, every one at the performance governor"),
                String::new(),
            )
        } else {
            (
                Status::Warn,
                format!(
                    "{} of {} cores are not at the performance governor ({}): a core that \
                     slows down between frames makes the next frame slow",
                    slow.len(),
                    governors.len(),
                    slow.join(", ")
                ),
                "sudo cpupower frequency-set -g performance (or write performance to \
                 /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor) before the show"
                    .into(),
            )
        }
    };
    let figures = json!({
        "cores": cores,
        "cores_online": online,
        "cpu_model": model,
        "governors": if governors.is_empty() { Value::Null } else { Value::Object(governors) },
        "timer_slack_ns": slack,
        "container": container,
    });
    (
        Section {
            key: "machine",
            title: "machine",
            figures,
            lines,
            status,
            summary,
            advice,
        },
        cores,
    )
}

/// The value after `key` on its line of a `/proc` status-like text.
fn field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
}

/// How many CPUs a list like `0-3,6,8-9` names.
fn count_cpu_list(list: &str) -> usize {
    list.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| match p.trim().split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => usize::from(p.trim().parse::<usize>().is_ok()),
        })
        .sum()
}

/// Whether this process runs in a container (Docker, Podman, Kubernetes, LXC).
fn in_container() -> bool {
    Path::new("/.dockerenv").exists()
        || Path::new("/run/.containerenv").exists()
        || std::fs::read_to_string("/proc/1/cgroup")
            .is_ok_and(|c| c.contains("docker") || c.contains("kubepods") || c.contains("lxc"))
        || std::fs::read_to_string("/proc/1/environ").is_ok_and(|e| e.contains("container="))
}

// ---------------------------------------------------------------------------------------------
// The timer

/// Oversleep of 1 ms `clock_nanosleep`s with the thread's default slack, then with 1 ns.
fn timer(sizes: &Sizes) -> Section {
    progress(&format!(
        "timer precision: {} sleeps of 1 ms at the default timer slack, then {} at 1 ns",
        sizes.sleeps, sizes.sleeps
    ));
    let n = sizes.sleeps;
    let (slack, default, low) = std::thread::spawn(move || {
        let slack = framepipe_clock::timer_slack_of_self();
        let default = oversleeps(n);
        let _ = set_timer_slack_ns(1);
        let low = oversleeps(n);
        (slack, default, low)
    })
    .join()
    .expect("the timer probe thread");
    let lines = vec![
        format!(
            "slack {}: oversleep {}",
            slack.map_or("?".into(), |s| format!("{s} ns")),
            default.text()
        ),
        format!("slack 1 ns: oversleep {}", low.text()),
    ];
    // The pacer sleeps to a margin before the deadline (the recent p90 wake-up delay + 20 µs,
    // 30 µs .. 1 ms) and spins the rest: the spin per frame is about p99 + 20 µs.
    let spin_us = (low.p99_us + 20.0).clamp(30.0, 1000.0);
    let spin_share_60 = spin_us * 60.0 / 1e6;
    let (status, summary, advice) = if low.p99_us <= 200.0 {
        (
            Status::Ok,
            format!(
                "with 1 ns slack a sleep overshoots by {} at the 99th percentile: the frame \
                 clock sleeps to about {} before each deadline and spins the rest, so frames \
                 leave within a few µs at 25, 30 or 60 fps, spinning {:.1} % of a core at 60 fps",
                us(low.p99_us),
                us(spin_us),
                spin_share_60 * 100.0
            ),
            if default.p99_us > 2.0 * low.p99_us + 20.0 {
                "nothing to do: framepipe lowers its pacing thread's slack to 1 ns itself \
                 (other programs' paced threads would gain from PR_SET_TIMERSLACK too)"
                    .into()
            } else {
                String::new()
            },
        )
    } else if low.p99_us <= 1000.0 {
        (
            Status::Warn,
            format!(
                "sleeps overshoot by {} at the 99th percentile even with 1 ns slack: the frame \
                 clock spins up to {} before each deadline, {:.1} % of a core at 60 fps ({:.1} % \
                 at 25 fps)",
                us(low.p99_us),
                us(spin_us),
                spin_share_60 * 100.0,
                spin_us * 25.0 / 1e4
            ),
            "a loaded or virtualised machine wakes threads late: stop other work, and permit \
             SCHED_FIFO (see realtime) so the pacing thread is woken first"
                .into(),
        )
    } else {
        (
            Status::Bad,
            format!(
                "sleeps overshoot by {} at the 99th percentile (max {}) even with 1 ns slack, \
                 more than the frame clock's 1 ms spin margin: some frames will leave late, \
                 by up to {} ({:.0} % of a 60 fps period)",
                us(low.p99_us),
                us(low.max_us),
                us(low.max_us - 1000.0),
                (low.max_us - 1000.0).max(0.0) / period_us(60) * 100.0
            ),
            "permit SCHED_FIFO (see realtime), stop other work on the machine, and on a VM ask \
             for dedicated cores"
                .into(),
        )
    };
    Section {
        key: "timer",
        title: "timer precision (clock_nanosleep, 1 ms sleeps)",
        figures: json!({
            "default_slack_ns": slack,
            "default_slack": default.json(),
            "slack_1ns": low.json(),
        }),
        lines,
        status,
        summary,
        advice,
    }
}

/// How late `n` absolute sleeps of 1 ms wake up.
fn oversleeps(n: usize) -> Dist {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let deadline = now_ns() + 1_000_000;
        sleep_until_ns(deadline);
        v.push(now_ns() - deadline);
    }
    Dist::of(v)
}

// ---------------------------------------------------------------------------------------------
// Wake-up latency

/// How long a parked thread takes to run after another thread unparks it.
fn wakeup(sizes: &Sizes) -> Section {
    progress(&format!(
        "wake-up latency: {} hand-offs to a parked thread",
        sizes.wakeups
    ));
    let n = sizes.wakeups;
    let stamp = Arc::new(AtomicI64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let waiter = {
        let stamp = Arc::clone(&stamp);
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut v = Vec::with_capacity(n);
            while !done.load(Ordering::Acquire) {
                std::thread::park();
                let t0 = stamp.swap(0, Ordering::AcqRel);
                if t0 > 0 {
                    v.push(now_ns() - t0);
                }
            }
            v
        })
    };
    for _ in 0..n {
        // Long enough for the waiter to be asleep in the kernel, and to have taken the last.
        std::thread::sleep(Duration::from_micros(700));
        let mut tries = 0;
        while stamp.load(Ordering::Acquire) != 0 && tries < 100 {
            std::thread::sleep(Duration::from_micros(200));
            tries += 1;
        }
        stamp.store(now_ns(), Ordering::Release);
        waiter.thread().unpark();
    }
    std::thread::sleep(Duration::from_millis(2));
    done.store(true, Ordering::Release);
    waiter.thread().unpark();
    let d = Dist::of(waiter.join().expect("the wake-up probe thread"));
    let (status, summary, advice) = if d.p99_us <= 200.0 {
        (
            Status::Ok,
            format!(
                "a sleeping thread runs {} after it is woken ({} at the 99th percentile): \
                 each hand-off between workers and the output thread costs well under 1 % of a \
                 frame at 25, 30 or 60 fps",
                us(d.median_us),
                us(d.p99_us)
            ),
            String::new(),
        )
    } else if d.p99_us <= 2000.0 {
        (
            Status::Warn,
            format!(
                "a woken thread waits {} at the 99th percentile before it runs: a frame passes \
                 a few hand-offs, so up to {:.0} % of a 60 fps period ({:.0} % at 25 fps) can go \
                 to waking threads",
                us(d.p99_us),
                3.0 * d.p99_us / period_us(60) * 100.0,
                3.0 * d.p99_us / period_us(25) * 100.0
            ),
            "the CPUs are busy with other work (or the VM's host is): stop it, or give \
             framepipe fewer --threads than cores so one stays free"
                .into(),
        )
    } else {
        (
            Status::Bad,
            format!(
                "a woken thread waits {} at the 99th percentile (max {}) before it runs: a show \
                 at 60 fps ({} periods) will miss deadlines; 25 fps has more room",
                us(d.p99_us),
                us(d.max_us),
                us(period_us(60))
            ),
            "stop other work on the machine, permit SCHED_FIFO (see realtime), and on a VM ask \
             for dedicated cores"
                .into(),
        )
    };
    Section {
        key: "wakeup",
        title: "wake-up latency (a parked thread woken by another)",
        figures: d.json(),
        lines: vec![format!("wake-up after unpark: {}", d.text())],
        status,
        summary,
        advice,
    }
}

// ---------------------------------------------------------------------------------------------
// Noise floor

/// Spins reading the clock: every gap over 10 µs is time the thread lost its CPU.
fn noise(sizes: &Sizes) -> Section {
    progress(&format!(
        "noise floor: a thread spinning for {:.1} s, counting gaps over 10 µs",
        sizes.spin_ns as f64 / 1e9
    ));
    let spin = sizes.spin_ns;
    let (wall, cpu, gaps, longest, lost) = std::thread::spawn(move || {
        let cpu0 = thread_cpu_ns();
        let start = now_ns();
        let end = start + spin;
        let (mut last, mut gaps, mut longest, mut lost) = (start, 0u64, 0i64, 0i64);
        loop {
            let t = now_ns();
            let d = t - last;
            if d > 10_000 {
                gaps += 1;
                lost += d;
                longest = longest.max(d);
            }
            last = t;
            if t >= end {
                break;
            }
        }
        (last - start, thread_cpu_ns() - cpu0, gaps, longest, lost)
    })
    .join()
    .expect("the noise probe thread");
    let secs = wall as f64 / 1e9;
    let lost_share = lost as f64 / wall as f64;
    let cpu_share = cpu as f64 / wall as f64;
    let longest_us = longest as f64 / 1000.0;
    let per_s = gaps as f64 / secs;
    let lines = vec![format!(
        "{gaps} gaps over 10 µs in {secs:.2} s ({per_s:.0}/s), longest {}, {:.2} % of the time \
         lost; the thread got {:.1} % of a CPU",
        us(longest_us),
        lost_share * 100.0,
        cpu_share * 100.0
    )];
    let (status, summary, advice) = if longest_us <= 500.0 && lost_share <= 0.01 {
        (
            Status::Ok,
            format!(
                "a spinning thread lost its CPU {gaps} times, {} at most: quiet enough for 25, \
                 30 and 60 fps",
                us(longest_us)
            ),
            String::new(),
        )
    } else if longest_us <= period_us(60) / 4.0 && lost_share <= 0.05 {
        (
            Status::Warn,
            format!(
                "a spinning thread lost its CPU {gaps} times ({:.1} % of the time), up to {} at \
                 once: a frame can be late by that much ({:.0} % of a 60 fps period, {:.0} % at \
                 25 fps)",
                lost_share * 100.0,
                us(longest_us),
                longest_us / period_us(60) * 100.0,
                longest_us / period_us(25) * 100.0
            ),
            "other programs or the kernel take the CPU: stop other work; with SCHED_FIFO \
             (see realtime) the pacing thread preempts ordinary ones"
                .into(),
        )
    } else {
        let missed: Vec<String> = RATES
            .iter()
            .filter(|&&r| longest_us > period_us(r))
            .map(|r| format!("{r} fps"))
            .collect();
        (
            Status::Bad,
            format!(
                "a spinning thread lost its CPU for {:.1} % of the time, up to {} at once{}",
                lost_share * 100.0,
                us(longest_us),
                if missed.is_empty() {
                    format!(
                        ": a frame can be late by {:.0} % of a 60 fps period",
                        longest_us / period_us(60) * 100.0
                    )
                } else {
                    format!(
                        ", longer than a whole period at {}: frames will be late or repeated",
                        missed.join(", ")
                    )
                }
            ),
            "the machine is busy (other programs, builds, a VM host taking its CPU back): \
             stop other work, give framepipe cores of its own (taskset, isolcpus), and permit \
             SCHED_FIFO (see realtime)"
                .into(),
        )
    };
    Section {
        key: "noise",
        title: "noise floor (a spinning thread losing its CPU)",
        figures: json!({
            "seconds": round3(secs),
            "gaps_over_10us": gaps,
            "longest_gap_us": round1(longest_us),
            "lost_share": round3(lost_share),
            "cpu_share": round3(cpu_share),
        }),
        lines,
        status,
        summary,
        advice,
    }
}

// ---------------------------------------------------------------------------------------------
// SCHED_FIFO

/// Whether a thread may switch to SCHED_FIFO, and how to permit it when not.
fn realtime() -> Section {
    progress("SCHED_FIFO: trying it on a probe thread; rtprio limits and CAP_SYS_NICE");
    let permitted = std::thread::spawn(|| framepipe_clock::try_realtime(10))
        .join()
        .unwrap_or(false);
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let (soft, hard) = limits
        .lines()
        .find(|l| l.starts_with("Max realtime priority"))
        .map(|l| {
            let f: Vec<&str> = l["Max realtime priority".len()..]
                .split_whitespace()
                .collect();
            (
                f.first().map_or("?".to_string(), |s| s.to_string()),
                f.get(1).map_or("?".to_string(), |s| s.to_string()),
            )
        })
        .unwrap_or(("?".into(), "?".into()));
    let status_text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = field(&status_text, "CapEff:")
        .and_then(|h| u64::from_str_radix(&h, 16).ok())
        .unwrap_or(0);
    const CAP_SYS_NICE: u32 = 23;
    let cap_sys_nice = cap_eff & (1 << CAP_SYS_NICE) != 0;
    let uid = field(&status_text, "Uid:")
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default();
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "YOUR_USER".into());
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "/path/to/framepipe".into());
    let grants = rtprio_grants();
    let container = in_container();
    let mut how = vec![
        format!(
            "echo '{user} - rtprio 20' | sudo tee /etc/security/limits.d/99-framepipe.conf, then \
             log in again (PAM applies limits at login; check with ulimit -r)"
        ),
        format!(
            "sudo setcap cap_sys_nice+ep {exe} (this binary only; redo after each build or \
             install)"
        ),
    ];
    let groups: Vec<String> = grants
        .iter()
        .filter_map(|(d, v)| d.strip_prefix('@').map(|g| format!("{g} (rtprio {v})")))
        .collect();
    if let Some((d, _)) = grants.iter().find(|(d, _)| d.starts_with('@')) {
        how.push(format!(
            "sudo usermod -aG {} {user}, then log in again: that group already has rtprio here",
            &d[1..]
        ));
    } else {
        how.push(format!(
            "or a group: echo '@realtime - rtprio 20' | sudo tee \
             /etc/security/limits.d/99-realtime.conf; sudo groupadd -f realtime; sudo usermod \
             -aG realtime {user}; log in again"
        ));
    }
    how.push("as a systemd service: LimitRTPRIO=20 in the unit's [Service]".into());
    if container {
        how.push(
            "in a container: docker run --cap-add=SYS_NICE --ulimit rtprio=99 (and the host's \
             cgroup must give real-time time: cpu.rt_runtime_us)"
                .into(),
        );
    }
    let mut lines = vec![
        format!(
            "SCHED_FIFO on a probe thread: {}",
            if permitted { "permitted" } else { "refused" }
        ),
        format!("RLIMIT_RTPRIO: soft {soft}, hard {hard}"),
        format!(
            "CAP_SYS_NICE: {} (uid {uid})",
            if cap_sys_nice {
                "effective"
            } else {
                "not effective"
            }
        ),
    ];
    if !grants.is_empty() {
        let g: Vec<String> = grants.iter().map(|(d, v)| format!("{d} {v}")).collect();
        lines.push(format!(
            "rtprio granted in /etc/security/limits*: {}",
            g.join(", ")
        ));
    }
    let (status, summary, advice) = if permitted {
        (
            Status::Ok,
            format!(
                "SCHED_FIFO is permitted ({}): the output thread runs real-time during a paced \
                 run and preempts ordinary threads",
                if cap_sys_nice {
                    "CAP_SYS_NICE".to_string()
                } else {
                    format!("RLIMIT_RTPRIO {soft}")
                }
            ),
            String::new(),
        )
    } else if cap_sys_nice {
        (
            Status::Bad,
            "SCHED_FIFO is refused although CAP_SYS_NICE is effective: the kernel gives this \
             cgroup no real-time time (cpu.rt_runtime_us = 0, usual in containers and some \
             systemd slices); the output thread runs as an ordinary thread and other work can \
             delay frames"
                .to_string(),
            if container {
                "start the container with --cpu-rt-runtime=950000 (and --cap-add=SYS_NICE \
                 --ulimit rtprio=99) on a host whose cgroup grants real-time time, or run \
                 framepipe on the host"
                    .into()
            } else {
                "give this cgroup real-time time (echo 950000 > \
                 /sys/fs/cgroup/cpu,cpuacct/<group>/cpu.rt_runtime_us with cgroup v1), or \
                 run framepipe outside the slice that lacks it"
                    .into()
            },
        )
    } else {
        (
            Status::Bad,
            format!(
                "SCHED_FIFO is not permitted (RLIMIT_RTPRIO {soft}, no CAP_SYS_NICE): the output \
                 thread runs as an ordinary thread, so a busy machine can delay frames{}",
                if groups.is_empty() {
                    String::new()
                } else {
                    format!("; groups granted rtprio here: {}", groups.join(", "))
                }
            ),
            format!("permit it one of these ways: {}", how.join("; ")),
        )
    };
    Section {
        key: "realtime",
        title: "SCHED_FIFO (real-time scheduling for the output thread)",
        figures: json!({
            "sched_fifo": permitted,
            "rtprio_soft": soft,
            "rtprio_hard": hard,
            "cap_sys_nice": cap_sys_nice,
            "uid": uid.parse::<u64>().ok(),
            "limits_grants": grants.iter().map(|(d, v)| json!({"domain": d, "rtprio": v})).collect::<Vec<_>>(),
            "how_to_permit": how,
        }),
        lines,
        status,
        summary,
        advice,
    }
}

/// `(domain, value)` of every `rtprio` line in /etc/security/limits.conf and limits.d.
fn rtprio_grants() -> Vec<(String, String)> {
    let mut files = vec![PathBuf::from("/etc/security/limits.conf")];
    if let Ok(rd) = std::fs::read_dir("/etc/security/limits.d") {
        let mut more: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect();
        more.sort();
        files.extend(more);
    }
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            let f: Vec<&str> = line.split_whitespace().collect();
            if let [domain, _kind, "rtprio", value] = f[..] {
                out.push((domain.to_string(), value.to_string()));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Memory

/// Copies a 64 MiB buffer several times: GB/s, and 1080p RGBA frame copies per second.
fn memory(sizes: &Sizes) -> Section {
    const SIZE: usize = 64 << 20;
    const FRAME_1080P: f64 = 1920.0 * 1080.0 * 4.0;
    progress(&format!(
        "memory copy bandwidth: {} copies of 64 MiB",
        sizes.copies
    ));
    let src = vec![1u8; SIZE];
    let mut dst = vec![0u8; SIZE];
    // Touch the destination first: the first copy would otherwise time page faults.
    dst.copy_from_slice(&src);
    let mut rates = Vec::with_capacity(sizes.copies);
    for _ in 0..sizes.copies {
        let s = std::hint::black_box(&src[..]);
        let t0 = now_ns();
        dst.copy_from_slice(s);
        std::hint::black_box(&mut dst);
        let dt = (now_ns() - t0).max(1);
        rates.push(SIZE as f64 / dt as f64); // bytes per ns = GB/s
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    let best = rates[rates.len() - 1];
    let frames = median * 1e9 / FRAME_1080P;
    let lines = vec![format!(
        "copy: {median:.1} GB/s median, {best:.1} GB/s best ({} copies of 64 MiB): {frames:.0} \
         copies of a 1080p RGBA frame per second",
        rates.len()
    )];
    // Each node reads its input and writes its output: about one frame copy per node per frame
    // (more for effects that read neighbours). A dozen nodes at 1080p60 stream ~6 GB/s; the
    // verdict asks for room for 20 such passes per 60 fps period (~10 GB/s) on one core.
    let per_frame_at_60 = frames / 60.0;
    let (status, summary, advice) = if per_frame_at_60 >= 20.0 {
        (
            Status::Ok,
            format!(
                "{median:.1} GB/s: one core can copy a 1080p RGBA frame {frames:.0} times a \
                 second, {per_frame_at_60:.0} times per 60 fps period: memory is not what limits \
                 a show here"
            ),
            String::new(),
        )
    } else if per_frame_at_60 >= 8.0 {
        (
            Status::Warn,
            format!(
                "{median:.1} GB/s: {per_frame_at_60:.0} 1080p RGBA frame copies per 60 fps period \
                 ({:.0} at 25 fps): a long 1080p60 chain may be limited by memory rather than \
                 by the cores",
                frames / 25.0
            ),
            "prefer fewer, larger effects at 1080p60; 720p needs less than half the bandwidth"
                .into(),
        )
    } else {
        (
            Status::Bad,
            format!(
                "{median:.1} GB/s: only {per_frame_at_60:.0} 1080p RGBA frame copies per 60 fps \
                 period: a 1080p chain of more than a few effects cannot hold 60 fps ({:.0} \
                 copies per 25 fps period)",
                frames / 25.0
            ),
            "run at 720p or 25/30 fps, or on a machine with faster memory; a busy machine \
             shares this bandwidth with every other program"
                .into(),
        )
    };
    Section {
        key: "memory",
        title: "memory copy bandwidth (one core)",
        figures: json!({
            "buffer_mib": SIZE >> 20,
            "copies": rates.len(),
            "gb_per_s": round1(median),
            "best_gb_per_s": round1(best),
            "frames_1080p_rgba_per_s": frames.round(),
        }),
        lines,
        status,
        summary,
        advice,
    }
}

// ---------------------------------------------------------------------------------------------
// What a show needs

/// The frei0r search path and how many plugins load from it (as `framepipe plugins` counts).
fn frei0r() -> Section {
    progress("frei0r: search path and plugins");
    let dirs = framepipe_frei0r::search_path();
    let (registry, warnings) = crate::registry();
    let count = registry
        .iter()
        .filter(|e| e.desc.name.starts_with("frei0r-"))
        .count();
    let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let lines = vec![
        format!(
            "search path: {}",
            if shown.is_empty() {
                "(no directory exists)".to_string()
            } else {
                shown.join(":")
            }
        ),
        format!(
            "{count} plugins{}",
            if warnings.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} files not loaded (framepipe plugins --verbose)",
                    warnings.len()
                )
            }
        ),
    ];
    let (status, summary, advice) = if count > 0 {
        (
            Status::Ok,
            format!("{count} frei0r plugins found"),
            String::new(),
        )
    } else {
        (
            Status::Warn,
            "no frei0r plugin found: only the native effects are available".into(),
            "sudo apt-get install frei0r-plugins, or set FREI0R_PATH to the directory holding \
             the plugins' .so files"
                .into(),
        )
    };
    Section {
        key: "frei0r",
        title: "frei0r plugins",
        figures: json!({
            "search_path": shown,
            "plugins": count,
            "not_loaded": warnings.len(),
        }),
        lines,
        status,
        summary,
        advice,
    }
}

/// Whether `program` is on PATH, and the first line of `program flag`.
fn tool(key: &'static str, program: &str, flag: &str, what: &str) -> Section {
    progress(&format!("{program}: present? version"));
    let path = which(program);
    let version = path.as_ref().and_then(|p| {
        let out = std::process::Command::new(p)
            .arg(flag)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
    });
    let title = if key == "ffmpeg" {
        "ffmpeg"
    } else {
        "GStreamer"
    };
    let (status, summary, advice, lines) = match (&path, &version) {
        (Some(p), Some(v)) => (
            Status::Ok,
            format!("{what}: {v}"),
            String::new(),
            vec![format!("{}: {v}", p.display())],
        ),
        (Some(p), None) => (
            Status::Warn,
            format!(
                "{} is there but `{program} {flag}` printed no version",
                p.display()
            ),
            format!("check that {} runs", p.display()),
            vec![format!("{}: no version line", p.display())],
        ),
        (None, _) => (
            if key == "ffmpeg" {
                Status::Warn
            } else {
                Status::Info
            },
            format!("{program} is not on PATH: {what} cannot be used"),
            if key == "ffmpeg" {
                "sudo apt-get install ffmpeg".into()
            } else {
                "sudo apt-get install gstreamer1.0-tools gstreamer1.0-plugins-base (only the \
                 peer benchmarks need it)"
                    .into()
            },
            vec![format!("{program}: not found on PATH")],
        ),
    };
    Section {
        key,
        title,
        figures: json!({
            "present": path.is_some(),
            "path": path.map(|p| p.display().to_string()),
            "version": version,
        }),
        lines,
        status,
        summary,
        advice,
    }
}

/// The first executable file named `program` on PATH.
fn which(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

// ---------------------------------------------------------------------------------------------
// The show

/// A show ready to measure: its description with the sinks replaced, and what was replaced.
struct ShowDesc {
    desc: framepipe_project::GraphDesc,
    /// The graph, built (so that a bad project fails before anything is measured).
    graph: framepipe_runtime::Graph,
    /// `NAME (ELEMENT)` of every sink replaced by nullsink.
    replaced: Vec<String>,
    /// The node names that are sinks.
    sinks: Vec<String>,
}

/// Parses the project or pipeline and replaces every sink by `nullsink` (keeping `master=` and
/// `leaky=`), so that measuring writes no file and opens no window or socket. Refuses what
/// would still touch the outside: a source reading stdin or the network.
fn prepare_show(arg: &str) -> Result<ShowDesc> {
    let mut desc = crate::load_desc(arg)?;
    let registry = crate::registry_for(&desc);
    if let Some(s) = crate::commands::stdin_sources(&desc, &registry).first() {
        bail!("doctor cannot measure a show whose source reads stdin ({s}); give it a file");
    }
    let mut replaced = Vec::new();
    let mut sinks = Vec::new();
    for (i, node) in desc.nodes.iter_mut().enumerate() {
        let kind = registry.find(&node.element).map(|e| e.desc.kind);
        if node.element == "tcpsrc" {
            bail!(
                "{} (node {}): doctor does not run tcpsrc (it would open a socket); measure \
                 the show with a testsrc of the same size in its place",
                node.name,
                i + 1
            );
        }
        if kind == Some(ElementKind::Sink) {
            sinks.push(node.name.clone());
            if node.element != "nullsink" {
                replaced.push(format!("{} ({})", node.name, node.element));
                node.element = "nullsink".into();
                node.props.retain(|(k, _)| k == "master" || k == "leaky");
            }
        }
    }
    let graph = build(&desc, &registry, Purpose::Run)?;
    Ok(ShowDesc {
        desc,
        graph,
        replaced,
        sinks,
    })
}

/// One node's measured figures.
struct NodeFigures {
    name: String,
    mode: Mode,
    instances: usize,
    frames: u64,
    mean_ms: f64,
    sink: bool,
    headroom: f64,
}

/// Builds the show, runs it unpaced for `seconds` (the first quarter, at most 0.5 s, is not
/// counted: pools fill and caches warm), and reports each node against the frame period.
fn run_show(text: &str, show: ShowDesc, seconds: u64, cores: usize) -> Result<Section> {
    let ShowDesc {
        desc,
        graph,
        replaced,
        sinks,
    } = show;
    let rate: Option<Rational> = desc
        .settings
        .fps
        .as_deref()
        .map(|f| crate::flags::fps(f, "'fps' in the project file"))
        .transpose()?;
    let threads = match desc.settings.threads {
        Some(n) => crate::flags::threads(n, "'threads' in the project file")?,
        None => 0,
    };
    let rate = rate.unwrap_or_else(|| graph.source_rate());
    progress(&format!(
        "running the show unpaced for {seconds} s (sinks replaced by nullsink{})",
        if replaced.is_empty() {
            String::new()
        } else {
            format!(": {}", replaced.join(", "))
        }
    ));
    let mut prepared = graph
        .prepare(Options {
            threads,
            pace: None,
            realtime: false,
            ..Options::default()
        })
        .context("preparing the show")?;
    prepared.set_events(Arc::new(|e: &Event| match e {
        Event::Stalled { stage, elapsed_ms } => {
            say!("doctor: {stage} stalled: one frame has taken {elapsed_ms} ms")
        }
        other => say!("doctor: {other:?}"),
    }));
    let (tx, rx) = command_queue(16);
    prepared.set_commands(rx);
    let workers = prepared.threads();
    let counters = prepared.counters();
    let stopper = tx.stopper();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let total = Duration::from_secs(seconds);
    let warm = (total / 4).min(Duration::from_millis(500));
    let timer = std::thread::Builder::new()
        .name("fp-doctor".into())
        .spawn(move || {
            use std::sync::mpsc::RecvTimeoutError::Timeout;
            if done_rx.recv_timeout(warm) != Err(Timeout) {
                return None;
            }
            let a = counters.snapshot();
            let rest = done_rx.recv_timeout(total - warm);
            let b = counters.snapshot();
            stopper.stop();
            (rest == Err(Timeout)).then_some((a, b))
        })
        .context("spawning the doctor's timer thread")?;
    let result = prepared.run();
    drop(done_tx);
    let window = timer.join().ok().flatten();
    let finished = result.with_context(|| format!("running '{text}' to measure it"))?;
    let (stats, counted_all) = match window {
        Some((a, b)) => (delta(&a, &b), false),
        None => (finished, true),
    };
    let period_ms = 1000.0 / rate.as_f64();
    let parallel_width = workers.min(cores).max(1) as f64;
    let nodes: Vec<NodeFigures> = stats
        .stages
        .iter()
        .map(|s| {
            let sink = sinks.contains(&s.name);
            let width = if s.mode == Mode::Parallel {
                parallel_width
            } else {
                1.0
            };
            NodeFigures {
                name: s.name.clone(),
                mode: s.mode,
                instances: s.instances,
                frames: s.frames,
                mean_ms: s.mean_ms,
                sink,
                headroom: if s.mean_ms > 0.0 {
                    period_ms * width / s.mean_ms
                } else {
                    f64::INFINITY
                },
            }
        })
        .collect();
    let work_ms: f64 = nodes.iter().filter(|n| !n.sink).map(|n| n.mean_ms).sum();
    let machine_headroom = if work_ms > 0.0 {
        period_ms * cores as f64 / work_ms
    } else {
        f64::INFINITY
    };
    let bottleneck = nodes
        .iter()
        .filter(|n| !n.sink && n.frames > 0)
        .min_by(|a, b| a.headroom.total_cmp(&b.headroom));
    let fps_target = rate.as_f64();
    let mut lines = vec![
        format!(
            "ran unpaced {:.2} s ({}), {} frames at {:.1} fps on {workers} workers; the show's \
             rate is {:.3} fps (period {period_ms:.2} ms)",
            stats.wall_s,
            if counted_all {
                "the whole run"
            } else {
                "after a warm-up"
            },
            stats.frames,
            stats.fps,
            rate.as_f64()
        ),
        if replaced.is_empty() {
            "no sink replaced (they are nullsinks already)".to_string()
        } else {
            format!(
                "sinks replaced by nullsink (doctor writes no file, opens no window or socket): \
                 {}",
                replaced.join(", ")
            )
        },
        format!(
            "{:<28} {:>8} {:>9} {:>7} {:>10} {:>9}",
            "node", "mode", "instances", "frames", "ms/frame", "headroom"
        ),
    ];
    for n in &nodes {
        lines.push(format!(
            "{:<28} {:>8} {:>9} {:>7} {:>10.3} {:>9}",
            n.name,
            n.mode.as_str(),
            n.instances,
            n.frames,
            n.mean_ms,
            if n.sink {
                "(sink)".to_string()
            } else if n.headroom.is_finite() {
                format!("{:.2}x", n.headroom)
            } else {
                "-".to_string()
            }
        ));
    }
    lines.push(format!(
        "all nodes together: {work_ms:.2} ms of CPU per frame; {cores} cores give {:.1} ms per \
         period: {:.2}x",
        period_ms * cores as f64,
        machine_headroom
    ));
    let (status, summary, advice) = match bottleneck {
        None => (
            Status::Warn,
            "no node processed a frame after the warm-up: nothing to judge".to_string(),
            "run longer (--seconds), or check that the source yields frames".to_string(),
        ),
        Some(b) => {
            let headroom = b.headroom.min(machine_headroom);
            let how = match b.mode {
                Mode::Serial => format!(
                    "{} is serial and takes {:.1} ms of a {period_ms:.1} ms period",
                    b.name, b.mean_ms
                ),
                _ => format!(
                    "{} runs parallel ({} workers) and takes {:.1} ms per frame, {:.1} ms of \
                     each {period_ms:.1} ms period per worker",
                    b.name,
                    workers.min(cores),
                    b.mean_ms,
                    b.mean_ms / parallel_width
                ),
            };
            let rate_text = format!("{:.3}", fps_target)
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string();
            if headroom >= 1.25 {
                (
                    Status::Ok,
                    format!(
                        "this show can hold {rate_text} fps on this machine with {headroom:.1}x \
                         headroom; the slowest node is {how}"
                    ),
                    "the real sinks' own cost (encoding, display, network) is not measured: \
                     leave them a share of the headroom"
                        .into(),
                )
            } else if headroom >= 1.0 {
                (
                    Status::Warn,
                    format!(
                        "this show barely holds {rate_text} fps ({headroom:.2}x headroom): {how}; \
                         any other load will make frames late"
                    ),
                    fix_advice(b, machine_headroom < b.headroom),
                )
            } else {
                (
                    Status::Bad,
                    format!(
                        "{how}: this show cannot hold {rate_text} fps on this machine (about \
                         {:.1} fps at most){}",
                        fps_target * headroom,
                        if machine_headroom < b.headroom {
                            format!(
                                "; all nodes together need {work_ms:.1} ms of CPU per frame, \
                                 more than {cores} cores give"
                            )
                        } else {
                            String::new()
                        }
                    ),
                    fix_advice(b, machine_headroom < b.headroom),
                )
            }
        }
    };
    let figures = json!({
        "pipeline": text,
        "sinks_replaced": replaced,
        "seconds": round3(stats.wall_s),
        "frames": stats.frames,
        "fps_achieved": round1(stats.fps),
        "target_fps": round3(fps_target),
        "period_ms": round3(period_ms),
        "workers": workers,
        "cores": cores,
        "nodes": nodes.iter().map(|n| json!({
            "name": n.name,
            "mode": n.mode.as_str(),
            "instances": n.instances,
            "frames": n.frames,
            "mean_ms": round3(n.mean_ms),
            "sink": n.sink,
            "headroom": if n.sink || !n.headroom.is_finite() { Value::Null } else { json!(round3(n.headroom)) },
        })).collect::<Vec<_>>(),
        "work_ms_per_frame": round3(work_ms),
        "machine_headroom": if machine_headroom.is_finite() { json!(round3(machine_headroom)) } else { Value::Null },
        "bottleneck": bottleneck.map(|b| b.name.clone()),
    });
    Ok(Section {
        key: "show",
        title: "the show (run unpaced, sinks replaced by nullsink)",
        figures,
        lines,
        status,
        summary,
        advice,
    })
}

/// What to do about a bottleneck node.
fn fix_advice(b: &NodeFigures, whole_machine: bool) -> String {
    if whole_machine {
        return "the cores are the limit: lower the frame size or rate, drop an effect, or use \
                a machine with more cores"
            .into();
    }
    match b.mode {
        Mode::Serial => format!(
            "lower {}'s size (a scale before it) or the show's rate; if it keeps no state \
             between frames, mode=parallel lets every core work on it",
            b.name
        ),
        _ => format!(
            "lower {}'s size (a scale before it) or the show's rate, or use a machine with \
             more cores",
            b.name
        ),
    }
}

/// The figures between two snapshots of a running show's counters.
fn delta(a: &RunStats, b: &RunStats) -> RunStats {
    let mut out = b.clone();
    out.frames = b.frames - a.frames.min(b.frames);
    out.wall_s = b.wall_s - a.wall_s;
    out.fps = if out.wall_s > 0.0 {
        out.frames as f64 / out.wall_s
    } else {
        0.0
    };
    for (s, before) in out.stages.iter_mut().zip(&a.stages) {
        if s.name != before.name {
            continue;
        }
        let frames = s.frames - before.frames.min(s.frames);
        if frames > 0 {
            let busy = s.mean_ms * s.frames as f64 - before.mean_ms * before.frames as f64;
            s.mean_ms = (busy / frames as f64).max(0.0);
        }
        s.frames = frames;
    }
    out
}
