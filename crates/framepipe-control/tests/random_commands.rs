//! The quick, seeded version of the `command_parser` fuzz target (`fuzz/fuzz_targets/
//! command_parser.rs`, run for millions of inputs by `scripts/fuzz`): command lines built from
//! protocol fragments, numbers at and past their limits and junk, some of them mutated byte by
//! byte, each checked for the same properties as the target.

mod properties;

use framepipe_control::Command;
use framepipe_testkit::fuzz::Inputs;
use properties::check;

const FRAGMENTS: &[&str] = &[
    "set",
    "osc",
    "unosc",
    "bypass",
    "speed",
    "pause",
    "step",
    "resume",
    "stop",
    "tempo",
    "tap",
    "SeT",
    "glow.blur",
    "frei0r-glow.blur",
    "1.x",
    "a.b.c",
    "007.p",
    ".",
    "..",
    "0",
    "on",
    "off",
    "sine",
    "pulse",
    "random-ramp",
    "ramp_up",
    "~sine",
    "~square:2hz",
    "~square:4beats",
    "~sine:0.5beat:0..1",
    "~triangle:3/beat",
    "~pulse:0.1hz:width=0.9",
    "~random:seed=3:-5..5",
    "~sine:-1e308..1e308",
    "~triangle:1e300hz",
    "~sine:1e-300s",
    "~ramp-down:1000hz:phase=1",
    "~",
    ":",
    "1hz",
    "2s",
    "0..1",
    "-1e9..1e9",
    "freq=",
    "freq=1e6",
    "freq=1000",
    "freq=1e308",
    "f=0",
    "min=-3",
    "min=-1e308",
    "max=1e308",
    "max=1e9",
    "phase=0.5",
    "phase=1",
    "width=2",
    "pw=0",
    "seed=18446744073709551615",
    "seed=18446744073709551616",
    "seed=-1",
    "1e309",
    "1e6",
    "100",
    "-100",
    "+3",
    "nan",
    "inf",
    "-0",
    "#",
    "ü",
    "日本",
    "=",
    "3",
    "4294967295",
    "4294967296",
    "18446744073709551616",
    "-7",
];

const SEPARATORS: &[&str] = &[" ", " ", "  ", "\t", "", ":", ".", "=", "\u{a0}"];

#[test]
fn random_command_lines_never_panic_and_accepted_ones_print_back_the_same() {
    let mut inputs = Inputs::new(0x7e57_c0de, FRAGMENTS, SEPARATORS, 4);
    let mut accepted = 0;
    let mut kinds = std::collections::HashSet::new();
    for _ in 0..20_000 {
        // Mostly a command word first, so that the arguments' parsers are reached.
        let line = match inputs.rng().below(4) {
            0 => inputs.mutated_text(),
            _ => {
                let word = inputs.rng().pick(&FRAGMENTS[..11]);
                format!("{word} {}", inputs.mutated_text())
            }
        };
        if let Some(cmd) = check(&line) {
            accepted += 1;
            kinds.insert(std::mem::discriminant(&cmd));
        }
    }
    eprintln!("{accepted} of 20000 lines accepted, {} kinds", kinds.len());
    // The generator reaches valid commands of every kind, not only junk.
    assert!(accepted > 300, "{accepted}");
    assert_eq!(
        kinds.len(),
        11,
        "set, osc, unosc, bypass, speed, pause, step, resume, stop, tempo, tap"
    );
}

/// Oscillator fields, ordinary and at or past their limits.
const OSC_FIELDS: &[&str] = &[
    "freq=0.5",
    "freq=0",
    "freq=1000",
    "freq=1000.001",
    "freq=1e300",
    "f=2s",
    "freq=4beats",
    "freq=0beat",
    "freq=2000/beat",
    "freq=1e-300s",
    "min=-3",
    "min=-1e9",
    "min=-1e308",
    "max=1e9",
    "max=1e308",
    "max=inf",
    "phase=0.25",
    "phase=1",
    "phase=1.5",
    "width=0",
    "width=0.9",
    "pw=2",
    "seed=7",
    "seed=18446744073709551615",
    "seed=-1",
];

/// Compact-form fields (after `~SHAPE`).
const COMPACT_FIELDS: &[&str] = &[
    "0.5hz",
    "1000hz",
    "1001hz",
    "1e300hz",
    "2s",
    "1e-300s",
    "1beat",
    "16beats",
    "0.001beats",
    "0.5/beat",
    "0..1",
    "-1e9..1e9",
    "-1e308..1e308",
    "1..0",
    "phase=1",
    "width=0.1",
    "seed=3",
];

/// Issue #7: an oscillator with an absurd frequency or range once gave NaN, and a frei0r
/// plugin crashed on it.
#[test]
fn every_accepted_oscillator_is_finite_and_in_its_range() {
    let shapes = [
        "sine",
        "triangle",
        "ramp-up",
        "ramp-down",
        "square",
        "pulse",
        "random",
        "random-ramp",
    ];
    let mut inputs = Inputs::new(0x05c1_11a7, FRAGMENTS, SEPARATORS, 2);
    let mut oscillators = 0;
    for _ in 0..20_000 {
        let r = inputs.rng();
        let shape = r.pick(&shapes);
        let n = r.below(4);
        // `osc E.P SHAPE k=v ...` or `set E.P ~SHAPE:field:...`.
        let mut line = if r.one_in(2) {
            let mut l = format!("osc 1.x {shape}");
            for _ in 0..n {
                l.push(' ');
                l.push_str(r.pick(OSC_FIELDS));
            }
            l
        } else {
            let mut l = format!("set glow.blur ~{shape}");
            for _ in 0..n {
                l.push(':');
                l.push_str(r.pick(COMPACT_FIELDS));
            }
            l
        };
        if inputs.rng().one_in(4) {
            line.push(' ');
            line.push_str(&inputs.mutated_text());
        }
        if let Some(Command::Osc { .. }) = check(&line) {
            oscillators += 1;
        }
    }
    eprintln!("{oscillators} of 20000 oscillators accepted");
    assert!(oscillators > 2_000, "{oscillators}");
}

/// Found by the `command_parser` fuzz target in 15 s (383,270 inputs): an oscillator with a
/// seed (or a width) its shape does not use printed without it, so the printed command read back
/// as a different one (`seed: 89` became `seed: 0`).
#[test]
fn an_oscillator_prints_every_field_that_differs_from_the_default() {
    for line in [
        "osc 2.blur ~pulse:0.25hz:seed=089",
        "osc 1.x ramp_up seed=1844674407",
        "osc 1.x sine width=0.25",
    ] {
        let cmd = check(line).unwrap();
        let again = Command::parse(&cmd.to_string()).unwrap();
        assert_eq!(again, cmd, "{line}");
    }
}

/// The oscillators of issue #7's report and their siblings: absurd frequencies and ranges are
/// refused, never NaN.
#[test]
fn absurd_oscillators_are_refused() {
    for line in [
        "set a.b ~sine:-1e308..1e308",
        "osc 1.x sine freq=1e300",
        "osc 1.x ~sine:1e-300s",
        "osc 1.x sine max=inf",
        "speed 1e6",
    ] {
        assert_eq!(check(line), None, "{line}");
    }
}
