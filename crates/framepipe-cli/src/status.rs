//! What a run tells while it runs: the status line on a terminal, the `--progress` blocks for
//! scripts, and the rule for lines printed between redraws.
//!
//! * The status line is drawn only when stderr is a terminal (and not `-q`), fitted to the
//!   terminal's width (`TIOCGWINSZ` on stderr, else `$COLUMNS`, else 80) so that it never wraps
//!   (a wrapped line leaves a line per redraw): one show's by dropping its less important
//!   fields first, several shows' (one field) by cutting it.
//! * A line printed meanwhile ([`say_line`], the `say!` macro) clears the status line first;
//!   when there is no status line (stderr a file or pipe), nothing but the line is written: no
//!   `\r`, no escape codes in a log file.
//! * `--progress FILE|-` writes ffmpeg-style `key=value` blocks (see [`spawn_progress`])
//!   whatever stderr is, also with `-q`.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use framepipe_core::Rational;
use framepipe_runtime::Counters;

/// Whether a status line is being drawn on stderr (lines printed meanwhile clear it first).
static STATUS_ON: AtomicBool = AtomicBool::new(false);

/// How often the status line is redrawn.
const REDRAW: Duration = Duration::from_millis(250);
/// How often `--progress` writes a block (ffmpeg's `-stats_period` default).
const PROGRESS_PERIOD: Duration = Duration::from_millis(500);

/// Writes one line to stderr, ignoring failure. When a status line is drawn, the line replaces
/// it (the status line is redrawn below at its next redraw); otherwise only the line is written:
/// a leading `\r` (the callers' way of saying "this interrupts the status line") is dropped.
pub(crate) fn say_line(args: fmt::Arguments<'_>) {
    let text = args.to_string();
    let body = text.strip_prefix('\r').unwrap_or(&text);
    let mut err = std::io::stderr().lock();
    let _ = if STATUS_ON.load(Ordering::Relaxed) {
        writeln!(err, "\r\x1b[K{body}")
    } else {
        writeln!(err, "{body}")
    };
}

/// What starts a line written straight to stderr (not through `say!`, e.g. a batch of replies
/// written at once): with a status line drawn, a carriage return and erase-to-end that put the
/// line in its place; else nothing (no `\r` in a log file).
pub(crate) fn line_start() -> &'static str {
    if STATUS_ON.load(Ordering::Relaxed) {
        "\r\x1b[K"
    } else {
        ""
    }
}

/// Says whether a status line is being drawn (by [`status_line`]).
pub(crate) fn drawing(on: bool) {
    STATUS_ON.store(on, Ordering::Relaxed);
}

/// The terminal's width in columns: stderr's window size, else `$COLUMNS`, else 80.
pub(crate) fn columns() -> usize {
    let tty = rustix::termios::tcgetwinsize(std::io::stderr())
        .ok()
        .map(|w| w.ws_col as usize)
        .filter(|&c| c > 0);
    tty.or_else(|| {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse().ok())
            .filter(|&c: &usize| c > 0)
    })
    .unwrap_or(80)
}

