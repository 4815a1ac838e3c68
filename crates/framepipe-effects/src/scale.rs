//! `scale`: resizes frames with fast_image_resize (SIMD convolution): box, bilinear or lanczos3.
//!
//! Each instance owns one `Resizer`, made once. Pixels are resized as straight (not
//! premultiplied) RGBA: the engine's frames are normally opaque, and premultiplying would cost a
//! frame-sized temporary buffer per call.

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use framepipe_core::{
    Effect, EffectFactory, Element, ElementDesc, ElementKind, Error, Frame, FrameCtx, FrameMut,
    Mode, PropKind, PropSpec, PropValue, Props, Result, SliceRunner, VideoInfo,
};

use crate::error::EffectsError;

/// Element name.
pub const NAME: &str = "scale";
/// Largest output width or height.
pub const MAX_DIM: u32 = 16384;
/// Algorithm used unless `algorithm=` says otherwise.
pub const DEFAULT_ALGORITHM: &str = "bilinear";

/// The registry description of `scale`.
pub fn desc() -> ElementDesc {
    ElementDesc {
        name: NAME.into(),
        kind: ElementKind::Effect,
        description: "Resizes frames (fast_image_resize: box, bilinear, lanczos3)".into(),
        props: vec![
            PropSpec::new(
                "width",
                PropKind::Int {
                    min: 0,
                    max: MAX_DIM as i64,
                },
                PropValue::Int(0),
                "output width; 0 = from height keeping the aspect ratio (or the input's)",
            )
            .fixed(),
            PropSpec::new(
                "height",
                PropKind::Int {
                    min: 0,
                    max: MAX_DIM as i64,
                },
                PropValue::Int(0),
                "output height; 0 = from width keeping the aspect ratio (or the input's)",
            )
            .fixed(),
            PropSpec::new(
                "algorithm",
                PropKind::Enum(vec!["box".into(), "bilinear".into(), "lanczos3".into()]),
                PropValue::Str(DEFAULT_ALGORITHM.into()),
                "resampling filter",
            )
            .fixed(),
        ],
        default_mode: Mode::Parallel,
        details: vec![("library".into(), "fast_image_resize".into())],
    }
}

/// Resampling filter of `scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Box (area average when shrinking, nearest when growing).
    Box,
    /// Bilinear (triangle filter).
    Bilinear,
    /// Lanczos, 3 lobes.
    Lanczos3,
}

impl Algorithm {
    /// Parses `box`, `bilinear` or `lanczos3`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "box" => Some(Algorithm::Box),
            "bilinear" => Some(Algorithm::Bilinear),
            "lanczos3" => Some(Algorithm::Lanczos3),
            _ => None,
        }
    }

    fn filter(self) -> FilterType {
        match self {
            Algorithm::Box => FilterType::Box,
            Algorithm::Bilinear => FilterType::Bilinear,
            Algorithm::Lanczos3 => FilterType::Lanczos3,
        }
    }
}

/// Builds `scale` from its properties.
pub fn build(props: &Props) -> Result<Element> {
    let algorithm = Algorithm::parse(props.str("algorithm")).ok_or_else(|| Error::BadValue {
        element: NAME.into(),
        prop: "algorithm".into(),
        value: props.str("algorithm").into(),
        reason: "expected box, bilinear or lanczos3".into(),
    })?;
    Ok(Element::Effect(Box::new(ScaleFactory::new(
        props.i64("width") as u32,
        props.i64("height") as u32,
        algorithm,
    ))))
}

/// The `scale` factory: knows the wanted size, learns the input size in `negotiate`.
#[derive(Debug, Clone)]
pub struct ScaleFactory {
    want_w: u32,
    want_h: u32,
    algorithm: Algorithm,
    input: Option<VideoInfo>,
    output: Option<VideoInfo>,
}

impl ScaleFactory {
    /// A factory for `width` x `height` output (0 = derive, see the properties).
    pub fn new(width: u32, height: u32, algorithm: Algorithm) -> Self {
        ScaleFactory {
            want_w: width,
            want_h: height,
            algorithm,
            input: None,
            output: None,
        }
    }

