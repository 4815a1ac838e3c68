//! Replies are true on every surface (issue #22, item 4): a property a running node cannot take
//! (`stamp`'s `color`, a frei0r node's `isolate`) is refused at once, with the reason, from
//! stdin, OSC (a real UDP client), the web page (a real WebSocket client) and OSCQuery; the web
//! `graph` message says `"live": false` for it and OSCQuery lists it with ACCESS 1; and its value
//! does not change. Through the real `framepipe` binary.

mod common;

use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

use common::{free_udp_port, wait_until, Fp};
use rosc::{encoder, OscMessage, OscPacket, OscType};
use serde_json::{json, Value};

fn http_json(base: &str, path: &str) -> Value {
    let authority = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(authority).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut s, &mut text).unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: {e}: {text}"))
}

type Ws = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

fn read_type(ws: &mut Ws, ty: &str) -> Value {
    loop {
        if let tungstenite::Message::Text(t) = ws.read().unwrap() {
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["type"] == ty {
                return v;
            }
        }
    }
}

const REASON: &str =
    "st.color cannot change while running: it is read when the node starts; replace the node to change it";

#[test]
fn a_property_read_at_the_start_is_refused_on_every_surface_and_shown_read_only() {
    let osc_port = free_udp_port();
    let mut fp = Fp::run(&[
        "--fps",
        "30",
        "--no-mdns",
        "--osc",
        &osc_port.to_string(),
        "--web",
        "127.0.0.1:0",
        "testsrc width=64 height=32 ! stamp name=st color=0,1,0 decimals=0 ! nullsink",
    ]);
    let oscquery = fp.line_after("framepipe: OSCQuery on ");
    let web = fp.line_after("framepipe: web control on ");

    // OSCQuery: color is read-only (ACCESS 1) with its value; a live property stays writable.
    let st = |fp: &Fp| {
        let _ = fp;
        http_json(&oscquery, "/framepipe/st")
    };
    let node = st(&fp);
    assert_eq!(node["CONTENTS"]["color"]["ACCESS"], 1, "{node}");
    assert_eq!(node["CONTENTS"]["value"]["ACCESS"], 3, "{node}");
    assert_eq!(node["CONTENTS"]["color"]["VALUE"], json!([0.0, 1.0, 0.0]));

    // The web page: the graph message says which properties are live.
    let ws_url = web
        .replacen("http://", "ws://", 1)
        .trim_end_matches('/')
        .to_string()
        + "/ws";
    let (mut ws, _) = tungstenite::connect(ws_url.as_str()).expect("WebSocket");
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    let graph = read_type(&mut ws, "graph");
    let props = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "st")
        .unwrap()["props"]
        .as_array()
        .unwrap()
        .clone();
    let live = |name: &str| props.iter().find(|p| p["name"] == name).unwrap()["live"].clone();
    assert_eq!(live("color"), json!(false), "{props:?}");
    assert_eq!(live("value"), json!(true), "{props:?}");

    // Web: refused at once, with the reason, in the reply to the page.
    ws.send(tungstenite::Message::Text(
        json!({"id": 3, "cmd": "set st.color 1,0,0"})
            .to_string()
            .into(),
    ))
    .unwrap();
    let reply = read_type(&mut ws, "reply");
    assert_eq!(reply["id"], 3, "{reply}");
    assert_eq!(reply["ok"], false, "{reply}");
    assert_eq!(reply["reason"], REASON, "{reply}");

    // stdin (another property: refusals of one reason are said once a second, the rest
    // counted, and the web page's is said on stderr too): refused with the reason, never
    // "ok ... from frame N".
    fp.command("set st.decimals 3");
    fp.wait_more(
        "refused 'set st.decimals 3': st.decimals cannot change while running: it is read when the node starts",
        0,
    );

    // OSC, a real UDP client (another property: refusals of one reason are said once a
    // second, the rest counted).
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let packet = encoder::encode(&OscPacket::Message(OscMessage {
        addr: "/framepipe/st/background".into(),
        args: vec![OscType::Bool(false)],
    }))
    .unwrap();
    udp.send_to(&packet, ("127.0.0.1", osc_port)).unwrap();
    fp.wait_more(
        "st.background cannot change while running: it is read when the node starts",
        0,
    );

    // A live property of the same node still changes: the refusals are about `color` only.
    fp.command("set st.value 5");
    wait_until(Duration::from_secs(20), "st.value 5", || {
        st(&fp)["CONTENTS"]["value"]["VALUE"] == json!([5.0])
    });
    // ...and color never did, nor was it said to.
    assert_eq!(
        st(&fp)["CONTENTS"]["color"]["VALUE"],
        json!([0.0, 1.0, 0.0])
    );
    let err = fp.stderr();
    assert!(
        !err.contains("cannot change 'color' while running"),
        "a late warning after an 'ok': {err}"
    );
    assert!(
        !err.lines()
            .any(|l| l.contains("st.color") && l.contains(" ok")),
        "{err}"
    );
}

#[test]
fn after_one_show_failed_the_others_still_take_every_show_commands() {
    // Issue #22 item 8: `@*` after one show of several failed reaches the shows still running;
    // the failed one answers for its own copy.
    let mut fp = Fp::run(&[
        "--fps",
        "30",
        "testsrc width=32 height=32 ! stamp name=st ! rawsink location=/dev/full",
        "testsrc width=32 height=32 ! stamp name=st ! nullsink",
    ]);
    fp.line_after("framepipe: show show-1: error: ");
    fp.command("@* set st.value 5");
    wait_until(Duration::from_secs(20), "both answers", || {
        let err = fp.stderr();
        err.contains("framepipe: show show-2: ok 'set st.value 5' from frame ")
            && err.contains("framepipe: show show-1: refused 'set st.value 5': ")
    });
    fp.command("@* stop");
    wait_until(Duration::from_secs(20), "show-2 stopped", || {
        fp.stderr().contains("framepipe: show show-2: ok 'stop'")
    });
    let mut status = None;
    wait_until(Duration::from_secs(20), "the exit", || {
        status = fp.child.try_wait().unwrap();
        status.is_some()
    });
    let status = status.unwrap();
    assert_eq!(status.code(), Some(1), "one show failed: {}", fp.stderr());
    assert!(
        fp.stderr().contains("2 shows: 1 ended, 1 failed (show-1)"),
        "{}",
        fp.stderr()
    );
}
