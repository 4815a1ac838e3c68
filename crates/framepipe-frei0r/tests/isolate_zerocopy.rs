//! Issue #11, requirement 2, zero-copy: an isolated plugin reads its inputs and writes its output
//! in place when the frames come from a shared pool ([`FramePool::lazy_shared`]), nothing is
//! copied per frame, and the child can write nothing but the output frame it is serving: a plugin
//! (built here with `cc`) that writes one word past its output, into its input, into the output
//! it delivered the frame before, or dies half-way through writing its output, crashes at that
//! write, the frame is replaced whole, and every other frame stays as it was.

use std::path::{Path, PathBuf};
use std::process::Command;

use framepipe_core::{
    Effect, Element, Frame, FrameCtx, FramePool, InlineSlices, Rational, Registry, VideoInfo,
};

/// A frei0r filter: out = in XOR 0x00ffffff; at its third call (per instance) it misbehaves as
/// its parameter `mode` says: 0 writes one word past the end of its output, 1 writes its input,
/// 2 writes the output it was given at its second call, 3 writes half its output and then
/// dereferences NULL. Any other mode behaves.
const STRAY_FILTER_C: &str = r#"
#include <stdint.h>
#include <stdlib.h>
typedef struct { const char *name, *author; int plugin_type, color_model, frei0r_version,
    major_version, minor_version, num_params; const char *explanation; } info_t;
typedef struct { const char *name; int type; const char *explanation; } param_info_t;
typedef struct { unsigned w, h; double mode; int calls; uint32_t *last_out; } inst_t;
int f0r_init(void) { return 1; }
void f0r_deinit(void) {}
void f0r_get_plugin_info(info_t *i) {
    i->name = "stray"; i->author = "framepipe tests"; i->plugin_type = 0; i->color_model = 1;
    i->frei0r_version = 1; i->major_version = 0; i->minor_version = 1; i->num_params = 1;
    i->explanation = "XOR; writes where it must not at its third call";
}
void f0r_get_param_info(param_info_t *p, int i) {
    (void)i; p->name = "mode"; p->type = 1; p->explanation = "what to do wrong";
}
void *f0r_construct(unsigned w, unsigned h) {
    inst_t *s = calloc(1, sizeof *s); s->w = w; s->h = h; s->mode = 9; return s;
}
void f0r_destruct(void *s) { free(s); }
void f0r_set_param_value(void *p, void *v, int i) { (void)i; ((inst_t *)p)->mode = *(double *)v; }
void f0r_get_param_value(void *p, void *v, int i) { (void)i; *(double *)v = ((inst_t *)p)->mode; }
void f0r_update(void *p, double t, const uint32_t *in, uint32_t *out) {
    (void)t;
    inst_t *s = p; size_t n = (size_t)s->w * s->h; int mode = (int)(s->mode + 0.5);
    s->calls++;
    if (s->calls == 3) {
        if (mode == 0) ((volatile uint32_t *)out)[n] = 0xdeadbeef;
        if (mode == 1) ((volatile uint32_t *)in)[0] = 0xdeadbeef;
        if (mode == 2) ((volatile uint32_t *)s->last_out)[0] = 0xdeadbeef;
        if (mode == 3) {
            for (size_t i = 0; i < n / 2; i++) out[i] = 0xdeadbeef;
            *(volatile int *)0 = 1;
        }
    }
    for (size_t i = 0; i < n; i++) out[i] = in[i] ^ 0x00ffffffu;
    s->last_out = out;
}
"#;

const W: u32 = 64;
const H: u32 = 64;

fn info() -> VideoInfo {
    VideoInfo {
        width: W,
        height: H,
        rate: Rational::new(25, 1),
    }
}

fn ctx(k: u64) -> FrameCtx {
    FrameCtx::new(k, info().rate.frame_time_ns(k))
}

/// A scratch directory with the plugin built in it, removed on drop.
struct Built(framepipe_testkit::TestDir);

impl Built {
    fn new() -> Built {
        let dir = framepipe_testkit::tmpdir("fp-zerocopy");
        let src = dir.join("stray.c");
        std::fs::write(&src, STRAY_FILTER_C).unwrap();
        let st = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(dir.join("fp_stray.so"))
            .arg(&src)
            .status()
            .expect("run cc");
        assert!(st.success(), "cc failed");
        Built(dir)
    }
}

fn registry(dirs: &[&Path]) -> Registry {
    framepipe_frei0r::isolate::set_host_program(PathBuf::from(env!("CARGO_BIN_EXE_frei0r-host")));
    let mut r = Registry::new();
    let dirs: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
    framepipe_frei0r::register_from(&mut r, &dirs);
    r
}

