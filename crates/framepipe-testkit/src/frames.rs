//! Deterministic raw RGBA test frames, for the tests that compare framepipe's output with a
//! peer's (GStreamer's frei0r mixers) on the same input files.

/// `frames` raw RGBA frames of a deterministic pattern: gradients that move with the frame
/// number, xorshift noise seeded by `seed` and the frame, and an alpha channel that varies (so
/// alpha-aware mixers are exercised too). Different seeds give different streams.
pub fn pattern(seed: u32, w: u32, h: u32, frames: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity((w * h * 4 * frames) as usize);
    for k in 0..frames {
        let mut s: u32 = 0x2545_f491 ^ seed.wrapping_mul(0x9e37_79b9) ^ k.wrapping_mul(0x85eb_ca6b);
        for y in 0..h {
            for x in 0..w {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let r = ((x * 255 / w) as u8).wrapping_add((k * 7) as u8) ^ (s & 0x1f) as u8;
                let g =
                    ((y * 255 / h) as u8).wrapping_add((seed * 50) as u8) ^ ((s >> 8) & 0x1f) as u8;
                let b = (((x + y) * 4 + k * 13) as u8).wrapping_mul(seed as u8 | 1);
                let a = if (x / 8 + y / 8 + seed).is_multiple_of(3) {
                    255
                } else {
                    (s >> 24) as u8
                };
                out.extend_from_slice(&[r, g, b, a]);
            }
        }
    }
    out
}
