//! `ffmpegsrc` and `ffmpegsink`: video decoded or encoded by the `ffmpeg` command-line tool,
//! exchanged as raw RGBA frames through a pipe.
//!
//! The source probes the input's size and rate with `ffprobe` at build time, then runs
//! `ffmpeg -nostdin -v error [ARGS...] [-f FORMAT] -i LOCATION [-vf scale=W:H] [-frames:v N]
//! -f rawvideo -pix_fmt rgba -` and reads whole frames from its stdout into the pool frame.
//! The sink runs `ffmpeg -v error -y -f rawvideo -pix_fmt rgba -s WxH -r RATE -i -
//! [-c:v CODEC] [-pix_fmt PIXFMT] [ARGS...] LOCATION` and writes frames to its stdin from a
//! writer thread fed through a ring of buffers allocated at start (see `Running`).
//!
//! Both are ready before the frame clock starts ([`Sink::ready`], [`Source::ready`]): the sink
//! once ffmpeg is loaded and reading its pipe, the source (on a clip file) once the decoder's
//! first bytes are there.
//!
//! `location` is always handed over as a path or URL, never as an option: a relative path that
//! starts with `-` goes as `./-name` ([`input_arg`], [`output_arg`]), and ffprobe gets it after
//! `-i`.
//!
//! ffmpeg's stderr is read by a helper thread that keeps its last lines, counts them and keeps
//! the first, so that a failure is reported with ffmpeg's own words and a chatty ffmpeg can never
//! block on a full pipe. Under `-v error` every line is an error: at the end of a clip,
//! `ffmpegsrc` warns (or, with `strict=true`, fails) when ffmpeg reported decode errors or
//! delivered fewer frames than ffprobe announced — a damaged or truncated clip does not pass for
//! a whole one. A child is killed and reaped when its element is dropped.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, BufWriter, Read};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use framepipe_core::{
    Element, ElementDesc, ElementKind, Error, Frame, FrameCtx, FrameMut, Mode, PathUse, PropKind,
    PropSpec, PropValue, Props, Rational, Result, Sink, Source, VideoInfo,
};

use crate::error::IoError;
use crate::stream::{check_size, read_frame, FrameRead, LoopOrigin, BUF_BYTES, MAX_DIM};

/// Name of the source.
pub const SRC: &str = "ffmpegsrc";
/// Name of the sink.
pub const SINK: &str = "ffmpegsink";
/// The ffmpeg program run (found on `PATH`).
pub const FFMPEG: &str = "ffmpeg";
/// The ffprobe program run (found on `PATH`).
pub const FFPROBE: &str = "ffprobe";
/// Lines of a tool's stderr kept for error messages.
const TAIL_LINES: usize = 8;
/// How long [`Sink::ready`] waits at most for ffmpeg to be reading its input (a loaded machine
/// can take seconds to start it); after that the run starts anyway.
const READY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How often it looks.
const READY_POLL: std::time::Duration = std::time::Duration::from_millis(2);
/// Bytes of frames `ffmpegsink` may hold ahead of its encoder (see [`Running`]); at most
/// [`AHEAD_FRAMES`] frames, at least one.
const AHEAD_BYTES: u64 = 32 << 20;
/// Frames `ffmpegsink` may hold ahead of its encoder at most.
const AHEAD_FRAMES: u64 = 8;

/// Whether process `pid` has a thread blocked reading a pipe (`/proc/PID/task/*/wchan` names
/// `pipe_read`, `anon_pipe_read` or, on older kernels, `pipe_wait`): an encoder started with
/// only its stdin as a pipe to read is then loaded and waiting for its first frame. Any other
/// answer is `Some(false)`, `0` included: since Linux 5.16 a running task's wchan reads `0`,
/// and an ffmpeg still loading is running. `None` only when /proc cannot be read (no /proc,
/// no readable wchan): then nobody can tell.
fn reading_a_pipe(pid: u32) -> Option<bool> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut read = false;
    for task in tasks.flatten() {
        let Ok(wchan) = std::fs::read_to_string(task.path().join("wchan")) else {
            continue;
        };
        read = true;
        if wchan.contains("pipe_read") || wchan.contains("pipe_wait") {
            return Some(true);
        }
    }
    read.then_some(false)
}

/// A relative path given to ffmpeg as input or output could be taken for an option.
fn dashed(location: &str) -> bool {
    location.starts_with('-') && location != "-"
}

