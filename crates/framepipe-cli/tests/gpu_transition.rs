//! gl-transitions as the transitions of a show (issue #24), through the `framepipe` binary on
//! the machine's GL (Mesa's llvmpipe in CI), 64x48, a few frames:
//!
//! * `mix mode=transition transition=fade` gives the frames of `mix mode=crossfade` within 1
//!   (`fade` is a linear mix), the same oscillator driving both faders;
//! * `mix mode=transition transition=directional direction=1,0` at `fader=0.5` is the two
//!   inputs shifted half a picture, as the test computes from the inputs' own frames (the
//!   parameter reaches the shader: its default, 0,1, would shift them vertically);
//! * `load FILE fade=500ms transition=wipeLeft` (stdin): frame k of the fade is the old
//!   project's frame left of the split and the new project's right of it, the split where
//!   `wipeLeft` puts it at progress k/N, computed here; the reply names the transition;
//! * a parameter `set` live shows from the frame its reply names; `mode` is refused live;
//! * an unknown transition is refused with the closest names (in a pipeline and in `load`),
//!   and without GL the error names the packages; `inspect mix transition=NAME` lists the
//!   node's properties.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{run, tmpdir, Fp, FP};

const W: usize = 64;
const H: usize = 48;
const FRAME: usize = W * H * 4;

/// `framepipe run ARGS` in `dir`, which must succeed; its stderr.
fn fp_run(dir: &std::path::Path, args: &[&str]) -> String {
    let out = run(
        Command::new(FP).current_dir(dir).arg("run").args(args),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "framepipe run {args:?}: {err}");
    err
}

/// `framepipe run ARGS`, which must fail; its stderr.
fn fp_fails(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = run(
        Command::new(FP)
            .arg("run")
            .args(args)
            .envs(env.iter().copied()),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "framepipe run {args:?} succeeded: {err}"
    );
    err
}

/// Two sources (moving bars, a gradient), each recorded as it is (`a.rgba`, `b.rgba`) and fed
/// to the mixers `mixers` (`(file, mix properties)`: input 0 the bars, input 1 the gradient).
fn mix_show(frames: usize, mixers: &[(&str, &str)]) -> String {
    let mut p = format!(
        "testsrc name=a width={W} height={H} frames={frames} ! tee name=ta \
         testsrc name=b pattern=gradient width={W} height={H} frames={frames} ! tee name=tb \
         ta. ! rawsink location=a.rgba tb. ! rawsink location=b.rgba"
    );
    for (k, (file, props)) in mixers.iter().enumerate() {
        p.push_str(&format!(
            " ta. ! m{k}.sink_0 tb. ! m{k}.sink_1 mix name=m{k} {props} ! rawsink location={file}"
        ));
    }
    p
}

fn frames_of(dir: &std::path::Path, file: &str, n: usize) -> Vec<u8> {
    let bytes = std::fs::read(dir.join(file)).unwrap();
    assert_eq!(bytes.len(), n * FRAME, "{file}: {} bytes", bytes.len());
    bytes
}

#[test]
fn a_fade_transition_mix_gives_the_crossfade_frames() {
    let dir = tmpdir("gpu-transition-fade");
    let n = 6;
    // The same oscillator on both faders: its value is the frame's, so every frame has its own
    // amount and both mixes see it.
    let fader = "fader=~sine:1hz:0..1:phase=0.1";
    fp_run(
        dir.path(),
        &[
            "-q",
            "--unpaced",
            &mix_show(
                n,
                &[
                    ("cf.rgba", &format!("mode=crossfade {fader}")),
                    (
                        "tr.rgba",
                        &format!("mode=transition transition=fade {fader}"),
                    ),
                ],
            ),
        ],
    );
    let (a, b) = (
        frames_of(dir.path(), "a.rgba", n),
        frames_of(dir.path(), "b.rgba", n),
    );
    let cf = frames_of(dir.path(), "cf.rgba", n);
    let tr = frames_of(dir.path(), "tr.rgba", n);
    let mut worst = (0, 0);
    for (i, (x, y)) in tr.iter().zip(&cf).enumerate() {
        let d = x.abs_diff(*y);
        if d > worst.0 {
            worst = (d, i);
        }
    }
    let (d, i) = worst;
    assert!(
        d <= 1,
        "frame {}, pixel {}, channel {}: transition {}, crossfade {}",
        i / FRAME,
        i % FRAME / 4,
        i % 4,
        tr[i],
        cf[i]
    );
    // The frames mix two different pictures by amounts that differ from frame to frame: not
    // one input or the other, not one amount throughout.
    assert_ne!(a[..FRAME], b[..FRAME]);
    assert!(cf != a && cf != b);
    let amount = |k: usize| {
        let px = (k * FRAME..(k + 1) * FRAME)
            .find(|&i| a[i].abs_diff(b[i]) > 100)
            .unwrap();
        (f64::from(cf[px]) - f64::from(a[px])) / (f64::from(b[px]) - f64::from(a[px]))
    };
    assert!(
        (amount(0) - amount(3)).abs() > 0.05,
        "{} {}",
        amount(0),
        amount(3)
    );
}

