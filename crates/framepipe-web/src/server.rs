//! The `fp-web` thread: the HTTP routes, the request guard, one task per WebSocket client and
//! the pump that pushes each show's state to its clients.
//!
//! Routes: `/shows/NAME/` (the page of show NAME), `/shows/NAME/ws`, `/shows/NAME/preview.jpg`
//! (its assets beside it), `/shows.json` (every show's name, rate, late frames and state) and
//! `/shows/` (the list), `/shows/NAME/thumb/NODE/N.png` (a deck's clip, [`crate::thumbs`]).
//! With one show, `/`, `/ws`, `/preview.jpg` and `/thumb/...` are that show's, as before; with
//! several, `/` is the list and the unprefixed show routes answer 404 naming the shows.

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Body;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use framepipe_control::{CommandSender, Reply};
use framepipe_runtime::{Counters, ShowView, ValuesView};
use serde_json::Value;
use tokio::sync::{mpsc, Notify, Semaphore};

use crate::auth;
use crate::bounded::{self, ConnLimits, Liveness};
use crate::counters::{bump, WebCounters};
use crate::policy::{parse_message, Policy, Refusal};
use crate::preview::PreviewSlot;
use crate::protocol;
use crate::thumbs::Thumbs;
use crate::{
    Engine, HEADER_TIMEOUT, MAX_CLIENTS, MAX_CONNECTIONS, MAX_MESSAGE, POLL, RATE_BURST,
    RATE_PER_S, SEND_QUEUE, SEND_TIMEOUT,
};

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");
const SHOWS_HTML: &str = include_str!("assets/shows.html");
const SHOWS_JS: &str = include_str!("assets/shows.js");

/// Tickets remembered for matching replies to pages, at most.
const TICKETS: usize = 4096;

/// Looks at the scenes folder (a page's hello, a `load`) running at once, at most: each on
/// tokio's blocking pool, never on the server's one async thread, so that a slow disk stalls
/// no other page and no ping; a hung one holds its place, so hung ones stay this few.
const DISK_LOOKUPS: usize = 4;
/// How long a page waits for one (the scenes are then not offered, the `load` refused).
const DISK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// One connected page, as the pump and the reply tap see it.
struct Client {
    id: u64,
    tx: mpsc::Sender<Utf8Bytes>,
    /// A message was dropped: send the whole state again.
    resync: Arc<AtomicBool>,
}

/// One show as the server keeps it: what its pages read and post to, and its pages.
pub(crate) struct ShowState {
    name: String,
    commands: Mutex<Option<CommandSender>>,
    /// Its return path, read only for whether its engine is gone (the show ended).
    replies: framepipe_control::Replies,
    view: ShowView,
    counters: Arc<Counters>,
    preview: Arc<PreviewSlot>,
    preview_tap: Option<String>,
    clients: Mutex<Vec<Client>>,
    /// Ticket → (client, the page's request id). Tickets are per command queue: per show.
    tickets: Mutex<HashMap<u64, (u64, Option<u64>)>>,
    /// The last stats message, for a page that just connected.
    last_stats: Mutex<Option<Utf8Bytes>>,
    /// Frames out a second, as the pump measured it last (`f64` bits).
    fps: AtomicU64,
    /// With `--audio`: its bands for the page's meters (the hello's `audio`) and their count.
    audio: Option<(Value, usize)>,
}

