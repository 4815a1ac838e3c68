//! `framepipe`: runs video effect pipelines on every core.
//!
//! ```text
//! framepipe run "testsrc width=1280 height=720 frames=300 ! frei0r-glow blur=0.5 ! y4msink location=out.y4m"
//! framepipe run show.toml
//! framepipe graph show.toml --dot | dot -Tsvg > show.svg
//! framepipe plugins
//! framepipe inspect frei0r-glow
//! framepipe run show.toml --midi nanoKONTROL2
//! framepipe midi-ports
//! framepipe displays
//! ```
#![deny(unsafe_code)]

/// Writes one line to stderr, ignoring failure: a closed stderr (`2>&-`, a reader that went
/// away) must not panic the process (eprintln! does, exit 101). A leading `\r` clears the status
/// line when one is drawn, and is left out when not (stderr a file): see `status::say_line`.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        $crate::status::say_line(format_args!($($arg)*));
    }};
}

mod build;
mod commands;
mod doctor;
mod edit;
mod flags;
mod midi;
mod osc;
mod shows;
mod signals;
mod status;
mod stdio;
mod web;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use framepipe_control::{command_queue, Command as ControlCommand};
use framepipe_core::{ElementKind, Registry};
use framepipe_runtime::{Event, Options, Overload, RunStats};

use framepipe_project::{parse_pipeline, GraphDesc};
use framepipe_window::{PauseProbe, WindowLink};

use crate::build::{build, Purpose};

#[derive(Parser, Debug)]
#[command(
    name = "framepipe",
    version,
    about = "A parallel real-time video frame pipeline engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once at start; boxing `run`'s flags saves nothing
enum Command {
    /// Run a pipeline (a gst-launch-like string or a TOML project file), or several shows at once.
    Run(Box<RunArgs>),
    /// Show what would run: every node with its element, kind, negotiated size and inputs
    /// (nothing is started, no sink is created).
    Graph(GraphArgs),
    /// List every element: native ones and each frei0r plugin found (type, colour model, parameters).
    Plugins {
        /// Also show plugins that failed to load, with why.
        #[arg(long)]
        verbose: bool,
    },
    /// Show one element: its properties with types, ranges and defaults.
    Inspect {
        /// Element name, e.g. frei0r-glow.
        name: String,
    },
    /// List the ALSA sequencer's MIDI input ports (names for `run --midi NAME`).
    MidiPorts,
    /// Can this machine hold a show? Timer, wake-up, CPU noise, real-time permission,
    /// bandwidth, plugins; with a project, each node's headroom at its frame rate.
    Doctor(doctor::DoctorArgs),
    /// List the displays a `windowsink` can go to (index, name, size, position, primary).
    Displays,
}

