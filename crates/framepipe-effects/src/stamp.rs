//! `stamp`: draws the frame number, or the value of its `value` property, onto the frame, to check
//! sync by eye (and by test: two stamps given the same value write the same pixels).
//!
//! The text is formatted into a stack buffer; drawing neither allocates nor locks. `value`, `x`,
//! `y` and `scale` can be changed while running ([`Effect::set_property`]); the settings are read
//! once per frame, so a change never lands halfway through one.

use std::fmt::Write;

use framepipe_core::{
    Effect, EffectFactory, Element, ElementDesc, ElementKind, Error, Frame, FrameCtx, FrameMut,
    Mode, PropKind, PropSpec, PropValue, Props, Result, SliceRunner, VideoInfo,
};

use crate::error::EffectsError;
use crate::font::{text_size, Canvas, StackText};

/// Element name.
pub const NAME: &str = "stamp";
/// Properties that may change while running.
pub const LIVE: &str = "value, x, y, scale";
/// Default position, both axes.
pub const DEFAULT_POS: i64 = 8;
/// Default font pixel size.
pub const DEFAULT_SCALE: i64 = 4;
/// Default number of decimals for `what=value`.
pub const DEFAULT_DECIMALS: i64 = 3;

/// The registry description of `stamp`.
pub fn desc() -> ElementDesc {
    let int = |min, max| PropKind::Int { min, max };
    ElementDesc {
        name: NAME.into(),
        kind: ElementKind::Effect,
        description: "Draws the frame number or a value onto the frame (for checking sync)".into(),
        props: vec![
            PropSpec::new(
                "what",
                PropKind::Enum(vec!["frame".into(), "value".into()]),
                PropValue::Str("frame".into()),
                "frame: the frame's sequence number; value: the 'value' property",
            )
            .fixed(),
            PropSpec::new(
                "value",
                PropKind::Float {
                    min: -1e12,
                    max: 1e12,
                },
                PropValue::Float(0.0),
                "number printed when what=value (live)",
            ),
            PropSpec::new(
                "x",
                int(-16384, 16384),
                PropValue::Int(DEFAULT_POS),
                "left edge of the text in pixels (live)",
            ),
            PropSpec::new(
                "y",
                int(-16384, 16384),
                PropValue::Int(DEFAULT_POS),
                "top edge of the text in pixels (live)",
            ),
            PropSpec::new(
                "scale",
                int(1, 256),
                PropValue::Int(DEFAULT_SCALE),
                "size of one font pixel in frame pixels (live)",
            ),
            PropSpec::new(
                "color",
                PropKind::Color,
                PropValue::Color([1.0, 1.0, 1.0]),
                "text colour",
            )
            .fixed(),
            PropSpec::new(
                "decimals",
                int(0, 9),
                PropValue::Int(DEFAULT_DECIMALS),
                "decimals printed for what=value",
            )
            .fixed(),
            PropSpec::new(
                "background",
                PropKind::Bool,
                PropValue::Bool(true),
                "draw a black box behind the text",
            )
            .fixed(),
        ],
        default_mode: Mode::Parallel,
        details: vec![],
    }
}

/// What `stamp` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// The frame's sequence number.
    Frame,
    /// The `value` property.
    Value,
}

/// The settings of one `stamp`, copied once per frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StampSettings {
    /// What to print.
    pub what: What,
    /// The number printed for [`What::Value`].
    pub value: f64,
    /// Left edge in pixels.
    pub x: i64,
    /// Top edge in pixels.
    pub y: i64,
    /// Font pixel size.
    pub scale: u32,
    /// Text colour, RGBA.
    pub color: [u8; 4],
    /// Decimals for values.
    pub decimals: usize,
    /// Black box behind the text.
    pub background: bool,
}

impl Default for StampSettings {
    fn default() -> Self {
        StampSettings {
            what: What::Frame,
            value: 0.0,
            x: DEFAULT_POS,
            y: DEFAULT_POS,
            scale: DEFAULT_SCALE as u32,
            color: [255; 4],
            decimals: DEFAULT_DECIMALS as usize,
            background: true,
        }
    }
}

