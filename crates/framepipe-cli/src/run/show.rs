//! One show of a run: loaded and named ([`load`]), then set up ([`setup`]): the one function
//! that turns a show's description into a prepared engine with its commands, events, editor
//! and its parts for each surface, whether the run has one show or several.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use framepipe_control::{Command as ControlCommand, CommandReader, CommandSender};
use framepipe_project::GraphDesc;
use framepipe_runtime::{Counters, Prepared};
use framepipe_window::{PauseProbe, WindowLink};

use super::events::show_events;
use super::settings::options_for;
use super::surfaces::Entries;
use super::Plan;
use crate::build::{build, Purpose};
use crate::commands::ReplySource;
use crate::load::{check_stdout, looks_like_project, registry_for, writes_stdout, WINDOWSINK};
use crate::{status, web};

/// One show as given on the command line, loaded.
pub(crate) struct Given {
    /// What was given (a path or a pipeline string).
    pub arg: String,
    pub name: String,
    pub desc: GraphDesc,
}

impl Given {
    /// Whether the show outputs to a window (a `windowsink`, whose keys are commands).
    pub fn has_window(&self) -> bool {
        self.desc.nodes.iter().any(|n| n.element == WINDOWSINK)
    }
}

/// The name of the show given as argument `position` (from 1): a project's `name`, else its
/// file stem; a pipeline string `show-POSITION`.
pub(crate) fn show_name(arg: &str, position: usize, desc: &GraphDesc) -> Result<String> {
    if !looks_like_project(arg) {
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

/// Loads every show and names it. Several: an error names the show, and two shows of one name
/// are an error naming both. One: its name is only the web page's title, `show-1` when its
/// file cannot name it.
pub(crate) fn load(args: &[String]) -> Result<Vec<Given>> {
    if let [arg] = args {
        let desc = crate::load::load_desc(arg)?;
        let name = show_name(arg, 1, &desc).unwrap_or_else(|_| "show-1".into());
        return Ok(vec![Given {
            arg: arg.clone(),
            name,
            desc,
        }]);
    }
    let mut shows: Vec<Given> = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        let desc =
            crate::load::load_desc(arg).with_context(|| format!("show {} ('{arg}')", i + 1))?;
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

/// The show's audio input (`--audio`), started; an `~audio:` binding without one is an error.
fn audio_input(audio: &ShowAudio, desc: &GraphDesc) -> Result<Option<framepipe_audio::Input>> {
    let Some(source) = &audio.source else {
        let bound = desc.nodes.iter().find_map(|n| {
            n.props
                .iter()
                .find(|(_, v)| v.trim_start().starts_with("~audio"))
                .map(|(k, v)| format!("{}.{k}={v}", n.name))
        });
        if let Some(b) = bound {
            bail!("{b} follows the audio, but the show has none: give it --audio SOURCE (a file or stream ffmpeg reads), or audio = \"...\" in its project file");
        }
        return Ok(None);
    };
    let bands = match &audio.bands {
        Some(edges) => framepipe_audio::BandEdges::parse(edges)?,
        None => framepipe_audio::BandEdges::default(),
    };
    Ok(Some(framepipe_audio::Input::start(source, &bands)?))
}

/// A show's audio: `--audio` / `--audio-bands`, else its project file's `audio` /
/// `audio-bands` (flags win, as for every setting).
struct ShowAudio {
    source: Option<String>,
    bands: Option<String>,
}

impl ShowAudio {
    fn of(args: &crate::args::RunArgs, desc: &GraphDesc) -> Self {
        ShowAudio {
            source: args.audio.clone().or(desc.settings.audio.clone()),
            bands: args
                .audio_bands
                .clone()
                .or(desc.settings.audio_bands.clone()),
        }
    }
}

/// The show's audio bands for the surfaces (0: no `--audio`).
fn audio_band_count(audio: &ShowAudio) -> usize {
    if audio.source.is_none() {
        return 0;
    }
    audio
        .bands
        .as_deref()
        .map_or_else(framepipe_audio::BandEdges::default, |e| {
            framepipe_audio::BandEdges::parse(e).unwrap_or_default()
        })
        .count()
}

/// `ffmpegsink audio=true` muxes the show's `--audio` (its `audio-location`, unless given);
/// and a clip's own sound is never dropped without a word: an `ffmpegsrc` whose file has
/// an audio stream that `--audio` does not name is told about once.
fn audio_to_outputs(
    args: &crate::args::RunArgs,
    audio: &ShowAudio,
    desc: &mut GraphDesc,
    who: &str,
) -> Result<()> {
    let prop = |n: &framepipe_project::NodeDescr, k: &str| {
        n.props.iter().find(|(p, _)| p == k).map(|(_, v)| v.clone())
    };
    for n in desc.nodes.iter_mut() {
        if n.element == "ffmpegsink"
            && prop(n, "audio").is_some_and(|v| v == "true")
            && prop(n, "audio-location").is_none()
        {
            let Some(source) = &audio.source else {
                bail!(
                    "{}.audio=true muxes the show's audio, but it has none: give it --audio SOURCE (or audio-location=FILE)",
                    n.name
                );
            };
            n.props.push(("audio-location".into(), source.clone()));
        }
        if n.element == "ffmpegsrc" && prop(n, "format").is_none() && !args.quiet {
            let Some(location) = prop(n, "location") else {
                continue;
            };
            if audio.source.as_deref() != Some(location.as_str())
                && framepipe_audio::probe_has_audio(&location)
            {
                say!(
                    "framepipe: {who}{}: the sound of '{location}' is not used (--audio {location} follows it; ffmpegsink audio=true then muxes it)",
                    n.name
                );
            }
        }
    }
    Ok(())
}

/// A show once set up: what the CLI keeps to report on it.
pub(crate) struct Kept {
    pub name: String,
    pub counters: Arc<Counters>,
    pub threads: usize,
    pub in_flight: usize,
    /// The show's own stats file, in one show's format (one show: `--stats`, else its
    /// project's `stats`; several: its project's `stats`).
    pub stats: Option<String>,
    /// Whether a sink writes standard output (a broken pipe there ends the run quietly).
    pub writes_stdout: bool,
    /// Frames its sources will give, when their lengths say it.
    pub total_frames: Option<u64>,
    /// Its audio input (`--audio`), decoding while the show runs.
    pub _audio: Option<framepipe_audio::Input>,
    /// The rate its output runs at (`--progress`'s output time).
    pub out_rate: framepipe_core::Rational,
}

/// A show set up: its engine, ready to run, and what is kept of it.
pub(crate) struct SetUp {
    pub prepared: Prepared,
    pub kept: Kept,
}

/// Sets up show number `i` (from 0) of the run: its registry (with its window link and web
/// preview), its graph built and prepared with its options, its events, its command queue
/// (`--start-paused`'s pause posted first), its live editor, and its parts for each surface
/// added to `entries`. Errors name the show when there are several.
pub(crate) fn setup(
    plan: &Plan,
    i: usize,
    mut given: Given,
    (tx, rx): (CommandSender, CommandReader),
    entries: &mut Entries,
) -> Result<SetUp> {
    let args = plan.args;
    let name = given.name.clone();
    let many = plan.many();
    let who = plan.who(&name);
    let in_show = |e: anyhow::Error| {
        if many {
            e.context(format!("show {name}"))
        } else {
            e
        }
    };
    // Windows post their keys as commands (the registry keeps a copy of the sender for the
    // windowsinks it builds).
    let pause_probe = PauseProbe::default();
    let window_link = given.has_window().then(|| WindowLink {
        commands: tx.clone(),
        paused: pause_probe.clone(),
    });
    let mut registry = registry_for(&given.desc, window_link.as_ref());
    drop(window_link);
    // Each show's preview has a slot of its own (the first show the page's own); its tap on
    // the only show (the master sink's input unless --web-preview names a node), on each of
    // several only with --web-preview NODE (a preview costs a show a downscaler and a JPEG
    // encoder ten times a second).
    let web_preview = match &plan.web {
        Some(bound) => {
            let slot = if i == 0 {
                bound.preview_slot()
            } else {
                framepipe_web::PreviewSlot::new()
            };
            framepipe_web::preview::register(&mut registry, Arc::clone(&slot), bound.counters());
            let tap = if !many || args.web_preview.is_some() {
                Some(
                    web::add_preview_tap(&mut given.desc, &registry, args.web_preview.as_deref())
                        .map_err(in_show)?,
                )
            } else {
                None
            };
            Some((slot, tap))
        }
        None => None,
    };
    if args.midi.is_none() && !given.desc.midi.is_empty() && !args.quiet {
        say!(
            "framepipe: {who}the project's {} MIDI mappings are not used without --midi PORT",
            given.desc.midi.len()
        );
    }
    let show_audio = ShowAudio::of(args, &given.desc);
    audio_to_outputs(args, &show_audio, &mut given.desc, &who).map_err(in_show)?;
    check_stdout(&given.desc, &registry).map_err(in_show)?;
    let graph = build(&given.desc, &registry, Purpose::Run).map_err(in_show)?;
    let total_frames = status::total_frames(&graph);
    let source_rate = graph.source_rate();
    let own = many.then_some(&given.desc.settings);
    let options = options_for(&plan.global, own, plan.threads, source_rate).map_err(in_show)?;
    let pace = options.pace;
    let mut prepared = graph.prepare(options).map_err(|e| in_show(e.into()))?;
    let writes_stdout = writes_stdout(&given.desc, &registry);
    if writes_stdout && args.progress.as_deref() == Some("-") {
        bail!("--progress -: a sink writes the frames to standard output; give --progress a file");
    }
    prepared.set_events(show_events(
        many.then_some(name.as_str()),
        plan.surfaces,
        args.quiet,
        plan.budget.clone(),
    ));
    // Read at the first frame boundary, before any frame is released.
    let own_pause = if args.start_paused {
        Some(
            tx.post(ControlCommand::Pause)
                .map_err(|f| anyhow!("{who}command queue: {f}"))?,
        )
    } else {
        None
    };
    prepared.set_commands(rx);
    let audio = audio_input(&show_audio, &given.desc).map_err(in_show)?;
    if let Some(input) = &audio {
        prepared.set_audio(input.feed());
    }
    let counters = prepared.counters();
    {
        let counters = Arc::clone(&counters);
        pause_probe.set(move || counters.paused());
    }
    let shown_name = many.then(|| name.clone());
    if plan.osc.is_some() {
        entries.osc.push(crate::osc::OscShow {
            name: shown_name.clone(),
            tx: tx.clone(),
            view: prepared.view(),
        });
    }
    if plan.oscquery.is_some() {
        entries.query.push((
            framepipe_oscquery::ShowEntry {
                name: shown_name.clone(),
                commands: Some(tx.clone()),
            },
            framepipe_oscquery::LiveShow::new(prepared.view(), prepared.counters())
                .with_audio(audio_band_count(&show_audio)),
        ));
    }
    if args.midi.is_some() {
        let project = looks_like_project(&given.arg).then(|| given.arg.clone().into());
        let surface = crate::midi::surface(
            &given.desc,
            &registry,
            project,
            pace,
            args.start_paused,
            prepared.counters(),
            prepared.view(),
        )
        .map_err(in_show)?;
        entries.midi.push(framepipe_midi::ShowSurface {
            name: shown_name.clone(),
            surface,
            tx: tx.clone(),
        });
    }
    let preview_tap = web_preview.as_ref().and_then(|(_, tap)| tap.clone());
    if let Some((slot, tap)) = web_preview {
        entries.web.push((
            framepipe_web::Engine {
                name: name.clone(),
                view: prepared.view(),
                counters: prepared.counters(),
                commands: tx.clone(),
                preview_tap: tap.map(|t| t.monitor),
                // The page's meters: the bands the analysis uses (checked by `audio_input`).
                audio: match (&audio, &args.audio_bands) {
                    (None, _) => None,
                    (Some(_), Some(edges)) => Some(framepipe_audio::BandEdges::parse(edges)?),
                    (Some(_), None) => Some(framepipe_audio::BandEdges::default()),
                },
            },
            slot,
        ));
    }
    entries.replies.push(ReplySource::new(
        shown_name.as_deref(),
        tx.replies(),
        own_pause,
    ));
    entries.senders.push(tx);
    let stats = if many {
        given.desc.settings.stats.clone()
    } else {
        args.stats.clone().or(given.desc.settings.stats.clone())
    };
    let kept = Kept {
        name,
        counters,
        threads: prepared.threads(),
        in_flight: prepared.max_in_flight(),
        stats,
        writes_stdout,
        total_frames,
        _audio: audio,
        out_rate: plan.global.fps.unwrap_or(source_rate),
    };
    // Live edits (#9): the editor builds each edit's next graph on the engine's edit thread;
    // it owns the registry from here.
    prepared.set_editor(Box::new(
        crate::edit::DescEditor::new(given.desc, registry)
            .with_view(prepared.view())
            .with_preview(preview_tap),
    ));
    Ok(SetUp { prepared, kept })
}
