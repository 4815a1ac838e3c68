//! The MIDI surface's state: mappings, `learn`, and MIDI messages turned into commands.
//!
//! Pure logic, no threads and no clock of its own (the time is passed in), so that every rule
//! here is tested directly; [`crate::input`] runs it on the `fp-midi` thread.
//!
//! * Continuous values (a CC on a property) are coalesced per mapping: a message only updates
//!   the mapping's pending value, and [`Surface::flush`] posts it — at once if the mapping
//!   posted nothing during the last `period` (a frame), else when that period is over. So a
//!   flood of CCs costs at most one `set` per mapping per frame, and the latest value always
//!   lands.
//! * Toggles and triggers (notes, buttons) are posted for every press: two presses are two
//!   steps.
//! * `learn TARGET` binds the next control moved. A note, or any control for a toggle or
//!   trigger, binds at once. A CC for a property is watched for [`LEARN_MESSAGES`] messages or
//!   [`LEARN_WINDOW`], whichever comes first: CC n followed by CC n+32 is a 14-bit pair; the
//!   same value twice in a row, near 0/127 (or near 64) is a relative encoder (two's complement,
//!   or binary offset), since an absolute control sends only changes. The messages that teach
//!   a mapping are not applied; moving the control again is.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use framepipe_control::{Command, Encoding, LearnMode, LearnTarget, Target, Unlearn};
use framepipe_project::{GraphDesc, MidiBinding, MidiControlKind, MidiMode};

use crate::mapping::{relative_steps, unit14, unit7, Action, Control, Mapping, Range, Value};
use crate::parser::Message;

/// After the surface set a property (or toggled a bypass) itself, its own value is trusted
/// over the engine's published one for this long: the published values lag by up to a few
/// frames, and a relative encoder turned fast must not lose its steps to that lag.
pub const OWN_VALUE_TRUST: Duration = Duration::from_millis(250);

/// The values in force in the engine, as it publishes them (another surface's `set`, an
/// oscillator's latest value): where relative encoders and toggles start from.
pub trait LiveValues: Send {
    /// The value of `node`'s property `prop` now, as a number (booleans 0 or 1), if known.
    fn value(&mut self, node: &str, prop: &str) -> Option<f64>;
    /// Whether `node` is bypassed now, if known.
    fn bypassed(&mut self, node: &str) -> Option<bool>;
}

/// A CC being learned for a property is decided after this many of its messages...
pub const LEARN_MESSAGES: usize = 3;
/// ... or this long after its first one.
pub const LEARN_WINDOW: Duration = Duration::from_millis(300);

/// A property MIDI can drive, with the value it has now (as far as this surface knows).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PropInfo {
    /// Its range.
    pub range: Range,
    /// Its value: as written in the graph (or its default), then as this surface set it.
    pub value: Value,
}

/// The nodes of the running graph and their properties, as MIDI sees them.
#[derive(Debug, Clone, Default)]
pub struct Props {
    nodes: BTreeMap<String, BTreeMap<String, Option<PropInfo>>>,
}

impl Props {
    /// No nodes.
    pub fn new() -> Self {
        Props::default()
    }

    /// Adds a node (a name commands use) without properties yet.
    pub fn node(&mut self, node: &str) {
        self.nodes.entry(node.to_string()).or_default();
    }

    /// Adds a property MIDI can drive; `written` is its value as the graph gives it (its default
    /// when `None` or not a plain value, e.g. an oscillator).
    pub fn prop(&mut self, node: &str, prop: &str, range: Range, written: Option<&str>) {
        let value = written
            .and_then(|w| range.parse(w))
            .unwrap_or_else(|| range.at(0.0));
        self.nodes
            .entry(node.to_string())
            .or_default()
            .insert(prop.to_string(), Some(PropInfo { range, value }));
    }

    /// Adds a property MIDI cannot drive (text, colour, position...): named in messages.
    pub fn other_prop(&mut self, node: &str, prop: &str) {
        self.nodes
            .entry(node.to_string())
            .or_default()
            .insert(prop.to_string(), None);
    }

    /// Sets the default value of a property that was added with the range's minimum.
    pub fn set_value(&mut self, node: &str, prop: &str, value: Value) {
        if let Some(Some(p)) = self.nodes.get_mut(node).and_then(|n| n.get_mut(prop)) {
            p.value = value;
        }
    }

    fn get(&self, node: &str, prop: &str) -> Option<&PropInfo> {
        self.nodes.get(node)?.get(prop)?.as_ref()
    }

    /// The action `target` names, checked against the graph.
    pub fn action(&self, target: &str) -> Result<Action, String> {
        match target {
            "pause" => return Ok(Action::Pause),
            "step" => return Ok(Action::Step),
            "tap" => return Ok(Action::Tap),
            _ => {}
        }
        // `NODE.PROP=VALUE`: that value on each press.
        let (target, value) = match target.split_once('=') {
            Some((t, v)) => (t, Some(v)),
            None => (target, None),
        };
        let Some((node, prop)) = target.rsplit_once('.') else {
            return Err(format!(
                "bad target '{target}': expected NODE.PROPERTY, NODE.PROPERTY=VALUE, \
                 NODE.bypass, pause, step or tap"
            ));
        };
        let Some(props) = self.nodes.get(node) else {
            let names: Vec<&str> = self.nodes.keys().map(String::as_str).collect();
            return Err(format!(
                "unknown node '{node}'; expected one of: {}",
                names.join(", ")
            ));
        };
        match (props.get(prop), value) {
            (Some(Some(PropInfo { range, .. })), Some(value)) => match range {
                Range::Int { .. } if !value.is_empty() && !value.contains(char::is_whitespace) => {
                    Ok(Action::Trigger {
                        node: node.into(),
                        prop: prop.into(),
                        value: value.into(),
                    })
                }
                Range::Int { .. } => Err(format!(
                    "bad value '{value}' for {node}.{prop}: expected a number or a name"
                )),
                _ => Err(format!(
                    "{node}.{prop}=VALUE: only a whole-number property (a deck's clip) takes a \
                     value per press; learn {node}.{prop} drives it with the control's travel"
                )),
            },
            (_, Some(_)) => Err(format!(
                "unknown property '{prop}' on {node} for a value per press"
            )),
            (Some(Some(info)), None) => Ok(Action::Param {
                node: node.into(),
                prop: prop.into(),
                range: info.range,
            }),
            (Some(None), None) => Err(format!(
                "property '{prop}' of {node} is not a number or a boolean; MIDI can drive only those"
            )),
            (None, None) if prop == "bypass" => Ok(Action::Bypass { node: node.into() }),
            (None, None) => {
                let mut names: Vec<&str> = props
                    .iter()
                    .filter(|(_, p)| p.is_some())
                    .map(|(k, _)| k.as_str())
                    .collect();
                names.push("bypass");
                Err(format!(
                    "unknown property '{prop}' on {node}; expected one of: {}",
                    names.join(", ")
                ))
            }
        }
    }
}

