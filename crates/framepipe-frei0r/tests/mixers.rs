//! Issue #8: frei0r mixer2 / mixer3 plugins as mixers, checked against GStreamer's
//! `frei0r-mixer-NAME` elements (gst-plugins-bad) on the same raw inputs, byte for byte.
//!
//! How the two sides are made to agree:
//! * **Caps.** GStreamer's frei0r mixers take the plugin's own colour model as caps: `RGBA` for
//!   RGBA8888 plugins, `BGRA` for BGRA8888 ones (xfade0r). Our element takes RGBA frames and swaps
//!   R and B around a BGRA8888 plugin. The gst pipeline reads the same RGBA files and, for a
//!   BGRA8888 plugin, converts them with `videoconvert` to BGRA and the result back to RGBA (a
//!   pure byte reorder between two 8-bit RGB formats, exact), so both plugins see the same bytes.
//!   Offering RGBA to a BGRA-only element would fail to link, so a wrong guess fails the test.
//! * **Time.** gst passes the buffer's PTS in seconds, we pass milliseconds (as FFmpeg does for
//!   filters). The plugins compared here do not look at time: the probe's table says so, and the
//!   tests assert it first, so a plugin that starts to depend on time fails loudly instead of
//!   comparing unequal units.
//! * **Parameters.** gst sets every parameter at construction from its property cache (the
//!   plugin's defaults unless given); we set the ones that differ from the defaults. Given values
//!   are passed to both sides with the same text.

use std::path::{Path, PathBuf};
use std::process::Command;

use framepipe_core::{
    Element, ElementKind, FrameCtx, FramePool, InlineSlices, MixerFactory, Mode, PropValue,
    Rational, Registry, VideoInfo,
};
use framepipe_frei0r::{modes, register_from};

const DIR: &str = "/usr/lib/frei0r-1";
const GST_LAUNCH: &str = "/usr/bin/gst-launch-1.0";

fn registry() -> Registry {
    let mut r = Registry::new();
    let warnings = register_from(&mut r, &[PathBuf::from(DIR)]);
    assert!(warnings.is_empty(), "{warnings:?}");
    r
}

fn info(w: u32, h: u32) -> VideoInfo {
    VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(25, 1),
    }
}

fn ctx(k: u64) -> FrameCtx {
    FrameCtx::new(k, Rational::new(25, 1).frame_time_ns(k))
}

fn mixer(r: &Registry, name: &str, props: &[(&str, &str)]) -> Box<dyn MixerFactory> {
    let given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match r.create(name, &given).unwrap() {
        Element::Mixer(m) => m,
        other => panic!("{name} is not a mixer: {other:?}"),
    }
}

/// A scratch directory for one test's files, removed on drop.
struct Scratch(framepipe_testkit::TestDir);

impl Scratch {
    fn new(tag: &str) -> Self {
        Scratch(framepipe_testkit::tmpdir(&format!("fp-f0mix-{tag}")))
    }
    fn file(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, data).unwrap();
        p
    }
}

/// The colour model the registry reports for `name`.
fn colour_model(r: &Registry, name: &str) -> String {
    let e = r.find(name).unwrap();
    e.desc
        .details
        .iter()
        .find(|(k, _)| k == "colour model")
        .map(|(_, v)| v.clone())
        .unwrap()
}

