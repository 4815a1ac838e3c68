//! The GPU thread (`fp-gpu`): one per show that has GPU nodes, owning the show's GPU context
//! ([`framepipe_gpu::Gpu`], current on this thread only). It runs the show's GPU jobs — GPU
//! nodes, uploads, downloads — taken from the scheduler like a worker takes its jobs
//! (`Scheduler::next_gpu_job`: the CPU workers never see them), one at a time.
//!
//! Contract:
//! * Consecutive GPU nodes of one frame run back to back: a completed GPU job makes its GPU
//!   consumer runnable, and the next job taken is the one furthest down the graph. The jobs
//!   issued until the thread runs out of ready jobs (at most [`MAX_BATCH`]) are one
//!   submission: one `glFlush` and one fence at its end. Nothing is waited for: no `glFinish`,
//!   no blocking readback; fences are polled with a zero timeout.
//! * A texture a submission reads stays out of its pool until that submission's fence has
//!   passed, and a download reads a texture only once the submissions before it have passed:
//!   the CPU side of a transfer (an upload's copy into a texture taken from the pool, a
//!   readback) never races the GPU still rendering. (Mesa's llvmpipe, 22.3, needs this: a
//!   readback or an upload issued right after a render into or from the same texture saw
//!   the texture as it was before the render in about 1 run in 5 of a GPU → CPU → GPU chain.)
//! * A download's job ends later than it runs: once the submissions before it have passed,
//!   the readback is started (a pixel-pack buffer and a fence, `Downloader::start`) and the
//!   job is reported once `Downloader::ready` says the copy is done, polled between the
//!   thread's other jobs, or in 200 µs sleeps when it has nothing else to do. No thread waits
//!   on one frame's readback while other GPU work is ready. A readback due while every buffer
//!   of the ring is in use (more frames out than in flight: a leaky branch's, two versions'
//!   across a live edit) starts once one is free.
//! * A present's job (a texture to a sink that draws textures itself, a window) ends like a
//!   download's, once the submissions before it have passed, but reads nothing back: the
//!   texture itself is its output, finished, so that another context of the share group may
//!   draw it at once.
//! * A GPU node that fails at render (its error, a GL error after it, a panic) is reported
//!   once ([`Event::GpuNodeFailed`]) and bypassed from then on: its first input passes (a
//!   source gives black); the show goes on, as with an isolated plugin that crashed. An upload
//!   or a download that fails ends the run with the error.
//! * Between its jobs, it releases the GPU instances a live edit removed (their GL objects
//!   deleted with its context current; `release.rs`), and the rest at its end.
//! * Its loop is its own rather than the worker loop's (`worker.rs`), because a job's report
//!   (a download's) is not the job just run; it takes and reports under the same scheduler
//!   lock, and calls no element code under it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use framepipe_core::gpu::{glow, GpuCtx, GpuImage};
use framepipe_core::{Error, FrameCtx, Result};
use framepipe_gpu::{Downloader, Gpu, GpuError, GpuFrame, Ticket, Uploader};

use super::gl::Timers;
use super::{guard, Inst, Instance, Proc};
use crate::memory::GPU_HELD_TEXTURES;
use crate::model::MAX_INPUTS;
use crate::sched::{Done, Inputs, Job, Pixels, Shared, Version};
use crate::stats::Event;

/// The longest the GPU thread sleeps without a signal when it has nothing to do.
const GPU_IDLE: Duration = Duration::from_millis(100);
/// How long it sleeps between looks at its readbacks when it has nothing else to do.
const READBACK_POLL: Duration = Duration::from_micros(200);
/// Buffers of the upload ring (one upload is under way at a time; two let the next frame's
/// upload go on while the driver still reads the last).
const UPLOAD_RING: usize = 2;
/// The most jobs in one submission: a download waiting for a submission to pass does not wait
/// for an unbounded run of later jobs.
const MAX_BATCH: usize = 4;
/// Textures held for submissions in flight, as the queue is made (more grow it).
const HELD: usize = 64;

