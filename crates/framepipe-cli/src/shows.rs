//! `framepipe run SHOW SHOW ...`: several shows in one process, on one
//! [`framepipe_runtime::Host`] (issue #11; user side in docs/SHOWS.md).
//!
//! * **Names.** A project file's show is named by its `name = "..."`, else by its file stem; a
//!   pipeline string by its position among the arguments (`show-1`, `show-2`, ...). Names are
//!   letters, digits, `-`, `_`, `.`; two shows of one name are an error naming both.
//! * **Settings.** Global flags (`--fps`, `--unpaced`, `--in-flight`, `--overload`, ...) apply
//!   to every show; what a project file sets for itself (`fps`, `unpaced`, `in-flight`,
//!   `stats`) wins for that show. `--threads` sizes the one pool every show shares (a project's
//!   `threads` is not used, and said so).
//! * **Building.** Every show is built and prepared, one after the other, before any runs (a
//!   progress line on a terminal); a show that cannot be built refuses the whole run, naming
//!   it, and nothing runs.
//! * **Running.** One show failing (its source's error, its sink's) ends that show only; it is
//!   reported by name as it ends (`framepipe: show cam3: error: ...`) and the exit status is 1.
//! * **Control.** One `fp-stdin` thread (`@NAME COMMAND`, `@* COMMAND`), one `fp-replies`
//!   thread for every show's replies, one `fp-osc` thread (`/NAME/framepipe/...`), one signal
//!   thread stopping every show. One OSCQuery server (a subtree per show, `/NAME/framepipe/...`),
//!   one web server (`/` lists the shows, `/shows/NAME/` is a show's page) and one MIDI input
//!   (each show's surface with its project's own mappings), each posting to a show's own queue
//!   and reading its published view. Each show's command queue is small ([`SHOW_QUEUE`]
//!   commands).
//! * **Stats.** `--stats FILE`: `{"shows": [{"name": ..., ...one show's object...}], "isolated": [...],
//!   "pools": [...]}` (`pools`: the frame pools the shows share, one per frame size).

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use framepipe_control::{command_queue, Command as ControlCommand, CommandReader, CommandSender};
use framepipe_project::GraphDesc;
use framepipe_runtime::{Counters, Event, Host, Options, Overload, ShowResult};
use framepipe_window::{PauseProbe, WindowLink};

use crate::build::{build, Purpose};
use crate::commands::{self, ReplySource, ShowInput};
use crate::{commands_from_stdin, flags, osc, signals, web, Exit, RunArgs, WINDOWSINK};

/// Commands each show's queue holds (one show alone gets 1024): 400 shows × a large ring and
/// its return path would cost tens of MB for commands that arrive a few a second.
pub const SHOW_QUEUE: usize = 64;

/// How often the progress line is redrawn while shows are built.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// One show as given on the command line, loaded.
struct Given {
    /// What was given (a path or a pipeline string).
    arg: String,
    name: String,
    desc: GraphDesc,
}

/// The name of the show given as argument `position` (from 1): a project's `name`, else its
/// file stem; a pipeline string `show-POSITION`.
pub(crate) fn show_name(arg: &str, position: usize, desc: &GraphDesc) -> Result<String> {
    if !crate::looks_like_project(arg) {
        return Ok(format!("show-{position}"));
    }
    if let Some(name) = &desc.settings.name {
        return Ok(name.clone());
    }
    let stem = Path::new(arg)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_string();
    framepipe_project::check_show_name(&stem).map_err(|reason| {
        anyhow!("project file '{arg}' cannot name its show '{stem}' ({reason}); give it one with name = \"...\" at the top of the file")
    })?;
    Ok(stem)
}

/// Loads every show and names it; two shows of one name are an error naming both.
fn load(args: &[String]) -> Result<Vec<Given>> {
    let mut shows: Vec<Given> = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        let desc = crate::load_desc(arg).with_context(|| format!("show {} ('{arg}')", i + 1))?;
        let name = show_name(arg, i + 1, &desc)?;
        if let Some(j) = shows.iter().position(|s| s.name == name) {
            bail!(
                "shows {} ('{}') and {} ('{arg}') are both named '{name}'; give one a name of its own with name = \"...\" in its project file",
                j + 1,
                shows[j].arg,
                i + 1
            );
        }
        shows.push(Given {
            arg: arg.clone(),
            name,
            desc,
        });
    }
    Ok(shows)
}

