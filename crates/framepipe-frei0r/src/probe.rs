//! The statefulness probe: decides by measurement whether a frei0r filter or mixer keeps state
//! between frames, and so whether the scheduler may run several instances of it at once.
//!
//! For one plugin, at [`PROBE_WIDTH`] x [`PROBE_HEIGHT`], with [`PROBE_FRAMES`] distinct input
//! frames (moving bars over per-frame noise) and the time argument the host would pass for each
//! ([`crate::element::frei0r_time`] at 25 fps). A mixer gets, for every frame, a distinct pair
//! (mixer2) or triple (mixer3) of such frames ([`probe_inputs`]), run with `f0r_update2`; a
//! filter gets one frame, run with `f0r_update`:
//!
//! 1. **Sequence**: instance A gets frames 0..N in order; its outputs are kept.
//! 2. **Fresh instances**: for every k > 0, a fresh instance gets frame k alone, at frame k's time.
//!    If its output differs from A's output k, A carried something over from earlier frames:
//!    **stateful**.
//! 3. **Determinism**: a second instance gets the same sequence, and a fresh instance frame 0; if its output differs from A's output 0
//!    (same input, same time, same fresh state), the plugin is **nondeterministic** (typically a
//!    process-wide random generator shared by all instances).
//! 4. **Output buffer**: the same with the output buffer pre-filled with garbage instead of zeros;
//!    if only that changes the result, the plugin reads its output buffer, and the host clears
//!    it before every frame.
//! 5. **Time**: frame 0 at a later time; if the output changes, the plugin is time-dependent
//!    (harmless for scheduling, since every frame carries its own time; reported).
//!
//! All of this runs twice: with the plugin's default parameters, and with every number parameter
//! at 0.5 (a delay plugin keeps no state while its delay is 0).
//!
//! Verdict: stateful or nondeterministic -> `serial`; otherwise `stateless` -> `parallel`; the
//! same for filters and mixers (a mixer's note says `mixer2` or `mixer3`).

use std::path::Path;
use std::sync::Arc;

use framepipe_core::{FrameCtx, Mode};

use crate::element::frei0r_time;
use crate::error::Result;
use crate::plugin::{Instance, ParamKind, ParamValue, Plugin, PluginKind};

/// Probe frame width.
pub const PROBE_WIDTH: u32 = 128;
/// Probe frame height.
pub const PROBE_HEIGHT: u32 = 96;
/// Number of frames in the sequence given to instance A.
pub const PROBE_FRAMES: usize = 24;
/// Frame period used for the time argument, in nanoseconds (25 fps).
pub const PROBE_PERIOD_NS: i64 = 40_000_000;

/// What the probe measured for one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// The plugin file's stem.
    pub stem: String,
    /// CRC-32 of the plugin file: the row holds for this build only.
    pub crc32: u32,
    /// Its type.
    pub kind: PluginKind,
    /// A fresh instance's output differed from the sequence's at some frame.
    pub stateful: bool,
    /// Two fresh instances gave different outputs for the same input.
    pub nondeterministic: bool,
    /// The output depends on the output buffer's previous content.
    pub reads_output: bool,
    /// The output depends on the time argument.
    pub time_dependent: bool,
    /// Which comparisons differed, for the record.
    pub note: String,
}

impl ProbeReport {
    /// `stateful`, `nondeterministic` or `stateless` for filters and mixers; `source` for
    /// sources (not probed: a source runs as the serial first stage).
    pub fn verdict(&self) -> &'static str {
        match self.kind {
            PluginKind::Source => "source",
            _ if self.stateful => "stateful",
            _ if self.nondeterministic => "nondeterministic",
            _ => "stateless",
        }
    }

    /// The scheduling mode that follows from the verdict.
    pub fn mode(&self) -> Mode {
        if self.verdict() == "stateless" {
            Mode::Parallel
        } else {
            Mode::Serial
        }
    }

    /// The report as a row of `data/modes.tsv`.
    pub fn tsv_row(&self) -> String {
        let yn = |b: bool| if b { "yes" } else { "no" };
        format!(
            "{}\t{:08x}\t{}\t{}\t{}\t{}\t{}",
            self.stem,
            self.crc32,
            self.verdict(),
            self.mode(),
            yn(self.time_dependent),
            yn(self.reads_output),
            self.note
        )
    }
}

