//! Fitting a frame into a window: the letterbox rectangle and the nearest-neighbour scaler.
//!
//! **The rule** (what the screenshot tests check, written out so that anyone can recompute it):
//! * The frame (`sw`×`sh`) is scaled by one factor for both axes, the largest that fits the
//!   window (`dw`×`dh`): when `dw·sh ≤ dh·sw` the width fills (`w = dw`,
//!   `h = round(sh·dw / sw)`), otherwise the height fills (`h = dh`, `w = round(sw·dh / sh)`),
//!   rounding halves up, and never below 1 pixel.
//! * The picture is centred: `x0 = (dw − w) / 2`, `y0 = (dh − h) / 2` (integer division). The
//!   bars around it are black (`0x000000`).
//! * Each window pixel `(x0 + i, y0 + j)` shows source pixel
//!   `(⌊(2i + 1)·sw / (2w)⌋, ⌊(2j + 1)·sh / (2h)⌋)`: the source pixel under the centre of the
//!   window pixel (nearest neighbour). At the frame's own size this is the identity, and an
//!   integer enlargement repeats each pixel exactly (sharp pixels on a projector).
//! * Colours are copied as they are: RGBA becomes softbuffer's `0x00RRGGBB`; alpha is ignored.
//!
//! Nearest neighbour rather than a filter: it is exact and cheap on the window thread (one
//! table look-up per pixel, no per-frame allocation), and a show is usually sent at the
//! projector's own size, where every rule is the identity.

/// Where the picture goes in the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    /// Left edge of the picture in the window.
    pub x0: u32,
    /// Top edge.
    pub y0: u32,
    /// Picture width in window pixels.
    pub w: u32,
    /// Picture height.
    pub h: u32,
}

/// The letterbox rectangle of a `sw`×`sh` frame in a `dw`×`dh` window (see the module rule).
/// All sizes must be at least 1.
pub fn fit(sw: u32, sh: u32, dw: u32, dh: u32) -> Fit {
    let (sw64, sh64, dw64, dh64) = (
        u64::from(sw.max(1)),
        u64::from(sh.max(1)),
        u64::from(dw.max(1)),
        u64::from(dh.max(1)),
    );
    let (w, h) = if dw64 * sh64 <= dh64 * sw64 {
        (dw64, ((sh64 * dw64 * 2 + sw64) / (2 * sw64)).clamp(1, dh64))
    } else {
        (((sw64 * dh64 * 2 + sh64) / (2 * sh64)).clamp(1, dw64), dh64)
    };
    Fit {
        x0: ((dw64 - w) / 2) as u32,
        y0: ((dh64 - h) / 2) as u32,
        w: w as u32,
        h: h as u32,
    }
}

/// A scaler for one (frame size, window size) pair: the source column of every picture column
/// and the source row of every picture row, computed once ([`Scaler::new`]) and reused for
/// every frame of that pair.
#[derive(Debug, Clone, Default)]
pub struct Scaler {
    src: (u32, u32),
    dst: (u32, u32),
    fit: Option<Fit>,
    cols: Vec<u32>,
    rows: Vec<u32>,
}

impl Scaler {
    /// The tables for a `sw`×`sh` frame in a `dw`×`dh` window.
    pub fn new(sw: u32, sh: u32, dw: u32, dh: u32) -> Self {
        let f = fit(sw, sh, dw, dh);
        let index = |i: u32, s: u32, d: u32| -> u32 {
            ((2 * u64::from(i) + 1) * u64::from(s) / (2 * u64::from(d))) as u32
        };
        Scaler {
            src: (sw, sh),
            dst: (dw, dh),
            fit: Some(f),
            cols: (0..f.w).map(|i| index(i, sw, f.w)).collect(),
            rows: (0..f.h).map(|j| index(j, sh, f.h)).collect(),
        }
    }

    /// Whether these tables are for this pair of sizes.
    pub fn is_for(&self, sw: u32, sh: u32, dw: u32, dh: u32) -> bool {
        self.fit.is_some() && self.src == (sw, sh) && self.dst == (dw, dh)
    }

