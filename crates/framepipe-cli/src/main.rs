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
//!
//! The crate by job: `args.rs` (the command line), `load.rs` (an argument to a description and
//! its registry), `build.rs` (a description to the runtime's graph), `run/` (`framepipe run`:
//! one path for one show or several; its module doc walks a command line to running shows),
//! the surfaces `commands.rs` (stdin and the reply printer), `osc.rs`, `midi.rs`, `web.rs`
//! with `outlet.rs` (a show's coalesced sender), `edit.rs` (live edits), `signals.rs` (how a
//! run stops), `status.rs` (the status line, `say!`, `--progress`), `info.rs` and `doctor/`
//! (the other subcommands), `flags.rs` (value ranges), `stdio.rs` (stdout closed at start).
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

mod args;
mod build;
mod commands;
mod doctor;
mod edit;
mod flags;
mod info;
mod load;
mod midi;
mod osc;
mod outlet;
mod run;
mod signals;
mod status;
mod stdio;
mod web;

use clap::Parser;

use crate::args::{Cli, Command};

/// Exit status when standard output was closed by its reader (as a shell reports a process
/// killed by SIGPIPE: 128 + 13).
pub(crate) const EXIT_BROKEN_STDOUT: i32 = 141;

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
        Command::Run(args) => run::run(*args),
        Command::Graph(args) => info::graph(args).map(|()| Exit::Done),
        Command::Plugins { verbose } => info::plugins(verbose).map(|()| Exit::Done),
        Command::Inspect { name, props } => info::inspect(&name, &props).map(|()| Exit::Done),
        Command::MidiPorts => midi::list_ports().map(|()| Exit::Done),
        Command::AudioDevices => std::io::Write::write_all(
            &mut std::io::stdout(),
            framepipe_audio::list_devices().as_bytes(),
        )
        .map(|()| Exit::Done)
        .map_err(Into::into),
        Command::Doctor(args) => doctor::run(args).map(|()| Exit::Done),
        Command::Displays => info::displays().map(|()| Exit::Done),
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
pub(crate) fn one_line(e: &anyhow::Error) -> String {
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

/// Whether an error was caused by a broken pipe.
pub(crate) fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
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