/// Everything the routes, the client tasks and the pump share.
pub(crate) struct Shared {
    shows: Vec<ShowState>,
    /// Name → index in `shows`.
    index: HashMap<String, usize>,
    web: Arc<WebCounters>,
    token: Option<String>,
    loopback: bool,
    /// What a page may post beyond values and transport.
    policy: Policy,
    /// Places for looks at the scenes folder and for thumbnails made ([`DISK_LOOKUPS`]).
    disk: Arc<Semaphore>,
    /// The decks' thumbnails made so far (by file: every show's).
    thumbs: Arc<Thumbs>,
    next_client: AtomicU64,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("shows", &self.shows.len())
            .field("loopback", &self.loopback)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn text(v: &Value) -> Utf8Bytes {
    Utf8Bytes::from(v.to_string())
}

/// A show served: its name (`/shows/NAME/`), what it reads and posts to, its preview's slot.
pub(crate) struct ServedShow {
    pub(crate) name: String,
    pub(crate) engine: Engine,
    pub(crate) preview: Arc<PreviewSlot>,
}

/// How many show names an error lists at most.
const NAMES_LISTED: usize = 5;

impl Shared {
    pub(crate) fn new(
        shows: Vec<ServedShow>,
        web: Arc<WebCounters>,
        token: Option<String>,
        loopback: bool,
        policy: Policy,
    ) -> Self {
        let index = shows
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.clone(), i))
            .collect();
        let shows = shows
            .into_iter()
            .map(|s| ShowState {
                name: s.name,
                replies: s.engine.commands.replies(),
                commands: Mutex::new(Some(s.engine.commands)),
                view: s.engine.view,
                counters: s.engine.counters,
                preview: s.preview,
                preview_tap: s.engine.preview_tap,
                clients: Mutex::new(Vec::new()),
                tickets: Mutex::new(HashMap::new()),
                last_stats: Mutex::new(None),
                fps: AtomicU64::new(0f64.to_bits()),
                audio: s
                    .engine
                    .audio
                    .as_ref()
                    .map(|b| (protocol::audio_bands_json(b), b.count())),
            })
            .collect();
        Shared {
            shows,
            index,
            web,
            token,
            loopback,
            policy,
            disk: Arc::new(Semaphore::new(DISK_LOOKUPS)),
            thumbs: Arc::new(Thumbs::default()),
            next_client: AtomicU64::new(1),
        }
    }

    /// Drops every command sender (the run is over, or the server stopped).
    pub(crate) fn close(&self) {
        for show in &self.shows {
            lock(&show.commands).take();
            lock(&show.clients).clear();
        }
    }

    /// Whether several shows are served (`/` lists them).
    fn several(&self) -> bool {
        self.shows.len() > 1
    }

    /// The show named `name`.
    fn show(&self, name: &str) -> Option<&ShowState> {
        self.index.get(name).map(|&i| &self.shows[i])
    }

    /// `a, b, c, d, e and 195 more`.
    fn some_names(&self) -> String {
        let more = self.shows.len().saturating_sub(NAMES_LISTED);
        let mut t = self
            .shows
            .iter()
            .take(NAMES_LISTED)
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        if more > 0 {
            t.push_str(&format!(" and {more} more"));
        }
        t
    }

    /// The 404 for a show name that is not served.
    fn no_show(&self, name: &str) -> Response {
        (
            StatusCode::NOT_FOUND,
            format!("no show named '{name}' (shows: {})\n", self.some_names()),
        )
            .into_response()
    }

    /// The 404 for an unprefixed show route when several shows run.
    fn which_show(&self, what: &str) -> Response {
        (
            StatusCode::NOT_FOUND,
            format!(
                "{} shows run; {what} is per show: /shows/NAME{what} (shows: {})\n",
                self.shows.len(),
                self.some_names()
            ),
        )
            .into_response()
    }

    /// Every show's name, rate, late frames and state, for the list (`/shows.json`).
    fn list(&self) -> Value {
        let shows: Vec<Value> = self
            .shows
            .iter()
            .map(|s| {
                let state = if s.replies.engine_gone() {
                    "ended"
                } else if s.counters.paused() {
                    "paused"
                } else {
                    "running"
                };
                serde_json::json!({
                    "name": s.name,
                    "fps": f64::from_bits(s.fps.load(Ordering::Relaxed)),
                    "frames": s.counters.frames_out(),
                    "late": s.counters.late(),
                    "repeated": s.counters.repeated(),
                    "lateness_peak_us": s.counters.lateness_peak_us(),
                    "state": state,
                    "clients": lock(&s.clients).len(),
                })
            })
            .collect();
        serde_json::json!({ "shows": shows, "web": self.web.snapshot() })
    }

    /// A reply from show `show`'s engine: to its poster with the request id, to the show's
    /// other pages as a log.
    pub(crate) fn deliver(&self, show: usize, r: &Reply) {
        if let Some(s) = self.shows.get(show) {
            s.deliver(&self.web, r);
        }
    }

    /// Runs `f` (a look at the scenes folder) on tokio's blocking pool, at most
    /// [`DISK_LOOKUPS`] at once; `None` when it has not finished within [`DISK_TIMEOUT`].
    async fn on_disk<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let deadline = tokio::time::Instant::now() + DISK_TIMEOUT;
        let place = tokio::time::timeout_at(deadline, Arc::clone(&self.disk).acquire_owned())
            .await
            .ok()?
            .ok()?;
        let task = tokio::task::spawn_blocking(move || {
            let _place = place;
            f()
        });
        tokio::time::timeout_at(deadline, task).await.ok()?.ok()
    }

    /// Parses one page message, admits it by [`Policy::admit`] (a `load`, which reads the
    /// scenes folder's entry, off this thread) and posts it to `show`; what to answer when it
    /// is not posted.
    async fn handle(&self, show: &ShowState, client: u64, msg: &str) -> Option<Value> {
        let graph = show.view.graph();
        let (id, parsed) = parse_message(msg);
        let admitted = match parsed {
            Ok(cmd) if Policy::reads_disk(&cmd) => {
                let (policy, tap) = (self.policy.clone(), show.preview_tap.clone());
                let word = cmd.word();
                self.on_disk(move || policy.admit(cmd, tap.as_deref(), &graph))
                    .await
                    .unwrap_or_else(|| {
                        Err(format!(
                            "{word}: the --scenes folder did not answer within {} s; not \
                             applied",
                            DISK_TIMEOUT.as_secs()
                        ))
                    })
                    .map_err(Refusal::Forbidden)
            }
            Ok(cmd) => self
                .policy
                .admit(cmd, show.preview_tap.as_deref(), &graph)
                .map_err(Refusal::Forbidden),
            Err(refusal) => Err(refusal),
        };
        let cmd = match admitted {
            Ok(c) => c,
            Err(refusal) => {
                bump(match refusal {
                    Refusal::Bad(_) => &self.web.bad,
                    Refusal::Forbidden(_) => &self.web.forbidden,
                });
                return Some(protocol::error_msg(id, refusal.reason()));
            }
        };
        let commands = lock(&show.commands);
        let Some(tx) = commands.as_ref() else {
            return Some(protocol::error_msg(id, "the run is over"));
        };
        // Under the tickets lock, so that the reply cannot be delivered before it is known.
        let mut tickets = lock(&show.tickets);
        match tx.post(cmd) {
            Ok(ticket) => {
                bump(&self.web.commands);
                if tickets.len() >= TICKETS {
                    let oldest = ticket.0.saturating_sub(TICKETS as u64 / 2);
                    tickets.retain(|t, _| *t >= oldest);
                }
                tickets.insert(ticket.0, (client, id));
                None
            }
            Err(full) => {
                bump(&self.web.queue_full);
                Some(protocol::error_msg(
                    id,
                    &format!("command queue full; not applied: {}", full.0),
                ))
            }
        }
    }
}

