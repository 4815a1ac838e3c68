//! `[[midi]]` tables: MIDI mappings a project file carries, and writing them back.
//!
//! ```toml
//! [[midi]]
//! control = "cc"          # cc (7-bit), cc14 (CC n with n+32, n < 32) or note
//! channel = 1             # 1..=16
//! number = 7              # 0..=127 (cc14: 0..=31)
//! mode = "absolute"       # absolute (default), relative-twos, relative-offset, relative-signed
//! target = "glow.blur"    # NODE.PROPERTY, NODE.PROPERTY=VALUE, NODE.bypass, pause, step or tap
//! ```
//!
//! The tables are checked here for what needs no graph (kinds, numbers, modes, the target's
//! form); whether the target's node and property exist is the MIDI surface's check at start.
//! [`project_text`] writes a whole project file for a graph, [`with_midi`] replaces the
//! `[[midi]]` tables of an existing one and leaves every other line as it was.

use std::fmt;

use framepipe_control::Encoding;

use crate::desc::{shown, GraphDesc};
use crate::{parse_project, Error, Result};

/// What kind of MIDI control a mapping listens to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MidiControlKind {
    /// A 7-bit control change.
    Cc,
    /// A 14-bit control change: CC `number` (MSB) with CC `number + 32` (LSB).
    Cc14,
    /// A note (note on; a note on with velocity 0 is a note off).
    Note,
}

impl MidiControlKind {
    /// `cc`, `cc14` or `note`.
    pub fn as_str(self) -> &'static str {
        match self {
            MidiControlKind::Cc => "cc",
            MidiControlKind::Cc14 => "cc14",
            MidiControlKind::Note => "note",
        }
    }

    /// The largest `number` of this kind.
    pub fn max_number(self) -> u8 {
        match self {
            MidiControlKind::Cc14 => 31,
            _ => 127,
        }
    }
}

/// How a control's values are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MidiMode {
    /// The value is a position in the target's range.
    Absolute,
    /// Each value is a step up or down (an endless encoder), in this encoding.
    Relative(Encoding),
}

impl MidiMode {
    /// Every mode with its `mode =` text.
    pub const ALL: [(MidiMode, &'static str); 4] = [
        (MidiMode::Absolute, "absolute"),
        (MidiMode::Relative(Encoding::Twos), "relative-twos"),
        (MidiMode::Relative(Encoding::Offset), "relative-offset"),
        (MidiMode::Relative(Encoding::Signed), "relative-signed"),
    ];

    /// The `mode =` text.
    pub fn as_str(self) -> &'static str {
        MidiMode::ALL
            .iter()
            .find(|(m, _)| *m == self)
            .map_or("absolute", |(_, s)| s)
    }
}

/// One `[[midi]]` table: a control and what it drives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MidiBinding {
    /// CC, 14-bit CC or note.
    pub kind: MidiControlKind,
    /// MIDI channel, 1..=16.
    pub channel: u8,
    /// Controller or note number.
    pub number: u8,
    /// Absolute or relative (CCs only).
    pub mode: MidiMode,
    /// `NODE.PROPERTY`, `NODE.bypass`, `pause`, `step` or `tap`.
    pub target: String,
}

impl fmt::Display for MidiBinding {
    /// `cc 7 ch 1 absolute -> glow.blur`, `note 36 ch 10 -> invert.bypass`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ch {}",
            self.kind.as_str(),
            self.number,
            self.channel
        )?;
        if self.kind != MidiControlKind::Note {
            write!(f, " {}", self.mode.as_str())?;
        }
        write!(f, " -> {}", self.target)
    }
}

/// Keys of a `[[midi]]` table.
const KEYS: &str = "control, channel, number, mode, target";

/// Whether `target` has the form of a mapping target (`NODE.PROPERTY` with both parts, or one
/// of `pause`, `step`, `tap`).
pub fn valid_target(target: &str) -> bool {
    if matches!(target, "pause" | "step" | "tap") {
        return true;
    }
    !target.contains(char::is_whitespace)
        && target
            .rsplit_once('.')
            .is_some_and(|(node, prop)| !node.is_empty() && !prop.is_empty())
}

/// The `midi = [...]` value of a project file (`[[midi]]` tables), checked.
pub(crate) fn parse_tables(value: &toml::Value) -> Result<Vec<MidiBinding>> {
    let list = value.as_array().ok_or_else(|| Error::BadKey {
        key: "midi",
        expected: "an array of tables ([[midi]])",
        got: shown(&value.to_string()),
    })?;
    list.iter()
        .enumerate()
        .map(|(i, item)| parse_table(i + 1, item))
        .collect()
}

