//! What the system is and permits: cores, CPU model, governors, timer slack, SCHED_FIFO and how
//! to permit it, frei0r plugins, ffmpeg and GStreamer.

use super::*;

// The machine

/// Core count (the CPUs this process may run on, as `nproc` counts them), CPU model, governors.
pub(super) fn machine() -> (Section, usize) {
    progress("reading the machine (cores, CPU model, frequency governors, timer slack)");
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let allowed = field(&status, "Cpus_allowed_list:")
        .map(|l| count_cpu_list(&l))
        .unwrap_or(0);
    let cores = if allowed > 0 {
        allowed
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    };
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|l| count_cpu_list(l.trim()))
        .unwrap_or(cores);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let mut governors = serde_json::Map::new();
    for cpu in 0..online.max(cores) {
        let p = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
        if let Ok(g) = std::fs::read_to_string(&p) {
            governors.insert(format!("cpu{cpu}"), json!(g.trim()));
        }
    }
    let slack = framepipe_clock::timer_slack_of_self();
    let container = in_container();
    let mut lines = vec![
        format!("{cores} cores usable ({online} online); CPU: {model}"),
        format!(
            "timer slack of this thread: {}",
            slack.map_or("unknown".into(), |s| format!("{s} ns"))
        ),
    ];
    if container {
        lines.push("running in a container".into());
    }
    let slow: Vec<String> = governors
        .iter()
        .filter(|(_, g)| g.as_str() != Some("performance"))
        .map(|(c, g)| format!("{c}: {}", g.as_str().unwrap_or("")))
        .collect();
    let (status, summary, advice) = if governors.is_empty() {
        lines
            .push("frequency governor: not exposed under /sys/devices/system/cpu/*/cpufreq".into());
        (
            Status::Info,
            format!(
                "{cores} cores; the frequency governor is not visible here ({}): the host decides \
                 the clock speed",
                if container {
                    "a container"
                } else {
                    "a virtual machine or a kernel without cpufreq"
                }
            ),
            "on the host, set the governor to performance (sudo cpupower frequency-set -g \
             performance) so that the first frames after a quiet spell are not slow"
                .into(),
        )
    } else {
        let list: Vec<String> = governors
            .iter()
            .map(|(c, g)| format!("{c} {}", g.as_str().unwrap_or("")))
            .collect();
        lines.push(format!("frequency governor: {}", list.join(", ")));
        if slow.is_empty() {
            (
                Status::Ok,
                format!("{cores} cores, every one at the performance governor"),
                String::new(),
            )
        } else {
            (
                Status::Warn,
                format!(
                    "{} of {} cores are not at the performance governor ({}): a core that \
                     slows down between frames makes the next frame slow",
                    slow.len(),
                    governors.len(),
                    slow.join(", ")
                ),
                "sudo cpupower frequency-set -g performance (or write performance to \
                 /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor) before the show"
                    .into(),
            )
        }
    };
    let figures = json!({
        "cores": cores,
        "cores_online": online,
        "cpu_model": model,
        "governors": if governors.is_empty() { Value::Null } else { Value::Object(governors) },
        "timer_slack_ns": slack,
        "container": container,
    });
    (
        Section {
            key: "machine",
            title: "machine",
            figures,
            lines,
            status,
            summary,
            advice,
        },
        cores,
    )
}

/// The value after `key` on its line of a `/proc` status-like text.
pub(super) fn field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
}

/// How many CPUs a list like `0-3,6,8-9` names.
fn count_cpu_list(list: &str) -> usize {
    list.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| match p.trim().split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => usize::from(p.trim().parse::<usize>().is_ok()),
        })
        .sum()
}

/// Whether this process runs in a container (Docker, Podman, Kubernetes, LXC).
pub(super) fn in_container() -> bool {
    Path::new("/.dockerenv").exists()
        || Path::new("/run/.containerenv").exists()
        || std::fs::read_to_string("/proc/1/cgroup")
            .is_ok_and(|c| c.contains("docker") || c.contains("kubepods") || c.contains("lxc"))
        || std::fs::read_to_string("/proc/1/environ").is_ok_and(|e| e.contains("container="))
}

// SCHED_FIFO

