//! The workers: each loops picking a job under the scheduler lock, running it without the
//! lock, and reporting back; running a job (the source, an effect with its per-frame parameter
//! values, a slice); and the guard that turns a panic inside an element into an error.

use std::sync::atomic::Ordering;
use std::time::Instant;

use framepipe_core::{Error, FrameCtx, Result};

use crate::events::Event;
use crate::live::assign;
use crate::slices::PoolSlices;
use crate::state::{Done, Inst, Instance, Job, Shared, Token};

impl Shared {
    pub(crate) fn worker(&self, worker: usize) {
        let mut st = self.lock();
        loop {
            if let Some(mut job) = st.next_job(self) {
                drop(st);
                loop {
                    let done = self.run_job(job, worker);
                    st = self.lock();
                    match st.complete(done, self) {
                        Some(next) => {
                            drop(st);
                            job = next;
                        }
                        None => break,
                    }
                }
                continue;
            }
            if st.finished() {
                return;
            }
            st.waiting += 1;
            st = st.wait(&self.work);
            st.waiting -= 1;
        }
    }

    /// Marks what `slot` (a worker, or the output thread) is running, for stall detection.
    pub(crate) fn mark_running(&self, slot: usize, stage: Option<usize>) {
        let (s, since) = &self.running[slot];
        if let Some(stage) = stage {
            since.store(framepipe_clock::now_ns(), Ordering::Relaxed);
            s.store(stage + 1, Ordering::Release);
        } else {
            s.store(0, Ordering::Release);
        }
    }

    /// Runs one job outside the lock.
    pub(crate) fn run_job(&self, job: Job, worker: usize) -> Done {
        match job {
            Job::Slice { slot, index, job } => {
                // A panicking slice is contained so that the owner's count still completes.
                let ok = job.call_caught(index);
                Done::Slice(slot, !ok)
            }
            Job::Stage {
                stage,
                mut token,
                inst,
            } => {
                let started = Instant::now();
                self.mark_running(worker, Some(stage));
                let counters = &self.counters.stages[stage];
                let done = match inst {
                    Inst::Source(mut source) => {
                        self.sample_live(&token.ctx);
                        let result = guard(&counters.name, || {
                            let mut frame = self.pools[0].try_acquire()?;
                            if source.fill(&token.ctx, &mut frame)? {
                                token.frame = Some(frame.freeze());
                                Ok(Some(token))
                            } else {
                                Ok(None)
                            }
                        });
                        Done::Source(source, result)
                    }
                    Inst::Effect(effect) => self.run_effect(stage, effect, token, worker),
                };
                self.mark_running(worker, None);
                // The source's last call, which finds the end of the stream, is not a frame.
                if !matches!(done, Done::Source(_, Ok(None))) {
                    counters.record(started.elapsed());
                }
                done
            }
        }
    }

    pub(crate) fn run_effect(
        &self,
        stage: usize,
        mut inst: Instance,
        mut token: Token,
        worker: usize,
    ) -> Done {
        let slices = PoolSlices::new(self, worker);
        let name = &self.counters.stages[stage].name;
        if !inst.used {
            inst.used = true;
            self.counters.stages[stage].add_instance();
        }
        // Bring the instance to this frame's parameter values (sampled at its boundary).
        let synced = guard(name, || {
            Ok(self.sync_params(stage, &mut inst, token.ctx.seq))
        });
        let result = synced.and_then(|(bypass, rejected)| {
            // Reported with no lock held (the snapshot's included): the callback is user code.
            for (j, e) in rejected {
                self.emit(Event::PropertyRejected {
                    stage: name.clone(),
                    prop: self.param_names[stage][j].clone(),
                    reason: e.to_string(),
                });
            }
            if bypass {
                return Ok(token);
            }
            guard(name, || {
                let input = token.frame.take().expect("effects get a frame");
                let mut output = self.pools[stage].try_acquire()?;
                inst.effect
                    .process(&token.ctx, &input, &mut output, &slices)?;
                token.frame = Some(output.freeze());
                Ok(token)
            })
        });
        Done::Effect(stage, Some(inst), result)
    }

    /// The frame boundary: the source's worker, about to start frame `ctx.seq`, writes the values
    /// in force now into the frame's snapshot slot, for every stage. Under the live lock (shared
    /// only with command assignment), never under the scheduler lock. Source jobs are serial, so
    /// frames are sampled in order.
    fn sample_live(&self, ctx: &FrameCtx) {
        let slot = (ctx.seq % self.snapshots.len() as u64) as usize;
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let mut snap = self.snapshots[slot]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        live.sample(ctx.pts_ns, &mut snap);
    }

    /// Sets on `inst` the properties whose value for frame `seq` differs from what it has.
    /// Returns whether the stage is bypassed on this frame, and the properties the element
    /// refused (each reported once; the list allocates only then).
    fn sync_params(
        &self,
        stage: usize,
        inst: &mut Instance,
        seq: u64,
    ) -> (bool, Vec<(usize, Error)>) {
        let slot = (seq % self.snapshots.len() as u64) as usize;
        let snap = self.snapshots[slot]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut rejected = Vec::new();
        for (j, value) in snap.values[stage].iter().enumerate() {
            if inst.applied[j] != *value {
                if !inst.refused[j] {
                    if let Err(e) = inst.effect.set_property(&self.param_names[stage][j], value) {
                        inst.refused[j] = true;
                        rejected.push((j, e));
                    }
                }
                assign(&mut inst.applied[j], value);
            }
        }
        (snap.bypass[stage], rejected)
    }
}

/// Runs `f`, turning a panic inside an element into an error that names it.
pub(crate) fn guard<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::element(name, format!("panicked: {msg}")))
        }
    }
}
