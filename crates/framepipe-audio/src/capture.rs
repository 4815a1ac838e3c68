//! Live capture from a sound card or sound server through cpal (ALSA by default, JACK), and
//! the `--audio` input it shares with files ([`Source`], [`Input`]).
//!
//! ```text
//! device ─ cpal's callback (real time) ─ rtrb rings (samples, stamps) ─ fp-audio-in thread:
//!          mono mix, no allocation,        lock-free, wait-free           gaps filled with
//!          no lock, no syscall                                            silence, resampled to
//!                                                                          RATE, Analyzer::push,
//!                                                                          Timeline::publish
//! ```
//!
//! **The callback** mixes the device's channels to mono and pushes them into a wait-free
//! single-producer ring ([`rtrb`]), with a [`Stamp`] per callback: the block's first sample
//! number, its length, what fitted, and its capture time (cpal's
//! [`InputStreamTimestamp::capture`](cpal::InputStreamTimestamp), in ns since the first
//! block's). It allocates nothing, takes no lock and makes no syscall; what does not fit
//! (the analysis thread fell a second behind) is counted as an overrun and replaced by
//! silence, so the sample count stays the capture's time.
//!
//! **The analysis thread** (`fp-audio-in`) owns the stream (cpal's streams stay on the
//! thread that made them), drains the rings every 2 ms, fills a gap in the capture times
//! (an xrun: the device lost samples) with silence so that sample `n` of the timeline is
//! `n / RATE` seconds after the capture began, resamples to [`RATE`] when the device runs
//! at another rate (linear), analyses and publishes. Xruns and overruns are reported on
//! stderr once per burst (at most once a second); a device that vanishes (a stream error:
//! the card unplugged, the JACK server stopped) is reported once and the timeline goes on
//! with silence at the real-time rate, so the show goes on. Meanwhile the thread tries to
//! open the device again, 0.25 s after it vanished and then with a doubling backoff (at most
//! every 4 s); when it is back (the server restarted, the card plugged in again) the new
//! stream feeds the same timeline and that is reported too. All of it on the `fp-audio-in`
//! thread, never on the frame path.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use cpal::{FromSample, SampleFormat, SizedSample, StreamError};

use crate::{Analyzer, BandEdges, Feed, FileInput, Timeline, RATE};

/// Why an `--audio` input could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// A live input could not be opened.
    #[error("cannot capture the audio input '{input}': {reason}")]
    Open {
        /// The input named (`default`, `alsa:NAME`, `jack`).
        input: String,
        /// Why, and the fix.
        reason: String,
    },
    /// A file input could not start.
    #[error(transparent)]
    File(#[from] crate::Error),
}

/// The result of starting an input.
pub type Result<T> = std::result::Result<T, CaptureError>;

/// Seconds of mono samples the ring between the callback and the analysis holds.
const RING_SECONDS: u32 = 1;
/// Callbacks the stamp ring holds (a second of 64-sample blocks at 48 kHz).
const STAMPS: usize = 1024;
/// The most samples the analysis thread takes from the ring at a time.
const CHUNK: usize = 1024;
/// A capture time this far past the samples' own time is a gap (an xrun), filled with silence.
const GAP_NS: i64 = 20_000_000;
/// How often the analysis thread drains the rings.
const POLL: Duration = Duration::from_millis(2);
/// The shortest time between two reports of xruns or overruns.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// The first retry after a device vanished, and the longest backoff between retries.
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(4);
/// The JACK client's name: its ports are `framepipe_in:in_0`, `framepipe_in:in_1`.
pub const JACK_CLIENT: &str = "framepipe";

/// What `--audio SOURCE` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file or stream ffmpeg reads (anything that is not one of the live names below; a
    /// file called `default` or `jack` is `./default`, `./jack`).
    File(String),
    /// A live input.
    Live(LiveSpec),
}

/// A live input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveSpec {
    /// `default`: the default host's default input device.
    Default,
    /// `alsa`: ALSA's default input; `alsa:NAME`: the ALSA device of that name (as
    /// `framepipe audio-devices` lists them, e.g. `alsa:hw:CARD=PCH,DEV=0`, `alsa:null`).
    Alsa(Option<String>),
    /// `jack`: a JACK client `framepipe_in` with two input ports connected to the server's
    /// `system:capture_*` ports (connect others with `jack_connect`, qjackctl, ...).
    Jack,
}

