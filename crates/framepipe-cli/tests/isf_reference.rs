//! framepipe's ISF frames against the ISF reference renderer for the web (npm
//! `interactive-shader-format`, WebGL, in headless Chromium on SwiftShader), issue #24.
//!
//! First the reference itself is checked against pixels this test computes (a solid colour,
//! a gradient from `isf_FragNormCoord` and TIME, an image input passed through, a persistent
//! buffer's trail): that proves the harness (orientation, clock, image upload, buffers)
//! before anything is compared with it.
//!
//! Then framepipe's frames (`framepipe_gpu::isf::render_frames_with`, on this machine's GL:
//! llvmpipe here) against the reference's, same inputs, same TIME and FRAMEINDEX, frame by
//! frame: the spec-feature shaders of `tests/isf-ref/spec` (every input type, three passes
//! with a sized one, a persistent buffer, a float buffer), Vidvox's `fade.fs` (a transition)
//! and the package's own examples `edges.fs` + `edges.vs`, `rgbglitchmod.fs`, `feedback.fs`
//! (ISF 1.0, persistent) and `tapestryfract.fs` (a generator).
//!
//! Tolerance and measured error (8-bit channel values, llvmpipe against SwiftShader):
//! smooth shaders may differ by 4 at most and 0.1 on average; measured at most 2 (edges, on
//! a Sobel edge), 1 elsewhere, mean at most 0.015; the float buffer matches exactly.
//! `tapestryfract` is an escape-time fractal: float rounding tips a few pixels (measured
//! 21 of 3072 more than 8 apart, mean 0.19): at most 1 % of pixels, mean 0.5.
//! Left out: `badtv.fs` (takes pow() of negative numbers, undefined in GLSL: llvmpipe gives
//! NaN, SwiftShader a value) and Vidvox `poly_glitch.fs` (WebGL 1 refuses its loop, bounded by
//! a uniform).
//!
//! One Chromium for the whole file (one test function), 64x48 frames.
mod browser;
mod common;
mod isf_ref;

use std::path::{Path, PathBuf};

use isf_ref::{diff, test_picture, Diff, Picture, Reference, Report};
use serde_json::{json, Value};

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
    let mut report = Report::default();
    for case in cases() {
        let (line, within) = compare(&mut r, &case);
        report.push(line, within);
    }
    report.extend(float_buffers_hold_what_8_bits_cannot(&mut r));
    report.finish(&format!(
        "framepipe (llvmpipe) against the ISF reference renderer ({})",
        r.renderer
    ));
}

/// Where the shaders are: the spec-feature ones written for these checks, the Vidvox
/// fixtures of the parser, the examples of the npm package.
fn spec(name: &str) -> PathBuf {
    isf_ref::npm_dir().join("spec").join(name)
}
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../framepipe-isf/tests/fixtures")
        .join(name)
}
fn npm_example(name: &str) -> PathBuf {
    isf_ref::npm_dir()
        .join("node_modules/interactive-shader-format/examples")
        .join(name)
}

/// How close framepipe's frames must be to the reference's: the largest difference of one
/// channel of one pixel, and the mean over all channels of all pixels (8-bit values).
#[derive(Clone, Copy)]
struct Tolerance {
    max: u8,
    mean: f64,
    /// Pixels allowed to have a channel more than 8 apart.
    over8: usize,
}

