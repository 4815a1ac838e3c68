//! GLSL assembly: the declarations, the rewritten ISF functions and the line map.

use framepipe_isf::{Error, Shader};

const EFFECT: &str = r#"/*{
    "ISFVSN": "2",
    "INPUTS": [
        { "NAME": "inputImage", "TYPE": "image" },
        { "NAME": "amount", "TYPE": "float" },
        { "NAME": "flash", "TYPE": "event" },
        { "NAME": "on", "TYPE": "bool" },
        { "NAME": "mode", "TYPE": "long", "VALUES": [0, 1], "LABELS": ["a", "b"] },
        { "NAME": "center", "TYPE": "point2D" },
        { "NAME": "tint", "TYPE": "color" },
        { "NAME": "wave", "TYPE": "audio" },
        { "NAME": "fft", "TYPE": "audioFFT" }
    ],
    "IMPORTED": { "noise": { "PATH": "noise.png" } },
    "PASSES": [ { "TARGET": "blurred", "WIDTH": "$WIDTH/2", "FLOAT": true }, { "TARGET": "acc", "PERSISTENT": true }, {} ]
}*/
#version 120
#extension GL_OES_standard_derivatives : enable
// IMG_PIXEL(nothing) in a comment is left alone
void main() {
    vec4 a = IMG_THIS_PIXEL(inputImage);
    vec4 b = IMG_PIXEL(blurred, gl_FragCoord.xy);
    vec4 c = IMG_NORM_PIXEL(acc, isf_FragNormCoord, 1.0);
    vec2 s = IMG_SIZE(noise) + IMG_SIZE( wave );
    vec4 d = IMG_NORM_PIXEL(fft,
        vec2(IMG_SIZE(inputImage).x, 0.5));
    vec4 e = texture2D(inputImage, vv_FragNormCoord) + IMG_THIS_NORM_PIXEL(inputImage);
    gl_FragColor = a + b + c + d + e + vec4(s, 0.0, 1.0);
}
"#;

fn program(text: &str, vs: Option<&str>) -> framepipe_isf::Program {
    Shader::parse(text).unwrap().assemble(vs).unwrap()
}

#[test]
fn every_input_buffer_and_import_is_declared_with_its_glsl_type() {
    let p = program(EFFECT, None);
    for decl in [
        "uniform int PASSINDEX;",
        "uniform vec2 RENDERSIZE;",
        "uniform float TIME;",
        "uniform float TIMEDELTA;",
        "uniform vec4 DATE;",
        "uniform int FRAMEINDEX;",
        "uniform sampler2D inputImage;",
        "uniform vec2 _inputImage_imgSize;",
        "uniform vec4 _inputImage_imgRect;",
        "uniform float amount;",
        "uniform bool flash;",
        "uniform bool on;",
        "uniform int mode;",
        "uniform vec2 center;",
        "uniform vec4 tint;",
        "uniform sampler2D wave;",
        "uniform vec2 _wave_imgSize;",
        "uniform sampler2D fft;",
        "uniform sampler2D noise;",
        "uniform vec2 _noise_imgSize;",
        "uniform sampler2D blurred;",
        "uniform vec2 _blurred_imgSize;",
        "uniform sampler2D acc;",
    ] {
        assert!(
            p.fragment.lines().any(|l| l == decl),
            "fragment lacks {decl}\n{}",
            p.fragment
        );
        assert!(
            p.vertex.lines().any(|l| l == decl),
            "vertex lacks {decl}\n{}",
            p.vertex
        );
    }
    assert!(p
        .fragment
        .starts_with("#version 330\n#extension GL_OES_standard_derivatives : enable\n"));
    assert!(p
        .fragment
        .lines()
        .any(|l| l == "in vec2 isf_FragNormCoord;"));
    assert!(p.fragment.lines().any(|l| l == "out vec4 isf_FragColor;"));
    assert!(p.vertex.lines().any(|l| l == "out vec2 isf_FragNormCoord;"));
    assert!(p
        .vertex
        .lines()
        .any(|l| l == "layout(location = 0) in vec2 isf_VertexPosition;"));
    assert!(p
        .vertex
        .contains("void main() {\n    isf_vertShaderInit();\n}"));
}

