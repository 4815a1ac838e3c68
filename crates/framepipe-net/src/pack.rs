//! Packing engine RGBA rows into the wire format and back, into buffers allocated once.
//!
//! RGBA <-> RGB24 uses the `yuv` crate's SIMD shuffles (SSE/AVX2/NEON chosen at run time).
//! RGB565 uses plain loops over `chunks_exact`, which LLVM vectorises (no lane crosses a pixel).
//! The scalar reference versions live in the tests and are checked against these.

use crate::wire::WireFormat;

/// Packs `rows` rows of `width` RGBA pixels from `src` into `dst` in `format`.
/// `src` is `width*rows*4` bytes, `dst` is `width*rows*bpp` bytes. For [`WireFormat::Rgba`] this is
/// a copy (the sink avoids calling it and writes the frame's rows directly).
pub fn pack(format: WireFormat, width: u32, rows: u32, src: &[u8], dst: &mut [u8]) {
    debug_assert_eq!(src.len(), width as usize * rows as usize * 4);
    debug_assert_eq!(
        dst.len(),
        width as usize * rows as usize * format.bytes_per_pixel()
    );
    match format {
        WireFormat::Rgba => dst.copy_from_slice(src),
        WireFormat::Rgb24 => {
            // Sizes are checked above and by the caller; an error here is a bug.
            if yuv::rgba_to_rgb(src, width * 4, dst, width * 3, width, rows).is_err() {
                pack_rgb24_scalar(src, dst);
            }
        }
        WireFormat::Rgb565 => {
            for (p, o) in src.chunks_exact(4).zip(dst.chunks_exact_mut(2)) {
                let v =
                    ((p[0] as u16 & 0xf8) << 8) | ((p[1] as u16 & 0xfc) << 3) | (p[2] as u16 >> 3);
                o.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// Restores RGBA (alpha 255) from `rows` rows of `width` pixels of `format` in `src` into `dst`.
pub fn unpack(format: WireFormat, width: u32, rows: u32, src: &[u8], dst: &mut [u8]) {
    debug_assert_eq!(dst.len(), width as usize * rows as usize * 4);
    debug_assert_eq!(
        src.len(),
        width as usize * rows as usize * format.bytes_per_pixel()
    );
    match format {
        WireFormat::Rgba => dst.copy_from_slice(src),
        WireFormat::Rgb24 => {
            if yuv::rgb_to_rgba(src, width * 3, dst, width * 4, width, rows).is_err() {
                unpack_rgb24_scalar(src, dst);
            }
        }
        WireFormat::Rgb565 => {
            for (p, o) in src.chunks_exact(2).zip(dst.chunks_exact_mut(4)) {
                let v = u16::from_le_bytes([p[0], p[1]]);
                let r = (v >> 11) as u8 & 0x1f;
                let g = (v >> 5) as u8 & 0x3f;
                let b = v as u8 & 0x1f;
                o.copy_from_slice(&[
                    (r << 3) | (r >> 2),
                    (g << 2) | (g >> 4),
                    (b << 3) | (b >> 2),
                    255,
                ]);
            }
        }
    }
}

/// Scalar RGBA -> RGB24 (reference and fallback).
pub fn pack_rgb24_scalar(src: &[u8], dst: &mut [u8]) {
    for (p, o) in src.chunks_exact(4).zip(dst.chunks_exact_mut(3)) {
        o.copy_from_slice(&p[..3]);
    }
}

/// Scalar RGB24 -> RGBA with alpha 255 (reference and fallback).
pub fn unpack_rgb24_scalar(src: &[u8], dst: &mut [u8]) {
    for (p, o) in src.chunks_exact(3).zip(dst.chunks_exact_mut(4)) {
        o.copy_from_slice(&[p[0], p[1], p[2], 255]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(n: usize) -> Vec<u8> {
        let mut x = 0x9e37_79b9u32;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    #[test]
    fn rgb24_matches_the_scalar_reference_and_restores_opaque_alpha() {
        // Odd width so that SIMD tails are exercised.
        let (w, h) = (1021u32, 7u32);
        let src = pattern((w * h * 4) as usize);
        let mut packed = vec![0u8; (w * h * 3) as usize];
        let mut reference = packed.clone();
        pack(WireFormat::Rgb24, w, h, &src, &mut packed);
        pack_rgb24_scalar(&src, &mut reference);
        assert_eq!(packed, reference);
        let mut back = vec![0u8; src.len()];
        unpack(WireFormat::Rgb24, w, h, &packed, &mut back);
        for (a, b) in src.chunks_exact(4).zip(back.chunks_exact(4)) {
            assert_eq!(&a[..3], &b[..3]);
            assert_eq!(b[3], 255);
        }
    }

    #[test]
    fn rgb565_keeps_the_high_bits() {
        let (w, h) = (33u32, 3u32);
        let src = pattern((w * h * 4) as usize);
        let mut packed = vec![0u8; (w * h * 2) as usize];
        pack(WireFormat::Rgb565, w, h, &src, &mut packed);
        let mut back = vec![0u8; src.len()];
        unpack(WireFormat::Rgb565, w, h, &packed, &mut back);
        for (a, b) in src.chunks_exact(4).zip(back.chunks_exact(4)) {
            assert_eq!(a[0] & 0xf8, b[0] & 0xf8);
            assert_eq!(a[1] & 0xfc, b[1] & 0xfc);
            assert_eq!(a[2] & 0xf8, b[2] & 0xf8);
            assert_eq!(b[3], 255);
        }
        // Pure white and black survive exactly.
        let mut one = [0u8; 2];
        pack(WireFormat::Rgb565, 1, 1, &[255, 255, 255, 0], &mut one);
        let mut px = [0u8; 4];
        unpack(WireFormat::Rgb565, 1, 1, &one, &mut px);
        assert_eq!(px, [255, 255, 255, 255]);
    }
}
