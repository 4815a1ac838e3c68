//! Issue #24, item 7: a `windowsink` fed by a GPU node draws the show's texture itself, with
//! OpenGL in the same window (EGL on the X server, a context sharing the show's textures): no
//! download. Through the real binary on a real X server (Xvfb, Mesa's llvmpipe doing EGL on
//! X11), read back with `xwd`: the window shows what the CPU path's frame is (`rawsink` of the
//! same show), exactly at the frame's own size and within ±2 of bilinear filtering when
//! enlarged, with `--stats` counting no download; and where the window gets no EGL display
//! (here: `FRAMEPIPE_EGL_PLATFORM=surfaceless` puts the show's context elsewhere), the frames
//! are downloaded and drawn by the CPU, said in one line. Small frames, one frame held.

mod common;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::shaders::INVERT;
use common::{run, tmpdir, wait, FP};
use framepipe_testkit::xvfb::Xvfb;

const W: u32 = 64;
const H: u32 = 48;

/// The show's source: one noise frame (every pixel differs from its neighbours, so a
/// misplaced or misfiltered pixel shows).
fn source() -> String {
    format!("testsrc width={W} height={H} pattern=noise seed=3 frames=1")
}

/// Frame 0 of `chain` (source ! ... without a sink) through `rawsink`: the CPU path's picture.
fn reference(chain: &str, dir: &std::path::Path) -> Vec<u8> {
    let path = dir.join("ref.raw");
    let out = run(
        Command::new(FP).args([
            "run",
            "-q",
            "--unpaced",
            "--control",
            "none",
            &format!("{chain} ! rawsink location={}", path.display()),
        ]),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), (W * H * 4) as usize);
    bytes
}

/// `xwd` of the root window: (width, pixels as [r, g, b]).
fn screenshot(display: &str) -> (u32, Vec<[u8; 3]>) {
    let out = Command::new("xwd")
        .args(["-root", "-silent"])
        .env("DISPLAY", display)
        .output()
        .expect("xwd (x11-apps)");
    assert!(out.status.success(), "xwd failed");
    let b = &out.stdout;
    let u = |i: usize| u32::from_be_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
    let (header, width, height) = (u(0) as usize, u(4), u(5));
    let (byte_order, bpp, bpl) = (u(7), u(11), u(12) as usize);
    let (rm, gm, bm, ncolors) = (u(14), u(15), u(16), u(19) as usize);
    assert_eq!(bpp, 32, "a 24-bit screen is stored 32 bits per pixel");
    let data = &b[header + ncolors * 12..];
    let c = |v: u32, m: u32| ((v & m) >> m.trailing_zeros()) as u8;
    let mut px = Vec::with_capacity((width * height) as usize);
    for y in 0..height as usize {
        for x in 0..width as usize {
            let p: [u8; 4] = data[y * bpl + x * 4..][..4].try_into().unwrap();
            let v = if byte_order == 0 {
                u32::from_le_bytes(p)
            } else {
                u32::from_be_bytes(p)
            };
            px.push([c(v, rm), c(v, gm), c(v, bm)]);
        }
    }
    (width, px)
}

