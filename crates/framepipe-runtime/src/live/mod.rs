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
//!   frame begins: they apply from the next frame to begin; under `tempo auto` each frame's
//!   beginning sets the tempo from the audio's estimate (and nudges the beat toward an onset)
//!   for the frames after it;
//! * a node with a `quantize` property (a deck: `beat`, `bar`, a number of beats) has the
//!   values set on its other properties held until the first frame at or after the next line
//!   of that beat grid ([`Live::beat_frame`], [`Live::hold`]): the value lands by frame number
//!   when the node samples that frame, and the reply names it;
//! * every set is stamped ([`Live::serial`]) into the snapshots, so that a source is given a
//!   set even of the value in force (a deck's retrigger restarts its clip);
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
//!
//! ## The live lock
//!
//! One [`Live`] per show, behind `Shared::live` (a priority-inheriting mutex): the live lock. It
//! is taken by
//! * the worker beginning a frame ([`Live::begin`]) and each node's job as it starts a frame
//!   ([`Live::start_node`], then `ShowView::publish`, which only `try_lock`s the view);
//! * the output thread: assigning one frame boundary's sets together (`assign_sets`:
//!   [`Live::first_frame_of`], [`Live::gone`], [`Live::catch_up`], [`Live::commanded`],
//!   [`Live::apply`]), and reading a live edit ([`Live::edit_read`]);
//! * the edit thread: [`Live::next_frame`] (a crossfade's end), and the new graph's view
//!   (`ShowView::set_graph`, which waits for the view's readers);
//! * three scheduler methods, **under the scheduler lock**: arming a live edit (`arm_switch`:
//!   [`Live::arm`]) and both switches (`maybe_switch`, `switch_overlapping`:
//!   [`Live::switch_to`]).
//!
//! Lock order (as in `sched/lock.rs`, "Lock order"): the scheduler lock, then the live lock,
//! then a frame's snapshot ([`FrameParams`], [`lock`]) or the view's values; never the
//! reverse. Nothing holding the live lock waits for the scheduler lock. Under it:
//! assignments and a few float operations per property, and for a set of a quantized node the
//! beat frame (at most 4096 integer steps of a copy of the clock); no allocation (but a text
//! value growing its buffer once), no printing, no element or user code.
//!
//! ## Files
//!
//! | file | its job |
//! |---|---|
//! | `mod.rs` | the state: [`Live`], [`LiveStage`], [`LiveParam`]; the lock's contract |
//! | `values.rs` | the values: a stage's properties (set value, oscillator, audio binding, ramp), assigning a resolved [`Set`], keeping every value in its declared range, publishing them |
//! | `sample.rs` | per-frame sampling: [`FrameParams`] (with the frame's audio analysis and arrays), [`Live::begin`], [`Live::start_node`], [`Live::catch_up`]; [`GpuAudio`], the GPU thread's copy of a frame's audio arrays |
//! | `resolve.rs` | command resolution: a parameter command against [`LiveSpec`], without any lock, into a [`Set`] |
//! | `races.rs` | sets racing a live edit: [`Fate`], [`Live::arm`], [`Live::gone`], [`Live::carry`], [`Live::switch_to`] |

mod races;
mod resolve;
mod sample;
mod values;

pub(crate) use races::{gone_reason, Fate};
pub(crate) use resolve::{LiveSpec, Set};
pub(crate) use sample::{lock, FrameParams, GpuAudio};
pub(crate) use values::assign;
use values::Ramp;

use framepipe_audio::{Envelope, Feed};
use framepipe_control::{OscClock, Oscillator, TapTempo};
use framepipe_core::{PropSpec, PropValue};

