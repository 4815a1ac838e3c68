//! The header of small ISF files written for each feature, parsed into the description.

use framepipe_isf::{Error, InputKind, Role, Shader, Version};

fn parse(text: &str) -> Shader {
    Shader::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn err(text: &str) -> String {
    Shader::parse(text).unwrap_err().to_string()
}

const EVERY_INPUT: &str = r#"/*{
    "ISFVSN": "2.0",
    "VSN": "1.2",
    "DESCRIPTION": "every input type",
    "CREDIT": "framepipe",
    "CATEGORIES": ["Test", "Stylize"],
    "INPUTS": [
        { "NAME": "inputImage", "TYPE": "image" },
        { "NAME": "flash", "TYPE": "event", "LABEL": "Flash" },
        { "NAME": "invert", "TYPE": "bool", "DEFAULT": 1, "IDENTITY": false },
        { "NAME": "mode", "TYPE": "long", "VALUES": [0, 1, 2], "LABELS": ["a", "b", "c"], "DEFAULT": 1 },
        { "NAME": "steps", "TYPE": "long", "MIN": 2, "MAX": 10 },
        { "NAME": "amount", "TYPE": "float", "MIN": 0.0, "MAX": 2, "DEFAULT": 0.5, "IDENTITY": 0 },
        { "NAME": "partial", "TYPE": "float", "MAX": 4 },
        { "NAME": "center", "TYPE": "point2D", "MIN": [0, 0], "MAX": [1, 2] },
        { "NAME": "tint", "TYPE": "color", "DEFAULT": [1, 0.5, 0] },
        { "NAME": "wave", "TYPE": "audio", "MAX": 256 },
        { "NAME": "spectrum", "TYPE": "audioFFT" }
    ]
}*/
void main() { gl_FragColor = IMG_THIS_PIXEL(inputImage); }
"#;

#[test]
fn every_input_type_is_read_with_its_values() {
    let s = parse(EVERY_INPUT);
    assert_eq!(
        s.isf_version,
        Version {
            major: 2,
            minor: 0,
            patch: 0
        }
    );
    assert!(!s.upgraded);
    assert_eq!(s.vsn.as_deref(), Some("1.2"));
    assert_eq!(s.description.as_deref(), Some("every input type"));
    assert_eq!(s.credit.as_deref(), Some("framepipe"));
    assert_eq!(s.categories, ["Test", "Stylize"]);
    let kinds: Vec<&str> = s.inputs.iter().map(|i| i.kind.type_name()).collect();
    assert_eq!(
        kinds,
        [
            "image", "event", "bool", "long", "long", "float", "float", "point2D", "color",
            "audio", "audioFFT"
        ]
    );
    assert_eq!(s.input("flash").unwrap().label.as_deref(), Some("Flash"));
    assert_eq!(
        s.input("invert").unwrap().kind,
        InputKind::Bool {
            default: true,
            identity: Some(false)
        }
    );
    assert_eq!(
        s.input("mode").unwrap().kind,
        InputKind::Long {
            default: 1,
            min: None,
            max: None,
            values: vec![0, 1, 2],
            labels: vec!["a".into(), "b".into(), "c".into()],
            identity: None
        }
    );
    // Without VALUES or DEFAULT a long starts at its MIN.
    assert!(matches!(
        s.input("steps").unwrap().kind,
        InputKind::Long {
            default: 2,
            min: Some(2),
            max: Some(10),
            ..
        }
    ));
    assert_eq!(
        s.input("amount").unwrap().kind,
        InputKind::Float {
            default: 0.5,
            min: 0.0,
            max: 2.0,
            identity: Some(0.0)
        }
    );
    // MAX without MIN: the range is 0..1, as VVISF reads it, and the default half way.
    assert_eq!(
        s.input("partial").unwrap().kind,
        InputKind::Float {
            default: 0.5,
            min: 0.0,
            max: 1.0,
            identity: None
        }
    );
    assert_eq!(
        s.input("center").unwrap().kind,
        InputKind::Point2D {
            default: [0.5, 1.0],
            min: Some([0.0, 0.0]),
            max: Some([1.0, 2.0]),
            identity: None
        }
    );
    // Three numbers make an opaque colour.
    assert!(matches!(
        s.input("tint").unwrap().kind,
        InputKind::Color {
            default: [1.0, 0.5, 0.0, 1.0],
            ..
        }
    ));
    assert_eq!(
        s.input("wave").unwrap().kind,
        InputKind::Audio { samples: Some(256) }
    );
    assert_eq!(
        s.input("spectrum").unwrap().kind,
        InputKind::AudioFft { samples: None }
    );
    // Audio inputs are not frames: one image input named inputImage is an effect.
    assert_eq!(s.role(), Role::Effect);
    assert_eq!(s.passes.len(), 1);
    assert_eq!(s.passes[0].target, None);
}

