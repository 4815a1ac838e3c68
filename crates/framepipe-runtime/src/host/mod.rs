//! Many shows in one process (issue #11): a [`Host`] runs several prepared shows, each with its
//! own name, rate, overload policy, sinks, commands and statistics, on **one** worker pool and
//! **one** clock thread.
//!
//! * **Workers.** `threads` host workers (`fp-worker-N`) serve every show. A show announces
//!   work (a frame may begin, a node became runnable, slices wait for help) by queueing its
//!   index on the host's work queue, once until a worker takes it (`HostSignals::work_for`); a
//!   worker takes a show from the queue, runs one of its jobs and the jobs its completions hand
//!   straight on (`exec::work` over `HostQueue`, `workers.rs`), and announces the show again if it has more work than
//!   that, so that another worker joins in. The scheduler of each show is unchanged: its own
//!   lock, slots, serial and parallel nodes.
//! * **The clock.** One thread (`fp-clock`) drives every show's master output: each is an
//!   [`Output`](crate::output::Output) state machine, polled when its deadline comes (a binary heap of wake-up times:
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
//!   keeps off the CPU the clock thread runs on (`output/standby.rs`). It sleeps to 0.25 ms after the earliest
//!   deadline not yet served and, if it is still not served then (the clock thread lost its
//!   CPU: on a VM, for up to milliseconds), serves what is due in the clock thread's place.
//!   Each show's state machine is behind a lock of its own and the wake-ups behind a short
//!   one (`ShowTable`), so that both threads can serve at once, different shows: a clock thread
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
//! `memory/`). The master sink runs on the clock thread:
//! a sink that blocks (a full pipe, a peer applying back-pressure) delays every show's clock.
//!
//! * `mod.rs`: [`Host`] (adding shows, running them, concluding each by name), a blocking
//!   master sink's own output thread.
//! * `workers.rs`: the host's workers (`HostQueue`, the work source of `exec`'s worker loop).
//! * `signals.rs`: `HostSignals`, the queue of shows with work and the raised master ports.
//! * `clock.rs`: the clock thread and its standby, its figures, its grid (`GRID_NS`, which `memory::HOST_BEGIN_SLACK_NS` must equal).
//! * `shows.rs`: the clock's show table (`ShowTable`, `ShowEntry`): serving what is due.
//! * `timers.rs`: the clock's wake-ups.

mod clock;
mod shows;
mod signals;
mod timers;
mod workers;

use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use framepipe_core::{Error, Result};

use crate::exec::{catch_panic, panic_error, ShowQueue};
use crate::memory::SharedPools;
use crate::sched::Shared;
use crate::show::{conclude, Prepared};
use crate::stats::RunStats;

pub use clock::ClockCounters;
use clock::{clock_loop, ClockSetup, Ended, Start};
pub(crate) use signals::HostSignals;
use workers::{join_or_leave, start_workers};

/// How one show of a [`Host`] ended.
#[derive(Debug)]
pub struct ShowResult {
    /// The show's name, as given to [`Host::add`].
    pub name: String,
    /// Its final figures, or the error that ended it (that show only: the others go on).
    pub result: Result<RunStats>,
}

/// Several shows in one process, on one worker pool and one clock thread (see the module
/// documentation in `host/mod.rs` and docs/SHOWS.md).
#[derive(Debug)]
pub struct Host {
    threads: usize,
    shows: Vec<(String, Prepared)>,
    /// One frame pool per frame shape for every show, each show with its quota (`memory/shared.rs`).
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
            shared.workers.serve_from(Arc::clone(&signals) as _, i);
            let sink = p.take_master_sink();
            let own = sink.blocks();
            if !own {
                shared.port_signals[0].route_to(Arc::clone(&signals) as _, i);
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
        let workers = start_workers(&signals, &all, threads);
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
            let output = catch_panic(|| {
                crate::output::run_output(&shared, 0, &mut *sink, commands, link, options, stall_ns)
            });
            let output = output.unwrap_or_else(|p| {
                shared.break_run(panic_error("output thread", &p), None);
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