/// A download's job: waiting for the submissions before it, or its readback under way; or a
/// present's, waiting for those submissions only.
struct Pending {
    /// A present: no readback; reported once `after` has passed.
    present: bool,
    /// The readback, once started.
    ticket: Option<Ticket>,
    /// The submission it must see passed before reading (its input's render is in it or
    /// before).
    after: u64,
    node: usize,
    slot: usize,
    version: u64,
    inst: Instance,
    ver: Arc<Version>,
    started: Instant,
    /// The texture to read, held until its readback is in.
    input: Inputs,
}

/// The GPU thread's state: its context, transfers and readbacks under way.
struct Executor {
    gpu: Gpu,
    uploader: Uploader,
    downloader: Downloader,
    pending: Vec<Pending>,
    /// Each GPU node's time on the GPU.
    timers: Timers,
    /// The submission being issued (numbered from 1) and its jobs so far.
    batch: u64,
    batch_jobs: usize,
    /// Submitted batches' fences, oldest first.
    fences: VecDeque<(u64, glow::Fence)>,
    /// Every submission up to this one has passed on the GPU.
    passed: u64,
    /// What each submission's jobs read, held until it has passed, and how many textures
    /// that is (at most [`GPU_HELD_TEXTURES`]: the pools have room for them).
    held: VecDeque<(u64, Inputs)>,
    held_textures: usize,
    /// The frame's audio arrays, copied from its snapshot for each GPU node (issue #25).
    audio: crate::live::GpuAudio,
}

impl Shared {
    /// Starts the show's GPU thread if it has none: it opens the GPU context (EGL, headless)
    /// and reports whether that worked before this returns, so that a machine without GL
    /// refuses the show at its start with the packages to install. Called off the frame path:
    /// at the start, and by the edit thread before a version with the show's first GPU node
    /// switches in. `downloads`: readbacks that may be under way at once (frames in flight).
    pub(crate) fn ensure_gpu_thread(self: &Arc<Self>, downloads: usize) -> Result<()> {
        let mut slot = self
            .gpu_thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_some() {
            return Ok(());
        }
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<()>>(1);
        let sh = Arc::clone(self);
        let h = std::thread::Builder::new()
            .name("fp-gpu".into())
            .spawn(move || sh.gpu_thread(downloads, tx))
            .map_err(|e| Error::io("starting the GPU thread", e))?;
        let opened = rx.recv().unwrap_or_else(|_| {
            Err(Error::Pipeline(
                "the GPU thread ended before opening its context".into(),
            ))
        });
        if let Err(e) = opened {
            let _ = h.join();
            return Err(e);
        }
        *slot = Some(h);
        Ok(())
    }

    /// At the run's end: waits up to `grace` for the GPU thread to leave (it ends with the
    /// run; one stuck in a driver call is left running, detached).
    pub(crate) fn join_gpu_thread(&self, grace: Duration) {
        let h = self
            .gpu_thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(h) = h else { return };
        let deadline = Instant::now() + grace;
        while !h.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if h.is_finished() {
            let _ = h.join();
        }
    }

