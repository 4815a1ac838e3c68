//! Peers that are not what a listener waits for, silent peers, refused connections and repeated
//! frames, with real sockets and the real elements (issue 7, requirement 6).
//!
//! The memory budget is process-wide: every test here sets the same small one (256 MiB, so one
//! frame may take 32 MiB) before building anything.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use framepipe_core::{FrameCtx, FramePool, Limits, Rational, Sink, Source, VideoInfo};
use framepipe_net::{wire, SinkConfig, SrcConfig, StreamHeader, TcpSink, TcpSrc, WireFormat};

const W: u32 = 64;
const H: u32 = 48;

fn budget() {
    Limits {
        max_memory: 256 << 20,
    }
    .set();
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn src_cfg(listen: &str) -> SrcConfig {
    SrcConfig {
        listen: vec![listen.to_string()],
        hosts: vec![],
        raw: false,
        format: WireFormat::Rgba,
        width: 0,
        height: 0,
        rate: Rational::new(30, 1),
        max_frame_bytes: wire::DEFAULT_MAX_FRAME_BYTES,
        timeout_s: 20,
        header_timeout_s: 5,
    }
}

fn sink_cfg(host: &str) -> SinkConfig {
    SinkConfig {
        hosts: vec![host.to_string()],
        listen: None,
        format: WireFormat::Rgb24,
        nodelay: true,
        raw: false,
        reconnect: false,
        checksum: true,
        max_frame_bytes: wire::DEFAULT_MAX_FRAME_BYTES,
        timeout_s: 20,
    }
}

fn info() -> VideoInfo {
    VideoInfo {
        width: W,
        height: H,
        rate: Rational::new(30, 1),
    }
}

/// Connects to `addr` once it listens (the element under test binds in another thread).
fn connect_when_listening(addr: &str) -> TcpStream {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return s,
            Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("{addr} never listened: {e}"),
        }
    }
}

/// Reads until the other side closes; returns how long that took (panics after `secs`).
fn closed_within(s: &mut TcpStream, secs: u64) -> Duration {
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(secs))).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return start.elapsed(),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return start.elapsed(),
            Err(e) => panic!("not closed within {secs} s: {e}"),
        }
    }
}

/// Sends `n` frames (frame k filled with byte k) through `sink`, with the `seqs` given.
fn send(sink: &mut TcpSink, seqs: &[u64]) {
    let pool = FramePool::new(W, H, 2);
    sink.start(info()).unwrap();
    for &seq in seqs {
        let mut f = pool.acquire().unwrap();
        f.data_mut().fill(seq as u8);
        let f = f.freeze();
        sink.consume(&FrameCtx::new(seq, 0), &f).unwrap();
    }
    sink.finish().unwrap();
}

/// Receives every frame from `src`: the first byte of each.
fn receive(src: &mut TcpSrc) -> Result<Vec<u8>, String> {
    let pool = FramePool::new(src.info().width, src.info().height, 1);
    let mut f = pool.acquire().unwrap();
    let mut got = Vec::new();
    for seq in 0.. {
        match src.fill(&FrameCtx::new(seq, 0), &mut f) {
            Ok(true) => got.push(f.data()[0]),
            Ok(false) => return Ok(got),
            Err(e) => return Err(e.to_string()),
        }
    }
    unreachable!()
}

#[test]
fn a_listening_tcpsrc_survives_strays_and_receives_the_real_sender() {
    budget();
    let addr = format!("127.0.0.1:{}", free_port());
    let cfg = src_cfg(&addr);
    let rx = std::thread::spawn(move || {
        let mut src = TcpSrc::open(&cfg).map_err(|e| e.to_string())?;
        let info = src.info();
        receive(&mut src).map(|frames| (info, frames))
    });

    // A health check: connect, close.
    drop(connect_when_listening(&addr));
    // A silent connection (a slowloris), kept open while the real sender comes.
    let _silent = TcpStream::connect(&addr).unwrap();
    // An HTTP client: refused as soon as its first bytes are read, not after a timeout.
    let mut http = TcpStream::connect(&addr).unwrap();
    http.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let t = closed_within(&mut http, 4);
    assert!(t < Duration::from_secs(2), "the HTTP client was held {t:?}");
    // A valid header for a 4096x4096 frame: 32 MiB on the wire (rgb565) is under max-frame-bytes,
    // but the 64 MiB RGBA frame the pipeline would allocate is over the 32 MiB the budget
    // allows one frame. Refused from the header alone.
    let big = StreamHeader {
        width: 4096,
        height: 4096,
        format: WireFormat::Rgb565,
        checksum: false,
        rate: Rational::new(30, 1),
        link_index: 0,
        link_count: 1,
        stream_id: 7,
        first_seq: 0,
    };
    let mut greedy = TcpStream::connect(&addr).unwrap();
    greedy.write_all(&big.encode()).unwrap();
    closed_within(&mut greedy, 4);

    // The real sender, after all of them.
    let mut sink = TcpSink::new(sink_cfg(&addr)).unwrap();
    send(&mut sink, &[0, 1, 2, 3, 4]);
    let (info, frames) = rx.join().unwrap().expect("the real sender is received");
    assert_eq!((info.width, info.height), (W, H));
    assert_eq!(frames, vec![0, 1, 2, 3, 4]);
}

