//! Many shows in one process (issue #11): a [`Host`] runs several prepared shows, each with its
//! own name, rate, overload policy, sinks, commands and statistics, on **one** worker pool and
//! **one** clock thread.
//!
//! * **Workers.** `threads` host workers (`fp-worker-N`) serve every show. A show announces
//!   work (a frame may begin, a node became runnable, slices wait for help) by queueing its
//!   index on the host's work queue, once until a worker takes it (`HostSignals::work_for`); a
//!   worker takes a show from the queue, runs one of its jobs and the jobs its completions hand
//!   straight on (`Shared::host_round`), and announces the show again if it has more work than
//!   that, so that another worker joins in. The scheduler of each show is unchanged: its own
//!   lock, slots, serial and parallel nodes.
//! * **The clock.** One thread (`fp-clock`) drives every show's master output: each is an
//!   [`Output`] state machine, polled when its deadline comes (a binary heap of wake-up times:
//!   it sleeps to the nearest, then spins only the last stretch of a deadline, with one
//!   adaptive wake-up margin), when its port is signalled (a frame ready, the end: the workers
//!   queue the show's index and unpark the clock), or when its command poll is due. No show has
//!   a thread of its own for pacing. The clock runs `SCHED_FIFO` when asked and permitted.
//!   The shows of one period are put in groups of at most 16 whose deadlines fall together
//!   (one grid per group: one wake-up, one spin, the group released one show after the other),
//!   and the groups are spread evenly over the period, so that not every show's release falls
//!   on the same instant. Wake-ups that need no precision are rounded up to a 1 ms grid, and a
//!   show's signal wakes the clock only when it would sleep more than 0.5 ms. Deadlines are
//!   served before every other wake-up due at the same moment.
//! * **The standby.** With paced shows and two CPUs, a second thread (`fp-clock-standby`)
//!   keeps off the CPU the clock thread runs on (`standby.rs`). It sleeps to 0.25 ms after the earliest
//!   deadline not yet served and, if it is still not served then (the clock thread lost its
//!   CPU: on a VM, for up to milliseconds), serves what is due in the clock thread's place.
//!   Each show's state machine is behind a lock of its own and the wake-ups behind a short
//!   one (`Core`), so that both threads can serve at once, different shows: a clock thread
//!   that loses its CPU in the middle of one show's poll holds back that show only. Neither
//!   thread holds a lock while it sleeps or spins, nor waits for a show's lock (it asks the
//!   holder to poll that show again).
//! * **Ends.** A show ends by itself (its source's end, an error, its `stop`); its end is
//!   concluded on the calling thread (its sinks finished, its edit thread and follower sinks
//!   joined, its result reported by name) while the others go on.
//!
//! What a show still has of its own: its follower output threads (a sink other than the
//! master, unpaced, blocking only in its own I/O) and its edit thread when it has an editor.
//! Its frame pools are quota handles on the host's, one per frame size (`SharedPools`,
//! `pools.rs`). The master sink runs on the clock thread:
//! a sink that blocks (a full pipe, a peer applying back-pressure) delays every show's clock.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use framepipe_clock::{now_ns, prepare_pacing_thread, PiCondvar, PiMutex, WakeMargin};
use framepipe_core::{Error, Result, Sink};

use crate::output::{Next, Output, PacingStats};
use crate::pipeline::{conclude, Prepared, Side, JOIN_GRACE};
use crate::pools::SharedPools;
use crate::sched::Shared;
use crate::sched::{LockSummary, Log2Histogram};
use crate::standby::{self, Watch};
use crate::stats::RunStats;
use crate::worker::panic_message;

/// How one show of a [`Host`] ended.
#[derive(Debug)]
pub struct ShowResult {
    /// The show's name, as given to [`Host::add`].
    pub name: String,
    /// Its final figures, or the error that ended it (that show only: the others go on).
    pub result: Result<RunStats>,
}

/// Several shows in one process, on one worker pool and one clock thread (see the module
/// documentation in `host.rs` and docs/SHOWS.md).
#[derive(Debug)]
pub struct Host {
    threads: usize,
    shows: Vec<(String, Prepared)>,
    /// One frame pool per frame shape for every show, each show with its quota (`pools.rs`).
    pools: SharedPools,
    /// Whether the clock thread has a standby thread (on by default; see [`Host::set_standby`]).
    standby: bool,
    clock: Arc<ClockCounters>,
    /// Fault injection for tests: (after, for how long) the clock thread stays away once.
    stall: Option<(Duration, Duration)>,
}