/// A show once added to the host: what the CLI keeps to report on it.
struct Kept {
    name: String,
    counters: Arc<Counters>,
    threads: usize,
    in_flight: usize,
    /// The project's own `stats` file (one show's format).
    stats: Option<String>,
}

/// The flags, checked once for every show.
struct Global {
    overload: Overload,
    fps: Option<framepipe_core::Rational>,
    in_flight: Option<usize>,
    stall_timeout_ns: u64,
    latency_ns: u64,
}

/// The options of one show: the project's own settings win over the global flags.
fn options_for(
    given: &Given,
    global: &Global,
    args: &RunArgs,
    threads: usize,
    source_rate: framepipe_core::Rational,
) -> Result<Options> {
    let s = &given.desc.settings;
    let in_flight = match (s.in_flight, global.in_flight) {
        (Some(n), _) => flags::in_flight(n, "'in-flight' in the project file")?,
        (None, Some(n)) => n,
        (None, None) => 0,
    };
    let pace = if s.unpaced {
        None
    } else if let Some(f) = &s.fps {
        Some(flags::fps(f, "'fps' in the project file")?)
    } else if args.unpaced {
        None
    } else if let Some(rate) = global.fps {
        Some(rate)
    } else {
        Some(flags::rate_in_range(
            source_rate,
            "the source's rate",
            "; pace it with --fps or run --unpaced",
        )?)
    };
    Ok(Options {
        threads,
        in_flight,
        pace,
        overload: global.overload,
        stall_timeout_ns: global.stall_timeout_ns,
        realtime: !args.no_realtime,
        latency_ns: global.latency_ns,
        no_standby: args.no_standby,
        inject_stall: None,
    })
}

/// Redraws `framepipe: preparing show 37/200 (cam37)` on a terminal, at most every
/// [`PROGRESS_EVERY`].
struct Progress {
    on: bool,
    last: Option<Instant>,
}