/// Where `save` writes from.
#[derive(Debug, Clone, Default)]
pub struct SaveContext {
    /// The project file the run was started from, if it was.
    pub project: Option<PathBuf>,
    /// The graph, for writing a new project file from a pipeline string.
    pub desc: GraphDesc,
}

/// Counts kept by the surface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SurfaceCounts {
    /// Channel messages (CC, notes) handled.
    pub messages: u64,
    /// Values replaced by a newer one before they were posted.
    pub coalesced: u64,
}

/// The relative-looking values a control sent while being learned.
fn relative_shape(values: &[u8]) -> Option<Encoding> {
    let repeat = values.windows(2).any(|w| w[0] == w[1]);
    if values.len() < 2 || !repeat {
        return None;
    }
    if values.iter().all(|v| matches!(v, 1..=15 | 113..=127)) {
        Some(Encoding::Twos)
    } else if values.iter().all(|v| matches!(v, 49..=63 | 65..=79)) {
        Some(Encoding::Offset)
    } else {
        None
    }
}

/// How a learned CC is read, from the values it sent while being learned and whether CC
/// n+32 followed CC n.
pub fn decide(mode: LearnMode, values: &[u8], lsb_seen: bool) -> (MidiControlKind, MidiMode) {
    match mode {
        LearnMode::RelativeAs(e) => (MidiControlKind::Cc, MidiMode::Relative(e)),
        LearnMode::Relative => {
            let e = relative_shape(values).unwrap_or(match values.first() {
                Some(48..=80) => Encoding::Offset,
                _ => Encoding::Twos,
            });
            (MidiControlKind::Cc, MidiMode::Relative(e))
        }
        LearnMode::Detect if lsb_seen => (MidiControlKind::Cc14, MidiMode::Absolute),
        LearnMode::Detect => match relative_shape(values) {
            Some(e) => (MidiControlKind::Cc, MidiMode::Relative(e)),
            None => (MidiControlKind::Cc, MidiMode::Absolute),
        },
    }
}

/// A `learn` waiting for its control.
#[derive(Debug, Clone)]
struct Learning {
    action: Action,
    mode: LearnMode,
    /// The CC being watched: channel, number, when its first message came.
    cc: Option<(u8, u8, Instant)>,
    values: Vec<u8>,
    lsb: bool,
}

/// A mapping with its state.
#[derive(Debug, Clone)]
struct Slot {
    mapping: Mapping,
    /// A 14-bit CC's last MSB.
    msb: u8,
    /// The last raw value of a CC on a trigger (a press is a rise to 64 or more).
    last_raw: u8,
    /// A continuous value not posted yet.
    pending: Option<Value>,
    /// When this mapping last posted a value.
    last_post: Option<Instant>,
}

impl Slot {
    fn new(mapping: Mapping) -> Self {
        Slot {
            mapping,
            msb: 0,
            last_raw: 0,
            pending: None,
            last_post: None,
        }
    }
}

/// The MIDI surface: mappings, learning, and the commands its messages make.
pub struct Surface {
    props: Props,
    slots: Vec<Slot>,
    learning: Option<Learning>,
    bypassed: BTreeMap<String, bool>,
    paused: bool,
    is_paused: Option<Box<dyn Fn() -> bool + Send>>,
    live: Option<Box<dyn LiveValues>>,
    /// When this surface last set a property (`node.prop`) or toggled a bypass (`node`).
    own: BTreeMap<String, Instant>,
    period: Duration,
    save: SaveContext,
    out: Vec<Command>,
    notices: Vec<String>,
    /// Counts so far.
    pub counts: SurfaceCounts,
}

impl std::fmt::Debug for Surface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Surface")
            .field("mappings", &self.slots.len())
            .field(
                "learning",
                &self.learning.as_ref().map(|l| l.action.target()),
            )
            .finish()
    }
}

impl Surface {
    /// A surface for a graph's `props`, posting a continuous value at most once per `period`
    /// per mapping (a frame period). `start_paused`: the run starts paused (for pause toggles,
    /// unless [`set_paused_probe`](Self::set_paused_probe) gives the engine's state).
    pub fn new(props: Props, period: Duration, start_paused: bool, save: SaveContext) -> Self {
        Surface {
            props,
            slots: Vec::new(),
            learning: None,
            bypassed: BTreeMap::new(),
            paused: start_paused,
            is_paused: None,
            live: None,
            own: BTreeMap::new(),
            period,
            save,
            out: Vec::new(),
            notices: Vec::new(),
            counts: SurfaceCounts::default(),
        }
    }

    /// Where a pause toggle reads whether the run is paused now (the engine's own state, so
    /// that a `pause` from another surface is seen).
    pub fn set_paused_probe(&mut self, probe: Box<dyn Fn() -> bool + Send>) {
        self.is_paused = Some(probe);
    }

    /// Where relative encoders and toggles read the value in force (the engine's published
    /// values), unless this surface set it within [`OWN_VALUE_TRUST`].
    pub fn set_live_values(&mut self, live: Box<dyn LiveValues>) {
        self.live = Some(live);
    }

    /// The value `node.prop` starts from for a relative step or a toggle at `now`.
    fn base_value(&mut self, node: &str, prop: &str, now: Instant) -> Option<Value> {
        let info = *self.props.get(node, prop)?;
        let key = format!("{node}.{prop}");
        let recent = self
            .own
            .get(&key)
            .is_some_and(|t| now.saturating_duration_since(*t) < OWN_VALUE_TRUST);
        if !recent {
            if let Some(x) = self.live.as_mut().and_then(|l| l.value(node, prop)) {
                let v = match info.range {
                    Range::Float { min, max } => Value::Float(x.clamp(min, max)),
                    Range::Int { min, max } => Value::Int((x.round() as i64).clamp(min, max)),
                    Range::Bool => Value::Bool(x >= 0.5),
                };
                self.props.set_value(node, prop, v);
                return Some(v);
            }
        }
        Some(info.value)
    }

