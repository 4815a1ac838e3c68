//! The OSC address space as OSCQuery JSON: paths resolved to [`Place`]s, each described with
//! FULL_PATH, CONTENTS, TYPE, VALUE, RANGE, ACCESS and DESCRIPTION (the Vidvox proposal), and
//! the OSC arguments a listened path streams.
//!
//! | address | TYPE | ACCESS | VALUE |
//! |---|---|---|---|
//! | `/framepipe/<node>/<prop>` | `f`, `i`, `T`, `s`, `fff` (colour), `ff` (position) | 3; 1 when read at the node's start, or text (`s`: it may name a file, set from the show's terminal only) | live |
//! | `/framepipe/<node>/bypass` | `T` | 3 | live |
//! | `/framepipe/pause`, `resume`, `stop`, `tap` | `N` | 2 | none |
//! | `/framepipe/step` | `i` (1..) | 2 | none |
//! | `/framepipe/speed` | `f` (±100) | 3 | live |
//! | `/framepipe/tempo` | `f` (20..999) | 3 | live |
//! | `/framepipe/audio/level`, `peak`, `flux`, `bass`, `low-mid`, ... (one per band) | `f` | 1 | the last frame's (with `--audio`) |
//! | `/framepipe/audio/onsets` | `i` (frames with an onset so far) | 1 | live |
//! | `/framepipe/audio/tempo` | `f` (the estimate, bpm; 0: none yet) | 1 | live |

use framepipe_control::osc_in::PREFIX;
use framepipe_core::{PropKind, PropSpec, PropValue};
use rosc::OscType;
use serde_json::{json, Map, Value};

use crate::model::{ShowModel, Values};

/// The transport methods under `/framepipe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `/framepipe/pause`
    Pause,
    /// `/framepipe/resume`
    Resume,
    /// `/framepipe/stop`
    Stop,
    /// `/framepipe/tap`
    Tap,
    /// `/framepipe/step`
    Step,
    /// `/framepipe/speed`
    Speed,
    /// `/framepipe/tempo`
    Tempo,
}

impl Transport {
    /// Every transport method, in tree order.
    pub const ALL: [Transport; 7] = [
        Transport::Pause,
        Transport::Resume,
        Transport::Step,
        Transport::Stop,
        Transport::Speed,
        Transport::Tap,
        Transport::Tempo,
    ];

    /// The address part.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Pause => "pause",
            Transport::Resume => "resume",
            Transport::Stop => "stop",
            Transport::Tap => "tap",
            Transport::Step => "step",
            Transport::Speed => "speed",
            Transport::Tempo => "tempo",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Transport::Pause => "pause the output (the last frame stays)",
            Transport::Resume => "resume after a pause",
            Transport::Stop => "stop the run (sinks are finished cleanly)",
            Transport::Tap => "tap the tempo (beat clock)",
            Transport::Step => "while paused: output N more frames",
            Transport::Speed => {
                "master speed of the oscillators (1 = normal, negative = backwards)"
            }
            Transport::Tempo => "beat clock tempo, BPM",
        }
    }

    fn from_name(name: &str) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// A value under `/framepipe/audio` (a show with `--audio`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioValue {
    /// `level`: RMS.
    Level,
    /// `peak`
    Peak,
    /// `flux`: spectral flux.
    Flux,
    /// `onsets`: frames with an onset so far.
    Onsets,
    /// `tempo`: the estimate, bpm.
    Tempo,
    /// A band (`bass`, `low-mid`, `high-mid`, `treble`, `band4`...).
    Band(u8),
}

impl AudioValue {
    /// The values of a show with `bands` bands, in tree order.
    fn all(bands: usize) -> impl Iterator<Item = AudioValue> {
        [
            AudioValue::Level,
            AudioValue::Peak,
            AudioValue::Flux,
            AudioValue::Onsets,
            AudioValue::Tempo,
        ]
        .into_iter()
        .chain(
            (0..bands.min(framepipe_control::audio::MAX_BANDS)).map(|b| AudioValue::Band(b as u8)),
        )
    }

