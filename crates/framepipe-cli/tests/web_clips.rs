//! The page's grid of a `clips` deck (issue #26 item 4), in a real headless Chromium driving
//! the real binary: clips made here with ffmpeg, each with a first frame unlike the rest (a
//! coloured quadrant on frame 0 only).
//!
//! * the grid shows a thumbnail per clip of the bank, named after the clip, the one playing
//!   marked; each thumbnail's pixels are the clip's first frame as ffmpeg decodes it (exactly,
//!   PNG, for a clip no larger than a thumbnail; within 2 levels at the quadrants' centres for
//!   a larger clip scaled down);
//! * a click on a thumbnail triggers that clip: the reply names the frame it starts from, and
//!   that frame at the sink is the clip's first frame; the grid then marks it playing;
//! * a thumbnail is asked for by deck and number only: another node, a number past the bank,
//!   or anything but `N.png` is a 404.

mod browser;
mod common;

use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use browser::cdp;
use common::{tmpdir, Fp};
use serde_json::json;

const W: usize = 64;
const H: usize = 48;

/// Makes `name`: `w`x`h`, 25 fps, 2 s of `base`, its first frame with a top-left quadrant of
/// `mark` (FFV1 in Matroska: lossless, quick to decode).
fn clip(dir: &Path, name: &str, (w, h): (usize, usize), base: &str, mark: &str) {
    let st = Command::new("ffmpeg")
        .current_dir(dir)
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(format!(
            "color=c={base}:s={w}x{h}:r=25:d=2,drawbox=x=0:y=0:w=iw/2:h=ih/2:c={mark}:t=fill:enable='eq(n\\,0)'"
        ))
        .args(["-c:v", "ffv1", "-pix_fmt", "yuv444p", name])
        .status()
        .expect("ffmpeg");
    assert!(st.success(), "ffmpeg made no {name}");
}

/// Frame `n` of `name` as ffmpeg decodes it, RGB.
fn ffmpeg_frame(dir: &Path, name: &str, n: usize) -> Vec<u8> {
    let out = Command::new("ffmpeg")
        .current_dir(dir)
        .args(["-v", "error", "-i", name, "-vf"])
        .arg(format!("select=eq(n\\,{n})"))
        .args(["-frames:v", "1", "-pix_fmt", "rgb24", "-f", "rawvideo", "-"])
        .output()
        .expect("ffmpeg");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `GET path` on the server, with the token if any: (status, body).
fn get(port: u16, path: &str) -> (u16, Vec<u8>) {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let head_end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..head_end]).to_string();
    let status = head[9..12].parse().unwrap();
    let mut body = all[head_end..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            let eol = i + body[i..].windows(2).position(|w| w == b"\r\n").unwrap();
            let len =
                usize::from_str_radix(std::str::from_utf8(&body[i..eol]).unwrap(), 16).unwrap();
            if len == 0 {
                break;
            }
            out.extend_from_slice(&body[eol + 2..eol + 2 + len]);
            i = eol + 2 + len + 2;
        }
        body = out;
    }
    (status, body)
}

/// A PNG's size and RGB pixels.
fn png_rgb(bytes: &[u8]) -> (usize, usize, Vec<u8>) {
    let mut d = png::Decoder::new(bytes);
    d.set_transformations(png::Transformations::EXPAND);
    let mut r = d.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width as usize, info.height as usize, buf)
}

fn px(rgb: &[u8], w: usize, x: usize, y: usize) -> [u8; 3] {
    let i = (y * w + x) * 3;
    [rgb[i], rgb[i + 1], rgb[i + 2]]
}