#[derive(clap::Args, Debug)]
struct GraphArgs {
    /// "element prop=value ! element ..." or a path to a .toml project file.
    pipeline: String,
    /// Print Graphviz `dot` source instead of text (`| dot -Tsvg > graph.svg`).
    #[arg(long)]
    dot: bool,
    /// Memory budget for frames and everything sized by input, as for `run`.
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<String>,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// "element prop=value ! element ..." or a path to a .toml project file. Several: that
    /// many shows in one process, each with its own name (docs/SHOWS.md).
    #[arg(required = true, value_name = "SHOW")]
    shows: Vec<String>,
    /// Worker threads (default: one per core; at most 4 per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Frames in flight at most (default: 2 * threads + 2, fewer for large frames: at most 96 MiB
    /// of them, never below threads + 1; at most 256).
    #[arg(long)]
    in_flight: Option<usize>,
    /// Memory budget for frames and everything sized by input, e.g. 512M, 4G (default: a
    /// quarter of physical memory, between 1 GiB and 8 GiB).
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<String>,
    /// Write statistics as JSON to this file at the end.
    #[arg(long)]
    stats: Option<String>,
    /// Pace the output at this rate (e.g. 30, 30000/1001, 29.97). Default: the source's rate.
    #[arg(long, conflicts_with = "unpaced")]
    fps: Option<String>,
    /// Run as fast as the pipeline goes (batch rendering).
    #[arg(long)]
    unpaced: bool,
    /// When a frame is late: `slow` (never drop or repeat; the clock slips) or `live` (the clock
    /// holds; the previous frame is shown again).
    #[arg(long, default_value = "slow")]
    overload: String,
    /// Report a stage as stalled when one frame takes longer than this many ms
    /// (default: five frame periods, at least 100 ms).
    #[arg(long)]
    stall_timeout: Option<u64>,
    /// Paced runs: begin each frame this many ms before its deadline: a command reaches the
    /// output within about a period plus this. Default: the graph's measured latency with a
    /// margin. Unpaced runs are never held back.
    #[arg(long, value_name = "MS")]
    latency: Option<u64>,
    /// Do not try SCHED_FIFO for the output thread.
    #[arg(long)]
    no_realtime: bool,
    /// Paced runs: no standby pacing thread. By default a second pacing thread, kept off
    /// the CPU of the output (or a host's clock) thread, releases any frame that thread
    /// has not released 0.25 ms after its deadline (it lost its CPU, as on a busy VM); this
    /// saves the standby's wake-up per deadline on a machine that never does that.
    #[arg(long)]
    no_standby: bool,
    /// Start paused: nothing is output until a `step` or `resume` command.
    #[arg(long)]
    start_paused: bool,
    /// Where commands come from: `stdin` (one per line; the default unless a source reads
    /// stdin) or `none`. SIGINT/SIGTERM stop the run either way.
    #[arg(long)]
    control: Option<String>,
    /// Take commands as Open Sound Control messages on UDP: `PORT` listens on 127.0.0.1,
    /// `ADDR:PORT` where asked (0.0.0.0:PORT: every network). Addresses in docs/CONTROL.md.
    #[arg(long, value_name = "[ADDR:]PORT")]
    osc: Option<String>,
    /// Serve the control page (graph, controls, stats, preview) on http://ADDR:PORT
    /// (default 127.0.0.1:8080; 127.0.0.1:0 picks a free port). The URL is printed at start.
    /// Off loopback a token is required (--web-token, or one is generated and printed).
    /// With several shows, `/` lists them and each show's page is `/shows/NAME/`.
    #[arg(long, value_name = "[ADDR:]PORT", num_args = 0..=1, default_missing_value = "")]
    web: Option<String>,
    /// The token the web page's requests must carry (`?token=T`); required off loopback.
    #[arg(long, value_name = "T", requires = "web")]
    web_token: Option<String>,
    /// The node the web page previews (default: the master sink's input), through a leaky
    /// `monitor` tap. With several shows there is no preview unless this names a node, which
    /// every show then previews.
    #[arg(long, value_name = "NODE", requires = "web")]
    web_preview: Option<String>,
    /// Let the web page `load` the project files in DIR by their name (`load scene2.toml
    /// fade=2s`: DIR/scene2.toml, a regular file directly in DIR). Without it the page may not
    /// load; it never opens another path (docs/WEB.md).
    #[arg(long, value_name = "DIR", requires = "web")]
    scenes: Option<std::path::PathBuf>,
    /// Run every frei0r plugin in a child process, as if each node had `isolate=true`: a
    /// plugin that crashes or hangs is reported, its node bypassed or held, the plugin
    /// restarted (docs/ISOLATION.md).
    #[arg(long)]
    isolate_plugins: bool,
    /// Take MIDI in: an ALSA sequencer port whose name contains PORT (`framepipe midi-ports`
    /// lists them), or a raw MIDI device or FIFO when PORT is a path (`/dev/snd/midiC1D0`).
    /// `learn NODE.PROPERTY` binds a control; docs/MIDI.md. With several shows, one input for
    /// all: each project's own mappings drive its show (`@NAME learn ...` on stdin).
    #[arg(long, value_name = "PORT")]
    midi: Option<String>,
    /// With --osc: serve OSCQuery (the OSC address space as JSON over HTTP, listened values
    /// over a WebSocket) on this TCP address: `PORT` on 127.0.0.1, or `ADDR:PORT`. Default: the
    /// --osc address with a port the OS chooses (printed at start). docs/OSC.md. With several
    /// shows, one subtree per show: /NAME/framepipe/...
    #[arg(long, value_name = "[ADDR:]PORT")]
    oscquery: Option<String>,
    /// Do not advertise OSCQuery and OSC over mDNS (`_oscjson._tcp`, `_osc._udp`).
    #[arg(long)]
    no_mdns: bool,
    /// No status line.
    #[arg(long, short)]
    quiet: bool,
    /// Write the run's progress as `key=value` blocks every 0.5 s, as ffmpeg's `-progress`
    /// does (frame=, total_frames=, fps=, out_time_us=, speed=, eta_us=, then
    /// progress=continue, or progress=end after the last): to FILE, or to standard output
    /// with `-`. Written with -q and without a terminal too.
    #[arg(long, value_name = "FILE|-")]
    progress: Option<String>,
}

/// Exit status when standard output was closed by its reader (as a shell reports a process
/// killed by SIGPIPE: 128 + 13).
const EXIT_BROKEN_STDOUT: i32 = 141;

fn main() {
    // `framepipe __frei0r-host ...`: this process is the child that runs an isolated plugin.
    if let Some(code) = framepipe_frei0r::isolate::host_main_if_asked() {
        std::process::exit(code);
    }
    let cli = Cli::parse();
    // A broken pipe while *running* is a real error (e.g. a rawsink reader went away).
    let cli_was_run = matches!(cli.command, Command::Run(_));
    if cli_was_run {
        // A plugin crashing in process names its node before the process dies of it.
        if let Err(e) = framepipe_core::crash::install() {
            say!("framepipe: warning: no crash handler ({e}): a crash will not name its node");
        }
    }
    let result = match cli.command {
        Command::Run(args) => run(*args),
        Command::Graph(args) => graph(args).map(|()| Exit::Done),
        Command::Plugins { verbose } => plugins(verbose).map(|()| Exit::Done),
        Command::Inspect { name } => inspect(&name).map(|()| Exit::Done),
        Command::MidiPorts => midi::list_ports().map(|()| Exit::Done),
        Command::Doctor(args) => doctor::run(args).map(|()| Exit::Done),
        Command::Displays => displays().map(|()| Exit::Done),
    };
    // No isolated plugin's process outlives the run, whichever way it ended (the graph's drop
    // ends them too; this covers an error that left before it).
    framepipe_frei0r::isolate::end_all();
    let e = match result {
        Ok(Exit::Done) => return,
        Ok(Exit::Status(code)) => std::process::exit(code),
        Err(e) => e,
    };
    // `framepipe plugins | head`: stdout closed early is not an error worth a message.
    if is_broken_pipe(e.as_ref()) && !cli_was_run {
        std::process::exit(0);
    }
    say!("framepipe: error: {}", one_line(&e));
    std::process::exit(1);
}

/// How `run` wants the process to end when it did not fail.
pub(crate) enum Exit {
    /// Normally, status 0.
    Done,
    /// With this status (a signal stopped the run, stdout was closed).
    Status(i32),
}

/// The error's cause chain joined by ": " on one line, skipping a cause whose text the message
/// already carries (framepipe errors display their cause and also chain it; see
/// framepipe_core::error).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
    }
    line
}

