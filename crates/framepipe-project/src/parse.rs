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
//! and optional run settings at the top: `threads`, `in-flight`, `stats`, `fps`, `unpaced`.
//! A file with both `pipeline` and `[[element]]` is an error (one of them would be ignored).
//!
//! A property in an `[[element]]` table is a number, a bool, a string (a compact `~oscillator`
//! too), an array (joined with commas: `color = [1, 0.5, 0]`), or an oscillator table
//! `{ osc = "sine", freq = 0.5, min = 0, max = 1, phase = 0.25 }`, which becomes the compact
//! text form after the oscillator's own checks (docs/CONTROL.md).

use std::fmt;

use framepipe_control::{OscSpec, Oscillator};

use crate::{Error, Result};

/// At most this many characters of offending text are quoted in a message.
const SHOWN_CHARS: usize = 60;

/// `text` for an error message: one line, at most [`SHOWN_CHARS`] characters.
fn shown(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(SHOWN_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(SHOWN_CHARS).is_some() {
        out.push_str("...");
    }
    out
}

/// One element as written: its name and `prop=value` pairs in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementDescr {
    /// Registry name, e.g. `frei0r-glow`.
    pub name: String,
    /// Properties as text, in the order written.
    pub props: Vec<(String, String)>,
}

impl fmt::Display for ElementDescr {
    /// The element as pipeline-string text that [`parse_pipeline`] reads back as the same
    /// element (names and values quoted where needed).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_word(f, &self.name)?;
        for (k, v) in &self.props {
            f.write_str(" ")?;
            write_word(f, k)?;
            f.write_str("=")?;
            write_word(f, v)?;
        }
        Ok(())
    }
}

/// Writes `text` as (part of) one word that the tokenizer reads back as `text`: bare when it is
/// not empty and has no blank, quote or `!`; else in double quotes, with `"` and `\` escaped.
fn write_word(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    let bare = !text.is_empty()
        && !text.contains(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '!'));
    if bare {
        return f.write_str(text);
    }
    f.write_str("\"")?;
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            f.write_str("\\")?;
        }
        write!(f, "{c}")?;
    }
    f.write_str("\"")
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

/// Splits a pipeline string into words, honouring quotes; an unquoted `!` is always a word of
/// its own, `None` (a quoted `"!"` is the text `!`).
fn tokenize(s: &str) -> Result<Vec<Option<String>>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' | '\'' => {
                in_word = true;
                let quote = c;
                let unterminated = || Error::UnterminatedQuote {
                    quote,
                    at: shown(&s[at..]),
                };
                loop {
                    match chars.next() {
                        Some((_, q)) if q == quote => break,
                        Some((_, '\\')) if quote == '"' => match chars.next() {
                            Some((_, e)) => cur.push(e),
                            None => return Err(unterminated()),
                        },
                        Some((_, ch)) => cur.push(ch),
                        None => return Err(unterminated()),
                    }
                }
            }
            '!' => {
                if in_word {
                    words.push(Some(std::mem::take(&mut cur)));
                    in_word = false;
                }
                words.push(None);
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(Some(std::mem::take(&mut cur)));
                    in_word = false;
                }
            }
            _ => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(Some(cur));
    }
    Ok(words)
}

