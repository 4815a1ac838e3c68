//! The frei0r host against the real plugins in /usr/lib/frei0r-1 and the real ffmpeg.

use std::path::{Path, PathBuf};
use std::process::Command;

use framepipe_core::{
    Effect, EffectFactory, Element, ElementKind, Error, FrameCtx, FramePool, InlineSlices, Mode,
    PropValue, Rational, Registry, VideoInfo,
};
use framepipe_frei0r::{modes, probe, register_from, Instance, Plugin, PluginKind, NOMINAL_SIZE};

const DIR: &str = "/usr/lib/frei0r-1";
const FFMPEG: &str = "/usr/bin/ffmpeg";

fn dirs() -> Vec<PathBuf> {
    vec![PathBuf::from(DIR)]
}

fn registry() -> (Registry, Vec<String>) {
    let mut r = Registry::new();
    let w = register_from(&mut r, &dirs());
    (r, w)
}

fn effect(r: &Registry, name: &str, props: &[(&str, &str)]) -> Box<dyn EffectFactory> {
    let given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match r.create(name, &given).unwrap() {
        Element::Effect(e) => e,
        other => panic!("{name} is not an effect: {other:?}"),
    }
}

fn ctx(k: u64) -> FrameCtx {
    FrameCtx::new(k, Rational::new(25, 1).frame_time_ns(k))
}

fn info(w: u32, h: u32) -> VideoInfo {
    VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(25, 1),
    }
}

/// Runs raw RGBA frames through a chain of effects, one instance each, in our own small loop.
fn run_chain(chain: &mut [Box<dyn EffectFactory>], w: u32, h: u32, input: &[u8]) -> Vec<u8> {
    let frame_bytes = (w * h * 4) as usize;
    let mut instances: Vec<Box<dyn Effect>> = chain
        .iter_mut()
        .map(|f| {
            f.negotiate(info(w, h)).unwrap();
            f.instantiate().unwrap()
        })
        .collect();
    let pool = FramePool::new(w, h, 4);
    let mut out = Vec::with_capacity(input.len());
    for (k, raw) in input.chunks_exact(frame_bytes).enumerate() {
        let mut f = pool.acquire().unwrap();
        f.copy_from(raw);
        let mut frame = f.freeze();
        for inst in instances.iter_mut() {
            let mut o = pool.acquire().unwrap();
            inst.process(&ctx(k as u64), &frame, &mut o, &InlineSlices)
                .unwrap();
            frame = o.freeze();
        }
        out.extend_from_slice(frame.data());
    }
    out
}

fn ffmpeg(args: &[&str]) -> Vec<u8> {
    let out = Command::new(FFMPEG)
        .args(["-hide_banner", "-loglevel", "error", "-nostdin"])
        .args(args)
        .output()
        .expect("run ffmpeg");
    assert!(
        out.status.success(),
        "ffmpeg {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn testsrc2(w: u32, h: u32, frames: u32) -> Vec<u8> {
    let data = ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        &format!("testsrc2=size={w}x{h}:rate=25"),
        "-frames:v",
        &frames.to_string(),
        "-pix_fmt",
        "rgba",
        "-f",
        "rawvideo",
        "-",
    ]);
    assert_eq!(data.len(), (w * h * 4 * frames) as usize);
    data
}

/// ffmpeg's `-vf` on raw RGBA frames (written to a temp file), output as raw RGBA.
fn ffmpeg_filter(w: u32, h: u32, input: &[u8], vf: &str, tag: &str) -> Vec<u8> {
    let dir = framepipe_testkit::tmpdir(&format!("fp-frei0r-{tag}"));
    let path = dir.join("in.rgba");
    std::fs::write(&path, input).unwrap();
    let out = ffmpeg(&[
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgba",
        "-s",
        &format!("{w}x{h}"),
        "-framerate",
        "25",
        "-i",
        path.to_str().unwrap(),
        "-vf",
        vf,
        "-pix_fmt",
        "rgba",
        "-f",
        "rawvideo",
        "-",
    ]);
    out
}

