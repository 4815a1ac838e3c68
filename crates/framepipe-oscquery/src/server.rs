//! The OSCQuery HTTP + WebSocket service: an [`axum::Router`] answering every path of the
//! address space ([`OscQuery::router`]), fed by a [`Poller`] that reads the show ~30 times a
//! second, and the standalone [`serve`] that runs both on their own thread (`fp-oscquery`).
//!
//! Several shows in one process (issue #11, [`serve_shows`]): the namespace has one subtree per
//! show, `/NAME/framepipe/...` (what plain OSC accepts with several shows); `/` lists the shows,
//! `/NAME` holds one show's `framepipe`. One poller reads every show; one HOST_INFO and one
//! advert for the process. OSC packets over the WebSocket are split by show as over UDP.
//!
//! Bounds (bad input is dropped and counted in [`Counters`], never buffered without limit):
//! at most [`MAX_CONNECTIONS`] HTTP connections being served ([`serve`], through
//! `framepipe_web::bounded`: one more is answered 503, one that sends no request within
//! [`HEADER_TIMEOUT`] is closed), [`MAX_CLIENTS`] WebSocket clients (more: 503),
//! [`MAX_WS_MESSAGE`] bytes per message (a larger one closes that connection), [`MAX_LISTENS`]
//! listened paths per client; a client that does not take a message within [`SEND_TIMEOUT`],
//! or answers no ping for `Liveness::IDLE_TIMEOUT` (it never reads), is dropped, so idle
//! clients cannot hold every place for good. Values are not queued per client: each client is
//! sent the latest snapshot's changes when it can take them (a slow client skips snapshots, it
//! never makes a backlog). OSC packets over the WebSocket may carry values and transport only
//! ([`Command::is_value_or_transport`]), as over UDP.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use framepipe_control::osc_in::{self, Ranges};
use framepipe_control::{Command, CommandSender};
use framepipe_core::quote::quote;
use framepipe_web::bounded::{self, ConnCounters, ConnLimits, Liveness};
use rosc::{OscMessage, OscPacket, OscType};
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use crate::model::{ShowModel, ShowSource, Values};
use crate::tree::{self, Place};
use crate::{Error, Result};

/// WebSocket clients at once; more are answered 503.
pub const MAX_CLIENTS: u64 = 64;
/// The largest WebSocket message taken (JSON command or OSC packet).
pub const MAX_WS_MESSAGE: usize = 64 * 1024;
/// Paths one client may listen to.
pub const MAX_LISTENS: usize = 4096;
/// A client that does not take a message within this is dropped.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// HTTP connections served at once (WebSocket clients leave this count when upgraded); one
/// more is answered 503.
pub const MAX_CONNECTIONS: u64 = 256;
/// The longest a connection may take to send a request (from its start or its last answer).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the poller reads the show.
pub const POLL_PERIOD: Duration = Duration::from_millis(33);

/// What HOST_INFO says about the host.
#[derive(Debug, Clone)]
pub struct HostInfo {
    /// NAME.
    pub name: String,
    /// Where OSC is received over UDP (OSC_IP when not unspecified, OSC_PORT).
    pub osc: Option<SocketAddr>,
}

/// The service's counts (atomics, read by the status line and the run's summary).
#[derive(Debug, Default)]
pub struct Counters {
    /// HTTP requests answered.
    pub http: AtomicU64,
    /// ... of which for paths that do not exist (404) or bad attributes (400).
    pub http_bad: AtomicU64,
    /// WebSocket connections accepted.
    pub ws_connections: AtomicU64,
    /// WebSocket clients connected now.
    pub ws_clients: AtomicU64,
    /// Connections refused (too many clients).
    pub ws_refused: AtomicU64,
    /// Clients dropped because they did not take their messages.
    pub ws_dropped: AtomicU64,
    /// Clients dropped because they answered no ping (they never read).
    pub ws_idle_dropped: AtomicU64,
    /// OSC commands over the WebSocket that are not values or transport (an edit), refused.
    pub ws_forbidden: AtomicU64,
    /// The HTTP connections' counts (accepted, open, refused at the cap, timed out).
    pub conn: Arc<ConnCounters>,
    /// WebSocket messages refused: malformed JSON, unknown commands or paths, too large.
    pub ws_bad: AtomicU64,
    /// OSC messages received over WebSocket and posted.
    pub ws_osc_ok: AtomicU64,
    /// OSC messages received over WebSocket and refused (malformed, unknown address).
    pub ws_osc_bad: AtomicU64,
    /// OSC commands dropped because the command queue was full.
    pub ws_osc_full: AtomicU64,
    /// OSC value packets sent to listeners.
    pub packets: AtomicU64,
    /// PATH_CHANGED notices sent.
    pub path_changed: AtomicU64,
    /// Snapshots of the show published by the poller.
    pub snapshots: AtomicU64,
}

