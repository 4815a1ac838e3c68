//! Packed pixel formats at the pipeline's edges: `rgba`, `bgra` and `rgb24`, and their conversion
//! to and from the engine's RGBA. The loops work on whole pixels and need no scratch memory.

/// A packed 8-bit pixel format of raw files and pipes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RawFormat {
    /// R, G, B, A: the engine's own format.
    Rgba,
    /// B, G, R, A.
    Bgra,
    /// R, G, B (alpha is dropped on output and opaque on input).
    Rgb24,
}

impl RawFormat {
    /// The property words, in order.
    pub const NAMES: [&'static str; 3] = ["rgba", "bgra", "rgb24"];

    /// Parses `rgba`, `bgra` or `rgb24`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "rgba" => Some(RawFormat::Rgba),
            "bgra" => Some(RawFormat::Bgra),
            "rgb24" => Some(RawFormat::Rgb24),
            _ => None,
        }
    }

    /// Bytes per pixel.
    pub fn bytes_per_pixel(self) -> usize {
        match self {
            RawFormat::Rgba | RawFormat::Bgra => 4,
            RawFormat::Rgb24 => 3,
        }
    }

    /// Bytes in one `width` x `height` frame.
    pub fn frame_bytes(self, width: u32, height: u32) -> usize {
        width as usize * height as usize * self.bytes_per_pixel()
    }

    /// Converts `src` (this format) into RGBA `dst`. Both hold the same number of pixels.
    pub fn to_rgba(self, src: &[u8], dst: &mut [u8]) {
        match self {
            RawFormat::Rgba => dst.copy_from_slice(src),
            RawFormat::Bgra => {
                for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
                    d.copy_from_slice(&[s[2], s[1], s[0], s[3]]);
                }
            }
            RawFormat::Rgb24 => {
                for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(3)) {
                    d.copy_from_slice(&[s[0], s[1], s[2], 255]);
                }
            }
        }
    }

    /// Converts RGBA `src` into `dst` in this format. Both hold the same number of pixels.
    pub fn from_rgba(self, src: &[u8], dst: &mut [u8]) {
        match self {
            RawFormat::Rgba => dst.copy_from_slice(src),
            RawFormat::Bgra => {
                for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
                    d.copy_from_slice(&[s[2], s[1], s[0], s[3]]);
                }
            }
            RawFormat::Rgb24 => {
                for (d, s) in dst.chunks_exact_mut(3).zip(src.chunks_exact(4)) {
                    d.copy_from_slice(&s[..3]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        let rgba: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
        for f in [RawFormat::Rgba, RawFormat::Bgra] {
            let mut packed = vec![0; f.frame_bytes(4, 4)];
            f.from_rgba(&rgba, &mut packed);
            let mut back = vec![0; 64];
            f.to_rgba(&packed, &mut back);
            assert_eq!(back, rgba, "{f:?}");
        }
        let mut packed = vec![0; 48];
        RawFormat::Rgb24.from_rgba(&rgba, &mut packed);
        assert_eq!(&packed[3..6], &rgba[4..7]);
        let mut back = vec![0; 64];
        RawFormat::Rgb24.to_rgba(&packed, &mut back);
        assert_eq!(&back[4..8], &[rgba[4], rgba[5], rgba[6], 255]);
        let mut bgra = vec![0; 64];
        RawFormat::Bgra.from_rgba(&rgba, &mut bgra);
        assert_eq!(&bgra[..4], &[rgba[2], rgba[1], rgba[0], rgba[3]]);
    }
}