#[test]
fn a_directional_transition_mix_shifts_the_inputs_by_its_parameter() {
    let dir = tmpdir("gpu-transition-directional");
    let n = 3;
    fp_run(
        dir.path(),
        &[
            "-q",
            "--unpaced",
            &mix_show(
                n,
                &[(
                    "dir.rgba",
                    "mode=transition transition=directional direction=1,0 fader=0.5",
                )],
            ),
        ],
    );
    let (a, b) = (
        frames_of(dir.path(), "a.rgba", n),
        frames_of(dir.path(), "b.rgba", n),
    );
    let got = frames_of(dir.path(), "dir.rgba", n);
    // The default direction, 0,1, would shift the inputs vertically.
    for k in 0..n {
        assert_directional(&got, &a, &b, k, true);
    }
}

/// Where `(x, y)` of a `directional` mix at progress 0.5 takes its pixel from (`(false, ..)`:
/// input 0, `true`: input 1), for `direction` 1,0 (`horizontal`) or 0,1. p = uv + 0.5 *
/// sign(direction): inside the picture input 0 at p, else input 1 at fract(p); texel centres,
/// so no filtering. uv's y goes up: the picture's top half (y < H/2) is input 1's bottom half.
fn directional_at(horizontal: bool, x: usize, y: usize) -> (bool, usize, usize) {
    match horizontal {
        true if x < W / 2 => (false, x + W / 2, y),
        true => (true, x - W / 2, y),
        false if y >= H / 2 => (false, x, y - H / 2),
        false => (true, x, y + H / 2),
    }
}

/// Frame `k` of `got` is the `directional` mix of frame `k` of `a` and `b` (`horizontal`: see
/// [`directional_at`]), within 1.
fn assert_directional(got: &[u8], a: &[u8], b: &[u8], k: usize, horizontal: bool) {
    for y in 0..H {
        for x in 0..W {
            let (to, sx, sy) = directional_at(horizontal, x, y);
            let src = if to { b } else { a };
            let px = |p: &[u8], x: usize, y: usize| {
                let i = k * FRAME + (y * W + x) * 4;
                p[i..i + 4].to_vec()
            };
            let (g, w) = (px(got, x, y), px(src, sx, sy));
            assert!(
                g.iter().zip(&w).all(|(p, q)| p.abs_diff(*q) <= 1),
                "frame {k} (direction {}), pixel ({x}, {y}): {g:?}, want {w:?}",
                if horizontal { "1,0" } else { "0,1" }
            );
        }
    }
}

#[test]
fn a_transition_parameter_set_live_shows_from_the_frame_its_reply_names() {
    let dir = tmpdir("gpu-transition-set");
    let show = mix_show(
        0,
        &[(
            "dir.rgba",
            "mode=transition transition=directional direction=1,0 fader=0.5",
        )],
    );
    let mut fp = Fp::run_in(dir.path(), &["--threads", "2", "--fps", "30", &show]);
    std::thread::sleep(Duration::from_millis(300));
    let (mode, set) = ("set m0.mode crossfade", "set m0.direction 0,1");
    fp.command(mode);
    fp.after(&format!("refused '{mode}'"));
    fp.command(set);
    fp.after(&format!("ok '{set}' from frame"));
    std::thread::sleep(Duration::from_millis(200));
    fp.command("stop");
    fp.wait_success();
    let err = fp.stderr();
    assert!(
        err.contains(&format!(
            "refused '{mode}': m0.mode cannot change while running"
        )),
        "{err}"
    );
    let at = applied_at(&err, set);
    let got = std::fs::read(dir.path().join("dir.rgba")).unwrap();
    let n = got.len() / FRAME;
    let (a, b) = (
        frames_of(dir.path(), "a.rgba", n),
        frames_of(dir.path(), "b.rgba", n),
    );
    assert!(0 < at && at < n, "set at {at}, {n} frames");
    for k in 0..n {
        assert_directional(&got, &a, &b, k, k < at);
    }
}

/// The old project (moving bars) and the new one (a gradient with the frame counter), the
/// running sink's file `out.rgba`.
fn projects() -> (String, String) {
    (
        format!("testsrc width={W} height={H} ! rawsink name=out location=out.rgba"),
        format!(
            "testsrc width={W} height={H} pattern=gradient counter=true \
             ! rawsink name=out location=ignored.rgba"
        ),
    )
}

/// `count` frames of `pipeline` alone (into `file`), unpaced, as raw RGBA.
fn alone(dir: &std::path::Path, file: &str, pipeline: &str, count: usize) -> Vec<u8> {
    let pipeline = pipeline
        .replace("location=out.rgba", &format!("location={file}"))
        .replace("location=ignored.rgba", &format!("location={file}"))
        .replacen("testsrc ", &format!("testsrc frames={count} "), 1);
    fp_run(dir, &["-q", "--unpaced", &pipeline]);
    frames_of(dir, file, count)
}