/// How `location` is named to ffmpeg/ffprobe as an input: a relative path starting with `-`
/// becomes `./-name`, so that no tool can take it for an option; anything else (paths, URLs,
/// and with an input `format` its device or filter graph) is passed unchanged.
pub fn input_arg(location: &str, format: &str) -> String {
    if format.is_empty() && dashed(location) {
        format!("./{location}")
    } else {
        location.to_string()
    }
}

/// How `location` is named to ffmpeg as its output: `-` is framepipe's standard output
/// (`pipe:1`), a relative path starting with `-` becomes `./-name` (ffmpeg takes the output as
/// a bare argument, where `-y` would be an option), anything else is passed unchanged.
pub fn output_arg(location: &str) -> String {
    if location == "-" {
        "pipe:1".into()
    } else if dashed(location) {
        format!("./{location}")
    } else {
        location.to_string()
    }
}

/// What a child process wrote to stderr: its last lines, how many there were and the first.
#[derive(Debug, Default)]
struct Lines {
    last: VecDeque<String>,
    count: u64,
    first: Option<String>,
}

/// The stderr of a child process, collected by a helper thread.
#[derive(Debug)]
struct StderrTail {
    lines: Arc<Mutex<Lines>>,
    thread: Option<JoinHandle<()>>,
}

impl StderrTail {
    fn start(stderr: impl Read + Send + 'static) -> Self {
        let lines = Arc::new(Mutex::new(Lines {
            last: VecDeque::with_capacity(TAIL_LINES),
            ..Lines::default()
        }));
        let sink = Arc::clone(&lines);
        let thread = std::thread::Builder::new()
            .name("ffmpeg-stderr".into())
            .spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let line = line.trim().to_string();
                    if line.is_empty() {
                        continue;
                    }
                    let mut q = sink.lock().unwrap_or_else(|e| e.into_inner());
                    q.count += 1;
                    if q.first.is_none() {
                        q.first = Some(line.clone());
                    }
                    if q.last.len() == TAIL_LINES {
                        q.last.pop_front();
                    }
                    q.last.push_back(line);
                }
            })
            .ok();
        StderrTail { lines, thread }
    }

    /// Waits for the child's stderr to close.
    fn join(&mut self) -> std::sync::MutexGuard<'_, Lines> {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.lines.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for the child's stderr to close, then returns its last line.
    fn last_line(&mut self) -> Option<String> {
        self.join().last.back().cloned()
    }

    /// Waits for the child's stderr to close, then returns how many lines it wrote and the
    /// first.
    fn errors(&mut self) -> (u64, Option<String>) {
        let l = self.join();
        (l.count, l.first.clone())
    }
}

fn failure(program: &str, status: Option<ExitStatus>, tail: &mut StderrTail) -> IoError {
    IoError::ToolFailed {
        program: program.into(),
        status: match status {
            Some(s) if s.code().is_some() => format!("exited with {s}"),
            Some(s) => format!("ended: {s}"),
            None => "ended in an unknown way".into(),
        },
        message: tail
            .last_line()
            .unwrap_or_else(|| "(no message on stderr)".into()),
    }
}

fn str_spec(name: &str, default: &str, what: &str) -> PropSpec {
    PropSpec::new(name, PropKind::Str, PropValue::Str(default.into()), what)
}

fn dim_spec(name: &str, what: &str) -> PropSpec {
    PropSpec::new(
        name,
        PropKind::Int {
            min: 0,
            max: MAX_DIM as i64,
        },
        PropValue::Int(0),
        what,
    )
}

/// The registry description of `ffmpegsrc`.
pub fn src_desc() -> ElementDesc {
    ElementDesc {
        name: SRC.into(),
        kind: ElementKind::Source,
        description: "Decodes any clip or URL with the ffmpeg tool, through a pipe".into(),
        props: vec![
            str_spec("location", "", "file or URL ffmpeg reads (required)").path(
                PathUse::FileOrUrl {
                    unless: Some("format"),
                },
            ),
            str_spec(
                "format",
                "",
                "input format given to ffmpeg as -f (e.g. lavfi); empty = detect",
            ),
            str_spec(
                "args",
                "",
                "extra ffmpeg options put before -i, split at spaces (e.g. -re, -ss 10, -xerror)",
            ),
            dim_spec(
                "width",
                "scale to this width (ffmpeg); 0 = the clip's, or keep aspect",
            ),
            dim_spec(
                "height",
                "scale to this height (ffmpeg); 0 = the clip's, or keep aspect",
            ),
            PropSpec::new(
                "frames",
                PropKind::Int {
                    min: 0,
                    max: i64::MAX,
                },
                PropValue::Int(0),
                "stop after this many frames; 0 = all",
            ),
            PropSpec::new(
                "strict",
                PropKind::Bool,
                PropValue::Bool(false),
                "a damaged clip (decode errors, fewer frames than announced) is an error instead of a warning",
            ),
        ],
        default_mode: Mode::Serial,
        details: vec![("program".into(), "ffmpeg, ffprobe (on PATH)".into())],
    }
}

