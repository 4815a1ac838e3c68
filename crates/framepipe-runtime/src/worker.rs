//! The workers: each loops picking a job under the scheduler lock, running it without the
//! lock, and reporting back; running a job (the source, an effect with its per-frame parameter
//! values, a slice); and the guard that turns a panic inside an element into an error.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use framepipe_clock::now_ns;
use framepipe_core::{Error, Frame, Result};

use crate::events::Event;
use crate::graph::{OnEnd, MAX_INPUTS};
use crate::live::{assign, lock};
use crate::sched::{
    Done, Inputs, Inst, Instance, Job, Proc, Shared, SourceInst, Version, MAX_IO_THREADS,
};
use crate::slices::{PanicPayload, PoolSlices};

/// The longest an IO thread sleeps without a signal.
const IO_POLL: Duration = Duration::from_millis(100);

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
        // The graph version of the job this worker runs: the one the job names (while a live
        // edit's replaced version finishes its frames, two versions have jobs).
        let mut ver = Arc::clone(st.running_version());
        loop {
            if let Some(mut job) = st.next_job(self) {
                follow(&mut ver, st.job_ver(&job));
                drop(st);
                loop {
                    if let Job::Slice { slot, .. } = &job {
                        claimed.set(Some(*slot));
                    }
                    let done = self.run_job(&ver, job, worker);
                    st = self.lock();
                    // Cleared in the same critical section that counts the slice, so that a
                    // panic can neither lose nor double-count it.
                    claimed.set(None);
                    match st.complete(done, self) {
                        Some(next) => {
                            follow(&mut ver, st.job_ver(&next));
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
            if st.finished() || st.aborted() {
                return;
            }
            // Not kept while idle: a version a live edit replaced is dropped on the edit thread
            // once nobody else holds it (this is never the last reference then).
            if !Arc::ptr_eq(&ver, st.running_version()) {
                ver = Arc::clone(st.running_version());
            }
            st = st.wait_for_work();
        }
    }

    /// A host worker's turn at this show (it was announced as having work): takes a job, and
    /// runs it and the jobs its completions hand straight on (cache-warm, as a worker of its
    /// own would), then returns to the host's queue. When the show has more work than this
    /// worker takes, it is announced again so that another worker joins in. A panic outside
    /// the element guards ends this show only, as in [`worker`](Self::worker).
    pub(crate) fn host_round(&self, worker: usize) {
        let claimed = Cell::new(None);
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let mut st = self.lock();
            let Some(mut job) = st.next_job(self) else {
                return;
            };
            let mut ver = Arc::clone(st.job_ver(&job));
            if st.has_work() {
                st.announce_work();
            }
            drop(st);
            loop {
                if let Job::Slice { slot, .. } = &job {
                    claimed.set(Some(*slot));
                }
                let done = self.run_job(&ver, job, worker);
                let mut st = self.lock();
                claimed.set(None);
                match st.complete(done, self) {
                    Some(next) => {
                        follow(&mut ver, st.job_ver(&next));
                        if st.has_work() {
                            st.announce_work();
                        }
                        drop(st);
                        job = next;
                    }
                    None => break,
                }
            }
        }));
        if let Err(p) = r {
            let e = Error::element(
                format!("worker thread fp-worker-{worker}"),
                format!("panicked: {}", panic_message(&*p)),
            );
            self.mark_running(worker, None);
            self.break_run(e, claimed.get());
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
        st.mark_broken();
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
                let stage = self
                    .running_stage(w)
                    .unwrap_or_else(|| Arc::from("(scheduler)"));
                self.emit(Event::LeftRunning { stage, worker: w });
            }
        }
    }

    /// In a host, at the show's end: waits up to `grace` until no host worker is inside one of
    /// this show's jobs; a worker still inside one then (blocked in an element) is reported
    /// as [`Event::LeftRunning`]: the host goes on without it until the element returns.
    pub(crate) fn leave_host(&self, grace: Duration) {
        let deadline = Instant::now() + grace;
        // The IO threads' jobs are not a host worker's (they have their own grace,
        // `join_io_threads`).
        let busy = |sh: &Self| {
            let st = sh.lock();
            st.compute_jobs_running()
        };
        while busy(self) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for w in 0..self.threads {
            if let Some(stage) = self.running_stage(w) {
                self.emit(Event::LeftRunning { stage, worker: w });
            }
        }
    }

    /// The name of the node that `slot` (a worker, an output thread, the IO thread) is inside,
    /// if any.
    fn running_stage(&self, slot: usize) -> Option<Arc<str>> {
        let s = self.running[slot]
            .0
            .load(Ordering::Acquire)
            .checked_sub(1)?;
        Some(
            self.counters
                .stages()
                .get(s)
                .map_or_else(|| Arc::from("(a removed node)"), |c| c.name.clone()),
        )
    }

    /// The `running` slot of IO thread `k` (after the workers' and the output threads').
    fn io_slot(&self, k: usize) -> usize {
        self.running.len() - MAX_IO_THREADS + k
    }

    /// Starts IO threads until the show has one per blocking source of a version with
    /// `sources` of them (at most [`MAX_IO_THREADS`]; never fewer than it has): from then on
    /// the show's blocking sources (`Source::blocks`) run on them, so that a source waiting on
    /// a socket or a pipe holds no compute worker (in a host, none of the workers every show
    /// shares), nor another blocking source's read. Called off the frame path: at the start,
    /// and by the edit thread before a version with more blocking sources can switch in.
    pub(crate) fn ensure_io_threads(self: &Arc<Self>, sources: usize) -> std::io::Result<()> {
        let mut threads = self
            .io_threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while threads.len() < sources.min(MAX_IO_THREADS) {
            let (sh, k) = (Arc::clone(self), threads.len());
            let h = std::thread::Builder::new()
                .name("fp-io".into())
                .spawn(move || sh.io_thread(k))?;
            threads.push(h);
            if k == 0 {
                // From now on (not from when the thread gets to run): no worker takes them.
                self.lock().start_io();
            }
        }
        Ok(())
    }

    /// IO thread `k`'s body: runs blocking sources' jobs, one at a time, until the run ends.
    /// A panic outside the element guards ends the run, as a worker's does.
    fn io_thread(&self, k: usize) {
        self.io_signals[k].register_current();
        let io = self.io_slot(k);
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            loop {
                let mut st = self.lock();
                if let Some(job) = st.next_io_job(k) {
                    let ver = Arc::clone(st.job_ver(&job));
                    drop(st);
                    let done = self.run_job(&ver, job, io);
                    let mut st = self.lock();
                    st.record_io(done, self);
                    continue;
                }
                if st.finished() || st.aborted() {
                    return;
                }
                // Woken (its bit taken) when a job is queued for it; every IO thread at the
                // end and on abort. The timeout only bounds what a lost wake-up could cost.
                st.io_thread_idle(k);
                drop(st);
                self.io_signals[k].wait(IO_POLL);
            }
        }));
        if let Err(p) = r {
            let e = Error::element(
                "IO thread fp-io",
                format!("panicked: {}", panic_message(&*p)),
            );
            self.mark_running(io, None);
            self.break_run(e, None);
        }
    }

    /// At the run's end: waits up to `grace` for the IO threads to leave; one blocked inside
    /// a source then is left running, detached, and reported as [`Event::LeftRunning`].
    pub(crate) fn join_io_threads(&self, grace: Duration) {
        let threads = std::mem::take(
            &mut *self
                .io_threads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let deadline = Instant::now() + grace;
        while threads.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for (k, h) in threads.into_iter().enumerate() {
            if h.is_finished() {
                let _ = h.join();
            } else {
                let stage = self
                    .running_stage(self.io_slot(k))
                    .unwrap_or_else(|| Arc::from("(scheduler)"));
                self.emit(Event::LeftRunning {
                    stage,
                    worker: self.io_slot(k),
                });
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
    pub(crate) fn run_job(&self, ver: &Version, job: Job, worker: usize) -> Done {
        match job {
            Job::Slice { slot, index, job } => {
                // A panicking slice is contained so that the owner's count still completes.
                Done::Slice(slot, job.call_caught(index))
            }
            Job::Begin { slot, pts_ns } => {
                self.begin_frame(ver, slot, pts_ns);
                Done::Begin { slot }
            }
            Job::Node {
                node,
                slot,
                version,
                ctx,
                inputs,
                inst,
            } => {
                let started = Instant::now();
                self.mark_running(worker, Some(node));
                // A fatal signal in the element from here names it (framepipe_core::crash).
                framepipe_core::crash::enter(&ver.names[node], &ver.elements[node], ctx.seq);
                let counters = &ver.stages[node];
                let (inst, result) = match inst {
                    Inst::Source(mut source) => {
                        let r = guard(&counters.name, || {
                            self.run_source(ver, node, slot, &mut source, &ctx)
                        });
                        (Inst::Source(source), r)
                    }
                    Inst::Proc(instance) => {
                        let (i, r) = self.run_proc(ver, node, slot, instance, &ctx, inputs, worker);
                        (Inst::Proc(i), r.map(Some))
                    }
                };
                framepipe_core::crash::leave();
                self.mark_running(worker, None);
                // The source's last call, which finds the end of the stream, is not a frame.
                if !matches!(result, Ok(None)) {
                    counters.record(started.elapsed());
                }
                Done::Node {
                    node,
                    slot,
                    version,
                    inst,
                    result,
                }
            }
        }
    }

    /// The frame for output frame `ctx` from a source: read it (several when the source is
    /// faster than the graph, none when slower: the last one again), and at its end stop,
    /// rewind or hold as asked. `Ok(None)`: the end, the run stops.
    fn run_source(
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
            for ((applied, changed), value) in s
                .applied
                .iter_mut()
                .zip(s.changed.iter_mut())
                .zip(snap.values[node].iter())
            {
                *changed = *applied != *value;
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

    /// Runs an effect or a mixer on one frame, with that frame's parameters.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_proc(
        &self,
        ver: &Version,
        node: usize,
        slot: usize,
        mut inst: Instance,
        ctx: &framepipe_core::FrameCtx,
        mut inputs: Inputs,
        worker: usize,
    ) -> (Instance, Result<Frame>) {
        let slices = PoolSlices::new(self, worker);
        let name = &ver.stages[node].name;
        if !inst.used {
            inst.used = true;
            ver.stages[node].add_instance();
        }
        // This node's values for this frame: those in force now, unless it has them already
        // (see live.rs); then the instance is brought to them.
        if slot < ver.topo.cap {
            self.start_node(ver, node, slot, ctx.seq);
        }
        let synced = guard(name, || Ok(self.sync_params(ver, node, &mut inst, slot)));
        let result = synced.and_then(|(bypass, rejected)| {
            // Reported with no lock held (the snapshot's included): the callback is user code.
            for (j, e) in rejected {
                self.emit(Event::PropertyRejected {
                    stage: name.clone(),
                    prop: ver.param_names[node][j].clone(),
                    reason: e.to_string(),
                });
            }
            if bypass {
                // The first input passes through (bypass is refused when the shape differs).
                return Ok(inputs.frames[0].take().expect("a node's inputs are frames"));
            }
            guard(name, || {
                let mut output = ver.pools[node].try_acquire()?;
                match &mut inst.proc {
                    Proc::Effect(e) => {
                        let input = inputs.frames[0].as_ref().expect("an effect's input");
                        e.process(ctx, input, &mut output, &slices)?;
                    }
                    Proc::Mixer(m) => {
                        let n = inputs.n;
                        let refs: [&Frame; MAX_INPUTS] = std::array::from_fn(|k| {
                            inputs.frames[k.min(n - 1)]
                                .as_ref()
                                .expect("a mixer's inputs")
                        });
                        m.process(ctx, &refs[..n], &mut output, &slices)?;
                    }
                }
                Ok(output.freeze())
            })
        });
        // The inputs go back to their pools now, before the bookkeeping.
        drop(inputs);
        (inst, result)
    }

    /// The frame boundary: the worker beginning frame `slot` fixes its oscillator time in its
    /// snapshot (and the values of the leaky branches' nodes, which take the frame's values
    /// with them). Under the live lock (shared only with command assignment), never under the
    /// scheduler lock. Frames begin one at a time, in order.
    fn begin_frame(&self, ver: &Version, slot: usize, pts_ns: i64) {
        let mut live = self.live.lock();
        let mut snap = lock(&ver.snapshots[slot]);
        let branches = ver.topo.branches.iter().flatten().copied();
        live.begin(pts_ns, &mut snap, branches);
    }

    /// Node `node` starts frame `seq` (in frame slot `slot`): it samples its values, unless a
    /// later frame of it sampled them already (`Live::start_node`), and publishes them for
    /// the control surfaces (at most every `PUBLISH_EVERY_NS`, never waiting).
    fn start_node(&self, ver: &Version, node: usize, slot: usize, seq: u64) {
        let mut live = self.live.lock();
        if live.version != ver.number {
            // A frame of the version a live edit replaced: its values were sampled at the
            // switch (the live stages are the new version's now).
            return;
        }
        if live.start_node(node, seq, slot, &ver.snapshots, ver.topo.cap) {
            self.view.publish(&live, seq, now_ns());
        }
    }

    /// Sets on `inst` the properties whose value in snapshot `slot` differs from what it has.
    /// Returns whether the node is bypassed on this frame, and the properties the element
    /// refused (each reported once; the list allocates only then).
    fn sync_params(
        &self,
        ver: &Version,
        node: usize,
        inst: &mut Instance,
        slot: usize,
    ) -> (bool, Vec<(usize, Error)>) {
        // Copy what changed under the snapshot's lock (assignments only), then call the
        // element with no lock held: a branch copying this snapshot under the scheduler lock
        // never waits for element code.
        let bypass = {
            let snap = lock(&ver.snapshots[slot]);
            for (j, value) in snap.values[node].iter().enumerate() {
                inst.changed[j] = inst.applied[j] != *value;
                if inst.changed[j] {
                    assign(&mut inst.applied[j], value);
                }
            }
            snap.bypass[node]
        };
        let mut rejected = Vec::new();
        for j in 0..inst.applied.len() {
            if !inst.changed[j] || inst.refused[j] {
                continue;
            }
            let name = &ver.param_names[node][j];
            let value = &inst.applied[j];
            let r = match &mut inst.proc {
                Proc::Effect(e) => e.set_property(name, value),
                Proc::Mixer(m) => m.set_property(name, value),
            };
            if let Err(e) = r {
                inst.refused[j] = true;
                rejected.push((j, e));
            }
        }
        (bypass, rejected)
    }
}

/// Makes `ver` the version `want` (the job's), cloning the reference only when it changed.
fn follow(ver: &mut Arc<Version>, want: &Arc<Version>) {
    if !Arc::ptr_eq(ver, want) {
        *ver = Arc::clone(want);
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