fn add(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    /// `oscquery: N http (M bad), K ws clients (J now), P packets sent, B bad ws messages`
    /// (and drops, if any).
    pub fn summary(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut s = format!(
            "oscquery: {} http ({} bad), {} ws clients ({} now), {} packets sent, {} bad ws messages",
            get(&self.http),
            get(&self.http_bad),
            get(&self.ws_connections),
            get(&self.ws_clients),
            get(&self.packets),
            get(&self.ws_bad),
        );
        let osc = get(&self.ws_osc_ok) + get(&self.ws_osc_bad) + get(&self.ws_osc_full);
        if osc > 0 {
            s.push_str(&format!(
                ", ws osc {} ok {} bad {} full",
                get(&self.ws_osc_ok),
                get(&self.ws_osc_bad),
                get(&self.ws_osc_full)
            ));
        }
        for (n, what) in [
            (get(&self.ws_refused), "refused (too many clients)"),
            (get(&self.ws_dropped), "dropped (too slow)"),
            (get(&self.ws_idle_dropped), "dropped (idle)"),
            (get(&self.ws_forbidden), "forbidden ws osc"),
            (
                get(&self.conn.refused),
                "http refused (too many connections)",
            ),
            (get(&self.conn.timed_out), "http timed out (no request)"),
        ] {
            if n > 0 {
                s.push_str(&format!(", {n} {what}"));
            }
        }
        s
    }
}

impl Counters {
    /// Every count, for `--stats` (`"oscquery": {...}`).
    pub fn to_json(&self) -> Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "http": get(&self.http),
            "http_bad": get(&self.http_bad),
            "http_accepted": get(&self.conn.accepted),
            "http_open": get(&self.conn.open),
            "http_refused": get(&self.conn.refused),
            "http_timed_out": get(&self.conn.timed_out),
            "ws_connections": get(&self.ws_connections),
            "ws_clients": get(&self.ws_clients),
            "ws_refused": get(&self.ws_refused),
            "ws_dropped": get(&self.ws_dropped),
            "ws_idle_dropped": get(&self.ws_idle_dropped),
            "ws_bad": get(&self.ws_bad),
            "ws_forbidden": get(&self.ws_forbidden),
            "ws_osc_ok": get(&self.ws_osc_ok),
            "ws_osc_bad": get(&self.ws_osc_bad),
            "ws_osc_full": get(&self.ws_osc_full),
            "packets": get(&self.packets),
            "path_changed": get(&self.path_changed),
        })
    }
}

/// What the poller publishes: the graph, its values, and the `/norm` ranges of its numbers.
#[derive(Debug, Default)]
struct Snapshot {
    model: Arc<ShowModel>,
    values: Values,
    ranges: Arc<Ranges>,
}

/// Every show's latest [`Snapshot`], in the shows' order.
#[derive(Debug, Default)]
struct Snapshots {
    list: Vec<Arc<Snapshot>>,
}

/// A show the service describes.
#[derive(Debug)]
pub struct ShowEntry {
    /// Its name: its subtree is `/NAME/framepipe/...`. `None` for the only show (its tree is
    /// `/framepipe/...`).
    pub name: Option<String>,
    /// Where OSC packets for it received over the WebSocket go (none: refused).
    pub commands: Option<CommandSender>,
}

struct Inner {
    info: HostInfo,
    counters: Arc<Counters>,
    snapshot: watch::Receiver<Arc<Snapshots>>,
    shows: Vec<ShowEntry>,
    /// Name → index in `shows` (empty for one unnamed show).
    index: HashMap<String, usize>,
    /// Every show's name, in order (for messages).
    names: Vec<String>,
}

impl Inner {
    /// Whether the shows are named (`/NAME/framepipe/...`), else one show at `/framepipe`.
    fn named(&self) -> bool {
        !(self.shows.len() == 1 && self.shows[0].name.is_none())
    }
}

/// The OSCQuery service: cheap to clone, shared by every request.
#[derive(Clone)]
pub struct OscQuery {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for OscQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OscQuery")
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

/// Reads the show and publishes what changed to the service; run it with [`Poller::run`]
/// on the runtime that serves the router.
#[derive(Debug)]
pub struct Poller {
    tx: watch::Sender<Arc<Snapshots>>,
    counters: Arc<Counters>,
}

/// What the poller keeps of one show between reads.
struct Polled<S> {
    source: S,
    model: Arc<ShowModel>,
    ranges: Arc<Ranges>,
    values: Values,
}

impl Poller {
    /// Reads `source` every `period` and publishes a snapshot when the graph's version or a
    /// value changed. Ends when the service is gone (every clone of [`OscQuery`] dropped).
    pub async fn run(self, source: impl ShowSource, period: Duration) {
        self.run_all(vec![source], period).await
    }