/// What ffprobe says about a clip's first video stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
    /// Frame rate (average rate, else the container's base rate, else 25).
    pub rate: Rational,
    /// Frames the container announces for the stream (`nb_frames`; mp4 and mov have it).
    pub nb_frames: Option<u64>,
    /// Duration of the stream, else of the container, in nanoseconds (files; not live URLs).
    pub duration_ns: Option<u64>,
}

impl Probe {
    /// The frames a whole clip should deliver, and where the figure comes from: `nb_frames`, or
    /// the duration times the frame rate (rounded down) when the container has no count.
    pub fn expected_frames(&self) -> Option<(u64, &'static str)> {
        if let Some(n) = self.nb_frames.filter(|&n| n > 0) {
            return Some((n, "announced by ffprobe"));
        }
        let d = self.duration_ns?;
        let n = d as u128 * self.rate.num as u128 / (self.rate.den as u128 * 1_000_000_000);
        (n > 0).then_some((n as u64, "estimated from ffprobe's duration"))
    }
}

/// Probes `location` (with input format `format` unless empty) with ffprobe.
pub fn probe(location: &str, format: &str) -> std::result::Result<Probe, IoError> {
    let mut cmd = Command::new(FFPROBE);
    cmd.args(["-v", "error"]);
    if !format.is_empty() {
        cmd.args(["-f", format]);
    }
    cmd.args([
        "-select_streams",
        "v:0",
        "-show_entries",
        "stream=width,height,avg_frame_rate,r_frame_rate,nb_frames,duration:format=duration",
        "-of",
        "default=noprint_wrappers=1",
        "-i",
        &input_arg(location, format),
    ]);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| IoError::Spawn {
            program: FFPROBE.into(),
            source,
        })?;
    let bad = |reason: String| IoError::Probe {
        location: location.into(),
        reason,
    };
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty());
        return Err(bad(format!(
            "ffprobe exited with {}: {}",
            out.status,
            last.unwrap_or("(no message on stderr)").trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::trim)
    };
    let (Some(w), Some(h)) = (field("width"), field("height")) else {
        return Err(bad("no video stream found".into()));
    };
    let w: u64 = w.parse().map_err(|_| bad(format!("width '{w}'")))?;
    let h: u64 = h.parse().map_err(|_| bad(format!("height '{h}'")))?;
    let (width, height) = check_size(w, h)?;
    let rate = ["avg_frame_rate", "r_frame_rate"]
        .iter()
        .filter_map(|k| field(k))
        .find_map(Rational::parse)
        .filter(|r| r.num > 0 && r.den > 0)
        .unwrap_or(Rational::new(25, 1));
    // The stream's entries come first, then the container's: the first that parses wins.
    let values = |key: &str| {
        text.lines()
            .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::trim)
            .collect::<Vec<_>>()
    };
    let nb_frames = values("nb_frames").iter().find_map(|v| v.parse().ok());
    let duration_ns = values("duration")
        .iter()
        .filter_map(|v| v.parse::<f64>().ok())
        .find(|d| d.is_finite() && *d > 0.0 && *d < 1e9)
        .map(|d| (d * 1e9) as u64);
    Ok(Probe {
        width,
        height,
        rate,
        nb_frames,
        duration_ns,
    })
}

/// `want_w` x `want_h` with zeros filled in: both zero = `(w, h)`, one zero = keep the aspect
/// ratio, rounded to an even number as video encoders like.
pub fn fill_size(w: u32, h: u32, want_w: u32, want_h: u32) -> (u32, u32) {
    let derive = |have: u32, other_have: u32, other_want: u32| -> u32 {
        let v = (have as u64 * other_want as u64 + other_have as u64 / 2) / other_have as u64;
        ((v as u32 + 1) & !1).max(2)
    };
    match (want_w, want_h) {
        (0, 0) => (w, h),
        (0, hh) => (derive(w, h, hh), hh),
        (ww, 0) => (ww, derive(h, w, ww)),
        (ww, hh) => (ww, hh),
    }
}

