//! Splitting a frame into row slices that the engine's workers fill at once, in safe Rust.
//!
//! [`for_each_row_slice_sized`] cuts the output buffer into at most [`MAX_SLICES`] disjoint runs
//! of whole rows and hands each to one call of the job through the [`SliceRunner`]. The pieces are
//! parked in a fixed array on the stack, one `Mutex<Option<&mut [T]>>` per slice: each is taken
//! exactly once by the worker that runs that slice, so the lock is never contended and nothing is
//! allocated.
//!
//! How many slices: [`adaptive_slice_count`] cuts by the work, never a slice smaller than
//! [`MIN_SLICE_BYTES`] (a slice smaller than its hand-off costs loses throughput), and every
//! sliced effect uses it (through [`for_each_row_slice_sized`]).

use std::ops::Range;
use std::sync::Mutex;

use framepipe_core::SliceRunner;

/// Most slices one frame is cut into.
pub const MAX_SLICES: usize = 64;

/// A few slices per worker whatever the work: only for the tests, which cut small frames into
/// many slices to check the cutting itself.
#[cfg(test)]
fn slice_count(runner: &dyn SliceRunner, rows: usize) -> usize {
    (runner.workers().max(1) * 4).min(rows).clamp(1, MAX_SLICES)
}

/// Smallest slice worth handing to another worker, in bytes of memory traffic (bytes the
/// slice reads plus bytes it writes).
///
/// Where the figure comes from: fork-join on this engine's pool (issue #8, 2 cores) runs 3 µs
/// slices at 0.59 efficiency and slices of 100 µs and more at 0.91–0.94. The cheapest kernel
/// in this crate, `mix mode=crossfade`, moves 14–22 GB/s on one core and the `mix` blends
/// 3.9–6.2 GB/s (`cargo run --release -p framepipe-effects --example effects_bench`, 1920x1080,
/// 2-core machine, median of 9), so 2 MiB is at least ~100 µs of work for them: at the flat part
/// of that curve, never at its steep start. (For a 2-input mix that is 683 KiB of output.)
pub const MIN_SLICE_BYTES: usize = 2 * 1024 * 1024;

/// Most slices per worker [`adaptive_slice_count`] asks for: a few, so that a worker that is
/// late to join still finds work, never so many that hand-offs dominate.
pub const SLICES_PER_WORKER: usize = 4;

/// How many slices to cut a frame of `rows` rows into, when one row costs `row_bytes` bytes of
/// memory traffic (input bytes read plus output bytes written): as many as make slices of at
/// least [`MIN_SLICE_BYTES`], at most [`SLICES_PER_WORKER`] per worker of `runner`, one per row
/// and [`MAX_SLICES`]; 1 (run inline) when the whole frame is smaller than two minimum slices
/// or the runner has one worker.
pub fn adaptive_slice_count(runner: &dyn SliceRunner, rows: usize, row_bytes: usize) -> usize {
    let workers = runner.workers().max(1);
    if workers == 1 {
        return 1;
    }
    let by_work = rows.saturating_mul(row_bytes) / MIN_SLICE_BYTES;
    by_work
        .min(workers * SLICES_PER_WORKER)
        .min(rows)
        .clamp(1, MAX_SLICES)
}

/// Calls `job(rows, out_rows)` for disjoint runs of whole rows of `out` (rows of `row_len`
/// elements), possibly on several workers at once. `rows` is the range of row indices that
/// `out_rows` covers, so the job can find the matching input rows. Returns when all are done.
///
/// A `row_len` of zero or an `out` shorter than one row does nothing. Test-only: effects use
/// [`for_each_row_slice_sized`].
#[cfg(test)]
fn for_each_row_slice<T: Send>(
    runner: &dyn SliceRunner,
    out: &mut [T],
    row_len: usize,
    job: &(dyn Fn(Range<usize>, &mut [T]) + Sync),
) {
    if row_len == 0 {
        return;
    }
    let rows = out.len() / row_len;
    if rows == 0 {
        return;
    }
    run_row_slices(runner, slice_count(runner, rows), out, row_len, job);
}

/// Like [`for_each_row_slice`], with the number of slices chosen by the work:
/// [`adaptive_slice_count`] for rows of `row_bytes` bytes of memory traffic each. A frame too
/// small to be worth a hand-off runs on the calling thread, without going through `runner`.
pub fn for_each_row_slice_sized<T: Send>(
    runner: &dyn SliceRunner,
    out: &mut [T],
    row_len: usize,
    row_bytes: usize,
    job: &(dyn Fn(Range<usize>, &mut [T]) + Sync),
) {
    if row_len == 0 {
        return;
    }
    let rows = out.len() / row_len;
    if rows == 0 {
        return;
    }
    let n = adaptive_slice_count(runner, rows, row_bytes);
    if n == 1 {
        job(0..rows, &mut out[..rows * row_len]);
        return;
    }
    run_row_slices(runner, n, out, row_len, job);
}