    /// Whether `node` is bypassed as far as a toggle at `now` should know.
    fn bypassed_now(&mut self, node: &str, now: Instant) -> bool {
        let local = self.bypassed.get(node).copied().unwrap_or(false);
        let recent = self
            .own
            .get(node)
            .is_some_and(|t| now.saturating_duration_since(*t) < OWN_VALUE_TRUST);
        if recent {
            return local;
        }
        self.live
            .as_mut()
            .and_then(|l| l.bypassed(node))
            .unwrap_or(local)
    }

    /// Adds the mappings of a project's `[[midi]]` tables; an error names the table (1-based)
    /// and what is wrong with its target.
    pub fn load(&mut self, bindings: &[MidiBinding]) -> Result<(), String> {
        for (i, b) in bindings.iter().enumerate() {
            let action = self
                .props
                .action(&b.target)
                .map_err(|e| format!("[[midi]] {}: {e}", i + 1))?;
            let mapping = Mapping {
                control: Control {
                    kind: b.kind,
                    channel: b.channel.saturating_sub(1).min(15),
                    number: b.number.min(b.kind.max_number()),
                },
                mode: b.mode,
                action,
            };
            self.bind(mapping);
        }
        Ok(())
    }

    /// The mappings, in order (numbered from 1 by `midi` and `unlearn`).
    pub fn mappings(&self) -> Vec<Mapping> {
        self.slots.iter().map(|s| s.mapping.clone()).collect()
    }