impl Progress {
    fn show(&mut self, i: usize, n: usize, name: &str) {
        if !self.on || self.last.is_some_and(|t| t.elapsed() < PROGRESS_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        use std::io::Write as _;
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\rframepipe: preparing show {}/{n} ({name})\x1b[K",
            i + 1
        );
        let _ = err.flush();
    }
}

/// The progress line is cleared when the shows are built, or when one cannot be (before its
/// error is said).
impl Drop for Progress {
    fn drop(&mut self) {
        if self.on && self.last.is_some() {
            use std::io::Write as _;
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}

/// `framepipe run` with several shows.
pub fn run(args: RunArgs) -> Result<Exit> {
    let n = args.shows.len();
    // One queue per show, made first: a Ctrl-C while building stops every show at its first
    // frame boundary.
    let queues: Vec<(CommandSender, CommandReader)> =
        (0..n).map(|_| command_queue(SHOW_QUEUE)).collect();
    let signal = signals::stop_on_signals(queues.iter().map(|(tx, _)| tx.stopper()).collect())
        .context("cannot catch SIGINT/SIGTERM")?;
    if let Some(text) = &args.max_memory {
        let max_memory = framepipe_core::limits::parse_bytes(text)
            .map_err(|e| anyhow!("bad --max-memory: {e}"))?;
        framepipe_core::Limits { max_memory }.set();
    }
    let global = Global {
        overload: Overload::parse(&args.overload).with_context(|| {
            format!("bad --overload '{}': expected slow or live", args.overload)
        })?,
        fps: args
            .fps
            .as_deref()
            .map(|f| flags::fps(f, "--fps"))
            .transpose()?,
        in_flight: args
            .in_flight
            .map(|n| flags::in_flight(n, "--in-flight"))
            .transpose()?,
        stall_timeout_ns: flags::stall_timeout_ns(args.stall_timeout.unwrap_or(0))?,
        latency_ns: flags::latency_ns(args.latency.unwrap_or(0))?,
    };
    let threads = flags::threads(args.threads.unwrap_or(0), "--threads")?;
    let mut host = Host::new(threads);
    host.set_standby(!args.no_standby);
    let threads = host.threads();
    framepipe_frei0r::isolate::set_isolate_all(args.isolate_plugins);
    // Several shows share this process: a frei0r plugin crashing in process would end them
    // all, so every frei0r node runs isolated unless it says `isolate=false` (docs/SHOWS.md).
    framepipe_frei0r::isolate::set_isolate_by_default(true);
    let shows = load(&args.shows)?;
    // Every stats file is tried now: one that cannot be written is said before the shows run.
    for path in args
        .stats
        .iter()
        .chain(shows.iter().filter_map(|s| s.desc.settings.stats.as_ref()))
    {
        crate::try_stats_path(path)?;
    }
    // A frei0r node (isolated by default here) asks for shared-memory pools when it is built;
    // asked for before any show is built, every show's pools are made so, and shows of one
    // frame size still share one pool (else the shows built before it would have heap pools).
    if shows.iter().any(|s| {
        s.desc
            .nodes
            .iter()
            .any(|n| n.element.starts_with("frei0r-"))
    }) {
        framepipe_core::shm::request_shared_pools();
    }
    let own_threads: Vec<&str> = shows
        .iter()
        .filter(|s| s.desc.settings.threads.is_some())
        .map(|s| s.name.as_str())
        .collect();
    if !own_threads.is_empty() && !args.quiet {
        say!(
            "framepipe: the shows share one pool of {threads} workers (--threads); 'threads' in the project files of {} is not used",
            commands::some_names(own_threads.iter().copied())
        );
    }
    // Standard input has one reader: one source of one show, or the command reader; and
    // standard output one writer.
    let mut stdin_sources = Vec::new();
    let mut stdout_writers = Vec::new();
    {
        let registry = crate::native_registry(None);
        for s in &shows {
            for src in commands::stdin_sources(&s.desc, &registry) {
                stdin_sources.push(format!("{src} (show {})", s.name));
            }
            if crate::writes_stdout(&s.desc, &registry) {
                stdout_writers.push(s.name.as_str());
            }
        }
    }
    if let [a, b, ..] = &stdout_writers[..] {
        bail!("shows {a} and {b} both write stdout; only one can, give the other a file");
    }
    let commands_from_stdin =
        commands_from_stdin(args.control.as_deref(), &stdin_sources, args.quiet)?;
    let osc_addr = args
        .osc
        .as_deref()
        .map(|t| osc::parse_addr("--osc", t))
        .transpose()?;
    let oscquery_addr = match (&args.oscquery, osc_addr) {
        (Some(_), None) => bail!("--oscquery describes the OSC input: it needs --osc"),
        (Some(t), Some(_)) => Some(osc::parse_addr("--oscquery", t)?),
        (None, Some(osc)) => Some(std::net::SocketAddr::new(osc.ip(), 0)),
        (None, None) => None,
    };
    let any_window = shows
        .iter()
        .any(|s| s.desc.nodes.iter().any(|n| n.element == WINDOWSINK));
    // The web page: bound first (a busy port is said before anything is built).
    let web_bound = match &args.web {
        Some(addr) => {
            let mut bound =
                framepipe_web::Web::bind(web::parse_addr(Some(addr))?, args.web_token.clone())?;
            if let Some(dir) = &args.scenes {
                bound.set_scenes(dir)?;
            }
            Some(bound)
        }
        None => None,
    };
    if args.start_paused
        && !commands_from_stdin
        && osc_addr.is_none()
        && !any_window
        && web_bound.is_none()
        && args.midi.is_none()
    {
        bail!("--start-paused needs commands (step, resume) to continue; it cannot be used with --control none or a source reading stdin (unless --osc, --midi, --web or a windowsink)");
    }
    let surfaces = commands_from_stdin
        || osc_addr.is_some()
        || any_window
        || web_bound.is_some()
        || args.midi.is_some();
    let quiet = args.quiet;
    // Build and prepare every show, one after the other; any failure refuses the run.
    let mut progress = Progress {
        on: !quiet && std::io::stderr().is_terminal(),
        last: None,
    };
    let budget = Arc::new(EventBudget::default());
    let mut kept: Vec<Kept> = Vec::with_capacity(n);
    let mut senders: Vec<CommandSender> = Vec::with_capacity(n);
    let mut replies: Vec<ReplySource> = Vec::with_capacity(n);
    let mut osc_shows: Vec<osc::OscShow> = Vec::new();
    let mut web_shows: Vec<(framepipe_web::Engine, Arc<framepipe_web::PreviewSlot>)> = Vec::new();
    let mut query_shows: Vec<(framepipe_oscquery::ShowEntry, framepipe_oscquery::LiveShow)> =
        Vec::new();
    let mut midi_shows: Vec<framepipe_midi::ShowSurface> = Vec::new();
    for (i, (mut given, (tx, rx))) in shows.into_iter().zip(queues).enumerate() {
        progress.show(i, n, &given.name);
        let name = given.name.clone();
        let in_show = || format!("show {name}");
        let has_window = given.desc.nodes.iter().any(|n| n.element == WINDOWSINK);
        let pause_probe = PauseProbe::default();
        let window_link = has_window.then(|| WindowLink {
            commands: tx.clone(),
            paused: pause_probe.clone(),
        });
        let mut registry = crate::registry_for(&given.desc, window_link.as_ref());
        drop(window_link);
        // Each show's preview has a slot of its own; its tap only with --web-preview NODE
        // (a preview costs a show a downscaler and a JPEG encoder ten times a second).
        let web_preview = match &web_bound {
            Some(bound) => {
                let slot = if i == 0 {
                    bound.preview_slot()
                } else {
                    framepipe_web::PreviewSlot::new()
                };
                framepipe_web::preview::register(
                    &mut registry,
                    Arc::clone(&slot),
                    bound.counters(),
                );
                let tap = match &args.web_preview {
                    Some(node) => Some(
                        web::add_preview_tap(&mut given.desc, &registry, Some(node))
                            .with_context(in_show)?,
                    ),
                    None => None,
                };
                Some((slot, tap))
            }
            None => None,
        };
        if args.midi.is_none() && !given.desc.midi.is_empty() && !quiet {
            say!(
                "framepipe: show {name}: the project's {} MIDI mappings are not used without --midi PORT",
                given.desc.midi.len()
            );
        }
        crate::check_stdout(&given.desc, &registry).with_context(in_show)?;
        let graph = build(&given.desc, &registry, Purpose::Run).with_context(in_show)?;
        let options = options_for(&given, &global, &args, threads, graph.source_rate())
            .with_context(in_show)?;
        let options_pace = options.pace;
        let mut prepared = graph.prepare(options).with_context(in_show)?;
        prepared.set_events(show_events(
            &name,
            surfaces,
            args.quiet,
            Arc::clone(&budget),
        ));
        let own = if args.start_paused {
            Some(
                tx.post(ControlCommand::Pause)
                    .map_err(|f| anyhow!("show {name}: command queue: {f}"))?,
            )
        } else {
            None
        };
        prepared.set_commands(rx);
        let counters = prepared.counters();
        {
            let counters = Arc::clone(&counters);
            pause_probe.set(move || counters.paused());
        }
        if osc_addr.is_some() {
            osc_shows.push(osc::OscShow {
                name: Some(name.clone()),
                tx: tx.clone(),
                view: prepared.view(),
            });
        }
        if oscquery_addr.is_some() {
            query_shows.push((
                framepipe_oscquery::ShowEntry {
                    name: Some(name.clone()),
                    commands: Some(tx.clone()),
                },
                framepipe_oscquery::LiveShow::new(prepared.view(), prepared.counters()),
            ));
        }
        if args.midi.is_some() {
            let project = crate::looks_like_project(&given.arg).then(|| given.arg.clone().into());
            let surface = crate::midi::surface(
                &given.desc,
                &registry,
                project,
                options_pace,
                args.start_paused,
                prepared.counters(),
                prepared.view(),
            )
            .with_context(in_show)?;
            midi_shows.push(framepipe_midi::ShowSurface {
                name: Some(name.clone()),
                surface,
                tx: tx.clone(),
            });
        }
        let preview_tap = web_preview.as_ref().and_then(|(_, tap)| tap.clone());
        if let Some((slot, tap)) = web_preview {
            web_shows.push((
                framepipe_web::Engine {
                    name: name.clone(),
                    view: prepared.view(),
                    counters: prepared.counters(),
                    commands: tx.clone(),
                    preview_tap: tap.map(|t| t.monitor),
                },
                slot,
            ));
        }
        replies.push(ReplySource::new(Some(&name), tx.replies(), own));
        kept.push(Kept {
            name: name.clone(),
            counters,
            threads: prepared.threads(),
            in_flight: prepared.max_in_flight(),
            stats: given.desc.settings.stats.clone(),
        });
        prepared.set_editor(Box::new(
            crate::edit::DescEditor::new(given.desc, registry)
                .with_view(prepared.view())
                .with_preview(preview_tap),
        ));
        host.add(name.clone(), prepared).with_context(in_show)?;
        senders.push(tx);
    }
    drop(progress);
    let osc_input = match osc_addr {
        Some(addr) => {
            let input = osc::spawn(addr, osc_shows)?;
            if !input.local.ip().is_loopback() {
                say!(
                    "framepipe: warning: OSC on {}: anyone who can reach this address can control the run",
                    input.local
                );
            } else if !quiet {
                say!(
                    "framepipe: OSC on udp {} (addresses /NAME/framepipe/...)",
                    input.local
                );
            }
            Some(input)
        }
        None => None,
    };
    let oscquery = match (oscquery_addr, &osc_input) {
        (Some(addr), Some(input)) => {
            let options = input.query_options(addr, args.no_mdns);
            let server =
                framepipe_oscquery::serve_shows(options, query_shows).context("--oscquery")?;
            let local = server.local_addr();
            if !local.ip().is_loopback() {
                say!(
                    "framepipe: warning: OSCQuery on http://{local}: anyone who can reach this address can control the run"
                );
            } else if !quiet {
                say!("framepipe: OSCQuery on http://{local}");
                say!("framepipe: OSCQuery: one subtree per show, /NAME/framepipe/...");
            }
            if let (Some(note), false) = (&server.mdns_note, quiet) {
                say!("framepipe: {note}");
            }
            Some(server)
        }
        _ => None,
    };
    let midi_input = match &args.midi {
        Some(port) => {
            let input = crate::midi::start_shows(port, midi_shows)?;
            if !quiet {
                say!(
                    "framepipe: MIDI from {} (each show's own mappings; @NAME learn ... on stdin)",
                    input.name
                );
            }
            Some(input)
        }
        None => None,
    };
    let web_counters = web_bound.as_ref().map(|b| b.counters());
    let web_server = match web_bound {
        Some(bound) => {
            let (url, local) = (bound.url(), bound.local_addr());
            let server = framepipe_web::Web::start_shows(bound, web_shows)?;
            for (i, r) in replies.iter_mut().enumerate() {
                r.web = Some(server.reply_tap_of(i));
            }
            if !local.ip().is_loopback() {
                say!(
                    "framepipe: warning: web page on {local}: anyone who can reach this address and has the token can control the run"
                );
            }
            say!("framepipe: web control on {url}");
            if !quiet {
                say!("framepipe: the page lists the shows; each show's page is /shows/NAME/");
            }
            Some(server)
        }
        None => None,
    };
    let reply_printer = surfaces
        .then(|| commands::spawn_reply_printer(replies, quiet))
        .flatten();
    if commands_from_stdin {
        let midi = midi_input.as_ref().map(|m| m.handle());
        let inputs = kept
            .iter()
            .zip(senders)
            .enumerate()
            .map(|(i, (k, tx))| {
                (
                    k.name.clone(),
                    ShowInput::new(Some(&k.name), tx, args.start_paused)
                        .with_midi(midi.as_ref().map(|m| m.for_show(i))),
                )
            })
            .collect();
        commands::spawn_show_stdin_reader(
            inputs,
            osc_input.is_some() || any_window || web_server.is_some() || midi_input.is_some(),
        );
    } else {
        drop(senders);
    }
    let running = Arc::new(AtomicUsize::new(n));
    let stop = Arc::new(AtomicBool::new(false));
    let status = (!quiet && std::io::stderr().is_terminal()).then(|| {
        let counters: Vec<Arc<Counters>> = kept.iter().map(|k| Arc::clone(&k.counters)).collect();
        let (running, stop) = (Arc::clone(&running), Arc::clone(&stop));
        // The surfaces' counts, each a short summary read from atomics.
        let mut surfaces: Vec<Summary> = Vec::new();
        if let Some(o) = &osc_input {
            let c = Arc::clone(&o.counters);
            surfaces.push(Box::new(move || c.summary()));
        }
        if let Some(m) = &midi_input {
            let c = Arc::clone(&m.counters);
            surfaces.push(Box::new(move || c.summary()));
        }
        if let Some(w) = &web_counters {
            let c = Arc::clone(w);
            surfaces.push(Box::new(move || c.summary()));
        }
        if let Some(q) = &oscquery {
            let c = q.counters();
            surfaces.push(Box::new(move || {
                format!(
                    "oscquery {} ws {} pkts",
                    c.ws_clients.load(Ordering::Relaxed),
                    c.packets.load(Ordering::Relaxed)
                )
            }));
        }
        std::thread::Builder::new()
            .name("fp-status".into())
            .spawn(move || status_line(&counters, &running, &surfaces, &stop))
    });
    if !quiet {
        say!("framepipe: {n} shows on {threads} shared worker threads");
    }
    let pools = host.pools();
    let clock = host.clock_counters();
    signal.running();
    let results = host.run(|r| {
        running.fetch_sub(1, Ordering::Relaxed);
        report_end(r, quiet);
    });
    stop.store(true, Ordering::Relaxed);
    let hidden = budget.hidden.swap(0, Ordering::AcqRel);
    if hidden > 0 {
        say!("framepipe: {hidden} more warnings of the shows were not shown (at most {EVENT_LINES_PER_S} a second)");
    }
    if let Some(input) = osc_input {
        let counters = Arc::clone(&input.counters);
        input.finish();
        if !quiet {
            say!("framepipe: {}", counters.summary());
        }
    }
    if let Some(server) = oscquery {
        let counters = server.counters();
        server.finish();
        if !quiet {
            say!("framepipe: {}", counters.summary());
        }
    }
    if let Some(input) = midi_input {
        let counters = Arc::clone(&input.counters);
        input.finish();
        if !quiet {
            say!("framepipe: {}", counters.summary());
        }
    }
    // The pages are disconnected and the web's command senders dropped with the run.
    if let Some(w) = web_server {
        w.finish();
        if let (Some(c), false) = (&web_counters, quiet) {
            say!("framepipe: {}", c.summary());
        }
    }
    if let Some(Ok(t)) = status {
        let _ = t.join();
    }
    if let Some(t) = reply_printer {
        let _ = t.join();
    }
    let isolation = framepipe_frei0r::isolate::summaries();
    for s in isolation.iter().filter(|s| s.crashes + s.stalls > 0) {
        say!(
            "framepipe: {} (isolated): {} crashes, {} stalls, {} restarts, {} frames replaced",
            s.name,
            s.crashes,
            s.stalls,
            s.restarts,
            s.substituted
        );
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| r.result.is_err())
        .map(|r| r.name.as_str())
        .collect();
    write_all_stats(&args, &kept, &results, &isolation, &pools, &clock)?;
    if !quiet || !failed.is_empty() {
        let ended = n - failed.len();
        if failed.is_empty() {
            say!("framepipe: {n} shows ended, none failed");
        } else {
            say!(
                "framepipe: {n} shows: {ended} ended, {} failed ({})",
                failed.len(),
                commands::some_names(failed.iter().copied())
            );
        }
    }
    if let Some(code) = signal.exit_status() {
        say!("framepipe: stopped by a signal");
        return Ok(Exit::Status(code));
    }
    if failed.is_empty() {
        Ok(Exit::Done)
    } else {
        Ok(Exit::Status(1))
    }
}

/// Event lines a second at most, over every show; the rest are counted and the count said
/// with the next line shown (200 shows stalling at once must not print 200 lines a second).
const EVENT_LINES_PER_S: u64 = 10;

/// The process-wide budget of event lines (lock-free: events come from every show's threads).
#[derive(Default)]
struct EventBudget {
    /// The second (since `start`) the count is for.
    second: AtomicU64,
    /// Lines asked for in that second.
    lines: AtomicU64,
    /// Lines not shown since the last one shown.
    hidden: AtomicU64,
    start: std::sync::OnceLock<Instant>,
}

impl EventBudget {
    /// Whether a line may be printed now; if so, how many were hidden before it.
    fn take(&self) -> Option<u64> {
        let now = self.start.get_or_init(Instant::now).elapsed().as_secs();
        if self.second.swap(now, Ordering::AcqRel) != now {
            self.lines.store(0, Ordering::Release);
        }
        if self.lines.fetch_add(1, Ordering::AcqRel) < EVENT_LINES_PER_S {
            Some(self.hidden.swap(0, Ordering::AcqRel))
        } else {
            self.hidden.fetch_add(1, Ordering::AcqRel);
            None
        }
    }
}

/// One show's events on stderr, naming the show, within `budget` (which source ended a show
/// only without `quiet`: the normal end of a render).
fn show_events(
    name: &str,
    surfaces: bool,
    quiet: bool,
    budget: Arc<EventBudget>,
) -> framepipe_runtime::EventFn {
    let name = name.to_string();
    Arc::new(move |e: &Event| {
        // Commands from a surface are answered by their replies (`fp-replies`), not twice.
        if surfaces && matches!(e, Event::CommandRejected { .. }) {
            return;
        }
        if quiet && matches!(e, Event::SourceEnded { .. }) {
            return;
        }
        let Some(hidden) = budget.take() else {
            return;
        };
        if hidden > 0 {
            say!(
                "\rframepipe: ({hidden} more warnings of the shows not shown: at most {EVENT_LINES_PER_S} a second)"
            );
        }
        show_event(&name, e);
    })
}

/// One show's event as one line on stderr.
fn show_event(name: &str, e: &Event) {
    match e {
        Event::Stalled { stage, elapsed_ms } => say!(
            "\rframepipe: show {name}: warning: {stage} stalled: one frame has taken {elapsed_ms} ms"
        ),
        Event::CommandRejected { command, reason } => {
            say!("\rframepipe: show {name}: command '{command}' rejected: {reason}")
        }
        Event::PropertyRejected {
            stage,
            prop,
            reason,
        } => say!(
            "\rframepipe: show {name}: {stage} cannot change '{prop}' while running: {reason}"
        ),
        Event::LeftRunning { stage, worker } => say!(
            "\rframepipe: show {name}: warning: fp-worker-{worker} is still inside {stage} (blocked; it cannot be interrupted) and was left running"
        ),
        Event::SourceEnded { stage, frames } => {
            say!("\rframepipe: show {name}: {stage} ended after {frames} frames: the show ends")
        }
        other => say!("\rframepipe: show {name}: {other:?}"),
    }
}

/// Says how a show ended, as it ends: an error always, the figures unless `quiet`.
fn report_end(r: &ShowResult, quiet: bool) {
    match &r.result {
        Err(e) => say!(
            "\rframepipe: show {}: error: {}",
            r.name,
            error_line(e)
        ),
        Ok(s) if !quiet => say!(
            "\rframepipe: show {}: {} frames in {:.2} s ({:.1} fps){}",
            r.name,
            s.frames,
            s.wall_s,
            s.fps,
            match &s.pacing {
                Some(p) => format!(
                    "; paced at {:.3} fps: lateness p99 {:.1} us, max {:.1} us; {} late, {} repeated",
                    p.target_fps, p.lateness.p99_us, p.lateness.max_us, p.lateness.late, p.lateness.repeated
                ),
                None => String::new(),
            }
        ),
        Ok(_) => {}
    }
}

/// An engine error with its causes on one line, a cause skipped when the text already says it
/// (as `crate::one_line`, for a borrowed error).
fn error_line(e: &framepipe_core::Error) -> String {
    let mut line = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

/// `--stats FILE` (every show, `{"shows": [...]}`) and each project's own `stats` file (its
/// show alone, in one show's format).
fn write_all_stats(
    args: &RunArgs,
    kept: &[Kept],
    results: &[ShowResult],
    isolation: &[framepipe_frei0r::isolate::Summary],
    pools: &framepipe_runtime::SharedPools,
    clock: &framepipe_runtime::ClockCounters,
) -> Result<()> {
    let mut all = Vec::with_capacity(kept.len());
    for (k, r) in kept.iter().zip(results) {
        let stats = match &r.result {
            Ok(s) => s.clone(),
            Err(_) => k.counters.snapshot(),
        };
        let mut doc = crate::stats_json(&stats, k.threads, k.in_flight, None)?;
        if let Err(e) = &r.result {
            doc["error"] = serde_json::json!(error_line(e));
        }
        if let Some(path) = &k.stats {
            let mut own = doc.clone();
            own["isolated"] = crate::isolation_json(isolation);
            std::fs::write(path, serde_json::to_string_pretty(&own)? + "\n")
                .with_context(|| format!("show {}: writing stats to '{path}'", k.name))?;
        }
        let mut named = serde_json::json!({ "name": k.name });
        if let (Some(to), serde_json::Value::Object(from)) = (named.as_object_mut(), doc) {
            to.extend(from);
        }
        all.push(named);
    }
    if let Some(path) = &args.stats {
        let pools: Vec<serde_json::Value> = pools
            .stats()
            .iter()
            .map(|p| {
                serde_json::json!({
                    "width": p.width,
                    "height": p.height,
                    "shared_memory": p.shared_memory,
                    "shows": p.shows,
                    "capacity": p.capacity,
                    "target": p.target,
                    "allocated": p.allocated,
                    "peak": p.peak,
                    "grown_on_acquire": p.grown_on_acquire,
                    "dropped": p.dropped,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "shows": all,
            "isolated": crate::isolation_json(isolation),
            "pools": pools,
            "clock": {
                "standby": clock.standby.load(Ordering::Relaxed),
                "standby_wakeups": clock.standby_wakeups.load(Ordering::Relaxed),
                "rescued_frames": clock.rescued.load(Ordering::Relaxed),
                "rounds": crate::lock_json(&clock.rounds()),
            },
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing stats to '{path}'"))?;
    }
    Ok(())
}

/// A surface's counts for the status line (`osc: 3 ok, 0 bad`), read from atomics.
type Summary = Box<dyn Fn() -> String + Send>;

/// Redraws one status line on stderr four times a second until `stop`: shows running, frames
/// out and late/repeated frames over every show, and each surface's counts. Reads only
/// atomics.
fn status_line(
    counters: &[Arc<Counters>],
    running: &AtomicUsize,
    surfaces: &[Summary],
    stop: &AtomicBool,
) {
    use std::io::Write as _;
    let mut err = std::io::stderr();
    let mut last = (0u64, Instant::now());
    let mut fps = 0.0;
    crate::status::drawing(true);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(250));
        let (mut frames, mut late, mut repeated, mut paused) = (0u64, 0u64, 0u64, 0usize);
        for c in counters {
            frames += c.frames_out();
            late += c.late();
            repeated += c.repeated();
            paused += c.paused() as usize;
        }
        let now = Instant::now();
        let dt = now.duration_since(last.1).as_secs_f64();
        if dt > 0.0 {
            fps = frames.saturating_sub(last.0) as f64 / dt;
        }
        last = (frames, now);
        let mut line = format!(
            "{}/{} shows running  {frames:>8} frames out  {fps:>7.1} fps  late {late} rep {repeated}",
            running.load(Ordering::Relaxed),
            counters.len()
        );
        if paused > 0 {
            line.push_str(&format!("  {paused} paused"));
        }
        for summary in surfaces {
            line.push_str(&format!("  {}", summary()));
        }
        // Never wider than the terminal (a wrapped line leaves a line per redraw).
        let shown: String = line
            .chars()
            .take(crate::status::columns().saturating_sub(1))
            .collect();
        let _ = write!(err, "\r{shown}\x1b[K");
        let _ = err.flush();
    }
    crate::status::drawing(false);
    let _ = write!(err, "\r\x1b[K");
}
