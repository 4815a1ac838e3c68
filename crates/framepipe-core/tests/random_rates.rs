//! Frame rates from text (`--fps`, `rate=` properties, a project's `fps`), the seeded
//! randomized way the parsers' fuzz targets work: `Rational::parse` never panics, and every rate
//! it accepts is usable and prints back as itself.

use framepipe_core::info::MAX_PERIOD_NS;
use framepipe_core::Rational;
use framepipe_testkit::fuzz::Inputs;

const FRAGMENTS: &[&str] = &[
    "30",
    "25",
    "1",
    "0",
    "29",
    "97",
    "1001",
    "30000",
    "86400",
    "86401",
    "4294967295",
    "4294967296",
    "00000",
    "999999",
    "1234567",
    "/",
    ".",
    " ",
    "-",
    "+",
    "é",
    "日",
    "e3",
    "abc",
];

/// The properties for one text; returns the rate accepted, if any.
fn check(text: &str) -> Option<Rational> {
    let r = Rational::parse(text)?;
    assert!(r.num > 0 && r.den > 0, "{text:?} -> {r}");
    assert!(
        r.period_ns() <= MAX_PERIOD_NS,
        "{text:?} -> {r}: slower than a frame a day"
    );
    assert!(r.period_ns().checked_mul(5).is_some(), "{text:?} -> {r}");
    assert_eq!(Rational::parse(&r.to_string()), Some(r), "{text:?} -> {r}");
    Some(r)
}

#[test]
fn random_rate_texts_never_panic_and_accepted_ones_are_usable() {
    let mut inputs = Inputs::new(0x00f9_5f95, FRAGMENTS, &[""], 5);
    let mut accepted = 0;
    for _ in 0..20_000 {
        accepted += check(&inputs.mutated_text()).is_some() as u32;
    }
    eprintln!("{accepted} of 20000 accepted");
    assert!(accepted > 2_000, "{accepted}");
}

/// A fraction of more than six digits ending in a non-ASCII character was cut inside the
/// character (`--fps 1.00000é` panicked).
#[test]
fn a_rate_with_a_non_ascii_fraction_is_refused_not_a_panic() {
    for text in ["1.00000é", "29.9700日", "1.é", "2.0000000ü"] {
        assert_eq!(check(text), None, "{text}");
    }
    assert_eq!(check("29.97"), Some(Rational::new(2997, 100)));
}

/// A rate of one frame in 136 years (`1/4294967295`) overflowed the runtime's stall timeout
/// (five periods) and panicked it; rates slower than one frame a day are refused.
#[test]
fn a_rate_slower_than_one_frame_a_day_is_refused() {
    for text in ["1/4294967295", "1/86401", "0.000001", "0/1", "1/0"] {
        assert_eq!(check(text), None, "{text}");
    }
    assert_eq!(check("1/86400"), Some(Rational::new(1, 86_400)));
    assert_eq!(check("4294967295"), Some(Rational::new(u32::MAX, 1)));
}
