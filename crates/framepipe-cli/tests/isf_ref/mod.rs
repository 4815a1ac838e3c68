//! The reference renderers framepipe's ISF and gl-transitions frames are checked against
//! (issue #24): the ISF reference renderer for the web (npm `interactive-shader-format`) and
//! gl-transitions' own renderer (npm `gl-transition`, the collection from npm
//! `gl-transitions`), both WebGL, in one headless Chromium driven over the DevTools protocol
//! ([`crate::browser::cdp`]).
//!
//! The packages are pinned in `tests/isf-ref/package.json` + `package-lock.json` and installed
//! there by `scripts/install-deps` (`npm ci`). `tests/isf-ref/harness.js` (see its header for
//! where it steps into the renderers, and why) is bundled by the pinned esbuild into one
//! script, evaluated in a blank page: no server, no file URL.
//!
//! WebGL without a GPU: Chromium runs it on SwiftShader (ANGLE over SwiftShader's Vulkan,
//! "SwiftShader Device (Subzero)"), WebGL 1.0 / GLSL ES 1.0. Debian's Chromium 156 gives it
//! even with `--disable-gpu`; the flags below ask for it explicitly, as newer Chromium
//! releases want (`--enable-unsafe-swiftshader`).
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::browser::cdp;
use crate::common::run;
use serde_json::{json, Value};

/// `tests/isf-ref` in the repository: the pinned npm packages and the harness.
pub fn npm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/isf-ref")
}

/// An RGBA picture, top row first, 8 bits a channel.
#[derive(Clone, Debug, PartialEq)]
pub struct Picture {
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
}

impl Picture {
    pub fn new(width: u32, height: u32, rgba: Vec<u8>) -> Picture {
        assert_eq!(rgba.len(), (width * height * 4) as usize);
        Picture {
            width,
            height,
            rgba,
        }
    }

    /// The picture as the harness takes it.
    pub fn to_json(&self) -> Value {
        json!({ "width": self.width, "height": self.height, "rgba": base64(&self.rgba) })
    }

    pub fn px(&self, x: u32, y: u32) -> [u8; 4] {
        let i = ((y * self.width + x) * 4) as usize;
        self.rgba[i..i + 4].try_into().unwrap()
    }
}

/// An opaque test picture with smooth ramps, hard edges and a bright square, so that
/// filters have something to do everywhere; `seed` shifts it (two different pictures for a
/// transition's two inputs).
pub fn test_picture(width: u32, height: u32, seed: u32) -> Picture {
    let mut rgba = Vec::with_capacity((width * height * 4) as usize);
    for y in 0..height {
        for x in 0..width {
            let xs = (x + seed * 7) % width;
            let r = (xs * 255 / (width - 1)) as u8;
            let g = (y * 255 / (height - 1)) as u8;
            let b = if (xs / 8 + y / 8 + seed) & 1 == 0 {
                200
            } else {
                40
            };
            let in_square =
                (width / 4..width / 2).contains(&xs) && (height / 4..height / 2).contains(&y);
            if in_square {
                rgba.extend_from_slice(&[250, 250, 250, 255]);
            } else {
                rgba.extend_from_slice(&[r, g, b, 255]);
            }
        }
    }
    Picture::new(width, height, rgba)
}

/// How far apart two pictures of one size are, per channel value (alpha included).
#[derive(Clone, Copy, Debug)]
pub struct Diff {
    /// The largest absolute difference of one channel of one pixel.
    pub max: u8,
    /// The mean absolute difference over all channels of all pixels.
    pub mean: f64,
    /// Pixels with at least one channel more than 8 apart.
    pub over8: usize,
    /// Where `max` is (x, y from the top).
    pub at: (u32, u32),
}

impl std::fmt::Display for Diff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "max {} at {:?}, mean {:.3}, {} pixels over 8",
            self.max, self.at, self.mean, self.over8
        )
    }
}

impl Diff {
    /// Whether `self` is further off than `other`: a larger max, or the same max and a larger
    /// mean (a report names the worst frame or progress of a case).
    pub fn worse_than(&self, other: &Diff) -> bool {
        self.max > other.max || (self.max == other.max && self.mean > other.mean)
    }
}

/// The lines of a comparison against a reference renderer, each within its tolerance or not:
/// printed whole (the measured errors are the test's figures), then the test fails naming the
/// lines over tolerance.
#[derive(Default)]
pub struct Report {
    lines: Vec<(String, bool)>,
}

impl Report {
    /// Adds a line, within its tolerance or not.
    pub fn push(&mut self, line: String, within: bool) {
        self.lines.push((line, within));
    }

    /// Adds lines.
    pub fn extend(&mut self, lines: impl IntoIterator<Item = (String, bool)>) {
        self.lines.extend(lines);
    }

    /// Prints `title` and every line, then fails if any line is over its tolerance.
    pub fn finish(self, title: &str) {
        println!("{title}:");
        for (line, _) in &self.lines {
            println!("  {line}");
        }
        let failed: Vec<&String> = self
            .lines
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(l, _)| l)
            .collect();
        assert!(failed.is_empty(), "over tolerance: {failed:#?}");
    }
}

/// With `FP_ISF_REF_DUMP=DIR`: writes both sides of one comparison as
/// `DIR/STEM-framepipe.png` and `DIR/STEM-reference.png` (`STEM` made a file name).
pub fn dump(stem: &str, framepipe: &Picture, reference: &Picture) {
    let Some(dir) = std::env::var_os("FP_ISF_REF_DUMP").map(PathBuf::from) else {
        return;
    };
    let stem = stem.replace(['/', ' ', '(', ')'], "_");
    write_png(&dir.join(format!("{stem}-framepipe.png")), framepipe);
    write_png(&dir.join(format!("{stem}-reference.png")), reference);
}

