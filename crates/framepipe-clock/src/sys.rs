//! Thin, safe wrappers over the Linux time and scheduling calls the pacer needs.

use crate::{Error, Result};

/// Reads `clock`, in nanoseconds.
fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call; `clock` is one of
    // the constant clock ids below, which the kernel always supports, so the call cannot fail.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    // time_t and c_long are i64 on the 64-bit Linux targets framepipe supports.
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Now on `CLOCK_MONOTONIC`, in nanoseconds (arbitrary origin, never goes back). Served by the
/// vDSO: no system call, no allocation.
pub fn now_ns() -> i64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time consumed so far by the calling thread (`CLOCK_THREAD_CPUTIME_ID`), in nanoseconds.
pub fn thread_cpu_ns() -> i64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Sleeps until `deadline_ns` on `CLOCK_MONOTONIC` (`clock_nanosleep` with `TIMER_ABSTIME`),
/// resuming after signals. Returns at once when the deadline has passed. The wake-up is late by
/// the kernel's timer slack plus scheduling latency; see [`set_timer_slack_ns`].
pub fn sleep_until_ns(deadline_ns: i64) {
    if deadline_ns <= 0 {
        return;
    }
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; with TIMER_ABSTIME the remaining-time pointer is
        // unused, so passing null is allowed.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        // clock_nanosleep returns the error number directly; only EINTR warrants a retry
        // (an absolute deadline makes the retry exact). EINVAL cannot happen for a normalised
        // timespec on CLOCK_MONOTONIC.
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Sets the calling thread's timer slack (`prctl(PR_SET_TIMERSLACK)`), the amount the kernel
/// may delay its timer wake-ups to batch them (default 50 µs). The pacer wants 1 ns.
pub fn set_timer_slack_ns(slack_ns: u64) -> Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long by value; no memory is passed.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns as libc::c_ulong, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::Sys {
            call: "prctl(PR_SET_TIMERSLACK)",
            source: std::io::Error::last_os_error(),
        })
    }
}

/// Tries to move the calling thread to `SCHED_FIFO` at `priority` (clamped to the policy's
/// range; 1..99 on Linux). Returns whether it did. Fails quietly (returns `false`) when the
/// process lacks `CAP_SYS_NICE` and `RLIMIT_RTPRIO` forbids it, which is the usual case for an
/// unprivileged user; the thread then stays in `SCHED_OTHER`.
pub fn try_realtime(priority: i32) -> bool {
    // SAFETY: plain integer-in, integer-out queries of the policy's priority range.
    let (lo, hi) = unsafe {
        (
            libc::sched_get_priority_min(libc::SCHED_FIFO),
            libc::sched_get_priority_max(libc::SCHED_FIFO),
        )
    };
    let param = libc::sched_param {
        sched_priority: priority.clamp(lo, hi),
    };
    // SAFETY: `pthread_self()` is the calling thread, alive for the call; `param` is a valid
    // sched_param that the call only reads.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    rc == 0
}

/// The calling thread's scheduling policy and parameters (`pthread_getschedparam`).
fn sched_of_self() -> Option<(libc::c_int, libc::sched_param)> {
    let mut policy = 0;
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `pthread_self()` is the calling thread; both pointers are valid for writing.
    let rc = unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut param) };
    (rc == 0).then_some((policy, param))
}

/// The calling thread's timer slack in ns (`prctl(PR_GET_TIMERSLACK)`); `None` if the call
/// fails. Linux reports 0 for a `SCHED_FIFO` thread (its timers get no slack).
pub fn timer_slack_of_self() -> Option<u64> {
    // SAFETY: PR_GET_TIMERSLACK takes no memory arguments and returns the slack (or -1).
    let rc = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    u64::try_from(rc).ok()
}

/// What [`prepare_pacing_thread`] set up on the calling thread. Dropping it puts the thread
/// back as it was: its scheduling policy and priority (e.g. `SCHED_OTHER` after `SCHED_FIFO`)
/// and its timer slack. It restores on drop, also when unwinding, and only on the thread that
/// made it (it is neither `Send` nor `Sync`).
#[derive(Debug)]
#[must_use = "dropping the setup restores the thread at once"]
pub struct ThreadSetup {
    /// Timer slack lowered to 1 ns.
    pub low_timer_slack: bool,
    /// The thread runs under `SCHED_FIFO`.
    pub realtime: bool,
    /// The slack before, restored on drop (when it was changed).
    prev_slack: Option<u64>,
    /// The policy and parameters before, restored on drop (when the policy was changed).
    prev_sched: Option<(libc::c_int, libc::sched_param)>,
    /// Restores the calling thread's state: must stay on it.
    _same_thread: std::marker::PhantomData<*const ()>,
}