/// GStreamer's `frei0r-mixer-<gst_name>` on the raw RGBA files `inputs`, output as raw RGBA.
fn gst_mix(
    gst_name: &str,
    props: &[(&str, &str)],
    bgra: bool,
    inputs: &[PathBuf],
    out: &Path,
    w: u32,
    h: u32,
) -> Vec<u8> {
    let parse = format!("rawvideoparse format=rgba width={w} height={h} framerate=25/1");
    let to_model = if bgra {
        " ! videoconvert ! video/x-raw,format=BGRA"
    } else {
        ""
    };
    let mut desc = String::new();
    for (i, p) in inputs.iter().enumerate() {
        desc += &format!(
            "filesrc location={} ! {parse}{to_model} ! m.sink_{i} ",
            p.display()
        );
    }
    let given: Vec<String> = props.iter().map(|(k, v)| format!("{k}={v}")).collect();
    desc += &format!(
        "frei0r-mixer-{gst_name} name=m {}{} ! filesink location={}",
        given.join(" "),
        if bgra {
            " ! videoconvert ! video/x-raw,format=RGBA"
        } else {
            ""
        },
        out.display()
    );
    let args: Vec<&str> = desc.split_whitespace().collect();
    let o = Command::new(GST_LAUNCH)
        .arg("-q")
        .args(&args)
        .output()
        .expect("run gst-launch-1.0 (scripts/install-deps installs it)");
    assert!(
        o.status.success(),
        "gst-launch-1.0 {desc} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read(out).unwrap()
}

/// Our element `name` on the same raw RGBA inputs: negotiate, instantiate, process frame by
/// frame on pool frames.
fn our_mix(
    r: &Registry,
    name: &str,
    props: &[(&str, &str)],
    inputs: &[Vec<u8>],
    w: u32,
    h: u32,
) -> Vec<u8> {
    let mut factory = mixer(r, name, props);
    let infos = vec![info(w, h); inputs.len()];
    assert_eq!(factory.negotiate(&infos).unwrap(), info(w, h));
    let mut inst = factory.instantiate().unwrap();
    let pool = FramePool::new(w, h, inputs.len() + 2);
    let frame_bytes = (w * h * 4) as usize;
    let frames = inputs[0].len() / frame_bytes;
    let mut out = Vec::with_capacity(inputs[0].len());
    for k in 0..frames {
        let ins: Vec<framepipe_core::Frame> = inputs
            .iter()
            .map(|data| {
                let mut f = pool.acquire().unwrap();
                f.copy_from(&data[k * frame_bytes..(k + 1) * frame_bytes]);
                f.freeze()
            })
            .collect();
        let refs: Vec<&framepipe_core::Frame> = ins.iter().collect();
        let mut o = pool.acquire().unwrap();
        inst.process(&ctx(k as u64), &refs, &mut o, &InlineSlices)
            .unwrap();
        out.extend_from_slice(o.data());
    }
    out
}

fn first_difference(a: &[u8], b: &[u8], frame_bytes: usize) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!(
            "first difference at byte {i} (frame {}, pixel {}, channel {}): ours {} gst {}",
            i / frame_bytes,
            (i % frame_bytes) / 4,
            i % 4,
            a[i],
            b[i]
        ),
        None => format!("lengths differ: ours {} gst {}", a.len(), b.len()),
    }
}

/// Runs `stem` on both sides with `props` and asserts identical bytes; returns the output.
fn check_against_gst(stem: &str, gst_name: &str, props: &[(&str, &str)], inputs: usize) -> Vec<u8> {
    let (w, h, frames) = (96u32, 72u32, 5u32);
    let r = registry();
    let name = format!("frei0r-{stem}");
    let e = r.find(&name).unwrap();
    assert_eq!(
        e.desc.kind,
        ElementKind::Mixer {
            min_inputs: inputs,
            max_inputs: inputs
        }
    );
    // gst passes seconds, we pass milliseconds: only time-independent plugins compare.
    let row = modes::lookup(stem).unwrap();
    assert!(!row.time_dependent, "{stem} depends on time: {}", row.note);
    let bgra = match colour_model(&r, &name).as_str() {
        "BGRA8888" => true,
        "RGBA8888" | "PACKED32" => false,
        other => panic!("{name}: colour model {other}"),
    };
    let scratch = Scratch::new(stem);
    let data: Vec<Vec<u8>> = (0..inputs)
        .map(|i| framepipe_testkit::frames::pattern(i as u32 + 1, w, h, frames))
        .collect();
    let files: Vec<PathBuf> = data
        .iter()
        .enumerate()
        .map(|(i, d)| scratch.file(&format!("in{i}.rgba"), d))
        .collect();
    let theirs = gst_mix(
        gst_name,
        props,
        bgra,
        &files,
        &scratch.0.join("gst.rgba"),
        w,
        h,
    );
    let ours = our_mix(&r, &name, props, &data, w, h);
    let frame_bytes = (w * h * 4) as usize;
    assert_eq!(
        theirs.len(),
        (frames as usize) * frame_bytes,
        "gst output size"
    );
    assert!(
        ours == theirs,
        "{name} {props:?} vs gst frei0r-mixer-{gst_name}: {}",
        first_difference(&ours, &theirs, frame_bytes)
    );
    // Not a pass-through: the mix differs from every input.
    for (i, d) in data.iter().enumerate() {
        assert!(&ours != d, "{name}: output equals input {i}");
    }
    ours
}

// issue #8
#[test]
fn mixer_multiply_matches_gstreamer() {
    check_against_gst("multiply", "multiply", &[], 2);
}

// issue #8
#[test]
fn mixer_xfade0r_matches_gstreamer_at_two_fader_positions() {
    // xfade0r is BGRA8888: the swap path. The fader is given on both sides, and it matters: the
    // same inputs at another fader position give other bytes.
    let at_03 = check_against_gst("xfade0r", "xfade0r", &[("fader", "0.3")], 2);
    let at_08 = check_against_gst("xfade0r", "xfade0r", &[("fader", "0.8")], 2);
    assert!(at_03 != at_08, "the fader changes nothing");
}