#[test]
fn multi_pass_persistent_float_and_sized_buffers_are_read() {
    let s = parse(
        r#"/*{
        "ISFVSN": "2",
        "INPUTS": [
            { "NAME": "inputImage", "TYPE": "image" },
            { "NAME": "quality", "TYPE": "float", "DEFAULT": 0.25 }
        ],
        "PASSES": [
            { "TARGET": "small", "WIDTH": "floor($WIDTH/4.0)", "HEIGHT": "max(floor($HEIGHT*$quality), 8)" },
            { "TARGET": "history", "PERSISTENT": true, "FLOAT": true },
            { "TARGET": "row", "WIDTH": 16, "HEIGHT": "1", "PERSISTENT": 1, "FLOAT": "true" },
            {}
        ]
    }*/
    void main() {}"#,
    );
    let targets: Vec<Option<&str>> = s.passes.iter().map(|p| p.target.as_deref()).collect();
    assert_eq!(targets, [Some("small"), Some("history"), Some("row"), None]);
    let small = s.buffer("small").unwrap();
    assert!(!small.persistent && !small.float);
    assert_eq!(small.width.as_ref().unwrap().text(), "floor($WIDTH/4.0)");
    let quality = |n: &str| (n == "quality").then_some(0.25);
    assert_eq!(small.size((1920, 1080), &quality), (480, 270));
    assert_eq!(small.size((64, 16), &quality), (16, 8));
    let history = s.buffer("history").unwrap();
    assert!(history.persistent && history.float);
    assert_eq!(history.size((1280, 720), &quality), (1280, 720));
    let row = s.buffer("row").unwrap();
    assert!(row.persistent && row.float);
    assert_eq!(row.size((1280, 720), &quality), (16, 1));
    assert_eq!(s.role(), Role::Effect);
}

#[test]
fn a_buffer_size_stays_within_bounds() {
    let s = parse(
        r#"/*{ "PASSES": [
            { "TARGET": "big", "WIDTH": "$WIDTH * 1000", "HEIGHT": "0 - 5" },
            { "TARGET": "nan", "WIDTH": "0/0", "HEIGHT": "1/0" }
        ] }*/"#,
    );
    let none = |_: &str| None;
    assert_eq!(
        s.buffer("big").unwrap().size((1920, 1080), &none),
        (16384, 1)
    );
    assert_eq!(
        s.buffer("nan").unwrap().size((1920, 1080), &none),
        (1, 16384)
    );
}

#[test]
fn several_passes_may_render_into_one_buffer() {
    let s = parse(
        r#"/*{ "ISFVSN": "2", "PASSES": [
            { "TARGET": "a", "PERSISTENT": true },
            { "TARGET": "a" },
            {}
        ] }*/"#,
    );
    assert_eq!(s.buffers.len(), 1);
    assert!(s.buffers[0].persistent);
    assert_eq!(s.passes.len(), 3);
    assert!(err(
        r#"/*{ "PASSES": [ { "TARGET": "a", "PERSISTENT": true }, { "TARGET": "a", "PERSISTENT": false } ] }*/"#
    )
    .contains("PASSES[1]: renders into \"a\" with PERSISTENT false, but PASSES[0] gave it true"));
}

