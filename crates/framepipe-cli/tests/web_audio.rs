//! The page's audio (issue #25 item 5), in a real headless Chromium driving the real binary
//! with `--audio` a file made here with ffmpeg's lavfi:
//!
//! * the meters are shown and move with the sound: the level follows a tone that steps up and
//!   down, the bass band is the loudest of the default four (a 100 Hz tone), and each click
//!   of the track flashes the onset lamp;
//! * a property bound to the bass from the page (its "♪" form) does exactly what the same
//!   `set` from the terminal does: two crossfades between black and white, one bound from the
//!   page, the other from stdin at the same frame (the show paused), write the same frames,
//!   frame for frame, and those frames do follow the sound;
//! * without `--audio` the page shows no meters and offers no binding.

mod browser;
mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use browser::cdp;
use common::{tmpdir, Fp};
use serde_json::json;

const W: usize = 64;
const H: usize = 48;

/// Clicks (1 kHz, 5 ms) from 0.25 s, every 0.5 s.
const CLICK_FIRST_S: f64 = 0.25;
const CLICK_EVERY_S: f64 = 0.5;

/// A 100 Hz tone swelling and fading every 2 s (amplitude 0.06 to 0.6), with the clicks:
/// 20 s (the show stops before).
fn track(dir: &Path) {
    let expr = r"0.6*sin(2*PI*100*t)*(0.55-0.45*cos(PI*t))+if(lt(mod(t+0.25\,0.5)\,0.005)\,0.8*sin(2*PI*1000*t)\,0)";
    let st = Command::new("ffmpeg")
        .current_dir(dir)
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(format!("aevalsrc='{expr}':s=48000:d=20"))
        .arg("track.wav")
        .status()
        .expect("ffmpeg");
    assert!(st.success(), "ffmpeg made no track.wav");
}

/// Two crossfades from black to white, `a` and `b`, each to its own y4m file: a frame's grey
/// is its fader's value.
fn show() -> String {
    let src = |c: &str, to: &str| {
        format!("testsrc pattern=solid color={c} width={W} height={H} frames=100000 ! {to}.  ")
    };
    format!(
        "{}{}mix name=a mode=crossfade fader=0 ! y4msink location=a.y4m  \
         {}{}mix name=b mode=crossfade fader=0 ! y4msink location=b.y4m",
        src("0,0,0", "a"),
        src("1,1,1", "a"),
        src("0,0,0", "b"),
        src("1,1,1", "b"),
    )
}

/// The page is up, connected, with the graph and values in.
const READY: &str = "!!(window.fp && fp.graph && fp.ws && fp.ws.readyState === 1 \
    && document.getElementById('val:a.fader') && document.getElementById('val:a.fader').textContent !== '')";

/// Each frame's centre luma of a y4m file.
fn lumas(path: &Path) -> Vec<u8> {
    let y4m = std::fs::read(path).unwrap();
    let mut i = y4m.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut out = Vec::new();
    while i + 6 + W * H * 3 / 2 <= y4m.len() {
        assert_eq!(&y4m[i..i + 6], b"FRAME\n");
        i += 6;
        out.push(y4m[i + W * (H / 2) + W / 2]);
        i += W * H * 3 / 2;
    }
    out
}

