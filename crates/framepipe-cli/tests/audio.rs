//! Issue #25, audio-reactive shows through the real binary: audio made here with ffmpeg's
//! lavfi (`aevalsrc`), `--audio FILE`, and an `~audio:` binding on a crossfade's `fader`
//! between a black and a white source, so each output frame's grey level is the binding's
//! value for that frame (Y = 16 + 219·value in the y4m's limited range).

mod common;

use std::path::Path;
use std::process::Command;

use common::{run_fp, tmpdir};

const FPS: u32 = 25;
const W: usize = 64;
const H: usize = 48;

/// Makes `name` (48 kHz mono WAV) from an `aevalsrc` expression, `seconds` long.
fn lavfi(dir: &Path, name: &str, expr: &str, seconds: f64) {
    let st = Command::new("ffmpeg")
        .current_dir(dir)
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(format!("aevalsrc='{expr}':s=48000:d={seconds}"))
        .arg(name)
        .status()
        .expect("ffmpeg");
    assert!(st.success(), "ffmpeg made no {name}");
}

/// A crossfade from black to white whose fader is `binding`, `frames` frames of 64x48.
fn show(binding: &str, frames: u32) -> String {
    let src = |c: &str| {
        format!(
            "testsrc pattern=solid color={c} width={W} height={H} frames={frames} rate={FPS} ! mix.  "
        )
    };
    format!(
        "{}{}mix name=mix mode=crossfade fader={binding} ! y4msink location=out.y4m",
        src("0,0,0"),
        src("1,1,1")
    )
}

/// Renders `show` unpaced with `--audio audio` and returns each frame's value, read back
/// from the centre pixel's luma.
fn render(dir: &Path, audio: &str, show: &str, threads: &str) -> Vec<f64> {
    let out = run_fp(
        Some(dir),
        &[
            "run",
            "-q",
            "--unpaced",
            "--control",
            "none",
            "--threads",
            threads,
            "--audio",
            audio,
            show,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let y4m = std::fs::read(dir.join("out.y4m")).unwrap();
    let mut i = y4m.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut values = Vec::new();
    while i < y4m.len() {
        assert_eq!(&y4m[i..i + 6], b"FRAME\n");
        i += 6;
        let y = y4m[i + W * (H / 2) + W / 2] as f64;
        values.push((y - 16.0) / 219.0);
        i += W * H * 3 / 2;
    }
    values
}

/// A click track at 120 bpm, the first click at 0.25 s: `~audio:onset` is 1 on the frames of
/// the clicks (the first frame at or after each, ±1) and 0 elsewhere, and the render is the
/// same for 1 and 2 threads.
#[test]
fn onsets_of_a_click_track_land_on_the_frames_of_the_clicks_whatever_the_threads() {
    let dir = tmpdir("audio-onsets");
    lavfi(
        dir.path(),
        "clicks.wav",
        r"if(lt(mod(t+0.25\,0.5)\,0.005)\,0.8*sin(2*PI*1000*t)\,0)",
        4.0,
    );
    let show = show("~audio:onset", 100);
    let one = render(dir.path(), "clicks.wav", &show, "1");
    let two = render(dir.path(), "clicks.wav", &show, "2");
    assert_eq!(one.len(), 100);
    assert_eq!(one, two, "the values depend on the thread count");
    let hits: Vec<usize> = (0..one.len()).filter(|&k| one[k] > 0.5).collect();
    let clicks: Vec<f64> = (0..8).map(|k| 0.25 + 0.5 * k as f64).collect();
    assert_eq!(hits.len(), clicks.len(), "onset frames {hits:?}");
    for (&f, &t) in hits.iter().zip(&clicks) {
        let want = (t * FPS as f64).ceil() as i64;
        assert!(
            (f as i64 - want).abs() <= 1,
            "click at {t} s (frame {want}): onset on frame {f}; all: {hits:?}"
        );
    }
}

/// Band amplitudes against a reference computed here: a plain DFT (f64, O(N²)) of the
/// window of samples a frame reads (the 2048 ending at the last 10 ms point at or before
/// the frame's time), decoded from the same file by ffmpeg, Hann-windowed, summed over the
/// band's bins and scaled so that a sine of amplitude A gives A.
#[test]
fn band_values_match_a_dft_of_the_frames_window() {
    let dir = tmpdir("audio-bands");
    // 100 Hz at 0.5 (bass) and 3 kHz at 0.3 (high-mid), the bass fading in over 2 s.
    lavfi(
        dir.path(),
        "two.wav",
        r"0.5*min(t/2\,1)*sin(2*PI*100*t)+0.3*sin(2*PI*3000*t)",
        3.0,
    );
    let pcm = Command::new("ffmpeg")
        .current_dir(dir.path())
        .args(["-v", "error", "-i", "two.wav", "-ac", "1", "-ar", "48000"])
        .args(["-f", "f64le", "-"])
        .output()
        .unwrap();
    let samples: Vec<f64> = pcm
        .stdout
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    for (binding, lo, hi) in [
        ("~audio:bass", 20.0, 250.0),
        ("~audio:high-mid", 2000.0, 6000.0),
    ] {
        let got = render(dir.path(), "two.wav", &show(binding, 60), "2");
        for frame in [10usize, 30, 50] {
            let points = frame * 100 / FPS as usize;
            let end = points * 480;
            let want = reference_band(&samples[end - 2048..end], lo, hi);
            let v = got[frame];
            // The luma is 8 bits: one level is 1/219.
            assert!(
                (v - want).abs() < 0.012,
                "{binding}, frame {frame}: {v:.4} vs the DFT's {want:.4}"
            );
        }
    }
}

fn reference_band(x: &[f64], lo: f64, hi: f64) -> f64 {
    let n = x.len();
    let w: Vec<f64> = (0..n)
        .map(|i| 0.5 - 0.5 * (std::f64::consts::TAU * i as f64 / n as f64).cos())
        .collect();
    let sum_sq: f64 = w.iter().map(|v| v * v).sum();
    let mut power = 0.0;
    for k in 1..n / 2 {
        let f = k as f64 * 48000.0 / n as f64;
        if f < lo || f >= hi {
            continue;
        }
        let (mut re, mut im) = (0.0, 0.0);
        for i in 0..n {
            let a = std::f64::consts::TAU * ((k * i) % n) as f64 / n as f64;
            re += x[i] * w[i] * a.cos();
            im -= x[i] * w[i] * a.sin();
        }
        power += re * re + im * im;
    }
    (4.0 * power / (n as f64 * sum_sq)).sqrt()
}

/// A binding without `--audio` is refused before the show starts, naming the fix.
#[test]
fn an_audio_binding_without_audio_is_refused_naming_the_flag() {
    let out = run_fp(None, &["run", "-q", "--unpaced", &show("~audio:bass", 2)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("mix.fader=~audio:bass") && err.contains("--audio SOURCE"),
        "{err}"
    );
    let dir = tmpdir("audio-missing");
    let out = run_fp(
        Some(dir.path()),
        &[
            "run",
            "-q",
            "--audio",
            "nothing.wav",
            &show("~audio:bass", 2),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing.wav"), "{err}");
}
