//! The frame clock of a paced output ([`Pacing`]): each frame's deadline (on a host's grid,
//! catching up without a burst after the driver lost its CPU), its release on the clock with
//! the lateness figures and the log of late frames, the overload policy (the slow policy's
//! slip, the live policy's repeats), and the figures at the end.

use framepipe_clock::{now_ns, CpuMeter, Pacer};
use framepipe_core::{FrameCtx, Result};

use super::gate::Gate;
use crate::model::Overload;
use crate::sched::{Pixels, Shared};
use crate::stats::{LateFrame, LateLog, PacingStats};

/// A paced output's frame clock and what it keeps about its releases.
pub(super) struct Pacing {
    pacer: Pacer,
    overload: Overload,
    /// The live policy: a deadline with no new frame shows the previous one again.
    live_policy: bool,
    /// In a host: the grid its deadlines are on, `anchor + phase + k * period` (the host
    /// spreads its shows' groups over the period; the shows of a group share one grid).
    /// `None`: the first deadline is when the first frame is taken.
    grid: Option<(i64, i64)>,
    period_ns: u64,
    half_period_ns: i64,
    /// Whether the driving thread runs under `SCHED_FIFO` (for the figures).
    realtime: bool,
    cpu: CpuMeter,
    last_release_ns: Option<i64>,
    /// (start of the current second, worst lateness in it so far), ns.
    peak_window: (i64, i64),
    late_log: LateLog,
    /// Live policy: the frame last given to the sink, shown again at a deadline with no new
    /// frame.
    shown: Option<(FrameCtx, Pixels)>,
}

/// What [`Pacing::repeat`] did.
pub(super) enum Repeat {
    /// A deadline had passed: the previous frame was given to the sink again (its result).
    Shown(Result<()>),
    /// The next deadline, at which to show it again if no new frame comes.
    At(i64),
}

impl Pacing {
    pub(super) fn new(pacer: Pacer, overload: Overload, realtime: bool) -> Self {
        let period_ns = pacer.period_ns();
        Pacing {
            pacer,
            overload,
            live_policy: overload == Overload::Live,
            grid: None,
            period_ns,
            half_period_ns: period_ns as i64 / 2,
            realtime,
            cpu: CpuMeter::start(),
            last_release_ns: None,
            peak_window: (now_ns(), 0),
            late_log: LateLog::default(),
            shown: None,
        }
    }

    /// See [`Output::set_grid`](super::Output::set_grid).
    pub(super) fn set_grid(&mut self, anchor: i64, phase_ns: i64) {
        self.grid = Some((anchor, phase_ns.max(0)));
    }

    /// The next deadline (`None` before the first frame is taken).
    pub(super) fn next_deadline(&self) -> Option<i64> {
        self.pacer.next_deadline()
    }

    /// The first time at or after `t` on this output's deadline grid (`t` without one).
    fn on_grid(&self, t: i64) -> i64 {
        on_grid(self.grid, self.period_ns, t)
    }

    /// After a pause: the clock starts again from `now` (on the grid).
    pub(super) fn resume(&mut self, now: i64) {
        let at = self.on_grid(now);
        self.pacer.resync(at);
    }

    /// The next frame's deadline, and when it may be released: the clock starts at the first
    /// frame (on the grid); the live policy skips deadlines already missed (counted as
    /// repeated); after the driver lost the CPU, deadlines may already have passed: the grid
    /// stays (no drift) but a frame is released no closer than half a period after the
    /// previous one, so the output catches up without a burst.
    pub(super) fn deadline(&mut self, shared: &Shared, now: i64) -> (i64, i64) {
        let p = &mut self.pacer;
        if p.next_deadline().is_none() {
            let origin = on_grid(self.grid, self.period_ns, now);
            p.start_at(origin);
        }
        if self.live_policy {
            let skipped = p.skip_missed(now);
            for _ in 0..skipped {
                p.stats_mut().record_repeat();
            }
            shared.counters.count_repeats(skipped);
        }
        let d = p.next_deadline().expect("started");
        let at = match self.last_release_ns {
            Some(prev) => d.max(prev + self.half_period_ns),
            None => d,
        };
        (d, at)
    }

    /// Live policy, no new frame: at a deadline that has passed (and not paused), gives the
    /// previous frame to `show` again, counted as repeated. `None`: nothing to repeat.
    pub(super) fn repeat(
        &mut self,
        shared: &Shared,
        now: i64,
        show: impl FnOnce(&FrameCtx, &Pixels) -> Result<()>,
    ) -> Option<Repeat> {
        if !self.live_policy {
            return None;
        }
        let (ctx, frame) = self.shown.as_ref()?;
        let deadline = self.pacer.next_deadline()?;
        if now < deadline {
            return Some(Repeat::At(deadline));
        }
        // Nothing new at this deadline: show the previous frame again.
        self.last_release_ns = Some(self.pacer.wait_next().released_ns);
        self.pacer.stats_mut().record_repeat();
        shared.counters.count_repeats(1);
        Some(Repeat::Shown(show(ctx, frame)))
    }

