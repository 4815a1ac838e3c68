//! Issue #21 through the real binary: least privilege on the web page (a page cannot open a
//! file, connect to a host or load a project outside `--scenes`; no refusal quotes a file),
//! bounded connections on the page and OSCQuery (caps answered 503, silent connections and
//! idle WebSocket clients timed out, so nobody is locked out for good), and issue #22's `load`
//! with `--web` (the page's preview branch is kept). Real sockets on loopback: raw TCP,
//! tungstenite, ureq.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{free_udp_port, tmpdir, wait_until, Fp};
use serde_json::{json, Value};
use tungstenite::Message;

type Ws = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

/// A page's WebSocket on `path`, or the refusal's HTTP status.
fn ws(port: u16, path: &str) -> Result<Ws, u16> {
    match tungstenite::connect(format!("ws://127.0.0.1:{port}{path}")) {
        Ok((ws, _)) => {
            if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            }
            Ok(ws)
        }
        Err(tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("handshake: {e}"),
    }
}

/// Reads messages until one of type `ty` (and `id`, when given), for 15 s at most.
fn read_type(ws: &mut Ws, ty: &str, id: Option<u64>) -> Value {
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "no {ty} message in 15 s"
        );
        if let Message::Text(t) = ws.read().unwrap() {
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["type"] == ty && id.is_none_or(|id| v["id"] == id) {
                return v;
            }
        }
    }
}

/// Reads what is waiting for `ws` without blocking (a page that reads answers the server's
/// pings: one that never reads is dropped after 10 s).
fn drain(ws: &mut Ws) {
    let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() else {
        return;
    };
    s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    while ws.read().is_ok() {}
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
}

/// Posts `cmd` with request id `id` and returns the answer to it (`reply` or `error`).
fn post(ws: &mut Ws, id: u64, cmd: &str) -> Value {
    ws.send(Message::Text(
        json!({"id": id, "cmd": cmd}).to_string().into(),
    ))
    .unwrap();
    loop {
        if let Message::Text(t) = ws.read().unwrap() {
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if (v["type"] == "reply" || v["type"] == "error") && v["id"] == id {
                return v;
            }
        }
    }
}

/// Posts `stop` (its reply may not come: the run ends and closes the page).
fn send_stop(ws: &mut Ws) {
    ws.send(Message::Text(
        json!({"id": 0, "cmd": "stop"}).to_string().into(),
    ))
    .unwrap();
}

