//! TOML project files.
//!
//! A graph as nodes, each with an optional `name`, its element (`type`), where its input comes
//! from (`input = "a"`, or `inputs = ["a", "b"]`: the position is the input's number), and its
//! properties:
//! ```toml
//! [[node]]
//! name = "a"
//! type = "testsrc"
//! [[node]]
//! name = "b"
//! type = "testsrc"
//! pattern = "bars"
//! [[node]]
//! name = "mix"
//! type = "mix"
//! inputs = ["a", "b"]
//! [[node]]
//! type = "y4msink"
//! input = "mix"
//! location = "out.y4m"
//! ```
//! or a pipeline string (a chain or a graph):
//! ```toml
//! pipeline = "testsrc frames=100 ! frei0r-glow blur=0.5 ! y4msink location=out.y4m"
//! ```
//! or a chain of elements, each with its properties as keys:
//! ```toml
//! [[element]]
//! type = "testsrc"
//! frames = 100
//! [[element]]
//! type = "frei0r-glow"
//! blur = 0.5
//! ```
//! and optional run settings at the top: `name` (the show's name when several run in one
//! process), `threads`, `in-flight`, `stats`, `fps`, `unpaced`, `audio` (what `--audio` takes)
//! and `audio-bands`;
//! and MIDI mappings, `[[midi]]` tables (see [`crate::midi`]); and a deck's clips, `[[clip]]`
//! tables (see `clips.rs`).
//! A file with two of `pipeline`, `[[element]]` and `[[node]]` is an error (one of them would be
//! ignored).
//!
//! A property in a table is a number, a bool, a string (a compact `~oscillator` too), an array
//! (joined with commas: `color = [1, 0.5, 0]`), or an oscillator table
//! `{ osc = "sine", freq = 0.5, min = 0, max = 1, phase = 0.25 }`, which becomes the compact
//! text form after the oscillator's own checks (docs/CONTROL.md).

use framepipe_control::{OscSpec, Oscillator};

use crate::desc::{shown, GraphDesc, Settings};
use crate::links::{check_name, End, Link, Raw, RawNode};
use crate::{parse_pipeline, Error, Result};

fn toml_scalar(key: &str, v: &toml::Value) -> Result<String> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(items) => items
            .iter()
            .map(|i| toml_scalar(key, i))
            .collect::<Result<Vec<_>>>()?
            .join(","),
        toml::Value::Table(t) if t.contains_key("osc") => osc_table(key, v)?,
        toml::Value::Table(t) if t.contains_key("audio") => audio_table(key, v)?,
        other => {
            return Err(Error::UnsupportedValue {
                key: shown(key),
                kind: other.type_str(),
            })
        }
    })
}

/// An oscillator table, `{ osc = "sine", freq = 0.5, min = 0, max = 1 }`, as the compact text
/// form (`~sine:0.5hz:0..1:phase=0`) that pipeline strings use, after the same checks.
fn osc_table(key: &str, v: &toml::Value) -> Result<String> {
    let bad = |reason: String| Error::BadOscillator {
        key: shown(key),
        reason,
    };
    let spec: OscSpec = v
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| bad(one_line(e.message())))?;
    let osc = Oscillator::try_from(spec).map_err(|e| bad(e.to_string()))?;
    Ok(osc.to_string())
}

/// An audio binding, `{ audio = "bass", min = 0, max = 1, release = "300ms" }`, as the
/// compact text form (`~audio:bass:0..1:release=300ms`) that pipeline strings use.
fn audio_table(key: &str, v: &toml::Value) -> Result<String> {
    let bad = |reason: String| Error::BadOscillator {
        key: shown(key),
        reason,
    };
    let spec: framepipe_control::audio::AudioSpec = v
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| bad(one_line(e.message())))?;
    let osc = Oscillator::try_from(spec).map_err(|e| bad(e.to_string()))?;
    Ok(osc.to_string())
}

/// A message of several lines as one.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// A TOML parse error as one line: where, and the parser's message.
fn toml_error(text: &str, e: &toml::de::Error) -> Error {
    let (line, column) = match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            (line, column)
        }
        None => (0, 0),
    };
    let message = one_line(e.message());
    Error::Toml {
        line,
        column,
        message,
    }
}