/// Whether a thread may switch to SCHED_FIFO, and how to permit it when not.
pub(super) fn realtime() -> Section {
    progress("SCHED_FIFO: trying it on a probe thread; rtprio limits and CAP_SYS_NICE");
    let permitted = std::thread::spawn(|| framepipe_clock::try_realtime(10))
        .join()
        .unwrap_or(false);
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let (soft, hard) = limits
        .lines()
        .find(|l| l.starts_with("Max realtime priority"))
        .map(|l| {
            let f: Vec<&str> = l["Max realtime priority".len()..]
                .split_whitespace()
                .collect();
            (
                f.first().map_or("?".to_string(), |s| s.to_string()),
                f.get(1).map_or("?".to_string(), |s| s.to_string()),
            )
        })
        .unwrap_or(("?".into(), "?".into()));
    let status_text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = field(&status_text, "CapEff:")
        .and_then(|h| u64::from_str_radix(&h, 16).ok())
        .unwrap_or(0);
    const CAP_SYS_NICE: u32 = 23;
    let cap_sys_nice = cap_eff & (1 << CAP_SYS_NICE) != 0;
    let uid = field(&status_text, "Uid:")
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default();
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "YOUR_USER".into());
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "/path/to/framepipe".into());
    let grants = rtprio_grants();
    let container = in_container();
    let mut how = vec![
        format!(
            "echo '{user} - rtprio 20' | sudo tee /etc/security/limits.d/99-framepipe.conf, then \
             log in again (PAM applies limits at login; check with ulimit -r)"
        ),
        format!(
            "sudo setcap cap_sys_nice+ep {exe} (this binary only; redo after each build or \
             install)"
        ),
    ];
    let groups: Vec<String> = grants
        .iter()
        .filter_map(|(d, v)| d.strip_prefix('@').map(|g| format!("{g} (rtprio {v})")))
        .collect();
    if let Some((d, _)) = grants.iter().find(|(d, _)| d.starts_with('@')) {
        how.push(format!(
            "sudo usermod -aG {} {user}, then log in again: that group already has rtprio here",
            &d[1..]
        ));
    } else {
        how.push(format!(
            "or a group: echo '@realtime - rtprio 20' | sudo tee \
             /etc/security/limits.d/99-realtime.conf; sudo groupadd -f realtime; sudo usermod \
             -aG realtime {user}; log in again"
        ));
    }
    how.push("as a systemd service: LimitRTPRIO=20 in the unit's [Service]".into());
    if container {
        how.push(
            "in a container: docker run --cap-add=SYS_NICE --ulimit rtprio=99 (and the host's \
             cgroup must give real-time time: cpu.rt_runtime_us)"
                .into(),
        );
    }
    let mut lines = vec![
        format!(
            "SCHED_FIFO on a probe thread: {}",
            if permitted { "permitted" } else { "refused" }
        ),
        format!("RLIMIT_RTPRIO: soft {soft}, hard {hard}"),
        format!(
            "CAP_SYS_NICE: {} (uid {uid})",
            if cap_sys_nice {
                "effective"
            } else {
                "not effective"
            }
        ),
    ];
    if !grants.is_empty() {
        let g: Vec<String> = grants.iter().map(|(d, v)| format!("{d} {v}")).collect();
        lines.push(format!(
            "rtprio granted in /etc/security/limits*: {}",
            g.join(", ")
        ));
    }
    let (status, summary, advice) = if permitted {
        (
            Status::Ok,
            format!(
                "SCHED_FIFO is permitted ({}): the output thread runs real-time during a paced \
                 run and preempts ordinary threads",
                if cap_sys_nice {
                    "CAP_SYS_NICE".to_string()
                } else {
                    format!("RLIMIT_RTPRIO {soft}")
                }
            ),
            String::new(),
        )
    } else if cap_sys_nice {
        (
            Status::Bad,
            "SCHED_FIFO is refused although CAP_SYS_NICE is effective: the kernel gives this \
             cgroup no real-time time (cpu.rt_runtime_us = 0, usual in containers and some \
             systemd slices); the output thread runs as an ordinary thread and other work can \
             delay frames"
                .to_string(),
            if container {
                "start the container with --cpu-rt-runtime=950000 (and --cap-add=SYS_NICE \
                 --ulimit rtprio=99) on a host whose cgroup grants real-time time, or run \
                 framepipe on the host"
                    .into()
            } else {
                "give this cgroup real-time time (echo 950000 > \
                 /sys/fs/cgroup/cpu,cpuacct/<group>/cpu.rt_runtime_us with cgroup v1), or \
                 run framepipe outside the slice that lacks it"
                    .into()
            },
        )
    } else {
        (
            Status::Bad,
            format!(
                "SCHED_FIFO is not permitted (RLIMIT_RTPRIO {soft}, no CAP_SYS_NICE): the output \
                 thread runs as an ordinary thread, so a busy machine can delay frames{}",
                if groups.is_empty() {
                    String::new()
                } else {
                    format!("; groups granted rtprio here: {}", groups.join(", "))
                }
            ),
            format!("permit it one of these ways: {}", how.join("; ")),
        )
    };
    Section {
        key: "realtime",
        title: "SCHED_FIFO (real-time scheduling for the output thread)",
        figures: json!({
            "sched_fifo": permitted,
            "rtprio_soft": soft,
            "rtprio_hard": hard,
            "cap_sys_nice": cap_sys_nice,
            "uid": uid.parse::<u64>().ok(),
            "limits_grants": grants.iter().map(|(d, v)| json!({"domain": d, "rtprio": v})).collect::<Vec<_>>(),
            "how_to_permit": how,
        }),
        lines,
        status,
        summary,
        advice,
    }
}

