//! Feeds arbitrary bytes, as one message from a web page, to `framepipe_web::admit_message`:
//! the server's path from a WebSocket text to a posted command (JSON, the command line, the
//! page's least-privilege rule; issue #21).
//!
//! Checked beyond "no panic" (crates/framepipe-web/tests/properties): an admitted command is
//! one a page may send (values, transport, the preview switch to a node of the graph, `load`
//! of a regular file directly in the scenes folder); every refusal is one short line.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/framepipe-web/tests/properties/mod.rs"]
mod properties;

/// A scenes folder with `two.toml` and a folder `sub` (made once, in the temporary folder).
fn scenes() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("fp-fuzz-scenes-{}", std::process::id()));
        let _ = std::fs::create_dir_all(dir.join("sub"));
        std::fs::write(dir.join("two.toml"), "pipeline = \"testsrc ! nullsink\"\n").unwrap();
        dir.canonicalize().unwrap()
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = std::str::from_utf8(data) {
        let graph = properties::graph();
        let _ = properties::check(msg, None, &graph);
        let _ = properties::check(msg, Some(scenes()), &graph);
    }
});
