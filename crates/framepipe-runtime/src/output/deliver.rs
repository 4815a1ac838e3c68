//! Delivery: taking the port's next frame from the scheduler (returning the previous one in
//! the same critical section), and releasing a frame to the sink at its deadline.

use std::sync::atomic::Ordering;

use framepipe_core::Sink;

use super::pace::{allowed_at, on_grid};
use super::stalls::check_stalls;
use super::{Due, Next, Output};
use crate::exec::guard;
use crate::sched::{PortItem, Shared};
use crate::stats::LateFrame;
use framepipe_clock::now_ns;

impl Output {
    /// Takes the next frame when it is there: `Ok(Some)`; `Ok(None)` at the end; `Err(next)`:
    /// not yet, wait as `next` says (or poll again at once: a command, an edit, the time to let
    /// the next frame begin, a repeat given to the sink).
    pub(super) fn take(
        &mut self,
        shared: &Shared,
        sink: &mut dyn Sink,
        now: i64,
    ) -> std::result::Result<Option<PortItem>, Next> {
        let port = self.port;
        // A signal raised before this lock is seen in it; later ones raise it again.
        shared.port_signals[port].take();
        let mut st = shared.lock_output();
        self.let_begin(shared, &mut st, now);
        if let Some((slot, v, r)) = self.done.take() {
            st.sink_done(shared, port, slot, v, r);
        }
        let got = st.take_ready(port);
        let end = got.is_none() && st.finished();
        drop(st);
        if got.is_some() || end {
            return Ok(got);
        }
        check_stalls(
            shared,
            &self.ver,
            self.stall_ns,
            now,
            self.released_seq.is_some(),
        );
        if self.commands.as_ref().is_some_and(|r| r.pending() > 0)
            || self
                .edits_link
                .as_ref()
                .is_some_and(|l| l.ready.load(Ordering::Acquire))
            || shared.version.load(Ordering::Acquire) != self.ver.number
        {
            return Err(Next::Again);
        }
        let mut wake = now + self.poll_ns;
        if let Some(at) = self.begin_at {
            if now >= at {
                // The next frame's time to begin: read commands, then let it.
                return Err(Next::Again);
            }
            wake = wake.min(at);
        }
        if let (true, false, Some(p), Some((ctx, frame))) = (
            self.live_policy,
            self.transport.is_paused(),
            self.pacer.as_mut(),
            self.last.as_ref(),
        ) {
            if let Some(deadline) = p.next_deadline() {
                if now >= deadline {
                    // Nothing new at this deadline: show the previous frame again.
                    self.last_release_ns = Some(p.wait_next().released_ns);
                    p.stats_mut().record_repeat();
                    shared.counters.count_repeats(1);
                    let sink_name = &self.sink_name;
                    let result = guard(sink_name, || sink.consume(ctx, frame));
                    // Look for the next frame (or the end) after every repeat: a repeat that
                    // outlasts a period must not lead straight to another one, or a slow sink
                    // would repeat for ever.
                    let mut st = shared.lock_output();
                    if let Err(e) = result {
                        st.fail(e);
                        st.after_change(shared);
                    }
                    let got = st.take_ready(port);
                    let end = got.is_none() && st.finished();
                    drop(st);
                    if got.is_some() || end {
                        return Ok(got);
                    }
                    return Err(Next::Again);
                }
                wake = wake.min(deadline);
            }
        }
        Err(Next::Wait(wake))
    }

    /// Releases a frame whose deadline has come (or an unpaced one): the frame clock's figures,
    /// then the sink.
    pub(super) fn release(&mut self, shared: &Shared, sink: &mut dyn Sink, due: Due) -> Next {
        let Due {
            item, frame_late, ..
        } = due;
        let (ready_ns, begun_ns, seq) = (item.ready_ns, item.begun_ns, item.ctx.seq);
        if let Some(p) = self.pacer.as_mut() {
            // The deadline has passed (the driver waited for it): no wait here.
            let tick = p.wait_next();
            self.last_release_ns = Some(tick.released_ns);
            if tick.lateness_ns > framepipe_clock::DEFAULT_LATE_THRESHOLD_NS {
                shared.counters.count_late();
                let allowed_at = allowed_at(&self.allowed, self.allowed_n, seq);
                let budget_ns = allowed_at
                    .map(|(_, b)| b)
                    .or(self.budget)
                    .unwrap_or(0)
                    .min(i64::MAX as u64) as i64;
                self.late_log.push(LateFrame {
                    deadline_ns: tick.deadline_ns,
                    lateness_ns: tick.lateness_ns,
                    ready_ns: ready_ns - tick.deadline_ns,
                    begun_ns: begun_ns - tick.deadline_ns,
                    budget_ns,
                    allowed_ns: allowed_at.map(|(t, _)| t - tick.deadline_ns),
                });
            }
            // The worst lateness of each whole second, for live displays (two atomic stores a
            // second).
            if tick.released_ns - self.peak_window.0 >= 1_000_000_000 {
                let us = (self.peak_window.1.max(0) / 1000) as u64;
                shared.counters.set_lateness_peak_us(us);
                self.peak_window = (tick.released_ns, 0);
            }
            self.peak_window.1 = self.peak_window.1.max(tick.lateness_ns);
            if frame_late && !self.live_policy {
                // Slow policy: the pipeline could not keep up; the clock slips to this frame
                // instead of hurrying the next (on a host's grid: to the grid's first time at
                // least half a period later, so the show stays with its group).
                match self.grid {
                    None => p.slip_to(tick.released_ns),
                    Some(_) => p.resync(on_grid(
                        self.grid,
                        self.period_ns,
                        tick.released_ns + self.half_period_ns,
                    )),
                }
            }
        }

        // 5. The sink.
        let PortItem {
            slot,
            ctx,
            frame,
            version,
            ..
        } = item;
        let started = std::time::Instant::now();
        shared.mark_running(self.out_slot, Some(self.sink_stage));
        let result = guard(&self.sink_name, || sink.consume(&ctx, &frame));
        shared.mark_running(self.out_slot, None);
        self.sink_counter.record(started.elapsed());
        if result.is_ok() && self.port == 0 {
            shared.counters.count_frame_out();
        }
        if let Some((first, drain_ns, at_arm)) = self.edit_watch {
            if ctx.seq >= first {
                let repeats = shared.counters.repeated().saturating_sub(at_arm);
                shared.counters.record_edit(drain_ns, repeats);
                self.edit_watch = None;
            }
        }
        if self.live_policy && self.pacer.is_some() {
            self.last = Some((ctx, frame));
        } else {
            drop(frame);
        }
        let failed = result.is_err();
        self.released_seq = Some(ctx.seq);
        if self.gate_opened_ns.is_none() {
            self.gate_opened_ns = Some(now_ns());
        }
        self.done = Some((slot, version, result));
        if failed {
            self.ended = true;
            return Next::Done;
        }
        Next::Again
    }
}