impl Host {
    /// A host whose shows share `threads` workers (0 = one per available core).
    pub fn new(threads: usize) -> Self {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        Host {
            threads,
            shows: Vec::new(),
            pools: SharedPools::new(),
            standby: true,
            clock: Arc::new(ClockCounters::default()),
            stall: None,
        }
    }

    /// Fault injection, for tests: once `after` has passed since the clock thread started, the
    /// clock thread stays away for `stall` (a sleep where it would wait for a deadline), as if
    /// its CPU were taken away, so that what the standby does can be seen.
    #[doc(hidden)]
    pub fn inject_clock_stall(&mut self, after: Duration, stall: Duration) {
        self.stall = Some((after, stall));
    }

    /// Whether the clock thread gets a standby thread, on another CPU, that serves a
    /// deadline the clock thread missed by 0.25 ms (default: yes; it needs paced
    /// shows and two CPUs). It costs a wake-up per group deadline (see docs/SHOWS.md).
    pub fn set_standby(&mut self, on: bool) {
        self.standby = on;
    }

    /// The clock's figures (standby, rescued deadlines); a handle that stays valid after
    /// [`run`](Self::run).
    pub fn clock_counters(&self) -> Arc<ClockCounters> {
        Arc::clone(&self.clock)
    }

    /// The frame pools the shows share: one per frame shape (see [`SharedPools`]); a clone that
    /// stays valid after [`run`](Self::run), for their figures.
    pub fn pools(&self) -> SharedPools {
        self.pools.clone()
    }

    /// The worker threads the shows share. Each show must be prepared with this many
    /// (`Options::threads`).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How many shows were added.
    pub fn len(&self) -> usize {
        self.shows.len()
    }

    /// Whether no show was added.
    pub fn is_empty(&self) -> bool {
        self.shows.is_empty()
    }

    /// Adds a show under `name` (unique in the host). Its commands, events and editor are set
    /// on the `Prepared` beforehand, as for a run of its own.
    pub fn add(&mut self, name: impl Into<String>, show: Prepared) -> Result<()> {
        let name = name.into();
        if self.shows.iter().any(|(n, _)| *n == name) {
            return Err(Error::Pipeline(format!(
                "two shows are named '{name}'; give each show a name of its own"
            )));
        }
        if show.threads() != self.threads {
            return Err(Error::Pipeline(format!(
                "show '{name}' was prepared for {} worker threads, the host has {}",
                show.threads(),
                self.threads
            )));
        }
        let mut show = show;
        show.share_pools(&self.pools);
        self.shows.push((name, show));
        Ok(())
    }