#[test]
fn isf_functions_and_old_names_are_rewritten_in_place() {
    let p = program(EFFECT, None);
    let f = &p.fragment;
    for want in [
        "vec4 a = texture(inputImage, isf_FragNormCoord);",
        "vec4 b = texture(blurred, ( gl_FragCoord.xy) / _blurred_imgSize);",
        "vec4 c = texture(acc, isf_FragNormCoord, 1.0);",
        "vec2 s = _noise_imgSize + _wave_imgSize;",
        "vec4 d = texture(fft,\n        vec2(_inputImage_imgSize.x, 0.5));",
        "vec4 e = texture(inputImage, isf_FragNormCoord) + texture(inputImage, isf_FragNormCoord);",
        "isf_FragColor = a + b",
        "// IMG_PIXEL(nothing) in a comment is left alone",
    ] {
        assert!(f.contains(want), "fragment lacks {want:?}\n{f}");
    }
    assert!(!f.contains("#version 120"));
    assert!(!f.contains("vv_") && !f.contains("texture2D") && !f.contains("gl_FragColor"));
}

#[test]
fn the_line_map_leads_each_generated_line_back_to_the_fs_line() {
    let s = Shader::parse(EFFECT).unwrap();
    let p = s.assemble(None).unwrap();
    let source: Vec<&str> = EFFECT.lines().collect();
    let generated: Vec<&str> = p.fragment.lines().collect();
    assert_eq!(p.fragment_lines.len(), generated.len());
    let mut mapped = 0;
    for (i, g) in generated.iter().enumerate() {
        let Some(l) = p.fragment_lines.to_source(i as u32 + 1) else {
            continue;
        };
        mapped += 1;
        let orig = source[l as usize - 1];
        // The header's closing line keeps only what follows "*/" (nothing here).
        if orig.contains("*/") {
            assert_eq!(*g, "");
            continue;
        }
        // Lines without ISF calls or old names come through unchanged.
        if !orig.contains("IMG_")
            && !orig.contains("vv_")
            && !orig.contains("gl_FragColor")
            && !orig.starts_with('#')
        {
            assert_eq!(*g, orig, "generated line {} should be .fs line {l}", i + 1);
        }
    }
    // Every body line is mapped, the hoisted #extension too.
    let body_lines = source.len() - s.glsl_line() as usize + 1;
    assert!(mapped > body_lines, "{mapped} of {body_lines}");
    // The #extension line went to line 2 and still names its .fs line.
    let ext = source
        .iter()
        .position(|l| l.starts_with("#extension"))
        .unwrap() as u32
        + 1;
    assert_eq!(p.fragment_lines.to_source(2), Some(ext));
    // Declarations are the assembly's own.
    assert_eq!(p.fragment_lines.to_source(1), None);
    assert_eq!(p.fragment_lines.to_source(3), None);
    assert_eq!(p.fragment_lines.to_source(0), None);
    assert_eq!(p.fragment_lines.to_source(100_000), None);
    // The line after a call spread over two lines is still in place.
    let gl_line = generated
        .iter()
        .position(|l| l.contains("isf_FragColor = a"))
        .unwrap() as u32
        + 1;
    let src_line = source
        .iter()
        .position(|l| l.contains("gl_FragColor = a"))
        .unwrap() as u32
        + 1;
    assert_eq!(p.fragment_lines.to_source(gl_line), Some(src_line));
}

#[test]
fn compiler_logs_are_mapped_to_the_authors_lines() {
    let s = Shader::parse(EFFECT).unwrap();
    let p = s.assemble(None).unwrap();
    let generated: Vec<&str> = p.fragment.lines().collect();
    let g = generated
        .iter()
        .position(|l| l.contains("vec4 b = "))
        .unwrap()
        + 1;
    let l = EFFECT
        .lines()
        .position(|l| l.contains("vec4 b = "))
        .unwrap()
        + 1;
    let log = format!(
        "0:{g}(12): error: `x' undeclared\n0({g}) : error C1008: undefined variable \"x\"\nERROR: 0:{g}: 'x' : undeclared identifier\n0:3(1): warning: something\nlinker says hi"
    );
    let mapped = p.fragment_lines.map_log(&log, "blur.fs");
    assert_eq!(
        mapped,
        format!(
            "blur.fs:{l}:12: error: `x' undeclared\nblur.fs:{l} : error C1008: undefined variable \"x\"\nERROR: blur.fs:{l}: 'x' : undeclared identifier\nblur.fs (generated line 3):1: warning: something\nlinker says hi"
        )
    );
}

