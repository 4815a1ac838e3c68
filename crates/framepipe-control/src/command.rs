//! [`Command`]s and their one-line text protocol.

use std::fmt;

use crate::edit::GraphEdit;
use crate::osc::Oscillator;
use crate::{Error, Result};

const COMMANDS: &str = "set, osc, unosc, bypass, speed, tempo, tap, pause, step, resume, stop, \
                        trigger, next, prev, batch, add, remove, replace, link, load, learn, unlearn, midi, \
                        mappings, save";

/// An element of the running pipeline, by name or by position.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// Position in the pipeline string, 0-based: the source is 0, the first effect 1, ...
    Index(usize),
    /// Element name (`frei0r-glow`). When a name occurs more than once, the runtime decides;
    /// use an index to be exact.
    Name(String),
}

impl Target {
    /// A target from text: all digits = an index, anything else = a name.
    pub fn parse(text: &str) -> Result<Self> {
        let t = text.trim();
        if t.is_empty() {
            return Err(Error::BadArgument {
                command: "target".into(),
                token: text.into(),
                reason: "empty element name".into(),
            });
        }
        if t.bytes().all(|b| b.is_ascii_digit()) {
            t.parse()
                .map(Target::Index)
                .map_err(|_| Error::BadArgument {
                    command: "target".into(),
                    token: t.into(),
                    reason: "element index too large".into(),
                })
        } else {
            Ok(Target::Name(t.to_string()))
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Index(i) => write!(f, "{i}"),
            Target::Name(n) => f.write_str(n),
        }
    }
}

/// How a relative encoder writes its steps into a CC value (`learn ... relative ENCODING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Two's complement: 1..=63 up by that many, 127..=65 down by 1..=63 (`twos`).
    Twos,
    /// Binary offset: 65..=127 up by value − 64, 63..=0 down by 64 − value (`offset`).
    Offset,
    /// Signed bit: 1..=63 up, 65..=127 down by value − 64 (`signed`).
    Signed,
}

impl Encoding {
    /// Every encoding with its protocol word.
    pub const ALL: [(Encoding, &'static str); 3] = [
        (Encoding::Twos, "twos"),
        (Encoding::Offset, "offset"),
        (Encoding::Signed, "signed"),
    ];

    /// The protocol word (`twos`, `offset`, `signed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Twos => "twos",
            Encoding::Offset => "offset",
            Encoding::Signed => "signed",
        }
    }

    /// The encoding named by `word` (case-insensitive).
    pub fn parse(word: &str) -> Option<Encoding> {
        Encoding::ALL
            .iter()
            .find(|(_, w)| w.eq_ignore_ascii_case(word))
            .map(|(e, _)| *e)
    }
}

/// How `learn` reads the control it binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LearnMode {
    /// Absolute (7-bit, or 14-bit when the control sends CC n and n+32) unless the control's
    /// first values show a relative encoder.
    Detect,
    /// A relative encoder, its encoding told by its first values (`learn ... relative`).
    Relative,
    /// A relative encoder with this encoding (`learn ... relative offset`).
    RelativeAs(Encoding),
}

/// What a MIDI control can be bound to (`learn TARGET`, `unlearn TARGET`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LearnTarget {
    /// A node's property, or its bypass (`NODE.bypass`, unless the node has a property of that
    /// name).
    Param {
        /// The node.
        element: Target,
        /// The property name, or `bypass`.
        prop: String,
    },
    /// Pause / resume, toggled.
    Pause,
    /// Release one frame while paused.
    Step,
    /// A tap of tap tempo.
    Tap,
}

impl LearnTarget {
    /// `NODE.PROPERTY`, `pause`, `step` or `tap`.
    fn parse(command: &'static str, token: Option<&str>) -> Result<LearnTarget> {
        match token.map(str::to_ascii_lowercase).as_deref() {
            Some("pause") => return Ok(LearnTarget::Pause),
            Some("step") => return Ok(LearnTarget::Step),
            Some("tap") => return Ok(LearnTarget::Tap),
            _ => {}
        }
        let token = token.ok_or(Error::MissingArgument {
            command,
            what: "NODE.PROPERTY, NODE.bypass, pause, step or tap, e.g. learn glow.blur",
        })?;
        let (element, prop) = parse_param(command, Some(token))?;
        Ok(LearnTarget::Param { element, prop })
    }
}

impl fmt::Display for LearnTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LearnTarget::Param { element, prop } => write!(f, "{element}.{prop}"),
            LearnTarget::Pause => f.write_str("pause"),
            LearnTarget::Step => f.write_str("step"),
            LearnTarget::Tap => f.write_str("tap"),
        }
    }
}

/// Which mappings `unlearn` removes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Unlearn {
    /// The mapping of this number, as `midi` lists them (from 1).
    Number(usize),
    /// Every mapping to this target.
    Target(LearnTarget),
    /// Every mapping (`unlearn all`).
    All,
}

