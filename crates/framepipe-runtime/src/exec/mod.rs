//! Execution: the threads that run a show's jobs, and running one job.
//!
//! Contract: a worker takes a job under the scheduler lock (`Scheduler::next_job`), runs it
//! with no lock held (`Shared::run_job`), and reports it back under the lock
//! (`Scheduler::complete`), which may hand it the next job at once (cache-warm). An element's
//! panic becomes an error naming the element (`unwind.rs`); a panic in the worker's own code
//! ends the run (`Shared::break_run`) rather than leave the others waiting.
//!
//! * `worker.rs`: the worker loops (a run's own workers, a host's turn at a show), the end's
//!   grace, and what each thread is running (stall detection).
//! * `run.rs`: one job (a slice, a frame's beginning, a node on one frame).
//! * `source.rs`: a source on one frame (resampling, its end, its live properties).
//! * `proc.rs`: an effect or a mixer on one frame, with that frame's parameter values.
//! * `io.rs`: the IO threads that run blocking sources.
//! * `slices.rs`: the slice runner handed to effects (fork-join on the same workers).
//! * `unwind.rs`: panic capture.

mod io;
mod proc;
mod run;
mod slices;
mod source;
mod unwind;
mod worker;

pub(crate) use slices::{PanicPayload, SliceJob, SliceSlot};
pub(crate) use unwind::{guard, panic_message};