/// Every element framepipe knows, plus warnings about plugins that could not be loaded.
/// `window`: what a `windowsink` posts its keys to (none: one cannot be built).
fn registry(window: Option<&WindowLink>) -> (Registry, Vec<String>) {
    let mut r = native_registry(window);
    let warnings = framepipe_frei0r::register(&mut r);
    (r, warnings)
}

/// Every element that is not a frei0r plugin.
fn native_registry(window: Option<&WindowLink>) -> Registry {
    let mut r = Registry::new();
    framepipe_io::register(&mut r);
    framepipe_net::register(&mut r);
    framepipe_effects::register(&mut r);
    framepipe_window::register(&mut r, window.cloned());
    r
}

/// Whether the `run`/`graph` argument names a project file rather than a pipeline string.
fn looks_like_project(arg: &str) -> bool {
    arg.ends_with(".toml") && !arg.contains('!')
}

/// The description `arg` gives: a project file (checked and read with a bounded read, its
/// relative paths resolved against its folder) or a pipeline string.
fn load_desc(arg: &str) -> Result<GraphDesc> {
    if looks_like_project(arg) {
        let mut desc = framepipe_project::read_project(arg)?;
        resolve_paths(
            &mut desc,
            framepipe_project::project_folder(arg),
            &native_registry(None),
            &[],
        );
        Ok(desc)
    } else {
        Ok(parse_pipeline(arg)?)
    }
}