    /// The address part.
    pub fn name(self) -> String {
        match self {
            AudioValue::Level => "level".into(),
            AudioValue::Peak => "peak".into(),
            AudioValue::Flux => "flux".into(),
            AudioValue::Onsets => "onsets".into(),
            AudioValue::Tempo => "tempo".into(),
            AudioValue::Band(b) => framepipe_control::AudioFeature::band(b as usize)
                .map(|f| f.name())
                .unwrap_or_default(),
        }
    }

    fn description(self) -> String {
        match self {
            AudioValue::Level => "audio level (RMS) at the last frame".into(),
            AudioValue::Peak => "audio peak since the frame before".into(),
            AudioValue::Flux => "spectral flux (what onsets are detected on)".into(),
            AudioValue::Onsets => "frames with an audio onset so far".into(),
            AudioValue::Tempo => "the audio's tempo estimate, BPM (0: none yet)".into(),
            AudioValue::Band(_) => format!("{} band amplitude at the last frame", self.name()),
        }
    }

    fn of(self, a: &crate::model::AudioValues) -> Value {
        match self {
            AudioValue::Level => json!([a.level]),
            AudioValue::Peak => json!([a.peak]),
            AudioValue::Flux => json!([a.flux]),
            AudioValue::Onsets => json!([a.onsets]),
            AudioValue::Tempo => json!([a.tempo_bpm]),
            AudioValue::Band(b) => json!([a.bands.get(b as usize).copied().unwrap_or(0.0)]),
        }
    }

    fn args(self, a: &crate::model::AudioValues) -> Vec<OscType> {
        let f = |x: f64| vec![OscType::Float(x as f32)];
        match self {
            AudioValue::Level => f(a.level),
            AudioValue::Peak => f(a.peak),
            AudioValue::Flux => f(a.flux),
            AudioValue::Onsets => vec![OscType::Int(a.onsets.min(i32::MAX as u64) as i32)],
            AudioValue::Tempo => f(a.tempo_bpm),
            AudioValue::Band(b) => f(a.bands.get(b as usize).copied().unwrap_or(0.0)),
        }
    }
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `/`
    Root,
    /// `/framepipe`
    Prefix,
    /// `/framepipe/<node>`
    Node(usize),
    /// `/framepipe/<node>/<prop>`: node index, property index.
    Prop(usize, usize),
    /// `/framepipe/<node>/bypass`
    Bypass(usize),
    /// `/framepipe/<transport>`
    Transport(Transport),
    /// `/framepipe/audio` (a show with audio).
    Audio,
    /// `/framepipe/audio/<value>`
    AudioValue(AudioValue),
}

