//! `--web`: the control page (framepipe-web) as the CLI sets it up: the address, the preview
//! tap added to the graph description before it is built, the `webpreview` element.

use std::net::SocketAddr;

use anyhow::{bail, Result};
use framepipe_core::{ElementKind, Registry};
use framepipe_project::{GraphDesc, NodeDescr};

/// `--web`'s value: `PORT` (on 127.0.0.1), `ADDR:PORT`, `localhost:PORT`; none = 127.0.0.1:8080.
pub fn parse_addr(text: Option<&str>) -> Result<SocketAddr> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(framepipe_web::DEFAULT_ADDR
            .parse()
            .expect("the default address parses"));
    };
    crate::osc::parse_addr("--web", text)
}

/// The node the preview shows by default: the master sink's input (the sink marked
/// `master=true`, else the first sink not marked `leaky=true`, as the runtime picks it).
fn master_input(desc: &GraphDesc, registry: &Registry) -> Option<usize> {
    let is_sink = |n: &NodeDescr| {
        registry
            .find(&n.element)
            .is_some_and(|e| e.desc.kind == ElementKind::Sink)
    };
    let prop = |n: &NodeDescr, k: &str| {
        n.props
            .iter()
            .any(|(key, v)| key == k && matches!(v.as_str(), "true" | "1" | "yes" | "on"))
    };
    let sinks: Vec<&NodeDescr> = desc.nodes.iter().filter(|n| is_sink(n)).collect();
    let master = sinks
        .iter()
        .find(|n| prop(n, "master"))
        .or_else(|| sinks.iter().find(|n| !prop(n, "leaky")))?;
    master.inputs.first().copied()
}

/// A node name not yet used in `desc`, starting from `base`.
fn free_name(desc: &GraphDesc, base: &str) -> String {
    let mut name = base.to_string();
    let mut k = 2;
    while desc.find(&name).is_some() {
        name = format!("{base}#{k}");
        k += 1;
    }
    name
}

/// The preview branch added to a graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewTap {
    /// The node previewed.
    pub tapped: String,
    /// The `monitor` node reading it (`link MONITOR NODE` previews another node).
    pub monitor: String,
    /// The `webpreview` sink after it.
    pub sink: String,
}

/// `desc` without the preview branch `tap` added (its two nodes), inputs renumbered; `None`
/// when another node reads the branch (it cannot be taken out alone).
pub fn without_preview_tap(desc: &GraphDesc, tap: &PreviewTap) -> Option<GraphDesc> {
    let gone = |n: &NodeDescr| n.name == tap.monitor || n.name == tap.sink;
    let removed: Vec<usize> = (0..desc.nodes.len())
        .filter(|&i| gone(&desc.nodes[i]))
        .collect();
    let read_elsewhere = desc
        .nodes
        .iter()
        .filter(|n| !gone(n))
        .any(|n| n.inputs.iter().any(|i| removed.contains(i)));
    if read_elsewhere {
        return None;
    }
    let mut out = desc.clone();
    out.nodes.retain(|n| !gone(n));
    let shift = |i: usize| i - removed.iter().filter(|&&r| r < i).count();
    for n in &mut out.nodes {
        for i in &mut n.inputs {
            *i = shift(*i);
        }
    }
    Some(out)
}

/// Adds the preview branch `NODE. ! monitor ! webpreview leaky=true` to `desc`, `NODE` being
/// `node` or the master sink's input.
pub fn add_preview_tap(
    desc: &mut GraphDesc,
    registry: &Registry,
    node: Option<&str>,
) -> Result<PreviewTap> {
    let tapped = match node {
        Some(name) => desc.resolve(name, "--web-preview")?,
        None => match master_input(desc, registry) {
            Some(i) => i,
            None => bail!(
                "--web: no sink with an input to preview; name a node with --web-preview NODE"
            ),
        },
    };
    let tapped_name = desc.nodes[tapped].name.clone();
    let is_sink = registry
        .find(&desc.nodes[tapped].element)
        .is_some_and(|e| e.desc.kind == ElementKind::Sink);
    if is_sink {
        bail!("--web-preview: '{tapped_name}' is a sink, it has no output to preview; name its input or another node");
    }
    let monitor = free_name(desc, "web-monitor");
    desc.nodes.push(NodeDescr {
        name: monitor.clone(),
        element: "monitor".into(),
        props: vec![],
        inputs: vec![tapped],
    });
    let monitor_index = desc.nodes.len() - 1;
    let sink = free_name(desc, "web-preview");
    desc.nodes.push(NodeDescr {
        name: sink.clone(),
        element: framepipe_web::preview::NAME.into(),
        props: vec![("leaky".into(), "true".into())],
        inputs: vec![monitor_index],
    });
    Ok(PreviewTap {
        tapped: tapped_name,
        monitor,
        sink,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        let mut r = Registry::new();
        framepipe_io::register(&mut r);
        framepipe_effects::register(&mut r);
        let bound = framepipe_web::Web::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
        framepipe_web::preview::register(&mut r, bound.preview_slot(), bound.counters());
        r
    }

    #[test]
    fn addresses_parse() {
        assert_eq!(parse_addr(None).unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(
            parse_addr(Some("9000")).unwrap().to_string(),
            "127.0.0.1:9000"
        );
        assert_eq!(
            parse_addr(Some("0.0.0.0:0")).unwrap().to_string(),
            "0.0.0.0:0"
        );
        assert!(parse_addr(Some("nowhere"))
            .unwrap_err()
            .to_string()
            .contains("'nowhere'"));
    }

    #[test]
    fn the_tap_reads_the_master_sinks_input_and_is_leaky() {
        let r = registry();
        let mut d = framepipe_project::parse_pipeline(
            "testsrc ! invert name=a ! nullsink leaky=true a. ! stamp ! nullsink name=out",
        )
        .unwrap();
        let tap = add_preview_tap(&mut d, &r, None).unwrap();
        assert_eq!(tap.tapped, "stamp");
        assert_eq!(tap.monitor, "web-monitor");
        let n = d.nodes.len();
        assert_eq!(d.nodes[n - 2].element, "monitor");
        assert_eq!(d.nodes[n - 1].element, "webpreview");
        assert_eq!(d.nodes[n - 1].inputs, vec![n - 2]);
        let mut d =
            framepipe_project::parse_pipeline("testsrc ! invert name=a ! nullsink").unwrap();
        assert_eq!(
            add_preview_tap(&mut d, &r, Some("testsrc")).unwrap().tapped,
            "testsrc"
        );
        assert!(add_preview_tap(&mut d, &r, Some("nullsink"))
            .unwrap_err()
            .to_string()
            .contains("'nullsink' is a sink"));
        let plain =
            framepipe_project::parse_pipeline("testsrc ! invert name=a ! nullsink").unwrap();
        let mut tapped = plain.clone();
        let tap = add_preview_tap(&mut tapped, &r, None).unwrap();
        assert_eq!(without_preview_tap(&tapped, &tap).unwrap(), plain);
        assert!(add_preview_tap(&mut d, &r, Some("nope"))
            .unwrap_err()
            .to_string()
            .contains("nope"));
    }
}
