//! How a run stops on SIGINT and SIGTERM: one model, [`Stop`], with the run's two phases and
//! what a signal does in each ([`Stop::on_signal`], the one decision table).
//!
//! * **Start-up** (building, which opens files and FIFOs, waits for a `tcpsrc` sender,
//!   connects a `tcpsink`, probes a clip with ffprobe; preparing): nothing has been made and a
//!   wait may not end by itself, so the first signal exits at once with 128 + the signal (130
//!   for SIGINT, 143 for SIGTERM; no `--stats`: there was no run). [`Stop::running`] ends
//!   start-up.
//! * **Running**: the first signal posts an urgent `stop` to every show's queue
//!   (framepipe-control's side channel, never refused) and is remembered: each show ends at its
//!   next frame boundary, its sinks finish on a whole frame and finalise their files,
//!   `--stats` is written, and the process exits with 128 + the signal
//!   ([`Stop::exit_status`]), as a shell expects of a program stopped by a signal.
//! * **Either phase**: the first signal also sets the process's stop request
//!   ([`framepipe_core::stop`]), which waits inside elements look at (a `tcpsink` whose
//!   receiver stops reading), so that one signal is enough to end the run; a second signal
//!   exits at once with its own status: the way out when the pipeline is stuck (a source
//!   blocked reading, a sink blocked writing).
//!
//! Signals are received on a thread of their own (`fp-signals`, signal-hook's self-pipe), so
//! nothing but a flag is touched inside the signal handler.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use framepipe_control::Stopper;
use signal_hook::consts::signal::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The run's stop state, shared with the signal thread: the first stopping signal received,
/// and whether start-up is over.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<State>);

#[derive(Debug, Default)]
struct State {
    /// The first stopping signal received (0 = none).
    first: AtomicI32,
    /// Whether the run has started (start-up is over).
    running: AtomicBool,
}

/// What a signal does, decided by [`Stop::on_signal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// The first signal during start-up: exit now with 128 + the signal.
    QuitStartUp,
    /// The first signal while running: stop every show at its next frame boundary.
    StopShows,
    /// A second signal: exit now with 128 + the signal.
    QuitAgain,
}

impl Stop {
    /// The exit status for the signal that stopped the run (128 + its number), if one did.
    pub fn exit_status(&self) -> Option<i32> {
        match self.0.first.load(Ordering::Acquire) {
            0 => None,
            sig => Some(128 + sig),
        }
    }

    /// Start-up is over: the run begins, and a signal from now on stops it at a frame
    /// boundary instead of exiting at once.
    pub fn running(&self) {
        self.0.running.store(true, Ordering::Release);
    }

    /// Takes signal `sig`: remembered if it is the first (and the process's stop request
    /// set), and what it does now.
    fn on_signal(&self, sig: i32) -> Action {
        let first = self
            .0
            .first
            .compare_exchange(0, sig, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if !first {
            return Action::QuitAgain;
        }
        // Waits inside an element (a sink writing to a receiver that does not read) give up
        // too: the run reaches its end at the first signal.
        framepipe_core::stop::request();
        if self.0.running.load(Ordering::Acquire) {
            Action::StopShows
        } else {
            Action::QuitStartUp
        }
    }
}

fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// Catches SIGINT and SIGTERM from now on on the `fp-signals` thread; the first one stops the
/// run through `stoppers` (one per show: a run of several shows stops them all).
pub fn stop_on_signals(stoppers: Vec<Stopper>) -> std::io::Result<Stop> {
    let stop = Stop::default();
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let seen = stop.clone();
    std::thread::Builder::new()
        .name("fp-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                match seen.on_signal(sig) {
                    Action::QuitStartUp => {
                        crate::say!(
                            "\rframepipe: {} during start-up (before the first frame): quitting",
                            name(sig)
                        );
                        std::process::exit(128 + sig);
                    }
                    Action::StopShows => {
                        for stopper in &stoppers {
                            stopper.stop();
                        }
                        crate::say!(
                            "\rframepipe: {}: stopping at the next frame boundary (again to quit at once)",
                            name(sig)
                        );
                    }
                    Action::QuitAgain => {
                        crate::say!("\rframepipe: {} again: quitting at once", name(sig));
                        // The graph is not dropped: end the isolated plugins' processes here.
                        framepipe_frei0r::isolate::end_all();
                        std::process::exit(128 + sig);
                    }
                }
            }
        })?;
    Ok(stop)
}

#[cfg(test)]
mod tests {
    use super::{Action, Stop};
    use signal_hook::consts::signal::{SIGINT, SIGTERM};

    #[test]
    fn the_first_signal_quits_during_start_up_and_stops_the_shows_once_running() {
        let starting = Stop::default();
        assert_eq!(starting.on_signal(SIGINT), Action::QuitStartUp);
        assert_eq!(starting.exit_status(), Some(130));
        let running = Stop::default();
        running.running();
        assert_eq!(running.exit_status(), None);
        assert_eq!(running.on_signal(SIGTERM), Action::StopShows);
        assert_eq!(running.exit_status(), Some(143));
        assert!(framepipe_core::stop::requested());
    }

    #[test]
    fn a_second_signal_quits_at_once_and_the_first_one_sets_the_status() {
        let stop = Stop::default();
        stop.running();
        assert_eq!(stop.on_signal(SIGTERM), Action::StopShows);
        assert_eq!(stop.on_signal(SIGINT), Action::QuitAgain);
        assert_eq!(stop.exit_status(), Some(143));
    }
}
