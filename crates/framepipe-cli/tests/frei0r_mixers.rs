//! Issue 8, requirement 4's peer check through the `framepipe` binary: frei0r mixers in a graph
//! (raw sources into the mixer into a raw sink) write the same bytes as GStreamer's
//! `frei0r-mixer-NAME` on the same raw files, at `--threads` 1, 2 and 4. Real plugins, real
//! gst-launch-1.0, real files. (The element-level checks and why the caps and time agree:
//! crates/framepipe-frei0r/tests/mixers.rs and docs/FREI0R.md.)

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{tmpdir, FP};

const LIMIT: Duration = Duration::from_secs(60);
const W: u32 = 96;
const H: u32 = 72;
const FRAMES: u32 = 10;

/// gst-launch-1.0 with `frei0r-mixer-<gst_name>` on the files `inputs` (in `dir`), raw RGBA
/// out. `bgra`: the plugin is BGRA8888, so gst's element takes BGRA caps; `videoconvert` between
/// RGBA and BGRA is an exact byte reorder.
fn gst(dir: &Path, gst_name: &str, props: &str, bgra: bool, inputs: &[&str]) -> Vec<u8> {
    let parse = format!("rawvideoparse format=rgba width={W} height={H} framerate=25/1");
    let (to, from) = if bgra {
        (
            " ! videoconvert ! video/x-raw,format=BGRA",
            " ! videoconvert ! video/x-raw,format=RGBA",
        )
    } else {
        ("", "")
    };
    let mut desc = String::new();
    for (i, f) in inputs.iter().enumerate() {
        desc += &format!("filesrc location={f} ! {parse}{to} ! m.sink_{i} ");
    }
    desc += &format!("frei0r-mixer-{gst_name} name=m {props}{from} ! filesink location=gst.rgba");
    let out = common::run(
        Command::new("gst-launch-1.0")
            .current_dir(dir)
            .arg("-q")
            .args(desc.split_whitespace()),
        LIMIT,
    );
    assert!(
        out.status.success(),
        "gst-launch-1.0 {desc}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(dir.join("gst.rgba")).unwrap()
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    let frame = (W * H * 4) as usize;
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!(
            "first difference at byte {i} (frame {}, pixel {}): ours {} gst {}",
            i / frame,
            (i % frame) / 4,
            a[i],
            b[i]
        ),
        None => format!("lengths differ: ours {} gst {}", a.len(), b.len()),
    }
}

// issue #8
#[test]
fn frei0r_mixers_in_a_cli_graph_match_gstreamer_at_1_2_4_threads() {
    let dir = tmpdir("f0mix");
    let files = ["a.rgba", "b.rgba", "c.rgba"];
    for (i, f) in files.iter().enumerate() {
        std::fs::write(
            dir.join(f),
            framepipe_testkit::frames::pattern(i as u32 + 1, W, H, FRAMES),
        )
        .unwrap();
    }
    // (our element and properties, gst element name and properties, BGRA8888, inputs)
    for (ours, gst_name, gst_props, bgra, inputs) in [
        ("frei0r-multiply", "multiply", "", false, 2usize),
        ("frei0r-xfade0r fader=0.3", "xfade0r", "fader=0.3", true, 2),
        ("frei0r-RGB", "rgb", "", false, 3),
    ] {
        let theirs = gst(&dir, gst_name, gst_props, bgra, &files[..inputs]);
        assert_eq!(theirs.len(), (W * H * 4 * FRAMES) as usize);
        for threads in ["1", "2", "4"] {
            let mut graph = String::new();
            for f in &files[..inputs] {
                graph += &format!("rawsrc location={f} width={W} height={H} rate=25 ! m.  ");
            }
            graph += &format!("{ours} name=m ! rawsink location=ours.rgba");
            let out = common::run(
                Command::new(FP).current_dir(&dir).args([
                    "run",
                    "-q",
                    "--unpaced",
                    "--threads",
                    threads,
                    &graph,
                ]),
                LIMIT,
            );
            assert!(
                out.status.success(),
                "framepipe run \"{graph}\": {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let mine = std::fs::read(dir.join("ours.rgba")).unwrap();
            assert!(
                mine == theirs,
                "\"{graph}\" --threads {threads} vs gst frei0r-mixer-{gst_name}: {}",
                first_difference(&mine, &theirs)
            );
            std::fs::remove_file(dir.join("ours.rgba")).unwrap();
        }
    }
}