/// The place `path` names in `model` (a trailing `/` is ignored), if any. A node named like
/// a transport method is reached by its properties' paths; the bare path is the transport.
pub fn resolve(model: &ShowModel, path: &str) -> Option<Place> {
    let path = match path.strip_suffix('/') {
        Some(p) if !p.is_empty() => p,
        _ => path,
    };
    if path.is_empty() || path == "/" {
        return Some(Place::Root);
    }
    let rest = path.strip_prefix(PREFIX)?;
    if rest.is_empty() {
        return Some(Place::Prefix);
    }
    let parts: Vec<&str> = rest.strip_prefix('/')?.split('/').collect();
    match parts[..] {
        [one] => Transport::from_name(one)
            .map(Place::Transport)
            .or_else(|| (one == "audio" && model.audio_bands > 0).then_some(Place::Audio))
            .or_else(|| model.node(one).map(|(i, _)| Place::Node(i))),
        ["audio", value]
            if model.audio_bands > 0
                && AudioValue::all(model.audio_bands).any(|v| v.name() == value) =>
        {
            AudioValue::all(model.audio_bands)
                .find(|v| v.name() == value)
                .map(Place::AudioValue)
        }
        [node, prop] => {
            let (i, n) = model.node(node)?;
            if let Some(p) = n.props.iter().position(|p| p.name == prop) {
                Some(Place::Prop(i, p))
            } else if prop == "bypass" && n.bypassable {
                Some(Place::Bypass(i))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The OSC address of `place`.
pub fn full_path(model: &ShowModel, place: Place) -> String {
    match place {
        Place::Root => "/".into(),
        Place::Prefix => PREFIX.into(),
        Place::Node(n) => format!("{PREFIX}/{}", model.nodes[n].name),
        Place::Prop(n, p) => format!(
            "{PREFIX}/{}/{}",
            model.nodes[n].name, model.nodes[n].props[p].name
        ),
        Place::Bypass(n) => format!("{PREFIX}/{}/bypass", model.nodes[n].name),
        Place::Transport(t) => format!("{PREFIX}/{}", t.name()),
        Place::Audio => format!("{PREFIX}/audio"),
        Place::AudioValue(v) => format!("{PREFIX}/audio/{}", v.name()),
    }
}

/// The OSC type tags a property takes.
pub fn prop_type(kind: &PropKind) -> &'static str {
    match kind {
        PropKind::Bool => "T",
        PropKind::Int { .. } => "i",
        PropKind::Float { .. } => "f",
        PropKind::Str | PropKind::Enum(_) => "s",
        PropKind::Color => "fff",
        PropKind::Position => "ff",
    }
}

fn prop_range(kind: &PropKind) -> Option<Value> {
    let clamp = |v: i64| v.clamp(i64::from(i32::MIN), i64::from(i32::MAX));
    match kind {
        PropKind::Int { min, max } => Some(json!([{ "MIN": clamp(*min), "MAX": clamp(*max) }])),
        PropKind::Float { min, max } => Some(json!([{ "MIN": min, "MAX": max }])),
        PropKind::Enum(words) => Some(json!([{ "VALS": words }])),
        PropKind::Color => Some(json!([
            { "MIN": 0.0, "MAX": 1.0 },
            { "MIN": 0.0, "MAX": 1.0 },
            { "MIN": 0.0, "MAX": 1.0 }
        ])),
        PropKind::Bool | PropKind::Str | PropKind::Position => None,
    }
}

/// A property value as OSC arguments (ints clamped to 32 bits, numbers as 32-bit floats).
pub fn value_args(v: &PropValue) -> Vec<OscType> {
    match v {
        PropValue::Bool(b) => vec![OscType::Bool(*b)],
        PropValue::Int(i) => vec![OscType::Int(
            (*i).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
        )],
        PropValue::Float(x) => vec![OscType::Float(*x as f32)],
        PropValue::Str(s) => vec![OscType::String(s.clone())],
        PropValue::Color(c) => c.iter().map(|x| OscType::Float(*x)).collect(),
        PropValue::Position(p) => p.iter().map(|x| OscType::Float(*x as f32)).collect(),
    }
}

fn value_json(v: &PropValue) -> Value {
    match v {
        PropValue::Bool(b) => json!([b]),
        PropValue::Int(i) => json!([i]),
        PropValue::Float(x) => json!([x]),
        PropValue::Str(s) => json!([s]),
        PropValue::Color(c) => json!(c),
        PropValue::Position(p) => json!(p),
    }
}

/// The arguments `place` streams to its listeners: its value now, if it has one.
pub fn current_args(model: &ShowModel, values: &Values, place: Place) -> Option<Vec<OscType>> {
    match place {
        Place::Prop(n, p) => values.prop(n, p).map(value_args),
        Place::Bypass(n) => values
            .bypassed
            .get(n)
            .map(|b| vec![OscType::Bool(*b)])
            .filter(|_| model.nodes[n].bypassable),
        Place::Transport(Transport::Speed) => values.speed.map(|s| vec![OscType::Float(s as f32)]),
        Place::Transport(Transport::Tempo) => {
            values.tempo_bpm.map(|s| vec![OscType::Float(s as f32)])
        }
        Place::AudioValue(v) => values.audio.as_ref().map(|a| v.args(a)),
        _ => None,
    }
}

fn current_json(values: &Values, place: Place) -> Option<Value> {
    match place {
        Place::Prop(n, p) => values.prop(n, p).map(value_json),
        Place::Bypass(n) => values.bypassed.get(n).map(|b| json!([b])),
        Place::Transport(Transport::Speed) => values.speed.map(|s| json!([s])),
        Place::Transport(Transport::Tempo) => values.tempo_bpm.map(|s| json!([s])),
        Place::AudioValue(v) => values.audio.as_ref().map(|a| v.of(a)),
        _ => None,
    }
}

/// ACCESS: 0 none (containers), 1 read-only (a property read when the node starts: a `set` is
/// refused; a text property, which may name a file: OSC does not set it,
/// [`TEXT_PROPERTY_RULE`](framepipe_control::osc_in::TEXT_PROPERTY_RULE)), 2 write-only
/// (triggers), 3 read and write.
fn access(model: &ShowModel, values: &Values, place: Place) -> u8 {
    match place {
        Place::Prop(n, p) if !prop_spec(model, n, p).live => 1,
        Place::Prop(n, p) if prop_spec(model, n, p).kind == PropKind::Str => 1,
        _ => base_access(values, place),
    }
}

/// [`access`] but for the properties a running node cannot take (read either way).
fn base_access(values: &Values, place: Place) -> u8 {
    match place {
        Place::Root | Place::Prefix | Place::Node(_) | Place::Audio => 0,
        Place::AudioValue(_) => 1,
        Place::Prop(..) => 3,
        Place::Bypass(n) if values.bypassed.get(n).is_some() => 3,
        Place::Transport(Transport::Speed) if values.speed.is_some() => 3,
        Place::Transport(Transport::Tempo) if values.tempo_bpm.is_some() => 3,
        _ => 2,
    }
}

fn prop_spec(model: &ShowModel, n: usize, p: usize) -> &PropSpec {
    &model.nodes[n].props[p]
}

fn type_of(model: &ShowModel, place: Place) -> Option<&'static str> {
    match place {
        Place::Root | Place::Prefix | Place::Node(_) | Place::Audio => None,
        Place::AudioValue(AudioValue::Onsets) => Some("i"),
        Place::AudioValue(_) => Some("f"),
        Place::Prop(n, p) => Some(prop_type(&prop_spec(model, n, p).kind)),
        Place::Bypass(_) => Some("T"),
        Place::Transport(Transport::Step) => Some("i"),
        Place::Transport(Transport::Speed | Transport::Tempo) => Some("f"),
        Place::Transport(_) => Some("N"),
    }
}

fn range_of(model: &ShowModel, place: Place) -> Option<Value> {
    match place {
        Place::Prop(n, p) => prop_range(&prop_spec(model, n, p).kind),
        Place::Transport(Transport::Step) => Some(json!([{ "MIN": 1 }])),
        Place::Transport(Transport::Speed) => {
            let max = framepipe_control::osc::MAX_SPEED;
            Some(json!([{ "MIN": -max, "MAX": max }]))
        }
        Place::Transport(Transport::Tempo) => Some(json!([{
            "MIN": framepipe_control::beat::MIN_BPM,
            "MAX": framepipe_control::beat::MAX_BPM
        }])),
        _ => None,
    }
}

fn description_of(model: &ShowModel, place: Place) -> String {
    match place {
        Place::Root => "framepipe".into(),
        Place::Prefix => "framepipe: the show's nodes and the transport".into(),
        Place::Node(n) => {
            let node = &model.nodes[n];
            format!("{} ({})", node.element, node.kind)
        }
        Place::Prop(n, p) => {
            let spec = prop_spec(model, n, p);
            if spec.description.is_empty() {
                format!("{} ({})", spec.name, spec.kind)
            } else {
                spec.description.clone()
            }
        }
        Place::Bypass(n) => format!("bypass {}: pass its input through", model.nodes[n].name),
        Place::Transport(t) => t.description().into(),
        Place::Audio => "the show's audio analysis (read-only)".into(),
        Place::AudioValue(v) => v.description(),
    }
}

fn children(model: &ShowModel, place: Place) -> Vec<(String, Place)> {
    match place {
        Place::Root => vec![("framepipe".into(), Place::Prefix)],
        Place::Prefix => {
            // The transport first: a node named like one joins it (see `contents`).
            let mut v: Vec<(String, Place)> = Transport::ALL
                .into_iter()
                .map(|t| (t.name().to_string(), Place::Transport(t)))
                .collect();
            if model.audio_bands > 0 {
                v.push(("audio".into(), Place::Audio));
            }
            v.extend(
                model
                    .nodes
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n.name.clone(), Place::Node(i))),
            );
            v
        }
        Place::Node(n) => {
            let node = &model.nodes[n];
            let mut v: Vec<(String, Place)> = node
                .props
                .iter()
                .enumerate()
                .map(|(p, spec)| (spec.name.clone(), Place::Prop(n, p)))
                .collect();
            if node.bypassable && !node.props.iter().any(|p| p.name == "bypass") {
                v.push(("bypass".into(), Place::Bypass(n)));
            }
            v
        }
        Place::Audio => AudioValue::all(model.audio_bands)
            .map(|v| (v.name(), Place::AudioValue(v)))
            .collect(),
        _ => Vec::new(),
    }
}

