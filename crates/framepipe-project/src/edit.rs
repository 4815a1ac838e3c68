//! Live edits on a description (#9): [`GraphDesc::apply`] gives the description after an
//! `add`, `remove`, `replace`, `link` or `load`, checked like a parsed one (unique names, inputs
//! in range, no cycle of input links), or an error naming what the edit cannot do.
//!
//! What needs the elements (whether `add`'s element takes one input, whether a node is a source
//! or a sink by its element) is the CLI's check; here a node's role comes from the graph's
//! shape: a node without inputs is a source (or a `feedback`), a node whose output nothing takes
//! is a sink (a node that only a `feedback from=` reads is not one), a node with several inputs
//! is a mixer.

use framepipe_control::{GraphEdit, Place};

use crate::desc::{shown, DefaultNames, GraphDesc, NodeDescr};
use crate::links::{check_name, find_cycle};
use crate::{Error, Result, MAX_INPUTS};

/// The structural element that reads a node by name (`from=`) rather than by an input.
const FEEDBACK: &str = "feedback";

impl GraphDesc {
    /// The description after `edit`:
    ///
    /// * `add E after X`: a node of element `E` between `X` and every node taking `X`'s output;
    ///   `add E before X`: between `X`'s input 0 and `X`. `name=` among the properties names
    ///   it (a name no node has), else the default rule (`E`, or `E#K` for the K-th node of
    ///   that element, the first such name that is free). Only a one-input element can be
    ///   added: `feedback` is refused here, sources, sinks and mixers by the CLI.
    /// * `remove X`: `X` must have one input and something taking its output (not a source,
    ///   a mixer or a sink); every node taking `X`'s output (and a `feedback from=X`) now takes
    ///   `X`'s input.
    /// * `replace X E ...`: a node of element `E` with `X`'s name, inputs and consumers.
    /// * `link X.sink_K F`: input K of `X` now comes from `F` (K up to `X`'s input count: the
    ///   next input adds one). A node whose output then goes nowhere is dropped, with the nodes
    ///   only it fed (the sinks stay). A cycle is refused, suggesting `feedback`.
    /// * `load FILE`: the project FILE (read relative to the working directory) replaces every
    ///   node but the sinks, which must be the running ones by name; see
    ///   [`with_project`](Self::with_project).
    ///
    /// The settings stay this description's (they cannot change while running).
    pub fn apply(&self, edit: &GraphEdit) -> Result<GraphDesc> {
        let text = edit.to_string();
        let refuse = |reason: String| Error::EditRefused {
            edit: shown(&text),
            reason,
        };
        let place = format!("'{}'", shown(&text));
        let mut out = self.clone();
        match edit {
            GraphEdit::Add {
                element,
                props,
                place: at,
                anchor,
            } => {
                let a = self.resolve(anchor, &place)?;
                if element == FEEDBACK {
                    return Err(refuse(
                        "feedback takes no input; only a one-input element can be added".into(),
                    ));
                }
                let (name, props) = self.name_for_new(element, props, &refuse)?;
                let consumers = self.consumers(a);
                match at {
                    Place::After => {
                        if consumers.is_empty() {
                            return Err(refuse(format!(
                                "nothing takes the output of {} (a sink): add before it",
                                shown(anchor)
                            )));
                        }
                        let new = out.insert(
                            a + 1,
                            NodeDescr {
                                name,
                                element: element.clone(),
                                props,
                                inputs: vec![a],
                            },
                        );
                        for c in consumers {
                            let c = if c > a { c + 1 } else { c };
                            out.relink(c, a, new);
                        }
                    }
                    Place::Before => {
                        let Some(&input) = self.nodes[a].inputs.first() else {
                            return Err(refuse(format!(
                                "{} has no input (a source): add after it",
                                shown(anchor)
                            )));
                        };
                        // The input may be written after the anchor (links name nodes).
                        let input = if input >= a { input + 1 } else { input };
                        let new = out.insert(
                            a,
                            NodeDescr {
                                name,
                                element: element.clone(),
                                props,
                                inputs: vec![input],
                            },
                        );
                        out.nodes[a + 1].inputs[0] = new;
                    }
                }
            }
            GraphEdit::Remove { node } => {
                let i = self.resolve(node, &place)?;
                let n = &self.nodes[i];
                let role = match n.inputs.len() {
                    0 => Some("it has no input (a source)".to_string()),
                    1 => None,
                    k => Some(format!("it has {k} inputs (a mixer)")),
                };
                let role = role.or_else(|| {
                    self.consumers(i)
                        .is_empty()
                        .then(|| "nothing takes its output (a sink)".to_string())
                });
                if let Some(role) = role {
                    return Err(refuse(format!(
                        "{role}; only a node with one input that feeds others can be removed \
                         (use replace)"
                    )));
                }
                let input = n.inputs[0];
                let input_name = self.nodes[input].name.clone();
                for c in self.consumers(i) {
                    out.relink(c, i, input);
                }
                for f in self.feedbacks_of(i) {
                    for (k, v) in &mut out.nodes[f].props {
                        if k == "from" {
                            v.clone_from(&input_name);
                        }
                    }
                }
                out.remove_node(i);
            }
            GraphEdit::Replace {
                node,
                element,
                props,
            } => {
                let i = self.resolve(node, &place)?;
                let mut kept = Vec::with_capacity(props.len());
                for (k, v) in props {
                    if k == "name" {
                        if v != node {
                            return Err(refuse(format!(
                                "replace keeps the node's name ({}), it cannot be name={}",
                                shown(node),
                                shown(v)
                            )));
                        }
                    } else {
                        kept.push((k.clone(), v.clone()));
                    }
                }
                if element.is_empty() || element.contains('=') {
                    return Err(refuse(format!("bad element name '{}'", shown(element))));
                }
                out.nodes[i].element.clone_from(element);
                out.nodes[i].props = kept;
            }
            GraphEdit::Link { node, input, from } => {
                let to = self.resolve(node, &place)?;
                let f = self.resolve(from, &place)?;
                let have = self.nodes[to].inputs.len();
                if have == 0 {
                    return Err(refuse(format!("{} takes no input (a source)", shown(node))));
                }
                if *input >= MAX_INPUTS {
                    return Err(Error::TooManyInputs {
                        node: shown(node),
                        count: input.saturating_add(1),
                    });
                }
                if *input > have {
                    return Err(refuse(format!(
                        "{} has {have} input{} (sink_0 to sink_{}); link {}.sink_{have} adds one",
                        shown(node),
                        if have == 1 { "" } else { "s" },
                        have - 1,
                        shown(node)
                    )));
                }
                let sinks = self.sinks();
                if sinks.contains(&f) {
                    return Err(refuse(format!(
                        "{} is a sink: it has no output to link from",
                        shown(from)
                    )));
                }
                if *input == have {
                    out.nodes[to].inputs.push(f);
                } else {
                    out.nodes[to].inputs[*input] = f;
                }
                if let Some(cycle) = find_cycle(&out.nodes) {
                    let path: Vec<String> =
                        cycle.iter().map(|&i| shown(&out.nodes[i].name)).collect();
                    return Err(Error::Cycle {
                        back: path[path.len() - 2].clone(),
                        path: path.join(" -> "),
                    });
                }
                let keep: Vec<String> = sinks.iter().map(|&s| self.nodes[s].name.clone()).collect();
                out.prune(&keep);
            }
            GraphEdit::Load { path, .. } => {
                let new = crate::read_project(path)?;
                return self.with_project(path, new);
            }
        }
        out.check()?;
        Ok(out)
    }

