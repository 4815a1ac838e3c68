//! The properties the `pipeline_parser` and `project_loader` fuzz targets check, shared by those
//! targets (`fuzz/fuzz_targets/pipeline_parser.rs` and `project_loader.rs` include this file)
//! and the quick seeded tests (`random_pipelines.rs`, `random_projects.rs`), so that both check
//! the same thing.
#![allow(dead_code)] // each includer uses its own subset

use framepipe_project::{parse_pipeline, parse_project, GraphDesc, MAX_INPUTS};

/// What the parser promises of every graph it returns: at least one node; property names not
/// empty, without `=`, never `name` (the parser's); node names unique; inputs within the graph,
/// at most [`MAX_INPUTS`] each; no cycle of input links.
pub fn check_graph(text: &str, desc: &GraphDesc) {
    let n = desc.nodes.len();
    assert!(n > 0, "{text:?}");
    let mut names = std::collections::HashSet::new();
    for node in &desc.nodes {
        assert!(
            names.insert(&node.name),
            "{text:?}: two nodes named {:?}",
            node.name
        );
        for (k, _) in &node.props {
            assert!(
                !k.is_empty() && !k.contains('=') && k != "name",
                "{text:?}: property {k:?}"
            );
        }
        assert!(node.inputs.len() <= MAX_INPUTS, "{text:?}: {:?}", node.name);
        assert!(
            node.inputs.iter().all(|&i| i < n),
            "{text:?}: {:?}",
            node.inputs
        );
    }
    // No cycle: every node can be taken once all its inputs are (Kahn's order).
    let mut waiting: Vec<usize> = desc.nodes.iter().map(|n| n.inputs.len()).collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in desc.nodes.iter().enumerate() {
        for &from in &node.inputs {
            users[from].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut taken = 0;
    while let Some(i) = ready.pop() {
        taken += 1;
        for &u in &users[i] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(u);
            }
        }
    }
    assert_eq!(taken, n, "{text:?}: a cycle of links was accepted");
}

/// Printed (`Display`), a graph parses back to the same nodes, and that print is canonical
/// (printing the re-parsed graph gives the same text).
pub fn check_prints_back(text: &str, desc: &GraphDesc) {
    let printed = desc.to_string();
    let again = parse_pipeline(&printed)
        .unwrap_or_else(|e| panic!("{text:?} -> {printed:?} does not parse: {e}"));
    assert_eq!(again.nodes, desc.nodes, "{text:?} -> {printed:?}");
    assert_eq!(
        again.to_string(),
        printed,
        "{text:?}: printing is not canonical"
    );
}

/// The `pipeline_parser` target's properties: an accepted pipeline string is a graph as
/// [`check_graph`] says, and prints back ([`check_prints_back`]).
pub fn check(text: &str) -> Option<GraphDesc> {
    let desc = parse_pipeline(text).ok()?;
    check_graph(text, &desc);
    check_prints_back(text, &desc);
    Some(desc)
}

/// The `project_loader` target's properties: positive settings; a graph as [`check_graph`]
/// says (unless empty: `element = []` is refused later, by the CLI), and printed as a pipeline
/// string it is the same graph: a project file and a pipeline string describe the same things.
pub fn check_project(text: &str) -> Option<GraphDesc> {
    let desc = parse_project(text).ok()?;
    assert!(desc.settings.threads.is_none_or(|n| n > 0), "{text:?}");
    assert!(desc.settings.in_flight.is_none_or(|n| n > 0), "{text:?}");
    if !desc.nodes.is_empty() {
        check_graph(text, &desc);
        check_prints_back(text, &desc);
    }
    Some(desc)
}