    /// Reads every show's source (in the order of the service's shows) every `period`, and
    /// publishes when any show's graph or value changed (the others' snapshots are shared,
    /// not copied). Ends when the service is gone.
    pub async fn run_all<S: ShowSource>(self, sources: Vec<S>, period: Duration) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut shows: Vec<Polled<S>> = sources
            .into_iter()
            .map(|source| Polled {
                source,
                model: Arc::new(ShowModel {
                    version: u64::MAX,
                    nodes: Vec::new(),
                    audio_bands: 0,
                }),
                ranges: Arc::new(Ranges::new()),
                values: Values::default(),
            })
            .collect();
        let mut list: Vec<Arc<Snapshot>> = shows
            .iter()
            .map(|_| Arc::new(Snapshot::default()))
            .collect();
        loop {
            tick.tick().await;
            if self.tx.is_closed() {
                return;
            }
            let mut any = false;
            for (p, slot) in shows.iter_mut().zip(list.iter_mut()) {
                let now = p.source.model();
                let new_graph = now.version != p.model.version || !Arc::ptr_eq(&now, &p.model);
                if new_graph {
                    p.values = Values::default();
                    p.ranges = Arc::new(crate::model::norm_ranges(&now));
                    p.model = now;
                }
                let changed = p.source.read(&p.model, &mut p.values);
                if changed || new_graph {
                    *slot = Arc::new(Snapshot {
                        model: Arc::clone(&p.model),
                        values: p.values.clone(),
                        ranges: Arc::clone(&p.ranges),
                    });
                    any = true;
                }
            }
            if any {
                add(&self.counters.snapshots);
                self.tx
                    .send_replace(Arc::new(Snapshots { list: list.clone() }));
            }
        }
    }
}

impl OscQuery {
    /// A service describing `info`'s host; `commands` takes OSC packets sent over the
    /// WebSocket (none: they are refused). Its state comes from the returned [`Poller`].
    pub fn new(info: HostInfo, commands: Option<CommandSender>) -> (OscQuery, Poller) {
        OscQuery::new_shows(
            info,
            vec![ShowEntry {
                name: None,
                commands,
            }],
        )
    }

    /// A service describing several shows (each named: `/NAME/framepipe/...`), fed by
    /// [`Poller::run_all`] with their sources in the same order.
    pub fn new_shows(info: HostInfo, shows: Vec<ShowEntry>) -> (OscQuery, Poller) {
        let counters = Arc::new(Counters::default());
        let (tx, rx) = watch::channel(Arc::new(Snapshots {
            list: shows
                .iter()
                .map(|_| Arc::new(Snapshot::default()))
                .collect(),
        }));
        let index = shows
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.name.clone().map(|n| (n, i)))
            .collect();
        let names = shows
            .iter()
            .map(|s| s.name.clone().unwrap_or_default())
            .collect();
        (
            OscQuery {
                inner: Arc::new(Inner {
                    info,
                    counters: Arc::clone(&counters),
                    snapshot: rx,
                    shows,
                    index,
                    names,
                }),
            },
            Poller { tx, counters },
        )
    }

    /// Its counts.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.inner.counters)
    }

    /// The router: every path answers (GET: JSON; a WebSocket upgrade on any path: the
    /// LISTEN stream). Mount it where it should be served (`Router::merge`/`nest_service`).
    pub fn router(&self) -> Router {
        Router::new().fallback(http).with_state(self.clone())
    }

    fn snapshots(&self) -> Arc<Snapshots> {
        Arc::clone(&self.inner.snapshot.borrow())
    }

    /// The show a path is in, and the path within the show's own tree: `/NAME/framepipe/x` →
    /// (NAME's index, `/framepipe/x`); `/NAME` → (index, `/`). One unnamed show: (0, path).
    /// `None` for the root of several shows, or no such show.
    fn locate<'p>(&self, path: &'p str) -> Option<(usize, &'p str)> {
        if !self.inner.named() {
            return Some((0, path));
        }
        let rest = path.strip_prefix('/')?;
        let (name, within) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let i = *self.inner.index.get(name)?;
        Some((i, within))
    }

    fn host_info(&self) -> Value {
        let mut v = json!({
            "NAME": self.inner.info.name,
            "OSC_TRANSPORT": "UDP",
            "EXTENSIONS": {
                "ACCESS": true,
                "VALUE": true,
                "RANGE": true,
                "DESCRIPTION": true,
                "TAGS": false,
                "EXTENDED_TYPE": false,
                "UNIT": false,
                "CRITICAL": false,
                "CLIPMODE": false,
                "LISTEN": true,
                "PATH_CHANGED": true,
                "PATH_ADDED": false,
                "PATH_REMOVED": false,
                "PATH_RENAMED": false,
            },
        });
        if let Some(osc) = self.inner.info.osc {
            v["OSC_PORT"] = json!(osc.port());
            if !osc.ip().is_unspecified() {
                v["OSC_IP"] = json!(osc.ip().to_string());
            }
        }
        v
    }
}