/// Input frame `k` of the probe sequence: vertical bars moving 5 px per frame, horizontal bars
/// moving 3 px per frame, and noise seeded by `k`, opaque. Every frame differs from every other.
pub fn probe_frame(k: usize, width: u32, height: u32) -> Vec<u32> {
    let mut seed: u32 = 0x9e37_79b9 ^ (k as u32).wrapping_mul(0x85eb_ca6b);
    let mut out = Vec::with_capacity(width as usize * height as usize);
    for y in 0..height as usize {
        for x in 0..width as usize {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let bar_v = ((x + 5 * k) / 16).is_multiple_of(2);
            let bar_h = ((y + 3 * k) / 12).is_multiple_of(2);
            let r = if bar_v { 200u8 } else { 40 }.wrapping_add((seed & 0x3f) as u8);
            let g = if bar_h { 180u8 } else { 60 }.wrapping_add(((seed >> 8) & 0x3f) as u8);
            let b = ((x * 255) / width as usize) as u8 ^ ((seed >> 16) & 0x1f) as u8;
            out.push(u32::from_ne_bytes([r, g, b, 255]));
        }
    }
    out
}

/// The inputs of probe frame `k` for a plugin of `inputs` inputs (1 for a filter, 2 or 3 for a
/// mixer): input `j` is [`probe_frame`]`(k + 1000 * j)`, so that the inputs of one frame differ
/// from each other and from those of every other frame.
pub fn probe_inputs(k: usize, inputs: usize, width: u32, height: u32) -> Vec<Vec<u32>> {
    (0..inputs)
        .map(|j| probe_frame(k + 1000 * j, width, height))
        .collect()
}

/// How many inputs a plugin of `kind` takes (0 for a source).
fn input_count(kind: PluginKind) -> usize {
    match kind {
        PluginKind::Source => 0,
        PluginKind::Filter => 1,
        PluginKind::Mixer2 => 2,
        PluginKind::Mixer3 => 3,
    }
}

/// One frame through `inst`: `f0r_update` for a filter (one input), `f0r_update2` for a mixer.
fn run(inst: &mut Instance, time: f64, inputs: &[Vec<u32>], out: &mut [u32]) {
    match inputs {
        [one] => inst.update(time, Some(one), out),
        [a, b] => inst.update2(time, &[a, b], out),
        [a, b, c] => inst.update2(time, &[a, b, c], out),
        _ => unreachable!("probe inputs are 1 to 3 frames"),
    }
}

fn ctx(k: usize) -> FrameCtx {
    FrameCtx::new(k as u64, k as i64 * PROBE_PERIOD_NS)
}

/// Parameter settings a pass is run with: the plugin's defaults, or every number parameter moved
/// to 0.5 (some plugins keep state only when a parameter asks for it, like a delay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Params {
    Defaults,
    Moved,
}

fn instance(plugin: &Arc<Plugin>, params: Params) -> Result<Instance> {
    let mut inst = Instance::new(plugin, PROBE_WIDTH, PROBE_HEIGHT)?;
    if params == Params::Moved {
        for p in plugin.params() {
            if p.kind == ParamKind::Double {
                inst.set_param(p.index, &ParamValue::Double(0.5))?;
            }
        }
    }
    Ok(inst)
}

/// Runs a fresh instance on frame `k` alone, at frame `j`'s time, the output prefilled with
/// `fill`.
fn fresh(
    plugin: &Arc<Plugin>,
    params: Params,
    frames: &[Vec<Vec<u32>>],
    k: usize,
    j: usize,
    fill: u32,
) -> Result<Vec<u32>> {
    let mut inst = instance(plugin, params)?;
    let mut out = vec![fill; frames[k][0].len()];
    run(&mut inst, frei0r_time(&ctx(j)), &frames[k], &mut out);
    Ok(out)
}

/// Probes the plugin at `path` in this process (the `frei0r-probe` binary runs each plugin in a
/// child process so that a crashing plugin cannot take the probe down).
pub fn probe_plugin(path: &Path) -> Result<ProbeReport> {
    let plugin = Plugin::load(path)?;
    let mut report = ProbeReport {
        stem: plugin.stem().to_string(),
        crc32: plugin.crc32(),
        kind: plugin.info().kind,
        stateful: false,
        nondeterministic: false,
        reads_output: false,
        time_dependent: false,
        note: String::new(),
    };
    let inputs = input_count(report.kind);
    if inputs == 0 {
        report.note = format!("{} plugins run as serial stages", report.kind);
        return Ok(report);
    }
    if inputs > 1 && !plugin.has_update2() {
        return Err(crate::Frei0rError::NotAPlugin {
            path: path.to_path_buf(),
            reason: format!("a {} plugin without f0r_update2", report.kind),
        });
    }
    let frames: Vec<Vec<Vec<u32>>> = (0..PROBE_FRAMES)
        .map(|k| probe_inputs(k, inputs, PROBE_WIDTH, PROBE_HEIGHT))
        .collect();
    let mut notes = Vec::new();
    let has_numbers = plugin.params().iter().any(|p| p.kind == ParamKind::Double);
    for params in [Params::Defaults, Params::Moved] {
        if params == Params::Moved && (!has_numbers || report.stateful || report.nondeterministic) {
            break;
        }
        let label = match params {
            Params::Defaults => "defaults",
            Params::Moved => "numbers at 0.5",
        };
        pass(&plugin, params, &frames, &mut report, &mut notes, label)?;
    }
    if notes.is_empty() {
        notes.push("every frame of the sequence equals a fresh instance's output".to_string());
    }
    if inputs > 1 {
        // The table's rows say which plugins are mixers.
        notes.insert(0, format!("{} ({inputs} inputs)", report.kind));
    }
    report.note = notes.join("; ");
    Ok(report)
}