    /// The picture's rectangle.
    pub fn fit(&self) -> Option<Fit> {
        self.fit
    }

    /// Draws `src` (RGBA rows of the frame size given to [`new`](Self::new)) into `dst`
    /// (`0x00RRGGBB` rows of the window size): the picture where [`fit`] puts it, black
    /// around it. Does nothing if the sizes do not match the tables.
    pub fn draw(&self, src: &[u8], dst: &mut [u32]) {
        let (Some(f), (sw, sh), (dw, dh)) = (self.fit, self.src, self.dst) else {
            return;
        };
        let (sw, dw) = (sw as usize, dw as usize);
        if src.len() < sw * sh as usize * 4 || dst.len() < dw * dh as usize {
            return;
        }
        let (x0, y0, w) = (f.x0 as usize, f.y0 as usize, f.w as usize);
        let y1 = y0 + f.h as usize;
        for (y, line) in dst.chunks_exact_mut(dw).take(dh as usize).enumerate() {
            if y < y0 || y >= y1 {
                line.fill(0);
                continue;
            }
            let row = self.rows[y - y0] as usize * sw * 4;
            let src_row = &src[row..row + sw * 4];
            line[..x0].fill(0);
            line[x0 + w..].fill(0);
            for (out, &c) in line[x0..x0 + w].iter_mut().zip(&self.cols) {
                let p = c as usize * 4;
                *out = u32::from(src_row[p]) << 16
                    | u32::from(src_row[p + 1]) << 8
                    | u32::from(src_row[p + 2]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_keep_the_aspect_and_centre() {
        // Same size: identity.
        assert_eq!(
            fit(640, 360, 640, 360),
            Fit {
                x0: 0,
                y0: 0,
                w: 640,
                h: 360
            }
        );
        // 16:9 in 4:3: bars top and bottom.
        assert_eq!(
            fit(1920, 1080, 800, 600),
            Fit {
                x0: 0,
                y0: 75,
                w: 800,
                h: 450
            }
        );
        // 4:3 in 16:9: bars left and right.
        assert_eq!(
            fit(640, 480, 1920, 1080),
            Fit {
                x0: 240,
                y0: 0,
                w: 1440,
                h: 1080
            }
        );
        // Rounding halves up: 3x2 into 4 wide -> 2.666.. -> 3.
        assert_eq!(
            fit(3, 2, 4, 100),
            Fit {
                x0: 0,
                y0: 48,
                w: 4,
                h: 3
            }
        );
        // Never below one pixel.
        assert_eq!(fit(10000, 1, 10, 10).h, 1);
    }

    #[test]
    fn identity_and_integer_enlargement_are_exact() {
        let src: Vec<u8> = (0..4 * 3 * 2).map(|i| i as u8 * 10).collect();
        let mut out = vec![7u32; 3 * 2];
        Scaler::new(3, 2, 3, 2).draw(&src, &mut out);
        for (i, px) in out.iter().enumerate() {
            let p = &src[i * 4..];
            assert_eq!(
                *px,
                u32::from(p[0]) << 16 | u32::from(p[1]) << 8 | u32::from(p[2])
            );
        }
        // 2x enlargement into a wider window: each pixel twice, black bars at the sides.
        let mut big = vec![7u32; 8 * 4];
        Scaler::new(3, 2, 8, 4).draw(&src, &mut big);
        for y in 0..4 {
            assert_eq!(big[y * 8], 0, "left bar");
            assert_eq!(big[y * 8 + 7], 0, "right bar");
            for x in 0..6 {
                assert_eq!(big[y * 8 + 1 + x], out[(y / 2) * 3 + x / 2], "({x},{y})");
            }
        }
    }

    #[test]
    fn wrong_sizes_draw_nothing() {
        let mut out = vec![7u32; 4];
        Scaler::new(3, 2, 2, 2).draw(&[0u8; 8], &mut out);
        assert_eq!(out, vec![7u32; 4]);
        Scaler::default().draw(&[0u8; 24], &mut out);
        assert_eq!(out, vec![7u32; 4]);
    }
}
