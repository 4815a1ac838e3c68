//! framepipe's MIDI surface: MIDI controllers steer a running show through the same commands
//! as every other surface (`set`, `bypass`, `pause`, `step`, `tap`), posted to the engine's
//! command queue; nothing here has a private path into the engine.
//!
//! * [`parser`]: MIDI bytes from a raw device or a FIFO → messages (running status, real-time
//!   bytes, SysEx skipped, bounded state).
//! * [`mapping`]: controls, modes (absolute 7/14-bit, relative encoders) and the arithmetic
//!   from MIDI values to property values.
//! * [`surface`]: mappings, `learn`, coalescing a flood into at most one `set` per mapping per
//!   frame; the `learn`, `unlearn`, `midi` and `save` surface commands.
//! * [`input`]: the threads: a raw device or FIFO reader (`fp-midi-in`), an ALSA sequencer
//!   port through midir, and `fp-midi`, which runs the surface and posts its commands.
//!
//! # Real-time contract
//! Nothing here runs on the frame path. The MIDI threads talk to the engine only through
//! [`CommandSender::post`](framepipe_control::CommandSender::post) (lock-free, never blocks);
//! a full queue drops the command and counts it. Between the reader and `fp-midi` a bounded
//! channel holds at most [`input::CHANNEL`] messages; more are dropped and counted. Bad bytes
//! are counted, never fatal; a device that goes away is waited for.
#![forbid(unsafe_code)]

pub mod input;
pub mod mapping;
pub mod parser;
pub mod surface;

pub use input::{
    list_ports, spawn, spawn_shows, Counters, MidiHandle, MidiInput, Port, Reply, ShowSurface,
};
pub use mapping::{Action, Control, Mapping, Range, Value};
pub use parser::{Message, ParseCounts, Parser};
pub use surface::{LiveValues, PropInfo, Props, SaveContext, Surface};

/// Errors of the MIDI surface: a port or device that cannot be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No ALSA sequencer on this machine.
    #[error(
        "no ALSA sequencer: /dev/snd/seq is missing (no sound driver, or a container without \
         it); a raw MIDI device or FIFO still works: --midi /dev/snd/midiC1D0"
    )]
    NoSequencer,
    /// The ALSA sequencer could not be used.
    #[error("ALSA sequencer: {0}")]
    Alsa(String),
    /// No ALSA port's name contains the text given.
    #[error("no MIDI input port matches '{wanted}'; the ports are: {ports}")]
    NoPort {
        /// The text given.
        wanted: String,
        /// The ports there are (or "(none)").
        ports: String,
    },
    /// A raw MIDI device or FIFO that cannot be opened.
    #[error("cannot open MIDI input '{path}'")]
    Open {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A path given as a MIDI input that is not a device, a FIFO or a file (a directory, a
    /// socket).
    #[error("cannot read MIDI from '{path}': it is {what}; give a MIDI device, a FIFO or a file")]
    NotMidi {
        /// The path.
        path: String,
        /// What it is, in words.
        what: &'static str,
    },
    /// A mapping of the project file that does not fit the graph.
    #[error("{0}")]
    Mapping(String),
    /// A thread could not be started.
    #[error("cannot start the {name} thread")]
    Thread {
        /// The thread.
        name: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
