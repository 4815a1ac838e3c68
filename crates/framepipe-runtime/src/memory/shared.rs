//! A host's shared pools: one pool per frame shape, a quota handle per show version, one
//! filler thread.

use std::sync::{Arc, Mutex};

use framepipe_core::FramePool;

use super::filler::{fill_all, Pace};
use super::{Held, PoolPlan, PoolShape};

/// A shared pool is made with room for this many times the quotas enrolled when the host
/// starts, so that a live edit can hold the new version's quota next to the old one's until the
/// old version is dropped (frames not made yet cost a few words each; a shared-memory pool's
/// memfd is sparse). An edit that finds no room gets a new pool of that shape.
const EDIT_ROOM: usize = 2;

/// The frame pools of a [`Host`](crate::Host)'s shows: **one pool per frame shape**
/// (`PoolShape`: size, memory kind, and whether its frames are in shared memory: what makes
/// two frames interchangeable) for every show, each show holding a
/// quota handle on it ([`FramePool::with_quota`]) whose quota is the capacity its own plan
/// gives it. The quotas in force never add up to more than the pool's frames (a show within its
/// quota always gets a frame, one at its quota is refused as its own pool's end would refuse
/// it), but frames are made only for what the shows hold *together*.
///
/// **The filler** (`filler.rs`). A helper thread (`fp-pool-fill`) looks at every pool every
/// `TOP_UP_EVERY` until the last show is gone, and makes frames (on its own thread, never on a
/// worker or an output thread) up to a target: per paced show, what it holds between frames (its
/// plan's `idle`: the frame waiting for its deadline, the output's last frame, what nodes keep)
/// plus the frames it begins ahead beyond that one, `min(in_flight, 1 + (budget + 12.5 ms + 1 ms) /
/// period) - 1` (the latency budget now, read lock-free from the show's counters,
/// `latency_budget_us`; 12.5 ms is what a worker held up for `WORKER_DELAY_NS` adds to the default
/// budget; 1 ms is how much earlier a host lets a frame begin), plus two frames per worker (a
/// running stage's input and output); then at least one frame per worker free, and one more for
/// every frame a worker's acquire had to make. At 25 fps the frames ahead are the one waiting frame
/// (a budget under 26.5 ms); at 1000 fps, every frame in flight.
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
#[derive(Debug, Clone)]
pub struct SharedPools {
    inner: Arc<Mutex<Registry>>,
}

#[derive(Debug, Default)]
pub(super) struct Registry {
    pub(super) shapes: Vec<Shape>,
    /// The pools are made (the host started): no more shows may be enrolled.
    pub(super) open: bool,
    /// The host's workers (set when it starts).
    pub(super) threads: usize,
    /// The filler thread runs.
    pub(super) filling: bool,
    pub(super) next_id: u64,
    pub(super) next_show: u64,
    /// How much before its latency budget says a paced show's frames begin: its host's clock
    /// rounds a show's "may begin" wake-ups up to its grid and lets its frames begin that much
    /// earlier ([`HOST_BEGIN_SLACK_NS`]).
    pub(super) begin_slack_ns: u64,
}

/// One pool of a shape (a shape may have several: see [`EDIT_ROOM`]).
#[derive(Debug)]
pub(super) struct Shape {
    pub(super) shape: PoolShape,
    /// The versions holding a quota handle on it (before the host starts: enrolled).
    pub(super) members: Vec<Member>,
    /// The shows that held one so far (a show's live edits count once).
    pub(super) seen: Vec<u64>,
    /// The sum of their quotas: the most frames they may hold together.
    pub(super) quota: usize,
    /// The most the quotas ever added up to (what `stats` calls its capacity).
    pub(super) quota_peak: usize,
    /// The most the filler aimed at so far (its frames are made, never freed).
    pub(super) target: usize,
    /// Frames the filler keeps free beyond one per worker: what workers' acquires had to make
    /// themselves (no free frame) since the host started, as the filler saw.
    pub(super) extra_free: usize,
    /// `grown_on_acquire` at the filler's last look.
    pub(super) grown_seen: usize,
    pub(super) pool: Option<FramePool>,
    /// The pool was dropped (no version held a quota handle on it any more and every frame of
    /// it was back: see [`Registry::sweep`]); its last figures.
    pub(super) retired: Option<(usize, usize, usize)>,
}

impl Shape {
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
}

