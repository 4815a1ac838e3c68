//! A host's shared pools: one pool per frame shape, a quota handle per show version, one
//! filler thread.

use std::sync::{Arc, Mutex};

use framepipe_core::FramePool;

use super::{Held, PoolPlan};

/// How often a host's pool filler looks at its pools (and at the shows' latency budgets).
const TOP_UP_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// Frames a paced show in a host begins this much before its latency budget says: the host's
/// clock rounds a show's "may begin" wake-ups up to its grid and lets its frames begin that
/// much earlier (`set_begin_slack` in `host.rs`).
const HOST_BEGIN_SLACK_NS: u64 = crate::host::GRID_NS as u64;

/// How long a worker may be held up (its CPU taken away, other shows' frames before this
/// one's) without the filler having seen it: the default latency budget then grows by 5/4 of
/// it, and so do the frames a show begins ahead. A show whose period is short against it (1000
/// fps) is filled for every frame it may have in flight; at 25 fps it changes nothing (10 ms is
/// under a period). A longer delay that makes a worker's acquire grow the pool raises the
/// frames kept free by as many (the pool's own evidence, `grown_on_acquire`).
const WORKER_DELAY_NS: u64 = 10_000_000;

/// A shared pool is made with room for this many times the quotas enrolled when the host
/// starts, so that a live edit can hold the new version's quota next to the old one's until the
/// old version is dropped (slots without a buffer cost a few words each; a shared-memory pool's
/// memfd is sparse). An edit that finds no room gets a new pool of that shape.
const EDIT_ROOM: usize = 2;

/// The frame pools of a [`Host`](crate::Host)'s shows: **one pool per frame shape** (width,
/// height, and whether its frames are in shared memory: what makes two frames interchangeable;
/// the format and stride are always RGBA, `width * 4`) for every show, each show holding a
/// quota handle on it ([`FramePool::with_quota`]) whose quota is the capacity its own plan
/// gives it. The quotas in force never add up to more than the pool's frames (a show within its
/// quota always gets a frame, one at its quota is refused as its own pool's end would refuse
/// it), but frames are made only for what the shows hold *together*.
///
/// **The filler.** A helper thread (`fp-pool-fill`) looks at every pool every [`TOP_UP_EVERY`]
/// until the last show is gone, and makes frames (on its own thread, never on a worker or an
/// output thread) up to a target: per paced show, what it holds between frames (its plan's
/// `idle`: the frame waiting for its deadline, the output's last frame, what nodes keep) plus
/// the frames it begins ahead beyond that one,
/// `min(in_flight, 1 + (budget + 12.5 ms + 1 ms) / period) - 1` (the latency budget now, read
/// lock-free from the show's counters, `latency_budget_us`; 12.5 ms is what a worker held up
/// for [`WORKER_DELAY_NS`] adds to the default budget; 1 ms is how much earlier a host lets a
/// frame begin), plus two frames per worker (a running stage's input and output); then at least
/// one frame per worker free, and one more for every frame a worker's acquire had to make. At
/// 25 fps the frames ahead are the one waiting frame (a budget under 26.5 ms); at 1000 fps,
/// every frame in flight.
///
/// Why the budget and not the pool's own evidence (its peak, or `grown_on_acquire`): the
/// evidence comes only once a worker has already needed the frame, while the budget comes
/// first: a show publishes it when its frame 0 is ready, half a second before its first
/// deadline lets the next frames begin, so the filler has made them before they are asked
/// for. It also costs one atomic load per show per look (400 shows: 400 loads every 20 ms),
/// and it falls again when the budget does (frames made stay made; the target only says what
/// to make next).
///
/// **Shows and versions.** Shows are enrolled when they are added to the host (their plans
/// only) and bound when the host starts: the pools are made then and each show's pools are
/// replaced by quota handles before its first frame. A live edit of a show in a host gets its
/// new version's handles here too, on the edit thread: a quota handle on the pool of each shape
/// the new version uses (the same pool when the shape is kept; a new pool, made and filled on
/// the edit thread, for a new shape or when the pool has no room left), once every check of the
/// edit has passed. What a version holds (its quota, its part of the filler's target, the
/// memory its pools count in its show's book) is given back once the version is dropped (a
/// replaced one: on the edit thread, once its frames are back) and every frame taken through
/// its handles is back, at the registry's next sweep (`Registry::sweep`: the filler's look,
/// an edit joining); a pool no version holds any more is dropped then, once no frame of it is
/// out, its buffers freed on the filler's or the edit thread. Dropping a version takes no lock
/// (`PoolLease`).
///
/// Cloning it is cheap: a clone sees the same pools ([`stats`](Self::stats)).
#[derive(Debug, Clone, Default)]
pub struct SharedPools {
    inner: Arc<Mutex<Registry>>,
}

