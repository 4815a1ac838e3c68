//! Writes raw RGBA frames to stdout, each released by a [`Pacer`]: the pacer alone, measured
//! from outside by `pace-meter` (see `scripts/bench-pacing`). On exit it prints to stderr the
//! pacer's own lateness figures and the pacing thread's CPU share.
//!
//! Usage: `paced-writer [--fps N] [--frames N] [--width W] [--height H] [--no-realtime]`
//! (defaults: 100 fps, 1000 frames, 64x64; SCHED_FIFO when permitted, as the engine does).

use std::io::Write;
use std::process::ExitCode;

use framepipe_clock::{prepare_pacing_thread, CpuMeter, Pacer};
use framepipe_core::Rational;

struct Args {
    fps: Rational,
    frames: u64,
    width: usize,
    height: usize,
    realtime: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        fps: Rational::new(100, 1),
        frames: 1000,
        width: 64,
        height: 64,
        realtime: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--fps" => {
                let v = value("--fps")?;
                a.fps = Rational::parse(&v).ok_or_else(|| format!("bad --fps '{v}'"))?;
            }
            "--frames" => {
                let v = value("--frames")?;
                a.frames = v.parse().map_err(|_| format!("bad --frames '{v}'"))?;
            }
            "--width" => {
                let v = value("--width")?;
                a.width = v.parse().map_err(|_| format!("bad --width '{v}'"))?;
            }
            "--height" => {
                let v = value("--height")?;
                a.height = v.parse().map_err(|_| format!("bad --height '{v}'"))?;
            }
            "--no-realtime" => a.realtime = false,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("paced-writer: {e}");
            return ExitCode::from(2);
        }
    };
    // stdout through its own File: std's Stdout is line-buffered and would hold back the part
    // of a frame after its last 0x0a byte.
    let mut out = match std::fs::OpenOptions::new().write(true).open("/dev/stdout") {
        Ok(f) => f,
        Err(e) => {
            eprintln!("paced-writer: opening /dev/stdout: {e}");
            return ExitCode::FAILURE;
        }
    };
    let setup = prepare_pacing_thread(args.realtime);
    let mut pacer = Pacer::new(args.fps).expect("--fps was checked to be positive");
    let mut frame = vec![0u8; args.width * args.height * 4];
    let cpu = CpuMeter::start();
    for n in 0..args.frames {
        frame.fill(n as u8); // the frame's content: its number, as cheap as it gets
        pacer.wait_next();
        if let Err(e) = out.write_all(&frame) {
            eprintln!("paced-writer: write: {e}");
            return ExitCode::FAILURE;
        }
    }
    let s = pacer.stats().summary();
    eprintln!(
        "paced-writer: {} frames at {} fps, realtime={} slack1ns={}; own lateness p50={:.1}us \
         p99={:.1}us max={:.1}us late={}; margin={}us; pacing thread cpu={:.2}% of a core",
        s.frames,
        args.fps,
        setup.realtime,
        setup.low_timer_slack,
        s.p50_us,
        s.p99_us,
        s.max_us,
        s.late,
        pacer.margin_ns() / 1000,
        cpu.share() * 100.0
    );
    ExitCode::SUCCESS
}
