//! Feeds arbitrary bytes to the wire decoder that `tcpsrc` uses: stream header, then frames.
//! It must never panic, never size a buffer from an unvalidated length, and never accept a rate
//! the runtime cannot pace (slower than one frame a day).
#![no_main]

use framepipe_net::wire::WireReader;
use libfuzzer_sys::fuzz_target;

/// Small, so that accepted headers bound the payload buffer below (as max-frame-bytes does).
const LIMIT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = WireReader::open(data, "fuzz", LIMIT) else {
        return;
    };
    let h = *reader.header();
    assert!(h.frame_bytes() <= LIMIT);
    assert!(h.rate.is_usable(), "rate {}", h.rate);
    let mut payload = vec![0u8; h.stripe_bytes()];
    while let Ok(Some(fh)) = reader.read_frame(&mut payload) {
        assert_eq!(fh.payload_len as usize, payload.len());
    }
});