impl ShowState {
    /// Queues `msg` for one client; a full queue drops it (counted) and asks for a resync.
    fn send_to(&self, web: &WebCounters, c: &Client, msg: Utf8Bytes) {
        match c.tx.try_send(msg) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                bump(&web.send_dropped);
                c.resync.store(true, Ordering::Relaxed);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    fn broadcast(&self, web: &WebCounters, msg: &Value) {
        let t = text(msg);
        for c in lock(&self.clients).iter() {
            self.send_to(web, c, t.clone());
        }
    }

    fn deliver(&self, web: &WebCounters, r: &Reply) {
        let owner = lock(&self.tickets).remove(&r.ticket.0);
        let to_all = text(&protocol::reply_msg(r, None));
        let to_owner = owner.map(|(_, id)| text(&protocol::reply_msg(r, id)));
        for c in lock(&self.clients).iter() {
            match (&owner, &to_owner) {
                (Some((client, _)), Some(m)) if *client == c.id => self.send_to(web, c, m.clone()),
                _ => self.send_to(web, c, to_all.clone()),
            }
        }
    }

    /// The whole state for one page: graph and every value.
    fn full_state(&self) -> [Value; 2] {
        let g = self.view.graph();
        let mut v = ValuesView::default();
        self.view.read(&mut v);
        let values = protocol::values_msg(&v, None).unwrap_or(Value::Null);
        [
            protocol::graph_msg(&g, self.preview_tap.as_deref(), Some(&self.name)),
            values,
        ]
    }
}

/// Runs the server until `stop`, then drops every task.
pub(crate) fn serve(
    runtime: tokio::runtime::Runtime,
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: Arc<Notify>,
) {
    runtime.block_on(async {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                let _ = writeln_err(&format!("framepipe: --web: cannot serve: {e}"));
                return;
            }
        };
        let app = Router::new()
            .route("/", get(root))
            .route("/app.js", get(app_js))
            .route("/style.css", get(style_css))
            .route("/shows.js", get(shows_js))
            .route("/preview.jpg", get(preview))
            .route("/ws", get(ws))
            .route("/shows.json", get(shows_json))
            .route("/shows", get(shows_redirect))
            .route("/shows/", get(shows_page))
            .route("/shows/{name}", get(show_redirect))
            .route("/shows/{name}/", get(show_index))
            .route("/shows/{name}/app.js", get(app_js))
            .route("/shows/{name}/style.css", get(style_css))
            .route("/shows/{name}/preview.jpg", get(show_preview))
            .route("/shows/{name}/ws", get(show_ws))
            .route("/thumb/{node}/{file}", get(thumb))
            .route("/shows/{name}/thumb/{node}/{file}", get(show_thumb))
            .layer(middleware::from_fn_with_state(Arc::clone(&shared), guard))
            .with_state(Arc::clone(&shared));
        tokio::spawn(pump(Arc::clone(&shared)));
        let limits = ConnLimits {
            max_open: MAX_CONNECTIONS,
            header_timeout: HEADER_TIMEOUT,
            what: "the web page",
        };
        let conn = Arc::clone(&shared.web.conn);
        tokio::select! {
            _ = bounded::serve(listener, app, limits, conn) => {}
            _ = stop.notified() => {}
        }
    });
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
}

