//! Which node a crash happened in: a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) in
//! an element that runs in process (a frei0r plugin not isolated) kills the whole process; with
//! [`install`] it first writes one line naming the node, its element and the frame:
//!
//! ```text
//! framepipe: crashed in node fx (frei0r-fp_segv) on frame 6: SIGSEGV; run it isolated with isolate=true
//! ```
//!
//! and then dies of the signal as it would have (the default action: a core dump where enabled,
//! the exit status a shell reports as 128 + the signal).
//!
//! How: each thread that runs elements keeps a **note** in a fixed thread-local buffer, written
//! when it starts a node's frame ([`enter`]: the node's name, element and frame number, copied,
//! nothing allocated) and cleared when it leaves ([`leave`]). The handler reads the note of the
//! thread that crashed (the signals are synchronous: they are delivered to the faulting thread)
//! and writes it with `write(2)`: no allocation, no lock, no formatting machinery, which a signal
//! handler may not use. A thread with no note (not inside an element) writes nothing. Then the
//! previous action of the signal is restored. A fault the kernel raised (`si_code > 0`: a bad
//! address, an illegal instruction, a division by zero) is not raised again: the handler
//! returns, the faulting instruction runs again and faults again with its real information, so
//! the previous handler sees the real fault address — Rust's own SIGSEGV handler then still
//! reports a stack overflow ("has overflowed its stack"). A signal sent by `kill` or `raise`
//! (`abort`'s SIGABRT; `si_code <= 0`) would not come again by itself: it is raised again.
//!
//! Hand-written rather than through `signal-hook`: its registry runs handlers through a lock-free
//! list but always goes on to the previous action only for the signals it emulates, and dying of
//! the signal itself (not `exit`) needs the action reset and the signal raised, which is a few
//! lines of `sigaction` anyway.
#![allow(unsafe_code)] // sigaction, write(2), raise: see the SAFETY comments

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The longest note kept (a longer node or element name is cut).
const NOTE_LEN: usize = 320;

/// The signals a crash raises.
const SIGNALS: [(libc::c_int, &[u8]); 5] = [
    (libc::SIGSEGV, b"SIGSEGV"),
    (libc::SIGBUS, b"SIGBUS"),
    (libc::SIGILL, b"SIGILL"),
    (libc::SIGFPE, b"SIGFPE"),
    (libc::SIGABRT, b"SIGABRT"),
];

thread_local! {
    /// This thread's note: `framepipe: crashed in node NAME (ELEMENT) on frame N` (bytes).
    static NOTE: [Cell<u8>; NOTE_LEN] = const { [const { Cell::new(0) }; NOTE_LEN] };
    /// Bytes of [`NOTE`] in use; 0: no note (the thread is not inside a node).
    static NOTE_USED: Cell<usize> = const { Cell::new(0) };
    /// The element is a frei0r plugin (the line then says how to isolate it).
    static NOTE_FREI0R: Cell<bool> = const { Cell::new(false) };
}

/// Notes that this thread starts frame `frame` of node `node` (element `element`): a crash from
/// now until [`leave`] names them. Copies at most a few hundred bytes; allocates nothing.
pub fn enter(node: &str, element: &str, frame: u64) {
    NOTE.with(|note| {
        let mut n = 0;
        let mut put = |bytes: &[u8]| {
            for &b in bytes {
                if n < NOTE_LEN {
                    note[n].set(b);
                    n += 1;
                }
            }
        };
        put(b"framepipe: crashed in node ");
        put(node.as_bytes());
        put(b" (");
        put(element.as_bytes());
        put(b") on frame ");
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        let mut f = frame;
        loop {
            i -= 1;
            digits[i] = b'0' + (f % 10) as u8;
            f /= 10;
            if f == 0 {
                break;
            }
        }
        put(&digits[i..]);
        NOTE_USED.with(|u| u.set(n));
    });
    NOTE_FREI0R.with(|f| f.set(element.starts_with("frei0r-")));
}

/// Clears this thread's note: it is no longer inside a node.
pub fn leave() {
    NOTE_USED.with(|u| u.set(0));
}

/// This thread's note, copied into `out`; its length (0: none).
fn note(out: &mut [u8; NOTE_LEN]) -> usize {
    let used = NOTE_USED.with(Cell::get).min(NOTE_LEN);
    NOTE.with(|note| {
        for (o, c) in out.iter_mut().zip(note.iter()).take(used) {
            *o = c.get();
        }
    });
    used
}

static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The actions the signals had before [`install`] (restored before the signal is raised again),
/// read by the handler: written once, before any handler is installed, never again.
static mut PREVIOUS_RAW: [std::mem::MaybeUninit<libc::sigaction>; SIGNALS.len()] =
    [const { std::mem::MaybeUninit::uninit() }; SIGNALS.len()];

