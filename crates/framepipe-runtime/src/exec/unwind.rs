//! Panic capture, in one place: every panic the runtime contains (an element's, a slice's, a
//! user callback's, a thread's own code) is caught by [`catch_panic`] and re-raised, where it must
//! be, by [`resume_panic`]; [`panic_error`] turns one into the error that names where it happened
//! (`<who>: panicked: <message>`), [`guard`] does both around an element's call.
//!
//! Contract: what runs under [`catch_panic`] is treated as unwind-safe (`AssertUnwindSafe`): the
//! caller either discards what the closure touched (a slice's output, an element instance
//! that is never called again once its run failed) or ends the run that shares it
//! (`Shared::break_run`: the scheduler's state is then marked broken, not trusted). Nothing
//! here allocates unless a panic happened.

use std::any::Any;
use std::panic::AssertUnwindSafe;

use framepipe_core::{Error, Result};

/// What a caught panic carries (its message, usually).
pub(crate) type PanicPayload = Box<dyn Any + Send + 'static>;

/// Runs `f`, catching a panic: `Err` with its payload. The runtime's only `catch_unwind`.
pub(crate) fn catch_panic<R>(f: impl FnOnce() -> R) -> std::result::Result<R, PanicPayload> {
    std::panic::catch_unwind(AssertUnwindSafe(f))
}

/// Re-raises a panic caught by [`catch_panic`] (a slice's, on its owner's thread, once every slice
/// is accounted for).
pub(crate) fn resume_panic(payload: PanicPayload) -> ! {
    std::panic::resume_unwind(payload)
}

/// The error for a panic caught in `who` (an element, a thread): `panicked: <message>`.
pub(crate) fn panic_error(who: impl Into<String>, payload: &PanicPayload) -> Error {
    Error::element(who, format!("panicked: {}", panic_message(&**payload)))
}

/// Runs `f`, turning a panic inside an element into an error that names it.
pub(crate) fn guard<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_panic(f).unwrap_or_else(|p| Err(panic_error(name, &p)))
}

/// The message of a panic payload (`panic!("...")` gives a `&str` or a `String`).
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
