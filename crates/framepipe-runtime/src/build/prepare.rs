//! [`Graph::prepare`]: a show's first version, built, and the state its threads share.

use std::sync::Arc;

use framepipe_core::{Result, VideoInfo};

use super::*;
use crate::model::Options;
use crate::model::{Graph, OnEnd};
use crate::model::{Part, Plan};
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
        // Frames in flight: never more than the shortest source that stops the run gives.
        let len_hint = plan
            .nodes
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
            .flatten();
        let in_flight = crate::memory::in_flight(threads, asked_in_flight, &infos, len_hint);
        let memory = Arc::new(crate::memory::MemoryBook::default());
        let built = build_version(
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
        let source_rate = rate;
        let stall_timeout_ns = match (options.stall_timeout_ns, options.pace) {
            (0, Some(pace)) => pace.period_ns().saturating_mul(5).max(100_000_000),
            // Unpaced (batch) runs have no deadline to miss: only report what looks stuck.
            (0, None) => source_rate.period_ns().saturating_mul(5).max(1_000_000_000),
            (t, _) => t,
        };
        let Built {
            ver,
            live,
            node_states,
            sinks,
            port_nodes,
            graph_view,
            moves: _,
            pool_plans,
        } = built;
        let stages = Arc::clone(&ver.stages);
        let view = ShowView::new(graph_view, &live);
        let state = Scheduler::new(Arc::new(ver), threads, port_nodes, node_states);
        let counters = Arc::new(Counters::new(stages, memory));
        let shared = Shared::new(state, rate, threads, live, counters, view);
        Ok(Prepared {
            shared: Arc::new(shared),
            sinks,
            infos,
            threads,
            in_flight,
            options,
            stall_timeout_ns,
            commands: None,
            editor: None,
            own_pools: pool_plans,
            pool_share: None,
        })
    }
}