/// One shader rendered by both, with the same inputs: `props` as framepipe takes them (text),
/// `inputs` as the reference takes them (JSON values), `events` true on frame 0 only (as
/// framepipe fires an event property given as "true"), `images` in link order.
struct Case {
    name: &'static str,
    fs: PathBuf,
    props: Vec<(&'static str, &'static str)>,
    inputs: Value,
    events: Vec<&'static str>,
    images: Vec<(&'static str, Picture)>,
    rate: u32,
    frames: usize,
    tol: Tolerance,
}

fn compare(r: &mut Reference, c: &Case) -> (String, bool) {
    let vs = c.fs.with_extension("vs");
    let mut frames = Vec::new();
    for n in 0..c.frames {
        let mut inputs = json!({});
        for e in &c.events {
            inputs[*e] = json!(n == 0);
        }
        frames.push(json!({
            "time": n as f64 / c.rate as f64,
            "timeDelta": if n == 0 { 0.0 } else { 1.0 / c.rate as f64 },
            "frameIndex": n,
            "inputs": inputs,
        }));
    }
    let images: serde_json::Map<String, Value> = c
        .images
        .iter()
        .map(|(name, p)| (name.to_string(), p.to_json()))
        .collect();
    let want = r.render_isf(&json!({
        "fs": std::fs::read_to_string(&c.fs).unwrap(),
        "vs": vs.exists().then(|| std::fs::read_to_string(&vs).unwrap()),
        "width": W, "height": H, "inputs": c.inputs, "images": images, "frames": frames,
    }));
    let rate = c.rate.to_string();
    let mut props = c.props.clone();
    if c.images.is_empty() {
        // a source's rate; an effect runs at its input's, 30 fps in render_frames_with
        props.push(("rate", &rate));
    } else {
        assert_eq!(c.rate, 30, "{}: an effect is rendered at 30 fps", c.name);
    }
    for e in &c.events {
        props.push((e, "true"));
    }
    let pictures: Vec<&[u8]> = c.images.iter().map(|(_, p)| p.rgba.as_slice()).collect();
    let got = framepipe_gpu::isf::render_frames_with(&c.fs, &props, (W, H), c.frames, &pictures)
        .unwrap_or_else(|e| panic!("{}: framepipe: {e}", c.name));
    let mut worst = Diff {
        max: 0,
        mean: 0.0,
        over8: 0,
        at: (0, 0),
    };
    let mut worst_frame = 0;
    let mut mean_max: f64 = 0.0;
    let mut over8_max = 0;
    for (n, (g, w)) in got.into_iter().zip(&want).enumerate() {
        let g = Picture::new(W, H, g);
        isf_ref::dump(&format!("{}-{n}", c.name.replace('.', "_")), &g, w);
        let d = diff(&g, w);
        if d.worse_than(&worst) {
            worst = d;
            worst_frame = n;
        }
        mean_max = mean_max.max(d.mean);
        over8_max = over8_max.max(d.over8);
    }
    let within = worst.max <= c.tol.max && mean_max <= c.tol.mean && over8_max <= c.tol.over8;
    let line = format!(
        "{:<22} {} frames: max {:>3} (frame {worst_frame} at {:?}), mean {:.3}, {} px over 8 \
         (worst frame); tolerance max {}, mean {}, {} px over 8",
        c.name,
        c.frames,
        worst.max,
        worst.at,
        mean_max,
        over8_max,
        c.tol.max,
        c.tol.mean,
        c.tol.over8
    );
    (line, within)
}

/// The shaders compared, each with the inputs it gets (not its defaults, where the case says
/// so) and its tolerance; see the module doc for the measured errors.
fn cases() -> Vec<Case> {
    let img = test_picture(W, H, 0);
    let img2 = test_picture(W, H, 3);
    // Smooth shaders: measured max 2, mean <= 0.02 (see the module doc).
    let strict = Tolerance {
        max: 4,
        mean: 0.1,
        over8: 0,
    };
    // A fractal: a few pixels where float rounding tips an escape-time loop.
    let chaotic = Tolerance {
        max: 255,
        mean: 0.5,
        over8: (W * H / 100) as usize,
    };
    vec![
        Case {
            name: "spec/inputs (set)",
            fs: spec("inputs.fs"),
            props: vec![
                ("invert", "true"),
                ("channel", "0"),
                ("gain", "1.25"),
                ("center", "40,10"),
                ("tint", "0.5,1,0.75,1"),
            ],
            inputs: json!({ "invert": true, "channel": 0, "gain": 1.25, "center": [40.0, 10.0],
                            "tint": [0.5, 1.0, 0.75, 1.0] }),
            events: vec!["flash"],
            images: vec![("inputImage", img.clone())],
            rate: 30,
            frames: 3,
            tol: strict,
        },
        Case {
            name: "spec/inputs (defaults)",
            fs: spec("inputs.fs"),
            props: vec![],
            inputs: json!({}),
            events: vec![],
            images: vec![("inputImage", img.clone())],
            rate: 30,
            frames: 2,
            tol: strict,
        },
        Case {
            name: "spec/multipass",
            fs: spec("multipass.fs"),
            props: vec![("speed", "0.5")],
            inputs: json!({ "speed": 0.5 }),
            events: vec![],
            images: vec![],
            rate: 4,
            frames: 3,
            tol: strict,
        },
        Case {
            name: "spec/persistent",
            fs: spec("persistent.fs"),
            props: vec![],
            inputs: json!({}),
            events: vec![],
            images: vec![],
            rate: 8,
            frames: 6,
            tol: strict,
        },
        Case {
            name: "Vidvox/fade",
            fs: fixture("fade.fs"),
            props: vec![("progress", "0.3")],
            inputs: json!({ "progress": 0.3 }),
            events: vec![],
            images: vec![("startImage", img.clone()), ("endImage", img2.clone())],
            rate: 30,
            frames: 1,
            tol: strict,
        },
        Case {
            name: "npm/edges (.vs)",
            fs: npm_example("edges.fs"),
            props: vec![],
            inputs: json!({}),
            events: vec![],
            images: vec![("inputImage", img.clone())],
            rate: 30,
            frames: 1,
            tol: strict,
        },
        Case {
            name: "npm/rgbglitchmod",
            fs: npm_example("rgbglitchmod.fs"),
            props: vec![],
            inputs: json!({}),
            events: vec![],
            images: vec![("inputImage", img.clone())],
            rate: 30,
            frames: 3,
            tol: strict,
        },
        Case {
            name: "npm/feedback",
            fs: npm_example("feedback.fs"),
            props: vec![],
            inputs: json!({}),
            events: vec![],
            images: vec![("inputImage", img.clone())],
            rate: 30,
            frames: 3,
            tol: strict,
        },
        Case {
            name: "npm/tapestryfract",
            fs: npm_example("tapestryfract.fs"),
            props: vec![],
            inputs: json!({}),
            events: vec![],
            images: vec![],
            rate: 10,
            frames: 2,
            tol: chaotic,
        },
    ]
}

/// `spec/float.fs`: a FLOAT buffer keeps 8x values, negative values and 1/512 steps, in
/// framepipe and in the reference (with OES_texture_float): both against the picture
/// computed here (8-bit storage would give red at most 0.125, green 1 and blue 0).
fn float_buffers_hold_what_8_bits_cannot(r: &mut Reference) -> Vec<(String, bool)> {
    let fs = spec("float.fs");
    let n = 4;
    let wide = computed(|x, y| {
        [
            unorm((x as f64 + 0.5) / W as f64),
            unorm((H as f64 - y as f64 - 0.5) / H as f64),
            unorm(n as f64 / 512.0 * 64.0),
            255,
        ]
    });
    let ours = framepipe_gpu::isf::render_frames(&fs, &[("rate", "30")], (W, H), n)
        .unwrap_or_else(|e| panic!("spec/float: framepipe: {e}"));
    let ours = Picture::new(W, H, ours.last().unwrap().clone());
    let d = diff(&ours, &wide);
    let mut lines = vec![(
        format!("spec/float, framepipe against the picture computed here: {d}; tolerance max 1"),
        d.max <= 1,
    )];
    let frames: Vec<Value> = (0..n)
        .map(|i| json!({ "time": i as f64 / 30.0, "frameIndex": i }))
        .collect();
    let theirs = r.render_isf(&json!({
        "fs": std::fs::read_to_string(&fs).unwrap(), "width": W, "height": H, "frames": frames,
    }));
    let d = diff(theirs.last().unwrap(), &wide);
    lines.push((
        format!(
            "spec/float, the reference against the picture computed here: {d}; tolerance max 1"
        ),
        d.max <= 1,
    ));
    let d = diff(&ours, theirs.last().unwrap());
    lines.push((
        format!("spec/float, framepipe against the reference: {d}"),
        d.max <= 2,
    ));
    lines
}
