//! A host's pool filler (`fp-pool-fill`): makes frames ahead of need, off the frame path, by
//! what the shows hold together and their latency budgets (see [`SharedPools`]).

use std::sync::Arc;

use framepipe_core::FramePool;

use super::shared::{Member, Registry, Shape};
use super::SharedPools;

/// How often a host's pool filler looks at its pools (and at the shows' latency budgets).
const TOP_UP_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// How long a worker may be held up (its CPU taken away, other shows' frames before this
/// one's) without the filler having seen it: the default latency budget then grows by 5/4 of
/// it, and so do the frames a show begins ahead. A show whose period is short against it (1000
/// fps) is filled for every frame it may have in flight; at 25 fps it changes nothing (10 ms is
/// under a period). A longer delay that makes a worker's acquire grow the pool raises the
/// frames kept free by as many (the pool's own evidence, `grown_on_acquire`).
const WORKER_DELAY_NS: u64 = 10_000_000;

/// What the filler needs of a paced show: its latency budget (read lock-free), its period and
/// the most frames it has in flight.
#[derive(Debug, Clone)]
pub(crate) struct Pace {
    counters: Arc<crate::stats::Counters>,
    period_ns: u64,
    in_flight: usize,
}

impl Pace {
    /// A show's, read from its `counters` (the latency budget), its output rate `pace`
    /// (`None`: unpaced, then `None`: it grows the pools on demand only) and its frames in
    /// flight.
    pub(crate) fn of(
        counters: &Arc<crate::stats::Counters>,
        pace: Option<framepipe_core::Rational>,
        in_flight: usize,
    ) -> Option<Pace> {
        pace.map(|rate| Pace {
            counters: Arc::clone(counters),
            period_ns: rate.period_ns(),
            in_flight,
        })
    }
}

impl SharedPools {
    /// Starts the filler unless it runs (see [`SharedPools`]); it ends when no version holds a
    /// handle any more and every pool is dropped.
    pub(super) fn keep_filled(&self, reg: &mut Registry) {
        if reg.filling {
            return;
        }
        let pools = self.clone();
        let started = std::thread::Builder::new()
            .name("fp-pool-fill".into())
            .spawn(move || pools.filler());
        reg.filling = started.is_ok();
    }

    /// The filler's loop: every [`TOP_UP_EVERY`], the registry's sweep (the members of dropped
    /// versions whose frames are back leave; pools nobody holds any more are dropped, here),
    /// then each pool to its target, then enough frames free (within the quotas in force).
    /// Nothing is allocated per look once its lists have grown to the number of pools.
    fn filler(&self) {
        let mut work = Vec::new();
        let mut gone = Vec::new();
        loop {
            work.clear();
            {
                let mut reg = self.lock();
                reg.sweep(&mut gone);
                if reg
                    .shapes
                    .iter()
                    .all(|s| s.members.is_empty() && s.pool.is_none())
                {
                    reg.filling = false;
                    drop(reg);
                    gone.clear();
                    return;
                }
                reg.look(&mut work);
            }
            // Their buffers are freed here, outside the lock.
            gone.clear();
            fill_all(&work);
            std::thread::sleep(TOP_UP_EVERY);
        }
    }
}

/// What the filler does for one pool after a look: (the pool, its target, frames to keep
/// free, the most frames it may make: the quotas in force).
type FillWork = (FramePool, usize, usize, usize);

impl Registry {
    /// Reads every show's latency budget and every pool's evidence, and lists what to make
    /// (one atomic load per show, one per pool: no lock a show takes, nothing allocated once
    /// `work` has room for every pool).
    pub(super) fn look(&mut self, work: &mut Vec<FillWork>) {
        work.clear();
        let threads = self.threads;
        for shape in &mut self.shapes {
            let Some(pool) = &shape.pool else { continue };
            let grown = pool.sharing().grown_on_acquire;
            if grown > shape.grown_seen {
                shape.extra_free = shape.extra_free.saturating_add(grown - shape.grown_seen);
                shape.grown_seen = grown;
            }
            let target = shape.fill_target(threads, self.begin_slack_ns);
            shape.target = shape.target.max(target);
            let free = threads.saturating_add(shape.extra_free);
            work.push((pool.clone(), target, free, shape.quota));
        }
    }
}

impl Shape {
    /// What the filler makes ahead of need now (see [`SharedPools`]): at most the quotas.
    pub(super) fn fill_target(&self, threads: usize, begin_slack_ns: u64) -> usize {
        self.members
            .iter()
            .map(|m| m.holds(begin_slack_ns))
            .fold(0usize, usize::saturating_add)
            .saturating_add(2 * threads)
            .min(self.quota)
    }
}

impl Member {
    /// What it may hold at once (see [`SharedPools`]): its idle frames, and the frames it
    /// begins ahead by its latency budget now (read lock-free) grown by a worker's delay and
    /// by `begin_slack_ns` (how much earlier its host lets a frame begin); 0 when unpaced.
    pub(super) fn holds(&self, begin_slack_ns: u64) -> usize {
        let Some(p) = &self.pace else { return 0 };
        let budget_ns = p
            .counters
            .latency_budget_us()
            .saturating_mul(1000)
            .saturating_add(WORKER_DELAY_NS.saturating_mul(5) / 4);
        let begun = budget_ns
            .saturating_add(begin_slack_ns)
            .checked_div(p.period_ns)
            .unwrap_or(0)
            .saturating_add(1);
        let begun = usize::try_from(begun)
            .unwrap_or(usize::MAX)
            .min(p.in_flight);
        // The one waiting frame is in `idle`.
        self.idle
            .saturating_add(self.ahead.saturating_mul(begun.saturating_sub(1)))
            .min(self.quota)
    }
}

/// Makes each pool's frames up to its target, then until it has its frames free (on the
/// filler's or the host's starting thread, never a worker's or an output's).
pub(super) fn fill_all(work: &[FillWork]) {
    for (pool, target, free, cap) in work {
        pool.fill((*target).min(*cap));
        while pool.available() < *free && pool.allocated() < *cap {
            pool.fill(pool.allocated() + 1);
        }
    }
}