#[derive(Debug, Default)]
struct Registry {
    shapes: Vec<Shape>,
    /// The pools are made (the host started): no more shows may be enrolled.
    open: bool,
    /// The host's workers (set when it starts).
    threads: usize,
    /// The filler thread runs.
    filling: bool,
    next_id: u64,
    next_show: u64,
}

/// One pool of a shape (a shape may have several: see [`EDIT_ROOM`]).
#[derive(Debug)]
struct Shape {
    width: u32,
    height: u32,
    shared: bool,
    /// The versions holding a quota handle on it (before the host starts: enrolled).
    members: Vec<Member>,
    /// The shows that held one so far (a show's live edits count once).
    seen: Vec<u64>,
    /// The sum of their quotas: the most frames they may hold together.
    quota: usize,
    /// The most the quotas ever added up to (what `stats` calls its capacity).
    quota_peak: usize,
    /// The most the filler aimed at so far (its frames are made, never freed).
    target: usize,
    /// Frames the filler keeps free beyond one per worker: what workers' acquires had to make
    /// themselves (no free frame) since the host started, as the filler saw.
    extra_free: usize,
    /// `grown_on_acquire` at the filler's last look.
    grown_seen: usize,
    pool: Option<FramePool>,
    /// The pool was dropped (no version held a quota handle on it any more and every frame of
    /// it was back: see [`Registry::sweep`]); its last figures.
    retired: Option<(usize, usize, usize)>,
}

impl Shape {
    fn key(&self) -> (u32, u32, bool) {
        (self.width, self.height, self.shared)
    }

    /// Whether a new quota handle of `quota` frames fits: a handle left (one per frame of the
    /// pool) and frames for every quota in force.
    fn room_for(&self, quota: usize) -> bool {
        self.pool.as_ref().is_some_and(|p| {
            p.sharing().handles < p.pool_capacity()
                && self.quota.saturating_add(quota) <= p.pool_capacity()
        })
    }

    fn join(&mut self, m: Member, show: u64) {
        if !self.seen.contains(&show) {
            self.seen.push(show);
        }
        self.quota = self.quota.saturating_add(m.quota);
        self.quota_peak = self.quota_peak.max(self.quota);
        self.members.push(m);
    }

    /// What the filler makes ahead of need now (see [`SharedPools`]): at most the quotas.
    fn fill_target(&self, threads: usize) -> usize {
        self.members
            .iter()
            .map(Member::holds)
            .fold(0usize, usize::saturating_add)
            .saturating_add(2 * threads)
            .min(self.quota)
    }
}

/// A version's quota handle on a shared pool, as the registry counts it.
#[derive(Debug)]
struct Member {
    id: u64,
    quota: usize,
    /// A clone of the version's quota handle (`None` while enrolled: the pool is not made
    /// yet): what it holds is read before its quota is given back.
    handle: Option<FramePool>,
    /// Its lease's life: once the lease is dropped, the member leaves at the registry's next
    /// sweep after every frame of its handle is back.
    life: Arc<LeaseLife>,
    /// Frames of this pool the show holds between frames (`PoolPlan::idle`).
    idle: usize,
    /// Frames of this pool each frame begun ahead holds (`PoolPlan::ahead`).
    ahead: usize,
    /// A paced show's figures (the frames it begins ahead); `None`: unpaced, it grows the pool
    /// on demand only.
    pace: Option<Pace>,
}

impl Member {
    /// What it may hold at once (see [`SharedPools`]): its idle frames, and the frames it
    /// begins ahead by its latency budget now (read lock-free) grown by a worker's delay; 0
    /// when unpaced.
    fn holds(&self) -> usize {
        let Some(p) = &self.pace else { return 0 };
        let budget_ns = p
            .counters
            .latency_budget_us()
            .saturating_mul(1000)
            .saturating_add(WORKER_DELAY_NS.saturating_mul(5) / 4);
        let begun = budget_ns
            .saturating_add(HOST_BEGIN_SLACK_NS)
            .checked_div(p.period_ns)
            .unwrap_or(0)
            .saturating_add(1);
        let begun = usize::try_from(begun)
            .unwrap_or(usize::MAX)
            .min(p.in_flight);
        // The one waiting frame is in `idle`.
        self.idle
            .saturating_add(self.ahead.saturating_mul(begun.saturating_sub(1)))
            .min(self.quota)
    }
}