/// A version's quota handle on a shared pool, as the registry counts it.
#[derive(Debug)]
pub(super) struct Member {
    pub(super) id: u64,
    pub(super) quota: usize,
    /// A clone of the version's quota handle (`None` while enrolled: the pool is not made
    /// yet): what it holds is read before its quota is given back.
    pub(super) handle: Option<FramePool>,
    /// Its lease's life: once the lease is dropped, the member leaves at the registry's next
    /// sweep after every frame of its handle is back.
    pub(super) life: Arc<LeaseLife>,
    /// Frames of this pool the show holds between frames (`PoolPlan::idle`).
    pub(super) idle: usize,
    /// Frames of this pool each frame begun ahead holds (`PoolPlan::ahead`).
    pub(super) ahead: usize,
    /// A paced show's figures (the frames it begins ahead); `None`: unpaced, it grows the pool
    /// on demand only.
    pub(super) pace: Option<Pace>,
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
pub(super) struct LeaseLife {
    dropped: std::sync::atomic::AtomicBool,
    held: std::sync::OnceLock<Held>,
}

impl PoolLease {
    /// The host's pools this version's are on.
    pub(crate) fn pools(&self) -> &SharedPools {
        &self.reg
    }

    /// An enrolled show's handles on the host's pools as it starts, one per pool of `own` (its
    /// own, as enrolled; `None`: the host has none for it), each with that pool's capacity as
    /// its quota (see [`SharedPools::bind`]; the first show's call makes every pool and starts
    /// the filler). `threads`: the host's workers. Takes the registry's lock: never call it
    /// under a show's scheduler lock.
    pub(crate) fn bind(
        &self,
        own: &[(FramePool, PoolPlan)],
        threads: usize,
    ) -> Vec<Option<FramePool>> {
        let pools: Vec<FramePool> = own.iter().map(|(p, _)| p.clone()).collect();
        self.reg.clone().bind(self, &pools, threads)
    }

    /// The show it is a version of (its versions' leases share it).
    pub(crate) fn show(&self) -> u64 {
        self.show
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

/// How much earlier than its latency budget says a host lets a show's frame begin: the host
/// clock's grid (`host::GRID_NS`; the host checks at compile time that they agree).
pub(crate) const HOST_BEGIN_SLACK_NS: u64 = 1_000_000;

impl Default for SharedPools {
    fn default() -> Self {
        Self::new()
    }
}

impl SharedPools {
    /// No pools yet. Its shows' frames begin up to [`HOST_BEGIN_SLACK_NS`] before their
    /// latency budgets say (their host's clock grid), so the filler makes that many more ahead
    /// of need.
    pub fn new() -> Self {
        let pools = SharedPools {
            inner: Arc::default(),
        };
        pools.lock().begin_slack_ns = HOST_BEGIN_SLACK_NS;
        pools
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
                    width: s.shape.width,
                    height: s.shape.height,
                    shared_memory: s.shape.shared,
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

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
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
            let key = PoolShape::of(pool);
            let s = match reg.shapes.iter().position(|s| s.shape == key) {
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
                let capacity = shape.quota.saturating_mul(EDIT_ROOM).max(1);
                shape.pool = make_pool(shape.shape, capacity);
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
            let key = PoolShape::of(own_pool);
            let quota = own_pool.capacity();
            let found = reg
                .shapes
                .iter()
                .position(|s| s.shape == key && s.room_for(quota));
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
            let ahead_of_need = if new {
                plan.fill
            } else {
                member.holds(reg.begin_slack_ns)
            };
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
}

impl Registry {
    /// Members whose lease was dropped (their version is gone) leave once every frame taken
    /// through their handle is back: their quota, their part of the filler's target and the
    /// memory their version counted ([`PoolLease::count`]) are given back then, never while a
    /// frame of theirs is out. A pool with no member left and no frame out is dropped: moved
    /// to `gone`, whose caller lets go of it outside the lock (the filler's or the edit
    /// thread: never a worker or an output thread; its buffers are freed there unless a
    /// handle is still held elsewhere). Only once the pools are made (the host started).
    pub(super) fn sweep(&mut self, gone: &mut Vec<FramePool>) {
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
}

fn new_shape(shape: PoolShape) -> Shape {
    Shape {
        shape,
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

/// A shared pool of `capacity` frames of this shape, nothing allocated (`None`: its shared
/// memory could not be made).
fn make_pool(shape: PoolShape, capacity: usize) -> Option<FramePool> {
    shape.make(capacity.max(1)).ok()
}

/// Replaces a version's pools by quota handles (`handles[k]` for `own[k]`; `None` keeps that
/// one), copying a feedback's frame 0 over (within the quota: the version holds nothing else
/// yet; on failure it stays in its own pool, which it keeps alive).
pub(super) fn rebind(
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