impl Source {
    /// Parses `--audio`'s value: `default`, `alsa`, `alsa:NAME`, `jack`, else a file.
    pub fn parse(text: &str) -> Source {
        match text {
            "default" => Source::Live(LiveSpec::Default),
            "alsa" => Source::Live(LiveSpec::Alsa(None)),
            "jack" => Source::Live(LiveSpec::Jack),
            _ => match text.strip_prefix("alsa:") {
                Some(name) if !name.is_empty() => {
                    Source::Live(LiveSpec::Alsa(Some(name.to_string())))
                }
                _ => Source::File(text.to_string()),
            },
        }
    }
}

impl std::fmt::Display for LiveSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiveSpec::Default => write!(f, "default"),
            LiveSpec::Alsa(None) => write!(f, "alsa"),
            LiveSpec::Alsa(Some(name)) => write!(f, "alsa:{name}"),
            LiveSpec::Jack => write!(f, "jack"),
        }
    }
}

/// The show's audio input, started: a file being decoded or a live capture.
#[derive(Debug)]
pub enum Input {
    /// A file or stream (decode.rs).
    File(FileInput),
    /// A live capture.
    Live(LiveInput),
}

impl Input {
    /// Starts what `source` names (see [`Source::parse`]), analysed with `bands`.
    pub fn start(source: &str, bands: &BandEdges) -> Result<Input> {
        Ok(match Source::parse(source) {
            Source::File(path) => Input::File(FileInput::start(&path, bands)?),
            Source::Live(spec) => Input::Live(LiveInput::start(&spec, bands)?),
        })
    }

    /// The feed the engine reads (exact for a file, live for a capture).
    pub fn feed(&self) -> Feed {
        match self {
            Input::File(f) => f.feed(),
            Input::Live(l) => l.feed(),
        }
    }
}

/// One callback's block, as the analysis thread needs it.
#[derive(Debug, Clone, Copy)]
struct Stamp {
    /// The block's first sample number (mono, device rate), dropped ones counted.
    sample: u64,
    /// Samples in the block.
    frames: u32,
    /// Of which in the ring (the rest did not fit).
    written: u32,
    /// Capture time of the first sample, ns since the first block's.
    capture_ns: i64,
}

/// Counters the callback, the error callback and the analysis thread share.
#[derive(Debug, Default)]
struct Shared {
    /// Samples the callback could not put in the ring (the analysis fell behind).
    overrun_samples: AtomicU64,
    /// Xruns the device or server reported, and gaps found in the capture times.
    xruns: AtomicU64,
    /// Samples of silence put in gaps.
    gap_samples: AtomicU64,
    /// Errors reported that are neither xruns nor a vanished device.
    other_errors: AtomicU64,
    /// The device vanished (a stream error of the current stream says so).
    vanished: AtomicBool,
    /// The current stream's number (from 0; +1 at each reconnection): an error callback of
    /// an older stream changes nothing.
    generation: AtomicU64,
    /// Times the device came back after vanishing.
    reconnects: AtomicU64,
    vanished_why: OnceLock<String>,
    /// Largest callback-minus-capture time seen, ns (the input's own latency).
    input_latency_ns: AtomicU64,
    /// Samples (mono, device rate) the callback delivered.
    captured: AtomicU64,
    stop: AtomicBool,
}

/// What a live capture has seen so far ([`LiveInput::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureStats {
    /// Samples the device delivered (mono, at its rate).
    pub captured: u64,
    /// Samples lost because the analysis fell behind (replaced by silence).
    pub overrun_samples: u64,
    /// Xruns reported by the device or server, and gaps found in the capture times.
    pub xruns: u64,
    /// Samples of silence put in those gaps.
    pub gap_samples: u64,
    /// Whether the device is gone now (the timeline goes on with silence until it is back).
    pub vanished: bool,
    /// Times it came back after vanishing (reopened by the capture thread).
    pub reconnects: u64,
    /// Largest time from capture to callback, ns.
    pub input_latency_ns: u64,
}