    fn out_size(&self, w: u32, h: u32) -> (u32, u32) {
        let derive = |have: u32, other_have: u32, other_want: u32| -> u32 {
            let v = (have as u64 * other_want as u64 + other_have as u64 / 2) / other_have as u64;
            (v as u32).max(1)
        };
        match (self.want_w, self.want_h) {
            (0, 0) => (w, h),
            (0, hh) => (derive(w, h, hh), hh),
            (ww, 0) => (ww, derive(h, w, ww)),
            (ww, hh) => (ww, hh),
        }
    }
}

impl EffectFactory for ScaleFactory {
    fn name(&self) -> &str {
        NAME
    }
    fn default_mode(&self) -> Mode {
        Mode::Parallel
    }
    fn negotiate(&mut self, input: VideoInfo) -> Result<VideoInfo> {
        if input.width == 0 || input.height == 0 {
            return Err(Error::element(
                NAME,
                EffectsError::BadSize {
                    width: input.width,
                    height: input.height,
                    reason: "empty input".into(),
                },
            ));
        }
        let (w, h) = self.out_size(input.width, input.height);
        if w > MAX_DIM || h > MAX_DIM {
            return Err(Error::element(
                NAME,
                EffectsError::BadSize {
                    width: w,
                    height: h,
                    reason: format!("larger than {MAX_DIM}x{MAX_DIM}"),
                },
            ));
        }
        let out = VideoInfo {
            width: w,
            height: h,
            rate: input.rate,
        };
        self.input = Some(input);
        self.output = Some(out);
        Ok(out)
    }
    fn instantiate(&self) -> Result<Box<dyn Effect>> {
        let (Some(input), Some(output)) = (self.input, self.output) else {
            return Err(Error::Pipeline(
                "scale: instantiate called before negotiate".into(),
            ));
        };
        Ok(Box::new(Scale::new(input, output, self.algorithm)))
    }
}

/// One `scale` instance: its own resizer, made once.
pub struct Scale {
    resizer: Resizer,
    options: ResizeOptions,
    input: VideoInfo,
    output: VideoInfo,
}

impl std::fmt::Debug for Scale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scale")
            .field("input", &self.input)
            .field("output", &self.output)
            .field("options", &self.options)
            .finish()
    }
}

impl Scale {
    /// An instance resizing `input`-shaped frames to `output`'s size.
    pub fn new(input: VideoInfo, output: VideoInfo, algorithm: Algorithm) -> Self {
        Scale {
            resizer: Resizer::new(),
            options: ResizeOptions::new()
                .resize_alg(ResizeAlg::Convolution(algorithm.filter()))
                .use_alpha(false),
            input,
            output,
        }
    }

    /// Resizes RGBA `src` (the input size) into `dst` (the output size).
    pub fn resize(&mut self, src: &[u8], dst: &mut [u8]) -> std::result::Result<(), EffectsError> {
        let (iw, ih, ow, oh) = (
            self.input.width,
            self.input.height,
            self.output.width,
            self.output.height,
        );
        if (iw, ih) == (ow, oh) {
            dst.copy_from_slice(src);
            return Ok(());
        }
        let err = |reason: String| EffectsError::Resize {
            from_w: iw,
            from_h: ih,
            to_w: ow,
            to_h: oh,
            reason,
        };
        let src_img =
            ImageRef::new(iw, ih, src, PixelType::U8x4).map_err(|e| err(e.to_string()))?;
        let mut dst_img =
            Image::from_slice_u8(ow, oh, dst, PixelType::U8x4).map_err(|e| err(e.to_string()))?;
        self.resizer
            .resize(&src_img, &mut dst_img, &self.options)
            .map_err(|e| err(e.to_string()))
    }
}

impl Effect for Scale {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        _slices: &dyn SliceRunner,
    ) -> Result<()> {
        self.resize(input.data(), output.data_mut())
            .map_err(|e| Error::element(NAME, e))
    }
}
