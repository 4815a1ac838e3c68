//! The child side of an isolated plugin: what `framepipe __frei0r-host ...` (or the `frei0r-host`
//! binary) runs. It maps the shared memory its parent made, loads the plugin, makes one instance,
//! says `ready`, and then serves frames: wait on the `req` futex, apply the parameter changes
//! waiting on stdin, run the plugin from the inputs into the output the header names (frames of
//! the parent's shared pools, mapped here by `poolmap.rs`, read in place and the output written in
//! place; or the instance's own buffers), store `done`, wake the parent. It exits when its parent goes away (checked twice
//! a second while idle) or stdin is closed; the parent kills it when it stalls.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::poolmap::PoolMaps;
use super::shm::{futex_wait, publish, Shm};
use super::{decode_param, HOST_ARG};
use crate::plugin::{ColorModel, Instance, Plugin, PluginKind};

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
    let mut stdin = std::io::stdin().lock();
    // Parameter changes are read without blocking before each frame.
    // SAFETY: fcntl on our own stdin descriptor; flags read then written back.
    unsafe {
        let fd0 = stdin.as_raw_fd();
        let flags = libc::fcntl(fd0, libc::F_GETFL);
        libc::fcntl(fd0, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let mut pools = PoolMaps::new(ppid);
    let bytes = words * 4;
    let mut pending = Vec::<u8>::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let header = shm.header();
    // The last request before this child: read before saying `ready`, after which the parent
    // may ask for the next frame at any moment.
    let mut last = header.req.load(Ordering::Acquire);
    publish(&header.ready, 1);
    loop {
        let req = header.req.load(Ordering::Acquire);
        if req == last {
            futex_wait(&header.req, last, Duration::from_millis(500));
            // SAFETY: getppid cannot fail.
            if unsafe { libc::getppid() } != ppid {
                return Ok(());
            }
            continue;
        }
        last = req;
        // The parent wrote any parameter change before asking for this frame.
        loop {
            match stdin.read(&mut chunk) {
                Ok(0) => return Ok(()), // the parent closed our stdin: done
                Ok(n) => pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading parameters: {e}")),
            }
        }
        while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(&pending[..nl]).into_owned();
            pending.drain(..=nl);
            let (index, value) =
                decode_param(&line).ok_or_else(|| format!("bad parameter line '{line}'"))?;
            inst.set_param(index, &value).map_err(|e| e.to_string())?;
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
        publish(&header.done, req);
    }
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