/// A project file's top-level value of the wrong kind.
fn bad_key(key: &'static str, expected: &'static str, got: &toml::Value) -> Error {
    Error::BadKey {
        key,
        expected,
        got: shown(&got.to_string()),
    }
}

/// A positive integer setting (`threads`, `in-flight`).
fn positive(key: &'static str, value: &toml::Value) -> Result<usize> {
    value
        .as_integer()
        .filter(|n| *n > 0)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| bad_key(key, "a positive integer", value))
}

/// The ways a project file can describe what to run.
const FORMS: [&str; 3] = ["pipeline", "element", "node"];

/// How a form is written, for messages.
fn form_label(key: &str) -> &'static str {
    match key {
        "pipeline" => "'pipeline = \"...\"'",
        "element" => "[[element]] tables",
        _ => "[[node]] tables",
    }
}

/// Parses a TOML project file's text.
pub fn parse_project(text: &str) -> Result<GraphDesc> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    let forms: Vec<&str> = FORMS.into_iter().filter(|k| doc.contains_key(*k)).collect();
    if let [first, second, ..] = forms[..] {
        return Err(Error::TwoPipelines {
            first: form_label(first),
            second: form_label(second),
        });
    }
    let mut settings = Settings::default();
    let mut midi = Vec::new();
    let mut clips = None;
    let mut desc: Option<GraphDesc> = None;
    for (key, value) in &doc {
        match key.as_str() {
            "pipeline" => {
                let s = value.as_str().ok_or_else(|| {
                    bad_key("pipeline", "a string like \"testsrc ! nullsink\"", value)
                })?;
                desc = Some(parse_pipeline(s).map_err(|e| Error::InPipelineKey(Box::new(e)))?);
            }
            "element" => {
                let list = value
                    .as_array()
                    .ok_or_else(|| bad_key("element", "an array of tables ([[element]])", value))?;
                let mut raw = Raw::default();
                for (i, item) in list.iter().enumerate() {
                    raw.nodes.push(table_node("element", i, item)?);
                    if i > 0 {
                        raw.links.push(Link {
                            from: End::Node(i - 1),
                            to: End::Node(i),
                            input: None,
                        });
                    }
                }
                desc = Some(resolve_tables(raw)?);
            }
            "node" => {
                let list = value
                    .as_array()
                    .ok_or_else(|| bad_key("node", "an array of tables ([[node]])", value))?;
                let mut raw = Raw::default();
                for (i, item) in list.iter().enumerate() {
                    let node = table_node("node", i, item)?;
                    let inputs = node_inputs(i, &node.element, item)?;
                    for (k, name) in inputs.into_iter().enumerate() {
                        raw.links.push(Link {
                            from: End::Named {
                                name,
                                place: format!(
                                    "the inputs of [[node]] {} ({})",
                                    i + 1,
                                    shown(&node.element)
                                ),
                            },
                            to: End::Node(i),
                            input: Some(k),
                        });
                    }
                    raw.nodes.push(node);
                }
                desc = Some(resolve_tables(raw)?);
            }
            "midi" => midi = crate::midi::parse_tables(value)?,
            "clip" => clips = Some(value),
            "threads" => settings.threads = Some(positive("threads", value)?),
            "in-flight" => settings.in_flight = Some(positive("in-flight", value)?),
            "stats" => {
                settings.stats = Some(
                    value
                        .as_str()
                        .ok_or_else(|| bad_key("stats", "a path", value))?
                        .to_string(),
                )
            }
            "fps" => settings.fps = Some(toml_scalar("fps", value)?),
            "audio" => {
                settings.audio = Some(
                    value
                        .as_str()
                        .filter(|s| !s.trim().is_empty())
                        .ok_or_else(|| {
                            bad_key(
                                "audio",
                                "a file, a stream, or a live input (\"default\", \"jack\", \"alsa:hw:1\")",
                                value,
                            )
                        })?
                        .to_string(),
                )
            }
            "audio-bands" => {
                settings.audio_bands = Some(
                    value
                        .as_str()
                        .ok_or_else(|| {
                            bad_key("audio-bands", "band edges in Hz, \"20,250,2000,6000,20000\"", value)
                        })?
                        .to_string(),
                )
            }
            "name" => {
                let name = value
                    .as_str()
                    .ok_or_else(|| bad_key("name", "a string like \"cam1\"", value))?;
                crate::desc::check_show_name(name).map_err(|reason| Error::BadShowName {
                    name: shown(name),
                    reason,
                })?;
                settings.name = Some(name.to_string());
            }
            "unpaced" => {
                settings.unpaced = value
                    .as_bool()
                    .ok_or_else(|| bad_key("unpaced", "true or false", value))?
            }
            other => return Err(Error::UnknownKey { key: shown(other) }),
        }
    }
    let mut desc = desc.ok_or(Error::NoPipeline)?;
    if let Some(tables) = clips {
        crate::clips::into_decks(&mut desc, tables)?;
    }
    desc.settings = settings;
    desc.midi = midi;
    Ok(desc)
}

