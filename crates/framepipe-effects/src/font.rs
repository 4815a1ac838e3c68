//! A tiny hand-made 5x7 bitmap font, drawn straight into RGBA frames.
//!
//! Used by [`stamp`](crate::stamp) and by `testsrc`'s frame counter. Glyphs exist for the digits,
//! `A`-`Z` (lower case is drawn as upper case), space and `. - + : / = _ # %`; any other character
//! is drawn as a hollow box so that it cannot go unnoticed. Drawing neither allocates nor locks.

use std::fmt;

/// Width of a glyph in font pixels.
pub const GLYPH_W: u32 = 5;
/// Height of a glyph in font pixels.
pub const GLYPH_H: u32 = 7;
/// Horizontal distance from one character to the next, in font pixels (glyph plus one gap).
pub const ADVANCE: u32 = GLYPH_W + 1;

/// Rows of one glyph, top first; bit 4 is the leftmost pixel.
type Glyph = [u8; 7];

const BOX: Glyph = [0x1f, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1f];

fn glyph(c: char) -> Glyph {
    match c.to_ascii_uppercase() {
        '0' => [0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e],
        '1' => [0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e],
        '2' => [0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f],
        '3' => [0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e],
        '4' => [0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02],
        '5' => [0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e],
        '6' => [0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e],
        '7' => [0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        '8' => [0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e],
        '9' => [0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c],
        'A' => [0x0e, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11],
        'B' => [0x1e, 0x11, 0x11, 0x1e, 0x11, 0x11, 0x1e],
        'C' => [0x0e, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0e],
        'D' => [0x1c, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1c],
        'E' => [0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x1f],
        'F' => [0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x10],
        'G' => [0x0e, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0f],
        'H' => [0x11, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11],
        'I' => [0x0e, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e],
        'J' => [0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0c],
        'K' => [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11],
        'L' => [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1f],
        'M' => [0x11, 0x1b, 0x15, 0x15, 0x11, 0x11, 0x11],
        'N' => [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11],
        'O' => [0x0e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e],
        'P' => [0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10, 0x10],
        'Q' => [0x0e, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0d],
        'R' => [0x1e, 0x11, 0x11, 0x1e, 0x14, 0x12, 0x11],
        'S' => [0x0f, 0x10, 0x10, 0x0e, 0x01, 0x01, 0x1e],
        'T' => [0x1f, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
        'U' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e],
        'V' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x0a, 0x04],
        'W' => [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0a],
        'X' => [0x11, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x11],
        'Y' => [0x11, 0x11, 0x11, 0x0a, 0x04, 0x04, 0x04],
        'Z' => [0x1f, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1f],
        ' ' => [0; 7],
        '.' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c],
        '-' => [0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00],
        '+' => [0x00, 0x04, 0x04, 0x1f, 0x04, 0x04, 0x00],
        ':' => [0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00],
        '/' => [0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00],
        '=' => [0x00, 0x00, 0x1f, 0x00, 0x1f, 0x00, 0x00],
        '_' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1f],
        '#' => [0x0a, 0x0a, 0x1f, 0x0a, 0x1f, 0x0a, 0x0a],
        '%' => [0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03],
        _ => BOX,
    }
}

/// Size in frame pixels of `text` drawn at `scale` (one font pixel = `scale` x `scale` pixels).
pub fn text_size(text: &str, scale: u32) -> (u32, u32) {
    let n = text.chars().count() as u32;
    let w = if n == 0 { 0 } else { n * ADVANCE - 1 };
    (w * scale, GLYPH_H * scale)
}

/// A view of an RGBA8 frame buffer to draw on: rows of `width * 4` bytes.
#[derive(Debug)]
pub struct Canvas<'a> {
    data: &'a mut [u8],
    width: u32,
    height: u32,
}

impl<'a> Canvas<'a> {
    /// A canvas over `data`, which must hold at least `width * height * 4` bytes.
    /// Returns `None` when it does not.
    pub fn new(data: &'a mut [u8], width: u32, height: u32) -> Option<Self> {
        (data.len() >= width as usize * height as usize * 4).then_some(Canvas {
            data,
            width,
            height,
        })
    }

