//! The `monitor` tap on real frames from a `FramePool`, built through the registry.

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use framepipe_core::{
    Effect, EffectFactory, Element, Frame, FrameCtx, FramePool, InlineSlices, Mode, Rational,
    Registry, VideoInfo,
};

fn info(w: u32, h: u32) -> VideoInfo {
    VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(30, 1),
    }
}

fn factory(props: &[(&str, &str)]) -> framepipe_core::Result<Box<dyn EffectFactory>> {
    let mut r = Registry::new();
    framepipe_effects::register(&mut r);
    let given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match r.create("monitor", &given)? {
        Element::Effect(f) => Ok(f),
        other => panic!("monitor is not an effect: {other:?}"),
    }
}

/// Builds `monitor` for `input`, returns (output info, instance).
fn monitor(props: &[(&str, &str)], input: VideoInfo) -> (VideoInfo, Box<dyn Effect>) {
    let mut f = factory(props).unwrap();
    let out = f.negotiate(input).unwrap();
    (out, f.instantiate().unwrap())
}

/// A frame whose pixel (x, y) is `px(x, y)`.
fn frame(pool: &FramePool, px: impl Fn(usize, usize) -> [u8; 4]) -> Frame {
    let mut f = pool.acquire().unwrap();
    let w = pool.width() as usize;
    for (i, p) in f.data_mut().chunks_exact_mut(4).enumerate() {
        p.copy_from_slice(&px(i % w, i / w));
    }
    f.freeze()
}

fn shrink(e: &mut dyn Effect, src: &Frame, out: VideoInfo) -> Vec<u8> {
    let pool = FramePool::new(out.width, out.height, 1);
    let mut dst = pool.acquire().unwrap();
    e.process(&FrameCtx::new(0, 0), src, &mut dst, &InlineSlices)
        .unwrap();
    dst.data().to_vec()
}

#[test]
fn monitor_is_a_leaky_parallel_tap_of_320x180_by_default() {
    let mut r = Registry::new();
    framepipe_effects::register(&mut r);
    assert_eq!(
        r.lookup("monitor").unwrap().desc.default_mode,
        Mode::Parallel
    );
    let mut f = factory(&[]).unwrap();
    assert!(f.leaky_by_default());
    assert_eq!(f.default_mode(), Mode::Parallel);
    let out = f.negotiate(info(1920, 1080)).unwrap();
    assert_eq!(
        (out.width, out.height, out.rate),
        (320, 180, Rational::new(30, 1))
    );
    // Exactly the size asked, whatever the input's shape.
    let (out, _) = monitor(&[("width", "200"), ("height", "150")], info(1920, 1080));
    assert_eq!((out.width, out.height), (200, 150));
}

#[test]
fn a_zero_size_is_refused_naming_the_value() {
    let e = factory(&[("width", "0")]).err().unwrap().to_string();
    assert!(
        e.contains("'0'") && e.contains("width") && e.contains("monitor"),
        "{e}"
    );
    let e = factory(&[("height", "-3")]).err().unwrap().to_string();
    assert!(e.contains("'-3'") && e.contains("height"), "{e}");
    let e = factory(&[])
        .unwrap()
        .negotiate(info(0, 10))
        .unwrap_err()
        .to_string();
    assert_eq!(e, "monitor: bad frame size 0x10: empty input");
}

#[test]
fn a_solid_colour_stays_that_colour() {
    let pool = FramePool::new(333, 97, 1);
    let src = frame(&pool, |_, _| [12, 200, 77, 255]);
    let (out, mut e) = monitor(&[("width", "40"), ("height", "13")], info(333, 97));
    let got = shrink(e.as_mut(), &src, out);
    assert_eq!(got.len(), 40 * 13 * 4);
    assert!(got.chunks_exact(4).all(|p| p == [12, 200, 77, 255]));
}

#[test]
fn a_gradient_is_averaged_over_each_footprint() {
    // 5 columns to 2: footprints (0, 2.5] and (2.5, 5] hold the pixel centres 0.5, 1.5, 2.5
    // and 3.5, 4.5 (a centre on the boundary goes left): columns 0..3 and 3..5.
    // 4 rows to 2: rows 0..2 and 2..4.
    let pool = FramePool::new(5, 4, 1);
    let src = frame(&pool, |x, y| {
        [(x * 50) as u8, (y * 60) as u8, (x * 10 + y) as u8, 255]
    });
    let (out, mut e) = monitor(&[("width", "2"), ("height", "2")], info(5, 4));
    let got = shrink(e.as_mut(), &src, out);
    // R: (0 + 50 + 100) / 3 = 50, (150 + 200) / 2 = 175. G: (0 + 60) / 2 = 30, (120 + 180) / 2 = 150.
    // B, rows 0-1: (0+10+20)*2 + 3*1 = 63 / 6 = 10.5 -> 11; (30+40)*2 + 2*1 = 142 / 4 = 35.5 -> 36.
    // B, rows 2-3: (0+10+20)*2 + 3*5 = 75 / 6 = 12.5 -> 13; (30+40)*2 + 2*5 = 150 / 4 = 37.5 -> 38.
    let want: Vec<u8> = [
        [50, 30, 11, 255],
        [175, 30, 36, 255],
        [50, 150, 13, 255],
        [175, 150, 38, 255],
    ]
    .concat();
    assert_eq!(got, want);
}

