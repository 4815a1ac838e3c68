//! The properties the `midi_parser` fuzz target checks, shared by that target
//! (`fuzz/fuzz_targets/midi_parser.rs` includes this file) and the quick seeded test
//! (`random_midi.rs`), so that both check the same thing: arbitrary bytes, as a raw MIDI
//! stream, through `framepipe_midi::Parser` and the MIDI surface (mappings of every kind, and a
//! `learn` pending when the first byte is odd).
//!
//! Checked beyond "no panic":
//! * every message the parser returns is well-formed (channels 0..=15, data 0..=127, note-on
//!   velocity ≥ 1);
//! * every command the surface posts prints as a line that parses back to itself, and every
//!   `set` value is within the property's range.

use std::time::{Duration, Instant};

use framepipe_control::Command;
use framepipe_midi::{Message, Parser, Props, Range, SaveContext, Surface};
use framepipe_project::{MidiBinding, MidiControlKind, MidiMode};

fn binding(kind: MidiControlKind, number: u8, mode: MidiMode, target: &str) -> MidiBinding {
    MidiBinding {
        kind,
        channel: 1,
        number,
        mode,
        target: target.into(),
    }
}

/// The fuzz target's properties for one input (see the module documentation). Returns how
/// many commands the surface posted.
pub fn check_stream(data: &[u8]) -> usize {
    let mut posted = 0;
    let mut props = Props::new();
    props.prop(
        "g",
        "blur",
        Range::Float {
            min: -1.5,
            max: 2.0,
        },
        Some("0.5"),
    );
    props.prop(
        "s",
        "x",
        Range::Int {
            min: -16384,
            max: 16384,
        },
        Some("8"),
    );
    props.prop("s", "on", Range::Bool, Some("false"));
    props.node("inv");
    let mut surface = Surface::new(
        props,
        Duration::from_millis(16),
        false,
        SaveContext::default(),
    );
    let rel = MidiMode::Relative(framepipe_control::Encoding::Twos);
    surface
        .load(&[
            binding(MidiControlKind::Cc, 7, MidiMode::Absolute, "g.blur"),
            binding(MidiControlKind::Cc14, 1, MidiMode::Absolute, "s.x"),
            binding(MidiControlKind::Cc, 16, rel, "s.x"),
            binding(MidiControlKind::Cc, 17, MidiMode::Absolute, "s.on"),
            binding(MidiControlKind::Note, 36, MidiMode::Absolute, "inv.bypass"),
            binding(MidiControlKind::Note, 37, MidiMode::Absolute, "step"),
            binding(MidiControlKind::Cc, 64, MidiMode::Absolute, "tap"),
            binding(MidiControlKind::Note, 38, MidiMode::Absolute, "pause"),
        ])
        .unwrap();
    if data.first().is_some_and(|b| b & 1 == 1) {
        surface
            .command(&Command::parse("learn g.blur").unwrap())
            .unwrap();
    }
    let start = Instant::now();
    let mut parser = Parser::new();
    for (i, &b) in data.iter().enumerate() {
        let Some(m) = parser.push(b) else { continue };
        match m {
            Message::Cc {
                channel,
                number,
                value,
            } => assert!(channel < 16 && number < 128 && value < 128),
            Message::NoteOn {
                channel,
                note,
                velocity,
            } => assert!(channel < 16 && note < 128 && (1..128).contains(&velocity)),
            Message::NoteOff { channel, note } => assert!(channel < 16 && note < 128),
            Message::Other => {}
        }
        // Time moves 1 ms a byte, so that held values and the learn window come due.
        let now = start + Duration::from_millis(i as u64);
        surface.message(m, now, i as i64);
        surface.flush(now);
        for cmd in surface.take_commands() {
            posted += 1;
            let line = cmd.to_string();
            let again = Command::parse(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            if !matches!(cmd, Command::Tap { .. }) {
                assert_eq!(again, cmd, "{line:?}");
            }
            if let Command::Set { prop, value, .. } = &cmd {
                match prop.as_str() {
                    "blur" => {
                        let v: f64 = value.parse().unwrap();
                        assert!((-1.5..=2.0).contains(&v), "{line}");
                    }
                    "x" => {
                        let v: i64 = value.parse().unwrap();
                        assert!((-16384..=16384).contains(&v), "{line}");
                    }
                    "on" => assert!(value == "true" || value == "false", "{line}"),
                    other => panic!("{other}"),
                }
            }
        }
        surface.take_notices().for_each(drop);
    }
    posted
}

/// Issue #21: whatever came before (`garbage`: any bytes, a cut-off message, an unterminated
/// SysEx), a whole channel message that starts with its status byte is parsed, and so are the
/// messages after it that use its running status, with real-time bytes anywhere among them.
/// The message's channel, numbers and values are taken from `garbage`'s last bytes, so that
/// every kind is tried.
pub fn check_resync(garbage: &[u8]) {
    let pick = |back: usize| garbage.len().checked_sub(back).map_or(0, |i| garbage[i]);
    let channel = pick(1) & 0x0F;
    let (number, value) = (pick(2) & 0x7F, pick(3) & 0x7F);
    let (number2, value2) = (pick(4) & 0x7F, pick(5) & 0x7F);
    let note_on = pick(6) & 1 == 1;
    let mut parser = Parser::new();
    parser.feed(garbage, |_| {});
    let mut got = Vec::new();
    let status = if note_on { 0x90 } else { 0xB0 } | channel;
    // A real-time byte inside the first message and one between the two: they change nothing.
    let valid = [status, number, 0xF8, value, 0xFE, number2, value2];
    parser.feed(&valid, |m| got.push(m));
    let expect = |number: u8, value: u8| {
        if !note_on {
            Message::Cc {
                channel,
                number,
                value,
            }
        } else if value > 0 {
            Message::NoteOn {
                channel,
                note: number,
                velocity: value,
            }
        } else {
            Message::NoteOff {
                channel,
                note: number,
            }
        }
    };
    assert_eq!(
        got,
        [expect(number, value), expect(number2, value2)],
        "after {} bytes of garbage ending in {:02x?}",
        garbage.len(),
        &garbage[garbage.len().saturating_sub(8)..]
    );
}
