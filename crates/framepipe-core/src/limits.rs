//! The memory budget: what untrusted input may make the process allocate.
//!
//! Nothing untrusted — a file header, a stream header, a flag, a project value — decides an
//! allocation alone. Before anything frame-sized is allocated, the size is checked here:
//! * [`Limits::check_frame`]: one frame of `width` x `height` (RGBA) against the largest frame
//!   allowed (`max_memory / FRAMES_PER_BUDGET`, since a run needs several frames at once) and
//!   against [`MAX_DIMENSION`] per side;
//! * [`Limits::check_total`]: everything a run will hold at most (its frame pools at full
//!   capacity, every effect instance) against `max_memory`.
//!
//! The limits are process-wide ([`Limits::current`]), set once by the program before it builds
//! anything ([`Limits::set`], the CLI's `--max-memory`), so that every element, however deep,
//! checks against the same budget. The default is derived from the machine: a quarter of its
//! physical memory, at least [`MIN_DEFAULT_MEMORY`] and at most [`MAX_DEFAULT_MEMORY`].
//!
//! Every refusal is an [`Error::TooLarge`] that says what was asked, what the limit is, and how to
//! raise it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// The largest width or height any element accepts (as ffmpeg's common limit).
pub const MAX_DIMENSION: u32 = 16384;

/// A single frame may take at most `max_memory / FRAMES_PER_BUDGET`: a run holds several
/// frames at once (frames in flight, one per busy worker, the sink's), so a frame that takes a
/// large share of the budget alone could never run.
pub const FRAMES_PER_BUDGET: u64 = 8;

/// The default budget is never below this (1 GiB), even on a small machine.
pub const MIN_DEFAULT_MEMORY: u64 = 1 << 30;

/// The default budget is never above this (8 GiB): more must be asked for.
pub const MAX_DEFAULT_MEMORY: u64 = 8 << 30;

/// What the process may allocate for frames and the structures sized from input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes a run may hold at most (pools at full capacity, instances, buffers sized by input).
    pub max_memory: u64,
}

/// 0 = not set yet: [`Limits::current`] then uses [`Limits::from_machine`].
static MAX_MEMORY: AtomicU64 = AtomicU64::new(0);

impl Limits {
    /// The default for this machine: a quarter of physical memory, clamped to
    /// [`MIN_DEFAULT_MEMORY`]..=[`MAX_DEFAULT_MEMORY`].
    pub fn from_machine() -> Self {
        let total = physical_memory().unwrap_or(4 << 30);
        Limits {
            max_memory: (total / 4).clamp(MIN_DEFAULT_MEMORY, MAX_DEFAULT_MEMORY),
        }
    }

    /// The limits in force in this process.
    pub fn current() -> Self {
        match MAX_MEMORY.load(Ordering::Relaxed) {
            0 => Self::from_machine(),
            m => Limits { max_memory: m },
        }
    }

    /// Makes `self` the limits in force in this process (call before building elements).
    pub fn set(self) {
        MAX_MEMORY.store(self.max_memory.max(1), Ordering::Relaxed);
    }

    /// The largest frame allowed, in bytes.
    pub fn max_frame_bytes(&self) -> u64 {
        self.max_memory / FRAMES_PER_BUDGET
    }

    /// Refuses a frame of `width` x `height` (RGBA, 4 bytes a pixel) that `who` (an element name,
    /// with what said so: "y4msrc: header of 'in.y4m'") would make, before anything is allocated.
    pub fn check_frame(&self, who: &str, width: u32, height: u32) -> Result<()> {
        if width == 0 || height == 0 || width > MAX_DIMENSION || height > MAX_DIMENSION {
            return Err(Error::TooLarge {
                what: format!("{who}: a frame of {width}x{height}"),
                asked: u64::from(width) * u64::from(height) * 4,
                limit: u64::from(MAX_DIMENSION) * u64::from(MAX_DIMENSION) * 4,
                hint: format!("each side must be 1..={MAX_DIMENSION} pixels"),
            });
        }
        let bytes = frame_bytes(width, height);
        if bytes > self.max_frame_bytes() {
            return Err(Error::TooLarge {
                what: format!("{who}: a frame of {width}x{height}"),
                asked: bytes,
                limit: self.max_frame_bytes(),
                hint: format!(
                    "one frame may take 1/{FRAMES_PER_BUDGET} of --max-memory ({}); raise it with --max-memory",
                    human_bytes(self.max_memory)
                ),
            });
        }
        Ok(())
    }

    /// Refuses a total of `bytes` that `what` would hold at most ("frame pools: 3 pools, 40
    /// frames"), before anything is allocated.
    pub fn check_total(&self, what: &str, bytes: u64) -> Result<()> {
        if bytes > self.max_memory {
            return Err(Error::TooLarge {
                what: what.to_string(),
                asked: bytes,
                limit: self.max_memory,
                hint: "raise it with --max-memory, or lower --in-flight / --threads".into(),
            });
        }
        Ok(())
    }
}

/// Bytes of one RGBA frame.
pub fn frame_bytes(width: u32, height: u32) -> u64 {
    u64::from(width) * u64::from(height) * 4
}

/// `1.5 GiB`, `300 MiB`, `12 KiB`, `17 B`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if b >= size {
            let x = b as f64 / size as f64;
            return if x >= 100.0 {
                format!("{x:.0} {unit}")
            } else {
                format!("{x:.1} {unit}")
            };
        }
    }
    format!("{b} B")
}

/// Parses a size: `512M`, `4G`, `4GiB`, `1.5g`, `1073741824` (bytes).
pub fn parse_bytes(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let x: f64 = num
        .parse()
        .map_err(|_| format!("'{text}' is not a size (e.g. 512M, 4G)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown size unit '{other}' in '{text}' (use K, M, G)"
            ))
        }
    };
    let bytes = x * mult as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("size '{text}' is out of range"));
    }
    Ok(bytes as u64)
}

/// Physical memory from `/proc/meminfo` (`MemTotal`), in bytes.
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_over_a_side_limit_is_refused_with_what_and_how() {
        let l = Limits {
            max_memory: 4 << 30,
        };
        let e = l.check_frame("y4msrc", 16385, 16).unwrap_err().to_string();
        assert!(e.contains("16385x16"), "{e}");
        assert!(e.contains("16384"), "{e}");
    }

    #[test]
    fn a_frame_over_its_share_of_the_budget_is_refused() {
        let l = Limits {
            max_memory: 4 << 30,
        };
        // 16384x16384 RGBA = 1 GiB > 4 GiB / 8.
        let e = l
            .check_frame("y4msrc", 16384, 16384)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1.0 GiB"), "{e}");
        assert!(e.contains("512 MiB"), "{e}");
        assert!(e.contains("--max-memory"), "{e}");
        assert!(l.check_frame("y4msrc", 3840, 2160).is_ok());
    }

    #[test]
    fn totals_are_checked_against_the_budget() {
        let l = Limits { max_memory: 1000 };
        assert!(l.check_total("pools", 1000).is_ok());
        let e = l.check_total("pools", 1001).unwrap_err().to_string();
        assert!(e.contains("pools"), "{e}");
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("4G"), Ok(4 << 30));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert!(parse_bytes("1.abc").is_err());
        assert!(parse_bytes("-5G").is_err());
        assert!(parse_bytes("1e400").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }

    #[test]
    fn the_machine_default_is_clamped() {
        let l = Limits::from_machine();
        assert!((MIN_DEFAULT_MEMORY..=MAX_DEFAULT_MEMORY).contains(&l.max_memory));
    }
}
