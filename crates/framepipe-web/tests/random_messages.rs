//! The quick, seeded version of the `web_message` fuzz target (`fuzz/fuzz_targets/
//! web_message.rs`, run for millions of inputs by `scripts/fuzz`): page messages built from
//! JSON and protocol fragments (edits, paths, scene names), some mutated byte by byte, each
//! checked for the same properties as the target (issue #21: nothing but what a page may send
//! is admitted).

mod properties;

use framepipe_testkit::fuzz::Inputs;

const FRAGMENTS: &[&str] = &[
    "{\"id\":1,\"cmd\":\"",
    "{\"cmd\":\"",
    "\"}",
    "\",\"id\":18446744073709551615}",
    "set s.value 1",
    "osc s.x ~sine:1hz:0..1",
    "batch set s.x 1; pause",
    "pause",
    "stop",
    "tap",
    "replace src y4msrc location=/etc/shadow",
    "replace src tcpsrc host=127.0.0.1:22",
    "add invert after s",
    "remove s",
    "link web-monitor s",
    "link web-monitor web-monitor",
    "link web-monitor nosuch",
    "link out s",
    "link web-monitor.sink_1 s",
    "load two.toml",
    "load two.toml fade=1s",
    "load ../two.toml",
    "load /etc/passwd",
    "load sub",
    "load .",
    "load \\\"two.toml\\\"",
    "save /tmp/x",
    "learn s.x",
    "midi",
    "\\u0000",
    "\\n",
    "é",
    "{",
    "[]",
    "null",
];

#[test]
fn random_page_messages_admit_only_what_a_page_may_send() {
    let dir = framepipe_testkit::tmpdir("fp-web-random");
    std::fs::write(dir.join("two.toml"), "pipeline = \"testsrc ! nullsink\"\n").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let scenes = dir.path().canonicalize().unwrap();
    let graph = properties::graph();
    let mut inputs = Inputs::new(0x21_0eb, FRAGMENTS, &["", " ", "; ", "\""], 5);
    for i in 0..20_000 {
        let msg = inputs.mutated_text();
        let scenes = (i % 2 == 0).then_some(scenes.as_path());
        properties::check(&msg, scenes, &graph);
    }
}
