//! Live edits of the running graph (#9): the commands `add`, `remove`, `replace`, `link` and
//! `load`. The engine does not build elements itself: it hands the edit to its
//! [`Editor`](../framepipe_runtime/trait.Editor.html) (the CLI's, which knows the registry and
//! the graph description), which builds the next version of the graph off the frame path.
//!
//! [`GraphEdit::parse`] reads the commands' text (`Command::parse` hands them over) and
//! `Display` writes it back.

use std::fmt;

use crate::{Error, Result};

/// Where `add` puts the new node relative to its anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Between the anchor and the node(s) it feeds.
    After,
    /// Between the anchor's first input and the anchor.
    Before,
}

/// One live edit of the graph.
#[derive(Debug, Clone, PartialEq)]
pub enum GraphEdit {
    /// `add ELEMENT [key=value ...] after|before NODE`: insert a one-input node (`name=` among
    /// the properties names it, as in a pipeline).
    Add {
        /// The element (`frei0r-glow`).
        element: String,
        /// Its properties as written, node properties (`name=`, `mode=`) included.
        props: Vec<(String, String)>,
        /// After or before the anchor.
        place: Place,
        /// The node it goes after or before.
        anchor: String,
    },
    /// `remove NODE`: take a one-input node out, relinking its consumers to its input.
    Remove {
        /// The node.
        node: String,
    },
    /// `replace NODE ELEMENT [key=value ...]`: a new node of that name in its place (same
    /// inputs and consumers); its state starts afresh.
    Replace {
        /// The node.
        node: String,
        /// The new element.
        element: String,
        /// Its properties as written.
        props: Vec<(String, String)>,
    },
    /// `link NODE.sink_K FROM` (or `link NODE FROM` for input 0): input K of NODE now comes
    /// from FROM.
    Link {
        /// The node whose input changes.
        node: String,
        /// Which input (0-based).
        input: usize,
        /// The node it now comes from.
        from: String,
    },
    /// `load FILE [fade=DURATION [transition=NAME [PARAM=VALUE ...]]]`: switch to another
    /// project (its sinks must be the running ones), cutting or crossfading over the duration,
    /// through a gl-transition if one is named.
    Load {
        /// The project file.
        path: String,
        /// The crossfade, ns (`None`: a cut).
        fade_ns: Option<u64>,
        /// The gl-transition the crossfade goes through (`None`: a linear crossfade; always
        /// `None` for a cut).
        transition: Option<FadeTransition>,
    },
}

/// The gl-transition of a crossfade, as `load` names it: `transition=NAME` and the words
/// `PARAM=VALUE` after the file that are neither `fade=` nor `transition=` (its parameters,
/// as properties of `mix mode=transition` take them: `direction=0,1`).
#[derive(Debug, Clone, PartialEq)]
pub struct FadeTransition {
    /// The transition's name (`directional`, `wipeLeft`; any case).
    pub name: String,
    /// Its parameters, as written.
    pub params: Vec<(String, String)>,
}

/// The longest crossfade `load` accepts: one hour.
pub const MAX_FADE_NS: u64 = 3_600 * 1_000_000_000;

/// The edit commands' words, for the protocol's list of commands.
pub const EDIT_WORDS: [&str; 5] = ["add", "remove", "replace", "link", "load"];

