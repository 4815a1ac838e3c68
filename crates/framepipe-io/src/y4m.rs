//! `y4msrc` and `y4msink`: YUV4MPEG2 streams, 8-bit 4:2:0 and 4:4:4.
//!
//! Colour: BT.601 matrix, limited ("TV", 16-235) range unless the stream is tagged
//! `XCOLORRANGE=FULL`. That is what ffmpeg assumes for untagged y4m and what it writes for
//! `yuv420p`, so framepipe's and ffmpeg's y4m files read the same in both tools. The sink writes
//! `C420jpeg` (or `C444`) with an explicit `XCOLORRANGE=LIMITED` tag. 4:2:0 chroma is upsampled
//! by repetition (each chroma sample covers its 2x2 block) whatever the siting tag says; the
//! sink averages each 2x2 block. Conversion uses the `yuv` crate (SIMD).
//!
//! Other chroma formats (4:2:2, mono, 4:4:4 with alpha, more than 8 bits) are rejected with an
//! error naming the tag. Interlaced streams are read as progressive frames.

use std::fs::File;
use std::io::{BufRead, BufReader};

use framepipe_core::{
    Element, ElementDesc, ElementKind, Error, Frame, FrameCtx, FrameMut, Limits, Mode, PathUse,
    PropKind, PropSpec, PropValue, Props, Rational, Result, Sink, Source, VideoInfo,
};
use yuv::{
    BufferStoreMut, YuvConversionMode, YuvPlanarImage, YuvPlanarImageMut, YuvRange,
    YuvStandardMatrix,
};

use crate::error::IoError;
use crate::stream::{
    check_size, create_output, display_name, flush, flush_each_frame, open_input, read_frame,
    rewind_point, seek_back, with_kept, write_all, FrameRead, LoopOrigin, Output,
};

/// Name of the source.
pub const SRC: &str = "y4msrc";
/// Name of the sink.
pub const SINK: &str = "y4msink";
/// Longest stream header accepted.
pub const MAX_HEADER: usize = 4096;
/// Longest frame header accepted.
pub const MAX_FRAME_HEADER: usize = 256;
/// The shortest frame header: what every frame's data is preceded by.
const FRAME_MAGIC: &[u8] = b"FRAME\n";

/// Chroma subsampling of a y4m stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chroma {
    /// 4:2:0 (any siting: `420jpeg`, `420mpeg2`, `420paldv`, `420`).
    C420,
    /// 4:4:4.
    C444,
}

impl Chroma {
    /// Width and height of a chroma plane for a `w` x `h` picture.
    pub fn plane_size(self, w: u32, h: u32) -> (u32, u32) {
        match self {
            Chroma::C420 => (w.div_ceil(2), h.div_ceil(2)),
            Chroma::C444 => (w, h),
        }
    }

    /// Bytes of one frame's three planes.
    pub fn frame_bytes(self, w: u32, h: u32) -> usize {
        let (cw, ch) = self.plane_size(w, h);
        w as usize * h as usize + 2 * cw as usize * ch as usize
    }
}

/// A parsed YUV4MPEG2 stream header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Y4mHeader {
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
    /// Frame rate.
    pub rate: Rational,
    /// Chroma subsampling.
    pub chroma: Chroma,
    /// True when tagged `XCOLORRANGE=FULL`.
    pub full_range: bool,
}

/// An unsupported C tag for a message: named when it is one of the formats YUV4MPEG2 writers
/// use (a word of this list, not the input's bytes), else only its length.
fn unsupported_chroma(tag: &str) -> String {
    const KNOWN: [&str; 16] = [
        "C422",
        "C411",
        "C440",
        "Cmono",
        "C444alpha",
        "C420p9",
        "C420p10",
        "C420p12",
        "C420p14",
        "C420p16",
        "C422p10",
        "C422p12",
        "C444p10",
        "C444p12",
        "Cmono16",
        "C422p16",
    ];
    match KNOWN.iter().find(|k| **k == tag) {
        Some(k) => (*k).to_string(),
        None => format!("(a C tag of {} bytes)", tag.len()),
    }
}