/// `(domain, value)` of every `rtprio` line in /etc/security/limits.conf and limits.d.
fn rtprio_grants() -> Vec<(String, String)> {
    let mut files = vec![PathBuf::from("/etc/security/limits.conf")];
    if let Ok(rd) = std::fs::read_dir("/etc/security/limits.d") {
        let mut more: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect();
        more.sort();
        files.extend(more);
    }
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            let f: Vec<&str> = line.split_whitespace().collect();
            if let [domain, _kind, "rtprio", value] = f[..] {
                out.push((domain.to_string(), value.to_string()));
            }
        }
    }
    out
}

// What a show needs

/// The frei0r search path and how many plugins load from it (as `framepipe plugins` counts).
pub(super) fn frei0r() -> Section {
    progress("frei0r: search path and plugins");
    let dirs = framepipe_frei0r::search_path();
    let (registry, warnings) = crate::load::registry(None);
    let count = registry
        .iter()
        .filter(|e| e.desc.name.starts_with("frei0r-"))
        .count();
    let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let lines = vec![
        format!(
            "search path: {}",
            if shown.is_empty() {
                "(no directory exists)".to_string()
            } else {
                shown.join(":")
            }
        ),
        format!(
            "{count} plugins{}",
            if warnings.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} files not loaded (framepipe plugins --verbose)",
                    warnings.len()
                )
            }
        ),
    ];
    let (status, summary, advice) = if count > 0 {
        (
            Status::Ok,
            format!("{count} frei0r plugins found"),
            String::new(),
        )
    } else {
        (
            Status::Warn,
            "no frei0r plugin found: only the native effects are available".into(),
            "sudo apt-get install frei0r-plugins, or set FREI0R_PATH to the directory holding \
             the plugins' .so files"
                .into(),
        )
    };
    Section {
        key: "frei0r",
        title: "frei0r plugins",
        figures: json!({
            "search_path": shown,
            "plugins": count,
            "not_loaded": warnings.len(),
        }),
        lines,
        status,
        summary,
        advice,
    }
}

/// Whether `program` is on PATH, and the first line of `program flag`.
pub(super) fn tool(key: &'static str, program: &str, flag: &str, what: &str) -> Section {
    progress(&format!("{program}: present? version"));
    let path = which(program);
    let version = path.as_ref().and_then(|p| {
        let out = std::process::Command::new(p)
            .arg(flag)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
    });
    let title = if key == "ffmpeg" {
        "ffmpeg"
    } else {
        "GStreamer"
    };
    let (status, summary, advice, lines) = match (&path, &version) {
        (Some(p), Some(v)) => (
            Status::Ok,
            format!("{what}: {v}"),
            String::new(),
            vec![format!("{}: {v}", p.display())],
        ),
        (Some(p), None) => (
            Status::Warn,
            format!(
                "{} is there but `{program} {flag}` printed no version",
                p.display()
            ),
            format!("check that {} runs", p.display()),
            vec![format!("{}: no version line", p.display())],
        ),
        (None, _) => (
            if key == "ffmpeg" {
                Status::Warn
            } else {
                Status::Info
            },
            format!("{program} is not on PATH: {what} cannot be used"),
            if key == "ffmpeg" {
                "sudo apt-get install ffmpeg".into()
            } else {
                "sudo apt-get install gstreamer1.0-tools gstreamer1.0-plugins-base (only the \
                 peer benchmarks need it)"
                    .into()
            },
            vec![format!("{program}: not found on PATH")],
        ),
    };
    Section {
        key,
        title,
        figures: json!({
            "present": path.is_some(),
            "path": path.map(|p| p.display().to_string()),
            "version": version,
        }),
        lines,
        status,
        summary,
        advice,
    }
}

/// The first executable file named `program` on PATH.
fn which(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
