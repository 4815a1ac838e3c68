//! Feeds arbitrary bytes, as an HTTP request target (`PATH?QUERY`), to
//! `framepipe_oscquery::answer`: the OSCQuery server's %-decoding, path resolution and
//! attribute answers on a show with a property of each kind.
//!
//! Checked beyond "no panic" (crates/framepipe-oscquery/tests/properties): only the documented
//! statuses; a 200 carries JSON, a refusal one short line (quoted values cut); what follows the
//! attribute does not change the answer.
#![no_main]

use std::sync::OnceLock;

use framepipe_oscquery::{ShowModel, Values};
use libfuzzer_sys::fuzz_target;

#[path = "../../crates/framepipe-oscquery/tests/properties/mod.rs"]
mod properties;

fn show() -> &'static (ShowModel, Values) {
    static SHOW: OnceLock<(ShowModel, Values)> = OnceLock::new();
    SHOW.get_or_init(properties::show)
}

fuzz_target!(|data: &[u8]| {
    if let Ok(target) = std::str::from_utf8(data) {
        let (model, values) = show();
        let _ = properties::check(target, model, values);
    }
});