    /// Runs every show to its end (its source's end, an error, or its `stop`) and returns how
    /// each ended, in the order they were added. `on_end` is called as each show ends, in the
    /// order they end, on the calling thread (which concludes each show: finishes its sinks,
    /// joins its threads), while the other shows go on.
    pub fn run(self, mut on_end: impl FnMut(&ShowResult)) -> Vec<ShowResult> {
        let n = self.shows.len();
        let threads = self.threads;
        let signals = Arc::new(HostSignals::new(n));
        let mut names = Vec::with_capacity(n);
        let mut starts = Vec::with_capacity(n);
        let mut all = Vec::with_capacity(n);
        let mut want_realtime = false;
        // Shows whose master sink blocks: they keep an output thread of their own.
        let mut own_outputs = Vec::new();
        for (i, (name, mut p)) in self.shows.into_iter().enumerate() {
            let shared = Arc::clone(&p.shared);
            shared.serve_host(Arc::clone(&signals), i);
            let sink = p.take_master_sink();
            let own = sink.blocks();
            if !own {
                shared.port_signals[0].route_to_host(Arc::clone(&signals), i);
                want_realtime |= p.options.pace.is_some() && p.options.realtime;
            }
            p.start_pools();
            let mut side = p.start_side();
            let link = side.link.take();
            let start = Start {
                sink,
                commands: p.commands.take(),
                link,
                side,
                options: p.options,
                stall_ns: p.stall_timeout_ns,
                shared: Arc::clone(&shared),
            };
            if own {
                own_outputs.push((i, start));
                starts.push(None);
            } else {
                starts.push(Some(start));
            }
            all.push(shared);
            names.push(name);
        }
        let all: Arc<[Arc<Shared>]> = all.into();
        let mut workers = Vec::with_capacity(threads);
        for w in 0..threads {
            let (sig, shows) = (Arc::clone(&signals), Arc::clone(&all));
            let spawned = std::thread::Builder::new()
                .name(format!("fp-worker-{w}"))
                .spawn(move || {
                    while let Some(i) = sig.next_work() {
                        sig.queued[i].store(false, Ordering::Release);
                        shows[i].host_round(w);
                    }
                });
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => {
                    // Without workers nothing would run: every show fails with the reason.
                    if workers.is_empty() {
                        for s in all.iter() {
                            let mut st = s.lock();
                            st.fail(Error::io("starting a worker thread", e.kind().into()));
                            st.after_change(s);
                        }
                    }
                }
            }
        }
        // Every show may begin its first frames: a worker looks at each.
        for i in 0..n {
            signals.work_for(i);
        }
        let (tx, rx) = std::sync::mpsc::channel::<Ended>();
        let mut unstarted = Vec::new();
        for (i, start) in own_outputs {
            let shared = Arc::clone(&start.shared);
            if let Err(e) = own_output(i, start, tx.clone()) {
                // Its sink and threads went with the thread that did not start: the show
                // is stopped and reported failed.
                let mut st = shared.lock();
                st.stop();
                st.after_change(&shared);
                unstarted.push((i, Error::io("starting an output thread", e.kind().into())));
            }
        }
        let clock = {
            let signals = Arc::clone(&signals);
            let setup = ClockSetup {
                realtime: want_realtime,
                standby: self.standby,
                counters: Arc::clone(&self.clock),
                stall: self.stall,
            };
            std::thread::Builder::new()
                .name("fp-clock".into())
                .spawn(move || clock_loop(&signals, starts, &setup, &tx))
        };
        let mut results: Vec<Option<ShowResult>> = (0..n).map(|_| None).collect();
        for (i, e) in unstarted {
            let r = ShowResult {
                name: names[i].clone(),
                result: Err(e),
            };
            on_end(&r);
            results[i] = Some(r);
        }
        match clock {
            Ok(clock) => {
                for ended in rx {
                    let i = ended.index;
                    let result =
                        conclude(&all[i], threads, ended.sink, ended.output, ended.side, None);
                    let r = ShowResult {
                        name: names[i].clone(),
                        result,
                    };
                    on_end(&r);
                    results[i] = Some(r);
                }
                // The clock thread ends when the last show has; its panics are caught inside.
                let _ = clock.join();
            }
            Err(e) => {
                for (i, name) in names.iter().enumerate() {
                    let r = ShowResult {
                        name: name.clone(),
                        result: Err(Error::io("starting the clock thread", e.kind().into())),
                    };
                    on_end(&r);
                    results[i] = Some(r);
                }
            }
        }
        signals.close();
        join_or_leave(workers);
        results
            .into_iter()
            .zip(names)
            .map(|(r, name)| {
                r.unwrap_or_else(|| ShowResult {
                    name,
                    result: Err(Error::Pipeline("the show ended without a result".into())),
                })
            })
            .collect()
    }
}

/// Runs show `index`'s master output on a thread of its own (its sink blocks: a pipe, a
/// socket, an encoder), as a run of its own would, so that its sink's back-pressure holds back
/// that show alone, not the clock thread every other show shares. The thread is detached: it
/// hands the show back through `tx` when its output is over, like the clock thread.
fn own_output(index: usize, start: Start, tx: Sender<Ended>) -> std::io::Result<()> {
    let Start {
        shared,
        mut sink,
        commands,
        link,
        side,
        options,
        stall_ns,
    } = start;
    std::thread::Builder::new()
        .name("fp-out-0".into())
        .spawn(move || {
            let output = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crate::output::run_output(&shared, 0, &mut *sink, commands, link, options, stall_ns)
            }));
            let output = output.unwrap_or_else(|p| {
                let e = Error::element(
                    "output thread",
                    format!("panicked: {}", crate::worker::panic_message(&*p)),
                );
                shared.break_run(e, None);
                (None, Ok(()))
            });
            let _ = tx.send(Ended {
                index,
                sink,
                output,
                side,
            });
        })
        .map(drop)
}

/// Joins the host workers; one still blocked inside an element after [`JOIN_GRACE`] (every
/// show has ended) is left running, detached: it exits when the element returns.
fn join_or_leave(workers: Vec<JoinHandle<()>>) {
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

/// Where shows announce work to the host's workers, and signal their master port to the clock
/// thread.
pub(crate) struct HostSignals {
    /// Shows with work, each at most once until a worker takes it (`queued`).
    work: PiMutex<VecDeque<usize>>,
    work_cv: PiCondvar,
    pub(crate) queued: Vec<AtomicBool>,
    closing: AtomicBool,
    /// Shows whose master port was signalled since the clock last looked.
    raised: PiMutex<VecDeque<usize>>,
    clock: OnceLock<Thread>,
    /// When the clock thread will wake up by itself (ns; 0 while it is awake): a signal
    /// unparks it only when that is more than [`LAZY_NS`] away, so that with many shows (the
    /// clock waking up every millisecond or so anyway) a frame being ready costs no wake-up.
    clock_wakes_at: AtomicI64,
}

impl std::fmt::Debug for HostSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostSignals")
            .field("shows", &self.queued.len())
            .finish()
    }
}

