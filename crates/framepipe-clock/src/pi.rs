//! A mutex with **priority inheritance** and its condition variable, for a lock that a
//! real-time (`SCHED_FIFO`) thread shares with ordinary ones.
//!
//! With a plain mutex, a `SCHED_FIFO` thread that waits for a lock held by a `SCHED_OTHER`
//! thread waits as long as that thread is kept off the CPU by everything else that runs (the
//! classic priority inversion; measured on the scheduler lock: a 3.7 ms wait once in four paced
//! runs on a loaded 2-core machine, against a 1 µs p99). With `PTHREAD_PRIO_INHERIT` the kernel
//! runs the holder at the waiter's priority until it unlocks, so the wait is bounded by the
//! critical section itself.
//!
//! [`PiMutex`] wraps a `pthread_mutex_t` made with `PTHREAD_PRIO_INHERIT` (a `FUTEX_LOCK_PI`
//! futex in glibc; uncontended lock and unlock stay in user space). There is no poisoning: a
//! panic while the lock is held unlocks it while unwinding, and the owner of the data decides
//! what a panic means. [`PiCondvar`] is a `pthread_cond_t` to wait on with it.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// A mutual-exclusion lock with priority inheritance; see the module docs.
pub struct PiMutex<T> {
    // Boxed: a pthread mutex must not move once initialised.
    raw: Box<UnsafeCell<libc::pthread_mutex_t>>,
    data: UnsafeCell<T>,
}

// SAFETY: the data is only reached through a guard, which exists only while the pthread mutex is
// held by the calling thread: at most one thread at a time, as for std's Mutex.
unsafe impl<T: Send> Send for PiMutex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for PiMutex<T> {}

impl<T> PiMutex<T> {
    /// A mutex holding `data`. Panics only if the system cannot make a mutex (out of memory),
    /// which `pthread_mutex_init` on Linux never reports for a process-private mutex.
    pub fn new(data: T) -> Self {
        // SAFETY: an all-zero pthread_mutex_t is a valid value to pass to pthread_mutex_init
        // (it is PTHREAD_MUTEX_INITIALIZER on glibc and musl).
        let raw = Box::new(UnsafeCell::new(unsafe { std::mem::zeroed() }));
        let mut attr = std::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
        // SAFETY: `attr` is initialised by pthread_mutexattr_init before any other use and
        // destroyed after pthread_mutex_init has copied what it needs; `raw` points to a boxed,
        // never-moved mutex that nothing else uses yet.
        let rc = unsafe {
            let mut rc = libc::pthread_mutexattr_init(attr.as_mut_ptr());
            if rc == 0 {
                rc = libc::pthread_mutexattr_setprotocol(
                    attr.as_mut_ptr(),
                    libc::PTHREAD_PRIO_INHERIT,
                );
                if rc == 0 {
                    rc = libc::pthread_mutex_init(raw.get(), attr.as_ptr());
                }
                libc::pthread_mutexattr_destroy(attr.as_mut_ptr());
            }
            rc
        };
        assert_eq!(
            rc, 0,
            "pthread_mutex_init(PTHREAD_PRIO_INHERIT) failed: {rc}"
        );
        PiMutex {
            raw,
            data: UnsafeCell::new(data),
        }
    }

    /// Locks, waiting as long as it takes (the holder runs at least at this thread's priority
    /// meanwhile).
    pub fn lock(&self) -> PiGuard<'_, T> {
        // SAFETY: `raw` is an initialised mutex that lives as long as `self`. A normal (not
        // error-checking) mutex locked twice by one thread would deadlock, not misbehave; the
        // guard makes that impossible in safe code except by leaking a guard.
        let rc = unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        assert_eq!(rc, 0, "pthread_mutex_lock failed: {rc}");
        PiGuard {
            mutex: self,
            _same_thread: PhantomData,
        }
    }
}

impl<T> Drop for PiMutex<T> {
    fn drop(&mut self) {
        // SAFETY: no guard can exist (they borrow `self`), so the mutex is unlocked and unused.
        unsafe { libc::pthread_mutex_destroy(self.raw.get()) };
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for PiMutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PiMutex { .. }")
    }
}

/// The lock, held; unlocks when dropped (also when unwinding). Stays on the thread that locked
/// it (a pthread mutex must be unlocked by its owner).
pub struct PiGuard<'a, T> {
    mutex: &'a PiMutex<T>,
    _same_thread: PhantomData<*const ()>,
}

// SAFETY: sharing a guard between threads only shares `&T`, which is fine when T is Sync.
unsafe impl<T: Sync> Sync for PiGuard<'_, T> {}

impl<T> Deref for PiGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the mutex.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T> DerefMut for PiGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this thread holds the mutex, and `&mut self`
        // makes this the only reference through it.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T> Drop for PiGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this thread holds the mutex (it locked it to make this guard).
        unsafe { libc::pthread_mutex_unlock(self.mutex.raw.get()) };
    }
}