/// `%XX` escapes decoded (a node named `stamp#2` is asked for as `/framepipe/stamp%232`);
/// `None` for an escape that is not valid UTF-8.
fn percent_decode(path: &str) -> Option<String> {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn json_response(v: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string(v).unwrap_or_else(|_| "{}".into()),
    )
        .into_response()
}

fn bad(q: &OscQuery, status: StatusCode, why: String) -> Response {
    add(&q.inner.counters.http_bad);
    (status, why).into_response()
}

async fn http(
    State(q): State<OscQuery>,
    method: Method,
    uri: Uri,
    ws: std::result::Result<
        WebSocketUpgrade,
        axum::extract::ws::rejection::WebSocketUpgradeRejection,
    >,
) -> Response {
    if let Ok(ws) = ws {
        return upgrade(q, ws);
    }
    add(&q.inner.counters.http);
    if method != Method::GET && method != Method::HEAD {
        return bad(&q, StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into());
    }
    let attr = query_attribute(uri.query());
    if attr == "HOST_INFO" {
        return json_response(&q.host_info());
    }
    let snaps = q.snapshots();
    if q.inner.named() {
        let Some(path) = percent_decode(uri.path()) else {
            return bad(&q, StatusCode::BAD_REQUEST, "bad path encoding\n".into());
        };
        return shows_http(&q, &snaps, &path, attr);
    }
    let snap = &snaps.list[0];
    let a = answer(&snap.model, &snap.values, uri.path(), uri.query());
    if a.status.is_client_error() {
        add(&q.inner.counters.http_bad);
    }
    match a.json {
        Some(v) => json_response(&v),
        None => (a.status, a.text).into_response(),
    }
}

/// `?VALUE`, `?HOST_INFO`: the attribute a query asks for (anything after a `&` or `=` is
/// ignored); empty for none.
fn query_attribute(query: Option<&str>) -> &str {
    query
        .map(|s| s.split(['&', '=']).next().unwrap_or(""))
        .unwrap_or("")
}

/// The answer to an HTTP query on one show's namespace: a status and a JSON body, or a text
/// (why not).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// 200, 204 (a value that cannot be read), 400, 404.
    pub status: StatusCode,
    /// The JSON answered (200).
    pub json: Option<Value>,
    /// Why not (4xx), one line; a path or an attribute quoted in it is cut
    /// (`framepipe_core::quote`).
    pub text: String,
}

/// Answers `GET PATH?QUERY` (the request target as received: `path` still %-encoded) on one
/// show's namespace (`model`, `values`). `HOST_INFO` is the server's, not answered here. What
/// the HTTP route runs for one show, and what the `oscquery_query` fuzz target checks.
pub fn answer(model: &ShowModel, values: &Values, path: &str, query: Option<&str>) -> Answer {
    let refuse = |status: StatusCode, text: String| Answer {
        status,
        json: None,
        text,
    };
    let ok = |json: Value| Answer {
        status: StatusCode::OK,
        json: Some(json),
        text: String::new(),
    };
    let attr = query_attribute(query);
    let Some(path) = percent_decode(path) else {
        return refuse(StatusCode::BAD_REQUEST, "bad path encoding\n".into());
    };
    let Some(place) = tree::resolve(model, &path) else {
        return refuse(
            StatusCode::NOT_FOUND,
            format!("no OSC node at {}\n", quote(&path)),
        );
    };
    if attr.is_empty() {
        return ok(Value::Object(tree::describe(model, values, place)));
    }
    if attr == "VALUE" && !tree::readable(values, place) {
        return refuse(StatusCode::NO_CONTENT, String::new());
    }
    match tree::attribute(model, values, place, attr) {
        Ok(Some(v)) => ok(json!({ attr: v })),
        Ok(None) => ok(json!({})),
        Err(tree::UnknownAttribute) => {
            refuse(StatusCode::BAD_REQUEST, unknown_attribute_text(attr))
        }
    }
}

