//! The wire format (see `docs/WIRE.md`): a 64-byte stream header per connection, then per frame
//! a 32-byte frame header and the packed pixels of this link's stripe. All integers are
//! little-endian.
//!
//! Decoding validates everything before anything is allocated: a header that passes
//! [`StreamHeader::decode`] describes a stripe of at most `max_frame_bytes`, and every frame header
//! must announce exactly that many payload bytes, so no length read from the peer ever sizes a
//! buffer by itself.

use std::io::{self, Read};

use framepipe_core::Rational;

use crate::error::NetError;

/// First 8 bytes of every stream. `\r\n` catches peers that mangle line ends.
pub const MAGIC: [u8; 8] = *b"FPWIRE\r\n";
/// The wire version this crate speaks.
pub const VERSION: u16 = 1;
/// Length of the stream header in bytes.
pub const STREAM_HEADER_LEN: usize = 64;
/// First 4 bytes of every frame header.
pub const FRAME_MAGIC: [u8; 4] = *b"FPFR";
/// Length of a frame header in bytes.
pub const FRAME_HEADER_LEN: usize = 32;
/// Most links one stream may be striped over.
pub const MAX_LINKS: u16 = 16;
/// Largest width or height accepted.
pub const MAX_DIMENSION: u32 = 32768;
/// Default limit on the bytes of one whole frame on the wire (all stripes): 256 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: u64 = 256 << 20;

/// Stream flag: every frame header carries a CRC-32 of its payload.
pub const FLAG_CHECKSUM: u8 = 1;

/// Pixel format on the wire. Inside the engine pixels are always RGBA8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// R, G, B, A bytes: 4 bytes per pixel, as in the engine.
    Rgba,
    /// R, G, B bytes: 3 bytes per pixel; alpha is dropped and restored as 255.
    Rgb24,
    /// One little-endian u16 per pixel, `r5 << 11 | g6 << 5 | b5`; lossy.
    Rgb565,
}

impl WireFormat {
    /// All formats, in code order.
    pub const ALL: [WireFormat; 3] = [WireFormat::Rgba, WireFormat::Rgb24, WireFormat::Rgb565];

    /// Bytes per pixel on the wire.
    pub fn bytes_per_pixel(self) -> usize {
        match self {
            WireFormat::Rgba => 4,
            WireFormat::Rgb24 => 3,
            WireFormat::Rgb565 => 2,
        }
    }

    /// The code in the stream header.
    pub fn code(self) -> u8 {
        match self {
            WireFormat::Rgba => 0,
            WireFormat::Rgb24 => 1,
            WireFormat::Rgb565 => 2,
        }
    }

    /// The format with header code `code`.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.code() == code)
    }

    /// The property word: `rgba`, `rgb24` or `rgb565`.
    pub fn name(self) -> &'static str {
        match self {
            WireFormat::Rgba => "rgba",
            WireFormat::Rgb24 => "rgb24",
            WireFormat::Rgb565 => "rgb565",
        }
    }

    /// Parses a property word.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == s)
    }

    /// Bytes of `rows` rows of `width` pixels, or `None` on overflow.
    pub fn bytes(self, width: u32, rows: u32) -> Option<u64> {
        (width as u64)
            .checked_mul(rows as u64)?
            .checked_mul(self.bytes_per_pixel() as u64)
    }
}

/// The rows `[first, first + rows)` that link `index` of `count` carries in a frame of `height`
/// rows: contiguous bands, as equal as whole rows allow, in link order.
pub fn stripe(height: u32, count: u16, index: u16) -> (u32, u32) {
    let h = height as u64;
    let first = index as u64 * h / count as u64;
    let end = (index as u64 + 1) * h / count as u64;
    (first as u32, (end - first) as u32)
}

/// The header each connection starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamHeader {
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels (the whole frame, not the stripe).
    pub height: u32,
    /// Pixel format on the wire.
    pub format: WireFormat,
    /// Whether frame headers carry a CRC-32 of the payload.
    pub checksum: bool,
    /// Nominal frame rate.
    pub rate: Rational,
    /// Which link this connection is, `0..link_count`.
    pub link_index: u16,
    /// Number of links the stream is striped over.
    pub link_count: u16,
    /// Identifies the stream, so that a receiver can tell its links from another sender's.
    pub stream_id: u64,
    /// Sequence number of the first frame on this connection (not 0 after a reconnection).
    pub first_seq: u64,
}