impl fmt::Display for Unlearn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unlearn::Number(n) => write!(f, "{n}"),
            Unlearn::Target(t) => write!(f, "{t}"),
            Unlearn::All => f.write_str("all"),
        }
    }
}

/// A command to a running engine. Takes effect at a frame boundary, for that frame in every
/// stage.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Set a property to a fixed value (text, parsed by the element's property spec). Replaces
    /// an oscillator on that property.
    Set {
        /// The element.
        element: Target,
        /// Property name.
        prop: String,
        /// The value as text.
        value: String,
    },
    /// Attach an oscillator to a numeric property, or replace the one it has.
    Osc {
        /// The element.
        element: Target,
        /// Property name.
        prop: String,
        /// The oscillator.
        osc: Oscillator,
    },
    /// Remove a property's oscillator; the property keeps its last value.
    Unosc {
        /// The element.
        element: Target,
        /// Property name.
        prop: String,
    },
    /// Bypass an effect (frames pass through unchanged) or put it back.
    Bypass {
        /// The element.
        element: Target,
        /// `true` = bypassed.
        on: bool,
    },
    /// Set the master speed of all oscillators (1 = normal, 0 = frozen).
    Speed(f64),
    /// Set the tempo of the beat clock, bpm (20..=999); beat oscillators keep their phase.
    /// Ends `tempo auto`.
    Tempo(f64),
    /// `tempo auto`: the beat clock follows the show's audio (its tempo estimate, its phase
    /// nudged by onsets) until a `tempo BPM` or a `tap`.
    TempoAuto,
    /// A tap of tap tempo: taps set the tempo and re-align the beat phase (see
    /// [`beat`](crate::beat)).
    Tap {
        /// When it was posted ([`monotonic_ns`](crate::monotonic_ns)):
        /// [`CommandSender::post`](crate::CommandSender::post) fills it in when `None` (as
        /// parsed), so the tap keeps the moment the user made it, however late the engine
        /// reads it. Not part of the text protocol.
        at_ns: Option<i64>,
    },
    /// Stop releasing frames at the next frame boundary.
    Pause,
    /// While paused: release this many next frames, one per frame period.
    Step(u32),
    /// Continue from a pause, without a burst.
    Resume,
    /// End the run cleanly.
    Stop,
    /// Several commands applied together, at the same frame, or all refused (an OSC bundle;
    /// `batch CMD; CMD; ...` in the text protocol). Parameter and transport commands only (no
    /// `stop`, no nested batch), at most [`MAX_BATCH`].
    Batch(Vec<Command>),
    /// A live edit of the graph: `add`, `remove`, `replace`, `link`, `load` (see
    /// [`GraphEdit`]). Never part of a batch.
    Edit(GraphEdit),
    /// Surface command (not for the engine): bind the next MIDI control moved to `target`.
    Learn {
        /// What the control will drive.
        target: LearnTarget,
        /// Absolute/relative detection, or relative as told.
        mode: LearnMode,
    },
    /// Surface command (not for the engine): remove MIDI mappings.
    Unlearn(Unlearn),
    /// Surface command (not for the engine): list the MIDI mappings (`midi` or `mappings`).
    Mappings,
    /// Surface command (not for the engine): write the project file with its `[[midi]]`
    /// mappings, to `file` or to the project file the run was started from.
    Save {
        /// Where to write; `None`: the run's own project file.
        file: Option<String>,
    },
    /// Every command source has closed (stdin reached its end): nothing can resume a pause any
    /// more, so a paused run stops once the steps already asked for are out. Not a protocol
    /// line: the queue produces it, once, when the last [`CommandSender`](crate::CommandSender)
    /// is gone and every command before it has been read.
    EndOfInput,
}

/// The most commands in one [`Command::Batch`].
pub const MAX_BATCH: usize = 64;

/// Splits `element.prop` at the last dot.
fn parse_param(command: &'static str, token: Option<&str>) -> Result<(Target, String)> {
    let token = token.ok_or(Error::MissingArgument {
        command,
        what: "ELEMENT.PROPERTY, e.g. frei0r-glow.blur or 1.blur",
    })?;
    let (el, prop) = token.rsplit_once('.').ok_or_else(|| Error::BadArgument {
        command: command.into(),
        token: token.into(),
        reason: "expected ELEMENT.PROPERTY, e.g. frei0r-glow.blur or 1.blur".into(),
    })?;
    if prop.is_empty() {
        return Err(Error::BadArgument {
            command: command.into(),
            token: token.into(),
            reason: "empty property name after '.'".into(),
        });
    }
    let element = Target::parse(el).map_err(|_| Error::BadArgument {
        command: command.into(),
        token: token.into(),
        reason: "empty element before '.'".into(),
    })?;
    Ok((element, prop.to_string()))
}

