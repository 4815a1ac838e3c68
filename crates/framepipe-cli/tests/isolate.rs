//! Issue #11, requirement 2: frei0r plugins isolated in a child process (`isolate=true`), through
//! the real `framepipe` binary: the real plugins that crash (3dflippo, cairoimagegrid 8x8,
//! test_pat_I, partik0l 8x8), small frei0r plugins built here with `cc` that segfault or hang on a
//! chosen frame, parameters reaching the child (and again after a restart), and an isolated
//! stateless plugin giving the same bytes as the same plugin in process.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{tmpdir, FP};

const LIMIT: Duration = Duration::from_secs(60);

/// A frei0r filter in C: out = in XOR a mask, the mask chosen by its one parameter `level`
/// (< 0.5: 0x00ffffff, inverting R, G and B; >= 0.5: 0x0000ff00, inverting G). At the frame whose
/// time is `FAIL_AT_MS` it dereferences NULL, or with `-DHANG` spins for ever.
const FAILING_FILTER_C: &str = r#"
#include <stdint.h>
#include <stdlib.h>
typedef struct { const char *name, *author; int plugin_type, color_model, frei0r_version,
    major_version, minor_version, num_params; const char *explanation; } info_t;
typedef struct { const char *name; int type; const char *explanation; } param_info_t;
typedef struct { unsigned w, h; double level; } inst_t;
int f0r_init(void) { return 1; }
void f0r_deinit(void) {}
void f0r_get_plugin_info(info_t *i) {
    i->name = "failing"; i->author = "framepipe tests"; i->plugin_type = 0; i->color_model = 1;
    i->frei0r_version = 1; i->major_version = 0; i->minor_version = 1; i->num_params = 1;
    i->explanation = "XOR mask; fails at one frame";
}
void f0r_get_param_info(param_info_t *p, int i) {
    (void)i; p->name = "level"; p->type = 1; p->explanation = "mask choice";
}
void *f0r_construct(unsigned w, unsigned h) {
    inst_t *s = calloc(1, sizeof *s); s->w = w; s->h = h; return s;
}
void f0r_destruct(void *s) { free(s); }
void f0r_set_param_value(void *p, void *v, int i) { (void)i; ((inst_t *)p)->level = *(double *)v; }
void f0r_get_param_value(void *p, void *v, int i) { (void)i; *(double *)v = ((inst_t *)p)->level; }
void f0r_update(void *p, double t, const uint32_t *in, uint32_t *out) {
    inst_t *s = p; size_t n = (size_t)s->w * s->h;
    uint32_t mask = s->level >= 0.5 ? 0x0000ff00u : 0x00ffffffu;
    if ((long)(t + 0.5) == FAIL_AT_MS) {
#ifdef HANG
        for (volatile int spin = 1; spin;) {}
#else
        *(volatile int *)0 = 1;
#endif
    }
    for (size_t i = 0; i < n; i++) out[i] = in[i] ^ mask;
}
"#;

/// Mask for `level` < 0.5 and >= 0.5 (little-endian RGBA words, as the plugin sees them).
const MASK_LOW: u32 = 0x00ff_ffff;
const MASK_HIGH: u32 = 0x0000_ff00;

/// Frame 6 at 30 fps is at 200 ms: the failing frame.
const FAIL_FRAME: usize = 6;
const W: usize = 64;
const H: usize = 64;
const FRAMES: usize = 12;

/// A scratch directory (removed on drop) with the test plugins built in it.
struct Plugins(framepipe_testkit::TestDir);

impl Plugins {
    fn build(tag: &str) -> Plugins {
        let dir = tmpdir(&format!("isolate-{tag}"));
        let src = dir.join("failing.c");
        std::fs::write(&src, FAILING_FILTER_C).unwrap();
        for (stem, extra) in [("fp_segv", None), ("fp_hang", Some("-DHANG"))] {
            let st = Command::new("cc")
                .args(["-shared", "-fPIC", "-O1", "-DFAIL_AT_MS=200", "-o"])
                .arg(dir.join(format!("{stem}.so")))
                .args(extra)
                .arg(&src)
                .status()
                .expect("run cc");
            assert!(st.success(), "cc failed for {stem}");
        }
        Plugins(dir)
    }