impl GraphEdit {
    /// Parses an edit command: `word` is the command word (`add`, `remove`, `replace`, `link`,
    /// `load`, any case) and `rest` the text after it. Words are separated by blanks and may be
    /// quoted with `"` or `'` as in a pipeline string (`location="my clip.mp4"`). Errors are one
    /// line naming the offending token. `Ok(None)`: `word` is not an edit command.
    pub fn parse(word: &str, rest: &str) -> Result<Option<GraphEdit>> {
        let Some(command) = EDIT_WORDS
            .into_iter()
            .find(|w| w.eq_ignore_ascii_case(word))
        else {
            return Ok(None);
        };
        let words = split_words(command, rest)?;
        let mut words = words.into_iter();
        let edit = match command {
            "add" => {
                let element = element_word(command, words.next(), ADD_USAGE)?;
                let mut props = Vec::new();
                let place = loop {
                    let Some(w) = words.next() else {
                        return Err(Error::MissingArgument {
                            command,
                            what:
                                "after NODE or before NODE, e.g. add frei0r-glow blur=0.3 after fx1",
                        });
                    };
                    if w.eq_ignore_ascii_case("after") {
                        break Place::After;
                    }
                    if w.eq_ignore_ascii_case("before") {
                        break Place::Before;
                    }
                    props.push(prop_word(command, w)?);
                };
                let anchor = words.next().ok_or(Error::MissingArgument {
                    command,
                    what: "the node to add after or before, e.g. add invert before fx2",
                })?;
                no_more(command, words)?;
                GraphEdit::Add {
                    element,
                    props,
                    place,
                    anchor: node_word(command, anchor)?,
                }
            }
            "remove" => {
                let node = words.next().ok_or(Error::MissingArgument {
                    command,
                    what: "a node, e.g. remove fx2",
                })?;
                no_more(command, words)?;
                GraphEdit::Remove {
                    node: node_word(command, node)?,
                }
            }
            "replace" => {
                let node = words.next().ok_or(Error::MissingArgument {
                    command,
                    what: "a node and an element, e.g. replace clip ffmpegsrc location=b.mp4",
                })?;
                let node = node_word(command, node)?;
                let element = element_word(command, words.next(), REPLACE_USAGE)?;
                let props = words
                    .map(|w| prop_word(command, w))
                    .collect::<Result<Vec<_>>>()?;
                GraphEdit::Replace {
                    node,
                    element,
                    props,
                }
            }
            "link" => {
                let to = words.next().ok_or(Error::MissingArgument {
                    command,
                    what: "NODE[.sink_K] and the node it takes from, e.g. link mix.sink_1 clipB",
                })?;
                let (node, input) = input_word(to)?;
                let from = words.next().ok_or(Error::MissingArgument {
                    command,
                    what: "the node the input takes from, e.g. link mix.sink_1 clipB",
                })?;
                no_more(command, words)?;
                GraphEdit::Link {
                    node,
                    input,
                    from: node_word(command, from)?,
                }
            }
            _ => {
                let path = words.next().ok_or(Error::MissingArgument {
                    command,
                    what: "a project file, e.g. load scene2.toml fade=2s",
                })?;
                if path.is_empty() {
                    return Err(bad(command, &path, "empty file name"));
                }
                let mut fade_ns = None;
                let mut name: Option<String> = None;
                let mut params: Vec<(String, String)> = Vec::new();
                let mut first_param: Option<String> = None;
                for w in words.by_ref() {
                    match w.split_once('=') {
                        Some((k, v)) if k.eq_ignore_ascii_case("fade") => {
                            if fade_ns.is_some() {
                                return Err(bad(command, &w, "fade= is given twice"));
                            }
                            fade_ns = Some(
                                parse_duration_ns(v).map_err(|reason| bad(command, &w, reason))?,
                            );
                        }
                        Some((k, v)) if k.eq_ignore_ascii_case("transition") => {
                            if name.is_some() {
                                return Err(bad(command, &w, "transition= is given twice"));
                            }
                            if v.is_empty() {
                                return Err(bad(
                                    command,
                                    &w,
                                    "expected a gl-transition's name, e.g. transition=wipeLeft",
                                ));
                            }
                            name = Some(v.to_string());
                        }
                        Some((k, v)) if !k.is_empty() => {
                            if params.iter().any(|(p, _)| p == k) {
                                return Err(bad(command, &w, "a parameter is given twice"));
                            }
                            first_param.get_or_insert_with(|| w.clone());
                            params.push((k.to_string(), v.to_string()));
                        }
                        _ => {
                            return Err(bad(
                                command,
                                &w,
                                "load takes a file, fade=DURATION (e.g. fade=2s, fade=500ms), \
                                 and transition=NAME with the transition's PARAM=VALUE",
                            ))
                        }
                    }
                }
                if let (None, Some(w)) = (&name, first_param) {
                    return Err(bad(
                        command,
                        &w,
                        "a transition's parameter needs transition=NAME (load takes a file, \
                         fade=DURATION and transition=NAME)",
                    ));
                }
                if let (Some(n), None) = (&name, fade_ns) {
                    return Err(bad(
                        command,
                        &format!("transition={n}"),
                        "a transition needs fade=DURATION (e.g. fade=2s): a cut has none",
                    ));
                }
                // A fade of no time is a cut.
                let fade_ns = fade_ns.filter(|&ns| ns > 0);
                GraphEdit::Load {
                    path,
                    fade_ns,
                    transition: name
                        .filter(|_| fade_ns.is_some())
                        .map(|name| FadeTransition { name, params }),
                }
            }
        };
        Ok(Some(edit))
    }