/// The frame the page's log says `command` was applied from.
fn applied_from(b: &mut cdp::Browser, node: &str) -> u64 {
    let expr = format!(
        "(() => {{ const l = [...document.querySelectorAll('#log li')].map(l => l.textContent)\
         .find(t => t.startsWith(\"ok 'osc {node}.fader ~audio\")); \
         return l ? Number(/from frame (\\d+)/.exec(l)[1]) : null; }})()"
    );
    let start = Instant::now();
    loop {
        if let Some(n) = b.eval(&expr).as_u64() {
            return n;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no reply for {node}'s binding"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_page_shows_audio_meters_and_binds_a_property_as_the_terminal_does() {
    let Some(exe) = cdp::chromium() else {
        println!("SKIPPED: chromium is not installed (scripts/install-deps installs it)");
        return;
    };
    let dir = tmpdir("web-audio");
    track(dir.path());
    let mut fp = Fp::run_in(
        dir.path(),
        &[
            "--fps",
            "25",
            "--start-paused",
            "--web",
            "127.0.0.1:0",
            "--audio",
            "track.wav",
            &show(),
        ],
    );
    let url = fp.after("web control on ");
    let mut b = cdp::Browser::start(&exe);
    b.call("Page.navigate", json!({ "url": url }));
    b.wait_for(READY, Duration::from_secs(15));
    // The meters: the default four bands, by the names a binding takes.
    assert_eq!(
        b.eval("document.getElementById('audio-card').hidden"),
        json!(false)
    );
    assert_eq!(
        b.eval("[...document.querySelectorAll('#bands .bname')].map(e => e.textContent)"),
        json!(["bass", "low-mid", "high-mid", "treble"])
    );

    // Paused: bound from the page, then from the terminal, both before the next frame.
    b.click("aud:a.fader");
    b.eval(
        "(() => { const f = (id, v) => { const e = document.getElementById(id); e.value = v; \
         e.dispatchEvent(new Event('change')); }; f('aud-feature:a.fader', 'bass'); \
         f('aud-min:a.fader', '0'); f('aud-max:a.fader', '1'); f('aud-release:a.fader', '300'); })()",
    );
    b.click("aud-bind:a.fader");
    let from_page = applied_from(&mut b, "a");
    fp.command("set b.fader ~audio:bass:0..1:release=300ms");
    let from_stdin = applied_from(&mut b, "b");
    assert_eq!(
        from_page, from_stdin,
        "both bindings take effect from the same frame"
    );
    // Running: the page shows the binding as the property's oscillator, in the terminal's
    // words (values are published as frames run), and the meters move with the sound.
    fp.command("resume");
    b.wait_for(
        "document.getElementById('osc:a.fader').value === '~audio:bass:0..1:release=300ms'",
        Duration::from_secs(5),
    );
    let mut levels = Vec::new();
    let mut bands = Vec::new();
    b.wait_for("!!fp.audio", Duration::from_secs(5));
    // [onsets counted, frame] when the page first heard.
    let first = b.eval("[fp.onsets, fp.audio.frame]");
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(3500) {
        let m = b.eval(
            "fp.audio && [Number(document.getElementById('meter-level').dataset.value), \
             ...['bass', 'low-mid', 'high-mid', 'treble'].map(n => Number(document.getElementById('band:' + n).dataset.value))]",
        );
        if let Some(m) = m.as_array() {
            levels.push(m[0].as_f64().unwrap());
            bands.push(
                m[1..]
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect::<Vec<_>>(),
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let last = b.eval("[fp.flashes, fp.onsets, fp.audio.frame]");
    fp.command("stop");
    fp.wait_success();

    let (lo, hi) = levels
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), &l| (lo.min(l), hi.max(l)));
    assert!(
        levels.len() > 10 && hi > 0.3 && lo < 0.15,
        "the level meter did not follow the tone swelling and fading: {levels:?}"
    );
    let loud: Vec<&Vec<f64>> = bands.iter().filter(|b| b[0] > 0.3).collect();
    assert!(!loud.is_empty(), "the bass meter never rose: {bands:?}");
    for b in &loud {
        assert!(
            b[1..].iter().all(|&x| x < b[0]),
            "a 100 Hz tone is bass: {b:?}"
        );
    }
    // Every click heard is an onset counted, and each one the page saw flashed the lamp.
    let n = |v: &serde_json::Value, i: usize| v[i].as_u64().unwrap();
    let clicks_by = |frame: u64| {
        let t = frame as f64 / 25.0;
        ((t - CLICK_FIRST_S) / CLICK_EVERY_S).floor() as i64 + 1
    };
    let (flashes, onsets) = (n(&last, 0), n(&last, 1));
    assert!(
        (onsets as i64 - clicks_by(n(&last, 2))).abs() <= 1,
        "{onsets} onsets by frame {}: {} clicks",
        n(&last, 2),
        clicks_by(n(&last, 2))
    );
    assert_eq!(
        flashes,
        onsets - n(&first, 0),
        "the lamp flashed once for each onset while the page watched"
    );
    assert!(
        flashes >= 4,
        "{flashes} flashes over 3.5 s of clicks every 0.5 s"
    );

    // The bound faders: the same frames, following the sound.
    let a = lumas(&dir.join("a.y4m"));
    let bb = lumas(&dir.join("b.y4m"));
    assert!(a.len() > 40, "{} frames", a.len());
    assert_eq!(
        a, bb,
        "the page's binding and the terminal's gave different values"
    );
    let (min, max) = (a.iter().min().unwrap(), a.iter().max().unwrap());
    assert!(
        max - min > 60,
        "the bound fader did not follow the bass: {a:?}"
    );

    // Without --audio: no meters, no binding offered, no audio message.
    let mut quiet = Fp::run_in(
        dir.path(),
        &["--fps", "25", "--web", "127.0.0.1:0", &show()],
    );
    let url = quiet.after("web control on ");
    b.call("Page.navigate", json!({ "url": url }));
    b.wait_for(READY, Duration::from_secs(15));
    b.wait_for("!!fp.stats", Duration::from_secs(5));
    assert_eq!(
        b.eval(
            "[document.getElementById('audio-card').hidden, !!document.getElementById('aud:a.fader'), fp.audio]"
        ),
        json!([true, false, null])
    );
    quiet.command("stop");
    quiet.wait_success();
}