    /// Commands to post, in order (taken).
    pub fn take_commands(&mut self) -> std::vec::Drain<'_, Command> {
        self.out.drain(..)
    }

    /// Lines to tell the user (taken): what was learned, detected.
    pub fn take_notices(&mut self) -> std::vec::Drain<'_, String> {
        self.notices.drain(..)
    }

    /// Adds a mapping, replacing one of the same control; returns its number (from 1).
    fn bind(&mut self, mapping: Mapping) -> usize {
        let overlaps = |c: &Control| {
            let m = &mapping.control;
            let cc_number = |c: &Control| match c.kind {
                MidiControlKind::Note => None,
                _ => Some(c.number),
            };
            c.channel == m.channel
                && match (c.kind, m.kind) {
                    (MidiControlKind::Note, MidiControlKind::Note) => c.number == m.number,
                    (MidiControlKind::Note, _) | (_, MidiControlKind::Note) => false,
                    // A 14-bit pair also owns its LSB's number.
                    _ => {
                        let numbers = |c: &Control| {
                            let n = cc_number(c).unwrap_or(255);
                            if c.kind == MidiControlKind::Cc14 {
                                [n, n + 32]
                            } else {
                                [n, n]
                            }
                        };
                        let (a, b) = (numbers(c), numbers(m));
                        a.iter().any(|x| b.contains(x))
                    }
                }
        };
        if let Some(i) = self.slots.iter().position(|s| overlaps(&s.mapping.control)) {
            self.notices.push(format!(
                "midi: {} replaces mapping {}: {}",
                mapping.control,
                i + 1,
                self.slots[i].mapping
            ));
            self.slots[i] = Slot::new(mapping);
            return i + 1;
        }
        self.slots.push(Slot::new(mapping));
        self.slots.len()
    }

    /// Handles a surface command (`learn`, `unlearn`, `midi`, `save`): `Ok` with the reply
    /// text, or `Err` with why it is refused.
    pub fn command(&mut self, cmd: &Command) -> Result<String, String> {
        match cmd {
            Command::Learn { target, mode } => {
                let action = self.props.action(&target_text(target)?)?;
                let replaced = self
                    .learning
                    .take()
                    .map(|l| format!(" (instead of {})", l.action.target()))
                    .unwrap_or_default();
                let what = action.target();
                self.learning = Some(Learning {
                    action,
                    mode: *mode,
                    cc: None,
                    values: Vec::with_capacity(LEARN_MESSAGES),
                    lsb: false,
                });
                Ok(format!(
                    "learning {what}{replaced}: move a control (a CC or a note) on the MIDI input"
                ))
            }
            Command::Unlearn(what) => {
                let removed: Vec<(usize, Mapping)> = match what {
                    Unlearn::Number(n) => {
                        if *n == 0 || *n > self.slots.len() {
                            return Err(format!(
                                "no mapping {n}; there are {} (see 'midi')",
                                self.slots.len()
                            ));
                        }
                        vec![(*n, self.slots.remove(n - 1).mapping)]
                    }
                    Unlearn::Target(t) => {
                        let target = target_text(t)?;
                        let mut out = Vec::new();
                        let mut k = 0;
                        let mut number = 0;
                        while k < self.slots.len() {
                            number += 1;
                            if self.slots[k].mapping.action.target() == target {
                                out.push((number, self.slots.remove(k).mapping));
                            } else {
                                k += 1;
                            }
                        }
                        if out.is_empty() {
                            return Err(format!("no mapping to '{target}' (see 'midi')"));
                        }
                        out
                    }
                    Unlearn::All => {
                        self.learning = None;
                        self.slots
                            .drain(..)
                            .enumerate()
                            .map(|(i, s)| (i + 1, s.mapping))
                            .collect()
                    }
                };
                let list: Vec<String> = removed.iter().map(|(n, m)| format!("{n}: {m}")).collect();
                Ok(format!(
                    "unlearned {} mapping{}{}{}",
                    removed.len(),
                    if removed.len() == 1 { "" } else { "s" },
                    if list.is_empty() { "" } else { ": " },
                    list.join("; ")
                ))
            }
            Command::Mappings => {
                let mut s = match self.slots.len() {
                    0 => "no MIDI mappings".to_string(),
                    1 => "1 MIDI mapping:".to_string(),
                    n => format!("{n} MIDI mappings:"),
                };
                for (i, slot) in self.slots.iter().enumerate() {
                    s.push_str(&format!("\n  {}: {}", i + 1, slot.mapping));
                }
                if let Some(l) = &self.learning {
                    s.push_str(&format!("\n  learning {}", l.action.target()));
                }
                Ok(s)
            }
            Command::Save { file } => self.save(file.as_deref()),
            other => Err(format!("'{other}' is not a surface command")),
        }
    }

    fn save(&self, file: Option<&str>) -> Result<String, String> {
        let bindings: Vec<MidiBinding> = self.slots.iter().map(|s| s.mapping.binding()).collect();
        let path = match (file, &self.save.project) {
            (Some(f), _) => PathBuf::from(f),
            (None, Some(p)) => p.clone(),
            (None, None) => return Err(
                "save needs a FILE: the run was started from a pipeline string, not a project file"
                    .into(),
            ),
        };
        let text = match &self.save.project {
            Some(p) => {
                let original = std::fs::read_to_string(p)
                    .map_err(|e| format!("cannot read the project file '{}': {e}", p.display()))?;
                framepipe_project::with_midi(&original, &bindings)
                    .map_err(|e| format!("{}: {e}", p.display()))?
            }
            None => {
                let mut desc = self.save.desc.clone();
                desc.midi = bindings.clone();
                framepipe_project::project_text(&desc)
            }
        };
        // Written beside, then renamed over: a failed write leaves the old file whole.
        let tmp = {
            let mut name = path
                .file_name()
                .map(|n| n.to_os_string())
                .unwrap_or_default();
            name.push(".framepipe-tmp");
            path.with_file_name(name)
        };
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("cannot write '{}': {e}", path.display())
            })?;
        Ok(format!(
            "saved {} MIDI mapping{} to {}",
            bindings.len(),
            if bindings.len() == 1 { "" } else { "s" },
            path.display()
        ))
    }

    /// Handles one MIDI message that arrived at `now` (`at_ns`: on the control clock, for
    /// taps).
    pub fn message(&mut self, m: Message, now: Instant, at_ns: i64) {
        if matches!(m, Message::Other) {
            return;
        }
        self.counts.messages += 1;
        if self.learn(m, now) {
            return;
        }
        for i in 0..self.slots.len() {
            self.apply(i, m, now, at_ns);
        }
    }

    /// Offers `m` to a pending `learn`; true when it was taken.
    fn learn(&mut self, m: Message, now: Instant) -> bool {
        let Some(l) = &mut self.learning else {
            return false;
        };
        match (m, l.cc) {
            (Message::NoteOn { channel, note, .. }, None) => {
                let control = Control {
                    kind: MidiControlKind::Note,
                    channel,
                    number: note,
                };
                self.finish_learning(control, MidiMode::Absolute);
                true
            }
            (
                Message::Cc {
                    channel,
                    number,
                    value,
                },
                None,
            ) => {
                let control = Control {
                    kind: MidiControlKind::Cc,
                    channel,
                    number,
                };
                if !l.action.is_continuous() {
                    // A button for a toggle or trigger: nothing to detect.
                    let mode = match l.mode {
                        LearnMode::Detect => MidiMode::Absolute,
                        _ => decide(l.mode, &[value], false).1,
                    };
                    self.finish_learning(control, mode);
                } else {
                    l.cc = Some((channel, number, now));
                    l.values.push(value);
                    if l.mode != LearnMode::Detect {
                        self.check_learning(now, true);
                    }
                }
                true
            }
            (
                Message::Cc {
                    channel,
                    number,
                    value,
                },
                Some((ch, n, _)),
            ) if channel == ch => {
                if number == n {
                    l.values.push(value);
                } else if n < 32 && number == n + 32 {
                    l.lsb = true;
                } else {
                    return false;
                }
                self.check_learning(now, false);
                true
            }
            _ => false,
        }
    }

    /// Decides a CC being learned once it sent enough, or its window is over (or `now`).
    fn check_learning(&mut self, now: Instant, at_once: bool) {
        let Some(l) = &self.learning else { return };
        let Some((channel, number, first)) = l.cc else {
            return;
        };
        if !(at_once
            || l.values.len() >= LEARN_MESSAGES
            || now.duration_since(first) >= LEARN_WINDOW)
        {
            return;
        }
        let (kind, mode) = decide(l.mode, &l.values, l.lsb);
        let control = Control {
            kind,
            channel,
            number,
        };
        self.finish_learning(control, mode);
    }

    fn finish_learning(&mut self, control: Control, mode: MidiMode) {
        let Some(l) = self.learning.take() else {
            return;
        };
        let mapping = Mapping {
            control,
            mode,
            action: l.action,
        };
        let text = mapping.to_string();
        let n = self.bind(mapping);
        self.notices.push(format!("learned {text} (mapping {n})"));
    }

    fn current(&self, node: &str, prop: &str) -> Option<PropInfo> {
        self.props.get(node, prop).copied()
    }

    fn paused_now(&self) -> bool {
        self.is_paused.as_ref().map_or(self.paused, |p| p())
    }

    /// Applies `m` to mapping `i` if it is its control.
    fn apply(&mut self, i: usize, m: Message, now: Instant, at_ns: i64) {
        let c = self.slots[i].mapping.control;
        let mode = self.slots[i].mapping.mode;
        let continuous = self.slots[i].mapping.action.is_continuous();
        let trigger = matches!(
            self.slots[i].mapping.action,
            Action::Step | Action::Tap | Action::Trigger { .. }
        );
        // What the message means for this mapping: a unit value, a relative step count, or a
        // press.
        enum Input {
            Unit(f64),
            Steps(i64),
            Press,
            Level(bool),
        }
        let input = match (m, c.kind) {
            (
                Message::Cc {
                    channel,
                    number,
                    value,
                },
                MidiControlKind::Cc,
            ) if channel == c.channel && number == c.number => match mode {
                MidiMode::Relative(e) => Input::Steps(relative_steps(e, value)),
                MidiMode::Absolute if continuous => Input::Unit(unit7(value)),
                MidiMode::Absolute => {
                    let was = self.slots[i].last_raw;
                    self.slots[i].last_raw = value;
                    match (trigger, value >= 64) {
                        (true, true) if was < 64 => Input::Press,
                        (true, _) => return,
                        (false, on) => Input::Level(on),
                    }
                }
            },
            (
                Message::Cc {
                    channel,
                    number,
                    value,
                },
                MidiControlKind::Cc14,
            ) if channel == c.channel => {
                if number == c.number {
                    // A new MSB resets the LSB (MIDI 1.0).
                    self.slots[i].msb = value;
                    Input::Unit(unit14(value, 0))
                } else if number == c.number + 32 {
                    Input::Unit(unit14(self.slots[i].msb, value))
                } else {
                    return;
                }
            }
            (Message::NoteOn { channel, note, .. }, MidiControlKind::Note)
                if channel == c.channel && note == c.number =>
            {
                Input::Press
            }
            _ => return,
        };
        let action = self.slots[i].mapping.action.clone();
        match (action, input) {
            (Action::Param { node, prop, range }, input) => {
                let base = match self.slots[i].pending {
                    Some(p) => p,
                    None => match self.base_value(&node, &prop, now) {
                        Some(v) => v,
                        None => return,
                    },
                };
                let value = match input {
                    Input::Unit(u) => range.at(u),
                    Input::Steps(s) => range.step(base, s),
                    Input::Level(on) => range.at(if on { 1.0 } else { 0.0 }),
                    Input::Press => {
                        // A toggle is posted at once: two presses are two changes.
                        let v = range.toggle(base);
                        self.slots[i].pending = None;
                        self.post_value(i, &node, &prop, v, now, false);
                        return;
                    }
                };
                if self.slots[i].pending.replace(value).is_some() {
                    self.counts.coalesced += 1;
                }
            }
            (Action::Bypass { node }, input) => {
                let was = self.bypassed_now(&node, now);
                let on = match input {
                    Input::Press => !was,
                    Input::Level(on) => on,
                    Input::Steps(s) => match s.signum() {
                        1 => true,
                        -1 => false,
                        _ => return,
                    },
                    Input::Unit(u) => u >= 0.5,
                };
                if on == was && !matches!(input, Input::Press) {
                    return;
                }
                self.bypassed.insert(node.clone(), on);
                self.own.insert(node.clone(), now);
                self.out.push(Command::Bypass {
                    element: Target::Name(node),
                    on,
                });
            }
            (Action::Pause, input) => {
                let was = self.paused_now();
                let pause = match input {
                    Input::Press => !was,
                    Input::Level(on) => on,
                    Input::Steps(s) => match s.signum() {
                        1 => true,
                        -1 => false,
                        _ => return,
                    },
                    Input::Unit(u) => u >= 0.5,
                };
                if pause == was && !matches!(input, Input::Press) {
                    return;
                }
                self.paused = pause;
                self.out.push(if pause {
                    Command::Pause
                } else {
                    Command::Resume
                });
            }
            (Action::Step | Action::Tap | Action::Trigger { .. }, Input::Steps(s)) if s <= 0 => {}
            (Action::Step | Action::Tap | Action::Trigger { .. }, Input::Level(false)) => {}
            (Action::Trigger { node, prop, value }, _) => self.out.push(Command::Set {
                element: Target::Name(node),
                prop,
                value,
            }),
            (Action::Step, _) => self.out.push(Command::Step(1)),
            (Action::Tap, _) => self.out.push(Command::Tap { at_ns: Some(at_ns) }),
        }
    }

    fn post_value(
        &mut self,
        i: usize,
        node: &str,
        prop: &str,
        v: Value,
        now: Instant,
        paced: bool,
    ) {
        self.props.set_value(node, prop, v);
        self.own.insert(format!("{node}.{prop}"), now);
        if paced {
            self.slots[i].last_post = Some(now);
        }
        self.out.push(Command::Set {
            element: Target::Name(node.to_string()),
            prop: prop.to_string(),
            value: v.to_string(),
        });
    }

    /// Ends a learn window that is over, and posts the pending values that may go now (see
    /// the module documentation). Returns when to call again for what is held back.
    pub fn flush(&mut self, now: Instant) -> Option<Instant> {
        self.check_learning(now, false);
        let mut next: Option<Instant> = None;
        let mut due = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        if let Some(Learning {
            cc: Some((_, _, first)),
            ..
        }) = &self.learning
        {
            due(*first + LEARN_WINDOW);
        }
        for i in 0..self.slots.len() {
            let Some(v) = self.slots[i].pending else {
                continue;
            };
            let Action::Param { node, prop, .. } = &self.slots[i].mapping.action else {
                self.slots[i].pending = None;
                continue;
            };
            let (node, prop) = (node.clone(), prop.clone());
            if self.current(&node, &prop).is_some_and(|p| p.value == v) {
                // Back where it was: nothing to say.
                self.slots[i].pending = None;
                continue;
            }
            let free_at = self.slots[i].last_post.map(|t| t + self.period);
            match free_at {
                Some(t) if t > now => due(t),
                _ => {
                    self.slots[i].pending = None;
                    self.post_value(i, &node, &prop, v, now, true);
                }
            }
        }
        next
    }
}

