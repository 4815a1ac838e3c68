//! One clip file decoded in the process: libavformat demuxes, libavcodec decodes, libswscale
//! converts to RGBA exactly as the `ffmpeg` tool's `-pix_fmt rgba` does (same flags, same
//! colour matrix and range taken from each decoded frame), so that our pictures are byte for
//! byte ffmpeg's.
//!
//! Frames are named by their *index*: the frame's presentation time counted in frame periods
//! from the stream's start (`round((pts − start) · time_base · rate)`). Seeking is frame
//! accurate: [`ClipFile::seek`] goes to the keyframe at or before the wanted frame (the
//! demuxer's index), and the caller decodes forward ([`ClipFile::decode_next`]) to the exact
//! index, converting only the frames it keeps ([`ClipFile::convert`]).

use std::path::Path;

use ff::format::Pixel;
use ff::software::scaling;
use ffmpeg_next as ff;

use crate::error::ClipError;

/// The largest side accepted (the engine's own limit).
pub const MAX_SIDE: u32 = 16384;

/// A clip closed to save its decoder's memory, and how to open it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    location: String,
    threads: usize,
    size: Option<(u32, u32)>,
}

impl Closed {
    /// Opens the clip again, as it was opened first.
    pub fn open(&self) -> Result<ClipFile, ClipError> {
        ClipFile::open_sized(&self.location, self.threads, self.size)
    }

    /// The file.
    pub fn location(&self) -> &str {
        &self.location
    }
}

/// An RGBA picture of `width` x `height`, allocated by FFmpeg (aligned as its own frames).
pub fn rgba_frame(width: u32, height: u32) -> ff::frame::Video {
    ff::frame::Video::new(Pixel::RGBA, width, height)
}

/// The converter's context, owned by one [`ClipFile`].
struct Scaler(scaling::Context);

// SAFETY: an SwsContext has no tie to the thread that made it; it is owned by one ClipFile
// and used by one thread at a time (the file moves to its decoder thread whole).
unsafe impl Send for Scaler {}

/// What a clip is, read when it is opened.
#[derive(Debug, Clone, PartialEq)]
pub struct ClipInfo {
    /// Width of the pictures given.
    pub width: u32,
    /// Height.
    pub height: u32,
    /// Frame rate (the stream's average rate, else its base rate), `(num, den)`.
    pub rate: (u32, u32),
    /// Frames in the clip (the container's count, else counted by reading its packets).
    pub frames: u64,
    /// The codec's short name (`h264`, `hap`, `prores`...).
    pub codec: String,
}

/// A clip file open for decoding: demuxer, decoder and converter.
pub struct ClipFile {
    location: String,
    input: ff::format::context::Input,
    stream: usize,
    decoder: ff::decoder::Video,
    scaler: Option<Scaler>,
    /// The colour matrix and range the scaler was set for.
    colours: Option<(ff::color::Space, ff::color::Range)>,
    decoded: ff::frame::Video,
    /// Stream time base `(num, den)`.
    tb: (i64, i64),
    /// Timestamp of frame 0, in the stream's time base.
    origin: i64,
    eof_sent: bool,
    /// Decoder threads asked for, and whether the pictures are scaled (to reopen it alike).
    threads: usize,
    sized: bool,
    /// The index the next [`decode_next`](Self::decode_next) will most likely give (`None`
    /// after the end of the stream).
    next: Option<u64>,
    info: ClipInfo,
}

impl std::fmt::Debug for ClipFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClipFile")
            .field("location", &self.location)
            .field("info", &self.info)
            .finish()
    }
}

/// FFmpeg's one-time set-up, and its own messages limited to errors.
fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ff::init();
        ff::util::log::set_level(ff::util::log::Level::Error);
    });
}

fn eagain(e: &ff::Error) -> bool {
    matches!(e, ff::Error::Other { errno } if *errno == ff::util::error::EAGAIN)
}

impl ClipFile {
    /// Opens `location`, finds its best video stream and opens a decoder for it with
    /// `threads` threads (0 = as many as the machine has). Decodes nothing yet.
    pub fn open(location: &str, threads: usize) -> Result<Self, ClipError> {
        Self::open_sized(location, threads, None)
    }