/// What the filler needs of a paced show: its latency budget (read lock-free), its period and
/// the most frames it has in flight.
#[derive(Debug, Clone)]
pub(crate) struct Pace {
    pub counters: Arc<crate::stats::Counters>,
    pub period_ns: u64,
    pub in_flight: usize,
}

/// A version's place in a host's [`SharedPools`]: its members (one per pool it uses), counted
/// until it is dropped and every frame taken through its handles is back (then the quotas, the
/// filler's target and the memory its version counted are given back, at the registry's next
/// sweep: [`Registry::sweep`]).
///
/// Dropping it takes no lock and frees no frame buffer (one atomic store, its small list of
/// member ids, and two `Arc` counts: at a host's teardown the last of those may free the
/// registry on whichever thread drops it): whoever drops the version last, even a worker or an
/// output thread, does not touch the registry's lock, and a frame of the version still out
/// keeps its quota counted (a show within its quota always gets a frame).
#[derive(Debug)]
pub(crate) struct PoolLease {
    reg: SharedPools,
    /// The show (its versions' leases share it).
    show: u64,
    /// (shape, member id) per pool of the version, in its order.
    ids: Vec<(usize, u64)>,
    life: Arc<LeaseLife>,
}

/// What a [`PoolLease`]'s members share with it: whether it was dropped, and the memory its
/// version counted for its pools ([`Held`]), kept counted until its last member leaves.
#[derive(Debug, Default)]
struct LeaseLife {
    dropped: std::sync::atomic::AtomicBool,
    held: std::sync::OnceLock<Held>,
}

impl PoolLease {
    /// The host's pools this version's are on.
    pub(crate) fn pools(&self) -> &SharedPools {
        &self.reg
    }

    /// Keeps `held` (what the version's pools count in its show's memory book) counted until
    /// the lease's last member has left, its frames back, rather than until the version is
    /// dropped.
    pub(crate) fn count(&self, held: Held) {
        let _ = self.life.held.set(held);
    }
}