/// A raw HTTP GET on a fresh connection: the status (0: closed without an answer).
fn http_status(port: u16, path: &str) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    let mut bytes = Vec::new();
    let _ = s.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn stats_of(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

const SECRET: &str = "TOPSECRET-4c0ffee-not-for-the-page";

#[test]
fn a_web_client_cannot_open_a_file_connect_to_a_host_or_save_through_the_page() {
    let dir = tmpdir("web-priv");
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, format!("{SECRET}\nmore\n")).unwrap();
    let stats = dir.join("stats.json");
    let saved = dir.join("saved.toml");
    // A host the page must not reach: nothing may connect to it.
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    target.set_nonblocking(true).unwrap();
    let target_port = target.local_addr().unwrap().port();
    let mut fp = Fp::run(&[
        "--fps",
        "30",
        "--control",
        "none",
        "--stats",
        stats.to_str().unwrap(),
        "--web",
        "127.0.0.1:0",
        "testsrc name=src width=64 height=32 frames=100000 ! stamp name=s ! invert name=i ! \
         nullsink",
    ]);
    let port = fp.web_port();
    let mut page = ws(port, "/ws").unwrap();
    read_type(&mut page, "graph", None);
    // Every route: the one show's /ws and /shows/NAME/ws.
    let mut named = ws(port, "/shows/show-1/ws").unwrap();
    let forbidden = [
        (
            format!("replace src y4msrc location={}", secret.display()),
            "replace",
        ),
        (
            format!("replace src tcpsrc host=127.0.0.1:{target_port}"),
            "replace",
        ),
        (
            format!("add y4msrc location={} after s", secret.display()),
            "add",
        ),
        ("remove i".to_string(), "remove"),
        ("link i src".to_string(), "link"),
        (format!("save {}", saved.display()), "save"),
        ("learn s.value".to_string(), "learn"),
        (format!("load {}", secret.display()), "load"),
    ];
    for (i, (cmd, word)) in forbidden.iter().enumerate() {
        for (route, client) in [("/ws", &mut page), ("/shows/show-1/ws", &mut named)] {
            drain(client);
            let answer = post(client, 100 + i as u64, cmd);
            let text = answer.to_string();
            assert_eq!(answer["type"], "error", "{route} {cmd}: {answer}");
            let reason = answer["reason"].as_str().unwrap();
            assert!(
                reason.starts_with(word) && reason.contains("not allowed from the web page"),
                "{route} {cmd}: {reason}"
            );
            assert!(!text.contains("TOPSECRET"), "{route} {cmd}: {text}");
            if *word == "load" {
                assert!(
                    reason.contains("--scenes DIR"),
                    "says how to allow it: {reason}"
                );
            }
        }
    }
    // Nothing was opened, connected to, written or replaced.
    std::thread::sleep(Duration::from_millis(300));
    assert!(target.accept().is_err(), "the page made framepipe connect");
    assert!(!saved.exists());
    let mut fresh = ws(port, "/ws").unwrap();
    let graph = read_type(&mut fresh, "graph", None);
    assert_eq!(graph["version"], 0, "no edit ran: {graph}");
    let src = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "src")
        .unwrap();
    assert_eq!(src["element"], "testsrc");
    // What the page does send still works: a value, and the preview switch.
    assert_eq!(post(&mut page, 1, "set s.value 7")["ok"], true);
    let switched = post(&mut page, 2, "link web-monitor s");
    assert_eq!(switched["ok"], true, "{switched}");
    let bad_preview = post(&mut page, 3, "link web-monitor nosuchnode");
    assert_eq!(bad_preview["type"], "error", "{bad_preview}");
    send_stop(&mut page);
    fp.wait_success();
    let web = &stats_of(&stats)["web"];
    assert_eq!(
        web["forbidden"].as_u64(),
        Some(2 * forbidden.len() as u64 + 1),
        "{web}"
    );
}

/// A scene file with the running sinks (`out`) and a stamp `t` showing `value`.
fn scene(value: u32) -> String {
    format!(
        "pipeline = \"testsrc width=64 height=32 frames=100000 ! stamp name=t what=value \
         value={value} ! nullsink name=out\"\n"
    )
}