impl HostSignals {
    fn new(n: usize) -> Self {
        HostSignals {
            // Each show is in the queue at most once: it never grows past this.
            work: PiMutex::new(VecDeque::with_capacity(n + 1)),
            work_cv: PiCondvar::new(),
            queued: (0..n).map(|_| AtomicBool::new(false)).collect(),
            closing: AtomicBool::new(false),
            raised: PiMutex::new(VecDeque::with_capacity(2 * n + 16)),
            clock: OnceLock::new(),
            clock_wakes_at: AtomicI64::new(0),
        }
    }

    /// Show `show` has work for a worker.
    pub(crate) fn work_for(&self, show: usize) {
        if !self.queued[show].swap(true, Ordering::AcqRel) {
            self.work.lock().push_back(show);
            self.work_cv.notify_one();
        }
    }

    /// Show `show`'s master port was signalled: the clock thread polls it.
    pub(crate) fn port_raised(&self, show: usize) {
        self.raised.lock().push_back(show);
        if self.clock_wakes_at.load(Ordering::SeqCst) > now_ns() + LAZY_NS {
            if let Some(t) = self.clock.get() {
                t.unpark();
            }
        }
    }

    /// The next show with work, waiting for one; `None` once the host closes.
    fn next_work(&self) -> Option<usize> {
        let mut q = self.work.lock();
        loop {
            if let Some(i) = q.pop_front() {
                return Some(i);
            }
            if self.closing.load(Ordering::Acquire) {
                return None;
            }
            q = self.work_cv.wait(q);
        }
    }

    fn close(&self) {
        self.closing.store(true, Ordering::Release);
        let _q = self.work.lock();
        self.work_cv.notify_all();
    }
}

/// A show as handed to the clock thread.
struct Start {
    shared: Arc<Shared>,
    sink: Box<dyn Sink>,
    commands: Option<framepipe_control::CommandReader>,
    link: Option<crate::edit::EditLink>,
    side: Side,
    options: crate::pipeline::Options,
    stall_ns: u64,
}

/// A show whose master output is over, handed back to be concluded.
struct Ended {
    index: usize,
    sink: Box<dyn Sink>,
    output: (Option<PacingStats>, Result<()>),
    side: Side,
}

/// A running show on the clock thread.
struct Live {
    shared: Arc<Shared>,
    sink: Box<dyn Sink>,
    out: Output,
    side: Side,
}

/// Most shows of one period whose deadlines fall together: the shows of a period are put in
/// groups of at most this many, the groups spread evenly over the period. A group is released
/// in one wake-up of the clock thread, one show after the other (a few µs each), so the last of
/// a group is that much later than the first; fewer, larger groups mean fewer wake-ups and
/// less spinning.
const GROUP: i64 = 16;

/// The clock thread spins at most this long before a deadline, whatever its wake-ups have
/// been: it serves many shows, and spinning for one group's deadline is time taken from the
/// workers. (A late-judged frame is more than 1 ms late.)
const MAX_SPIN_NS: i64 = 100_000;

/// A show's signal (its frame is ready, its end) wakes the clock thread only if it would sleep
/// longer than this; otherwise the clock sees it when it wakes up.
const LAZY_NS: i64 = 500_000;

/// Wake-ups that need no precision (a frame may begin, a stall poll) are rounded up to this
/// grid, so that the shows of a group, whose times are close, share one wake-up.
pub(crate) const GRID_NS: i64 = 1_000_000;

/// The shows' first deadlines are at least this long after the clock starts: every show's
/// first frames (its sources starting, its pools being filled, hundreds of shows at once)
/// are made meanwhile instead of counting late. Measured with 200 shows of
/// `testsrc 64x64 ! stamp ! nullsink`, 125 frames each: 1,996 late frames (a median of 10 a
/// show) without it, 32 (a median of 0) with 300 ms; 500 ms is not measured separately.
const WARM_UP_NS: i64 = 500_000_000;

