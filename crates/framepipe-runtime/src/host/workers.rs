//! The host's workers: `threads` of them serve every show, taking turns at the shows queued
//! on the host's work queue ([`HostQueue`], a [`WorkSource`] of the one worker loop in
//! `exec`).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use framepipe_core::Error;

use super::signals::HostSignals;
use crate::exec::{work, WorkSource};
use crate::model::JOIN_GRACE;
use crate::sched::{Locked, Scheduler, Shared};

/// The host workers' work source: any show whose index is queued on the host's work queue
/// (`HostSignals::work_for`). A turn takes one job and the jobs its reports hand straight on
/// (cache-warm, as a worker of the show's own would), then goes back to the queue; a show with
/// more work than the worker took is queued again, so that another worker joins in.
struct HostQueue {
    signals: Arc<HostSignals>,
    shows: Arc<[Arc<Shared>]>,
}

impl WorkSource for HostQueue {
    const STAYS: bool = false;

    fn next_show(&self) -> Option<&Shared> {
        let i = self.signals.next_work()?;
        Some(&self.shows[i])
    }

    fn took(&self, st: &mut Scheduler) {
        if st.has_work() {
            st.announce_work();
        }
    }

    fn idle<'a>(&self, _show: &'a Shared, _st: Locked<'a>) -> Option<Locked<'a>> {
        // Announced without a job left for this worker (another took it): back to the queue.
        None
    }
}

/// Starts the host's `threads` workers (`fp-worker-N`). Should none start, every show fails
/// with the reason (nothing would run it).
pub(super) fn start_workers(
    signals: &Arc<HostSignals>,
    shows: &Arc<[Arc<Shared>]>,
    threads: usize,
) -> Vec<JoinHandle<()>> {
    let mut workers = Vec::with_capacity(threads);
    for w in 0..threads {
        let queue = HostQueue {
            signals: Arc::clone(signals),
            shows: Arc::clone(shows),
        };
        let spawned = std::thread::Builder::new()
            .name(format!("fp-worker-{w}"))
            .spawn(move || work(&queue, w));
        match spawned {
            Ok(h) => workers.push(h),
            Err(e) => {
                // Without workers nothing would run: every show fails with the reason.
                if workers.is_empty() {
                    for s in shows.iter() {
                        let mut st = s.lock();
                        st.fail(Error::io("starting a worker thread", e.kind().into()));
                        st.after_change(s);
                    }
                }
            }
        }
    }
    workers
}

/// Joins the host workers; one still blocked inside an element after [`JOIN_GRACE`] (every
/// show has ended) is left running, detached: it exits when the element returns.
pub(super) fn join_or_leave(workers: Vec<JoinHandle<()>>) {
    let deadline = std::time::Instant::now() + JOIN_GRACE;
    while workers.iter().any(|h| !h.is_finished()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    for h in workers {
        if h.is_finished() {
            let _ = h.join();
        }
    }
}