    /// Fills the rectangle at (`x`, `y`) of size `w` x `h`, clipped to the frame.
    pub fn fill_rect(&mut self, x: i64, y: i64, w: u32, h: u32, rgba: [u8; 4]) {
        let x0 = x.clamp(0, self.width as i64) as usize;
        let x1 = (x + w as i64).clamp(0, self.width as i64) as usize;
        let y0 = y.clamp(0, self.height as i64) as usize;
        let y1 = (y + h as i64).clamp(0, self.height as i64) as usize;
        if x0 >= x1 {
            return;
        }
        let stride = self.width as usize * 4;
        for row in y0..y1 {
            let line = &mut self.data[row * stride + x0 * 4..row * stride + x1 * 4];
            for px in line.chunks_exact_mut(4) {
                px.copy_from_slice(&rgba);
            }
        }
    }

    /// Draws `text` with its top-left corner at (`x`, `y`), each font pixel a `scale` x `scale`
    /// block of colour `rgba`. Clipped to the frame; only the glyphs' set pixels are written.
    pub fn draw_text(&mut self, x: i64, y: i64, scale: u32, rgba: [u8; 4], text: &str) {
        let s = scale.max(1) as i64;
        for (i, c) in text.chars().enumerate() {
            let gx = x + i as i64 * ADVANCE as i64 * s;
            if gx >= self.width as i64 {
                break;
            }
            for (row, bits) in glyph(c).iter().enumerate() {
                for col in 0..GLYPH_W {
                    if bits & (0x10 >> col) != 0 {
                        self.fill_rect(
                            gx + col as i64 * s,
                            y + row as i64 * s,
                            s as u32,
                            s as u32,
                            rgba,
                        );
                    }
                }
            }
        }
    }
}

/// A fixed-capacity string on the stack, for formatting numbers on the frame path without
/// allocating. Text beyond `N` bytes is cut off (at a character boundary).
#[derive(Clone, Copy)]
pub struct StackText<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> StackText<N> {
    /// Empty text.
    pub const fn new() -> Self {
        StackText {
            buf: [0; N],
            len: 0,
        }
    }

    /// The text so far.
    pub fn as_str(&self) -> &str {
        // Only whole UTF-8 characters are ever copied in (see write_str), so this cannot fail.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }

    /// Empties the text.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl<const N: usize> Default for StackText<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Debug for StackText<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> fmt::Write for StackText<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            let n = c.len_utf8();
            if self.len + n > N {
                return Ok(());
            }
            c.encode_utf8(&mut self.buf[self.len..self.len + n]);
            self.len += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    #[test]
    fn every_digit_has_its_own_glyph() {
        let digits: Vec<Glyph> = ('0'..='9').map(glyph).collect();
        for (i, a) in digits.iter().enumerate() {
            assert_ne!(*a, BOX);
            for b in &digits[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn text_is_drawn_and_clipped() {
        let (w, h) = (20u32, 10u32);
        let mut data = vec![0u8; (w * h * 4) as usize];
        let mut c = Canvas::new(&mut data, w, h).unwrap();
        // '1' at scale 1: the top row of '1' is 0x04, a single pixel at column 2.
        c.draw_text(0, 0, 1, [255, 0, 0, 255], "1");
        assert_eq!(&data[8..12], &[255, 0, 0, 255]);
        assert_eq!(&data[0..8], &[0; 8]);
        // Far outside: nothing happens, nothing panics.
        let mut c = Canvas::new(&mut data, w, h).unwrap();
        c.draw_text(-100, 50, 3, [1, 2, 3, 4], "88");
        c.draw_text(15, 5, 4, [9, 9, 9, 9], "8");
        assert_eq!(text_size("12", 2), (22, 14));
    }

    #[test]
    fn stack_text_formats_without_overflow() {
        let mut t = StackText::<4>::new();
        write!(t, "{}", 123456).unwrap();
        assert_eq!(t.as_str(), "1234");
        t.clear();
        write!(t, "{:.1}", 0.26).unwrap();
        assert_eq!(t.as_str(), "0.3");
    }
}