/// Most polls of one show in a row that ask to be polled again at once (an unpaced show
/// whose frames are always ready) before the others get their turn.
const AGAIN_LIMIT: usize = 64;

/// One wake-up: (when, generation, show).
type Timer = Reverse<(i64, u64, usize)>;

/// The clock thread's wake-ups: deadlines (a frame to release: precise, spun for) and the
/// others (a frame may begin, a command poll, a pause), each a binary heap of
/// (when, generation, show). An entry whose generation is not its show's any more (the show
/// was polled since) is stale and skipped.
struct Timers {
    deadlines: BinaryHeap<Timer>,
    others: BinaryHeap<Timer>,
}

impl Timers {
    fn push(&mut self, t: i64, generation: u64, show: usize, deadline: bool) {
        let heap = if deadline {
            &mut self.deadlines
        } else {
            &mut self.others
        };
        heap.push(Reverse((t, generation, show)));
    }

    /// The next show whose deadline (`deadline`) or other wake-up is due at `now`.
    fn pop_due(&mut self, now: i64, deadline: bool, slots: &[Slot]) -> Option<usize> {
        let heap = if deadline {
            &mut self.deadlines
        } else {
            &mut self.others
        };
        while let Some(&Reverse((t, g, i))) = heap.peek() {
            if t > now {
                return None;
            }
            heap.pop();
            if slots[i].current(g) {
                return Some(i);
            }
        }
        None
    }

    /// The earliest live wake-up, and whether it is a deadline (stale entries at the top are
    /// dropped on the way).
    fn next(&mut self, slots: &[Slot]) -> Option<(i64, bool)> {
        let live = |heap: &mut BinaryHeap<Timer>| {
            while let Some(&Reverse((t, g, i))) = heap.peek() {
                if slots[i].current(g) {
                    return Some(t);
                }
                heap.pop();
            }
            None
        };
        match (live(&mut self.deadlines), live(&mut self.others)) {
            (Some(d), Some(o)) if o < d => Some((o, false)),
            (Some(d), _) => Some((d, true)),
            (None, Some(o)) => Some((o, false)),
            (None, None) => None,
        }
    }
}

/// One show on the clock threads: its output state machine behind a lock of its own, so that a
/// clock thread that loses its CPU while it polls one show (inside its sink's `consume`, its
/// output's bookkeeping) holds back that show alone: the other thread serves the others.
struct Slot {
    /// The show, `None` once it ended (or if its output could not start). Never waited for:
    /// a thread that finds it held raises `wanted` and goes on (see [`Core::poll`]).
    live: Mutex<Option<Live>>,
    /// The generation of the show's wake-ups, bumped at every poll: a heap entry of another
    /// generation is stale. [`ENDED`] once the show ended.
    generation: AtomicU64,
    /// A poll was asked for while another thread held `live`: the holder polls once more
    /// before it lets go, so that no due wake-up or signal is lost.
    wanted: AtomicBool,
}

/// A slot's generation once its show ended: every wake-up of it is stale.
const ENDED: u64 = u64::MAX;

impl Slot {
    fn new(live: Option<Live>) -> Self {
        Slot {
            generation: AtomicU64::new(if live.is_some() { 0 } else { ENDED }),
            live: Mutex::new(live),
            wanted: AtomicBool::new(false),
        }
    }

    /// Whether a wake-up of generation `g` is the show's current one.
    fn current(&self, g: u64) -> bool {
        g != ENDED && self.generation.load(Ordering::Acquire) == g
    }
}

/// What the clock threads (the clock thread and its standby) share: every show's [`Slot`], the
/// wake-ups behind a short lock of their own (`timers`: a pop or a push, never held across a
/// show's poll), and how many shows still run. Both threads may serve at once, different
/// shows; neither holds a lock while it sleeps or spins (docs/SHOWS.md says what one lock over
/// every show did in P8).
struct Core {
    slots: Vec<Slot>,
    timers: PiMutex<Timers>,
    /// Shows not ended yet.
    running: AtomicUsize,
}

