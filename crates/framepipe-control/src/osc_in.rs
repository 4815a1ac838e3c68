//! Open Sound Control messages as [`Command`]s (the OSC *surface*; `osc.rs` is about
//! oscillators). The addresses, documented in `docs/CONTROL.md`:
//!
//! | address | arguments | command |
//! |---|---|---|
//! | `/framepipe/<node>/<prop>` | one or more int/float/bool/string | `set node.prop a,b,...` (not a text property: [`TEXT_PROPERTY_RULE`]) |
//! | `/framepipe/<node>/<prop>/norm` | one number in 0..=1 | `set` to `min + v·(max − min)` |
//! | `/framepipe/<node>/bypass` | bool, number (≠ 0 = on) or `on`/`off` | `bypass node on\|off` |
//! | `/framepipe/pause`, `resume`, `stop` | none, `N`, or one value (false/0 = ignored) | the same |
//! | `/framepipe/step` | none or a whole number ≥ 1 | `step N` |
//! | `/framepipe/speed` | one number | `speed X` |
//! | `/framepipe/tap` | none or one (a 0 or false is ignored: a button's release) | `tap` |
//! | `/framepipe/tempo` | one number, 20..=999 | `tempo BPM` |
//!
//! Packets are untrusted: [`decode`] refuses nesting deeper than [`MAX_NESTING`] (bundles in
//! bundles, arrays in arrays) before rosc's recursive decoder sees it, so no packet can exhaust
//! the stack; every other malformation is rosc's error, returned. Nothing here panics on input.

use std::collections::HashMap;

use rosc::{OscBundle, OscMessage, OscPacket, OscTime, OscType};

use framepipe_core::quote::quote;

use crate::command::{Command, Target};
use crate::{Error, Result};

/// The address prefix of every framepipe message.
pub const PREFIX: &str = "/framepipe";

/// Bundles within bundles, or arrays within arrays, at most.
pub const MAX_NESTING: usize = 8;

/// A numeric property's range, for the `/norm` form.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PropRange {
    /// The value at 0.
    pub min: f64,
    /// The value at 1.
    pub max: f64,
    /// Whole numbers only: the scaled value is rounded.
    pub int: bool,
}

/// Why OSC, OSCQuery and the web page may not set a text property (issue #21): a text value
/// may name a file a node opens (a frei0r plugin's classifier, a source's location), and a
/// remote surface must not make the show open one. Standard input, the operator's own
/// terminal, still may.
pub const TEXT_PROPERTY_RULE: &str =
    "text properties may name files: set them from the show's own terminal or project file";

/// Node name → property name → range: what `/norm` addresses can scale; and which properties
/// are text, which no OSC message may set ([`TEXT_PROPERTY_RULE`]). Built by whoever knows the
/// graph's property specs (the CLI), read-only afterwards.
#[derive(Debug, Clone, Default)]
pub struct Ranges {
    nodes: HashMap<String, HashMap<String, PropRange>>,
    /// Node name → its text properties, for every node added with [`Ranges::add_node`].
    text_by_name: HashMap<String, Vec<String>>,
    /// Element → the text properties of its first node (a command naming an element means it).
    text_by_element: HashMap<String, Vec<String>>,
    /// Every text property's name, on any node.
    text_anywhere: std::collections::HashSet<String>,
}

impl Ranges {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `node.prop`'s range (a later insert for the same pair replaces it).
    pub fn insert(&mut self, node: &str, prop: &str, range: PropRange) {
        self.nodes
            .entry(node.to_string())
            .or_default()
            .insert(prop.to_string(), range);
    }

    /// Whether `node` has an entry (any numeric property).
    pub fn has_node(&self, node: &str) -> bool {
        self.nodes.contains_key(node)
    }

    /// `node.prop`'s range.
    pub fn get(&self, node: &str, prop: &str) -> Option<PropRange> {
        self.nodes.get(node)?.get(prop).copied()
    }

    /// Adds a node of the graph, named `name`, running `element`, with its text properties
    /// `text` (every node, in the graph's order, so that [`Ranges::is_text`] finds a node as a
    /// command names it).
    pub fn add_node<'a>(
        &mut self,
        name: &str,
        element: &str,
        text: impl IntoIterator<Item = &'a str>,
    ) {
        let text: Vec<String> = text.into_iter().map(str::to_string).collect();
        self.text_anywhere.extend(text.iter().cloned());
        self.text_by_element
            .entry(element.to_string())
            .or_insert_with(|| text.clone());
        self.text_by_name.insert(name.to_string(), text);
    }

    /// Whether `set node.prop` would set a text property: `node` found as the engine finds it
    /// (its name, else the first node of that element); an index, or a node not in the table
    /// (the graph may have changed since), counts when any node has a text property `prop`.
    pub fn is_text(&self, node: &Target, prop: &str) -> bool {
        if !self.text_anywhere.contains(prop) {
            return false;
        }
        let Target::Name(name) = node else {
            return true;
        };
        match self
            .text_by_name
            .get(name)
            .or_else(|| self.text_by_element.get(name))
        {
            Some(text) => text.iter().any(|t| t == prop),
            None => true,
        }
    }
}

