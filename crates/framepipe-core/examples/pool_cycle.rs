//! The frame path's pool cost: one frame acquired, frozen, cloned once and both handles dropped
//! (what a stage's output frame goes through), timed per cycle on one thread, from a pool
//! without quotas (a show alone) and through a quota handle (a show in a host).
//!
//!     cargo run --release -p framepipe-core --example pool_cycle [plain|quota|both]
//!
//! Prints ns per cycle: median [min..max] over 15 rounds of 2,000,000 cycles. Not a test: the
//! figures depend on the machine.

use std::time::Instant;

use framepipe_core::FramePool;

fn cycles(pool: &FramePool, n: u32) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        let f = pool.acquire().expect("a free frame").freeze();
        let g = f.clone();
        drop(f);
        drop(std::hint::black_box(g));
    }
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "both".into());
    let pool = FramePool::new(64, 64, 8);
    let quota = pool.with_quota(8);
    let mut kinds: Vec<(&str, &FramePool)> = Vec::new();
    if which != "quota" {
        kinds.push(("plain", &pool));
    }
    if which != "plain" {
        kinds.push(("quota", &quota));
    }
    let mut got: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for _ in 0..15 {
        // Interleaved, so that machine noise hits both alike.
        for (k, (_, p)) in kinds.iter().enumerate() {
            got[k].push(cycles(p, 2_000_000));
        }
    }
    for ((name, _), mut v) in kinds.iter().zip(got) {
        v.sort_by(f64::total_cmp);
        println!(
            "{name}: {:.1} ns per cycle [{:.1}..{:.1}]",
            v[v.len() / 2],
            v[0],
            v[v.len() - 1]
        );
    }
}