/// A condition variable to wait on with a [`PiMutex`].
pub struct PiCondvar {
    // Boxed: a pthread condition variable must not move once initialised.
    raw: Box<UnsafeCell<libc::pthread_cond_t>>,
}

// SAFETY: pthread condition variables are made to be used from several threads.
unsafe impl Send for PiCondvar {}
// SAFETY: as above.
unsafe impl Sync for PiCondvar {}

impl Default for PiCondvar {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for PiCondvar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PiCondvar { .. }")
    }
}

impl PiCondvar {
    /// A condition variable.
    pub fn new() -> Self {
        // SAFETY: an all-zero pthread_cond_t is PTHREAD_COND_INITIALIZER; pthread_cond_init with
        // default attributes on a boxed, never-moved value.
        let raw = Box::new(UnsafeCell::new(unsafe { std::mem::zeroed() }));
        // SAFETY: as above.
        let rc = unsafe { libc::pthread_cond_init(raw.get(), std::ptr::null()) };
        assert_eq!(rc, 0, "pthread_cond_init failed: {rc}");
        PiCondvar { raw }
    }

    /// Releases `guard`'s lock, waits for a notification (or a spurious wake-up: check the
    /// condition again), and takes the lock back.
    pub fn wait<'a, T>(&self, guard: PiGuard<'a, T>) -> PiGuard<'a, T> {
        // SAFETY: this thread holds `guard.mutex` (the guard proves it); both objects are
        // initialised and outlive the call; the mutex is held again when the call returns.
        let rc = unsafe { libc::pthread_cond_wait(self.raw.get(), guard.mutex.raw.get()) };
        assert_eq!(rc, 0, "pthread_cond_wait failed: {rc}");
        guard
    }

    /// Wakes one waiter.
    pub fn notify_one(&self) {
        // SAFETY: an initialised condition variable.
        unsafe { libc::pthread_cond_signal(self.raw.get()) };
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        // SAFETY: an initialised condition variable.
        unsafe { libc::pthread_cond_broadcast(self.raw.get()) };
    }
}

impl Drop for PiCondvar {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: nobody waits on it any more.
        unsafe { libc::pthread_cond_destroy(self.raw.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn it_excludes_and_its_condvar_wakes() {
        let m = Arc::new((PiMutex::new((0u64, false)), PiCondvar::new()));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let mut g = m.0.lock();
                        let v = g.0;
                        std::hint::black_box(&v);
                        g.0 = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(m.0.lock().0, 40_000);
        let waiter = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                let mut g = m.0.lock();
                while !g.1 {
                    g = m.1.wait(g);
                }
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        m.0.lock().1 = true;
        m.1.notify_all();
        waiter.join().unwrap();
    }

    /// The point of the type: while a SCHED_FIFO thread waits for the lock, its holder (an
    /// ordinary thread) runs at the waiter's real-time priority. Read from /proc/<tid>/stat,
    /// whose `priority` field is 20 + nice for SCHED_OTHER and -1 - rt_priority for SCHED_FIFO.
    #[test]
    fn the_holder_inherits_a_realtime_waiters_priority() {
        fn prio_of(tid: i32) -> i64 {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
            // Fields after the parenthesised name: state is 3rd, prio the 18th.
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            rest.split(' ').nth(15).unwrap().parse().unwrap()
        }
        // The priority a thread of this process has unboosted: 20 + its nice value (20 at nice 0,
        // 39 under `nice -n 19`, as the team runs the suite); new threads inherit it.
        // SAFETY: gettid has no arguments and cannot fail.
        let unboosted = prio_of(unsafe { libc::gettid() });
        let m = Arc::new(PiMutex::new(()));
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let holder = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                let g = m.lock();
                // SAFETY: gettid has no arguments and cannot fail.
                tx.send(unsafe { libc::gettid() }).unwrap();
                go_rx.recv().unwrap();
                drop(g);
            })
        };
        let tid = rx.recv().unwrap();
        let before = prio_of(tid);
        let waiter = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                let fifo = crate::sys::try_realtime(10);
                drop(m.lock());
                fifo
            })
        };
        // Give the waiter time to block (and the kernel to boost the holder).
        let t0 = Instant::now();
        let mut during = before;
        while t0.elapsed() < Duration::from_secs(2) {
            during = prio_of(tid);
            if during != before {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        go_tx.send(()).unwrap();
        holder.join().unwrap();
        let fifo = waiter.join().unwrap();
        if fifo {
            // Unboosted: 20 + nice; boosted to rt priority 10 -> -11.
            assert_eq!(
                (before, during),
                (unboosted, -11),
                "holder priority before / while a FIFO thread waited"
            );
        } else {
            eprintln!("SCHED_FIFO not permitted here: priority inheritance not observable");
        }
    }
}
