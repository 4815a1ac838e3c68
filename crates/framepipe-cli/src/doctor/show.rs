//! A show measured: built with nullsinks, run unpaced, each node against the frame period.

use super::*;

/// A show ready to measure: its description with the sinks replaced, and what was replaced.
pub(super) struct ShowDesc {
    desc: framepipe_project::GraphDesc,
    /// The graph, built (so that a bad project fails before anything is measured).
    graph: framepipe_runtime::Graph,
    /// `NAME (ELEMENT)` of every sink replaced by nullsink.
    replaced: Vec<String>,
    /// The node names that are sinks.
    sinks: Vec<String>,
}

/// Parses the project or pipeline and replaces every sink by `nullsink` (keeping `master=` and
/// `leaky=`), so that measuring writes no file and opens no window or socket. Refuses what
/// would still touch the outside: a source reading stdin or the network.
pub(super) fn prepare_show(arg: &str) -> Result<ShowDesc> {
    let mut desc = crate::load_desc(arg)?;
    let registry = crate::registry_for(&desc, None);
    if let Some(s) = crate::commands::stdin_sources(&desc, &registry).first() {
        bail!("doctor cannot measure a show whose source reads stdin ({s}); give it a file");
    }
    let mut replaced = Vec::new();
    let mut sinks = Vec::new();
    for (i, node) in desc.nodes.iter_mut().enumerate() {
        let kind = registry.find(&node.element).map(|e| e.desc.kind);
        if node.element == "tcpsrc" {
            bail!(
                "{} (node {}): doctor does not run tcpsrc (it would open a socket); measure \
                 the show with a testsrc of the same size in its place",
                node.name,
                i + 1
            );
        }
        if kind == Some(ElementKind::Sink) {
            sinks.push(node.name.clone());
            if node.element != "nullsink" {
                replaced.push(format!("{} ({})", node.name, node.element));
                node.element = "nullsink".into();
                node.props.retain(|(k, _)| k == "master" || k == "leaky");
            }
        }
    }
    let graph = build(&desc, &registry, Purpose::Run)?;
    Ok(ShowDesc {
        desc,
        graph,
        replaced,
        sinks,
    })
}

/// One node's measured figures.
struct NodeFigures {
    name: String,
    mode: Mode,
    instances: usize,
    frames: u64,
    mean_ms: f64,
    sink: bool,
    headroom: f64,
}