impl Y4mHeader {
    /// Parses the header line (without its newline). `path` names the input in errors.
    pub fn parse(line: &[u8], path: &str) -> std::result::Result<Self, IoError> {
        let bad = |reason: String| IoError::BadHeader {
            path: path.into(),
            reason,
        };
        // Errors describe the header, never quote it (issue #21): the input may be any file.
        if !line.starts_with(b"YUV4MPEG2 ") && line != b"YUV4MPEG2" {
            return Err(bad(format!(
                "not a YUV4MPEG2 stream (its first bytes are not 'YUV4MPEG2 '; the first line \
                 has {} bytes)",
                line.len()
            )));
        }
        let line = std::str::from_utf8(line).map_err(|_| bad("not ASCII text".into()))?;
        let tokens = line.split(' ').filter(|t| !t.is_empty()).skip(1);
        let (mut w, mut h, mut rate) = (None, None, None);
        let mut chroma = Chroma::C420;
        let mut full_range = false;
        for (k, t) in tokens.enumerate() {
            // The tag is the first character, which need not be one byte (a panic once).
            let (tag, val) = t.split_at(t.chars().next().map_or(0, char::len_utf8));
            let num = |what: &str, v: &str| -> std::result::Result<u64, IoError> {
                v.parse::<u64>()
                    .map_err(|_| bad(format!("the {what} ({tag}) is not a whole number")))
            };
            match tag {
                "W" => w = Some(num("width", val)?),
                "H" => h = Some(num("height", val)?),
                "F" => {
                    let (n, d) = val
                        .split_once(':')
                        .ok_or_else(|| bad("the frame rate (F) is not F<num>:<den>".into()))?;
                    let (n, d) = (num("frame rate", n)?, num("frame rate", d)?);
                    if n > u32::MAX as u64
                        || d > u32::MAX as u64
                        || !Rational::new(n as u32, d as u32).is_usable()
                    {
                        return Err(bad(format!(
                            "the frame rate F{n}:{d} is out of range (positive, at least one \
                             frame a day)"
                        )));
                    }
                    rate = Some(Rational::new(n as u32, d as u32));
                }
                "C" => {
                    chroma = match val {
                        "420jpeg" | "420mpeg2" | "420paldv" | "420" => Chroma::C420,
                        "444" => Chroma::C444,
                        _ => {
                            return Err(IoError::Unsupported {
                                path: path.into(),
                                what: format!(
                                    "chroma format {} (supported: C420jpeg, C420mpeg2, \
                                     C420paldv, C420, C444; 8 bits)",
                                    unsupported_chroma(t)
                                ),
                            })
                        }
                    }
                }
                "X" => {
                    if let Some(r) = val.strip_prefix("COLORRANGE=") {
                        full_range =
                            match r {
                                "FULL" => true,
                                "LIMITED" => false,
                                _ => return Err(bad(
                                    "the colour range (XCOLORRANGE=) is neither FULL nor LIMITED"
                                        .into(),
                                )),
                            };
                    }
                }
                "I" | "A" => {}
                _ => {
                    return Err(bad(format!(
                        "unknown tag (tag {} after YUV4MPEG2; tags start with W, H, F, I, A, \
                         C or X)",
                        k + 1
                    )))
                }
            }
        }
        let width = w.ok_or_else(|| bad("no width (W) tag".into()))?;
        let height = h.ok_or_else(|| bad("no height (H) tag".into()))?;
        let rate = rate.ok_or_else(|| bad("no frame rate (F) tag".into()))?;
        let (width, height) = check_size(width, height)?;
        Ok(Y4mHeader {
            width,
            height,
            rate,
            chroma,
            full_range,
        })
    }
}