/// Builds `ffmpegsrc`: probes the input and starts ffmpeg now.
pub fn build_src(props: &Props) -> Result<Element> {
    let location = props.str("location");
    if location.is_empty() {
        return Err(Error::element(
            SRC,
            IoError::Missing {
                prop: "location",
                why: "the clip or URL ffmpeg reads",
            },
        ));
    }
    let mut src = FfmpegSrc::open(
        location,
        props.str("format"),
        props.str("args"),
        props.i64("width") as u32,
        props.i64("height") as u32,
        props.i64("frames").max(0) as u64,
    )
    .map_err(|e| Error::element(SRC, e))?;
    src.set_strict(props.bool("strict"));
    Ok(Element::Source(Box::new(src)))
}

/// The `ffmpegsrc` source.
#[derive(Debug)]
pub struct FfmpegSrc {
    location: String,
    info: VideoInfo,
    frames: u64,
    /// Frames a whole clip delivers, and where that figure comes from (None: unknown, e.g. a
    /// live URL, or `args` that cut the clip).
    expected: Option<(u64, &'static str)>,
    delivered: u64,
    strict: bool,
    /// Every stderr line is an error (unless `args` changed the log level).
    lines_are_errors: bool,
    /// ffmpeg's arguments, kept to start it again at a rewind.
    argv: Vec<String>,
    origin: LoopOrigin,
    child: Child,
    stdout: BufReader<ChildStdout>,
    stderr: StderrTail,
    done: bool,
}

/// Starts `ffmpeg ARGV`, its frames read from stdout and its stderr collected.
fn spawn_decoder(
    argv: &[String],
) -> std::result::Result<(Child, BufReader<ChildStdout>, StderrTail), IoError> {
    let mut child = Command::new(FFMPEG)
        .args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| IoError::Spawn {
            program: FFMPEG.into(),
            source,
        })?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(IoError::Spawn {
            program: FFMPEG.into(),
            source: std::io::Error::other("no pipes to the child"),
        });
    };
    Ok((
        child,
        BufReader::with_capacity(BUF_BYTES, stdout),
        StderrTail::start(stderr),
    ))
}

/// ffmpeg options (in `args`) after which the clip's frame count no longer says how many frames
/// ffmpeg delivers, so that fewer is not a sign of damage.
const CUTTING_ARGS: [&str; 10] = [
    "-ss",
    "-sseof",
    "-t",
    "-to",
    "-frames",
    "-frames:v",
    "-vframes",
    "-r",
    "-stream_loop",
    "-itsoffset",
];

impl FfmpegSrc {
    /// Probes `location` and starts ffmpeg decoding it to RGBA (scaled to `width` x `height`
    /// where given, see [`fill_size`]; at most `frames` frames unless 0). `format` (`-f`) and
    /// `args` (split at spaces) go before `-i` when not empty.
    pub fn open(
        location: &str,
        format: &str,
        args: &str,
        width: u32,
        height: u32,
        frames: u64,
    ) -> std::result::Result<Self, IoError> {
        if location == "-" {
            return Err(IoError::Probe {
                location: location.into(),
                reason: "ffmpegsrc cannot read standard input (ffprobe would consume what ffmpeg \
                         must decode); pipe into y4msrc location=- or rawsrc location=- instead"
                    .into(),
            });
        }
        let p = probe(location, format)?;
        let (w, h) = fill_size(p.width, p.height, width, height);
        let (w, h) = check_size(w as u64, h as u64)?;
        let mut argv: Vec<String> = ["-nostdin", "-v", "error"].map(String::from).into();
        argv.extend(args.split_whitespace().map(String::from));
        if !format.is_empty() {
            argv.extend(["-f".into(), format.into()]);
        }
        argv.extend(["-i".into(), input_arg(location, format)]);
        if (w, h) != (p.width, p.height) {
            argv.extend(["-vf".into(), format!("scale={w}:{h}")]);
        }
        if frames > 0 {
            argv.extend(["-frames:v".into(), frames.to_string()]);
        }
        argv.extend(["-an", "-f", "rawvideo", "-pix_fmt", "rgba", "-"].map(String::from));
        let (child, stdout, stderr) = spawn_decoder(&argv)?;
        let cut = args
            .split_whitespace()
            .any(|a| CUTTING_ARGS.contains(&a) || a.starts_with("-frames"));
        let expected = p
            .expected_frames()
            .filter(|_| !cut)
            .map(|(n, how)| match frames {
                0 => (n, how),
                f => (n.min(f), how),
            });
        Ok(FfmpegSrc {
            location: location.into(),
            info: VideoInfo {
                width: w,
                height: h,
                rate: p.rate,
            },
            frames,
            expected,
            delivered: 0,
            strict: false,
            lines_are_errors: !args
                .split_whitespace()
                .any(|a| a == "-v" || a == "-loglevel"),
            argv,
            origin: LoopOrigin::default(),
            child,
            stdout,
            stderr,
            done: false,
        })
    }

