//! What the machine does, measured: timer oversleep, wake-up latency, the noise floor of a
//! spinning thread, memory copy bandwidth.

use super::*;

// The timer

/// Oversleep of 1 ms `clock_nanosleep`s with the thread's default slack, then with 1 ns.
pub(super) fn timer(sizes: &Sizes) -> Section {
    progress(&format!(
        "timer precision: {} sleeps of 1 ms at the default timer slack, then {} at 1 ns",
        sizes.sleeps, sizes.sleeps
    ));
    let n = sizes.sleeps;
    let (slack, default, low) = std::thread::spawn(move || {
        let slack = framepipe_clock::timer_slack_of_self();
        let default = oversleeps(n);
        let _ = set_timer_slack_ns(1);
        let low = oversleeps(n);
        (slack, default, low)
    })
    .join()
    .expect("the timer probe thread");
    let lines = vec![
        format!(
            "slack {}: oversleep {}",
            slack.map_or("?".into(), |s| format!("{s} ns")),
            default.text()
        ),
        format!("slack 1 ns: oversleep {}", low.text()),
    ];
    // The pacer sleeps to a margin before the deadline (the recent p90 wake-up delay + 20 µs,
    // 30 µs .. 1 ms) and spins the rest: the spin per frame is about p99 + 20 µs.
    let spin_us = (low.p99_us + 20.0).clamp(30.0, 1000.0);
    let spin_share_60 = spin_us * 60.0 / 1e6;
    let (status, summary, advice) = if low.p99_us <= 200.0 {
        (
            Status::Ok,
            format!(
                "with 1 ns slack a sleep overshoots by {} at the 99th percentile: the frame \
                 clock sleeps to about {} before each deadline and spins the rest, so frames \
                 leave within a few µs at 25, 30 or 60 fps, spinning {:.1} % of a core at 60 fps",
                us(low.p99_us),
                us(spin_us),
                spin_share_60 * 100.0
            ),
            if default.p99_us > 2.0 * low.p99_us + 20.0 {
                "nothing to do: framepipe lowers its pacing thread's slack to 1 ns itself \
                 (other programs' paced threads would gain from PR_SET_TIMERSLACK too)"
                    .into()
            } else {
                String::new()
            },
        )
    } else if low.p99_us <= 1000.0 {
        (
            Status::Warn,
            format!(
                "sleeps overshoot by {} at the 99th percentile even with 1 ns slack: the frame \
                 clock spins up to {} before each deadline, {:.1} % of a core at 60 fps ({:.1} % \
                 at 25 fps)",
                us(low.p99_us),
                us(spin_us),
                spin_share_60 * 100.0,
                spin_us * 25.0 / 1e4
            ),
            "a loaded or virtualised machine wakes threads late: stop other work, and permit \
             SCHED_FIFO (see realtime) so the pacing thread is woken first"
                .into(),
        )
    } else {
        (
            Status::Bad,
            format!(
                "sleeps overshoot by {} at the 99th percentile (max {}) even with 1 ns slack, \
                 more than the frame clock's 1 ms spin margin: some frames will leave late, \
                 by up to {} ({:.0} % of a 60 fps period)",
                us(low.p99_us),
                us(low.max_us),
                us(low.max_us - 1000.0),
                (low.max_us - 1000.0).max(0.0) / period_us(60) * 100.0
            ),
            "permit SCHED_FIFO (see realtime), stop other work on the machine, and on a VM ask \
             for dedicated cores"
                .into(),
        )
    };
    Section {
        key: "timer",
        title: "timer precision (clock_nanosleep, 1 ms sleeps)",
        figures: json!({
            "default_slack_ns": slack,
            "default_slack": default.json(),
            "slack_1ns": low.json(),
        }),
        lines,
        status,
        summary,
        advice,
    }
}

/// How late `n` absolute sleeps of 1 ms wake up.
fn oversleeps(n: usize) -> Dist {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let deadline = now_ns() + 1_000_000;
        sleep_until_ns(deadline);
        v.push(now_ns() - deadline);
    }
    Dist::of(v)
}

// Wake-up latency