fn first_difference(a: &[u8], b: &[u8], frame_bytes: usize) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!(
            "first difference at byte {i} (frame {}, pixel {}): ours {} ffmpeg {}",
            i / frame_bytes,
            (i % frame_bytes) / 4,
            a[i],
            b[i]
        ),
        None => format!("lengths differ: ours {} ffmpeg {}", a.len(), b.len()),
    }
}

#[test]
fn every_installed_plugin_is_loaded_and_listed() {
    let files: Vec<PathBuf> = std::fs::read_dir(DIR)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "so"))
        .collect();
    assert!(!files.is_empty(), "no plugins in {DIR}");
    let (r, warnings) = registry();
    assert!(
        !warnings.iter().any(|w| w.contains("not a frei0r plugin")),
        "{warnings:?}"
    );
    // Issue #8: mixers are registered too; nothing loaded is left out.
    assert!(warnings.is_empty(), "{warnings:?}");
    let mut mixers = 0;
    for f in &files {
        let plugin = Plugin::load(f).unwrap();
        let name = format!("frei0r-{}", plugin.stem());
        let kind = plugin.info().kind;
        let e = r.find(&name).unwrap_or_else(|| panic!("{name} missing"));
        let want = match kind {
            PluginKind::Source => ElementKind::Source,
            PluginKind::Filter => ElementKind::Effect,
            PluginKind::Mixer2 => ElementKind::Mixer {
                min_inputs: 2,
                max_inputs: 2,
            },
            PluginKind::Mixer3 => ElementKind::Mixer {
                min_inputs: 3,
                max_inputs: 3,
            },
        };
        if matches!(kind, PluginKind::Mixer2 | PluginKind::Mixer3) {
            mixers += 1;
        }
        assert_eq!(e.desc.kind, want, "{name}");
        let detail = |k: &str| {
            e.desc
                .details
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("{name} has no '{k}' detail"))
        };
        assert_eq!(detail("file"), f.display().to_string());
        assert_eq!(detail("colour model"), plugin.info().color_model.as_str());
        assert_eq!(detail("plugin type"), kind.as_str());
        assert_eq!(detail("author"), plugin.info().author);
        assert!(!detail("scheduling").is_empty());
        // Every parameter is a property (sources also have width, height, frames, rate).
        for p in plugin.params() {
            assert!(
                e.desc
                    .props
                    .iter()
                    .any(|s| s.name == p.prop_name || s.name == format!("param-{}", p.prop_name)),
                "{name}: no property for parameter '{}'",
                p.name
            );
        }
    }
    // Debian 12's frei0r-plugins has 33 mixers (the count); at least those.
    assert!(mixers >= 33, "only {mixers} mixer plugins");
    let registered = r
        .iter()
        .filter(|e| e.desc.name.starts_with("frei0r-"))
        .count();
    assert_eq!(registered, files.len());
}

#[test]
fn glow_sobel_vignette_properties_and_defaults() {
    let (r, _) = registry();
    for (name, props) in [
        ("frei0r-glow", vec!["blur"]),
        ("frei0r-sobel", vec![]),
        ("frei0r-vignette", vec!["aspect", "clearcenter", "soft"]),
    ] {
        let entry = r.find(name).unwrap();
        let names: Vec<&str> = entry.desc.props.iter().map(|p| p.name.as_str()).collect();
        // The plugin's parameters, then the isolation properties every frei0r element has.
        let mut want = props.clone();
        want.extend(["isolate", "on-crash", "stall-ms"]);
        assert_eq!(names, want, "{name}");
        // Defaults are what a fresh instance reports.
        let stem = name.strip_prefix("frei0r-").unwrap();
        let plugin = Plugin::load(&Path::new(DIR).join(format!("{stem}.so"))).unwrap();
        let inst = Instance::new(&plugin, NOMINAL_SIZE.0, NOMINAL_SIZE.1).unwrap();
        for (i, spec) in entry.desc.props.iter().take(props.len()).enumerate() {
            let framepipe_frei0r::ParamValue::Double(d) = inst.get_param(i) else {
                panic!("{name}.{} is not a double", spec.name);
            };
            assert_eq!(spec.default, PropValue::Float(d), "{name}.{}", spec.name);
            assert!(
                matches!(spec.kind, framepipe_core::PropKind::Float { min, max } if min <= 0.0 && max >= 1.0)
            );
        }
        assert_eq!(entry.desc.default_mode, Mode::Parallel, "{name}");
    }
    // Names are lower-cased with spaces turned into '-'.
    let aech0r = r.find("frei0r-aech0r").unwrap();
    assert!(aech0r.desc.props.iter().any(|p| p.name == "fade-factor"));
}

