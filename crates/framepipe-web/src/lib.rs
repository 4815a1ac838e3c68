//! framepipe's web control page (issue #10, requirement 2).
//!
//! [`Web::bind`] takes the address (a busy port is a one-line error before anything is built);
//! [`Web::start`] serves one show, [`Web::start_shows`] several (issue #11: each addressed by
//! its name under `/shows/NAME/`, `/` listing them), on its own `fp-web` thread (a
//! single-threaded tokio runtime):
//! * the page (`/`, `/app.js`, `/style.css`: embedded in the binary with `include_str!`; no CDN,
//!   no build step), vanilla JS drawing the graph, a control per property, the stats and the
//!   preview;
//! * `/ws`: the WebSocket protocol of docs/WEB.md — the graph and the latest values, polled from
//!   the engine's [`ShowView`] at ~15 Hz and pushed as changes to every page at once; live
//!   stats from [`Counters`]; the page's commands (text lines of the stdin protocol, parsed with
//!   [`Command::parse`] and posted with [`CommandSender::post`]: no private path into the engine)
//!   and their replies ([`ReplyTap`], fed by the CLI's reply hub);
//! * `/preview.jpg`: the latest image of the `webpreview` sink ([`preview`]);
//! * with `--audio`, the meters: the latest frame's analysis (level, bands, onsets, tempo),
//!   read lock-free from `Counters::audio` and pushed at every poll (`audio` messages);
//! * `/thumb/NODE/N.png`: the first frame of clip `N` of the `clips` deck `NODE`, for the
//!   page's grid of each deck ([`thumbs`]: a node and a number, never a file).
//!
//! # Least privilege
//! A page may post values and transport, the preview switch, and `load` of a scene from the
//! `--scenes` folder ([`Bound::set_scenes`]); nothing that opens a file or a connection
//! (issue #21). The rule is applied to the parsed command, for every route (`policy.rs`).
//!
//! # Real-time contract
//! Nothing here runs on the frame path but `webpreview`'s `consume` (a copy under a
//! `try_lock`, no allocation). The server reads the engine only through [`ShowView::read`]
//! (the engine never waits for it) and atomic [`Counters`]; it writes only through the command
//! queue.
//!
//! # Bad input
//! Every request is checked: a loopback server answers only to loopback `Host` names (DNS
//! rebinding), a token when one is set (required off loopback), the WebSocket `Origin` equal to
//! the `Host`. Page messages are capped at [`MAX_MESSAGE`] bytes (a bigger one closes that
//! connection), rate-limited per client ([`RATE_PER_S`], burst [`RATE_BURST`]); each client has a
//! bounded send queue ([`SEND_QUEUE`]; a full one drops and later resends the whole state), and a
//! send that takes longer than [`SEND_TIMEOUT`] closes the client. At most [`MAX_CLIENTS`]
//! pages and [`MAX_CONNECTIONS`] HTTP connections at once (more are answered 503); a
//! connection that sends no request within [`HEADER_TIMEOUT`], and a page that answers no ping
//! ([`bounded::Liveness`]), are closed ([`bounded`]). All of it counted ([`WebCounters`]),
//! none of it able to stall the output.
#![forbid(unsafe_code)]

mod auth;
pub mod bounded;
mod counters;
mod policy;
pub mod preview;
pub mod protocol;
mod server;
pub mod thumbs;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use framepipe_control::CommandSender;
#[allow(unused_imports)] // for the docs
use framepipe_control::{Command, Reply};
use framepipe_runtime::{Counters, ShowView};

pub use auth::generate_token;
pub use counters::{WebCounters, WebCountsSnapshot};
pub use policy::{admit_message, Refusal};
pub use preview::PreviewSlot;