#[test]
fn the_role_comes_from_the_image_inputs() {
    let role =
        |inputs: &str| parse(&format!(r#"/*{{ "ISFVSN": "2", "INPUTS": [{inputs}] }}*/"#)).role();
    let img = |n: &str| format!(r#"{{ "NAME": "{n}", "TYPE": "image" }}"#);
    let progress = r#"{ "NAME": "progress", "TYPE": "float" }"#;
    assert_eq!(role(""), Role::Source);
    assert_eq!(
        role(r#"{ "NAME": "speed", "TYPE": "float" }, { "NAME": "fft", "TYPE": "audioFFT" }"#),
        Role::Source
    );
    assert_eq!(role(&img("inputImage")), Role::Effect);
    assert_eq!(
        role(&format!("{}, {}", img("inputImage"), img("maskImage"))),
        Role::Mixer
    );
    assert_eq!(role(&img("texture1")), Role::Mixer);
    assert_eq!(
        role(&format!(
            "{}, {}, {progress}",
            img("startImage"),
            img("endImage")
        )),
        Role::Transition
    );
    // Without progress (or with a progress that is no float) it is only a mixer.
    assert_eq!(
        role(&format!("{}, {}", img("startImage"), img("endImage"))),
        Role::Mixer
    );
    assert_eq!(
        role(&format!(
            r#"{}, {}, {{ "NAME": "progress", "TYPE": "long" }}"#,
            img("startImage"),
            img("endImage")
        )),
        Role::Mixer
    );
    // The frames come in link order: the convention's names first.
    let s = parse(&format!(
        r#"/*{{ "INPUTS": [{}, {}, {progress}, {}] }}*/"#,
        img("mask"),
        img("endImage"),
        img("startImage")
    ));
    assert_eq!(s.role(), Role::Transition);
    let order: Vec<&str> = s.frame_inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(order, ["startImage", "endImage", "mask"]);
    let s = parse(&format!(
        r#"/*{{ "INPUTS": [{}, {}] }}*/"#,
        img("mask"),
        img("inputImage")
    ));
    let order: Vec<&str> = s.frame_inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(order, ["inputImage", "mask"]);
}

#[test]
fn an_isf_1_file_is_upgraded() {
    let s = parse(
        r#"/*{
        "INPUTS": [ { "NAME": "inputImage", "TYPE": "image" } ],
        "PERSISTENT_BUFFERS": { "feedback": { "WIDTH": "$WIDTH/2", "FLOAT": true }, "unused": {} },
        "PASSES": [ { "TARGET": "feedback" }, {} ]
    }*/
    void main() { gl_FragColor = IMG_NORM_PIXEL(feedback, vv_FragNormCoord); }"#,
    );
    assert_eq!(s.isf_version.major, 1);
    assert!(s.upgraded);
    let fb = s.buffer("feedback").unwrap();
    assert!(fb.persistent && fb.float);
    assert_eq!(fb.width.as_ref().unwrap().text(), "$WIDTH/2");
    // A persistent buffer no pass renders into is still declared.
    assert!(s.buffer("unused").unwrap().persistent);
    let s = parse(
        r#"/*{ "PERSISTENT_BUFFERS": ["a", "b"], "PASSES": [ { "TARGET": "a" }, { "TARGET": "b" }, {} ] }*/"#,
    );
    assert!(s.buffers.iter().all(|b| b.persistent));
    // A 2.0 file is not upgraded.
    assert!(!parse(r#"/*{ "ISFVSN": "2.1.1" }*/"#).upgraded);
}

#[test]
fn real_file_leniencies_are_accepted() {
    // Numbers as strings, a bool DEFAULT as a number, an image's DEFAULT null, one category as
    // a string, ISFVSN as a number, keys ISF does not know.
    let s = parse(
        r#"  /*{ "ISFVSN": 2, "CATEGORIES": "Generator", "KEYWORDS": ["x"],
        "INPUTS": [
            { "NAME": "a", "TYPE": "float", "MIN": "0", "MAX": "10", "DEFAULT": "2.5" },
            { "NAME": "b", "TYPE": "bool", "DEFAULT": 0.0 },
            { "NAME": "c", "TYPE": "image", "DEFAULT": null },
            { "NAME": "d", "TYPE": "float", "MIN": 1, "MAX": 0.05, "DEFAULT": 0.001 }
        ],
        "PASSES": [ { "TARGET": "t", "persistent": true, "DESCRIPTION": "x" } ] }*/"#,
    );
    assert_eq!(s.isf_version.major, 2);
    assert_eq!(s.categories, ["Generator"]);
    assert!(matches!(
        s.input("a").unwrap().kind,
        InputKind::Float {
            default: 2.5,
            max: 10.0,
            ..
        }
    ));
    assert!(matches!(
        s.input("b").unwrap().kind,
        InputKind::Bool { default: false, .. }
    ));
    // Values are kept as written, even MIN > MAX and a DEFAULT outside them.
    assert_eq!(
        s.input("d").unwrap().kind,
        InputKind::Float {
            default: 0.001,
            min: 1.0,
            max: 0.05,
            identity: None
        }
    );
    // Keys are case-sensitive, as in VVISF: "persistent" is not PERSISTENT.
    assert!(!s.buffer("t").unwrap().persistent);
}

#[test]
fn malformed_headers_name_what_is_wrong() {
    for (text, want) in [
        ("void main() {}", "no ISF header: an ISF file begins with a /*{ ... }*/ comment holding a JSON object; this one begins with \"void main() {}\""),
        ("", "this one begins with nothing (the file is empty)"),
        ("\n\n/*{ \"INPUTS\": [] ", "the ISF header comment opened on line 3 is never closed with */"),
        ("/*{\n\"INPUTS\": [\n{ \"NAME\": \"a\" \"TYPE\": \"float\" }\n]}*/", "line 3 column 15: the ISF header is not valid JSON: expected `,` or `}`"),
        ("/*[1, 2]*/", "the header: expected a JSON object, found an array of 2"),
        (r#"/*{ "INPUTS": {} }*/"#, "INPUTS: expected an array, found an object"),
        (r#"/*{ "INPUTS": [ 3 ] }*/"#, "INPUTS[0]: expected an object, found 3"),
        (r#"/*{ "INPUTS": [ { "TYPE": "float" } ] }*/"#, "INPUTS[0]: no NAME"),
        (r#"/*{ "INPUTS": [ { "NAME": "a" } ] }*/"#, "INPUTS[0] \"a\": no TYPE"),
        (r#"/*{ "INPUTS": [ { "NAME": "a", "TYPE": "vec3" } ] }*/"#, "INPUTS[0] \"a\": unknown TYPE \"vec3\"; expected one of: event, bool, long, float, point2D, color, image, audio, audioFFT"),
        (r#"/*{ "INPUTS": [ { "NAME": "a", "TYPE": "float", "MAX": "lots" } ] }*/"#, "INPUTS[0] \"a\" MAX: expected a number, found the string \"lots\""),
        (r#"/*{ "INPUTS": [ { "NAME": "a", "TYPE": "long", "VALUES": [1, 2.5] } ] }*/"#, "INPUTS[0] \"a\" VALUES[1]: expected a whole number within GLSL's int, found 2.5"),
        (r#"/*{ "INPUTS": [ { "NAME": "a", "TYPE": "long", "VALUES": [1, 2], "LABELS": ["x"] } ] }*/"#, "INPUTS[0] \"a\": 2 VALUES but 1 LABELS; each value needs its label"),
        (r#"/*{ "INPUTS": [ { "NAME": "a", "TYPE": "color", "DEFAULT": [1, 2] } ] }*/"#, "INPUTS[0] \"a\" DEFAULT: expected an array of 3 or 4 numbers, found an array of 2"),
        (r#"/*{ "INPUTS": [ { "NAME": "a", "TYPE": "point2D", "MIN": [0, "x"] } ] }*/"#, "INPUTS[0] \"a\" MIN[1]: expected a number, found the string \"x\""),
        (r#"/*{ "INPUTS": [ { "NAME": "a", "TYPE": "audio", "MAX": 0 } ] }*/"#, "INPUTS[0] \"a\" MAX: expected a positive number of samples, found 0"),
        (r#"/*{ "INPUTS": [ { "NAME": "my blur", "TYPE": "float" } ] }*/"#, "INPUTS[0]: \"my blur\" is not a GLSL name"),
        (r#"/*{ "INPUTS": [ { "NAME": "TIME", "TYPE": "float" } ] }*/"#, "INPUTS[0]: \"TIME\" is a name ISF declares itself"),
        (r#"/*{ "INPUTS": [ { "NAME": "gl_Color", "TYPE": "float" } ] }*/"#, "is reserved by GLSL"),
        (r#"/*{ "INPUTS": [ { "NAME": "float", "TYPE": "float" } ] }*/"#, "INPUTS[0]: \"float\" is a GLSL keyword or type"),
        (r#"/*{ "INPUTS": [ { "NAME": "a", "TYPE": "float" }, { "NAME": "a", "TYPE": "bool" } ] }*/"#, "\"a\" names both INPUTS[0] and INPUTS[1]"),
        (r#"/*{ "INPUTS": [ { "NAME": "a", "TYPE": "float" } ], "PASSES": [ { "TARGET": "a" } ] }*/"#, "\"a\" names both INPUTS[0] and PASSES[0] TARGET"),
        (r#"/*{ "PASSES": { "TARGET": "a" } }*/"#, "PASSES: expected an array, found an object"),
        (r#"/*{ "PASSES": [ { "TARGET": 3 } ] }*/"#, "PASSES[0] TARGET: expected a string, found 3"),
        (r#"/*{ "PASSES": [ { "TARGET": "a", "PERSISTENT": "maybe" } ] }*/"#, "PASSES[0] PERSISTENT: expected true or false, found the string \"maybe\""),
        (r#"/*{ "PASSES": [ { "TARGET": "a", "WIDTH": "$WIDTH/" } ] }*/"#, "PASSES[0] WIDTH: expression \"$WIDTH/\": ends where a number, a name or '(' was expected"),
        (r#"/*{ "PASSES": [ { "TARGET": "a", "WIDTH": [1] } ] }*/"#, "PASSES[0] WIDTH: expected an expression (a string) or a number, found an array of 1"),
        (r#"/*{ "INPUTS": [ { "NAME": "c", "TYPE": "color" } ], "PASSES": [ { "TARGET": "a", "HEIGHT": "$c * 2" } ] }*/"#, "PASSES[0] HEIGHT: expression \"$c * 2\": reads $c, which is not $WIDTH, $HEIGHT or a number-valued input"),
        (r#"/*{ "ISFVSN": "two" }*/"#, "ISFVSN: expected a version like \"2.0\", found \"two\""),
        (r#"/*{ "IMPORTED": { "noise": { "FILE": "n.png" } } }*/"#, "IMPORTED \"noise\": no PATH"),
        (r#"/*{ "IMPORTED": [ { "NAME": "cube", "TYPE": "cube", "PATH": ["a.png"] } ] }*/"#, "IMPORTED[0] TYPE: cube maps are not supported"),
        (r#"/*{ "PERSISTENT_BUFFERS": 3 }*/"#, "PERSISTENT_BUFFERS: expected an array or an object, found 3"),
    ] {
        let e = err(text);
        assert!(e.contains(want), "{text}\n  gave: {e}\n  want: {want}");
    }
}

#[test]
fn limits_are_errors_not_allocations() {
    let many = format!(
        r#"/*{{ "PASSES": [{}] }}*/"#,
        vec!["{}"; framepipe_isf::MAX_PASSES + 1].join(",")
    );
    assert!(err(&many).contains("65 passes; at most 64 are run"));
    let inputs: Vec<String> = (0..=framepipe_isf::MAX_INPUTS)
        .map(|i| format!(r#"{{ "NAME": "i{i}", "TYPE": "float" }}"#))
        .collect();
    assert!(err(&format!(r#"/*{{ "INPUTS": [{}] }}*/"#, inputs.join(","))).contains("257 inputs"));
    let big = format!("/*{{}}*/{}", " ".repeat(framepipe_isf::MAX_FILE_BYTES));
    assert!(matches!(Shader::parse(&big), Err(Error::TooLarge { .. })));
    // JSON nested past serde_json's limit is an error, not a stack overflow.
    let deep = format!(
        "/*{{ \"x\": {}{} }}*/",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(err(&deep).contains("not valid JSON"));
}

#[test]
fn imported_images_are_read_in_both_forms() {
    let s = parse(
        r#"/*{ "IMPORTED": { "noise": { "PATH": "noise.png" }, "other": { "NAME": "renamed", "PATH": "../o.jpg" } } }*/"#,
    );
    let names: Vec<(&str, &str)> = s
        .imported
        .iter()
        .map(|i| (i.name.as_str(), i.path.as_str()))
        .collect();
    assert_eq!(names, [("noise", "noise.png"), ("renamed", "../o.jpg")]);
    let s = parse(r#"/*{ "IMPORTED": [ { "NAME": "lut", "PATH": "lut.png" } ] }*/"#);
    assert_eq!(s.imported[0].name, "lut");
    assert_eq!(s.role(), Role::Source);
}