pub fn diff(a: &Picture, b: &Picture) -> Diff {
    assert_eq!(
        (a.width, a.height),
        (b.width, b.height),
        "pictures of different sizes"
    );
    let (mut max, mut sum, mut over8, mut at) = (0u8, 0u64, 0usize, (0, 0));
    for (i, (pa, pb)) in a.rgba.chunks(4).zip(b.rgba.chunks(4)).enumerate() {
        let mut over = false;
        for (ca, cb) in pa.iter().zip(pb) {
            let d = ca.abs_diff(*cb);
            sum += d as u64;
            over |= d > 8;
            if d > max {
                max = d;
                at = (i as u32 % a.width, i as u32 / a.width);
            }
        }
        over8 += over as usize;
    }
    Diff {
        max,
        mean: sum as f64 / a.rgba.len() as f64,
        over8,
        at,
    }
}

/// Writes `p` as an RGBA PNG (`FP_ISF_REF_DUMP=DIR` has the tests write both sides' frames).
pub fn write_png(path: &Path, p: &Picture) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut enc = png::Encoder::new(file, p.width, p.height);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header()
        .unwrap()
        .write_image_data(&p.rgba)
        .unwrap();
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Bundles `tests/isf-ref/harness.js` with the pinned esbuild into `out`.
pub fn bundle(out: &Path) {
    let dir = npm_dir();
    let done = run(
        Command::new(dir.join("node_modules/.bin/esbuild"))
            .current_dir(&dir)
            .args([
                "harness.js",
                "--bundle",
                "--alias:crypto=./crypto-stub.js",
                "--log-level=warning",
            ])
            .arg(format!("--outfile={}", out.display())),
        Duration::from_secs(60),
    );
    assert!(
        done.status.success(),
        "esbuild: {}",
        String::from_utf8_lossy(&done.stderr)
    );
}

/// Why the reference cannot run here, if it cannot: no Chromium, or the npm packages not
/// installed. The tests print it as SKIPPED, as the web tests do without Chromium.
pub fn missing() -> Option<String> {
    if cdp::chromium().is_none() {
        return Some("chromium is not installed (scripts/install-deps installs it)".into());
    }
    if !npm_dir().join("node_modules/.bin/esbuild").exists() {
        return Some(format!(
            "the reference renderers are not installed in {} (scripts/install-deps runs npm ci there)",
            npm_dir().display()
        ));
    }
    None
}

/// One headless Chromium with the harness loaded.
pub struct Reference {
    browser: cdp::Browser,
    /// WebGL's renderer string (names SwiftShader here).
    pub renderer: String,
    _dir: framepipe_testkit::TestDir,
}

impl Reference {
    /// Starts Chromium and loads the harness; `None` (and SKIPPED printed) when [`missing`].
    pub fn start() -> Option<Reference> {
        if let Some(why) = missing() {
            println!("SKIPPED: {why}");
            return None;
        }
        let dir = crate::common::tmpdir("isf-ref");
        let js = dir.join("harness.bundle.js");
        bundle(&js);
        let mut browser = cdp::Browser::start_with(
            &cdp::chromium().unwrap(),
            &["--enable-unsafe-swiftshader", "--use-angle=swiftshader"],
        );
        let mut script = std::fs::read_to_string(&js).unwrap();
        script.push_str(";true");
        assert_eq!(browser.eval(&script), json!(true), "the harness loads");
        let info = browser.eval("isfRef.glInfo()");
        let renderer = info["renderer"].as_str().unwrap_or_default().to_string();
        Some(Reference {
            browser,
            renderer,
            _dir: dir,
        })
    }

    /// `call` (an `isfRef` function applied to `job`), its error caught in the page and
    /// reported in a line, not with the whole job.
    fn call(&mut self, call: &str, job: &Value) -> Value {
        let v = self.browser.eval(&format!(
            "(() => {{ try {{ return isfRef.{call}({job}); }} \
             catch (e) {{ return {{ error: String((e && e.message) || e) }}; }} }})()"
        ));
        if let Some(e) = v.get("error") {
            panic!("{call}: {}", e.as_str().unwrap_or_default());
        }
        v
    }

    fn pictures(v: Value, width: u32, height: u32) -> Vec<Picture> {
        v.as_array()
            .unwrap_or_else(|| panic!("the harness returned {v}"))
            .iter()
            .map(|p| Picture::new(width, height, cdp::base64(p.as_str().unwrap())))
            .collect()
    }

    /// The ISF reference renderer's frames of `job` (see `renderIsf` in harness.js): `fs`,
    /// `vs`, `width`, `height`, `inputs`, `images` (name: [`Picture::to_json`]), `frames`
    /// ([{time, frameIndex, timeDelta, inputs}]).
    pub fn render_isf(&mut self, job: &Value) -> Vec<Picture> {
        let v = self.call("renderIsf", job);
        Self::pictures(
            v,
            job["width"].as_u64().unwrap() as u32,
            job["height"].as_u64().unwrap() as u32,
        )
    }

    /// gl-transition's frames of the transition `job.name` at each of `job.progress`, from
    /// `job.from` to `job.to` (see `renderTransition` in harness.js).
    pub fn render_transition(&mut self, job: &Value) -> Vec<Picture> {
        let v = self.call("renderTransition", job);
        Self::pictures(
            v,
            job["width"].as_u64().unwrap() as u32,
            job["height"].as_u64().unwrap() as u32,
        )
    }

    /// Any expression in the page (the harness is `isfRef`).
    pub fn eval(&mut self, expr: &str) -> Value {
        self.browser.eval(expr)
    }
}
