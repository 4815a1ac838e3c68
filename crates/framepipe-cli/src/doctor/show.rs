//! A show measured as it will run: its real sources and decoders, its encoders and file sinks
//! writing into a scratch directory (removed afterwards), run unpaced; each node against the
//! frame period, and the CPU time of every process (this one and each child it starts: ffmpeg
//! decoders and encoders, isolated plugins) against what the cores give.

use super::*;

/// Sinks that write a file (or an ffmpeg output): measured writing into the scratch directory.
const FILE_SINKS: [&str; 3] = ["ffmpegsink", "y4msink", "rawsink"];

/// A show ready to measure: its description with the sinks redirected, and what was changed.
pub(super) struct ShowDesc {
    desc: framepipe_project::GraphDesc,
    /// The graph, built (so that a bad project fails before anything is measured). Its sinks
    /// are started: the encoders run from here.
    graph: framepipe_runtime::Graph,
    /// `NAME (ELEMENT)` of every sink replaced by nullsink (a window, a socket).
    replaced: Vec<String>,
    /// `NAME (ELEMENT)` of every sink that writes into the scratch directory instead.
    scratch: Vec<String>,
    /// The node names that are sinks.
    sinks: Vec<String>,
    /// Each node's `location`, to name the child process that reads or writes it.
    locations: Vec<(String, String)>,
    /// Removed (with what the sinks wrote) when the measurement is done.
    _dir: ScratchDir,
}

/// A directory under the temporary directory that the measured sinks write into; removed with
/// its files on drop (also when measuring fails).
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> Result<Self> {
        let path = std::env::temp_dir().join(format!("framepipe-doctor-{}", std::process::id()));
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create the scratch directory '{}'", path.display()))?;
        Ok(ScratchDir(path))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where a file sink writes while measured: the scratch directory, with the user's file's
/// extension (ffmpeg picks its muxer and codec by it). An ffmpeg output that is no file (a
/// URL, standard output) goes to ffmpeg's null muxer (`-f null`) with the same codec.
fn redirect(node: &mut framepipe_project::NodeDescr, dir: &Path) {
    let location = node
        .props
        .iter()
        .find(|(k, _)| k == "location")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let ext = Path::new(&location)
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| format!(".{e}"))
        .unwrap_or_default();
    let not_a_file = location == "-" || location.contains("://") || location.starts_with("/dev/");
    let scratch = dir.join(format!(
        "{}{}",
        sanitize(&node.name),
        if not_a_file { "" } else { &ext }
    ));
    node.props.retain(|(k, _)| k != "location");
    node.props
        .push(("location".into(), scratch.to_string_lossy().into_owned()));
    if not_a_file && node.element == "ffmpegsink" {
        let args = node
            .props
            .iter()
            .find(|(k, _)| k == "args")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        node.props.retain(|(k, _)| k != "args");
        node.props.push(("args".into(), format!("{args} -f null")));
    }
}

/// A node name as a file name: letters, digits, `-` and `_` kept, the rest `_`.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Parses the project or pipeline and readies it to run as it will: file sinks (ffmpegsink,
/// y4msink, rawsink) write into a scratch directory (never the user's files), other sinks (a
/// window, a socket) are replaced by `nullsink` (keeping `master=` and `leaky=`). Refuses what
/// would still touch the outside: a source reading stdin or the network.
pub(super) fn prepare_show(arg: &str) -> Result<ShowDesc> {
    let mut desc = crate::load::load_desc(arg)?;
    let registry = crate::load::registry_for(&desc, None);
    if let Some(s) = crate::commands::stdin_sources(&desc, &registry).first() {
        bail!("doctor cannot measure a show whose source reads stdin ({s}); give it a file");
    }
    let dir = ScratchDir::new()?;
    let mut replaced = Vec::new();
    let mut scratch = Vec::new();
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
            if FILE_SINKS.contains(&node.element.as_str()) {
                scratch.push(format!("{} ({})", node.name, node.element));
                redirect(node, &dir.0);
            } else if node.element != "nullsink" {
                replaced.push(format!("{} ({})", node.name, node.element));
                node.element = "nullsink".into();
                node.props.retain(|(k, _)| k == "master" || k == "leaky");
            }
        }
    }
    let locations = desc
        .nodes
        .iter()
        .filter_map(|n| {
            let l = n.props.iter().find(|(k, _)| k == "location")?;
            Some((n.name.clone(), l.1.clone()))
        })
        .collect();
    let graph = build(&desc, &registry, Purpose::Run)?;
    Ok(ShowDesc {
        desc,
        graph,
        replaced,
        scratch,
        sinks,
        locations,
        _dir: dir,
    })
}