/// How long a parked thread takes to run after another thread unparks it.
pub(super) fn wakeup(sizes: &Sizes) -> Section {
    progress(&format!(
        "wake-up latency: {} hand-offs to a parked thread",
        sizes.wakeups
    ));
    let n = sizes.wakeups;
    let stamp = Arc::new(AtomicI64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let waiter = {
        let stamp = Arc::clone(&stamp);
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut v = Vec::with_capacity(n);
            while !done.load(Ordering::Acquire) {
                std::thread::park();
                let t0 = stamp.swap(0, Ordering::AcqRel);
                if t0 > 0 {
                    v.push(now_ns() - t0);
                }
            }
            v
        })
    };
    for _ in 0..n {
        // Long enough for the waiter to be asleep in the kernel, and to have taken the last.
        std::thread::sleep(Duration::from_micros(700));
        let mut tries = 0;
        while stamp.load(Ordering::Acquire) != 0 && tries < 100 {
            std::thread::sleep(Duration::from_micros(200));
            tries += 1;
        }
        stamp.store(now_ns(), Ordering::Release);
        waiter.thread().unpark();
    }
    std::thread::sleep(Duration::from_millis(2));
    done.store(true, Ordering::Release);
    waiter.thread().unpark();
    let d = Dist::of(waiter.join().expect("the wake-up probe thread"));
    let (status, summary, advice) = if d.p99_us <= 200.0 {
        (
            Status::Ok,
            format!(
                "a sleeping thread runs {} after it is woken ({} at the 99th percentile): \
                 each hand-off between workers and the output thread costs well under 1 % of a \
                 frame at 25, 30 or 60 fps",
                us(d.median_us),
                us(d.p99_us)
            ),
            String::new(),
        )
    } else if d.p99_us <= 2000.0 {
        (
            Status::Warn,
            format!(
                "a woken thread waits {} at the 99th percentile before it runs: a frame passes \
                 a few hand-offs, so up to {:.0} % of a 60 fps period ({:.0} % at 25 fps) can go \
                 to waking threads",
                us(d.p99_us),
                3.0 * d.p99_us / period_us(60) * 100.0,
                3.0 * d.p99_us / period_us(25) * 100.0
            ),
            "the CPUs are busy with other work (or the VM's host is): stop it, or give \
             framepipe fewer --threads than cores so one stays free"
                .into(),
        )
    } else {
        (
            Status::Bad,
            format!(
                "a woken thread waits {} at the 99th percentile (max {}) before it runs: a show \
                 at 60 fps ({} periods) will miss deadlines; 25 fps has more room",
                us(d.p99_us),
                us(d.max_us),
                us(period_us(60))
            ),
            "stop other work on the machine, permit SCHED_FIFO (see realtime), and on a VM ask \
             for dedicated cores"
                .into(),
        )
    };
    Section {
        key: "wakeup",
        title: "wake-up latency (a parked thread woken by another)",
        figures: d.json(),
        lines: vec![format!("wake-up after unpark: {}", d.text())],
        status,
        summary,
        advice,
    }
}

// Noise floor

/// Spins reading the clock: every gap over 10 µs is time the thread lost its CPU.
pub(super) fn noise(sizes: &Sizes) -> Section {
    progress(&format!(
        "noise floor: a thread spinning for {:.1} s, counting gaps over 10 µs",
        sizes.spin_ns as f64 / 1e9
    ));
    let spin = sizes.spin_ns;
    let (wall, cpu, gaps, longest, lost) = std::thread::spawn(move || {
        let cpu0 = thread_cpu_ns();
        let start = now_ns();
        let end = start + spin;
        let (mut last, mut gaps, mut longest, mut lost) = (start, 0u64, 0i64, 0i64);
        loop {
            let t = now_ns();
            let d = t - last;
            if d > 10_000 {
                gaps += 1;
                lost += d;
                longest = longest.max(d);
            }
            last = t;
            if t >= end {
                break;
            }
        }
        (last - start, thread_cpu_ns() - cpu0, gaps, longest, lost)
    })
    .join()
    .expect("the noise probe thread");
    let secs = wall as f64 / 1e9;
    let lost_share = lost as f64 / wall as f64;
    let cpu_share = cpu as f64 / wall as f64;
    let longest_us = longest as f64 / 1000.0;
    let per_s = gaps as f64 / secs;
    let lines = vec![format!(
        "{gaps} gaps over 10 µs in {secs:.2} s ({per_s:.0}/s), longest {}, {:.2} % of the time \
         lost; the thread got {:.1} % of a CPU",
        us(longest_us),
        lost_share * 100.0,
        cpu_share * 100.0
    )];
    let (status, summary, advice) = if longest_us <= 500.0 && lost_share <= 0.01 {
        (
            Status::Ok,
            format!(
                "a spinning thread lost its CPU {gaps} times, {} at most: quiet enough for 25, \
                 30 and 60 fps",
                us(longest_us)
            ),
            String::new(),
        )
    } else if longest_us <= period_us(60) / 4.0 && lost_share <= 0.05 {
        (
            Status::Warn,
            format!(
                "a spinning thread lost its CPU {gaps} times ({:.1} % of the time), up to {} at \
                 once: a frame can be late by that much ({:.0} % of a 60 fps period, {:.0} % at \
                 25 fps)",
                lost_share * 100.0,
                us(longest_us),
                longest_us / period_us(60) * 100.0,
                longest_us / period_us(25) * 100.0
            ),
            "other programs or the kernel take the CPU: stop other work; with SCHED_FIFO \
             (see realtime) the pacing thread preempts ordinary ones"
                .into(),
        )
    } else {
        let missed: Vec<String> = RATES
            .iter()
            .filter(|&&r| longest_us > period_us(r))
            .map(|r| format!("{r} fps"))
            .collect();
        (
            Status::Bad,
            format!(
                "a spinning thread lost its CPU for {:.1} % of the time, up to {} at once{}",
                lost_share * 100.0,
                us(longest_us),
                if missed.is_empty() {
                    format!(
                        ": a frame can be late by {:.0} % of a 60 fps period",
                        longest_us / period_us(60) * 100.0
                    )
                } else {
                    format!(
                        ", longer than a whole period at {}: frames will be late or repeated",
                        missed.join(", ")
                    )
                }
            ),
            "the machine is busy (other programs, builds, a VM host taking its CPU back): \
             stop other work, give framepipe cores of its own (taskset, isolcpus), and permit \
             SCHED_FIFO (see realtime)"
                .into(),
        )
    };
    Section {
        key: "noise",
        title: "noise floor (a spinning thread losing its CPU)",
        figures: json!({
            "seconds": round3(secs),
            "gaps_over_10us": gaps,
            "longest_gap_us": round1(longest_us),
            "lost_share": round3(lost_share),
            "cpu_share": round3(cpu_share),
        }),
        lines,
        status,
        summary,
        advice,
    }
}

