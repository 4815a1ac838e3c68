//! `monitor`: a preview tap. Downscales its input to exactly `width` x `height` (default
//! 320x180, the aspect ratio is not kept: give a size of the input's shape) and is leaky by
//! default ([`EffectFactory::leaky_by_default`]): when it is behind, the graph skips frames for
//! it instead of holding back the show.
//!
//! # The filter: a box (area average), in integer maths, allocation-free
//!
//! A preview shrinks by large factors (3840x2160 or 6000x4500 to 200x150: 19x to 30x per
//! axis). A bilinear filter with a fixed 2-tap kernel would skip most input pixels and alias
//! badly at such factors; a box filter whose width follows the factor averages every input
//! pixel once, which is both the best looking and the cheapest correct choice (one add per
//! input byte). Output pixel `(ox, oy)` is the mean, rounded half up, of the input pixels whose
//! centres fall inside its footprint (a centre exactly on a boundary belongs to the footprint on
//! its left): columns `x0(ox) .. x0(ox + 1)` with `x0(o) = (2 * o * in_w + out_w) / (2 * out_w)`
//! (integer division), rows likewise. This is the pixel set of fast_image_resize's
//! `FilterType::Box` with an adaptive kernel, and a test checks the two agree to within its
//! fixed-point rounding. Growing an axis (allowed, but
//! pointless for a preview) takes the nearest pixel: `x = min((2 * o + 1) * in_w / (2 * out_w), in_w - 1)`.
//!
//! Why not fast_image_resize itself (which `scale` uses): version 6 computes its filter
//! coefficients on every call, about one small allocation per output row and column
//! (`tests/no_alloc.rs`), and a tap that runs on every frame of a show must not allocate. Here
//! every table and the accumulator rows are made by [`Monitor::new`]; `process` allocates
//! nothing. The per-frame cost on one core is printed by
//! `cargo run --release -p framepipe-effects --example effects_bench` (docs/ELEMENTS.md
//! has the figures). The work is not sliced: a tap is meant to stay on one worker, off the
//! critical path.

use framepipe_core::{
    Effect, EffectFactory, Element, ElementDesc, ElementKind, Error, Frame, FrameCtx, FrameMut,
    Mode, PropKind, PropSpec, PropValue, Props, Result, SliceRunner, VideoInfo,
};

use crate::error::EffectsError;
use crate::scale::MAX_DIM;

/// Element name.
pub const NAME: &str = "monitor";
/// Default preview width.
pub const DEFAULT_WIDTH: u32 = 320;
/// Default preview height.
pub const DEFAULT_HEIGHT: u32 = 180;

/// The registry description of `monitor`.
pub fn desc() -> ElementDesc {
    let dim = PropKind::Int {
        min: 1,
        max: MAX_DIM as i64,
    };
    ElementDesc {
        name: NAME.into(),
        kind: ElementKind::Effect,
        description: "Preview tap: box-downscales to width x height; leaky unless leaky=false"
            .into(),
        props: vec![
            PropSpec::new(
                "width",
                dim.clone(),
                PropValue::Int(DEFAULT_WIDTH as i64),
                "preview width (exactly; the aspect ratio is not kept)",
            )
            .fixed(),
            PropSpec::new(
                "height",
                dim,
                PropValue::Int(DEFAULT_HEIGHT as i64),
                "preview height (exactly; the aspect ratio is not kept)",
            )
            .fixed(),
        ],
        default_mode: Mode::Parallel,
        details: vec![
            ("filter".into(), "box (area average), integer".into()),
            ("leaky".into(), "by default".into()),
        ],
    }
}

/// Builds `monitor` from its properties.
pub fn build(props: &Props) -> Result<Element> {
    Ok(Element::Effect(Box::new(MonitorFactory::new(
        props.i64("width") as u32,
        props.i64("height") as u32,
    ))))
}

/// The `monitor` factory.
#[derive(Debug, Clone)]
pub struct MonitorFactory {
    width: u32,
    height: u32,
    input: Option<VideoInfo>,
}

impl MonitorFactory {
    /// A factory for `width` x `height` previews.
    pub fn new(width: u32, height: u32) -> Self {
        MonitorFactory {
            width,
            height,
            input: None,
        }
    }
}

impl EffectFactory for MonitorFactory {
    fn name(&self) -> &str {
        NAME
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        let bad = |width, height, reason: &str| {
            Error::element(
                NAME,
                EffectsError::BadSize {
                    width,
                    height,
                    reason: reason.into(),
                },
            )
        };
        if input.width == 0 || input.height == 0 {
            return Err(bad(input.width, input.height, "empty input"));
        }
        if self.width == 0 || self.height == 0 || self.width > MAX_DIM || self.height > MAX_DIM {
            return Err(bad(
                self.width,
                self.height,
                &format!("preview size must be 1x1 to {MAX_DIM}x{MAX_DIM}"),
            ));
        }
        self.input = Some(input);
        Ok(VideoInfo {
            width: self.width,
            height: self.height,
            rate: input.rate,
        })
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        let Some(input) = self.input else {
            return Err(Error::Pipeline(
                "monitor: instantiate called before negotiate".into(),
            ));
        };
        Ok(Box::new(Monitor::new(
            input.width,
            input.height,
            self.width,
            self.height,
        )))
    }
    fn leaky_by_default(&self) -> bool {
        true
    }
}

/// The input span `[start, end)` of each output position along one axis (see the module docs).
fn spans(input: u32, output: u32) -> Vec<(usize, usize)> {
    let (i, o) = (input as u64, output as u64);
    (0..o)
        .map(|p| {
            if i >= o {
                let x0 = |p: u64| ((2 * p * i + o) / (2 * o)) as usize;
                (x0(p), x0(p + 1))
            } else {
                let x = (((2 * p + 1) * i) / (2 * o)).min(i - 1) as usize;
                (x, x + 1)
            }
        })
        .collect()
}

