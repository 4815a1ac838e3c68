//! Delivery: taking the port's next frame from the scheduler (returning the previous one in
//! the same critical section), and releasing a frame to the sink at its deadline.

use std::sync::Arc;

use framepipe_core::Sink;

use super::master::Master;
use super::pace::Repeat;
use super::{Due, Next, Output};
use crate::exec::guard;
use crate::sched::{PortItem, Replaced, Shared, SwitchNews};

impl Output {
    /// A live edit switched versions: looks at the new one (its sink node and that node's
    /// counters), under the scheduler lock; the master also takes, in that critical section,
    /// the switch's news (to answer the edit) and the version it replaced once that is done
    /// (to hand it to the edit thread), also when it waits for that alone ([`Master::retire_due`]).
    pub(super) fn follow_switch(
        &mut self,
        shared: &Shared,
    ) -> (Option<SwitchNews>, Option<Replaced>) {
        let port = self.port;
        let changed = shared.running_version_number() != self.ver.number;
        if !changed && !self.master.as_ref().is_some_and(Master::retire_due) {
            return (None, None);
        }
        let mut st = shared.lock_output();
        if changed {
            self.ver = Arc::clone(st.running_version());
            self.sink_stage = st.sink_node(port);
        }
        let (news, switched) = if self.master.is_some() {
            (st.take_switch_news(), st.take_replaced())
        } else {
            (None, None)
        };
        drop(st);
        if changed {
            self.sink_counter = Arc::clone(&self.ver.stages[self.sink_stage]);
        }
        (news, switched)
    }

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
        self.check_stalls(shared, now);
        if self.master.as_ref().is_some_and(|m| m.waiting())
            || shared.running_version_number() != self.ver.number
        {
            return Err(Next::Again);
        }
        let mut wake = now + self.poll_ns;
        if let Some(at) = self.begin_at() {
            if now >= at {
                // The next frame's time to begin: read commands, then let it.
                return Err(Next::Again);
            }
            wake = wake.min(at);
        }
        let paused = self
            .master
            .as_ref()
            .is_some_and(|m| m.transport.is_paused());
        let sink_name = &self.sink_name;
        let repeat = match self.pacing.as_mut().filter(|_| !paused) {
            Some(p) => p.repeat(shared, now, |ctx, frame| {
                guard(sink_name, || frame.to_sink(sink, ctx))
            }),
            None => None,
        };
        match repeat {
            Some(Repeat::Shown(result)) => {
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
                Err(Next::Again)
            }
            Some(Repeat::At(deadline)) => Err(Next::Wait(wake.min(deadline))),
            None => Err(Next::Wait(wake)),
        }
    }

    /// Releases a frame whose deadline has come (or an unpaced one): the frame clock's figures,
    /// then the sink.
    pub(super) fn release(&mut self, shared: &Shared, sink: &mut dyn Sink, due: Due) -> Next {
        let Due {
            item, frame_late, ..
        } = due;
        let times = (item.ready_ns, item.begun_ns, item.ctx.seq);
        if let Some(p) = self.pacing.as_mut() {
            let gate = self.master.as_ref().and_then(|m| m.gate.as_ref());
            p.release(shared, times, frame_late, gate);
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
        let result = guard(&self.sink_name, || frame.to_sink(sink, &ctx));
        shared.mark_running(self.out_slot, None);
        self.sink_counter.record(started.elapsed());
        if let Some(m) = self.master.as_mut() {
            if result.is_ok() {
                shared.counters.count_frame_out();
            }
            m.released(shared, ctx.seq);
        }
        match self.pacing.as_mut() {
            Some(p) => p.keep_shown(ctx, frame),
            None => drop(frame),
        }
        let failed = result.is_err();
        self.released_seq = Some(ctx.seq);
        if let Some(g) = self.gate_mut() {
            g.released();
        }
        self.done = Some((slot, version, result));
        if failed {
            self.ended = true;
            return Next::Done;
        }
        Next::Again
    }
}
