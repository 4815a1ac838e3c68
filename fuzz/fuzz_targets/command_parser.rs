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

use framepipe_control::{Command, Oscillator};
use libfuzzer_sys::fuzz_target;

/// Oscillator times sampled: start, a few ordinary ones, both extremes of `i64` (a long run at
/// high speed, or a negative master speed).
const TIMES_NS: [i64; 7] = [
    0,
    1,
    16_666_667,
    1_000_000_000 * 3600,
    -1_000_000_000,
    i64::MAX,
    i64::MIN,
];

fn check_osc(line: &str, osc: &Oscillator) {
    let (lo, hi) = (osc.min.min(osc.max), osc.min.max(osc.max));
    for t in TIMES_NS {
        let v = osc.value_at(t);
        assert!(
            v.is_finite() && v >= lo && v <= hi,
            "{line:?}: {osc} gives {v} at t={t} ns, outside {lo}..={hi}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(Some(cmd)) = Command::parse_line(line) else {
        return;
    };
    let printed = cmd.to_string();
    let again = Command::parse(&printed)
        .unwrap_or_else(|e| panic!("{line:?} -> {printed:?} does not parse: {e}"));
    assert_eq!(again, cmd, "{line:?} -> {printed:?}");
    assert_eq!(
        again.to_string(),
        printed,
        "{line:?}: printing is not canonical"
    );
    if let Command::Osc { osc, .. } = &cmd {
        check_osc(line, osc);
    }
});