/// Tables to a graph; an empty list (`element = []`) is a graph without nodes, refused later
/// by the CLI ("needs at least a source and a sink").
fn resolve_tables(raw: Raw) -> Result<GraphDesc> {
    if raw.nodes.is_empty() {
        return Ok(GraphDesc::default());
    }
    raw.resolve(Settings::default())
}

/// Keys of a `[[node]]` table that are the node's, not the element's.
const NODE_KEYS: [&str; 4] = ["type", "name", "input", "inputs"];

/// One `[[element]]` or `[[node]]` table (`index` from 0): its type, name and properties (the
/// inputs of a node are read by [`node_inputs`]).
fn table_node(table: &'static str, index: usize, item: &toml::Value) -> Result<RawNode> {
    let position = index + 1;
    let t = item.as_table().ok_or(Error::NotATable {
        table,
        index: position,
    })?;
    let element = t
        .get("type")
        .and_then(|v| v.as_str())
        .ok_or(Error::WithoutType {
            table,
            index: position,
        })?;
    // What a pipeline string cannot say, a project file may not say either.
    if element.contains('=') {
        return Err(Error::PropertyWithoutElement {
            word: shown(element),
        });
    }
    let name = match t.get("name") {
        None => None,
        Some(v) => {
            let name = v.as_str().ok_or_else(|| Error::BadNodeKey {
                index: position,
                element: shown(element),
                key: "name",
                expected: "a string",
                got: shown(&v.to_string()),
            })?;
            check_name(name, element)?;
            Some(name.to_string())
        }
    };
    let own_keys: &[&str] = if table == "node" {
        &NODE_KEYS
    } else {
        &NODE_KEYS[..2]
    };
    let mut props = Vec::new();
    for (k, v) in t {
        if own_keys.contains(&k.as_str()) {
            continue;
        }
        let value = toml_scalar(k, v)?;
        if k.is_empty() {
            return Err(Error::EmptyPropertyName {
                element: shown(element),
                word: shown(&format!("={value}")),
            });
        }
        if k.contains('=') {
            return Err(Error::PropertyNameWithEquals {
                element: shown(element),
                name: shown(k),
            });
        }
        props.push((k.clone(), value));
    }
    Ok(RawNode {
        element: element.to_string(),
        name,
        props,
    })
}

/// The names a `[[node]]` (`index` from 0) takes its inputs from: `input = "a"` or
/// `inputs = ["a", "b"]`.
fn node_inputs(index: usize, element: &str, item: &toml::Value) -> Result<Vec<String>> {
    let Some(t) = item.as_table() else {
        return Ok(Vec::new());
    };
    let bad = |key: &'static str, expected: &'static str, got: &toml::Value| Error::BadNodeKey {
        index: index + 1,
        element: shown(element),
        key,
        expected,
        got: shown(&got.to_string()),
    };
    match (t.get("input"), t.get("inputs")) {
        (Some(_), Some(_)) => Err(Error::InputAndInputs {
            index: index + 1,
            element: shown(element),
        }),
        (Some(v), None) => Ok(vec![v
            .as_str()
            .ok_or_else(|| bad("input", "a node name like \"a\"", v))?
            .to_string()]),
        (None, Some(v)) => {
            let list = v
                .as_array()
                .ok_or_else(|| bad("inputs", "a list of node names like [\"a\", \"b\"]", v))?;
            list.iter()
                .map(|n| {
                    n.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad("inputs", "a list of node names like [\"a\", \"b\"]", v))
                })
                .collect()
        }
        (None, None) => Ok(Vec::new()),
    }
}
