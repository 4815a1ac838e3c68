//! A prepared show and its run: [`Prepared`] (what `prepare` made), [`Prepared::run`] (its
//! workers, side threads and output thread started), and [`conclude`] (its end).
//!
//! Why hand-written rather than rayon or a channel per stage: a channel per stage means a thread
//! per stage (oversubscription, the very thing this engine avoids), and rayon's work stealing has
//! no notion of serial-in-order stages or of a bound on frames in flight. The scheduler is small:
//! one mutex-protected state machine (`sched/`) that workers consult only between jobs.

use std::sync::Arc;

use framepipe_control::CommandReader;
use framepipe_core::{Error, FramePool, Result, Sink, VideoInfo};

use crate::exec::{catch_panic, guard, panic_error};
use crate::memory::{Pace, PoolPlan, SharedPools};
use crate::model::{Options, JOIN_GRACE};
use crate::sched::Shared;
use crate::stats::EventFn;
use crate::stats::ShowView;
use crate::stats::{Counters, RunStats};

/// A negotiated pipeline, ready to run.
pub struct Prepared {
    pub(crate) shared: Arc<Shared>,
    /// Per output port (the master's first).
    pub(crate) sinks: Vec<Option<Box<dyn Sink>>>,
    infos: Vec<VideoInfo>,
    threads: usize,
    in_flight: usize,
    pub(crate) options: Options,
    pub(crate) stall_timeout_ns: u64,
    pub(crate) commands: Option<CommandReader>,
    pub(crate) editor: Option<Box<dyn crate::Editor>>,
    /// Its own pools (each once, with its plan): lazy, nothing made until the run starts
    /// ([`start_pools`](Self::start_pools)).
    own_pools: Vec<(FramePool, PoolPlan)>,
    /// Its place in a host's shared pools ([`share_pools`](Self::share_pools)).
    pool_share: Option<crate::memory::PoolLease>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("threads", &self.threads)
            .field("in_flight", &self.in_flight)
            .field("infos", &self.infos)
            .finish()
    }
}

impl Prepared {
    /// A show whose first version is built (`shared`: its state; `sinks`: per output port;
    /// `infos`: each node's output shape), ready to run with `options`. `own_pools`: its
    /// pools, readied as it starts ([`start_pools`](Self::start_pools)).
    pub(crate) fn new(
        shared: Arc<Shared>,
        sinks: Vec<Option<Box<dyn Sink>>>,
        infos: Vec<VideoInfo>,
        in_flight: usize,
        options: Options,
        own_pools: Vec<(FramePool, PoolPlan)>,
    ) -> Self {
        let stall_timeout_ns = match (options.stall_timeout_ns, options.pace) {
            (0, Some(pace)) => pace.period_ns().saturating_mul(5).max(100_000_000),
            // Unpaced (batch) runs have no deadline to miss: only report what looks stuck.
            (0, None) => shared.rate.period_ns().saturating_mul(5).max(1_000_000_000),
            (t, _) => t,
        };
        Prepared {
            threads: shared.threads,
            shared,
            sinks,
            infos,
            in_flight,
            options,
            stall_timeout_ns,
            commands: None,
            editor: None,
            own_pools,
            pool_share: None,
        }
    }

