//! Feeds arbitrary bytes, as one line of the stdin control protocol, to
//! `framepipe_control::Command::parse_line`.
//!
//! Checked beyond "no panic":
//! * every accepted command prints (`Display`) as a line that parses back to the same command,
//!   and that printed line is canonical (printing the re-parsed command gives the same text);
//! * an accepted oscillator gives a finite value, inside its own `min..=max`, at any oscillator
//!   time, including both ends of `i64` (a NaN or an infinity here reached a frei0r plugin as a
//!   parameter and crashed it).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/framepipe-control/tests/properties/mod.rs"]
mod properties;

fuzz_target!(|data: &[u8]| {
    if let Ok(line) = std::str::from_utf8(data) {
        let _ = properties::check(line);
    }
});