impl Drop for ThreadSetup {
    fn drop(&mut self) {
        if let Some((policy, param)) = self.prev_sched.take() {
            // SAFETY: the calling thread is the one this setup changed (the type is !Send);
            // `param` is a valid sched_param that the call only reads. Going back to a lower
            // priority is always permitted.
            let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), policy, &param) };
            debug_assert_eq!(rc, 0, "restoring scheduling policy {policy}");
        }
        if let Some(slack) = self.prev_slack.take() {
            let _ = set_timer_slack_ns(slack);
        }
    }
}

/// The CPUs the calling thread may run on (`sched_getaffinity`), in increasing order; empty when
/// the call fails.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; all zeros is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed; pid 0 is this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the set's size in CPUs.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Pins the calling thread to CPU `cpu` (`sched_setaffinity`); whether it was done. The
/// pinning lasts until changed again ([`set_thread_cpus`] with what [`allowed_cpus`] gave
/// before gives the thread its CPUs back).
pub fn pin_current_thread(cpu: usize) -> bool {
    set_thread_cpus(&[cpu])
}

/// The CPU the calling thread runs on now (`sched_getcpu`, served by the vDSO), if known.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no argument and only reads the current CPU.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// Lets the calling thread run on `cpus` only (`sched_setaffinity`); whether it was done.
pub fn set_thread_cpus(cpus: &[usize]) -> bool {
    set_thread_cpus_except(cpus, usize::MAX)
}

/// Lets the calling thread run on `cpus` but `except` only; whether it was done (not when
/// that leaves no CPU). No allocation: for a thread that moves away from another's CPU often.
pub fn set_thread_cpus_except(cpus: &[usize], except: usize) -> bool {
    let max = libc::CPU_SETSIZE as usize;
    if cpus.iter().any(|&c| c >= max) || !cpus.iter().any(|&c| c != except) {
        return false;
    }
    // SAFETY: cpu_set_t is plain data; all zeros is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus.iter().filter(|&&c| c != except) {
        // SAFETY: `cpu` is below CPU_SETSIZE (checked above), so the bit is inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    rc == 0
}

/// Prepares the calling thread for pacing: timer slack 1 ns, and `SCHED_FIFO` (priority 10,
/// above ordinary threads but below kernel interrupt threads) when `want_realtime` and the
/// process is permitted. Never fails: what could not be done is reported as `false`. Keep the
/// returned [`ThreadSetup`] while pacing: dropping it restores the thread's previous policy,
/// priority and timer slack.
pub fn prepare_pacing_thread(want_realtime: bool) -> ThreadSetup {
    let prev_slack = timer_slack_of_self();
    let low_timer_slack = set_timer_slack_ns(1).is_ok();
    let prev_sched = if want_realtime { sched_of_self() } else { None };
    let realtime = prev_sched.is_some() && try_realtime(10);
    ThreadSetup {
        low_timer_slack,
        realtime,
        prev_slack: prev_slack.filter(|_| low_timer_slack),
        prev_sched: prev_sched.filter(|_| realtime),
        _same_thread: std::marker::PhantomData,
    }
}

/// Measures the calling thread's CPU share between [`CpuMeter::start`] and
/// [`CpuMeter::share`]: thread CPU time over monotonic wall time. Must be used on one thread.
#[derive(Debug, Clone, Copy)]
pub struct CpuMeter {
    cpu0: i64,
    wall0: i64,
}

impl CpuMeter {
    /// Starts measuring now, on the calling thread.
    pub fn start() -> Self {
        CpuMeter {
            cpu0: thread_cpu_ns(),
            wall0: now_ns(),
        }
    }

    /// CPU nanoseconds used by this thread since `start`.
    pub fn cpu_ns(&self) -> i64 {
        thread_cpu_ns() - self.cpu0
    }

    /// Wall nanoseconds since `start`.
    pub fn wall_ns(&self) -> i64 {
        now_ns() - self.wall0
    }