/// Cuts the `rows` whole rows of `out` into at most `wanted` runs and hands them out.
fn run_row_slices<T: Send>(
    runner: &dyn SliceRunner,
    wanted: usize,
    out: &mut [T],
    row_len: usize,
    job: &(dyn Fn(Range<usize>, &mut [T]) + Sync),
) {
    let rows = out.len() / row_len;
    let wanted = wanted.clamp(1, MAX_SLICES.min(rows));
    let rows_per = rows.div_ceil(wanted);
    let n = rows.div_ceil(rows_per);
    let mut cells: [Mutex<Option<&mut [T]>>; MAX_SLICES] = [const { Mutex::new(None) }; MAX_SLICES];
    for (cell, chunk) in cells
        .iter_mut()
        .zip(out[..rows * row_len].chunks_mut(rows_per * row_len))
    {
        *cell.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(chunk);
    }
    let cells = &cells;
    runner.run(n, &|i| {
        let taken = cells[i].lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(chunk) = taken {
            let first = i * rows_per;
            job(first..first + chunk.len() / row_len, chunk);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use framepipe_core::InlineSlices;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Runs slices on real threads, several at once.
    struct Threads(usize);
    impl SliceRunner for Threads {
        fn workers(&self) -> usize {
            self.0
        }
        fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
            let next = AtomicUsize::new(0);
            std::thread::scope(|s| {
                for _ in 0..self.0 {
                    s.spawn(|| loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        job(i);
                    });
                }
            });
        }
    }

    #[test]
    fn every_row_is_visited_once_with_its_index() {
        for runner in [&InlineSlices as &dyn SliceRunner, &Threads(3)] {
            for rows in [1usize, 2, 7, 13, 100, 1000] {
                let row_len = 5;
                let mut out = vec![0u32; rows * row_len];
                for_each_row_slice(runner, &mut out, row_len, &|r, chunk| {
                    assert_eq!(chunk.len(), r.len() * row_len);
                    for (k, row) in r.zip(chunk.chunks_mut(row_len)) {
                        for v in row {
                            *v += k as u32 + 1;
                        }
                    }
                });
                for (k, row) in out.chunks(row_len).enumerate() {
                    assert!(
                        row.iter().all(|&v| v == k as u32 + 1),
                        "rows={rows} row {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn sized_slicing_visits_every_row_once_and_runs_small_frames_inline() {
        /// Counts the slices it is asked to run (and runs them on real threads).
        struct Counting(Threads, std::sync::atomic::AtomicUsize);
        impl SliceRunner for Counting {
            fn workers(&self) -> usize {
                self.0.workers()
            }
            fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
                self.1.fetch_add(n, Ordering::Relaxed);
                self.0.run(n, job);
            }
        }
        // 64 KiB in all (less than two minimum slices): inline, the runner is never called.
        let runner = Counting(Threads(2), AtomicUsize::new(0));
        let mut out = vec![0u8; 256 * 256];
        for_each_row_slice_sized(&runner, &mut out, 256, 256, &|r, chunk| {
            assert_eq!(r, 0..256);
            chunk.fill(1);
        });
        assert!(out.iter().all(|&v| v == 1));
        assert_eq!(runner.1.load(Ordering::Relaxed), 0);
        // 32 MiB of traffic: 8 slices (2 workers x 4), every row once.
        let mut out = vec![0u32; 1000 * 7];
        for_each_row_slice_sized(&runner, &mut out, 7, 32 << 10, &|r, chunk| {
            for (k, row) in r.zip(chunk.chunks_mut(7)) {
                row.iter_mut().for_each(|v| *v += k as u32 + 1);
            }
        });
        assert_eq!(runner.1.load(Ordering::Relaxed), 8);
        for (k, row) in out.chunks(7).enumerate() {
            assert!(row.iter().all(|&v| v == k as u32 + 1), "row {k}");
        }
    }

    #[test]
    fn adaptive_count_follows_the_work() {
        let two = Threads(2);
        // Below two minimum slices: inline.
        assert_eq!(adaptive_slice_count(&two, 100, 1000), 1);
        assert_eq!(adaptive_slice_count(&two, 1, usize::MAX), 1);
        // 8 MiB: 4 slices of 2 MiB.
        assert_eq!(adaptive_slice_count(&two, 1024, 8192), 4);
        // Much more: capped at 4 per worker.
        assert_eq!(adaptive_slice_count(&two, 2160, 3840 * 4 * 3), 8);
        // One worker: always inline.
        assert_eq!(adaptive_slice_count(&InlineSlices, 2160, 3840 * 16), 1);
        assert_eq!(
            adaptive_slice_count(&Threads(64), 2160, 3840 * 32),
            MAX_SLICES
        );
    }
}