fn writeln_err(line: &str) -> std::io::Result<()> {
    use std::io::Write;
    writeln!(std::io::stderr(), "{line}")
}

/// Checks every request: loopback `Host` on a loopback server, the token, the WebSocket
/// `Origin`.
async fn guard(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    if s.loopback && !auth::is_loopback_host(&host) {
        bump(&s.web.refused_origin);
        return (
            StatusCode::FORBIDDEN,
            "this server answers to localhost names only (Host header)\n",
        )
            .into_response();
    }
    let credential = credential(&s, &req, &host);
    if credential == Credential::Refused {
        bump(&s.web.refused_token);
        return (
            StatusCode::UNAUTHORIZED,
            "a token is required: open the URL framepipe printed (…/?token=...)\n",
        )
            .into_response();
    }
    if req.uri().path().ends_with("/ws") {
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            let ok = origin
                .to_str()
                .is_ok_and(|o| auth::origin_matches_host(o, &host));
            if !ok {
                bump(&s.web.refused_origin);
                return (
                    StatusCode::FORBIDDEN,
                    "WebSocket Origin does not match the page's host\n",
                )
                    .into_response();
            }
        }
    }
    let mut response = next.run(req).await;
    if credential == Credential::Query {
        remember_token(&s, &host, &mut response);
    }
    response
}

/// How a request showed the token.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Credential {
    /// No token is required.
    NotNeeded,
    /// `?token=` in the URL (the address framepipe printed).
    Query,
    /// The cookie set when the page was opened with `?token=` (its assets, its WebSocket).
    Cookie,
    /// Neither.
    Refused,
}

/// The token, from the URL or from the cookie, each compared without an early exit.
fn credential(s: &Shared, req: &Request, host: &str) -> Credential {
    let Some(token) = &s.token else {
        return Credential::NotNeeded;
    };
    if let Some(given) = auth::query_value(req.uri().query(), "token") {
        return if auth::same_token(given, token) {
            Credential::Query
        } else {
            Credential::Refused
        };
    }
    let name = auth::cookie_name(host);
    let expected = auth::cookie_value(token);
    let cookie_ok = req
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .filter_map(|h| auth::cookie(h, &name))
        .any(|given| auth::same_token(given, &expected));
    if cookie_ok {
        Credential::Cookie
    } else {
        Credential::Refused
    }
}