#[test]
fn a_shared_object_that_is_not_a_plugin_gives_a_clear_error() {
    // Removed (with the copies) when the guard drops, also when the test fails.
    let guard = framepipe_testkit::tmpdir("fp-frei0r-bad");
    let dir = guard.to_path_buf();
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("libm");
    std::fs::copy(libm, dir.join("bogus.so")).unwrap();
    std::fs::write(dir.join("x.so"), "this is text\n").unwrap();
    std::fs::copy(Path::new(DIR).join("glow.so"), dir.join("glow.so")).unwrap();

    let mut r = Registry::new();
    let warnings = register_from(&mut r, std::slice::from_ref(&dir));
    let bogus = dir.join("bogus.so");
    let expected = format!(
        "frei0r-bogus: {} is not a frei0r plugin: no symbol f0r_init",
        bogus.display()
    );
    assert!(warnings.contains(&expected), "{warnings:?}");
    let err = r.create("frei0r-bogus", &[]).unwrap_err().to_string();
    assert_eq!(err, expected);
    assert!(!err.contains('\n'));

    let x = dir.join("x.so");
    let err = r.create("frei0r-x", &[]).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "frei0r-x: {} is not a frei0r plugin: cannot load it",
            x.display()
        )),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    // The good plugin next to them still works.
    assert!(matches!(
        r.create("frei0r-glow", &[("blur".into(), "0.3".into())]),
        Ok(Element::Effect(_))
    ));
}

#[test]
fn sizes_that_are_not_multiples_of_8_are_rejected() {
    let (r, _) = registry();
    let mut glow = effect(&r, "frei0r-glow", &[]);
    let err = glow.negotiate(info(1281, 720)).unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "frei0r-glow: cannot take 1281x720: frei0r needs width and height multiples of 8"
    );
    let err = glow.negotiate(info(320, 100)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "frei0r-glow: cannot take 320x100: frei0r needs width and height multiples of 8"
    );
    assert_eq!(glow.negotiate(info(320, 240)).unwrap(), info(320, 240));
    let err = r
        .create(
            "frei0r-plasma",
            &[
                ("width".into(), "100".into()),
                ("height".into(), "64".into()),
            ],
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "frei0r-plasma: cannot take 100x64: frei0r needs width and height multiples of 8"
    );
}

#[test]
fn glow_sobel_vignette_match_ffmpeg_byte_for_byte() {
    let (w, h, n) = (320, 240, 5);
    let input = testsrc2(w, h, n);
    let (r, _) = registry();
    let mut chain = vec![
        effect(&r, "frei0r-glow", &[("blur", "0.5")]),
        effect(&r, "frei0r-sobel", &[]),
        effect(&r, "frei0r-vignette", &[]),
    ];
    let ours = run_chain(&mut chain, w, h, &input);
    let theirs = ffmpeg_filter(
        w,
        h,
        &input,
        "frei0r=glow:0.5,frei0r=sobel,frei0r=vignette",
        "gsv",
    );
    assert_ne!(ours, input, "the chain changed nothing");
    assert!(
        ours == theirs,
        "{}",
        first_difference(&ours, &theirs, (w * h * 4) as usize)
    );
}

