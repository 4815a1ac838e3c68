//! Running a source on one frame: reading (resampled to the graph's rate), its end (stop,
//! loop, hold), and its live properties.

use framepipe_core::{Error, Frame, Result};

use super::SourceInst;
use crate::live::{assign, lock};
use crate::model::OnEnd;
use crate::sched::{Shared, Version};
use crate::stats::Event;

impl Shared {
    /// The frame for output frame `ctx` from a source: read it (several when the source is
    /// faster than the graph, none when slower: the last one again), and at its end stop,
    /// rewind or hold as asked. `Ok(None)`: the end, the run stops.
    pub(super) fn run_source(
        &self,
        ver: &Version,
        node: usize,
        slot: usize,
        s: &mut SourceInst,
        ctx: &framepipe_core::FrameCtx,
    ) -> Result<Option<Frame>> {
        if s.giving_last {
            return Ok(s.last.clone());
        }
        if !s.applied.is_empty() && slot < ver.topo.cap {
            self.sync_source(ver, node, slot, s, ctx.seq);
        }
        // The source's own frame number for this output frame.
        let seq = ctx.seq - s.origin;
        let want = match s.resample {
            None => seq,
            Some((src, graph)) => {
                let num = seq as u128 * graph.den as u128 * src.num as u128;
                let den = graph.num as u128 * src.den as u128;
                u64::try_from(num / den.max(1)).unwrap_or(u64::MAX)
            }
        };
        let mut rewound = false;
        while s.produced <= want || (s.last.is_none() && s.keep_last) {
            let mut frame = ver.pools[node].try_acquire()?;
            let own = framepipe_core::FrameCtx {
                seq: s.produced,
                pts_ns: s
                    .resample
                    .map_or(ctx.pts_ns, |(src, _)| src.frame_time_ns(s.produced)),
                beat: ctx.beat,
            };
            if s.source.fill(&own, &mut frame)? {
                s.produced += 1;
                rewound = false;
                let frame = frame.freeze();
                if !s.keep_last {
                    return Ok(Some(frame));
                }
                s.last = Some(frame);
                continue;
            }
            drop(frame);
            match s.on_end {
                OnEnd::Stop => return Ok(self.source_ended(ver, node, s.produced)),
                OnEnd::Hold => {
                    if s.last.is_none() {
                        return Ok(self.source_ended(ver, node, s.produced));
                    }
                    s.giving_last = true;
                    break;
                }
                OnEnd::Loop => {
                    let name = &*ver.stages[node].name;
                    if rewound {
                        return Err(Error::element(
                            name,
                            "on-end=loop: no frame after going back to the start",
                        ));
                    }
                    if !s.source.rewind()? {
                        return Err(Error::element(
                            name,
                            "on-end=loop: this source cannot go back to its start (a live \
                             stream or a pipe); use on-end=hold or on-end=stop",
                        ));
                    }
                    rewound = true;
                }
            }
        }
        Ok(s.last.clone())
    }

    /// A source with live properties (a frei0r generator) takes frame `seq`'s values, as
    /// [`sync_params`](Self::sync_params) does for an effect: sampled when the node starts the
    /// frame, what changed copied under the snapshot's lock, the element called with no lock.
    fn sync_source(&self, ver: &Version, node: usize, slot: usize, s: &mut SourceInst, seq: u64) {
        self.start_node(ver, node, slot, seq);
        {
            let snap = lock(&ver.snapshots[slot]);
            for (((applied, changed), value), (stamp, &set)) in s
                .applied
                .iter_mut()
                .zip(s.changed.iter_mut())
                .zip(snap.values(node).iter())
                .zip(s.stamps.iter_mut().zip(snap.stamps(node)))
            {
                // A newer set counts even with the value in force (a trigger); stamps
                // only grow, so a version switch never repeats one.
                *changed = *applied != *value || set > *stamp;
                *stamp = (*stamp).max(set);
                if *changed {
                    assign(applied, value);
                }
            }
        }
        for j in 0..s.applied.len() {
            if !s.changed[j] || s.refused[j] {
                continue;
            }
            let Some(name) = ver.param_names[node].get(j) else {
                continue;
            };
            if let Err(e) = s.source.set_property(name, &s.applied[j]) {
                s.refused[j] = true;
                self.emit(Event::PropertyRejected {
                    stage: ver.stages[node].name.clone(),
                    prop: name.clone(),
                    reason: e.to_string(),
                });
            }
        }
    }

    /// Says that source `node` ended the run after `frames` frames ([`Event::SourceEnded`]);
    /// `None`, the end, for `run_source` to return.
    fn source_ended(&self, ver: &Version, node: usize, frames: u64) -> Option<Frame> {
        self.emit(Event::SourceEnded {
            stage: ver.stages[node].name.clone(),
            frames,
        });
        None
    }
}