    /// The GPU thread's body: opens the context (reported on `opened`), then runs GPU jobs
    /// until the run ends. A panic outside the element guards ends the run, as a worker's
    /// does.
    fn gpu_thread(&self, downloads: usize, opened: std::sync::mpsc::SyncSender<Result<()>>) {
        self.gpu_signal.register_current();
        let gpu = match Gpu::open() {
            Ok(gpu) => gpu,
            Err(e) => {
                let _ = opened.send(Err(Error::Pipeline(format!("GPU: {e}"))));
                return;
            }
        };
        self.counters.set_renderer(gpu.info().renderer.clone());
        let _ = opened.send(Ok(()));
        let timers = Timers::new(&gpu);
        let mut ex = Executor {
            gpu,
            uploader: Uploader::new(UPLOAD_RING),
            downloader: Downloader::new(downloads.max(1)),
            pending: Vec::with_capacity(downloads.max(1)),
            timers,
            batch: 1,
            batch_jobs: 0,
            fences: VecDeque::with_capacity(HELD),
            passed: 0,
            held: VecDeque::with_capacity(HELD),
            held_textures: 0,
            audio: crate::live::GpuAudio::new(),
        };
        if let Err(p) = super::catch_panic(std::panic::AssertUnwindSafe(|| ex.run(self))) {
            let e = super::panic_error("GPU thread fp-gpu", &p);
            self.break_run(e, None);
        }
        ex.release_removed(self);
        ex.end();
    }
}

impl Executor {
    /// Takes, runs and reports GPU jobs until the run is over.
    fn run(&mut self, show: &Shared) {
        loop {
            self.advance(show);
            self.timers.poll(&self.gpu);
            let mut st = show.lock();
            if st.finished() || st.aborted() {
                // Readbacks under way are given up; their jobs are reported so that the
                // flight's counts stay whole (an aborted run books no output).
                drop(st);
                self.cancel_pending(show);
                return;
            }
            // A job may hold up to MAX_INPUTS textures until the GPU passes it: none is taken
            // while that could be more than the pools keep room for (the GPU is behind; the
            // thread polls its fences meanwhile).
            let room = self.held_textures + MAX_INPUTS <= GPU_HELD_TEXTURES;
            let job = if room { st.next_gpu_job() } else { None };
            let Some(job) = job else {
                let idle = room && self.pending.is_empty() && self.held.is_empty();
                if idle {
                    st.gpu_thread_idle();
                }
                drop(st);
                self.submit();
                self.release_removed(show);
                if idle {
                    self.gpu.collect();
                    show.gpu_signal.wait(GPU_IDLE);
                } else {
                    show.gpu_signal.wait(READBACK_POLL);
                }
                continue;
            };
            let ver = Arc::clone(st.job_ver(&job));
            drop(st);
            if let Some(done) = self.run_job(show, &ver, job) {
                let mut st = show.lock();
                st.record_gpu(done, show);
            }
        }
    }

    /// Releases the GPU instances a live edit removed (`release.rs`): each one's GL objects go
    /// now, with the context current; the instance goes back to the edit thread to be dropped.
    /// A panic in a release is contained (the objects leak until the context ends).
    fn release_removed(&mut self, show: &Shared) {
        while let Some(mut node) = show.gpu_release.next() {
            let gl = self.gpu.gl();
            let _ = super::catch_panic(|| node.release(gl));
            show.counters.count_gpu_release();
            show.gpu_release.released(node);
        }
    }

    /// Ends the submission being issued, if it has jobs: a fence after it, and `glFlush`
    /// (no wait).
    fn submit(&mut self) {
        if self.batch_jobs == 0 {
            return;
        }
        if let Some(f) = super::gl::fence(&self.gpu) {
            self.fences.push_back((self.batch, f));
        }
        super::gl::flush(&self.gpu);
        self.batch += 1;
        self.batch_jobs = 0;
    }

    /// A job was issued in the current submission, reading `inputs` (held until it passes).
    fn issued(&mut self, inputs: Inputs) {
        self.held_textures += inputs.n;
        self.held.push_back((self.batch, inputs));
        self.batch_jobs += 1;
        if self.batch_jobs >= MAX_BATCH {
            self.submit();
        }
    }