/// Joins `fields` (each with its importance: higher is kept longer) in their order, leaving
/// out the least important ones until the line fits in `width - 1` characters (the last
/// column is left free: some terminals wrap when it is written). What still does not fit is cut.
pub(crate) fn fit(fields: &[(u8, String)], width: usize) -> String {
    let room = width.saturating_sub(1).max(1);
    let mut keep: Vec<bool> = vec![true; fields.len()];
    let joined = |keep: &[bool]| -> String {
        fields
            .iter()
            .zip(keep)
            .filter(|(_, &k)| k)
            .map(|((_, f), _)| f.as_str())
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut line = joined(&keep);
    while line.chars().count() > room {
        // The least important field still shown; the last of equals goes first.
        let Some(drop) = (0..fields.len())
            .filter(|&i| keep[i])
            .min_by_key(|&i| (fields[i].0, std::cmp::Reverse(i)))
        else {
            break;
        };
        if keep.iter().filter(|&&k| k).count() == 1 {
            break;
        }
        keep[drop] = false;
        line = joined(&keep);
    }
    line.chars().take(room).collect()
}

/// Frames done of a known total: `N/T P%  ETA`, from the rate measured so far.
fn progress_fields(frames: u64, total: Option<u64>, fps: f64) -> Vec<(u8, String)> {
    let Some(total) = total.filter(|&t| t > 0) else {
        return Vec::new();
    };
    let done = frames.min(total);
    let mut out = vec![(
        9,
        format!(
            "{done}/{total} ({:.0}%)",
            done as f64 * 100.0 / total as f64
        ),
    )];
    if fps > 0.0 && done < total {
        let left = ((total - done) as f64 / fps).round() as u64;
        out.push((8, format!("ETA {}:{:02}", left / 60, left % 60)));
    }
    out
}

/// A surface's counts for the status line (`osc: 3 ok, 0 bad`), read from atomics.
pub(crate) type Summary = Box<dyn Fn() -> String + Send>;

/// What the status line counts: the only show, or every show of the run.
pub(crate) enum Figures {
    /// One show: its figures and per-node times, and the frames it will output when the
    /// sources' lengths say it.
    Show {
        counters: Arc<Counters>,
        total: Option<u64>,
    },
    /// Several shows: how many still run, frames out and late/repeated frames over them all.
    Shows {
        counters: Vec<Arc<Counters>>,
        running: Arc<AtomicUsize>,
    },
}

/// Where the status line gets its figures; each extra a surface's summary read from atomics.
pub(crate) struct StatusSource {
    pub figures: Figures,
    /// The surfaces' counts (OSC, MIDI, web, OSCQuery), each a short summary.
    pub extras: Vec<Summary>,
}

/// The frame rate measured between two redraws.
struct Rate {
    last: (u64, Instant),
    fps: f64,
}

impl Rate {
    /// `frames` out now: the rate since the last call (kept when no time passed).
    fn update(&mut self, frames: u64) -> f64 {
        let now = Instant::now();
        let dt = now.duration_since(self.last.1).as_secs_f64();
        if dt > 0.0 {
            self.fps = frames.saturating_sub(self.last.0) as f64 / dt;
        }
        self.last = (frames, now);
        self.fps
    }
}

impl StatusSource {
    /// The line's fields, each with its importance (see [`fit`]). Reads only atomics (one show:
    /// a snapshot of its counters).
    fn fields(&self, rate: &mut Rate) -> Vec<(u8, String)> {
        match &self.figures {
            Figures::Show { counters, total } => {
                let s = counters.snapshot();
                let fps = rate.update(s.frames);
                // Importance: the frame count and rate first, then progress, trouble (late,
                // paused), then the rest; the per-node times go first when room is short.
                let mut fields: Vec<(u8, String)> = vec![(10, format!("{} frames", s.frames))];
                fields.extend(progress_fields(s.frames, *total, fps));
                fields.push((9, format!("{fps:.1} fps")));
                let (late, rep) = (counters.late(), counters.repeated());
                if late + rep > 0 {
                    fields.push((7, format!("late {late} rep {rep}")));
                }
                if counters.paused() {
                    fields.push((8, "PAUSED".into()));
                }
                if counters.realtime() {
                    fields.push((4, "RT".into()));
                }
                fields.push((3, format!("in flight {}", s.in_flight)));
                fields.push((2, format!("{:.1}bpm", counters.tempo_bpm())));
                let budget = counters.latency_budget_ms();
                if budget > 0.0 {
                    fields.push((3, format!("latency {budget:.1}ms")));
                }
                for extra in &self.extras {
                    fields.push((5, extra()));
                }
                for st in &s.stages {
                    let skipped = if st.skipped > 0 {
                        format!(" skipped {}", st.skipped)
                    } else {
                        String::new()
                    };
                    let text = if st.instances > 1 {
                        format!("{} {:.1}ms x{}{skipped}", st.name, st.mean_ms, st.instances)
                    } else {
                        format!("{} {:.1}ms{skipped}", st.name, st.mean_ms)
                    };
                    fields.push((1, text));
                }
                fields
            }
            Figures::Shows { counters, running } => {
                let (mut frames, mut late, mut repeated, mut paused) = (0u64, 0u64, 0u64, 0usize);
                for c in counters {
                    frames += c.frames_out();
                    late += c.late();
                    repeated += c.repeated();
                    paused += c.paused() as usize;
                }
                let fps = rate.update(frames);
                // One field: cut at the terminal's width rather than thinned.
                let mut line = format!(
                    "{}/{} shows running  {frames:>8} frames out  {fps:>7.1} fps  late {late} rep {repeated}",
                    running.load(Ordering::Relaxed),
                    counters.len()
                );
                if paused > 0 {
                    line.push_str(&format!("  {paused} paused"));
                }
                for summary in &self.extras {
                    line.push_str(&format!("  {}", summary()));
                }
                vec![(10, line)]
            }
        }
    }
}

/// The status line of a run of one show or several (the `fp-status` thread): redrawn on stderr
/// four times a second until `stop`, fitted to the terminal's width (read at each redraw: a
/// resized terminal is followed). Reads only atomics.
pub(crate) fn status_line(src: &StatusSource, stop: &AtomicBool) {
    drawing(true);
    let mut rate = Rate {
        last: (0, Instant::now()),
        fps: 0.0,
    };
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(REDRAW);
        let line = fit(&src.fields(&mut rate), columns());
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}\x1b[K");
        let _ = err.flush();
    }
    drawing(false);
    let _ = write!(std::io::stderr(), "\r\x1b[K");
}

