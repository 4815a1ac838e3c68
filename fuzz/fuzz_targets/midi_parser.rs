//! Feeds arbitrary bytes, as a raw MIDI stream (a `--midi /dev/snd/midiC1D0` device or FIFO),
//! to `framepipe_midi::Parser` and the MIDI surface; the properties checked are in
//! `crates/framepipe-midi/tests/properties/mod.rs`, shared with the seeded test
//! `random_midi.rs`. The parser's state is a few bytes: no input may make it allocate.
//!
//! Issue #21: after the input, taken as garbage, a whole message (and one more with its
//! running status, real-time bytes among them) must be parsed: the parser resynchronises on a
//! status byte whatever came before (`properties::check_resync`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/framepipe-midi/tests/properties/mod.rs"]
mod properties;

fuzz_target!(|data: &[u8]| {
    let _ = properties::check_stream(data);
    properties::check_resync(data);
});