    /// Live counters; reading them never blocks the workers.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.shared.counters)
    }

    /// The show's published state (graph and live values) for control surfaces; reading it
    /// never blocks the engine.
    pub fn view(&self) -> ShowView {
        self.shared.view.clone()
    }

    /// The negotiated shape at each node's output, in execution order (a sink: its input's;
    /// for a chain: the source first, then each effect, then the sink).
    pub fn infos(&self) -> &[VideoInfo] {
        &self.infos
    }

    /// Worker threads that will run.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Frames in flight at most.
    pub fn max_in_flight(&self) -> usize {
        self.in_flight
    }

    /// Live edits (`Command::Edit`) are built by `editor` on an edit thread of the run's own
    /// and switched in at a frame boundary (see `edit/`). Without one they are refused.
    pub fn set_editor(&mut self, editor: Box<dyn crate::Editor>) {
        self.editor = Some(editor);
    }

    /// Commands (set, osc, bypass, speed, pause, step, resume, stop, edits) will be read from
    /// this queue once per frame boundary by the output thread.
    pub fn set_commands(&mut self, reader: CommandReader) {
        self.commands = Some(reader);
    }

    /// The show follows `feed`'s audio: `~audio:` bindings read it, once per frame at the
    /// frame's time (see `framepipe_audio`); with an exact feed (a file) every frame waits
    /// for its audio, so a render's values are a function of the file and the frame.
    pub fn set_audio(&mut self, feed: framepipe_audio::Feed) {
        self.shared.live.lock().set_audio(feed.clone());
        self.shared
            .counters
            .set_audio_bands(feed.timeline().bands());
        Arc::get_mut(&mut self.shared)
            .expect("only the Prepared holds the state before run")
            .audio = Some(feed);
    }

    /// Events (stalls, rejected commands) go to `f`.
    pub fn set_events(&mut self, f: EventFn) {
        Arc::get_mut(&mut self.shared)
            .expect("only the Prepared holds the state before run")
            .events = Some(f);
    }

    /// Runs to the end of the stream (or the first error, or a `stop` command) and returns the
    /// final figures. The calling thread becomes the output thread: it runs the sink, paced by
    /// the frame clock when `Options::pace` is set.
    ///
    /// On a source error, the frames produced before it still reach the sink; the sink is always
    /// finished (flushed, closed). The first error is returned after that. A panic anywhere (an
    /// element, the sink, an event callback, the output thread, a worker) ends the run with an
    /// error that says where; no thread is left waiting.
    ///
    /// When the run ends early (`stop`, an error), the sink is finished at once, and workers get
    /// [`JOIN_GRACE`] to finish the job in hand. A worker blocked inside an element (a source
    /// waiting for a peer) cannot be interrupted: it is left running, detached, and reported as
    /// [`Event::LeftRunning`](crate::Event::LeftRunning); it exits as soon as the element
    /// returns, and with the process.
    pub fn run(mut self) -> Result<RunStats> {
        let shared = Arc::clone(&self.shared);
        let options = self.options;
        let stall = self.stall_timeout_ns;
        // Before the workers: the IO thread must have the blocking sources' first jobs (and
        // both the frame pools).
        self.start_pools();
        let mut side = self.start_side();
        let mut workers = Vec::with_capacity(self.threads);
        for w in 0..self.threads {
            let sh = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name(format!("fp-worker-{w}"))
                .spawn(move || sh.worker(w));
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => {
                    let e = Error::io("starting a worker thread", e);
                    let mut st = shared.lock();
                    st.fail(e);
                    st.after_change(&shared);
                }
            }
        }
        let commands = self.commands.take();
        let mut sink = self.sinks[0].take().expect("the master sink");
        let output = catch_panic(|| {
            crate::output::run_output(
                &shared,
                0,
                &mut *sink,
                commands,
                side.link.take(),
                options,
                stall,
            )
        });
        let (pacing, out_result) = output.unwrap_or_else(|p| {
            let e = panic_error("output thread", &p);
            shared.break_run(e, None);
            (None, Ok(()))
        });
        conclude(
            &shared,
            self.threads,
            sink,
            (pacing, out_result),
            side,
            Some(workers),
        )
    }

    /// Starts what runs beside the master output: a follower output thread per other sink
    /// (unpaced: the master's pace holds the frames back; no commands: the master reads them)
    /// and, with an editor, the edit thread (live edits are built off the frame path).
    pub(crate) fn start_side(&mut self) -> Side {
        let shared = Arc::clone(&self.shared);
        let follower_options = Options {
            pace: None,
            ..self.options
        };
        let mut followers = Vec::new();
        for (port, slot) in self.sinks.iter_mut().enumerate().skip(1) {
            let mut sink = slot.take().expect("each sink once");
            let sh = Arc::clone(&shared);
            let name = sh.counters.stages()[sh.lock().sink_node(port)].name.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("fp-out-{port}"))
                .spawn(move || {
                    let output = catch_panic(|| {
                        crate::output::run_output(
                            &sh,
                            port,
                            &mut *sink,
                            None,
                            None,
                            follower_options,
                            u64::MAX,
                        )
                    });
                    let out = match output {
                        Ok((_, r)) => r,
                        Err(p) => {
                            let e = panic_error(format!("output thread of {name}"), &p);
                            sh.break_run(e, None);
                            Ok(())
                        }
                    };
                    let finish = guard(&name, || sink.finish());
                    out.and(finish)
                });
            match spawned {
                Ok(h) => followers.push((port, h)),
                Err(e) => {
                    let e = Error::io("starting an output thread", e);
                    let mut st = shared.lock();
                    st.fail(e);
                    st.after_change(&shared);
                }
            }
        }
        let blocking = shared
            .lock()
            .running_version()
            .topo
            .nodes
            .iter()
            .filter(|t| t.blocks)
            .count();
        if blocking > 0 {
            if let Err(e) = shared.ensure_io_threads(blocking) {
                let e = Error::io("starting an IO thread", e);
                let mut st = shared.lock();
                st.fail(e);
                st.after_change(&shared);
            }
        }
        // A show with GPU nodes: its GPU thread, with its context opened (or the run ends
        // with the reason: no EGL, no GL 3.3), before the first frame begins.
        let has_gpu = shared
            .lock()
            .running_version()
            .topo
            .nodes
            .iter()
            .any(|t| t.gpu);
        if has_gpu {
            if let Err(e) = shared.ensure_gpu_thread(self.in_flight) {
                let mut st = shared.lock();
                st.fail(e);
                st.after_change(&shared);
            }
        }
        let mut edit_thread = None;
        let mut link = None;
        if let Some(editor) = self.editor.take() {
            match crate::edit::spawn(editor, Arc::clone(&shared), self.options) {
                Ok((l, h)) => {
                    link = Some(l);
                    edit_thread = Some(h);
                }
                Err(e) => {
                    let e = Error::io("starting the edit thread", e);
                    let mut st = shared.lock();
                    st.fail(e);
                    st.after_change(&shared);
                }
            }
        }
        Side {
            followers,
            edit_thread,
            link,
        }
    }

    /// Enrolls this show's pools in a host's shared pools (at `Host::add`): when the host
    /// starts, [`start_pools`](Self::start_pools) replaces them with quota handles on those.
    pub(crate) fn share_pools(&mut self, pools: &SharedPools) {
        let pace = Pace::of(&self.shared.counters, self.options.pace, self.in_flight);
        self.pool_share = pools.enroll(&self.own_pools, pace);
    }

    /// Readies the frame pools as the run starts, before its first frame. In a host
    /// ([`share_pools`](Self::share_pools)): every pool of the show is replaced by a handle on
    /// the host's pool of its shape, with the show's own capacity as its quota (a feedback's
    /// frame 0 is copied over). Alone (or for a pool the host has none for): a paced run's own
    /// pools are filled by a helper thread while the first frames flow.
    pub(crate) fn start_pools(&mut self) {
        let mut own = std::mem::take(&mut self.own_pools);
        if let Some(lease) = self.pool_share.take() {
            // The host's pools are made and filled, if this is its first show, outside the
            // show's scheduler lock.
            // Only the state holds the version before the run (nothing else runs yet, so
            // this cannot change before the rebind below); were it otherwise, the show keeps
            // its own pools and the host's registry is left alone.
            let bindable = self.shared.lock().running_version_mut().is_some();
            let handles = bindable.then(|| lease.bind(&own, self.threads));
            let mut st = self.shared.lock();
            if self.options.pace.is_some() {
                // A paced show begins its frame 0 only, then each frame just in time for its
                // deadline (the output raises the limit as it releases frames, once it has
                // measured the show's latency). Without this, every show would begin all its
                // frames in flight at once as it starts (or while paused), and the shared
                // pools would have to hold every show's frames in flight: the sum of the
                // quotas, nothing saved.
                st.allow_begin_until(0);
            }
            if let (Some(ver), Some(handles)) = (st.running_version_mut(), handles) {
                own = ver.pools.bind(lease, own, &handles);
            }
        }
        if self.options.pace.is_some() {
            crate::memory::fill_in_background(own);
        }
    }

    /// Takes the master sink out (to be driven by a host's clock thread).
    pub(crate) fn take_master_sink(&mut self) -> Box<dyn Sink> {
        self.sinks[0].take().expect("the master sink")
    }
}