/// Reads one line of at most `max` bytes into `line` (without the newline; `line` must have
/// capacity `max` so that nothing is allocated). Returns `Ok(None)` at a clean end of input and
/// `Ok(Some(false))` when the input ended or `max` was reached before the newline.
fn read_line<R: BufRead>(
    r: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<bool>> {
    line.clear();
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(if line.is_empty() { None } else { Some(false) });
        }
        let room = max - line.len();
        let take = buf.len().min(room);
        if let Some(nl) = buf[..take].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&buf[..nl]);
            r.consume(nl + 1);
            return Ok(Some(true));
        }
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if line.len() >= max {
            return Ok(Some(false));
        }
    }
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

fn range(full: bool) -> YuvRange {
    if full {
        YuvRange::Full
    } else {
        YuvRange::Limited
    }
}

/// The registry description of `y4msrc`.
pub fn src_desc() -> ElementDesc {
    ElementDesc {
        name: SRC.into(),
        kind: ElementKind::Source,
        description: "Reads YUV4MPEG2 (8-bit 4:2:0 or 4:4:4) from a file or stdin".into(),
        props: vec![
            location_spec("file to read, or - for stdin"),
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
        details: vec![(
            "colour".into(),
            "BT.601, limited range unless XCOLORRANGE=FULL".into(),
        )],
    }
}

/// Builds `y4msrc`: opens the input and reads its header now.
pub fn build_src(props: &Props) -> Result<Element> {
    let location = required_location(SRC, props, "the file to read, or - for stdin")?;
    let src = Y4mSrc::open(location, props.i64("frames").max(0) as u64)
        .map_err(|e| Error::element(SRC, e))?;
    Ok(Element::Source(Box::new(src)))
}

/// The `y4msrc` source.
#[derive(Debug)]
pub struct Y4mSrc {
    path: String,
    /// Where a rewind seeks to: the first frame header of a regular file (`None`: a pipe).
    start: Option<u64>,
    origin: LoopOrigin,
    header: Y4mHeader,
    input: BufReader<File>,
    line: Vec<u8>,
    planes: Vec<u8>,
    frames: u64,
}

impl Y4mSrc {
    /// Opens `location` (`-` for stdin), reads its header and allocates the frame buffer.
    pub fn open(location: &str, frames: u64) -> std::result::Result<Self, IoError> {
        let path = display_name(location, "stdin");
        let mut input = open_input(location)?;
        let mut line = Vec::with_capacity(MAX_HEADER);
        let read_err = |source| IoError::Read {
            path: path.clone(),
            source,
        };
        let bad = |reason: &str| IoError::BadHeader {
            path: path.clone(),
            reason: reason.into(),
        };
        match read_line(&mut input, &mut line, MAX_HEADER).map_err(read_err)? {
            None => return Err(bad("the input is empty")),
            Some(false) if line.len() >= MAX_HEADER => {
                return Err(bad(&format!(
                    "no end of line in the first {MAX_HEADER} bytes"
                )))
            }
            Some(false) => return Err(bad("the input ends inside the header")),
            Some(true) => {}
        }
        let header = Y4mHeader::parse(&line, &path)?;
        // Nothing frame-sized is allocated before the size is checked: against what a regular
        // file can hold, then against the memory budget.
        let frame_bytes = header.chroma.frame_bytes(header.width, header.height) as u64;
        let after_header = input
            .get_ref()
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len().saturating_sub(line.len() as u64 + 1));
        if let Some(rest) =
            after_header.filter(|&r| r > 0 && r < FRAME_MAGIC.len() as u64 + frame_bytes)
        {
            return Err(IoError::ShortFile {
                path,
                claim: format!("header says {}x{}", header.width, header.height),
                frame_bytes: FRAME_MAGIC.len() as u64 + frame_bytes,
                file_bytes: rest,
            });
        }
        Limits::current()
            .check_frame(&format!("{path}: header"), header.width, header.height)
            .map_err(IoError::Limit)?;
        line = Vec::with_capacity(MAX_FRAME_HEADER);
        Ok(Y4mSrc {
            start: rewind_point(&mut input),
            origin: LoopOrigin::default(),
            planes: vec![0; header.chroma.frame_bytes(header.width, header.height)],
            path,
            header,
            input,
            line,
            frames,
        })
    }

    /// The stream's header.
    pub fn header(&self) -> &Y4mHeader {
        &self.header
    }

    fn next_frame(&mut self, seq: u64, out: &mut [u8]) -> std::result::Result<bool, IoError> {
        let read =
            read_line(&mut self.input, &mut self.line, MAX_FRAME_HEADER).map_err(|source| {
                IoError::Read {
                    path: self.path.clone(),
                    source,
                }
            })?;
        match read {
            None => return Ok(false),
            // `FRAME`, or `FRAME` and frame parameters after a space; not `FRAMEXYZ`.
            Some(true) if self.line == b"FRAME" || self.line.starts_with(b"FRAME ") => {}
            Some(false)
                if self.line.len() < MAX_FRAME_HEADER && b"FRAME".starts_with(&self.line) =>
            {
                return Err(IoError::Truncated {
                    path: self.path.clone(),
                    frame: seq,
                    got: 0,
                    want: self.planes.len(),
                })
            }
            _ => {
                return Err(IoError::BadHeader {
                    path: self.path.clone(),
                    reason: format!(
                        "frame {seq} does not start with a 'FRAME' line (its line has {}{} \
                         bytes)",
                        if self.line.len() >= MAX_FRAME_HEADER {
                            "at least "
                        } else {
                            ""
                        },
                        self.line.len()
                    ),
                });
            }
        }
        if read_frame(&mut self.input, &mut self.planes, &self.path, seq)? == FrameRead::End {
            return Err(IoError::Truncated {
                path: self.path.clone(),
                frame: seq,
                got: 0,
                want: self.planes.len(),
            });
        }
        let h = self.header;
        let (cw, ch) = h.chroma.plane_size(h.width, h.height);
        let y_len = h.width as usize * h.height as usize;
        let c_len = cw as usize * ch as usize;
        let (y, uv) = self.planes.split_at(y_len);
        let (u, v) = uv.split_at(c_len);
        let image = YuvPlanarImage {
            y_plane: y,
            y_stride: h.width,
            u_plane: u,
            u_stride: cw,
            v_plane: v,
            v_stride: cw,
            width: h.width,
            height: h.height,
        };
        let convert = match h.chroma {
            Chroma::C420 => yuv::yuv420_to_rgba,
            Chroma::C444 => yuv::yuv444_to_rgba,
        };
        convert(
            &image,
            out,
            h.width * 4,
            range(h.full_range),
            YuvStandardMatrix::Bt601,
        )
        .map_err(|e| IoError::Convert {
            width: h.width,
            height: h.height,
            reason: e.to_string(),
        })?;
        Ok(true)
    }
}