/// Tries the `--stats` (or project `stats`) path at start, so that one that cannot be written
/// is an error before the show rather than after it: opened for writing (created, then removed
/// again if it was not there; an existing file is not changed), without blocking on a FIFO.
pub(crate) fn try_stats_path(path: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let existed = std::fs::symlink_metadata(path).is_ok();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot write stats to '{path}'"))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Resolves the relative paths of `desc`'s nodes (the properties their elements declare as
/// paths, [`framepipe_core::PathUse`]) against `folder`, a project file's.
/// Nodes named in `keep` are left as they are (a live `load`'s running sinks).
pub(crate) fn resolve_paths(
    desc: &mut GraphDesc,
    folder: &Path,
    registry: &Registry,
    keep: &[String],
) {
    desc.resolve_paths(folder, |node, key, value| {
        !keep.contains(&node.name)
            && registry.find(&node.element).is_some_and(|e| {
                e.desc.props.iter().any(|spec| {
                    spec.name == key
                        && spec
                            .path
                            .is_some_and(|p| p.is_relative_file(value, &node.props))
                })
            })
    });
}

/// The registry for running `desc`: every native element, and only the frei0r plugins the
/// pipeline names (loading all of them costs ~50 ms). When a name is not found that way, the
/// full registry, so that the error can suggest a close name.
fn registry_for(desc: &GraphDesc, window: Option<&WindowLink>) -> Registry {
    let stems: Vec<&str> = desc
        .nodes
        .iter()
        .filter_map(|n| n.element.strip_prefix("frei0r-"))
        .collect();
    let mut r = native_registry(window);
    framepipe_frei0r::register_named(&mut r, &stems);
    if desc
        .nodes
        .iter()
        .all(|n| build::is_structural(&n.element) || r.find(&n.element).is_some())
    {
        r
    } else {
        registry(window).0
    }
}

/// `framepipe run`: one show as always, several in one process on one [`framepipe_runtime::Host`].
fn run(args: RunArgs) -> Result<Exit> {
    if args.shows.len() > 1 {
        if args.progress.is_some() {
            bail!("--progress follows one show; it cannot be used with several");
        }
        return shows::run(args);
    }
    run_one(args)
}

/// One show: the engine on this thread.
fn run_one(args: RunArgs) -> Result<Exit> {
    let pipeline = args.shows[0].clone();
    // Signals first: a Ctrl-C while building or preparing (a large pool, a slow ffmpeg start,
    // a FIFO waiting for its reader) exits at once with 128 + the signal (no run, no --stats;
    // see signals.rs); once the run has started it stops it cleanly at a frame boundary.
    let (tx, rx) = command_queue(1024);
    let signal =
        signals::stop_on_signals(vec![tx.stopper()]).context("cannot catch SIGINT/SIGTERM")?;
    // The budget first: every element checks its sizes against it while being built.
    if let Some(text) = &args.max_memory {
        let max_memory = framepipe_core::limits::parse_bytes(text)
            .map_err(|e| anyhow::anyhow!("bad --max-memory: {e}"))?;
        framepipe_core::Limits { max_memory }.set();
    }
    let mut desc = load_desc(&pipeline)?;
    if let Some(path) = args.stats.as_ref().or(desc.settings.stats.as_ref()) {
        try_stats_path(path)?;
    }
    let overload = Overload::parse(&args.overload)
        .with_context(|| format!("bad --overload '{}': expected slow or live", args.overload))?;
    let threads = match (args.threads, desc.settings.threads) {
        (Some(n), _) => flags::threads(n, "--threads")?,
        (None, Some(n)) => flags::threads(n, "'threads' in the project file")?,
        (None, None) => 0,
    };
    let in_flight = match (args.in_flight, desc.settings.in_flight) {
        (Some(n), _) => flags::in_flight(n, "--in-flight")?,
        (None, Some(n)) => flags::in_flight(n, "'in-flight' in the project file")?,
        (None, None) => 0,
    };
    let fps = match (&args.fps, &desc.settings.fps) {
        (Some(f), _) => Some(flags::fps(f, "--fps")?),
        (None, Some(f)) => Some(flags::fps(f, "'fps' in the project file")?),
        (None, None) => None,
    };
    let stall_timeout_ns = flags::stall_timeout_ns(args.stall_timeout.unwrap_or(0))?;
    let latency_ns = flags::latency_ns(args.latency.unwrap_or(0))?;
    framepipe_frei0r::isolate::set_isolate_all(args.isolate_plugins);
    // Windows post their keys as commands (the registry keeps a copy of the sender for the
    // windowsinks it builds; with a window the run has a command source of its own anyway).
    let has_window = desc.nodes.iter().any(|n| n.element == WINDOWSINK);
    let pause_probe = PauseProbe::default();
    let window_link = has_window.then(|| WindowLink {
        commands: tx.clone(),
        paused: pause_probe.clone(),
    });
    let mut registry = registry_for(&desc, window_link.as_ref());
    drop(window_link);
    // The web page: bound first (a busy port is said before anything is built), its preview
    // element registered and its tap added to the graph.
    let web_bound = match &args.web {
        Some(addr) => {
            let addr = web::parse_addr(Some(addr))?;
            let mut bound = framepipe_web::Web::bind(addr, args.web_token.clone())?;
            if let Some(dir) = &args.scenes {
                bound.set_scenes(dir)?;
            }
            framepipe_web::preview::register(&mut registry, bound.preview_slot(), bound.counters());
            Some(bound)
        }
        None => None,
    };
    let web_preview = match &web_bound {
        Some(_) => Some(web::add_preview_tap(
            &mut desc,
            &registry,
            args.web_preview.as_deref(),
        )?),
        None => None,
    };
    // Standard input has one reader: a source, or the command reader.
    let stdin_sources = commands::stdin_sources(&desc, &registry);
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
    if args.start_paused
        && !commands_from_stdin
        && osc_addr.is_none()
        && args.midi.is_none()
        && !has_window
        && web_bound.is_none()
    {
        bail!("--start-paused needs commands (step, resume) to continue; it cannot be used with --control none or a source reading stdin (unless --osc, --midi, --web or a windowsink)");
    }
    // Whether any surface posts commands (their replies are then printed by `fp-replies`).
    let surfaces = commands_from_stdin
        || osc_addr.is_some()
        || args.midi.is_some()
        || web_bound.is_some()
        || has_window;
    if args.midi.is_none() && !desc.midi.is_empty() && !args.quiet {
        say!(
            "framepipe: the project's {} MIDI mappings are not used without --midi PORT",
            desc.midi.len()
        );
    }
    check_stdout(&desc, &registry)?;
    let graph = build(&desc, &registry, Purpose::Run)?;
    let total_frames = status::total_frames(&graph);
    let out_rate = fps.unwrap_or_else(|| graph.source_rate());
    let pace = if args.unpaced || desc.settings.unpaced {
        None
    } else if let Some(rate) = fps {
        Some(rate)
    } else {
        Some(flags::rate_in_range(
            graph.source_rate(),
            "the source's rate",
            "; pace it with --fps or run --unpaced",
        )?)
    };
    let options = Options {
        threads,
        in_flight,
        pace,
        overload,
        stall_timeout_ns,
        realtime: !args.no_realtime,
        latency_ns,
        no_standby: args.no_standby,
        inject_stall: None,
    };
    let mut prepared = graph.prepare(options)?;
    let stdout_sink = writes_stdout(&desc, &registry);
    if stdout_sink && args.progress.as_deref() == Some("-") {
        bail!("--progress -: a sink writes the frames to standard output; give --progress a file");
    }
    let quiet = args.quiet;
    prepared.set_events(Arc::new(move |e: &Event| match e {
        Event::Stalled { stage, elapsed_ms } => {
            say!("\rframepipe: warning: {stage} stalled: one frame has taken {elapsed_ms} ms")
        }
        // Commands from a surface are answered by their replies (`fp-replies`), not twice.
        Event::CommandRejected { command, reason } if !surfaces => {
            say!("\rframepipe: command '{command}' rejected: {reason}")
        }
        Event::CommandRejected { .. } => {}
        Event::PropertyRejected {
            stage,
            prop,
            reason,
        } => {
            say!("\rframepipe: {stage} cannot change '{prop}' while running: {reason}")
        }
        Event::LeftRunning { stage, worker } => say!(
            "\rframepipe: warning: fp-worker-{worker} is still inside {stage} (blocked; it cannot be interrupted) and was left running"
        ),
        Event::FadeDone { to, frame } => say!("\rframepipe: fade to {to} done at frame {frame}"),
        // Which source ended the run (a render's normal end: one line, not with -q).
        Event::SourceEnded { stage, frames } if !quiet => {
            say!("\rframepipe: {stage} ended after {frames} frames: the run ends")
        }
        Event::SourceEnded { .. } => {}
        Event::FadeStuck { to, reason } => say!(
            "\rframepipe: warning: the fade to {to} cannot end (its old project keeps running): {reason}"
        ),
        other => say!("\rframepipe: {other:?}"),
    }));
    // Commands: from stdin, or none; the queue exists either way so that signals can stop.
    let mut own = None;
    if args.start_paused {
        // Read at the first frame boundary, before any frame is released.
        own = Some(
            tx.post(ControlCommand::Pause)
                .map_err(|f| anyhow::anyhow!("command queue: {f}"))?,
        );
    }
    prepared.set_commands(rx);
    let osc_input = match osc_addr {
        Some(addr) => {
            let input = osc::spawn(
                addr,
                vec![osc::OscShow {
                    name: None,
                    tx: tx.clone(),
                    view: prepared.view(),
                }],
            )?;
            if !input.local.ip().is_loopback() {
                say!(
                    "framepipe: warning: OSC on {}: anyone who can reach this address can control the run",
                    input.local
                );
            } else if !args.quiet {
                say!("framepipe: OSC on udp {}", input.local);
            }
            Some(input)
        }
        None => None,
    };
    let oscquery = match (oscquery_addr, &osc_input) {
        (Some(addr), Some(input)) => {
            let options = input.query_options(addr, args.no_mdns);
            let show = framepipe_oscquery::LiveShow::new(prepared.view(), prepared.counters());
            let server =
                framepipe_oscquery::serve(options, show, Some(tx.clone())).context("--oscquery")?;
            let local = server.local_addr();
            if !local.ip().is_loopback() {
                say!(
                    "framepipe: warning: OSCQuery on http://{local}: anyone who can reach this address can control the run"
                );
            } else if !args.quiet {
                say!("framepipe: OSCQuery on http://{local}");
            }
            if let (Some(note), false) = (&server.mdns_note, args.quiet) {
                say!("framepipe: {note}");
            }
            Some(server)
        }
        _ => None,
    };
    let midi_input = match &args.midi {
        Some(port) => {
            let project = looks_like_project(&pipeline).then(|| pipeline.clone().into());
            let input = midi::start(
                port,
                &desc,
                &registry,
                project,
                pace,
                args.start_paused,
                prepared.counters(),
                prepared.view(),
                tx.clone(),
            )?;
            if !args.quiet {
                say!("framepipe: MIDI from {}", input.name);
            }
            Some(input)
        }
        None => None,
    };
    let web_counters = web_bound.as_ref().map(|b| b.counters());
    let web_server = match web_bound {
        Some(bound) => {
            let url = bound.url();
            let local = bound.local_addr();
            let server = framepipe_web::Web::start(
                bound,
                framepipe_web::Engine {
                    name: shows::show_name(&pipeline, 1, &desc).unwrap_or_else(|_| "show-1".into()),
                    view: prepared.view(),
                    counters: prepared.counters(),
                    commands: tx.clone(),
                    preview_tap: web_preview.as_ref().map(|t| t.monitor.clone()),
                },
            )?;
            if !local.ip().is_loopback() {
                say!(
                    "framepipe: warning: web page on {local}: anyone who can reach this address and has the token can control the run"
                );
            }
            say!("framepipe: web control on {url}");
            Some(server)
        }
        None => None,
    };
    let replies = surfaces
        .then(|| {
            commands::spawn_reply_printer(
                vec![commands::ReplySource::new(None, tx.replies(), own)
                    .with_web(web_server.as_ref().map(|w| w.reply_tap()))],
                args.quiet,
            )
        })
        .flatten();
    if commands_from_stdin {
        commands::spawn_stdin_reader(
            tx,
            args.start_paused,
            osc_input.is_some() || midi_input.is_some() || web_server.is_some() || has_window,
            midi_input.as_ref().map(|m| m.handle()),
        );
    } else {
        drop(tx);
    }
    let osc_counters = osc_input.as_ref().map(|o| Arc::clone(&o.counters));
    let midi_counters = midi_input.as_ref().map(|m| Arc::clone(&m.counters));
    let threads = prepared.threads();
    let max_in_flight = prepared.max_in_flight();
    let counters = prepared.counters();
    {
        let counters = Arc::clone(&counters);
        pause_probe.set(move || counters.paused());
    }
    let show_status = !args.quiet && std::io::stderr().is_terminal();
    let stop = Arc::new(AtomicBool::new(false));
    let status = show_status.then(|| {
        let mut extras: Vec<Box<dyn Fn() -> String + Send>> = Vec::new();
        if let Some(o) = osc_counters.clone() {
            extras.push(Box::new(move || o.summary()));
        }
        if let Some(m) = midi_counters.clone() {
            extras.push(Box::new(move || m.summary()));
        }
        if let Some(w) = web_counters.clone() {
            extras.push(Box::new(move || w.summary()));
        }
        if let Some(q) = oscquery.as_ref().map(|q| q.counters()) {
            extras.push(Box::new(move || {
                format!(
                    "oscquery {} ws {} pkts",
                    q.ws_clients.load(Ordering::Relaxed),
                    q.packets.load(Ordering::Relaxed)
                )
            }));
        }
        let src = status::StatusSource {
            counters: Arc::clone(&counters),
            total: total_frames,
            extras,
        };
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("fp-status".into())
            .spawn(move || status::status_line(&src, &stop))
            .expect("spawning the status thread")
    });
    let progress = match &args.progress {
        Some(to) => Some(status::spawn_progress(
            status::ProgressTo::open(to)?,
            Arc::clone(&counters),
            total_frames,
            out_rate,
        )?),
        None => None,
    };
    // Live edits (#9): the editor builds each edit's next graph on the engine's edit thread;
    // it owns the registry from here.
    prepared.set_editor(Box::new(
        edit::DescEditor::new(desc.clone(), registry)
            .with_view(prepared.view())
            .with_preview(web_preview.clone()),
    ));
    signal.running();
    let result = prepared.run();
    stop.store(true, Ordering::Relaxed);
    let oscquery_counters = oscquery.as_ref().map(|q| q.counters());
    if let Some(server) = oscquery {
        let counters = server.counters();
        server.finish();
        if !args.quiet {
            say!("framepipe: {}", counters.summary());
        }
    }
    // The pages are disconnected and the web's command sender dropped with the run.
    if let Some(w) = web_server {
        w.finish();
        if !args.quiet {
            if let Some(c) = &web_counters {
                say!("framepipe: {}", c.summary());
            }
        }
    }
    if let Some(input) = osc_input {
        input.finish();
        if !args.quiet {
            say!("framepipe: {}", input_summary(&osc_counters));
        }
    }
    if let Some(input) = midi_input {
        let counters = Arc::clone(&input.counters);
        input.finish();
        if !args.quiet {
            say!("framepipe: {}", counters.summary());
        }
    }
    if let Some(t) = status {
        let _ = t.join();
    }
    // The engine's reader is gone with the run: the last replies are printed, then it ends.
    if let Some(t) = replies {
        let _ = t.join();
    }
    let final_stats = match &result {
        Ok(s) => s.clone(),
        Err(_) => counters.snapshot(),
    };
    if let Some(p) = progress {
        p.finish(Some(final_stats.frames));
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
    if let Some(path) = args.stats.or(desc.settings.stats.clone()) {
        write_stats(
            Path::new(&path),
            &final_stats,
            threads,
            max_in_flight,
            &isolation,
            web_counters.as_deref(),
            oscquery_counters.as_deref(),
        )
        .with_context(|| format!("writing stats to '{path}'"))?;
    }
    if let Some(code) = signal.exit_status() {
        // Stopped by a signal: the frames that made it out were finished and flushed (or the
        // run failed meanwhile: say so, the status still tells the signal).
        match result {
            Ok(s) => say!(
                "framepipe: stopped by a signal after {} frames in {:.2} s",
                s.frames,
                s.wall_s
            ),
            Err(e) => say!("framepipe: error: {}", one_line(&anyhow::Error::from(e))),
        }
        return Ok(Exit::Status(code));
    }
    let stats = match result {
        Ok(s) => s,
        Err(e) if stdout_sink && is_broken_pipe(&e) => {
            say!(
                "framepipe: {}; stdout was closed by its reader (broken pipe) after {} frames; stopped",
                one_line(&anyhow::Error::from(e)),
                final_stats.frames
            );
            return Ok(Exit::Status(EXIT_BROKEN_STDOUT));
        }
        Err(e) => return Err(e.into()),
    };
    if !args.quiet {
        say!(
            "framepipe: {} frames in {:.2} s ({:.1} fps) on {} threads{}",
            stats.frames,
            stats.wall_s,
            stats.fps,
            threads,
            match &stats.pacing {
                Some(p) => format!(
                    "; paced at {:.3} fps ({}{}): lateness p50 {:.1} us, p99 {:.1} us, max {:.1} us; {} late, {} repeated",
                    p.target_fps,
                    p.overload.as_str(),
                    if p.realtime { ", SCHED_FIFO" } else { "" },
                    p.lateness.p50_us,
                    p.lateness.p99_us,
                    p.lateness.max_us,
                    p.lateness.late,
                    p.lateness.repeated
                ),
                None => String::new(),
            }
        );
    }
    Ok(Exit::Done)
}

/// Whether a sink of the graph writes standard output.
fn writes_stdout(desc: &GraphDesc, registry: &Registry) -> bool {
    stdout_sink(desc, registry).is_some()
}

/// The first sink of the graph that writes standard output, by name.
fn stdout_sink<'d>(desc: &'d GraphDesc, registry: &Registry) -> Option<&'d str> {
    desc.nodes
        .iter()
        .find(|n| {
            registry
                .find(&n.element)
                .is_some_and(|e| e.desc.kind == ElementKind::Sink)
                && n.props.iter().any(|(k, v)| {
                    k == "location" && matches!(v.as_str(), "-" | "/dev/stdout" | "/dev/fd/1")
                })
        })
        .map(|n| n.name.as_str())
}

