//! `[[clip]]` tables: a deck's bank written clip by clip, each with its own settings.
//!
//! ```toml
//! pipeline = "clips name=deck quantize=beat ! windowsink"
//!
//! [[clip]]
//! location = "intro.mov"   # required
//! name = "intro"           # the name `trigger deck intro` takes (else the file's stem)
//! in = 12                  # a frame number, or seconds: "1.5s"
//! out = "4s"
//! speed = 0.5              # times the deck's speed
//! ping-pong = true
//! beats = 8                # one loop lasts 8 beats
//! loop = false             # hold the last frame until the next trigger
//!
//! [[clip]]
//! deck = "deck"            # which `clips` node; may be left out when the show has one
//! location = "drop.mov"
//! ```
//!
//! Each table appends its `location` to its deck's `locations` (after the ones the pipeline
//! gives, before a `folder`'s files; so relative paths are beside the project file, as every
//! path of a project file), and its settings to the deck's fixed property `clip-settings`:
//! one entry per place of `locations`, separated by `;`, each a list of `key=value` separated
//! by `,` (`;name=intro,in=12,speed=0.5` for a bank whose first place came from the pipeline).
//! The deck checks the values when it is built, naming the clip.

use crate::desc::{shown, GraphDesc};
use crate::{Error, Result};

/// Settings a `[[clip]]` table may give besides `deck` and `location`.
pub const CLIP_KEYS: [&str; 7] = ["name", "in", "out", "speed", "ping-pong", "beats", "loop"];

/// Appends every `[[clip]]` table of `tables` to its deck in `desc`.
pub(crate) fn into_decks(desc: &mut GraphDesc, tables: &toml::Value) -> Result<()> {
    let list = tables.as_array().ok_or_else(|| Error::BadKey {
        key: "clip",
        expected: "an array of tables ([[clip]])",
        got: shown(&tables.to_string()),
    })?;
    for (i, item) in list.iter().enumerate() {
        let bad = |reason: String| Error::BadClip {
            index: i + 1,
            reason,
        };
        let t = item
            .as_table()
            .ok_or_else(|| bad("not a table; write [[clip]] then location = \"FILE\"".into()))?;
        let text = |key: &str, v: &toml::Value| -> Result<String> {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(bad(format!(
                        "'{key}' is {}; expected a string, a number or a bool",
                        other.type_str()
                    )))
                }
            };
            // The separators of `locations` and `clip-settings`.
            if let Some(c) = s.chars().find(|c| matches!(c, ',' | ';')) {
                return Err(bad(format!(
                    "'{key}' = '{}' may not contain '{c}'",
                    shown(&s)
                )));
            }
            Ok(s)
        };
        let location = match t.get("location") {
            Some(v) => text("location", v)?,
            None => return Err(bad("location = \"FILE\" is required".into())),
        };
        if location.is_empty() {
            return Err(bad("location is empty".into()));
        }
        let node = deck_of(desc, t.get("deck"), &bad)?;
        let mut fields = Vec::new();
        for (k, v) in t {
            if k == "deck" || k == "location" {
                continue;
            }
            if !CLIP_KEYS.contains(&k.as_str()) {
                return Err(bad(format!(
                    "unknown key '{}'; expected one of: deck, location, {}",
                    shown(k),
                    CLIP_KEYS.join(", ")
                )));
            }
            let v = text(k, v)?;
            if k == "name" && (v.is_empty() || v.contains('=')) {
                return Err(bad(format!("bad name '{}'", shown(&v))));
            }
            fields.push(format!("{k}={v}"));
        }
        let props = &mut desc.nodes[node].props;
        let places = |props: &Vec<(String, String)>| -> usize {
            props
                .iter()
                .find(|(k, _)| k == "locations")
                .map_or(0, |(_, v)| {
                    v.split(',').filter(|s| !s.trim().is_empty()).count()
                })
        };
        // One settings entry per place before this one.
        let before = places(props);
        let mut entries: Vec<String> = props
            .iter()
            .find(|(k, _)| k == "clip-settings")
            .map(|(_, v)| v.split(';').map(str::to_string).collect())
            .unwrap_or_default();
        entries.resize(before, String::new());
        entries.push(fields.join(","));
        set_prop(props, "clip-settings", entries.join(";"));
        let locations = match props.iter().find(|(k, _)| k == "locations") {
            Some((_, v)) if places(props) > 0 => format!("{v},{location}"),
            _ => location,
        };
        set_prop(props, "locations", locations);
    }
    Ok(())
}