    /// The command word: `add`, `remove`, `replace`, `link` or `load`.
    pub fn word(&self) -> &'static str {
        match self {
            GraphEdit::Add { .. } => "add",
            GraphEdit::Remove { .. } => "remove",
            GraphEdit::Replace { .. } => "replace",
            GraphEdit::Link { .. } => "link",
            GraphEdit::Load { .. } => "load",
        }
    }
}

const ADD_USAGE: &str = "an element, e.g. add frei0r-glow blur=0.3 after fx1";
const REPLACE_USAGE: &str = "an element after the node, e.g. replace clip ffmpegsrc location=b.mp4";

fn bad(command: &str, token: &str, reason: &str) -> Error {
    Error::BadArgument {
        command: command.into(),
        token: token.into(),
        reason: reason.into(),
    }
}

fn no_more(command: &'static str, mut rest: impl Iterator<Item = String>) -> Result<()> {
    match rest.next() {
        Some(token) => Err(Error::ExtraArgument { command, token }),
        None => Ok(()),
    }
}

/// An element name: not empty, no `=` (it would read back as a property).
fn element_word(command: &'static str, w: Option<String>, what: &'static str) -> Result<String> {
    let w = w.ok_or(Error::MissingArgument { command, what })?;
    if w.is_empty() || w.contains('=') {
        return Err(bad(
            command,
            &w,
            "expected an element name, e.g. frei0r-glow",
        ));
    }
    Ok(w)
}

/// A node name: not empty.
fn node_word(command: &str, w: String) -> Result<String> {
    if w.is_empty() {
        return Err(bad(command, &w, "empty node name"));
    }
    Ok(w)
}

/// `key=value`, split at the first `=`.
fn prop_word(command: &str, w: String) -> Result<(String, String)> {
    match w.split_once('=') {
        Some(("", _)) => Err(bad(command, &w, "empty property name")),
        Some((k, v)) => Ok((k.to_string(), v.to_string())),
        None => Err(bad(
            command,
            &w,
            "expected key=value (or after NODE / before NODE for add)",
        )),
    }
}

/// `NODE.sink_K` (input K) or `NODE` (input 0).
fn input_word(w: String) -> Result<(String, usize)> {
    if let Some((node, pad)) = w.rsplit_once('.') {
        if let Some(digits) = pad.strip_prefix("sink_") {
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                if node.is_empty() {
                    return Err(bad("link", &w, "empty node name before '.'"));
                }
                let input = digits
                    .parse::<usize>()
                    .map_err(|_| bad("link", &w, "input number too large"))?;
                return Ok((node.to_string(), input));
            }
        }
    }
    Ok((node_word("link", w)?, 0))
}