    /// `load`'s result: `new` (the project read from `path`) with the running sinks. `new` must
    /// have sinks of the same names as this description's (else an error naming the ones
    /// missing and the ones new); each sink keeps its element and properties as running (the
    /// file's are not used: a running output cannot change) and takes its input from `new`.
    /// Every other node is `new`'s. The settings stay this description's.
    pub fn with_project(&self, path: &str, new: GraphDesc) -> Result<GraphDesc> {
        let names = |d: &GraphDesc| -> Vec<String> {
            d.sinks()
                .into_iter()
                .map(|s| d.nodes[s].name.clone())
                .collect()
        };
        let (running, loaded) = (names(self), names(&new));
        let missing: Vec<&str> = running
            .iter()
            .filter(|n| !loaded.contains(n))
            .map(String::as_str)
            .collect();
        let extra: Vec<&str> = loaded
            .iter()
            .filter(|n| !running.contains(n))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() || !extra.is_empty() {
            let mut why = Vec::new();
            if !missing.is_empty() {
                why.push(format!("it has no {}", shown(&missing.join(", "))));
            }
            if !extra.is_empty() {
                why.push(format!(
                    "{} {} not running",
                    shown(&extra.join(", ")),
                    if extra.len() == 1 { "is" } else { "are" }
                ));
            }
            return Err(Error::LoadSinks {
                path: shown(path),
                running: shown(&running.join(", ")),
                why: why.join("; "),
            });
        }
        let mut out = new;
        for i in out.sinks() {
            let old = &self.nodes[self.find(&out.nodes[i].name).unwrap_or(i)];
            out.nodes[i].element.clone_from(&old.element);
            out.nodes[i].props.clone_from(&old.props);
        }
        out.settings = self.settings.clone();
        out.check()?;
        Ok(out)
    }

