//! SIGINT and SIGTERM: stop the run at a frame boundary, as a `stop` command would.
//!
//! The first signal posts an urgent `stop` (framepipe-control's side channel, never refused)
//! and is remembered: the run ends at the next frame boundary, the sink finishes on a whole
//! frame and finalises its file, `--stats` is written, and the process exits with 128 + the
//! signal number (130 for SIGINT, 143 for SIGTERM), as a shell expects of a program stopped by
//! a signal. A second signal exits at once with its own status: the way out when the pipeline
//! is stuck (a source blocked reading, a sink blocked writing).
//!
//! Before the run starts (start-up: building, which opens files and FIFOs, waits for a `tcpsrc`
//! sender, connects a `tcpsink`, probes a clip with ffprobe; preparing), nothing has been made
//! and a wait may not end by itself: the first signal then exits at once with the same status
//! (no `--stats`: there was no run). [`Received::running`] marks the end of start-up.
//!
//! The first signal also sets the process's stop request ([`framepipe_core::stop`]), which waits
//! inside elements look at (a `tcpsink` whose receiver stops reading), so that one signal is
//! enough to end the run.
//!
//! Signals are received on a thread of their own (signal-hook's self-pipe), so nothing but a
//! flag is touched inside the signal handler.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use framepipe_control::Stopper;
use signal_hook::consts::signal::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The first stopping signal received (0 = none), and whether start-up is over; shared with
/// the signal thread.
#[derive(Debug, Clone, Default)]
pub struct Received(Arc<AtomicI32>, Arc<AtomicBool>);

impl Received {
    /// The exit status for the signal that stopped the run (128 + its number), if one did.
    pub fn exit_status(&self) -> Option<i32> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            sig => Some(128 + sig),
        }
    }

    /// Start-up is over: the run begins, and a signal from now on stops it at a frame
    /// boundary instead of exiting at once.
    pub fn running(&self) {
        self.1.store(true, Ordering::Release);
    }
}

fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// Catches SIGINT and SIGTERM from now on; the first one stops the run through `stoppers`
/// (one per show: a run of several shows stops them all).
pub fn stop_on_signals(stoppers: Vec<Stopper>) -> std::io::Result<Received> {
    let received = Received::default();
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let first = Arc::clone(&received.0);
    let running = Arc::clone(&received.1);
    std::thread::Builder::new()
        .name("fp-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if first
                    .compare_exchange(0, sig, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    // Waits inside an element (a sink writing to a receiver that does not read)
                    // give up too: the run reaches its end at the first signal.
                    framepipe_core::stop::request();
                    if !running.load(Ordering::Acquire) {
                        crate::say!(
                            "\rframepipe: {} during start-up (before the first frame): quitting",
                            name(sig)
                        );
                        std::process::exit(128 + sig);
                    }
                    for stopper in &stoppers {
                        stopper.stop();
                    }
                    crate::say!(
                        "\rframepipe: {}: stopping at the next frame boundary (again to quit at once)",
                        name(sig)
                    );
                } else {
                    crate::say!("\rframepipe: {} again: quitting at once", name(sig));
                    // The graph is not dropped: end the isolated plugins' processes here.
                    framepipe_frei0r::isolate::end_all();
                    std::process::exit(128 + sig);
                }
            }
        })?;
    Ok(received)
}
