//! The gst-launch-like string form.
//!
//! ```text
//! element prop=value prop="a value with spaces" ! element ! ...
//! ```
//! `!` links the element before it to the one after it (spaces around it are optional). Values
//! may be quoted with `"` or `'`. A graph is written as gst-launch-1.0 writes one:
//! * `name=X` names a node (the parser takes it; the element never sees it);
//! * `X.` is node X: at the start of a branch, "from X's output" (`t. ! y4msink`); after a `!`,
//!   "into X's next free input" (`frei0r-glow ! mix.`); `X.sink_N` is X's input N, from 0;
//! * a branch ends where an element (or `X.`) follows a complete element without a `!`:
//!   `a ! mix.  b ! mix.  mix name=mix ! sink` is three branches. A link may name a node written
//!   later.
//!
//! A word is a link when it has an unquoted `.` and no `=`; an element whose name has a `.` is
//! written quoted (`"a.b"`).

use crate::desc::{shown, GraphDesc, Settings};
use crate::links::{check_name, End, Link, Raw, RawNode};
use crate::{Error, Result};

/// One word of a pipeline string.
#[derive(Debug)]
enum Token {
    /// An unquoted `!`.
    Bang,
    /// A word, quotes removed.
    Word {
        text: String,
        /// Byte offset in `text` of the last `.` that was not quoted.
        dot: Option<usize>,
    },
}

/// Splits a pipeline string into words, honouring quotes; an unquoted `!` is always a word of
/// its own, [`Token::Bang`] (a quoted `"!"` is the text `!`).
fn tokenize(s: &str) -> Result<Vec<Token>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut dot = None;
    let mut in_word = false;
    let end_word = |words: &mut Vec<Token>, cur: &mut String, dot: &mut Option<usize>| {
        words.push(Token::Word {
            text: std::mem::take(cur),
            dot: dot.take(),
        });
    };
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
                    end_word(&mut words, &mut cur, &mut dot);
                    in_word = false;
                }
                words.push(Token::Bang);
            }
            c if c.is_whitespace() => {
                if in_word {
                    end_word(&mut words, &mut cur, &mut dot);
                    in_word = false;
                }
            }
            _ => {
                in_word = true;
                if c == '.' {
                    dot = Some(cur.len());
                }
                cur.push(c);
            }
        }
    }
    if in_word {
        end_word(&mut words, &mut cur, &mut dot);
    }
    Ok(words)
}

/// What the parser is in the middle of.
#[derive(Debug, Clone)]
enum Item {
    /// An element (a node, by index), taking properties.
    Node(usize),
    /// A link `X.` or `X.sink_N` (as written, for messages).
    Link {
        name: String,
        input: Option<usize>,
        word: String,
    },
}

impl Item {
    /// What to call it in a message.
    fn label(&self, raw: &Raw) -> String {
        match self {
            Item::Node(i) => shown(&raw.nodes[*i].element),
            Item::Link { word, .. } => shown(word),
        }
    }
}

/// A link word `NAME.` or `NAME.sink_N` split at its last unquoted dot.
fn link_word(text: &str, dot: usize) -> Result<Item> {
    let (name, pad) = (&text[..dot], &text[dot + 1..]);
    let bad = |reason: &'static str| Error::BadLink {
        word: shown(text),
        reason,
    };
    let input = if pad.is_empty() {
        None
    } else {
        let digits = pad.strip_prefix("sink_").ok_or(bad(
            "expected NAME. or NAME.sink_N (an element name with '.' is written in quotes)",
        ))?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("the input number N of NAME.sink_N is 0, 1, 2..."));
        }
        // More digits than any index: the graph check says "too many inputs".
        Some(digits.parse::<usize>().unwrap_or(usize::MAX))
    };
    Ok(Item::Link {
        name: name.to_string(),
        input,
        word: text.to_string(),
    })
}

/// Parses the gst-launch-like string form into a graph (a chain `a ! b ! c` is a graph of three
/// nodes, each taking the one before it).
pub fn parse_pipeline(s: &str) -> Result<GraphDesc> {
    parse_raw(s)?.resolve(Settings::default())
}