/// Refuses a graph with a sink writing standard output when it was closed at start (`>&-`):
/// every frame would be lost without an error.
pub(crate) fn check_stdout(desc: &GraphDesc, registry: &Registry) -> Result<()> {
    match stdout_sink(desc, registry) {
        Some(sink) if stdio::stdout_was_closed() => bail!(
            "{sink}: its location writes standard output, which was closed when framepipe \
             started: every frame would be lost (no frame written)"
        ),
        _ => Ok(()),
    }
}

/// `framepipe graph`: builds the graph as `run` would (sinks checked, not built), negotiates
/// every node's shape, prints the layout.
fn graph(args: GraphArgs) -> Result<()> {
    if let Some(text) = &args.max_memory {
        let max_memory = framepipe_core::limits::parse_bytes(text)
            .map_err(|e| anyhow::anyhow!("bad --max-memory: {e}"))?;
        framepipe_core::Limits { max_memory }.set();
    }
    let desc = load_desc(&args.pipeline)?;
    let registry = registry_for(&desc, None);
    let layout = build(&desc, &registry, Purpose::Layout)?.layout()?;
    let text = if args.dot {
        layout.dot()
    } else {
        layout.text()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Whether an error was caused by a broken pipe.
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The OSC counts for the end of the run.
fn input_summary(osc: &Option<Arc<osc::OscCounters>>) -> String {
    osc.as_ref().map_or(String::new(), |c| c.summary())
}

fn write_stats(
    path: &Path,
    s: &RunStats,
    threads: usize,
    in_flight: usize,
    isolation: &[framepipe_frei0r::isolate::Summary],
    web: Option<&framepipe_web::WebCounters>,
    oscquery: Option<&framepipe_oscquery::Counters>,
) -> Result<()> {
    let mut doc = stats_json(s, threads, in_flight, web)?;
    doc["isolated"] = isolation_json(isolation);
    if let Some(q) = oscquery {
        doc["oscquery"] = q.to_json();
    }
    std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
    Ok(())
}

/// The isolated plugins' figures for `--stats` (process-wide: every show's).
fn isolation_json(isolation: &[framepipe_frei0r::isolate::Summary]) -> serde_json::Value {
    isolation
        .iter()
        .map(|i| {
            serde_json::json!({
                "name": i.name,
                "crashes": i.crashes,
                "stalls": i.stalls,
                "restarts": i.restarts,
                "frames_replaced": i.substituted,
                "frames": i.frames,
                "bytes_copied": i.bytes_copied,
            })
        })
        .collect()
}

/// One show's `--stats` object (without `isolated`, which is the process's).
fn stats_json(
    s: &RunStats,
    threads: usize,
    in_flight: usize,
    web: Option<&framepipe_web::WebCounters>,
) -> Result<serde_json::Value> {
    let stages: Vec<serde_json::Value> = s
        .stages
        .iter()
        .map(|st| {
            serde_json::json!({
                "name": st.name,
                "mode": st.mode.as_str(),
                "instances": st.instances,
                "frames": st.frames,
                "skipped": st.skipped,
                "mean_ms": st.mean_ms,
            })
        })
        .collect();
    let mut doc = serde_json::json!({
        "frames": s.frames,
        "wall_s": s.wall_s,
        "fps": s.fps,
        "threads": threads,
        "max_in_flight": in_flight,
        "tempo_bpm": s.tempo_bpm,
        "stages": stages,
        "lock_hold_us": lock_json(&s.lock_hold_us),
        "output_lock_wait_us": lock_json(&s.output_lock_wait_us),
        "edits": {
            "switched": s.edits.switched,
            "repeated": s.edits.repeated,
            "drain_mean_ms": s.edits.drain_mean_ms,
            "drain_max_ms": s.edits.drain_max_ms,
            "built": s.edits.built,
            "build_repeated": s.edits.build_repeated,
            "build_mean_ms": s.edits.build_mean_ms,
        },
        // What the show holds against --max-memory as the budget counts it (every graph
        // version alive: during a live edit, both), bytes.
        "memory": {
            "max_memory": s.memory.max_memory,
            "held": s.memory.held,
            "held_max": s.memory.held_max,
            "edits_refused": s.memory.edits_refused,
        },
    });
    if let Some(w) = web {
        doc["web"] = serde_json::to_value(w.snapshot())?;
    }
    if let Some(p) = &s.pacing {
        doc["paced_fps"] = serde_json::json!(p.target_fps);
        doc["overload"] = serde_json::json!(p.overload.as_str());
        doc["realtime"] = serde_json::json!(p.realtime);
        doc["lateness_us"] = serde_json::json!({
            "p50": p.lateness.p50_us,
            "p99": p.lateness.p99_us,
            "max": p.lateness.max_us,
            "mean": p.lateness.mean_us,
        });
        doc["late"] = serde_json::json!(p.lateness.late);
        doc["late_frames"] = p
            .late_log
            .frames()
            .map(|f| {
                serde_json::json!({
                    "deadline_s": f.deadline_ns as f64 / 1e9,
                    "late_us": f.lateness_ns as f64 / 1e3,
                    "ready_us": f.ready_ns as f64 / 1e3,
                    "begun_us": f.begun_ns as f64 / 1e3,
                    "budget_us": f.budget_ns as f64 / 1e3,
                    "allowed_us": f.allowed_ns.map(|t| t as f64 / 1e3),
                })
            })
            .collect();
        doc["repeated"] = serde_json::json!(p.lateness.repeated);
        doc["standby_rescued"] = serde_json::json!(p.standby_rescued);
        doc["output_thread_cpu_share"] = serde_json::json!(p.cpu_share);
        doc["latency"] = serde_json::json!({
            "budget_ms": p.latency_budget_ms,
            "frames_ahead": p.frames_ahead,
            "graph_ms": p.frame_latency_ms,
            "margin_ms": p.latency_margin_ms,
            "margin_peak_ms": p.latency_margin_peak_ms,
        });
    }
    Ok(doc)
}

/// A lock histogram's figures for `--stats` (µs; percentiles are power-of-two bucket bounds).
pub(crate) fn lock_json(l: &framepipe_runtime::LockSummary) -> serde_json::Value {
    serde_json::json!({ "p50": l.p50_us, "p99": l.p99_us, "max": l.max_us, "count": l.count })
}

/// The screen output element (its runs get a window link).
const WINDOWSINK: &str = framepipe_window::sink::NAME;

/// `framepipe displays`: every display a `windowsink` can go to.
fn displays() -> Result<()> {
    let list = framepipe_window::displays()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<6} {:<16} {:<12} {:<12} primary",
        "index", "name", "size", "position"
    )?;
    for d in &list {
        writeln!(
            out,
            "{:<6} {:<16} {:<12} {:<12} {}",
            d.index,
            d.name,
            format!("{}x{}", d.width, d.height),
            format!("{:+}{:+}", d.x, d.y),
            if d.primary { "yes" } else { "no" }
        )?;
    }
    Ok(())
}

