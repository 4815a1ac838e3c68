//! Live latency (issue #25): from a click at framepipe's audio input to the first frame out
//! that shows it. A JACK server must be running (`scripts/bench-audio-latency` starts
//! `jackd -d dummy`); this program
//!
//! * starts `FRAMEPIPE run --audio jack` on a paced show whose crossfade between black and
//!   white follows `~audio:peak` (no envelope), writing raw frames to its stdout, which a
//!   thread here reads, stamping each frame as it arrives (the sink's write);
//! * plays clicks through a JACK client of its own (cpal) connected to framepipe's input
//!   ports: in the JACK cycle where a click begins, its process callback stamps the time
//!   (the click is in framepipe's input in that cycle);
//! * measures, per click, the time to the first frame read whose centre is bright (> 0.5);
//!   the clicks fall at pseudo-random phases of the frame clock.
//!
//! Both stamps are this process's monotonic clock. Prints the figures and p50/p95.
//!
//!     cargo run -p framepipe-audio --example latency_live -- FRAMEPIPE [CLICKS] [FPS]

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cpal::traits::{DeviceTrait, StreamTrait};

const W: usize = 64;
const H: usize = 48;

fn main() {
    let mut args = std::env::args().skip(1);
    let fp = args
        .next()
        .expect("usage: latency_live FRAMEPIPE [CLICKS] [FPS]");
    let clicks: usize = args.next().map_or(30, |a| a.parse().expect("CLICKS"));
    let fps: u32 = args.next().map_or(25, |a| a.parse().expect("FPS"));
    let base = Instant::now();
    let now_ns = move || base.elapsed().as_nanos() as i64;

    // framepipe, long enough for every click (0.7 s apart) and its start.
    let frames = (clicks as u32 + 10) * fps;
    let src = |c: &str| {
        format!("testsrc pattern=solid color={c} width={W} height={H} rate={fps} frames={frames} ! mix.  ")
    };
    let show = format!(
        "{}{}mix name=mix mode=crossfade fader=~audio:peak:0..1 ! rawsink location=-",
        src("0,0,0"),
        src("1,1,1")
    );
    let mut child = Command::new(&fp)
        .args(["run", "-q", "--control", "none", "--audio", "jack", &show])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cannot run framepipe");
    let mut out = child.stdout.take().unwrap();
    let seen: Arc<Mutex<Vec<(i64, u8)>>> = Arc::default();
    {
        let seen = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut frame = vec![0u8; W * H * 4];
            while out.read_exact(&mut frame).is_ok() {
                let t = now_ns();
                let v = frame[((H / 2) * W + W / 2) * 4];
                seen.lock().unwrap().push((t, v));
            }
        });
    }

    // The click generator: a JACK client whose process callback starts a 5 ms burst at the
    // beginning of the cycle after `fire` is set, and stamps that cycle.
    let fire = Arc::new(AtomicBool::new(false));
    let fired_at = Arc::new(AtomicI64::new(-1));
    let gen = cpal::platform::JackDevice::default_output_device("fp-bench-click", false, false)
        .expect("no JACK server (scripts/bench-audio-latency starts one)");
    let gen_name = gen.name().unwrap();
    let stream = {
        let (fire, fired_at) = (Arc::clone(&fire), Arc::clone(&fired_at));
        let mut left = 0usize;
        let mut phase = 0f32;
        gen.build_output_stream(
            &cpal::StreamConfig {
                channels: 1,
                sample_rate: cpal::SampleRate(48_000),
                buffer_size: cpal::BufferSize::Default,
            },
            move |data: &mut [f32], _: &cpal::OutputCallbackInfo| {
                if fire.swap(false, Ordering::AcqRel) {
                    fired_at.store(now_ns(), Ordering::Release);
                    left = 240;
                }
                for x in data.iter_mut() {
                    *x = if left > 0 {
                        left -= 1;
                        phase = (phase + 1000.0 / 48_000.0).fract();
                        0.8 * (phase * std::f32::consts::TAU).sin().signum()
                    } else {
                        0.0
                    };
                }
            },
            |e| eprintln!("generator: {e}"),
            None,
        )
        .expect("generator stream")
    };
    stream.play().unwrap();
    // Connect it to framepipe's inputs once they are there.
    let start = Instant::now();
    let ports = loop {
        let lsp = Command::new("jack_lsp")
            .output()
            .expect("jack_lsp (apt-get install jackd2)");
        let ports: Vec<String> = String::from_utf8_lossy(&lsp.stdout)
            .lines()
            .filter(|l| l.starts_with("framepipe"))
            .map(str::to_string)
            .collect();
        if !ports.is_empty() {
            break ports;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "framepipe's JACK ports never came"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    for p in &ports {
        let ok = Command::new("jack_connect")
            .args([&format!("{gen_name}:out_0"), p])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "jack_connect {gen_name}:out_0 {p}");
    }
    // Frames flowing first.
    while seen.lock().unwrap().len() < fps as usize {
        std::thread::sleep(Duration::from_millis(10));
    }

    let mut lat = Vec::new();
    // Clicks 0.7 s apart plus a pseudo-random part of a frame period, so that they fall at
    // every phase of the frame clock (a fixed gap after the last frame seen would lock them
    // to one phase).
    let period_us = 1_000_000 / fps as u64;
    let mut seed = 0x2545_f491_u64;
    for _ in 0..clicks {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let jitter = (seed >> 33) % period_us;
        std::thread::sleep(Duration::from_millis(700) + Duration::from_micros(jitter));
        fired_at.store(-1, Ordering::Release);
        fire.store(true, Ordering::Release);
        let t0 = loop {
            let t = fired_at.load(Ordering::Acquire);
            if t >= 0 {
                break t;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        let hit = loop {
            let hit = seen
                .lock()
                .unwrap()
                .iter()
                .find(|(t, v)| *t >= t0 && *v > 128)
                .map(|(t, _)| *t);
            if hit.is_some() || Instant::now() > deadline {
                break hit;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        match hit {
            Some(t1) => lat.push((t1 - t0) as f64 / 1e6),
            None => eprintln!("a click never showed (2 s)"),
        }
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    std::mem::forget(stream);
    if lat.is_empty() {
        eprintln!("no click showed");
        std::process::exit(1);
    }
    let mut sorted = lat.clone();
    sorted.sort_by(f64::total_cmp);
    let q = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
    println!(
        "| {fps} fps (period {:.1} ms) | {} of {clicks} | {:.1} | {:.1} | {:.1}..{:.1} |",
        1000.0 / fps as f64,
        lat.len(),
        q(0.5),
        q(0.95),
        sorted[0],
        sorted[sorted.len() - 1]
    );
}
