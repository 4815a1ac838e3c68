//! `testsrc`: synthetic test patterns, deterministic per frame (the same `seq` always gives the
//! same picture) and fast: rows are built once per frame into a scratch row allocated at build,
//! then copied.

use framepipe_core::{
    Element, ElementDesc, ElementKind, Error, FrameCtx, FrameMut, Limits, PropKind, PropSpec,
    PropValue, Props, Rational, Result, Source, VideoInfo,
};
use framepipe_effects::font::{text_size, Canvas, StackText, GLYPH_H};

use crate::stream::{check_size, rate_prop, LoopOrigin, MAX_DIM};

/// Element name.
pub const NAME: &str = "testsrc";
/// Default width.
pub const DEFAULT_WIDTH: i64 = 640;
/// Default height.
pub const DEFAULT_HEIGHT: i64 = 480;
/// Default rate.
pub const DEFAULT_RATE: &str = "30";
/// Default speed of the moving bars, pixels per frame.
pub const DEFAULT_SPEED: i64 = 4;

/// The colours of the bars, left to right: white, yellow, cyan, green, magenta, red, blue, black.
pub const BAR_COLOURS: [[u8; 4]; 8] = [
    [255, 255, 255, 255],
    [255, 255, 0, 255],
    [0, 255, 255, 255],
    [0, 255, 0, 255],
    [255, 0, 255, 255],
    [255, 0, 0, 255],
    [0, 0, 255, 255],
    [0, 0, 0, 255],
];

/// The registry description of `testsrc`.
pub fn desc() -> ElementDesc {
    let dim = PropKind::Int {
        min: 1,
        max: MAX_DIM as i64,
    };
    ElementDesc {
        name: NAME.into(),
        kind: ElementKind::Source,
        description: "Test patterns: moving bars, noise, frame counter, gradient, solid".into(),
        props: vec![
            PropSpec::new("width", dim.clone(), PropValue::Int(DEFAULT_WIDTH), "width"),
            PropSpec::new("height", dim, PropValue::Int(DEFAULT_HEIGHT), "height"),
            PropSpec::new(
                "frames",
                PropKind::Int {
                    min: 0,
                    max: i64::MAX,
                },
                PropValue::Int(0),
                "number of frames; 0 = endless",
            ),
            PropSpec::new(
                "rate",
                PropKind::Str,
                PropValue::Str(DEFAULT_RATE.into()),
                "frame rate: 30, 25/1, 30000/1001",
            ),
            PropSpec::new(
                "pattern",
                PropKind::Enum(Pattern::NAMES.iter().map(|s| s.to_string()).collect()),
                PropValue::Str("bars".into()),
                "bars (moving), noise (from seed), counter (big frame number), gradient, solid",
            ),
            PropSpec::new(
                "seed",
                PropKind::Int {
                    min: 0,
                    max: i64::MAX,
                },
                PropValue::Int(0),
                "seed of the noise pattern",
            ),
            PropSpec::new(
                "color",
                PropKind::Color,
                PropValue::Color([0.5, 0.5, 0.5]),
                "colour of the solid pattern",
            ),
            PropSpec::new(
                "speed",
                PropKind::Int {
                    min: -4096,
                    max: 4096,
                },
                PropValue::Int(DEFAULT_SPEED),
                "pixels per frame the bars move",
            ),
            PropSpec::new(
                "counter",
                PropKind::Bool,
                PropValue::Bool(false),
                "overlay the frame number on any pattern",
            ),
        ],
        default_mode: framepipe_core::Mode::Serial,
        details: vec![],
    }
}

/// A `testsrc` pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Eight vertical colour bars moving sideways by `speed` pixels per frame.
    Bars,
    /// Random opaque pixels, a function of (seed, frame number) only.
    Noise,
    /// The frame number, large, on a dark blue background.
    Counter,
    /// Red rising left to right, green top to bottom, blue cycling with the frame number.
    Gradient,
    /// One colour.
    Solid,
}

impl Pattern {
    /// The property words, in order.
    pub const NAMES: [&'static str; 5] = ["bars", "noise", "counter", "gradient", "solid"];

    /// Parses a property word.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "bars" => Pattern::Bars,
            "noise" => Pattern::Noise,
            "counter" => Pattern::Counter,
            "gradient" => Pattern::Gradient,
            "solid" => Pattern::Solid,
            _ => return None,
        })
    }
}

/// Settings of a [`TestSrc`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestSrcSettings {
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
    /// Frames to produce; 0 = endless.
    pub frames: u64,
    /// Frame rate.
    pub rate: Rational,
    /// Pattern.
    pub pattern: Pattern,
    /// Noise seed.
    pub seed: u64,
    /// Solid colour, RGBA.
    pub color: [u8; 4],
    /// Bar speed, pixels per frame.
    pub speed: i64,
    /// Overlay the frame number.
    pub counter: bool,
}

impl TestSrcSettings {
    /// Settings from resolved properties.
    pub fn from_props(props: &Props) -> Result<Self> {
        let (width, height) = check_size(props.i64("width") as u64, props.i64("height") as u64)
            .map_err(|e| Error::element(NAME, e))?;
        // Before the scratch row and any pool: the frame must fit the memory budget.
        Limits::current().check_frame(NAME, width, height)?;
        let pattern = Pattern::parse(props.str("pattern")).ok_or_else(|| Error::BadValue {
            element: NAME.into(),
            prop: "pattern".into(),
            value: props.str("pattern").into(),
            reason: format!("expected one of: {}", Pattern::NAMES.join(", ")),
        })?;
        let color = match props.get("color") {
            Some(PropValue::Color(c)) => {
                let ch = |v: f32| (v.clamp(0.0, 1.0) * 255.0).round() as u8;
                [ch(c[0]), ch(c[1]), ch(c[2]), 255]
            }
            _ => [128, 128, 128, 255],
        };
        Ok(TestSrcSettings {
            width,
            height,
            frames: props.i64("frames").max(0) as u64,
            rate: rate_prop(NAME, props)?,
            pattern,
            seed: props.i64("seed").max(0) as u64,
            color,
            speed: props.i64("speed"),
            counter: props.bool("counter"),
        })
    }
}