    /// With `strict`, a damaged clip ends the stream with an error instead of a warning.
    pub fn set_strict(&mut self, strict: bool) {
        self.strict = strict;
    }

    fn next(&mut self, seq: u64, out: &mut [u8]) -> std::result::Result<bool, IoError> {
        if self.done || (self.frames > 0 && seq >= self.frames) {
            return Ok(false);
        }
        let read = read_frame(&mut self.stdout, out, &self.location, seq);
        if let Ok(FrameRead::Full) = read {
            self.delivered += 1;
            return Ok(true);
        }
        // The pipe ended (or broke): what ffmpeg says decides whether that was the clip's end.
        self.done = true;
        let status = self.child.wait().ok();
        if !status.is_some_and(|s| s.success()) {
            return Err(failure(FFMPEG, status, &mut self.stderr));
        }
        read?;
        match self.damage() {
            Some(what) if self.strict => Err(IoError::Damaged {
                location: self.location.clone(),
                what,
            }),
            Some(what) => {
                // End of stream, off the frame path: a warning, once.
                eprintln!(
                    "{SRC}: warning: '{}' is damaged: {what} (strict=true makes this an error)",
                    self.location
                );
                Ok(false)
            }
            None => Ok(false),
        }
    }

    /// At the end of a clip ffmpeg decoded with exit status 0: what says it was damaged (decode
    /// errors on stderr, fewer frames than announced), in one line, or `None`.
    fn damage(&mut self) -> Option<String> {
        let (errors, first) = self.stderr.errors();
        let first = first.filter(|_| self.lines_are_errors);
        let short = self
            .expected
            .filter(|&(n, how)| {
                // An estimate from the duration may round one frame off.
                let slack = u64::from(how != "announced by ffprobe");
                self.delivered + slack < n
            })
            .map(|(n, how)| format!("ffmpeg delivered {} of {n} frames ({how})", self.delivered));
        let said = first.map(|f| {
            format!(
                "ffmpeg reported {errors} error{}, the first: {f}",
                if errors == 1 { "" } else { "s" }
            )
        });
        match (short, said) {
            (None, None) => None,
            (Some(s), None) if self.lines_are_errors => {
                Some(format!("{s}; ffmpeg reported no error"))
            }
            (Some(s), None) => Some(s),
            (None, Some(e)) => Some(format!("all {} frames delivered, but {e}", self.delivered)),
            (Some(s), Some(e)) => Some(format!("{s}; {e}")),
        }
    }
}

impl Source for FfmpegSrc {
    fn info(&self) -> VideoInfo {
        self.info
    }

    /// `frames=` when given, else the clip's own count (ffprobe's, when `args` do not cut it).
    /// An estimate from the duration may be a frame off: too high only holds a frame more in
    /// flight; too low, the progress reaches its total a frame early.
    fn len_hint(&self) -> Option<u64> {
        match (self.frames, self.expected) {
            (0, e) => e.map(|(n, _)| n),
            (f, Some((n, _))) => Some(f.min(n)),
            (f, None) => Some(f),
        }
    }

    /// Reads another process's pipe: a live URL, a camera or a slow decoder can keep it
    /// waiting for any time.
    fn blocks(&self) -> bool {
        true
    }

    /// A clip file: waits for the decoder's first bytes (ffmpeg started, first frame
    /// decoded), so that the first frame does not wait for ffmpeg's start-up once the clock
    /// runs. A URL or device is live: its stream decides when frames come, nothing is awaited.
    fn ready(&mut self) -> Result<()> {
        let file = std::fs::metadata(&self.location).is_ok_and(|m| m.is_file());
        if file && !self.done {
            // An error or an empty pipe is the first `fill`'s to report, with ffmpeg's words.
            let _ = self.stdout.fill_buf();
        }
        Ok(())
    }

    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        let seq = self.origin.local(ctx).seq;
        self.next(seq, frame.data_mut())
            .map_err(|e| Error::element(SRC, e))
    }

    /// Starts ffmpeg again on the same input with the same arguments (the running one, if any,
    /// is killed and reaped). This costs a process start — and, unlike a file seek, allocates
    /// the pipes' buffers and the stderr collector — once per loop; it happens where the
    /// runtime calls the source, on a worker, not on the output thread.
    fn rewind(&mut self) -> Result<bool> {
        if !self.done {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let (child, stdout, stderr) =
            spawn_decoder(&self.argv).map_err(|e| Error::element(SRC, e))?;
        self.child = child;
        self.stdout = stdout;
        // The old collector's thread ends with its pipe; dropping it detaches the thread.
        self.stderr = stderr;
        self.delivered = 0;
        self.done = false;
        self.origin.rewind();
        Ok(true)
    }
}

