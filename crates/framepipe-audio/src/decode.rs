//! A file or stream any ffmpeg can read, decoded by the ffmpeg tool to mono `f32le` PCM at
//! [`RATE`] Hz, analysed and published on a thread of its own (`fp-audio`), as fast as it
//! goes but never more than the timeline's ring ahead of the engine: a render's frame N
//! reads the audio at N's timestamp, a pure function of the file and N.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::{Analyzer, BandEdges, Error, Feed, Result, Timeline, RATE};

/// Bytes read from ffmpeg at a time (512 samples).
const CHUNK: usize = 2048;

/// A decoding input: its thread, and the feed the engine reads.
#[derive(Debug)]
pub struct FileInput {
    feed: Feed,
    thread: Option<JoinHandle<()>>,
}

impl FileInput {
    /// Starts ffmpeg on `input` (a path, or anything ffmpeg's `-i` takes) and the thread that
    /// analyses its output with `bands`. Fails at once when ffmpeg cannot be run; an input
    /// ffmpeg cannot read fails here too (ffmpeg's message), as it ends before any sample.
    pub fn start(input: &str, bands: &BandEdges) -> Result<FileInput> {
        let mut child = Command::new("ffmpeg")
            .args([
                "-nostdin",
                "-hide_banner",
                "-loglevel",
                "error",
                "-i",
                input,
            ])
            .args([
                "-vn",
                "-ac",
                "1",
                "-ar",
                &RATE.to_string(),
                "-f",
                "f32le",
                "-",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::NoFfmpeg {
                input: input.to_string(),
                reason: e.to_string(),
            })?;
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        // The first bytes, or ffmpeg's error: a bad input fails before the show starts.
        let mut first = [0u8; CHUNK];
        let got = read_full(&mut stdout, &mut first);
        if got == 0 {
            let mut message = String::new();
            let _ = stderr.read_to_string(&mut message);
            let _ = child.wait();
            let message = message.trim();
            return Err(Error::Decode {
                input: input.to_string(),
                message: if message.is_empty() {
                    "no audio stream in it".into()
                } else {
                    message.lines().last().unwrap_or(message).to_string()
                },
            });
        }
        let timeline = Arc::new(Timeline::new());
        timeline.set_bands(bands.count());
        let feed = Feed::new(Arc::clone(&timeline), true, 0);
        let mut analyzer = Analyzer::new(bands);
        let name = input.to_string();
        let thread = std::thread::Builder::new()
            .name("fp-audio".into())
            .spawn(move || {
                let mut buf = first;
                let mut samples = [0.0f32; CHUNK / 4];
                let mut len = got;
                let mut carry = 0usize;
                loop {
                    let whole = (carry + len) / 4 * 4;
                    for (s, b) in samples.iter_mut().zip(buf[..whole].chunks_exact(4)) {
                        *s = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    }
                    let mut stopped = false;
                    analyzer.push(&samples[..whole / 4], 1, |an| {
                        if !stopped && timeline.wait_room() {
                            timeline.publish_with(an.point(), an.waveform(), an.spectrum());
                        } else {
                            stopped = true;
                        }
                    });
                    if stopped {
                        let _ = child.kill();
                        break;
                    }
                    // A sample split across reads stays for the next.
                    buf.copy_within(whole..carry + len, 0);
                    carry = carry + len - whole;
                    len = read_full(&mut stdout, &mut buf[carry..]);
                    if len == 0 {
                        break;
                    }
                }
                let status = child.wait();
                let mut message = String::new();
                let _ = stderr.read_to_string(&mut message);
                let failed = !matches!(status, Ok(s) if s.success()) && !timeline.stopped();
                timeline.finish(
                    failed.then(|| format!("ffmpeg stopped decoding '{name}': {}", message.trim())),
                );
            })
            .map_err(|e| Error::NoFfmpeg {
                input: input.to_string(),
                reason: format!("cannot start the audio thread: {e}"),
            })?;
        Ok(FileInput {
            feed,
            thread: Some(thread),
        })
    }

    /// The feed the engine reads.
    pub fn feed(&self) -> Feed {
        self.feed.clone()
    }

    /// Waits for the whole input to be analysed (tests and benches; a show never does).
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FileInput {
    /// Stops the thread (it kills ffmpeg); does not wait for it.
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.feed.timeline().stop();
        }
    }
}

/// Reads until `buf` is full or the end; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    n
}

/// Whether ffprobe finds an audio stream in `input` (false when it cannot tell).
pub fn probe_has_audio(input: &str) -> bool {
    Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "a", "-show_entries"])
        .args(["stream=index", "-of", "csv=p=0", input])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| o.status.success() && !o.stdout.trim_ascii().is_empty())
        .unwrap_or(false)
}
