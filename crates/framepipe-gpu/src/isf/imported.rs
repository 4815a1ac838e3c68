//! `IMPORTED` images: PNG (`png`) or JPEG (`zune-jpeg`) files beside the shader, decoded once
//! when the element is built into RGBA8, uploaded by each node on its first render.
//!
//! A path is relative to the `.fs` file's folder (absolute paths are as written). The file is
//! read as every user file is ([`framepipe_isf::read_bytes`]: a regular file, bounded), and
//! its size is checked against the memory budget before it is decoded
//! ([`framepipe_core::Limits::check_frame`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use framepipe_core::Limits;

/// The largest image file read (64 MiB).
pub const MAX_IMAGE_FILE_BYTES: u64 = 64 << 20;

/// A decoded image: RGBA8, rows bottom-up (GL's order: row 0 is the picture's bottom row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picture {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 4` bytes, bottom row first.
    pub rgba: Vec<u8>,
}

/// An imported image of a shader: its sampler's name and its pixels.
#[derive(Debug, Clone)]
pub struct Image {
    /// The sampler's name.
    pub name: String,
    /// The pixels, shared by every instance.
    pub picture: Arc<Picture>,
}

/// Where `path` (as written in `IMPORTED`) lies for the shader file `fs`.
pub fn resolve(fs: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        fs.parent().unwrap_or(Path::new(".")).join(p)
    }
}

/// Reads and decodes the image at `path`; the error names the file and what is wrong.
pub fn load(path: &Path) -> Result<Picture, String> {
    let shown = path.display();
    let bytes = framepipe_isf::read_bytes(path, MAX_IMAGE_FILE_BYTES)
        .map_err(|e| format!("cannot read the image {shown}: {e}"))?;
    let top_down = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        png(&bytes).map_err(|e| format!("the PNG image {shown}: {e}"))?
    } else if bytes.starts_with(&[0xff, 0xd8]) {
        jpeg(&bytes).map_err(|e| format!("the JPEG image {shown}: {e}"))?
    } else {
        return Err(format!(
            "the image {shown} is neither PNG nor JPEG (the formats IMPORTED images may have)"
        ));
    };
    Ok(flip(top_down))
}

/// Rows reversed: top-down pictures to GL's bottom-up order (and back).
pub fn flip(mut p: Picture) -> Picture {
    let row = p.width as usize * 4;
    let mut out = Vec::with_capacity(p.rgba.len());
    for r in p.rgba.chunks_exact(row).rev() {
        out.extend_from_slice(r);
    }
    p.rgba = out;
    p
}

fn check_size(width: u32, height: u32) -> Result<(), String> {
    Limits::current()
        .check_frame("an IMPORTED image", width, height)
        .map_err(|e| e.to_string())
}

fn png(bytes: &[u8]) -> Result<Picture, String> {
    let limits = png::Limits {
        bytes: Limits::current().max_memory as usize / 8,
    };
    let mut d = png::Decoder::new_with_limits(bytes, limits);
    d.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut r = d.read_info().map_err(|e| e.to_string())?;
    let (w, h) = {
        let i = r.info();
        (i.width, i.height)
    };
    check_size(w, h)?;
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).map_err(|e| e.to_string())?;
    let px = w as usize * h as usize;
    let mut rgba = Vec::with_capacity(px * 4);
    let data = &buf[..info.buffer_size()];
    use png::ColorType::*;
    match info.color_type {
        Rgba => rgba.extend_from_slice(&data[..px * 4]),
        Rgb => data[..px * 3]
            .chunks_exact(3)
            .for_each(|c| rgba.extend_from_slice(&[c[0], c[1], c[2], 255])),
        GrayscaleAlpha => data[..px * 2]
            .chunks_exact(2)
            .for_each(|c| rgba.extend_from_slice(&[c[0], c[0], c[0], c[1]])),
        Grayscale => data[..px]
            .iter()
            .for_each(|&g| rgba.extend_from_slice(&[g, g, g, 255])),
        Indexed => return Err("an indexed image was not expanded".into()),
    }
    Ok(Picture {
        width: w,
        height: h,
        rgba,
    })
}

fn jpeg(bytes: &[u8]) -> Result<Picture, String> {
    use zune_jpeg::zune_core::colorspace::ColorSpace;
    use zune_jpeg::zune_core::options::DecoderOptions;
    let max = framepipe_core::limits::MAX_DIMENSION as usize;
    let opts = DecoderOptions::default()
        .jpeg_set_out_colorspace(ColorSpace::RGBA)
        .set_max_width(max)
        .set_max_height(max);
    let mut d = zune_jpeg::JpegDecoder::new_with_options(bytes, opts);
    d.decode_headers().map_err(|e| format!("{e:?}"))?;
    let (w, h) = d.dimensions().ok_or("no size in its header")?;
    check_size(w as u32, h as u32)?;
    let rgba = d.decode().map_err(|e| format!("{e:?}"))?;
    if rgba.len() != w * h * 4 {
        return Err(format!(
            "decoded to {} bytes, not the {} of {w}x{h} RGBA",
            rgba.len(),
            w * h * 4
        ));
    }
    Ok(Picture {
        width: w as u32,
        height: h as u32,
        rgba,
    })
}
