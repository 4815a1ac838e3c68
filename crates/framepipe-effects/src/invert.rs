//! `invert`: inverts red, green and blue, keeps alpha. Cuts the frame into row slices that the
//! engine's workers process at once (see [`crate::slices`]).

use framepipe_core::{
    Effect, EffectFactory, Element, ElementDesc, ElementKind, Frame, FrameCtx, FrameMut, Mode,
    Props, Result, SliceRunner, VideoInfo,
};

use crate::slices::for_each_row_slice_sized;

/// Element name.
pub const NAME: &str = "invert";

/// The registry description of `invert`.
pub fn desc() -> ElementDesc {
    ElementDesc {
        name: NAME.into(),
        kind: ElementKind::Effect,
        description: "Inverts red, green and blue; keeps alpha (native, sliced)".into(),
        props: vec![],
        default_mode: Mode::Parallel,
        details: vec![("slices".into(), "row slices on the worker pool".into())],
    }
}

/// Builds `invert` (it has no properties).
pub fn build(_props: &Props) -> Result<Element> {
    Ok(Element::Effect(Box::new(InvertFactory)))
}

/// The `invert` factory.
#[derive(Debug, Default, Clone, Copy)]
pub struct InvertFactory;

impl EffectFactory for InvertFactory {
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
        Ok(Box::new(Invert))
    }
}

/// One `invert` instance (stateless).
#[derive(Debug, Default, Clone, Copy)]
pub struct Invert;

/// XOR mask that flips R, G and B of an RGBA pixel read as a native-endian `u32`.
const MASK: u32 = u32::from_ne_bytes([0xff, 0xff, 0xff, 0x00]);

impl Invert {
    /// Inverts `input` into `output` (same length, whole RGBA pixels as words), rows of
    /// `row_len` words, sliced through `slices`.
    pub fn run(input: &[u32], output: &mut [u32], row_len: usize, slices: &dyn SliceRunner) {
        // A row costs its bytes read and written: slices of at least MIN_SLICE_BYTES each.
        let row_bytes = row_len * 4 * 2;
        for_each_row_slice_sized(slices, output, row_len, row_bytes, &|rows, out| {
            let src = &input[rows.start * row_len..rows.end * row_len];
            for (o, i) in out.iter_mut().zip(src) {
                *o = *i ^ MASK;
            }
        });
    }
}

impl Effect for Invert {
    fn process(
        &mut self,
        _ctx: &FrameCtx,
        input: &Frame,
        output: &mut FrameMut,
        slices: &dyn SliceRunner,
    ) -> Result<()> {
        let row_len = input.width() as usize;
        Invert::run(input.words(), output.words_mut(), row_len, slices);
        Ok(())
    }
}
