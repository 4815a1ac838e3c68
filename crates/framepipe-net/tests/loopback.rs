//! tcpsink -> tcpsrc over real loopback sockets: every wire format, striping, back-pressure,
//! faults. Each test drives the elements with a small loop (fill -> consume), as the runtime does.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use framepipe_core::{FrameCtx, FramePool, Rational, Sink, Source, VideoInfo};
use framepipe_net::wire::{self, FrameHeader, StreamHeader, WireReader};
use framepipe_net::{SinkConfig, SrcConfig, TcpSink, TcpSrc, WireFormat};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn sink_cfg(hosts: &[String], format: WireFormat) -> SinkConfig {
    SinkConfig {
        hosts: hosts.to_vec(),
        listen: None,
        format,
        nodelay: true,
        raw: false,
        reconnect: false,
        checksum: true,
        max_frame_bytes: wire::DEFAULT_MAX_FRAME_BYTES,
        timeout_s: 10,
    }
}

fn src_cfg(listen: &[String]) -> SrcConfig {
    SrcConfig {
        listen: listen.to_vec(),
        hosts: vec![],
        raw: false,
        format: WireFormat::Rgba,
        width: 0,
        height: 0,
        rate: Rational::new(30, 1),
        max_frame_bytes: wire::DEFAULT_MAX_FRAME_BYTES,
        timeout_s: 10,
        header_timeout_s: framepipe_net::src::DEFAULT_HEADER_TIMEOUT_S,
    }
}

/// Deterministic, different for every frame and pixel.
fn paint(seq: u64, data: &mut [u8]) {
    let mut x = (seq as u32).wrapping_mul(0x9e37_79b9) | 1;
    for b in data.iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
}

fn expected_after_wire(format: WireFormat, seq: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    paint(seq, &mut v);
    for p in v.chunks_exact_mut(4) {
        match format {
            WireFormat::Rgba => {}
            WireFormat::Rgb24 => p[3] = 255,
            WireFormat::Rgb565 => {
                p[0] = (p[0] & 0xf8) | (p[0] >> 5);
                p[1] = (p[1] & 0xfc) | (p[1] >> 6);
                p[2] = (p[2] & 0xf8) | (p[2] >> 5);
                p[3] = 255;
            }
        }
    }
    v
}

/// Sends `frames` frames through a sink built from `cfg`, as the runtime would.
fn run_sink(mut sink: TcpSink, info: VideoInfo, frames: u64) -> framepipe_core::Result<TcpSink> {
    let pool = FramePool::new(info.width, info.height, 3);
    sink.start(info)?;
    for seq in 0..frames {
        let mut f = pool.acquire().expect("pool frame");
        paint(seq, f.data_mut());
        let ctx = FrameCtx::new(seq, info.rate.frame_time_ns(seq));
        sink.consume(&ctx, &f.freeze())?;
    }
    sink.finish()?;
    Ok(sink)
}

/// Receives until the end of the stream, checking every frame; returns the frame count.
fn drain_src(src: &mut TcpSrc, format: WireFormat) -> u64 {
    let info = src.info();
    let pool = FramePool::new(info.width, info.height, 2);
    let mut seq = 0;
    loop {
        let mut f = pool.acquire().unwrap();
        let ctx = FrameCtx::new(seq, 0);
        if !src.fill(&ctx, &mut f).expect("fill") {
            return seq;
        }
        let want = expected_after_wire(format, seq, f.data().len());
        assert!(
            f.data() == &want[..],
            "frame {seq} differs after the wire ({format:?})"
        );
        seq += 1;
    }
}

fn round_trip(format: WireFormat, links: usize, width: u32, height: u32) {
    let ports: Vec<String> = (0..links)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let listen = ports.clone();
    let rx = std::thread::spawn(move || {
        let mut src = TcpSrc::open(&src_cfg(&listen)).expect("tcpsrc open");
        assert_eq!(src.links(), links);
        assert_eq!(src.wire_format(), format);
        let n = drain_src(&mut src, format);
        (src.info(), n)
    });
    let info = VideoInfo {
        width,
        height,
        rate: Rational::new(30000, 1001),
    };
    let sink = TcpSink::new(sink_cfg(&ports, format)).unwrap();
    let sink = run_sink(sink, info, 12).expect("sink");
    assert_eq!(sink.frames(), 12);
    let (got_info, n) = rx.join().unwrap();
    assert_eq!(got_info, info);
    assert_eq!(n, 12);
}