impl Source for Y4mSrc {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: self.header.width,
            height: self.header.height,
            rate: self.header.rate,
        }
    }

    fn len_hint(&self) -> Option<u64> {
        let per_frame = self.planes.len() as u64 + 6;
        let from_file = self
            .input
            .get_ref()
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len() / per_frame);
        match (self.frames, from_file) {
            (0, f) => f,
            (n, Some(f)) => Some(n.min(f)),
            (n, None) => Some(n),
        }
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
        self.next_frame(seq, frame.data_mut())
            .map_err(|e| Error::element(SRC, e))
    }

    /// A regular file seeks back to its first frame header (one `lseek`, no allocation); a
    /// pipe or stdin that is not a file cannot rewind.
    fn rewind(&mut self) -> Result<bool> {
        let Some(start) = self.start else {
            return Ok(false);
        };
        seek_back(&mut self.input, start, &self.path).map_err(|e| Error::element(SRC, e))?;
        self.origin.rewind();
        Ok(true)
    }
}

/// The registry description of `y4msink`.
pub fn sink_desc() -> ElementDesc {
    ElementDesc {
        name: SINK.into(),
        kind: ElementKind::Sink,
        description: "Writes YUV4MPEG2 (8-bit 4:2:0 or 4:4:4, BT.601 limited range)".into(),
        props: vec![
            location_spec("file to write, or - for stdout"),
            PropSpec::new(
                "chroma",
                PropKind::Enum(vec!["420".into(), "444".into()]),
                PropValue::Str("420".into()),
                "chroma subsampling: 420 (written as C420jpeg) or 444",
            ),
        ],
        default_mode: Mode::Serial,
        details: vec![("colour".into(), "BT.601, limited range".into())],
    }
}

