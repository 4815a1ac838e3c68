//! `rawsrc`, `rawsink` and `nullsink`: headerless packed frames (`rgba`, `bgra`, `rgb24`) from
//! and to files or stdin/stdout, and a sink that drops everything.

use std::fs::File;
use std::io::BufReader;

use framepipe_core::{
    Element, ElementDesc, ElementKind, Error, Frame, FrameCtx, FrameMut, Limits, Mode, PathUse,
    PropKind, PropSpec, PropValue, Props, Result, Sink, Source, VideoInfo,
};

use crate::error::IoError;
use crate::pixfmt::RawFormat;
use crate::stream::{
    check_size, create_output, display_name, flush, flush_each_frame, open_input, rate_prop,
    read_frame, rewind_point, seek_back, with_kept, write_all, FrameRead, LoopOrigin, Output,
    MAX_DIM,
};

/// Name of the raw source.
pub const SRC: &str = "rawsrc";
/// Name of the raw sink.
pub const SINK: &str = "rawsink";
/// Name of the null sink.
pub const NULL: &str = "nullsink";

fn format_spec() -> PropSpec {
    PropSpec::new(
        "format",
        PropKind::Enum(RawFormat::NAMES.iter().map(|s| s.to_string()).collect()),
        PropValue::Str("rgba".into()),
        "packed pixel format: rgba, bgra or rgb24",
    )
}

fn location_spec(what: &str) -> PropSpec {
    PropSpec::new(
        "location",
        PropKind::Str,
        PropValue::Str(String::new()),
        what,
    )
    .path(PathUse::File)
}

fn format_prop(element: &str, props: &Props) -> Result<RawFormat> {
    RawFormat::parse(props.str("format")).ok_or_else(|| Error::BadValue {
        element: element.into(),
        prop: "format".into(),
        value: props.str("format").into(),
        reason: "expected rgba, bgra or rgb24".into(),
    })
}

fn required_location<'p>(element: &str, props: &'p Props, why: &'static str) -> Result<&'p str> {
    let loc = props.str("location");
    if loc.is_empty() {
        return Err(Error::element(
            element,
            IoError::Missing {
                prop: "location",
                why,
            },
        ));
    }
    Ok(loc)
}

/// The registry description of `rawsrc`.
pub fn src_desc() -> ElementDesc {
    let dim = PropKind::Int {
        min: 0,
        max: MAX_DIM as i64,
    };
    ElementDesc {
        name: SRC.into(),
        kind: ElementKind::Source,
        description: "Reads headerless rgba/bgra/rgb24 frames from a file or stdin".into(),
        props: vec![
            location_spec("file to read, or - for stdin"),
            format_spec(),
            PropSpec::new(
                "width",
                dim.clone(),
                PropValue::Int(0),
                "frame width (required)",
            ),
            PropSpec::new("height", dim, PropValue::Int(0), "frame height (required)"),
            PropSpec::new(
                "rate",
                PropKind::Str,
                PropValue::Str("30".into()),
                "frame rate: 30, 25/1, 30000/1001",
            ),
            PropSpec::new(
                "frames",
                PropKind::Int {
                    min: 0,
                    max: i64::MAX,
                },
                PropValue::Int(0),
                "stop after this many frames; 0 = until the input ends",
            ),
        ],
        default_mode: Mode::Serial,
        details: vec![],
    }
}

/// Builds `rawsrc`: opens the input now, so that a missing file is reported before running.
pub fn build_src(props: &Props) -> Result<Element> {
    let location = required_location(SRC, props, "the file to read, or - for stdin")?;
    let format = format_prop(SRC, props)?;
    let (w, h) = (props.i64("width") as u64, props.i64("height") as u64);
    if w == 0 || h == 0 {
        return Err(Error::element(
            SRC,
            IoError::Missing {
                prop: if w == 0 { "width" } else { "height" },
                why: "raw frames carry no size",
            },
        ));
    }
    let (width, height) = check_size(w, h).map_err(|e| Error::element(SRC, e))?;
    let path = display_name(location, "stdin");
    // Nothing frame-sized is allocated before the size is checked against the memory budget
    // and, for a regular file, against what the file holds.
    Limits::current().check_frame(&format!("{SRC}: {path}"), width, height)?;
    let rate = rate_prop(SRC, props)?;
    let mut input = open_input(location).map_err(|e| Error::element(SRC, e))?;
    let frame_bytes = format.frame_bytes(width, height);
    let file_len = input
        .get_ref()
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    if let Some(len) = file_len.filter(|&l| l > 0 && l < frame_bytes as u64) {
        return Err(Error::element(
            SRC,
            IoError::ShortFile {
                path,
                claim: format!(
                    "width={width} height={height} format={}",
                    props.str("format")
                ),
                frame_bytes: frame_bytes as u64,
                file_bytes: len,
            },
        ));
    }
    let file_frames = file_len.map(|l| l / frame_bytes as u64);
    let frames = props.i64("frames").max(0) as u64;
    let start = rewind_point(&mut input);
    Ok(Element::Source(Box::new(RawSrc {
        path,
        start,
        origin: LoopOrigin::default(),
        info: VideoInfo {
            width,
            height,
            rate,
        },
        format,
        input,
        scratch: if format == RawFormat::Rgba {
            Vec::new()
        } else {
            vec![0; frame_bytes]
        },
        frames,
        len_hint: match (frames, file_frames) {
            (0, f) => f,
            (n, Some(f)) => Some(n.min(f)),
            (n, None) => Some(n),
        },
    })))
}