/// How a live input was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedDevice {
    /// cpal's host (ALSA, JACK).
    pub host: String,
    /// The device's name (for JACK, the client's: `framepipe_in`).
    pub device: String,
    /// Its sample rate, Hz (resampled to [`RATE`] when it differs).
    pub rate: u32,
    /// Its channels (mixed to mono).
    pub channels: u16,
}

/// A live capture: the device's stream (on the `fp-audio-in` thread) and the feed.
#[derive(Debug)]
pub struct LiveInput {
    feed: Feed,
    spec: LiveSpec,
    opened: OpenedDevice,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl LiveInput {
    /// Opens `spec`'s device and starts capturing and analysing with `bands`. Fails when the
    /// host or device is not there (the message lists what is), or it cannot capture.
    pub fn start(spec: &LiveSpec, bands: &BandEdges) -> Result<LiveInput> {
        let timeline = Arc::new(Timeline::new());
        timeline.set_bands(bands.count());
        let feed = Feed::new(Arc::clone(&timeline), false, 0);
        let shared = Arc::new(Shared::default());
        let analyzer = Analyzer::new(bands);
        let (tx, rx) = mpsc::sync_channel(1);
        let thread = {
            let thread_spec = spec.clone();
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("fp-audio-in".into())
                .spawn(move || run(&thread_spec, analyzer, &timeline, &shared, tx))
                .map_err(|e| CaptureError::Open {
                    input: spec.to_string(),
                    reason: format!("cannot start the audio thread: {e}"),
                })?
        };
        match rx.recv() {
            Ok(Ok(opened)) => Ok(LiveInput {
                feed,
                spec: spec.clone(),
                opened,
                shared,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(CaptureError::Open {
                input: spec.to_string(),
                reason: "the audio thread ended before opening the device".into(),
            }),
        }
    }

    /// The feed the engine reads.
    pub fn feed(&self) -> Feed {
        self.feed.clone()
    }

    /// What was opened.
    pub fn opened(&self) -> &OpenedDevice {
        &self.opened
    }

    /// What it named.
    pub fn spec(&self) -> &LiveSpec {
        &self.spec
    }

    /// Counters so far.
    pub fn stats(&self) -> CaptureStats {
        let s = &self.shared;
        CaptureStats {
            captured: s.captured.load(Ordering::Relaxed),
            overrun_samples: s.overrun_samples.load(Ordering::Relaxed),
            xruns: s.xruns.load(Ordering::Relaxed),
            gap_samples: s.gap_samples.load(Ordering::Relaxed),
            vanished: s.vanished.load(Ordering::Acquire),
            reconnects: s.reconnects.load(Ordering::Relaxed),
            input_latency_ns: s.input_latency_ns.load(Ordering::Relaxed),
        }
    }

    /// Why the device vanished, if it did.
    pub fn vanished_why(&self) -> Option<&str> {
        self.shared.vanished_why.get().map(String::as_str)
    }

    /// Stops the capture and waits for its thread (which closes the stream).
    pub fn stop(mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LiveInput {
    /// Asks the thread to stop (it closes the stream); does not wait for it.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.feed.timeline().stop();
    }
}

/// The `fp-audio-in` thread: opens the stream, says how on `opened`, then drains, analyses
/// and publishes until asked to stop.
fn run(
    spec: &LiveSpec,
    mut analyzer: Analyzer,
    timeline: &Timeline,
    shared: &Arc<Shared>,
    opened: mpsc::SyncSender<Result<OpenedDevice>>,
) {
    let (stream, device, mut samples, mut stamps) = match open(spec, shared, 0) {
        Ok(v) => v,
        Err(e) => {
            let _ = opened.send(Err(e));
            return;
        }
    };
    if let Err(e) = stream.play() {
        let _ = opened.send(Err(CaptureError::Open {
            input: spec.to_string(),
            reason: format!("cannot start capturing: {e}"),
        }));
        return;
    }
    let mut rate = device.rate;
    let _ = opened.send(Ok(device));
    // `None` while the device is gone.
    let mut stream = Some(stream);

    let mut out = Output {
        analyzer: &mut analyzer,
        timeline,
        resampler: Linear::new(rate),
        buf: vec![0.0; Linear::max_out(CHUNK, rate)],
    };
    let mut chunk = [0.0f32; CHUNK];
    // Samples (device rate) handed to the analysis, silence included: the timeline's clock.
    let mut fed: u64 = 0;
    // `fed` less the stamps' sample numbers: the silence put in gaps so far.
    let mut gap_offset: u64 = 0;
    let mut reported = (0u64, 0u64);
    let mut last_report: Option<Instant> = None;
    let mut silent_since: Option<(Instant, u64)> = None;
    // While the device is gone: when to try opening it again, and the backoff after that.
    let mut retry: Option<(Instant, Duration)> = None;
    let name = spec.to_string();
    while !shared.stop.load(Ordering::Acquire) && !timeline.stopped() {
        let mut busy = false;
        while let Ok(stamp) = stamps.pop() {
            busy = true;
            // A capture time past the samples' own time is a gap: silence fills it.
            let own_ns =
                ((stamp.sample + gap_offset) as i128 * 1_000_000_000 / rate as i128) as i64;
            if stamp.capture_ns - own_ns > GAP_NS {
                let missing =
                    ((stamp.capture_ns - own_ns) as i128 * rate as i128 / 1_000_000_000) as u64;
                out.silence(missing, &mut chunk);
                fed += missing;
                gap_offset += missing;
                shared.xruns.fetch_add(1, Ordering::Relaxed);
                shared.gap_samples.fetch_add(missing, Ordering::Relaxed);
            }
            let mut left = stamp.written as usize;
            while left > 0 {
                let n = left.min(CHUNK);
                let Ok(read) = samples.read_chunk(n) else {
                    break; // cannot happen: a stamp is pushed after its samples
                };
                let (a, b) = read.as_slices();
                chunk[..a.len()].copy_from_slice(a);
                chunk[a.len()..n].copy_from_slice(b);
                read.commit_all();
                out.push(&chunk[..n]);
                left -= n;
            }
            // What did not fit in the ring: silence, so the count stays the capture's time.
            let lost = u64::from(stamp.frames - stamp.written);
            out.silence(lost, &mut chunk);
            fed += u64::from(stamp.written) + lost;
        }
        if shared.vanished.load(Ordering::Acquire) {
            // The device is gone: silence at the real-time rate, so frames read silence.
            let (since, at) = *silent_since.get_or_insert_with(|| {
                // The dead stream is closed now, before a new one opens: libjack crashes
                // (in jack_deactivate) closing a client of a dead server once another client
                // of the process is connected to a new server.
                drop(stream.take());
                eprintln!(
                    "audio: warning: the audio input '{name}' vanished ({}); the show goes on with silence",
                    shared.vanished_why.get().map_or("no reason given", String::as_str)
                );
                (Instant::now(), fed)
            });
            let due = at + (since.elapsed().as_nanos() * rate as u128 / 1_000_000_000) as u64;
            if due > fed {
                out.silence(due - fed, &mut chunk);
                fed = due;
            }
            // Try to open it again (off the frame path: this thread only).
            let (when, backoff) = *retry.get_or_insert((since + RETRY_FIRST, RETRY_FIRST));
            if Instant::now() >= when {
                let generation = shared.generation.fetch_add(1, Ordering::AcqRel) + 1;
                match open(spec, shared, generation) {
                    Ok((s, device, smp, stm)) if s.play().is_ok() => {
                        // The new stream's samples continue the timeline (the old stream's
                        // callbacks no longer count: another generation).
                        stream = Some(s);
                        samples = smp;
                        stamps = stm;
                        gap_offset = 0;
                        if device.rate != rate {
                            rate = device.rate;
                            out.resampler = Linear::new(rate);
                            out.buf = vec![0.0; Linear::max_out(CHUNK, rate)];
                        }
                        shared.vanished.store(false, Ordering::Release);
                        shared.reconnects.fetch_add(1, Ordering::Relaxed);
                        eprintln!(
                            "audio: the audio input '{name}' is back ({}, {} Hz) after {:.1} s of silence",
                            device.device,
                            device.rate,
                            since.elapsed().as_secs_f64()
                        );
                        silent_since = None;
                        retry = None;
                    }
                    _ => {
                        let next = (backoff * 2).min(RETRY_MAX);
                        retry = Some((Instant::now() + backoff, next));
                    }
                }
            }
        }
        let now = (
            shared.xruns.load(Ordering::Relaxed),
            shared.overrun_samples.load(Ordering::Relaxed),
        );
        if now != reported && last_report.is_none_or(|t| t.elapsed() >= REPORT_EVERY) {
            eprintln!(
                "audio: warning: the audio input '{name}' lost samples: {} xrun(s) ({} ms filled with silence), {} sample(s) the analysis was too late for",
                now.0 - reported.0,
                shared.gap_samples.load(Ordering::Relaxed) * 1000 / u64::from(rate),
                now.1 - reported.1
            );
            reported = now;
            last_report = Some(Instant::now());
        }
        if !busy {
            std::thread::sleep(POLL);
        }
    }
    drop(stream);
}

/// The analysis side of the thread: resampling, analysis, publication.
struct Output<'a> {
    analyzer: &'a mut Analyzer,
    timeline: &'a Timeline,
    resampler: Linear,
    buf: Vec<f32>,
}

impl Output<'_> {
    fn push(&mut self, samples: &[f32]) {
        let timeline = self.timeline;
        let publish =
            |an: &Analyzer| timeline.publish_with(an.point(), an.waveform(), an.spectrum());
        if self.resampler.passthrough() {
            self.analyzer.push(samples, 1, publish);
        } else {
            let n = self.resampler.run(samples, &mut self.buf);
            self.analyzer.push(&self.buf[..n], 1, publish);
        }
    }

    fn silence(&mut self, mut n: u64, chunk: &mut [f32; CHUNK]) {
        chunk.fill(0.0);
        while n > 0 {
            let k = n.min(CHUNK as u64) as usize;
            self.push(&chunk[..k]);
            n -= k as u64;
        }
    }
}

/// Linear resampling from a device's rate to [`RATE`] (state kept across blocks).
#[derive(Debug)]
struct Linear {
    /// Input samples per output sample.
    step: f64,
    /// Position of the next output, in input samples from the block's start (-1: `last`).
    t: f64,
    last: f32,
}

impl Linear {
    fn new(rate: u32) -> Self {
        Linear {
            step: rate as f64 / RATE as f64,
            t: 0.0,
            last: 0.0,
        }
    }

    fn passthrough(&self) -> bool {
        self.step == 1.0
    }

    /// The most outputs `n` inputs give at `rate`.
    fn max_out(n: usize, rate: u32) -> usize {
        (n as u64 * RATE as u64 / rate.max(1) as u64) as usize + 2
    }

    /// Resamples `input` into `out`; returns the outputs written.
    fn run(&mut self, input: &[f32], out: &mut [f32]) -> usize {
        let n = input.len();
        if n == 0 {
            return 0;
        }
        let at = |i: isize| if i < 0 { self.last } else { input[i as usize] };
        let mut k = 0;
        while self.t < (n - 1) as f64 && k < out.len() {
            let i = self.t.floor();
            let frac = (self.t - i) as f32;
            let (x0, x1) = (at(i as isize), at(i as isize + 1));
            out[k] = x0 + (x1 - x0) * frac;
            k += 1;
            self.t += self.step;
        }
        self.t -= n as f64;
        self.last = input[n - 1];
        k
    }
}

type Opened = (
    cpal::Stream,
    OpenedDevice,
    rtrb::Consumer<f32>,
    rtrb::Consumer<Stamp>,
);

/// Finds `spec`'s device and builds its input stream (not yet playing).
fn open(spec: &LiveSpec, shared: &Arc<Shared>, generation: u64) -> Result<Opened> {
    let fail = |reason: String| CaptureError::Open {
        input: spec.to_string(),
        reason,
    };
    let (host_name, device) = match spec {
        LiveSpec::Default => {
            let host = cpal::default_host();
            let device = host.default_input_device().ok_or_else(|| {
                fail(format!(
                    "{} has no default input device (framepipe audio-devices lists what there is)",
                    host.id().name()
                ))
            })?;
            (host.id().name().to_string(), device)
        }
        LiveSpec::Alsa(name) => {
            let host = cpal::host_from_id(cpal::HostId::Alsa)
                .map_err(|e| fail(format!("ALSA is not available: {e}")))?;
            let device = match name {
                None => host.default_input_device(),
                Some(name) => host
                    .input_devices()
                    .map_err(|e| fail(format!("cannot list ALSA's devices: {e}")))?
                    .find(|d| d.name().is_ok_and(|n| &n == name)),
            };
            let device = device.ok_or_else(|| {
                let names: Vec<String> = host
                    .input_devices()
                    .map(|ds| ds.filter_map(|d| d.name().ok()).collect())
                    .unwrap_or_default();
                fail(format!(
                    "no such ALSA input device; there are: {} (framepipe audio-devices lists them with their formats)",
                    if names.is_empty() { "none".to_string() } else { names.join(", ") }
                ))
            })?;
            ("ALSA".to_string(), device)
        }
        LiveSpec::Jack => {
            // A client of our own name (cpal's host would name it cpal_client_in), its ports
            // connected to system:capture_*; the server is not started for us.
            let device = cpal::platform::JackDevice::default_input_device(JACK_CLIENT, true, false)
                .map_err(|e| {
                    fail(format!(
                        "no JACK server answers ({e}); start one (jackd -d alsa, or qjackctl; the client library: apt-get install libjack-jackd2-0)"
                    ))
                })?;
            ("JACK".to_string(), cpal::Device::from(device))
        }
    };
    let config = device
        .default_input_config()
        .map_err(|e| fail(format!("the device has no input configuration: {e}")))?;
    // 48 kHz when the device offers it: no resampling then.
    let config = device
        .supported_input_configs()
        .ok()
        .and_then(|mut cs| {
            cs.find(|c| {
                c.sample_format() == config.sample_format()
                    && c.channels() == config.channels()
                    && c.min_sample_rate().0 <= RATE
                    && RATE <= c.max_sample_rate().0
            })
        })
        .map(|c| c.with_sample_rate(cpal::SampleRate(RATE)))
        .unwrap_or(config);
    let rate = config.sample_rate().0;
    let channels = config.channels();
    let (tx, rx) = rtrb::RingBuffer::<f32>::new((rate * RING_SECONDS) as usize);
    let (stx, srx) = rtrb::RingBuffer::<Stamp>::new(STAMPS);
    let stream_config: cpal::StreamConfig = config.clone().into();
    let on_error = error_callback(Arc::clone(shared), generation);
    let callback = Callback {
        samples: tx,
        stamps: stx,
        channels: channels as usize,
        next: 0,
        first: None,
        shared: Arc::clone(shared),
    };
    let built = match config.sample_format() {
        SampleFormat::F32 => build::<f32>(&device, &stream_config, callback, on_error),
        SampleFormat::I16 => build::<i16>(&device, &stream_config, callback, on_error),
        SampleFormat::I32 => build::<i32>(&device, &stream_config, callback, on_error),
        SampleFormat::U16 => build::<u16>(&device, &stream_config, callback, on_error),
        SampleFormat::U8 => build::<u8>(&device, &stream_config, callback, on_error),
        SampleFormat::F64 => build::<f64>(&device, &stream_config, callback, on_error),
        other => return Err(fail(format!("unsupported sample format {other}"))),
    };
    let stream = built.map_err(|e| fail(format!("cannot open the input stream: {e}")))?;
    let opened = OpenedDevice {
        host: host_name,
        device: device.name().unwrap_or_else(|_| "?".into()),
        rate,
        channels,
    };
    Ok((stream, opened, rx, srx))
}

fn build<T: SizedSample + Send + 'static>(
    device: &cpal::Device,
    config: &cpal::StreamConfig,
    mut callback: Callback,
    on_error: impl FnMut(StreamError) + Send + 'static,
) -> std::result::Result<cpal::Stream, cpal::BuildStreamError>
where
    f32: FromSample<T>,
{
    device.build_input_stream(
        config,
        move |data: &[T], info: &cpal::InputCallbackInfo| callback.block(data, info),
        on_error,
        None,
    )
}

/// The real-time side: what the device's callback does with each block.
struct Callback {
    samples: rtrb::Producer<f32>,
    stamps: rtrb::Producer<Stamp>,
    channels: usize,
    /// The next block's first sample number.
    next: u64,
    first: Option<cpal::StreamInstant>,
    shared: Arc<Shared>,
}

impl Callback {
    /// Mixes `data` to mono into the ring, with its stamp. No allocation, lock or syscall.
    fn block<T: SizedSample>(&mut self, data: &[T], info: &cpal::InputCallbackInfo)
    where
        f32: FromSample<T>,
    {
        let ts = info.timestamp();
        let first = *self.first.get_or_insert(ts.capture);
        let capture_ns = ts
            .capture
            .duration_since(&first)
            .map_or(0, |d| d.as_nanos() as i64);
        let latency_ns = ts
            .callback
            .duration_since(&ts.capture)
            .map_or(0, |d| d.as_nanos() as u64);
        self.block_at(data, capture_ns, latency_ns);
    }