/// A learn/unlearn target as `[[midi]]` writes it.
fn target_text(t: &LearnTarget) -> Result<String, String> {
    match t {
        LearnTarget::Param {
            element: Target::Index(i),
            ..
        } => Err(format!(
            "MIDI mappings name nodes, not positions: '{i}' is a position; use the node's name"
        )),
        other => Ok(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_millis(20);

    fn props() -> Props {
        let mut p = Props::new();
        p.prop(
            "glow",
            "blur",
            Range::Float { min: 0.0, max: 1.0 },
            Some("0.5"),
        );
        p.prop(
            "stamp",
            "x",
            Range::Int {
                min: -100,
                max: 100,
            },
            Some("0"),
        );
        p.prop("fx", "on", Range::Bool, Some("false"));
        p.other_prop("stamp", "what");
        p.node("invert");
        p
    }

    fn surface() -> Surface {
        Surface::new(props(), PERIOD, false, SaveContext::default())
    }

    fn cc(channel: u8, number: u8, value: u8) -> Message {
        Message::Cc {
            channel,
            number,
            value,
        }
    }

    fn note(channel: u8, note: u8) -> Message {
        Message::NoteOn {
            channel,
            note,
            velocity: 100,
        }
    }

    fn learn(s: &mut Surface, line: &str) -> String {
        s.command(&Command::parse(line).unwrap()).unwrap()
    }

    /// Feeds messages at `t`, flushes, returns the commands posted as text.
    fn feed(s: &mut Surface, t: Instant, msgs: &[Message]) -> Vec<String> {
        for m in msgs {
            s.message(*m, t, 7);
        }
        s.flush(t);
        s.take_commands().map(|c| c.to_string()).collect()
    }

    fn notices(s: &mut Surface) -> Vec<String> {
        s.take_notices().collect()
    }

    #[test]
    fn learn_a_7_bit_cc_then_move_it() {
        let mut s = surface();
        let t = Instant::now();
        assert!(learn(&mut s, "learn glow.blur").contains("learning glow.blur"));
        // The learning messages are not applied; three decide it.
        assert!(feed(&mut s, t, &[cc(0, 7, 10), cc(0, 7, 11), cc(0, 7, 12)]).is_empty());
        assert_eq!(
            notices(&mut s),
            ["learned cc 7 ch 1 absolute -> glow.blur [0..1] (mapping 1)"]
        );
        let t = t + PERIOD;
        assert_eq!(feed(&mut s, t, &[cc(0, 7, 127)]), ["set glow.blur 1"]);
        // Another channel or number is not this control.
        assert!(feed(&mut s, t + PERIOD * 2, &[cc(1, 7, 0), cc(0, 8, 0)]).is_empty());
    }

    /// Issue #26: a note per clip. `learn stamp.x=3` binds the next note at once; each press
    /// posts `set stamp.x 3` (the same value again: a deck's retrigger), a release nothing; a
    /// name is taken as written (the runtime resolves a deck's clip names); a value on a
    /// property that is not a whole number is refused.
    #[test]
    fn a_note_learned_for_a_value_sets_it_on_every_press() {
        let mut s = surface();
        let t = Instant::now();
        learn(&mut s, "learn stamp.x=3");
        assert!(feed(&mut s, t, &[note(9, 36)]).is_empty());
        assert_eq!(
            notices(&mut s),
            ["learned note 36 ch 10 -> stamp.x=3 (mapping 1)"]
        );
        let off = Message::NoteOff {
            channel: 9,
            note: 36,
        };
        assert_eq!(
            feed(&mut s, t + PERIOD, &[note(9, 36), off, note(9, 36)]),
            ["set stamp.x 3", "set stamp.x 3"]
        );
        learn(&mut s, "learn stamp.x=intro");
        feed(&mut s, t, &[note(9, 37)]);
        assert_eq!(
            feed(&mut s, t + PERIOD, &[note(9, 37)]),
            ["set stamp.x intro"]
        );
        let e = s.command(&Command::parse("learn glow.blur=1").unwrap());
        assert!(
            format!("{e:?}").contains("only a whole-number property"),
            "{e:?}"
        );
    }

    #[test]
    fn a_single_cc_is_learned_when_its_window_ends() {
        let mut s = surface();
        let t = Instant::now();
        learn(&mut s, "learn stamp.x");
        assert!(feed(&mut s, t, &[cc(2, 1, 64)]).is_empty());
        assert!(notices(&mut s).is_empty(), "still watching");
        assert_eq!(
            s.flush(t),
            Some(t + LEARN_WINDOW),
            "wakes up for the window"
        );
        s.flush(t + LEARN_WINDOW);
        assert_eq!(
            notices(&mut s),
            ["learned cc 1 ch 3 absolute -> stamp.x [-100..100] (mapping 1)"]
        );
        // 0 → -100, 64 → round(64/127 × 200) - 100 = 1.
        let t = t + LEARN_WINDOW * 2;
        assert_eq!(feed(&mut s, t, &[cc(2, 1, 0)]), ["set stamp.x -100"]);
        assert_eq!(feed(&mut s, t + PERIOD, &[cc(2, 1, 64)]), ["set stamp.x 1"]);
    }

    #[test]
    fn fourteen_bit_pairs_are_detected() {
        let mut s = surface();
        let t = Instant::now();
        learn(&mut s, "learn glow.blur");
        feed(&mut s, t, &[cc(0, 1, 64), cc(0, 33, 0), cc(0, 1, 64)]);
        s.flush(t + LEARN_WINDOW);
        assert_eq!(
            notices(&mut s),
            ["learned cc14 1 ch 1 absolute -> glow.blur [0..1] (mapping 1)"]
        );
        let t = t + LEARN_WINDOW * 2;
        let want = format!("set glow.blur {}", unit14(0x20, 0x10));
        assert_eq!(feed(&mut s, t, &[cc(0, 1, 0x20), cc(0, 33, 0x10)]), [want]);
        assert_eq!(
            feed(&mut s, t + PERIOD, &[cc(0, 1, 127), cc(0, 33, 127)]),
            ["set glow.blur 1"]
        );
    }

    #[test]
    fn relative_encoders_are_detected_or_told() {
        let mut s = surface();
        let t = Instant::now();
        learn(&mut s, "learn glow.blur");
        feed(&mut s, t, &[cc(0, 16, 1), cc(0, 16, 1), cc(0, 16, 2)]);
        assert_eq!(
            notices(&mut s),
            ["learned cc 16 ch 1 relative-twos -> glow.blur [0..1] (mapping 1)"]
        );
        // From 0.5: +1 step, then −2 (127 = −1, twice) in one batch: coalesced.
        let t = t + PERIOD;
        assert_eq!(
            feed(&mut s, t, &[cc(0, 16, 1)]),
            [format!("set glow.blur {}", 0.5 + 1.0 / 127.0)]
        );
        let out = feed(&mut s, t + PERIOD, &[cc(0, 16, 127), cc(0, 16, 127)]);
        let v: f64 = out[0].rsplit(' ').next().unwrap().parse().unwrap();
        assert!((v - (0.5 - 1.0 / 127.0)).abs() < 1e-12, "{out:?}");
        assert_eq!(s.counts.coalesced, 1);
        // Binary offset, detected.
        learn(&mut s, "learn stamp.x");
        feed(&mut s, t, &[cc(0, 20, 65), cc(0, 20, 65), cc(0, 20, 65)]);
        assert!(notices(&mut s)[0].contains("cc 20 ch 1 relative-offset -> stamp.x"));
        // Told: one message decides, signed bit.
        learn(&mut s, "learn fx.on relative signed");
        feed(&mut s, t, &[cc(0, 21, 65)]);
        assert!(notices(&mut s)[0].contains("cc 21 ch 1 relative-signed -> fx.on"));
        assert_eq!(
            feed(&mut s, t + PERIOD * 3, &[cc(0, 21, 1)]),
            ["set fx.on true"]
        );
        assert_eq!(
            feed(&mut s, t + PERIOD * 5, &[cc(0, 21, 65)]),
            ["set fx.on false"]
        );
        // An absolute fader moving through the same numbers is not relative: no repeat.
        assert_eq!(
            decide(LearnMode::Detect, &[1, 2, 3], false).1,
            MidiMode::Absolute
        );
        assert_eq!(
            decide(LearnMode::Detect, &[127, 126, 125], false).1,
            MidiMode::Absolute
        );
        assert_eq!(
            decide(LearnMode::Detect, &[64, 65, 64], false).1,
            MidiMode::Absolute
        );
        assert_eq!(
            decide(LearnMode::Detect, &[90, 90, 90], false).1,
            MidiMode::Absolute
        );
        assert_eq!(
            decide(LearnMode::Relative, &[63], false).1,
            MidiMode::Relative(Encoding::Offset)
        );
        assert_eq!(
            decide(LearnMode::Relative, &[127], false).1,
            MidiMode::Relative(Encoding::Twos)
        );
    }

    #[test]
    fn notes_toggle_and_trigger() {
        let mut s = surface();
        let t = Instant::now();
        learn(&mut s, "learn invert.bypass");
        assert!(
            feed(&mut s, t, &[note(9, 36)]).is_empty(),
            "the learning press is not applied"
        );
        assert_eq!(
            notices(&mut s),
            ["learned note 36 ch 10 -> invert.bypass (mapping 1)"]
        );
        // Every press toggles, even two in one batch; note offs do nothing.
        let off = Message::NoteOff {
            channel: 9,
            note: 36,
        };
        assert_eq!(
            feed(&mut s, t, &[note(9, 36), off, note(9, 36)]),
            ["bypass invert on", "bypass invert off"]
        );
        learn(&mut s, "learn step");
        feed(&mut s, t, &[note(9, 37)]);
        learn(&mut s, "learn pause");
        feed(&mut s, t, &[note(9, 38)]);
        learn(&mut s, "learn tap");
        feed(&mut s, t, &[cc(0, 64, 127)]);
        notices(&mut s);
        assert_eq!(
            feed(
                &mut s,
                t,
                &[note(9, 37), note(9, 37), note(9, 38), note(9, 38)]
            ),
            ["step 1", "step 1", "pause", "resume"]
        );
        // A CC button triggers on its press only (a rise past 64), not on its release.
        assert_eq!(
            feed(&mut s, t, &[cc(0, 64, 127), cc(0, 64, 0), cc(0, 64, 127)]),
            ["tap", "tap"]
        );
        let taps: Vec<Command> = {
            s.message(cc(0, 64, 0), t, 0);
            s.message(cc(0, 64, 100), t, 1234);
            s.take_commands().collect()
        };
        assert_eq!(
            taps,
            [Command::Tap { at_ns: Some(1234) }],
            "taps keep their arrival time"
        );
        // A note on a numeric property toggles it between its ends.
        learn(&mut s, "learn glow.blur");
        feed(&mut s, t, &[note(0, 1)]);
        assert_eq!(feed(&mut s, t, &[note(0, 1)]), ["set glow.blur 1"]);
        assert_eq!(feed(&mut s, t, &[note(0, 1)]), ["set glow.blur 0"]);
    }

    #[test]
    fn pause_toggles_follow_the_engine_when_told() {
        let mut s = surface();
        let paused = Arc::new(AtomicBool::new(true));
        let p = Arc::clone(&paused);
        s.set_paused_probe(Box::new(move || p.load(Ordering::Relaxed)));
        let t = Instant::now();
        learn(&mut s, "learn pause");
        feed(&mut s, t, &[note(0, 1)]);
        assert_eq!(feed(&mut s, t, &[note(0, 1)]), ["resume"]);
        paused.store(false, Ordering::Relaxed);
        assert_eq!(feed(&mut s, t, &[note(0, 1)]), ["pause"]);
    }
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// The engine's published values, for the tests: set from the test.
    struct Fake(Arc<std::sync::Mutex<(f64, bool)>>);

    impl LiveValues for Fake {
        fn value(&mut self, _node: &str, prop: &str) -> Option<f64> {
            (prop == "blur").then(|| self.0.lock().unwrap().0)
        }
        fn bypassed(&mut self, _node: &str) -> Option<bool> {
            Some(self.0.lock().unwrap().1)
        }
    }

    #[test]
    fn relative_steps_and_toggles_start_from_the_engines_values() {
        let mut s = surface();
        let live = Arc::new(std::sync::Mutex::new((0.25, true)));
        s.set_live_values(Box::new(Fake(Arc::clone(&live))));
        let t = Instant::now();
        learn(&mut s, "learn glow.blur relative twos");
        feed(&mut s, t, &[cc(0, 16, 1)]);
        learn(&mut s, "learn invert.bypass");
        feed(&mut s, t, &[note(0, 1)]);
        notices(&mut s);
        // Another surface set 0.25 and bypassed the invert: MIDI starts from there.
        let t = t + OWN_VALUE_TRUST;
        assert_eq!(
            feed(&mut s, t, &[cc(0, 16, 1)]),
            [format!("set glow.blur {}", 0.25 + 1.0 / 127.0)]
        );
        assert_eq!(feed(&mut s, t, &[note(0, 1)]), ["bypass invert off"]);
        // Right after its own change the surface trusts its own value, not the lagging view.
        let t = t + PERIOD;
        assert_eq!(
            feed(&mut s, t, &[cc(0, 16, 1)]),
            [format!(
                "set glow.blur {}",
                0.25 + 1.0 / 127.0 + 1.0 / 127.0
            )]
        );
        assert_eq!(feed(&mut s, t, &[note(0, 1)]), ["bypass invert on"]);
        // Later, the view again.
        live.lock().unwrap().0 = 0.75;
        let t = t + OWN_VALUE_TRUST;
        assert_eq!(
            feed(&mut s, t, &[cc(0, 16, 127)]),
            [format!("set glow.blur {}", 0.75 - 1.0 / 127.0)]
        );
    }

    #[test]
    fn a_flood_is_coalesced_to_one_set_per_period_and_the_last_value_lands() {
        let mut s = surface();
        let t0 = Instant::now();
        learn(&mut s, "learn glow.blur relative twos");
        feed(&mut s, t0, &[cc(0, 7, 1)]);
        s.command(&Command::parse("unlearn 1").unwrap()).unwrap();
        learn(&mut s, "learn glow.blur");
        feed(&mut s, t0, &[cc(0, 7, 3), cc(0, 7, 4), cc(0, 7, 5)]);
        notices(&mut s);
        let mut posted = Vec::new();
        let mut t = t0;
        for k in 0..10_000u32 {
            // 10,000 messages over 100 ms, flushed after each.
            t = t0 + Duration::from_micros(u64::from(k) * 10);
            s.message(cc(0, 7, (k % 128) as u8), t, 0);
            s.flush(t);
            posted.extend(s.take_commands().map(|c| c.to_string()));
        }
        // At most one per period (20 ms) over 100 ms, plus the first.
        assert!(posted.len() <= 6, "{}", posted.len());
        assert!(s.counts.coalesced > 9_000);
        // The held value goes out when the period ends: the last one.
        let next = s.flush(t).expect("a value is held");
        s.flush(next);
        let last: Vec<String> = s.take_commands().map(|c| c.to_string()).collect();
        assert_eq!(
            last,
            [format!("set glow.blur {}", f64::from(9_999 % 128) / 127.0)]
        );
    }

    #[test]
    fn learning_a_control_again_replaces_its_mapping_and_unlearn_removes() {
        let mut s = surface();
        let t = Instant::now();
        learn(&mut s, "learn invert.bypass");
        feed(&mut s, t, &[note(0, 1)]);
        learn(&mut s, "learn step");
        feed(&mut s, t, &[note(0, 1)]);
        let n = notices(&mut s);
        assert!(n[1].contains("replaces mapping 1"), "{n:?}");
        assert_eq!(s.mappings().len(), 1);
        learn(&mut s, "learn tap");
        feed(&mut s, t, &[note(0, 2)]);
        let list = s.command(&Command::Mappings).unwrap();
        assert_eq!(
            list,
            "2 MIDI mappings:\n  1: note 1 ch 1 -> step\n  2: note 2 ch 1 -> tap"
        );
        assert!(s
            .command(&Command::parse("unlearn tap").unwrap())
            .unwrap()
            .contains("unlearned 1 mapping: 2: note 2 ch 1 -> tap"));
        assert_eq!(
            s.command(&Command::parse("unlearn 5").unwrap())
                .unwrap_err(),
            "no mapping 5; there are 1 (see 'midi')"
        );
        assert!(s.command(&Command::parse("unlearn all").unwrap()).is_ok());
        assert_eq!(s.command(&Command::Mappings).unwrap(), "no MIDI mappings");
    }

    #[test]
    fn learn_checks_its_target() {
        let mut s = surface();
        let err =
            |s: &mut Surface, line: &str| s.command(&Command::parse(line).unwrap()).unwrap_err();
        assert_eq!(
            err(&mut s, "learn glw.blur"),
            "unknown node 'glw'; expected one of: fx, glow, invert, stamp"
        );
        assert_eq!(
            err(&mut s, "learn glow.blurr"),
            "unknown property 'blurr' on glow; expected one of: blur, bypass"
        );
        assert!(err(&mut s, "learn stamp.what").contains("not a number or a boolean"));
        assert!(err(&mut s, "learn 2.x").contains("not positions"));
        assert!(err(&mut s, "pause").contains("not a surface command"));
        // A second learn replaces the first.
        learn(&mut s, "learn glow.blur");
        assert!(learn(&mut s, "learn tap").contains("(instead of glow.blur)"));
    }

    #[test]
    fn project_mappings_load_and_name_their_table() {
        let mut s = surface();
        let b = |target: &str| MidiBinding {
            kind: MidiControlKind::Cc,
            channel: 2,
            number: 7,
            mode: MidiMode::Absolute,
            target: target.into(),
        };
        s.load(&[b("glow.blur")]).unwrap();
        assert_eq!(
            s.mappings()[0].to_string(),
            "cc 7 ch 2 absolute -> glow.blur [0..1]"
        );
        assert_eq!(s.mappings()[0].binding(), b("glow.blur"));
        let e = s.load(&[b("glow.blur"), b("nope.x")]).unwrap_err();
        assert!(e.starts_with("[[midi]] 2: unknown node 'nope'"), "{e}");
    }

    #[test]
    fn save_writes_mappings_that_load_back() {
        let dir = framepipe_testkit::tmpdir("fp-midi-save");
        let desc = framepipe_project::parse_pipeline("testsrc ! frei0r-glow name=glow ! nullsink")
            .unwrap();
        let mut s = Surface::new(
            props(),
            PERIOD,
            false,
            SaveContext {
                project: None,
                desc: desc.clone(),
            },
        );
        let t = Instant::now();
        learn(&mut s, "learn glow.blur relative offset");
        feed(&mut s, t, &[cc(3, 9, 65)]);
        assert!(s
            .command(&Command::Save { file: None })
            .unwrap_err()
            .contains("needs a FILE"));
        let file = dir.join("show.toml");
        let said = s
            .command(&Command::Save {
                file: Some(file.display().to_string()),
            })
            .unwrap();
        assert_eq!(said, format!("saved 1 MIDI mapping to {}", file.display()));
        let loaded =
            framepipe_project::parse_project(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(loaded.nodes, desc.nodes);
        assert_eq!(loaded.midi, [s.mappings()[0].binding()]);
        // Run from that project file, `save` rewrites its [[midi]] tables in place.
        let mut s2 = Surface::new(
            props(),
            PERIOD,
            false,
            SaveContext {
                project: Some(file.clone()),
                desc: loaded.clone(),
            },
        );
        s2.load(&loaded.midi).unwrap();
        learn(&mut s2, "learn step");
        feed(&mut s2, t, &[note(0, 5)]);
        s2.command(&Command::Save { file: None }).unwrap();
        let again =
            framepipe_project::parse_project(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(again.midi.len(), 2);
        assert_eq!(again.midi[1].target, "step");
    }
}