fn unknown_attribute_text(attr: &str) -> String {
    format!(
        "unknown attribute {}; expected one of: FULL_PATH, CONTENTS, TYPE, VALUE, RANGE, \
         ACCESS, DESCRIPTION, HOST_INFO\n",
        quote(attr)
    )
}

fn unknown_attribute(q: &OscQuery, attr: &str) -> Response {
    bad(q, StatusCode::BAD_REQUEST, unknown_attribute_text(attr))
}

/// `/NAME` + `path` (a show's own path, `/` for its root).
fn show_path(name: &str, path: &str) -> String {
    if path == "/" {
        format!("/{name}")
    } else {
        format!("/{name}{path}")
    }
}

/// Puts every FULL_PATH of a show's description under `/NAME`.
fn prefix_paths(v: &mut Map<String, Value>, name: &str) {
    if let Some(Value::String(p)) = v.get_mut("FULL_PATH") {
        *p = show_path(name, p);
    }
    if let Some(Value::Object(kids)) = v.get_mut("CONTENTS") {
        for kid in kids.values_mut() {
            if let Value::Object(k) = kid {
                prefix_paths(k, name);
            }
        }
    }
}

/// The description of show `i`'s place at `within` (its own path), under `/NAME`.
fn describe_in(
    q: &OscQuery,
    snaps: &Snapshots,
    i: usize,
    within: &str,
) -> Option<Map<String, Value>> {
    let snap = &snaps.list[i];
    let name = &q.inner.names[i];
    let place = tree::resolve(&snap.model, within)?;
    let mut m = tree::describe(&snap.model, &snap.values, place);
    prefix_paths(&mut m, name);
    if place == Place::Root {
        m.insert("DESCRIPTION".into(), json!(format!("show {name}")));
    }
    Some(m)
}

/// The root of several shows: one container per show.
fn describe_shows(q: &OscQuery, snaps: &Snapshots) -> Map<String, Value> {
    let mut kids = Map::new();
    for (i, name) in q.inner.names.iter().enumerate() {
        if let Some(d) = describe_in(q, snaps, i, "/") {
            kids.insert(name.clone(), Value::Object(d));
        }
    }
    let mut m = Map::new();
    m.insert("FULL_PATH".into(), json!("/"));
    m.insert(
        "DESCRIPTION".into(),
        json!(format!("framepipe: {} shows", q.inner.names.len())),
    );
    m.insert("ACCESS".into(), json!(0));
    m.insert("CONTENTS".into(), Value::Object(kids));
    m
}

/// An HTTP query on the namespace of several shows (`/`, `/NAME`, `/NAME/framepipe/...`).
fn shows_http(q: &OscQuery, snaps: &Snapshots, path: &str, attr: &str) -> Response {
    let trimmed = match path.strip_suffix('/') {
        Some(p) if !p.is_empty() => p,
        _ => path,
    };
    let described = if trimmed.is_empty() || trimmed == "/" {
        Some(describe_shows(q, snaps))
    } else {
        q.locate(trimmed)
            .and_then(|(i, within)| describe_in(q, snaps, i, within))
    };
    let Some(d) = described else {
        let why = match q.locate(trimmed) {
            None => format!(
                "no OSC node at {}: no show named {} (shows: {}; addresses are /NAME/framepipe/...)\n",
                quote(path),
                quote(trimmed.trim_start_matches('/').split('/').next().unwrap_or("")),
                some_names(&q.inner.names)
            ),
            Some(_) => format!("no OSC node at {}\n", quote(path)),
        };
        return bad(q, StatusCode::NOT_FOUND, why);
    };
    if attr.is_empty() {
        return json_response(&Value::Object(d));
    }
    const KNOWN: [&str; 7] = [
        "FULL_PATH",
        "CONTENTS",
        "TYPE",
        "VALUE",
        "RANGE",
        "ACCESS",
        "DESCRIPTION",
    ];
    if !KNOWN.contains(&attr) {
        return unknown_attribute(q, attr);
    }
    let readable = d.get("ACCESS").and_then(Value::as_u64).unwrap_or(0) & 1 == 1;
    if attr == "VALUE" && !readable {
        return StatusCode::NO_CONTENT.into_response();
    }
    match d.get(attr) {
        Some(v) => json_response(&json!({ attr: v })),
        None => json_response(&json!({})),
    }
}

/// `a, b, c, d, e and 195 more`.
fn some_names(names: &[String]) -> String {
    let more = names.len().saturating_sub(5);
    let mut t = names
        .iter()
        .take(5)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if more > 0 {
        t.push_str(&format!(" and {more} more"));
    }
    t
}