fn effect(r: &Registry, name: &str, props: &[(&str, &str)]) -> Box<dyn Effect> {
    let props: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let Element::Effect(mut f) = r.create(name, &props).unwrap() else {
        panic!("{name} is not an effect")
    };
    f.negotiate(info()).unwrap();
    f.instantiate().unwrap()
}

fn summary(name: &str) -> framepipe_frei0r::isolate::Summary {
    framepipe_frei0r::isolate::summaries()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no isolation summary for {name}"))
}

fn pattern(pool: &FramePool, seed: usize) -> Frame {
    let mut f = pool.acquire().unwrap();
    for (i, b) in f.data_mut().iter_mut().enumerate() {
        *b = if i % 4 == 3 {
            255
        } else {
            ((i * 7 + seed * 31) ^ (i >> 6)) as u8
        };
    }
    f.freeze()
}

// issue #11
#[test]
fn frames_of_a_shared_pool_go_to_the_child_and_back_without_a_copy() {
    let r = registry(&[Path::new("/usr/lib/frei0r-1")]);
    // The same plugin, in process and isolated, on frames of a shared pool and of a heap pool.
    for (element, pool, copies_per_frame) in [
        (
            "frei0r-glow",
            FramePool::lazy_shared(W, H, 6).unwrap(),
            0usize,
        ),
        ("frei0r-sobel", FramePool::new(W, H, 6), 2),
    ] {
        let mut plain = effect(&r, element, &[]);
        let mut isolated = effect(&r, element, &[("isolate", "true")]);
        let before = summary(element);
        for k in 0..8u64 {
            let input = pattern(&pool, k as usize);
            let mut want = pool.acquire().unwrap();
            plain
                .process(&ctx(k), &input, &mut want, &InlineSlices)
                .unwrap();
            let mut got = pool.acquire().unwrap();
            got.data_mut().fill(0x55);
            isolated
                .process(&ctx(k), &input, &mut got, &InlineSlices)
                .unwrap();
            assert!(
                got.data() == want.data(),
                "{element}: frame {k} differs isolated"
            );
        }
        let after = summary(element);
        assert_eq!(after.frames - before.frames, 8, "{element}");
        assert_eq!((after.crashes, after.substituted), (0, 0), "{element}");
        // Shared: nothing copied; heap: each input in and each output out.
        assert_eq!(
            after.bytes_copied - before.bytes_copied,
            (8 * copies_per_frame * (W * H * 4) as usize) as u64,
            "{element}: bytes copied in 8 frames from a {} pool",
            if pool.is_shared() { "shared" } else { "heap" }
        );
    }
}

// issue #11
#[test]
fn an_isolated_plugin_can_write_only_its_output_frame() {
    let built = Built::new();
    let r = registry(&[&built.0]);
    let words = (W * H) as usize;
    for (mode, what) in [
        (0, "one word past its output"),
        (1, "into its input"),
        (2, "into the output it delivered before"),
        (3, "half its output, then dies"),
    ] {
        let pool = FramePool::lazy_shared(W, H, 12).unwrap();
        let mut fx = effect(
            &r,
            "frei0r-fp_stray",
            &[("isolate", "true"), ("mode", &mode.to_string())],
        );
        let before = summary("frei0r-fp_stray");
        let mut outputs: Vec<(Frame, Vec<u8>)> = Vec::new();
        let mut inputs: Vec<(Frame, Vec<u8>)> = Vec::new();
        for k in 0..5u64 {
            let input = pattern(&pool, k as usize + 10 * mode);
            let kept = input.data().to_vec();
            let mut out = pool.acquire().unwrap();
            out.data_mut().fill(0x55);
            fx.process(&ctx(k), &input, &mut out, &InlineSlices)
                .unwrap();
            let out = out.freeze();
            let words_in = input.words();
            let expect: Vec<u32> = if k == 2 {
                // The failing call: bypassed, the whole frame the input.
                words_in.to_vec()
            } else {
                words_in.iter().map(|w| w ^ 0x00ff_ffff).collect()
            };
            assert!(
                out.words() == &expect[..],
                "mode {mode} ({what}): frame {k} is not {}",
                if k == 2 {
                    "the input, whole"
                } else {
                    "the plugin's"
                }
            );
            assert_eq!(out.words().len(), words);
            outputs.push((out.clone(), out.data().to_vec()));
            inputs.push((input, kept));
        }
        // Nothing another node reads was touched: every input, every delivered output, and the
        // frames around them in the pool (all held here, so none was reused).
        for (k, (f, kept)) in inputs.iter().chain(&outputs).enumerate() {
            assert!(
                f.data() == &kept[..],
                "mode {mode} ({what}): frame {k} of the pool was written"
            );
        }
        let after = summary("frei0r-fp_stray");
        assert_eq!(
            (
                after.crashes - before.crashes,
                after.substituted - before.substituted
            ),
            (1, 1),
            "mode {mode} ({what}): one crash, one frame replaced"
        );
    }
}