/// The nodes and links of a pipeline string, before names are resolved.
fn parse_raw(s: &str) -> Result<Raw> {
    let mut raw = Raw::default();
    let mut current: Option<Item> = None;
    // After a `!`: the item whose output the next one takes.
    let mut linked_from: Option<Item> = None;
    // The last item completed, for messages.
    let mut last: Option<Item> = None;
    // Whether `current` is the far end of a `!`.
    let mut current_linked = false;
    for token in tokenize(s)? {
        let (text, dot) = match token {
            Token::Bang => {
                let Some(item) = current.take() else {
                    return Err(Error::BangWithoutElement {
                        after: last
                            .as_ref()
                            .map_or("the start".into(), |item| item.label(&raw)),
                    });
                };
                if let Item::Link {
                    input: Some(_),
                    word,
                    ..
                } = &item
                {
                    return Err(Error::BadLink {
                        word: shown(word),
                        reason: "an input cannot be linked from; a branch starts from NAME.",
                    });
                }
                last = Some(item.clone());
                linked_from = Some(item);
                continue;
            }
            Token::Word { text, dot } => (text, dot),
        };
        if let Some((k, v)) = text.split_once('=') {
            let i = match &current {
                Some(Item::Node(i)) => *i,
                Some(Item::Link { word, .. }) => {
                    return Err(Error::PropertyOnLink {
                        link: shown(word),
                        word: shown(&text),
                    })
                }
                None => return Err(Error::PropertyWithoutElement { word: shown(&text) }),
            };
            let node = &mut raw.nodes[i];
            if k.is_empty() {
                return Err(Error::EmptyPropertyName {
                    element: shown(&node.element),
                    word: shown(&text),
                });
            }
            if k == "name" {
                check_name(v, &node.element)?;
                if let Some(first) = &node.name {
                    return Err(Error::NamedTwice {
                        element: shown(&node.element),
                        first: shown(first),
                        second: shown(v),
                    });
                }
                node.name = Some(v.to_string());
            } else {
                node.props.push((k.to_string(), v.to_string()));
            }
            continue;
        }
        // An element or a link: a new item (and, without a `!` before it, a new branch).
        if let Some(done) = current.take() {
            alone_link(&done, current_linked)?;
            last = Some(done);
        }
        current_linked = linked_from.is_some();
        let item = match dot {
            Some(dot) => link_word(&text, dot)?,
            None => {
                raw.nodes.push(RawNode {
                    element: text,
                    name: None,
                    props: Vec::new(),
                });
                Item::Node(raw.nodes.len() - 1)
            }
        };
        match linked_from.take() {
            Some(from) => raw.links.push(Link {
                from: end(from),
                to: end(item.clone()),
                input: match &item {
                    Item::Link { input, .. } => *input,
                    Item::Node(_) => None,
                },
            }),
            None => {
                if let Item::Link {
                    input: Some(_),
                    word,
                    ..
                } = &item
                {
                    return Err(Error::BadLink {
                        word: shown(word),
                        reason: "a branch starts from NAME. (an output), not from an input",
                    });
                }
            }
        }
        current = Some(item);
    }
    if linked_from.is_some() {
        return Err(Error::TrailingBang {
            last: last.map_or_else(String::new, |item| item.label(&raw)),
        });
    }
    match &current {
        Some(item) => alone_link(item, current_linked)?,
        None => return Err(Error::EmptyPipeline),
    }
    if raw.nodes.is_empty() {
        // Only links, e.g. `a. ! b.`: there is nothing they could name.
        if let Some(Link {
            from: End::Named { name, place },
            ..
        }) = raw.links.first()
        {
            return Err(Error::UnknownNode {
                name: shown(name),
                place: place.clone(),
                hint: "; the pipeline has no elements".into(),
            });
        }
    }
    Ok(raw)
}

/// A branch of a link alone (`a ! b  c.  d ! e`) links nothing: an error rather than silence
/// (it is often a forgotten `!`).
fn alone_link(item: &Item, linked: bool) -> Result<()> {
    match item {
        Item::Link { word, .. } if !linked => Err(Error::BadLink {
            word: shown(word),
            reason: "a link alone links nothing; write NAME. ! element to take NAME's output",
        }),
        _ => Ok(()),
    }
}

/// A link end for an item.
fn end(item: Item) -> End {
    match item {
        Item::Node(i) => End::Node(i),
        Item::Link { name, word, .. } => End::Named {
            name,
            place: format!("the link '{}'", shown(&word)),
        },
    }
}