/// A request with the right `?token=` gets the cookie (docs/WEB.md, "Security"), so that the
/// page's assets, preview and WebSocket, which browsers fetch without the page's query, pass.
fn remember_token(s: &Shared, host: &str, response: &mut Response) {
    let Some(token) = &s.token else { return };
    if let Ok(v) = HeaderValue::from_str(&auth::set_cookie(host, token)) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = Response::new(Body::from(body));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    r
}

/// `/`: the show's page with one show, the list with several.
async fn root(State(s): State<Arc<Shared>>) -> Response {
    if s.several() {
        asset("text/html; charset=utf-8", SHOWS_HTML)
    } else {
        asset("text/html; charset=utf-8", INDEX_HTML)
    }
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn style_css() -> Response {
    asset("text/css; charset=utf-8", STYLE_CSS)
}

async fn shows_js() -> Response {
    asset("text/javascript; charset=utf-8", SHOWS_JS)
}

/// `/shows/`: the list of shows (with one show too).
async fn shows_page() -> Response {
    asset("text/html; charset=utf-8", SHOWS_HTML)
}

/// A redirect to `to` (relative), keeping the query (the token).
fn redirect(to: &str, query: Option<&str>) -> Response {
    let location = match query {
        Some(q) => format!("{to}?{q}"),
        None => to.to_string(),
    };
    match HeaderValue::from_str(&location) {
        Ok(v) => (StatusCode::FOUND, [(header::LOCATION, v)]).into_response(),
        Err(_) => (StatusCode::BAD_REQUEST, "bad path\n").into_response(),
    }
}

async fn shows_redirect(req: Request) -> Response {
    redirect("/shows/", req.uri().query())
}

/// `/shows/NAME` → `/shows/NAME/`, so that the page's relative URLs are the show's.
async fn show_redirect(
    State(s): State<Arc<Shared>>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    if s.show(&name).is_none() {
        return s.no_show(&name);
    }
    let q = req.uri().query().map(str::to_string);
    redirect(&format!("{}/", req.uri().path()), q.as_deref())
}

async fn shows_json(State(s): State<Arc<Shared>>) -> Response {
    let mut r = Response::new(Body::from(s.list().to_string()));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn show_index(State(s): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match s.show(&name) {
        Some(_) => asset("text/html; charset=utf-8", INDEX_HTML),
        None => s.no_show(&name),
    }
}

/// The latest preview image of `show`.
fn preview_of(show: &ShowState) -> Response {
    let (seq, jpeg) = show.preview.latest();
    if seq == 0 {
        return (StatusCode::NOT_FOUND, "no preview image yet\n").into_response();
    }
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/jpeg"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    (h, Body::from(jpeg.as_ref().clone())).into_response()
}

async fn preview(State(s): State<Arc<Shared>>) -> Response {
    if s.several() {
        return s.which_show("/preview.jpg");
    }
    preview_of(&s.shows[0])
}

async fn show_preview(State(s): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match s.show(&name) {
        Some(show) => preview_of(show),
        None => s.no_show(&name),
    }
}

/// `/thumb/NODE/N.png` of the only show.
async fn thumb(
    State(s): State<Arc<Shared>>,
    Path((node, file)): Path<(String, String)>,
) -> Response {
    if s.several() {
        return s.which_show("/thumb/NODE/N.png");
    }
    s.thumb_of(0, &node, &file).await
}

/// `/shows/NAME/thumb/NODE/N.png`.
async fn show_thumb(
    State(s): State<Arc<Shared>>,
    Path((name, node, file)): Path<(String, String, String)>,
) -> Response {
    match s.index.get(&name).copied() {
        Some(i) => s.thumb_of(i, &node, &file).await,
        None => s.no_show(&name),
    }
}

impl Shared {
    /// The thumbnail of clip `file` (`N.png`) of deck `node` of show `show` (see
    /// [`crate::thumbs`]): the bank is the deck's, as the running graph publishes it; the
    /// picture is made off this thread, once.
    async fn thumb_of(&self, show: usize, node: &str, file: &str) -> Response {
        let not_found = |why: String| (StatusCode::NOT_FOUND, why + "\n").into_response();
        let Some(index) = file
            .strip_suffix(".png")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            return not_found(format!("'{file}': a thumbnail is N.png, N a clip's number"));
        };
        let sh = &self.shows[show];
        let graph = sh.view.graph();
        let Some((ni, n)) = graph.node(node).filter(|(_, n)| n.element == "clips") else {
            return not_found(format!("no clips deck named '{node}' in the running graph"));
        };
        let prop = |name: &str| n.props.iter().position(|p| p.name == name);
        let (Some(li), Some(fi)) = (prop("locations"), prop("folder")) else {
            return not_found(format!("'{node}' does not say its bank"));
        };
        let mut values = ValuesView::default();
        sh.view.read(&mut values);
        let text = |i: usize| match values.values.get(ni).and_then(|v| v.get(i)) {
            Some(framepipe_core::PropValue::Str(t)) => t.clone(),
            _ => String::new(),
        };
        let (locations, folder) = (text(li), text(fi));
        let thumbs = Arc::clone(&self.thumbs);
        let made = self
            .on_disk(move || {
                let bank = framepipe_clip::deck::bank_of(&locations, &folder)
                    .map_err(|e| e.to_string())?;
                let Some(clip) = bank.get(index) else {
                    return Err(format!("the deck has {} clips", bank.len()));
                };
                Ok(thumbs.get(clip))
            })
            .await;
        let made = match made {
            None => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the thumbnail was not made in time; try again\n",
                )
                    .into_response()
            }
            Some(Err(why)) => return not_found(format!("{node} clip {index}: {why}")),
            Some(Ok(made)) => made,
        };
        match made.as_ref() {
            Ok(png) => {
                let mut h = HeaderMap::new();
                h.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
                // A clip's first frame does not change while its file is the same; a new
                // bank (a live edit) is asked for again by the page.
                h.insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("private, max-age=60"),
                );
                (h, Body::from(png.clone())).into_response()
            }
            // Why names the deck's clip, not what the file holds.
            Err(why) => not_found(format!("{node} clip {index}: no thumbnail: {why}")),
        }
    }
}

