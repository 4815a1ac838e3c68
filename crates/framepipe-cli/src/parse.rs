//! Pipeline descriptions: gst-launch-like strings and TOML project files, both turned into the same
//! [`PipelineDesc`].
//!
//! String form: `element prop=value prop="a value with spaces" ! element ! ...`. `!` separates
//! elements (spaces around it are optional). Values may be quoted with `"` or `'`.
//!
//! TOML form, either a string:
//! ```toml
//! pipeline = "testsrc frames=100 ! frei0r-glow blur=0.5 ! y4msink location=out.y4m"
//! ```
//! or a list of elements, each with its properties as keys:
//! ```toml
//! [[element]]
//! type = "testsrc"
//! frames = 100
//! [[element]]
//! type = "frei0r-glow"
//! blur = 0.5
//! ```
//! and optional run settings at the top: `threads`, `in-flight`, `stats`.

use std::fmt;

use anyhow::{bail, Context, Result};

/// One element as written: its name and `prop=value` pairs in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementDescr {
    /// Registry name, e.g. `frei0r-glow`.
    pub name: String,
    /// Properties as text, in the order written.
    pub props: Vec<(String, String)>,
}

impl fmt::Display for ElementDescr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        for (k, v) in &self.props {
            if v.contains(char::is_whitespace) || v.is_empty() {
                write!(f, " {k}=\"{v}\"")?;
            } else {
                write!(f, " {k}={v}")?;
            }
        }
        Ok(())
    }
}

/// Run settings a project file may carry (command-line flags win).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Worker threads.
    pub threads: Option<usize>,
    /// Frames in flight.
    pub in_flight: Option<usize>,
    /// Where to write JSON stats.
    pub stats: Option<String>,
    /// Output rate (`fps = 30` or `fps = "30000/1001"`).
    pub fps: Option<String>,
    /// Run unpaced.
    pub unpaced: bool,
}

/// A whole pipeline as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PipelineDesc {
    /// Elements in order.
    pub elements: Vec<ElementDescr>,
    /// Settings from a project file.
    pub settings: Settings,
}

/// Splits a pipeline string into words, honouring quotes; `!` is always a word of its own.
fn tokenize(s: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                in_word = true;
                let quote = c;
                loop {
                    match chars.next() {
                        Some(q) if q == quote => break,
                        Some('\\') if quote == '"' => match chars.next() {
                            Some(e) => cur.push(e),
                            None => bail!("unterminated quote in pipeline"),
                        },
                        Some(ch) => cur.push(ch),
                        None => bail!("unterminated {quote} quote in pipeline"),
                    }
                }
            }
            '!' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
                words.push("!".to_string());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// Parses the gst-launch-like string form.
pub fn parse_pipeline(s: &str) -> Result<PipelineDesc> {
    let words = tokenize(s)?;
    let mut elements: Vec<ElementDescr> = Vec::new();
    let mut current: Option<ElementDescr> = None;
    for w in words {
        if w == "!" {
            match current.take() {
                Some(e) => elements.push(e),
                None => bail!(
                    "'!' with no element before it (after '{}')",
                    elements
                        .last()
                        .map_or("the start".into(), |e| e.name.clone())
                ),
            }
            continue;
        }
        match &mut current {
            None => {
                if w.contains('=') {
                    bail!("expected an element name, found property '{w}'");
                }
                current = Some(ElementDescr {
                    name: w,
                    props: Vec::new(),
                });
            }
            Some(e) => {
                let Some((k, v)) = w.split_once('=') else {
                    bail!(
                        "expected prop=value after '{}', found '{w}' (missing '!' between elements?)",
                        e.name
                    );
                };
                if k.is_empty() {
                    bail!("empty property name in '{w}' on {}", e.name);
                }
                e.props.push((k.to_string(), v.to_string()));
            }
        }
    }
    match current {
        Some(e) => elements.push(e),
        None if elements.is_empty() => bail!("empty pipeline"),
        None => bail!("pipeline ends with '!'"),
    }
    Ok(PipelineDesc {
        elements,
        settings: Settings::default(),
    })
}

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
        other => bail!(
            "property '{key}' has a value of type {} that is not supported",
            other.type_str()
        ),
    })
}

