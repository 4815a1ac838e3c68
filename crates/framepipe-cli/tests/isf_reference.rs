//! framepipe's ISF frames against the ISF reference renderer for the web (npm
//! `interactive-shader-format`, WebGL, in headless Chromium on SwiftShader), issue #24.
//!
//! First the reference itself is checked against pixels this test computes (a solid colour,
//! a gradient from `isf_FragNormCoord` and TIME, an image input passed through, a persistent
//! buffer's trail): that proves the harness (orientation, clock, image upload, buffers)
//! before anything is compared with it.
//!
//! One Chromium for the whole file (one test function), 64x48 frames.
mod browser;
mod common;
mod isf_ref;

use isf_ref::{diff, test_picture, Picture, Reference};
use serde_json::json;

const W: u32 = 64;
const H: u32 = 48;

/// A picture whose pixel (x, y from the top) is `f(x, y)`.
fn computed(f: impl Fn(u32, u32) -> [u8; 4]) -> Picture {
    let mut rgba = Vec::new();
    for y in 0..H {
        for x in 0..W {
            rgba.extend_from_slice(&f(x, y));
        }
    }
    Picture::new(W, H, rgba)
}

/// A normalized value as 8 bits, as GL stores it (nearest).
fn unorm(v: f64) -> u8 {
    (v.clamp(0.0, 1.0) * 255.0).round() as u8
}

fn frames(times: &[(f64, u32)]) -> serde_json::Value {
    json!(times
        .iter()
        .map(|&(t, i)| json!({ "time": t, "frameIndex": i }))
        .collect::<Vec<_>>())
}

/// The reference renders what this test computes: the harness draws upright, at the given
/// TIME and FRAMEINDEX, takes image inputs upright, and keeps persistent buffers across draws.
fn reference_renders_computed_pictures(r: &mut Reference) {
    // A solid colour.
    let solid = r.render_isf(&json!({
        "fs": "/*{ \"INPUTS\": [] }*/\nvoid main() { gl_FragColor = vec4(0.2, 0.4, 0.6, 1.0); }",
        "width": W, "height": H, "frames": frames(&[(0.0, 0)]),
    }));
    let want = computed(|_, _| [51, 102, 153, 255]);
    let d = diff(&solid[0], &want);
    assert!(d.max <= 1, "solid colour: {d}");

    // A gradient: x to the right, y up (the top row is y = 1), TIME in blue.
    let grad = r.render_isf(&json!({
        "fs": "/*{ \"INPUTS\": [] }*/\nvoid main() { gl_FragColor = vec4(isf_FragNormCoord, TIME / 10.0, 1.0); }",
        "width": W, "height": H, "frames": frames(&[(2.5, 0), (7.5, 1)]),
    }));
    for (pic, t) in grad.iter().zip([2.5, 7.5]) {
        let want = computed(|x, y| {
            [
                unorm((x as f64 + 0.5) / W as f64),
                unorm((H as f64 - y as f64 - 0.5) / H as f64),
                unorm(t / 10.0),
                255,
            ]
        });
        let d = diff(pic, &want);
        assert!(d.max <= 1, "gradient at TIME {t}: {d}");
    }

    // An image input, passed through, and FRAMEINDEX.
    let img = test_picture(W, H, 0);
    let through = r.render_isf(&json!({
        "fs": "/*{ \"INPUTS\": [ { \"NAME\": \"inputImage\", \"TYPE\": \"image\" } ] }*/\n\
               void main() { vec4 c = IMG_THIS_PIXEL(inputImage); gl_FragColor = vec4(c.rg, float(FRAMEINDEX) / 4.0, 1.0); }",
        "width": W, "height": H, "images": { "inputImage": img.to_json() },
        "frames": frames(&[(0.0, 0), (0.04, 3)]),
    }));
    for (pic, n) in through.iter().zip([0u32, 3]) {
        let want = computed(|x, y| {
            let p = img.px(x, y);
            [p[0], p[1], unorm(n as f64 / 4.0), 255]
        });
        let d = diff(pic, &want);
        assert!(d.max <= 1, "image input at FRAMEINDEX {n}: {d}");
    }

    // A persistent buffer: each frame halves what it held and lights column FRAMEINDEX.
    let trail = r.render_isf(&json!({
        "fs": "/*{ \"INPUTS\": [], \"PASSES\": [ { \"TARGET\": \"acc\", \"PERSISTENT\": true }, { } ] }*/\n\
               void main() {\n\
                 if (PASSINDEX == 0) {\n\
                   float lit = floor(gl_FragCoord.x / 8.0) == float(FRAMEINDEX) ? 1.0 : 0.0;\n\
                   gl_FragColor = max(IMG_NORM_PIXEL(acc, isf_FragNormCoord) * 0.5, vec4(lit));\n\
                 } else {\n\
                   gl_FragColor = vec4(IMG_NORM_PIXEL(acc, isf_FragNormCoord).rgb, 1.0);\n\
                 }\n\
               }",
        "width": W, "height": H, "frames": frames(&[(0.0, 0), (0.1, 1), (0.2, 2), (0.3, 3)]),
    }));
    let last = trail.last().unwrap();
    let want = computed(|x, _| {
        let col = x / 8;
        // column c was lit at frame c and halved (8-bit, nearest) 3 - c times since
        let mut v = 255f64;
        if col > 3 {
            v = 0.0;
        } else {
            for _ in 0..(3 - col) {
                v = (v / 2.0).round();
            }
        }
        [v as u8, v as u8, v as u8, 255]
    });
    let d = diff(last, &want);
    assert!(d.max <= 1, "persistent buffer after 4 frames: {d}");
}

/// The reference renderer, checked against computed pictures first, then framepipe's frames
/// against it.
#[test]
fn isf_frames_match_the_reference_renderer() {
    let Some(mut r) = Reference::start() else {
        return;
    };
    assert!(
        r.renderer.contains("SwiftShader"),
        "WebGL here is {:?}, not SwiftShader: the stated tolerances are for SwiftShader",
        r.renderer
    );
    reference_renders_computed_pictures(&mut r);
}