/// One controllable property of one stage.
pub(crate) struct LiveParam {
    spec: PropSpec,
    /// Value set by the user (initial property or last `set`).
    base: PropValue,
    osc: Option<Oscillator>,
    /// A one-shot ramp on the frame clock (a crossfade's amount), instead of `base`.
    ramp: Option<Ramp>,
    /// An audio binding's envelope (`osc` with `audio`: see `values.rs`), over the frames'
    /// audio times; reset when a binding is attached.
    env: Envelope,
    /// Value in force for the last frame sampled.
    last: PropValue,
    /// The command epoch ([`Live::epoch`]) of the last command that changed it (`set`, `osc`,
    /// `unosc`); 0: none did.
    touched: u64,
    /// The serial ([`Live::serial`]) of the last set that gave it a value (0: none did): a set
    /// reaches a source even when its value is the one in force (a deck's retrigger).
    stamp: u64,
    /// A set held until a frame (a quantized node's, see [`Live::hold`]): from frame `.0` on,
    /// `held_value` becomes its value, stamped `.1`.
    held: Option<(u64, u64)>,
    /// The held set's value (allocated once: held values are swapped in and out).
    held_value: PropValue,
}

/// The controllable state of one stage (effects only; the source and sink have none).
pub(crate) struct LiveStage {
    /// Name shown in stats (`frei0r-glow`, or `frei0r-glow#2` for a second one).
    label: String,
    /// Element name as registered.
    element: String,
    /// An effect or a mixer (a source's stage has the properties of a generator, if any).
    is_effect: bool,
    /// Whether output shape == input shape (only then may the stage be bypassed).
    same_shape: bool,
    bypass: bool,
    /// The command epoch of the last `bypass` on it (0: none).
    bypass_touched: u64,
    params: Vec<LiveParam>,
    /// What the armed live edit does to this node (see [`Live::arm`]).
    fate: Fate,
    /// The latest first frame of a command on it read since the live edit on its way was read
    /// (`None`: none): if the edit removes the node, it switches after that frame, which then
    /// shows the command (see [`Live::arm`]).
    since_edit: Option<u64>,
    /// The next frame this stage samples: frames before it have their values, a set
    /// assigned now is seen from it on (see the module doc).
    next: u64,
}

/// All live state, under its own lock (never the scheduler's).
pub(crate) struct Live {
    stages: Vec<LiveStage>,
    clock: OscClock,
    /// Tap tempo over the taps' posting times.
    taps: TapTempo,
    /// Frames begun so far. Frames begin one at a time and in order of their sequence number,
    /// from 0 (the scheduler's `begin_busy`), so this is also the sequence number of the next
    /// frame to begin: the first whose oscillator time sees a clock command assigned now.
    sampled: u64,
    /// The graph version the stages belong to (set by a live edit's switch, with them).
    version: u64,
    /// The command epoch: +1 when a live edit is read and at each switch. A command stamps
    /// what it changes with it, so that the switch knows which values were set while the edit
    /// was on its way (read after it: see [`Live::carry`]).
    epoch: u64,
    /// The armed live edit's switch frame (no frame from it on begins in these stages'
    /// version), while one is armed.
    switch_at: Option<u64>,
    /// Sets that gave a property a value so far (`set`, `next`/`prev`; held ones when held):
    /// the stamp of each such set, increasing across live edits.
    serial: u64,
    /// The show's audio and the point count of the last frame begun (see [`Live::begin`]).
    audio: Option<(Feed, u64)>,
    /// `tempo auto`: the beat clock follows the audio (until a `tempo BPM` or a `tap`).
    tempo_auto: Option<framepipe_audio::TempoFollow>,
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
            serial: 0,
            audio: None,
            tempo_auto: None,
        }
    }

    /// The show follows `feed`'s audio: each frame's analysis is read as it begins.
    pub(crate) fn set_audio(&mut self, feed: Feed) {
        self.audio = Some((feed, 0));
    }

    /// The stages, in the graph version's node order.
    pub(crate) fn stages(&self) -> &[LiveStage] {
        &self.stages
    }

    /// The stages, taken out (a graph version built for a live edit hands them to its switch:
    /// [`Live::switch_to`]).
    pub(crate) fn into_stages(self) -> Vec<LiveStage> {
        self.stages
    }

    /// The graph version the stages belong to (a live edit's switch changes it, with them).
    pub(crate) fn version(&self) -> u64 {
        self.version
    }
}