    /// Looks at what the GPU has done (never waits): submissions passed (their textures go
    /// back to their pools), readbacks to start, downloads to report.
    fn advance(&mut self, show: &Shared) {
        while let Some(&(b, f)) = self.fences.front() {
            if !super::gl::signalled(&self.gpu, f) {
                break;
            }
            super::gl::delete_fence(&self.gpu, f);
            self.fences.pop_front();
            self.passed = b;
        }
        if self.fences.is_empty() && self.batch_jobs == 0 {
            // Every fence made has passed (a submission whose fence could not be made counts
            // as passed once the later ones have).
            self.passed = self.batch - 1;
        }
        while self.held.front().is_some_and(|&(b, _)| b <= self.passed) {
            if let Some((_, inputs)) = self.held.pop_front() {
                self.held_textures -= inputs.n;
            }
        }
        self.start_readbacks(show);
        self.finish_ready(show);
    }

    /// Starts the readback of every download whose submissions before it have passed.
    fn start_readbacks(&mut self, show: &Shared) {
        let mut k = 0;
        while k < self.pending.len() {
            let p = &mut self.pending[k];
            if p.ticket.is_some() || p.after > self.passed {
                k += 1;
                continue;
            }
            if p.present {
                let mut p = self.pending.swap_remove(k);
                let texture = p.input.frames[0].take();
                p.ver.stages[p.node].record(p.started.elapsed());
                let done = Done::Node {
                    node: p.node,
                    slot: p.slot,
                    version: p.version,
                    inst: Inst::Proc(p.inst),
                    result: Ok(texture),
                };
                let mut st = show.lock();
                st.record_gpu(done, show);
                continue;
            }
            let input = p.input.frames[0].as_ref().expect("a download's input");
            match self.downloader.start_image(&self.gpu, &input.gpu().image()) {
                Ok(ticket) => {
                    p.ticket = Some(ticket);
                    k += 1;
                }
                // More readbacks are due than the ring has buffers (a leaky branch's frame,
                // the frames of two versions across a live edit's switch): this one starts
                // once a buffer is free.
                Err(GpuError::RingFull { .. }) => k += 1,
                Err(e) => {
                    let p = self.pending.swap_remove(k);
                    let name = &p.ver.stages[p.node].name;
                    let done = Done::Node {
                        node: p.node,
                        slot: p.slot,
                        version: p.version,
                        inst: Inst::Proc(p.inst),
                        result: Err(Error::Pipeline(format!("{name}: {e}"))),
                    };
                    let mut st = show.lock();
                    st.record_gpu(done, show);
                }
            }
        }
    }

    /// Runs one GPU job; `None`: a download whose readback is under way (reported later).
    fn run_job(&mut self, show: &Shared, ver: &Arc<Version>, job: Job) -> Option<Done> {
        let Job::Node {
            node,
            slot,
            version,
            ctx,
            inputs,
            inst: Inst::Proc(mut inst),
        } = job
        else {
            unreachable!("the GPU thread takes node jobs only")
        };
        let started = Instant::now();
        let counters = &ver.stages[node];
        if !inst.used {
            inst.used = true;
            counters.add_instance();
        }
        framepipe_core::crash::enter(&ver.names[node], &ver.elements[node], ctx.seq);
        // What it runs, for the stall checks (a GPU node that hangs is named like a worker's).
        let me = show.gpu_thread_index();
        let result = match &mut inst.proc {
            Proc::Upload => {
                show.mark_running(me, Some(node));
                let r = guard(&counters.name, || self.upload(ver, node, &inputs));
                self.batch_jobs += 1;
                show.mark_running(me, None);
                if matches!(r, Ok(Some(_))) {
                    show.counters.count_upload();
                }
                r
            }
            Proc::Download | Proc::Present => {
                framepipe_core::crash::leave();
                let present = matches!(inst.proc, Proc::Present);
                // Read once what was issued before it has passed (`start_readbacks`).
                let after = if self.batch_jobs > 0 {
                    self.batch
                } else {
                    self.batch - 1
                };
                self.pending.push(Pending {
                    present,
                    ticket: None,
                    after,
                    input: inputs,
                    node,
                    slot,
                    version,
                    inst,
                    ver: Arc::clone(ver),
                    started,
                });
                return None;
            }
            Proc::Gpu(_) => {
                show.mark_running(me, Some(node));
                let r = self.render(show, ver, node, slot, &mut inst, &ctx, &inputs);
                show.mark_running(me, None);
                framepipe_core::crash::leave();
                if !matches!(r, Ok(None)) {
                    counters.record(started.elapsed());
                }
                // Its inputs are held until the GPU has read them.
                self.issued(inputs);
                return Some(Done::Node {
                    node,
                    slot,
                    version,
                    inst: Inst::Proc(inst),
                    result: r,
                });
            }
            Proc::Effect(_) | Proc::Mixer(_) => unreachable!("CPU jobs never reach the GPU thread"),
        };
        framepipe_core::crash::leave();
        drop(inputs);
        if !matches!(result, Ok(None)) {
            counters.record(started.elapsed());
        }
        Some(Done::Node {
            node,
            slot,
            version,
            inst: Inst::Proc(inst),
            result,
        })
    }

