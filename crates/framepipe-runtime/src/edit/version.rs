//! A live edit's next version: planned against the running one, built on the edit thread,
//! its pools readied once every check has passed.

use std::sync::Arc;

use framepipe_core::{Error, Result};

use crate::build::*;
use crate::memory::Pace;
use crate::model::Graph;
use crate::model::Options;
use crate::model::Plan;
use crate::sched::{EditPlan, NextVersion, Shared, Version};

/// Plans `graph` as the next version of `ver` (its sources' and sinks' shapes as they run).
fn plan_against(
    graph: Graph,
    ver: &Version,
    rate: framepipe_core::Rational,
) -> Result<(RunningVersion<'_>, Plan)> {
    let running = RunningVersion {
        ver,
        ports: &ver.ports,
    };
    let info = |name: &str| running.index_of(name).map(|o| ver.infos[o]);
    let plan = Plan::build(
        graph,
        Some(&crate::model::RunningGraph { rate, info: &info }),
    )?;
    Ok((running, plan))
}

/// What the edit from `running` to `next` does to each running node, for the commands on it
/// (see `Live::gone`): it goes on when it moves (`moves`) or `next` has a node of its name and
/// element (a replaced one, which takes what commands set on it meanwhile: `Live::carry`).
fn fates_of(running: &Version, next: &Version, moves: &[(usize, usize)]) -> Vec<crate::live::Fate> {
    use crate::live::Fate;
    (0..running.names.len())
        .map(|o| {
            if moves.iter().any(|&(from, _)| from == o) {
                return Fate::GoesOn;
            }
            match next.names.iter().position(|n| *n == running.names[o]) {
                None => Fate::Removed,
                Some(j) if next.elements[j] == running.elements[o] => Fate::GoesOn,
                Some(_) => Fate::Replaced,
            }
        })
        .collect()
}

/// Builds a live edit's next version of the running graph (on the edit thread, never on a
/// worker or an output thread): negotiation against the running sources' and sinks' shapes,
/// new pools, instances of the new nodes, and the scheduler state, ready to be switched in.
pub(crate) fn prepare_edit(
    graph: Graph,
    shared: &Arc<Shared>,
    options: Options,
    admit: Admit,
) -> Result<NextVersion> {
    let ver = Arc::clone(shared.lock().running_version());
    let (running, plan) = plan_against(graph, &ver, shared.rate)?;
    let built = build_version(
        plan,
        &VersionCtx {
            threads: shared.threads,
            in_flight: ver.topo.cap,
            options,
            number: ver.number + 1,
            running: Some(&running),
            memory: &shared.counters.memory,
            admit,
        },
    )?;
    let Built {
        ver: next,
        live,
        node_states,
        sinks: _,
        port_nodes,
        graph_view,
        moves,
        pool_plans,
    } = built;
    // A source that blocks runs on an IO thread, one per such source: started now if the
    // show had fewer. (The new pools are filled, or in a host replaced by quota handles on the
    // host's, by the edit thread once every check of the edit has passed: `fill_edit_pools`.)
    let blocking = next.topo.nodes.iter().filter(|t| t.blocks).count();
    if blocking > 0 {
        shared
            .ensure_io_threads(blocking)
            .map_err(|e| Error::io("starting an IO thread", e))?;
    }
    // The show's first GPU node: its GPU thread, started (its context opened) now.
    if next.topo.nodes.iter().any(|t| t.gpu) {
        shared.ensure_gpu_thread(next.topo.cap)?;
    }
    let mut moved = vec![false; next.topo.nodes.len()];
    for &(_, j) in &moves {
        moved[j] = true;
    }
    let fates = fates_of(&ver, &next, &moves);
    let removed = (0..fates.len())
        .filter(|&o| fates[o] == crate::live::Fate::Removed)
        .map(|o| Arc::clone(&ver.names[o]))
        .collect();
    let plan = EditPlan {
        live_stages: live.into_stages(),
        moves,
        fates,
        removed,
        moved,
        graph_view: Some(graph_view),
        edit_pools: pool_plans,
    };
    Ok(NextVersion::new(
        Arc::new(next),
        port_nodes,
        node_states,
        plan,
    ))
}

/// Readies a live edit's new pools on the edit thread, once every check of the edit has passed
/// (its memory checks, a crossfade's): nothing is made for an edit that is refused. In a host,
/// they are replaced by quota handles on the host's pools (a new shape's pool made and filled
/// here; the host's filler does the rest); alone, or for a pool the host has none for, their
/// buffers are made (allocated, every page touched): left lazy, they would be made by the
/// workers running the first frames after the switch (`VersionPools::share_for_edit`,
/// `VersionPools::fill_own_now`).
pub(crate) fn fill_edit_pools(p: &mut NextVersion, shared: &Shared, options: Options) {
    let own = p.take_edit_pools();
    let running = Arc::clone(shared.lock().running_version());
    // Only the edit thread holds the new version before it is sent (`NextVersion::new` kept one
    // reference); were it otherwise, it keeps its own pools.
    if let Some(next) = p.version_mut() {
        let pace = Pace::of(&shared.counters, options.pace, running.topo.cap);
        next.pools.share_for_edit(&own, &running.pools, pace);
    }
    drop(running);
    p.version().pools.fill_own_now();
}

/// What the budget would count for the version `graph` makes once `p` runs (a crossfade's
/// version, not switched in yet; `graph`: the version after the fade), nothing built: its
/// plan against `p`'s version, as [`prepare_edit`] will plan it then.
pub(crate) fn need_after(
    graph: Graph,
    p: &NextVersion,
    shared: &Shared,
    options: Options,
) -> Result<Need> {
    let ver = p.version();
    let (running, plan) = plan_against(graph, ver, shared.rate)?;
    Ok(need_of(
        &plan,
        &VersionCtx {
            threads: shared.threads,
            in_flight: ver.topo.cap,
            options,
            number: ver.number + 1,
            running: Some(&running),
            memory: &shared.counters.memory,
            admit: Admit::FadeEnd,
        },
    ))
}