/// An attribute this server does not know (`?BOGUS`: HTTP 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownAttribute;

/// One attribute of `place`: `Ok(None)` when it does not apply (a container's TYPE),
/// [`UnknownAttribute`] for an attribute this server does not know.
pub fn attribute(
    model: &ShowModel,
    values: &Values,
    place: Place,
    attr: &str,
) -> Result<Option<Value>, UnknownAttribute> {
    Ok(match attr {
        "FULL_PATH" => Some(json!(full_path(model, place))),
        "CONTENTS" => {
            let kids = children(model, place);
            (!kids.is_empty()).then(|| contents(model, values, &kids))
        }
        "TYPE" => type_of(model, place).map(|t| json!(t)),
        "VALUE" => current_json(values, place),
        "RANGE" => range_of(model, place),
        "ACCESS" => Some(json!(access(model, values, place))),
        "DESCRIPTION" => Some(json!(description_of(model, place))),
        _ => return Err(UnknownAttribute),
    })
}

/// Whether `place`'s VALUE may be read (ACCESS has the read bit).
pub fn readable(values: &Values, place: Place) -> bool {
    base_access(values, place) & 1 == 1
}

fn contents(model: &ShowModel, values: &Values, kids: &[(String, Place)]) -> Value {
    let mut map = Map::new();
    for (name, place) in kids {
        // A node named like a transport method: its properties join the method's object.
        let entry = describe(model, values, *place);
        match map.get_mut(name) {
            Some(Value::Object(existing)) => {
                if let Some(Value::Object(c)) = entry.get("CONTENTS") {
                    existing.insert("CONTENTS".into(), Value::Object(c.clone()));
                }
            }
            _ => {
                map.insert(name.clone(), Value::Object(entry));
            }
        }
    }
    Value::Object(map)
}