/// The node a table's clip goes to: the `clips` node named by `deck`, else the only one.
fn deck_of(
    desc: &GraphDesc,
    deck: Option<&toml::Value>,
    bad: &dyn Fn(String) -> Error,
) -> Result<usize> {
    let decks: Vec<usize> = (0..desc.nodes.len())
        .filter(|&i| desc.nodes[i].element == "clips")
        .collect();
    let names = || {
        decks
            .iter()
            .map(|&i| desc.nodes[i].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match deck {
        Some(v) => {
            let name = v
                .as_str()
                .ok_or_else(|| bad("deck must be a node name like \"deck\"".into()))?;
            decks
                .iter()
                .copied()
                .find(|&i| desc.nodes[i].name == name)
                .ok_or_else(|| {
                    bad(format!(
                        "deck '{}' is not a clips node of the show; its clips nodes: {}",
                        shown(name),
                        if decks.is_empty() {
                            "none".into()
                        } else {
                            names()
                        }
                    ))
                })
        }
        None => match decks[..] {
            [one] => Ok(one),
            [] => Err(bad(
                "the show has no clips node to put the clip in; add one to the pipeline \
                 (clips name=deck ! ...)"
                    .into(),
            )),
            _ => Err(bad(format!(
                "the show has several clips nodes ({}): say which with deck = \"NAME\"",
                names()
            ))),
        },
    }
}

fn set_prop(props: &mut Vec<(String, String)>, key: &str, value: String) {
    match props.iter_mut().find(|(k, _)| k == key) {
        Some(p) => p.1 = value,
        None => props.push((key.to_string(), value)),
    }
}

#[cfg(test)]
mod tests {
    use crate::parse_project;

    fn prop<'a>(d: &'a crate::GraphDesc, node: usize, key: &str) -> &'a str {
        &d.nodes[node]
            .props
            .iter()
            .find(|(k, _)| k == key)
            .unwrap()
            .1
    }

    #[test]
    fn clip_tables_append_to_the_decks_locations_with_their_settings() {
        let d = parse_project(
            r#"
pipeline = "clips name=deck locations=a.mp4 ! nullsink"
[[clip]]
location = "b.mp4"
name = "drop"
in = 12
out = "2.5s"
speed = 0.5
[[clip]]
deck = "deck"
location = "c.mp4"
"#,
        )
        .unwrap();
        assert_eq!(prop(&d, 0, "locations"), "a.mp4,b.mp4,c.mp4");
        assert_eq!(
            prop(&d, 0, "clip-settings"),
            ";in=12,name=drop,out=2.5s,speed=0.5;"
        );
    }

    #[test]
    fn a_bad_clip_table_is_named_with_the_fix() {
        let err = |text: &str| parse_project(text).unwrap_err().to_string();
        let e = err("pipeline = \"clips ! nullsink\"\n[[clip]]\nname = \"x\"\n");
        assert!(e.contains("[[clip]] 1") && e.contains("location"), "{e}");
        let e = err("pipeline = \"testsrc ! nullsink\"\n[[clip]]\nlocation = \"a.mp4\"\n");
        assert!(e.contains("no clips node"), "{e}");
        let e = err(
            "pipeline = \"clips name=a ! m.  clips name=b ! m.  mix name=m ! nullsink\"\n\
             [[clip]]\nlocation = \"a.mp4\"\n",
        );
        assert!(e.contains("several clips nodes (a, b)"), "{e}");
        let e = err(
            "pipeline = \"clips name=deck ! nullsink\"\n[[clip]]\nlocation = \"a.mp4\"\nspeeed = 2\n",
        );
        assert!(
            e.contains("unknown key 'speeed'") && e.contains("speed"),
            "{e}"
        );
        let e = err("pipeline = \"clips ! nullsink\"\n[[clip]]\nlocation = \"a,b.mp4\"\n");
        assert!(e.contains("may not contain ','"), "{e}");
    }
}