fn no_more<'a>(command: &'static str, mut rest: impl Iterator<Item = &'a str>) -> Result<()> {
    match rest.next() {
        Some(t) => Err(Error::ExtraArgument {
            command,
            token: t.into(),
        }),
        None => Ok(()),
    }
}

/// The text after the first `n` whitespace-separated words of `line`, trimmed.
fn rest_after_words(line: &str, n: usize) -> &str {
    let mut s = line.trim_start();
    for _ in 0..n {
        let end = s.find(char::is_whitespace).unwrap_or(s.len());
        s = s[end..].trim_start();
    }
    s.trim_end()
}

impl Command {
    /// Parses one line of the text protocol (see `docs/CONTROL.md`):
    ///
    /// ```text
    /// set ELEMENT.PROP VALUE            set frei0r-glow.blur 0.7   (a ~oscillator VALUE = osc)
    /// osc ELEMENT.PROP SHAPE [k=v ...]  osc stamp.value sine freq=0.5 min=0 max=1 phase=0
    /// osc ELEMENT.PROP ~COMPACT         osc 2.blur ~triangle:0.25hz:0..1
    /// unosc ELEMENT.PROP
    /// bypass ELEMENT on|off             bypass 2 on
    /// speed X                           speed 2
    /// tempo BPM                         tempo 128
    /// tap
    /// pause | step [N] | resume | stop
    /// trigger NODE N|NAME               trigger deck 2, trigger deck intro   (= set deck.clip 2)
    /// next NODE | prev NODE             next deck                            (= set deck.clip next)
    /// add ELEMENT [k=v ...] after|before NODE    add frei0r-glow blur=0.3 after fx1
    /// remove NODE
    /// replace NODE ELEMENT [k=v ...]             replace clip ffmpegsrc location=b.mp4
    /// link NODE[.sink_K] FROM                    link mix.sink_1 clipB
    /// load FILE [fade=DURATION]                  load scene2.toml fade=2s
    /// learn TARGET [relative [twos|offset|signed]]   learn glow.blur, learn 2.bypass, learn step
    /// unlearn N|TARGET|all
    /// midi | mappings
    /// save [FILE]
    /// ```
    ///
    /// `learn`, `unlearn`, `midi` and `save` are surface commands ([`Command::is_surface`]).
    ///
    /// Words are separated by whitespace; command words are case-insensitive. Errors name the
    /// offending token.
    pub fn parse(line: &str) -> Result<Command> {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else {
            return Err(Error::Empty);
        };
        if first.starts_with('#') {
            return Err(Error::Empty);
        }
        match first.to_ascii_lowercase().as_str() {
            "set" => {
                let (element, prop) = parse_param("set", words.next())?;
                let value = rest_after_words(line, 2);
                if value.is_empty() {
                    return Err(Error::MissingArgument {
                        command: "set",
                        what: "a value, e.g. set frei0r-glow.blur 0.7",
                    });
                }
                if value.starts_with('~') {
                    let osc = Oscillator::parse_compact(value)?;
                    return Ok(Command::Osc { element, prop, osc });
                }
                Ok(Command::Set {
                    element,
                    prop,
                    value: value.to_string(),
                })
            }
            "osc" => {
                let (element, prop) = parse_param("osc", words.next())?;
                let rest: Vec<&str> = words.collect();
                if rest.is_empty() {
                    return Err(Error::MissingArgument {
                        command: "osc",
                        what: "a shape, e.g. osc stamp.value sine freq=0.5 min=0 max=1",
                    });
                }
                let osc = Oscillator::parse_words(&rest)?;
                Ok(Command::Osc { element, prop, osc })
            }
            "unosc" => {
                let (element, prop) = parse_param("unosc", words.next())?;
                no_more("unosc", words)?;
                Ok(Command::Unosc { element, prop })
            }
            "bypass" => {
                let el = words.next().ok_or(Error::MissingArgument {
                    command: "bypass",
                    what: "an element and on|off, e.g. bypass 2 on",
                })?;
                let element = Target::parse(el)?;
                let on = match words.next().map(|w| w.to_ascii_lowercase()) {
                    Some(w) if matches!(w.as_str(), "on" | "1" | "true" | "yes") => true,
                    Some(w) if matches!(w.as_str(), "off" | "0" | "false" | "no") => false,
                    Some(w) => {
                        return Err(Error::BadArgument {
                            command: "bypass".into(),
                            token: w,
                            reason: "expected on or off".into(),
                        })
                    }
                    None => {
                        return Err(Error::MissingArgument {
                            command: "bypass",
                            what: "on or off, e.g. bypass 2 on",
                        })
                    }
                };
                no_more("bypass", words)?;
                Ok(Command::Bypass { element, on })
            }
            "speed" => {
                let t = words.next().ok_or(Error::MissingArgument {
                    command: "speed",
                    what: "a number, e.g. speed 2",
                })?;
                let max = crate::osc::MAX_SPEED;
                let speed = t
                    .parse::<f64>()
                    .ok()
                    .filter(|s| (-max..=max).contains(s))
                    .ok_or_else(|| Error::BadArgument {
                        command: "speed".into(),
                        token: t.into(),
                        reason: "expected a number within ±100".into(),
                    })?;
                no_more("speed", words)?;
                Ok(Command::Speed(speed))
            }
            "tempo" => {
                let t = words.next().ok_or(Error::MissingArgument {
                    command: "tempo",
                    what: "a tempo in bpm, e.g. tempo 128, or auto",
                })?;
                if t.eq_ignore_ascii_case("auto") {
                    no_more("tempo", words)?;
                    return Ok(Command::TempoAuto);
                }
                let bpm = t
                    .parse::<f64>()
                    .ok()
                    .filter(|b| crate::beat::check_tempo(*b).is_ok())
                    .ok_or_else(|| Error::BadArgument {
                        command: "tempo".into(),
                        token: t.into(),
                        reason: "expected a tempo in bpm within 20..=999, or auto".into(),
                    })?;
                no_more("tempo", words)?;
                Ok(Command::Tempo(bpm))
            }
            "tap" => no_more("tap", words).map(|_| Command::Tap { at_ns: None }),
            // A deck's clip: its `clip` property, set at a frame boundary like any `set` (the
            // runtime reads a name and next/prev, wrapping around the bank).
            "trigger" => {
                let what = "a deck and a clip (its number or name), e.g. trigger deck 2";
                let el = words.next().ok_or(Error::MissingArgument {
                    command: "trigger",
                    what,
                })?;
                let clip = words.next().ok_or(Error::MissingArgument {
                    command: "trigger",
                    what,
                })?;
                no_more("trigger", words)?;
                Ok(Command::Set {
                    element: Target::parse(el)?,
                    prop: "clip".into(),
                    value: clip.to_string(),
                })
            }
            w @ ("next" | "prev") => {
                let command = if w == "next" { "next" } else { "prev" };
                let el = words.next().ok_or(Error::MissingArgument {
                    command,
                    what: "a deck, e.g. next deck",
                })?;
                no_more(command, words)?;
                Ok(Command::Set {
                    element: Target::parse(el)?,
                    prop: "clip".into(),
                    value: command.to_string(),
                })
            }
            "batch" => {
                let rest = rest_after_words(line, 1);
                let parts: Vec<&str> = rest
                    .split(';')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .collect();
                let cmds = parts
                    .iter()
                    .map(|p| Command::parse(p))
                    .collect::<Result<Vec<_>>>()?;
                Command::batch(cmds)
            }
            "step" => {
                let n = match words.next() {
                    None => 1,
                    Some(t) => t.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
                        Error::BadArgument {
                            command: "step".into(),
                            token: t.into(),
                            reason: "expected a whole number of frames ≥ 1".into(),
                        }
                    })?,
                };
                no_more("step", words)?;
                Ok(Command::Step(n))
            }
            "learn" => {
                let target = LearnTarget::parse("learn", words.next())?;
                let mode = match words.next() {
                    None => LearnMode::Detect,
                    Some(w) if w.eq_ignore_ascii_case("relative") => match words.next() {
                        None => LearnMode::Relative,
                        Some(e) => LearnMode::RelativeAs(Encoding::parse(e).ok_or_else(|| {
                            Error::BadArgument {
                                command: "learn".into(),
                                token: e.into(),
                                reason: "expected an encoding: twos, offset or signed".into(),
                            }
                        })?),
                    },
                    Some(w) => {
                        return Err(Error::BadArgument {
                            command: "learn".into(),
                            token: w.into(),
                            reason: "expected 'relative' (or nothing: detected)".into(),
                        })
                    }
                };
                no_more("learn", words)?;
                Ok(Command::Learn { target, mode })
            }
            "unlearn" => {
                let token = words.next().ok_or(Error::MissingArgument {
                    command: "unlearn",
                    what:
                        "a mapping number (as 'midi' lists them), a target or all, e.g. unlearn 2",
                })?;
                let what = if token.eq_ignore_ascii_case("all") {
                    Unlearn::All
                } else if token.bytes().all(|b| b.is_ascii_digit()) {
                    Unlearn::Number(token.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        Error::BadArgument {
                            command: "unlearn".into(),
                            token: token.into(),
                            reason: "expected a mapping number from 1".into(),
                        }
                    })?)
                } else {
                    Unlearn::Target(LearnTarget::parse("unlearn", Some(token))?)
                };
                no_more("unlearn", words)?;
                Ok(Command::Unlearn(what))
            }
            "midi" | "mappings" => no_more("midi", words).map(|_| Command::Mappings),
            "save" => {
                let file = rest_after_words(line, 1);
                Ok(Command::Save {
                    file: (!file.is_empty()).then(|| file.to_string()),
                })
            }
            "pause" => no_more("pause", words).map(|_| Command::Pause),
            "resume" => no_more("resume", words).map(|_| Command::Resume),
            "stop" => no_more("stop", words).map(|_| Command::Stop),
            _ => match GraphEdit::parse(first, rest_after_words(line, 1))? {
                Some(edit) => Ok(Command::Edit(edit)),
                None => Err(Error::UnknownCommand {
                    word: first.into(),
                    expected: COMMANDS,
                }),
            },
        }
    }

    /// A [`Command::Batch`] of `cmds`, checked: 1 to [`MAX_BATCH`] commands, none of them
    /// `stop`, a batch or an edit.
    pub fn batch(cmds: Vec<Command>) -> Result<Command> {
        if cmds.is_empty() {
            return Err(Error::MissingArgument {
                command: "batch",
                what: "commands separated by ';', e.g. batch set a.x 1; set b.y 2",
            });
        }
        if cmds.len() > MAX_BATCH {
            return Err(Error::BadArgument {
                command: "batch".into(),
                token: format!("{} commands", cmds.len()),
                reason: format!("at most {MAX_BATCH} commands in one batch"),
            });
        }
        if let Some(c) = cmds.iter().find(|c| {
            matches!(
                c,
                Command::Stop | Command::Batch(_) | Command::EndOfInput | Command::Edit(_)
            )
        }) {
            return Err(Error::BadArgument {
                command: "batch".into(),
                token: c.to_string(),
                reason: "stop, batch and edits (add, remove, replace, link, load) cannot be part \
                         of a batch"
                    .into(),
            });
        }
        if let Some(c) = cmds.iter().find(|c| c.is_surface()) {
            return Err(Error::BadArgument {
                command: "batch".into(),
                token: c.to_string(),
                reason: "surface commands (learn, unlearn, midi, save) cannot be part of a batch"
                    .into(),
            });
        }
        Ok(Command::Batch(cmds))
    }

    /// Like [`parse`](Self::parse), but a blank line or a `#` comment gives `Ok(None)`.
    pub fn parse_line(line: &str) -> Result<Option<Command>> {
        match Command::parse(line) {
            Ok(c) => Ok(Some(c)),
            Err(Error::Empty) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether this is a surface command (`learn`, `unlearn`, `midi`, `save`): handled by the
    /// surface that owns MIDI mappings, never by the engine (which refuses it if it gets one).
    pub fn is_surface(&self) -> bool {
        matches!(
            self,
            Command::Learn { .. } | Command::Unlearn(_) | Command::Mappings | Command::Save { .. }
        )
    }

    /// Whether this is a value or transport command (`set`, `osc`, `unosc`, `bypass`, `speed`,
    /// `tempo`, `tap`, `pause`, `step`, `resume`, `stop`, or a batch of them): what every
    /// control surface may post. Not an edit (which can name files and hosts), not a surface
    /// command (`save` writes a file). Issue #21: surfaces admit by this, not by the text.
    pub fn is_value_or_transport(&self) -> bool {
        match self {
            Command::Set { .. }
            | Command::Osc { .. }
            | Command::Unosc { .. }
            | Command::Bypass { .. }
            | Command::Speed(_)
            | Command::Tempo(_)
            | Command::TempoAuto
            | Command::Tap { .. }
            | Command::Pause
            | Command::Step(_)
            | Command::Resume
            | Command::Stop => true,
            Command::Batch(cmds) => cmds.iter().all(Command::is_value_or_transport),
            Command::Edit(_)
            | Command::Learn { .. }
            | Command::Unlearn(_)
            | Command::Mappings
            | Command::Save { .. }
            | Command::EndOfInput => false,
        }
    }

    /// The command's word as the protocol writes it (`set`, `replace`, `save`, ...).
    pub fn word(&self) -> &'static str {
        match self {
            Command::Set { .. } => "set",
            Command::Osc { .. } => "osc",
            Command::Unosc { .. } => "unosc",
            Command::Bypass { .. } => "bypass",
            Command::Speed(_) => "speed",
            Command::Tempo(_) | Command::TempoAuto => "tempo",
            Command::Tap { .. } => "tap",
            Command::Pause => "pause",
            Command::Step(_) => "step",
            Command::Resume => "resume",
            Command::Stop => "stop",
            Command::Batch(_) => "batch",
            Command::Edit(GraphEdit::Add { .. }) => "add",
            Command::Edit(GraphEdit::Remove { .. }) => "remove",
            Command::Edit(GraphEdit::Replace { .. }) => "replace",
            Command::Edit(GraphEdit::Link { .. }) => "link",
            Command::Edit(GraphEdit::Load { .. }) => "load",
            Command::Learn { .. } => "learn",
            Command::Unlearn(_) => "unlearn",
            Command::Mappings => "midi",
            Command::Save { .. } => "save",
            Command::EndOfInput => "end-of-input",
        }
    }

    /// The element the command is about, if any.
    pub fn target(&self) -> Option<&Target> {
        match self {
            Command::Set { element, .. }
            | Command::Osc { element, .. }
            | Command::Unosc { element, .. }
            | Command::Bypass { element, .. } => Some(element),
            _ => None,
        }
    }
}