    /// The sinks, by the graph's shape: nodes whose output no node takes and no
    /// `feedback from=` reads.
    pub fn sinks(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.consumers(i).is_empty() && self.feedbacks_of(i).is_empty())
            .collect()
    }

    /// The nodes that take node `i`'s output as an input, each once.
    fn consumers(&self, i: usize) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&c| self.nodes[c].inputs.contains(&i))
            .collect()
    }

    /// The `feedback` nodes that name node `i` with `from=`.
    fn feedbacks_of(&self, i: usize) -> Vec<usize> {
        let name = &self.nodes[i].name;
        (0..self.nodes.len())
            .filter(|&f| {
                let n = &self.nodes[f];
                n.element == FEEDBACK && n.props.iter().any(|(k, v)| k == "from" && v == name)
            })
            .collect()
    }

    /// The name and properties of a node `add` makes: `name=` taken out (it must be free),
    /// else the default rule's first free name.
    fn name_for_new(
        &self,
        element: &str,
        props: &[(String, String)],
        refuse: &dyn Fn(String) -> Error,
    ) -> Result<(String, Vec<(String, String)>)> {
        let mut given: Option<&str> = None;
        let mut rest = Vec::with_capacity(props.len());
        for (k, v) in props {
            if k != "name" {
                rest.push((k.clone(), v.clone()));
                continue;
            }
            check_name(v, element)?;
            if let Some(first) = given {
                return Err(Error::NamedTwice {
                    element: shown(element),
                    first: shown(first),
                    second: shown(v),
                });
            }
            given = Some(v);
        }
        if let Some(name) = given {
            if self.find(name).is_some() {
                return Err(refuse(format!(
                    "a node is named '{}' already; give the new one another name=",
                    shown(name)
                )));
            }
            return Ok((name.to_string(), rest));
        }
        // The name the node would get if written after every node of its element, or the
        // next free one.
        let mut names = DefaultNames::default();
        let mut name = String::new();
        for n in self.nodes.iter().filter(|n| n.element == element) {
            names.next(&n.element);
        }
        while name.is_empty() || self.find(&name).is_some() {
            name = names.next(element);
        }
        Ok((name, rest))
    }

    /// Inserts `node` at position `at` (inputs of the nodes after it renumbered); returns `at`.
    fn insert(&mut self, at: usize, node: NodeDescr) -> usize {
        for n in &mut self.nodes {
            for i in &mut n.inputs {
                if *i >= at {
                    *i += 1;
                }
            }
        }
        self.nodes.insert(at, node);
        at
    }

    /// Removes node `at`, which no node takes as input any more (inputs renumbered).
    fn remove_node(&mut self, at: usize) {
        self.nodes.remove(at);
        for n in &mut self.nodes {
            for i in &mut n.inputs {
                if *i > at {
                    *i -= 1;
                }
            }
        }
    }

    /// Node `c`'s inputs from `old` now come from `new`.
    fn relink(&mut self, c: usize, old: usize, new: usize) {
        for i in &mut self.nodes[c].inputs {
            if *i == old {
                *i = new;
            }
        }
    }

    /// Drops every node whose output goes nowhere and that is not one of the sinks named in
    /// `sinks`, until none is left.
    fn prune(&mut self, sinks: &[String]) {
        while let Some(i) = (0..self.nodes.len()).find(|&i| {
            !sinks.contains(&self.nodes[i].name)
                && self.consumers(i).is_empty()
                && self.feedbacks_of(i).is_empty()
        }) {
            self.remove_node(i);
        }
    }

    /// The checks a parsed description passed: unique names, inputs in range and at most
    /// [`MAX_INPUTS`], no cycle of input links.
    fn check(&self) -> Result<()> {
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(first) = self.nodes[..i].iter().position(|o| o.name == n.name) {
                return Err(Error::DuplicateName {
                    name: shown(&n.name),
                    first: first + 1,
                    second: i + 1,
                });
            }
            if n.inputs.len() > MAX_INPUTS {
                return Err(Error::TooManyInputs {
                    node: shown(&n.name),
                    count: n.inputs.len(),
                });
            }
            debug_assert!(n.inputs.iter().all(|&k| k < self.nodes.len()));
        }
        if let Some(cycle) = find_cycle(&self.nodes) {
            let path: Vec<String> = cycle.iter().map(|&i| shown(&self.nodes[i].name)).collect();
            return Err(Error::Cycle {
                back: path[path.len() - 2].clone(),
                path: path.join(" -> "),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use framepipe_control::Command;

    use crate::{parse_pipeline, GraphDesc};

    fn edit(line: &str) -> framepipe_control::GraphEdit {
        match Command::parse(line) {
            Ok(Command::Edit(e)) => e,
            other => panic!("{line:?} -> {other:?}"),
        }
    }

    /// `"name=element<-a,b"` per node.
    fn shape(d: &GraphDesc) -> Vec<String> {
        d.nodes
            .iter()
            .map(|n| {
                let inputs: Vec<&str> =
                    n.inputs.iter().map(|&i| d.nodes[i].name.as_str()).collect();
                format!("{}={}<-{}", n.name, n.element, inputs.join(","))
            })
            .collect()
    }

    /// `desc` after `line`, which prints back as a pipeline string of the same nodes.
    fn applied(desc: &str, line: &str) -> GraphDesc {
        let d = parse_pipeline(desc).unwrap();
        let out = d
            .apply(&edit(line))
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        let printed = out.to_string();
        let again = parse_pipeline(&printed).unwrap_or_else(|e| panic!("{printed}: {e}"));
        assert_eq!(again.nodes, out.nodes, "{printed}");
        out
    }

    fn refused(desc: &str, line: &str) -> String {
        let d = parse_pipeline(desc).unwrap();
        let e = d
            .apply(&edit(line))
            .map(|o| panic!("{line} gave {:?}", shape(&o)))
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    }

    const CHAIN: &str =
        "testsrc name=src ! frei0r-glow name=fx1 ! invert name=fx2 ! nullsink name=out";
    const TEE: &str = "testsrc ! tee name=t  t. ! nullsink name=a  t. ! invert ! nullsink name=b";
    const MIX: &str = "testsrc name=clipA ! frei0r-glow ! mix.  \
        testsrc name=clipB pattern=bars ! mix.  mix name=mix ! nullsink name=out  \
        testsrc name=clipC ! nullsink name=prev";

    #[test]
    fn add_after_goes_between_the_node_and_all_its_consumers() {
        let d = applied(CHAIN, "add frei0r-sobel after fx1");
        assert_eq!(
            shape(&d),
            [
                "src=testsrc<-",
                "fx1=frei0r-glow<-src",
                "frei0r-sobel=frei0r-sobel<-fx1",
                "fx2=invert<-frei0r-sobel",
                "out=nullsink<-fx2"
            ]
        );
        let d = applied(TEE, "add frei0r-glow blur=0.3 mode=serial name=g after t");
        assert_eq!(
            shape(&d),
            [
                "testsrc=testsrc<-",
                "t=tee<-testsrc",
                "g=frei0r-glow<-t",
                "a=nullsink<-g",
                "invert=invert<-g",
                "b=nullsink<-invert"
            ]
        );
        // name= is the node's; the other properties (mode= too) are kept as written.
        let g = &d.nodes[d.find("g").unwrap()];
        assert_eq!(
            g.props,
            [
                ("blur".into(), "0.3".into()),
                ("mode".into(), "serial".into())
            ]
        );
    }

    #[test]
    fn add_before_goes_between_input_0_and_the_node() {
        let d = applied(CHAIN, "add invert before fx2");
        assert_eq!(
            shape(&d),
            [
                "src=testsrc<-",
                "fx1=frei0r-glow<-src",
                "invert#2=invert<-fx1",
                "fx2=invert<-invert#2",
                "out=nullsink<-fx2"
            ]
        );
        // Before input 0 of a mixer whose input is written after it.
        let d = applied(
            "mix name=m ! nullsink  a. ! m.  b. ! m.  testsrc name=a ! tee name=x  x. ! nullsink name=o2  testsrc name=b ! tee",
            "add invert before m",
        );
        let m = d.find("m").unwrap();
        let inv = d.find("invert").unwrap();
        assert_eq!(d.nodes[m].inputs[0], inv);
        assert_eq!(d.nodes[inv].inputs, [d.find("a").unwrap()]);
        assert_eq!(d.nodes[m].inputs[1], d.find("b").unwrap());
    }

    #[test]
    fn added_nodes_are_named_by_the_default_rule_or_name_and_never_twice() {
        // Every node of the element counts, named or not (fx2 is an invert): as if written
        // after them.
        let d = applied(CHAIN, "add invert after fx2");
        assert_eq!(d.nodes[3].name, "invert#2", "{:?}", shape(&d));
        let d = applied(CHAIN, "add frei0r-sobel after fx2");
        assert_eq!(d.nodes[3].name, "frei0r-sobel", "{:?}", shape(&d));
        let d = applied(
            "testsrc ! invert ! invert ! nullsink",
            "add invert after invert#2",
        );
        assert_eq!(d.nodes[3].name, "invert#3", "{:?}", shape(&d));
        // A name taken by a node of another element: the next free one.
        let d = applied(
            "testsrc ! frei0r-glow name=invert ! nullsink",
            "add invert after invert",
        );
        assert_eq!(d.nodes[2].name, "invert#2", "{:?}", shape(&d));
        let e = refused(CHAIN, "add invert name=fx1 after fx2");
        assert!(e.contains("'fx1'") && e.contains("already"), "{e}");
        let e = refused(CHAIN, "add invert name=a name=b after fx2");
        assert!(e.contains("named twice"), "{e}");
        let e = refused(CHAIN, "add invert name= after fx2");
        assert!(e.contains("empty"), "{e}");
    }

    #[test]
    fn add_refusals_name_the_nodes() {
        let e = refused(CHAIN, "add invert after out");
        assert!(e.contains("out (a sink)"), "{e}");
        let e = refused(CHAIN, "add invert before src");
        assert!(e.contains("src has no input"), "{e}");
        let e = refused(CHAIN, "add feedback from=fx1 after src");
        assert!(e.contains("feedback takes no input"), "{e}");
        let e = refused(CHAIN, "add invert after fx3");
        assert!(
            e.contains("unknown node 'fx3'") && e.contains("did you mean"),
            "{e}"
        );
    }

    #[test]
    fn remove_relinks_every_consumer_to_the_input() {
        let d = applied(CHAIN, "remove fx1");
        assert_eq!(
            shape(&d),
            ["src=testsrc<-", "fx2=invert<-src", "out=nullsink<-fx2"]
        );
        let d = applied(TEE, "remove t");
        assert_eq!(
            shape(&d),
            [
                "testsrc=testsrc<-",
                "a=nullsink<-testsrc",
                "invert=invert<-testsrc",
                "b=nullsink<-invert"
            ]
        );
        // A feedback reading the removed node reads its input now.
        let d = applied(
            "testsrc ! mix name=m ! invert name=fx ! nullsink  feedback from=fx ! m.",
            "remove fx",
        );
        let fb = &d.nodes[d.find("feedback").unwrap()];
        assert_eq!(fb.props, [("from".into(), "m".into())]);
    }

    #[test]
    fn remove_refuses_sources_mixers_and_sinks() {
        for (node, why) in [
            ("src", "no input (a source)"),
            ("out", "(a sink)"),
            ("fx9", "unknown node 'fx9'"),
        ] {
            let e = refused(CHAIN, &format!("remove {node}"));
            assert!(e.contains(why), "{e}");
        }
        let e = refused(MIX, "remove mix");
        assert!(e.contains("mix: it has 2 inputs (a mixer)"), "{e}");
    }

    #[test]
    fn replace_keeps_name_inputs_and_consumers() {
        let d = applied(MIX, "replace clipB ffmpegsrc location=b.mp4 on-end=loop");
        let b = d.find("clipB").unwrap();
        assert_eq!(d.nodes[b].element, "ffmpegsrc");
        assert_eq!(
            d.nodes[b].props,
            [
                ("location".into(), "b.mp4".into()),
                ("on-end".into(), "loop".into())
            ]
        );
        assert_eq!(d.nodes[d.find("mix").unwrap()].inputs[1], b);
        let before = parse_pipeline(MIX).unwrap();
        assert_eq!(shape(&d).len(), shape(&before).len());
        // Naming it the same is allowed; naming it otherwise is not.
        applied(CHAIN, "replace fx1 frei0r-sobel name=fx1");
        let e = refused(CHAIN, "replace fx1 frei0r-sobel name=fx9");
        assert!(e.contains("keeps the node's name (fx1)"), "{e}");
    }

    #[test]
    fn link_rewires_an_input_and_drops_what_then_feeds_nothing() {
        // clipA (and its glow) fed only mix.sink_0: they go; clipC now feeds mix and prev.
        let d = applied(MIX, "link mix clipC");
        assert_eq!(
            shape(&d),
            [
                "clipB=testsrc<-",
                "mix=mix<-clipC,clipB",
                "out=nullsink<-mix",
                "clipC=testsrc<-",
                "prev=nullsink<-clipC"
            ]
        );
        // The next input adds one.
        let d = applied(MIX, "link mix.sink_2 clipC");
        assert_eq!(d.nodes[d.find("mix").unwrap()].inputs.len(), 3);
        let e = refused(MIX, "link mix.sink_3 clipC");
        assert!(
            e.contains("mix has 2 inputs") && e.contains("mix.sink_2 adds one"),
            "{e}"
        );
        let e = refused(MIX, "link mix.sink_8 clipC");
        assert!(e.contains("at most 8"), "{e}");
        let e = refused(MIX, "link clipA clipC");
        assert!(e.contains("clipA takes no input"), "{e}");
        let e = refused(MIX, "link mix.sink_1 prev");
        assert!(e.contains("prev is a sink"), "{e}");
        let e = refused(MIX, "link frei0r-glow mix");
        assert!(e.contains("cycle") && e.contains("feedback from="), "{e}");
        let e = refused(MIX, "link mix clipD");
        assert!(e.contains("unknown node 'clipD'"), "{e}");
    }

    /// A project file in a temporary directory of its own, removed on drop (also when the test
    /// fails).
    struct TempProject(framepipe_testkit::TestDir);

    impl TempProject {
        fn new(tag: &str, text: &str) -> Self {
            let dir = framepipe_testkit::tmpdir(&format!("fp-edit-{tag}"));
            std::fs::write(dir.join("project.toml"), text).unwrap();
            TempProject(dir)
        }
        fn path(&self) -> String {
            self.0.file("project.toml")
        }
    }

    #[test]
    fn load_takes_the_new_nodes_and_keeps_the_running_sinks() {
        let mut running = parse_pipeline(MIX).unwrap();
        running.settings.threads = Some(3);
        let scene = TempProject::new(
            "scene2",
            "threads = 1\npipeline = \"testsrc name=s pattern=bars ! frei0r-sobel ! \
             tee name=t  t. ! nullsink name=out  t. ! nullsink name=prev extra=1\"\n",
        );
        let d = running
            .apply(&edit(&format!("load {} fade=2s", scene.path())))
            .unwrap();
        assert_eq!(
            shape(&d),
            [
                "s=testsrc<-",
                "frei0r-sobel=frei0r-sobel<-s",
                "t=tee<-frei0r-sobel",
                "out=nullsink<-t",
                "prev=nullsink<-t"
            ]
        );
        // The running sink as it runs, not as the file writes it; the running settings.
        assert!(d.nodes[4].props.is_empty(), "{:?}", d.nodes[4].props);
        assert_eq!(d.settings.threads, Some(3));
    }

    #[test]
    fn load_refuses_other_sinks_and_bad_files_in_one_line() {
        let running = parse_pipeline(MIX).unwrap();
        let other = TempProject::new(
            "other",
            "pipeline = \"testsrc ! tee name=t  t. ! nullsink name=out  t. ! nullsink name=rec\"\n",
        );
        let e = running
            .apply(&edit(&format!("load {}", other.path())))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("(out, prev)")
                && e.contains("it has no prev")
                && e.contains("rec is not running"),
            "{e}"
        );
        let broken = TempProject::new("broken", "pipeline = \"testsrc !\"\n");
        let e = running
            .apply(&edit(&format!("load {}", broken.path())))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&broken.path()) && e.contains("ends with '!'"),
            "{e}"
        );
        let e = running
            .apply(&edit("load /nonexistent/scene.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot read project file '/nonexistent/scene.toml'"),
            "{e}"
        );
    }

    #[test]
    fn sinks_are_what_nothing_reads() {
        let d = parse_pipeline(
            "testsrc ! mix name=m ! invert name=fx ! nullsink  feedback from=fx ! m.",
        )
        .unwrap();
        assert_eq!(d.sinks(), [d.find("nullsink").unwrap()]);
        let d = parse_pipeline(MIX).unwrap();
        let names: Vec<&str> = d
            .sinks()
            .iter()
            .map(|&i| d.nodes[i].name.as_str())
            .collect();
        assert_eq!(names, ["out", "prev"]);
    }
}
