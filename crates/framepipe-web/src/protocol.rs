//! The WebSocket protocol's messages (docs/WEB.md): JSON text frames, each an object with a
//! `type`. Server → page: `hello`, `graph`, `values` (full or changes only), `stats`, `reply`,
//! `error`. Page → server: `{"id": N, "cmd": "set stamp.value 3"}`, one command line of the
//! stdin protocol, answered by a `reply` (or an `error`) carrying the same `id`. With
//! `--audio`, `audio` (the meters) too.

use framepipe_control::{Oscillator, Outcome, Reply};
use framepipe_core::{PropKind, PropSpec, PropValue};
use framepipe_runtime::{Counters, GraphView, NodeView, ValuesView};
use serde_json::{json, Value};

use crate::counters::WebCountsSnapshot;

/// A property's value as JSON: bool, number, string, `[r, g, b]` or `[x, y]`.
pub fn value_json(v: &PropValue) -> Value {
    match v {
        PropValue::Bool(b) => json!(b),
        PropValue::Int(i) => json!(i),
        PropValue::Float(x) if x.is_finite() => json!(x),
        PropValue::Float(x) => json!(x.to_string()),
        PropValue::Str(s) => json!(s),
        PropValue::Color(c) => json!(c),
        PropValue::Position(p) => json!(p),
    }
}

/// A property's spec as JSON: `{name, kind, min, max, options, default, description, live}`
/// (`live: false`: read when the node starts; a `set` is refused, the page shows it read-only).
fn prop_json(p: &PropSpec) -> Value {
    let (kind, min, max, options) = match &p.kind {
        PropKind::Bool => ("bool", None, None, None),
        PropKind::Int { min, max } => ("int", Some(*min as f64), Some(*max as f64), None),
        PropKind::Float { min, max } => ("float", Some(*min), Some(*max), None),
        PropKind::Str => ("str", None, None, None),
        PropKind::Enum(words) => ("enum", None, None, Some(words.clone())),
        PropKind::Color => ("color", None, None, None),
        PropKind::Position => ("position", None, None, None),
    };
    json!({
        "name": p.name,
        "kind": kind,
        "min": min,
        "max": max,
        "options": options,
        "default": value_json(&p.default),
        "description": p.description,
        "live": p.live,
    })
}

fn node_json(n: &NodeView) -> Value {
    json!({
        "name": n.name,
        "element": n.element,
        "kind": n.kind,
        "inputs": n.inputs,
        "width": n.width,
        "height": n.height,
        "props": n.props.iter().map(prop_json).collect::<Vec<_>>(),
        "bypassable": n.bypassable,
        "leaky": n.leaky,
        "master": n.master,
        "auto": n.auto,
    })
}

/// `{"type":"graph", "show", "version", "nodes":[...], "preview_tap": TAP, "preview": NODE}`:
/// `show` is the show's name, `TAP` the preview's `monitor` node, `NODE` the node it reads now
/// (it changes with a live `link TAP NODE`).
pub fn graph_msg(g: &GraphView, tap: Option<&str>, show: Option<&str>) -> Value {
    let previewed = tap
        .and_then(|t| g.node(t))
        .and_then(|(_, n)| n.inputs.first().cloned());
    json!({
        "type": "graph",
        "show": show,
        "version": g.version,
        "nodes": g.nodes.iter().map(node_json).collect::<Vec<_>>(),
        "preview_tap": tap,
        "preview": previewed,
    })
}

/// One property's published state: `[node, prop, value, oscillator or null]`.
fn entry(node: usize, prop: usize, v: &PropValue, osc: Option<&Oscillator>) -> Value {
    json!([node, prop, value_json(v), osc.map(|o| o.to_string())])
}

/// The values message: every property (`full`) or those that differ from `prev` (same
/// version and shape), and the bypass flags likewise. `None` when nothing changed.
pub fn values_msg(cur: &ValuesView, prev: Option<&ValuesView>) -> Option<Value> {
    let prev = prev.filter(|p| {
        p.version == cur.version
            && p.values.len() == cur.values.len()
            && p.values
                .iter()
                .zip(&cur.values)
                .all(|(a, b)| a.len() == b.len())
            && p.bypass.len() == cur.bypass.len()
    });
    let mut changes = Vec::new();
    for (n, props) in cur.values.iter().enumerate() {
        for (i, v) in props.iter().enumerate() {
            let osc = cur
                .oscillators
                .get(n)
                .and_then(|o| o.get(i))
                .and_then(|o| o.as_ref());
            let same = prev.is_some_and(|p| {
                p.values[n][i] == *v
                    && p.oscillators
                        .get(n)
                        .and_then(|o| o.get(i))
                        .and_then(|o| o.as_ref())
                        == osc
            });
            if !same {
                changes.push(entry(n, i, v, osc));
            }
        }
    }
    let bypass: Vec<Value> = cur
        .bypass
        .iter()
        .enumerate()
        .filter(|(n, b)| prev.is_none_or(|p| p.bypass[*n] != **b))
        .map(|(n, b)| json!([n, b]))
        .collect();
    if prev.is_some() && changes.is_empty() && bypass.is_empty() {
        return None;
    }
    Some(json!({
        "type": "values",
        "version": cur.version,
        "frame": cur.frame,
        "full": prev.is_none(),
        "changes": changes,
        "bypass": bypass,
    }))
}

