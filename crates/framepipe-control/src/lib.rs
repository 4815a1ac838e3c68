//! framepipe's live control: what a running engine can be told, how it is told, and the
//! oscillators that move parameters.
//!
//! * [`Command`]: set a parameter, attach/change/remove an oscillator, bypass an effect, change
//!   the master speed, pause, step, resume, stop; [`Command::parse`] reads the one-line text
//!   protocol used on stdin (documented in `docs/CONTROL.md`), [`Command`]'s `Display` writes it.
//! * [`command_queue`]: a bounded multi-producer queue ([`CommandSender`], cloneable: stdin now,
//!   web/OSC/MIDI later) read by the frame path ([`CommandReader`]) once per frame. A full queue
//!   hands the command back ([`Full`]); nothing is dropped, nobody blocks. Every posted command
//!   gets a [`Ticket`] and later exactly one [`Reply`] (applied at frame N, or refused with a
//!   reason) on a bounded return path read with [`Replies`]. `stop`, `pause` and
//!   `resume` are never refused (a side channel of atomics; [`Stopper`] for signal handlers),
//!   and the end of every sender is told to the engine ([`Command::EndOfInput`]).
//! * [`GraphEdit`]: live edits of the graph (`add`, `remove`, `replace`, `link`, `load`), a
//!   [`Command::Edit`]; parsed and printed like the other commands.
//! * Surface commands ([`Command::is_surface`]: `learn`, `unlearn`, `midi`, `save`) share the
//!   text protocol but are handled by the surface that owns MIDI mappings, never by the engine.
//! * [`Oscillator`], [`OscClock`]: waveforms evaluated as a pure function of the frame's
//!   oscillator time, which advances with the frames' timestamps times the master speed;
//!   [`ParamValue`]/[`ParamSpec`]: the `~sine:0.5hz:0..1` form in pipeline strings and the
//!   `{ osc = "sine", ... }` form in project files.
//! * [`TapTempo`], [`OscClock::set_tempo`], [`OscTime`]: the beat clock (`tempo`, `tap`,
//!   oscillators in beats such as `~square:4beats`); see [`beat`].
//! * [`osc_in`]: Open Sound Control messages (`/framepipe/<node>/<property> 0.5`) as
//!   commands, for the OSC surface.
//! * [`Coalescer`], [`LogLimit`]: floods on a surface (see [`flood`]): commands of which only
//!   the last counts held until the engine reads, messages limited to a few lines a second.
//! * [`Transport`]: pause / step / resume / stop as a state machine consulted at each frame
//!   boundary.
//!
//! # Real-time contract
//! On the frame path (the reader side): [`CommandReader::pop`] and
//! [`CommandReader::drain`] are lock-free and allocation-free (crossbeam's `ArrayQueue`, a
//! fixed ring allocated in [`command_queue`]). Commands carry `String`s, allocated by the
//! sender when it parses; to keep their deallocation off the frame path too, the reader hands
//! each command back inside its reply ([`CommandReader::reply`]: lock-free, allocation-free)
//! and whoever reads [`Replies`] frees it. A full return path counts the reply as dropped
//! ([`Replies::dropped`]) and frees it on the reader's thread. [`Oscillator::value_at`],
//! [`OscClock::advance`] and [`Transport`] are plain arithmetic. Parsing allocates and belongs
//! on the sender's thread.
#![forbid(unsafe_code)]

pub mod audio;
pub mod beat;
pub mod command;
pub mod edit;
pub mod flood;
pub mod osc;
pub mod osc_in;
pub mod queue;
pub mod transport;

pub use audio::{AudioFeature, AudioFollow};
pub use beat::{monotonic_ns, TapResult, TapTempo};
pub use command::{Command, Encoding, LearnMode, LearnTarget, Target, Unlearn, MAX_BATCH};
pub use edit::{FadeTransition, GraphEdit, Place};
pub use flood::{Coalescer, LogLimit};
pub use osc::{OscClock, OscSpec, OscTime, Oscillator, ParamSpec, ParamValue, Shape};
pub use queue::{
    command_queue, CommandReader, CommandSender, Full, Outcome, Posted, Replies, Reply, Stopper,
    Ticket,
};
pub use transport::{Release, Transport};

/// Errors of the control crate: bad command lines and bad oscillators. Messages name the
/// offending token.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A blank line or a comment where a command was needed.
    #[error("empty command line")]
    Empty,
    /// The first word is not a command.
    #[error("unknown command '{word}'; expected one of: {expected}")]
    UnknownCommand {
        /// The word given.
        word: String,
        /// The commands there are.
        expected: &'static str,
    },
    /// A command lacks an argument.
    #[error("'{command}' needs {what}")]
    MissingArgument {
        /// The command.
        command: &'static str,
        /// What is missing, with an example.
        what: &'static str,
    },
    /// An argument could not be understood.
    #[error("'{command}': bad argument '{token}': {reason}")]
    BadArgument {
        /// The command.
        command: String,
        /// The offending token.
        token: String,
        /// Why.
        reason: String,
    },
    /// More arguments than the command takes.
    #[error("'{command}' takes no more arguments, got '{token}'")]
    ExtraArgument {
        /// The command.
        command: &'static str,
        /// The first extra token.
        token: String,
    },
    /// An oscillator shape that does not exist.
    #[error(
        "unknown oscillator shape '{name}'; expected one of: sine, triangle, ramp-up, \
         ramp-down, square, pulse, random, random-ramp"
    )]
    UnknownShape {
        /// The name given.
        name: String,
    },
    /// An OSC datagram that could not be decoded.
    #[error("bad OSC packet: {reason}")]
    OscPacket {
        /// Why.
        reason: String,
    },
    /// An OSC message whose address or arguments make no command.
    #[error("OSC {address}: {reason}")]
    OscMessage {
        /// The message's address, quoted (cut with its length when long:
        /// `framepipe_core::quote::quote`).
        address: String,
        /// Why.
        reason: String,
    },
    /// An oscillator field that could not be understood or is out of range.
    #[error("bad oscillator field '{token}': {reason}")]
    BadOscillator {
        /// The offending field.
        token: String,
        /// Why.
        reason: String,
    },
}

/// Result with the control crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
