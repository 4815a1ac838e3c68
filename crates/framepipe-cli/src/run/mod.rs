//! `framepipe run SHOW...`: one show or several, through one path (user side in docs/SHOWS.md).
//!
//! [`run`] takes the command line to running shows in the same steps whatever their number:
//! the signals caught and one command queue per show made first ([`crate::signals`]); every
//! show loaded and named ([`show::load`]); the flags checked ([`settings::Global`]); the
//! surfaces' addresses checked and the web page bound; each show set up by one function,
//! [`show::setup`] (built, prepared, its events, commands and editor set, its parts for each
//! surface collected); the surfaces started ([`surfaces::start`]); the status line and
//! `--progress` ([`crate::status`]); the shows run ([`Engine`]); the surfaces stopped; the end
//! reported ([`report::conclude`]).
//!
//! What differs with the number of shows is data, decided where it is used: which settings
//! win (`settings.rs`), whether a show is named in its lines and addresses ([`Plan::many`]),
//! the figures of the status line, the end report (`report.rs`), and how the shows run:
//!
//! * **One show** runs on this thread with [`Prepared::run`]: its own workers and its own
//!   output thread (`SCHED_FIFO` when permitted, its own standby), its own frame pools, its
//!   command queue of [`ONE_SHOW_QUEUE`]. A [`Host`] of one show would run its master sink on
//!   the host's `fp-clock` thread with shared pools and a host clock: other threads, other
//!   `--stats` figures (the output thread's CPU share, its lock waits), a frei0r plugin
//!   isolated by default; so the only show keeps the engine of its own.
//! * **Several shows** run on one [`Host`]: one worker pool (`--threads`; a project's
//!   `threads` is not used, and said so) and one clock thread; every frei0r node isolated
//!   unless it says `isolate=false` (a plugin crashing in process would end every show); one
//!   frame pool per frame size shared by the shows; each show's queue holds [`SHOW_QUEUE`]
//!   commands. A show failing ends that show only, reported by name as it ends (exit status
//!   1). Every show is built and prepared, one after the other, before any runs (a progress
//!   line on a terminal); a show that cannot be built refuses the whole run, naming it.
//! * **Control**, either way: one `fp-stdin` thread (several shows: `@NAME COMMAND`,
//!   `@* COMMAND`), one `fp-replies` thread, one `fp-osc` thread (several: `/NAME/framepipe/...`),
//!   one `fp-signals` thread stopping every show, one OSCQuery server (a subtree per show), one
//!   web server (several: `/` lists the shows, `/shows/NAME/` is a show's page) and one MIDI
//!   input (each show's surface with its project's own mappings), each posting to a show's
//!   own queue and reading its published view.

mod events;
mod report;
mod settings;
mod show;
mod surfaces;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use framepipe_control::{command_queue, CommandReader, CommandSender};
use framepipe_runtime::{ClockCounters, Host, Prepared, SharedPools, ShowResult};

use self::events::EventBudget;
use self::settings::Global;
use crate::args::RunArgs;
use crate::load::{native_registry, try_stats_path, writes_stdout};
use crate::status::{self, Figures, StatusSource};
use crate::{commands, osc, signals, web, Exit};

/// Commands each show's queue holds in a run of several: 400 shows × a large ring and its
/// return path would cost tens of MB for commands that arrive a few a second.
pub const SHOW_QUEUE: usize = 64;

/// Commands the only show's queue holds.
const ONE_SHOW_QUEUE: usize = 1024;

/// How often the progress line is redrawn while several shows are built.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// What the run was asked for, checked before any show is set up; [`show::setup`] reads it.
pub(crate) struct Plan<'a> {
    pub args: &'a RunArgs,
    pub global: Global,
    /// The worker threads each show is prepared with (several shows: the host's).
    pub threads: usize,
    /// The web page, bound (taken when it starts).
    pub web: Option<framepipe_web::Bound>,
    pub osc: Option<SocketAddr>,
    pub oscquery: Option<SocketAddr>,
    /// Whether commands are read from standard input.
    pub commands_from_stdin: bool,
    /// Whether any surface posts commands (their replies are then printed by `fp-replies`).
    pub surfaces: bool,
    /// Whether a show outputs to a window (whose keys are commands).
    pub any_window: bool,
    /// The event lines every show shares (several shows).
    pub budget: Option<Arc<EventBudget>>,
}

impl<'a> Plan<'a> {
    /// Whether the run has several shows (each then named in its lines and addresses).
    pub fn many(&self) -> bool {
        self.args.shows.len() > 1
    }

    /// What starts a line about show `name`: `show NAME: ` with several shows, nothing with one.
    pub fn who(&self, name: &str) -> String {
        crate::outlet::who(self.many().then_some(name))
    }