impl Drop for FfmpegSrc {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The registry description of `ffmpegsink`.
pub fn sink_desc() -> ElementDesc {
    ElementDesc {
        name: SINK.into(),
        kind: ElementKind::Sink,
        description: "Encodes with the ffmpeg tool (e.g. location=out.mp4), through a pipe".into(),
        props: vec![
            str_spec("location", "", "output file or URL (required)")
                .path(PathUse::FileOrUrl { unless: None }),
            str_spec(
                "codec",
                "",
                "video codec (-c:v), e.g. libx264, ffv1; empty = ffmpeg's choice",
            ),
            str_spec(
                "pix-fmt",
                "yuv420p",
                "encoded pixel format (-pix_fmt); empty = ffmpeg's choice",
            ),
            str_spec(
                "args",
                "",
                "extra output options, split at spaces, e.g. \"-crf 18 -preset fast\"",
            ),
            PropSpec::new(
                "audio",
                PropKind::Bool,
                PropValue::Bool(false),
                "mux the show's audio (--audio) into the output, from the first frame on \
                 (docs/AUDIO.md); the output ends with the shorter of the two",
            )
            .fixed(),
            str_spec(
                "audio-location",
                "",
                "the audio file or URL to mux (audio=true: the show's --audio)",
            )
            .path(PathUse::FileOrUrl { unless: None }),
        ],
        default_mode: Mode::Serial,
        details: vec![("program".into(), "ffmpeg (on PATH)".into())],
    }
}

/// Builds `ffmpegsink` (ffmpeg starts when the stream's size is known).
pub fn build_sink(props: &Props) -> Result<Element> {
    let location = props.str("location");
    if location.is_empty() {
        return Err(Error::element(
            SINK,
            IoError::Missing {
                prop: "location",
                why: "the file ffmpeg writes",
            },
        ));
    }
    let audio = props.str("audio-location");
    if props.bool("audio") && audio.is_empty() {
        return Err(Error::element(
            SINK,
            IoError::Missing {
                prop: "audio-location",
                why: "the audio audio=true muxes: run the show with --audio SOURCE",
            },
        ));
    }
    let mut sink = FfmpegSink::new(
        location,
        props.str("codec"),
        props.str("pix-fmt"),
        props.str("args"),
    );
    if props.bool("audio") {
        sink.audio = Some(audio.to_string());
    }
    Ok(Element::Sink(Box::new(sink)))
}

/// The `ffmpegsink` sink.
#[derive(Debug)]
pub struct FfmpegSink {
    location: String,
    codec: String,
    pix_fmt: String,
    args: Vec<String>,
    /// Audio muxed into the output (a second input, its time 0 at the first frame).
    audio: Option<String>,
    running: Option<Running>,
}

/// How often the output thread looks for a free buffer while the encoder is a whole ring behind.
const FREE_POLL: std::time::Duration = std::time::Duration::from_micros(100);

/// A free buffer of the ring, waiting while the encoder is a whole ring behind (`Err`: the
/// writer thread ended). It polls (`try_recv`, then a [`FREE_POLL`] sleep) instead of blocking in
/// `recv`: std's channel allocates a thread's wait context the first time that thread blocks,
/// which would land on the output thread mid-run, the first time the encoder falls behind. The
/// wait is the encoder's back-pressure either way; 100 µs is a small part of a frame period.
fn take_free(free: &std::sync::mpsc::Receiver<Vec<u8>>) -> std::result::Result<Vec<u8>, ()> {
    loop {
        match free.try_recv() {
            Ok(buf) => return Ok(buf),
            Err(std::sync::mpsc::TryRecvError::Empty) => std::thread::sleep(FREE_POLL),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return Err(()),
        }
    }
}

/// A running encoder. Frames reach its pipe through a writer thread (`fp-ffmpeg-writer`) and a
/// ring of frame buffers allocated at start: `consume` copies the frame into a free buffer and
/// hands it over, and waits only when every buffer is still queued. So an encoder that is slow
/// for a moment (its own start-up: x264 initializes on the first frame, while the pipe holds
/// less than a frame; a lookahead burst) costs the output thread nothing until the ring is
/// full, and a lasting slowness still holds the show back (back-pressure, nothing dropped).
#[derive(Debug)]
struct Running {
    child: Child,
    /// Filled buffers to the writer thread; `None` once closed.
    filled: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    /// Buffers the writer thread is done with.
    free: std::sync::mpsc::Receiver<Vec<u8>>,
    /// Gives the pipe back (flushed or not) and the first write error, when it ends.
    writer: Option<JoinHandle<Option<std::io::Error>>>,
    stderr: StderrTail,
}

/// The writer thread: writes each filled buffer to ffmpeg's stdin, in order, and hands it
/// back; ends when the sink closes the ring or a write fails (the error is returned; the
/// sink then reports ffmpeg's own words). The pipe is flushed and closed as it ends.
fn write_frames(
    mut stdin: BufWriter<ChildStdin>,
    filled: std::sync::mpsc::Receiver<Vec<u8>>,
    free: std::sync::mpsc::SyncSender<Vec<u8>>,
) -> Option<std::io::Error> {
    use std::io::Write as _;
    for buf in filled {
        if let Err(e) = stdin.write_all(&buf) {
            return Some(e);
        }
        // The sink may be gone already (dropped): the buffer is then freed here.
        let _ = free.send(buf);
    }
    stdin.flush().err()
}

impl FfmpegSink {
    /// A sink encoding to `location`; `codec`, `pix_fmt` and `args` may be empty.
    pub fn new(location: &str, codec: &str, pix_fmt: &str, args: &str) -> Self {
        FfmpegSink {
            location: location.into(),
            codec: codec.into(),
            pix_fmt: pix_fmt.into(),
            args: args.split_whitespace().map(String::from).collect(),
            audio: None,
            running: None,
        }
    }