impl StreamHeader {
    /// This link's stripe: first row and number of rows.
    pub fn stripe(&self) -> (u32, u32) {
        stripe(self.height, self.link_count, self.link_index)
    }

    /// Payload bytes of one frame on this link.
    pub fn stripe_bytes(&self) -> usize {
        let (_, rows) = self.stripe();
        // Cannot overflow: decode() and the sink check the whole frame against a u64 limit.
        self.format.bytes(self.width, rows).unwrap_or(u64::MAX) as usize
    }

    /// Bytes of one whole frame on the wire (all links, payload only).
    pub fn frame_bytes(&self) -> u64 {
        self.format
            .bytes(self.width, self.height)
            .unwrap_or(u64::MAX)
    }

    /// The 64 header bytes.
    pub fn encode(&self) -> [u8; STREAM_HEADER_LEN] {
        let mut b = [0u8; STREAM_HEADER_LEN];
        let (first_row, rows) = self.stripe();
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        b[10..12].copy_from_slice(&(STREAM_HEADER_LEN as u16).to_le_bytes());
        b[12..16].copy_from_slice(&self.width.to_le_bytes());
        b[16..20].copy_from_slice(&self.height.to_le_bytes());
        b[20] = self.format.code();
        b[21] = if self.checksum { FLAG_CHECKSUM } else { 0 };
        // b[22..24]: reserved, zero.
        b[24..28].copy_from_slice(&self.rate.num.to_le_bytes());
        b[28..32].copy_from_slice(&self.rate.den.to_le_bytes());
        b[32..34].copy_from_slice(&self.link_index.to_le_bytes());
        b[34..36].copy_from_slice(&self.link_count.to_le_bytes());
        b[36..40].copy_from_slice(&first_row.to_le_bytes());
        b[40..44].copy_from_slice(&rows.to_le_bytes());
        b[44..52].copy_from_slice(&self.stream_id.to_le_bytes());
        b[52..60].copy_from_slice(&self.first_seq.to_le_bytes());
        let crc = crc32fast::hash(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and validates a stream header. Fails on anything unexpected, including a whole
    /// frame larger than `max_frame_bytes`.
    pub fn decode(b: &[u8; STREAM_HEADER_LEN], max_frame_bytes: u64) -> Result<Self, NetError> {
        if b[0..8] != MAGIC {
            return Err(NetError::BadMagic {
                found: b[0..8].try_into().unwrap_or_default(),
            });
        }
        let version = u16_at(b, 8);
        if version != VERSION {
            return Err(NetError::UnsupportedVersion { found: version });
        }
        let bad = |field: &'static str, value: u64, reason: &str| NetError::BadHeader {
            field,
            value,
            reason: reason.to_string(),
        };
        let len = u16_at(b, 10);
        if len as usize != STREAM_HEADER_LEN {
            return Err(bad(
                "header length",
                len as u64,
                "version 1 headers are 64 bytes",
            ));
        }
        let stored = u32_at(b, 60);
        let computed = crc32fast::hash(&b[..60]);
        if stored != computed {
            return Err(bad(
                "header checksum",
                stored as u64,
                &format!("computed {computed:#010x}"),
            ));
        }
        let width = u32_at(b, 12);
        let height = u32_at(b, 16);
        for (field, v) in [("width", width), ("height", height)] {
            if v == 0 || v > MAX_DIMENSION {
                return Err(bad(
                    field,
                    v as u64,
                    &format!("must be 1..={MAX_DIMENSION}"),
                ));
            }
        }
        let format = WireFormat::from_code(b[20]).ok_or_else(|| {
            bad(
                "pixel format",
                b[20] as u64,
                "known: 0 rgba, 1 rgb24, 2 rgb565",
            )
        })?;
        if b[21] & !FLAG_CHECKSUM != 0 {
            return Err(bad("flags", b[21] as u64, "unknown flag bits"));
        }
        if b[22] != 0 || b[23] != 0 {
            return Err(bad("reserved", u16_at(b, 22) as u64, "must be zero"));
        }
        let rate = Rational::new(u32_at(b, 24), u32_at(b, 28));
        if !rate.is_usable() {
            return Err(bad(
                "frame rate",
                rate.num as u64,
                &format!("{rate}: must be positive and at least one frame a day"),
            ));
        }
        let link_index = u16_at(b, 32);
        let link_count = u16_at(b, 34);
        if link_count == 0 || link_count > MAX_LINKS || link_count as u32 > height {
            return Err(bad(
                "link count",
                link_count as u64,
                &format!("must be 1..={MAX_LINKS} and at most the height"),
            ));
        }
        if link_index >= link_count {
            return Err(bad(
                "link index",
                link_index as u64,
                "must be below the link count",
            ));
        }
        let h = StreamHeader {
            width,
            height,
            format,
            checksum: b[21] & FLAG_CHECKSUM != 0,
            rate,
            link_index,
            link_count,
            stream_id: u64_at(b, 44),
            first_seq: u64_at(b, 52),
        };
        let (first_row, rows) = h.stripe();
        if u32_at(b, 36) != first_row || u32_at(b, 40) != rows {
            return Err(bad(
                "stripe",
                u32_at(b, 36) as u64,
                &format!("link {link_index} of {link_count} must carry rows {first_row}+{rows}"),
            ));
        }
        let bytes = h.frame_bytes();
        if bytes > max_frame_bytes {
            return Err(NetError::FrameTooLarge {
                width,
                height,
                format: format.name(),
                bytes,
                limit: max_frame_bytes,
            });
        }
        Ok(h)
    }
}

/// The header before each frame's payload on each link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Sequence number: the stream header's `first_seq`, then one more per frame.
    pub seq: u64,
    /// Presentation time in nanoseconds.
    pub pts_ns: i64,
    /// Payload bytes that follow (always this link's stripe size).
    pub payload_len: u32,
    /// CRC-32 (IEEE) of the payload, when the stream has checksums on.
    pub checksum: Option<u32>,
}

