//! From nodes and links as written (names, `X.sink_N`, forward references) to a [`GraphDesc`]
//! whose inputs are node indices, with the structural checks that need no element: unique
//! names, links to known names, each input linked once and without gaps, at most
//! [`MAX_INPUTS`] inputs, no cycle of input links.

use std::collections::HashMap;

use crate::desc::{hint, shown, DefaultNames, GraphDesc, NodeDescr, Settings};
use crate::{Error, Result, MAX_INPUTS};

/// One end of a link as written.
#[derive(Debug, Clone)]
pub(crate) enum End {
    /// A node written here (its index).
    Node(usize),
    /// A node named `name` (it may be written later); `place` says where the name was written,
    /// for messages ("the link 'mix.sink_1'", "the inputs of [[node]] 3 (mix)").
    Named { name: String, place: String },
}

/// A link from one node's output into another node's input.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub from: End,
    pub to: End,
    /// The input given (`X.sink_N`, or the position in `inputs = [...]`), or the next free one.
    pub input: Option<usize>,
}

/// A node as written, before names are known.
#[derive(Debug, Clone)]
pub(crate) struct RawNode {
    pub element: String,
    pub name: Option<String>,
    pub props: Vec<(String, String)>,
}

/// Nodes and links as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct Raw {
    pub nodes: Vec<RawNode>,
    pub links: Vec<Link>,
}

/// Checks a name given with `name=`: not empty, no `=` (no link could name it).
pub(crate) fn check_name(name: &str, element: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "a name may not be empty"
    } else if name.contains('=') {
        "a name may not contain '='"
    } else {
        return Ok(());
    };
    Err(Error::BadNodeName {
        name: shown(name),
        element: shown(element),
        reason,
    })
}

impl Raw {
    /// Names every node, resolves every link and checks the structure.
    pub(crate) fn resolve(self, settings: Settings) -> Result<GraphDesc> {
        if self.nodes.is_empty() {
            return Err(Error::EmptyPipeline);
        }
        // Names: given, or generated from the element.
        let mut nodes: Vec<NodeDescr> = Vec::with_capacity(self.nodes.len());
        let mut by_name: HashMap<String, usize> = HashMap::with_capacity(self.nodes.len());
        let mut default_names = DefaultNames::default();
        for (i, raw) in self.nodes.iter().enumerate() {
            let default = default_names.next(&raw.element);
            let name = raw.name.clone().unwrap_or(default);
            if let Some(&first) = by_name.get(&name) {
                return Err(Error::DuplicateName {
                    name: shown(&name),
                    first: first + 1,
                    second: i + 1,
                });
            }
            by_name.insert(name.clone(), i);
            nodes.push(NodeDescr {
                name,
                element: raw.element.clone(),
                props: raw.props.clone(),
                inputs: Vec::new(),
            });
        }
        let names = || nodes.iter().map(|n| n.name.as_str());
        let index = |end: &End| -> Result<usize> {
            match end {
                End::Node(i) => Ok(*i),
                End::Named { name, place } => {
                    by_name
                        .get(name)
                        .copied()
                        .ok_or_else(|| Error::UnknownNode {
                            name: shown(name),
                            place: place.clone(),
                            hint: hint(name, names()),
                        })
                }
            }
        };
        // Each node's inputs: given ones first, then the next free one for each other link,
        // in the order written.
        let mut slots: Vec<Vec<Option<usize>>> = vec![Vec::new(); nodes.len()];
        let mut free_links: Vec<(usize, usize)> = Vec::new();
        for link in &self.links {
            let from = index(&link.from)?;
            let to = index(&link.to)?;
            let Some(k) = link.input else {
                free_links.push((from, to));
                continue;
            };
            if k >= MAX_INPUTS {
                return Err(Error::TooManyInputs {
                    node: shown(&nodes[to].name),
                    count: k.saturating_add(1),
                });
            }
            let s = &mut slots[to];
            if s.len() <= k {
                s.resize(k + 1, None);
            }
            if let Some(earlier) = s[k] {
                return Err(Error::InputTwice {
                    node: shown(&nodes[to].name),
                    input: k,
                    first: shown(&nodes[earlier].name),
                    second: shown(&nodes[from].name),
                });
            }
            s[k] = Some(from);
        }
        for (from, to) in free_links {
            let s = &mut slots[to];
            match s.iter().position(Option::is_none) {
                Some(k) => s[k] = Some(from),
                None if s.len() < MAX_INPUTS => s.push(Some(from)),
                None => {
                    return Err(Error::TooManyInputs {
                        node: shown(&nodes[to].name),
                        count: MAX_INPUTS + 1,
                    })
                }
            }
        }
        for (i, s) in slots.into_iter().enumerate() {
            let mut inputs = Vec::with_capacity(s.len());
            for (k, from) in s.iter().enumerate() {
                match from {
                    Some(f) => inputs.push(*f),
                    None => {
                        return Err(Error::InputGap {
                            node: shown(&nodes[i].name),
                            missing: k,
                            linked: s.len() - 1,
                        })
                    }
                }
            }
            nodes[i].inputs = inputs;
        }
        if let Some(cycle) = find_cycle(&nodes) {
            let path: Vec<String> = cycle.iter().map(|&i| shown(&nodes[i].name)).collect();
            return Err(Error::Cycle {
                back: path[path.len() - 2].clone(),
                path: path.join(" -> "),
            });
        }
        Ok(GraphDesc {
            nodes,
            settings,
            midi: Vec::new(),
        })
    }
}

/// A cycle of input links, as the nodes along it in the direction frames flow, the first one
/// repeated at the end (`[a, b, a]`: a feeds b, b feeds a), starting at its lowest index.
pub(crate) fn find_cycle(nodes: &[NodeDescr]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; nodes.len()];
    // Walk against the links (from a node to its inputs), iteratively: a graph from a fuzzer
    // may be deep. `path` holds (node, next input to look at).
    let mut path: Vec<(usize, usize)> = Vec::new();
    for start in 0..nodes.len() {
        if mark[start] != Mark::New {
            continue;
        }
        mark[start] = Mark::OnPath;
        path.push((start, 0));
        while let Some(top) = path.last_mut() {
            let (node, next) = *top;
            let Some(&input) = nodes[node].inputs.get(next) else {
                mark[node] = Mark::Done;
                path.pop();
                continue;
            };
            top.1 += 1;
            match mark[input] {
                Mark::New => {
                    mark[input] = Mark::OnPath;
                    path.push((input, 0));
                }
                Mark::OnPath => {
                    // `path` from `input` to `node` is a chain of "takes its input from";
                    // reversed, it is the way frames flow.
                    let at = path.iter().position(|(n, _)| *n == input).unwrap_or(0);
                    let mut cycle: Vec<usize> = path[at..].iter().map(|(n, _)| *n).collect();
                    cycle.reverse();
                    let lowest = (0..cycle.len()).min_by_key(|&k| cycle[k]).unwrap_or(0);
                    cycle.rotate_left(lowest);
                    cycle.push(cycle[0]);
                    return Some(cycle);
                }
                Mark::Done => {}
            }
        }
    }
    None
}