/// The default address of `--web`.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
/// The largest message a page may send, bytes.
pub const MAX_MESSAGE: usize = 4096;
/// Messages a second a page may send, on average.
pub const RATE_PER_S: f64 = 50.0;
/// Messages a page may send at once.
pub const RATE_BURST: f64 = 100.0;
/// Messages waiting for one page at most.
pub const SEND_QUEUE: usize = 64;
/// The longest one send to a page may take before the page is closed.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the engine's view is polled for changes.
pub const POLL: Duration = Duration::from_millis(66);
/// WebSocket clients (pages) at once, every show's together; more are answered 503.
pub const MAX_CLIENTS: u64 = 64;
/// HTTP connections served at once; more are answered 503 (see [`bounded`]).
pub const MAX_CONNECTIONS: u64 = 256;
/// The longest a connection may take to send a request (from its start or its last answer).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors of the web surface.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The address could not be bound (busy, not ours, ...).
    #[error("--web: cannot listen on {addr}: {reason}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why (the OS's words).
        reason: String,
    },
    /// `--scenes DIR` is not a folder that can be read.
    #[error("--scenes '{path}': {reason}")]
    Scenes {
        /// The folder given.
        path: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A thread or runtime could not be made.
    #[error("--web: {what}: {reason}")]
    Start {
        /// What was being made.
        what: &'static str,
        /// Why.
        reason: String,
    },
}

/// A `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// A bound, not yet serving, web address; see [`Web::bind`].
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
    local: SocketAddr,
    token: Option<String>,
    counters: Arc<WebCounters>,
    preview: Arc<PreviewSlot>,
    scenes: Option<PathBuf>,
}

impl Bound {
    /// Lets the pages `load` the project files in `dir` by name (`--scenes DIR`; docs/WEB.md):
    /// `load NAME` loads `DIR/NAME`, a regular file directly in `dir`. Without it a page may
    /// not `load`.
    pub fn set_scenes(&mut self, dir: &Path) -> Result<()> {
        let bad = |reason: String| Error::Scenes {
            path: dir.display().to_string(),
            reason,
        };
        let canonical = dir.canonicalize().map_err(|e| bad(e.to_string()))?;
        if !canonical.is_dir() {
            return Err(bad("not a folder".into()));
        }
        self.scenes = Some(canonical);
        Ok(())
    }

    /// The address really bound (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The token every request must carry (`?token=`), if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The page's URL, token included.
    pub fn url(&self) -> String {
        match &self.token {
            Some(t) => format!("http://{}/?token={t}", self.local),
            None => format!("http://{}/", self.local),
        }
    }

    /// The slot the `webpreview` sink publishes into (register it with
    /// [`preview::register`]).
    pub fn preview_slot(&self) -> Arc<PreviewSlot> {
        Arc::clone(&self.preview)
    }

    /// The web surface's counters (for a status line, `--stats`).
    pub fn counters(&self) -> Arc<WebCounters> {
        Arc::clone(&self.counters)
    }
}

/// What the server reads and posts to: one show.
#[derive(Debug)]
pub struct Engine {
    /// The show's name: its pages are under `/shows/NAME/`.
    pub name: String,
    /// The show's published state.
    pub view: ShowView,
    /// The run's live counters.
    pub counters: Arc<Counters>,
    /// Where the page's commands go.
    pub commands: CommandSender,
    /// The preview tap's `monitor` node, if any: the node it reads is the one previewed, and
    /// the page switches it with the live edit `link TAP NODE`.
    pub preview_tap: Option<String>,
    /// The show's audio analysis bands (`--audio-bands`, else the defaults), when it has
    /// `--audio`: the page shows meters (none without) and offers audio bindings.
    pub audio: Option<framepipe_audio::BandEdges>,
}

/// The running web surface. Stops (and drops its command sender) on [`Web::finish`] or drop.
#[derive(Debug)]
pub struct Web {
    local: SocketAddr,
    shared: Arc<server::Shared>,
    stop: Arc<tokio::sync::Notify>,
    thread: Option<JoinHandle<()>>,
}