/// Builds `y4msink`: creates the output now.
pub fn build_sink(props: &Props) -> Result<Element> {
    let location = required_location(SINK, props, "the file to write, or - for stdout")?;
    let chroma = if props.str("chroma") == "444" {
        Chroma::C444
    } else {
        Chroma::C420
    };
    let output = create_output(location).map_err(|e| Error::element(SINK, e))?;
    Ok(Element::Sink(Box::new(Y4mSink {
        path: display_name(location, "stdout"),
        chroma,
        flush_each: flush_each_frame(&output),
        output,
        info: None,
        planes: Vec::new(),
        header: 0,
    })))
}

/// The `y4msink` sink.
#[derive(Debug)]
pub struct Y4mSink {
    path: String,
    chroma: Chroma,
    output: Output,
    /// Flush after each frame (the output is a pipe, socket or terminal).
    flush_each: bool,
    info: Option<VideoInfo>,
    planes: Vec<u8>,
    /// Bytes of the stream header.
    header: u64,
}

impl Y4mSink {
    /// A write error as the sink reports it: with the whole frames the output holds.
    fn lost(&self, e: IoError) -> Error {
        let frame = (FRAME_MAGIC.len() + self.planes.len()) as u64;
        Error::element(SINK, with_kept(e, &self.output, self.header, frame))
    }

    fn write_frame(&mut self, rgba: &[u8]) -> std::result::Result<(), IoError> {
        let Some(info) = self.info else {
            return Err(IoError::Write {
                path: self.path.clone(),
                source: std::io::Error::other("frame before start"),
            });
        };
        let (w, h) = (info.width, info.height);
        let (cw, ch) = self.chroma.plane_size(w, h);
        let y_len = w as usize * h as usize;
        let c_len = cw as usize * ch as usize;
        let (y, uv) = self.planes.split_at_mut(y_len);
        let (u, v) = uv.split_at_mut(c_len);
        let mut image = YuvPlanarImageMut {
            y_plane: BufferStoreMut::Borrowed(y),
            y_stride: w,
            u_plane: BufferStoreMut::Borrowed(u),
            u_stride: cw,
            v_plane: BufferStoreMut::Borrowed(v),
            v_stride: cw,
            width: w,
            height: h,
        };
        let convert = match self.chroma {
            Chroma::C420 => yuv::rgba_to_yuv420,
            Chroma::C444 => yuv::rgba_to_yuv444,
        };
        convert(
            &mut image,
            rgba,
            w * 4,
            YuvRange::Limited,
            YuvStandardMatrix::Bt601,
            YuvConversionMode::Balanced,
        )
        .map_err(|e| IoError::Convert {
            width: w,
            height: h,
            reason: e.to_string(),
        })?;
        write_all(&mut self.output, FRAME_MAGIC, &self.path)?;
        write_all(&mut self.output, &self.planes, &self.path)
    }
}

impl Sink for Y4mSink {
    /// A pipe, socket or terminal waits for its reader; a regular file does not.
    fn blocks(&self) -> bool {
        self.flush_each
    }

    fn start(&mut self, info: VideoInfo) -> Result<()> {
        check_size(info.width as u64, info.height as u64).map_err(|e| Error::element(SINK, e))?;
        let c = match self.chroma {
            Chroma::C420 => "C420jpeg",
            Chroma::C444 => "C444",
        };
        let header = format!(
            "YUV4MPEG2 W{} H{} F{}:{} Ip A1:1 {c} XCOLORRANGE=LIMITED\n",
            info.width, info.height, info.rate.num, info.rate.den
        );
        self.header = header.len() as u64;
        self.planes = vec![0; self.chroma.frame_bytes(info.width, info.height)];
        write_all(&mut self.output, header.as_bytes(), &self.path).map_err(|e| self.lost(e))?;
        self.info = Some(info);
        Ok(())
    }

