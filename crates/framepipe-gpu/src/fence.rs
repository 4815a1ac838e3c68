//! Fences: knowing, without waiting, whether the GPU has done the commands queued before a
//! point. The downloader puts one after each readback; the GPU executor may put one after a
//! submission to learn when the GPU finished it.

use glow::HasContext;

use crate::context::Gpu;
use crate::error::{GpuError, Result};

/// A point in the context's command stream (`glFenceSync`). Lives on the GPU thread (`!Send`).
/// Give it back with [`delete`](Self::delete); a fence merely dropped stays allocated in the
/// driver until the context goes.
#[derive(Debug)]
#[must_use = "a fence is deleted with Fence::delete"]
pub struct Fence {
    sync: glow::Fence,
}

impl Fence {
    /// A fence after every command queued so far; the commands are submitted (`glFlush`) so
    /// that it can signal while the caller polls.
    pub fn insert(gpu: &Gpu) -> Result<Fence> {
        let gl = gpu.gl();
        // SAFETY: the context is current on this thread (Gpu is !Send); the condition and
        // flags are the only values glFenceSync accepts.
        let sync = unsafe {
            let sync = gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0);
            gl.flush();
            sync
        };
        let sync = sync.map_err(|e| GpuError::Gl {
            what: "glFenceSync",
            detail: e,
        })?;
        Ok(Fence { sync })
    }

    /// Whether the GPU has done everything before the fence. Never waits: a zero-timeout poll.
    /// A failed poll (a lost context) reads as signalled, so that callers move on and find
    /// the error where they use the results.
    pub fn signalled(&self, gpu: &Gpu) -> bool {
        // SAFETY: the context is current on this thread and the sync object is this
        // context's and live (deleted only by `delete`, which consumes the fence). Timeout 0
        // and no flags: the call reads the fence's state and returns.
        let status = unsafe { gpu.gl().client_wait_sync(self.sync, 0, 0) };
        status != glow::TIMEOUT_EXPIRED
    }

    /// Waits until the fence signals. Tools and tests only: the frame path polls.
    pub fn wait(&self, gpu: &Gpu) {
        // SAFETY: as in `signalled`; the loop ends when the status is not TIMEOUT_EXPIRED.
        while unsafe { gpu.gl().client_wait_sync(self.sync, 0, 1_000_000_000) }
            == glow::TIMEOUT_EXPIRED
        {}
    }

    /// The sync object, for a context sharing this one's objects to wait on and delete.
    pub(crate) fn into_raw(self) -> glow::Fence {
        self.sync
    }

    /// Frees the fence.
    pub fn delete(self, gpu: &Gpu) {
        // SAFETY: the context is current; the sync object is this context's and not used
        // after this (the fence is consumed).
        unsafe { gpu.gl().delete_sync(self.sync) };
    }
}
