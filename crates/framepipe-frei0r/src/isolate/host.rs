//! The child side of an isolated plugin: what `framepipe __frei0r-host ...` (or the `frei0r-host`
//! binary) runs. It maps the shared memory its parent made, loads the plugin, makes one instance,
//! says `ready`, and then serves frames: wait until stdin has something (parameter lines, and a
//! [`WAKE`] byte per frame asked for), apply the parameter lines, and when `req` holds a new frame
//! number run the plugin from the inputs into the output the header names (frames of the parent's
//! shared pools, mapped here by `poolmap.rs`, read in place and the output written in place; or
//! the instance's own buffers), store `done` and write one byte to stdout, which wakes the parent.
//! (Both pipes are taken off descriptors 0 and 1 first, which then read and write `/dev/null`:
//! what a plugin prints cannot reach the parent.) It exits when its parent goes away (stdin
//! closed; also checked twice a second while idle), ending its process group with it (what the
//! plugin started); the parent kills it, and its group, when it stalls or the node ends.
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::Ordering;

use super::poolmap::PoolMaps;
use super::shm::{publish, Shm};
use super::{decode_param, own_cpus, unpin_self, HOST_ARG, WAKE};
use crate::plugin::{ColorModel, Instance, Plugin, PluginKind};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::OFlags;
use rustix::process::{getpgrp, getpid, getppid, kill_current_process_group, Signal};

/// Runs the host with the process's arguments when the first one is [`HOST_ARG`]; returns `None`
/// otherwise (the program goes on as itself). A binary that may be used as the host calls this
/// first thing in `main`:
///
/// ```no_run
/// if let Some(code) = framepipe_frei0r::isolate::host_main_if_asked() {
///     std::process::exit(code);
/// }
/// ```
pub fn host_main_if_asked() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(HOST_ARG)) {
        return None;
    }
    let rest: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    Some(match serve(&rest) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("frei0r-host: {e}");
            1
        }
    })
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Result<T, String> {
    args.get(i)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("argument {} ({what}) missing or malformed", i + 1))
}

/// `PLUGIN WIDTH HEIGHT INPUTS CLEAR_OUTPUT PPID FD`
fn serve(args: &[String]) -> Result<(), String> {
    let path: String = arg(args, 0, "plugin path")?;
    let width: u32 = arg(args, 1, "width")?;
    let height: u32 = arg(args, 2, "height")?;
    let inputs: usize = arg(args, 3, "inputs")?;
    let clear_output: u8 = arg(args, 4, "clear output")?;
    let ppid: i32 = arg(args, 5, "parent pid")?;
    let fd: i32 = arg(args, 6, "memfd")?;
    let words = width as usize * height as usize;
    let file = File::options()
        .read(true)
        .write(true)
        .open(format!("/proc/{ppid}/fd/{fd}"))
        .map_err(|e| format!("cannot open the parent's shared memory: {e}"))?;
    let shm = Shm::open(file, inputs, words).map_err(|e| e.to_string())?;
    shm.guard_outputs()
        .map_err(|e| format!("cannot guard the output slots: {e}"))?;
    let plugin = Plugin::load(Path::new(&path)).map_err(|e| e.to_string())?;
    let want = match plugin.info().kind {
        PluginKind::Source => 0,
        PluginKind::Filter => 1,
        PluginKind::Mixer2 => 2,
        PluginKind::Mixer3 => 3,
    };
    if want != inputs {
        return Err(format!("{path} takes {want} inputs, not {inputs}"));
    }
    let mut inst = Instance::new(&plugin, width, height).map_err(|e| e.to_string())?;
    let bgra = plugin.info().color_model == ColorModel::Bgra8888;
    let mut scratch: Vec<Vec<u32>> = if bgra {
        vec![vec![0u32; words]; inputs]
    } else {
        Vec::new()
    };
    let (mut requests, mut done_pipe) = take_pipes()?;
    let mut pools = PoolMaps::new(ppid);
    let bytes = words * 4;
    let mut pending = Vec::<u8>::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let cpus = own_cpus();
    let header = shm.header();
    // The last request before this child: read before saying `ready`, after which the parent
    // may ask for the next frame at any moment.
    let mut last = header.req.load(Ordering::Acquire);
    publish(&header.ready, 1);
    loop {
        // `req` first: the parent writes a frame's parameter lines before it stores the frame's
        // number, so once the number is seen, reading stdin to its end gets them all.
        let req = header.req.load(Ordering::Acquire);
        loop {
            match requests.read(&mut chunk) {
                Ok(0) => {
                    // The parent closed our stdin: done.
                    end_own_group();
                    return Ok(());
                }
                // The wake-up bytes (NUL) are dropped here: only parameter text reaches
                // `pending` (heap memory a broken plugin may scribble on).
                Ok(n) => pending.extend(chunk[..n].iter().filter(|&&b| b != WAKE)),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading requests: {e}")),
            }
        }
        while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(&pending[..nl]).into_owned();
            pending.drain(..=nl);
            let (index, value) =
                decode_param(&line).ok_or_else(|| format!("bad parameter line '{line}'"))?;
            inst.set_param(index, &value).map_err(|e| e.to_string())?;
        }
        if req == last {
            let half_a_second = Timespec {
                tv_sec: 0,
                tv_nsec: 500_000_000,
            };
            let mut pfd = [PollFd::new(&requests, PollFlags::IN)];
            let n = poll(&mut pfd, Some(&half_a_second)).unwrap_or(1);
            // No parent (0) when it was outside this process's PID namespace.
            if n == 0 && getppid().map_or(0, |p| p.as_raw_nonzero().get()) != ppid {
                end_own_group();
                return Ok(());
            }
            continue;
        }
        last = req;
        // The parent pinned this process to its own CPU to wake it there; free again.
        if let Some(cpus) = &cpus {
            unpin_self(cpus);
        }
        let time = f64::from_bits(header.time.load(Ordering::Acquire));
        let slot = header.slot.load(Ordering::Acquire) as usize & 1;
        // Where this frame's inputs and output are: every lookup (which may map a pool) before
        // any slice is made, so that no lookup can unmap what a slice points into.
        pools.next_frame();
        let mut in_ptrs = [std::ptr::null::<u32>(); 3];
        for (i, p) in in_ptrs.iter_mut().enumerate().take(inputs) {
            *p = match header.inputs[i].get() {
                Some(f) => pools.frame(&f, bytes)?.cast::<u32>().cast_const(),
                // SAFETY: between `req` and `done` the parent does not write the inputs.
                None => unsafe { shm.input(i) }.as_ptr(),
            };
        }
        let out_frame = header.output.get();
        let out: &mut [u32] = match &out_frame {
            Some(f) => {
                let p = pools.frame(f, bytes)?.cast::<u32>();
                pools.set_writable(f, true)?;
                // The parent's unique FrameMut for this request, untouched until `done`;
                // `words` u32 long inside its slot (checked by the lookup).
                // SAFETY: held by nobody else (above); mapped, aligned, writable until `done`.
                unsafe { std::slice::from_raw_parts_mut(p, words) }
            }
            // SAFETY: between `req` and `done` the parent touches neither the inputs nor this
            // slot.
            None => unsafe { shm.output_mut(slot) },
        };
        if clear_output != 0 {
            out.fill(0);
        }
        // Each pointer is an input of this request (a pool frame mapped read-only here or the
        // instance's input buffer); none is the output (the parent names a frame it holds
        // uniquely as output and frames it shares as inputs).
        // SAFETY: `words` u32 long, aligned, kept alive and unwritten by the parent until `done`.
        let input = |i: usize| unsafe { std::slice::from_raw_parts(in_ptrs[i], words) };
        if bgra {
            for (i, sc) in scratch.iter_mut().enumerate() {
                for (d, &s) in sc.iter_mut().zip(input(i)) {
                    *d = super::swap_rb(s);
                }
            }
        }
        // At most three inputs: a fixed array of slices.
        let mut bufs: [&[u32]; 3] = [&[]; 3];
        for (i, b) in bufs.iter_mut().enumerate().take(inputs) {
            *b = if bgra { &scratch[i] } else { input(i) };
        }
        match inputs {
            0 => inst.update(time, None, out),
            1 => inst.update(time, Some(bufs[0]), out),
            n => inst.update2(time, &bufs[..n], out),
        }
        if bgra {
            for p in out.iter_mut() {
                *p = super::swap_rb(*p);
            }
        }
        if let Some(f) = &out_frame {
            // Delivered: read-only again before the parent may hand it on.
            pools.set_writable(f, false)?;
        }
        heap_probe();
        header.done.store(req, Ordering::Release);
        // The byte wakes the parent (a synchronous wake-up: see `Isolated::exchange`). A parent
        // gone is noticed on stdin.
        let _ = done_pipe.write_all(b"\n");
    }
}

