//! Stall checks: the master output reports, once per stage, a stage running one frame for
//! too long (while it waits for a frame, or is paused). The followers leave it to the master.

use std::sync::atomic::Ordering;

use super::Output;
use crate::sched::{Shared, Version};
use crate::stats::Event;

impl Output {
    /// The master: reports the stages running one frame longer than its threshold.
    pub(super) fn check_stalls(&self, shared: &Shared, now: i64) {
        if let Some(m) = self.master.as_ref() {
            let started = self.released_seq.is_some();
            check_stalls(shared, &self.ver, m.stall_ns, now, started);
        }
    }
}

/// Reports, once per stage, a stage that has been running one frame for longer than `stall_ns`.
/// Not before the show has started (`started`: its first frame released): the first frames
/// carry the start-up (a decoder's first frame, caches, pools), which is no stall.
fn check_stalls(shared: &Shared, ver: &Version, stall_ns: u64, now: i64, started: bool) {
    if !started {
        return;
    }
    // `u64::MAX`: no stall reports.
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
        if elapsed > stall_ns && !counter.stall_reported.swap(true, Ordering::Relaxed) {
            shared.emit(Event::Stalled {
                stage: counter.name.clone(),
                elapsed_ms: (elapsed / 1_000_000) as u64,
            });
        }
    }
}