    /// `framepipe run -q --unpaced PIPELINE` with these plugins on the frei0r path.
    fn run(&self, pipeline: &str) -> Output {
        common::run(
            Command::new(FP)
                .env(
                    "FREI0R_PATH",
                    format!("{}:/usr/lib/frei0r-1", self.0.display()),
                )
                .args(["run", "-q", "--unpaced", pipeline]),
            LIMIT,
        )
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn words(path: &str) -> Vec<u32> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The input every test filters: testsrc's moving bars, 64x64, 12 frames at 30 fps.
fn input(p: &Plugins) -> Vec<u32> {
    let f = p.path("in.rgba");
    let out = p.run(&format!(
        "testsrc width={W} height={H} frames={FRAMES} rate=30 ! rawsink location={f} format=rgba"
    ));
    assert!(out.status.success(), "{}", stderr(&out));
    words(&f)
}

/// No process runs with `needle` in its command line any more (waits up to 2 s): the children
/// of an isolated run do not outlive it.
fn assert_no_process_with(needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let found: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(needle) && c.contains(framepipe_frei0r::isolate::HOST_ARG))
            .collect();
        if found.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "plugin hosts still running after the run: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Checks the frames of a run of the failing filter: `mask` applied to every frame but the
/// failing one, which is `replaced` (the input for bypass, the frame before for hold).
fn check_frames(got: &[u32], input: &[u32], mask: u32, hold: bool) {
    let n = W * H;
    assert_eq!(got.len(), FRAMES * n, "every frame is written, whole");
    for k in 0..FRAMES {
        let frame = &got[k * n..(k + 1) * n];
        let want: Vec<u32> = if k == FAIL_FRAME {
            if hold {
                input[(k - 1) * n..k * n].iter().map(|w| w ^ mask).collect()
            } else {
                input[k * n..(k + 1) * n].to_vec()
            }
        } else {
            input[k * n..(k + 1) * n].iter().map(|w| w ^ mask).collect()
        };
        assert!(
            frame == &want[..],
            "frame {k} differs from what was expected"
        );
    }
}

// issue #11
#[test]
fn a_plugin_segfaulting_on_one_frame_costs_that_frame_only() {
    let p = Plugins::build("segv");
    let input = input(&p);
    let src = p.path("in.rgba");
    for (policy, hold) in [("bypass", false), ("hold", true)] {
        let out_file = p.path(&format!("out-{policy}.rgba"));
        // level=1 is set at the start; the restarted child must get it again.
        let out = p.run(&format!(
            "rawsrc location={src} format=rgba width={W} height={H} rate=30 ! \
             frei0r-fp_segv isolate=true on-crash={policy} level=1 ! \
             rawsink location={out_file} format=rgba"
        ));
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains(&format!(
                "frei0r-fp_segv (isolated): plugin crashed (signal 11 SIGSEGV) at frame {FAIL_FRAME}; output {}",
                if hold { "held" } else { "bypassed" }
            )),
            "{err}"
        );
        // Not in the probe's table: it may keep state, and the report says what a restart costs.
        assert!(err.contains("starts again from its initial state"), "{err}");
        assert!(
            err.contains(
                "frei0r-fp_segv (isolated): 1 crashes, 0 stalls, 1 restarts, 1 frames replaced"
            ),
            "{err}"
        );
        check_frames(&words(&out_file), &input, MASK_HIGH, hold);
    }
    assert_no_process_with(&p.0.display().to_string());
}

// issue #11
#[test]
fn a_plugin_that_hangs_is_killed_at_the_stall_timeout_and_restarted() {
    let p = Plugins::build("hang");
    let input = input(&p);
    let src = p.path("in.rgba");
    let out_file = p.path("out.rgba");
    let out = p.run(&format!(
        "rawsrc location={src} format=rgba width={W} height={H} rate=30 ! \
         frei0r-fp_hang isolate=true stall-ms=300 ! rawsink location={out_file} format=rgba"
    ));
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "frei0r-fp_hang (isolated): plugin stalled (no frame within 300 ms; killed) at frame {FAIL_FRAME}; output bypassed; restarting now"
        )),
        "{err}"
    );
    check_frames(&words(&out_file), &input, MASK_LOW, false);
    // The spinning child was killed, not left running.
    assert_no_process_with(&p.0.display().to_string());
}

