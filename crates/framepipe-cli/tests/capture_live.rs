//! Issue #25's live path through the real binary: a JACK server (Debian's jackd2, dummy
//! backend) started here under a server name of its own, a GStreamer JACK client playing a
//! known sine into framepipe's capture ports, and a paced show whose crossfade follows
//! `~audio:bass`, so each output frame's grey level is the bass band's value (Y = 16 + 219·v).
//! The server is stopped (SIGTERM) mid-show: framepipe says the input vanished and the show plays to its
//! end with silence (the last frames black), with no hang.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{tmpdir, wait, FP};

const FPS: u32 = 25;
/// 5 s of frames.
const FRAMES: u32 = 125;
const W: usize = 64;
const H: usize = 48;

/// A child killed when the test ends however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        terminate(&mut self.0);
        let _ = self.0.wait();
    }
}

/// Ends a JACK process with SIGTERM (it then leaves JACK's shared registry, which holds 8
/// servers at most: a SIGKILLed server's entry stays, and after 8 of them no server starts on
/// this machine), waiting up to 5 s before SIGKILL.
fn terminate(child: &mut Child) {
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

fn jack_ports(server: &str) -> String {
    Command::new("jack_lsp")
        .env("JACK_DEFAULT_SERVER", server)
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .expect("cannot run jack_lsp; install it: apt-get install jackd2")
}

/// The first port of `client`, waiting up to 15 s for it.
fn port_of(server: &str, client: &str) -> Vec<String> {
    let start = Instant::now();
    loop {
        let ports: Vec<String> = jack_ports(server)
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
            jack_ports(server)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_live_jack_show_follows_the_bass_and_plays_on_in_silence_when_the_server_dies() {
    let dir = tmpdir("capture-live");
    let server = format!("fp-cli-test-{}", std::process::id());
    let mut jackd = Killed(
        Command::new("jackd")
            .env("JACK_NO_AUDIO_RESERVATION", "1")
            .args(["--no-realtime", "-n", &server])
            .args(["-d", "dummy", "-r", "48000", "-p", "1024"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot run jackd; install it: apt-get install jackd2"),
    );
    let start = Instant::now();
    while !jack_ports(&server).contains("system:capture_1") {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the JACK dummy server did not come up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // 93.75 Hz (FFT bin 4, in the bass band) at amplitude 0.5: the band reads 0.5.
    let _gen = Killed(
        Command::new("gst-launch-1.0")
            .env("JACK_DEFAULT_SERVER", &server)
            .args([
                "-q",
                "audiotestsrc",
                "wave=sine",
                "freq=93.75",
                "volume=0.5",
            ])
            .args([
                "is-live=true",
                "!",
                "audio/x-raw,rate=48000,channels=1",
                "!",
            ])
            .args(["jackaudiosink", "connect=none", "client-name=fpgen"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "gst-launch-1.0 (apt-get install gstreamer1.0-tools gstreamer1.0-plugins-good)",
            ),
    );
    let gen_port = port_of(&server, "fpgen").remove(0);

    let out = dir.path().join("out.y4m");
    let src = |c: &str| {
        format!(
            "testsrc pattern=solid color={c} width={W} height={H} frames={FRAMES} rate={FPS} ! mix.  "
        )
    };
    let show = format!(
        "{}{}mix name=mix mode=crossfade fader=~audio:bass:0..1 ! y4msink location={}",
        src("0,0,0"),
        src("1,1,1"),
        out.display()
    );
    let fp = Command::new(FP)
        .env("JACK_DEFAULT_SERVER", &server)
        .args(["run", "-q", "--control", "none", "--audio", "jack", &show])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn framepipe");
    for ours in port_of(&server, "framepipe_in") {
        let st = Command::new("jack_connect")
            .env("JACK_DEFAULT_SERVER", &server)
            .args([&gen_port, &ours])
            .status()
            .unwrap();
        assert!(st.success(), "jack_connect {gen_port} {ours}");
    }
    // A second and a half of the sine, then the server dies mid-show.
    std::thread::sleep(Duration::from_millis(1500));
    terminate(&mut jackd.0);
    let _ = jackd.0.wait();

    let done = wait(
        fp,
        Duration::from_secs(40),
        "the show after the server died",
    );
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    assert!(
        stderr.contains("audio input 'jack' vanished") && stderr.contains("goes on with silence"),
        "no word of the vanished input: {stderr}"
    );

    let y4m = std::fs::read(&out).unwrap();
    let mut i = y4m.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut values = Vec::new();
    while i < y4m.len() {
        assert_eq!(&y4m[i..i + 6], b"FRAME\n");
        i += 6;
        let y = y4m[i + W * (H / 2) + W / 2] as f64;
        values.push((y - 16.0) / 219.0);
        i += W * H * 3 / 2;
    }
    // Every frame was shown: the show went on to its end.
    assert_eq!(values.len(), FRAMES as usize);
    // The sine reached the picture: frames at 0.5 (one 8-bit step of rounding).
    let heard = values.iter().filter(|v| (*v - 0.5).abs() <= 0.005).count();
    assert!(heard >= 5, "the bass never drove the fader: {values:?}");
    // After the server died: silence, exactly.
    assert!(
        values[values.len() - 10..].iter().all(|&v| v == 0.0),
        "the last frames are not silent: {values:?}"
    );
}