    /// [`Callback::block`] once the times are known: `capture_ns` since the first block's,
    /// `latency_ns` from capture to callback.
    fn block_at<T: SizedSample>(&mut self, data: &[T], capture_ns: i64, latency_ns: u64)
    where
        f32: FromSample<T>,
    {
        let ch = self.channels.max(1);
        let frames = data.len() / ch;
        self.shared
            .input_latency_ns
            .fetch_max(latency_ns, Ordering::Relaxed);
        // A block goes in whole or in part only when its stamp has room too.
        let fit = if self.stamps.is_full() {
            0
        } else {
            frames.min(self.samples.slots())
        };
        if fit > 0 {
            if let Ok(chunk) = self.samples.write_chunk_uninit(fit) {
                let scale = 1.0 / ch as f32;
                chunk.fill_from_iter(
                    data.chunks_exact(ch)
                        .map(|f| f.iter().map(|&s| s.to_sample::<f32>()).sum::<f32>() * scale),
                );
            }
        }
        if fit < frames {
            self.shared
                .overrun_samples
                .fetch_add((frames - fit) as u64, Ordering::Relaxed);
        }
        if !self.stamps.is_full() {
            let _ = self.stamps.push(Stamp {
                sample: self.next,
                frames: frames as u32,
                written: fit as u32,
                capture_ns,
            });
        }
        self.next += frames as u64;
        self.shared
            .captured
            .fetch_add(frames as u64, Ordering::Relaxed);
    }
}

/// The stream's error callback (cpal's own thread, or the device's): counts xruns and
/// marks a vanished device; the analysis thread reports them.
fn error_callback(
    shared: Arc<Shared>,
    generation: u64,
) -> impl FnMut(StreamError) + Send + 'static {
    move |e| match e {
        // An error of a stream replaced since: not this device's any more.
        _ if shared.generation.load(Ordering::Acquire) != generation => {}
        StreamError::DeviceNotAvailable => {
            let _ = shared
                .vanished_why
                .set("the device is no longer available".into());
            shared.vanished.store(true, Ordering::Release);
        }
        StreamError::BackendSpecific { err } => {
            let d = err.description.to_ascii_lowercase();
            if d.contains("xrun") || d.contains("overrun") || d.contains("underrun") {
                shared.xruns.fetch_add(1, Ordering::Relaxed);
            } else if d.contains("shut down")
                || d.contains("shutdown")
                || d.contains("no such device")
                || d.contains("disconnected")
            {
                let _ = shared.vanished_why.set(err.description);
                shared.vanished.store(true, Ordering::Release);
            } else {
                shared.other_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// `framepipe audio-devices`: every host cpal has here and its input devices, with their
/// default configuration, as lines of text.
pub fn list_devices() -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for id in cpal::available_hosts() {
        let _ = writeln!(out, "{}:", id.name());
        if id == cpal::HostId::Jack {
            // Asked directly: cpal's JACK host prints its errors on stdout when no server runs.
            match cpal::platform::JackDevice::default_input_device(JACK_CLIENT, false, false) {
                Ok(d) => {
                    let _ = writeln!(out, "  --audio jack (default): {}", describe(&d));
                }
                Err(_) => {
                    let _ = writeln!(out, "  (no JACK server running)");
                }
            }
            continue;
        }
        let host = match cpal::host_from_id(id) {
            Ok(h) => h,
            Err(e) => {
                let _ = writeln!(out, "  (not available: {e})");
                continue;
            }
        };
        let default = host.default_input_device().and_then(|d| d.name().ok());
        let devices = match host.input_devices() {
            Ok(d) => d,
            Err(e) => {
                let _ = writeln!(out, "  (cannot list devices: {e})");
                continue;
            }
        };
        let mut any = false;
        for d in devices {
            let Ok(name) = d.name() else { continue };
            any = true;
            let config = describe(&d);
            let arg = format!("alsa:{name}");
            let mark = if default.as_deref() == Some(&name) {
                " (default)"
            } else {
                ""
            };
            let _ = writeln!(out, "  --audio {arg}{mark}: {config}");
        }
        if !any {
            let _ = writeln!(out, "  (no input device)");
        }
    }
    out
}

/// A device's default input configuration, in words.
fn describe(d: &impl DeviceTrait) -> String {
    match d.default_input_config() {
        Ok(c) => format!(
            "{} ch, {} Hz, {}",
            c.channels(),
            c.sample_rate().0,
            c.sample_format()
        ),
        Err(e) => format!("no input configuration: {e}"),
    }
}

#[cfg(test)]
#[global_allocator]
static COUNTING: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_sources_parse_as_live_names_or_files() {
        let live = |s| Source::Live(s);
        assert_eq!(Source::parse("default"), live(LiveSpec::Default));
        assert_eq!(Source::parse("jack"), live(LiveSpec::Jack));
        assert_eq!(Source::parse("alsa"), live(LiveSpec::Alsa(None)));
        assert_eq!(
            Source::parse("alsa:hw:CARD=PCH,DEV=0"),
            live(LiveSpec::Alsa(Some("hw:CARD=PCH,DEV=0".into())))
        );
        assert_eq!(Source::parse("./jack"), Source::File("./jack".into()));
        assert_eq!(Source::parse("set.mp3"), Source::File("set.mp3".into()));
        assert_eq!(Source::parse("alsa:"), Source::File("alsa:".into()));
    }

    #[test]
    fn the_callback_mixes_to_mono_stamps_each_block_and_counts_what_does_not_fit_without_allocating(
    ) {
        let shared = Arc::new(Shared::default());
        let (tx, mut rx) = rtrb::RingBuffer::<f32>::new(300);
        let (stx, mut srx) = rtrb::RingBuffer::<Stamp>::new(STAMPS);
        let mut cb = Callback {
            samples: tx,
            stamps: stx,
            channels: 2,
            next: 0,
            first: None,
            shared: Arc::clone(&shared),
        };
        // 128 stereo frames of i16: left 16384 (0.5), right 0, so the mono mix is 0.25.
        let block: Vec<i16> = (0..256)
            .map(|i| if i % 2 == 0 { 16384 } else { 0 })
            .collect();
        let before = framepipe_testkit::this_thread();
        for k in 0..3 {
            cb.block_at(&block, k * 2_666_667, 1_000_000);
        }
        assert_eq!(
            framepipe_testkit::this_thread() - before,
            0,
            "the callback allocated"
        );
        // 300 slots: two blocks whole, 44 samples of the third; 84 overran.
        let stamps: Vec<(u64, u32, u32)> = std::iter::from_fn(|| srx.pop().ok())
            .map(|s| (s.sample, s.frames, s.written))
            .collect();
        assert_eq!(stamps, [(0, 128, 128), (128, 128, 128), (256, 128, 44)]);
        assert_eq!(rx.slots(), 300);
        assert!(std::iter::from_fn(|| rx.pop().ok()).all(|v| v == 0.25));
        assert_eq!(shared.overrun_samples.load(Ordering::Relaxed), 84);
        assert_eq!(shared.captured.load(Ordering::Relaxed), 384);
        assert_eq!(shared.input_latency_ns.load(Ordering::Relaxed), 1_000_000);
    }

    #[test]
    fn linear_resampling_keeps_a_ramp_a_ramp_across_blocks() {
        // 24 kHz → 48 kHz: each input sample gives two outputs, halfway values between.
        let mut r = Linear::new(24_000);
        let mut out = [0.0f32; 64];
        let mut got = Vec::new();
        for block in [[1.0f32, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]] {
            let n = r.run(&block, &mut out);
            got.extend_from_slice(&out[..n]);
        }
        // The first output is the first input; each later one 0.5 further, to 7.5.
        let want: Vec<f32> = (0..14).map(|i| 1.0 + i as f32 * 0.5).collect();
        assert_eq!(got, want);
    }
}