/// The `rawsrc` source.
#[derive(Debug)]
pub struct RawSrc {
    path: String,
    /// Where a rewind seeks to: the file's position at open (`None`: a pipe, which cannot).
    start: Option<u64>,
    origin: LoopOrigin,
    info: VideoInfo,
    format: RawFormat,
    input: BufReader<File>,
    scratch: Vec<u8>,
    frames: u64,
    len_hint: Option<u64>,
}

impl Source for RawSrc {
    fn info(&self) -> VideoInfo {
        self.info
    }

    fn len_hint(&self) -> Option<u64> {
        self.len_hint
    }

    /// A pipe or stdin waits on its writer; a regular file does not.
    fn blocks(&self) -> bool {
        self.start.is_none()
    }

    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        let seq = self.origin.local(ctx).seq;
        if self.frames > 0 && seq >= self.frames {
            return Ok(false);
        }
        let buf: &mut [u8] = if self.format == RawFormat::Rgba {
            frame.data_mut()
        } else {
            &mut self.scratch
        };
        match read_frame(&mut self.input, buf, &self.path, seq) {
            Ok(FrameRead::Full) => {}
            Ok(FrameRead::End) => return Ok(false),
            Err(e) => return Err(Error::element(SRC, e)),
        }
        if self.format != RawFormat::Rgba {
            self.format.to_rgba(&self.scratch, frame.data_mut());
        }
        Ok(true)
    }

    /// A regular file seeks back to where it was opened (one `lseek`, no allocation); a pipe
    /// or stdin that is not a file cannot rewind.
    fn rewind(&mut self) -> Result<bool> {
        let Some(start) = self.start else {
            return Ok(false);
        };
        seek_back(&mut self.input, start, &self.path).map_err(|e| Error::element(SRC, e))?;
        self.origin.rewind();
        Ok(true)
    }
}

/// The registry description of `rawsink`.
pub fn sink_desc() -> ElementDesc {
    ElementDesc {
        name: SINK.into(),
        kind: ElementKind::Sink,
        description: "Writes headerless rgba/bgra/rgb24 frames to a file or stdout".into(),
        props: vec![
            location_spec("file to write, or - for stdout"),
            format_spec(),
        ],
        default_mode: Mode::Serial,
        details: vec![],
    }
}

/// Builds `rawsink`: creates the output now, so that a bad path is reported before running.
pub fn build_sink(props: &Props) -> Result<Element> {
    let location = required_location(SINK, props, "the file to write, or - for stdout")?;
    let format = format_prop(SINK, props)?;
    let output = create_output(location).map_err(|e| Error::element(SINK, e))?;
    Ok(Element::Sink(Box::new(RawSink {
        path: display_name(location, "stdout"),
        format,
        flush_each: flush_each_frame(&output),
        output,
        scratch: Vec::new(),
        frame_bytes: 0,
    })))
}

/// The `rawsink` sink.
#[derive(Debug)]
pub struct RawSink {
    path: String,
    format: RawFormat,
    output: Output,
    /// Flush after each frame (the output is a pipe, socket or terminal).
    flush_each: bool,
    scratch: Vec<u8>,
    /// Bytes of one frame as written.
    frame_bytes: u64,
}

impl RawSink {
    /// A write error as the sink reports it: with the whole frames the output holds.
    fn lost(&self, e: IoError) -> Error {
        Error::element(SINK, with_kept(e, &self.output, 0, self.frame_bytes))
    }
}

impl Sink for RawSink {
    /// A pipe, socket or terminal waits for its reader; a regular file does not.
    fn blocks(&self) -> bool {
        self.flush_each
    }

    fn start(&mut self, info: VideoInfo) -> Result<()> {
        check_size(info.width as u64, info.height as u64).map_err(|e| Error::element(SINK, e))?;
        let bytes = self.format.frame_bytes(info.width, info.height);
        self.frame_bytes = bytes as u64;
        if self.format != RawFormat::Rgba {
            self.scratch = vec![0; bytes];
        }
        Ok(())
    }

    fn consume(&mut self, _ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        let data = if self.format == RawFormat::Rgba {
            frame.data()
        } else {
            self.format.from_rgba(frame.data(), &mut self.scratch);
            &self.scratch
        };
        if let Err(e) = write_all(&mut self.output, data, &self.path) {
            return Err(self.lost(e));
        }
        // On a pipe each frame leaves when it is released: a reader (a player, the pacing
        // meter, another framepipe) must see it at its deadline, not when a buffer fills.
        if self.flush_each {
            flush(&mut self.output, &self.path).map_err(|e| self.lost(e))?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        flush(&mut self.output, &self.path).map_err(|e| self.lost(e))
    }
}

/// The registry description of `nullsink`.
pub fn null_desc() -> ElementDesc {
    ElementDesc {
        name: NULL.into(),
        kind: ElementKind::Sink,
        description: "Drops every frame (for measuring)".into(),
        props: vec![],
        default_mode: Mode::Serial,
        details: vec![],
    }
}

/// Builds `nullsink`.
pub fn build_null(_props: &Props) -> Result<Element> {
    Ok(Element::Sink(Box::new(NullSink::default())))
}

/// The `nullsink` sink: counts frames and drops them.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink {
    /// Frames taken so far.
    pub frames: u64,
}

impl Sink for NullSink {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, _ctx: &FrameCtx, _frame: &Frame) -> Result<()> {
        self.frames += 1;
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