impl Core {
    /// Serves everything due now: deadlines first, then the signalled shows (taken from
    /// `HostSignals::raised` one at a time, so that what this thread has not taken yet stays
    /// there for the other one, should this one lose its CPU), then the other wake-ups whose
    /// time has come (deadlines still first). Returns how many frames it released.
    fn serve(&self, signals: &HostSignals, tx: &Sender<Ended>) -> u64 {
        let mut released = 0;
        // Deadlines first: a release waits for nothing else that is due (a frame's beginning
        // or a command poll of another group rounded to the same millisecond, a signal).
        loop {
            let due = self.timers.lock().pop_due(now_ns(), true, &self.slots);
            let Some(i) = due else { break };
            released += self.poll(i, tx);
        }
        // Shows whose port was signalled (a show signalled again while being polled is queued
        // again: the loop ends once no signal is left).
        loop {
            // In the order they were signalled.
            let raised = signals.raised.lock().pop_front();
            let Some(i) = raised else { break };
            released += self.poll(i, tx);
        }
        // The other wake-ups whose time has come, deadlines still first.
        loop {
            let due = {
                let now = now_ns();
                let mut timers = self.timers.lock();
                timers
                    .pop_due(now, true, &self.slots)
                    .or_else(|| timers.pop_due(now, false, &self.slots))
            };
            let Some(i) = due else { break };
            released += self.poll(i, tx);
        }
        released
    }

    /// Polls show `i` if no other thread is polling it, else asks that thread to poll it once
    /// more; returns how many frames this thread released.
    fn poll(&self, i: usize, tx: &Sender<Ended>) -> u64 {
        let slot = &self.slots[i];
        slot.wanted.store(true, Ordering::SeqCst);
        // Orders the store before the try_lock's load (store then load on both sides: the
        // holder's unlock and load of `wanted` below): one of the two threads sees the other.
        std::sync::atomic::fence(Ordering::SeqCst);
        let mut released = 0;
        loop {
            let mut live = match slot.live.try_lock() {
                Ok(g) => g,
                // A panic is caught inside `poll_locked`: the state is whole.
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                // The holder sees `wanted` before it lets go, or after (below).
                Err(TryLockError::WouldBlock) => return released,
            };
            while slot.wanted.swap(false, Ordering::SeqCst) {
                released += self.poll_locked(&mut live, i, tx);
            }
            drop(live);
            std::sync::atomic::fence(Ordering::SeqCst);
            // Raised between the last swap and the unlock, by a thread that found the lock
            // held: it went on, so this thread polls again.
            if !slot.wanted.load(Ordering::SeqCst) {
                return released;
            }
        }
    }

    /// Polls show `i`, held by this thread, until it waits for something (a wake-up is queued
    /// for it) or ends (handed back to be concluded); returns how many frames it released.
    fn poll_locked(&self, slot: &mut Option<Live>, i: usize, tx: &Sender<Ended>) -> u64 {
        let Some(live) = slot.as_mut() else {
            return 0;
        };
        let before = live.shared.counters.frames_out.load(Ordering::Relaxed);
        let g = self.slots[i].generation.fetch_add(1, Ordering::AcqRel) + 1;
        let mut again = 0;
        let ended = loop {
            let now = now_ns();
            let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                live.out.poll(&live.shared, &mut *live.sink, now)
            }));
            match next {
                Ok(Next::Again) => {
                    again += 1;
                    if again >= AGAIN_LIMIT {
                        self.timers.lock().push(now, g, i, false);
                        break false;
                    }
                }
                Ok(Next::Deadline(t)) => {
                    self.timers.lock().push(t, g, i, true);
                    break false;
                }
                Ok(Next::Wait(t)) => {
                    let t = t
                        .div_euclid(GRID_NS)
                        .saturating_add(1)
                        .saturating_mul(GRID_NS);
                    self.timers.lock().push(t, g, i, false);
                    break false;
                }
                Ok(Next::Done) => break true,
                Err(p) => {
                    let e = Error::element(
                        "output of the clock thread",
                        format!("panicked: {}", panic_message(&*p)),
                    );
                    live.shared.break_run(e, None);
                    break true;
                }
            }
        };
        let frames_out = live.shared.counters.frames_out.load(Ordering::Relaxed);
        if !ended {
            return frames_out.saturating_sub(before);
        }
        self.slots[i].generation.store(ENDED, Ordering::Release);
        let Live {
            shared,
            sink,
            out,
            side,
        } = slot.take().expect("polled");
        let output = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| out.finish(&shared)))
            .unwrap_or_else(|p| {
                let e = Error::element(
                    "output of the clock thread",
                    format!("panicked: {}", panic_message(&*p)),
                );
                shared.break_run(e, None);
                (None, Ok(()))
            });
        let _ = tx.send(Ended {
            index: i,
            sink,
            output,
            side,
        });
        self.running.fetch_sub(1, Ordering::AcqRel);
        frames_out.saturating_sub(before)
    }

    /// The next timed wake-up of any show, published for the standby thread (under the
    /// timers' lock, so that what the two threads publish comes in the order they computed
    /// it): a deadline, or what leads to one (a frame's beginning). `clock`: published by the
    /// clock thread (with its CPU, which the standby keeps off), else by the standby.
    fn publish(&self, watch: &Watch, clock: bool) -> Option<(i64, bool)> {
        let mut timers = self.timers.lock();
        let next = timers.next(&self.slots);
        let t = next.map(|(t, _)| t);
        if clock {
            watch.publish(t);
        } else {
            watch.publish_from_standby(t);
        }
        next
    }

    /// The earliest timed wake-up of any show now.
    fn next(&self) -> Option<(i64, bool)> {
        self.timers.lock().next(&self.slots)
    }

    fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }
}

