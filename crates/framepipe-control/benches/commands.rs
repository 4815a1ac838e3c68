//! Command queue benchmark (issue 3): post 5,000 commands while the reader is busy, then drain
//! them; ns per post and per retrieval for framepipe's [`command_queue`] against std's bounded
//! `sync_channel` and unbounded `channel`, interleaved in the same process, several runs,
//! median and spread (min..max).
//!
//! `cargo bench -p framepipe-control --bench commands [-- RUNS]` (default 21 runs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use framepipe_control::{command_queue, Command};

const N: usize = 5_000;
const CAPACITY: usize = 8_192;

/// A realistic mix of commands, as the stdin parser makes them.
fn commands() -> Vec<Command> {
    let lines = [
        "set frei0r-glow.blur 0.7",
        "osc stamp.value sine freq=0.5 min=0 max=1 phase=0",
        "bypass 2 on",
        "speed 1.5",
        "set 3.color 1,0.5,0",
        "step 1",
    ];
    (0..N)
        .map(|i| Command::parse(lines[i % lines.len()]).expect("benchmark lines parse"))
        .collect()
}

/// Spins on arithmetic until `go` is set, like an engine busy with a frame.
fn busy_until(go: &AtomicBool) -> u64 {
    let mut x = 1u64;
    while !go.load(Ordering::Acquire) {
        for _ in 0..64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
    }
    x
}

/// One run: (ns per post, ns per retrieval).
fn run<S, R>(
    make: impl FnOnce() -> (S, R),
    post: impl Fn(&S, Command),
    pop: fn(&mut R) -> Option<Command>,
) -> (f64, f64)
where
    R: Send + 'static,
{
    let cmds = commands();
    let (tx, mut rx) = make();
    let go = Arc::new(AtomicBool::new(false));
    let reader_go = Arc::clone(&go);
    let reader = std::thread::spawn(move || {
        let spin = busy_until(&reader_go);
        let mut got = Vec::with_capacity(N);
        let t0 = Instant::now();
        while got.len() < N {
            if let Some(c) = pop(&mut rx) {
                got.push(c);
            }
        }
        let dt = t0.elapsed().as_nanos() as f64 / N as f64;
        std::hint::black_box(spin);
        (dt, got)
    });
    let t0 = Instant::now();
    for c in cmds {
        post(&tx, c);
    }
    let post_ns = t0.elapsed().as_nanos() as f64 / N as f64;
    go.store(true, Ordering::Release);
    let (pop_ns, got) = reader.join().expect("reader thread");
    assert_eq!(got.len(), N);
    drop(tx);
    (post_ns, pop_ns)
}

fn median_and_spread(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(21);
    let names = [
        "framepipe command_queue",
        "std mpsc::sync_channel",
        "std mpsc::channel",
    ];
    let mut post = vec![Vec::new(); 3];
    let mut pop = vec![Vec::new(); 3];
    for _ in 0..runs {
        let (a, b) = run(
            || command_queue(CAPACITY),
            |tx, c| {
                tx.post(c).expect("capacity exceeds N");
            },
            |rx| rx.pop().map(|p| p.command),
        );
        post[0].push(a);
        pop[0].push(b);
        let (a, b) = run(
            || mpsc::sync_channel::<Command>(CAPACITY),
            |tx, c| tx.try_send(c).expect("capacity exceeds N"),
            |rx| rx.try_recv().ok(),
        );
        post[1].push(a);
        pop[1].push(b);
        let (a, b) = run(
            mpsc::channel::<Command>,
            |tx, c| tx.send(c).expect("receiver alive"),
            |rx| rx.try_recv().ok(),
        );
        post[2].push(a);
        pop[2].push(b);
    }
    println!(
        "commands: {N} posted while the reader is busy, then drained; {runs} runs; \
         Command is {} bytes",
        std::mem::size_of::<Command>()
    );
    println!(
        "{:<26} {:>22} {:>22}",
        "queue", "ns/post median [min..max]", "ns/retrieval median [min..max]"
    );
    let mut medians = Vec::new();
    for i in 0..3 {
        let (pm, plo, phi) = median_and_spread(&mut post[i]);
        let (rm, rlo, rhi) = median_and_spread(&mut pop[i]);
        medians.push((pm, rm));
        println!(
            "{:<26} {:>8.1} [{:>5.1}..{:>6.1}] {:>12.1} [{:>5.1}..{:>6.1}]",
            names[i], pm, plo, phi, rm, rlo, rhi
        );
    }
    for (i, name) in names.iter().enumerate().skip(1) {
        println!(
            "ratio {name} / framepipe: post {:.2}x, retrieval {:.2}x",
            medians[i].0 / medians[0].0,
            medians[i].1 / medians[0].1
        );
    }
}
