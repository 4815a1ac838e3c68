//! Live parameters: values set by commands or driven by oscillators, sampled **once per frame
//! and node**, when that node starts the frame (issue #9, low-latency control).
//!
//! A frame's beginning fixes its oscillator time (derived from its timestamp, never from the
//! wall clock) in the frame's snapshot slot (`seq % in_flight`). Each node of the show, when
//! it starts the frame, writes the values in force *then* for itself into that snapshot and
//! brings its instance's properties to them. So a command reaches every frame whose node has
//! not started yet, also frames that began before it (a fader on the last node of a long chain
//! shows in the next frame out, not a whole chain later), and still each node uses one value
//! per frame, and a value once shown stays (frames in order for every node):
//!
//! * each stage keeps the next frame it samples (`LiveStage::next`); a node starting frame
//!   `s` first gives the frames before `s` it has not started yet (a parallel node may start
//!   frames out of order) the same values, then samples `s`: a command assigned later is seen
//!   from `s + 1` on, by every frame of that node;
//! * a command is answered with its stage's next frame; commands read together (a batch, or
//!   one frame boundary's worth) with the latest of their stages' next frames, the stages
//!   behind it first sampling the values before the commands for the frames in between
//!   (`Live::catch_up`): all of them are seen from the frame the reply names;
//! * the clock commands (`speed`, `tempo`, `tap`) act on the oscillator time, fixed when a
//!   frame begins: they apply from the next frame to begin;
//! * the nodes of a leaky branch (a monitor, a preview) are sampled when the frame begins, as
//!   before: the branch takes the frame's values into its own slot and runs on its own time.
//! * a command read while a live edit is on its way applies at once to the running node; its
//!   reply stays true across the switch: a node the edit replaces by one of the same element
//!   takes the values set since the edit was read ([`Live::carry`]), one it removes shows the
//!   command until the switch, which waits for the command's frame ([`Live::arm`]), or the
//!   command is refused when no frame of the node is left ([`Live::gone`]).
//!
//! Two stages driven by the same oscillator agree on every frame even though they process it
//! at different moments: the value is a function of the frame's oscillator time.

mod races;
mod resolve;
mod sample;
mod values;

pub(crate) use races::{gone_reason, Fate};
pub(crate) use resolve::{Edit, LiveSpec};
pub(crate) use sample::{lock, FrameParams};
pub(crate) use values::assign;
use values::Ramp;

use framepipe_control::{OscClock, Oscillator, TapTempo};
use framepipe_core::{PropSpec, PropValue};

/// One controllable property of one stage.
pub(crate) struct LiveParam {
    pub spec: PropSpec,
    /// Value set by the user (initial property or last `set`).
    base: PropValue,
    osc: Option<Oscillator>,
    /// A one-shot ramp on the frame clock (a crossfade's amount), instead of `base`.
    ramp: Option<Ramp>,
    /// Value in force for the last frame sampled.
    last: PropValue,
    /// The command epoch ([`Live::epoch`]) of the last command that changed it (`set`, `osc`,
    /// `unosc`); 0: none did.
    touched: u64,
}

/// The controllable state of one stage (effects only; the source and sink have none).
pub(crate) struct LiveStage {
    /// Name shown in stats (`frei0r-glow`, or `frei0r-glow#2` for a second one).
    pub label: String,
    /// Element name as registered.
    pub element: String,
    pub is_effect: bool,
    /// Whether output shape == input shape (only then may the stage be bypassed).
    pub same_shape: bool,
    pub bypass: bool,
    /// The command epoch of the last `bypass` on it (0: none).
    bypass_touched: u64,
    pub params: Vec<LiveParam>,
    /// What the armed live edit does to this node (see [`Live::arm`]).
    pub(crate) fate: Fate,
    /// The latest first frame of a command on it read since the live edit on its way was read
    /// (`None`: none): if the edit removes the node, it switches after that frame, which then
    /// shows the command (see [`Live::arm`]).
    since_edit: Option<u64>,
    /// The next frame this stage samples: frames before it have their values, an edit
    /// assigned now is seen from it on (see the module doc).
    next: u64,
}

/// All live state, under its own lock (never the scheduler's).
pub(crate) struct Live {
    pub stages: Vec<LiveStage>,
    clock: OscClock,
    /// Tap tempo over the taps' posting times.
    taps: TapTempo,
    /// Frames begun so far. Frames begin one at a time and in order of their sequence number,
    /// from 0 (the scheduler's `begin_busy`), so this is also the sequence number of the next
    /// frame to begin: the first whose oscillator time sees a clock command assigned now.
    sampled: u64,
    /// The graph version the stages belong to (set by a live edit's switch, with them).
    pub(crate) version: u64,
    /// The command epoch: +1 when a live edit is read and at each switch. A command stamps
    /// what it changes with it, so that the switch knows which values were set while the edit
    /// was on its way (read after it: see [`Live::carry`]).
    epoch: u64,
    /// The armed live edit's switch frame (no frame from it on begins in these stages'
    /// version), while one is armed.
    pub(crate) switch_at: Option<u64>,
}

impl Live {
    pub fn new(stages: Vec<LiveStage>) -> Self {
        Live {
            stages,
            clock: OscClock::new(),
            taps: TapTempo::new(),
            sampled: 0,
            version: 0,
            epoch: 1,
            switch_at: None,
        }
    }
}