#[test]
fn the_deck_grid_shows_each_clips_first_frame_and_a_click_triggers_it() {
    let Some(exe) = cdp::chromium() else {
        println!("SKIPPED: chromium is not installed (scripts/install-deps installs it)");
        return;
    };
    let dir = tmpdir("web-clips");
    let d = dir.path();
    clip(d, "red.mkv", (W, H), "red", "white");
    clip(d, "green.mkv", (W, H), "green", "yellow");
    clip(d, "blue.mkv", (W, H), "blue", "magenta");
    clip(d, "wide.mkv", (320, 180), "gray", "cyan");
    let mut fp = Fp::run_in(
        d,
        &[
            "--fps",
            "25",
            "--web",
            "127.0.0.1:0",
            &format!(
                "clips name=deck locations=red.mkv,green.mkv,blue.mkv,wide.mkv width={W} height={H} ! rawsink location=out.rgba"
            ),
        ],
    );
    let url = fp.after("web control on ");
    let port: u16 = fp.web_port();
    let mut b = cdp::Browser::start(&exe);
    b.call("Page.navigate", json!({ "url": url }));
    b.wait_for(
        "!!(window.fp && fp.graph && fp.ws && fp.ws.readyState === 1 && fp.values.length)",
        Duration::from_secs(15),
    );
    // The grid: four thumbnails, all loaded, named, the first playing.
    b.wait_for(
        "[...document.querySelectorAll('#deck\\\\:deck img')].length === 4 && \
         [...document.querySelectorAll('#deck\\\\:deck img')].every(i => i.complete && i.naturalWidth > 0)",
        Duration::from_secs(15),
    );
    assert_eq!(
        b.eval(
            "[...document.querySelectorAll('#deck\\\\:deck .clip-name')].map(e => e.textContent)"
        ),
        json!(["red", "green", "blue", "wide"])
    );
    assert_eq!(
        b.eval("[...document.querySelectorAll('#deck\\\\:deck .clip')].map(e => e.classList.contains('playing'))"),
        json!([true, false, false, false])
    );
    assert_eq!(
        b.eval("[...document.querySelectorAll('#deck\\\\:deck img')].map(i => [i.naturalWidth, i.naturalHeight])"),
        json!([[64, 48], [64, 48], [64, 48], [160, 90]])
    );

    // The thumbnails' pixels: each clip's first frame (the server's cache, as the page got it).
    for (i, name) in ["red.mkv", "green.mkv", "blue.mkv"].iter().enumerate() {
        let (st, body) = get(port, &format!("/thumb/deck/{i}.png"));
        assert_eq!(st, 200);
        let (w, h, rgb) = png_rgb(&body);
        assert_eq!((w, h), (W, H));
        assert!(
            rgb == ffmpeg_frame(d, name, 0),
            "{name}: the thumbnail is not its first frame"
        );
        assert!(
            rgb != ffmpeg_frame(d, name, 1),
            "{name}: frame 1 is frame 0"
        );
    }
    let (st, body) = get(port, "/thumb/deck/3.png");
    assert_eq!(st, 200);
    let (w, h, rgb) = png_rgb(&body);
    assert_eq!((w, h), (160, 90));
    let first = ffmpeg_frame(d, "wide.mkv", 0);
    for (x, y) in [(40, 22), (120, 22), (40, 67), (120, 67)] {
        let (ours, theirs) = (px(&rgb, w, x, y), px(&first, 320, x * 2, y * 2));
        assert!(
            ours.iter().zip(theirs).all(|(a, b)| a.abs_diff(b) <= 2),
            "wide.mkv at ({x},{y}): {ours:?}, first frame {theirs:?}"
        );
    }
    // By deck and number only.
    for path in [
        "/thumb/deck/4.png",
        "/thumb/deck/..%2Fred.mkv",
        "/thumb/nodeck/0.png",
        "/thumb/deck/0.jpg",
    ] {
        assert_eq!(get(port, path).0, 404, "{path}");
    }

    // A click on the third: it starts from the frame its reply names, with its first frame.
    b.click("clip:deck:2");
    let start = Instant::now();
    let from = loop {
        let n = b.eval(
            "(() => { const l = [...document.querySelectorAll('#log li')].map(l => l.textContent)\
             .find(t => t.startsWith(\"ok 'set deck.clip 2'\")); \
             return l ? Number(/from frame (\\d+)/.exec(l)[1]) : null; })()",
        );
        if let Some(n) = n.as_u64() {
            break n as usize;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no reply to the trigger"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    b.wait_for(
        "document.getElementById('clip:deck:2').classList.contains('playing') && \
         !document.getElementById('clip:deck:0').classList.contains('playing')",
        Duration::from_secs(5),
    );
    let frame = W * H * 4;
    let out = d.join("out.rgba");
    common::wait_until(Duration::from_secs(10), "frames after the trigger", || {
        common::file_len(&out) as usize >= (from + 3) * frame
    });
    fp.command("stop");
    fp.wait_success();
    let all = std::fs::read(&out).unwrap();
    let rgb = |f: usize| -> Vec<u8> {
        all[f * frame..(f + 1) * frame]
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect()
    };
    assert!(
        rgb(from) == ffmpeg_frame(d, "blue.mkv", 0),
        "frame {from}, where the trigger's reply says blue starts, is not blue's first frame"
    );
    assert!(rgb(from + 1) == ffmpeg_frame(d, "blue.mkv", 1));
    assert!(
        px(&rgb(from - 1), W, 0, 0) != px(&rgb(from), W, 0, 0),
        "blue already played"
    );
}
