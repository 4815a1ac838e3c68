//! The properties an ISF file must have once read, shared by the seeded randomized test
//! (`random_isf.rs`) and the cargo-fuzz target (`fuzz/fuzz_targets/isf_parser.rs`).

use framepipe_isf::{Role, Shader};

/// Parses `text` (and assembles it, with `vertex` as its `.vs`) and checks, beyond "no panic":
/// * an accepted shader has at least one pass, unique names, and a role consistent with its
///   frame inputs (a source has none, an effect one, a transition at least two);
/// * every buffer's size is within bounds for a few render sizes;
/// * assembly either succeeds or names a line of the file; an assembled fragment shader
///   declares every input and maps every generated line to the assembly's own or to a line of
///   the file.
///
/// Returns the shader when it was accepted.
#[allow(dead_code)] // each test crate uses what it needs
pub fn check_isf(text: &str, vertex: Option<&str>) -> Option<Shader> {
    let shader = Shader::parse(text).ok()?;
    assert!(!shader.passes.is_empty());
    let frames = shader.frame_inputs().len();
    match shader.role() {
        Role::Source => assert_eq!(frames, 0),
        Role::Effect => assert_eq!(frames, 1),
        Role::Transition => assert!(frames >= 2),
        Role::Mixer => assert!(frames >= 1),
    }
    for b in &shader.buffers {
        for render in [(1, 1), (1920, 1080), (u32::MAX, 0)] {
            let (w, h) = b.size(render, &|_| Some(1e300));
            assert!((1..=framepipe_isf::MAX_BUFFER_SIDE).contains(&w), "{w}");
            assert!((1..=framepipe_isf::MAX_BUFFER_SIDE).contains(&h), "{h}");
        }
    }
    let file_lines = text.split('\n').count() as u32;
    match shader.assemble(vertex) {
        Ok(p) => {
            for i in &shader.inputs {
                assert!(
                    p.fragment.contains(&format!(" {};\n", i.name)),
                    "{}",
                    i.name
                );
            }
            assert_eq!(p.fragment_lines.len(), p.fragment.lines().count());
            for g in 1..=p.fragment_lines.len() as u32 {
                if let Some(l) = p.fragment_lines.to_source(g) {
                    assert!(l >= 1 && l <= file_lines, "line {l} of {file_lines}");
                }
            }
            let _ = p
                .fragment_lines
                .map_log("0:1(1): error: x\n0(2) : error\nERROR: 0:3: x", "f.fs");
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains(" line "), "{m}");
        }
    }
    Some(shader)
}
