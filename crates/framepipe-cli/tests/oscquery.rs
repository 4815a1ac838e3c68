//! Issue 10, OSCQuery and atomic bundles (requirements 3 and 6) through the real binary:
//! `--osc` with its OSCQuery server, asked by a real HTTP client (ureq) and a real WebSocket
//! client (tungstenite); OSC packets made by rosc on a real UDP socket; the mDNS advert seen by
//! a real mDNS browser (mdns-sd) where this machine's multicast works.

mod common;

use std::io::{BufRead, BufReader};
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{free_udp_port, tmpdir, wait_until};
use framepipe_core::{PropKind, Registry};
use rosc::{encoder, OscBundle, OscMessage, OscPacket, OscTime, OscType};
use serde_json::Value;
use tungstenite::Message;

/// A running framepipe whose stderr is collected line by line; killed when dropped (a failed
/// test leaves no process behind).
struct Fp {
    child: Option<Child>,
    err: Arc<Mutex<String>>,
}

impl Fp {
    fn start(args: &[&str]) -> Fp {
        let mut child = common::spawn(args);
        let err = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        {
            let err = Arc::clone(&err);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let mut e = err.lock().unwrap();
                    e.push_str(&line);
                    e.push('\n');
                }
            });
        }
        Fp {
            child: Some(child),
            err,
        }
    }

    /// Writes a command line on its stdin.
    fn command(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.child.as_mut().unwrap().stdin.as_mut().unwrap();
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    /// The OSCQuery base URL (`http://127.0.0.1:PORT`) from the start-up line.
    fn oscquery(&self) -> String {
        let mut url = None;
        wait_until(Duration::from_secs(20), "the OSCQuery line", || {
            url = self
                .stderr()
                .lines()
                .find_map(|l| l.strip_prefix("framepipe: OSCQuery on "))
                .map(str::to_string);
            url.is_some()
        });
        url.unwrap()
    }

    /// Waits for the exit (at most 20 s) and returns the whole stderr.
    fn finish(mut self) -> String {
        let mut child = self.child.take().unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if start.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("framepipe still running after 20 s: {}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // The reader thread sees the end of the pipe.
        std::thread::sleep(Duration::from_millis(100));
        let err = self.stderr();
        assert!(status.success(), "{err}");
        err
    }
}

impl Drop for Fp {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// GET `base` + `path`: (status, body).
fn get(base: &str, path: &str) -> (u16, String) {
    let mut resp = ureq::get(format!("{base}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = resp.status().as_u16();
    let body = resp.body_mut().read_to_string().unwrap_or_default();
    (status, body)
}

fn get_json(base: &str, path: &str) -> Value {
    let (status, body) = get(base, path);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

fn osc(addr: &str, args: Vec<OscType>) -> OscMessage {
    OscMessage {
        addr: addr.into(),
        args,
    }
}

fn encode(p: OscPacket) -> Vec<u8> {
    encoder::encode(&p).unwrap()
}

fn bundle(msgs: Vec<OscMessage>) -> Vec<u8> {
    encode(OscPacket::Bundle(OscBundle {
        timetag: OscTime::from((0, 1)),
        content: msgs.into_iter().map(OscPacket::Message).collect(),
    }))
}

/// A WebSocket client on the OSCQuery port, reads time out after 5 s.
fn ws_connect(base: &str) -> tungstenite::WebSocket<TcpStream> {
    let host = base.strip_prefix("http://").unwrap();
    let stream = TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (ws, _) = tungstenite::client(format!("ws://{host}/"), stream).unwrap();
    ws
}

fn listen(ws: &mut tungstenite::WebSocket<TcpStream>, cmd: &str, path: &str) {
    let text = serde_json::json!({ "COMMAND": cmd, "DATA": path }).to_string();
    ws.send(Message::Text(text.into())).unwrap();
}

/// The next OSC message streamed to `ws` (skipping text notices).
fn next_osc(ws: &mut tungstenite::WebSocket<TcpStream>) -> OscMessage {
    loop {
        match ws.read().expect("a streamed value within 5 s") {
            Message::Binary(b) => match rosc::decoder::decode_udp(&b).unwrap().1 {
                OscPacket::Message(m) => return m,
                OscPacket::Bundle(b) => panic!("a bundle: {b:?}"),
            },
            Message::Text(_) | Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn float(m: &OscMessage) -> f32 {
    match m.args[..] {
        [OscType::Float(f)] => f,
        _ => panic!("not one float: {m:?}"),
    }
}

/// The counts of the end-of-run OSCQuery summary: (http, bad http, ws clients, packets, bad ws).
fn oscquery_counts(stderr: &str) -> (u64, u64, u64, u64, u64) {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("framepipe: oscquery: "))
        .unwrap_or_else(|| panic!("no oscquery summary in: {stderr}"));
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    // "N http (M bad), K ws clients (J now), P packets sent, B bad ws messages"
    (nums[0], nums[1], nums[2], nums[4], nums[5])
}

#[test]
fn oscquery_tree_values_listen_and_bad_input() {
    let port = free_udp_port();
    let fp = Fp::start(&[
        "run",
        "--fps",
        "60",
        "--control",
        "none",
        "--no-mdns",
        "--osc",
        &port.to_string(),
        "testsrc width=64 height=32 pattern=solid color=0,0,0 ! \
         stamp name=st what=value value=~sine:2hz:0..100 decimals=0 ! invert name=inv ! nullsink",
    ]);
    let base = fp.oscquery();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    // The tree: every node, the properties of the live ones with the registry's ranges.
    let root = get_json(&base, "/");
    assert_eq!(root["FULL_PATH"], "/");
    let fp_nodes = &root["CONTENTS"]["framepipe"]["CONTENTS"];
    for node in ["testsrc", "st", "inv", "nullsink"] {
        assert!(fp_nodes.get(node).is_some(), "{node} missing: {fp_nodes}");
    }
    let mut registry = Registry::new();
    framepipe_effects::register(&mut registry);
    let stamp = &registry.find("stamp").unwrap().desc;
    let st = &fp_nodes["st"]["CONTENTS"];
    for spec in &stamp.props {
        let p = &st[&spec.name];
        assert_eq!(p["FULL_PATH"], format!("/framepipe/st/{}", spec.name));
        // Read-only (1) for a property read when the node starts (issue #22: true replies).
        assert_eq!(p["ACCESS"], if spec.live { 3 } else { 1 }, "{}", spec.name);
        match &spec.kind {
            PropKind::Float { min, max } => {
                assert_eq!(p["TYPE"], "f");
                assert_eq!(p["RANGE"][0]["MIN"].as_f64(), Some(*min));
                assert_eq!(p["RANGE"][0]["MAX"].as_f64(), Some(*max));
            }
            PropKind::Int { min, max } => {
                assert_eq!(p["TYPE"], "i");
                assert_eq!(p["RANGE"][0]["MIN"].as_i64(), Some(*min));
                assert_eq!(p["RANGE"][0]["MAX"].as_i64(), Some(*max));
            }
            PropKind::Enum(words) => {
                assert_eq!(p["TYPE"], "s");
                assert_eq!(p["RANGE"][0]["VALS"], serde_json::json!(words));
            }
            PropKind::Color => assert_eq!(p["TYPE"], "fff"),
            PropKind::Bool => assert_eq!(p["TYPE"], "T"),
            other => panic!("stamp has a {other:?} property"),
        }
    }
    assert_eq!(st["what"]["VALUE"], serde_json::json!(["value"]));
    assert_eq!(fp_nodes["inv"]["CONTENTS"]["bypass"]["TYPE"], "T");
    assert_eq!(fp_nodes["pause"]["TYPE"], "N");
    assert_eq!(fp_nodes["tempo"]["ACCESS"], 3);

    // HOST_INFO, single attributes, errors.
    let info = get_json(&base, "/framepipe/st?HOST_INFO");
    assert_eq!(info["OSC_PORT"].as_u64(), Some(u64::from(port)));
    assert_eq!(info["OSC_TRANSPORT"], "UDP");
    assert_eq!(info["EXTENSIONS"]["LISTEN"], true);
    assert_eq!(
        get_json(&base, "/framepipe/st/x?RANGE"),
        serde_json::json!({ "RANGE": [{ "MIN": -16384, "MAX": 16384 }] })
    );
    assert_eq!(get_json(&base, "/framepipe?TYPE"), serde_json::json!({}));
    assert_eq!(get(&base, "/framepipe/nope").0, 404);
    assert_eq!(get(&base, "/framepipe/st/nope?VALUE").0, 404);
    assert_eq!(get(&base, "/framepipe/st/x?BOGUS").0, 400);
    assert_eq!(get(&base, "/framepipe/stop?VALUE").0, 204);

    // VALUE follows the oscillated property.
    let mut seen = Vec::new();
    for _ in 0..20 {
        let v = get_json(&base, "/framepipe/st/value?VALUE");
        let x = v["VALUE"][0].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&x), "{x}");
        seen.push(x);
        std::thread::sleep(Duration::from_millis(40));
    }
    seen.sort_by(f64::total_cmp);
    seen.dedup();
    assert!(seen.len() >= 5, "VALUE did not move: {seen:?}");

    // LISTEN: the oscillated value streamed as OSC packets, moving.
    let mut ws = ws_connect(&base);
    listen(&mut ws, "LISTEN", "/framepipe/st/value");
    let mut streamed = Vec::new();
    for _ in 0..10 {
        let m = next_osc(&mut ws);
        assert_eq!(m.addr, "/framepipe/st/value");
        let x = float(&m);
        assert!((0.0..=100.0).contains(&x), "{x}");
        streamed.push(x);
    }
    streamed.dedup();
    assert!(streamed.len() >= 5, "streamed values: {streamed:?}");
    // IGNORE it, LISTEN to the bypass, and bypass over UDP: the change is streamed.
    listen(&mut ws, "IGNORE", "/framepipe/st/value");
    listen(&mut ws, "LISTEN", "/framepipe/inv/bypass");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.send_to(
        &encode(OscPacket::Message(osc(
            "/framepipe/inv/bypass",
            vec![OscType::Bool(true)],
        ))),
        ("127.0.0.1", port),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = next_osc(&mut ws);
        assert_ne!(m.addr, "/framepipe/st/value", "still streamed after IGNORE");
        assert_eq!(m.addr, "/framepipe/inv/bypass");
        if m.args == [OscType::Bool(true)] {
            break;
        }
        assert!(Instant::now() < deadline, "bypass never streamed as true");
    }
    assert_eq!(
        get_json(&base, "/framepipe/inv/bypass?VALUE"),
        serde_json::json!({ "VALUE": [true] })
    );

    // An OSC packet over the WebSocket is a command too.
    ws.send(Message::Binary(
        encode(OscPacket::Message(osc(
            "/framepipe/inv/bypass",
            vec![OscType::Bool(false)],
        )))
        .into(),
    ))
    .unwrap();
    loop {
        let m = next_osc(&mut ws);
        if m.args == [OscType::Bool(false)] {
            break;
        }
    }

    // Bad input: malformed JSON, unknown commands and paths (counted, the connection stays),
    // a flood of them, then a message over the limit (counted, that connection closes).
    let bad = [
        "{",
        "not json",
        r#"{"COMMAND":"SHOUT","DATA":"/x"}"#,
        r#"{"COMMAND":"LISTEN","DATA":"/framepipe/nope"}"#,
        r#"{"COMMAND":"LISTEN"}"#,
    ];
    for b in bad {
        ws.send(Message::Text(b.into())).unwrap();
    }
    for i in 0..2000 {
        ws.send(Message::Text(bad[i % bad.len()].into())).unwrap();
    }
    // Still answering on this connection: a LISTEN gets the current value.
    listen(&mut ws, "LISTEN", "/framepipe/st/x");
    loop {
        let m = next_osc(&mut ws);
        if m.addr == "/framepipe/st/x" {
            break;
        }
    }
    let huge = "x".repeat(200 * 1024);
    let _ = ws.send(Message::Text(huge.into()));
    let closed = (0..1000).any(|_| ws.read().is_err());
    assert!(closed, "a 200 KiB message did not close the connection");
    // A client that vanishes without a close, listening.
    let mut gone = ws_connect(&base);
    listen(&mut gone, "LISTEN", "/framepipe/st/value");
    drop(gone);
    // The server still answers.
    assert_eq!(get(&base, "/framepipe/st?ACCESS").0, 200);
    // 70 clients at once: 64 are taken (the vanished one may still count), the rest refused.
    let host = base.strip_prefix("http://").unwrap();
    let mut many = Vec::new();
    let mut refused = 0;
    for _ in 0..70 {
        let stream = TcpStream::connect(host).unwrap();
        match tungstenite::client(format!("ws://{host}/"), stream) {
            Ok((c, _)) => many.push(c),
            Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r)))
                if r.status() == 503 =>
            {
                refused += 1
            }
            Err(e) => panic!("client {}: {e}", many.len() + refused),
        }
    }
    assert!((6..=7).contains(&refused), "{refused} refused");
    let accepted = many.len() as u64;
    drop(many);
    assert_eq!(get(&base, "/framepipe/st?ACCESS").0, 200);

    sock.send_to(
        &encode(OscPacket::Message(osc("/framepipe/stop", vec![]))),
        ("127.0.0.1", port),
    )
    .unwrap();
    let err = fp.finish();
    let (http, http_bad, ws_clients, packets, ws_bad) = oscquery_counts(&err);
    assert!(http >= 30, "{err}");
    assert_eq!(http_bad, 3, "404, 404, 400: {err}");
    assert_eq!(ws_clients, 2 + accepted, "{err}");
    assert!(
        err.contains(&format!(", {refused} refused (too many clients)")),
        "{err}"
    );
    assert!(packets >= 12, "{err}");
    assert_eq!(ws_bad, 2005 + 1, "the bad messages and the huge one: {err}");
}

/// What the output frame shows, as in tests/osc.rs: `(inverted, leftmost column of the digit)`.
fn look(f: &[u8], w: usize, h: usize) -> (bool, Option<usize>) {
    let white = f.chunks(4).filter(|p| p[..3] == [255, 255, 255]).count();
    let inverted = white > w * h / 2;
    let ink = if inverted { 0 } else { 255 };
    let left = (0..w).find(|&x| (0..h).any(|y| f[(y * w + x) * 4] == ink));
    (inverted, left)
}

fn frames(path: &Path, w: usize, h: usize) -> Vec<(bool, Option<usize>)> {
    let b = std::fs::read(path).unwrap_or_default();
    b.chunks_exact(w * h * 4).map(|f| look(f, w, h)).collect()
}

/// A bundle of two commands on two nodes lands at one frame (one `batch` reply, never a frame
/// with only one of them), and a bundle with one refused command changes nothing.
#[test]
fn an_osc_bundle_lands_at_one_frame_or_not_at_all() {
    const W: usize = 64;
    const H: usize = 32;
    let dir = tmpdir("oscquery-bundle");
    let out = dir.join("out.rgba");
    let port = free_udp_port();
    let fp = Fp::start(&[
        "run",
        "--fps",
        "120",
        "--control",
        "none",
        "--no-mdns",
        "--osc",
        &port.to_string(),
        &format!(
            "testsrc width={W} height={H} frames=100000 pattern=solid color=0,0,0 ! \
             stamp name=st what=value value=8 decimals=0 x=0 y=0 scale=2 background=false ! \
             invert name=inv ! rawsink location={}",
            out.display()
        ),
    ]);
    let _ = fp.oscquery();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = ("127.0.0.1", port);
    // The last whole frame only (the file grows by ~1 MB/s).
    let last = || {
        use std::io::{Read, Seek, SeekFrom};
        let frame = (W * H * 4) as u64;
        let mut f = std::fs::File::open(&out).ok()?;
        let n = f.metadata().ok()?.len() / frame;
        let mut b = vec![0u8; frame as usize];
        f.seek(SeekFrom::Start((n.checked_sub(1)?) * frame)).ok()?;
        f.read_exact(&mut b).ok()?;
        Some(look(&b, W, H))
    };
    wait_until(Duration::from_secs(20), "first frames", || {
        last() == Some((true, Some(0)))
    });
    // Twenty bundles, each moving the digit and flipping the bypass together.
    let states = [(false, Some(20)), (true, Some(40))];
    for i in 0..20 {
        let (inverted, x) = states[i % 2];
        let b = bundle(vec![
            osc("/framepipe/inv/bypass", vec![OscType::Bool(!inverted)]),
            osc("/framepipe/st/x", vec![OscType::Int(x.unwrap() as i32)]),
        ]);
        sock.send_to(&b, to).unwrap();
        wait_until(Duration::from_secs(10), "the bundle's frame", || {
            last() == Some(states[i % 2])
        });
    }
    // One refused command refuses the whole bundle: the digit does not move.
    sock.send_to(
        &bundle(vec![
            osc("/framepipe/st/x", vec![OscType::Int(8)]),
            osc("/framepipe/st/nosuch", vec![OscType::Int(1)]),
        ]),
        to,
    )
    .unwrap();
    let mut err = String::new();
    wait_until(Duration::from_secs(10), "the refusal", || {
        err = fp.stderr();
        err.contains("refused 'batch set st.x 8; set st.nosuch 1'")
    });
    std::thread::sleep(Duration::from_millis(100));
    sock.send_to(
        &encode(OscPacket::Message(osc("/framepipe/stop", vec![]))),
        to,
    )
    .unwrap();
    let err = fp.finish();
    // Every bundle was one batch with one reply.
    let batches = err
        .lines()
        .filter(|l| l.contains("ok 'batch bypass inv "))
        .count();
    assert_eq!(batches, 20, "{err}");
    // No frame shows one change without the other; the refused bundle changed nothing.
    let seen = frames(&out, W, H);
    assert!(seen.len() > 20);
    for (i, s) in seen.iter().enumerate() {
        assert!(
            *s == (true, Some(0)) || states.contains(s),
            "frame {i} shows half a bundle: {s:?}"
        );
    }
    assert_eq!(seen.last(), Some(&states[1]));
}

/// The mDNS advert, seen by a real browser, where this machine's multicast works (a probe
/// service registered by the test itself must be found first; else skipped with a message).
#[test]
fn oscquery_is_advertised_over_mdns_where_multicast_works() {
    use mdns_sd::{ServiceDaemon, ServiceEvent, ServiceInfo};
    let browse_for = |daemon: &ServiceDaemon, ty: &str, want: &dyn Fn(u16) -> bool| {
        let rx = daemon.browse(ty).unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            if let Ok(ServiceEvent::ServiceResolved(s)) = rx.recv_timeout(left) {
                if want(s.get_port()) {
                    return true;
                }
            }
        }
        false
    };
    // The probe.
    let probe_daemon = ServiceDaemon::new().unwrap();
    let probe_port = 40_000 + (std::process::id() % 20_000) as u16;
    let probe = ServiceInfo::new(
        "_fpprobe._tcp.local.",
        &format!("probe-{}", std::process::id()),
        "fp-probe.local.",
        "127.0.0.1",
        probe_port,
        None::<std::collections::HashMap<String, String>>,
    )
    .unwrap();
    probe_daemon.register(probe).unwrap();
    let browser = ServiceDaemon::new().unwrap();
    let works = browse_for(&browser, "_fpprobe._tcp.local.", &|p| p == probe_port);
    let _ = probe_daemon.shutdown();
    if !works {
        eprintln!("mDNS: a service registered here is not seen here (no multicast?); skipped");
        let _ = browser.shutdown();
        return;
    }
    let port = free_udp_port();
    let fp = Fp::start(&[
        "run",
        "--fps",
        "30",
        "--control",
        "none",
        "--osc",
        &port.to_string(),
        "testsrc width=32 height=32 ! invert ! nullsink",
    ]);
    let base = fp.oscquery();
    let http_port: u16 = base.rsplit(':').next().unwrap().parse().unwrap();
    assert!(
        fp.stderr().contains("mDNS: advertising _oscjson._tcp"),
        "{}",
        fp.stderr()
    );
    assert!(
        browse_for(&browser, "_oscjson._tcp.local.", &|p| p == http_port),
        "_oscjson._tcp on port {http_port} not found"
    );
    assert!(
        browse_for(&browser, "_osc._udp.local.", &|p| p == port),
        "_osc._udp on port {port} not found"
    );
    let _ = browser.shutdown();
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .send_to(
            &encode(OscPacket::Message(osc("/framepipe/stop", vec![]))),
            ("127.0.0.1", port),
        )
        .unwrap();
    fp.finish();
}

/// `--oscquery` needs `--osc`, and its address is checked like `--osc`'s.
#[test]
fn oscquery_flags_are_checked() {
    for (args, needle) in [
        (
            vec!["--oscquery", "0"],
            "--oscquery describes the OSC input: it needs --osc",
        ),
        (
            vec!["--osc", "0", "--oscquery", "host:1"],
            "bad --oscquery 'host:1': expected PORT",
        ),
    ] {
        let mut cmd = std::process::Command::new(common::FP);
        cmd.arg("run")
            .args(&args)
            .arg("testsrc frames=1 ! nullsink");
        let out = common::run(&mut cmd, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// A live edit (issue #9) through the real binary: listeners get PATH_CHANGED, the tree shows
/// the added node and loses the removed one, and UDP `/norm` knows the new node's ranges.
#[test]
fn a_live_edit_is_announced_and_the_tree_and_norm_follow() {
    let port = free_udp_port();
    let mut fp = Fp::start(&[
        "run",
        "--fps",
        "60",
        "--no-mdns",
        "--osc",
        &port.to_string(),
        "testsrc width=64 height=32 ! stamp name=st ! nullsink",
    ]);
    let base = fp.oscquery();
    let mut ws = ws_connect(&base);
    listen(&mut ws, "LISTEN", "/framepipe/st/x");
    let _ = next_osc(&mut ws);
    assert_eq!(get(&base, "/framepipe/st2").0, 404);
    let path_changed = |ws: &mut tungstenite::WebSocket<TcpStream>| loop {
        match ws.read().expect("PATH_CHANGED within 5 s") {
            Message::Text(t) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                assert_eq!(v["COMMAND"], "PATH_CHANGED", "{v}");
                assert_eq!(v["DATA"], "/");
                return;
            }
            _ => continue,
        }
    };
    fp.command("add stamp name=st2 x=5 after st");
    path_changed(&mut ws);
    let st2 = get_json(&base, "/framepipe/st2");
    assert_eq!(st2["CONTENTS"]["x"]["VALUE"], serde_json::json!([5]));
    assert_eq!(st2["CONTENTS"]["scale"]["RANGE"][0]["MIN"], 1);
    // /norm over UDP scales with the new node's range (scale: 1..256).
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.send_to(
        &encode(OscPacket::Message(osc(
            "/framepipe/st2/scale/norm",
            vec![OscType::Float(1.0)],
        ))),
        ("127.0.0.1", port),
    )
    .unwrap();
    wait_until(Duration::from_secs(10), "the /norm reply", || {
        fp.stderr().contains("ok 'set st2.scale 256'")
    });
    fp.command("remove st2");
    path_changed(&mut ws);
    assert_eq!(get(&base, "/framepipe/st2").0, 404);
    // The listened path that stayed still streams.
    fp.command("set st.x 7");
    loop {
        let m = next_osc(&mut ws);
        if m.addr == "/framepipe/st/x" && m.args == [OscType::Int(7)] {
            break;
        }
    }
    fp.command("stop");
    let err = fp.finish();
    assert!(
        err.contains("ok 'add stamp name=st2 x=5 after st'"),
        "{err}"
    );
}

/// Issue #11, requirement 1 ("every control surface addresses a show by name"): with two
/// shows, the OSCQuery tree has one subtree per show (`/NAME/framepipe/...`, the addresses
/// plain OSC takes), asked by a real HTTP client; a value set with a real UDP OSC message on
/// one show changes that show's tree, its listened value and its output frames, not the
/// other's; an OSC packet over the WebSocket reaches the show it names.
#[test]
fn oscquery_has_one_subtree_per_show_and_a_set_reaches_that_show_only() {
    let dir = tmpdir("oscquery-shows");
    let (out1, out2) = (dir.join("one.raw"), dir.join("two.raw"));
    let show = |out: &Path| {
        format!(
            "testsrc width=64 height=32 pattern=solid color=0,0,0 ! \
             stamp name=st what=value value=1 decimals=0 scale=2 background=false ! \
             rawsink location={}",
            out.display()
        )
    };
    let port = free_udp_port();
    let fp = Fp::start(&[
        "run",
        "--fps",
        "30",
        "--control",
        "none",
        "--no-mdns",
        "--osc",
        &port.to_string(),
        &show(&out1),
        &show(&out2),
    ]);
    let base = fp.oscquery();
    let frame = 64 * 32 * 4;
    wait_until(Duration::from_secs(10), "both shows' frames", || {
        [&out1, &out2]
            .iter()
            .all(|o| std::fs::metadata(o).is_ok_and(|m| m.len() >= frame as u64))
    });

    // The tree: one subtree per show, every FULL_PATH under its show's name.
    let root = get_json(&base, "/");
    assert_eq!(root["FULL_PATH"], "/");
    for name in ["show-1", "show-2"] {
        let sub = &root["CONTENTS"][name];
        assert_eq!(sub["FULL_PATH"], format!("/{name}"), "{root}");
        let value = &sub["CONTENTS"]["framepipe"]["CONTENTS"]["st"]["CONTENTS"]["value"];
        assert_eq!(value["FULL_PATH"], format!("/{name}/framepipe/st/value"));
        assert_eq!(value["ACCESS"], 3);
    }
    let st = get_json(&base, "/show-2/framepipe/st");
    assert_eq!(st["FULL_PATH"], "/show-2/framepipe/st");
    assert_eq!(
        get_json(&base, "/show-1/framepipe/st/value?FULL_PATH")["FULL_PATH"],
        "/show-1/framepipe/st/value"
    );
    let value_of = |name: &str| {
        get_json(&base, &format!("/{name}/framepipe/st/value?VALUE"))["VALUE"][0]
            .as_f64()
            .unwrap()
    };
    assert_eq!((value_of("show-1"), value_of("show-2")), (1.0, 1.0));
    // The one-show paths are no show's; an unknown show is named.
    let (status, body) = get(&base, "/framepipe/st/value");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no show named 'framepipe'"), "{body}");
    let (status, body) = get(&base, "/nope/framepipe");
    assert_eq!(status, 404, "{body}");
    assert!(
        body.contains("no show named 'nope'") && body.contains("show-1, show-2"),
        "{body}"
    );

    // Listen to show-2's value, then set it with a real UDP OSC message.
    let mut ws = ws_connect(&base);
    listen(&mut ws, "LISTEN", "/show-2/framepipe/st/value");
    let first = next_osc(&mut ws);
    assert_eq!(first.addr, "/show-2/framepipe/st/value");
    assert_eq!(float(&first), 1.0);
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.send_to(
        &encode(OscPacket::Message(osc(
            "/show-2/framepipe/st/value",
            vec![OscType::Float(7.0)],
        ))),
        ("127.0.0.1", port),
    )
    .unwrap();
    let streamed = next_osc(&mut ws);
    assert_eq!(streamed.addr, "/show-2/framepipe/st/value");
    assert_eq!(float(&streamed), 7.0);
    assert_eq!((value_of("show-1"), value_of("show-2")), (1.0, 7.0));
    // On the output: show-2's frames changed, show-1's never did.
    let last = |path: &Path| {
        let b = std::fs::read(path).unwrap();
        let n = b.len() / frame;
        b[(n - 1) * frame..n * frame].to_vec()
    };
    let first1 = std::fs::read(&out1).unwrap()[..frame].to_vec();
    let first2 = std::fs::read(&out2).unwrap()[..frame].to_vec();
    assert_eq!(first1, first2, "both shows start alike");
    wait_until(Duration::from_secs(10), "show-2's frame with 7", || {
        last(&out2) != first2
    });
    let len1 = std::fs::metadata(&out1).unwrap().len();
    wait_until(Duration::from_secs(10), "more frames of show-1", || {
        std::fs::metadata(&out1).unwrap().len() >= len1 + 3 * frame as u64
    });
    assert!(
        std::fs::read(&out1)
            .unwrap()
            .chunks_exact(frame)
            .all(|f| f == first1),
        "a frame of show-1 changed"
    );

    // An OSC packet over the WebSocket reaches the show its address names (show-1 here).
    ws.send(Message::Binary(
        encode(OscPacket::Message(osc(
            "/show-1/framepipe/st/value",
            vec![OscType::Float(3.0)],
        )))
        .into(),
    ))
    .unwrap();
    wait_until(
        Duration::from_secs(10),
        "show-1's value over the WebSocket",
        || value_of("show-1") == 3.0,
    );
    assert_eq!(value_of("show-2"), 7.0);
    drop(ws);
    drop(fp);
}