// issue #11
#[test]
fn a_parameter_set_while_running_reaches_the_isolated_plugin() {
    let p = Plugins::build("set");
    let input = input(&p);
    let src = p.path("in.rgba");
    let out_file = p.path("out.rgba");
    // Paced (30 fps), started paused so that the change lands before the run ends however
    // loaded the machine is; the reply names the first frame it applies to. The build-time
    // value is the default (level 0): frames from then on show the change only if it reached
    // the child.
    let mut child = Command::new(FP)
        .env("FREI0R_PATH", p.0.display().to_string())
        .args([
            "run",
            "--start-paused",
            &format!(
                "rawsrc location={src} format=rgba width={W} height={H} rate=30 ! \
                 frei0r-fp_segv isolate=true name=fx ! rawsink location={out_file} format=rgba"
            ),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"set fx.level 1\nresume\n").unwrap();
        // Dropped: end of commands; the run goes on to its last frame.
    }
    let out = common::wait(child, LIMIT, "framepipe run with a set command");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let from: usize = err
        .split("ok 'set fx.level 1' from frame ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no reply with a frame number: {err}"));
    let got = words(&out_file);
    let n = W * H;
    assert_eq!(got.len(), FRAMES * n);
    for k in 0..FRAMES {
        let mask = if k >= from { MASK_HIGH } else { MASK_LOW };
        let want: Vec<u32> = if k == FAIL_FRAME {
            input[k * n..(k + 1) * n].to_vec()
        } else {
            input[k * n..(k + 1) * n].iter().map(|w| w ^ mask).collect()
        };
        assert!(
            got[k * n..(k + 1) * n] == want[..],
            "frame {k} (change from frame {from})"
        );
    }
}

// issue #11
#[test]
fn the_real_crashing_plugins_run_isolated_to_the_end() {
    let d = tmpdir("isolate-real");
    let file = |n: &str| d.join(n).display().to_string();
    let run = |pipeline: &str| {
        common::run(
            Command::new(FP)
                .env("FREI0R_PATH", "/usr/lib/frei0r-1")
                .args(["run", "-q", "--unpaced", pipeline]),
            LIMIT,
        )
    };
    let frames = 10usize;
    // The input of the filters, to check what bypass gives.
    let small_in = file("in8.rgba");
    assert!(run(&format!(
        "testsrc width=8 height=8 frames={frames} ! rawsink location={small_in} format=rgba"
    ))
    .status
    .success());
    for (name, pipeline, size, bypass_is_input) in [
        // The probe saw 3dflippo crash: isolated by default (no `isolate=true`).
        (
            "frei0r-3dflippo",
            format!("testsrc width=64 height=48 frames={frames} ! frei0r-3dflippo"),
            64 * 48,
            false,
        ),
        (
            "frei0r-cairoimagegrid",
            format!(
                "testsrc width=8 height=8 frames={frames} ! \
                 frei0r-cairoimagegrid rows=1 columns=1 isolate=true"
            ),
            64,
            true,
        ),
        (
            "frei0r-test_pat_I",
            format!(
                "frei0r-test_pat_I width=8 height=8 frames={frames} type=0.2 param-width=1 \
                 isolate=true"
            ),
            64,
            false,
        ),
        (
            "frei0r-partik0l",
            format!("frei0r-partik0l width=8 height=8 frames={frames} isolate=true"),
            64,
            false,
        ),
    ] {
        let out_file = file("out.rgba");
        let out = run(&format!(
            "{pipeline} ! rawsink location={out_file} format=rgba"
        ));
        let err = stderr(&out);
        assert!(out.status.success(), "{name}: {err}");
        assert!(
            err.contains(&format!("{name} (isolated): plugin crashed (signal ")),
            "{name}: {err}"
        );
        assert!(
            err.lines().any(
                |l| l.starts_with(&format!("framepipe: {name} (isolated): "))
                    && l.contains(" crashes, ")
            ),
            "{name}: {err}"
        );
        let got = std::fs::read(&out_file).unwrap();
        assert_eq!(got.len(), frames * size * 4, "{name}: every frame written");
        if bypass_is_input {
            // cairoimagegrid dies at every frame at 8x8: every frame is its input.
            assert!(
                got == std::fs::read(&small_in).unwrap(),
                "{name}: bypassed frames equal the input"
            );
        }
    }
    // isolate=false on a plugin the probe saw crash: refused, as before isolation existed.
    let out = run("testsrc width=64 height=48 frames=2 ! frei0r-3dflippo isolate=false ! nullsink");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the probe found this plugin unusable (crashed"),
        "{}",
        stderr(&out)
    );
}

