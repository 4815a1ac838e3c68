//! Thumbnails of the clips of `clips` decks (issue #26): the page's grid of a deck's bank.
//!
//! A request names a deck node of the running graph and a clip's number in its bank
//! (`thumb/NODE/N.png`), never a file: the server finds the bank from the deck's published
//! `locations` and `folder` ([`framepipe_clip::deck::bank_of`], the list the deck itself
//! numbers), so a page can only ever see the first frame of a file the show already plays.
//!
//! A thumbnail is made once per file and kept ([`CACHED`] at most): the clip's first frame
//! decoded with framepipe-clip's decoder (one decoder thread), scaled to fit
//! [`THUMB_W`]x[`THUMB_H`] with fast_image_resize (bilinear convolution), encoded as PNG. It is
//! made on tokio's blocking pool (the server's own; see `Shared::on_disk`), never on the
//! frame path nor on the server's async thread. A file that cannot be decoded is remembered
//! as such (its reason), so that a broken clip is not decoded again at every look.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use framepipe_clip::decode::ClipFile;

/// The largest thumbnail, pixels (a clip's aspect is kept; a smaller clip is not enlarged).
pub const THUMB_W: u32 = 160;
/// See [`THUMB_W`].
pub const THUMB_H: u32 = 90;
/// Thumbnails kept at most (the oldest made is dropped first).
pub const CACHED: usize = 512;
/// The largest clip picture decoded for a thumbnail, pixels (an 8K frame; more is refused
/// rather than allocated on the server's behalf).
const MAX_PIXELS: u64 = 7680 * 4320;

/// A made thumbnail (PNG bytes) or why none could be made.
pub(crate) type Made = Arc<Result<Vec<u8>, String>>;

/// The thumbnails made so far, by file.
#[derive(Default)]
pub(crate) struct Thumbs {
    made: Mutex<(HashMap<String, Made>, std::collections::VecDeque<String>)>,
}

impl Thumbs {
    /// The thumbnail of `file` if it was made already.
    pub(crate) fn cached(&self, file: &str) -> Option<Made> {
        let made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        made.0.get(file).cloned()
    }

    /// The thumbnail of `file`: made now (blocking: call it off the async thread) unless it
    /// was made already.
    pub(crate) fn get(&self, file: &str) -> Made {
        if let Some(m) = self.cached(file) {
            return m;
        }
        let m = Arc::new(make(file));
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        if !made.0.contains_key(file) {
            if made.1.len() >= CACHED {
                if let Some(old) = made.1.pop_front() {
                    made.0.remove(&old);
                }
            }
            made.1.push_back(file.to_string());
            made.0.insert(file.to_string(), Arc::clone(&m));
        }
        m
    }
}

/// The size of a `w`x`h` picture's thumbnail: fits [`THUMB_W`]x[`THUMB_H`], aspect kept, never
/// enlarged, at least 1x1.
pub fn thumb_size(w: u32, h: u32) -> (u32, u32) {
    let scale = (THUMB_W as f64 / w.max(1) as f64)
        .min(THUMB_H as f64 / h.max(1) as f64)
        .min(1.0);
    (
        ((w as f64 * scale).round() as u32).max(1),
        ((h as f64 * scale).round() as u32).max(1),
    )
}

/// Decodes `file`'s first frame, scales it, encodes it as PNG.
fn make(file: &str) -> Result<Vec<u8>, String> {
    let mut clip = ClipFile::open(file, 1).map_err(|e| e.to_string())?;
    let (w, h) = (clip.info().width, clip.info().height);
    if u64::from(w) * u64::from(h) > MAX_PIXELS {
        return Err(format!("{w}x{h} is larger than a thumbnail is made from"));
    }
    let mut scratch = clip.rgba_frame();
    let mut first = vec![vec![0u8; w as usize * h as usize * 4]];
    let got = clip
        .decode_into(0, &mut first, &mut scratch)
        .map_err(|e| e.to_string())?;
    if got == 0 {
        return Err("no frame could be decoded".into());
    }
    let (tw, th) = thumb_size(w, h);
    let small = scale(&first[0], (w, h), (tw, th))?;
    encode_png(&small, tw, th)
}

/// RGBA `src` of `from` pixels resized to `to`.
fn scale(src: &[u8], from: (u32, u32), to: (u32, u32)) -> Result<Vec<u8>, String> {
    if from == to {
        return Ok(src.to_vec());
    }
    let src = ImageRef::new(from.0, from.1, src, PixelType::U8x4).map_err(|e| e.to_string())?;
    let mut dst = Image::new(to.0, to.1, PixelType::U8x4);
    Resizer::new()
        .resize(
            &src,
            &mut dst,
            &ResizeOptions::new()
                .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear))
                .use_alpha(false),
        )
        .map_err(|e| e.to_string())?;
    Ok(dst.into_vec())
}

/// RGBA pixels as an RGB PNG (a clip's pictures are opaque).
fn encode_png(rgba: &[u8], w: u32, h: u32) -> Result<Vec<u8>, String> {
    let rgb: Vec<u8> = rgba
        .chunks_exact(4)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().map_err(|e| e.to_string())?;
        writer.write_image_data(&rgb).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thumbnail_fits_the_box_keeps_the_aspect_and_is_never_enlarged() {
        assert_eq!(thumb_size(1920, 1080), (160, 90));
        assert_eq!(thumb_size(1080, 1920), (51, 90));
        assert_eq!(thumb_size(64, 48), (64, 48));
        assert_eq!(thumb_size(10_000, 1), (160, 1));
    }

    #[test]
    fn a_file_that_is_not_a_clip_is_remembered_with_its_reason() {
        let dir = framepipe_testkit::tmpdir("fp-web-thumb-bad");
        let bad = dir.join("not-a-clip.mp4");
        std::fs::write(&bad, b"not a video").unwrap();
        let thumbs = Thumbs::default();
        let file = bad.to_string_lossy().into_owned();
        let first = thumbs.get(&file);
        assert!(first.is_err(), "{first:?}");
        assert!(Arc::ptr_eq(&first, &thumbs.cached(&file).unwrap()));
    }
}