/// Parses the gst-launch-like string form.
pub fn parse_pipeline(s: &str) -> Result<PipelineDesc> {
    let words = tokenize(s)?;
    let mut elements: Vec<ElementDescr> = Vec::new();
    let mut current: Option<ElementDescr> = None;
    for w in words {
        let Some(w) = w else {
            match current.take() {
                Some(e) => elements.push(e),
                None => {
                    return Err(Error::BangWithoutElement {
                        after: elements
                            .last()
                            .map_or("the start".into(), |e| shown(&e.name)),
                    })
                }
            }
            continue;
        };
        match &mut current {
            None => {
                if w.contains('=') {
                    return Err(Error::PropertyWithoutElement { word: shown(&w) });
                }
                current = Some(ElementDescr {
                    name: w,
                    props: Vec::new(),
                });
            }
            Some(e) => {
                let Some((k, v)) = w.split_once('=') else {
                    return Err(Error::ExpectedProperty {
                        element: shown(&e.name),
                        word: shown(&w),
                    });
                };
                if k.is_empty() {
                    return Err(Error::EmptyPropertyName {
                        element: shown(&e.name),
                        word: shown(&w),
                    });
                }
                e.props.push((k.to_string(), v.to_string()));
            }
        }
    }
    match current {
        Some(e) => elements.push(e),
        None => {
            return Err(match elements.last() {
                None => Error::EmptyPipeline,
                Some(last) => Error::TrailingBang {
                    last: shown(&last.name),
                },
            })
        }
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
        toml::Value::Table(t) if t.contains_key("osc") => osc_table(key, v)?,
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

/// Parses a TOML project file's text.
pub fn parse_project(text: &str) -> Result<PipelineDesc> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    if doc.contains_key("pipeline") && doc.contains_key("element") {
        return Err(Error::TwoPipelines);
    }
    let mut settings = Settings::default();
    let mut desc: Option<PipelineDesc> = None;
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
                let mut elements = Vec::new();
                for (i, item) in list.iter().enumerate() {
                    let table = item
                        .as_table()
                        .ok_or(Error::ElementNotTable { index: i + 1 })?;
                    let name = table
                        .get("type")
                        .and_then(|v| v.as_str())
                        .ok_or(Error::ElementWithoutType { index: i + 1 })?;
                    // What a pipeline string cannot say, a project file may not say either.
                    if name.contains('=') {
                        return Err(Error::PropertyWithoutElement { word: shown(name) });
                    }
                    let mut props = Vec::new();
                    for (k, v) in table {
                        if k == "type" {
                            continue;
                        }
                        let value = toml_scalar(k, v)?;
                        if k.is_empty() {
                            return Err(Error::EmptyPropertyName {
                                element: shown(name),
                                word: shown(&format!("={value}")),
                            });
                        }
                        if k.contains('=') {
                            return Err(Error::PropertyNameWithEquals {
                                element: shown(name),
                                name: shown(k),
                            });
                        }
                        props.push((k.clone(), value));
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
            "unpaced" => {
                settings.unpaced = value
                    .as_bool()
                    .ok_or_else(|| bad_key("unpaced", "true or false", value))?
            }
            other => return Err(Error::UnknownKey { key: shown(other) }),
        }
    }
    let mut desc = desc.ok_or(Error::NoPipeline)?;
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

    #[test]
    fn project_file_errors_are_one_line_naming_the_value() {
        let e = parse_project("threads = -3\npipeline = \"testsrc ! nullsink\"")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "'threads' must be a positive integer, got -3");
        let e = parse_project("pipeline = \"testsrc !\"")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "in 'pipeline': pipeline ends with '!' (after 'testsrc')");
        let e = parse_project("threads = 2\npipeline = [\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("not a valid TOML project file: line 2, column "),
            "{e}"
        );
        assert!(!e.contains('\n'), "one line: {e:?}");
    }

    #[test]
    fn offending_text_is_shortened_to_one_line() {
        let long = format!("testsrc \"{}", "x\n".repeat(500));
        let e = parse_pipeline(&long).unwrap_err().to_string();
        assert!(
            e.starts_with("unterminated \" quote in pipeline at: \"x x"),
            "{e}"
        );
        assert!(e.len() < 120 && !e.contains('\n'), "{e:?}");
    }

    /// Issue #7: the oscillator table documented in docs/CONTROL.md and the README was
    /// rejected ("a value of type table that is not supported").
    #[test]
    fn oscillator_tables_work_as_documented() {
        let d = parse_project(
            "[[element]]\ntype = \"testsrc\"\n[[element]]\ntype = \"stamp\"\n\
             value = { osc = \"sine\", freq = 0.5, min = 0, max = 1, phase = 0.25 }\n\
             [[element]]\ntype = \"frei0r-glow\"\nblur = \"~triangle:0.1hz:0.2..0.8\"\n\
             [[element]]\ntype = \"nullsink\"\n",
        )
        .unwrap();
        assert_eq!(
            d.elements[1].props,
            [(
                "value".to_string(),
                "~sine:0.5hz:0..1:phase=0.25".to_string()
            )]
        );
        assert_eq!(d.elements[2].props[0].1, "~triangle:0.1hz:0.2..0.8");
        for (table, needle) in [
            ("{ osc = \"sine\", frq = 2 }", "frq"),
            ("{ osc = \"wobble\" }", "wobble"),
            ("{ osc = \"sine\", freq = 1e308 }", "0..=1000 Hz"),
            ("{ osc = \"sine\", freq = nan }", "freq=NaN"),
            ("{ osc = \"sine\", min = -inf }", "min=-inf"),
        ] {
            let e = parse_project(&format!(
                "[[element]]\ntype = \"testsrc\"\n[[element]]\ntype = \"stamp\"\nvalue = {table}\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains("'value'") && e.contains(needle), "{table}: {e}");
        }
        // A table that is not an oscillator is still refused by type.
        let e = parse_project("[[element]]\ntype = \"testsrc\"\nsize = { w = 1 }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("type table"), "{e}");
    }

    /// Issue #7: a project file with both `pipeline =` and `[[element]]` silently ignored one.
    #[test]
    fn pipeline_and_element_tables_together_are_an_error() {
        let e =
            parse_project("pipeline = \"testsrc ! nullsink\"\n[[element]]\ntype = \"testsrc\"\n")
                .unwrap_err();
        assert_eq!(e, Error::TwoPipelines);
        assert!(e.to_string().contains("both"), "{e}");
    }
}