#[test]
fn rgba_round_trip_is_exact() {
    round_trip(WireFormat::Rgba, 1, 161, 37);
}

#[test]
fn rgb24_round_trip_restores_opaque_alpha() {
    round_trip(WireFormat::Rgb24, 1, 161, 37);
}

#[test]
fn rgb565_round_trip_keeps_the_high_bits() {
    round_trip(WireFormat::Rgb565, 1, 64, 16);
}

#[test]
fn three_links_stripe_and_reassemble_in_order() {
    round_trip(WireFormat::Rgb24, 3, 97, 31);
    round_trip(WireFormat::Rgba, 2, 64, 3);
}

#[test]
fn a_stopped_receiver_stalls_the_sender_and_nothing_is_lost() {
    // 256 KiB frames; 200 of them are far more than loopback socket buffers hold.
    let info = VideoInfo {
        width: 256,
        height: 256,
        rate: Rational::new(30, 1),
    };
    let port = free_port();
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let sent2 = Arc::clone(&sent);
    let tx = std::thread::spawn(move || {
        let mut sink =
            TcpSink::new(sink_cfg(&[format!("127.0.0.1:{port}")], WireFormat::Rgba)).unwrap();
        let pool = FramePool::new(info.width, info.height, 2);
        sink.start(info).unwrap();
        for seq in 0..200 {
            let mut f = pool.acquire().unwrap();
            paint(seq, f.data_mut());
            sink.consume(&FrameCtx::new(seq, 0), &f.freeze()).unwrap();
            sent2.store(seq + 1, Ordering::SeqCst);
        }
        sink.finish().unwrap();
    });
    let (conn, _) = listener.accept().unwrap();
    // Do not read for a while: the sender must stall once the socket buffers are full.
    std::thread::sleep(Duration::from_millis(600));
    let stalled_at = sent.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(sent.load(Ordering::SeqCst), stalled_at, "sender kept going");
    assert!(
        stalled_at < 200,
        "sender never blocked ({stalled_at} frames sent)"
    );
    let mut r = WireReader::open(conn, "sender", wire::DEFAULT_MAX_FRAME_BYTES).unwrap();
    let mut buf = vec![0u8; r.header().stripe_bytes()];
    let mut want = vec![0u8; buf.len()];
    let mut n = 0;
    while let Some(fh) = r.read_frame(&mut buf).unwrap() {
        assert_eq!(fh.seq, n);
        paint(n, &mut want);
        assert!(buf == want, "frame {n} corrupted");
        n += 1;
    }
    assert_eq!(n, 200, "every frame arrives once the receiver resumes");
    tx.join().unwrap();
}

#[test]
fn a_receiver_that_goes_away_is_named_with_the_frame_count() {
    let info = VideoInfo {
        width: 320,
        height: 240,
        rate: Rational::new(30, 1),
    };
    let port = free_port();
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let rx = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        let mut r = WireReader::open(conn, "s", wire::DEFAULT_MAX_FRAME_BYTES).unwrap();
        let mut buf = vec![0u8; r.header().stripe_bytes()];
        for _ in 0..5 {
            r.read_frame(&mut buf).unwrap().unwrap();
        }
        // Dropping the reader closes the connection with unread data: the sender gets a reset.
    });
    let mut cfg = sink_cfg(&[format!("127.0.0.1:{port}")], WireFormat::Rgb24);
    cfg.checksum = false;
    let err = run_sink(TcpSink::new(cfg).unwrap(), info, 100_000).unwrap_err();
    rx.join().unwrap();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "tcpsink: receiver 127.0.0.1:{port} closed the connection after "
        )),
        "{msg}"
    );
    let frames: u64 = msg.rsplit(' ').nth(1).unwrap().parse().unwrap();
    assert!((5..100_000).contains(&frames), "{msg}");
}