/// The id and inside (x, y, width, height) of the window titled `title` (waits ≤ 20 s).
fn window(display: &str, title: &str) -> (i32, i32, u32, u32) {
    let start = Instant::now();
    loop {
        let out = Command::new("xdotool")
            .args([
                "search",
                "--name",
                &format!("^{title}$"),
                "getwindowgeometry",
                "--shell",
            ])
            .env("DISPLAY", display)
            .output()
            .expect("xdotool");
        let text = String::from_utf8_lossy(&out.stdout);
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .and_then(|v| v.parse::<i64>().ok())
        };
        if let (Some(x), Some(y), Some(w), Some(h)) =
            (get("X"), get("Y"), get("WIDTH"), get("HEIGHT"))
        {
            return (x as i32, y as i32, w as u32, h as u32);
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no window titled {title}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The frame `src` (W x H RGBA) enlarged into `dw` x `dh` with GL's bilinear rule (texel
/// centres at half-integers, edges clamped), [r, g, b] per pixel. `dw`/`dh` keep the aspect.
fn bilinear(src: &[u8], dw: u32, dh: u32) -> Vec<[u8; 3]> {
    let at = |x: i64, y: i64, c: usize| {
        let (x, y) = (x.clamp(0, W as i64 - 1), y.clamp(0, H as i64 - 1));
        f64::from(src[((y * W as i64 + x) * 4) as usize + c])
    };
    let mut out = Vec::with_capacity((dw * dh) as usize);
    for j in 0..dh {
        let v = (f64::from(j) + 0.5) * f64::from(H) / f64::from(dh) - 0.5;
        for i in 0..dw {
            let u = (f64::from(i) + 0.5) * f64::from(W) / f64::from(dw) - 0.5;
            let (x0, y0) = (u.floor() as i64, v.floor() as i64);
            let (fx, fy) = (u - u.floor(), v - v.floor());
            let mut p = [0u8; 3];
            for (c, out) in p.iter_mut().enumerate() {
                let top = at(x0, y0, c) * (1.0 - fx) + at(x0 + 1, y0, c) * fx;
                let bottom = at(x0, y0 + 1, c) * (1.0 - fx) + at(x0 + 1, y0 + 1, c) * fx;
                *out = (top * (1.0 - fy) + bottom * fy).round() as u8;
            }
            out.push(p);
        }
    }
    out
}

/// Takes screenshots until the window at `at` shows `expected` within `tolerance` per channel
/// (it may not have drawn yet), at most 10 s; panics with the largest difference otherwise.
fn await_picture(display: &str, at: (i32, i32, u32, u32), expected: &[[u8; 3]], tolerance: u8) {
    let start = Instant::now();
    loop {
        let (sw, shot) = screenshot(display);
        let mut worst = 0u8;
        let mut differ = 0usize;
        for j in 0..at.3 {
            for i in 0..at.2 {
                let got = shot[((at.1 as u32 + j) * sw + at.0 as u32 + i) as usize];
                let want = expected[(j * at.2 + i) as usize];
                let d = (0..3).map(|c| got[c].abs_diff(want[c])).max().unwrap();
                worst = worst.max(d);
                differ += usize::from(d > tolerance);
            }
        }
        if differ == 0 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the window at {at:?} does not show the frame: {differ} pixels differ by more than \
             {tolerance} (largest {worst})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `framepipe run --stats STATS SHOW` on `display`, with `env`; stops it with `stop` on stdin
/// once `check` is done; its stderr and the stats.
fn show_and_check(
    display: &str,
    env: &[(&str, &str)],
    show: &str,
    stats: &std::path::Path,
    check: impl FnOnce(),
) -> (String, serde_json::Value) {
    let mut child = Command::new(FP)
        .args([
            "run",
            "-q",
            "--fps",
            "30",
            "--stats",
            stats.to_str().unwrap(),
            show,
        ])
        .env("DISPLAY", display)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn framepipe");
    check();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"stop\n").unwrap();
    drop(stdin);
    let out = wait(
        child,
        Duration::from_secs(20),
        "framepipe with a GPU window",
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let stats = serde_json::from_str(&std::fs::read_to_string(stats).unwrap()).unwrap();
    (err, stats)
}

fn rgb(frame: &[u8]) -> Vec<[u8; 3]> {
    frame.chunks_exact(4).map(|p| [p[0], p[1], p[2]]).collect()
}

#[test]
fn a_window_fed_by_a_gpu_node_draws_the_texture_without_a_download() {
    let Some(x) = Xvfb::start(640, 480) else {
        return;
    };
    let dir = tmpdir("gpu-window");
    let shader = dir.path().join("invert.fs");
    std::fs::write(&shader, INVERT).unwrap();
    let chain = format!("{} ! isf location={}", source(), shader.display());
    let frame = reference(&chain, dir.path());
    // One window at the frame's size, one enlarged 2.5 times, fed by one texture.
    let show = format!(
        "{} on-end=hold ! isf location={} ! tee name=t \
         t. ! windowsink title=native  t. ! windowsink title=big width=160 height=120 vsync=true",
        source(),
        shader.display()
    );
    let (err, stats) = show_and_check(&x.display, &[], &show, &dir.path().join("s.json"), || {
        // Both are centred on the screen: the big one is moved off the native one first (the
        // native one then redraws what was under it: the texture it keeps).
        window(&x.display, "big");
        let moved = Command::new("xdotool")
            .args(["search", "--name", "^big$", "windowmove", "0", "0"])
            .env("DISPLAY", &x.display)
            .status()
            .expect("xdotool");
        assert!(moved.success());
        let big = window(&x.display, "big");
        assert_eq!(big, (0, 0, 160, 120));
        await_picture(&x.display, big, &bilinear(&frame, 160, 120), 2);
        let native = window(&x.display, "native");
        assert_eq!((native.2, native.3), (W, H));
        await_picture(&x.display, native, &rgb(&frame), 0);
    });
    assert!(!err.contains("downloaded"), "{err}");
    let gpu = &stats["gpu"];
    assert_eq!(gpu["downloads"], 0, "{stats:#}");
    assert!(gpu["uploads"].as_u64().unwrap() >= 1, "{stats:#}");
}

#[test]
fn without_egl_for_the_window_gpu_frames_are_downloaded_and_drawn_by_the_cpu() {
    let Some(x) = Xvfb::start(640, 480) else {
        return;
    };
    let dir = tmpdir("gpu-window-fallback");
    let shader = dir.path().join("invert.fs");
    std::fs::write(&shader, INVERT).unwrap();
    let chain = format!("{} ! isf location={}", source(), shader.display());
    let frame = reference(&chain, dir.path());
    let show = format!(
        "{} on-end=hold ! isf location={} ! windowsink title=cpu",
        source(),
        shader.display()
    );
    let env = [("FRAMEPIPE_EGL_PLATFORM", "surfaceless")];
    let (err, stats) = show_and_check(&x.display, &env, &show, &dir.path().join("s.json"), || {
        let at = window(&x.display, "cpu");
        await_picture(&x.display, at, &rgb(&frame), 0);
    });
    let notes: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("GPU frames are downloaded"))
        .collect();
    assert_eq!(notes.len(), 1, "one line says why: {err}");
    assert!(
        notes[0].contains("FRAMEPIPE_EGL_PLATFORM=surfaceless"),
        "{err}"
    );
    assert!(
        stats["gpu"]["downloads"].as_u64().unwrap() >= 1,
        "{stats:#}"
    );
}