/// One `monitor` instance: the span tables and an accumulator row, made once.
#[derive(Debug, Clone)]
pub struct Monitor {
    in_w: usize,
    in_h: usize,
    out_w: usize,
    out_h: usize,
    cols: Vec<(usize, usize)>,
    rows: Vec<(usize, usize)>,
    acc16: Vec<u16>,
    acc32: Vec<u32>,
}

impl Monitor {
    /// An instance shrinking `in_w` x `in_h` RGBA frames to `out_w` x `out_h` (all at least 1).
    pub fn new(in_w: u32, in_h: u32, out_w: u32, out_h: u32) -> Self {
        Monitor {
            in_w: in_w as usize,
            in_h: in_h as usize,
            out_w: out_w as usize,
            out_h: out_h as usize,
            cols: spans(in_w, out_w),
            rows: spans(in_h, out_h),
            acc16: vec![0; in_w as usize * 4],
            // Only needed for bands taller than U16_ROWS.
            acc32: vec![
                0;
                if in_h as usize > U16_ROWS * out_h as usize {
                    in_w as usize * 4
                } else {
                    0
                }
            ],
        }
    }

    /// Downscales RGBA `src` (the input size) into `dst` (the output size).
    pub fn resize(&mut self, src: &[u8], dst: &mut [u8]) {
        let row = self.in_w * 4;
        let out_row = self.out_w * 4;
        debug_assert_eq!(src.len(), row * self.in_h);
        debug_assert_eq!(dst.len(), out_row * self.out_h);
        for (&(y0, y1), out) in self.rows.iter().zip(dst.chunks_exact_mut(out_row)) {
            // Vertical pass: column sums of the band's rows. Runs of up to 256 rows are summed
            // in u16 lanes (256 * 255 fits); only a band taller than that (a preview more than
            // 256 times smaller than its input) adds its runs up in u32 (16384 * 255 fits).
            let band = &src[y0 * row..y1 * row];
            let bh = (y1 - y0) as u64;
            if y1 - y0 <= U16_ROWS {
                sum_rows(&mut self.acc16[..row], band, row);
                box_row(&self.acc16, &self.cols, bh, out);
            } else {
                self.acc32.fill(0);
                for run in band.chunks(row * U16_ROWS) {
                    sum_rows(&mut self.acc16[..row], run, row);
                    for (a, &b) in self.acc32.iter_mut().zip(&self.acc16) {
                        *a += b as u32;
                    }
                }
                box_row(&self.acc32, &self.cols, bh, out);
            }
        }
    }
}

/// Most rows summed in one u16 lane: 256 * 255 = 65280.
const U16_ROWS: usize = 256;

/// `acc[i] = sum of rows[k * row + i]` over the (at most [`U16_ROWS`]) rows of `rows`.
fn sum_rows(acc: &mut [u16], rows: &[u8], row: usize) {
    acc.fill(0);
    let mut groups = rows.chunks_exact(row * 8);
    for g in &mut groups {
        add_8_rows(acc, g, row);
    }
    for line in groups.remainder().chunks_exact(row) {
        for (a, &b) in acc.iter_mut().zip(line) {
            *a += b as u16;
        }
    }
}

/// Horizontal pass: each output pixel of `out` is the rounded mean of its span of column sums
/// (sums over `bh` rows).
fn box_row<T: Copy + Into<u64>>(acc: &[T], cols: &[(usize, usize)], bh: u64, out: &mut [u8]) {
    for (&(x0, x1), px) in cols.iter().zip(out.chunks_exact_mut(4)) {
        let mut sum = [0u64; 4];
        for c in acc[x0 * 4..x1 * 4].chunks_exact(4) {
            for (s, &v) in sum.iter_mut().zip(c) {
                *s += v.into();
            }
        }
        let n = bh * (x1 - x0) as u64;
        for (p, s) in px.iter_mut().zip(sum) {
            *p = ((s + n / 2) / n) as u8;
        }
    }
}

/// `acc[i] += g[i] + g[row + i] + ... + g[7 * row + i]` for `i < row` (`g`: 8 rows of `row`).
fn add_8_rows(acc: &mut [u16], g: &[u8], row: usize) {
    let (r0, g) = g.split_at(row);
    let (r1, g) = g.split_at(row);
    let (r2, g) = g.split_at(row);
    let (r3, g) = g.split_at(row);
    let (r4, g) = g.split_at(row);
    let (r5, g) = g.split_at(row);
    let (r6, r7) = g.split_at(row);
    let acc = &mut acc[..row];
    let r7 = &r7[..row];
    for i in 0..row {
        acc[i] += r0[i] as u16
            + r1[i] as u16
            + r2[i] as u16
            + r3[i] as u16
            + r4[i] as u16
            + r5[i] as u16
            + r6[i] as u16
            + r7[i] as u16;
    }
}

impl Effect for Monitor {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        let got = (input.width() as usize, input.height() as usize);
        let made = (output.width() as usize, output.height() as usize);
        if got != (self.in_w, self.in_h) || made != (self.out_w, self.out_h) {
            return Err(Error::element(
                NAME,
                EffectsError::Resize {
                    from_w: got.0 as u32,
                    from_h: got.1 as u32,
                    to_w: made.0 as u32,
                    to_h: made.1 as u32,
                    reason: format!(
                        "negotiated {}x{} to {}x{}",
                        self.in_w, self.in_h, self.out_w, self.out_h
                    ),
                },
            ));
        }
        self.resize(input.data(), output.data_mut());
        Ok(())
    }
}