// Memory

/// Copies a 64 MiB buffer several times: GB/s, and 1080p RGBA frame copies per second.
pub(super) fn memory(sizes: &Sizes) -> Section {
    const SIZE: usize = 64 << 20;
    const FRAME_1080P: f64 = 1920.0 * 1080.0 * 4.0;
    progress(&format!(
        "memory copy bandwidth: {} copies of 64 MiB",
        sizes.copies
    ));
    let src = vec![1u8; SIZE];
    let mut dst = vec![0u8; SIZE];
    // Touch the destination first: the first copy would otherwise time page faults.
    dst.copy_from_slice(&src);
    let mut rates = Vec::with_capacity(sizes.copies);
    for _ in 0..sizes.copies {
        let s = std::hint::black_box(&src[..]);
        let t0 = now_ns();
        dst.copy_from_slice(s);
        std::hint::black_box(&mut dst);
        let dt = (now_ns() - t0).max(1);
        rates.push(SIZE as f64 / dt as f64); // bytes per ns = GB/s
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    let best = rates[rates.len() - 1];
    let frames = median * 1e9 / FRAME_1080P;
    let lines = vec![format!(
        "copy: {median:.1} GB/s median, {best:.1} GB/s best ({} copies of 64 MiB): {frames:.0} \
         copies of a 1080p RGBA frame per second",
        rates.len()
    )];
    // Each node reads its input and writes its output: about one frame copy per node per frame
    // (more for effects that read neighbours). A dozen nodes at 1080p60 stream ~6 GB/s; the
    // verdict asks for room for 20 such passes per 60 fps period (~10 GB/s) on one core.
    let per_frame_at_60 = frames / 60.0;
    let (status, summary, advice) = if per_frame_at_60 >= 20.0 {
        (
            Status::Ok,
            format!(
                "{median:.1} GB/s: one core can copy a 1080p RGBA frame {frames:.0} times a \
                 second, {per_frame_at_60:.0} times per 60 fps period: memory is not what limits \
                 a show here"
            ),
            String::new(),
        )
    } else if per_frame_at_60 >= 8.0 {
        (
            Status::Warn,
            format!(
                "{median:.1} GB/s: {per_frame_at_60:.0} 1080p RGBA frame copies per 60 fps period \
                 ({:.0} at 25 fps): a long 1080p60 chain may be limited by memory rather than \
                 by the cores",
                frames / 25.0
            ),
            "prefer fewer, larger effects at 1080p60; 720p needs less than half the bandwidth"
                .into(),
        )
    } else {
        (
            Status::Bad,
            format!(
                "{median:.1} GB/s: only {per_frame_at_60:.0} 1080p RGBA frame copies per 60 fps \
                 period: a 1080p chain of more than a few effects cannot hold 60 fps ({:.0} \
                 copies per 25 fps period)",
                frames / 25.0
            ),
            "run at 720p or 25/30 fps, or on a machine with faster memory; a busy machine \
             shares this bandwidth with every other program"
                .into(),
        )
    };
    Section {
        key: "memory",
        title: "memory copy bandwidth (one core)",
        figures: json!({
            "buffer_mib": SIZE >> 20,
            "copies": rates.len(),
            "gb_per_s": round1(median),
            "best_gb_per_s": round1(best),
            "frames_1080p_rgba_per_s": frames.round(),
        }),
        lines,
        status,
        summary,
        advice,
    }
}
