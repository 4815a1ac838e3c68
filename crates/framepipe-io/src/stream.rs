//! Opening inputs and outputs (`-` is stdin/stdout), reading whole frames, checking sizes.

use std::fs::File;
use std::fs::OpenOptions;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::time::{Duration, Instant};

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

/// How long a sink waits for a reader of a FIFO given as its location (start-up; SIGINT and
/// SIGTERM end the wait, see the CLI's signals).
pub const FIFO_READER_WAIT: Duration = Duration::from_secs(30);

/// How often a sink looks for a reader of its FIFO meanwhile.
const FIFO_POLL: Duration = Duration::from_millis(20);

/// A sink's file: writes go to the file, counting the bytes the system took, so that a failed
/// write can say how many whole frames the output holds.
#[derive(Debug)]
pub struct CountingFile {
    file: File,
    written: u64,
}

impl CountingFile {
    /// Bytes the system has taken so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The file.
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl Write for CountingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A sink's buffered output ([`create_output`]).
pub type Output = BufWriter<CountingFile>;

/// Creates `location` for writing (truncating it): a file, or stdout for `-`. A FIFO is opened
/// without blocking in `open`: it waits for a reader up to [`FIFO_READER_WAIT`], then is an
/// error naming it.
pub fn create_output(location: &str) -> Result<Output> {
    let create = |source| IoError::Create {
        path: display_name(location, "stdout"),
        source,
    };
    let file = if location == "-" {
        io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map(File::from)
            .map_err(create)?
    } else if std::fs::metadata(location).is_ok_and(|m| m.file_type().is_fifo()) {
        open_fifo(location, FIFO_READER_WAIT)?
    } else {
        File::create(location).map_err(create)?
    };
    Ok(BufWriter::with_capacity(
        BUF_BYTES,
        CountingFile { file, written: 0 },
    ))
}

/// Opens the FIFO `path` for writing once a reader has it open, waiting `wait` at most: a
/// non-blocking open fails with ENXIO while there is none. The descriptor that succeeds is kept
/// and made blocking (`O_NONBLOCK` cleared with `fcntl`), not opened again: a reader that left
/// in between would make a blocking open wait for the next one, for ever. A reader gone by then
/// is the first write's error (EPIPE), as for any reader that leaves.
fn open_fifo(path: &str, wait: Duration) -> Result<File> {
    let create = |source| IoError::Create {
        path: path.into(),
        source,
    };
    let deadline = Instant::now() + wait;
    loop {
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(file) => {
                let flags = rustix::fs::fcntl_getfl(&file).map_err(|e| create(e.into()))?;
                rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)
                    .map_err(|e| create(e.into()))?;
                return Ok(file);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if Instant::now() >= deadline {
                    return Err(IoError::NoReader {
                        path: path.into(),
                        secs: wait.as_secs(),
                    });
                }
                std::thread::sleep(FIFO_POLL);
            }
            Err(e) => return Err(create(e)),
        }
    }
}

/// Whether a sink should flush after every frame: yes for a pipe, socket or terminal (a reader
/// there must see each frame when it is released, e.g. at its deadline), no for a regular file,
/// where it would only add a write per frame.
pub fn flush_each_frame(output: &Output) -> bool {
    !output
        .get_ref()
        .file()
        .metadata()
        .is_ok_and(|m| m.is_file())
}

/// `e` from writing a sink's output, with the number of whole frames the output holds when it
/// is a write error ([`IoError::WriteLost`]): `header` bytes, then frames of `frame` bytes.
pub fn with_kept(e: IoError, output: &Output, header: u64, frame: u64) -> IoError {
    match e {
        IoError::Write { path, source } => IoError::WriteLost {
            path,
            source,
            kept: output
                .get_ref()
                .written()
                .saturating_sub(header)
                .checked_div(frame)
                .unwrap_or(0),
        },
        other => other,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A FIFO sink opened just as its reader leaves: the open must come back (with a
    /// descriptor whose first write fails, or with no reader), never wait for a next reader
    /// that may not come — also on the edit thread, for a live edit. Each round a reader opens
    /// the FIFO, lets the sink open it, and leaves after a few µs (a different wait each round,
    /// so that some rounds leave between the sink's first look and its descriptor).
    #[test]
    fn a_fifo_whose_reader_leaves_while_it_is_opened_does_not_block_the_open() {
        let dir = framepipe_testkit::tmpdir("fp-fifo-leave");
        let path = dir.path().join("f");
        let st = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(st.success(), "mkfifo {}", path.display());
        let location = path.to_str().unwrap().to_string();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel();
        let opener = std::thread::spawn(move || {
            while go_rx.recv().is_ok() {
                let opened = open_fifo(&location, Duration::ZERO).is_ok();
                done_tx.send(opened).unwrap();
            }
        });
        let reader = || {
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .unwrap()
        };
        let mut opened = 0;
        for round in 0..2000u32 {
            let r = reader();
            go_tx.send(()).unwrap();
            let stay = Instant::now() + Duration::from_nanos(u64::from(round % 200) * 500);
            while Instant::now() < stay {
                std::hint::spin_loop();
            }
            drop(r);
            match done_rx.recv_timeout(Duration::from_secs(2)) {
                Ok(ok) => opened += usize::from(ok),
                Err(_) => {
                    // Let the blocked open return before failing, so the thread ends.
                    let _r = reader();
                    let _ = done_rx.recv();
                    panic!("round {round}: the open waited for a reader that had left");
                }
            }
        }
        drop(go_tx);
        opener.join().unwrap();
        assert!(opened > 0, "the sink never found its reader");
    }
}
