//! [`Pipeline`]: the chain (`source ! effects ! sink`) built in code, a graph of one line.

use framepipe_core::{Rational, Result, Sink, Source};

use super::{EffectStage, Graph, Node, NodeKind, OnEnd};

/// A pipeline as built by the user: one source, effects in order, one sink (a chain graph).
pub struct Pipeline {
    graph: Graph,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.graph.nodes.iter().map(|n| n.name.as_str()).collect();
        write!(f, "Pipeline({})", names.join(" ! "))
    }
}

impl Pipeline {
    /// A pipeline from a source, effects and a sink, each with the name shown in stats.
    pub fn new(
        source: (String, Box<dyn Source>),
        effects: Vec<(String, EffectStage)>,
        sink: (String, Box<dyn Sink>),
    ) -> Self {
        let mut nodes = Vec::with_capacity(effects.len() + 2);
        // Names must be unique in a graph; a chain built in code may repeat one.
        let mut seen: Vec<String> = Vec::new();
        let mut unique = |name: String| {
            let k = seen.iter().filter(|s| **s == name).count();
            seen.push(name.clone());
            if k == 0 {
                name
            } else {
                format!("{name}#{}", k + 1)
            }
        };
        nodes.push(Node::new(
            unique(source.0),
            NodeKind::Source {
                source: source.1,
                on_end: OnEnd::Stop,
            },
            vec![],
        ));
        for (name, stage) in effects {
            let input = nodes.len() - 1;
            let element = stage.factory.name().to_string();
            let mut node = Node::new(unique(name), NodeKind::Effect(stage), vec![input]);
            node.element = element;
            // A chain has no taps: every stage holds the output back, as it always did.
            node.leaky = Some(false);
            nodes.push(node);
        }
        let input = nodes.len() - 1;
        nodes.push(Node::new(
            unique(sink.0),
            NodeKind::Sink {
                sink: sink.1,
                master: true,
            },
            vec![input],
        ));
        let graph = Graph::new(nodes).expect("a chain of distinct names is a valid graph");
        Pipeline { graph }
    }

    /// The source's frame rate: the default output rate of a paced run.
    pub fn source_rate(&self) -> Rational {
        self.graph.source_rate()
    }

    /// The graph this chain is.
    pub fn into_graph(self) -> Graph {
        self.graph
    }

    /// See [`Graph::prepare`].
    pub fn prepare(self, options: crate::Options) -> Result<crate::Prepared> {
        self.graph.prepare(options)
    }
}
