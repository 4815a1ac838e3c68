//! Issue #25's live path through the real binary: a JACK server (Debian's jackd2, dummy
//! backend) started here under a server name of its own, a GStreamer JACK client playing a
//! known sine into framepipe's capture ports, and a paced show whose crossfade follows
//! `~audio:bass`, so each output frame's grey level is the bass band's value (Y = 16 + 219·v).
//! The server is stopped (SIGTERM) mid-show: framepipe says the input vanished and the show
//! plays on with silence (black frames), with no hang; the server is started again: framepipe
//! reconnects by itself, says so, and the last frames follow the bass again.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{tmpdir, wait, FP};
use framepipe_testkit::jack::{JackServer, Terminated};

const FPS: u32 = 25;
/// 9 s of frames: the sine, the server stopped for a second, its return, the capture's
/// reconnection (its backoff reaches 2 s by then) and the sine again, with room on a loaded
/// machine.
const FRAMES: u32 = 225;
const W: usize = 64;
const H: usize = 48;

/// A GStreamer JACK client `fpgen` playing the sine (93.75 Hz: FFT bin 4, in the bass band,
/// at amplitude 0.5: the band reads 0.5), connected to framepipe's capture ports.
fn generator(server: &JackServer) -> Terminated {
    let gen = Terminated(
        Command::new("gst-launch-1.0")
            .env("JACK_DEFAULT_SERVER", server.name())
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
    let gen_port = server.ports_of("fpgen").remove(0);
    for ours in server.ports_of("framepipe_in") {
        let ours = ours.split_whitespace().next().unwrap_or(&ours).to_string();
        assert!(
            server.connect(&gen_port, &ours),
            "jack_connect {gen_port} {ours}; ports: {}",
            server.ports()
        );
    }
    gen
}

#[test]
fn a_live_jack_show_plays_on_in_silence_when_the_server_dies_and_follows_the_bass_again_when_it_is_back(
) {
    let dir = tmpdir("capture-live");
    let mut server = JackServer::start();
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
        .env("JACK_DEFAULT_SERVER", server.name())
        .args(["run", "-q", "--control", "none", "--audio", "jack", &show])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn framepipe");
    let gen = generator(&server);
    // A second and a half of the sine, then the server dies mid-show; a second later it is
    // back, and so is the generator.
    std::thread::sleep(Duration::from_millis(1500));
    server.stop();
    drop(gen);
    std::thread::sleep(Duration::from_millis(1000));
    server.restart();
    let _gen = generator(&server);

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
    // After the server died: silence, exactly; then the bass again.
    let first_silent = values
        .iter()
        .enumerate()
        .skip_while(|(_, v)| **v == 0.0)
        .find(|(_, v)| **v == 0.0)
        .map(|(k, _)| k);
    let Some(gap) = first_silent else {
        panic!("no silence after the server died: {values:?}");
    };
    assert!(
        values.len() >= gap + 5 && values[gap..gap + 5].iter().all(|&v| v == 0.0),
        "the silence after the server died is not 5 frames long: {values:?}"
    );
    let back = values[gap..]
        .iter()
        .filter(|v| (*v - 0.5).abs() <= 0.005)
        .count();
    assert!(back >= 10, "the bass did not come back: {values:?}");
    assert!(
        stderr.contains("audio input 'jack' is back"),
        "no word of the reconnection: {stderr}"
    );
}