fn upgrade(q: OscQuery, ws: WebSocketUpgrade) -> Response {
    let c = &q.inner.counters;
    // Counted here, so that a burst of upgrades cannot pass the limit before any runs.
    if c.ws_clients.fetch_add(1, Ordering::Relaxed) >= MAX_CLIENTS {
        c.ws_clients.fetch_sub(1, Ordering::Relaxed);
        add(&c.ws_refused);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many OSCQuery clients ({MAX_CLIENTS}): close one, or try again once an \
                 idle one is dropped\n"
            ),
        )
            .into_response();
    }
    add(&c.ws_connections);
    ws.max_message_size(MAX_WS_MESSAGE)
        .max_frame_size(MAX_WS_MESSAGE)
        .on_failed_upgrade({
            let q = q.clone();
            move |_| {
                q.inner.counters.ws_clients.fetch_sub(1, Ordering::Relaxed);
            }
        })
        .on_upgrade(move |socket| async move {
            client(&q, socket).await;
            q.inner.counters.ws_clients.fetch_sub(1, Ordering::Relaxed);
        })
}

/// One listened path: its show, its path in the show's own tree, and what was sent last (not
/// sent again while unchanged).
struct Listen {
    show: usize,
    within: String,
    last: Option<Vec<OscType>>,
}

/// Sends `msg` within [`SEND_TIMEOUT`]; false when the client is gone or too slow.
async fn send(socket: &mut WebSocket, msg: Message, counters: &Counters) -> bool {
    match tokio::time::timeout(SEND_TIMEOUT, socket.send(msg)).await {
        Ok(Ok(())) => true,
        Ok(Err(_)) => false,
        Err(_) => {
            add(&counters.ws_dropped);
            false
        }
    }
}

fn osc_packet(addr: &str, args: Vec<OscType>) -> Option<Message> {
    let packet = OscPacket::Message(OscMessage {
        addr: addr.to_string(),
        args,
    });
    rosc::encoder::encode(&packet)
        .ok()
        .map(|b| Message::Binary(Bytes::from(b)))
}

/// Sends every listened path whose value differs from what it was last sent.
async fn send_changes(
    socket: &mut WebSocket,
    snaps: &Snapshots,
    listens: &mut HashMap<String, Listen>,
    counters: &Counters,
) -> bool {
    for (path, l) in listens.iter_mut() {
        let Some(snap) = snaps.list.get(l.show) else {
            continue;
        };
        let Some(place) = tree::resolve(&snap.model, &l.within) else {
            continue;
        };
        let args = tree::current_args(&snap.model, &snap.values, place);
        if args.is_none() || args == l.last {
            continue;
        }
        l.last.clone_from(&args);
        if let Some(m) = args.and_then(|a| osc_packet(path, a)) {
            if !send(socket, m, counters).await {
                return false;
            }
            add(&counters.packets);
        }
    }
    true
}

async fn client(q: &OscQuery, mut socket: WebSocket) {
    let counters = &*q.inner.counters;
    let mut rx = q.inner.snapshot.clone();
    let mut snap: Arc<Snapshots> = Arc::clone(&rx.borrow_and_update());
    let mut listens: HashMap<String, Listen> = HashMap::new();
    let mut liveness = Liveness::default();
    let mut ping = Liveness::ticker();
    loop {
        tokio::select! {
            _ = ping.tick() => {
                if liveness.idle() {
                    add(&counters.ws_idle_dropped);
                    return;
                }
                if !send(&mut socket, Message::Ping(Bytes::new()), counters).await {
                    return;
                }
            }
            msg = socket.recv() => {
                let msg = match msg {
                    None => return,
                    Some(Ok(m)) => {
                        liveness.heard();
                        m
                    }
                    // Too large, or not WebSocket: counted; the connection cannot go on.
                    // A client gone without a close is not bad input.
                    Some(Err(e)) => {
                        if is_bad_input(e) {
                            add(&counters.ws_bad);
                        }
                        return;
                    }
                };
                match msg {
                    Message::Text(text) => {
                        let Some((cmd, path)) = parse_command(text.as_str()) else {
                            add(&counters.ws_bad);
                            continue;
                        };
                        match cmd {
                            WsCommand::Listen => {
                                let at = q.locate(&path).map(|(i, w)| (i, w.to_string()));
                                let place = at.as_ref().and_then(|(i, w)| tree::resolve(&snap.list[*i].model, w))
                                    .filter(|p| !matches!(p, Place::Root | Place::Prefix | Place::Node(_)));
                                let (Some(_), Some((show, within))) = (place, at) else {
                                    add(&counters.ws_bad);
                                    continue;
                                };
                                if listens.len() >= MAX_LISTENS {
                                    add(&counters.ws_bad);
                                    continue;
                                }
                                listens.entry(path).or_insert(Listen { show, within, last: None });
                                // The current value at once.
                                if !send_changes(&mut socket, &snap, &mut listens, counters).await {
                                    return;
                                }
                            }
                            WsCommand::Ignore => {
                                listens.remove(&path);
                            }
                        }
                    }
                    Message::Binary(bytes) => post_osc(q, &snap, &bytes),
                    Message::Close(_) => return,
                    Message::Ping(_) | Message::Pong(_) => {}
                }
            }
            changed = rx.changed() => {
                if changed.is_err() {
                    return;
                }
                let next: Arc<Snapshots> = Arc::clone(&rx.borrow_and_update());
                for (i, (a, b)) in snap.list.iter().zip(&next.list).enumerate() {
                    if a.model.version == b.model.version {
                        continue;
                    }
                    let data = if q.inner.named() { format!("/{}", q.inner.names[i]) } else { "/".into() };
                    let notice = json!({ "COMMAND": "PATH_CHANGED", "DATA": data }).to_string();
                    if !send(&mut socket, Message::Text(notice.into()), counters).await {
                        return;
                    }
                    add(&counters.path_changed);
                }
                snap = next;
                if !send_changes(&mut socket, &snap, &mut listens, counters).await {
                    return;
                }
            }
        }
    }
}