/// Builds the show, runs it unpaced for `seconds` (the first quarter, at most 0.5 s, is not
/// counted: pools fill and caches warm), and reports each node against the frame period.
pub(super) fn run_show(text: &str, show: ShowDesc, seconds: u64, cores: usize) -> Result<Section> {
    let ShowDesc {
        desc,
        graph,
        replaced,
        sinks,
    } = show;
    let rate: Option<Rational> = desc
        .settings
        .fps
        .as_deref()
        .map(|f| crate::flags::fps(f, "'fps' in the project file"))
        .transpose()?;
    let threads = match desc.settings.threads {
        Some(n) => crate::flags::threads(n, "'threads' in the project file")?,
        None => 0,
    };
    let rate = rate.unwrap_or_else(|| graph.source_rate());
    progress(&format!(
        "running the show unpaced for {seconds} s (sinks replaced by nullsink{})",
        if replaced.is_empty() {
            String::new()
        } else {
            format!(": {}", replaced.join(", "))
        }
    ));
    let mut prepared = graph
        .prepare(Options {
            threads,
            pace: None,
            realtime: false,
            ..Options::default()
        })
        .context("preparing the show")?;
    prepared.set_events(Arc::new(|e: &Event| match e {
        Event::Stalled { stage, elapsed_ms } => {
            say!("doctor: {stage} stalled: one frame has taken {elapsed_ms} ms")
        }
        other => say!("doctor: {other:?}"),
    }));
    let (tx, rx) = command_queue(16);
    prepared.set_commands(rx);
    let workers = prepared.threads();
    let counters = prepared.counters();
    let stopper = tx.stopper();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let total = Duration::from_secs(seconds);
    let warm = (total / 4).min(Duration::from_millis(500));
    let timer = std::thread::Builder::new()
        .name("fp-doctor".into())
        .spawn(move || {
            use std::sync::mpsc::RecvTimeoutError::Timeout;
            if done_rx.recv_timeout(warm) != Err(Timeout) {
                return None;
            }
            let a = counters.snapshot();
            let rest = done_rx.recv_timeout(total - warm);
            let b = counters.snapshot();
            stopper.stop();
            (rest == Err(Timeout)).then_some((a, b))
        })
        .context("spawning the doctor's timer thread")?;
    let result = prepared.run();
    drop(done_tx);
    let window = timer.join().ok().flatten();
    let finished = result.with_context(|| format!("running '{text}' to measure it"))?;
    // The window after the warm-up, unless the run ended inside it or a node (a very slow
    // one) finished no frame in it: then the whole run.
    let (stats, counted_all) = match window.map(|(a, b)| delta(&a, &b)) {
        Some(d)
            if d.frames > 0
                && d.stages
                    .iter()
                    .all(|s| s.frames > 0 || sinks.contains(&s.name)) =>
        {
            (d, false)
        }
        _ => (finished, true),
    };
    let period_ms = 1000.0 / rate.as_f64();
    let parallel_width = workers.min(cores).max(1) as f64;
    let nodes: Vec<NodeFigures> = stats
        .stages
        .iter()
        .map(|s| {
            let sink = sinks.contains(&s.name);
            let width = if s.mode == Mode::Parallel {
                parallel_width
            } else {
                1.0
            };
            NodeFigures {
                name: s.name.clone(),
                mode: s.mode,
                instances: s.instances,
                frames: s.frames,
                mean_ms: s.mean_ms,
                sink,
                headroom: if s.mean_ms > 0.0 {
                    period_ms * width / s.mean_ms
                } else {
                    f64::INFINITY
                },
            }
        })
        .collect();
    let work_ms: f64 = nodes.iter().filter(|n| !n.sink).map(|n| n.mean_ms).sum();
    let machine_headroom = if work_ms > 0.0 {
        period_ms * cores as f64 / work_ms
    } else {
        f64::INFINITY
    };
    let bottleneck = nodes
        .iter()
        .filter(|n| !n.sink && n.frames > 0)
        .min_by(|a, b| a.headroom.total_cmp(&b.headroom));
    let fps_target = rate.as_f64();
    let mut lines = vec![
        format!(
            "ran unpaced {:.2} s ({}), {} frames at {:.1} fps on {workers} workers; the show's \
             rate is {:.3} fps (period {period_ms:.2} ms)",
            stats.wall_s,
            if counted_all {
                "the whole run"
            } else {
                "after a warm-up"
            },
            stats.frames,
            stats.fps,
            rate.as_f64()
        ),
        if replaced.is_empty() {
            "no sink replaced (they are nullsinks already)".to_string()
        } else {
            format!(
                "sinks replaced by nullsink (doctor writes no file, opens no window or socket): \
                 {}",
                replaced.join(", ")
            )
        },
        format!(
            "{:<28} {:>8} {:>9} {:>7} {:>10} {:>9}",
            "node", "mode", "instances", "frames", "ms/frame", "headroom"
        ),
    ];
    for n in &nodes {
        lines.push(format!(
            "{:<28} {:>8} {:>9} {:>7} {:>10.3} {:>9}",
            n.name,
            n.mode.as_str(),
            n.instances,
            n.frames,
            n.mean_ms,
            if n.sink {
                "(sink)".to_string()
            } else if n.headroom.is_finite() {
                format!("{:.2}x", n.headroom)
            } else {
                "-".to_string()
            }
        ));
    }
    lines.push(format!(
        "all nodes together: {work_ms:.2} ms of CPU per frame; {cores} cores give {:.1} ms per \
         period: {:.2}x",
        period_ms * cores as f64,
        machine_headroom
    ));
    let (status, summary, advice) = match bottleneck {
        None => (
            Status::Warn,
            "no node processed a frame after the warm-up: nothing to judge".to_string(),
            "run longer (--seconds), or check that the source yields frames".to_string(),
        ),
        Some(b) => {
            let headroom = b.headroom.min(machine_headroom);
            let how = match b.mode {
                Mode::Serial => format!(
                    "{} is serial and takes {:.1} ms of a {period_ms:.1} ms period",
                    b.name, b.mean_ms
                ),
                _ => format!(
                    "{} runs parallel ({} workers) and takes {:.1} ms per frame, {:.1} ms of \
                     each {period_ms:.1} ms period per worker",
                    b.name,
                    workers.min(cores),
                    b.mean_ms,
                    b.mean_ms / parallel_width
                ),
            };
            let rate_text = format!("{:.3}", fps_target)
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string();
            if headroom >= 1.25 {
                (
                    Status::Ok,
                    format!(
                        "this show can hold {rate_text} fps on this machine with {headroom:.1}x \
                         headroom (slowest: {how})"
                    ),
                    "the real sinks' own cost (encoding, display, network) is not measured: \
                     leave them a share of the headroom"
                        .into(),
                )
            } else if headroom >= 1.0 {
                (
                    Status::Warn,
                    format!(
                        "this show barely holds {rate_text} fps ({headroom:.2}x headroom): {how}; \
                         any other load will make frames late"
                    ),
                    fix_advice(b, machine_headroom < b.headroom),
                )
            } else {
                (
                    Status::Bad,
                    format!(
                        "{how}: this show cannot hold {rate_text} fps on this machine (about \
                         {:.1} fps at most){}",
                        fps_target * headroom,
                        if machine_headroom < b.headroom {
                            format!(
                                "; all nodes together need {work_ms:.1} ms of CPU per frame, \
                                 more than {cores} cores give"
                            )
                        } else {
                            String::new()
                        }
                    ),
                    fix_advice(b, machine_headroom < b.headroom),
                )
            }
        }
    };
    let figures = json!({
        "pipeline": text,
        "sinks_replaced": replaced,
        "seconds": round3(stats.wall_s),
        "frames": stats.frames,
        "fps_achieved": round1(stats.fps),
        "target_fps": round3(fps_target),
        "period_ms": round3(period_ms),
        "workers": workers,
        "cores": cores,
        "nodes": nodes.iter().map(|n| json!({
            "name": n.name,
            "mode": n.mode.as_str(),
            "instances": n.instances,
            "frames": n.frames,
            "mean_ms": round3(n.mean_ms),
            "sink": n.sink,
            "headroom": if n.sink || !n.headroom.is_finite() { Value::Null } else { json!(round3(n.headroom)) },
        })).collect::<Vec<_>>(),
        "work_ms_per_frame": round3(work_ms),
        "machine_headroom": if machine_headroom.is_finite() { json!(round3(machine_headroom)) } else { Value::Null },
        "bottleneck": bottleneck.map(|b| b.name.clone()),
    });
    // Few frames (a short source): the first frames' costs (pools, caches) weigh in.
    const FEW_FRAMES: u64 = 10;
    let (status, summary) = if stats.frames < FEW_FRAMES && bottleneck.is_some() {
        (
            if status == Status::Ok {
                Status::Warn
            } else {
                status
            },
            format!(
                "{summary} — from only {} frames (the source ended): rough figures",
                stats.frames
            ),
        )
    } else {
        (status, summary)
    };
    Ok(Section {
        key: "show",
        title: "the show (run unpaced, sinks replaced by nullsink)",
        figures,
        lines,
        status,
        summary,
        advice,
    })
}