/// The frame number in the reply line `ok 'LINE' from frame N`.
fn applied_at(stderr: &str, line: &str) -> usize {
    let prefix = format!("ok '{line}' from frame ");
    let at = stderr
        .find(&prefix)
        .unwrap_or_else(|| panic!("no reply applying '{line}': {stderr}"));
    let digits: String = stderr[at + prefix.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

#[test]
fn load_with_a_transition_wipes_frame_by_frame() {
    let dir = tmpdir("gpu-transition-load");
    let (old, new) = projects();
    std::fs::write(
        dir.path().join("new.toml"),
        format!("pipeline = \"{new}\"\n"),
    )
    .unwrap();
    let mut show = Fp::run_in(dir.path(), &["--threads", "2", "--fps", "30", &old]);
    // 15 frames at testsrc's 30 fps.
    let (len, load) = (15, "load new.toml fade=500ms transition=wipeLeft");
    let typo = "load new.toml fade=500ms transition=wipeLft";
    let param = "load new.toml fade=500ms transition=wipeLeft speed=2";
    std::thread::sleep(Duration::from_millis(300));
    show.command(typo);
    show.after(&format!("refused '{typo}'"));
    show.command(param);
    show.after(&format!("refused '{param}'"));
    show.command(load);
    show.after(&format!("ok '{load}' from frame"));
    show.after("fade to new.toml done at frame");
    std::thread::sleep(Duration::from_millis(300));
    show.command("stop");
    show.wait_success();
    let err = show.stderr();
    assert!(
        err.contains(&format!(
            "refused '{typo}': cannot crossfade to new.toml: mix: no gl-transition called \
             'wipeLft'; did you mean wipeLeft"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("refused '{param}': cannot crossfade to new.toml"))
            && err.contains("unknown property 'speed' on mix"),
        "{err}"
    );
    let start = applied_at(&err, load);
    assert!(
        err.contains(&format!("fade to new.toml done at frame {}", start + len)),
        "{err}"
    );
    let out = std::fs::read(dir.path().join("out.rgba")).unwrap();
    let frames = out.len() / FRAME;
    assert!(
        start > 0 && start + len < frames,
        "fade from {start}, {frames} frames"
    );
    let a = alone(dir.path(), "old.rgba", &old, frames);
    let b = alone(dir.path(), "new.rgba", &new, frames - start);
    for k in 0..frames {
        let got = &out[k * FRAME..(k + 1) * FRAME];
        let old_k = &a[k * FRAME..(k + 1) * FRAME];
        let j = k.saturating_sub(start);
        let new_j = &b[j * FRAME..(j + 1) * FRAME];
        // wipeLeft: to where progress >= 1 - uv.x (step(1 - x, progress)), from elsewhere;
        // the old project alone before the fade, the new one from its end.
        let progress = match k {
            k if k < start => 0.0,
            _ if j >= len => 1.0,
            _ => j as f64 / len as f64,
        };
        for y in 0..H {
            for x in 0..W {
                let to = progress >= 1.0 - (x as f64 + 0.5) / W as f64;
                let i = (y * W + x) * 4;
                let want = if to {
                    &new_j[i..i + 4]
                } else {
                    &old_k[i..i + 4]
                };
                assert!(
                    &got[i..i + 4] == want,
                    "frame {k} (fade from {start} over {len}), pixel ({x}, {y}): {:?}, want the \
                     {} project's {want:?}",
                    &got[i..i + 4],
                    if to { "new" } else { "old" }
                );
            }
        }
    }
    // The fade's middle frame holds both projects, which differ there.
    let mid = (start + len / 2) * FRAME;
    assert!(out[mid..mid + FRAME] != a[mid..mid + FRAME]);
}

#[test]
fn an_unknown_transition_is_refused_with_the_closest_names_and_no_gl_names_the_packages() {
    let show = |t: &str| {
        format!(
            "testsrc width={W} height={H} frames=2 ! m.sink_0 \
             testsrc pattern=gradient width={W} height={H} frames=2 ! m.sink_1 \
             mix name=m mode=transition transition={t} ! nullsink"
        )
    };
    let err = fp_fails(&[&show("crosswrap")], &[]);
    assert!(
        err.contains("mix: no gl-transition called 'crosswrap'; did you mean crosswarp"),
        "{err}"
    );
    // `inspect` lists the node's properties: the mix's, then the transition's.
    let out = run(
        Command::new(FP).args(["inspect", "mix", "transition=directional"]),
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for prop in ["mode ", "transition ", "fader ", "direction "] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(prop)),
            "no {prop}in: {text}"
        );
    }
    let err = fp_fails(
        &[&show("fade")],
        &[("FRAMEPIPE_EGL_LIB", "/nonexistent/libEGL.so.1")],
    );
    assert!(
        err.contains("libegl-mesa0") && err.contains("libgl1-mesa-dri"),
        "{err}"
    );
}