// issue #8
#[test]
fn mixer3_rgb_matches_gstreamer() {
    // RGB (file RGB.so, gst frei0r-mixer-rgb): the one mixer3 on Debian; each input averaged to
    // one channel (R from the first, G from the second, B from the third).
    check_against_gst("RGB", "rgb", &[], 3);
}

// issue #8
#[test]
fn mixer_blend_with_a_parameter_matches_gstreamer() {
    check_against_gst("blend", "blend", &[("blend", "0.25")], 2);
}

// issue #8
#[test]
fn every_mixer_is_registered_with_its_inputs_and_parameters() {
    let r = registry();
    let mut counts = [0usize; 4];
    for e in r.iter().filter(|e| e.desc.name.starts_with("frei0r-")) {
        let ElementKind::Mixer {
            min_inputs,
            max_inputs,
        } = e.desc.kind
        else {
            continue;
        };
        assert_eq!(min_inputs, max_inputs, "{}", e.desc.name);
        counts[min_inputs] += 1;
        let detail = |k: &str| {
            e.desc
                .details
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
                .unwrap_or_else(|| panic!("{} has no '{k}' detail", e.desc.name))
        };
        assert_eq!(detail("inputs"), min_inputs.to_string());
        assert_eq!(detail("plugin type"), format!("mixer{min_inputs}"));
        // Built as a mixer, scheduled as the probe measured.
        let m = mixer(&r, &e.desc.name, &[]);
        assert_eq!(m.default_mode(), e.desc.default_mode, "{}", e.desc.name);
        assert!(m.needs_equal_sizes());
        let stem = e.desc.name.strip_prefix("frei0r-").unwrap();
        assert_eq!(modes::lookup(stem).unwrap().mode, e.desc.default_mode);
    }
    // Debian 12's frei0r-plugins 1.8: 32 mixer2 and 1 mixer3 (RGB).
    assert!(counts[2] >= 32 && counts[3] >= 1, "{counts:?}");
    // Parameters are properties with the plugin's defaults.
    let x = r.find("frei0r-xfade0r").unwrap();
    let names: Vec<&str> = x.desc.props.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["fader", "isolate", "on-crash", "stall-ms"]);
    assert!(matches!(x.desc.props[0].default, PropValue::Float(_)));
}

