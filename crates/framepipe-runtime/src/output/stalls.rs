//! Stall checks: a stage running one frame for too long is reported once.

use std::sync::atomic::Ordering;

use crate::sched::{Shared, Version};
use crate::stats::Event;

/// Reports, once per stage, a stage that has been running one frame for longer than `stall_ns`.
/// Not before the show has started (`started`: its first frame released): the first frames
/// carry the start-up (a decoder's first frame, caches, pools), which is no stall.
pub(super) fn check_stalls(shared: &Shared, ver: &Version, stall_ns: u64, now: i64, started: bool) {
    if !started {
        return;
    }
    // A follower output thread (stall `u64::MAX`) leaves stall reports to the master's.
    let Ok(stall_ns) = i64::try_from(stall_ns) else {
        return;
    };
    for (stage, since) in &shared.running {
        let s = stage.load(Ordering::Acquire);
        if s == 0 {
            continue;
        }
        let elapsed = now - since.load(Ordering::Relaxed);
        // (A job of the version before a live edit may name a node this one lacks.)
        let Some(counter) = ver.stages.get(s - 1) else {
            continue;
        };
        if elapsed > stall_ns && counter.report_stall_once() {
            shared.emit(Event::Stalled {
                stage: counter.name.clone(),
                elapsed_ms: (elapsed / 1_000_000) as u64,
            });
        }
    }
}
