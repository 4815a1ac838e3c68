//! The service over real sockets with a show whose graph changes version (what a live edit
//! does): listeners get PATH_CHANGED, the tree is the new one, a removed path stops streaming
//! and a new one can be listened to. (The binary's tests cover the rest: tests/oscquery.rs of
//! framepipe-cli.)

use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use framepipe_core::{PropKind, PropSpec, PropValue};
use framepipe_oscquery::{
    serve, serve_shows, HostInfo, NodeModel, ServeOptions, ShowEntry, ShowModel, ShowSource, Values,
};
use rosc::{OscPacket, OscType};
use serde_json::Value;
use tungstenite::Message;

/// A show the test edits: the model and one float value per node.
#[derive(Clone)]
struct Edited(Arc<Mutex<(Arc<ShowModel>, f64)>>);

impl ShowSource for Edited {
    fn model(&mut self) -> Arc<ShowModel> {
        Arc::clone(&self.0.lock().unwrap().0)
    }

    fn read(&mut self, model: &ShowModel, values: &mut Values) -> bool {
        let v = self.0.lock().unwrap().1;
        let mut next = Values::defaults(model);
        for node in &mut next.props {
            for p in node.iter_mut() {
                *p = Some(PropValue::Float(v));
            }
        }
        let changed = next != *values;
        *values = next;
        changed
    }
}

fn node(name: &str) -> NodeModel {
    NodeModel {
        name: name.into(),
        element: "frei0r-glow".into(),
        kind: "effect".into(),
        props: vec![PropSpec::new(
            "blur",
            PropKind::Float { min: 0.0, max: 1.0 },
            PropValue::Float(0.0),
            "",
        )],
        bypassable: true,
    }
}

fn model(version: u64, names: &[&str]) -> Arc<ShowModel> {
    Arc::new(ShowModel {
        version,
        nodes: names.iter().map(|n| node(n)).collect(),
        audio_bands: 0,
    })
}

fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    let mut r = ureq::get(format!("http://{addr}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap();
    let status = r.status().as_u16();
    let body = r.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

enum Got {
    Osc(String, Vec<OscType>),
    Text(Value),
}

fn next(ws: &mut tungstenite::WebSocket<TcpStream>) -> Got {
    loop {
        match ws.read().expect("a message within 5 s") {
            Message::Binary(b) => match rosc::decoder::decode_udp(&b).unwrap().1 {
                OscPacket::Message(m) => return Got::Osc(m.addr, m.args),
                OscPacket::Bundle(_) => panic!("a bundle"),
            },
            Message::Text(t) => return Got::Text(serde_json::from_str(t.as_str()).unwrap()),
            _ => continue,
        }
    }
}

#[test]
fn a_new_graph_version_is_announced_and_the_tree_follows() {
    let show = Edited(Arc::new(Mutex::new((model(0, &["a", "b"]), 0.25))));
    let server = serve(
        ServeOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            info: HostInfo {
                name: "test".into(),
                osc: None,
            },
            mdns: false,
        },
        show.clone(),
        None,
    )
    .unwrap();
    let addr = server.local_addr();
    let start = Instant::now();
    while get(addr, "/framepipe/b/blur").0 != 200 {
        assert!(start.elapsed() < Duration::from_secs(10), "no tree");
        std::thread::sleep(Duration::from_millis(10));
    }
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (mut ws, _) = tungstenite::client(format!("ws://{addr}/"), stream).unwrap();
    for p in ["/framepipe/a/blur", "/framepipe/b/blur"] {
        let listen = serde_json::json!({ "COMMAND": "LISTEN", "DATA": p }).to_string();
        ws.send(Message::Text(listen.into())).unwrap();
        match next(&mut ws) {
            Got::Osc(a, args) => {
                assert_eq!(a, p);
                assert_eq!(args, [OscType::Float(0.25)]);
            }
            Got::Text(t) => panic!("{t}"),
        }
    }
    // The edit: b removed, c added, a new value.
    *show.0.lock().unwrap() = (model(1, &["a", "c"]), 0.5);
    match next(&mut ws) {
        Got::Text(t) => {
            assert_eq!(t["COMMAND"], "PATH_CHANGED");
            assert_eq!(t["DATA"], "/");
        }
        Got::Osc(a, _) => panic!("{a} before PATH_CHANGED"),
    }
    // Only a's new value: b is gone.
    match next(&mut ws) {
        Got::Osc(a, args) => {
            assert_eq!(a, "/framepipe/a/blur");
            assert_eq!(args, [OscType::Float(0.5)]);
        }
        Got::Text(t) => panic!("{t}"),
    }
    assert_eq!(get(addr, "/framepipe/b").0, 404);
    let (status, c) = get(addr, "/framepipe/c/blur?VALUE");
    assert_eq!(status, 200);
    assert_eq!(c, serde_json::json!({ "VALUE": [0.5] }));
    // c can be listened to, a new value reaches both; still nothing for b.
    let listen = serde_json::json!({ "COMMAND": "LISTEN", "DATA": "/framepipe/c/blur" });
    ws.send(Message::Text(listen.to_string().into())).unwrap();
    match next(&mut ws) {
        Got::Osc(a, args) => {
            assert_eq!(a, "/framepipe/c/blur");
            assert_eq!(args, [OscType::Float(0.5)]);
        }
        Got::Text(t) => panic!("{t}"),
    }
    show.0.lock().unwrap().1 = 0.75;
    let mut got = Vec::new();
    while got.len() < 2 {
        match next(&mut ws) {
            Got::Osc(a, args) => got.push((a, args)),
            Got::Text(t) => panic!("{t}"),
        }
    }
    got.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        got,
        [
            ("/framepipe/a/blur".to_string(), vec![OscType::Float(0.75)]),
            ("/framepipe/c/blur".to_string(), vec![OscType::Float(0.75)]),
        ]
    );
    let counters = server.counters();
    assert_eq!(
        counters
            .path_changed
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    server.finish();
}

/// Issue #11: two shows in one service, each its own subtree (`/one/framepipe/...`,
/// `/two/framepipe/...`). A live edit of one is announced with its own path
/// (`PATH_CHANGED /two`), its subtree follows, and the other show's listened value goes on.
#[test]
fn an_edit_of_one_show_is_announced_under_its_name() {
    let one = Edited(Arc::new(Mutex::new((model(0, &["a"]), 0.25))));
    let two = Edited(Arc::new(Mutex::new((model(0, &["a", "b"]), 0.5))));
    let entry = |name: &str| ShowEntry {
        name: Some(name.into()),
        commands: None,
    };
    let server = serve_shows(
        ServeOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            info: HostInfo {
                name: "test".into(),
                osc: None,
            },
            mdns: false,
        },
        vec![(entry("one"), one.clone()), (entry("two"), two.clone())],
    )
    .unwrap();
    let addr = server.local_addr();
    let start = Instant::now();
    while get(addr, "/two/framepipe/b/blur").0 != 200 {
        assert!(start.elapsed() < Duration::from_secs(10), "no tree");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (_, root) = get(addr, "/");
    assert_eq!(root["CONTENTS"]["one"]["FULL_PATH"], "/one");
    assert_eq!(
        root["CONTENTS"]["two"]["CONTENTS"]["framepipe"]["CONTENTS"]["b"]["CONTENTS"]["blur"]
            ["FULL_PATH"],
        "/two/framepipe/b/blur"
    );
    assert!(root["CONTENTS"]["one"]["CONTENTS"]["framepipe"]["CONTENTS"]
        .get("b")
        .is_none());
    assert_eq!(
        get(addr, "/one/framepipe/a/blur?VALUE").1,
        serde_json::json!({ "VALUE": [0.25] })
    );
    assert_eq!(get(addr, "/framepipe/a/blur").0, 404);
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (mut ws, _) = tungstenite::client(format!("ws://{addr}/"), stream).unwrap();
    for (p, v) in [
        ("/one/framepipe/a/blur", 0.25),
        ("/two/framepipe/a/blur", 0.5),
    ] {
        let listen = serde_json::json!({ "COMMAND": "LISTEN", "DATA": p }).to_string();
        ws.send(Message::Text(listen.into())).unwrap();
        match next(&mut ws) {
            Got::Osc(a, args) => {
                assert_eq!(a, p);
                assert_eq!(args, [OscType::Float(v as f32)]);
            }
            Got::Text(t) => panic!("{t}"),
        }
    }
    // Show two's edit: b removed.
    *two.0.lock().unwrap() = (model(1, &["a"]), 0.5);
    match next(&mut ws) {
        Got::Text(t) => {
            assert_eq!(t["COMMAND"], "PATH_CHANGED");
            assert_eq!(t["DATA"], "/two");
        }
        Got::Osc(a, _) => panic!("{a} before PATH_CHANGED"),
    }
    assert_eq!(get(addr, "/two/framepipe/b").0, 404);
    // Show one's value still streams, under its own name.
    one.0.lock().unwrap().1 = 0.75;
    loop {
        match next(&mut ws) {
            Got::Osc(a, args) if a == "/one/framepipe/a/blur" => {
                assert_eq!(args, [OscType::Float(0.75)]);
                break;
            }
            Got::Osc(..) => continue,
            Got::Text(t) => panic!("{t}"),
        }
    }
    server.finish();
}
