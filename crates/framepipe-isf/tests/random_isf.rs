//! The quick, seeded version of the `isf_parser` fuzz target
//! (`fuzz/fuzz_targets/isf_parser.rs`, run for millions of inputs by `scripts/fuzz`): ISF files
//! built from pieces of real and broken headers and GLSL, some mutated byte by byte, each
//! checked for the same properties as the target.

mod properties;

use framepipe_testkit::fuzz::Inputs;
use properties::check_isf;

/// Entries of `INPUTS`, good and bad.
const INPUTS: &[&str] = &[
    r#"{ "NAME": "inputImage", "TYPE": "image" }"#,
    r#"{ "NAME": "startImage", "TYPE": "image" }"#,
    r#"{ "NAME": "endImage", "TYPE": "image" }"#,
    r#"{ "NAME": "progress", "TYPE": "float" }"#,
    r#"{ "NAME": "amount", "TYPE": "float", "MIN": 0, "MAX": 2, "DEFAULT": 1 }"#,
    r#"{ "NAME": "amount", "TYPE": "float", "MIN": "x" }"#,
    r#"{ "NAME": "on", "TYPE": "bool", "DEFAULT": 1 }"#,
    r#"{ "NAME": "go", "TYPE": "event" }"#,
    r#"{ "NAME": "mode", "TYPE": "long", "VALUES": [0, 1], "LABELS": ["a", "b"] }"#,
    r#"{ "NAME": "mode", "TYPE": "long", "VALUES": [0, 1e10], "LABELS": ["a"] }"#,
    r#"{ "NAME": "pt", "TYPE": "point2D", "DEFAULT": [0, 0], "MIN": [0], "MAX": [1, 1] }"#,
    r#"{ "NAME": "tint", "TYPE": "color", "DEFAULT": [1, 0, 0, 1] }"#,
    r#"{ "NAME": "wave", "TYPE": "audio", "MAX": 64 }"#,
    r#"{ "NAME": "fft", "TYPE": "audioFFT", "MAX": -1 }"#,
    r#"{ "NAME": "TIME", "TYPE": "float" }"#,
    r#"{ "NAME": "a b", "TYPE": "cube" }"#,
    r#"{ "TYPE": "float" }"#,
    r#"3"#,
];

/// Entries of `PASSES`.
const PASSES: &[&str] = &[
    r#"{}"#,
    r#"{ "TARGET": "buf" }"#,
    r#"{ "TARGET": "buf", "PERSISTENT": true, "FLOAT": true }"#,
    r#"{ "TARGET": "buf", "PERSISTENT": false }"#,
    r#"{ "TARGET": "small", "WIDTH": "floor($WIDTH/4.0)", "HEIGHT": "max($HEIGHT*$amount, 1)" }"#,
    r#"{ "TARGET": "small", "WIDTH": "$WIDTH/(", "HEIGHT": 1e400 }"#,
    r#"{ "TARGET": "row", "WIDTH": 16, "HEIGHT": "1", "PERSISTENT": "yes" }"#,
    r#"{ "TARGET": "inputImage" }"#,
    r#"{ "TARGET": 1 }"#,
];

/// Other top-level keys.
const TOP: &[&str] = &[
    r#""ISFVSN": "2""#,
    r#""ISFVSN": "2.1.1""#,
    r#""ISFVSN": 1"#,
    r#""ISFVSN": "x.y""#,
    r#""VSN": 3"#,
    r#""DESCRIPTION": "d""#,
    r#""CREDIT": ["x"]"#,
    r#""CATEGORIES": ["a", "b"]"#,
    r#""PERSISTENT_BUFFERS": ["buf", "old"]"#,
    r#""PERSISTENT_BUFFERS": { "buf": { "WIDTH": "$WIDTH/2", "FLOAT": 1 } }"#,
    r#""IMPORTED": { "noise": { "PATH": "n.png" } }"#,
    r#""IMPORTED": [ { "NAME": "lut", "PATH": "l.png" }, { "PATH": 1 } ]"#,
];