    /// The ffmpeg command line for `info` (without the program name).
    pub fn command_args(&self, info: VideoInfo) -> Vec<String> {
        let mut a: Vec<String> = [
            "-v",
            "error",
            "-y",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgba",
            "-s",
            &format!("{}x{}", info.width, info.height),
            "-r",
            &info.rate.to_string(),
            "-i",
            "-",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(audio) = &self.audio {
            // The audio's time 0 is the first frame's, as `--audio` analyses it.
            a.extend(["-i".into(), input_arg(audio, "")]);
            a.extend(["-map", "0:v", "-map", "1:a", "-shortest"].map(String::from));
        }
        if !self.codec.is_empty() {
            a.extend(["-c:v".into(), self.codec.clone()]);
        }
        if !self.pix_fmt.is_empty() {
            a.extend(["-pix_fmt".into(), self.pix_fmt.clone()]);
        }
        a.extend(self.args.iter().cloned());
        a.push(output_arg(&self.location));
        a
    }

    /// Closes ffmpeg's input (after the frames queued for it) and waits for it; an error when
    /// it failed.
    fn close(&mut self) -> std::result::Result<(), IoError> {
        let Some(mut r) = self.running.take() else {
            return Ok(());
        };
        drop(r.filled.take());
        let flushed = r.writer.take().and_then(|w| w.join().ok().flatten());
        let status = r.child.wait().ok();
        if !status.is_some_and(|s| s.success()) {
            return Err(failure(FFMPEG, status, &mut r.stderr));
        }
        match flushed {
            Some(source) => Err(IoError::Write {
                path: format!("ffmpeg's input for {}", self.location),
                source,
            }),
            None => Ok(()),
        }
    }
}

impl Sink for FfmpegSink {
    /// Writes into the encoder's pipe: as slow as the encoder (and its output) is.
    fn blocks(&self) -> bool {
        true
    }