impl Web {
    /// Binds `addr`. `token`: required from every request; `None` on a non-loopback address
    /// generates one (print [`Bound::url`]). A loopback address without a token needs none.
    pub fn bind(addr: SocketAddr, token: Option<String>) -> Result<Bound> {
        let listener = TcpListener::bind(addr).map_err(|e| Error::Bind {
            addr,
            reason: match e.kind() {
                std::io::ErrorKind::AddrInUse => {
                    "the port is in use (another framepipe? pick another with --web ADDR:PORT, or :0 for any)".into()
                }
                _ => e.to_string(),
            },
        })?;
        let local = listener.local_addr().unwrap_or(addr);
        listener.set_nonblocking(true).map_err(|e| Error::Start {
            what: "setting the listener non-blocking",
            reason: e.to_string(),
        })?;
        let token = match token {
            Some(t) => Some(t),
            None if !local.ip().is_loopback() => {
                Some(generate_token().map_err(|e| Error::Start {
                    what: "making a token from /dev/urandom",
                    reason: e.to_string(),
                })?)
            }
            None => None,
        };
        Ok(Bound {
            listener,
            local,
            token,
            counters: Arc::new(WebCounters::default()),
            preview: PreviewSlot::new(),
            scenes: None,
        })
    }

    /// Starts serving one show on the `fp-web` thread: `/` is its page (and
    /// `/shows/NAME/`), its preview the bound slot ([`Bound::preview_slot`]).
    pub fn start(bound: Bound, engine: Engine) -> Result<Web> {
        let preview = Arc::clone(&bound.preview);
        Web::start_shows(bound, vec![(engine, preview)])
    }

    /// Starts serving `shows` on the `fp-web` thread, each with the slot its `webpreview`
    /// publishes into: show NAME's page is `/shows/NAME/`; `/` lists them (with one show, `/`
    /// is its page, as [`Web::start`]). Names must differ (the first of two is served).
    pub fn start_shows(bound: Bound, shows: Vec<(Engine, Arc<PreviewSlot>)>) -> Result<Web> {
        let Bound {
            listener,
            local,
            token,
            counters,
            preview: _,
            scenes,
        } = bound;
        let shows = shows
            .into_iter()
            .map(|(engine, preview)| server::ServedShow {
                name: engine.name.clone(),
                engine,
                preview,
            })
            .collect();
        let shared = Arc::new(server::Shared::new(
            shows,
            counters,
            token,
            local.ip().is_loopback(),
            policy::Policy { scenes },
        ));
        let stop = Arc::new(tokio::sync::Notify::new());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .thread_name("fp-web")
            .build()
            .map_err(|e| Error::Start {
                what: "the tokio runtime",
                reason: e.to_string(),
            })?;
        let thread = {
            let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("fp-web".into())
                .spawn(move || server::serve(runtime, listener, shared, stop))
                .map_err(|e| Error::Start {
                    what: "the fp-web thread",
                    reason: e.to_string(),
                })?
        };
        Ok(Web {
            local,
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// The address served.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Where replies to the (first) show's commands go ([`ReplyTap::deliver`]), for the
    /// CLI's reply hub.
    pub fn reply_tap(&self) -> ReplyTap {
        self.reply_tap_of(0)
    }

    /// Where replies to the commands of show `index` (its place in [`Web::start_shows`]'s
    /// list) go.
    pub fn reply_tap_of(&self, index: usize) -> ReplyTap {
        ReplyTap {
            shared: Arc::clone(&self.shared),
            show: index,
        }
    }

    /// Stops serving: every page is disconnected, the command sender dropped.
    pub fn finish(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.close();
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Hands one show's replies to its pages: the one that posted a command gets its reply with
/// its request id, every other page of the show sees it as a log line. Cheap to clone; never
/// blocks (a full page queue drops, counted).
#[derive(Debug, Clone)]
pub struct ReplyTap {
    shared: Arc<server::Shared>,
    show: usize,
}

impl ReplyTap {
    /// Fans `reply` out to the show's pages.
    pub fn deliver(&self, reply: &Reply) {
        self.shared.deliver(self.show, reply);
    }
}