#[test]
fn bgra_plugins_match_ffmpeg_byte_for_byte() {
    // primaries and twolay0r are BGRA8888 filters: the host swaps R and B around them, ffmpeg
    // converts rgba to bgra and back.
    let (w, h, n) = (160, 120, 3);
    let input = testsrc2(w, h, n);
    let (r, _) = registry();
    for (name, vf) in [
        ("primaries", "frei0r=primaries"),
        ("twolay0r", "frei0r=twolay0r"),
    ] {
        let plugin = Plugin::load(&Path::new(DIR).join(format!("{name}.so"))).unwrap();
        assert_eq!(
            plugin.info().color_model,
            framepipe_frei0r::ColorModel::Bgra8888
        );
        let mut chain = vec![effect(&r, &format!("frei0r-{name}"), &[])];
        let ours = run_chain(&mut chain, w, h, &input);
        let theirs = ffmpeg_filter(w, h, &input, vf, name);
        assert_ne!(ours, input, "{name} changed nothing");
        assert!(
            ours == theirs,
            "{name}: {}",
            first_difference(&ours, &theirs, (w * h * 4) as usize)
        );
    }
}

#[test]
fn source_plugins_match_ffmpeg_frei0r_src() {
    // test_pat_B is RGBA8888; lissajous0r and onecol0r are BGRA8888 (onecol0r's red-ish colour
    // shows whether R and B are swapped back).
    let (w, h, n) = (160, 120, 3);
    let (r, _) = registry();
    // ffmpeg's frei0r_src insists on parameters: set the first one on both sides.
    for (stem, param, value, ff_value) in [
        ("test_pat_B", "type", "0.3", "0.3"),
        ("lissajous0r", "ratiox", "0.3", "0.3"),
        ("onecol0r", "color", "1.0,0.2,0.0", "1.0/0.2/0.0"),
    ] {
        let name = format!("frei0r-{stem}");
        let given: Vec<(String, String)> = [
            ("width", "160"),
            ("height", "120"),
            ("frames", "3"),
            (param, value),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let Element::Source(mut src) = r.create(&name, &given).unwrap() else {
            panic!("{name} is not a source");
        };
        assert_eq!(src.info(), info(w, h));
        let pool = FramePool::new(w, h, 2);
        let mut ours = Vec::new();
        let mut k = 0;
        loop {
            let mut f = pool.acquire().unwrap();
            if !src.fill(&ctx(k), &mut f).unwrap() {
                break;
            }
            ours.extend_from_slice(f.data());
            k += 1;
        }
        assert_eq!(k, n as u64, "{name} frame count");
        let theirs = ffmpeg(&[
            "-f",
            "lavfi",
            "-i",
            &format!(
                "frei0r_src=size={w}x{h}:framerate=25:filter_name={stem}:filter_params={ff_value}"
            ),
            "-frames:v",
            &n.to_string(),
            "-pix_fmt",
            "rgba",
            "-f",
            "rawvideo",
            "-",
        ]);
        assert!(
            ours == theirs,
            "{name}: {}",
            first_difference(&ours, &theirs, (w * h * 4) as usize)
        );
    }
}

#[test]
fn a_live_property_change_equals_a_fresh_instance_with_that_value() {
    let (w, h) = (160, 120);
    let input = testsrc2(w, h, 1);
    let (r, _) = registry();
    let mut low = effect(&r, "frei0r-glow", &[("blur", "0.1")]);
    low.negotiate(info(w, h)).unwrap();
    let mut inst = low.instantiate().unwrap();
    let pool = FramePool::new(w, h, 4);
    let mut f = pool.acquire().unwrap();
    f.copy_from(&input);
    let frame = f.freeze();
    let run = |inst: &mut Box<dyn Effect>| {
        let mut o = pool.acquire().unwrap();
        inst.process(&ctx(0), &frame, &mut o, &InlineSlices)
            .unwrap();
        o.data().to_vec()
    };
    let before = run(&mut inst);
    inst.set_property("blur", &PropValue::Float(0.8)).unwrap();
    let after = run(&mut inst);
    assert_ne!(before, after);
    let mut high = effect(&r, "frei0r-glow", &[("blur", "0.8")]);
    high.negotiate(info(w, h)).unwrap();
    assert_eq!(after, run(&mut high.instantiate().unwrap()));
    let err = inst
        .set_property("blurr", &PropValue::Float(0.5))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "frei0r-glow: no parameter 'blurr'; expected one of: blur"
    );
}