/// Live figures of the run, as the status line shows them, plus the web counts and the
/// preview image's serial number.
pub fn stats_msg(c: &Counters, fps: f64, web: &WebCountsSnapshot, preview_seq: u64) -> Value {
    let s = c.snapshot();
    json!({
        "type": "stats",
        "frames": s.frames,
        "fps": fps,
        "in_flight": s.in_flight,
        "paused": c.paused(),
        "realtime": c.realtime(),
        "tempo": c.tempo_bpm(),
        "latency_budget_ms": c.latency_budget_ms(),
        "latency_margin_ms": c.latency_margin_ms(),
        "late": c.late(),
        "lateness_peak_us": c.lateness_peak_us(),
        "repeated": c.repeated(),
        "stages": s.stages.iter().map(|st| json!({
            "name": st.name,
            "ms": st.mean_ms,
            "frames": st.frames,
            "skipped": st.skipped,
            "instances": st.instances,
        })).collect::<Vec<_>>(),
        "web": web,
        "preview": preview_seq,
    })
}

/// The show's audio bands for the page's meters (the `hello`'s `audio`):
/// `{"bands": [{"name", "lo", "hi"}, ...]}`, edges in Hz. A band's name is what an `~audio:`
/// binding takes: `bass`, `low-mid`, `high-mid`, `treble` with the default edges, `band0` ..
/// with `--audio-bands` (where `bass` would name a band that is not the bass).
pub fn audio_bands_json(bands: &framepipe_audio::BandEdges) -> Value {
    let default = bands.edges() == framepipe_audio::DEFAULT_BAND_EDGES;
    let list: Vec<Value> = bands
        .edges()
        .windows(2)
        .enumerate()
        .map(|(i, e)| {
            let name = match framepipe_audio::AudioFeature::band(i) {
                Some(f) if default => f.name(),
                _ => format!("band{i}"),
            };
            json!({ "name": name, "lo": e[0], "hi": e[1] })
        })
        .collect();
    json!({ "bands": list })
}

/// The latest frame's audio analysis: `{"type":"audio", "frame", "level", "peak", "bands",
/// "onsets", "flux", "tempo"}` (`bands`: as many as the show has; `onsets`: frames with an
/// onset so far, so that a page sees every one whatever its polling). `None` before the first
/// frame (or without audio).
pub fn audio_msg(r: &framepipe_audio::MeterReading, bands: usize) -> Option<Value> {
    if r.frames == 0 {
        return None;
    }
    Some(json!({
        "type": "audio",
        "frame": r.frames - 1,
        "level": r.level,
        "peak": r.peak,
        "bands": &r.bands[..bands.min(r.bands.len())],
        "onsets": r.onsets,
        "flux": r.flux,
        "tempo": r.tempo_bpm,
    }))
}

/// A reply to a command: `id` is the poster's request id for the client that posted it, null
/// for everyone else (who see it as a log line).
pub fn reply_msg(r: &Reply, id: Option<u64>) -> Value {
    let (ok, frame, reason) = match &r.outcome {
        Outcome::Applied { frame } => (true, Some(*frame), None),
        Outcome::Refused { reason } => (false, None, Some(reason.to_string())),
    };
    json!({
        "type": "reply",
        "id": id,
        "ticket": r.ticket.0,
        "ok": ok,
        "frame": frame,
        "reason": reason,
        "text": r.to_string(),
    })
}

/// A command the server did not post: `{"type":"error","id","reason"}`.
pub fn error_msg(id: Option<u64>, reason: &str) -> Value {
    json!({ "type": "error", "id": id, "reason": reason })
}

/// A page's message, once parsed.
#[derive(Debug, PartialEq)]
pub struct Request {
    /// The page's number for it (echoed in the reply).
    pub id: Option<u64>,
    /// The command line.
    pub cmd: String,
}

/// Parses `{"id": N, "cmd": "..."}`; the reason otherwise.
pub fn parse_request(text: &str) -> Result<Request, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let id = v.get("id").and_then(Value::as_u64);
    let cmd = v
        .get("cmd")
        .and_then(Value::as_str)
        .ok_or_else(|| "expected {\"id\": N, \"cmd\": \"COMMAND LINE\"}".to_string())?;
    Ok(Request {
        id,
        cmd: cmd.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(values: Vec<Vec<PropValue>>, bypass: Vec<bool>) -> ValuesView {
        ValuesView {
            oscillators: values.iter().map(|v| vec![None; v.len()]).collect(),
            values,
            bypass,
            ..ValuesView::default()
        }
    }

    #[test]
    fn values_diff_names_only_what_changed() {
        let a = view(
            vec![vec![PropValue::Float(1.0), PropValue::Int(2)]],
            vec![false],
        );
        let full = values_msg(&a, None).unwrap();
        assert_eq!(full["full"], true);
        assert_eq!(full["changes"].as_array().unwrap().len(), 2);
        assert!(values_msg(&a, Some(&a)).is_none());
        let mut b = a.clone();
        b.values[0][1] = PropValue::Int(3);
        b.bypass[0] = true;
        let d = values_msg(&b, Some(&a)).unwrap();
        assert_eq!(d["full"], false);
        assert_eq!(d["changes"], json!([[0, 1, 3, null]]));
        assert_eq!(d["bypass"], json!([[0, true]]));
    }

    #[test]
    fn requests_parse_or_say_why() {
        assert_eq!(
            parse_request(r#"{"id":4,"cmd":"pause"}"#).unwrap(),
            Request {
                id: Some(4),
                cmd: "pause".into()
            }
        );
        assert!(parse_request("pause").unwrap_err().starts_with("not JSON"));
        assert!(parse_request(r#"{"id":4}"#).is_err());
    }
}
