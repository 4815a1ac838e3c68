//! Splitting a frame into row slices that the engine's workers fill at once, in safe Rust.
//!
//! [`for_each_row_slice`] cuts the output buffer into at most [`MAX_SLICES`] disjoint runs of
//! whole rows and hands each to one call of the job through the [`SliceRunner`]. The pieces are
//! parked in a fixed array on the stack, one `Mutex<Option<&mut [T]>>` per slice: each is taken
//! exactly once by the worker that runs that slice, so the lock is never contended and nothing is
//! allocated.

use std::ops::Range;
use std::sync::Mutex;

use framepipe_core::SliceRunner;

/// Most slices one frame is cut into.
pub const MAX_SLICES: usize = 64;

/// How many slices to cut `rows` rows into for `runner`: a few per worker, at most one per row
/// and at most [`MAX_SLICES`].
pub fn slice_count(runner: &dyn SliceRunner, rows: usize) -> usize {
    (runner.workers().max(1) * 4).min(rows).clamp(1, MAX_SLICES)
}

/// Calls `job(rows, out_rows)` for disjoint runs of whole rows of `out` (rows of `row_len`
/// elements), possibly on several workers at once. `rows` is the range of row indices that
/// `out_rows` covers, so the job can find the matching input rows. Returns when all are done.
///
/// A `row_len` of zero or an `out` shorter than one row does nothing.
pub fn for_each_row_slice<T: Send>(
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
    let wanted = slice_count(runner, rows);
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
}
