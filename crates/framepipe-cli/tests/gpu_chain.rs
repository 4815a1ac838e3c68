//! GPU nodes in real shows (issue #24), on the machine's GL (Mesa's llvmpipe in CI), through
//! the `framepipe` binary with ISF shaders the test writes: a chain CPU → 3 GPU nodes → CPU
//! makes exactly one upload and one download per frame, with the bytes the test computes from
//! the source's own frames; the output does not depend on `--threads`; a live `set` on a GPU
//! node's property takes effect on the frame its reply names; a GPU node that fails at render
//! is bypassed and the show finishes; a live `remove` of a GPU node shows from its reply frame
//! and the removed node is released. Small frames (64x48), few frames.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::shaders::{ADD, INVERT};
use common::{run, tmpdir, Fp, FP};

const W: usize = 64;
const H: usize = 48;
const FRAME: usize = W * H * 4;

/// Forty passes, each with a buffer of its own: more images than a GPU has texture units
/// (llvmpipe: 32), which the node finds when it first renders: it fails at render.
fn too_many_buffers() -> String {
    let passes: Vec<String> = (0..40)
        .map(|k| format!("{{\"TARGET\": \"b{k}\"}}"))
        .chain(std::iter::once("{}".to_string()))
        .collect();
    format!(
        "/*{{\n    \"ISFVSN\": \"2\",\n    \"INPUTS\": [{{\"NAME\": \"inputImage\", \"TYPE\": \"image\"}}],\n    \
         \"PASSES\": [{}]\n}}*/\nvoid main() {{\n    gl_FragColor = vec4(1.0 - IMG_THIS_PIXEL(inputImage).rgb, 1.0);\n}}\n",
        passes.join(", ")
    )
}

/// The shaders, written into `dir`.
fn shaders(dir: &Path) -> (String, String, String) {
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    (
        write("add.fs", ADD),
        write("invert.fs", INVERT),
        write("buffers.fs", &too_many_buffers()),
    )
}

/// The source of every show here: 64x48 test pattern frames (moving, so every frame differs).
fn source(frames: u64) -> String {
    format!("testsrc width={W} height={H} frames={frames}")
}

/// `framepipe run ARGS`, which must succeed; its stderr.
fn fp_run(args: &[&str]) -> String {
    let out = run(
        Command::new(FP).arg("run").args(args),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "framepipe run {args:?}: {err}");
    err
}

/// The source's own frames, on the CPU alone.
fn source_frames(dir: &Path, frames: u64) -> Vec<u8> {
    let out = dir.join("source.rgba");
    fp_run(&[
        "-q",
        "--unpaced",
        &format!("{} ! rawsink location={}", source(frames), out.display()),
    ]);
    std::fs::read(out).unwrap()
}

/// `bytes` with `f` applied to every R, G and B (alpha kept).
fn per_channel(bytes: &[u8], f: impl Fn(u8) -> u8) -> Vec<u8> {
    bytes
        .iter()
        .enumerate()
        .map(|(i, &b)| if i % 4 == 3 { b } else { f(b) })
        .collect()
}

fn add(k: i32) -> impl Fn(u8) -> u8 {
    move |v| (i32::from(v) + k).clamp(0, 255) as u8
}

fn invert(v: u8) -> u8 {
    255 - v
}

/// The first byte where `got` and `want` differ, for a message.
fn first_difference(got: &[u8], want: &[u8]) -> String {
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(i) => format!(
            "frame {}, pixel ({}, {}), channel {}: got {}, want {}",
            i / FRAME,
            i % FRAME / 4 % W,
            i % FRAME / 4 / W,
            i % 4,
            got[i],
            want[i]
        ),
        None => format!("lengths {} and {}", got.len(), want.len()),
    }
}

#[test]
fn a_chain_of_three_gpu_nodes_makes_one_upload_and_one_download_per_frame() {
    let dir = tmpdir("gpu-chain");
    let (add_fs, invert_fs, _) = shaders(dir.path());
    let frames = 6;
    let out = dir.path().join("out.rgba");
    let stats = dir.path().join("stats.json");
    let show = format!(
        "{} ! isf location={add_fs} amount=10 ! isf location={add_fs} amount=30 ! \
         isf location={invert_fs} ! rawsink location={}",
        source(frames),
        out.display()
    );
    fp_run(&[
        "-q",
        "--unpaced",
        "--threads",
        "2",
        "--stats",
        stats.to_str().unwrap(),
        &show,
    ]);
    let got = std::fs::read(&out).unwrap();
    let src = source_frames(dir.path(), frames);
    let want = per_channel(&src, |v| invert(add(30)(add(10)(v))));
    assert_eq!(got.len(), frames as usize * FRAME);
    assert!(got == want, "{}", first_difference(&got, &want));
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let gpu = &stats["gpu"];
    assert_eq!(gpu["uploads"], frames, "{stats:#}");
    assert_eq!(gpu["downloads"], frames, "{stats:#}");
    assert_eq!(gpu["uploads_per_frame"], 1.0, "{stats:#}");
    assert_eq!(gpu["downloads_per_frame"], 1.0, "{stats:#}");
    let gpu_nodes: Vec<&serde_json::Value> = stats["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            let name = s["name"].as_str().unwrap();
            name.starts_with("isf") && !name.contains(':')
        })
        .collect();
    assert_eq!(gpu_nodes.len(), 3, "{stats:#}");
    assert!(
        gpu_nodes.iter().all(|s| s["gpu_ms"].as_f64().is_some()),
        "each GPU node's GPU time: {stats:#}"
    );
}

