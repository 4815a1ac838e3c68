//! The quick, seeded version of the `midi_parser` fuzz target (`fuzz/fuzz_targets/midi_parser.rs`,
//! run for millions of inputs by `scripts/fuzz`): MIDI streams built from real messages
//! (CCs of the mapped controls, 14-bit pairs, notes, running status, real-time bytes, SysEx),
//! cut and mixed with random bytes, each checked for the same properties as the target.

mod properties;

/// Fragments of real MIDI streams.
const FRAGMENTS: &[&[u8]] = &[
    &[0xB0, 7, 0],
    &[0xB0, 7, 127],
    &[7, 64],
    &[0xB0, 1, 0x20, 0xB0, 33, 0x10],
    &[1, 127, 33, 127],
    &[0xB0, 16, 1],
    &[16, 127],
    &[0xB0, 17, 100],
    &[0xB0, 64, 127, 64, 0],
    &[0x90, 36, 100],
    &[0x90, 37, 1, 37, 0],
    &[0x80, 38, 0, 0x90, 38, 64],
    &[0xF8],
    &[0xFE, 0xFA, 0xFC],
    &[0xF0, 0x7E, 0x7F, 0x06, 0x01],
    &[0xF7],
    &[0xC0, 5],
    &[0xE0, 0, 64],
    &[0xF3, 1],
    &[0xF4],
    &[0x55],
];

#[test]
fn random_midi_streams_keep_the_fuzz_properties() {
    let mut x: u64 = 0xD1B5_4A32_D192_ED03;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut posted = 0;
    for _ in 0..3_000 {
        let mut data = Vec::new();
        for _ in 0..1 + next(40) {
            if next(8) == 0 {
                data.push(next(256) as u8);
            } else {
                let f = FRAGMENTS[next(FRAGMENTS.len() as u64) as usize];
                // Sometimes only a prefix: a cut-off message.
                let len = if next(6) == 0 {
                    next(f.len() as u64 + 1) as usize
                } else {
                    f.len()
                };
                data.extend_from_slice(&f[..len]);
            }
        }
        posted += properties::check_stream(&data);
        properties::check_resync(&data);
    }
    // The streams do drive the mappings, not only the parser.
    assert!(posted > 3_000, "{posted}");
}