    /// An upload: the CPU frame into a texture of the node's pool.
    fn upload(&mut self, ver: &Version, node: usize, inputs: &Inputs) -> Result<Option<Pixels>> {
        let frame = inputs.frames[0].as_ref().expect("an upload's input").cpu();
        let out = self.texture(ver, node)?;
        self.uploader
            .upload(&self.gpu, frame, &out)
            .map_err(|e| Error::Pipeline(e.to_string()))?;
        Ok(Some(Pixels::Gpu(out.share())))
    }

    /// A texture from node `node`'s pool.
    fn texture(&self, ver: &Version, node: usize) -> Result<GpuFrame> {
        ver.pools
            .textures(node)
            .try_acquire(&self.gpu)
            .map_err(|e| Error::Pipeline(e.to_string()))
    }

    /// A GPU node on one frame, with that frame's parameter values; bypassed once it failed.
    #[allow(clippy::too_many_arguments)]
    fn render(
        &mut self,
        show: &Shared,
        ver: &Version,
        node: usize,
        slot: usize,
        inst: &mut Instance,
        ctx: &FrameCtx,
        inputs: &Inputs,
    ) -> Result<Option<Pixels>> {
        let name = &ver.stages[node].name;
        if slot < ver.topo.cap {
            show.start_node(ver, node, slot, ctx.seq);
        }
        // Its parameters, on this thread (GpuNode::set_property), with no lock held.
        let (bypass, rejected) = show.sync_params(ver, node, inst, slot);
        for (j, e) in rejected {
            show.emit(Event::PropertyRejected {
                stage: name.clone(),
                prop: ver.param_names[node][j].clone(),
                reason: e.to_string(),
            });
        }
        let Proc::Gpu(g) = &mut inst.proc else {
            unreachable!("a GPU node's instance")
        };
        if g.frames.is_some_and(|n| ctx.seq >= n) {
            // A finite GPU source's end: this frame and those after it are not made.
            return Ok(None);
        }
        if bypass || g.failed {
            return self.pass_on(ver, node, inputs);
        }
        let out = self.texture(ver, node)?;
        let n = inputs.n;
        let images: [GpuImage; MAX_INPUTS] = std::array::from_fn(|k| {
            inputs.frames[k.min(n.max(1) - 1)]
                .as_ref()
                .map_or(out.image(), |p| p.gpu().image())
        });
        self.audio.take(ctx.seq, &ver.snapshots[slot]);
        let gctx = GpuCtx {
            gl: self.gpu.gl(),
            frame: *ctx,
            period_ns: i64::try_from(show.rate.period_ns()).unwrap_or(i64::MAX),
            empty_vao: self.gpu.empty_vao(),
            audio: self.audio.frame(),
        };
        super::gl::bind_vertex_array(&self.gpu, gctx.empty_vao);
        let target = out.image();
        let timer = self.timers.begin(&self.gpu);
        let rendered = guard(name, || {
            g.rendered = true;
            g.node.render(&gctx, &images[..n], &target)?;
            self.gpu
                .check("render")
                .map_err(|e| Error::Pipeline(format!("{name}: {e}")))
        });
        if let Some(q) = timer {
            self.timers.end(&self.gpu, q, Arc::clone(&ver.stages[node]));
        }
        // What the node has to tell the operator (a reloaded shader refused, and why).
        if let Some(message) = g.node.take_message() {
            show.emit(Event::GpuNodeMessage {
                stage: name.clone(),
                message,
            });
        }
        match rendered {
            Ok(()) => Ok(Some(Pixels::Gpu(out.share()))),
            Err(e) => {
                g.failed = true;
                show.emit(Event::GpuNodeFailed {
                    stage: name.clone(),
                    frame: ctx.seq,
                    reason: e.to_string(),
                });
                drop(out);
                self.pass_on(ver, node, inputs)
            }
        }
    }

