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

/// ffprobe's `entry` (`duration`, `start_time`) of stream `which` (`v:0`, `a:0`) of
/// `file`, seconds.
fn stream_time(dir: &Path, file: &str, which: &str, entry: &str) -> f64 {
    let out = Command::new("ffprobe")
        .current_dir(dir)
        .args(["-v", "error", "-select_streams", which, "-show_entries"])
        .arg(format!("stream={entry}"))
        .args(["-of", "csv=p=0", file])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("no {entry} for {which} of {file}: {text:?}"))
}

/// `ffmpegsink audio=true` muxes the `--audio` file from the first frame: a 2 s render of a
/// 3 s track comes out with video and audio starting together and of the same length (the
/// shorter, 2 s; PCM in a .mov, whose streams carry their durations).
#[test]
fn a_music_video_render_muxes_the_audio_in_step_with_the_frames() {
    let dir = tmpdir("audio-mux");
    lavfi(dir.path(), "track.wav", r"0.5*sin(2*PI*440*t)", 3.0);
    let out = run_fp(
        Some(dir.path()),
        &[
            "run",
            "-q",
            "--unpaced",
            "--audio",
            "track.wav",
            "testsrc width=64 height=48 frames=50 rate=25 ! \
             ffmpegsink location=mv.mov codec=mpeg4 args=\"-c:a pcm_s16le\" audio=true",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = stream_time(dir.path(), "mv.mov", "v:0", "duration");
    let a = stream_time(dir.path(), "mv.mov", "a:0", "duration");
    for s in ["v:0", "a:0"] {
        assert_eq!(
            stream_time(dir.path(), "mv.mov", s, "start_time"),
            0.0,
            "{s}"
        );
    }
    assert!((v - 2.0).abs() < 0.05, "video {v} s");
    assert!((a - v).abs() < 0.05, "audio {a} s, video {v} s");
    // Without --audio, audio=true is refused naming the flag.
    let out = run_fp(
        Some(dir.path()),
        &[
            "run",
            "-q",
            "testsrc width=64 height=48 frames=2 ! ffmpegsink location=x.mkv audio=true",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--audio SOURCE"), "{err}");
}

/// A clip's sound is never dropped without a word: ffmpegsrc on a file with an audio stream
/// says so once, unless `--audio` names the file.
#[test]
fn a_clips_unused_sound_is_reported_once() {
    let dir = tmpdir("audio-clip");
    let st = Command::new("ffmpeg")
        .current_dir(dir.path())
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg("testsrc=size=64x48:rate=25:d=1")
        .args([
            "-f",
            "lavfi",
            "-i",
            "sine=d=1",
            "-c:v",
            "ffv1",
            "-c:a",
            "pcm_s16le",
        ])
        .arg("clip.mkv")
        .status()
        .unwrap();
    assert!(st.success());
    let show = "ffmpegsrc location=clip.mkv ! nullsink";
    let out = run_fp(Some(dir.path()), &["run", "--unpaced", show]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        err.matches("the sound of 'clip.mkv' is not used").count(),
        1,
        "{err}"
    );
    let out = run_fp(
        Some(dir.path()),
        &["run", "--unpaced", "--audio", "clip.mkv", show],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("is not used"), "{err}");
}

/// `tempo auto`: a click track at 128 bpm sets the show's beat clock; after 12 s the
/// tempo (the run's `--stats`) is within ±1 bpm of it, where it was 120 before.
#[test]
fn tempo_auto_sets_the_beat_clock_to_a_click_tracks_tempo() {
    let dir = tmpdir("audio-tempo");
    lavfi(
        dir.path(),
        "clicks.wav",
        r"if(lt(mod(t\,0.46875)\,0.005)\,0.8*sin(2*PI*1000*t)\,0)",
        12.0,
    );
    let mut child = Command::new(common::FP)
        .current_dir(dir.path())
        .args([
            "run",
            "-q",
            "--unpaced",
            "--control",
            "stdin",
            "--stats",
            "stats.json",
            "--audio",
            "clicks.wav",
            "testsrc width=64 height=48 frames=300 rate=25 ! nullsink",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let fed = common::feed(&mut child, b"tempo auto\n".to_vec(), true);
    let out = common::wait(child, std::time::Duration::from_secs(60), "tempo auto");
    drop(fed.join());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("stats.json")).unwrap())
            .unwrap();
    let bpm = stats["tempo_bpm"].as_f64().unwrap();
    assert!((bpm - 128.0).abs() <= 1.0, "tempo {bpm} bpm; {err}");
}

/// ISF `audioFFT` fed per frame: a shader drawing its 64-column spectrum, fed a sine of
/// 3187.5 Hz (the middle of column 8: 24000 Hz / 64 columns = 375 Hz each) of amplitude
/// 0.8, shows 0.8 in column 8 and next to nothing elsewhere.
#[test]
fn an_isf_audio_fft_input_shows_a_sines_energy_in_its_column() {
    let dir = tmpdir("audio-isf");
    lavfi(dir.path(), "sine.wav", r"0.8*sin(2*PI*3187.5*t)", 1.0);
    let fs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/isf_audio/spectrum.fs");
    let show = format!(
        "testsrc width={W} height={H} frames=10 rate={FPS} ! isf location={} ! \
         rawsink location=out.rgba",
        fs.display()
    );
    let out = run_fp(
        Some(dir.path()),
        &[
            "run",
            "-q",
            "--unpaced",
            "--control",
            "none",
            "--audio",
            "sine.wav",
            &show,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = std::fs::read(dir.path().join("out.rgba")).unwrap();
    assert_eq!(raw.len(), W * H * 4 * 10);
    // The last frame's middle row, one value per column.
    let last = &raw[W * H * 4 * 9..];
    let row: Vec<f64> = (0..W)
        .map(|x| last[((H / 2) * W + x) * 4] as f64 / 255.0)
        .collect();
    assert!(
        (row[8] - 0.8).abs() < 0.03,
        "column 8: {}; row {row:?}",
        row[8]
    );
    for (x, v) in row.iter().enumerate() {
        if x != 8 {
            assert!(*v < 0.05, "column {x}: {v}; row {row:?}");
        }
    }
    // Without --audio the input is silent: 0 everywhere.
    let out = run_fp(
        Some(dir.path()),
        &["run", "-q", "--unpaced", "--control", "none", &show],
    );
    assert!(out.status.success());
    let raw = std::fs::read(dir.path().join("out.rgba")).unwrap();
    assert!(raw.chunks_exact(4).all(|p| p[0] == 0), "silence is not 0");
}