#[test]
fn a_vs_file_gets_the_declarations_and_isf_vert_shader_init() {
    let fs = r#"/*{ "ISFVSN": "2", "INPUTS": [ { "NAME": "inputImage", "TYPE": "image" }, { "NAME": "zoom", "TYPE": "float" } ] }*/
varying vec2 left;
void main() { gl_FragColor = IMG_NORM_PIXEL(inputImage, left); }"#;
    let vs = "#version 110\nvarying vec2 left;\nattribute vec3 unused;\nvoid main() {\n\tvv_vertShaderInit();\n\tleft = isf_FragNormCoord * zoom + IMG_SIZE(inputImage);\n}\n";
    let p = program(fs, Some(vs));
    assert!(p.vertex.contains("\nout vec2 left;\nin vec3 unused;\nvoid main() {\n\tisf_vertShaderInit();\n\tleft = isf_FragNormCoord * zoom + _inputImage_imgSize;\n}\n"), "{}", p.vertex);
    assert!(p.vertex.lines().any(|l| l == "uniform float zoom;"));
    assert!(p.vertex.contains("void isf_vertShaderInit() {\n    gl_Position = vec4(isf_VertexPosition, 0.0, 1.0);\n    isf_FragNormCoord = isf_VertexPosition * 0.5 + 0.5;\n}"));
    assert!(p.fragment.contains("\nin vec2 left;\n"));
    // .vs lines map to the .vs file.
    let g = p
        .vertex
        .lines()
        .position(|l| l.starts_with("\tleft ="))
        .unwrap() as u32
        + 1;
    assert_eq!(p.vertex_lines.to_source(g), Some(6));
    // The fragment's first body line is the header's last.
    let g = p
        .fragment
        .lines()
        .position(|l| l == "in vec2 left;")
        .unwrap() as u32
        + 1;
    assert_eq!(p.fragment_lines.to_source(g), Some(2));
}

#[test]
fn malformed_isf_calls_name_the_fs_line() {
    let head = r#"/*{ "INPUTS": [ { "NAME": "inputImage", "TYPE": "image" } ], "PASSES": [ { "TARGET": "buf" }, {} ] }*/"#;
    for (body, want) in [
        ("\n\nvec4 x = IMG_PIXEL(inputImage);", ".fs line 3: IMG_PIXEL takes 2 or 3 arguments, found 1"),
        ("\nvec4 x = IMG_THIS_PIXEL(inputImage, 1.0);", ".fs line 2: IMG_THIS_PIXEL takes 1 arguments, found 2"),
        ("\nvec4 x = IMG_SIZE();", ".fs line 2: IMG_SIZE() needs an image name"),
        ("\n\n\nvec4 x = IMG_NORM_PIXEL(other, c);", ".fs line 4: IMG_NORM_PIXEL reads \"other\", which is no image input, imported image or pass buffer of this file; it has: inputImage, buf"),
        ("\nvec4 x = IMG_NORM_PIXEL(inputImage, c;\n}", ".fs line 2: IMG_NORM_PIXEL( is never closed"),
        ("\nvec2 f = IMG_SIZE;", ".fs line 2: IMG_SIZE is not followed by '('"),
        ("\nvec4 x = IMG_NORM_PIXEL(inputImage,\n  IMG_PIXEL(nope, c));", ".fs line 3: IMG_PIXEL reads \"nope\""),
    ] {
        let text = format!("{head}{body}");
        let e = Shader::parse(&text).unwrap().assemble(None).unwrap_err();
        assert!(matches!(e, Error::Glsl { .. }));
        let e = e.to_string();
        assert!(e.contains(want), "{body:?}\n  gave: {e}\n  want: {want}");
    }
    let deep = format!(
        "{head}\nvec2 x = {}0.0{};",
        "IMG_NORM_PIXEL(buf, ".repeat(100),
        ")".repeat(100)
    );
    let e = Shader::parse(&deep)
        .unwrap()
        .assemble(None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nested more than 16 deep"), "{e}");
}