    fn consume(&mut self, _ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        self.write_frame(frame.data()).map_err(|e| self.lost(e))?;
        // On a pipe, the frame leaves at its release time (see rawsink).
        if self.flush_each {
            flush(&mut self.output, &self.path).map_err(|e| self.lost(e))?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        flush(&mut self.output, &self.path).map_err(|e| self.lost(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse() {
        let h = Y4mHeader::parse(
            b"YUV4MPEG2 W64 H48 F30000:1001 Ip A1:1 C444 XYSCSS=444 XCOLORRANGE=FULL",
            "x",
        )
        .unwrap();
        assert_eq!((h.width, h.height), (64, 48));
        assert_eq!(h.rate, Rational::new(30000, 1001));
        assert_eq!(h.chroma, Chroma::C444);
        assert!(h.full_range);
        let h = Y4mHeader::parse(b"YUV4MPEG2 W3 H3 F25:1", "x").unwrap();
        assert_eq!(h.chroma, Chroma::C420);
        assert_eq!(h.chroma.frame_bytes(3, 3), 9 + 2 * 4);
    }

    #[test]
    fn bad_headers_name_the_problem() {
        let e = |l: &[u8]| Y4mHeader::parse(l, "in.y4m").unwrap_err().to_string();
        assert_eq!(
            e(b"YUV4MPEG W64 H48 F25:1"),
            "in.y4m: bad YUV4MPEG2 header: not a YUV4MPEG2 stream (its first bytes are not \
             'YUV4MPEG2 '; the first line has 22 bytes)"
        );
        assert!(e(b"YUV4MPEG2 W64 Hx F25:1").contains("the height (H) is not a whole number"));
        assert!(e(b"YUV4MPEG2 W64 H48").contains("no frame rate (F) tag"));
        assert!(e(b"YUV4MPEG2 W64 H48 F25:0").contains("F25:0 is out of range"));
        assert_eq!(
            e(b"YUV4MPEG2 W64 H48 F25:1 C422"),
            "in.y4m: unsupported chroma format C422 (supported: C420jpeg, C420mpeg2, C420paldv, \
             C420, C444; 8 bits)"
        );
        assert!(e(b"YUV4MPEG2 W64 H48 F25:1 C420p10").contains("format C420p10 "));
        assert!(e(b"YUV4MPEG2 W64 H48 F25:1 Cxyz").contains("(a C tag of 4 bytes)"));
        assert!(e(b"YUV4MPEG2 W64 H48 F25:1 Zsecret").contains("unknown tag (tag 4"));
        assert_eq!(
            e(b"YUV4MPEG2 W20000 H48 F25:1"),
            "frame size 20000x48 is too large (at most 16384x16384)"
        );
        assert!(e(b"YUV4MPEG2 W0 H48 F25:1").contains("empty"));
    }

    /// Issue #21: any file can be named as a y4m input; no error may quote what it holds.
    #[test]
    fn errors_never_quote_the_input() {
        for line in [
            &b"root:$6$TOPSECRET:19000:0:99999:7:::"[..],
            b"YUV4MPEG2 W64 H48 F25:1 XCOLORRANGE=TOPSECRET",
            b"YUV4MPEG2 W64 HTOPSECRET F25:1",
            b"YUV4MPEG2 W64 H48 FTOPSECRET",
            b"YUV4MPEG2 W64 H48 F25:1 CTOPSECRET",
            b"YUV4MPEG2 W64 H48 F25:1 TOPSECRET",
        ] {
            let e = Y4mHeader::parse(line, "in.y4m").unwrap_err().to_string();
            assert!(!e.contains("SECRET"), "{e}");
        }
    }
}
