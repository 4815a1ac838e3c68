//! Issue #10, requirement 1: `windowsink` and `framepipe displays` through the real binary, on a
//! real X server (Xvfb), read back with real X clients: `xwd` screenshots, `xdotool` for
//! windows and keys, `xrandr` for a second monitor, and a `WM_DELETE_WINDOW` message sent as a
//! window manager sends it. Each test starts its own Xvfb (`-displayfd`: a free display number)
//! and kills it when it ends, also on failure. When Xvfb cannot start, the test says so and
//! passes (scripts/install-deps installs it).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{run, tmpdir, wait, FP};
use framepipe_testkit::xvfb::Xvfb;
use x11rb::protocol::xproto::{ClientMessageEvent, ConnectionExt as _, EventMask};

/// The test's X server and the tools that work on it.
struct X {
    _server: Xvfb,
    display: String,
}

impl X {
    /// Xvfb (`framepipe_testkit::xvfb`) with one `width`x`height` screen, or `None` (said).
    fn start(width: u32, height: u32) -> Option<X> {
        let server = Xvfb::start(width, height)?;
        let display = server.display.clone();
        Some(X {
            _server: server,
            display,
        })
    }

    /// `program ARGS` on this display, which must succeed; its stdout.
    fn tool(&self, program: &str, args: &[&str]) -> String {
        let out = run(
            Command::new(program)
                .args(args)
                .env("DISPLAY", &self.display),
            Duration::from_secs(20),
        );
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `framepipe ARGS` on this display, stdin piped, stderr collected line by line.
    fn framepipe(&self, args: &[&str]) -> Running {
        let mut child = Command::new(FP)
            .args(args)
            .env("DISPLAY", &self.display)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn framepipe");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let err = child.stderr.take().unwrap();
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Running {
            child: Some(child),
            lines,
        }
    }

    /// The id of the window titled `title`, waiting for it at most 20 s.
    fn window(&self, title: &str) -> String {
        let start = Instant::now();
        loop {
            let out = Command::new("xdotool")
                .args(["search", "--name", &format!("^{title}$")])
                .env("DISPLAY", &self.display)
                .output()
                .expect("xdotool");
            let text = String::from_utf8_lossy(&out.stdout);
            if let Some(id) = text.lines().next() {
                return id.trim().to_string();
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no window titled {title}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Window `id`'s inside: (x, y, width, height) on the screen.
    fn geometry(&self, id: &str) -> (i32, i32, u32, u32) {
        let out = self.tool("xdotool", &["getwindowgeometry", "--shell", id]);
        let get = |k: &str| -> i64 {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("no {k} in {out}"))
                .parse()
                .unwrap()
        };
        (
            get("X") as i32,
            get("Y") as i32,
            get("WIDTH") as u32,
            get("HEIGHT") as u32,
        )
    }

    /// A screenshot of the whole screen with `xwd`: (width, height, 0xRRGGBB pixels).
    fn screenshot(&self) -> (u32, u32, Vec<u32>) {
        let out = Command::new("xwd")
            .args(["-root", "-silent"])
            .env("DISPLAY", &self.display)
            .output()
            .expect("xwd (x11-apps)");
        assert!(out.status.success(), "xwd failed");
        parse_xwd(&out.stdout)
    }
}

/// A framepipe run whose stderr is collected; killed on drop if still running.
struct Running {
    child: Option<Child>,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Running {
    /// Waits at most 20 s for a stderr line containing `text`; returns it.
    fn expect_line(&self, text: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.lines.lock().unwrap().iter().find(|l| l.contains(text)) {
                return l.clone();
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no line with {text:?} on stderr: {:?}",
                self.lines.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the run to end (at most 20 s): its exit status and stderr.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        let child = self.child.take().unwrap();
        let out = wait(child, Duration::from_secs(20), "framepipe with a window");
        // The reader thread has the lines; give it a moment to see the end of the pipe.
        std::thread::sleep(Duration::from_millis(50));
        let err = self.lines.lock().unwrap().join("\n");
        (out.status, err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// An XWD file (what `xwd` writes) of a 24/32-bit TrueColor screen: (width, height, pixels as
/// 0xRRGGBB).
fn parse_xwd(b: &[u8]) -> (u32, u32, Vec<u32>) {
    let u = |i: usize| u32::from_be_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
    let header = u(0) as usize;
    assert_eq!(u(1), 7, "XWD version");
    let (width, height) = (u(4), u(5));
    let byte_order = u(7); // 0: LSB first
    let bits_per_pixel = u(11);
    let bytes_per_line = u(12) as usize;
    let (rmask, gmask, bmask) = (u(14), u(15), u(16));
    let ncolors = u(19) as usize;
    assert_eq!(
        bits_per_pixel, 32,
        "a 24-bit screen is stored 32 bits per pixel"
    );
    let data = &b[header + ncolors * 12..];
    let shift = |m: u32| m.trailing_zeros();
    let mut px = Vec::with_capacity((width * height) as usize);
    for y in 0..height as usize {
        for x in 0..width as usize {
            let p = &data[y * bytes_per_line + x * 4..][..4];
            let v = if byte_order == 0 {
                u32::from_le_bytes([p[0], p[1], p[2], p[3]])
            } else {
                u32::from_be_bytes([p[0], p[1], p[2], p[3]])
            };
            let c = |m: u32| (v & m) >> shift(m);
            px.push(c(rmask) << 16 | c(gmask) << 8 | c(bmask));
        }
    }
    (width, height, px)
}

/// Frame 0 of `pipeline_src` (a source element), RGBA, through `rawsink`.
fn frame0(pipeline_src: &str, w: u32, h: u32) -> Vec<u8> {
    let dir = tmpdir("window-frame0");
    let path = dir.join("f.raw");
    let out = run(
        Command::new(FP).args([
            "run",
            "-q",
            "--unpaced",
            "--control",
            "none",
            &format!(
                "{pipeline_src} frames=1 ! rawsink location={}",
                path.display()
            ),
        ]),
        Duration::from_secs(20),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), (w * h * 4) as usize);
    bytes
}

/// The documented rule (docs/ELEMENTS.md, windowsink), written out again here: frame `src`
/// (`sw`x`sh` RGBA) in a `dw`x`dh` window, as 0xRRGGBB.
fn letterboxed(src: &[u8], sw: u64, sh: u64, dw: u64, dh: u64) -> Vec<u32> {
    let (w, h) = if dw * sh <= dh * sw {
        (dw, ((2 * sh * dw + sw) / (2 * sw)).clamp(1, dh))
    } else {
        (((2 * sw * dh + sh) / (2 * sh)).clamp(1, dw), dh)
    };
    let (x0, y0) = ((dw - w) / 2, (dh - h) / 2);
    let mut out = vec![0u32; (dw * dh) as usize];
    for j in 0..h {
        let sy = (2 * j + 1) * sh / (2 * h);
        for i in 0..w {
            let sx = (2 * i + 1) * sw / (2 * w);
            let p = ((sy * sw + sx) * 4) as usize;
            out[((y0 + j) * dw + x0 + i) as usize] =
                u32::from(src[p]) << 16 | u32::from(src[p + 1]) << 8 | u32::from(src[p + 2]);
        }
    }
    out
}

/// The `w`x`h` region at (`x`, `y`) of a screenshot.
fn region(shot: &(u32, u32, Vec<u32>), x: i32, y: i32, w: u32, h: u32) -> Vec<u32> {
    let mut out = Vec::with_capacity((w * h) as usize);
    for row in 0..h as i32 {
        let start = ((y + row) as u32 * shot.0 + x as u32) as usize;
        out.extend_from_slice(&shot.2[start..start + w as usize]);
    }
    out
}

/// Takes screenshots until the region equals `expected` (the window may not have drawn yet),
/// at most 10 s; panics with the number of differing pixels otherwise.
fn await_picture(x: &X, at: (i32, i32, u32, u32), expected: &[u32]) {
    let start = Instant::now();
    loop {
        let got = region(&x.screenshot(), at.0, at.1, at.2, at.3);
        if got == expected {
            return;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let differ = got.iter().zip(expected).filter(|(a, b)| a != b).count();
            panic!(
                "the window at {at:?} does not show the frame scaled as documented: {differ} of {} pixels differ",
                expected.len()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A noise frame held for ever (`on-end=hold`): every frame shows the same picture.
const NOISE: &str = "testsrc width=160 height=90 pattern=noise seed=3";

#[test]
fn a_screenshot_of_the_window_is_the_frame_scaled_as_documented() {
    let Some(x) = X::start(1280, 720) else {
        return;
    };
    let reference = frame0(NOISE, 160, 90);
    let fp = x.framepipe(&[
        "run",
        "-q",
        "--fps",
        "30",
        &format!("{NOISE} frames=1 on-end=hold ! windowsink title=shot width=400 height=300"),
    ]);
    let id = x.window("shot");
    let geo = x.geometry(&id);
    // The size asked for, centred on the display.
    assert_eq!(geo, (440, 210, 400, 300));
    // 160x90 in 400x300: 400x225, 37 rows of black above, 38 below; 2.5x nearest neighbour.
    await_picture(&x, geo, &letterboxed(&reference, 160, 90, 400, 300));
    // And at the frame's own size (no width/height, the display is larger): the identity.
    drop(fp);
    let fp = x.framepipe(&[
        "run",
        "-q",
        "--fps",
        "30",
        &format!("{NOISE} frames=1 on-end=hold ! windowsink title=native"),
    ]);
    let id = x.window("native");
    let geo = x.geometry(&id);
    assert_eq!((geo.2, geo.3), (160, 90));
    await_picture(&x, geo, &letterboxed(&reference, 160, 90, 160, 90));
    drop(fp);
}

#[test]
fn displays_lists_xrandr_monitors_and_fullscreen_lands_on_the_second() {
    let Some(x) = X::start(1280, 480) else {
        return;
    };
    x.tool(
        "xrandr",
        &["--setmonitor", "left", "640/160x480/120+0+0", "none"],
    );
    x.tool(
        "xrandr",
        &["--setmonitor", "right", "640/160x480/120+640+0", "none"],
    );
    let listed = x.tool(FP, &["displays"]);
    let right = listed
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("right"))
        .unwrap_or_else(|| panic!("no 'right' display in:\n{listed}"));
    let cols: Vec<&str> = right.split_whitespace().collect();
    assert_eq!(&cols[2..4], ["640x480", "+640+0"], "{listed}");
    let index = cols[0];

    let reference = frame0(NOISE, 160, 90);
    let fp = x.framepipe(&[
        "run",
        "-q",
        "--fps",
        "30",
        &format!(
            "{NOISE} frames=1 on-end=hold ! windowsink title=full fullscreen=true display={index}"
        ),
    ]);
    let id = x.window("full");
    assert_eq!(
        x.geometry(&id),
        (640, 0, 640, 480),
        "covers the 'right' monitor"
    );
    // 160x90 in 640x480: 640x360 with 60 rows of black above and below, 4x each pixel.
    await_picture(
        &x,
        (640, 0, 640, 480),
        &letterboxed(&reference, 160, 90, 640, 480),
    );
    // The left monitor does not show the picture.
    let shot = x.screenshot();
    assert_ne!(
        region(&shot, 0, 0, 640, 480),
        region(&shot, 640, 0, 640, 480)
    );
    // By name too; an unknown display is an error naming the ones there are.
    drop(fp);
    let out = run(
        Command::new(FP)
            .args(["run", "-q", "testsrc frames=1 ! windowsink display=middle"])
            .env("DISPLAY", &x.display),
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("unknown display 'middle'; expected one of: 0 (left), 1 (right), 2 (screen)"),
        "{err}"
    );
}

#[test]
fn displays_without_an_x_server_says_so() {
    let out = run(
        Command::new(FP).arg("displays").env_remove("DISPLAY"),
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("no display: $DISPLAY is not set"), "{err}");
}

/// The number in a reply line `framepipe: ok 'CMD' from frame N`.
fn reply_frame(line: &str) -> u64 {
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn keys_pause_step_resume_and_quit_through_the_command_queue() {
    let Some(x) = X::start(640, 480) else {
        return;
    };
    let dir = tmpdir("window-keys");
    let stats = dir.join("stats.json");
    let fp = x.framepipe(&[
        "run",
        "--fps",
        "30",
        "--control",
        "none",
        "--stats",
        stats.to_str().unwrap(),
        "testsrc width=64 height=48 frames=0 ! windowsink title=keys",
    ]);
    let id = x.window("keys");
    x.tool("xdotool", &["windowfocus", "--sync", &id]);
    let key = |k: &str| x.tool("xdotool", &["key", "--clearmodifiers", k]);
    key("space");
    let paused_at = reply_frame(&fp.expect_line("ok 'pause' from frame"));
    key("Right");
    fp.expect_line("ok 'step 1'");
    key("Right");
    // Both steps answered.
    let start = Instant::now();
    while fp
        .lines
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("ok 'step 1'"))
        .count()
        < 2
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "second step not answered"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A step is answered when it is read; its frame goes out at its deadline (a period, 33 ms,
    // later at most, once computed: 64x48 takes microseconds). A `stop` read before that would
    // end the run without it, so give it ample time before quitting.
    std::thread::sleep(Duration::from_millis(500));
    key("q");
    let stopped_at = reply_frame(&fp.expect_line("ok 'stop' from frame"));
    let (status, err) = fp.finish();
    assert!(status.success(), "{err}");
    // Paused at frame P: frames 0..P were out, then the two steps, then nothing.
    assert_eq!(stopped_at, paused_at + 2, "{err}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(s["frames"], paused_at + 2, "{err}");

    // Space again resumes (the window asks the run whether it is paused).
    let fp = x.framepipe(&[
        "run",
        "--fps",
        "30",
        "--control",
        "none",
        "--start-paused",
        "testsrc width=64 height=48 frames=0 ! windowsink title=resume",
    ]);
    let id = x.window("resume");
    x.tool("xdotool", &["windowfocus", "--sync", &id]);
    x.tool("xdotool", &["key", "space"]);
    fp.expect_line("ok 'resume' from frame 0");
    x.tool("xdotool", &["key", "q"]);
    let (status, err) = fp.finish();
    assert!(status.success(), "{err}");
}

/// Sends `WM_DELETE_WINDOW` to window `id`, as a window manager does when its close button is
/// pressed.
fn close_like_a_window_manager(display: &str, id: u32) {
    let (conn, _) = x11rb::connect(Some(display)).expect("connect to Xvfb");
    let atom = |name: &[u8]| conn.intern_atom(false, name).unwrap().reply().unwrap().atom;
    let (protocols, delete) = (atom(b"WM_PROTOCOLS"), atom(b"WM_DELETE_WINDOW"));
    let event = ClientMessageEvent::new(32, id, protocols, [delete, 0, 0, 0, 0]);
    conn.send_event(false, id, EventMask::NO_EVENT, event)
        .unwrap();
    // A round trip: the server has handled the event before this connection closes.
    conn.get_input_focus().unwrap().reply().unwrap();
}

/// Waits (at most 20 s) until the window at `geo` shows something other than black: its
/// thread is up and drawing.
fn await_drawing(x: &X, geo: (i32, i32, u32, u32)) {
    let start = Instant::now();
    loop {
        let shot = x.screenshot();
        if region(&shot, geo.0, geo.1, geo.2, geo.3)
            .iter()
            .any(|&p| p != 0)
        {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the window stayed black"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn closing_the_window_stops_the_run_cleanly() {
    let Some(x) = X::start(640, 480) else {
        return;
    };
    let dir = tmpdir("window-close");
    let out = dir.join("rec.y4m");
    let fp = x.framepipe(&[
        "run",
        "--fps",
        "30",
        "--control",
        "none",
        &format!(
            "testsrc width=64 height=48 frames=0 ! tee name=t  t. ! windowsink title=closeme  t. ! y4msink location={}",
            out.display()
        ),
    ]);
    let id = x.window("closeme");
    // Frames are out and the window thread is drawing them.
    await_drawing(&x, x.geometry(&id));
    close_like_a_window_manager(&x.display, id.parse().unwrap());
    let stopped_at = reply_frame(&fp.expect_line("ok 'stop' from frame"));
    let (status, err) = fp.finish();
    assert!(status.success(), "exit status {status}: {err}");
    // The recording beside it (a follower output, unpaced: it may be ahead of the window) has
    // every frame the window showed, each whole: a header line, then "FRAME\n" and 64x48 4:2:0.
    let mut bytes = Vec::new();
    std::fs::File::open(&out)
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    let header = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let frame = 6 + 64 * 48 * 3 / 2;
    assert_eq!((bytes.len() - header) % frame, 0, "a partial frame: {err}");
    let frames = ((bytes.len() - header) / frame) as u64;
    assert!(
        frames >= stopped_at,
        "{frames} frames recorded, stop at {stopped_at}: {err}"
    );
}

#[test]
fn a_leaky_preview_window_runs_beside_the_master_output() {
    let Some(x) = X::start(640, 480) else {
        return;
    };
    let dir = tmpdir("window-preview");
    let stats = dir.join("stats.json");
    let fp = x.framepipe(&[
        "run",
        "-q",
        "--fps",
        "60",
        "--control",
        "none",
        "--stats",
        stats.to_str().unwrap(),
        "testsrc width=320 height=240 frames=120 pattern=noise ! tee name=t  t. ! nullsink  \
         t. ! monitor width=160 height=120 ! windowsink title=preview",
    ]);
    let id = x.window("preview");
    let geo = x.geometry(&id);
    assert_eq!((geo.2, geo.3), (160, 120));
    // The preview shows something other than black while the show runs.
    await_drawing(&x, geo);
    let (status, err) = fp.finish();
    assert!(status.success(), "{err}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    // The master output got every frame; the preview is a leaky branch (skips when behind).
    assert_eq!(s["frames"], 120, "{err}");
    let monitor = s["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["name"] == "monitor")
        .expect("monitor stage in stats");
    let shown = monitor["frames"].as_u64().unwrap();
    let skipped = monitor["skipped"].as_u64().unwrap();
    assert_eq!(shown + skipped, 120, "{monitor}");
}

/// Waits (at most 20 s) until window `id`'s geometry is `want`.
fn await_geometry(x: &X, id: &str, want: (i32, i32, u32, u32)) {
    let start = Instant::now();
    loop {
        let got = x.geometry(id);
        if got == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "window {id} at {got:?}, expected {want:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn f_goes_full_screen_and_escape_comes_back() {
    let Some(x) = X::start(640, 480) else {
        return;
    };
    let fp = x.framepipe(&[
        "run",
        "-q",
        "--fps",
        "30",
        "--control",
        "none",
        "testsrc width=160 height=90 frames=0 ! windowsink title=toggle",
    ]);
    let id = x.window("toggle");
    let windowed = ((640 - 160) / 2, (480 - 90) / 2, 160, 90);
    assert_eq!(x.geometry(&id), windowed);
    x.tool("xdotool", &["windowfocus", "--sync", &id]);
    x.tool("xdotool", &["key", "f"]);
    await_geometry(&x, &id, (0, 0, 640, 480));
    x.tool("xdotool", &["key", "Escape"]);
    await_geometry(&x, &id, windowed);
    drop(fp);
}