fn detail<'a>(d: &'a framepipe_core::ElementDesc, key: &str) -> &'a str {
    d.details
        .iter()
        .find(|(k, _)| k == key)
        .map_or("", |(_, v)| v.as_str())
}

fn plugins(verbose: bool) -> Result<()> {
    let (registry, warnings) = registry(None);
    let mut out = std::io::stdout().lock();
    let (frei0r, native): (Vec<_>, Vec<_>) = registry
        .iter()
        .partition(|e| e.desc.name.starts_with("frei0r-"));
    writeln!(out, "native elements:")?;
    for e in &native {
        let d = &e.desc;
        let props: Vec<&str> = d.props.iter().map(|p| p.name.as_str()).collect();
        writeln!(
            out,
            "  {:<16} {:<10} {}  [{}]",
            d.name,
            kind_label(d.kind),
            d.description,
            props.join(", ")
        )?;
    }
    for (name, description) in build::STRUCTURAL {
        writeln!(out, "  {name:<16} {:<7} {description}", "graph")?;
    }
    writeln!(out, "\nfrei0r plugins ({}):", frei0r.len())?;
    writeln!(
        out,
        "  {:<28} {:<10} {:<9} {:<9} parameters",
        "name", "type", "colour", "mode"
    )?;
    for e in &frei0r {
        let d = &e.desc;
        let props: Vec<String> = d
            .props
            .iter()
            .map(|p| format!("{}:{}", p.name, short_kind(&p.kind)))
            .collect();
        let colour = detail(d, "colour model");
        let colour = if colour.is_empty() {
            detail(d, "color model")
        } else {
            colour
        };
        writeln!(
            out,
            "  {:<28} {:<10} {:<9} {:<9} {}",
            d.name,
            kind_label(d.kind),
            colour,
            if scheduled(d.kind) {
                d.default_mode.as_str()
            } else {
                "-"
            },
            props.join(" ")
        )?;
    }
    if !warnings.is_empty() {
        if verbose {
            writeln!(out, "\nnot loaded:")?;
            for w in &warnings {
                writeln!(out, "  {w}")?;
            }
        } else {
            writeln!(
                out,
                "\n({} plugin files not loaded; --verbose shows why)",
                warnings.len()
            )?;
        }
    }
    Ok(())
}