/// CPU time (ns) of this process and of each of its child processes, read from /proc.
#[derive(Debug, Default, Clone)]
struct CpuSnapshot {
    own_ns: u64,
    /// pid, what it is (`ffmpeg (rec)`), CPU ns.
    children: Vec<(u32, String, u64)>,
}

/// A process's times from `/proc/PID/stat`.
struct ProcTimes {
    ppid: u32,
    /// utime + stime, ns.
    own_ns: u64,
    /// cutime + cstime: its children that ended and were waited for, ns.
    children_ns: u64,
}

fn proc_times(pid: &str) -> Option<ProcTimes> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (in parentheses, which may hold spaces): state, ppid, ...; the
    // times are fields 14 to 17 of the line, counted in clock ticks.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    let ns_per_tick = 1_000_000_000 / rustix::param::clock_ticks_per_second().max(1);
    Some(ProcTimes {
        ppid: f.get(1)?.parse().ok()?,
        own_ns: (field(11)? + field(12)?) * ns_per_tick,
        children_ns: (field(13)? + field(14)?) * ns_per_tick,
    })
}

/// What a child process is: its program and the node whose location its command line names.
fn child_label(pid: u32, locations: &[(String, String)]) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let program = args
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .unwrap_or_else(|| format!("process {pid}"));
    let node = locations.iter().find(|(_, loc)| {
        !loc.is_empty()
            && args
                .iter()
                .skip(1)
                .any(|a| a == loc || a.ends_with(&format!("/{loc}")))
    });
    match node {
        Some((name, _)) => format!("{program} ({name})"),
        None if program == "framepipe" => "framepipe (an isolated plugin)".into(),
        None => program,
    }
}

impl CpuSnapshot {
    fn take(locations: &[(String, String)]) -> Self {
        let me = std::process::id();
        let own_ns = proc_times("self").map_or(0, |t| t.own_ns);
        let mut children = Vec::new();
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for e in dir.flatten() {
                let name = e.file_name();
                let Some(pid) = name
                    .to_str()
                    .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                else {
                    continue;
                };
                if let Some(t) = proc_times(pid).filter(|t| t.ppid == me) {
                    let pid: u32 = pid.parse().unwrap_or(0);
                    children.push((pid, child_label(pid, locations), t.own_ns));
                }
            }
        }
        children.sort_by_key(|c| c.0);
        CpuSnapshot { own_ns, children }
    }

    /// The CPU each process used since `before` (a child started since counts whole).
    fn since(&self, before: &CpuSnapshot) -> Vec<(String, u64)> {
        let mut out = vec![(
            "framepipe (this process: every node)".to_string(),
            self.own_ns.saturating_sub(before.own_ns),
        )];
        for (pid, label, ns) in &self.children {
            let was = before
                .children
                .iter()
                .find(|c| c.0 == *pid)
                .map_or(0, |c| c.2);
            out.push((label.clone(), ns.saturating_sub(was)));
        }
        out
    }
}

/// CPU time (ns) of this process and of its children that ended and were waited for
/// (`/proc/self/stat`'s utime + stime and cutime + cstime, as `getrusage` counts them): the
/// whole run's, by difference, for a run that ended before its measuring window did.
fn cpu_so_far() -> (u64, u64) {
    proc_times("self").map_or((0, 0), |t| (t.own_ns, t.children_ns))
}