// issue #11
#[test]
fn isolated_plugins_give_the_same_bytes_as_in_process() {
    let d = tmpdir("isolate-same");
    let file = |n: &str| d.join(n).display().to_string();
    let (w, h, frames) = (96, 72, 6);
    let a = file("a.rgba");
    assert!(common::run(
        Command::new(FP).args([
            "run",
            "-q",
            "--unpaced",
            &format!(
                "testsrc width={w} height={h} frames={frames} pattern=noise ! \
                 rawsink location={a} format=rgba"
            ),
        ]),
        LIMIT
    )
    .status
    .success());
    let src = format!("rawsrc location={a} format=rgba width={w} height={h}");
    // A stateless filter (glow, a non-default parameter), a BGRA8888 filter (the child swaps R
    // and B as the in-process element does), and a mixer (two inputs through shared memory).
    for (tag, chain) in [
        ("glow", format!("{src} ! frei0r-glow blur=0.7 ISO")),
        ("bgra", format!("{src} ! frei0r-cartoon ISO")),
        (
            "mixer",
            format!("{src} ! m.sink_0  testsrc width={w} height={h} frames={frames} ! m.sink_1  frei0r-multiply name=m ISO"),
        ),
    ] {
        let mut outputs = Vec::new();
        for iso in ["", "isolate=true"] {
            let out_file = file(&format!("{tag}-{}.rgba", outputs.len()));
            let pipeline = format!(
                "{} ! rawsink location={out_file} format=rgba",
                chain.replace("ISO", iso)
            );
            let stats = file("stats.json");
            let out = common::run(
                Command::new(FP).args(["run", "-q", "--unpaced", "--stats", &stats, &pipeline]),
                LIMIT,
            );
            assert!(out.status.success(), "{pipeline}: {}", stderr(&out));
            assert!(!stderr(&out).contains("isolated"), "{}", stderr(&out));
            let stats: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
            let isolated = stats["isolated"].as_array().unwrap();
            if iso.is_empty() {
                assert!(isolated.is_empty(), "{tag}: {isolated:?}");
            } else {
                // Zero-copy: the run's pools are in shared memory, and the child read and wrote
                // every frame in place.
                assert_eq!(isolated.len(), 1, "{tag}: {isolated:?}");
                assert_eq!(isolated[0]["frames"], frames, "{tag}: {isolated:?}");
                assert_eq!(isolated[0]["bytes_copied"], 0, "{tag}: {isolated:?}");
            }
            let bytes = std::fs::read(&out_file).unwrap();
            assert_eq!(bytes.len(), w * h * 4 * frames, "{tag}");
            outputs.push(bytes);
        }
        assert!(outputs[0] == outputs[1], "{tag}: isolated output differs");
        assert!(
            outputs[0] != std::fs::read(&a).unwrap(),
            "{tag}: the plugin changed nothing, the comparison proves nothing"
        );
    }
}

// issue #11
#[test]
fn the_isolate_plugins_flag_isolates_every_frei0r_node() {
    let p = Plugins::build("flag");
    let out = p.run("testsrc width=64 height=64 frames=8 rate=30 ! frei0r-fp_segv ! nullsink");
    // Without isolation the crash takes the process down.
    assert!(!out.status.success());
    let out = common::run(
        Command::new(FP)
            .env("FREI0R_PATH", p.0.display().to_string())
            .args([
                "run",
                "-q",
                "--unpaced",
                "--isolate-plugins",
                "testsrc width=64 height=64 frames=8 rate=30 ! frei0r-fp_segv ! nullsink",
            ]),
        LIMIT,
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("frei0r-fp_segv (isolated): plugin crashed (signal 11 SIGSEGV) at frame 6"),
        "{err}"
    );
}
