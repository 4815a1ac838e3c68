//! Runs the statefulness probe on every frei0r plugin on the search path and writes the table
//! that `framepipe-frei0r` compiles in (`data/modes.tsv`).
//!
//! ```text
//! frei0r-probe [--write FILE] [--timeout SECS] [STEM...]
//! ```
//!
//! Each plugin is probed in a child process (this binary with `--child PATH`), killed after the
//! timeout, so that one plugin that crashes or hangs cannot stop the probe; it is then recorded
//! as `crashed` or `timeout` and scheduled serially.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use framepipe_frei0r::probe;

fn usage() -> ExitCode {
    eprintln!("usage: frei0r-probe [--write FILE] [--timeout SECS] [STEM...]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let Some(path) = args.get(1) else {
            return usage();
        };
        return match probe::probe_plugin(Path::new(path)) {
            Ok(r) => {
                println!("{}", r.tsv_row());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    let mut write: Option<PathBuf> = None;
    let mut timeout = Duration::from_secs(60);
    let mut only: Vec<String> = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--write" => match it.next() {
                Some(f) => write = Some(f.into()),
                None => return usage(),
            },
            "--timeout" => match it.next().and_then(|s| s.parse::<f64>().ok()) {
                Some(s) if s > 0.0 => timeout = Duration::from_secs_f64(s),
                _ => return usage(),
            },
            s if s.starts_with('-') => return usage(),
            s => only.push(s.to_string()),
        }
    }
    let dirs = framepipe_frei0r::search_path();
    let files = framepipe_frei0r::plugin_files(&dirs);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("frei0r-probe: cannot find own executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dir_list = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    let mut table = probe::tsv_header(&dir_list);
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for f in files {
        let stem = f
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if !only.is_empty() && !only.contains(&stem) {
            continue;
        }
        let started = Instant::now();
        let crc32 = match framepipe_frei0r::plugin::file_crc32(&f) {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "frei0r-probe: skipping {}: cannot read it: {e}",
                    f.display()
                );
                continue;
            }
        };
        let row = match run_child(&exe, &f, timeout) {
            Ok(row) => row,
            Err(Outcome::Timeout) => probe::failed_row(
                &stem,
                crc32,
                "timeout",
                &format!("killed after {:.0} s", timeout.as_secs_f64()),
            ),
            Err(Outcome::Crashed(why)) => probe::failed_row(&stem, crc32, "crashed", &why),
            Err(Outcome::NotAPlugin(why)) => {
                eprintln!("frei0r-probe: skipping {}: {why}", f.display());
                continue;
            }
        };
        let verdict = row.split('\t').nth(2).unwrap_or("").to_string();
        eprintln!(
            "{:<22} {:<17} {:>6.2} s",
            stem,
            verdict,
            started.elapsed().as_secs_f64()
        );
        *counts.entry(verdict).or_default() += 1;
        table.push_str(&row);
        table.push('\n');
    }
    eprintln!("frei0r-probe: {counts:?}");
    match write {
        Some(path) => {
            if let Err(e) = std::fs::write(&path, table) {
                eprintln!("frei0r-probe: cannot write {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
        None => print!("{table}"),
    }
    ExitCode::SUCCESS
}

enum Outcome {
    Timeout,
    Crashed(String),
    NotAPlugin(String),
}

fn run_child(exe: &Path, plugin: &Path, timeout: Duration) -> Result<String, Outcome> {
    let mut child = Command::new(exe)
        .arg("--child")
        .arg(plugin)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Outcome::Crashed(format!("cannot start probe child: {e}")))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() >= deadline => {
                // Our own child, killed by its handle.
                let _ = child.kill();
                let _ = child.wait();
                return Err(Outcome::Timeout);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(Outcome::Crashed(format!("wait failed: {e}"))),
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    let stem = plugin.file_stem().unwrap_or_default().to_string_lossy();
    let prefix = format!("{stem}\t");
    if status.success() {
        // Plugins may print their own chatter; the row is the line that starts with the stem.
        return out
            .lines()
            .find(|l| l.starts_with(&prefix))
            .map(str::to_string)
            .ok_or_else(|| Outcome::Crashed("probe child printed nothing".into()));
    }
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(sig) => Err(Outcome::Crashed(format!("killed by signal {sig}"))),
        None if err.contains("is not a frei0r plugin") => {
            Err(Outcome::NotAPlugin(err.trim().to_string()))
        }
        None => Err(Outcome::Crashed(format!(
            "exit {}: {}",
            status.code().unwrap_or(-1),
            err.lines().next().unwrap_or("").trim()
        ))),
    }
}
