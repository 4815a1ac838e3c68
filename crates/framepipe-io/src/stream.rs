//! Opening inputs and outputs (`-` is stdin/stdout), reading whole frames, checking sizes.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;

use framepipe_core::{Error, Props, Rational};

use crate::error::{IoError, Result};

/// Largest width or height any source or sink accepts, checked before anything is allocated.
pub const MAX_DIM: u64 = 16384;

/// Buffer size of readers and writers (frames bigger than this bypass the buffer).
pub const BUF_BYTES: usize = 1 << 16;

/// Checks that `width` x `height` is neither empty nor larger than [`MAX_DIM`] on a side.
pub fn check_size(width: u64, height: u64) -> Result<(u32, u32)> {
    if width == 0 || height == 0 {
        return Err(IoError::BadSize {
            width,
            height,
            reason: "empty".into(),
        });
    }
    if width > MAX_DIM || height > MAX_DIM {
        return Err(IoError::BadSize {
            width,
            height,
            reason: format!("too large (at most {MAX_DIM}x{MAX_DIM})"),
        });
    }
    Ok((width as u32, height as u32))
}

/// How a location is named in messages: `stdin`/`stdout` for `-`, else the text given.
pub fn display_name(location: &str, stdio: &str) -> String {
    if location == "-" {
        stdio.to_string()
    } else {
        location.to_string()
    }
}

/// The `rate` property of `element` parsed as a [`Rational`] (`30`, `30000/1001`, `29.97`).
pub fn rate_prop(element: &str, props: &Props) -> framepipe_core::Result<Rational> {
    let text = props.str("rate");
    Rational::parse(text).ok_or_else(|| Error::BadValue {
        element: element.into(),
        prop: "rate".into(),
        value: text.into(),
        reason: "expected a positive rate like 30, 25/1 or 30000/1001".into(),
    })
}

/// Opens `location` for reading: a file, or stdin for `-` (as its own file handle, so reads take
/// no lock).
pub fn open_input(location: &str) -> Result<BufReader<File>> {
    let file = if location == "-" {
        io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map(File::from)
            .map_err(|source| IoError::Open {
                path: "stdin".into(),
                source,
            })?
    } else {
        File::open(location).map_err(|source| IoError::Open {
            path: location.into(),
            source,
        })?
    };
    Ok(BufReader::with_capacity(BUF_BYTES, file))
}

/// Creates `location` for writing (truncating it): a file, or stdout for `-`.
pub fn create_output(location: &str) -> Result<BufWriter<File>> {
    let file = if location == "-" {
        io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map(File::from)
            .map_err(|source| IoError::Create {
                path: "stdout".into(),
                source,
            })?
    } else {
        File::create(location).map_err(|source| IoError::Create {
            path: location.into(),
            source,
        })?
    };
    Ok(BufWriter::with_capacity(BUF_BYTES, file))
}

/// Whether a sink should flush after every frame: yes for a pipe, socket or terminal (a reader
/// there must see each frame when it is released, e.g. at its deadline), no for a regular file,
/// where it would only add a write per frame.
pub fn flush_each_frame(output: &BufWriter<File>) -> bool {
    !output.get_ref().metadata().is_ok_and(|m| m.is_file())
}

/// Reads until `buf` is full or the input ends; returns how many bytes were read.
pub fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
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

/// What reading one frame gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameRead {
    /// A whole frame.
    Full,
    /// The input had ended before the frame's first byte.
    End,
}

/// Reads frame number `frame` of `buf.len()` bytes: whole, or cleanly at the end, or a
/// [`IoError::Truncated`] naming how much of it there was.
pub fn read_frame(r: &mut impl Read, buf: &mut [u8], path: &str, frame: u64) -> Result<FrameRead> {
    let got = read_full(r, buf).map_err(|source| IoError::Read {
        path: path.into(),
        source,
    })?;
    if got == buf.len() {
        Ok(FrameRead::Full)
    } else if got == 0 {
        Ok(FrameRead::End)
    } else {
        Err(IoError::Truncated {
            path: path.into(),
            frame,
            got,
            want: buf.len(),
        })
    }
}

/// Writes all of `data`, naming `path` on failure.
pub fn write_all(w: &mut impl Write, data: &[u8], path: &str) -> Result<()> {
    w.write_all(data).map_err(|source| IoError::Write {
        path: path.into(),
        source,
    })
}

/// Flushes `w`, naming `path` on failure.
pub fn flush(w: &mut impl Write, path: &str) -> Result<()> {
    w.flush().map_err(|source| IoError::Write {
        path: path.into(),
        source,
    })
}

/// Where the frame data of `input` starts, when it is a regular file that a rewind can seek back
/// to (its current position, taken after any header); `None` for a pipe, socket or terminal.
pub fn rewind_point(input: &mut BufReader<File>) -> Option<u64> {
    let regular = input.get_ref().metadata().is_ok_and(|m| m.is_file());
    if regular {
        input.stream_position().ok()
    } else {
        None
    }
}

/// Seeks `input` back to `pos` (from [`rewind_point`]), dropping what its buffer held.
pub fn seek_back(input: &mut BufReader<File>, pos: u64, path: &str) -> Result<()> {
    input
        .seek(SeekFrom::Start(pos))
        .map(|_| ())
        .map_err(|source| IoError::Read {
            path: path.into(),
            source,
        })
}

pub use framepipe_core::LoopOrigin;