#[test]
fn reconnect_resumes_with_a_new_stream_header_at_the_frame_being_sent() {
    let info = VideoInfo {
        width: 64,
        height: 64,
        rate: Rational::new(25, 1),
    };
    let port = free_port();
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let rx = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        let mut r = WireReader::open(conn, "s", wire::DEFAULT_MAX_FRAME_BYTES).unwrap();
        let mut buf = vec![0u8; r.header().stripe_bytes()];
        for _ in 0..3 {
            r.read_frame(&mut buf).unwrap().unwrap();
        }
        let first_id = r.header().stream_id;
        drop(r);
        let (conn, _) = listener.accept().unwrap();
        let mut r = WireReader::open(conn, "s", wire::DEFAULT_MAX_FRAME_BYTES).unwrap();
        assert_eq!(
            r.header().stream_id,
            first_id,
            "same stream after reconnection"
        );
        let first = r.header().first_seq;
        assert!(
            first >= 3,
            "resumes after the frames already read, at {first}"
        );
        let mut want = vec![0u8; buf.len()];
        let mut last = None;
        while let Some(fh) = r.read_frame(&mut buf).unwrap() {
            paint(fh.seq, &mut want);
            assert!(buf == want, "frame {} intact", fh.seq);
            last = Some(fh.seq);
        }
        (first, last)
    });
    let mut cfg = sink_cfg(&[format!("127.0.0.1:{port}")], WireFormat::Rgba);
    cfg.reconnect = true;
    let pool = FramePool::new(info.width, info.height, 2);
    let mut sink = TcpSink::new(cfg).unwrap();
    sink.start(info).unwrap();
    for seq in 0..400 {
        let mut f = pool.acquire().unwrap();
        paint(seq, f.data_mut());
        sink.consume(&FrameCtx::new(seq, 0), &f.freeze())
            .expect("reconnect=true survives the receiver going away");
        // Give the receiver time to go away while frames are still being sent.
        if seq < 20 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    sink.finish().unwrap();
    let (first, last) = rx.join().unwrap();
    assert_eq!(
        last,
        Some(399),
        "the second connection carries the rest to the end"
    );
    assert!(first < 399);
}

fn send_bytes_then_close(bytes: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let _ = s.write_all(&bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        // Wait for the receiver to close before dropping the socket, so that nothing resets it.
        let mut sink = [0u8; 16];
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = s.read(&mut sink);
    });
    (addr, t)
}

fn connect_cfg(addr: &str) -> SrcConfig {
    SrcConfig {
        listen: vec![],
        hosts: vec![addr.to_string()],
        ..src_cfg(&[])
    }
}

fn one_stream(frames: u64, extra: &[u8]) -> (StreamHeader, Vec<u8>) {
    let h = StreamHeader {
        width: 40,
        height: 10,
        format: WireFormat::Rgba,
        checksum: true,
        rate: Rational::new(30, 1),
        link_index: 0,
        link_count: 1,
        stream_id: 1,
        first_seq: 0,
    };
    let mut bytes = h.encode().to_vec();
    let mut payload = vec![0u8; h.stripe_bytes()];
    for seq in 0..frames {
        paint(seq, &mut payload);
        let fh = FrameHeader {
            seq,
            pts_ns: 0,
            payload_len: payload.len() as u32,
            checksum: Some(crc32fast::hash(&payload)),
        };
        bytes.extend_from_slice(&fh.encode());
        bytes.extend_from_slice(&payload);
    }
    bytes.extend_from_slice(extra);
    (h, bytes)
}

#[test]
fn a_connection_cut_mid_frame_reports_whole_frames_and_emits_no_partial_frame() {
    let (h, mut bytes) = one_stream(4, &[]);
    bytes.truncate(bytes.len() - h.stripe_bytes() / 2);
    let (addr, t) = send_bytes_then_close(bytes);
    let mut src = TcpSrc::open(&connect_cfg(&addr)).unwrap();
    let pool = FramePool::new(40, 10, 1);
    let mut f = pool.acquire().unwrap();
    for seq in 0..3 {
        assert!(src.fill(&FrameCtx::new(seq, 0), &mut f).unwrap());
    }
    let err = src.fill(&FrameCtx::new(3, 0), &mut f).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("tcpsrc: connection from {addr} closed mid-frame after 3 whole frames")
    );
    assert_eq!(src.frames(), 3);
    drop(src);
    t.join().unwrap();
}