#[test]
fn probe_verdicts_for_known_plugins() {
    for (stem, verdict) in [
        ("baltan", "stateful"),
        ("nervous", "stateful"),
        ("glow", "stateless"),
        ("sobel", "stateless"),
        ("vignette", "stateless"),
    ] {
        let report = probe::probe_plugin(&Path::new(DIR).join(format!("{stem}.so"))).unwrap();
        assert_eq!(report.verdict(), verdict, "{stem}: {}", report.note);
        let want = if verdict == "stateless" {
            Mode::Parallel
        } else {
            Mode::Serial
        };
        assert_eq!(report.mode(), want);
        // The committed table agrees with a fresh measurement.
        let row = modes::lookup(stem).unwrap_or_else(|| panic!("{stem} not in modes.tsv"));
        assert_eq!(row.verdict, verdict, "{stem} in modes.tsv");
        assert_eq!(row.mode, want);
    }
}

#[test]
fn the_modes_table_covers_every_installed_plugin() {
    for e in std::fs::read_dir(DIR).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "so") {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            let row = modes::lookup(&stem).unwrap_or_else(|| panic!("{stem} not in modes.tsv"));
            let plugin = Plugin::load(&p).unwrap();
            // The row is about this very file (else it runs serial with a message: re-probe).
            assert_eq!(row.crc32, plugin.crc32(), "{stem}: {}", modes::REPROBE);
            match plugin.info().kind {
                PluginKind::Source => assert_eq!(row.mode, Mode::Serial, "{stem}"),
                // Issue #8: mixers are measured like filters, with distinct input pairs/triples.
                PluginKind::Mixer2 | PluginKind::Mixer3 => {
                    assert!(
                        ["stateless", "stateful", "nondeterministic"].contains(&row.verdict),
                        "{stem}: {}",
                        row.verdict
                    );
                    assert!(row.note.starts_with(plugin.info().kind.as_str()), "{stem}");
                }
                PluginKind::Filter => {}
            }
        }
    }
    assert!(modes::MODES_TSV.contains(
        "cargo run --release -p framepipe-frei0r --bin frei0r-probe -- --write crates/framepipe-frei0r/data/modes.tsv"
    ));
}