    /// Checks what `args` asks of the loaded `shows` before any is set up: the flags, which
    /// engine runs them (several: the host, with its process-wide settings), standard input's
    /// and output's one reader and writer, the surfaces' addresses, the web page bound (a busy
    /// port is said before anything is built), `--start-paused`'s need of a command source.
    fn new(args: &'a RunArgs, shows: &[show::Given]) -> Result<(Self, Engine)> {
        let many = shows.len() > 1;
        let quiet = args.quiet;
        let global = Global::check(args, (!many).then(|| &shows[0].desc.settings))?;
        framepipe_frei0r::isolate::set_isolate_all(args.isolate_plugins);
        let engine = if many {
            let mut host = Host::new(global.threads);
            host.set_standby(!args.no_standby);
            // Several shows share this process: a frei0r plugin crashing in process would end
            // them all, so every frei0r node runs isolated unless it says `isolate=false`
            // (docs/SHOWS.md).
            framepipe_frei0r::isolate::set_isolate_by_default(true);
            // A frei0r node (isolated by default here) asks for shared-memory pools when it is
            // built; asked for before any show is built, every show's pools are made so, and
            // shows of one frame size still share one pool (else the shows built before it
            // would have heap pools).
            if shows.iter().any(|s| {
                s.desc
                    .nodes
                    .iter()
                    .any(|n| n.element.starts_with("frei0r-"))
            }) {
                framepipe_core::shm::request_shared_pools();
            }
            Engine::Host(host)
        } else {
            Engine::One(None)
        };
        let threads = match &engine {
            Engine::Host(host) => host.threads(),
            Engine::One(_) => global.threads,
        };
        if many && !quiet {
            let own_threads: Vec<&str> = shows
                .iter()
                .filter(|s| s.desc.settings.threads.is_some())
                .map(|s| s.name.as_str())
                .collect();
            if !own_threads.is_empty() {
                say!(
                    "framepipe: the shows share one pool of {threads} workers (--threads); 'threads' in the project files of {} is not used",
                    commands::some_names(own_threads.iter().copied())
                );
            }
        }
        // Standard input has one reader: one source of one show, or the command reader; and
        // standard output one writer.
        let mut stdin_sources = Vec::new();
        let mut stdout_writers = Vec::new();
        {
            let registry = native_registry(None);
            for s in shows {
                for src in commands::stdin_sources(&s.desc, &registry) {
                    stdin_sources.push(if many {
                        format!("{src} (show {})", s.name)
                    } else {
                        src
                    });
                }
                if many && writes_stdout(&s.desc, &registry) {
                    stdout_writers.push(s.name.as_str());
                }
            }
        }
        if let [a, b, ..] = &stdout_writers[..] {
            bail!("shows {a} and {b} both write stdout; only one can, give the other a file");
        }
        let commands_from_stdin =
            commands::commands_from_stdin(args.control.as_deref(), &stdin_sources, quiet)?;
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
        let any_window = shows.iter().any(|s| s.has_window());
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
        let plan = Plan {
            args,
            global,
            threads,
            web: web_bound,
            osc: osc_addr,
            oscquery: oscquery_addr,
            commands_from_stdin,
            surfaces,
            any_window,
            budget: many.then(|| Arc::new(EventBudget::default())),
        };
        Ok((plan, engine))
    }
}

/// What runs the shows: the only show's own engine, or a host for several.
enum Engine {
    One(Option<(String, Box<Prepared>)>),
    Host(Host),
}

/// A host's figures for `--stats`, handles valid after its run.
pub(crate) struct HostFigures {
    pools: SharedPools,
    clock: Arc<ClockCounters>,
}

impl Engine {
    /// Adds a set-up show.
    fn add(&mut self, name: String, prepared: Prepared) -> Result<()> {
        match self {
            Engine::One(one) => *one = Some((name, Box::new(prepared))),
            Engine::Host(host) => host
                .add(name.clone(), prepared)
                .with_context(|| format!("show {name}"))?,
        }
        Ok(())
    }

    fn figures(&self) -> Option<HostFigures> {
        match self {
            Engine::One(_) => None,
            Engine::Host(host) => Some(HostFigures {
                pools: host.pools(),
                clock: host.clock_counters(),
            }),
        }
    }

    /// Runs every show to its end, calling `on_end` as each ends (on this thread); returns how
    /// each ended, in the order they were added.
    fn run(self, mut on_end: impl FnMut(&ShowResult)) -> Vec<ShowResult> {
        match self {
            Engine::One(one) => {
                let (name, prepared) = one.expect("the show was set up");
                let r = ShowResult {
                    name,
                    result: prepared.run(),
                };
                on_end(&r);
                vec![r]
            }
            Engine::Host(host) => host.run(on_end),
        }
    }
}