/// What a started show runs beside its master output.
pub(crate) struct Side {
    followers: Vec<(usize, std::thread::JoinHandle<Result<()>>)>,
    edit_thread: Option<std::thread::JoinHandle<()>>,
    /// The master output's end of the edit thread's link (taken by the output).
    pub(crate) link: Option<crate::edit::EditLink>,
}

/// The end of a run, once its master output is over: finishes the master sink (every frame it
/// got was whole), lets the edit thread and the followers end, waits for the workers (`Some`:
/// the run's own, joined; `None`: a host's, which only need to be out of this show's jobs), and
/// returns the first error or the final figures.
pub(crate) fn conclude(
    shared: &Arc<Shared>,
    threads: usize,
    mut sink: Box<dyn Sink>,
    output: (Option<crate::stats::PacingStats>, Result<()>),
    side: Side,
    workers: Option<Vec<std::thread::JoinHandle<()>>>,
) -> Result<RunStats> {
    let (pacing, out_result) = output;
    let sink_name = shared.counters.stages()[shared.lock().sink_node(0)]
        .name
        .clone();
    // Finished now, before waiting for the workers (one may be blocked in a source that
    // nothing will unblock).
    let finish = guard(&sink_name, || sink.finish());
    // The edit thread ends when the output thread's end of it is gone, unless it is inside
    // an element's constructor: then it is left to finish, detached.
    if let Some(h) = side.edit_thread {
        let deadline = std::time::Instant::now() + JOIN_GRACE;
        while !h.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if h.is_finished() {
            let _ = h.join();
        }
    }
    // The followers end with the run (the master's end, an error or a stop wakes them).
    // After a normal end each finishes its sink (flushes its file) and is waited for; after
    // an early end (stop, error) one blocked in its sink gets the workers' grace, then is
    // left running, detached, like a blocked worker.
    let early = shared.lock().aborted();
    let deadline = std::time::Instant::now() + JOIN_GRACE;
    let mut follower_result = Ok(());
    for (port, h) in side.followers {
        while early && !h.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if early && !h.is_finished() {
            let node = shared.lock().sink_node(port);
            shared.emit(crate::Event::LeftRunning {
                stage: shared.counters.stages()[node].name.clone(),
                worker: threads + port,
            });
            continue;
        }
        let r = h.join().unwrap_or_else(|_| Ok(()));
        if follower_result.is_ok() {
            follower_result = r;
        }
    }
    match workers {
        Some(workers) => shared.join_workers(workers, JOIN_GRACE),
        None => shared.leave_host(JOIN_GRACE),
    }
    shared.join_io_threads(JOIN_GRACE);
    shared.join_gpu_thread(JOIN_GRACE);
    let (error, source_error) = {
        let mut st = shared.lock();
        st.take_errors()
    };
    if let Some(e) = error.or(source_error) {
        return Err(e);
    }
    out_result?;
    finish?;
    follower_result?;
    let mut stats = shared.counters.snapshot();
    stats.pacing = pacing;
    Ok(stats)
}