#[test]
fn a_silent_connection_is_dropped_after_the_header_timeout() {
    budget();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut cfg = src_cfg(&addr);
    cfg.header_timeout_s = 1;
    let rx = std::thread::spawn(move || {
        let mut src = TcpSrc::open(&cfg).map_err(|e| e.to_string())?;
        receive(&mut src)
    });
    let mut silent = connect_when_listening(&addr);
    let held = closed_within(&mut silent, 5);
    assert!(
        held >= Duration::from_millis(900) && held < Duration::from_secs(3),
        "a silent connection was held {held:?} with header-timeout=1"
    );
    // Half a header, then silence: dropped the same way.
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(&StreamHeader::encode(&header())[..20])
        .unwrap();
    let held = closed_within(&mut slow, 5);
    assert!(held >= Duration::from_millis(900), "{held:?}");

    let mut sink = TcpSink::new(sink_cfg(&addr)).unwrap();
    send(&mut sink, &[0, 1, 2]);
    assert_eq!(rx.join().unwrap().unwrap(), vec![0, 1, 2]);
}

fn header() -> StreamHeader {
    StreamHeader {
        width: W,
        height: H,
        format: WireFormat::Rgba,
        checksum: false,
        rate: Rational::new(30, 1),
        link_index: 0,
        link_count: 1,
        stream_id: 1,
        first_seq: 0,
    }
}

#[test]
fn tcpsrc_names_a_silent_sender_as_a_timeout() {
    budget();
    // A "sender" that accepts tcpsrc's connection and never says anything.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        std::thread::sleep(Duration::from_secs(3));
        drop(s);
    });
    let mut cfg = src_cfg(&addr);
    cfg.listen.clear();
    cfg.hosts = vec![addr.clone()];
    cfg.header_timeout_s = 1;
    let err = TcpSrc::open(&cfg).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "no data from {addr} for 1 s (header-timeout=1); a framepipe sender sends its stream header as soon as it connects"
        )
    );
    t.join().unwrap();
}

#[test]
fn tcpsink_names_a_refused_connection_when_its_timeout_ends() {
    budget();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut cfg = sink_cfg(&addr);
    cfg.timeout_s = 1;
    let mut sink = TcpSink::new(cfg).unwrap();
    let start = Instant::now();
    let err = sink.start(info()).unwrap_err().to_string();
    let took = start.elapsed();
    assert_eq!(
        err,
        format!(
            "tcpsink: connection refused by {addr} for 1 s (timeout=1): nothing listens there; \
             start the receiver first, or raise timeout (0 = wait for ever)"
        )
    );
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[test]
fn a_listening_tcpsink_ignores_strays_and_serves_the_receiver() {
    budget();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut cfg = sink_cfg(&addr);
    cfg.hosts.clear();
    cfg.listen = Some(addr.clone());
    let tx = std::thread::spawn(move || {
        let mut sink = TcpSink::new(cfg).unwrap();
        send(&mut sink, &[0, 1, 2, 3]);
        sink.frames()
    });
    // A health check and an HTTP client: neither gets the stream.
    drop(connect_when_listening(&addr));
    let mut http = TcpStream::connect(&addr).unwrap();
    http.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    http.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = http.read_to_end(&mut answer);
    assert!(
        answer.is_empty(),
        "the HTTP client was sent {} bytes of the stream",
        answer.len()
    );
    let mut src_cfg = src_cfg("");
    src_cfg.listen.clear();
    src_cfg.hosts = vec![addr];
    let mut src = TcpSrc::open(&src_cfg).unwrap();
    assert_eq!(receive(&mut src).unwrap(), vec![0, 1, 2, 3]);
    assert_eq!(tx.join().unwrap(), 4);
}

#[test]
fn a_repeated_frame_goes_out_as_the_next_frame_of_a_continuous_stream() {
    budget();
    // What the output thread does under --overload live when no new frame is ready: it gives
    // the sink the previous frame again, with the same ctx.seq.
    let addr = format!("127.0.0.1:{}", free_port());
    let cfg = src_cfg(&addr);
    let rx = std::thread::spawn(move || {
        let mut src = TcpSrc::open(&cfg).map_err(|e| e.to_string())?;
        receive(&mut src)
    });
    let mut sink = TcpSink::new(sink_cfg(&addr)).unwrap();
    send(&mut sink, &[0, 1, 1, 1, 2, 3, 3, 4]);
    assert_eq!(sink.frames(), 8);
    assert_eq!(rx.join().unwrap().unwrap(), vec![0, 1, 1, 1, 2, 3, 3, 4]);
}

#[test]
fn sizes_over_the_memory_budget_are_refused_before_anything_is_allocated() {
    budget();
    // Raw: width/height properties for a 64 MiB RGBA frame (48 MiB on the wire, under
    // max-frame-bytes), against the 32 MiB one frame may take. Refused before connecting.
    let mut cfg = src_cfg("");
    cfg.listen.clear();
    cfg.hosts = vec![format!("127.0.0.1:{}", free_port())];
    cfg.raw = true;
    cfg.format = WireFormat::Rgb24;
    (cfg.width, cfg.height) = (4096, 4096);
    let err = TcpSrc::open(&cfg).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "width/height: a frame of 4096x4096 would take 64.0 MiB, over the limit of 32.0 MiB"
        ),
        "{err}"
    );

    // Connecting to a sender whose header claims the same.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let h = StreamHeader {
            width: 4096,
            height: 4096,
            format: WireFormat::Rgb24,
            ..header()
        };
        s.write_all(&h.encode()).unwrap();
        let _ = s.read(&mut [0u8; 1]);
    });
    let mut cfg = src_cfg("");
    cfg.listen.clear();
    cfg.hosts = vec![addr.clone()];
    let err = TcpSrc::open(&cfg).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "stream header from {addr}: a frame of 4096x4096 would take 64.0 MiB"
        )),
        "{err}"
    );
    t.join().unwrap();
}