/// Builds `testsrc` from its properties.
pub fn build(props: &Props) -> Result<Element> {
    Ok(Element::Source(Box::new(TestSrc::new(
        TestSrcSettings::from_props(props)?,
    ))))
}

/// The `testsrc` source.
#[derive(Debug, Clone)]
pub struct TestSrc {
    settings: TestSrcSettings,
    row: Vec<u32>,
    origin: LoopOrigin,
}

fn word(rgba: [u8; 4]) -> u32 {
    u32::from_ne_bytes(rgba)
}

/// SplitMix64: a well-mixed 64-bit function of its input.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl TestSrc {
    /// A source with these settings; allocates its one scratch row.
    pub fn new(settings: TestSrcSettings) -> Self {
        TestSrc {
            row: vec![0; settings.width as usize],
            settings,
            origin: LoopOrigin::default(),
        }
    }

    /// Draws frame `seq` into `frame` (which has the settings' size).
    pub fn draw(&mut self, seq: u64, frame: &mut FrameMut) {
        let s = self.settings;
        let (w, h) = (s.width as usize, s.height as usize);
        let words = frame.words_mut();
        match s.pattern {
            Pattern::Bars => {
                let shift = (seq as i128 * s.speed as i128).rem_euclid(w as i128) as usize;
                for (x, px) in self.row.iter_mut().enumerate() {
                    let bar = ((x + w - shift) % w) * 8 / w;
                    *px = word(BAR_COLOURS[bar]);
                }
                for line in words.chunks_exact_mut(w) {
                    line.copy_from_slice(&self.row);
                }
            }
            Pattern::Noise => {
                let mut state = splitmix(s.seed ^ splitmix(seq)) | 1;
                let alpha = word([0, 0, 0, 255]);
                let opaque_rgb = !word([0, 0, 0, 255]);
                for pair in words.chunks_mut(2) {
                    // xorshift64*
                    state ^= state >> 12;
                    state ^= state << 25;
                    state ^= state >> 27;
                    let v = state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
                    let a = u32::from_ne_bytes([v[0], v[1], v[2], 0]);
                    let b = u32::from_ne_bytes([v[4], v[5], v[6], 0]);
                    pair[0] = (a & opaque_rgb) | alpha;
                    if let Some(p) = pair.get_mut(1) {
                        *p = (b & opaque_rgb) | alpha;
                    }
                }
            }
            Pattern::Gradient => {
                let blue = (seq.wrapping_mul(3) % 256) as u8;
                for (x, px) in self.row.iter_mut().enumerate() {
                    let r = (x * 255 / (w - 1).max(1)) as u8;
                    *px = word([r, 0, blue, 255]);
                }
                for (y, line) in words.chunks_exact_mut(w).enumerate() {
                    let g = word([0, (y * 255 / (h - 1).max(1)) as u8, 0, 0]);
                    for (d, r) in line.iter_mut().zip(&self.row) {
                        *d = *r | g;
                    }
                }
            }
            Pattern::Solid => words.fill(word(s.color)),
            Pattern::Counter => {
                words.fill(word([16, 16, 64, 255]));
                let text = number(seq);
                let digits = text.as_str().len().max(4) as u32;
                // As big as fits: the number spans at most 80% of the width and 50% of the height.
                let scale = (s.width * 8 / 10 / (digits * 6)).min(s.height / 2 / GLYPH_H);
                let scale = scale.max(1);
                let (tw, th) = text_size(text.as_str(), scale);
                if let Some(mut c) = Canvas::new(frame.data_mut(), s.width, s.height) {
                    let x = (s.width as i64 - tw as i64) / 2;
                    let y = (s.height as i64 - th as i64) / 2;
                    c.draw_text(x, y, scale, [255, 255, 255, 255], text.as_str());
                }
            }
        }
        if s.counter {
            let text = number(seq);
            let scale = (s.height / 60).max(2);
            let (tw, th) = text_size(text.as_str(), scale);
            if let Some(mut c) = Canvas::new(frame.data_mut(), s.width, s.height) {
                let m = scale as i64;
                c.fill_rect(0, 0, tw + 2 * scale, th + 2 * scale, [0, 0, 0, 255]);
                c.draw_text(m, m, scale, [255, 255, 255, 255], text.as_str());
            }
        }
    }
}

fn number(seq: u64) -> StackText<24> {
    use std::fmt::Write;
    let mut t = StackText::new();
    let _ = write!(t, "{seq}");
    t
}

impl Source for TestSrc {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: self.settings.width,
            height: self.settings.height,
            rate: self.settings.rate,
        }
    }

    fn len_hint(&self) -> Option<u64> {
        (self.settings.frames > 0).then_some(self.settings.frames)
    }

    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        let seq = self.origin.local(ctx).seq;
        if self.settings.frames > 0 && seq >= self.settings.frames {
            return Ok(false);
        }
        self.draw(seq, frame);
        Ok(true)
    }

    /// Counts from frame 0 again: the pictures are a function of the frame number, so the
    /// next frames are the first ones again, byte for byte.
    fn rewind(&mut self) -> Result<bool> {
        self.origin.rewind();
        Ok(true)
    }
}