fn pass(
    plugin: &Arc<Plugin>,
    params: Params,
    frames: &[Vec<Vec<u32>>],
    report: &mut ProbeReport,
    notes: &mut Vec<String>,
    label: &str,
) -> Result<()> {
    // 1. The sequence through one instance, twice (with two fresh instances).
    let sequence = || -> Result<Vec<Vec<u32>>> {
        let mut a = instance(plugin, params)?;
        let mut seq_out = Vec::with_capacity(PROBE_FRAMES);
        for (k, f) in frames.iter().enumerate() {
            let mut out = vec![0u32; f[0].len()];
            run(&mut a, frei0r_time(&ctx(k)), f, &mut out);
            seq_out.push(out);
        }
        Ok(seq_out)
    };
    let seq_out = sequence()?;
    let again = sequence()?;
    if let Some(k) = (0..PROBE_FRAMES).find(|&k| again[k] != seq_out[k]) {
        report.nondeterministic = true;
        notes.push(format!(
            "{label}: the same sequence through a second instance differs from frame {k}"
        ));
    }

    // 3. Determinism: two more fresh instances on frame 0.
    let c1 = fresh(plugin, params, frames, 0, 0, 0)?;
    let c2 = fresh(plugin, params, frames, 0, 0, 0)?;
    if c1 != seq_out[0] || c2 != c1 {
        report.nondeterministic = true;
        notes.retain(|n| !n.starts_with(&format!("{label}: the same sequence")));
        notes.push(format!("{label}: fresh instances disagree on frame 0"));
    }
    // 4. Output buffer content.
    let d = fresh(plugin, params, frames, 0, 0, 0xa5a5_a5a5)?;
    if !report.nondeterministic && d != c1 {
        report.reads_output = true;
        notes.push(format!(
            "{label}: output depends on the output buffer's old content"
        ));
    }
    // 2. Fresh instances against the sequence, at every frame.
    let mut differing = Vec::new();
    for (k, seq) in seq_out.iter().enumerate().skip(1) {
        if &fresh(plugin, params, frames, k, k, 0)? != seq {
            differing.push(k);
        }
    }
    if let Some(first) = differing.first() {
        report.stateful = true;
        notes.push(format!(
            "{label}: {} of {} frames differ from a fresh instance's (first: frame {first})",
            differing.len(),
            PROBE_FRAMES - 1
        ));
    }
    // 5. Time: frame 0 at the time of frame 100.
    if !report.nondeterministic {
        let t = fresh(plugin, params, frames, 0, 100, 0)?;
        if t != c1 {
            report.time_dependent = true;
            notes.push(format!("{label}: output changes with time"));
        }
    }
    Ok(())
}

/// The header of `data/modes.tsv`.
pub fn tsv_header(dirs: &str) -> String {
    format!(
        "# frei0r plugin scheduling modes, measured by framepipe's statefulness probe (src/probe.rs).\n\
         # Generated; do not edit. Regenerate with:\n\
         #   {}\n\
         # Probed plugins from: {dirs}; frames {PROBE_WIDTH}x{PROBE_HEIGHT}, sequence of {PROBE_FRAMES}, each frame checked against a fresh instance.\n\
         # Filters and mixers (mixer2, mixer3: distinct input pairs / triples) alike: stateless -> parallel; stateful, nondeterministic, crashed, timeout, source -> serial.\n\
         # A row holds for the file whose CRC-32 it names; a plugin file with other bytes runs serial until re-probed.\n\
         # stem\tcrc32\tverdict\tmode\ttime_dependent\treads_output\tnote\n",
        crate::modes::REPROBE
    )
}

/// The row for a plugin the probe could not measure (`crashed`, `timeout`): scheduled serially.
pub fn failed_row(stem: &str, crc32: u32, verdict: &str, note: &str) -> String {
    format!("{stem}\t{crc32:08x}\t{verdict}\tserial\tno\tno\t{note}")
}
