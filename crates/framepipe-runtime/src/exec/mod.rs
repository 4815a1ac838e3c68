//! Execution: the threads that run a show's jobs, and running one job.
//!
//! Contract: every executor thread runs the one worker loop (`worker.rs`, [`work`]) over its
//! [`WorkSource`]: it takes a job under the show's scheduler lock (`Scheduler::next_job`, or the
//! source's own kind of job), runs it with no lock held (`Shared::run_job`), and reports it
//! back under the lock (`Scheduler::complete`), which may hand it the next job at once
//! (cache-warm). Nothing here runs element or user code under the scheduler lock. A panic in
//! an element becomes an error naming the element ([`guard`]); one in the thread's own code
//! ends that show's run (`Shared::break_run`) rather than leave the others waiting. Every
//! panic the runtime contains goes through [`catch_panic`].
//!
//! Executors today: a run's own workers (`OwnWorkers`), a host's workers (`host::HostQueue`),
//! a show's IO threads (`IoJobs`). The scheduler reaches idle ones after its unlock through
//! the show's [`IdleWorkers`], never by a flag of its own. A new kind of executor (a GPU
//! context thread) is one more `WorkSource` (and, if it waits apart, one more waker).
//!
//! * `worker.rs`: the worker loop and `WorkSource`; a run's own workers.
//! * `threads.rs`: what each executor thread is running (stall detection); the run's end for
//!   them (a broken run, joining or leaving them with a grace).
//! * `idle.rs`: how a wake-up reaches a show's idle workers (its condvar, or a host's queue).
//! * `run.rs`: one job (a slice, a frame's beginning, a node on one frame).
//! * `source.rs`: a source on one frame (resampling, its end, its live properties).
//! * `proc.rs`: an effect or a mixer on one frame, with that frame's parameter values.
//! * `instance.rs`: the instances a job runs (their parameter bookkeeping is exec's; the
//!   scheduler only stores them between jobs).
//! * `io.rs`: the IO threads that run blocking sources (their work source, start, join).
//! * `gpu.rs`: the GPU thread: a show's GPU context, its GPU nodes, uploads and downloads.
//! * `release.rs`: GPU instances a live edit removed, released on the GPU thread.
//! * `gl.rs`: the few GL calls the GPU thread makes itself (the runtime's other `unsafe`).
//! * `slices.rs`: the slice runner handed to effects (fork-join on the same workers).
//! * `unwind.rs`: the one panic capture.

mod gl;
mod gpu;
mod idle;
mod instance;
mod io;
mod proc;
mod release;
mod run;
mod slices;
mod source;
mod threads;
mod unwind;
mod worker;

pub(crate) use idle::{IdleWorkers, ShowQueue};
pub(crate) use instance::{GpuProc, Inst, Instance, Proc, SourceInst};
pub(crate) use release::GpuRelease;
pub(crate) use slices::{SliceFork, SliceJob};
pub(crate) use unwind::{catch_panic, guard, panic_error, panic_message, PanicPayload};
pub(crate) use worker::{work, WorkSource};