impl FrameHeader {
    /// The 32 header bytes.
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[0..4].copy_from_slice(&FRAME_MAGIC);
        let flags: u32 = if self.checksum.is_some() { 1 } else { 0 };
        b[4..8].copy_from_slice(&flags.to_le_bytes());
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.pts_ns.to_le_bytes());
        b[24..28].copy_from_slice(&self.payload_len.to_le_bytes());
        b[28..32].copy_from_slice(&self.checksum.unwrap_or(0).to_le_bytes());
        b
    }

    /// Parses a frame header and checks it against the stream: magic, flags, the payload length
    /// (must be exactly `stripe_bytes`) and the sequence number (must be `expected_seq`).
    pub fn decode(
        b: &[u8; FRAME_HEADER_LEN],
        stream: &StreamHeader,
        expected_seq: u64,
    ) -> Result<Self, NetError> {
        if b[0..4] != FRAME_MAGIC {
            return Err(NetError::BadFrameMagic {
                seq: expected_seq,
                found: b[0..4].try_into().unwrap_or_default(),
            });
        }
        let flags = u32_at(b, 4);
        if flags != stream.checksum as u32 {
            return Err(NetError::BadHeader {
                field: "frame flags",
                value: flags as u64,
                reason: format!("stream says checksum={}", stream.checksum),
            });
        }
        let seq = u64_at(b, 8);
        if seq != expected_seq {
            return Err(NetError::SequenceGap {
                expected: expected_seq,
                found: seq,
            });
        }
        let payload_len = u32_at(b, 24);
        if payload_len as usize != stream.stripe_bytes() {
            return Err(NetError::BadHeader {
                field: "payload length",
                value: payload_len as u64,
                reason: format!(
                    "link {} carries {} bytes",
                    stream.link_index,
                    stream.stripe_bytes()
                ),
            });
        }
        Ok(FrameHeader {
            seq,
            pts_ns: u64_at(b, 16) as i64,
            payload_len,
            checksum: stream.checksum.then(|| u32_at(b, 28)),
        })
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Reads until `buf` is full or the peer closes; returns the bytes read. Retries on `EINTR`
/// (a SIGSTOP/SIGCONT of either process interrupts reads).
pub fn read_full<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Decodes one framed link: the stream header, then frames. Generic over [`Read`] so that the
/// same code reads sockets and, in tests and the fuzz target, byte slices.
#[derive(Debug)]
pub struct WireReader<R> {
    inner: R,
    label: String,
    header: StreamHeader,
    next_seq: u64,
    frames: u64,
}

impl<R: Read> WireReader<R> {
    /// Reads and validates the stream header. `label` names the peer in messages.
    pub fn open(mut inner: R, label: &str, max_frame_bytes: u64) -> Result<Self, NetError> {
        let mut b = [0u8; STREAM_HEADER_LEN];
        let got = read_full(&mut inner, &mut b).map_err(|e| NetError::io(label, e))?;
        if got < STREAM_HEADER_LEN {
            return Err(NetError::ShortHeader {
                peer: label.to_string(),
                got,
            });
        }
        let header = StreamHeader::decode(&b, max_frame_bytes)?;
        Ok(WireReader {
            inner,
            label: label.to_string(),
            next_seq: header.first_seq,
            header,
            frames: 0,
        })
    }

    /// A reader whose stream header was already read and validated (by
    /// [`crate::accept::Acceptor`]); `inner` is positioned at the first frame header.
    pub fn with_header(inner: R, label: &str, header: StreamHeader) -> Self {
        WireReader {
            inner,
            label: label.to_string(),
            next_seq: header.first_seq,
            header,
            frames: 0,
        }
    }

    /// The validated stream header.
    pub fn header(&self) -> &StreamHeader {
        &self.header
    }

    /// Whole frames read so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The sequence number the next frame must have.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The underlying reader, shared.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The underlying reader.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Reads the next frame's header and payload into `payload`, which must be exactly
    /// [`StreamHeader::stripe_bytes`] long. `Ok(None)` when the peer closed the stream cleanly
    /// between frames; a close inside a frame is [`NetError::ClosedMidFrame`].
    pub fn read_frame(&mut self, payload: &mut [u8]) -> Result<Option<FrameHeader>, NetError> {
        assert_eq!(
            payload.len(),
            self.header.stripe_bytes(),
            "payload buffer size"
        );
        let mut b = [0u8; FRAME_HEADER_LEN];
        let got = read_full(&mut self.inner, &mut b).map_err(|e| self.cut(e))?;
        if got == 0 {
            return Ok(None);
        }
        if got < FRAME_HEADER_LEN {
            return Err(self.mid_frame());
        }
        let fh = FrameHeader::decode(&b, &self.header, self.next_seq)?;
        let got = read_full(&mut self.inner, payload).map_err(|e| self.cut(e))?;
        if got < payload.len() {
            return Err(self.mid_frame());
        }
        if let Some(expected) = fh.checksum {
            let computed = crc32fast::hash(payload);
            if computed != expected {
                return Err(NetError::ChecksumMismatch {
                    seq: fh.seq,
                    link: self.header.link_index,
                    expected,
                    computed,
                });
            }
        }
        self.next_seq += 1;
        self.frames += 1;
        Ok(Some(fh))
    }

    fn mid_frame(&self) -> NetError {
        NetError::ClosedMidFrame {
            peer: self.label.clone(),
            frames: self.frames,
        }
    }

    fn cut(&self, e: io::Error) -> NetError {
        match e.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => self.mid_frame(),
            _ => NetError::io(&self.label, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> StreamHeader {
        StreamHeader {
            width: 64,
            height: 48,
            format: WireFormat::Rgb24,
            checksum: true,
            rate: Rational::new(30, 1),
            link_index: 1,
            link_count: 3,
            stream_id: 0x1234_5678_9abc_def0,
            first_seq: 7,
        }
    }

    #[test]
    fn stream_header_round_trips() {
        let h = header();
        let b = h.encode();
        assert_eq!(&b[..8], b"FPWIRE\r\n");
        assert_eq!(
            StreamHeader::decode(&b, DEFAULT_MAX_FRAME_BYTES).unwrap(),
            h
        );
        assert_eq!(h.stripe(), (16, 16));
        assert_eq!(h.stripe_bytes(), 64 * 16 * 3);
    }

    #[test]
    fn stripes_cover_every_row_once() {
        for height in [1u32, 2, 7, 768, 1080] {
            for count in 1..=MAX_LINKS.min(height as u16) {
                let mut next = 0;
                for i in 0..count {
                    let (first, rows) = stripe(height, count, i);
                    assert_eq!(first, next, "h={height} n={count} i={i}");
                    assert!(rows > 0);
                    next = first + rows;
                }
                assert_eq!(next, height);
            }
        }
    }

    #[test]
    fn bad_stream_headers_are_rejected_with_the_value() {
        let mut b = header().encode();
        b[0] = b'X';
        let e = StreamHeader::decode(&b, DEFAULT_MAX_FRAME_BYTES).unwrap_err();
        assert!(matches!(e, NetError::BadMagic { .. }), "{e}");

        let mut h = header();
        h.width = 30000;
        h.height = 30000;
        h.link_index = 0;
        h.link_count = 1;
        let e = StreamHeader::decode(&h.encode(), 1 << 30).unwrap_err();
        assert!(e.to_string().contains("2700000000 bytes"), "{e}");

        let mut b = header().encode();
        b[8] = 9; // version 9, header checksum no longer matters: version is checked first
        let e = StreamHeader::decode(&b, DEFAULT_MAX_FRAME_BYTES).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unsupported wire version 9 (this side speaks 1)"
        );

        let mut b = header().encode();
        b[13] ^= 1; // width changed, checksum now wrong
        let e = StreamHeader::decode(&b, DEFAULT_MAX_FRAME_BYTES).unwrap_err();
        assert!(e.to_string().contains("header checksum"), "{e}");
    }

    #[test]
    fn frames_decode_and_detect_gaps_and_corruption() {
        let h = header();
        let payload: Vec<u8> = (0..h.stripe_bytes()).map(|i| (i * 7) as u8).collect();
        let mut bytes = h.encode().to_vec();
        for seq in [7u64, 8, 10] {
            let fh = FrameHeader {
                seq,
                pts_ns: seq as i64 * 1000,
                payload_len: payload.len() as u32,
                checksum: Some(crc32fast::hash(&payload)),
            };
            bytes.extend_from_slice(&fh.encode());
            bytes.extend_from_slice(&payload);
        }
        let mut r = WireReader::open(&bytes[..], "test", DEFAULT_MAX_FRAME_BYTES).unwrap();
        let mut buf = vec![0u8; h.stripe_bytes()];
        assert_eq!(r.read_frame(&mut buf).unwrap().unwrap().seq, 7);
        assert_eq!(buf, payload);
        assert_eq!(r.read_frame(&mut buf).unwrap().unwrap().pts_ns, 8000);
        let e = r.read_frame(&mut buf).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sequence gap: expected frame 9, got frame 10"
        );

        // Corrupt one payload byte of the first frame.
        let mut bad = bytes.clone();
        bad[STREAM_HEADER_LEN + FRAME_HEADER_LEN + 5] ^= 0x40;
        let mut r = WireReader::open(&bad[..], "test", DEFAULT_MAX_FRAME_BYTES).unwrap();
        let e = r.read_frame(&mut buf).unwrap_err();
        assert!(
            matches!(e, NetError::ChecksumMismatch { seq: 7, .. }),
            "{e}"
        );

        // Cut inside the second frame.
        let cut = STREAM_HEADER_LEN + 2 * FRAME_HEADER_LEN + payload.len() + 10;
        let mut r = WireReader::open(&bytes[..cut], "peer", DEFAULT_MAX_FRAME_BYTES).unwrap();
        r.read_frame(&mut buf).unwrap();
        let e = r.read_frame(&mut buf).unwrap_err();
        assert_eq!(
            e.to_string(),
            "connection from peer closed mid-frame after 1 whole frames"
        );
    }
}
