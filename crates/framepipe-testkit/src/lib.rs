//! Test support shared by framepipe's tests: one counting global allocator for the "no
//! allocation per frame" tests instead of a copy in every test file, and [`child::run`], which
//! runs a child process with a time limit and reads its peak RSS (the memory-budget tests);
//! [`fuzz`]: seeded random inputs for the parsers' quick randomized tests; [`xvfb`]: a private X
//! server for the window tests; [`tmp`]: temporary directories removed when the test ends, also
//! when it fails (`FP_KEEP_TMP=1` keeps them); [`jack`]: a JACK dummy server for the live-audio
//! tests, stopped with SIGTERM.
//!
//! A test binary installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: framepipe_testkit::CountingAlloc = framepipe_testkit::CountingAlloc;
//! ```
//!
//! and reads [`total`] (every thread: for measuring a whole engine) or [`this_thread`] (the
//! calling thread only: unaffected by other tests running at the same time) around the code it
//! checks. [`trace`] prints a backtrace for every allocation while it is on, to find what
//! allocates.

pub mod child;
pub mod frames;
pub mod fuzz;
pub mod jack;
pub mod tmp;
pub mod xvfb;

pub use tmp::{tmpdir, TestDir};

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The counting allocator: the system allocator, with every allocation and reallocation counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

static TOTAL: AtomicU64 = AtomicU64::new(0);
static TRACE: AtomicBool = AtomicBool::new(false);

thread_local! {
    // Const-initialised and without Drop: accessing them never allocates.
    static THREAD: Cell<u64> = const { Cell::new(0) };
    static IN_TRACE: Cell<bool> = const { Cell::new(false) };
}

/// Allocations (and reallocations) made so far by all threads.
pub fn total() -> u64 {
    TOTAL.load(Ordering::SeqCst)
}

/// Allocations (and reallocations) made so far by the calling thread.
pub fn this_thread() -> u64 {
    THREAD.with(|c| c.get())
}

/// While on, every allocation prints a backtrace to stderr (the printing's own allocations are
/// not traced).
pub fn trace(on: bool) {
    TRACE.store(on, Ordering::SeqCst);
}

fn counted() {
    TOTAL.fetch_add(1, Ordering::Relaxed);
    // `try_with`: a thread being torn down may allocate after its locals are gone.
    let _ = THREAD.try_with(|c| c.set(c.get() + 1));
    if TRACE.load(Ordering::Relaxed) && IN_TRACE.try_with(|t| !t.replace(true)).unwrap_or(false) {
        eprintln!(
            "allocation:\n{}",
            std::backtrace::Backtrace::force_capture()
        );
        let _ = IN_TRACE.try_with(|t| t.set(false));
    }
}

// SAFETY: every operation is forwarded to the system allocator unchanged; the counting touches
// only atomics and const-initialised thread-locals, which do not allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        counted();
        // SAFETY: our caller's contract (a valid, non-zero-sized layout) is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        counted();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System with this layout (through this allocator).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        counted();
        // SAFETY: as for `dealloc`; `new_size` is non-zero per GlobalAlloc's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