/// Starts the `fp-status` thread drawing `src` until `stop` (`None` if it cannot be started:
/// the run goes on without a status line).
pub(crate) fn spawn_status_line(
    src: StatusSource,
    stop: Arc<AtomicBool>,
) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("fp-status".into())
        .spawn(move || status_line(&src, &stop))
        .ok()
}

/// Frames the run will output, when known: the shortest of the sources that end the run
/// (`on-end=stop`) that know their length (`frames=`, a clip's count). `None` when a source
/// that ends the run does not know it (a live stream), or every source loops or holds.
pub(crate) fn total_frames(graph: &framepipe_runtime::Graph) -> Option<u64> {
    let mut total: Option<u64> = None;
    for node in graph.nodes() {
        if let framepipe_runtime::NodeKind::Source {
            source,
            on_end: framepipe_runtime::OnEnd::Stop,
        } = &node.kind
        {
            let n = source.len_hint()?;
            total = Some(total.map_or(n, |t| t.min(n)));
        }
    }
    total
}

/// Where `--progress` writes.
pub(crate) enum ProgressTo {
    Stdout,
    File(std::fs::File),
}

impl ProgressTo {
    /// `-` is standard output; anything else a file, created (or truncated) now.
    pub(crate) fn open(arg: &str) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        Ok(if arg == "-" {
            ProgressTo::Stdout
        } else {
            ProgressTo::File(
                std::fs::File::create(arg)
                    .with_context(|| format!("--progress: cannot create '{arg}'"))?,
            )
        })
    }

    fn write_block(&mut self, block: &str) -> std::io::Result<()> {
        match self {
            ProgressTo::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(block.as_bytes())?;
                out.flush()
            }
            ProgressTo::File(f) => {
                f.write_all(block.as_bytes())?;
                f.flush()
            }
        }
    }
}