/// Lines of GLSL.
const GLSL: &[&str] = &[
    "void main() {",
    "}",
    "#version 120",
    "#extension GL_OES_standard_derivatives : enable",
    "gl_FragColor = IMG_THIS_PIXEL(inputImage);",
    "vec4 c = IMG_NORM_PIXEL(buf, isf_FragNormCoord);",
    "vec4 c = IMG_PIXEL(small, gl_FragCoord.xy, 1.0);",
    "vec2 s = IMG_SIZE(noise) + IMG_SIZE(IMG_SIZE(buf));",
    "vec4 c = IMG_NORM_PIXEL(startImage,\n IMG_NORM_PIXEL(endImage, vv_FragNormCoord).xy);",
    "vec4 c = IMG_PIXEL(inputImage);",
    "vec4 c = IMG_NORM_PIXEL(nothing, x);",
    "vec4 c = IMG_THIS_NORM_PIXEL(",
    "// IMG_PIXEL( in a comment",
    "/* IMG_SIZE(",
    "*/ texture2D(inputImage, vec2(0.5));",
    "varying vec2 v; float é = 1.0;",
];

fn isf(inputs: &mut Inputs) -> String {
    let r = inputs.rng();
    let mut top: Vec<String> = Vec::new();
    for _ in 0..r.below(4) {
        top.push(r.pick(TOP).to_string());
    }
    let mut ins: Vec<&str> = (0..r.below(5)).map(|_| r.pick(INPUTS)).collect();
    match r.below(4) {
        0 => ins.extend(&INPUTS[1..4]), // startImage, endImage, progress: a transition
        1 => ins.insert(0, INPUTS[0]),  // inputImage: an effect
        _ => {}
    }
    top.push(format!(r#""INPUTS": [{}]"#, ins.join(", ")));
    if r.one_in(2) {
        let ps: Vec<&str> = (0..r.below(4)).map(|_| r.pick(PASSES)).collect();
        top.push(format!(r#""PASSES": [{}]"#, ps.join(", ")));
    }
    let glsl: Vec<&str> = (0..r.below(6)).map(|_| r.pick(GLSL)).collect();
    let mut text = format!("/*{{\n{}\n}}*/\n{}\n", top.join(",\n"), glsl.join("\n"));
    if inputs.rng().one_in(3) {
        let mut bytes = text.into_bytes();
        for _ in 0..1 + inputs.rng().below(3) {
            inputs.mutate(&mut bytes);
        }
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    text
}

#[test]
fn random_isf_files_never_panic_and_assemble_or_name_the_line() {
    let mut inputs = Inputs::new(0x15f_5eed, GLSL, &["\n"], 4);
    let (mut accepted, mut roles) = (0, [0u32; 4]);
    for i in 0..10_000 {
        let text = isf(&mut inputs);
        let vs = (i % 5 == 0).then(|| inputs.mutated_text());
        if let Some(s) = check_isf(&text, vs.as_deref()) {
            accepted += 1;
            roles[s.role() as usize] += 1;
        }
    }
    eprintln!("{accepted} of 10000 accepted; roles (source, effect, transition, mixer): {roles:?}");
    // The generator reaches valid files of every role, not only junk.
    assert!(accepted > 1000, "{accepted}");
    assert!(roles.iter().all(|&n| n > 20), "{roles:?}");
}

/// Any text at all, as the fuzz target feeds it: bytes joined from the fragments above.
#[test]
fn random_text_never_panics() {
    let frags: Vec<&str> = INPUTS
        .iter()
        .chain(PASSES)
        .chain(TOP)
        .chain(GLSL)
        .copied()
        .chain(["/*{", "}*/", "{", "}", "[", "]", ",", ":", "\""])
        .collect();
    let mut inputs = Inputs::new(7, &frags, &["", " ", "\n", ", "], 12);
    for _ in 0..10_000 {
        let _ = check_isf(&inputs.mutated_text(), None);
    }
}