    /// Releases frame `seq` on the clock (its deadline has passed: the driver waited for it):
    /// the lateness figures, a late frame's entry in the late log (with when the master's
    /// `gate` let it begin), and under the slow policy a late frame's slip of the clock.
    /// `ready_ns`, `begun_ns`: when it was ready at the sink and began; `frame_late`: it was
    /// ready only after its deadline.
    pub(super) fn release(
        &mut self,
        shared: &Shared,
        (ready_ns, begun_ns, seq): (i64, i64, u64),
        frame_late: bool,
        gate: Option<&Gate>,
    ) {
        let p = &mut self.pacer;
        // The deadline has passed (the driver waited for it): no wait here.
        let tick = p.wait_next();
        self.last_release_ns = Some(tick.released_ns);
        if tick.lateness_ns > framepipe_clock::DEFAULT_LATE_THRESHOLD_NS {
            shared.counters.count_late();
            let allowed_at = gate.and_then(|g| g.allowed_at(seq));
            let budget_ns = allowed_at
                .map(|(_, b)| b)
                .or(gate.and_then(Gate::budget))
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

    /// The frame just given to the sink: kept to be shown again under the live policy,
    /// dropped (back to its pool) otherwise.
    pub(super) fn keep_shown(&mut self, ctx: FrameCtx, frame: Pixels) {
        if self.live_policy {
            self.shown = Some((ctx, frame));
        } else {
            drop(frame);
        }
    }

    /// The frame clock's figures at the end, with the master's latency `gate` (without one,
    /// its figures are 0). `cap`: the frames in flight at most.
    pub(super) fn figures(mut self, gate: Option<&Gate>, cap: usize) -> PacingStats {
        drop(self.shown.take());
        let budget = gate.and_then(Gate::budget);
        let period_ns = self.period_ns;
        let p = self.pacer;
        PacingStats {
            target_fps: p.rate().as_f64(),
            overload: self.overload,
            lateness: p.stats().summary(),
            realtime: self.realtime,
            cpu_share: self.cpu.share(),
            latency_budget_ms: budget.map_or(0.0, |b| b as f64 / 1e6),
            frames_ahead: budget.map_or(0, |b| {
                usize::try_from(b.div_ceil(period_ns.max(1)))
                    .unwrap_or(usize::MAX)
                    .min(cap)
            }),
            frame_latency_ms: gate
                .and_then(Gate::frame_latency_ns)
                .map_or(0.0, |ns| ns as f64 / 1e6),
            latency_margin_ms: gate.map_or(0.0, |g| g.margin().ns() as f64 / 1e6),
            latency_margin_peak_ms: gate.map_or(0.0, |g| g.margin().peak_ns() as f64 / 1e6),
            late_log: self.late_log,
            standby_rescued: None,
        }
    }
}

/// The first time at or after `t` on the grid `anchor + phase + k * period` (`t` itself without
/// a grid).
pub(super) fn on_grid(grid: Option<(i64, i64)>, period_ns: u64, t: i64) -> i64 {
    match grid {
        None => t,
        Some((anchor, phase)) => {
            let first = anchor + phase;
            let period = period_ns.max(1) as i64;
            first + ((t - first).max(0) + period - 1) / period * period
        }
    }
}

#[cfg(test)]
mod tests {
    use super::on_grid;

    /// A host's shows of one group share the grid: whenever each (re)starts its clock, its
    /// deadlines land on the same times, the first at or after the start, within a period.
    #[test]
    fn deadlines_on_a_grid_are_the_grids_first_time_at_or_after() {
        let period = 40_000_000u64;
        let grid = Some((1_000_000_000, 5_000_000));
        let first = 1_005_000_000;
        assert_eq!(on_grid(None, period, 123), 123);
        // Before the grid's start: its start.
        assert_eq!(on_grid(grid, period, 0), first);
        for t in [
            first,
            first + 1,
            first + 39_999_999,
            first + 40_000_000,
            7_777_777_777,
        ] {
            let d = on_grid(grid, period, t);
            assert!(d >= t && d - t < period as i64, "{t} -> {d}");
            assert_eq!((d - first) % period as i64, 0, "{t} -> {d} is on the grid");
        }
    }
}