impl StampSettings {
    /// Settings from resolved properties.
    pub fn from_props(props: &Props) -> Self {
        let color = match props.get("color") {
            Some(PropValue::Color(c)) => {
                let ch = |v: f32| (v.clamp(0.0, 1.0) * 255.0).round() as u8;
                [ch(c[0]), ch(c[1]), ch(c[2]), 255]
            }
            _ => [255; 4],
        };
        StampSettings {
            what: if props.str("what") == "value" {
                What::Value
            } else {
                What::Frame
            },
            value: props.f64("value"),
            x: props.i64("x"),
            y: props.i64("y"),
            scale: props.i64("scale").max(1) as u32,
            color,
            decimals: props.i64("decimals").clamp(0, 9) as usize,
            background: props.bool("background"),
        }
    }

    /// The text printed on frame `seq`.
    pub fn text(&self, seq: u64) -> StackText<48> {
        let mut t = StackText::new();
        // StackText never fails; it cuts text that does not fit.
        let _ = match self.what {
            What::Frame => write!(t, "{seq}"),
            What::Value => write!(t, "{:.*}", self.decimals, self.value),
        };
        t
    }

    /// Draws this stamp for frame `seq` onto an RGBA buffer of `width` x `height`.
    pub fn draw(&self, data: &mut [u8], width: u32, height: u32, seq: u64) {
        let text = self.text(seq);
        let Some(mut canvas) = Canvas::new(data, width, height) else {
            return;
        };
        if self.background {
            let (w, h) = text_size(text.as_str(), self.scale);
            let pad = self.scale;
            canvas.fill_rect(
                self.x - pad as i64,
                self.y - pad as i64,
                w + 2 * pad,
                h + 2 * pad,
                [0, 0, 0, 255],
            );
        }
        canvas.draw_text(self.x, self.y, self.scale, self.color, text.as_str());
    }

    /// Applies a live change of `name` (one of [`LIVE`]).
    pub fn set(&mut self, name: &str, value: &PropValue) -> std::result::Result<(), EffectsError> {
        let bad = |reason| EffectsError::BadLiveValue {
            prop: name.into(),
            value: value.to_string(),
            reason,
        };
        let num = value.as_f64().filter(|v| v.is_finite());
        match name {
            "value" => self.value = num.ok_or_else(|| bad("expected a number"))?,
            "x" | "y" => {
                let v = num
                    .filter(|v| v.abs() <= 16384.0)
                    .ok_or_else(|| bad("expected a number in [-16384, 16384]"))?
                    .round() as i64;
                if name == "x" {
                    self.x = v;
                } else {
                    self.y = v;
                }
            }
            "scale" => {
                self.scale = num
                    .filter(|v| (1.0..=256.0).contains(v))
                    .ok_or_else(|| bad("expected a number in [1, 256]"))?
                    .round() as u32
            }
            _ => {
                return Err(EffectsError::NotLive {
                    prop: name.into(),
                    live: LIVE,
                })
            }
        }
        Ok(())
    }
}

/// Builds `stamp` from its properties.
pub fn build(props: &Props) -> Result<Element> {
    Ok(Element::Effect(Box::new(StampFactory {
        settings: StampSettings::from_props(props),
    })))
}

/// The `stamp` factory.
#[derive(Debug, Clone, Default)]
pub struct StampFactory {
    /// Settings every new instance starts with.
    pub settings: StampSettings,
}

impl EffectFactory for StampFactory {
    fn name(&self) -> &str {
        NAME
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        Ok(input)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        Ok(Box::new(Stamp {
            settings: self.settings,
        }))
    }
}

/// One `stamp` instance.
#[derive(Debug, Clone, Default)]
pub struct Stamp {
    /// Current settings.
    pub settings: StampSettings,
}

impl Effect for Stamp {
    fn process(
        &mut self,
        ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        let settings = self.settings;
        let (w, h) = (output.width(), output.height());
        output.copy_from(input.data());
        settings.draw(output.data_mut(), w, h, ctx.seq);
        Ok(())
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        self.settings
            .set(name, value)
            .map_err(|e| Error::element(NAME, e))
    }
}