/// Installs the crash handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT (once per
/// process; later calls do nothing). Threads that [`enter`] a node name it when they crash.
pub fn install() -> std::io::Result<()> {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let mut previous: [libc::sigaction; SIGNALS.len()] =
        // SAFETY: sigaction is plain data; all-zero is a valid (default) action.
        unsafe { std::mem::zeroed() };
    for (i, (sig, _)) in SIGNALS.iter().enumerate() {
        // SAFETY: reading the current action into our own struct.
        if unsafe { libc::sigaction(*sig, std::ptr::null(), &mut previous[i]) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: written before any handler that reads it is installed, and only here (guarded by
    // INSTALLED), so no handler reads it while it is written.
    unsafe {
        let raw = &mut *std::ptr::addr_of_mut!(PREVIOUS_RAW);
        for (slot, act) in raw.iter_mut().zip(previous.iter()) {
            slot.write(*act);
        }
    }
    for (sig, _) in SIGNALS {
        // SAFETY: a zeroed sigaction with our handler, an empty mask and SA_SIGINFO | SA_ONSTACK
        // (a stack overflow runs the handler on the alternate stack Rust sets up per thread).
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_fatal as *const () as libc::sighandler_t;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// The handler: the note (if this thread has one), the signal's name and the advice, each with
/// one `write(2)`; then the previous action back. A fault from the kernel (`si_code > 0`) is
/// left to happen again: the handler returns to the faulting instruction, which faults again
/// and goes, with its real `si_addr`, to that action. A signal sent (`si_code <= 0`: `kill`,
/// `raise`, `abort`) is raised again (it is blocked while this handler runs, so it is
/// delivered, to that action, as the handler returns).
extern "C" fn on_fatal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let mut buf = [0u8; NOTE_LEN];
    let n = note(&mut buf);
    let index = SIGNALS.iter().position(|(s, _)| *s == sig);
    if n > 0 {
        let name: &[u8] = index.map_or(b"a fatal signal", |i| SIGNALS[i].1);
        let advice: &[u8] = if NOTE_FREI0R.with(Cell::get) {
            b"; run it isolated with isolate=true\n"
        } else {
            b"\n"
        };
        // SAFETY: write(2) is async-signal-safe; each buffer is valid for its length.
        unsafe {
            libc::write(2, buf.as_ptr().cast(), n);
            libc::write(2, b": ".as_ptr().cast(), 2);
            libc::write(2, name.as_ptr().cast(), name.len());
            libc::write(2, advice.as_ptr().cast(), advice.len());
        }
        leave();
    }
    // SAFETY: `info` is the kernel's siginfo for this delivery (SA_SIGINFO), valid while the
    // handler runs, or null; reading a field is async-signal-safe.
    let from_kernel = !info.is_null() && unsafe { (*info).si_code } > 0;
    // SAFETY: PREVIOUS_RAW was fully written before this handler was installed and is never
    // written again; sigaction and raise are async-signal-safe.
    unsafe {
        let raw = &*std::ptr::addr_of!(PREVIOUS_RAW);
        match index {
            Some(i) => {
                libc::sigaction(sig, raw[i].as_ptr(), std::ptr::null_mut());
            }
            None => {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        if !from_kernel {
            libc::raise(sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in the child process that [`a_stack_overflow_in_a_node_is_still_reported_by_rust`]
    /// runs: it overflows its stack instead of checking.
    const CHILD: &str = "FRAMEPIPE_CRASH_TEST_CHILD";

    /// Recurses until the stack overflows (the array and `black_box` keep each frame real).
    #[allow(unconditional_recursion)] // the point: it never returns
    fn deeper(n: u64) -> u64 {
        let pad = std::hint::black_box([n; 64]);
        deeper(n + 1) + pad[(n % 64) as usize]
    }

    /// A stack overflow is a real fault (`si_code > 0`): the handler notes the node, then lets
    /// the fault happen again so that Rust's own handler sees the guard page's address and says
    /// what happened. Raising the signal instead would hand Rust a fault with no address, and
    /// the process would die of SIGSEGV without its report.
    #[test]
    fn a_stack_overflow_in_a_node_is_still_reported_by_rust() {
        if std::env::var_os(CHILD).is_some() {
            install().unwrap();
            std::thread::Builder::new()
                .name("deep".into())
                .spawn(|| {
                    enter("fx", "frei0r-deep", 7);
                    deeper(0)
                })
                .unwrap()
                .join()
                .unwrap();
            unreachable!("the stack did not overflow");
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "crash::tests::a_stack_overflow_in_a_node_is_still_reported_by_rust",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "the child survived: {err}");
        assert!(
            err.contains("framepipe: crashed in node fx (frei0r-deep) on frame 7: SIGSEGV"),
            "no note: {err}"
        );
        assert!(
            err.contains("thread 'deep'") && err.contains("has overflowed its stack"),
            "Rust's stack-overflow report is missing: {err}"
        );
    }
}