/// Whether `w` would read back as `NODE.sink_K` rather than as a node name.
fn looks_like_input(w: &str) -> bool {
    w.rsplit_once('.').is_some_and(|(_, pad)| {
        pad.strip_prefix("sink_")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Splits `text` into words at blanks, honouring `"..."` (with `\` escapes) and `'...'` quotes
/// as a pipeline string does; quotes join with the text around them (`location="a b".mp4`).
fn split_words(command: &str, text: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some('\\') if c == '"' => match chars.next() {
                            Some(e) => cur.push(e),
                            None => return Err(unterminated(command, c)),
                        },
                        Some(ch) => cur.push(ch),
                        None => return Err(unterminated(command, c)),
                    }
                }
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

fn unterminated(command: &str, quote: char) -> Error {
    bad(command, &quote.to_string(), "quote never closed")
}

/// A duration: a decimal number of `s` or `ms` (`2s`, `1.5s`, `500ms`), at most
/// [`MAX_FADE_NS`], to whole nanoseconds (no float on the way).
pub fn parse_duration_ns(text: &str) -> std::result::Result<u64, &'static str> {
    const WHAT: &str = "expected a duration in s or ms, e.g. 2s, 1.5s, 500ms";
    let (number, unit_ns) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1_000_000u64)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1_000_000_000u64)
    } else {
        return Err(WHAT);
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) {
        return Err(WHAT);
    }
    let unit_digits = unit_ns.ilog10() as usize;
    if frac.len() > unit_digits {
        return Err("finer than a nanosecond");
    }
    let too_long = "too long: a fade is at most 3600s";
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_long)?
    };
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        let scale = 10u64.pow((unit_digits - frac.len()) as u32);
        frac.parse::<u64>().map_err(|_| WHAT)? * scale
    };
    let ns = whole
        .checked_mul(unit_ns)
        .and_then(|w| w.checked_add(frac_ns))
        .ok_or(too_long)?;
    if ns > MAX_FADE_NS {
        return Err(too_long);
    }
    Ok(ns)
}

/// A duration as [`parse_duration_ns`] reads it back: `2s`, `500ms`, `1.25ms`.
pub fn format_duration_ns(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        return format!("{}s", ns / 1_000_000_000);
    }
    let (ms, rest) = (ns / 1_000_000, ns % 1_000_000);
    if rest == 0 {
        return format!("{ms}ms");
    }
    let frac = format!("{rest:06}");
    format!("{ms}.{}ms", frac.trim_end_matches('0'))
}

/// Writes `text` as one word that [`split_words`] reads back as `text`: bare when it has no
/// blank or quote and is not empty, else in double quotes with `"` and `\` escaped.
fn write_word(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    let bare =
        !text.is_empty() && !text.contains(|c: char| c.is_whitespace() || matches!(c, '"' | '\''));
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

fn write_props(f: &mut fmt::Formatter<'_>, props: &[(String, String)]) -> fmt::Result {
    for (k, v) in props {
        f.write_str(" ")?;
        // The key has no `=` (the first `=` splits); the whole word is quoted as one.
        write_word(f, &format!("{k}={v}"))?;
    }
    Ok(())
}

impl fmt::Display for GraphEdit {
    /// The edit as a protocol line, which [`GraphEdit::parse`] (and `Command::parse`) read back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())?;
        f.write_str(" ")?;
        match self {
            GraphEdit::Add {
                element,
                props,
                place,
                anchor,
            } => {
                write_word(f, element)?;
                write_props(f, props)?;
                f.write_str(match place {
                    Place::After => " after ",
                    Place::Before => " before ",
                })?;
                write_word(f, anchor)
            }
            GraphEdit::Remove { node } => write_word(f, node),
            GraphEdit::Replace {
                node,
                element,
                props,
            } => {
                write_word(f, node)?;
                f.write_str(" ")?;
                write_word(f, element)?;
                write_props(f, props)
            }
            GraphEdit::Link { node, input, from } => {
                if *input > 0 || looks_like_input(node) {
                    write_word(f, &format!("{node}.sink_{input}"))?;
                } else {
                    write_word(f, node)?;
                }
                f.write_str(" ")?;
                write_word(f, from)
            }
            GraphEdit::Load {
                path,
                fade_ns,
                transition,
            } => {
                write_word(f, path)?;
                if let Some(ns) = fade_ns {
                    write!(f, " fade={}", format_duration_ns(*ns))?;
                }
                if let Some(t) = transition {
                    f.write_str(" ")?;
                    write_word(f, &format!("transition={}", t.name))?;
                    write_props(f, &t.params)?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Command;

    fn edit(line: &str) -> GraphEdit {
        match Command::parse(line) {
            Ok(Command::Edit(e)) => e,
            other => panic!("{line:?} -> {other:?}"),
        }
    }

    fn props(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_issue_examples_parse() {
        assert_eq!(
            edit("add frei0r-glow blur=0.3 after fx1"),
            GraphEdit::Add {
                element: "frei0r-glow".into(),
                props: props(&[("blur", "0.3")]),
                place: Place::After,
                anchor: "fx1".into()
            }
        );
        assert_eq!(
            edit("ADD invert name=inv mode=serial Before fx2"),
            GraphEdit::Add {
                element: "invert".into(),
                props: props(&[("name", "inv"), ("mode", "serial")]),
                place: Place::Before,
                anchor: "fx2".into()
            }
        );
        assert_eq!(edit("remove fx2"), GraphEdit::Remove { node: "fx2".into() });
        assert_eq!(
            edit("replace clip ffmpegsrc location=\"my clip.mp4\" on-end=loop"),
            GraphEdit::Replace {
                node: "clip".into(),
                element: "ffmpegsrc".into(),
                props: props(&[("location", "my clip.mp4"), ("on-end", "loop")])
            }
        );
        assert_eq!(
            edit("link mix.sink_1 clipB"),
            GraphEdit::Link {
                node: "mix".into(),
                input: 1,
                from: "clipB".into()
            }
        );
        assert_eq!(
            edit("link glow clipB"),
            GraphEdit::Link {
                node: "glow".into(),
                input: 0,
                from: "clipB".into()
            }
        );
        // A name with a dot that is not an input is a name.
        assert_eq!(
            edit("link a.b c"),
            GraphEdit::Link {
                node: "a.b".into(),
                input: 0,
                from: "c".into()
            }
        );
        assert_eq!(
            edit("load scene2.toml fade=2s"),
            GraphEdit::Load {
                path: "scene2.toml".into(),
                fade_ns: Some(2_000_000_000),
                transition: None
            }
        );
        assert_eq!(
            edit("load 'scene 3.toml'"),
            GraphEdit::Load {
                path: "scene 3.toml".into(),
                fade_ns: None,
                transition: None
            }
        );
        // A fade of no time is a cut.
        assert_eq!(
            edit("load a.toml fade=0ms"),
            GraphEdit::Load {
                path: "a.toml".into(),
                fade_ns: None,
                transition: None
            }
        );
        // A crossfade through a gl-transition, its parameters after it.
        assert_eq!(
            edit("load b.toml fade=1s transition=directional direction=0,1"),
            GraphEdit::Load {
                path: "b.toml".into(),
                fade_ns: Some(1_000_000_000),
                transition: Some(FadeTransition {
                    name: "directional".into(),
                    params: vec![("direction".into(), "0,1".into())],
                })
            }
        );
        assert_eq!(
            edit("load b.toml fade=0s transition=fade"),
            GraphEdit::Load {
                path: "b.toml".into(),
                fade_ns: None,
                transition: None
            }
        );
    }

    #[test]
    fn load_refuses_a_transition_without_a_fade_and_parameters_without_a_transition() {
        let err = |text: &str| {
            let (word, rest) = text.split_once(' ').unwrap();
            GraphEdit::parse(word, rest).unwrap_err().to_string()
        };
        let e = err("load b.toml transition=wipeLeft");
        assert!(e.contains("a transition needs fade=DURATION"), "{e}");
        let e = err("load b.toml fade=1s direction=0,1");
        assert!(e.contains("needs transition=NAME"), "{e}");
        let e = err("load b.toml fade=1s transition=a transition=b");
        assert!(e.contains("transition= is given twice"), "{e}");
    }

    #[test]
    fn durations_are_whole_nanoseconds() {
        for (text, ns) in [
            ("2s", 2_000_000_000),
            ("1.5s", 1_500_000_000),
            (".25s", 250_000_000),
            ("500ms", 500_000_000),
            ("0.000001ms", 1),
            ("3600s", MAX_FADE_NS),
            ("0s", 0),
        ] {
            assert_eq!(parse_duration_ns(text), Ok(ns), "{text}");
            assert_eq!(parse_duration_ns(&format_duration_ns(ns)), Ok(ns), "{text}");
        }
        assert_eq!(format_duration_ns(1_500_000_000), "1500ms");
        assert_eq!(format_duration_ns(1_250_000), "1.25ms");
        assert_eq!(format_duration_ns(7), "0.000007ms");
        for bad in [
            "2",
            "s",
            "ms",
            ".s",
            "2m",
            "1.2.3s",
            "-1s",
            "1e3s",
            "3601s",
            "0.0000001ms",
            "2 s",
            "99999999999999999999999s",
        ] {
            assert!(parse_duration_ns(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_edits_name_the_token_in_one_line() {
        for (line, token) in [
            ("add", "needs an element"),
            ("add blur=0.3 after x", "'blur=0.3'"),
            ("add frei0r-glow blur=0.3", "after NODE or before NODE"),
            ("add frei0r-glow blurry after x", "'blurry'"),
            ("add frei0r-glow =3 after x", "'=3'"),
            ("add frei0r-glow after", "the node to add after"),
            ("add frei0r-glow after x y", "'y'"),
            ("remove", "needs a node"),
            ("remove a b", "'b'"),
            ("replace", "needs a node"),
            ("replace clip", "needs an element"),
            ("replace clip ffmpegsrc loop", "'loop'"),
            ("link", "needs NODE"),
            ("link mix.sink_1", "the node the input takes from"),
            (
                "link mix.sink_99999999999999999999999 a",
                "sink_99999999999999999999999",
            ),
            ("link .sink_1 a", "'.sink_1'"),
            ("link a b c", "'c'"),
            ("load", "needs a project file"),
            ("load a.toml fade=2", "'fade=2'"),
            ("load a.toml fade=1s fade=2s", "given twice"),
            ("load a.toml now", "'now'"),
            ("load \"a.toml", "quote never closed"),
            ("remove ''", "empty node name"),
        ] {
            let e = Command::parse(line).unwrap_err().to_string();
            assert!(e.contains(token), "{line:?}: {e}");
            assert!(!e.contains('\n'), "{line:?}: {e}");
        }
    }

    #[test]
    fn edits_print_back_as_they_parse() {
        for line in [
            "add frei0r-glow blur=0.3 after fx1",
            "add invert before fx2",
            "add stamp name=s \"text=a b\" after \"my node\"",
            "add after after after",
            "remove fx2",
            "replace clip ffmpegsrc location=b.mp4 on-end=loop",
            "replace \"x=y\" testsrc",
            "link mix.sink_1 clipB",
            "link mix clipB",
            "link a.sink_1.sink_0 b",
            "link \"a b\" c",
            "load scene2.toml fade=2s",
            "load scene2.toml fade=1.25ms",
            "load \"with \\\"quote\\\".toml\"",
        ] {
            let e = edit(line);
            let printed = e.to_string();
            assert_eq!(edit(&printed), e, "{line} -> {printed}");
        }
        // The canonical forms print as written.
        for line in [
            "add frei0r-glow blur=0.3 after fx1",
            "link mix.sink_1 clipB",
            "link mix clipB",
            "load scene2.toml fade=500ms",
            "load scene2.toml fade=2s transition=directional direction=0,1",
        ] {
            assert_eq!(edit(line).to_string(), line);
        }
    }

    #[test]
    fn a_batch_may_not_hold_an_edit() {
        let e = Command::parse("batch set a.x 1; remove fx2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'remove fx2'") && e.contains("edits"), "{e}");
    }
}