/// Upgrades to a page's WebSocket on show `i`; 503 when [`MAX_CLIENTS`] pages are open.
fn upgrade(s: Arc<Shared>, i: usize, upgrade: WebSocketUpgrade) -> Response {
    // Counted here, so that a burst of upgrades cannot pass the cap before any runs.
    if s.web.clients.fetch_add(1, Ordering::Relaxed) >= MAX_CLIENTS {
        s.web.clients.fetch_sub(1, Ordering::Relaxed);
        bump(&s.web.refused_clients);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many pages open ({MAX_CLIENTS}): close one, or try again once an idle \
                 one is dropped\n"
            ),
        )
            .into_response();
    }
    let failed = Arc::clone(&s);
    upgrade
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_failed_upgrade(move |_| {
            failed.web.clients.fetch_sub(1, Ordering::Relaxed);
        })
        .on_upgrade(move |socket| async move {
            client(socket, Arc::clone(&s), i).await;
            s.web.clients.fetch_sub(1, Ordering::Relaxed);
        })
}

/// A WebSocket upgrade, or why the request is not one (answered after the show is known,
/// so that a request for no show is told so).
type Upgrade = std::result::Result<WebSocketUpgrade, WebSocketUpgradeRejection>;

async fn ws(State(s): State<Arc<Shared>>, up: Upgrade) -> Response {
    if s.several() {
        return s.which_show("/ws");
    }
    match up {
        Ok(up) => upgrade(s, 0, up),
        Err(r) => r.into_response(),
    }
}

async fn show_ws(State(s): State<Arc<Shared>>, Path(name): Path<String>, up: Upgrade) -> Response {
    match (s.index.get(&name).copied(), up) {
        (Some(i), Ok(up)) => upgrade(s, i, up),
        (Some(_), Err(r)) => r.into_response(),
        (None, _) => s.no_show(&name),
    }
}

/// A token bucket: [`RATE_PER_S`] messages a second, [`RATE_BURST`] at once.
struct Bucket {
    level: f64,
    at: Instant,
}

