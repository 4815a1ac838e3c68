//! Measures the pacing of a command from outside: runs it, reads its stdout frame by frame
//! (`--frame-bytes`), timestamps each complete frame's arrival on `CLOCK_MONOTONIC`, and prints
//! one line of figures about the intervals against the nominal period:
//!
//! `LABEL frames=N median_us=.. p99_us=.. max_us=.. drift_us=.. mean_interval_us=..`
//!
//! * median/p99/max of |interval − period| over consecutive arrivals,
//! * drift: last arrival − (first arrival + (n−1)·period), signed.
//!
//! The first `--skip` frames (default 10) are start-up and not measured.
//!
//! Usage: `pace-meter --frame-bytes B --period-us P [--skip K] [--label L] -- CMD ARGS...`
//!
//! `pace-meter --probe SECONDS` instead measures the machine's noise floor: a `SCHED_FIFO`
//! (when permitted) thread spins reading the clock and reports the gaps between consecutive
//! reads, i.e. how long the CPU was taken away from a thread that never sleeps. No pacer can
//! be more even than that.

use std::io::Read;
use std::process::{Command, ExitCode, Stdio};

use framepipe_clock::{now_ns, prepare_pacing_thread, try_realtime};

struct Args {
    frame_bytes: usize,
    period_ns: i64,
    skip: usize,
    label: String,
    cmd: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        frame_bytes: 0,
        period_ns: 0,
        skip: 10,
        label: "run".into(),
        cmd: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--frame-bytes" => {
                let v = value("--frame-bytes")?;
                a.frame_bytes = v.parse().map_err(|_| format!("bad --frame-bytes '{v}'"))?;
            }
            "--period-us" => {
                let v = value("--period-us")?;
                let us: f64 = v.parse().map_err(|_| format!("bad --period-us '{v}'"))?;
                a.period_ns = (us * 1000.0).round() as i64;
            }
            "--skip" => {
                let v = value("--skip")?;
                a.skip = v.parse().map_err(|_| format!("bad --skip '{v}'"))?;
            }
            "--label" => a.label = value("--label")?,
            "--" => {
                a.cmd = it.by_ref().collect();
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if a.frame_bytes == 0 || a.period_ns <= 0 || a.cmd.is_empty() {
        return Err("need --frame-bytes, --period-us and -- CMD".into());
    }
    Ok(a)
}

fn quantile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Spins for `seconds`, recording each gap between consecutive clock reads longer than 20 µs.
fn probe(seconds: f64) -> ExitCode {
    let setup = prepare_pacing_thread(true);
    let start = now_ns();
    let end = start + (seconds * 1e9) as i64;
    let mut gaps: Vec<i64> = Vec::with_capacity(100_000);
    let mut prev = start;
    while prev < end {
        let now = now_ns();
        if now - prev > 20_000 {
            gaps.push(now - prev);
        }
        prev = now;
    }
    gaps.sort_unstable();
    let total: i64 = gaps.iter().sum();
    let over = |t: i64| gaps.iter().filter(|&&g| g > t).count();
    println!(
        "noise-floor realtime={} seconds={seconds} gaps_over_100us={} gaps_over_1ms={} \
         max_gap_us={:.1} cpu_lost_pct={:.2}",
        setup.realtime,
        over(100_000),
        over(1_000_000),
        gaps.last().copied().unwrap_or(0) as f64 / 1000.0,
        total as f64 / (end - start) as f64 * 100.0
    );
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    if argv.next().as_deref() == Some("--probe") {
        let secs = argv
            .next()
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(2.0);
        return probe(secs);
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("pace-meter: {e}");
            return ExitCode::from(2);
        }
    };
    // The reader's own wake-up latency adds to every figure; make it as small as we may: low
    // timer slack and SCHED_FIFO above the pacer's priority (10), so a spinning pacer on the
    // same CPU cannot delay the reading of the frame it has just written.
    let _setup = prepare_pacing_thread(false);
    try_realtime(20);
    let mut child = match Command::new(&args.cmd[0])
        .args(&args.cmd[1..])
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pace-meter: running '{}': {e}", args.cmd[0]);
            return ExitCode::FAILURE;
        }
    };
    let mut out = child.stdout.take().expect("stdout was piped");
    let mut frame = vec![0u8; args.frame_bytes];
    let mut arrivals: Vec<i64> = Vec::with_capacity(100_000);
    loop {
        match out.read_exact(&mut frame) {
            Ok(()) => arrivals.push(now_ns()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => {
                eprintln!("pace-meter: reading: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let status = child.wait();
    let arrivals = arrivals.get(args.skip..).unwrap_or(&[]);
    if arrivals.len() < 3 {
        eprintln!(
            "pace-meter: {}: only {} frames after skipping {} ({status:?})",
            args.label,
            arrivals.len(),
            args.skip
        );
        return ExitCode::FAILURE;
    }
    let mut dev: Vec<i64> = arrivals
        .windows(2)
        .map(|w| (w[1] - w[0] - args.period_ns).abs())
        .collect();
    dev.sort_unstable();
    let n = arrivals.len() as i64;
    let first = arrivals[0];
    let last = arrivals[arrivals.len() - 1];
    let drift = last - (first + (n - 1) * args.period_ns);
    let us = |ns: i64| ns as f64 / 1000.0;
    println!(
        "{} frames={} median_us={:.1} p99_us={:.1} max_us={:.1} drift_us={:.1} mean_interval_us={:.3}",
        args.label,
        n,
        us(quantile(&dev, 0.5)),
        us(quantile(&dev, 0.99)),
        us(*dev.last().unwrap_or(&0)),
        us(drift),
        (last - first) as f64 / (n - 1) as f64 / 1000.0
    );
    ExitCode::SUCCESS
}