#[test]
fn growing_takes_the_nearest_pixel() {
    let pool = FramePool::new(2, 1, 1);
    let src = frame(&pool, |x, _| [x as u8 * 100, 1, 2, 3]);
    let (out, mut e) = monitor(&[("width", "4"), ("height", "3")], info(2, 1));
    let got = shrink(e.as_mut(), &src, out);
    let row: Vec<u8> = [[0, 1, 2, 3], [0, 1, 2, 3], [100, 1, 2, 3], [100, 1, 2, 3]].concat();
    assert_eq!(got, row.repeat(3));
}

#[test]
fn the_box_matches_fast_image_resize_box_filter() {
    // The peer: fast_image_resize's box convolution (what `scale algorithm=box` runs) over the
    // same pixel sets. It rounds its fixed-point sums twice (an 8-bit intermediate after its
    // vertical pass), so it may differ by one step. Sizes where a pixel centre falls exactly on
    // a footprint boundary at a ratio not exact in binary (97 -> 10: 9.7) are left out: it
    // decides those in f64 arithmetic, we in exact integers, and the pixel may land on the
    // other side.
    for (iw, ih, ow, oh) in [
        (640u32, 360u32, 200u32, 150u32),
        (1000, 750, 64, 48),
        (97, 61, 9, 7),
    ] {
        let pool = FramePool::new(iw, ih, 1);
        let src = frame(&pool, |x, y| {
            let h = (x * 7 + y * 13) ^ (x * y);
            [
                (x * 255 / iw as usize) as u8,
                (y * 255 / ih as usize) as u8,
                h as u8,
                255,
            ]
        });
        let (out, mut e) = monitor(
            &[("width", &ow.to_string()), ("height", &oh.to_string())],
            info(iw, ih),
        );
        let ours = shrink(e.as_mut(), &src, out);
        let mut theirs = vec![0u8; (ow * oh * 4) as usize];
        let src_img = ImageRef::new(iw, ih, src.data(), PixelType::U8x4).unwrap();
        let mut dst_img = Image::from_slice_u8(ow, oh, &mut theirs, PixelType::U8x4).unwrap();
        Resizer::new()
            .resize(
                &src_img,
                &mut dst_img,
                &ResizeOptions::new()
                    .resize_alg(ResizeAlg::Convolution(FilterType::Box))
                    .use_alpha(false),
            )
            .unwrap();
        let diffs: Vec<u8> = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| a.abs_diff(*b))
            .collect();
        let max = *diffs.iter().max().unwrap();
        let off = diffs.iter().filter(|&&d| d > 0).count();
        eprintln!(
            "{iw}x{ih} -> {ow}x{oh}: max difference {max}, {off} of {} bytes differ",
            diffs.len()
        );
        assert!(max <= 1, "{iw}x{ih} -> {ow}x{oh}: differs by {max}");
    }
}

/// The plain definition: input pixel x belongs to output o when its centre x + 0.5 lies in
/// (o * in / out, (o + 1) * in / out], in exact integers (times 2 * out).
fn in_footprint(x: usize, o: usize, i: usize, n: usize) -> bool {
    let c = (2 * x + 1) * n;
    2 * o * i < c && c <= 2 * (o + 1) * i
}

#[test]
fn every_shrink_is_the_rounded_mean_of_its_footprint() {
    // Bands of 1-2 rows, of 8-row groups plus a remainder, and taller than 256 rows (the u32
    // path): 3x700 -> 2x2 has bands of 350 rows.
    for (iw, ih, ow, oh) in [
        (37u32, 29u32, 5u32, 4u32),
        (300, 90, 7, 5),
        (3, 700, 2, 2),
        (13, 1030, 3, 3),
    ] {
        let pool = FramePool::new(iw, ih, 1);
        let src = frame(&pool, |x, y| {
            let h = (x * 31 + y * 17) ^ (x * y * 7);
            [h as u8, (h >> 3) as u8, (x + y) as u8, (y * 3) as u8]
        });
        let (out, mut e) = monitor(
            &[("width", &ow.to_string()), ("height", &oh.to_string())],
            info(iw, ih),
        );
        let got = shrink(e.as_mut(), &src, out);
        let (iw, ih, ow, oh) = (iw as usize, ih as usize, ow as usize, oh as usize);
        let d = src.data();
        for oy in 0..oh {
            for ox in 0..ow {
                for c in 0..4 {
                    let (mut sum, mut n) = (0usize, 0usize);
                    for y in (0..ih).filter(|&y| in_footprint(y, oy, ih, oh)) {
                        for x in (0..iw).filter(|&x| in_footprint(x, ox, iw, ow)) {
                            sum += d[(y * iw + x) * 4 + c] as usize;
                            n += 1;
                        }
                    }
                    let want = ((sum + n / 2) / n) as u8;
                    assert_eq!(
                        got[(oy * ow + ox) * 4 + c],
                        want,
                        "{iw}x{ih} -> {ow}x{oh} at ({ox}, {oy}) channel {c}"
                    );
                }
            }
        }
    }
}
