//! Found while fuzzing the parsers (docs/RELIABILITY.md): a stream header's frame rate of one
//! frame in 136 years (`1/4294967295`) was accepted, and the runtime's stall timeout (five
//! periods) overflowed on it. Rates slower than one frame a day are refused, as everywhere else a
//! rate enters.

use framepipe_core::Rational;
use framepipe_net::wire::{StreamHeader, WireFormat, DEFAULT_MAX_FRAME_BYTES};

fn header(rate: Rational) -> StreamHeader {
    StreamHeader {
        width: 64,
        height: 48,
        format: WireFormat::Rgb24,
        checksum: true,
        rate,
        link_index: 0,
        link_count: 1,
        stream_id: 1,
        first_seq: 0,
    }
}

#[test]
fn a_stream_header_rate_slower_than_one_frame_a_day_is_refused() {
    for rate in [
        Rational::new(1, u32::MAX),
        Rational::new(1, 86_401),
        Rational::new(0, 1),
        Rational::new(1, 0),
    ] {
        let e = StreamHeader::decode(&header(rate).encode(), DEFAULT_MAX_FRAME_BYTES)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least one frame a day"), "{rate}: {e}");
        assert!(e.contains(&rate.to_string()), "{rate}: {e}");
    }
    let ok = header(Rational::new(1, 86_400));
    assert_eq!(
        StreamHeader::decode(&ok.encode(), DEFAULT_MAX_FRAME_BYTES).unwrap(),
        ok
    );
}