#[test]
fn a_web_page_loads_scenes_from_the_scenes_folder_only() {
    let dir = tmpdir("web-scenes");
    let scenes = dir.join("scenes");
    std::fs::create_dir(&scenes).unwrap();
    std::fs::write(scenes.join("two.toml"), scene(2)).unwrap();
    // A name with spaces and quotes, which the page quotes as the command parser reads it.
    let odd = "my \"best\" 'show'.toml";
    std::fs::write(scenes.join(odd), scene(5)).unwrap();
    // Not a project file: never offered nor loaded (an engine parse error may quote a value).
    std::fs::write(scenes.join("notes.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(dir.join("outside.toml"), scene(3)).unwrap();
    std::os::unix::fs::symlink(dir.join("outside.toml"), scenes.join("link.toml")).unwrap();
    std::fs::create_dir(scenes.join("sub")).unwrap();
    std::fs::write(scenes.join("sub").join("deep.toml"), scene(4)).unwrap();
    let fp = Fp::run(&[
        "--fps",
        "30",
        "--control",
        "none",
        "--web",
        "127.0.0.1:0",
        "--scenes",
        scenes.to_str().unwrap(),
        "testsrc width=64 height=32 frames=100000 ! stamp name=s ! nullsink name=out",
    ]);
    let port = fp.web_port();
    let mut page = ws(port, "/ws").unwrap();
    // The page is offered the scenes it may load (its perform view's buttons): the regular
    // .toml files of the folder, not the link nor what is in a subfolder.
    let hello = read_type(&mut page, "hello", None);
    assert_eq!(
        hello["scenes"],
        serde_json::json!([odd, "two.toml"]),
        "{hello}"
    );
    let outside = dir.join("outside.toml");
    for (i, bad) in [
        "../outside.toml",
        outside.to_str().unwrap(),
        "link.toml",
        "sub/deep.toml",
        "sub",
        "nosuch.toml",
        "notes.txt",
    ]
    .iter()
    .enumerate()
    {
        let answer = post(&mut page, 10 + i as u64, &format!("load {bad}"));
        assert_eq!(answer["type"], "error", "load {bad}: {answer}");
        assert!(!answer.to_string().contains("TOPSECRET"), "{answer}");
        assert!(
            answer["reason"]
                .as_str()
                .unwrap()
                .contains("--scenes folder"),
            "{answer}"
        );
    }
    // As the page's scene button sends it: in "..." with \ before " and \.
    let quoted = format!("\"{}\"", odd.replace('\\', "\\\\").replace('"', "\\\""));
    let loaded = post(&mut page, 1, &format!("load {quoted} fade=200ms"));
    assert_eq!(loaded["ok"], true, "{loaded}");
    wait_until(Duration::from_secs(10), "the scene's graph", || {
        let g = read_type(&mut page, "graph", None);
        g["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["name"] == "t")
            && !g["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n["name"] == "s")
    });
    send_stop(&mut page);
}

#[test]
fn load_with_the_web_page_keeps_its_preview() {
    let dir = tmpdir("web-load");
    let two = dir.join("scene2.toml");
    std::fs::write(&two, scene(2)).unwrap();
    let mut fp = Fp::run(&[
        "--fps",
        "30",
        "--web",
        "127.0.0.1:0",
        "testsrc width=64 height=32 frames=100000 ! stamp name=s ! nullsink name=out",
    ]);
    let port = fp.web_port();
    let mut page = ws(port, "/ws").unwrap();
    let first = read_type(&mut page, "stats", None)["preview"]
        .as_u64()
        .unwrap();
    fp.command(&format!("load {} fade=1s", two.display()));
    let mut graph = Value::Null;
    wait_until(Duration::from_secs(15), "the new scene alone", || {
        graph = read_type(&mut page, "graph", None);
        let names: Vec<&str> = graph["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n["name"].as_str())
            .collect();
        names.contains(&"t") && !names.iter().any(|n| n.starts_with("old:") || *n == "s")
    });
    assert!(
        !fp.stderr().contains("refused"),
        "the load was refused: {}",
        fp.stderr()
    );
    // The preview branch came along, reading the new master input, and goes on.
    assert_eq!(graph["preview_tap"], "web-monitor", "{graph}");
    assert_eq!(graph["preview"], "t", "{graph}");
    let after = read_type(&mut page, "stats", None)["preview"]
        .as_u64()
        .unwrap();
    let mut later = after;
    wait_until(Duration::from_secs(10), "new preview images", || {
        later = read_type(&mut page, "stats", None)["preview"]
            .as_u64()
            .unwrap();
        later > after + 2
    });
    assert!(later > first);
    assert_eq!(http_status(port, "/preview.jpg"), 200);
    fp.command("stop");
    fp.wait_success();
}

#[test]
fn web_caps_pages_and_silent_connections_and_lets_new_clients_in_after() {
    let dir = tmpdir("web-caps");
    let stats = dir.join("stats.json");
    let mut fp = Fp::run(&[
        "--fps",
        "30",
        "--control",
        "none",
        "--stats",
        stats.to_str().unwrap(),
        "--web",
        "127.0.0.1:0",
        "testsrc width=64 height=32 frames=100000 ! stamp name=s ! nullsink",
    ]);
    let port = fp.web_port();
    // Pages up to the cap; the next is refused politely.
    let mut pages: Vec<Ws> = Vec::new();
    let refused = loop {
        match ws(port, "/ws") {
            Ok(p) => pages.push(p),
            Err(code) => break code,
        }
        drain(&mut pages[0]);
        assert!(pages.len() <= 1000, "no cap on pages");
    };
    assert_eq!(refused, 503);
    let cap = pages.len();
    assert!(cap >= 8, "at least a few pages: {cap}");
    // A page already open still works; one closed makes room for a new one.
    assert_eq!(post(&mut pages[0], 1, "set s.value 3")["ok"], true);
    let mut gone = pages.pop().unwrap();
    gone.close(None).unwrap();
    let mut fresh = None;
    wait_until(Duration::from_secs(5), "a place for a new page", || {
        fresh = ws(port, "/ws").ok();
        fresh.is_some()
    });
    drop(pages);
    drop(fresh);
    // Silent TCP connections: the server answers 503 beyond its cap, then closes the silent
    // ones within a few seconds, and a new client is served.
    let silent: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    let mut code = 0;
    wait_until(
        Duration::from_secs(15),
        "a page served after the silent ones",
        || {
            code = http_status(port, "/");
            code == 200
        },
    );
    let waited = start.elapsed();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    // Every silent one times out (they are still open on this side).
    std::thread::sleep(Duration::from_secs(2));
    drop(silent);
    let mut page = ws(port, "/ws").unwrap();
    send_stop(&mut page);
    fp.wait_success();
    let web = &stats_of(&stats)["web"];
    assert!(web["refused_clients"].as_u64().unwrap() >= 1, "{web}");
    assert!(web["http_refused"].as_u64().unwrap() >= 1, "{web}");
    assert!(web["http_timed_out"].as_u64().unwrap() >= 250, "{web}");
    assert!(web["http_accepted"].as_u64().unwrap() >= 300, "{web}");
}

#[test]
fn oscquery_answers_after_silent_connections_and_idle_clients_do_not_lock_it() {
    let dir = tmpdir("oscq-caps");
    let stats = dir.join("stats.json");
    let osc_port = free_udp_port();
    let mut fp = Fp::run(&[
        "--fps",
        "30",
        "--no-mdns",
        "--stats",
        stats.to_str().unwrap(),
        "--osc",
        &osc_port.to_string(),
        "testsrc width=64 height=32 frames=100000 ! \
         stamp name=s what=value value=~sine:2hz:0..100 decimals=0 ! nullsink",
    ]);
    let port = fp.port_after("OSCQuery on ");
    // A controller connected before the flood keeps its stream.
    let (mut legit, _) = tungstenite::connect(format!("ws://127.0.0.1:{port}/")).unwrap();
    // 300 silent TCP connections: a real query is answered within a few seconds.
    let silent: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    wait_until(Duration::from_secs(15), "an OSCQuery answer", || {
        http_status(port, "/framepipe/s") == 200
    });
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    // Every silent one times out (they are still open on this side).
    std::thread::sleep(Duration::from_secs(2));
    drop(silent);
    legit
        .send(Message::Text(
            json!({"COMMAND": "LISTEN", "DATA": "/framepipe/s/value"})
                .to_string()
                .into(),
        ))
        .unwrap();
    // Idle clients (never read, never send) up to the cap: a new controller is refused, then
    // gets in once they are dropped.
    let mut idle = Vec::new();
    let refused = loop {
        match tungstenite::connect(format!("ws://127.0.0.1:{port}/")) {
            Ok((c, _)) => idle.push(c),
            Err(tungstenite::Error::Http(r)) => break r.status().as_u16(),
            Err(e) => panic!("{e}"),
        }
        assert!(idle.len() <= 1000, "no cap on OSCQuery clients");
    };
    assert_eq!(refused, 503);
    let start = Instant::now();
    // Keep the legit controller reading while the idle ones time out.
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = legit.get_ref() {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
    }
    let mut got_in = None;
    while start.elapsed() < Duration::from_secs(30) && got_in.is_none() {
        let _ = legit.read();
        if let Ok((c, _)) = tungstenite::connect(format!("ws://127.0.0.1:{port}/")) {
            got_in = Some(c);
        }
    }
    let waited = start.elapsed();
    assert!(got_in.is_some(), "a new controller is locked out");
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    // The legit controller was not dropped: it still gets values.
    let mut values = 0;
    while values < 3 && start.elapsed() < Duration::from_secs(40) {
        if let Ok(Message::Binary(_)) = legit.read() {
            values += 1;
        }
    }
    assert_eq!(values, 3, "the legit controller lost its stream");
    drop(idle);
    fp.command("stop");
    fp.wait_success();
    let q = &stats_of(&stats)["oscquery"];
    assert!(q["http_timed_out"].as_u64().unwrap() >= 250, "{q}");
    assert!(q["ws_refused"].as_u64().unwrap() >= 1, "{q}");
    assert!(q["ws_idle_dropped"].as_u64().unwrap() >= 1, "{q}");
}

/// Why a remote surface's `set` of a text property is refused.
const TEXT_RULE: &str = "text properties may name files";

/// Issue #21: a text property may name a file the node opens — frei0r facedetect reads the
/// cascade its `classifier` names (a FIFO or `/dev/zero` there could hang the show) — so the
/// page, OSC and OSCQuery may not set one (the page's `set`, OSC's string argument, an OSC
/// packet over OSCQuery's WebSocket; OSCQuery lists it read-only); the show's terminal still
/// may. Whether the plugin opened a path shows on stderr (OpenCV names the file it cannot
/// open).
#[test]
fn remote_surfaces_cannot_set_a_text_property_the_terminal_can() {
    let dir = tmpdir("web-text");
    let stats = dir.join("stats.json");
    let path = |who: &str| dir.join(format!("{who}-cascade.xml")).display().to_string();
    let osc_port = free_udp_port();
    let mut fp = Fp::run(&[
        "--fps",
        "30",
        "--no-mdns",
        "--stats",
        stats.to_str().unwrap(),
        "--osc",
        &osc_port.to_string(),
        "--web",
        "127.0.0.1:0",
        "testsrc width=64 height=32 frames=100000 ! frei0r-facedetect name=fd ! nullsink",
    ]);
    let port = fp.web_port();
    let oscq = fp.port_after("OSCQuery on ");
    let mut page = ws(port, "/ws").unwrap();
    let graph = read_type(&mut page, "graph", None);
    let fd = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "fd")
        .unwrap();
    let classifier = fd["props"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "classifier")
        .unwrap();
    assert_eq!(classifier["kind"], "str", "{classifier}");
    // The page: by name, by element, in a batch; refused with the rule, never posted.
    for (i, cmd) in [
        format!("set fd.classifier {}", path("page")),
        format!("set frei0r-facedetect.classifier {}", path("page")),
        format!(
            "batch set fd.threads 0.5; set fd.classifier {}",
            path("page")
        ),
    ]
    .iter()
    .enumerate()
    {
        let answer = post(&mut page, 1 + i as u64, cmd);
        assert_eq!(answer["type"], "error", "{cmd}: {answer}");
        let reason = answer["reason"].as_str().unwrap();
        assert!(
            reason.contains("not allowed from the web page") && reason.contains(TEXT_RULE),
            "{cmd}: {reason}"
        );
    }
    // A number of the same node still passes.
    assert_eq!(post(&mut page, 9, "set fd.threads 0.5")["ok"], true);
    // OSC: a string argument to the property's address.
    let osc = |addr: &str, value: String| {
        rosc::encoder::encode(&rosc::OscPacket::Message(rosc::OscMessage {
            addr: addr.into(),
            args: vec![rosc::OscType::String(value)],
        }))
        .unwrap()
    };
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.send_to(
        &osc("/framepipe/fd/classifier", path("osc")),
        ("127.0.0.1", osc_port),
    )
    .unwrap();
    wait_until(Duration::from_secs(10), "the OSC refusal", || {
        fp.stderr()
            .lines()
            .any(|l| l.contains("osc: from") && l.contains(TEXT_RULE))
    });
    // OSCQuery: read-only in the tree, and an OSC packet over its WebSocket is refused.
    let body = ureq::get(format!("http://127.0.0.1:{oscq}/framepipe/fd/classifier"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let node: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (node["TYPE"].as_str(), node["ACCESS"].as_u64()),
        (Some("s"), Some(1)),
        "{node}"
    );
    let (mut controller, _) = tungstenite::connect(format!("ws://127.0.0.1:{oscq}/")).unwrap();
    controller
        .send(Message::Binary(
            osc("/framepipe/fd/classifier", path("oscquery")).into(),
        ))
        .unwrap();
    // The show's terminal may: applied, and the plugin opens what it names.
    std::thread::sleep(Duration::from_millis(300));
    fp.command(&format!("set fd.classifier {}", path("stdin")));
    wait_until(Duration::from_secs(10), "the terminal's set opened", || {
        let e = fp.stderr();
        e.contains("ok 'set fd.classifier") && e.contains(&path("stdin"))
    });
    send_stop(&mut page);
    fp.wait_success();
    let err = fp.stderr();
    for who in ["page", "osc", "oscquery"] {
        assert!(
            !err.contains(&path(who)),
            "{who}'s path reached the plugin: {err}"
        );
    }
    let all = stats_of(&stats);
    assert_eq!(all["web"]["forbidden"], 3, "{all}");
    assert_eq!(all["oscquery"]["ws_osc_bad"], 1, "{all}");
    assert_eq!(all["oscquery"]["ws_osc_ok"], 0, "{all}");
}
