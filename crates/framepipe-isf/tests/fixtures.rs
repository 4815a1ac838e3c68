//! Real ISF files from Vidvox/ISF-Files (tests/fixtures/LICENSE.md), parsed and assembled.

use framepipe_isf::{read_files, InputKind, Role, Shader};
use std::path::Path;

fn load(name: &str) -> (Shader, Option<String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let (fs, vs) = read_files(&path).unwrap();
    let s = Shader::parse(&fs).unwrap_or_else(|e| panic!("{name}: {e}"));
    let p = s
        .assemble(vs.as_deref())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(!p.fragment.contains("IMG_"), "{name}: {}", p.fragment);
    assert!(!p.vertex.contains("IMG_"), "{name}");
    (s, vs)
}

#[test]
fn color_history_has_a_persistent_float_buffer_one_pixel_high() {
    let (s, vs) = load("color_history.fs");
    assert!(vs.is_none());
    assert_eq!(s.role(), Role::Source);
    assert_eq!(s.passes.len(), 2);
    let b = s.buffer("dataHistory").unwrap();
    assert!(b.persistent && b.float);
    assert_eq!(b.size((640, 480), &|_| None), (640, 1));
    assert!(
        matches!(&s.input("displayMode").unwrap().kind, InputKind::Long { values, labels, .. } if values == &[0, 1] && labels == &["Color", "Lines"])
    );
    assert!(matches!(
        s.input("data").unwrap().kind,
        InputKind::Color {
            default: [0.95, 0.25, 0.0, 1.0],
            ..
        }
    ));
}

#[test]
fn fade_is_a_transition() {
    let (s, _) = load("fade.fs");
    assert_eq!(s.role(), Role::Transition);
    let frames: Vec<&str> = s.frame_inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(frames, ["startImage", "endImage"]);
    assert_eq!(s.categories, ["Dissolve"]);
}

#[test]
fn life_is_a_generator_with_feedback_and_a_vertex_shader() {
    let (s, vs) = load("life.fs");
    assert_eq!(s.role(), Role::Source);
    assert!(s.buffer("lastData").unwrap().persistent);
    assert_eq!(s.input("restartNow").unwrap().kind, InputKind::Event);
    let p = s.assemble(vs.as_deref()).unwrap();
    assert!(p.vertex.contains("isf_vertShaderInit();"));
    assert!(p.vertex.contains("out vec2 left_coord;"));
    // The .vs file's `main` is on the same .vs line in the map.
    let vs_text = vs.unwrap();
    let src = vs_text
        .lines()
        .position(|l| l.starts_with("void main()"))
        .unwrap() as u32
        + 1;
    let g = p
        .vertex
        .lines()
        .position(|l| l.starts_with("void main()"))
        .unwrap() as u32
        + 1;
    assert_eq!(p.vertex_lines.to_source(g), Some(src));
}

#[test]
fn poly_glitch_is_an_isf_1_file_and_is_upgraded() {
    let (s, _) = load("poly_glitch.fs");
    assert_eq!(s.isf_version.major, 1);
    assert!(s.upgraded);
    assert_eq!(s.role(), Role::Effect);
    let p = s.assemble(None).unwrap();
    assert!(p.fragment.contains("isf_FragNormCoord - vec2(0.5)"));
    assert!(!p.fragment.contains("vv_FragNormCoord"));
}