/// Whether a WebSocket receive error is the client's bad input (a message over the limit, a
/// protocol violation) rather than a connection that went away.
fn is_bad_input(e: axum::Error) -> bool {
    use tungstenite::error::{Error as WsError, ProtocolError};
    match e.into_inner().downcast::<WsError>() {
        Ok(e) => match *e {
            WsError::Capacity(_) | WsError::Utf8(_) => true,
            WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => false,
            WsError::Protocol(_) => true,
            _ => false,
        },
        Err(_) => false,
    }
}

enum WsCommand {
    Listen,
    Ignore,
}

/// `{"COMMAND": "LISTEN"|"IGNORE", "DATA": "/path"}`.
fn parse_command(text: &str) -> Option<(WsCommand, String)> {
    let v: Value = serde_json::from_str(text).ok()?;
    let cmd = match v.get("COMMAND")?.as_str()? {
        "LISTEN" => WsCommand::Listen,
        "IGNORE" => WsCommand::Ignore,
        _ => return None,
    };
    Some((cmd, v.get("DATA")?.as_str()?.to_string()))
}

/// An OSC packet received over the WebSocket: posted like one received over UDP (split by
/// show when there are several).
fn post_osc(q: &OscQuery, snaps: &Snapshots, bytes: &[u8]) {
    let counters = &*q.inner.counters;
    let packet = match osc_in::decode(bytes) {
        Ok(p) => p,
        Err(_) => {
            add(&counters.ws_osc_bad);
            return;
        }
    };
    if !q.inner.named() {
        post_show(q, &snaps.list[0], 0, &packet);
        return;
    }
    let parts = osc_in::split_by_show(&packet, &q.inner.index, &q.inner.names, |_| {
        add(&counters.ws_osc_bad)
    });
    for (i, p) in parts {
        post_show(q, &snaps.list[i], i, &p);
    }
}

/// Posts one show's packet (its addresses within the show) to its queue.
fn post_show(q: &OscQuery, snap: &Snapshot, show: usize, packet: &OscPacket) {
    let counters = &*q.inner.counters;
    let Some(tx) = &q.inner.shows[show].commands else {
        add(&counters.ws_osc_bad);
        return;
    };
    if snap.model.nodes.is_empty() {
        // Not polled yet: without the graph, a text property (which no OSC message may set,
        // issue #21) cannot be told from another.
        add(&counters.ws_osc_bad);
        return;
    }
    let cmds = osc_in::packet_commands(packet, &snap.ranges);
    for _ in &cmds.refused {
        add(&counters.ws_osc_bad);
    }
    counters
        .ws_osc_ok
        .fetch_add(cmds.ignored as u64, Ordering::Relaxed);
    for (cmd, n) in cmds.commands {
        let n = n as u64;
        if !Command::is_value_or_transport(&cmd) {
            // Least privilege (issue #21): never an edit from a controller.
            counters.ws_forbidden.fetch_add(n, Ordering::Relaxed);
            continue;
        }
        match tx.post(cmd) {
            Ok(_) => counters.ws_osc_ok.fetch_add(n, Ordering::Relaxed),
            Err(_) => counters.ws_osc_full.fetch_add(n, Ordering::Relaxed),
        };
    }
}

