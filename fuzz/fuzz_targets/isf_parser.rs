//! Feeds arbitrary text to the ISF reader, `framepipe_isf::Shader::parse`, and assembles what
//! it accepts (`Shader::assemble`, with the first NUL-separated part as the `.fs` file and the
//! rest, if any, as its `.vs`): the JSON header, every input type, passes and their size
//! expressions, ISF 1.0's keys, and the ISF functions in the GLSL.
//!
//! Checked beyond "no panic" (a stack overflow from deep nesting is a crash too), by
//! `properties::check_isf`, shared with the seeded test (`tests/random_isf.rs`):
//! * an accepted shader's role agrees with its frame inputs, its buffers' sizes stay within
//!   1..=MAX_BUFFER_SIDE for any render size and input values;
//! * assembly succeeds or names a line of the file; an assembled shader declares every input and
//!   maps every generated line to the assembly's own or a line of the file;
//! * nothing is allocated in proportion to a number in the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/framepipe-isf/tests/properties/mod.rs"]
mod properties;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let mut parts = text.splitn(2, '\0');
        let fs = parts.next().unwrap_or("");
        let _ = properties::check_isf(fs, parts.next());
    }
});