#[test]
fn parallel_instances_give_the_same_frames_as_one_instance() {
    // What the scheduler does with a parallel stage: several instances, each on its own thread,
    // taking every other frame. The result must equal one instance taking them all in order.
    let (w, h, n) = (160, 120, 8);
    let input = testsrc2(w, h, n);
    let frame_bytes = (w * h * 4) as usize;
    let (r, _) = registry();
    for name in [
        "frei0r-glow",
        "frei0r-sobel",
        "frei0r-vignette",
        "frei0r-primaries",
    ] {
        let entry = r.find(name).unwrap();
        assert_eq!(entry.desc.default_mode, Mode::Parallel, "{name}");
        let mut factory = effect(&r, name, &[]);
        factory.negotiate(info(w, h)).unwrap();
        let pool = FramePool::new(w, h, 2 * n as usize + 4);
        let frames: Vec<framepipe_core::Frame> = input
            .chunks_exact(frame_bytes)
            .map(|raw| {
                let mut f = pool.acquire().unwrap();
                f.copy_from(raw);
                f.freeze()
            })
            .collect();
        let mut one = factory.instantiate().unwrap();
        let serial: Vec<Vec<u8>> = frames
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let mut o = pool.acquire().unwrap();
                one.process(&ctx(k as u64), f, &mut o, &InlineSlices)
                    .unwrap();
                o.data().to_vec()
            })
            .collect();
        let parallel: Vec<Vec<(usize, Vec<u8>)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|t| {
                    let mut inst = factory.instantiate().unwrap();
                    let frames = &frames;
                    let pool = &pool;
                    s.spawn(move || {
                        (t..frames.len())
                            .step_by(2)
                            .map(|k| {
                                let mut o = pool.acquire().unwrap();
                                inst.process(&ctx(k as u64), &frames[k], &mut o, &InlineSlices)
                                    .unwrap();
                                (k, o.data().to_vec())
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (k, data) in parallel.into_iter().flatten() {
            assert!(data == serial[k], "{name}: frame {k} differs");
        }
    }
}

/// Issue #11: a plugin the probe saw crash or hang is isolated by default (run in a child
/// process, see tests in framepipe-cli/tests/isolate.rs); with `isolate=false` it refuses to be
/// built, with the probe's finding.
#[test]
fn plugins_the_probe_saw_crash_or_hang_are_isolated_by_default_else_refused() {
    let (r, _) = registry();
    let unusable: Vec<_> = modes::MODES_TSV
        .lines()
        .filter_map(modes::parse_row)
        .filter(|v| v.verdict == "crashed" || v.verdict == "timeout")
        .collect();
    for row in unusable {
        let name = format!("frei0r-{}", row.stem);
        let Some(entry) = r.find(&name) else {
            continue; // probed elsewhere, not installed here
        };
        assert_eq!(entry.desc.default_mode, Mode::Serial);
        let isolate = entry
            .desc
            .props
            .iter()
            .find(|p| p.name == "isolate")
            .unwrap();
        assert_eq!(isolate.default, PropValue::Bool(true), "{name}");
        assert!(r.create(&name, &[]).is_ok(), "{name}: isolated, it builds");
        let err = r
            .create(&name, &[("isolate".into(), "false".into())])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "{name}: the probe found this plugin unusable ({}: {}); see crates/framepipe-frei0r/data/modes.tsv",
                row.verdict, row.note
            )
        );
    }
}

/// `Source::rewind` (for `on-end=loop`): after its `frames`, a source plugin rewound gives its
/// first frames again, byte for byte, while the runtime's frame numbers and timestamps go on.
/// nois0r seeds its noise from the `time` it is given, so its frames move and a rewind that
/// went on with the runtime's timestamps would be caught; lissajous0r and test_pat_B draw from
/// their parameters. (plasma, ising0r and partik0l are left out: two fresh instances of them
/// already differ, see docs/ELEMENTS.md.)
#[test]
fn source_plugins_give_their_first_frames_again_after_a_rewind() {
    let (w, h, n) = (160, 120, 4u64);
    let (r, _) = registry();
    for (stem, moving) in [
        ("nois0r", true),
        ("lissajous0r", false),
        ("test_pat_B", false),
    ] {
        let name = format!("frei0r-{stem}");
        let given: Vec<(String, String)> = [("width", "160"), ("height", "120"), ("frames", "4")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let Element::Source(mut src) = r.create(&name, &given).unwrap() else {
            panic!("{name} is not a source");
        };
        let pool = FramePool::new(w, h, 2);
        let mut seq = 0;
        let mut pass = |src: &mut Box<dyn framepipe_core::Source>| {
            let mut frames = Vec::new();
            loop {
                let mut f = pool.acquire().unwrap();
                seq += 1;
                if !src.fill(&ctx(seq - 1), &mut f).unwrap() {
                    return frames;
                }
                frames.push(f.data().to_vec());
            }
        };
        let first = pass(&mut src);
        assert_eq!(first.len() as u64, n, "{name}: frames before the end");
        assert!(src.rewind().unwrap(), "{name}: rewind refused");
        let second = pass(&mut src);
        assert_eq!(second.len() as u64, n, "{name}: frames after the rewind");
        for (k, (a, b)) in first.iter().zip(&second).enumerate() {
            assert!(a == b, "{name}: frame {k} differs after the rewind");
        }
        // The moving ones really move, so that "the same frames" says something.
        assert_eq!(
            first.windows(2).all(|p| p[0] != p[1]),
            moving,
            "{name}: frames moving"
        );
    }
}