    /// [`open`](Self::open), its pictures given at `size` (scaled, bicubic) when that is not
    /// the clip's own.
    pub fn open_sized(
        location: &str,
        threads: usize,
        size: Option<(u32, u32)>,
    ) -> Result<Self, ClipError> {
        init();
        let bad = |reason: String| ClipError::Open {
            location: location.into(),
            reason,
        };
        // Files only: a network stream could block a read without end (and the element's
        // drop, which joins the decoder thread); ffmpegsrc is the element for URLs.
        if !Path::new(location).is_file() {
            return Err(bad(if location.contains("://") {
                "a clip is a file: for a URL or a stream use ffmpegsrc".into()
            } else if Path::new(location).exists() {
                "not a regular file".into()
            } else {
                "no such file".into()
            }));
        }
        let input = ff::format::input(&location).map_err(|e| bad(e.to_string()))?;
        let stream = input
            .streams()
            .best(ff::media::Type::Video)
            .ok_or_else(|| bad("no video stream".into()))?;
        let index = stream.index();
        let tb = stream.time_base();
        let tb = (i64::from(tb.numerator()), i64::from(tb.denominator()));
        if tb.0 <= 0 || tb.1 <= 0 {
            return Err(bad("the video stream has no time base".into()));
        }
        let rate = [stream.avg_frame_rate(), stream.rate()]
            .into_iter()
            .find(|r| r.numerator() > 0 && r.denominator() > 0)
            .map_or((25, 1), |r| (r.numerator() as u32, r.denominator() as u32));
        let origin = match stream.start_time() {
            t if t == ff::ffi::AV_NOPTS_VALUE => 0,
            t => t,
        };
        let announced = stream.frames().max(0) as u64;
        let mut ctx = ff::codec::context::Context::from_parameters(stream.parameters())
            .map_err(|e| bad(format!("codec parameters: {e}")))?;
        ctx.set_threading(ff::codec::threading::Config {
            kind: ff::codec::threading::Type::Frame,
            count: threads,
            ..Default::default()
        });
        let decoder = ctx
            .decoder()
            .video()
            .map_err(|e| bad(format!("no decoder for this codec ({e})")))?;
        let codec = decoder
            .codec()
            .map_or_else(|| "unknown".into(), |c| c.name().to_string());
        let (width, height) = (decoder.width(), decoder.height());
        if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
            return Err(bad(format!("unsupported picture size {width}x{height}")));
        }
        let (width, height) = size.unwrap_or((width, height));
        let mut me = ClipFile {
            location: location.into(),
            input,
            stream: index,
            decoder,
            scaler: None,
            colours: None,
            decoded: ff::frame::Video::empty(),
            tb,
            origin,
            eof_sent: false,
            threads,
            sized: size.is_some(),
            next: Some(0),
            info: ClipInfo {
                width,
                height,
                rate,
                frames: announced,
                codec,
            },
        };
        if announced == 0 {
            me.info.frames = me.count_packets()?;
            me.seek(0)?;
        }
        if me.info.frames == 0 {
            return Err(bad("the video stream has no frames".into()));
        }
        Ok(me)
    }

    /// Closes the file and its decoder (their memory is given back), keeping what opens it
    /// again alike: see [`Closed::open`].
    pub fn close(self) -> Closed {
        Closed {
            location: self.location.clone(),
            threads: self.threads,
            size: self.sized.then_some((self.info.width, self.info.height)),
        }
    }

    /// What the clip is.
    pub fn info(&self) -> &ClipInfo {
        &self.info
    }

    /// The file or URL.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The index [`decode_next`](Self::decode_next) will most likely give next.
    pub fn next_index(&self) -> Option<u64> {
        self.next
    }

    /// Frames in a container that does not announce them: its video packets, counted by
    /// reading the file once (demuxing only).
    fn count_packets(&mut self) -> Result<u64, ClipError> {
        let mut n = 0;
        loop {
            let mut packet = ff::Packet::empty();
            match packet.read(&mut self.input) {
                Ok(()) if packet.stream() == self.stream => n += 1,
                Ok(()) => {}
                Err(ff::Error::Eof) => return Ok(n),
                Err(e) if eagain(&e) => {}
                Err(e) => return Err(self.failed(format!("reading packets: {e}"))),
            }
        }
    }

    fn failed(&self, reason: String) -> ClipError {
        ClipError::Decode {
            location: self.location.clone(),
            reason,
        }
    }

    /// The timestamp of frame `index` in the stream's time base (rounded down).
    fn pts_of(&self, index: u64) -> i64 {
        let (rn, rd) = (i128::from(self.info.rate.0), i128::from(self.info.rate.1));
        let (tn, td) = (i128::from(self.tb.0), i128::from(self.tb.1));
        let t = i128::from(index) * rd * td / (rn * tn);
        self.origin
            .saturating_add(t.clamp(0, i128::from(i64::MAX)) as i64)
    }

    /// The index of a frame with timestamp `pts` (nearest).
    fn index_of(&self, pts: i64) -> u64 {
        let (rn, rd) = (i128::from(self.info.rate.0), i128::from(self.info.rate.1));
        let (tn, td) = (i128::from(self.tb.0), i128::from(self.tb.1));
        let num = i128::from(pts.saturating_sub(self.origin)) * tn * rn;
        let den = td * rd;
        let i = (2 * num + den).div_euclid(2 * den);
        i.clamp(0, i128::from(i64::MAX)) as u64
    }

    /// Goes to the keyframe at or before frame `index` (`back` frames further back when a
    /// first try landed after it): the next [`decode_next`](Self::decode_next) gives that
    /// keyframe or a frame before `index`.
    pub fn seek_back(&mut self, index: u64, back: u64) -> Result<(), ClipError> {
        let ts = self.pts_of(index.saturating_sub(back));
        // SAFETY: the format context is open and owned by `self.input`; the stream index
        // exists (found at open); av_seek_frame takes no pointer beyond the context.
        let r = unsafe {
            ff::ffi::av_seek_frame(
                self.input.as_mut_ptr(),
                self.stream as i32,
                ts,
                ff::ffi::AVSEEK_FLAG_BACKWARD,
            )
        };
        if r < 0 {
            // Some demuxers cannot seek by timestamp in a stream: the generic seek in
            // AV_TIME_BASE units, to at most `ts`.
            let us = ts.saturating_mul(self.tb.0).saturating_mul(1_000_000) / self.tb.1;
            self.input
                .seek(us, ..us + 1)
                .map_err(|e| self.failed(format!("seeking to frame {index}: {e}")))?;
        }
        self.decoder.flush();
        self.eof_sent = false;
        self.next = None;
        Ok(())
    }

    /// Goes back to the start of the file (its first byte; the first timestamp where a
    /// demuxer cannot seek by bytes), for a demuxer whose timestamp seek lands after the
    /// first frame (MPEG program streams).
    pub fn seek_start(&mut self) -> Result<(), ClipError> {
        // SAFETY: as in `seek_back`: the context is open and owned by `self.input`.
        let r = unsafe {
            ff::ffi::av_seek_frame(self.input.as_mut_ptr(), -1, 0, ff::ffi::AVSEEK_FLAG_BYTE)
        };
        if r < 0 {
            self.input
                .seek(i64::MIN, ..i64::MIN + 1)
                .map_err(|e| self.failed(format!("seeking to the start: {e}")))?;
        }
        self.decoder.flush();
        self.eof_sent = false;
        self.next = None;
        Ok(())
    }

    /// Goes to the keyframe at or before frame `index`.
    pub fn seek(&mut self, index: u64) -> Result<(), ClipError> {
        self.seek_back(index, 0)
    }

    /// Decodes the next frame in presentation order and says its index; `None` at the end
    /// of the stream. The picture stays in the decoder's frame until the next call:
    /// [`convert`](Self::convert) writes it out.
    pub fn decode_next(&mut self) -> Result<Option<u64>, ClipError> {
        loop {
            match self.decoder.receive_frame(&mut self.decoded) {
                Ok(()) => {
                    let i = match self.decoded.timestamp() {
                        Some(ts) => self.index_of(ts),
                        None => self.next.unwrap_or(0),
                    };
                    self.next = Some(i + 1);
                    return Ok(Some(i));
                }
                Err(ff::Error::Eof) => {
                    self.next = None;
                    return Ok(None);
                }
                Err(e) if eagain(&e) => {}
                Err(e) => return Err(self.failed(e.to_string())),
            }
            if self.eof_sent {
                // Drained: receive_frame said EAGAIN after EOF, which it should not.
                self.next = None;
                return Ok(None);
            }
            self.feed()?;
        }
    }

    /// Sends the decoder the next packet of the stream, or the end of the stream.
    fn feed(&mut self) -> Result<(), ClipError> {
        loop {
            let mut packet = ff::Packet::empty();
            match packet.read(&mut self.input) {
                Ok(()) if packet.stream() == self.stream => {
                    match self.decoder.send_packet(&packet) {
                        Ok(()) => return Ok(()),
                        Err(e) if eagain(&e) => return Ok(()),
                        // A damaged packet: the decoder says so and goes on with the next.
                        Err(ff::Error::InvalidData) => return Ok(()),
                        Err(e) => return Err(self.failed(e.to_string())),
                    }
                }
                Ok(()) => {}
                Err(ff::Error::Eof) => {
                    let _ = self.decoder.send_eof();
                    self.eof_sent = true;
                    return Ok(());
                }
                Err(e) if eagain(&e) => {}
                Err(e) => return Err(self.failed(format!("reading: {e}"))),
            }
        }
    }

    /// Converts the last decoded picture to RGBA into `out` (a frame of the clip's size,
    /// allocated once by [`rgba_frame`](Self::rgba_frame)).
    pub fn convert(&mut self, out: &mut ff::frame::Video) -> Result<(), ClipError> {
        let (f, w, h) = (
            self.decoded.format(),
            self.decoded.width(),
            self.decoded.height(),
        );
        let fresh = match &self.scaler {
            Some(Scaler(s)) => {
                s.input().format != f || s.input().width != w || s.input().height != h
            }
            None => true,
        };
        if fresh {
            // The `ffmpeg` tool's own flags for an automatic conversion (bicubic).
            let s = scaling::Context::get(
                f,
                w,
                h,
                Pixel::RGBA,
                self.info.width,
                self.info.height,
                scaling::Flags::BICUBIC,
            )
            .map_err(|e| self.failed(format!("no conversion from {f:?} to RGBA: {e}")))?;
            self.scaler = Some(Scaler(s));
            self.colours = None;
        }
        let colours = (self.decoded.color_space(), self.decoded.color_range());
        let Some(Scaler(scaler)) = self.scaler.as_mut() else {
            return Err(self.failed("no converter".into()));
        };
        if self.colours != Some(colours) {
            set_colours(scaler, colours.0, colours.1);
            self.colours = Some(colours);
        }
        scaler
            .run(&self.decoded, out)
            .map_err(|e| ClipError::Decode {
                location: self.location.clone(),
                reason: format!("converting to RGBA: {e}"),
            })
    }

    /// A picture of the clip's size in RGBA, for [`convert`](Self::convert).
    pub fn rgba_frame(&self) -> ff::frame::Video {
        ff::frame::Video::new(Pixel::RGBA, self.info.width, self.info.height)
    }
}