/// `framepipe run`: the shows given, one or several (see the module documentation).
pub(crate) fn run(args: RunArgs) -> Result<Exit> {
    let n = args.shows.len();
    let many = n > 1;
    let quiet = args.quiet;
    if many && args.progress.is_some() {
        bail!("--progress follows one show; it cannot be used with several");
    }
    // Signals first: a Ctrl-C while building or preparing (a large pool, a slow ffmpeg start,
    // a FIFO waiting for its reader) exits at once with 128 + the signal (no run, no --stats;
    // see signals.rs); once the run has started it stops every show at a frame boundary.
    let capacity = if many { SHOW_QUEUE } else { ONE_SHOW_QUEUE };
    let queues: Vec<(CommandSender, CommandReader)> =
        (0..n).map(|_| command_queue(capacity)).collect();
    let stop = signals::stop_on_signals(queues.iter().map(|(tx, _)| tx.stopper()).collect())
        .context("cannot catch SIGINT/SIGTERM")?;
    // The budget first: every element checks its sizes against it while being built.
    if let Some(text) = &args.max_memory {
        let max_memory = framepipe_core::limits::parse_bytes(text)
            .map_err(|e| anyhow!("bad --max-memory: {e}"))?;
        framepipe_core::Limits { max_memory }.set();
    }
    if let Some(text) = &args.max_gpu_memory {
        let bytes = framepipe_core::limits::parse_bytes(text)
            .map_err(|e| anyhow!("bad --max-gpu-memory: {e}"))?;
        framepipe_runtime::set_max_gpu_memory(bytes);
    }
    let shows = show::load(&args.shows)?;
    // Every stats file is tried now: one that cannot be written is said before the shows run.
    let stats_files: Vec<&String> = if many {
        args.stats
            .iter()
            .chain(shows.iter().filter_map(|s| s.desc.settings.stats.as_ref()))
            .collect()
    } else {
        args.stats
            .as_ref()
            .or(shows[0].desc.settings.stats.as_ref())
            .into_iter()
            .collect()
    };
    for path in stats_files {
        try_stats_path(path)?;
    }
    let (mut plan, mut engine) = Plan::new(&args, &shows)?;
    // Set up every show, one after the other; any failure refuses the run.
    let mut progress = Preparing {
        on: many && !quiet && std::io::stderr().is_terminal(),
        last: None,
    };
    let mut entries = surfaces::Entries::default();
    let mut kept = Vec::with_capacity(n);
    for (i, (given, queue)) in shows.into_iter().zip(queues).enumerate() {
        progress.show(i, n, &given.name);
        let name = given.name.clone();
        let set = show::setup(&plan, i, given, queue, &mut entries)?;
        engine.add(name, set.prepared)?;
        kept.push(set.kept);
    }
    drop(progress);
    let surfaces = surfaces::start(&mut plan, entries, &kept)?;
    let running = Arc::new(AtomicUsize::new(n));
    // Set when every show has ended: the status line's thread ends.
    let run_over = Arc::new(AtomicBool::new(false));
    let status = (!quiet && std::io::stderr().is_terminal())
        .then(|| {
            let figures = if many {
                Figures::Shows {
                    counters: kept.iter().map(|k| Arc::clone(&k.counters)).collect(),
                    running: Arc::clone(&running),
                }
            } else {
                Figures::Show {
                    counters: Arc::clone(&kept[0].counters),
                    total: kept[0].total_frames,
                }
            };
            let extras = surfaces.summaries();
            status::spawn_status_line(StatusSource { figures, extras }, Arc::clone(&run_over))
        })
        .flatten();
    if many && !quiet {
        say!(
            "framepipe: {n} shows on {} shared worker threads",
            plan.threads
        );
    }
    let progress = match &args.progress {
        Some(to) => Some(status::spawn_progress(
            status::ProgressTo::open(to)?,
            Arc::clone(&kept[0].counters),
            kept[0].total_frames,
            kept[0].out_rate,
        )?),
        None => None,
    };
    let host = engine.figures();
    stop.running();
    let results = engine.run(|r| {
        running.fetch_sub(1, Ordering::Relaxed);
        if many {
            report::show_ended(r, quiet);
        }
    });
    run_over.store(true, Ordering::Relaxed);
    if let Some(budget) = &plan.budget {
        budget.say_hidden();
    }
    let mut ended = surfaces.finish(many, quiet);
    if let Some(t) = status {
        let _ = t.join();
    }
    // The engines' readers are gone with the run: the last replies are printed, then it ends.
    if let Some(t) = ended.replies.take() {
        let _ = t.join();
    }
    if let Some(p) = progress {
        p.finish(Some(report::final_stats(&kept[0], &results[0]).frames));
    }
    report::conclude(
        &kept,
        results,
        &ended,
        host.as_ref(),
        args.stats.as_deref().filter(|_| many),
        stop.exit_status(),
        quiet,
    )
}

/// Redraws `framepipe: preparing show 37/200 (cam37)` on a terminal while several shows are
/// set up, at most every [`PROGRESS_EVERY`].
struct Preparing {
    on: bool,
    last: Option<Instant>,
}

impl Preparing {
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

/// The progress line is cleared when the shows are set up, or when one cannot be (before its
/// error is said).
impl Drop for Preparing {
    fn drop(&mut self) {
        if self.on && self.last.is_some() {
            use std::io::Write as _;
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}
