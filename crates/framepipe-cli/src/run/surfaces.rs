//! The control surfaces of a run, one of each for every show: OSC (`fp-osc`), OSCQuery
//! (`fp-oscquery`), MIDI (`fp-midi`), the web page (`fp-web`), the reply printer
//! (`fp-replies`) and the stdin reader (`fp-stdin`).
//!
//! Each show's parts are collected as it is set up ([`Entries`], filled by `show::setup`);
//! [`start`] starts every surface asked for over them, each posting to a show's own queue
//! (coalesced where a flood can come: stdin's `ShowInput`, the OSC reader) and reading its
//! published view. With one show the surfaces address it unnamed (`/framepipe/...`, lines
//! without `@NAME`); with several, by name.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{Context, Result};
use framepipe_control::CommandSender;

use super::show::Kept;
use super::Plan;
use crate::commands::{self, ReplySource, ShowInput};
use crate::osc;
use crate::status::Summary;

/// Each show's part of every surface, in the order of the shows.
#[derive(Default)]
pub(crate) struct Entries {
    pub osc: Vec<osc::OscShow>,
    pub query: Vec<(framepipe_oscquery::ShowEntry, framepipe_oscquery::LiveShow)>,
    pub midi: Vec<framepipe_midi::ShowSurface>,
    pub web: Vec<(framepipe_web::Engine, Arc<framepipe_web::PreviewSlot>)>,
    pub replies: Vec<ReplySource>,
    /// Each show's command sender (for the stdin reader; dropped when stdin is not read).
    pub senders: Vec<CommandSender>,
}

/// The surfaces running.
pub(crate) struct Surfaces {
    osc: Option<osc::OscInput>,
    oscquery: Option<framepipe_oscquery::Server>,
    midi: Option<framepipe_midi::MidiInput>,
    web: Option<framepipe_web::Web>,
    web_counters: Option<Arc<framepipe_web::WebCounters>>,
    replies: Option<std::thread::JoinHandle<()>>,
}

/// Starts every surface `plan` asks for over the shows' `entries` (`kept`: the shows, in the
/// same order), each saying where it listens unless `-q`.
pub(crate) fn start(plan: &mut Plan, entries: Entries, kept: &[Kept]) -> Result<Surfaces> {
    let (many, quiet, args) = (plan.many(), plan.args.quiet, plan.args);
    let Entries {
        osc: osc_shows,
        query,
        midi: midi_shows,
        web: web_shows,
        mut replies,
        senders,
    } = entries;
    let osc_input = match plan.osc {
        Some(addr) => {
            let input = osc::spawn(addr, osc_shows)?;
            if !input.local.ip().is_loopback() {
                say!(
                    "framepipe: warning: OSC on {}: anyone who can reach this address can control the run",
                    input.local
                );
            } else if !quiet {
                if many {
                    say!(
                        "framepipe: OSC on udp {} (addresses /NAME/framepipe/...)",
                        input.local
                    );
                } else {
                    say!("framepipe: OSC on udp {}", input.local);
                }
            }
            Some(input)
        }
        None => None,
    };
    let oscquery = match (plan.oscquery, &osc_input) {
        (Some(addr), Some(input)) => Some(start_oscquery(
            addr,
            input,
            query,
            many,
            quiet,
            args.no_mdns,
        )?),
        _ => None,
    };
    let midi_input = match &args.midi {
        Some(port) => {
            let input = crate::midi::start(port, midi_shows)?;
            if !quiet {
                if many {
                    say!(
                        "framepipe: MIDI from {} (each show's own mappings; @NAME learn ... on stdin)",
                        input.name
                    );
                } else {
                    say!("framepipe: MIDI from {}", input.name);
                }
            }
            Some(input)
        }
        None => None,
    };
    let web_counters = plan.web.as_ref().map(|b| b.counters());
    let web_server = match plan.web.take() {
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
            if many && !quiet {
                say!("framepipe: the page lists the shows; each show's page is /shows/NAME/");
            }
            Some(server)
        }
        None => None,
    };
    let reply_printer = plan
        .surfaces
        .then(|| commands::spawn_reply_printer(replies, quiet))
        .flatten();
    if plan.commands_from_stdin {
        let midi = midi_input.as_ref().map(|m| m.handle());
        let inputs = kept
            .iter()
            .zip(senders)
            .enumerate()
            .map(|(i, (k, tx))| {
                (
                    k.name.clone(),
                    ShowInput::new(many.then_some(k.name.as_str()), tx, args.start_paused)
                        .with_midi(midi.as_ref().map(|m| m.for_show(i))),
                )
            })
            .collect();
        let others =
            osc_input.is_some() || midi_input.is_some() || web_server.is_some() || plan.any_window;
        commands::spawn_stdin_reader(inputs, others);
    } else {
        drop(senders);
    }
    Ok(Surfaces {
        osc: osc_input,
        oscquery,
        midi: midi_input,
        web: web_server,
        web_counters,
        replies: reply_printer,
    })
}

