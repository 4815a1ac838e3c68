//! The live path through a real JACK server: Debian's jackd2 with its dummy backend, started
//! here under a server name of its own; a second JACK client (cpal's) plays a known sine into
//! framepipe's capture ports; the analysis must see its level and band. Then the server is
//! stopped mid-run (SIGTERM): the capture reports the vanished device and its timeline goes
//! on with silence; the server is started again: the capture reconnects by itself and hears
//! the generator again; and stopping it does not hang.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use framepipe_testkit::jack::JackServer;

use cpal::traits::{DeviceTrait, StreamTrait};
use framepipe_audio::{BandEdges, LiveInput, LiveSpec, Point, Timeline, JACK_CLIENT};

/// The generator's sine: 93.75 Hz (the bass band; FFT bin 4, four whole periods in the
/// analysis window, so its RMS is exactly a/√2 at every phase) at amplitude 0.5.
const HZ: f32 = 4.0 * 48_000.0 / 2048.0;
const AMPLITUDE: f32 = 0.5;

/// Waits up to `limit` for `ok`, polling every 20 ms.
fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ok()
}

fn latest(tl: &Timeline) -> Option<Point> {
    tl.published().checked_sub(1).and_then(|k| tl.read(k))
}

#[test]
fn a_jack_capture_goes_on_with_silence_when_the_server_dies_and_reconnects_when_it_is_back() {
    let mut server = JackServer::start();
    // This process's clients use this server.
    std::env::set_var("JACK_DEFAULT_SERVER", server.name());

    // Framepipe's capture: client `framepipe_in`, connected to system:capture_* (silence).
    let input = LiveInput::start(&LiveSpec::Jack, &BandEdges::default()).expect("capture");
    assert_eq!(input.opened().host, "JACK");
    assert_eq!(input.opened().rate, 48_000);
    let ours = input.opened().device.clone();
    assert!(ours.starts_with(JACK_CLIENT), "{ours}");

    // The generator: another client playing the sine on both of its ports.
    let (stream, playing) = generator(&server, &ours);
    // The analysis sees the sine: RMS a/√2, all of it in the bass band.
    let tl = Arc::clone(input.feed().timeline());
    let want_level = AMPLITUDE / 2f32.sqrt();
    let heard = wait_until(Duration::from_secs(5), || {
        latest(&tl).is_some_and(|p| (p.level - want_level).abs() < 0.005)
    });
    let p = latest(&tl).unwrap();
    assert!(heard, "the analysis never saw the sine: {p:?}");
    assert!((p.bands[0] - AMPLITUDE).abs() < 0.01, "{:?}", p.bands);
    assert!(p.bands[1..4].iter().all(|&b| b < 0.01), "{:?}", p.bands);
    assert!((p.peak - AMPLITUDE).abs() < 0.01, "{p:?}");
    let stats = input.stats();
    assert!(stats.captured >= 48_000 / 100, "{stats:?}");
    assert!(!stats.vanished, "{stats:?}");
    assert!(playing.load(Ordering::Acquire));

    // The server dies mid-run: the capture says so, and its timeline goes on, silent.
    server.stop();
    assert!(
        wait_until(Duration::from_secs(5), || input.stats().vanished),
        "the capture did not notice the server's death: {:?}",
        input.stats()
    );
    assert!(
        input.vanished_why().unwrap_or("").contains("shut down"),
        "{:?}",
        input.vanished_why()
    );
    let at = tl.published();
    std::thread::sleep(Duration::from_millis(500));
    let later = tl.published();
    // 50 points in 0.5 s at real time; a loaded machine may lag, not stop.
    assert!(
        later >= at + 25,
        "the timeline stopped: {at} then {later} points"
    );
    let p = latest(&tl).unwrap();
    assert_eq!((p.level, p.bands[0]), (0.0, 0.0), "not silent: {p:?}");
    // The generator's client is as dead; its stream is not closed against a dead server.
    std::mem::forget(stream);

    // The server comes back: the capture reopens it by itself (its backoff is at most 4 s)
    // and hears a new generator.
    server.restart();
    assert!(
        wait_until(Duration::from_secs(10), || !input.stats().vanished),
        "the capture did not reconnect: {:?}",
        input.stats()
    );
    assert_eq!(input.stats().reconnects, 1);
    let (stream, _) = generator(&server, &ours);
    let heard = wait_until(Duration::from_secs(5), || {
        latest(&tl).is_some_and(|p| (p.level - want_level).abs() < 0.005)
    });
    assert!(heard, "no sine after the reconnection: {:?}", latest(&tl));

    // Stopping the capture does not hang on the dead server.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        input.stop();
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_ok(),
        "stopping the capture hung"
    );
    drop(stream);
}

/// A JACK client playing the sine on both of its ports, connected to `ours`'s inputs; and
/// whether its callback has run.
fn generator(server: &JackServer, ours: &str) -> (cpal::platform::JackStream, Arc<AtomicBool>) {
    let gen = cpal::platform::JackDevice::default_output_device("fp-test-gen", false, false)
        .expect("generator");
    let gen_name = gen.name().unwrap();
    let mut phase = 0.0f32;
    let playing = Arc::new(AtomicBool::new(false));
    let stream = {
        let playing = Arc::clone(&playing);
        gen.build_output_stream(
            &cpal::StreamConfig {
                channels: 2,
                sample_rate: cpal::SampleRate(48_000),
                buffer_size: cpal::BufferSize::Default,
            },
            move |data: &mut [f32], _: &cpal::OutputCallbackInfo| {
                for frame in data.chunks_exact_mut(2) {
                    let v = AMPLITUDE * (phase * std::f32::consts::TAU).sin();
                    frame.fill(v);
                    phase = (phase + HZ / 48_000.0).fract();
                }
                playing.store(true, Ordering::Release);
            },
            |_| {}, // its xruns under load are not what this test checks
            None,
        )
        .expect("generator stream")
    };
    stream.play().unwrap();
    for ch in 0..2 {
        let (from, to) = (format!("{gen_name}:out_{ch}"), format!("{ours}:in_{ch}"));
        assert!(
            server.connect(&from, &to),
            "jack_connect {from} {to} failed; the ports: {}",
            server.ports()
        );
    }
    (stream, playing)
}