/// What to do about a bottleneck node.
fn fix_advice(b: &NodeFigures, whole_machine: bool) -> String {
    if whole_machine {
        return "the cores are the limit: lower the frame size or rate, drop an effect, or use \
                a machine with more cores"
            .into();
    }
    match b.mode {
        Mode::Serial => format!(
            "lower {}'s size (a scale before it) or the show's rate; if it keeps no state \
             between frames, mode=parallel lets every core work on it",
            b.name
        ),
        _ => format!(
            "lower {}'s size (a scale before it) or the show's rate, or use a machine with \
             more cores",
            b.name
        ),
    }
}

/// The figures between two snapshots of a running show's counters.
fn delta(a: &RunStats, b: &RunStats) -> RunStats {
    let mut out = b.clone();
    out.frames = b.frames - a.frames.min(b.frames);
    out.wall_s = b.wall_s - a.wall_s;
    out.fps = if out.wall_s > 0.0 {
        out.frames as f64 / out.wall_s
    } else {
        0.0
    };
    for (s, before) in out.stages.iter_mut().zip(&a.stages) {
        if s.name != before.name {
            continue;
        }
        let frames = s.frames - before.frames.min(s.frames);
        if frames > 0 {
            let busy = s.mean_ms * s.frames as f64 - before.mean_ms * before.frames as f64;
            s.mean_ms = (busy / frames as f64).max(0.0);
        }
        s.frames = frames;
    }
    out
}