// issue #8
#[test]
fn frei0r_mixers_negotiate_only_what_frei0r_takes() {
    let r = registry();
    let mut m = mixer(&r, "frei0r-multiply", &[]);
    let e = m
        .negotiate(&[info(96, 72), info(96, 64)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "frei0r-multiply: cannot take input 1 of 96x64 with input 0 of 96x72: frei0r mixers need inputs of one size"
    );
    let e = m
        .negotiate(&[info(100, 72), info(100, 72)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "frei0r-multiply: cannot take 100x72: frei0r needs width and height multiples of 8"
    );
    let e = m
        .negotiate(&[info(96, 72), info(96, 72), info(96, 72)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "frei0r-multiply: cannot take 3 inputs; this frei0r mixer takes exactly 2"
    );
    let mut rgb = mixer(&r, "frei0r-RGB", &[]);
    assert!(rgb.negotiate(&[info(96, 72), info(96, 72)]).is_err());
    assert_eq!(
        rgb.negotiate(&[info(96, 72), info(96, 72), info(96, 72)])
            .unwrap(),
        info(96, 72)
    );
}

// issue #8
#[test]
fn a_live_mixer_property_change_equals_a_fresh_instance_with_that_value() {
    let (w, h) = (64u32, 48u32);
    let r = registry();
    let data: Vec<Vec<u8>> = (1..=2)
        .map(|s| framepipe_testkit::frames::pattern(s, w, h, 1))
        .collect();
    let fresh = our_mix(&r, "frei0r-xfade0r", &[("fader", "0.7")], &data, w, h);
    let mut factory = mixer(&r, "frei0r-xfade0r", &[]);
    factory.negotiate(&[info(w, h), info(w, h)]).unwrap();
    let mut inst = factory.instantiate().unwrap();
    inst.set_property("fader", &PropValue::Float(0.7)).unwrap();
    let e = inst
        .set_property("fadr", &PropValue::Float(0.7))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "frei0r-xfade0r: no parameter 'fadr'; expected one of: fader"
    );
    let pool = FramePool::new(w, h, 3);
    let ins: Vec<_> = data
        .iter()
        .map(|d| {
            let mut f = pool.acquire().unwrap();
            f.copy_from(d);
            f.freeze()
        })
        .collect();
    let mut o = pool.acquire().unwrap();
    inst.process(&ctx(0), &[&ins[0], &ins[1]], &mut o, &InlineSlices)
        .unwrap();
    assert!(o.data() == &fresh[..]);
}

// issue #8
#[test]
fn the_probe_finds_multiply_stateless_as_the_committed_table_says() {
    // multiply keeps no state: parallel. The probe runs it on distinct input pairs.
    let report =
        framepipe_frei0r::probe::probe_plugin(&Path::new(DIR).join("multiply.so")).unwrap();
    assert_eq!(report.verdict(), "stateless", "{}", report.note);
    assert_eq!(report.mode(), Mode::Parallel);
    assert!(
        report.note.starts_with("mixer2 (2 inputs)"),
        "{}",
        report.note
    );
    let row = report.tsv_row();
    assert!(row.starts_with("multiply\t"), "{row}");
    // The committed table agrees with a fresh measurement.
    let committed = modes::lookup("multiply").unwrap();
    assert_eq!(committed.verdict, "stateless");
    assert_eq!(committed.mode, Mode::Parallel);
}

/// A minimal mixer2 plugin in C, built for the test with the system C compiler: R and B from
/// the first input, G and A from the second. With `-DSTATEFUL` it also adds a frame counter
/// it keeps in the instance to the first pixel, so every frame depends on how many came before.
const TEST_MIXER_C: &str = r#"
#include <stdint.h>
#include <stdlib.h>
typedef struct { const char *name, *author; int plugin_type, color_model, frei0r_version,
    major_version, minor_version, num_params; const char *explanation; } info_t;
typedef struct { unsigned w, h; uint32_t count; } inst_t;
int f0r_init(void) { return 1; }
void f0r_deinit(void) {}
void f0r_get_plugin_info(info_t *i) {
    i->name = "testmix"; i->author = "framepipe tests"; i->plugin_type = 2; i->color_model = 1;
    i->frei0r_version = 1; i->major_version = 0; i->minor_version = 1; i->num_params = 0;
    i->explanation = "test mixer";
}
void f0r_get_param_info(void *p, int i) { (void)p; (void)i; }
void *f0r_construct(unsigned w, unsigned h) {
    inst_t *s = calloc(1, sizeof *s); s->w = w; s->h = h; return s;
}
void f0r_destruct(void *s) { free(s); }
void f0r_set_param_value(void *s, void *v, int i) { (void)s; (void)v; (void)i; }
void f0r_get_param_value(void *s, void *v, int i) { (void)s; (void)v; (void)i; }
void f0r_update2(void *p, double t, const uint32_t *a, const uint32_t *b, const uint32_t *c,
                 uint32_t *out) {
    inst_t *s = p; size_t n = (size_t)s->w * s->h; (void)t; (void)c;
    for (size_t i = 0; i < n; i++) out[i] = (a[i] & 0x00ff00ffu) | (b[i] & 0xff00ff00u);
#ifdef STATEFUL
    out[0] += s->count++;
#endif
}
"#;

// issue #8
#[test]
fn probe_tells_a_stateful_mixer_from_a_stateless_one() {
    let scratch = Scratch::new("cc");
    let src = scratch.file("testmix.c", TEST_MIXER_C.as_bytes());
    let build = |stem: &str, defines: &[&str]| -> PathBuf {
        let out = scratch.0.join(format!("{stem}.so"));
        let st = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&out)
            .args(defines)
            .arg(&src)
            .status()
            .expect("run cc");
        assert!(st.success(), "cc failed");
        out
    };
    let stateless = build("testmix", &[]);
    let stateful = build("testmix_stateful", &["-DSTATEFUL"]);

    let report = framepipe_frei0r::probe::probe_plugin(&stateful).unwrap();
    assert_eq!(report.verdict(), "stateful", "{}", report.note);
    assert_eq!(report.mode(), Mode::Serial);
    let report = framepipe_frei0r::probe::probe_plugin(&stateless).unwrap();
    assert_eq!(report.verdict(), "stateless", "{}", report.note);
    assert_eq!(report.mode(), Mode::Parallel);

    // Through the element: the first input is the plugin's first input.
    let mut r = Registry::new();
    let warnings = register_from(&mut r, &[scratch.0.to_path_buf()]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let (w, h) = (32u32, 16u32);
    let data: Vec<Vec<u8>> = (1..=2)
        .map(|s| framepipe_testkit::frames::pattern(s, w, h, 1))
        .collect();
    let ours = our_mix(&r, "frei0r-testmix", &[], &data, w, h);
    let want: Vec<u8> = data[0]
        .chunks_exact(4)
        .zip(data[1].chunks_exact(4))
        .flat_map(|(a, b)| [a[0], b[1], a[2], b[3]])
        .collect();
    assert!(
        ours == want,
        "{}",
        first_difference(&ours, &want, (w * h * 4) as usize)
    );
    // Not in the probe's table: scheduled serially, the safe choice.
    assert_eq!(
        r.find("frei0r-testmix").unwrap().desc.default_mode,
        Mode::Serial
    );
}

/// Builds element `name` from `props` with the registry.
fn build(r: &Registry, name: &str, props: &[(&str, String)]) -> Element {
    let given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    r.create(name, &given).unwrap()
}

// issue #8
/// The same peer check through the graph engine (framepipe-runtime) with real elements:
/// `rawsrc` per input file → the frei0r mixer node (scheduled as the registry says: parallel)
/// → `rawsink`, at 1, 2 and 4 worker threads: the file written equals gst's output.
#[test]
fn mixers_match_gstreamer_through_the_graph_engine_at_1_2_4_threads() {
    use framepipe_runtime::{Graph, MixerStage, Node, NodeKind, OnEnd, Options};
    let (w, h, frames) = (96u32, 72u32, 12u32);
    let mut r = registry();
    framepipe_io::register(&mut r);
    for (stem, gst_name, props, inputs) in [
        ("multiply", "multiply", vec![], 2usize),
        ("xfade0r", "xfade0r", vec![("fader", "0.3")], 2),
        ("RGB", "rgb", vec![], 3),
    ] {
        let name = format!("frei0r-{stem}");
        let bgra = colour_model(&r, &name) == "BGRA8888";
        assert!(!modes::lookup(stem).unwrap().time_dependent, "{stem}");
        let scratch = Scratch::new(&format!("graph-{stem}"));
        let files: Vec<PathBuf> = (0..inputs)
            .map(|i| {
                scratch.file(
                    &format!("in{i}.rgba"),
                    &framepipe_testkit::frames::pattern(i as u32 + 1, w, h, frames),
                )
            })
            .collect();
        let theirs = gst_mix(
            gst_name,
            &props,
            bgra,
            &files,
            &scratch.0.join("gst.rgba"),
            w,
            h,
        );
        assert_eq!(theirs.len(), (w * h * 4 * frames) as usize);
        let desc = &r.find(&name).unwrap().desc;
        assert_eq!(desc.default_mode, Mode::Parallel, "{name}");
        for threads in [1usize, 2, 4] {
            let out = scratch.0.join(format!("ours-{threads}.rgba"));
            let mut nodes = Vec::new();
            for (i, f) in files.iter().enumerate() {
                let Element::Source(source) = build(
                    &r,
                    "rawsrc",
                    &[
                        ("location", f.display().to_string()),
                        ("width", w.to_string()),
                        ("height", h.to_string()),
                        ("rate", "25".into()),
                    ],
                ) else {
                    panic!("rawsrc is not a source")
                };
                nodes.push(Node::new(
                    format!("src{i}"),
                    NodeKind::Source {
                        source,
                        on_end: OnEnd::Stop,
                    },
                    vec![],
                ));
            }
            let given: Vec<(&str, String)> =
                props.iter().map(|(k, v)| (*k, v.to_string())).collect();
            let Element::Mixer(factory) = build(&r, &name, &given) else {
                panic!("{name} is not a mixer")
            };
            let mut stage = MixerStage::new(factory, desc.default_mode);
            stage.inputs = desc.kind.inputs();
            nodes.push(Node::new(
                "mix",
                NodeKind::Mixer(stage),
                (0..inputs).collect(),
            ));
            let Element::Sink(sink) =
                build(&r, "rawsink", &[("location", out.display().to_string())])
            else {
                panic!("rawsink is not a sink")
            };
            nodes.push(Node::new(
                "out",
                NodeKind::Sink { sink, master: true },
                vec![inputs],
            ));
            Graph::new(nodes)
                .unwrap()
                .prepare(Options {
                    threads,
                    ..Options::default()
                })
                .unwrap()
                .run()
                .unwrap();
            let ours = std::fs::read(&out).unwrap();
            assert!(
                ours == theirs,
                "{name} at --threads {threads}: {}",
                first_difference(&ours, &theirs, (w * h * 4) as usize)
            );
        }
    }
}