    /// A bypassed GPU node's output: its first input (a source: a black texture).
    fn pass_on(&self, ver: &Version, node: usize, inputs: &Inputs) -> Result<Option<Pixels>> {
        if let Some(first) = inputs.frames[0].as_ref() {
            return Ok(Some(first.clone()));
        }
        let out = self.texture(ver, node)?;
        self.gpu
            .clear(&out.image(), [0.0, 0.0, 0.0, 1.0])
            .map_err(|e| Error::Pipeline(e.to_string()))?;
        Ok(Some(Pixels::Gpu(out.share())))
    }

    /// Reports every download whose readback is in (its CPU frame from the node's pool).
    fn finish_ready(&mut self, show: &Shared) {
        let mut k = 0;
        while k < self.pending.len() {
            let ready = self.pending[k]
                .ticket
                .as_ref()
                .is_some_and(|t| self.downloader.ready(&self.gpu, t));
            if !ready {
                k += 1;
                continue;
            }
            let mut p = self.pending.swap_remove(k);
            let ticket = p.ticket.take().expect("started");
            let counters = &p.ver.stages[p.node];
            let result = match p.ver.pools[p.node].try_acquire() {
                Ok(mut frame) => self
                    .downloader
                    .finish(&self.gpu, ticket, &mut frame)
                    .map(|()| Some(Pixels::Cpu(frame.freeze())))
                    .map_err(|e| Error::Pipeline(format!("{}: {e}", counters.name))),
                Err(e) => {
                    self.downloader.cancel(&self.gpu, ticket);
                    Err(e)
                }
            };
            counters.record(p.started.elapsed());
            if result.is_ok() {
                show.counters.count_download();
            }
            let done = Done::Node {
                node: p.node,
                slot: p.slot,
                version: p.version,
                inst: Inst::Proc(p.inst),
                result,
            };
            let mut st = show.lock();
            st.record_gpu(done, show);
        }
    }

    /// Gives up the readbacks under way (the run is over) and reports their jobs.
    fn cancel_pending(&mut self, show: &Shared) {
        while let Some(p) = self.pending.pop() {
            if let Some(t) = p.ticket {
                self.downloader.cancel(&self.gpu, t);
            }
            let done = Done::Node {
                node: p.node,
                slot: p.slot,
                version: p.version,
                inst: Inst::Proc(p.inst),
                result: Ok(None),
            };
            let mut st = show.lock();
            st.record_gpu(done, show);
        }
    }

    /// Frees the transfers' buffers while the context is current (the context goes after).
    fn end(self) {
        let Executor {
            gpu,
            uploader,
            downloader,
            timers,
            fences,
            held,
            ..
        } = self;
        drop(held);
        for (_, f) in fences {
            super::gl::delete_fence(&gpu, f);
        }
        uploader.release(&gpu);
        downloader.release(&gpu);
        timers.release(&gpu);
        gpu.collect();
    }
}