fn parse_table(index: usize, item: &toml::Value) -> Result<MidiBinding> {
    let bad = |reason: String| Error::BadMidi { index, reason };
    let t = item.as_table().ok_or(Error::NotATable {
        table: "midi",
        index,
    })?;
    if let Some(k) = t
        .keys()
        .find(|k| !KEYS.split(", ").any(|known| known == k.as_str()))
    {
        return Err(bad(format!(
            "unknown key '{}'; expected one of: {KEYS}",
            shown(k)
        )));
    }
    let text = |key: &str| -> Result<Option<&str>> {
        match t.get(key) {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| {
                bad(format!(
                    "'{key}' must be a string, got {}",
                    shown(&v.to_string())
                ))
            }),
        }
    };
    let number = |key: &str, lo: i64, hi: i64| -> Result<u8> {
        let v = t
            .get(key)
            .ok_or_else(|| bad(format!("'{key}' is missing ({lo}..={hi})")))?;
        v.as_integer()
            .filter(|n| (lo..=hi).contains(n))
            .and_then(|n| u8::try_from(n).ok())
            .ok_or_else(|| {
                bad(format!(
                    "'{key}' must be a whole number in {lo}..={hi}, got {}",
                    shown(&v.to_string())
                ))
            })
    };
    let kind = match text("control")? {
        Some("cc") => MidiControlKind::Cc,
        Some("cc14") => MidiControlKind::Cc14,
        Some("note") => MidiControlKind::Note,
        Some(other) => {
            return Err(bad(format!(
                "control '{}'; expected one of: cc, cc14, note",
                shown(other)
            )))
        }
        None => return Err(bad("'control' is missing (cc, cc14 or note)".into())),
    };
    let channel = number("channel", 1, 16)?;
    let number = number("number", 0, i64::from(kind.max_number()))?;
    let mode = match text("mode")? {
        None => MidiMode::Absolute,
        Some(m) => MidiMode::ALL
            .iter()
            .find(|(_, s)| *s == m)
            .map(|(mode, _)| *mode)
            .ok_or_else(|| {
                bad(format!(
                    "mode '{}'; expected one of: absolute, relative-twos, relative-offset, relative-signed",
                    shown(m)
                ))
            })?,
    };
    if kind != MidiControlKind::Cc && mode != MidiMode::Absolute {
        return Err(bad(format!(
            "mode '{}' is for 7-bit CCs only, not {}",
            mode.as_str(),
            kind.as_str()
        )));
    }
    let target = text("target")?.ok_or_else(|| {
        bad("'target' is missing (NODE.PROPERTY, NODE.bypass, pause, step or tap)".into())
    })?;
    if !valid_target(target) {
        return Err(bad(format!(
            "target '{}'; expected NODE.PROPERTY, NODE.bypass, pause, step or tap",
            shown(target)
        )));
    }
    Ok(MidiBinding {
        kind,
        channel,
        number,
        mode,
        target: target.to_string(),
    })
}

/// A TOML string literal.
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The `[[midi]]` tables of `bindings` as TOML text (empty for none).
pub fn midi_tables(bindings: &[MidiBinding]) -> String {
    let mut out = String::new();
    for b in bindings {
        out.push_str("[[midi]]\n");
        out.push_str(&format!("control = \"{}\"\n", b.kind.as_str()));
        out.push_str(&format!("channel = {}\n", b.channel));
        out.push_str(&format!("number = {}\n", b.number));
        if b.kind != MidiControlKind::Note {
            out.push_str(&format!("mode = \"{}\"\n", b.mode.as_str()));
        }
        out.push_str(&format!("target = {}\n\n", quoted(&b.target)));
    }
    out
}

/// A whole project file for `desc` (its settings, the graph as `pipeline = "..."`, its
/// `[[midi]]` tables) that [`parse_project`] reads back as `desc`.
pub fn project_text(desc: &GraphDesc) -> String {
    let mut out = String::from("# written by framepipe\n");
    let s = &desc.settings;
    if let Some(n) = &s.name {
        out.push_str(&format!("name = {}\n", quoted(n)));
    }
    if let Some(n) = s.threads {
        out.push_str(&format!("threads = {n}\n"));
    }
    if let Some(n) = s.in_flight {
        out.push_str(&format!("in-flight = {n}\n"));
    }
    if let Some(p) = &s.stats {
        out.push_str(&format!("stats = {}\n", quoted(p)));
    }
    if let Some(f) = &s.fps {
        out.push_str(&format!("fps = {}\n", quoted(f)));
    }
    if s.unpaced {
        out.push_str("unpaced = true\n");
    }
    if let Some(a) = &s.audio {
        out.push_str(&format!("audio = {}\n", quoted(a)));
    }
    if let Some(b) = &s.audio_bands {
        out.push_str(&format!("audio-bands = {}\n", quoted(b)));
    }
    out.push_str(&format!("pipeline = {}\n", quoted(&desc.to_string())));
    if !desc.midi.is_empty() {
        out.push('\n');
        out.push_str(&midi_tables(&desc.midi));
    }
    out
}