#[test]
fn garbage_bad_versions_and_absurd_sizes_are_refused_before_allocating() {
    let mut garbage = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    garbage.resize(80, b' ');
    let (addr, t) = send_bytes_then_close(garbage);
    let err = TcpSrc::open(&connect_cfg(&addr)).err().unwrap().to_string();
    assert!(err.contains("not a framepipe stream"), "{err}");
    t.join().unwrap();

    let (_, mut bytes) = one_stream(0, &[]);
    bytes[8] = 2;
    let (addr, t) = send_bytes_then_close(bytes);
    let err = TcpSrc::open(&connect_cfg(&addr)).err().unwrap().to_string();
    assert_eq!(err, "unsupported wire version 2 (this side speaks 1)");
    t.join().unwrap();

    // A header announcing 32768x32768 RGBA (4 GiB per frame) against a 64 MiB limit.
    let h = StreamHeader {
        width: 32768,
        height: 32768,
        format: WireFormat::Rgba,
        checksum: false,
        rate: Rational::new(30, 1),
        link_index: 0,
        link_count: 1,
        stream_id: 9,
        first_seq: 0,
    };
    let (addr, t) = send_bytes_then_close(h.encode().to_vec());
    let mut cfg = connect_cfg(&addr);
    cfg.max_frame_bytes = 64 << 20;
    let err = TcpSrc::open(&cfg).err().unwrap().to_string();
    assert_eq!(
        err,
        "a 32768x32768 rgba frame is 4294967296 bytes, over the limit of 67108864 bytes (max-frame-bytes)"
    );
    t.join().unwrap();
}

#[test]
fn the_wire_decoder_survives_random_and_mutated_input() {
    // A small limit: any header the decoder accepts describes at most 1 MiB, which bounds the
    // payload buffer this test allocates from it (tcpsrc does the same).
    const LIMIT: u64 = 1 << 20;
    let (_, valid) = one_stream(3, &[]);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let start = Instant::now();
    let mut accepted = 0;
    for i in 0..4000 {
        let mut input = if i % 4 == 0 {
            (0..(next() % 300) as usize)
                .map(|_| next() as u8)
                .collect::<Vec<u8>>()
        } else {
            let mut v = valid.clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() % v.len() as u64) as usize;
                v[at] ^= 1 << (next() % 8);
            }
            v
        };
        if i % 7 == 0 {
            let cut = (next() % input.len().max(1) as u64) as usize;
            input.truncate(cut);
        }
        let Ok(mut r) = WireReader::open(&input[..], "fuzz", LIMIT) else {
            continue;
        };
        accepted += 1;
        assert!(r.header().frame_bytes() <= LIMIT);
        let mut buf = vec![0u8; r.header().stripe_bytes()];
        while let Ok(Some(_)) = r.read_frame(&mut buf) {}
    }
    assert!(
        accepted > 0,
        "some mutations (in payload bytes) keep the header valid"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn raw_protocol_sends_bare_frames() {
    let info = VideoInfo {
        width: 16,
        height: 4,
        rate: Rational::new(30, 1),
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let rx = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        all
    });
    let mut cfg = sink_cfg(&[addr], WireFormat::Rgb24);
    cfg.raw = true;
    run_sink(TcpSink::new(cfg).unwrap(), info, 3).unwrap();
    let all = rx.join().unwrap();
    assert_eq!(all.len(), 3 * 16 * 4 * 3, "no headers, 3 bytes per pixel");
    let mut frame = vec![0u8; 16 * 4 * 4];
    paint(2, &mut frame);
    let rgb: Vec<u8> = frame
        .chunks_exact(4)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    assert_eq!(&all[2 * 192..], &rgb[..]);
}

#[test]
fn tcpsink_refuses_frames_over_its_limit_and_bad_link_setups() {
    let mut cfg = sink_cfg(&["127.0.0.1:9".into()], WireFormat::Rgba);
    cfg.max_frame_bytes = 1000;
    let mut sink = TcpSink::new(cfg).unwrap();
    let err = sink
        .start(VideoInfo {
            width: 100,
            height: 100,
            rate: Rational::new(30, 1),
        })
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tcpsink: a 100x100 rgba frame is 40000 bytes, over the limit of 1000 bytes (max-frame-bytes)"
    );
    let mut cfg = sink_cfg(&["a:1".into(), "b:2".into()], WireFormat::Rgba);
    cfg.raw = true;
    assert!(TcpSink::new(cfg).is_err());
}
