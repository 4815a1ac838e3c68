//! The workers: each loops picking a job under the scheduler lock, running it without the
//! lock, and reporting back; running a job (the source, an effect with its per-frame parameter
//! values, a slice); and the guard that turns a panic inside an element into an error.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use framepipe_core::{Error, FrameCtx, Result};

use crate::events::Event;
use crate::live::assign;
use crate::slices::{PanicPayload, PoolSlices};
use crate::state::{Done, Inst, Instance, Job, Shared, Token};

impl Shared {
    /// A worker thread's body. A panic that escapes the element guards (a bug in the scheduler
    /// itself) ends the run with an error naming the worker, and wakes everyone, rather than
    /// leaving the others waiting for a frame that this worker held.
    pub(crate) fn worker(&self, worker: usize) {
        // The slice slot whose index this worker has claimed and not yet had counted.
        let claimed = Cell::new(None);
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| self.worker_loop(worker, &claimed)));
        if let Err(p) = r {
            let e = Error::element(
                format!("worker thread fp-worker-{worker}"),
                format!("panicked: {}", panic_message(&*p)),
            );
            self.mark_running(worker, None);
            self.break_run(e, claimed.get());
        }
    }

    fn worker_loop(&self, worker: usize, claimed: &Cell<Option<usize>>) {
        let mut st = self.lock();
        loop {
            if let Some(mut job) = st.next_job(self) {
                drop(st);
                loop {
                    if let Job::Slice { slot, .. } = &job {
                        claimed.set(Some(*slot));
                    }
                    let done = self.run_job(job, worker);
                    st = self.lock();
                    // Cleared in the same critical section that counts the slice, so that a
                    // panic can neither lose nor double-count it.
                    claimed.set(None);
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
            // After an abort (stop, error) an idle worker has nothing left to do: frames are no
            // longer started, pending ones were dropped, and the owner of a slice job runs the
            // slices nobody took. Those still inside a job finish it and leave too.
            if st.finished() || st.abort {
                return;
            }
            st.waiting += 1;
            st = st.wait(&self.work);
            st.waiting -= 1;
        }
    }

    /// Ends the run after a panic outside any element (a worker's or the output thread's own
    /// code): the state may be inconsistent (a token lost with the unwound stack), so the run is
    /// marked broken (finished whatever the in-flight count) and everyone is woken. A slice
    /// index the dead worker had claimed is counted, so that its owner does not wait for ever.
    pub(crate) fn break_run(&self, e: Error, claimed_slice: Option<usize>) {
        let payload: Option<PanicPayload> = claimed_slice.map(|_| Box::new("its worker died") as _);
        let mut st = self.lock();
        if let Some(slot) = claimed_slice {
            st.count_slice(slot, payload);
        }
        st.fail(e);
        st.broken = true;
    }

    /// Waits up to `grace` for the workers to exit (at once after a normal end), joins those
    /// that did, and leaves the others running, detached, with an [`Event::LeftRunning`] each:
    /// they are blocked inside an element and exit when it returns.
    pub(crate) fn join_workers(&self, workers: Vec<JoinHandle<()>>, grace: Duration) {
        let deadline = Instant::now() + grace;
        while workers.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for (w, h) in workers.into_iter().enumerate() {
            if h.is_finished() {
                // A worker's panics are caught inside it; nothing to report from the join.
                let _ = h.join();
            } else {
                let stage = self.running[w].0.load(Ordering::Acquire);
                let stage = match stage.checked_sub(1) {
                    Some(s) => self.counters.stages[s].name.clone(),
                    None => Arc::from("(scheduler)"),
                };
                self.emit(Event::LeftRunning { stage, worker: w });
            }
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
                Done::Slice(slot, job.call_caught(index))
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
        let mut live = self.live.lock();
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
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(Error::element(
            name,
            format!("panicked: {}", panic_message(&*p)),
        )),
    }
}

/// The message of a panic payload (`panic!("...")` gives a `&str` or a `String`).
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