/// Sets the converter's input colour matrix and range from the decoded frame's, as the
/// `ffmpeg` tool's scale filter does (`in_color_matrix=auto`): the frame's matrix, BT.601
/// where it has none; the frame's range where it says one, else the converter's own.
fn set_colours(scaler: &mut scaling::Context, space: ff::color::Space, range: ff::color::Range) {
    let space: ff::ffi::AVColorSpace = space.into();
    let space = match space as i32 {
        s if !(1..=10).contains(&s) || s == 8 => ff::ffi::AVColorSpace::AVCOL_SPC_BT470BG as i32,
        s => s,
    };
    // SAFETY: the scaler context is valid (owned by `scaler`); the out-pointers point at
    // locals; sws_getCoefficients returns a pointer to a static table, which
    // sws_setColorspaceDetails only reads.
    unsafe {
        let ctx = scaler.as_mut_ptr();
        let mut inv: *mut i32 = std::ptr::null_mut();
        let mut table: *mut i32 = std::ptr::null_mut();
        let (mut in_full, mut out_full) = (0, 0);
        let (mut brightness, mut contrast, mut saturation) = (0, 0, 0);
        if ff::ffi::sws_getColorspaceDetails(
            ctx,
            &mut inv,
            &mut in_full,
            &mut table,
            &mut out_full,
            &mut brightness,
            &mut contrast,
            &mut saturation,
        ) < 0
        {
            return;
        }
        match range {
            ff::color::Range::JPEG => in_full = 1,
            ff::color::Range::MPEG => in_full = 0,
            _ => {}
        }
        let coefficients = ff::ffi::sws_getCoefficients(space);
        ff::ffi::sws_setColorspaceDetails(
            ctx,
            coefficients,
            in_full,
            coefficients,
            out_full,
            brightness,
            contrast,
            saturation,
        );
    }
}