/// Parses a TOML project file's text.
pub fn parse_project(text: &str) -> Result<PipelineDesc> {
    let doc: toml::Table = toml::from_str(text).context("not a valid TOML project file")?;
    let mut settings = Settings::default();
    let mut desc: Option<PipelineDesc> = None;
    for (key, value) in &doc {
        match key.as_str() {
            "pipeline" => {
                let s = value
                    .as_str()
                    .context("'pipeline' must be a string like \"testsrc ! nullsink\"")?;
                desc = Some(parse_pipeline(s).context("in 'pipeline'")?);
            }
            "element" => {
                let list = value
                    .as_array()
                    .context("'element' must be an array of tables ([[element]])")?;
                let mut elements = Vec::new();
                for (i, item) in list.iter().enumerate() {
                    let table = item
                        .as_table()
                        .with_context(|| format!("element {} is not a table", i + 1))?;
                    let name = table
                        .get("type")
                        .and_then(|v| v.as_str())
                        .with_context(|| format!("element {} has no type = \"...\"", i + 1))?;
                    let mut props = Vec::new();
                    for (k, v) in table {
                        if k != "type" {
                            props.push((k.clone(), toml_scalar(k, v)?));
                        }
                    }
                    elements.push(ElementDescr {
                        name: name.to_string(),
                        props,
                    });
                }
                desc = Some(PipelineDesc {
                    elements,
                    settings: Settings::default(),
                });
            }
            "threads" => {
                settings.threads = Some(
                    value
                        .as_integer()
                        .filter(|n| *n > 0)
                        .context("'threads' must be a positive integer")? as usize,
                )
            }
            "in-flight" => {
                settings.in_flight = Some(
                    value
                        .as_integer()
                        .filter(|n| *n > 0)
                        .context("'in-flight' must be a positive integer")? as usize,
                )
            }
            "stats" => settings.stats = Some(value.as_str().context("'stats' must be a path")?.to_string()),
            "fps" => settings.fps = Some(toml_scalar("fps", value)?),
            "unpaced" => {
                settings.unpaced = value.as_bool().context("'unpaced' must be true or false")?
            }
            other => bail!(
                "unknown key '{other}' in project file; expected one of: pipeline, element, threads, in-flight, stats, fps, unpaced"
            ),
        }
    }
    let mut desc =
        desc.context("project file has neither 'pipeline = \"...\"' nor [[element]] tables")?;
    desc.settings = settings;
    Ok(desc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_parse_with_quotes_and_tight_bangs() {
        let d = parse_pipeline(r#"testsrc width=64 pattern="moving bars"!frei0r-glow blur=0.5 ! y4msink location='a b.y4m'"#).unwrap();
        assert_eq!(d.elements.len(), 3);
        assert_eq!(
            d.elements[0].props[1],
            ("pattern".into(), "moving bars".into())
        );
        assert_eq!(d.elements[1].name, "frei0r-glow");
        assert_eq!(d.elements[2].props[0].1, "a b.y4m");
    }

    #[test]
    fn malformed_strings_are_explained() {
        for (bad, why) in [
            ("", "empty pipeline"),
            ("testsrc !", "ends with '!'"),
            ("! nullsink", "no element before"),
            ("testsrc width", "expected prop=value"),
            ("testsrc nullsink", "missing '!'"),
            ("testsrc a=\"x", "unterminated"),
        ] {
            let e = parse_pipeline(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?} gave {e:?}");
        }
    }

    #[test]
    fn project_files_hold_the_same() {
        let a = parse_project("pipeline = \"testsrc frames=3 ! nullsink\"\nthreads = 2").unwrap();
        let b = parse_project(
            "threads = 2\n[[element]]\ntype = \"testsrc\"\nframes = 3\n[[element]]\ntype = \"nullsink\"\n",
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.settings.threads, Some(2));
        let e = parse_project("pipelin = \"x\"").unwrap_err().to_string();
        assert!(e.contains("unknown key 'pipelin'"), "{e}");
    }
}