impl Bucket {
    fn take(&mut self) -> bool {
        let now = Instant::now();
        let dt = now.duration_since(self.at).as_secs_f64();
        self.at = now;
        self.level = (self.level + dt * RATE_PER_S).min(RATE_BURST);
        if self.level >= 1.0 {
            self.level -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One page's task (a page of show `show`): sends what is queued for it, reads its commands.
async fn client(mut socket: WebSocket, s: Arc<Shared>, show: usize) {
    let sh = &s.shows[show];
    let id = s.next_client.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = mpsc::channel::<Utf8Bytes>(SEND_QUEUE);
    let resync = Arc::new(AtomicBool::new(false));
    bump(&s.web.connections);
    // The hello and the whole state go first, then the client is listed for broadcasts.
    // The scenes the page may `load` (docs/WEB.md): its perform view's scene buttons. Read
    // off this thread (a slow disk stalls this page's hello only); none if it does not answer.
    let scenes = match s.policy.scenes.clone() {
        Some(dir) => s
            .on_disk(move || crate::policy::scene_names(&dir))
            .await
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let hello = serde_json::json!({
        "type": "hello", "client": id, "max_message": MAX_MESSAGE, "scenes": scenes,
        "audio": sh.audio.as_ref().map(|(bands, _)| bands),
    });
    let _ = tx.try_send(text(&hello));
    for m in sh.full_state() {
        if !m.is_null() {
            let _ = tx.try_send(text(&m));
        }
    }
    if let Some(st) = lock(&sh.last_stats).clone() {
        let _ = tx.try_send(st);
    }
    lock(&sh.clients).push(Client {
        id,
        tx: tx.clone(),
        resync,
    });
    drop(tx);
    let mut bucket = Bucket {
        level: RATE_BURST,
        at: Instant::now(),
    };
    let mut limited_said = Instant::now() - std::time::Duration::from_secs(10);
    let mut liveness = Liveness::default();
    let mut ping = Liveness::ticker();
    loop {
        tokio::select! {
            _ = ping.tick() => {
                if liveness.idle() {
                    bump(&s.web.idle_dropped);
                    break;
                }
                let ping = Message::Ping(axum::body::Bytes::new());
                match tokio::time::timeout(SEND_TIMEOUT, socket.send(ping)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => break,
                    Err(_) => {
                        bump(&s.web.send_timeouts);
                        break;
                    }
                }
            }
            out = rx.recv() => {
                let Some(out) = out else { break };
                match tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Text(out))).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => break,
                    Err(_) => {
                        bump(&s.web.send_timeouts);
                        break;
                    }
                }
            }
            msg = socket.recv() => {
                let msg = match msg {
                    None => break,
                    Some(Ok(m)) => {
                        liveness.heard();
                        m
                    }
                    Some(Err(e)) => {
                        let e = e.to_string();
                        if e.contains("too long") || e.contains("Space limit") || e.contains("Capacity") {
                            bump(&s.web.oversized);
                        }
                        break;
                    }
                };
                let answer = match msg {
                    Message::Text(t) => {
                        if !bucket.take() {
                            bump(&s.web.rate_limited);
                            // Said at most once a second; the rest only counted.
                            if limited_said.elapsed().as_secs() >= 1 {
                                limited_said = Instant::now();
                                Some(protocol::error_msg(None, "too many messages: rate-limited (dropped)"))
                            } else {
                                None
                            }
                        } else {
                            s.handle(sh, id, t.as_str()).await
                        }
                    }
                    Message::Binary(_) => {
                        bump(&s.web.bad);
                        Some(protocol::error_msg(None, "binary messages are not commands"))
                    }
                    Message::Close(_) => break,
                    Message::Ping(_) | Message::Pong(_) => None,
                };
                if let Some(a) = answer {
                    let c = lock(&sh.clients).iter().find(|c| c.id == id).map(|c| (c.tx.clone(), Arc::clone(&c.resync)));
                    if let Some((tx, resync)) = c {
                        sh.send_to(&s.web, &Client { id, tx, resync }, text(&a));
                    }
                }
            }
        }
    }
    lock(&sh.clients).retain(|c| c.id != id);
}

/// What the pump keeps of one show between polls.
struct Pumped {
    graph: Arc<framepipe_runtime::GraphView>,
    cur: ValuesView,
    prev: Option<ValuesView>,
    last_frames: (u64, Instant),
    fps: f64,
    /// The frames counted by the last audio reading sent.
    audio_frame: Option<u64>,
}

/// Polls every show's view every [`POLL`] (one task, one wake-up for every show) and pushes
/// what changed to its pages; stats every fourth poll; the whole state to pages that lost a
/// message. A show without pages is not read (only its frame rate is measured, from atomics,
/// for the list).
async fn pump(s: Arc<Shared>) {
    let mut interval = tokio::time::interval(POLL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut state: Vec<Pumped> = s
        .shows
        .iter()
        .map(|sh| Pumped {
            graph: sh.view.graph(),
            cur: ValuesView::default(),
            prev: None,
            last_frames: (sh.counters.frames_out(), Instant::now()),
            fps: 0.0,
            audio_frame: None,
        })
        .collect();
    let mut tick = 0u64;
    loop {
        interval.tick().await;
        tick += 1;
        for (sh, p) in s.shows.iter().zip(state.iter_mut()) {
            pump_show(&s, sh, p, tick);
        }
    }
}

/// One poll of one show.
fn pump_show(s: &Shared, sh: &ShowState, p: &mut Pumped, tick: u64) {
    if tick.is_multiple_of(4) {
        let now = Instant::now();
        let frames = sh.counters.frames_out();
        let dt = now.duration_since(p.last_frames.1).as_secs_f64();
        if dt > 0.0 {
            p.fps = (frames.saturating_sub(p.last_frames.0)) as f64 / dt;
        }
        p.last_frames = (frames, now);
        sh.fps.store(f64::to_bits(p.fps), Ordering::Relaxed);
    }
    if lock(&sh.clients).is_empty() {
        // Read again from scratch when a page comes (it gets the whole state anyway).
        p.prev = None;
        return;
    }
    let g = sh.view.graph();
    if g.version != p.graph.version {
        p.graph = g;
        p.prev = None;
        sh.broadcast(
            &s.web,
            &protocol::graph_msg(&p.graph, sh.preview_tap.as_deref(), Some(&sh.name)),
        );
    }
    if sh.view.read(&mut p.cur) || p.prev.is_none() {
        if let Some(m) = protocol::values_msg(&p.cur, p.prev.as_ref()) {
            sh.broadcast(&s.web, &m);
        }
        match &mut p.prev {
            Some(prev) => prev.clone_from(&p.cur),
            None => p.prev = Some(p.cur.clone()),
        }
    }
    // The meters: at every poll, when a new frame has begun (read lock-free).
    if let Some((_, bands)) = &sh.audio {
        let r = sh.counters.audio();
        if p.audio_frame != Some(r.frames) {
            if let Some(m) = protocol::audio_msg(&r, *bands) {
                p.audio_frame = Some(r.frames);
                sh.broadcast(&s.web, &m);
            }
        }
    }
    if tick.is_multiple_of(4) {
        let m = text(&protocol::stats_msg(
            &sh.counters,
            p.fps,
            &s.web.snapshot(),
            sh.preview.seq(),
        ));
        *lock(&sh.last_stats) = Some(m.clone());
        for c in lock(&sh.clients).iter() {
            sh.send_to(&s.web, c, m.clone());
        }
    }
    // Pages that lost a message get everything again (when their queue has room).
    let behind: Vec<(u64, mpsc::Sender<Utf8Bytes>, Arc<AtomicBool>)> = lock(&sh.clients)
        .iter()
        .filter(|c| c.resync.load(Ordering::Relaxed) && c.tx.capacity() >= 3)
        .map(|c| (c.id, c.tx.clone(), Arc::clone(&c.resync)))
        .collect();
    if !behind.is_empty() {
        let state = sh.full_state();
        for (id, tx, resync) in behind {
            resync.store(false, Ordering::Relaxed);
            let c = Client { id, tx, resync };
            for m in &state {
                if !m.is_null() {
                    sh.send_to(&s.web, &c, text(m));
                }
            }
        }
    }
}