    fn start(&mut self, info: VideoInfo) -> Result<()> {
        check_size(info.width as u64, info.height as u64).map_err(|e| Error::element(SINK, e))?;
        // `location=-`: ffmpeg writes to framepipe's own standard output.
        let stdout = if self.location == "-" {
            Stdio::inherit()
        } else {
            Stdio::null()
        };
        let mut child = Command::new(FFMPEG)
            .args(self.command_args(info))
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| {
                Error::element(
                    SINK,
                    IoError::Spawn {
                        program: FFMPEG.into(),
                        source,
                    },
                )
            })?;
        let stdin = child
            .stdin
            .take()
            .map(|s| BufWriter::with_capacity(BUF_BYTES, s));
        let frame_bytes = framepipe_core::limits::frame_bytes(info.width, info.height);
        let ahead = (AHEAD_BYTES / frame_bytes.max(1)).clamp(1, AHEAD_FRAMES) as usize;
        let (filled_tx, filled_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(ahead);
        let (free_tx, free_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(ahead);
        for _ in 0..ahead {
            let _ = free_tx.send(vec![0u8; frame_bytes as usize]);
        }
        let writer = match stdin {
            Some(stdin) => std::thread::Builder::new()
                .name("fp-ffmpeg-writer".into())
                .spawn(move || write_frames(stdin, filled_rx, free_tx))
                .map_err(|source| {
                    let _ = child.kill();
                    let _ = child.wait();
                    Error::element(
                        SINK,
                        IoError::Spawn {
                            program: "the ffmpegsink writer thread".into(),
                            source,
                        },
                    )
                })
                .map(Some)?,
            None => None,
        };
        let stderr = StderrTail::start(child.stderr.take().ok_or_else(|| {
            Error::element(
                SINK,
                IoError::Spawn {
                    program: FFMPEG.into(),
                    source: std::io::Error::other("no stderr pipe"),
                },
            )
        })?);
        self.running = Some(Running {
            child,
            filled: Some(filled_tx),
            free: free_rx,
            writer,
            stderr,
        });
        Ok(())
    }

    /// Waits until ffmpeg is loaded and reading its input (a thread of it blocked reading the
    /// pipe; see `reading_a_pipe`), at most `READY_WAIT`: starting the tool takes tens to
    /// hundreds of ms, which would otherwise fall on the first frames. An ffmpeg that quits
    /// meanwhile (a bad option) is an error here, with its own words, before any frame.
    fn ready(&mut self) -> Result<()> {
        let Some(r) = self.running.as_mut() else {
            return Ok(());
        };
        let pid = r.child.id();
        let until = std::time::Instant::now() + READY_WAIT;
        while std::time::Instant::now() < until {
            if let Ok(Some(status)) = r.child.try_wait() {
                let mut r = self.running.take().expect("running");
                return Err(Error::element(
                    SINK,
                    failure(FFMPEG, Some(status), &mut r.stderr),
                ));
            }
            match reading_a_pipe(pid) {
                // Reading, or /proc cannot tell: go ahead.
                Some(true) | None => return Ok(()),
                // Still loading (running: wchan `0`, or blocked elsewhere, e.g. on disk).
                Some(false) => std::thread::sleep(READY_POLL),
            }
        }
        Ok(())
    }

    /// Copies the frame into a free buffer of the ring and hands it to the writer thread;
    /// waits for a free buffer when the encoder is a whole ring behind.
    fn consume(&mut self, _ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        let handed = match self.running.as_mut() {
            None => Err(None),
            Some(r) => match (take_free(&r.free), r.filled.as_ref()) {
                (Ok(mut buf), Some(filled)) => {
                    let data = frame.data();
                    // Sized at start for this stream's frames: never resized in a run.
                    buf.resize(data.len(), 0);
                    buf.copy_from_slice(data);
                    filled.send(buf).map_err(|_| Some(()))
                }
                // The writer thread ended: a write failed.
                _ => Err(Some(())),
            },
        };
        match handed {
            Ok(()) => Ok(()),
            Err(None) => Err(Error::element(
                SINK,
                IoError::Write {
                    path: self.location.clone(),
                    source: std::io::Error::other("ffmpeg is not running"),
                },
            )),
            // Most likely ffmpeg quit (bad option, full disk...): its own words say why.
            Err(Some(())) => {
                let e = match self.close() {
                    Err(e) => e,
                    Ok(()) => IoError::Write {
                        path: format!("ffmpeg's input for {}", self.location),
                        source: std::io::Error::other("the writer thread ended"),
                    },
                };
                Err(Error::element(SINK, e))
            }
        }
    }

    fn finish(&mut self) -> Result<()> {
        self.close().map_err(|e| Error::element(SINK, e))
    }
}

impl Drop for FfmpegSink {
    fn drop(&mut self) {
        if let Some(mut r) = self.running.take() {
            drop(r.filled.take());
            if let Some(w) = r.writer.take() {
                let _ = w.join();
            }
            let _ = r.child.wait();
        }
    }
}