/// `source`, `effect`, `sink`, or `mixer N` / `mixer N..M` with the inputs a mixer takes.
fn kind_label(kind: ElementKind) -> String {
    match kind {
        ElementKind::Mixer {
            min_inputs,
            max_inputs,
        } if min_inputs == max_inputs => format!("{kind} {min_inputs}"),
        ElementKind::Mixer {
            min_inputs,
            max_inputs,
        } => format!("{kind} {min_inputs}..{max_inputs}"),
        _ => kind.to_string(),
    }
}

/// Whether the scheduler runs elements of this kind serial or parallel (effects and mixers).
fn scheduled(kind: ElementKind) -> bool {
    matches!(kind, ElementKind::Effect | ElementKind::Mixer { .. })
}

fn short_kind(k: &framepipe_core::PropKind) -> &'static str {
    use framepipe_core::PropKind::*;
    match k {
        Bool => "bool",
        Int { .. } => "int",
        Float { .. } => "float",
        Str => "string",
        Enum(_) => "enum",
        Color => "color",
        Position => "position",
    }
}

fn inspect(name: &str) -> Result<()> {
    if let Some((_, description)) = build::STRUCTURAL.iter().find(|(n, _)| *n == name) {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{name}  (graph node, made by framepipe itself)")?;
        writeln!(out, "  {description}")?;
        writeln!(out, "properties:")?;
        if name == "feedback" {
            for (p, kind, default, what) in build::FEEDBACK_PROPS {
                writeln!(out, "  {p:<20} {kind:<28} default {default}")?;
                writeln!(out, "  {:<20} {what}", "")?;
            }
        } else {
            writeln!(out, "  (none)")?;
        }
        return Ok(());
    }
    let (registry, _) = registry(None);
    let entry = registry.lookup(name)?;
    let d = &entry.desc;
    let mut out = std::io::stdout().lock();
    match d.kind {
        ElementKind::Mixer {
            min_inputs,
            max_inputs,
        } if min_inputs == max_inputs => {
            writeln!(out, "{}  ({}, {min_inputs} inputs)", d.name, d.kind)?
        }
        ElementKind::Mixer {
            min_inputs,
            max_inputs,
        } => writeln!(
            out,
            "{}  ({}, {min_inputs} to {max_inputs} inputs)",
            d.name, d.kind
        )?,
        _ => writeln!(out, "{}  ({})", d.name, d.kind)?,
    }
    if !d.description.is_empty() {
        writeln!(out, "  {}", d.description)?;
    }
    if scheduled(d.kind) {
        writeln!(
            out,
            "  scheduling: {} (override with mode=serial|parallel)",
            d.default_mode
        )?;
    }
    for (k, v) in &d.details {
        writeln!(out, "  {k}: {v}")?;
    }
    writeln!(out, "properties:")?;
    if d.props.is_empty() {
        writeln!(out, "  (none)")?;
    }
    for p in &d.props {
        writeln!(
            out,
            "  {:<20} {:<28} default {}",
            p.name,
            p.kind.to_string(),
            p.default
        )?;
        if !p.description.is_empty() {
            writeln!(out, "  {:<20} {}", "", p.description)?;
        }
    }
    Ok(())
}

/// Whether commands are read from stdin, given the sources that read it (`stdin_sources`):
/// `--control` (none given: stdin unless a source reads it, which is said unless `quiet`);
/// refused when two sources read stdin, or one does and `--control stdin` asks for it too.
pub(crate) fn commands_from_stdin(
    control: Option<&str>,
    stdin_sources: &[String],
    quiet: bool,
) -> Result<bool> {
    if let [a, b, ..] = stdin_sources {
        bail!("{a} and {b} both read stdin; only one source can, give the other a file");
    }
    Ok(match (control, stdin_sources.first()) {
        (None, None) | (Some("stdin"), None) => true,
        (None, Some(source)) => {
            if !quiet {
                say!(
                    "framepipe: {source} reads stdin, so commands are not read from it \
                     (SIGINT/SIGTERM still stop the run)"
                );
            }
            false
        }
        (Some("stdin"), Some(source)) => bail!(
            "--control stdin: {source} reads stdin too, and they cannot share it; use \
             --control none, or give the source a file"
        ),
        (Some("none"), _) => false,
        (Some(other), _) => bail!("bad --control '{other}': expected stdin or none"),
    })
}
