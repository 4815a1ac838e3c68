//! The end of a run: each show's end as it ends, the isolated plugins' troubles, the stats
//! files, and the last lines and exit status. One show's run is reported as the run (its
//! figures, a signal's or a broken pipe's end); several as each show by name and a count.
//!
//! Stats files: a show's own file (one show: `--stats`, else its project's `stats`; several:
//! its project's `stats`) is one show's object with `isolated` (one show: also `web` and
//! `oscquery`); with several, `--stats FILE` is `{"shows": [{"name": ..., ...one show's
//! object..., "error"?}], "isolated": [...], "pools": [...], "clock": {...}}` (`pools`: the
//! frame pools the shows share, one per frame size).

use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use framepipe_runtime::{RunStats, ShowResult};

use super::show::Kept;
use super::surfaces::Ended;
use super::HostFigures;
use crate::commands;
use crate::{is_broken_pipe, one_line, Exit, EXIT_BROKEN_STDOUT};

/// Says how one of several shows ended, as it ends: an error always, the figures unless
/// `quiet`.
pub(crate) fn show_ended(r: &ShowResult, quiet: bool) {
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

/// The run's end, once every show has ended and the surfaces are stopped: `results` in the
/// order of `kept`; `signal`: the exit status of the signal that stopped the run, if one did;
/// `host`: the shared pools' and clock's figures (several shows); `stats`: `--stats` (several
/// shows: the file for every show). Returns how the process ends.
pub(crate) fn conclude(
    kept: &[Kept],
    results: Vec<ShowResult>,
    ended: &Ended,
    host: Option<&HostFigures>,
    stats: Option<&str>,
    signal: Option<i32>,
    quiet: bool,
) -> Result<Exit> {
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
    let many = host.is_some();
    let mut all = Vec::with_capacity(kept.len());
    for (k, r) in kept.iter().zip(&results) {
        let stats = final_stats(k, r);
        // The web's counts are the only show's (several shows' are the page's, not one show's).
        let web = if many { None } else { ended.web.as_deref() };
        let mut doc = stats_json(&stats, k.threads, k.in_flight, web)?;
        if let (Err(e), true) = (&r.result, many) {
            doc["error"] = serde_json::json!(error_line(e));
        }
        if let Some(path) = &k.stats {
            let mut own = doc.clone();
            own["isolated"] = isolation_json(&isolation);
            if let (Some(q), false) = (&ended.oscquery, many) {
                own["oscquery"] = q.to_json();
            }
            let who = crate::outlet::who(many.then_some(k.name.as_str()));
            std::fs::write(path, serde_json::to_string_pretty(&own)? + "\n")
                .with_context(|| format!("{who}writing stats to '{path}'"))?;
        }
        let mut named = serde_json::json!({ "name": k.name });
        if let (Some(to), serde_json::Value::Object(from)) = (named.as_object_mut(), doc) {
            to.extend(from);
        }
        all.push(named);
    }
    match host {
        Some(host) => {
            if let Some(path) = stats {
                write_shows_stats(path, all, &isolation, host)?;
            }
            end_of_shows(kept.len(), &results, signal, quiet)
        }
        None => {
            let (k, r) = (&kept[0], results.into_iter().next().expect("one show"));
            end_of_show(k, r.result, signal, quiet)
        }
    }
}

/// A show's final figures: its result's, or (it failed) what its counters say now.
pub(crate) fn final_stats(k: &Kept, r: &ShowResult) -> RunStats {
    match &r.result {
        Ok(s) => s.clone(),
        Err(_) => k.counters.snapshot(),
    }
}

/// The end of a run of several shows: how many ended and failed (unless `quiet` and none
/// failed), a signal's end; status 1 when a show failed.
fn end_of_shows(
    n: usize,
    results: &[ShowResult],
    signal: Option<i32>,
    quiet: bool,
) -> Result<Exit> {
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| r.result.is_err())
        .map(|r| r.name.as_str())
        .collect();
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
    if let Some(code) = signal {
        say!("framepipe: stopped by a signal");
        return Ok(Exit::Status(code));
    }
    if failed.is_empty() {
        Ok(Exit::Done)
    } else {
        Ok(Exit::Status(1))
    }
}

/// The end of a run of one show: a signal's end (the frames that made it out were finished and
/// flushed; or the run failed meanwhile: said, the status still tells the signal), stdout
/// closed by its reader, the run's error, or its figures unless `quiet`.
fn end_of_show(
    k: &Kept,
    result: framepipe_core::Result<RunStats>,
    signal: Option<i32>,
    quiet: bool,
) -> Result<Exit> {
    if let Some(code) = signal {
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
        Err(e) if k.writes_stdout && is_broken_pipe(&e) => {
            say!(
                "framepipe: {}; stdout was closed by its reader (broken pipe) after {} frames; stopped",
                one_line(&anyhow::Error::from(e)),
                k.counters.snapshot().frames
            );
            return Ok(Exit::Status(EXIT_BROKEN_STDOUT));
        }
        Err(e) => return Err(e.into()),
    };
    if !quiet {
        say!(
            "framepipe: {} frames in {:.2} s ({:.1} fps) on {} threads{}",
            stats.frames,
            stats.wall_s,
            stats.fps,
            k.threads,
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

/// `--stats FILE` of a run of several shows: every show's object (`all`), the isolated
/// plugins, the shared pools and the clock.
fn write_shows_stats(
    path: &str,
    all: Vec<serde_json::Value>,
    isolation: &[framepipe_frei0r::isolate::Summary],
    host: &HostFigures,
) -> Result<()> {
    let pools: Vec<serde_json::Value> = host
        .pools
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
    let clock = &host.clock;
    let doc = serde_json::json!({
        "shows": all,
        "isolated": isolation_json(isolation),
        "pools": pools,
        "clock": {
            "standby": clock.standby.load(Ordering::Relaxed),
            "standby_wakeups": clock.standby_wakeups.load(Ordering::Relaxed),
            "rescued_frames": clock.rescued.load(Ordering::Relaxed),
            "rounds": lock_json(&clock.rounds()),
        },
    });
    std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing stats to '{path}'"))?;
    Ok(())
}

/// The isolated plugins' figures for `--stats` (process-wide: every show's).
pub(crate) fn isolation_json(
    isolation: &[framepipe_frei0r::isolate::Summary],
) -> serde_json::Value {
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
pub(crate) fn stats_json(
    s: &RunStats,
    threads: usize,
    in_flight: usize,
    web: Option<&framepipe_web::WebCounters>,
) -> Result<serde_json::Value> {
    let stages: Vec<serde_json::Value> = s
        .stages
        .iter()
        .map(|st| {
            let mut stage = serde_json::json!({
                "name": st.name,
                "mode": st.mode.as_str(),
                "instances": st.instances,
                "frames": st.frames,
                "skipped": st.skipped,
                "mean_ms": st.mean_ms,
            });
            // A GPU node's mean time on the GPU (GL timer queries).
            if let Some(ms) = st.gpu_ms {
                stage["gpu_ms"] = serde_json::json!(ms);
            }
            stage
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
    // A show with GPU nodes: its renderer and its transfers between CPU and GPU.
    if let Some(g) = &s.gpu {
        doc["gpu"] = serde_json::json!({
            "renderer": g.renderer,
            "uploads": g.uploads,
            "downloads": g.downloads,
            "uploads_per_frame": g.uploads_per_frame,
            "downloads_per_frame": g.downloads_per_frame,
            "released": g.released,
            "max_gpu_memory": s.memory.max_gpu_memory,
            "gpu_held_max": s.memory.gpu_held_max,
        });
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
