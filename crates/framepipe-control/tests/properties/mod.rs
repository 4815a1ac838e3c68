//! The properties the `command_parser` fuzz target checks, shared by that target
//! (`fuzz/fuzz_targets/command_parser.rs` includes this file) and the quick seeded test
//! (`random_commands.rs`), so that both check the same thing.

use framepipe_control::{Command, Oscillator};

/// Oscillator times: start, ordinary ones, long runs, both ends of `i64`.
pub const TIMES_NS: [i64; 7] = [
    0,
    1,
    16_666_667,
    3_600_000_000_000,
    -1_000_000_000,
    i64::MAX,
    i64::MIN,
];

/// The fuzz target's properties: the printed command parses back to itself and prints the same;
/// an oscillator stays finite and within its range. Returns the command accepted, if any.
pub fn check(line: &str) -> Option<Command> {
    let cmd = Command::parse_line(line).ok()??;
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
    Some(cmd)
}

pub fn check_osc(line: &str, osc: &Oscillator) {
    let (lo, hi) = (osc.min.min(osc.max), osc.min.max(osc.max));
    for t in TIMES_NS {
        let v = osc.value_at(t);
        assert!(
            v.is_finite() && v >= lo && v <= hi,
            "{line:?}: {osc} gives {v} at t={t} ns, outside {lo}..={hi}"
        );
    }
}