/// The full description of `place` and everything under it.
pub fn describe(model: &ShowModel, values: &Values, place: Place) -> Map<String, Value> {
    let mut m = Map::new();
    for attr in [
        "FULL_PATH",
        "DESCRIPTION",
        "ACCESS",
        "TYPE",
        "RANGE",
        "VALUE",
        "CONTENTS",
    ] {
        if let Ok(Some(v)) = attribute(model, values, place, attr) {
            m.insert(attr.into(), v);
        }
    }
    m
}

/// Every place with a value a client may listen to.
pub fn listenable(model: &ShowModel, values: &Values) -> Vec<Place> {
    let mut v = Vec::new();
    for (n, node) in model.nodes.iter().enumerate() {
        v.extend((0..node.props.len()).map(|p| Place::Prop(n, p)));
        if node.bypassable {
            v.push(Place::Bypass(n));
        }
    }
    v.push(Place::Transport(Transport::Speed));
    v.push(Place::Transport(Transport::Tempo));
    v.extend(AudioValue::all(model.audio_bands).map(Place::AudioValue));
    v.retain(|p| current_args(model, values, *p).is_some());
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeModel;

    fn model() -> ShowModel {
        ShowModel {
            version: 1,
            nodes: vec![
                NodeModel {
                    name: "src".into(),
                    element: "testsrc".into(),
                    kind: "source".into(),
                    props: vec![PropSpec::new(
                        "pattern",
                        PropKind::Enum(vec!["bars".into(), "solid".into()]),
                        PropValue::Str("bars".into()),
                        "what to draw",
                    )],
                    bypassable: false,
                },
                NodeModel {
                    name: "glow".into(),
                    element: "frei0r-glow".into(),
                    kind: "effect".into(),
                    props: vec![
                        PropSpec::new(
                            "blur",
                            PropKind::Float { min: 0.0, max: 1.0 },
                            PropValue::Float(0.5),
                            "",
                        ),
                        PropSpec::new(
                            "big",
                            PropKind::Int {
                                min: -(1 << 40),
                                max: 7,
                            },
                            PropValue::Int(3),
                            "an int",
                        ),
                        PropSpec::new("tint", PropKind::Color, PropValue::Color([1.0; 3]), "c"),
                        PropSpec::new("isolate", PropKind::Bool, PropValue::Bool(false), "")
                            .fixed(),
                        PropSpec::new("file", PropKind::Str, PropValue::Str("a.xml".into()), ""),
                    ],
                    bypassable: true,
                },
                // Named like a transport method.
                NodeModel {
                    name: "speed".into(),
                    element: "invert".into(),
                    kind: "effect".into(),
                    props: vec![PropSpec::new(
                        "on",
                        PropKind::Bool,
                        PropValue::Bool(true),
                        "",
                    )],
                    bypassable: true,
                },
            ],
            audio_bands: 0,
        }
    }

    #[test]
    fn paths_resolve_to_places_and_back() {
        let m = model();
        for (path, place) in [
            ("/", Place::Root),
            ("", Place::Root),
            ("/framepipe", Place::Prefix),
            ("/framepipe/", Place::Prefix),
            ("/framepipe/glow", Place::Node(1)),
            ("/framepipe/glow/blur", Place::Prop(1, 0)),
            ("/framepipe/glow/bypass", Place::Bypass(1)),
            ("/framepipe/pause", Place::Transport(Transport::Pause)),
            ("/framepipe/speed", Place::Transport(Transport::Speed)),
            ("/framepipe/speed/on", Place::Prop(2, 0)),
        ] {
            assert_eq!(resolve(&m, path), Some(place), "{path}");
            if !path.is_empty() && !path.ends_with('/') || path == "/" {
                assert_eq!(full_path(&m, place), path);
            }
        }
        for path in [
            "/framepipe/nope",
            "/framepipe/src/bypass",
            "/framepipe/glow/blurr",
            "/framepipe/glow/blur/norm",
            "/other",
            "/framepipex",
            "framepipe",
        ] {
            assert_eq!(resolve(&m, path), None, "{path}");
        }
    }

    #[test]
    fn the_tree_has_types_ranges_values_and_access() {
        let m = model();
        let mut values = Values::defaults(&m);
        values.speed = Some(1.0);
        let root = Value::Object(describe(&m, &values, Place::Root));
        let glow = &root["CONTENTS"]["framepipe"]["CONTENTS"]["glow"];
        assert_eq!(glow["FULL_PATH"], "/framepipe/glow");
        assert_eq!(glow["ACCESS"], 0);
        assert_eq!(glow["DESCRIPTION"], "frei0r-glow (effect)");
        let blur = &glow["CONTENTS"]["blur"];
        assert_eq!(blur["TYPE"], "f");
        assert_eq!(blur["RANGE"], json!([{ "MIN": 0.0, "MAX": 1.0 }]));
        assert_eq!(blur["VALUE"], json!([0.5]));
        assert_eq!(blur["ACCESS"], 3);
        // A property read when the node starts: read-only, with its value.
        let isolate = &glow["CONTENTS"]["isolate"];
        assert_eq!(isolate["ACCESS"], 1);
        assert_eq!(isolate["VALUE"], json!([false]));
        // A text property may name a file: read-only for OSC (issue #21), with its value.
        let file = &glow["CONTENTS"]["file"];
        assert_eq!(
            (file["TYPE"].clone(), file["ACCESS"].clone()),
            (json!("s"), json!(1))
        );
        assert_eq!(file["VALUE"], json!(["a.xml"]));
        // An int range beyond 32 bits is clamped to what "i" carries.
        assert_eq!(
            glow["CONTENTS"]["big"]["RANGE"],
            json!([{ "MIN": i32::MIN, "MAX": 7 }])
        );
        assert_eq!(glow["CONTENTS"]["tint"]["TYPE"], "fff");
        assert_eq!(glow["CONTENTS"]["tint"]["VALUE"], json!([1.0, 1.0, 1.0]));
        assert_eq!(glow["CONTENTS"]["bypass"]["TYPE"], "T");
        assert_eq!(glow["CONTENTS"]["bypass"]["VALUE"], json!([false]));
        let pattern = &root["CONTENTS"]["framepipe"]["CONTENTS"]["src"]["CONTENTS"]["pattern"];
        assert_eq!(pattern["RANGE"], json!([{ "VALS": ["bars", "solid"] }]));
        assert_eq!(pattern["VALUE"], json!(["bars"]));
        let fp = &root["CONTENTS"]["framepipe"]["CONTENTS"];
        assert_eq!(fp["pause"]["TYPE"], "N");
        assert_eq!(fp["pause"]["ACCESS"], 2);
        assert!(fp["pause"].get("VALUE").is_none());
        assert_eq!(fp["step"]["RANGE"], json!([{ "MIN": 1 }]));
        assert_eq!(fp["tempo"]["ACCESS"], 2, "no tempo value known");
        // The node named "speed" lives inside the speed method.
        assert_eq!(fp["speed"]["TYPE"], "f");
        assert_eq!(fp["speed"]["VALUE"], json!([1.0]));
        assert_eq!(fp["speed"]["CONTENTS"]["on"]["TYPE"], "T");
        // Single attributes.
        assert_eq!(attribute(&m, &values, Place::Prefix, "TYPE").unwrap(), None);
        assert!(attribute(&m, &values, Place::Prefix, "BOGUS").is_err());
        assert!(!readable(&values, Place::Transport(Transport::Stop)));
        assert!(readable(&values, Place::Prop(1, 0)));
    }

    #[test]
    fn listened_values_become_osc_arguments() {
        let m = model();
        let mut values = Values::defaults(&m);
        values.props[1][1] = Some(PropValue::Int(1 << 40));
        assert_eq!(
            current_args(&m, &values, Place::Prop(1, 1)),
            Some(vec![OscType::Int(i32::MAX)])
        );
        assert_eq!(
            current_args(&m, &values, Place::Prop(1, 2)),
            Some(vec![OscType::Float(1.0); 3])
        );
        assert_eq!(
            current_args(&m, &values, Place::Transport(Transport::Speed)),
            None
        );
        let all = listenable(&m, &values);
        assert!(all.contains(&Place::Bypass(1)));
        assert!(!all.contains(&Place::Transport(Transport::Tempo)));
    }

    /// Issue #25: a show with audio lists `/framepipe/audio` and its values, read-only, with
    /// the last frame's figures; a show without has none of it.
    #[test]
    fn a_show_with_audio_lists_its_analysis_read_only() {
        let mut m = model();
        assert_eq!(resolve(&m, "/framepipe/audio/level"), None);
        m.audio_bands = 4;
        let mut values = Values::defaults(&m);
        assert_eq!(resolve(&m, "/framepipe/audio"), Some(Place::Audio));
        let bass = resolve(&m, "/framepipe/audio/bass").unwrap();
        assert_eq!(bass, Place::AudioValue(AudioValue::Band(0)));
        assert_eq!(full_path(&m, bass), "/framepipe/audio/bass");
        assert_eq!(resolve(&m, "/framepipe/audio/band4"), None, "only 4 bands");
        let names: Vec<String> = children(&m, Place::Audio)
            .into_iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(
            names,
            ["level", "peak", "flux", "onsets", "tempo", "bass", "low-mid", "high-mid", "treble"]
        );
        assert!(children(&m, Place::Prefix)
            .iter()
            .any(|c| c.1 == Place::Audio));
        // No frame yet: no value.
        assert_eq!(attribute(&m, &values, bass, "VALUE").unwrap(), None);
        values.audio = Some(crate::model::AudioValues {
            level: 0.25,
            onsets: 3,
            bands: vec![0.5, 0.0, 0.0, 0.0],
            ..Default::default()
        });
        let get = |p: &str, a: &str| {
            attribute(&m, &values, resolve(&m, p).unwrap(), a)
                .unwrap()
                .unwrap()
        };
        assert_eq!(get("/framepipe/audio/bass", "VALUE"), json!([0.5]));
        assert_eq!(get("/framepipe/audio/level", "VALUE"), json!([0.25]));
        assert_eq!(get("/framepipe/audio/onsets", "TYPE"), json!("i"));
        assert_eq!(get("/framepipe/audio/bass", "ACCESS"), json!(1));
        assert_eq!(get("/framepipe/audio", "ACCESS"), json!(0));
        assert!(readable(&values, bass));
        assert_eq!(
            current_args(&m, &values, resolve(&m, "/framepipe/audio/onsets").unwrap()),
            Some(vec![OscType::Int(3)])
        );
        assert!(listenable(&m, &values).contains(&bass));
    }
}