#[test]
fn gpu_output_bytes_do_not_depend_on_threads() {
    let dir = tmpdir("gpu-threads");
    let (add_fs, invert_fs, _) = shaders(dir.path());
    let outputs: Vec<Vec<u8>> = ["1", "2"]
        .iter()
        .map(|threads| {
            let out = dir.path().join(format!("out{threads}.rgba"));
            fp_run(&[
                "-q",
                "--unpaced",
                "--threads",
                threads,
                &format!(
                    "{} ! isf location={add_fs} amount=-20 ! invert ! isf location={invert_fs} \
                     ! rawsink location={}",
                    source(5),
                    out.display()
                ),
            ]);
            std::fs::read(out).unwrap()
        })
        .collect();
    assert_eq!(outputs[0].len(), 5 * FRAME);
    assert!(
        outputs[0] == outputs[1],
        "{}",
        first_difference(&outputs[1], &outputs[0])
    );
}

/// The frame number of `framepipe: ok 'CMD' from frame N` in `err`.
fn ok_frame(err: &str, cmd: &str) -> u64 {
    let prefix = format!("framepipe: ok '{cmd}' from frame ");
    let line = err
        .lines()
        .map(|l| l.trim_start_matches('\r'))
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no reply to '{cmd}' in:\n{err}"));
    line[prefix.len()..]
        .parse()
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

#[test]
fn a_live_set_on_a_gpu_node_takes_effect_on_the_frame_its_reply_names() {
    let dir = tmpdir("gpu-set");
    let (add_fs, _, _) = shaders(dir.path());
    let out = dir.path().join("out.rgba");
    let frames = 40;
    let mut fp = Fp::run(&[
        "--fps",
        "50",
        "--start-paused",
        &format!(
            "{} ! isf location={add_fs} name=lift amount=10 ! rawsink location={}",
            source(frames),
            out.display()
        ),
    ]);
    // Some frames out first, however slow the machine is to start the show.
    fp.command("step 5");
    fp.after("ok 'step 5'");
    fp.command("set lift.amount 60");
    fp.after("ok 'set lift.amount 60'");
    fp.command("resume");
    fp.wait_success();
    let err = fp.stderr();
    let n = ok_frame(&err, "set lift.amount 60");
    assert!(n > 0 && n < frames, "the set landed mid-show: {err}");
    let got = std::fs::read(&out).unwrap();
    let src = source_frames(dir.path(), frames);
    let cut = n as usize * FRAME;
    let want: Vec<u8> = per_channel(&src[..cut], add(10))
        .into_iter()
        .chain(per_channel(&src[cut..], add(60)))
        .collect();
    assert_eq!(got.len(), frames as usize * FRAME);
    assert!(
        got == want,
        "set from frame {n}: {}",
        first_difference(&got, &want)
    );
}

#[test]
fn a_gpu_node_failing_at_render_is_bypassed_and_the_show_finishes() {
    let dir = tmpdir("gpu-fail");
    let (add_fs, _, buffers_fs) = shaders(dir.path());
    let out = dir.path().join("out.rgba");
    let frames = 6;
    let err = fp_run(&[
        "--unpaced",
        &format!(
            "{} ! isf location={buffers_fs} name=many ! isf location={add_fs} amount=5 ! \
             rawsink location={}",
            source(frames),
            out.display()
        ),
    ]);
    assert!(
        err.contains("many: failed at render on frame 0:") && err.contains("texture units"),
        "the failure is reported by node, with the reason: {err}"
    );
    assert_eq!(
        err.matches("failed at render").count(),
        1,
        "reported once: {err}"
    );
    let got = std::fs::read(&out).unwrap();
    let src = source_frames(dir.path(), frames);
    // `many` passes its input on; the next GPU node still runs.
    let want = per_channel(&src, add(5));
    assert_eq!(got.len(), frames as usize * FRAME, "every frame out: {err}");
    assert!(got == want, "{}", first_difference(&got, &want));
}

#[test]
fn a_live_remove_of_a_gpu_node_shows_from_its_reply_frame_and_releases_it() {
    let dir = tmpdir("gpu-remove");
    let (add_fs, invert_fs, _) = shaders(dir.path());
    let out = dir.path().join("out.rgba");
    let stats = dir.path().join("stats.json");
    let frames = 30;
    let mut fp = Fp::run(&[
        "--fps",
        "50",
        "--start-paused",
        "--stats",
        stats.to_str().unwrap(),
        &format!(
            "{} ! isf location={add_fs} name=lift amount=10 ! isf location={invert_fs} name=inv \
             ! rawsink location={}",
            source(frames),
            out.display()
        ),
    ]);
    fp.command("step 5");
    fp.after("ok 'step 5'");
    fp.command("remove inv");
    fp.after("ok 'remove inv'");
    fp.command("resume");
    fp.wait_success();
    let err = fp.stderr();
    let n = ok_frame(&err, "remove inv");
    assert!(n > 0 && n < frames, "the edit landed mid-show: {err}");
    let got = std::fs::read(&out).unwrap();
    let src = source_frames(dir.path(), frames);
    let cut = n as usize * FRAME;
    let want: Vec<u8> = per_channel(&src[..cut], |v| invert(add(10)(v)))
        .into_iter()
        .chain(per_channel(&src[cut..], add(10)))
        .collect();
    assert_eq!(got.len(), frames as usize * FRAME);
    assert!(
        got == want,
        "removed from frame {n}: {}",
        first_difference(&got, &want)
    );
    // The removed shader's GL objects were released on the GPU thread while the show went on.
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(stats["gpu"]["released"], 1, "{stats:#}");
}