/// The longest value (a string argument, or all of a message's arguments as text) a message
/// may set, in bytes: as long as a command line on stdin
/// (`crates/framepipe-cli/src/commands.rs`, `MAX_LINE`). A longer one is refused here, on the
/// surface's thread, so that no oversized value reaches the engine's queue.
pub const MAX_VALUE: usize = 4096;

fn bad(address: &str, reason: impl Into<String>) -> Error {
    Error::OscMessage {
        address: quote(address),
        reason: reason.into(),
    }
}

/// Decodes one datagram. Refuses what rosc refuses, trailing bytes, and nesting deeper than
/// [`MAX_NESTING`].
pub fn decode(datagram: &[u8]) -> Result<OscPacket> {
    nesting_ok(datagram, 0)?;
    match rosc::decoder::decode_udp(datagram) {
        Ok(([], packet)) => Ok(packet),
        Ok((rest, _)) => Err(Error::OscPacket {
            reason: format!("{} bytes after the packet", rest.len()),
        }),
        Err(e) => Err(Error::OscPacket {
            reason: e.to_string(),
        }),
    }
}

/// The length of the OSC string at the start of `b` with its padding, if terminated.
fn osc_str_len(b: &[u8]) -> Option<usize> {
    let end = b.iter().position(|&c| c == 0)?;
    Some((end / 4 + 1) * 4)
}