/// The CPU used since `before` ([`cpu_so_far`]), this process's and its reaped children's.
fn whole_run_cpu(before: (u64, u64)) -> Vec<(String, u64)> {
    let after = cpu_so_far();
    vec![
        (
            "framepipe (this process: every node)".to_string(),
            after.0.saturating_sub(before.0),
        ),
        (
            "child processes (ffmpeg, isolated plugins)".to_string(),
            after.1.saturating_sub(before.1),
        ),
    ]
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

/// Runs the show unpaced for `seconds` (the first quarter, at most 0.5 s, is not counted:
/// pools fill and caches warm) and reports each node against the frame period, the CPU time
/// of every process against the cores, and whether the measured show holds its rate.
pub(super) fn run_show(text: &str, show: ShowDesc, seconds: u64, cores: usize) -> Result<Section> {
    let ShowDesc {
        desc,
        graph,
        replaced,
        scratch,
        sinks,
        locations,
        _dir,
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
    let mut changed = Vec::new();
    if !scratch.is_empty() {
        changed.push(format!(
            "writing into a scratch directory: {}",
            scratch.join(", ")
        ));
    }
    if !replaced.is_empty() {
        changed.push(format!("replaced by nullsink: {}", replaced.join(", ")));
    }
    progress(&format!(
        "running the show unpaced for {seconds} s as it will run{}",
        if changed.is_empty() {
            String::new()
        } else {
            format!(" (sinks {})", changed.join("; "))
        }
    ));
    let before = cpu_so_far();
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
    let timer_locations = locations.clone();
    let timer = std::thread::Builder::new()
        .name("fp-doctor".into())
        .spawn(move || {
            use std::sync::mpsc::RecvTimeoutError::Timeout;
            if done_rx.recv_timeout(warm) != Err(Timeout) {
                return None;
            }
            let a = (counters.snapshot(), CpuSnapshot::take(&timer_locations));
            let rest = done_rx.recv_timeout(total - warm);
            let b = (counters.snapshot(), CpuSnapshot::take(&timer_locations));
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
    let (stats, cpu, counted_all) =
        match window.map(|((a, ca), (b, cb))| (delta(&a, &b), cb.since(&ca))) {
            Some((d, cpu))
                if d.frames > 0
                    && d.stages
                        .iter()
                        .all(|s| s.frames > 0 || sinks.contains(&s.name)) =>
            {
                (d, cpu, false)
            }
            _ => (finished, whole_run_cpu(before), true),
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
    // Every process's CPU per frame (ms): this one's and each child's.
    let frames = stats.frames.max(1) as f64;
    let processes: Vec<(String, f64)> = cpu
        .iter()
        .map(|(name, ns)| (name.clone(), *ns as f64 / 1e6 / frames))
        .collect();
    let cpu_ms: f64 = processes.iter().map(|p| p.1).sum();
    let cpu_headroom = if cpu_ms > 0.0 {
        period_ms * cores as f64 / cpu_ms
    } else {
        f64::INFINITY
    };
    let fps_target = rate.as_f64();
    let run_headroom = stats.fps / fps_target;
    // The slowest node, sinks included: a sink waits on its encoder, a window, a disk.
    let bottleneck = nodes
        .iter()
        .filter(|n| n.frames > 0)
        .min_by(|a, b| a.headroom.total_cmp(&b.headroom));
    // What costs most per frame: a node of this process, or a child process.
    let costliest: Option<(String, f64)> = nodes
        .iter()
        .filter(|n| !n.sink && n.frames > 0)
        .map(|n| (format!("node {} ({})", n.name, n.mode.as_str()), n.mean_ms))
        .chain(
            processes
                .iter()
                .skip(1)
                .map(|(p, ms)| (format!("process {p}"), *ms)),
        )
        .max_by(|a, b| a.1.total_cmp(&b.1));
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
        if changed.is_empty() {
            "every sink ran as it will (nullsinks)".to_string()
        } else {
            format!("sinks {} (removed afterwards)", changed.join("; "))
        },
        format!(
            "{:<28} {:>8} {:>9} {:>7} {:>10} {:>9}",
            "node", "mode", "instances", "frames", "ms/frame", "headroom"
        ),
    ];
    for n in &nodes {
        lines.push(format!(
            "{:<28} {:>8} {:>9} {:>7} {:>10.3} {:>9}",
            if n.sink {
                format!("{} (sink)", n.name)
            } else {
                n.name.clone()
            },
            n.mode.as_str(),
            n.instances,
            n.frames,
            n.mean_ms,
            if n.headroom.is_finite() {
                format!("{:.2}x", n.headroom)
            } else {
                "-".to_string()
            }
        ));
    }
    lines.push(format!(
        "all nodes together: {work_ms:.2} ms per frame; {cores} cores give {:.1} ms per period: \
         {machine_headroom:.2}x",
        period_ms * cores as f64,
    ));
    lines.push("CPU time per frame, every process the show starts:".to_string());
    for (name, ms) in &processes {
        lines.push(format!("  {name:<44} {ms:>8.3} ms"));
    }
    lines.push(format!(
        "  {:<44} {cpu_ms:>8.3} ms of {:.1} ms the cores give per period: {cpu_headroom:.2}x",
        "all processes",
        period_ms * cores as f64
    ));
    let rate_text = format!("{:.3}", fps_target)
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string();
    let (status, summary, advice) = match bottleneck {
        None => (
            Status::Warn,
            "no node processed a frame after the warm-up: nothing to judge".to_string(),
            "run longer (--seconds), or check that the source yields frames".to_string(),
        ),
        Some(b) => {
            // The measured show: how fast it ran, its slowest serial step, all its CPU.
            let headroom = run_headroom.min(cpu_headroom).min(b.headroom);
            let limit = if headroom == cpu_headroom {
                format!(
                    "every process together needs {cpu_ms:.1} ms of CPU per frame, {cores} cores \
                     give {:.1} ms",
                    period_ms * cores as f64
                )
            } else if headroom == b.headroom && b.mode == Mode::Serial {
                format!(
                    "{} is serial and takes {:.1} ms of a {period_ms:.1} ms period",
                    b.name, b.mean_ms
                )
            } else {
                format!("it ran unpaced at {:.1} fps", stats.fps)
            };
            let cost = costliest
                .as_ref()
                .map(|(what, ms)| format!("; costliest: {what}, {ms:.1} ms per frame"))
                .unwrap_or_default();
            let child_costliest = costliest
                .as_ref()
                .is_some_and(|(what, _)| what.starts_with("process "));
            let advice = if child_costliest {
                format!(
                    "{} costs most: a faster encoder setting (ffmpegsink args=\"-preset \
                     ultrafast\" for libx264), a smaller frame size or a lower rate",
                    costliest.as_ref().map_or("", |c| c.0.as_str())
                )
            } else {
                fix_advice(b, cpu_headroom < b.headroom)
            };
            if headroom >= 1.25 {
                (
                    Status::Ok,
                    format!(
                        "this show holds {rate_text} fps on this machine with {headroom:.1}x \
                         headroom, measured as it will run ({limit}){cost}"
                    ),
                    String::new(),
                )
            } else if headroom >= 1.0 {
                (
                    Status::Warn,
                    format!(
                        "this show barely holds {rate_text} fps ({headroom:.2}x headroom, less \
                         than the 1.25x a show should keep): {limit}{cost}; any other load \
                         will make frames late"
                    ),
                    advice,
                )
            } else {
                (
                    Status::Bad,
                    format!(
                        "this show cannot hold {rate_text} fps on this machine: it falls short \
                         by {:.0}% (about {:.1} fps at most): {limit}{cost}",
                        (1.0 - headroom) * 100.0,
                        fps_target * headroom,
                    ),
                    advice,
                )
            }
        }
    };
    let figures = json!({
        "pipeline": text,
        "sinks_replaced": replaced,
        "sinks_scratch": scratch,
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
            "headroom": if n.headroom.is_finite() { json!(round3(n.headroom)) } else { Value::Null },
        })).collect::<Vec<_>>(),
        "work_ms_per_frame": round3(work_ms),
        "machine_headroom": if machine_headroom.is_finite() { json!(round3(machine_headroom)) } else { Value::Null },
        "processes": processes.iter().map(|(name, ms)| json!({
            "name": name,
            "cpu_ms_per_frame": round3(*ms),
        })).collect::<Vec<_>>(),
        "cpu_ms_per_frame": round3(cpu_ms),
        "cpu_headroom": if cpu_headroom.is_finite() { json!(round3(cpu_headroom)) } else { Value::Null },
        "run_headroom": round3(run_headroom),
        "bottleneck": bottleneck.map(|b| b.name.clone()),
        "costliest": costliest.as_ref().map(|c| c.0.clone()),
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
        title: "the show (run unpaced as it will run; every process's CPU counted)",
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
