//! Run settings from flags and project files, checked before anything is built: each bad
//! value is a one-line error naming the value, the limit and the fix, never a panic or an
//! allocation sized by it.
//!
//! | setting | accepted | why |
//! |---|---|---|
//! | `--threads`, `threads` | 1..=max(8, 4 × cores) (0: one per core) | each worker gets its own instance of every parallel effect; beyond 4 per core they only add memory and contention |
//! | `--in-flight`, `in-flight` | 1..=256 (0: 2 × threads + 2) | frames in flight size the frame pools; the memory budget checks the bytes, this bounds the count |
//! | `--fps`, `fps`, the source's rate when pacing by it | 1/3600..=10000 fps | a period from 100 µs to one hour; beyond, the frame clock's arithmetic (periods × 5 for stalls) overflows |
//! | `--stall-timeout` | 0..=3600000 ms (0: automatic) | one hour; ms × 10⁶ must fit in nanoseconds |
//! | `--max-memory` | a size, e.g. `512M`, `4G` | see `framepipe_core::limits` |

use anyhow::{bail, Result};
use framepipe_core::Rational;

/// Frames in flight at most.
pub const MAX_IN_FLIGHT: usize = 256;
/// The slowest pace: one frame an hour.
pub const MIN_FPS_PERIOD_S: u64 = 3600;
/// The fastest pace, frames per second.
pub const MAX_FPS: u64 = 10_000;
/// The longest stall timeout, ms (one hour).
pub const MAX_STALL_TIMEOUT_MS: u64 = 3_600_000;

/// Worker threads at most on this machine: 4 per core, at least 8.
pub fn max_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (4 * cores).max(8)
}

/// Checks a worker count (`from`: "--threads" or "'threads' in the project file").
pub fn threads(n: usize, from: &str) -> Result<usize> {
    let max = max_threads();
    if n > max {
        bail!(
            "{from} {n} is too many: at most {max} on this machine (4 per core; each worker gets \
             its own instance of every parallel effect); use 0 for one per core"
        );
    }
    Ok(n)
}

/// Checks a frames-in-flight count.
pub fn in_flight(n: usize, from: &str) -> Result<usize> {
    if n > MAX_IN_FLIGHT {
        bail!(
            "{from} {n} is too many: at most {MAX_IN_FLIGHT} frames in flight; use 0 for the \
             default (2 x threads + 2)"
        );
    }
    Ok(n)
}

/// Parses a pace (`30`, `29.97`, `30000/1001`) and checks its range.
pub fn fps(text: &str, from: &str) -> Result<Rational> {
    let Some(rate) = Rational::parse(text) else {
        bail!(
            "bad {from} '{text}': expected a rate like 30, 29.97 or 30000/1001, within \
             1/{MIN_FPS_PERIOD_S}..={MAX_FPS} fps"
        );
    };
    rate_in_range(rate, &format!("{from} '{text}'"), "")
}

/// Checks that `rate` can pace a run: 1/3600..=10000 fps.
pub fn rate_in_range(rate: Rational, what: &str, fix: &str) -> Result<Rational> {
    let (num, den) = (u64::from(rate.num), u64::from(rate.den));
    if den == 0 || num == 0 || num > MAX_FPS * den || num * MIN_FPS_PERIOD_S < den {
        bail!(
            "{what} is {}/{} fps, outside the pace range 1/{MIN_FPS_PERIOD_S}..={MAX_FPS} fps \
             (one frame an hour to {MAX_FPS} a second){fix}",
            rate.num,
            rate.den
        );
    }
    Ok(rate)
}

/// `--stall-timeout` in ms as ns, checked.
pub fn stall_timeout_ns(ms: u64) -> Result<u64> {
    if ms > MAX_STALL_TIMEOUT_MS {
        bail!(
            "--stall-timeout {ms} is too long: at most {MAX_STALL_TIMEOUT_MS} ms (one hour); use \
             0 for the default (five frame periods)"
        );
    }
    Ok(ms * 1_000_000)
}

/// `--latency` in ms as ns, checked (0 = automatic).
pub fn latency_ns(ms: u64) -> Result<u64> {
    if ms > MAX_STALL_TIMEOUT_MS {
        bail!(
            "--latency {ms} is too long: at most {MAX_STALL_TIMEOUT_MS} ms; use 0 (the default) \
             for the graph's measured latency"
        );
    }
    Ok(ms * 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_outside_the_pace_range_are_named() {
        assert_eq!(
            fps("30000/1001", "--fps").unwrap(),
            Rational::new(30000, 1001)
        );
        assert_eq!(fps("1/3600", "--fps").unwrap(), Rational::new(1, 3600));
        assert_eq!(fps("10000", "--fps").unwrap(), Rational::new(10000, 1));
        for bad in ["1/3601", "10001", "1/4294967295", "4294967295", "0", "1/0"] {
            let e = fps(bad, "--fps").unwrap_err().to_string();
            assert!(e.contains(&format!("'{bad}'")), "{bad}: {e}");
        }
        assert!(stall_timeout_ns(u64::MAX).is_err());
        assert_eq!(
            stall_timeout_ns(MAX_STALL_TIMEOUT_MS).unwrap(),
            3_600_000_000_000
        );
    }
}