/// Checks nesting without recursing deeper than [`MAX_NESTING`]: bundle elements are walked by
/// their size fields; a message's type tags may hold `[` at most [`MAX_NESTING`] deep. Other
/// faults are left to the decoder.
fn nesting_ok(b: &[u8], depth: usize) -> Result<()> {
    let too_deep = || Error::OscPacket {
        reason: format!("nested deeper than {MAX_NESTING} levels"),
    };
    if depth > MAX_NESTING {
        return Err(too_deep());
    }
    if b.starts_with(b"#bundle\0") {
        // Tag, time tag, then (size, element)*.
        let mut at = 16usize;
        while at + 4 <= b.len() {
            let size = u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize;
            let start = at + 4;
            let end = start.saturating_add(size).min(b.len());
            nesting_ok(&b[start..end], depth + 1)?;
            at = end;
        }
        return Ok(());
    }
    // A message: address, then the type tag string.
    let Some(addr_len) = osc_str_len(b) else {
        return Ok(());
    };
    let tags = b.get(addr_len..).unwrap_or(&[]);
    let tags = &tags[..tags.iter().position(|&c| c == 0).unwrap_or(tags.len())];
    let mut level = 0usize;
    for &t in tags {
        match t {
            b'[' => {
                level += 1;
                if level > MAX_NESTING {
                    return Err(too_deep());
                }
            }
            b']' => level = level.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Every message of `packet` in order, bundles flattened (time tags are ignored: a bundle
/// applies when it arrives).
pub fn messages(packet: &OscPacket) -> Vec<&OscMessage> {
    let mut out = Vec::new();
    let mut stack = vec![packet];
    // Depth-first, in order: push children reversed.
    while let Some(p) = stack.pop() {
        match p {
            OscPacket::Message(m) => out.push(m),
            OscPacket::Bundle(b) => stack.extend(b.content.iter().rev()),
        }
    }
    out
}

/// What the first part of an address names in a run of several shows: every show.
pub const ALL_SHOWS: &str = "*";

/// How many show names a message lists at most.
const NAMES_LISTED: usize = 5;

/// `a, b, c, d, e and 195 more`.
fn some_names(names: &[String]) -> String {
    let more = names.len().saturating_sub(NAMES_LISTED);
    let mut text = names
        .iter()
        .take(NAMES_LISTED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// `/NAME/rest` → (`NAME`, `/rest`).
pub fn split_show(address: &str) -> Option<(&str, &str)> {
    let rest = address.strip_prefix('/')?;
    let slash = rest.find('/')?;
    Some((&rest[..slash], &rest[slash..]))
}

/// The messages of `packet` split by show (issue #11: several shows in one process) (`/NAME/...`; `/*/...` for every show), each show's
/// with its address unprefixed, as one packet per show: a bundle for a bundle (its messages
/// then apply together), a message for a message. Messages for no known show are refused.
pub fn split_by_show(
    packet: &OscPacket,
    index: &HashMap<String, usize>,
    names: &[String],
    mut refuse: impl FnMut(String),
) -> Vec<(usize, OscPacket)> {
    let shows = names.len();
    let mut per_show: Vec<(usize, Vec<OscMessage>)> = Vec::new();
    for msg in messages(packet) {
        let Some((name, rest)) = split_show(&msg.addr) else {
            let addr = quote(&msg.addr);
            let example = if addr.len() == msg.addr.len() + 2 {
                msg.addr.as_str()
            } else {
                "/framepipe/..."
            };
            refuse(format!(
                "address {addr}: {shows} shows run; address one as /NAME{example}"
            ));
            continue;
        };
        let targets: Vec<usize> = if name == ALL_SHOWS {
            (0..shows).collect()
        } else if let Some(&i) = index.get(name) {
            vec![i]
        } else {
            refuse(format!(
                "address {}: no show named {} (shows: {}; /NAME/framepipe/... addresses one, /*/framepipe/... every show)",
                quote(&msg.addr),
                quote(name),
                some_names(names)
            ));
            continue;
        };
        for i in targets {
            let m = OscMessage {
                addr: rest.to_string(),
                args: msg.args.clone(),
            };
            match per_show.iter_mut().find(|(s, _)| *s == i) {
                Some((_, list)) => list.push(m),
                None => per_show.push((i, vec![m])),
            }
        }
    }
    let bundle = match packet {
        OscPacket::Bundle(b) => Some(b.timetag),
        OscPacket::Message(_) => None,
    };
    per_show
        .into_iter()
        .map(|(i, mut list)| {
            let p = match (bundle, list.len()) {
                (None, 1) => OscPacket::Message(list.pop().expect("one")),
                (timetag, _) => OscPacket::Bundle(OscBundle {
                    timetag: timetag.unwrap_or(OscTime {
                        seconds: 0,
                        fractional: 1,
                    }),
                    content: list.into_iter().map(OscPacket::Message).collect(),
                }),
            };
            (i, p)
        })
        .collect()
}

/// The commands of one packet, ready to post.
#[derive(Debug, Default)]
pub struct PacketCommands {
    /// What to post, in order, each with the number of messages it carries: a lone message's
    /// command; a bundle's commands as one [`Command::Batch`] (applied at one frame, or all
    /// refused), followed by a `stop` if the bundle had one (a batch cannot hold it).
    pub commands: Vec<(Command, usize)>,
    /// Messages that asked for nothing (a button's release).
    pub ignored: usize,
    /// Messages refused, with why (a bundle's other messages still apply together).
    pub refused: Vec<Error>,
}

/// Every message of `packet` as a command ([`command`] each); a bundle's as one
/// [`Command::Batch`] (nested bundles flattened into it; time tags ignored: it applies at the
/// first frame after it arrives). A bundle of more than [`MAX_BATCH`](crate::command::MAX_BATCH)
/// commands is refused whole.
pub fn packet_commands(packet: &OscPacket, ranges: &Ranges) -> PacketCommands {
    let mut out = PacketCommands::default();
    let mut cmds = Vec::new();
    let mut stop = false;
    for msg in messages(packet) {
        match command(msg, ranges) {
            Ok(Some(Command::Stop)) => stop = true,
            Ok(Some(c)) => cmds.push(c),
            Ok(None) => out.ignored += 1,
            Err(e) => out.refused.push(e),
        }
    }
    let bundle = matches!(packet, OscPacket::Bundle(_));
    match cmds.len() {
        0 => {}
        1 => out.commands.push((cmds.pop().expect("one"), 1)),
        n if bundle => match Command::batch(cmds) {
            Ok(b) => out.commands.push((b, n)),
            Err(e) => {
                let e = Error::OscPacket {
                    reason: format!("a bundle of {n} commands, refused whole: {e}"),
                };
                out.refused.extend(std::iter::repeat_n(e, n));
            }
        },
        _ => unreachable!("a message is one command"),
    }
    if stop {
        out.commands.push((Command::Stop, 1));
    }
    out
}

/// An argument as a number, if it is one (bools as 0/1).
fn number(arg: &OscType) -> Option<f64> {
    match arg {
        OscType::Int(i) => Some(f64::from(*i)),
        OscType::Long(i) => Some(*i as f64),
        OscType::Float(f) => Some(f64::from(*f)),
        OscType::Double(d) => Some(*d),
        OscType::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
    .filter(|v| v.is_finite())
}

/// An argument as on/off: bools, numbers (≠ 0 = on), `on`/`off`/`true`/`false`/`1`/`0` text.
fn switch(arg: &OscType) -> Option<bool> {
    if let OscType::String(s) = arg {
        return match s.to_ascii_lowercase().as_str() {
            "on" | "true" | "1" | "yes" => Some(true),
            "off" | "false" | "0" | "no" => Some(false),
            _ => None,
        };
    }
    number(arg).map(|v| v != 0.0)
}

fn type_name(arg: &OscType) -> &'static str {
    match arg {
        OscType::Int(_) => "int",
        OscType::Long(_) => "int64",
        OscType::Float(_) => "float",
        OscType::Double(_) => "double",
        OscType::Bool(_) => "bool",
        OscType::String(_) => "string",
        OscType::Blob(_) => "blob",
        OscType::Time(_) => "time tag",
        OscType::Char(_) => "char",
        OscType::Color(_) => "color",
        OscType::Midi(_) => "midi",
        OscType::Array(_) => "array",
        OscType::Nil => "nil",
        OscType::Inf => "infinitum",
    }
}

/// An argument as property text (`0.5`, `3`, `true`, the string itself).
fn value_text(address: &str, arg: &OscType) -> Result<String> {
    match arg {
        OscType::Int(i) => Ok(i.to_string()),
        OscType::Long(i) => Ok(i.to_string()),
        OscType::Float(f) if f.is_finite() => Ok(f.to_string()),
        OscType::Double(d) if d.is_finite() => Ok(d.to_string()),
        OscType::Bool(b) => Ok(b.to_string()),
        OscType::String(s) if s.len() > MAX_VALUE => Err(bad(
            address,
            format!("string value {} is longer than {MAX_VALUE} bytes", quote(s)),
        )),
        OscType::String(s) if !s.trim().is_empty() => Ok(s.clone()),
        OscType::String(_) => Err(bad(address, "empty string value")),
        OscType::Float(_) | OscType::Double(_) => Err(bad(address, "value is not finite")),
        other => Err(bad(
            address,
            format!(
                "a {} argument; expected int, float, bool or string",
                type_name(other)
            ),
        )),
    }
}

/// For pause/resume/stop/tap: `Ok(true)` = act (no argument, `N`/`I`, or a true one),
/// `Ok(false)` = a button release (false/0), ignored.
fn trigger(address: &str, args: &[OscType]) -> Result<bool> {
    match args {
        // Nil and Infinitum: an impulse (what OSCQuery's TYPE "N" asks clients to send).
        [] | [OscType::Nil | OscType::Inf] => Ok(true),
        [a] => switch(a).ok_or_else(|| {
            bad(
                address,
                format!("a {} argument; expected none or one bool", type_name(a)),
            )
        }),
        _ => Err(bad(
            address,
            format!("{} arguments; expected none or one", args.len()),
        )),
    }
}

fn one<'a>(address: &str, args: &'a [OscType], what: &str) -> Result<&'a OscType> {
    match args {
        [a] => Ok(a),
        _ => Err(bad(
            address,
            format!("{} arguments; expected one ({what})", args.len()),
        )),
    }
}

/// The command for one message, `Ok(None)` for a button release (`/framepipe/stop 0`).
/// `ranges` scales `/norm` values. Errors name the address and what is wrong with it.
pub fn command(msg: &OscMessage, ranges: &Ranges) -> Result<Option<Command>> {
    let address = msg.addr.as_str();
    let args = msg.args.as_slice();
    let Some(rest) = address
        .strip_prefix(PREFIX)
        .and_then(|r| r.strip_prefix('/'))
    else {
        return Err(bad(
            address,
            format!("unknown address; expected {PREFIX}/..."),
        ));
    };
    let parts: Vec<&str> = rest.split('/').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(bad(address, "empty part in the address"));
    }
    let on = |c: Command| trigger(address, args).map(|go| go.then_some(c));
    match parts[..] {
        ["pause"] => on(Command::Pause),
        ["resume"] => on(Command::Resume),
        ["stop"] => on(Command::Stop),
        ["step"] => {
            let n = match args {
                [] => 1,
                [a] => number(a)
                    .filter(|v| v.fract() == 0.0 && (1.0..=f64::from(u32::MAX)).contains(v))
                    .map(|v| v as u32)
                    .ok_or_else(|| {
                        bad(address, "expected a whole number of frames ≥ 1".to_string())
                    })?,
                _ => {
                    return Err(bad(
                        address,
                        format!("{} arguments; expected none or one", args.len()),
                    ))
                }
            };
            Ok(Some(Command::Step(n)))
        }
        ["speed"] => {
            let a = one(address, args, "a number")?;
            let max = crate::osc::MAX_SPEED;
            let v = number(a)
                .filter(|v| (-max..=max).contains(v))
                .ok_or_else(|| bad(address, format!("expected a number within ±{max}")))?;
            Ok(Some(Command::Speed(v)))
        }
        ["tap"] => on(Command::Tap { at_ns: None }),
        ["tempo"] => {
            let a = one(address, args, "a tempo in bpm, or auto")?;
            if matches!(a, OscType::String(t) if t.eq_ignore_ascii_case("auto")) {
                return Ok(Some(Command::TempoAuto));
            }
            let v = number(a)
                .filter(|v| crate::beat::check_tempo(*v).is_ok())
                .ok_or_else(|| {
                    bad(
                        address,
                        format!(
                            "expected a tempo in bpm within {}..={}, or auto",
                            crate::beat::MIN_BPM,
                            crate::beat::MAX_BPM
                        ),
                    )
                })?;
            Ok(Some(Command::Tempo(v)))
        }
        [_] => Err(bad(
            address,
            "unknown address; expected pause, resume, step, stop, speed, tap, tempo or \
             <node>/<property>",
        )),
        [node, "bypass"] => {
            let a = one(address, args, "on or off")?;
            let on =
                switch(a).ok_or_else(|| bad(address, "expected on or off, true/false, 1/0"))?;
            Ok(Some(Command::Bypass {
                element: Target::parse(node)?,
                on,
            }))
        }
        [node, prop] => {
            let element = Target::parse(node)?;
            if ranges.is_text(&element, prop) {
                return Err(bad(address, TEXT_PROPERTY_RULE));
            }
            if args.is_empty() {
                return Err(bad(address, "no value"));
            }
            let values = args
                .iter()
                .map(|a| value_text(address, a))
                .collect::<Result<Vec<_>>>()?;
            let value = values.join(",");
            if value.len() > MAX_VALUE {
                return Err(bad(
                    address,
                    format!(
                        "{} arguments make a value of {} bytes, longer than {MAX_VALUE}",
                        args.len(),
                        value.len()
                    ),
                ));
            }
            Ok(Some(Command::Set {
                element,
                prop: prop.to_string(),
                value,
            }))
        }
        [node, prop, "norm"] => {
            let a = one(address, args, "a number in 0..1")?;
            let v = number(a)
                .filter(|v| (0.0..=1.0).contains(v))
                .ok_or_else(|| bad(address, "expected a number in 0..1"))?;
            let Some(range) = ranges.get(node, prop) else {
                let why = if ranges.has_node(node) {
                    format!("'{node}' has no numeric property '{prop}'")
                } else {
                    format!("no node named '{node}' with numeric properties")
                };
                return Err(bad(address, why));
            };
            let x = range.min + v * (range.max - range.min);
            let value = if range.int {
                format!("{}", x.round() as i64)
            } else {
                format!("{x}")
            };
            Ok(Some(Command::Set {
                element: Target::Name(node.to_string()),
                prop: prop.to_string(),
                value,
            }))
        }
        _ => Err(bad(address, "unknown address: too many parts")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rosc::{encoder, OscBundle, OscTime};

    fn msg(addr: &str, args: Vec<OscType>) -> OscMessage {
        OscMessage {
            addr: addr.into(),
            args,
        }
    }

    fn ranges() -> Ranges {
        let mut r = Ranges::new();
        r.insert(
            "glow",
            "blur",
            PropRange {
                min: 0.0,
                max: 1.0,
                int: false,
            },
        );
        r.insert(
            "stamp",
            "scale",
            PropRange {
                min: 1.0,
                max: 16.0,
                int: true,
            },
        );
        r.insert(
            "bright",
            "gain",
            PropRange {
                min: -2.0,
                max: 6.0,
                int: false,
            },
        );
        r
    }

    fn cmd(addr: &str, args: Vec<OscType>) -> Result<Option<Command>> {
        command(&msg(addr, args), &ranges())
    }

    fn set(node: &str, prop: &str, value: &str) -> Option<Command> {
        Some(Command::Set {
            element: Target::parse(node).unwrap(),
            prop: prop.into(),
            value: value.into(),
        })
    }

    #[test]
    fn addresses_map_to_commands() {
        use OscType::*;
        assert_eq!(
            cmd("/framepipe/glow/blur", vec![Float(0.25)]).unwrap(),
            set("glow", "blur", "0.25")
        );
        assert_eq!(
            cmd("/framepipe/2/blur", vec![Double(0.5)]).unwrap(),
            set("2", "blur", "0.5")
        );
        assert_eq!(
            cmd("/framepipe/stamp/scale", vec![Int(3)]).unwrap(),
            set("stamp", "scale", "3")
        );
        assert_eq!(
            cmd("/framepipe/stamp/what", vec![String("value".into())]).unwrap(),
            set("stamp", "what", "value")
        );
        assert_eq!(
            cmd("/framepipe/g/on", vec![Bool(true)]).unwrap(),
            set("g", "on", "true")
        );
        assert_eq!(
            cmd("/framepipe/g/color", vec![Float(1.0), Float(0.5), Int(0)]).unwrap(),
            set("g", "color", "1,0.5,0")
        );
        assert_eq!(
            cmd("/framepipe/invert/bypass", vec![Int(1)]).unwrap(),
            Some(Command::Bypass {
                element: Target::Name("invert".into()),
                on: true
            })
        );
        assert_eq!(
            cmd("/framepipe/3/bypass", vec![String("off".into())]).unwrap(),
            Some(Command::Bypass {
                element: Target::Index(3),
                on: false
            })
        );
        assert_eq!(
            cmd("/framepipe/pause", vec![]).unwrap(),
            Some(Command::Pause)
        );
        assert_eq!(
            cmd("/framepipe/resume", vec![Float(1.0)]).unwrap(),
            Some(Command::Resume)
        );
        // A button's release does nothing.
        assert_eq!(cmd("/framepipe/stop", vec![Float(0.0)]).unwrap(), None);
        assert_eq!(cmd("/framepipe/stop", vec![]).unwrap(), Some(Command::Stop));
        assert_eq!(
            cmd("/framepipe/step", vec![]).unwrap(),
            Some(Command::Step(1))
        );
        assert_eq!(
            cmd("/framepipe/step", vec![Int(4)]).unwrap(),
            Some(Command::Step(4))
        );
        assert_eq!(
            cmd("/framepipe/speed", vec![Float(-0.5)]).unwrap(),
            Some(Command::Speed(-0.5))
        );
        assert_eq!(
            cmd("/framepipe/tap", vec![]).unwrap(),
            Some(Command::Tap { at_ns: None })
        );
        assert_eq!(cmd("/framepipe/tap", vec![Int(0)]).unwrap(), None);
        // OSCQuery's impulse type (N), and Infinitum.
        assert_eq!(
            cmd("/framepipe/pause", vec![Nil]).unwrap(),
            Some(Command::Pause)
        );
        assert_eq!(
            cmd("/framepipe/tap", vec![Inf]).unwrap(),
            Some(Command::Tap { at_ns: None })
        );
        assert_eq!(
            cmd("/framepipe/tempo", vec![Float(128.0)]).unwrap(),
            Some(Command::Tempo(128.0))
        );
        assert!(cmd("/framepipe/tempo", vec![Float(5.0)]).is_err());
        assert_eq!(
            cmd("/framepipe/tempo", vec![String("auto".into())]).unwrap(),
            Some(Command::TempoAuto)
        );
    }

    #[test]
    fn norm_scales_onto_the_property_range() {
        use OscType::*;
        assert_eq!(
            cmd("/framepipe/bright/gain/norm", vec![Float(0.0)]).unwrap(),
            set("bright", "gain", "-2")
        );
        assert_eq!(
            cmd("/framepipe/bright/gain/norm", vec![Float(1.0)]).unwrap(),
            set("bright", "gain", "6")
        );
        assert_eq!(
            cmd("/framepipe/bright/gain/norm", vec![Double(0.25)]).unwrap(),
            set("bright", "gain", "0")
        );
        // Integers round: 1 + 0.5·15 = 8.5 → 9 (half away from zero).
        assert_eq!(
            cmd("/framepipe/stamp/scale/norm", vec![Float(0.5)]).unwrap(),
            set("stamp", "scale", "9")
        );
        assert_eq!(
            cmd("/framepipe/stamp/scale/norm", vec![Int(1)]).unwrap(),
            set("stamp", "scale", "16")
        );
        for (addr, args, needle) in [
            ("/framepipe/bright/gain/norm", vec![Float(1.5)], "0..1"),
            ("/framepipe/bright/gain/norm", vec![Float(-0.1)], "0..1"),
            ("/framepipe/bright/gain/norm", vec![Float(f32::NAN)], "0..1"),
            ("/framepipe/bright/gain/norm", vec![], "0 arguments"),
            ("/framepipe/bright/nope/norm", vec![Float(0.5)], "'nope'"),
            ("/framepipe/dim/gain/norm", vec![Float(0.5)], "'dim'"),
            (
                "/framepipe/bright/gain/norm",
                vec![String("x".into())],
                "0..1",
            ),
        ] {
            let e = cmd(addr, args).unwrap_err().to_string();
            assert!(e.contains(addr) && e.contains(needle), "{addr}: {e}");
        }
    }

    /// Issue #21, least privilege: no OSC address makes a live edit (nothing can open a path or
    /// a connection), whatever its arguments; a file name as a value is a value, and a value
    /// over `MAX_VALUE` is refused with its length, not quoted whole.
    #[test]
    fn osc_makes_no_live_edit_and_cuts_oversized_values() {
        let path = || vec![OscType::String("/etc/shadow".into())];
        for addr in [
            "/framepipe/load",
            "/framepipe/replace",
            "/framepipe/add",
            "/framepipe/remove",
            "/framepipe/link",
            "/framepipe/src/replace/location",
        ] {
            match cmd(addr, path()) {
                Ok(Some(Command::Edit(e))) => panic!("{addr} made the edit {e}"),
                Ok(Some(Command::Set { .. })) | Err(_) => {}
                other => panic!("{addr}: {other:?}"),
            }
        }
        let huge = "x".repeat(MAX_VALUE + 1);
        let e = cmd("/framepipe/st/text", vec![OscType::String(huge)])
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("({} bytes)", MAX_VALUE + 1)), "{e}");
        assert!(e.len() < 300, "{e}");
        let long_addr = format!("/framepipe/{}", "n".repeat(60_000));
        let e = cmd(&long_addr, vec![OscType::Int(1)])
            .unwrap_err()
            .to_string();
        assert!(e.len() < 300 && e.contains("bytes)"), "{e}");
        // Many arguments making a long value are refused too.
        let many = vec![OscType::String("y".repeat(1000)); 5];
        assert!(cmd("/framepipe/st/text", many).is_err());
    }

    /// Issue #21: a text property may name a file a node opens (frei0r facedetect's
    /// `classifier`), so no OSC message sets one, whatever its argument; the node found as the
    /// engine finds it (name, element, index; an unknown name when any node has it).
    #[test]
    fn osc_sets_no_text_property() {
        let mut r = ranges();
        r.add_node("fd", "frei0r-facedetect", ["classifier"]);
        r.add_node("other", "frei0r-glow", []);
        for (addr, args) in [
            (
                "/framepipe/fd/classifier",
                vec![OscType::String("/dev/zero".into())],
            ),
            ("/framepipe/fd/classifier", vec![OscType::Int(0)]),
            (
                "/framepipe/frei0r-facedetect/classifier",
                vec![OscType::String("x".into())],
            ),
            ("/framepipe/0/classifier", vec![OscType::String("x".into())]),
            (
                "/framepipe/gone/classifier",
                vec![OscType::String("x".into())],
            ),
        ] {
            let e = command(&msg(addr, args), &r).unwrap_err().to_string();
            assert!(
                e.contains(addr) && e.contains(TEXT_PROPERTY_RULE),
                "{addr}: {e}"
            );
        }
        // Another node's property of that name, and numbers, still pass.
        for (addr, value) in [
            ("/framepipe/other/classifier", OscType::String("x".into())),
            ("/framepipe/fd/threads", OscType::Float(0.5)),
        ] {
            let c = command(&msg(addr, vec![value]), &r).unwrap();
            assert!(matches!(c, Some(Command::Set { .. })), "{addr}: {c:?}");
        }
    }

    #[test]
    fn bad_messages_name_the_address_and_the_fault() {
        use OscType::*;
        for (addr, args, needle) in [
            ("/other/thing", vec![], "unknown address"),
            ("/framepipe", vec![], "unknown address"),
            ("/framepipe/", vec![], "empty part"),
            ("/framepipe//blur", vec![Float(1.0)], "empty part"),
            ("/framepipe/jump", vec![], "unknown address"),
            ("/framepipe/a/b/c/d", vec![], "too many parts"),
            ("/framepipe/a/b/c", vec![Float(0.5)], "too many parts"),
            ("/framepipe/glow/blur", vec![], "no value"),
            ("/framepipe/glow/blur", vec![Blob(vec![1, 2])], "blob"),
            ("/framepipe/glow/blur", vec![Nil], "nil"),
            ("/framepipe/glow/blur", vec![Float(f32::INFINITY)], "finite"),
            ("/framepipe/glow/blur", vec![String(" ".into())], "empty"),
            ("/framepipe/pause", vec![Int(1), Int(2)], "2 arguments"),
            ("/framepipe/stop", vec![String("now".into())], "string"),
            ("/framepipe/step", vec![Int(0)], "≥ 1"),
            ("/framepipe/step", vec![Float(1.5)], "≥ 1"),
            ("/framepipe/step", vec![Int(1), Int(1)], "2 arguments"),
            ("/framepipe/speed", vec![], "0 arguments"),
            ("/framepipe/speed", vec![Float(1e9)], "±100"),
            (
                "/framepipe/x/bypass",
                vec![String("maybe".into())],
                "on or off",
            ),
            ("/framepipe/x/bypass", vec![], "0 arguments"),
        ] {
            let e = cmd(addr, args).unwrap_err().to_string();
            assert!(e.contains(addr) && e.contains(needle), "{addr}: {e}");
        }
    }

    #[test]
    fn bundles_flatten_in_order() {
        let p = OscPacket::Bundle(OscBundle {
            timetag: OscTime::from((0, 1)),
            content: vec![
                OscPacket::Message(msg("/a", vec![])),
                OscPacket::Bundle(OscBundle {
                    timetag: OscTime::from((0, 1)),
                    content: vec![
                        OscPacket::Message(msg("/b", vec![])),
                        OscPacket::Message(msg("/c", vec![])),
                    ],
                }),
                OscPacket::Message(msg("/d", vec![])),
            ],
        });
        let bytes = encoder::encode(&p).unwrap();
        let back = decode(&bytes).unwrap();
        let addrs: Vec<&str> = messages(&back).iter().map(|m| m.addr.as_str()).collect();
        assert_eq!(addrs, ["/a", "/b", "/c", "/d"]);
    }

    #[test]
    fn a_bundle_is_one_batch_and_a_stop_follows_it() {
        use OscType::*;
        let bundle = |content: Vec<OscPacket>| {
            OscPacket::Bundle(OscBundle {
                timetag: OscTime::from((0, 1)),
                content,
            })
        };
        let m = |a: &str, args| OscPacket::Message(msg(a, args));
        let p = bundle(vec![
            m("/framepipe/glow/blur", vec![Float(0.25)]),
            bundle(vec![m("/framepipe/stamp/scale", vec![Int(3)])]),
            m("/framepipe/stop", vec![]),
            m("/framepipe/tap", vec![Int(0)]),
            m("/framepipe/nope", vec![]),
        ]);
        let out = packet_commands(&p, &ranges());
        assert_eq!(out.ignored, 1);
        assert_eq!(out.refused.len(), 1, "{:?}", out.refused);
        assert_eq!(
            out.commands,
            vec![
                (
                    Command::Batch(vec![
                        set("glow", "blur", "0.25").unwrap(),
                        set("stamp", "scale", "3").unwrap()
                    ]),
                    2
                ),
                (Command::Stop, 1)
            ]
        );
        // One message: itself, in a bundle or not.
        let one = packet_commands(&bundle(vec![m("/framepipe/pause", vec![])]), &ranges());
        assert_eq!(one.commands, vec![(Command::Pause, 1)]);
        // Too many for one batch: refused whole.
        let many: Vec<OscPacket> = (0..crate::command::MAX_BATCH + 1)
            .map(|i| m("/framepipe/glow/blur", vec![Float(i as f32 / 100.0)]))
            .collect();
        let out = packet_commands(&bundle(many), &ranges());
        assert!(out.commands.is_empty());
        assert_eq!(out.refused.len(), crate::command::MAX_BATCH + 1);
        assert!(out.refused[0].to_string().contains("refused whole"));
    }

    /// Nesting beyond MAX_NESTING is refused before rosc's recursive decoder sees it (a
    /// 64 KiB datagram could otherwise nest ~3,000 bundles deep).
    #[test]
    fn deep_nesting_is_refused_without_recursion() {
        let mut p = OscPacket::Message(msg("/framepipe/stop", vec![]));
        for _ in 0..MAX_NESTING {
            p = OscPacket::Bundle(OscBundle {
                timetag: OscTime::from((0, 1)),
                content: vec![p],
            });
        }
        assert!(decode(&encoder::encode(&p).unwrap()).is_ok());
        let deeper = OscPacket::Bundle(OscBundle {
            timetag: OscTime::from((0, 1)),
            content: vec![p],
        });
        let e = decode(&encoder::encode(&deeper).unwrap()).unwrap_err();
        assert!(e.to_string().contains("nested deeper"), "{e}");
        // ~3,000 levels built by hand, as an attacker would: refused, no stack overflow.
        let mut bytes = encoder::encode(&OscPacket::Message(msg("/x", vec![]))).unwrap();
        for _ in 0..3000 {
            let mut outer = b"#bundle\0\0\0\0\0\0\0\0\x01".to_vec();
            outer.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
            outer.extend_from_slice(&bytes);
            bytes = outer;
        }
        assert!(decode(&bytes).is_err());
        // Arrays in arrays, in the type tags.
        let mut m = b"/x\0\0,".to_vec();
        m.extend(std::iter::repeat_n(b'[', 5000));
        m.extend(std::iter::repeat_n(b']', 5000));
        m.extend(std::iter::repeat_n(0u8, 4 - (m.len() - 4) % 4));
        let e = decode(&m).unwrap_err();
        assert!(e.to_string().contains("nested deeper"), "{e}");
    }

    /// Random and truncated datagrams: refused or decoded, never a panic.
    #[test]
    fn arbitrary_datagrams_never_panic() {
        let good = encoder::encode(&OscPacket::Bundle(OscBundle {
            timetag: OscTime::from((0, 1)),
            content: vec![
                OscPacket::Message(msg(
                    "/framepipe/glow/blur",
                    vec![OscType::Float(0.5), OscType::String("x".into())],
                )),
                OscPacket::Message(msg("/framepipe/step", vec![OscType::Int(2)])),
            ],
        }))
        .unwrap();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let r = ranges();
        for len in 0..good.len() {
            if let Ok(p) = decode(&good[..len]) {
                for m in messages(&p) {
                    let _ = command(m, &r);
                }
            }
        }
        for _ in 0..20_000 {
            let mut d = good.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() as usize) % d.len();
                d[i] = next() as u8;
            }
            d.truncate(1 + (next() as usize) % d.len());
            if let Ok(p) = decode(&d) {
                for m in messages(&p) {
                    let _ = command(m, &r);
                }
            }
        }
    }
}
