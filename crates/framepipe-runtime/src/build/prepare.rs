//! [`Graph::prepare`]: a show's first version, built, and the state its threads share.

use std::sync::Arc;

use framepipe_core::{Result, VideoInfo};

use super::*;
use crate::memory::MemoryBook;
use crate::model::{Graph, OnEnd, Options, Part, Plan};
use crate::sched::{Scheduler, Shared};
use crate::show::Prepared;
use crate::stats::Counters;
use crate::stats::ShowView;

impl Graph {
    /// Negotiates every node's shape, makes the frame pools and every effect and mixer
    /// instance, starts the sinks, and readies the workers' state. Everything that allocates
    /// happens here.
    pub fn prepare(self, options: Options) -> Result<Prepared> {
        let (threads, asked_in_flight) = options.resolved();
        let plan = Plan::new(self)?;
        let rate = plan.rate;
        let infos: Vec<VideoInfo> = plan.nodes.iter().map(|e| e.info).collect();
        let in_flight =
            crate::memory::in_flight(threads, asked_in_flight, &infos, shortest_run(&plan));
        let memory = Arc::new(MemoryBook::default());
        let Built {
            ver,
            live,
            node_states,
            sinks,
            port_nodes,
            graph_view,
            moves: _,
            pool_plans,
        } = build_version(
            plan,
            &VersionCtx {
                threads,
                in_flight,
                options,
                number: 0,
                running: None,
                memory: &memory,
                admit: Admit::First,
            },
        )?;
        let counters = Arc::new(Counters::new(Arc::clone(&ver.stages), memory));
        let view = ShowView::new(graph_view, &live);
        let state = Scheduler::new(Arc::new(ver), threads, port_nodes, node_states);
        let shared = Shared::new(state, rate, threads, live, counters, view);
        Ok(Prepared::new(
            Arc::new(shared),
            sinks,
            infos,
            in_flight,
            options,
            pool_plans,
        ))
    }
}

/// Frames in flight are never more than the shortest source that stops the run gives: its
/// `len_hint` (`None`: no such source says).
fn shortest_run(plan: &Plan) -> Option<u64> {
    plan.nodes
        .iter()
        .filter_map(|e| match &e.part {
            Part::Source {
                source,
                on_end: OnEnd::Stop,
            } => Some(source.len_hint()),
            _ => None,
        })
        .fold(None, |acc: Option<Option<u64>>, h| match (acc, h) {
            (None, h) => Some(h),
            (Some(Some(a)), Some(b)) => Some(Some(a.min(b))),
            (Some(a), None) => Some(a),
            (Some(None), b) => Some(b),
        })
        .flatten()
}