    /// Fraction of one core used by this thread since `start` (0.0 .. 1.0).
    pub fn share(&self) -> f64 {
        let wall = self.wall_ns();
        if wall <= 0 {
            return 0.0;
        }
        self.cpu_ns() as f64 / wall as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_does_not_go_back() {
        let a = now_ns();
        let b = now_ns();
        assert!(a > 0 && b >= a, "{a} then {b}");
    }

    #[test]
    fn a_pinned_thread_runs_on_its_cpu_only() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty(), "sched_getaffinity gave no CPU");
        let last = *cpus.last().expect("checked");
        let (allowed, ran_on) = std::thread::spawn(move || {
            assert!(pin_current_thread(last), "pinning to CPU {last}");
            // SAFETY: sched_getcpu takes no argument and only reads the current CPU.
            let on = unsafe { libc::sched_getcpu() };
            (allowed_cpus(), on)
        })
        .join()
        .expect("pinned thread");
        assert_eq!(allowed, vec![last]);
        assert_eq!(ran_on, last as i32);
        // The spawning thread keeps its own set.
        assert_eq!(allowed_cpus(), cpus);
        // A pinned thread gets its CPUs back.
        let back = std::thread::spawn(move || {
            let before = allowed_cpus();
            assert!(pin_current_thread(last));
            assert!(set_thread_cpus(&before));
            allowed_cpus()
        })
        .join()
        .expect("thread given its CPUs back");
        assert_eq!(back, cpus);
        assert!(!set_thread_cpus(&[]));
        // Every CPU but one; never none.
        if cpus.len() >= 2 {
            let (first, all) = (cpus[0], cpus.clone());
            let (left, on) = std::thread::spawn(move || {
                assert!(set_thread_cpus_except(&all, first));
                (allowed_cpus(), current_cpu())
            })
            .join()
            .expect("thread moved off a CPU");
            assert_eq!(left, cpus[1..]);
            assert!(on.is_some_and(|c| c != first), "on {on:?}");
        }
        assert!(!set_thread_cpus_except(&[last], last));
        assert!(!pin_current_thread(libc::CPU_SETSIZE as usize));
    }

    #[test]
    fn sleep_until_is_not_early() {
        let deadline = now_ns() + 2_000_000;
        sleep_until_ns(deadline);
        let woke = now_ns();
        assert!(woke >= deadline, "woke {} ns early", deadline - woke);
    }

    #[test]
    fn sleeping_costs_little_cpu_and_spinning_costs_all() {
        let meter = CpuMeter::start();
        sleep_until_ns(now_ns() + 20_000_000);
        // A 20 ms sleep uses at most a few ms of CPU even on a loaded machine.
        assert!(
            meter.cpu_ns() < 5_000_000,
            "sleep used {} ns CPU",
            meter.cpu_ns()
        );

        let meter = CpuMeter::start();
        let end = now_ns() + 20_000_000;
        while now_ns() < end {
            std::hint::spin_loop();
        }
        // Spinning for 20 ms wall must show CPU time (we may be preempted part of it).
        assert!(
            meter.cpu_ns() > 1_000_000,
            "spin used {} ns CPU",
            meter.cpu_ns()
        );
    }

    #[test]
    fn timer_slack_can_be_lowered() {
        set_timer_slack_ns(1).expect("PR_SET_TIMERSLACK");
        // SAFETY: PR_GET_TIMERSLACK takes no memory arguments and returns the slack.
        let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        assert_eq!(slack, 1);
    }

    /// Issue 7: the SCHED_FIFO policy set for pacing was never restored on the calling thread.
    #[test]
    fn pacing_setup_restores_policy_priority_and_slack_when_dropped() {
        std::thread::spawn(|| {
            set_timer_slack_ns(50_000).unwrap();
            let before = sched_of_self().expect("own policy");
            let setup = prepare_pacing_thread(true);
            assert!(setup.low_timer_slack);
            let during = sched_of_self().expect("own policy");
            // Linux reports (and uses) no slack at all for a realtime thread.
            let slack = timer_slack_of_self();
            assert!(
                slack == Some(1) || (setup.realtime && slack == Some(0)),
                "{slack:?}"
            );
            assert_eq!(setup.realtime, during.0 == libc::SCHED_FIFO, "{during:?}");
            drop(setup);
            let after = sched_of_self().expect("own policy");
            assert_eq!(
                (after.0, after.1.sched_priority),
                (before.0, before.1.sched_priority)
            );
            assert_eq!(timer_slack_of_self(), Some(50_000));
        })
        .join()
        .unwrap();
    }

    /// On a panic the setup is dropped while unwinding: the thread is restored all the same.
    #[test]
    fn pacing_setup_restores_the_thread_on_unwind() {
        std::thread::spawn(|| {
            let before = sched_of_self().expect("own policy");
            let r = std::panic::catch_unwind(|| {
                let _setup = prepare_pacing_thread(true);
                panic!("pacing failed");
            });
            assert!(r.is_err());
            let after = sched_of_self().expect("own policy");
            assert_eq!(
                (after.0, after.1.sched_priority),
                (before.0, before.1.sched_priority)
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn realtime_reports_what_it_did() {
        let got = std::thread::spawn(|| {
            let ok = try_realtime(5);
            let mut policy = 0;
            let mut param = libc::sched_param { sched_priority: 0 };
            // SAFETY: valid out-pointers for the calling thread's own policy and parameters.
            let rc = unsafe {
                libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut param)
            };
            assert_eq!(rc, 0);
            (ok, policy)
        })
        .join()
        .unwrap();
        // Whether permitted or not, the answer must match the thread's actual policy.
        assert_eq!(got.0, got.1 == libc::SCHED_FIFO, "{got:?}");
    }
}
