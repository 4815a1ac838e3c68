//! `protocol=raw` against the real tools: ffmpeg receives from tcpsink, tcpsrc receives from
//! ffmpeg (`tcp://...?listen`) and from GStreamer's `tcpserversink`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use framepipe_core::{FrameCtx, FramePool, Rational, Sink, Source, VideoInfo};
use framepipe_net::{wire, SinkConfig, SrcConfig, TcpSink, TcpSrc, WireFormat};

const W: u32 = 64;
const H: u32 = 48;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `name` in a fresh temporary directory, which goes (with the file) when the returned guard
/// drops, also when the test fails.
fn tmp(name: &str) -> (framepipe_testkit::TestDir, PathBuf) {
    let dir = framepipe_testkit::tmpdir("fp-net-peers");
    let file = dir.join(name);
    (dir, file)
}

/// Waits for `child` up to `secs`, killing it (our own child, by handle) when it overruns.
fn wait_or_kill(child: &mut Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn raw_src(host: String, format: WireFormat) -> TcpSrc {
    TcpSrc::open(&SrcConfig {
        listen: vec![],
        hosts: vec![host],
        raw: true,
        format,
        width: W,
        height: H,
        rate: Rational::new(30, 1),
        max_frame_bytes: wire::DEFAULT_MAX_FRAME_BYTES,
        timeout_s: 20,
        header_timeout_s: framepipe_net::src::DEFAULT_HEADER_TIMEOUT_S,
    })
    .expect("tcpsrc connects to the peer")
}

fn to_rgba(rgb: &[u8]) -> Vec<u8> {
    rgb.chunks_exact(3)
        .flat_map(|p| [p[0], p[1], p[2], 255])
        .collect()
}

#[test]
fn ffmpeg_receives_raw_rgb24_from_tcpsink() {
    let port = free_port();
    let (_dir, out) = tmp("from-tcpsink.rgb");
    let mut ff = Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
        ])
        .args(["-s", &format!("{W}x{H}"), "-i"])
        .arg(format!("tcp://127.0.0.1:{port}?listen=1"))
        .args(["-f", "rawvideo", "-pix_fmt", "rgb24", "-y"])
        .arg(&out)
        .stdin(Stdio::null())
        .spawn()
        .expect("ffmpeg runs");
    let mut sink = TcpSink::new(SinkConfig {
        hosts: vec![format!("127.0.0.1:{port}")],
        listen: None,
        format: WireFormat::Rgb24,
        nodelay: true,
        raw: true,
        reconnect: false,
        checksum: false,
        max_frame_bytes: wire::DEFAULT_MAX_FRAME_BYTES,
        timeout_s: 20,
    })
    .unwrap();
    let info = VideoInfo {
        width: W,
        height: H,
        rate: Rational::new(30, 1),
    };
    let pool = FramePool::new(W, H, 2);
    sink.start(info).unwrap();
    let mut expected = Vec::new();
    for seq in 0..10u64 {
        let mut f = pool.acquire().unwrap();
        for (i, p) in f.data_mut().chunks_exact_mut(4).enumerate() {
            p.copy_from_slice(&[(i as u64 + seq * 3) as u8, (i / 7) as u8, seq as u8, 17]);
            expected.extend_from_slice(&p[..3]);
        }
        sink.consume(&FrameCtx::new(seq, 0), &f.freeze()).unwrap();
    }
    sink.finish().unwrap();
    drop(sink);
    let st = wait_or_kill(&mut ff, 30, "ffmpeg");
    assert!(st.success(), "ffmpeg failed: {st}");
    let got = std::fs::read(&out).unwrap();
    assert_eq!(got.len(), expected.len(), "ffmpeg got 10 whole frames");
    assert!(got == expected, "ffmpeg received the same pixels");
}

#[test]
fn tcpsrc_receives_raw_rgb24_from_ffmpeg_listening() {
    let port = free_port();
    let lavfi = format!("testsrc2=size={W}x{H}:rate=30");
    let (_dir, reference) = tmp("ffmpeg-ref.rgb");
    let st = Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "lavfi",
            "-i",
            &lavfi,
        ])
        .args([
            "-frames:v",
            "8",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-y",
        ])
        .arg(&reference)
        .status()
        .unwrap();
    assert!(st.success());
    let reference = std::fs::read(&reference).unwrap();
    let mut ff = Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-loglevel",
            "error",
            "-f",
            "lavfi",
            "-i",
            &lavfi,
        ])
        .args(["-frames:v", "8", "-f", "rawvideo", "-pix_fmt", "rgb24"])
        .arg(format!("tcp://127.0.0.1:{port}?listen=1"))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut src = raw_src(format!("127.0.0.1:{port}"), WireFormat::Rgb24);
    let pool = FramePool::new(W, H, 1);
    let frame_rgb = (W * H * 3) as usize;
    let mut n = 0u64;
    loop {
        let mut f = pool.acquire().unwrap();
        if !src.fill(&FrameCtx::new(n, 0), &mut f).unwrap() {
            break;
        }
        let want = to_rgba(&reference[n as usize * frame_rgb..][..frame_rgb]);
        assert!(
            f.data() == &want[..],
            "frame {n} matches ffmpeg's own output"
        );
        n += 1;
    }
    assert_eq!(n, 8);
    assert!(wait_or_kill(&mut ff, 20, "ffmpeg").success());
}

#[test]
fn tcpsrc_receives_raw_frames_from_gstreamer_tcpserversink() {
    let caps = format!("video/x-raw,format=RGB,width={W},height={H},framerate=30/1");
    let (_dir, reference) = tmp("gst-ref.rgb");
    let st = Command::new("gst-launch-1.0")
        .args([
            "-q",
            "videotestsrc",
            "pattern=colors",
            "num-buffers=1",
            "!",
            &caps,
            "!",
            "filesink",
        ])
        .arg(format!("location={}", reference.display()))
        .status()
        .unwrap();
    assert!(st.success());
    let want = to_rgba(&std::fs::read(&reference).unwrap());
    assert_eq!(want.len(), (W * H * 4) as usize);
    let port = free_port();
    // Live, 90 buffers at 30 fps: runs 3 s, long enough for us to connect.
    let mut gst = Command::new("gst-launch-1.0")
        .args([
            "-q",
            "videotestsrc",
            "pattern=colors",
            "is-live=true",
            "num-buffers=90",
            "!",
            &caps,
            "!",
        ])
        .args(["tcpserversink", "host=127.0.0.1", &format!("port={port}")])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut src = raw_src(format!("127.0.0.1:{port}"), WireFormat::Rgb24);
    let pool = FramePool::new(W, H, 1);
    for seq in 0..10 {
        let mut f = pool.acquire().unwrap();
        assert!(
            src.fill(&FrameCtx::new(seq, 0), &mut f).unwrap(),
            "frame {seq}"
        );
        // The colour-bars pattern is the same in every frame (SMPTE bars have moving snow).
        assert!(
            f.data() == &want[..],
            "frame {seq} matches GStreamer's own output"
        );
    }
    drop(src);
    wait_or_kill(&mut gst, 20, "gst-launch-1.0");
}