/// How the clock thread runs (from the [`Host`]).
struct ClockSetup {
    realtime: bool,
    standby: bool,
    counters: Arc<ClockCounters>,
    stall: Option<(Duration, Duration)>,
}

/// The host clock's figures (`--stats` `clock`), readable after [`Host::run`].
#[derive(Debug, Default)]
pub struct ClockCounters {
    /// Whether a standby thread ran beside the clock thread.
    pub standby: AtomicBool,
    /// Times the standby thread woke up to watch a wake-up of the clock thread.
    pub standby_wakeups: std::sync::atomic::AtomicU64,
    /// Frames the standby thread released because the clock thread had not served a wake-up
    /// 0.25 ms after its time (it had lost its CPU, or was still busy in a long round: the
    /// standby then serves the shows beside it).
    pub rescued: std::sync::atomic::AtomicU64,
    /// How long each round of either clock thread (releases, signalled shows, beginnings,
    /// stall polls due at once) took: with hundreds of shows, the last release of a long
    /// round leaves that much after the first.
    rounds: Log2Histogram,
}

impl ClockCounters {
    /// The clock rounds' lengths (see the field): count, p50, p99, max.
    pub fn rounds(&self) -> LockSummary {
        self.rounds.summary()
    }
}

/// The clock thread: polls each show's master output at its deadlines, its signals and its
/// command polls, until every show has ended. With paced shows, two CPUs and `standby`, a
/// standby thread on another CPU than the clock thread's serves any deadline the clock
/// thread has not served 0.25 ms after its time: a virtual machine's host (or
/// anything else) taking the clock thread's CPU away for milliseconds then delays no release
/// by more than that, as long as the other CPU runs.
fn clock_loop(
    signals: &HostSignals,
    starts: Vec<Option<Start>>,
    how: &ClockSetup,
    tx: &Sender<Ended>,
) {
    let ClockSetup {
        realtime,
        standby: standby_wanted,
        ref counters,
        stall,
    } = *how;
    let mut stall = stall.map(|(after, d)| (now_ns() + after.as_nanos() as i64, d));
    let _ = signals.clock.set(std::thread::current());
    let paced = starts.iter().flatten().any(|s| s.options.pace.is_some());
    let with_standby = standby_wanted && paced && standby::possible();
    // Kept to the end: dropping it restores this thread's policy and timer slack.
    let setup = prepare_pacing_thread(realtime);
    let n = starts.len();
    let mut shows: Vec<Option<Live>> = Vec::with_capacity(n);
    let mut timers = Timers {
        deadlines: BinaryHeap::with_capacity(2 * n + 16),
        others: BinaryHeap::with_capacity(4 * n + 16),
    };
    let mut margin = WakeMargin::default();
    let now = now_ns();
    // Shows of the same period spread their first deadlines over it: (period, shows of it,
    // shows of it placed so far).
    let mut periods: Vec<(u64, i64, i64)> = Vec::new();
    for s in starts.iter().flatten() {
        if let Some(rate) = s.options.pace {
            let period = rate.period_ns();
            match periods.iter_mut().find(|(p, _, _)| *p == period) {
                Some((_, m, _)) => *m += 1,
                None => periods.push((period, 1, 0)),
            }
        }
    }
    for (i, start) in starts.into_iter().enumerate() {
        let Some(s) = start else {
            shows.push(None);
            continue;
        };
        let Start {
            shared,
            sink,
            commands,
            link,
            side,
            options,
            stall_ns,
        } = s;
        match Output::new(
            &shared,
            0,
            commands,
            link,
            options,
            stall_ns,
            setup.realtime,
        ) {
            Ok(mut out) => {
                out.set_begin_slack(Duration::from_nanos(GRID_NS as u64));
                out.set_margin_floor(Duration::from_nanos(crate::budget::HOST_MIN_MARGIN_NS));
                if let Some(rate) = options.pace {
                    let period = rate.period_ns();
                    if let Some((_, m, k)) = periods.iter_mut().find(|(p, _, _)| *p == period) {
                        // Show k of m: group k / GROUP of ceil(m / GROUP), spread over the
                        // period.
                        let groups = (*m + GROUP - 1) / GROUP;
                        out.set_grid(now + WARM_UP_NS, (*k / GROUP) * period as i64 / groups);
                        *k += 1;
                    }
                }
                shows.push(Some(Live {
                    shared,
                    sink,
                    out,
                    side,
                }));
                timers.push(now, 0, i, false);
            }
            Err(e) => {
                shows.push(None);
                let _ = tx.send(Ended {
                    index: i,
                    sink,
                    output: (None, Err(e)),
                    side,
                });
            }
        }
    }
    let running = shows.iter().filter(|s| s.is_some()).count();
    let core = Core {
        slots: shows.into_iter().map(Slot::new).collect(),
        timers: PiMutex::new(timers),
        running: AtomicUsize::new(running),
    };
    let watch = Watch::default();
    let (core, standby) = (&core, &watch);
    std::thread::scope(|scope| {
        if with_standby {
            let spawned = std::thread::Builder::new()
                .name("fp-clock-standby".into())
                .spawn_scoped(scope, move || {
                    let _setup = prepare_pacing_thread(realtime);
                    standby.stand_by(|| {
                        let t0 = now_ns();
                        let served = core.serve(signals, tx);
                        counters.rounds.record((now_ns() - t0).max(0) as u64);
                        let wake_clock = if core.running() == 0 {
                            true
                        } else {
                            // A wake-up this round queued before the clock thread's sleep
                            // ends (it computed its sleep before): wake it up for it.
                            let next = core.publish(standby, false);
                            let sleeps_to = signals.clock_wakes_at.load(Ordering::SeqCst);
                            next.is_some_and(|(t, _)| sleeps_to != 0 && t < sleeps_to)
                        };
                        if wake_clock {
                            if let Some(t) = signals.clock.get() {
                                t.unpark();
                            }
                        }
                        (served, core.running() != 0)
                    })
                });
            if spawned.is_ok() {
                counters.standby.store(true, Ordering::Relaxed);
            }
        }
        loop {
            let t0 = now_ns();
            core.serve(signals, tx);
            counters.rounds.record((now_ns() - t0).max(0) as u64);
            if core.running() == 0 {
                break;
            }
            let next = core.publish(standby, true);
            // Sleep to the next one (a signal unparks), and spin the last stretch of a
            // deadline.
            let Some((t, precise)) = next else {
                // Announced like a timed sleep, so that a signal or the standby (a wake-up it
                // queued) unparks it.
                signals
                    .clock_wakes_at
                    .store(now_ns() + 2_000_000, Ordering::SeqCst);
                if signals.raised.lock().is_empty() && core.next().is_none() {
                    std::thread::park_timeout(Duration::from_millis(2));
                }
                signals.clock_wakes_at.store(0, Ordering::SeqCst);
                continue;
            };
            let now = now_ns();
            if let Some((_, d)) = stall.filter(|&(at, _)| precise && now >= at) {
                stall = None;
                std::thread::sleep(d);
                continue;
            }
            let sleep_to = if precise {
                t - margin.ns().min(MAX_SPIN_NS)
            } else {
                t
            };
            if sleep_to > now {
                // Announce the sleep, then look at the signals and the wake-ups once more (a
                // signal raised, or a wake-up the standby queued, before the announcement did
                // not unpark: it must be seen here).
                signals.clock_wakes_at.store(sleep_to, Ordering::SeqCst);
                if !signals.raised.lock().is_empty() || core.next().is_some_and(|(u, _)| u < t) {
                    signals.clock_wakes_at.store(0, Ordering::SeqCst);
                    continue;
                }
                std::thread::park_timeout(Duration::from_nanos((sleep_to - now) as u64));
                signals.clock_wakes_at.store(0, Ordering::SeqCst);
                let woke = now_ns();
                if woke < sleep_to {
                    // Unparked: a show was signalled, or the standby queued an earlier
                    // wake-up.
                    continue;
                }
                if precise {
                    margin.learn(woke - sleep_to);
                }
            }
            if precise {
                while now_ns() < t {
                    std::hint::spin_loop();
                }
            }
        }
        standby.finish();
    });
    counters
        .standby_wakeups
        .store(watch.wakeups.load(Ordering::Relaxed), Ordering::Relaxed);
    counters
        .rescued
        .store(watch.rescued.load(Ordering::Relaxed), Ordering::Relaxed);
    drop(setup);
}