/// Serves OSCQuery on `addr` for `input`'s shows (one subtree per show when several).
fn start_oscquery(
    addr: SocketAddr,
    input: &osc::OscInput,
    shows: Vec<(framepipe_oscquery::ShowEntry, framepipe_oscquery::LiveShow)>,
    many: bool,
    quiet: bool,
    no_mdns: bool,
) -> Result<framepipe_oscquery::Server> {
    let options = input.query_options(addr, no_mdns);
    let server = framepipe_oscquery::serve_shows(options, shows).context("--oscquery")?;
    let local = server.local_addr();
    if !local.ip().is_loopback() {
        say!(
            "framepipe: warning: OSCQuery on http://{local}: anyone who can reach this address can control the run"
        );
    } else if !quiet {
        say!("framepipe: OSCQuery on http://{local}");
        if many {
            say!("framepipe: OSCQuery: one subtree per show, /NAME/framepipe/...");
        }
    }
    if let (Some(note), false) = (&server.mdns_note, quiet) {
        say!("framepipe: {note}");
    }
    Ok(server)
}

/// What the surfaces leave for the run's report.
pub(crate) struct Ended {
    pub web: Option<Arc<framepipe_web::WebCounters>>,
    pub oscquery: Option<Arc<framepipe_oscquery::Counters>>,
    /// The reply printer, to join once the run's end is said (its last replies first).
    pub replies: Option<std::thread::JoinHandle<()>>,
}

impl Surfaces {
    /// Each running surface's counts, for the status line (OSC, MIDI, web, OSCQuery).
    pub fn summaries(&self) -> Vec<Summary> {
        let mut out: Vec<Summary> = Vec::new();
        if let Some(o) = &self.osc {
            let c = Arc::clone(&o.counters);
            out.push(Box::new(move || c.summary()));
        }
        if let Some(m) = &self.midi {
            let c = Arc::clone(&m.counters);
            out.push(Box::new(move || c.summary()));
        }
        if let Some(w) = &self.web_counters {
            let c = Arc::clone(w);
            out.push(Box::new(move || c.summary()));
        }
        if let Some(q) = &self.oscquery {
            let c = q.counters();
            out.push(Box::new(move || {
                format!(
                    "oscquery {} ws {} pkts",
                    c.ws_clients.load(Ordering::Relaxed),
                    c.packets.load(Ordering::Relaxed)
                )
            }));
        }
        out
    }

    /// Stops every surface after the run (the pages are disconnected, every command sender
    /// dropped) and says each one's counts unless `quiet`: one show's in the order OSCQuery,
    /// web, OSC, MIDI; several shows' in the order OSC, OSCQuery, MIDI, web.
    pub fn finish(self, many: bool, quiet: bool) -> Ended {
        let Surfaces {
            osc,
            oscquery,
            midi,
            web,
            web_counters,
            replies,
        } = self;
        let oscquery_counters = oscquery.as_ref().map(|q| q.counters());
        let finish_osc = |osc: Option<osc::OscInput>| {
            if let Some(input) = osc {
                let counters = Arc::clone(&input.counters);
                input.finish();
                if !quiet {
                    say!("framepipe: {}", counters.summary());
                }
            }
        };
        let finish_oscquery = |server: Option<framepipe_oscquery::Server>| {
            if let Some(server) = server {
                let counters = server.counters();
                server.finish();
                if !quiet {
                    say!("framepipe: {}", counters.summary());
                }
            }
        };
        let finish_midi = |midi: Option<framepipe_midi::MidiInput>| {
            if let Some(input) = midi {
                let counters = Arc::clone(&input.counters);
                input.finish();
                if !quiet {
                    say!("framepipe: {}", counters.summary());
                }
            }
        };
        let finish_web = |web: Option<framepipe_web::Web>| {
            if let Some(w) = web {
                w.finish();
                if let (Some(c), false) = (&web_counters, quiet) {
                    say!("framepipe: {}", c.summary());
                }
            }
        };
        if many {
            finish_osc(osc);
            finish_oscquery(oscquery);
            finish_midi(midi);
            finish_web(web);
        } else {
            finish_oscquery(oscquery);
            finish_web(web);
            finish_osc(osc);
            finish_midi(midi);
        }
        Ended {
            web: web_counters,
            oscquery: oscquery_counters,
            replies,
        }
    }
}