/// Whether a line is a table header (`[x]`, `[[x]]`), and if so the header's name without
/// blanks (`[[ midi ]]` → `[[midi]]`).
fn header(line: &str) -> Option<String> {
    let t = line.trim_start();
    if !t.starts_with('[') {
        return None;
    }
    let end = t
        .find("]]")
        .map(|e| e + 2)
        .or_else(|| t.find(']').map(|e| e + 1))?;
    Some(t[..end].chars().filter(|c| !c.is_whitespace()).collect())
}

/// `text` (a project file) with its `[[midi]]` tables replaced by `bindings`, every other line
/// kept as it was; the new tables go at the end. The result is checked: it must parse to the
/// same graph and settings with exactly `bindings`, else this is an error (a file whose layout
/// a line-wise edit cannot follow, e.g. an inline `midi = [...]`) and nothing should be written.
pub fn with_midi(text: &str, bindings: &[MidiBinding]) -> Result<String> {
    let before = parse_project(text)?;
    let mut out = String::with_capacity(text.len() + 128 * bindings.len());
    let mut in_midi = false;
    for line in text.split_inclusive('\n') {
        if let Some(h) = header(line) {
            in_midi = h == "[[midi]]";
        }
        if !in_midi {
            out.push_str(line);
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if !bindings.is_empty() {
        out.push('\n');
        out.push_str(&midi_tables(bindings));
    }
    let after = parse_project(&out)?;
    if after.nodes != before.nodes || after.settings != before.settings || after.midi != bindings {
        return Err(Error::MidiRewrite);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_pipeline;

    fn b(kind: MidiControlKind, number: u8, mode: MidiMode, target: &str) -> MidiBinding {
        MidiBinding {
            kind,
            channel: 1,
            number,
            mode,
            target: target.into(),
        }
    }

    #[test]
    fn tables_parse_and_print_back() {
        let text = r#"
pipeline = "testsrc ! frei0r-glow ! invert ! nullsink"
[[midi]]
control = "cc"
channel = 2
number = 7
target = "frei0r-glow.blur"
[[midi]]
control = "cc14"
channel = 16
number = 31
mode = "absolute"
target = "frei0r-glow.blur"
[[midi]]
control = "cc"
channel = 1
number = 20
mode = "relative-offset"
target = "frei0r-glow.blur"
[[midi]]
control = "note"
channel = 10
number = 36
target = "invert.bypass"
[[midi]]
control = "note"
channel = 10
number = 37
target = "step"
"#;
        let d = parse_project(text).unwrap();
        assert_eq!(d.midi.len(), 5);
        assert_eq!(d.midi[0].channel, 2);
        assert_eq!(d.midi[0].mode, MidiMode::Absolute);
        assert_eq!(d.midi[1].kind, MidiControlKind::Cc14);
        assert_eq!(d.midi[2].mode, MidiMode::Relative(Encoding::Offset));
        assert_eq!(d.midi[3].to_string(), "note 36 ch 10 -> invert.bypass");
        assert_eq!(
            d.midi[2].to_string(),
            "cc 20 ch 1 relative-offset -> frei0r-glow.blur"
        );
        // Written as a whole project and read back: the same graph, settings and mappings.
        let again = parse_project(&project_text(&d)).unwrap();
        assert_eq!(again, d);
    }

    #[test]
    fn bad_tables_name_the_key_and_value() {
        let cases = [
            ("midi = 3", "'midi' must be an array"),
            ("[[midi]]\ncontrol = \"cc\"\nchannel = 1\nnumber = 7\ntarget = \"a.b\"\nspeed = 1", "unknown key 'speed'"),
            ("[[midi]]\ncontrol = \"knob\"\nchannel = 1\nnumber = 7\ntarget = \"a.b\"", "control 'knob'"),
            ("[[midi]]\nchannel = 1\nnumber = 7\ntarget = \"a.b\"", "'control' is missing"),
            ("[[midi]]\ncontrol = \"cc\"\nchannel = 0\nnumber = 7\ntarget = \"a.b\"", "'channel' must be a whole number in 1..=16, got 0"),
            ("[[midi]]\ncontrol = \"cc\"\nchannel = 1\nnumber = 128\ntarget = \"a.b\"", "got 128"),
            ("[[midi]]\ncontrol = \"cc14\"\nchannel = 1\nnumber = 32\ntarget = \"a.b\"", "0..=31, got 32"),
            ("[[midi]]\ncontrol = \"cc\"\nchannel = 1\ntarget = \"a.b\"", "'number' is missing"),
            ("[[midi]]\ncontrol = \"cc\"\nchannel = 1\nnumber = 1\nmode = \"spin\"\ntarget = \"a.b\"", "mode 'spin'"),
            ("[[midi]]\ncontrol = \"note\"\nchannel = 1\nnumber = 1\nmode = \"relative-twos\"\ntarget = \"a.b\"", "7-bit CCs only"),
            ("[[midi]]\ncontrol = \"cc\"\nchannel = 1\nnumber = 1\ntarget = \"blur\"", "target 'blur'"),
            ("[[midi]]\ncontrol = \"cc\"\nchannel = 1\nnumber = 1", "'target' is missing"),
            ("[[midi]]\ncontrol = 1\nchannel = 1\nnumber = 1\ntarget = \"a.b\"", "'control' must be a string"),
            ("midi = [3]", "midi 1 is not a table"),
        ];
        for (tables, want) in cases {
            let text = format!("pipeline = \"testsrc ! nullsink\"\n{tables}\n");
            let e = parse_project(&text).unwrap_err().to_string();
            assert!(e.contains(want), "{tables:?}: {e}");
        }
    }

    #[test]
    fn with_midi_replaces_only_the_midi_tables() {
        let text = "# my show\nthreads = 2\n\n[[node]]\nname = \"a\"\ntype = \"testsrc\" # the source\n\n\
                    [[midi]]\ncontrol = \"cc\"\nchannel = 1\nnumber = 1\ntarget = \"a.x\"\n\n\
                    [[node]]\ntype = \"nullsink\"\ninput = \"a\"\n\n[[ midi ]]\ncontrol = \"note\"\n\
                    channel = 1\nnumber = 2\ntarget = \"pause\"\n";
        let new = [
            b(MidiControlKind::Cc14, 3, MidiMode::Absolute, "a.y"),
            b(
                MidiControlKind::Cc,
                4,
                MidiMode::Relative(Encoding::Signed),
                "a.\"q\\z",
            ),
        ];
        let out = with_midi(text, &new).unwrap();
        // Comments and other tables are kept as written, the old mappings are gone.
        assert!(out.starts_with("# my show\nthreads = 2\n"), "{out}");
        assert!(out.contains("type = \"testsrc\" # the source\n"), "{out}");
        assert!(
            !out.contains("number = 1\n") && !out.contains("pause"),
            "{out}"
        );
        let d = parse_project(&out).unwrap();
        assert_eq!(d.midi, new);
        assert_eq!(d.nodes, parse_project(text).unwrap().nodes);
        // Removing every mapping.
        let none = with_midi(&out, &[]).unwrap();
        assert!(parse_project(&none).unwrap().midi.is_empty());
        assert!(!none.contains("[[midi]]"));
    }

    #[test]
    fn with_midi_refuses_what_it_cannot_rewrite_line_by_line() {
        let text = "pipeline = \"testsrc ! nullsink\"\nmidi = [{ control = \"cc\", channel = 1, number = 1, target = \"a.b\" }]\n";
        assert_eq!(with_midi(text, &[]), Err(Error::MidiRewrite));
    }

    #[test]
    fn a_pipeline_string_becomes_a_project_file() {
        let mut d = parse_pipeline(
            "testsrc name=\"my src\" ! m.  testsrc pattern=bars ! m.sink_1  mix name=m ! nullsink",
        )
        .unwrap();
        d.settings.fps = Some("30000/1001".into());
        d.settings.name = Some("cam-1.b_2".into());
        d.midi = vec![b(MidiControlKind::Note, 36, MidiMode::Absolute, "m.bypass")];
        assert_eq!(parse_project(&project_text(&d)).unwrap(), d);
    }

    #[test]
    fn targets() {
        for t in ["a.b", "1.x", "pause", "step", "tap", "a.b.c"] {
            assert!(valid_target(t), "{t}");
        }
        for t in ["", "a", ".b", "a.", "a b.c", "stop"] {
            assert!(!valid_target(t), "{t}");
        }
    }
}
