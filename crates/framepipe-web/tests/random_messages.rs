//! The quick, seeded version of the `web_message` fuzz target (`fuzz/fuzz_targets/
//! web_message.rs`, run for millions of inputs by `scripts/fuzz`): page messages built from
//! JSON and protocol fragments (edits, paths, scene names), some mutated byte by byte, each
//! checked for the same properties as the target (issue #21: nothing but what a page may send
//! is admitted).

mod properties;

use framepipe_testkit::fuzz::Inputs;

/// Command-line fragments; the message is `{"id": N, "cmd": LINE}`, one in four of them
/// mutated byte by byte after (so the JSON breaks too).
const FRAGMENTS: &[&str] = &[
    "set s.value 1",
    "set s.text /dev/zero",
    "set stamp.text x",
    "set 1.text x",
    "text",
    "osc s.x ~sine:1hz:0..1",
    "batch set s.x 1; pause",
    "pause",
    "stop",
    "tap",
    "step 2",
    "replace src y4msrc location=/etc/shadow",
    "replace src tcpsrc host=127.0.0.1:22",
    "add invert after s",
    "remove s",
    "link",
    "link web-monitor s",
    "link web-monitor src",
    "load two.toml",
    "load two.toml fade=1s",
    "link web-monitor",
    "link out",
    "web-monitor.sink_1",
    "web-monitor",
    "s",
    "src",
    "nosuch",
    "load",
    "two.toml",
    "notes.txt",
    "fade=1s",
    "fade=99999h",
    "../two.toml",
    "/etc/passwd",
    "sub",
    ".",
    "..",
    "\"two.toml\"",
    "save /tmp/x",
    "learn s.x",
    "midi",
    "\u{0}",
    "é",
];

#[test]
fn random_page_messages_admit_only_what_a_page_may_send() {
    let dir = framepipe_testkit::tmpdir("fp-web-random");
    std::fs::write(dir.join("two.toml"), "pipeline = \"testsrc ! nullsink\"\n").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a project\n").unwrap();
    let scenes = dir.path().canonicalize().unwrap();
    let graph = properties::graph();
    let mut inputs = Inputs::new(0x21_0eb, FRAGMENTS, &[" ", " ", "", "/", "; "], 4);
    let mut seen = std::collections::HashMap::new();
    for i in 0..20_000u64 {
        let line = inputs.text();
        let mut msg = serde_json::json!({"id": i, "cmd": line.trim_end()})
            .to_string()
            .into_bytes();
        if inputs.rng().one_in(4) {
            for _ in 0..1 + inputs.rng().below(3) {
                inputs.mutate(&mut msg);
            }
        }
        let msg = String::from_utf8_lossy(&msg);
        let scenes = (i % 2 == 0).then_some(scenes.as_path());
        *seen
            .entry(properties::check(&msg, scenes, &graph))
            .or_insert(0) += 1;
    }
    // The generator reaches every outcome, admitted edits included.
    for kind in ["value", "link", "load", "bad", "forbidden"] {
        assert!(
            seen.get(kind).copied().unwrap_or(0) >= 10,
            "{kind}: {seen:?}"
        );
    }
}