impl Drop for PoolLease {
    fn drop(&mut self) {
        self.life
            .dropped
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

/// One shared pool of a host, as [`SharedPools::stats`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedPoolStats {
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// Its frames are in shared memory (an isolated plugin runs in the process).
    pub shared_memory: bool,
    /// Shows that held a quota handle on it so far (before the host starts: enrolled; a show
    /// counts once, whatever its live edits).
    pub shows: usize,
    /// Quota handles on it now: one per running show, two for a show between a live edit's
    /// switch and the drop of the version it replaced (once that version is dropped and every
    /// frame of it is back, at the registry's next sweep: within 20 ms).
    pub holders: usize,
    /// The most frames the quotas in force ever added up to (the shows' own pools' capacity).
    pub capacity: usize,
    /// The sum of the quotas in force now (0 once every show is gone).
    pub quota: usize,
    /// The most its filler aimed at so far (see [`SharedPools`]).
    pub target: usize,
    /// Frames made so far.
    pub allocated: usize,
    /// Frames the shows hold now.
    pub in_use: usize,
    /// The most frames the shows held at once so far.
    pub peak: usize,
    /// Frames made by a show's acquire (no free frame) rather than by the filler.
    pub grown_on_acquire: usize,
    /// The pool was dropped, its frames freed: no version held a quota handle on it any more
    /// (an edit changed the frame size, its shows ended) and every frame of it was back. Its
    /// figures are its last.
    pub dropped: bool,
}

impl SharedPools {
    /// No pools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One line per pool, in the order they were made (first enrolled).
    pub fn stats(&self) -> Vec<SharedPoolStats> {
        let reg = self.lock();
        reg.shapes
            .iter()
            .map(|s| {
                let (allocated, in_use, peak, grown) = match (&s.pool, s.retired) {
                    (Some(p), _) => {
                        let sh = p.sharing();
                        (p.allocated(), sh.out, sh.peak, sh.grown_on_acquire)
                    }
                    (None, Some((a, peak, grown))) => (a, 0, peak, grown),
                    (None, None) => (0, 0, 0, 0),
                };
                SharedPoolStats {
                    width: s.width,
                    height: s.height,
                    shared_memory: s.shared,
                    shows: s.seen.len(),
                    holders: s.members.len(),
                    capacity: s.quota_peak,
                    quota: s.quota,
                    target: s.target,
                    allocated,
                    in_use,
                    peak,
                    grown_on_acquire: grown,
                    dropped: s.pool.is_none() && s.retired.is_some(),
                }
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a show's pools in (at `Host::add`), one member per pool; `None` once the pools
    /// are made (the host started). Dropping the lease unbound counts them out again.
    pub(crate) fn enroll(
        &self,
        pools: &[(FramePool, PoolPlan)],
        pace: Option<Pace>,
    ) -> Option<PoolLease> {
        let mut reg = self.lock();
        if reg.open {
            return None;
        }
        let mut ids = Vec::with_capacity(pools.len());
        let show = reg.next_show;
        reg.next_show += 1;
        let life = Arc::new(LeaseLife::default());
        for (pool, plan) in pools {
            let key = (pool.width(), pool.height(), pool.is_shared());
            let s = match reg.shapes.iter().position(|s| s.key() == key) {
                Some(s) => s,
                None => {
                    reg.shapes.push(new_shape(key));
                    reg.shapes.len() - 1
                }
            };
            let id = reg.next_id;
            reg.next_id += 1;
            reg.shapes[s].join(
                Member {
                    id,
                    quota: pool.capacity(),
                    handle: None,
                    life: Arc::clone(&life),
                    idle: plan.idle,
                    ahead: plan.ahead,
                    pace: pace.clone(),
                },
                show,
            );
            ids.push((s, id));
        }
        Some(PoolLease {
            reg: self.clone(),
            show,
            ids,
            life,
        })
    }

    /// An enrolled show's handles, one per pool it enrolled (same order as `own`), each with
    /// that pool's capacity as its quota. The first call makes every pool (room for
    /// [`EDIT_ROOM`] times the quotas enrolled) and starts the filler; `threads`: the host's
    /// workers. `None` for a pool that could not be made (the show keeps its own).
    pub(crate) fn bind(
        &self,
        lease: &PoolLease,
        own: &[FramePool],
        threads: usize,
    ) -> Vec<Option<FramePool>> {
        let mut reg = self.lock();
        let mut first = Vec::new();
        if !reg.open {
            // Shows dropped since they were enrolled are not counted.
            reg.sweep(&mut Vec::new());
            reg.open = true;
            reg.threads = threads;
            for shape in &mut reg.shapes {
                let slots = shape.quota.saturating_mul(EDIT_ROOM).max(1);
                shape.pool = make_pool(shape.key(), slots);
            }
            // What the shows hold first is made now, before any show starts (below, outside
            // the lock); the filler goes on from there.
            reg.look(&mut first);
        }
        let handles = own
            .iter()
            .zip(&lease.ids)
            .map(|(p, &(s, id))| {
                let shape = &mut reg.shapes[s];
                let handle = shape
                    .pool
                    .as_ref()
                    .map(|pool| pool.with_quota(p.capacity()));
                if let Some(m) = shape.members.iter_mut().find(|m| m.id == id) {
                    m.handle.clone_from(&handle);
                }
                handle
            })
            .collect();
        drop(reg);
        fill_all(&first);
        self.keep_filled(&mut self.lock());
        handles
    }

    /// A live edit's new version (on the edit thread): a quota handle per pool of `own` (each
    /// with its plan; the pool's capacity as the quota) on the host's pool of that shape, or
    /// on a new one when the shape is new or its pools have no room left; a new pool is filled
    /// here (to its plan's `fill`, as a show alone fills an edit's pools), and an existing one
    /// gets the frames the version will hold ahead of its first frames. `None` for a pool
    /// that could not be made (the version keeps its own).
    pub(crate) fn join(
        &self,
        show: u64,
        own: &[(FramePool, PoolPlan)],
        pace: Option<Pace>,
    ) -> (Vec<Option<FramePool>>, PoolLease) {
        let mut gone = Vec::new();
        let mut reg = self.lock();
        // Quotas given back and pools dropped since the filler's last look count now.
        reg.sweep(&mut gone);
        let mut handles = Vec::with_capacity(own.len());
        let mut ids = Vec::with_capacity(own.len());
        let mut fill = Vec::new();
        let life = Arc::new(LeaseLife::default());
        for (own_pool, plan) in own {
            let key = (own_pool.width(), own_pool.height(), own_pool.is_shared());
            let quota = own_pool.capacity();
            let found = reg
                .shapes
                .iter()
                .position(|s| s.key() == key && s.room_for(quota));
            let (s, new) = match found {
                Some(s) => (s, false),
                None => {
                    let mut shape = new_shape(key);
                    shape.pool = make_pool(key, quota.saturating_mul(EDIT_ROOM));
                    if shape.pool.is_none() {
                        handles.push(None);
                        continue;
                    }
                    reg.shapes.push(shape);
                    (reg.shapes.len() - 1, true)
                }
            };
            let id = reg.next_id;
            reg.next_id += 1;
            let pool = reg.shapes[s]
                .pool
                .clone()
                .expect("a shape with room has its pool");
            let handle = pool.with_quota(quota);
            let member = Member {
                id,
                quota,
                handle: Some(handle.clone()),
                life: Arc::clone(&life),
                idle: plan.idle,
                ahead: plan.ahead,
                pace: pace.clone(),
            };
            let ahead_of_need = if new { plan.fill } else { member.holds() };
            let shape = &mut reg.shapes[s];
            shape.join(member, show);
            let cap = shape.quota;
            fill.push((pool.clone(), ahead_of_need, cap));
            handles.push(Some(handle));
            ids.push((s, id));
        }
        self.keep_filled(&mut reg);
        drop(reg);
        // Dropped here, on the edit thread, outside the lock (a pool nobody holds any more).
        drop(gone);
        // Made here, on the edit thread, outside the lock: enough free frames for what the
        // new version holds ahead of need (never more than the quotas in force).
        for (pool, free, cap) in fill {
            let out = pool.allocated().saturating_sub(pool.available());
            pool.fill(out.saturating_add(free).min(cap));
        }
        let lease = PoolLease {
            reg: self.clone(),
            show,
            ids,
            life,
        };
        (handles, lease)
    }

    /// Starts the filler unless it runs (see [`SharedPools`]); it ends when no version holds a
    /// handle any more and every pool is dropped.
    fn keep_filled(&self, reg: &mut Registry) {
        if reg.filling {
            return;
        }
        let pools = self.clone();
        let started = std::thread::Builder::new()
            .name("fp-pool-fill".into())
            .spawn(move || pools.filler());
        reg.filling = started.is_ok();
    }

    /// The filler's loop: every [`TOP_UP_EVERY`], the registry's sweep (the members of dropped
    /// versions whose frames are back leave; pools nobody holds any more are dropped, here),
    /// then each pool to its target, then enough frames free (within the quotas in force).
    /// Nothing is allocated per look once its lists have grown to the number of pools.
    fn filler(&self) {
        let mut work = Vec::new();
        let mut gone = Vec::new();
        loop {
            work.clear();
            {
                let mut reg = self.lock();
                reg.sweep(&mut gone);
                if reg
                    .shapes
                    .iter()
                    .all(|s| s.members.is_empty() && s.pool.is_none())
                {
                    reg.filling = false;
                    drop(reg);
                    gone.clear();
                    return;
                }
                reg.look(&mut work);
            }
            // Their buffers are freed here, outside the lock.
            gone.clear();
            fill_all(&work);
            std::thread::sleep(TOP_UP_EVERY);
        }
    }
}

/// What the filler does for one pool after a look: (the pool, its target, frames to keep
/// free, the most frames it may make: the quotas in force).
type FillWork = (FramePool, usize, usize, usize);

impl Registry {
    /// Members whose lease was dropped (their version is gone) leave once every frame taken
    /// through their handle is back: their quota, their part of the filler's target and the
    /// memory their version counted ([`PoolLease::count`]) are given back then, never while a
    /// frame of theirs is out. A pool with no member left and no frame out is dropped: moved
    /// to `gone`, whose caller lets go of it outside the lock (the filler's or the edit
    /// thread: never a worker or an output thread; its buffers are freed there unless a
    /// handle is still held elsewhere). Only once the pools are made (the host started).
    fn sweep(&mut self, gone: &mut Vec<FramePool>) {
        use std::sync::atomic::Ordering::Acquire;
        for shape in &mut self.shapes {
            let mut k = 0;
            while k < shape.members.len() {
                let m = &shape.members[k];
                let home = m.handle.as_ref().is_none_or(|h| h.in_use() == 0);
                if m.life.dropped.load(Acquire) && home {
                    let m = shape.members.swap_remove(k);
                    shape.quota = shape.quota.saturating_sub(m.quota);
                } else {
                    k += 1;
                }
            }
            if !self.open || !shape.members.is_empty() {
                continue;
            }
            if let Some(p) = shape.pool.take_if(|p| p.sharing().out == 0) {
                let sh = p.sharing();
                shape.retired = Some((p.allocated(), sh.peak, sh.grown_on_acquire));
                gone.push(p);
            }
        }
    }

    /// Reads every show's latency budget and every pool's evidence, and lists what to make
    /// (one atomic load per show, one per pool: no lock a show takes, nothing allocated once
    /// `work` has room for every pool).
    fn look(&mut self, work: &mut Vec<FillWork>) {
        work.clear();
        let threads = self.threads;
        for shape in &mut self.shapes {
            let Some(pool) = &shape.pool else { continue };
            let grown = pool.sharing().grown_on_acquire;
            if grown > shape.grown_seen {
                shape.extra_free = shape.extra_free.saturating_add(grown - shape.grown_seen);
                shape.grown_seen = grown;
            }
            let target = shape.fill_target(threads);
            shape.target = shape.target.max(target);
            let free = threads.saturating_add(shape.extra_free);
            work.push((pool.clone(), target, free, shape.quota));
        }
    }
}

/// Makes each pool's frames up to its target, then until it has its frames free (on the
/// filler's or the host's starting thread, never a worker's or an output's).
fn fill_all(work: &[FillWork]) {
    for (pool, target, free, cap) in work {
        pool.fill((*target).min(*cap));
        while pool.available() < *free && pool.allocated() < *cap {
            pool.fill(pool.allocated() + 1);
        }
    }
}

fn new_shape((width, height, shared): (u32, u32, bool)) -> Shape {
    Shape {
        width,
        height,
        shared,
        members: Vec::new(),
        seen: Vec::new(),
        quota: 0,
        quota_peak: 0,
        target: 0,
        extra_free: 0,
        grown_seen: 0,
        pool: None,
        retired: None,
    }
}

/// A shared pool of `slots` frames of this shape, nothing allocated (`None`: its shared memory
/// could not be made).
fn make_pool((width, height, shared): (u32, u32, bool), slots: usize) -> Option<FramePool> {
    let slots = slots.max(1);
    if shared {
        FramePool::lazy_shared(width, height, slots).ok()
    } else {
        Some(FramePool::lazy(width, height, slots))
    }
}

/// Replaces a version's pools by quota handles (`handles[k]` for `own[k]`; `None` keeps that
/// one), copying a feedback's frame 0 over (within the quota: the version holds nothing else
/// yet; on failure it stays in its own pool, which it keeps alive).
pub(crate) fn rebind(
    pools: &mut [FramePool],
    first_frames: &mut [Option<framepipe_core::Frame>],
    own: &[FramePool],
    handles: &[Option<FramePool>],
) {
    for pool in pools.iter_mut() {
        let k = own.iter().position(|p| p.same_pool(pool));
        if let Some(h) = k.and_then(|k| handles[k].clone()) {
            *pool = h;
        }
    }
    for (frame, pool) in first_frames.iter_mut().zip(pools.iter()) {
        let Some(old) = frame.as_ref() else { continue };
        if old.pool().same_pool(pool) {
            continue;
        }
        if let Ok(mut copy) = pool.try_acquire() {
            copy.copy_from(old.data());
            *frame = Some(copy.freeze());
        }
    }
}

/// A live edit's new version of a show in a host (on the edit thread, once the edit's checks
/// have passed: nothing is made for an edit that is refused): its pools become quota handles
/// on the host's ([`SharedPools::join`]), held until the version is dropped and its frames are
/// back, and the memory its pools count stays counted as long. A show alone (no lease on the
/// running version) keeps its own; returns whether the version's pools are the host's.
pub(crate) fn share_edit(
    next: &mut crate::sched::Version,
    own: &[(FramePool, PoolPlan)],
    running: &crate::sched::Version,
    pace: Option<Pace>,
) -> bool {
    let Some((reg, show)) = running
        .pool_lease
        .as_ref()
        .map(|l| (l.pools().clone(), l.show))
    else {
        return false;
    };
    let (handles, lease) = reg.join(show, own, pace);
    let own: Vec<FramePool> = own.iter().map(|(p, _)| p.clone()).collect();
    rebind(&mut next.pools, &mut next.first_frames, &own, &handles);
    if let Some(held) = next.pools_held.take() {
        lease.count(held);
    }
    next.pool_lease = Some(lease);
    true
}