/// How [`serve`] runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where to listen (port 0: one the OS chooses).
    pub addr: SocketAddr,
    /// HOST_INFO.
    pub info: HostInfo,
    /// Advertise `_oscjson._tcp` (and `_osc._udp` when `info.osc` is set) over mDNS.
    pub mdns: bool,
}

/// A running standalone server (thread `fp-oscquery`).
pub struct Server {
    local: SocketAddr,
    counters: Arc<Counters>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    mdns: Option<crate::mdns::Advert>,
    /// What became of the mDNS advert: a line to print.
    pub mdns_note: Option<String>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Its counts.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    /// Withdraws the mDNS advert, closes every connection and waits for the thread.
    pub fn finish(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(m) = self.mdns.take() {
            m.withdraw();
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Binds `options.addr` and serves OSCQuery from `source` on a thread of its own until
/// [`Server::finish`]. OSC packets over the WebSocket are posted to `commands`.
pub fn serve(
    options: ServeOptions,
    source: impl ShowSource,
    commands: Option<CommandSender>,
) -> Result<Server> {
    serve_shows(
        options,
        vec![(
            ShowEntry {
                name: None,
                commands,
            },
            source,
        )],
    )
}

/// Binds `options.addr` and serves OSCQuery for several shows (each named in its
/// [`ShowEntry`]: `/NAME/framepipe/...`) on one thread, with one poller, one HOST_INFO and
/// one advert, until [`Server::finish`].
pub fn serve_shows<S: ShowSource>(
    options: ServeOptions,
    shows: Vec<(ShowEntry, S)>,
) -> Result<Server> {
    let listener = TcpListener::bind(options.addr).map_err(|e| Error::Bind {
        addr: options.addr,
        source: e,
    })?;
    let local = listener.local_addr().unwrap_or(options.addr);
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Io("setting the listener non-blocking", e))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Io("starting the runtime", e))?;
    let (entries, sources): (Vec<ShowEntry>, Vec<S>) = shows.into_iter().unzip();
    let (service, poller) = OscQuery::new_shows(options.info.clone(), entries);
    let counters = service.counters();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("fp-oscquery".into())
        .spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let limits = ConnLimits {
                    max_open: MAX_CONNECTIONS,
                    header_timeout: HEADER_TIMEOUT,
                    what: "OSCQuery",
                };
                let router = service.router();
                let conn = Arc::clone(&service.inner.counters.conn);
                drop(service);
                tokio::select! {
                    _ = bounded::serve(listener, router, limits, conn) => {}
                    _ = poller.run_all(sources, POLL_PERIOD) => {}
                    _ = stop_rx => {}
                }
            });
            // Dropping the runtime ends every connection's task.
            drop(rt);
        })
        .map_err(|e| Error::Io("starting the fp-oscquery thread", e))?;
    let (mdns, mdns_note) = if options.mdns {
        match crate::mdns::Advert::start(&options.info, local) {
            Ok((a, note)) => (Some(a), Some(note)),
            Err(e) => (None, Some(format!("mDNS not advertised: {e}"))),
        }
    } else {
        (None, None)
    };
    Ok(Server {
        local,
        counters,
        stop: Some(stop_tx),
        thread: Some(thread),
        mdns,
        mdns_note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_decode() {
        assert_eq!(
            percent_decode("/framepipe/stamp%232/x").as_deref(),
            Some("/framepipe/stamp#2/x")
        );
        assert_eq!(percent_decode("/a%2").as_deref(), Some("/a%2"));
        assert_eq!(percent_decode("/a%zz%").as_deref(), Some("/a%zz%"));
        assert_eq!(percent_decode("/%ff"), None);
    }

    #[test]
    fn ws_commands_parse() {
        assert!(matches!(
            parse_command(r#"{"COMMAND":"LISTEN","DATA":"/framepipe/a/b"}"#),
            Some((WsCommand::Listen, p)) if p == "/framepipe/a/b"
        ));
        assert!(matches!(
            parse_command(r#"{"COMMAND":"IGNORE","DATA":"/x"}"#),
            Some((WsCommand::Ignore, _))
        ));
        for bad in [
            "",
            "{",
            r#"{"COMMAND":"LISTEN"}"#,
            r#"{"COMMAND":"SHOUT","DATA":"/x"}"#,
            r#"{"COMMAND":"LISTEN","DATA":3}"#,
            "[]",
        ] {
            assert!(parse_command(bad).is_none(), "{bad}");
        }
    }
}
