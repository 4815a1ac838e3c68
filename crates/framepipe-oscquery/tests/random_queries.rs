//! The quick, seeded version of the `oscquery_query` fuzz target (`fuzz/fuzz_targets/
//! oscquery_query.rs`, run for millions of inputs by `scripts/fuzz`): request targets built
//! from the namespace's paths, attributes, %-escapes and junk, some mutated byte by byte, each
//! checked for the same properties as the target.

mod properties;

use framepipe_testkit::fuzz::Inputs;

const FRAGMENTS: &[&str] = &[
    "/",
    "/framepipe",
    "/framepipe/s",
    "/framepipe/s/value",
    "/framepipe/s/bypass",
    "/framepipe/s/color",
    "/framepipe/stamp%232",
    "/framepipe/pause",
    "/framepipe/tempo",
    "%",
    "%2",
    "%ff",
    "%e9",
    "%2F",
    "?",
    "?VALUE",
    "?TYPE",
    "?RANGE",
    "?ACCESS",
    "?CONTENTS",
    "?FULL_PATH",
    "?DESCRIPTION",
    "?HOST_INFO",
    "?BOGUS",
    "&",
    "=",
    "//",
    "..",
    "é",
];

#[test]
fn random_queries_are_answered_with_documented_statuses_and_short_texts() {
    let (model, values) = properties::show();
    let mut inputs = Inputs::new(0x05c_0e21, FRAGMENTS, &["", "", "/"], 6);
    let mut seen = std::collections::HashMap::new();
    for _ in 0..20_000 {
        *seen
            .entry(properties::check(&inputs.mutated_text(), &model, &values))
            .or_insert(0) += 1;
    }
    for status in [200, 204, 400, 404] {
        assert!(
            seen.get(&status).copied().unwrap_or(0) >= 10,
            "{status}: {seen:?}"
        );
    }
}