impl fmt::Display for Command {
    /// The command as a protocol line, which [`Command::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Set {
                element,
                prop,
                value,
            } => write!(f, "set {element}.{prop} {value}"),
            Command::Osc { element, prop, osc } => write!(f, "osc {element}.{prop} {osc}"),
            Command::Unosc { element, prop } => write!(f, "unosc {element}.{prop}"),
            Command::Bypass { element, on } => {
                write!(f, "bypass {element} {}", if *on { "on" } else { "off" })
            }
            Command::Speed(s) => write!(f, "speed {s}"),
            Command::Tempo(b) => write!(f, "tempo {b}"),
            Command::TempoAuto => write!(f, "tempo auto"),
            // The posting time is the sender's, not the protocol's.
            Command::Tap { .. } => f.write_str("tap"),
            Command::Pause => f.write_str("pause"),
            Command::Step(n) => write!(f, "step {n}"),
            Command::Resume => f.write_str("resume"),
            Command::Stop => f.write_str("stop"),
            Command::Edit(edit) => write!(f, "{edit}"),
            Command::Batch(cmds) => {
                f.write_str("batch ")?;
                for (i, c) in cmds.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{c}")?;
                }
                Ok(())
            }
            Command::Learn { target, mode } => match mode {
                LearnMode::Detect => write!(f, "learn {target}"),
                LearnMode::Relative => write!(f, "learn {target} relative"),
                LearnMode::RelativeAs(e) => write!(f, "learn {target} relative {}", e.as_str()),
            },
            Command::Unlearn(what) => write!(f, "unlearn {what}"),
            Command::Mappings => f.write_str("midi"),
            Command::Save { file: None } => f.write_str("save"),
            Command::Save { file: Some(file) } => write!(f, "save {file}"),
            // A comment line: the protocol has no such command (the queue makes it).
            Command::EndOfInput => f.write_str("# end of command input"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::osc::Shape;

    fn name(s: &str) -> Target {
        Target::Name(s.into())
    }

    #[test]
    fn batches_parse_print_back_and_refuse_what_cannot_be_batched() {
        let b = Command::parse("batch set a.x 1; bypass b on ;pause").unwrap();
        let Command::Batch(cmds) = &b else {
            panic!("{b:?}")
        };
        assert_eq!(cmds.len(), 3);
        assert_eq!(b.to_string(), "batch set a.x 1; bypass b on; pause");
        assert_eq!(Command::parse(&b.to_string()).unwrap(), b);
        for bad in [
            "batch",
            "batch ;",
            "batch set a.x 1; stop",
            "batch batch pause",
        ] {
            assert!(Command::parse(bad).is_err(), "{bad}");
        }
        let many = vec!["pause"; MAX_BATCH + 1].join("; ");
        let e = Command::parse(&format!("batch {many}")).unwrap_err();
        assert!(e.to_string().contains("at most 64"), "{e}");
        // A bad command inside names itself.
        let e = Command::parse("batch set a.x 1; bogus 2").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }

    #[test]
    fn good_lines() {
        assert_eq!(
            Command::parse("set frei0r-glow.blur 0.7").unwrap(),
            Command::Set {
                element: name("frei0r-glow"),
                prop: "blur".into(),
                value: "0.7".into()
            }
        );
        assert_eq!(
            Command::parse("  SET 3.color  1, 0.5, 0 ").unwrap(),
            Command::Set {
                element: Target::Index(3),
                prop: "color".into(),
                value: "1, 0.5, 0".into()
            }
        );
        assert_eq!(
            Command::parse("osc stamp.value sine freq=0.5 min=0 max=1 phase=0").unwrap(),
            Command::Osc {
                element: name("stamp"),
                prop: "value".into(),
                osc: Oscillator::new(Shape::Sine).with_freq(0.5)
            }
        );
        assert_eq!(
            Command::parse("osc 2.blur ~triangle:0.25hz:0..1").unwrap(),
            Command::Osc {
                element: Target::Index(2),
                prop: "blur".into(),
                osc: Oscillator::new(Shape::Triangle).with_freq(0.25)
            }
        );
        // set with an oscillator value attaches it.
        assert_eq!(
            Command::parse("set a.b ~square:2hz").unwrap(),
            Command::Osc {
                element: name("a"),
                prop: "b".into(),
                osc: Oscillator::new(Shape::Square).with_freq(2.0)
            }
        );
        assert_eq!(
            Command::parse("unosc stamp.value").unwrap(),
            Command::Unosc {
                element: name("stamp"),
                prop: "value".into()
            }
        );
        assert_eq!(
            Command::parse("bypass 2 on").unwrap(),
            Command::Bypass {
                element: Target::Index(2),
                on: true
            }
        );
        assert_eq!(
            Command::parse("bypass frei0r-sobel off").unwrap(),
            Command::Bypass {
                element: name("frei0r-sobel"),
                on: false
            }
        );
        assert_eq!(Command::parse("speed 2").unwrap(), Command::Speed(2.0));
        assert_eq!(Command::parse("speed -0.5").unwrap(), Command::Speed(-0.5));
        assert_eq!(Command::parse("tempo 128").unwrap(), Command::Tempo(128.0));
        assert_eq!(Command::parse("TEMPO 20").unwrap(), Command::Tempo(20.0));
        assert_eq!(Command::parse("tempo 999").unwrap(), Command::Tempo(999.0));
        assert_eq!(Command::parse("tempo auto").unwrap(), Command::TempoAuto);
        assert_eq!(Command::TempoAuto.to_string(), "tempo auto");
        assert_eq!(Command::parse("tap").unwrap(), Command::Tap { at_ns: None });
        for (line, element, value) in [
            ("trigger deck 2", name("deck"), "2"),
            ("TRIGGER 0 intro", Target::Index(0), "intro"),
            ("next deck", name("deck"), "next"),
            ("Prev deck", name("deck"), "prev"),
        ] {
            let set = Command::Set {
                element,
                prop: "clip".into(),
                value: value.into(),
            };
            assert_eq!(Command::parse(line).unwrap(), set, "{line}");
        }
        assert_eq!(Command::parse("pause").unwrap(), Command::Pause);
        assert_eq!(Command::parse("step").unwrap(), Command::Step(1));
        assert_eq!(Command::parse("step 3").unwrap(), Command::Step(3));
        assert_eq!(Command::parse("Resume").unwrap(), Command::Resume);
        assert_eq!(Command::parse("stop").unwrap(), Command::Stop);
        assert_eq!(
            Command::parse("learn glow.blur").unwrap(),
            Command::Learn {
                target: LearnTarget::Param {
                    element: name("glow"),
                    prop: "blur".into()
                },
                mode: LearnMode::Detect
            }
        );
        assert_eq!(
            Command::parse("LEARN 2.bypass relative").unwrap(),
            Command::Learn {
                target: LearnTarget::Param {
                    element: Target::Index(2),
                    prop: "bypass".into()
                },
                mode: LearnMode::Relative
            }
        );
        assert_eq!(
            Command::parse("learn a.b relative OFFSET").unwrap(),
            Command::Learn {
                target: LearnTarget::Param {
                    element: name("a"),
                    prop: "b".into()
                },
                mode: LearnMode::RelativeAs(Encoding::Offset)
            }
        );
        assert_eq!(
            Command::parse("learn Step").unwrap(),
            Command::Learn {
                target: LearnTarget::Step,
                mode: LearnMode::Detect
            }
        );
        assert_eq!(
            Command::parse("unlearn 3").unwrap(),
            Command::Unlearn(Unlearn::Number(3))
        );
        assert_eq!(
            Command::parse("unlearn tap").unwrap(),
            Command::Unlearn(Unlearn::Target(LearnTarget::Tap))
        );
        assert_eq!(
            Command::parse("unlearn all").unwrap(),
            Command::Unlearn(Unlearn::All)
        );
        assert_eq!(Command::parse("midi").unwrap(), Command::Mappings);
        assert_eq!(Command::parse("mappings").unwrap(), Command::Mappings);
        assert_eq!(
            Command::parse("save").unwrap(),
            Command::Save { file: None }
        );
        assert_eq!(
            Command::parse("save  my show.toml ").unwrap(),
            Command::Save {
                file: Some("my show.toml".into())
            }
        );
        assert!(Command::parse("learn pause").unwrap().is_surface());
        assert!(!Command::parse("pause").unwrap().is_surface());
        assert_eq!(Command::parse_line("   ").unwrap(), None);
        assert_eq!(Command::parse_line("# a comment").unwrap(), None);
    }

    #[test]
    fn bad_lines_name_the_token() {
        let cases = [
            ("sett a.b 1", "'sett'"),
            ("set", "ELEMENT.PROPERTY"),
            ("set blur 0.7", "'blur'"),
            ("set glow. 0.7", "'glow.'"),
            ("set .blur 0.7", "'.blur'"),
            ("set glow.blur", "needs a value"),
            ("set glow.blur ~sine:fast", "'fast'"),
            ("osc glow.blur", "needs a shape"),
            ("osc glow.blur wobble", "'wobble'"),
            ("osc glow.blur sine freq=x", "freq=x"),
            ("osc glow.blur sine 3", "'3'"),
            ("unosc glow.blur now", "'now'"),
            ("bypass", "needs an element"),
            ("bypass 2", "on or off"),
            ("bypass 2 maybe", "'maybe'"),
            ("bypass 2 on off", "'off'"),
            ("speed", "needs a number"),
            ("speed fast", "'fast'"),
            ("speed inf", "'inf'"),
            ("tempo", "needs a tempo"),
            ("tempo fast", "'fast'"),
            ("tempo 19.9", "'19.9'"),
            ("tempo 1000", "'1000'"),
            ("tempo nan", "'nan'"),
            ("tempo 120 130", "'130'"),
            ("tap now", "'now'"),
            ("trigger", "needs a deck"),
            ("trigger deck", "needs a deck"),
            ("trigger deck 1 2", "'2'"),
            ("next", "needs a deck"),
            ("prev deck 1", "'1'"),
            ("step 0", "'0'"),
            ("step -1", "'-1'"),
            ("step 2 3", "'3'"),
            ("pause now", "'now'"),
            ("stop 1", "'1'"),
            ("learn", "needs NODE.PROPERTY"),
            ("learn blur", "'blur'"),
            ("learn a.b absolute", "'absolute'"),
            ("learn a.b relative twice", "'twice'"),
            ("learn a.b relative twos now", "'now'"),
            ("unlearn", "needs a mapping number"),
            ("unlearn 0", "'0'"),
            ("unlearn x", "'x'"),
            ("unlearn 1 2", "'2'"),
            ("midi list", "'list'"),
            ("batch set a.b 1; learn a.b", "surface commands"),
            (
                "bypass 99999999999999999999999 on",
                "99999999999999999999999",
            ),
        ];
        for (line, token) in cases {
            let e = Command::parse(line).unwrap_err().to_string();
            assert!(e.contains(token), "{line:?}: {e}");
        }
        assert_eq!(Command::parse(""), Err(Error::Empty));
    }

    /// No line panics the parser, and every line it accepts reads back the same from its
    /// `Display`: 30,000 lines assembled from protocol fragments, separators and junk by a
    /// fixed-seed generator (repeatable).
    #[test]
    fn arbitrary_lines_never_panic_and_accepted_ones_round_trip() {
        let fragments = [
            "set",
            "osc",
            "unosc",
            "bypass",
            "speed",
            "tempo",
            "tap",
            "120",
            "pause",
            "step",
            "resume",
            "stop",
            "SET",
            "glow.blur",
            "1.x",
            "a.b.c",
            ".",
            "..",
            "0",
            "on",
            "off",
            "sine",
            "pulse",
            "random-ramp",
            "~sine",
            "~",
            ":",
            "1hz",
            "2s",
            "0..1",
            "freq=",
            "min=-3",
            "max=1e308",
            "phase=0.5",
            "width=2",
            "seed=18446744073709551615",
            "seed=-1",
            "1e309",
            "nan",
            "-0",
            "#",
            "\t",
            "ü",
            "日本",
            "=",
            "~pulse:0.1hz:width=0.9",
            "3",
            "4294967296",
            "-7",
            "add",
            "remove",
            "replace",
            "link",
            "load",
            "after",
            "before",
            "mix.sink_1",
            "x.sink_0",
            "fade=2s",
            "fade=1.5ms",
            "blur=0.3",
            "\"a b\"",
            "'",
            "name=n",
            "learn",
            "unlearn",
            "relative",
            "offset",
            "all",
            "midi",
            "save",
        ];
        let seps = [" ", "  ", "\t", "", ":", ".", "="];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let mut accepted = 0;
        for _ in 0..30_000 {
            let mut line = String::new();
            for _ in 0..1 + next(6) {
                line.push_str(fragments[next(fragments.len())]);
                line.push_str(seps[next(seps.len())]);
            }
            if let Ok(cmd) = Command::parse(&line) {
                accepted += 1;
                let again = Command::parse(&cmd.to_string())
                    .unwrap_or_else(|e| panic!("{line:?} -> {cmd} -> {e}"));
                assert_eq!(again, cmd, "{line:?}");
            }
        }
        // The generator does produce valid commands, not only junk.
        assert!(accepted > 200, "{accepted}");
    }

    #[test]
    fn display_round_trips() {
        for line in [
            "set frei0r-glow.blur 0.7",
            "set 3.color 1,0.5,0",
            "osc stamp.value sine freq=0.5 min=0 max=1 phase=0.25",
            "osc 1.x random seed=5 freq=3",
            "osc 1.x pulse width=0.1",
            "unosc 2.blur",
            "bypass 2 on",
            "bypass glow off",
            "speed 0.25",
            "tempo 127.5",
            "tap",
            "pause",
            "step 4",
            "resume",
            "stop",
            "learn glow.blur",
            "learn 1.bypass relative",
            "learn a.b relative signed",
            "learn tap",
            "unlearn 2",
            "unlearn glow.blur",
            "unlearn all",
            "midi",
            "save",
            "save /tmp/a b.toml",
        ] {
            let c = Command::parse(line).unwrap();
            assert_eq!(Command::parse(&c.to_string()).unwrap(), c, "{line} -> {c}");
        }
    }
}