/// Copies an RGBA picture into `out` (tight rows of `width · 4` bytes).
pub fn copy_rgba(src: &ff::frame::Video, out: &mut [u8]) {
    let row = src.width() as usize * 4;
    let stride = src.stride(0);
    let data = src.data(0);
    if stride == row {
        let n = out.len().min(data.len());
        out[..n].copy_from_slice(&data[..n]);
        return;
    }
    for (dst, srow) in out.chunks_exact_mut(row).zip(data.chunks(stride)) {
        dst.copy_from_slice(&srow[..row]);
    }
}

impl ClipFile {
    /// Decodes frames `first..first + out.len()` into `out` (tight RGBA, one buffer a frame),
    /// through `scratch` (from [`rgba_frame`](Self::rgba_frame)); says how many it wrote (fewer
    /// at the end of the clip). Afterwards decoding goes on after the last one.
    pub fn decode_into(
        &mut self,
        first: u64,
        out: &mut [Vec<u8>],
        scratch: &mut ff::frame::Video,
    ) -> Result<usize, ClipError> {
        self.seek(first)?;
        let mut n = 0;
        while n < out.len() {
            let Some(i) = self.decode_next()? else { break };
            if i < first + n as u64 {
                continue;
            }
            self.convert(scratch)?;
            copy_rgba(scratch, &mut out[n]);
            n += 1;
        }
        Ok(n)
    }
}