/// One `--progress` block, as ffmpeg's `-progress` writes them: `key=value` lines ending with
/// `progress=continue` (or `end`). Unknown values are `N/A`.
fn progress_block(
    frames: u64,
    total: Option<u64>,
    rate: Rational,
    elapsed: Duration,
    end: bool,
) -> String {
    let secs = elapsed.as_secs_f64();
    let fps = if secs > 0.0 {
        frames as f64 / secs
    } else {
        0.0
    };
    // The output's time: frame N ends at (N / rate).
    let out_time_us =
        (frames as u128 * 1_000_000 * rate.den as u128 / rate.num.max(1) as u128) as u64;
    let speed = if secs > 0.0 {
        format!("{:.3}x", out_time_us as f64 / 1e6 / secs)
    } else {
        "N/A".into()
    };
    let na = || "N/A".to_string();
    let eta = match total {
        Some(_) if end => "0".into(),
        Some(t) if fps > 0.0 => ((t.saturating_sub(frames)) as f64 / fps * 1e6)
            .round()
            .to_string(),
        _ => na(),
    };
    format!(
        "frame={frames}\ntotal_frames={}\nfps={fps:.2}\nout_time_us={out_time_us}\nspeed={speed}\neta_us={eta}\nprogress={}\n",
        total.map_or_else(na, |t| t.to_string()),
        if end { "end" } else { "continue" }
    )
}

/// A `--progress` writer: a thread writing a block every half second until the run ends.
pub(crate) struct ProgressWriter {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<ProgressTo>,
    counters: Arc<Counters>,
    total: Option<u64>,
    rate: Rational,
    start: Instant,
}

/// Starts writing `--progress` blocks for a run of `rate` whose sources give `total` frames.
pub(crate) fn spawn_progress(
    mut to: ProgressTo,
    counters: Arc<Counters>,
    total: Option<u64>,
    rate: Rational,
) -> anyhow::Result<ProgressWriter> {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let thread = std::thread::Builder::new()
        .name("fp-progress".into())
        .spawn({
            let (stop, counters) = (Arc::clone(&stop), Arc::clone(&counters));
            move || {
                let mut next = start + PROGRESS_PERIOD;
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if now < next {
                        std::thread::sleep((next - now).min(Duration::from_millis(50)));
                        continue;
                    }
                    next += PROGRESS_PERIOD;
                    let block =
                        progress_block(counters.frames_out(), total, rate, start.elapsed(), false);
                    // A reader that went away does not stop the run.
                    if to.write_block(&block).is_err() {
                        break;
                    }
                }
                to
            }
        })?;
    Ok(ProgressWriter {
        stop,
        thread,
        counters,
        total,
        rate,
        start,
    })
}

impl ProgressWriter {
    /// Stops the thread and writes the last block (`progress=end`) with the run's final count.
    pub(crate) fn finish(self, frames: Option<u64>) {
        self.stop.store(true, Ordering::Relaxed);
        let Ok(mut to) = self.thread.join() else {
            return;
        };
        let frames = frames.unwrap_or_else(|| self.counters.frames_out());
        let _ = to.write_block(&progress_block(
            frames,
            self.total,
            self.rate,
            self.start.elapsed(),
            true,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::fit;

    fn f(fields: &[(u8, &str)]) -> Vec<(u8, String)> {
        fields.iter().map(|(p, s)| (*p, s.to_string())).collect()
    }

    #[test]
    fn a_line_that_fits_is_kept_whole() {
        let fields = f(&[(10, "12 frames"), (9, "25.0 fps"), (1, "glow 3.0ms")]);
        assert_eq!(fit(&fields, 80), "12 frames  25.0 fps  glow 3.0ms");
    }

    #[test]
    fn the_least_important_fields_go_first_and_the_line_never_fills_the_last_column() {
        let fields = f(&[
            (10, "1234 frames"),
            (9, "25.0 fps"),
            (7, "late 3 rep 0"),
            (1, "a-long-node-name 12.0ms"),
            (1, "another-long-node 3.0ms"),
            (2, "120.0bpm"),
        ]);
        let line = fit(&fields, 40);
        assert!(line.chars().count() < 40, "{line}");
        assert!(
            line.starts_with("1234 frames  25.0 fps  late 3 rep 0"),
            "{line}"
        );
        assert!(!line.contains("another-long-node"), "{line}");
        let tiny = fit(&fields, 8);
        assert_eq!(tiny.chars().count(), 7, "{tiny}");
    }
}
