//! `framepipe doctor`: can this machine hold a show?
//!
//! Measures what decides whether frames leave on time — the timer's precision, how fast a
//! sleeping thread wakes up, how often a spinning thread loses its CPU, whether `SCHED_FIFO` is
//! permitted, timer slack, cores, frequency governors, memory copy bandwidth — and what a show
//! needs (frei0r plugins, ffmpeg, the GPU renderer with the cost of its uploads, downloads and
//! one shader pass). Given a project or pipeline, it runs the show unpaced for a
//! few seconds as it will run (real sources and decoders, encoders and file sinks writing into
//! a scratch directory; windows and sockets replaced by `nullsink`), and reports each node's
//! cost against the frame period and the CPU time of every process the show starts.
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

mod gpu;
mod probes;
mod show;
mod system;

use gpu::gpu;
use probes::{memory, noise, timer, wakeup};
use show::{prepare_show, run_show};
use system::{frei0r, machine, realtime, tool};

/// `framepipe doctor`'s arguments.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// A project file or pipeline string: also run it unpaced as it will run (file sinks
    /// writing into a scratch directory, removed afterwards) and report whether it holds its
    /// frame rate, each node's headroom and every process's CPU time.
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
    /// Timed runs of each GPU transfer and of the shader pass.
    gpu_runs: usize,
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
            gpu_runs: 3,
        }
    } else {
        Sizes {
            sleeps: 300,
            wakeups: 300,
            spin_ns: 1_000_000_000,
            copies: 8,
            gpu_runs: 9,
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
    sections.push(gpu(&sizes));
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