/// Ends this child's process group, itself included (SIGKILL), when the parent has gone: what the
/// plugin started (a fork) must not outlive the run, also when the parent could not end the
/// group itself (it was killed). Only when this child leads its group (its parent started it
/// so, as [`super::Isolated`] does): never someone else's group.
fn end_own_group() {
    if getpgrp() == getpid() {
        let _ = kill_current_process_group(Signal::KILL);
    }
}

/// Takes the request pipe (stdin) and the done pipe (stdout) off descriptors 0 and 1 onto
/// private descriptors (close-on-exec; the request end non-blocking), and points 0 and 1 at
/// `/dev/null`, so that a plugin reading stdin or printing to stdout cannot take a request or
/// fake a done.
fn take_pipes() -> Result<(File, File), String> {
    fn err(what: &'static str) -> impl Fn(rustix::io::Errno) -> String {
        move |e| format!("{what}: {}", std::io::Error::from(e))
    }
    let requests = File::from(
        rustix::io::fcntl_dupfd_cloexec(std::io::stdin(), 3)
            .map_err(err("cannot take the request pipe"))?,
    );
    let done = File::from(
        rustix::io::fcntl_dupfd_cloexec(std::io::stdout(), 3)
            .map_err(err("cannot take the done pipe"))?,
    );
    rustix::fs::fcntl_getfl(&requests)
        .and_then(|flags| rustix::fs::fcntl_setfl(&requests, flags | OFlags::NONBLOCK))
        .map_err(err("cannot make the request pipe non-blocking"))?;
    let null = File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("cannot open /dev/null: {e}"))?;
    rustix::stdio::dup2_stdin(&null)
        .and_then(|()| rustix::stdio::dup2_stdout(&null))
        .map_err(err("cannot point stdin and stdout at /dev/null"))?;
    Ok((requests, done))
}

/// Takes a block from the top of the C heap and gives it back: glibc checks the heap's top chunk
/// then, so a plugin that wrote past its allocations (partik0l at small sizes) makes this child
/// abort at the frame that did it, instead of serving frames from a corrupted heap.
fn heap_probe() {
    // SAFETY: a plain malloc/free pair; the byte written is inside the block (when there is one).
    unsafe {
        let p = libc::malloc(64 * 1024);
        if !p.is_null() {
            std::ptr::write_volatile(p.cast::<u8>(), 0);
            libc::free(p);
        }
    }
}
