//! Issue #11, requirement 2, at the element level: every stateless filter and mixer the probe
//! measured gives, isolated in a child process (`isolate=true`, the `frei0r-host` binary as the
//! host), the same bytes as in process. The crash, hang and restart behaviour is tested through
//! the `framepipe` binary (framepipe-cli/tests/isolate.rs).

use std::path::PathBuf;

use framepipe_core::{
    Element, ElementKind, FrameCtx, FramePool, InlineSlices, Rational, Registry, VideoInfo,
};
use framepipe_frei0r::modes;

// issue #11
#[test]
fn every_stateless_plugin_gives_the_same_bytes_isolated() {
    framepipe_frei0r::isolate::set_host_program(PathBuf::from(env!("CARGO_BIN_EXE_frei0r-host")));
    let (w, h) = (64u32, 48u32);
    let info = VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(25, 1),
    };
    let mut r = Registry::new();
    framepipe_frei0r::register_from(&mut r, &[PathBuf::from("/usr/lib/frei0r-1")]);
    let pool = FramePool::new(w, h, 8);
    let inputs: Vec<_> = (0..3)
        .map(|j| {
            let mut f = pool.acquire().unwrap();
            // Opaque: with translucent input some cairo plugins (cairoaffineblend) blend onto
            // what their output buffer held before, in any host.
            for (i, b) in f.data_mut().iter_mut().enumerate() {
                *b = if i % 4 == 3 {
                    255
                } else {
                    ((i * 7 + j * 91) ^ (i >> 5)) as u8
                };
            }
            f.freeze()
        })
        .collect();
    let isolated = [("isolate".to_string(), "true".to_string())];
    let mut checked = 0;
    let mut unwritten = Vec::new();
    for entry in r.iter() {
        let desc = &entry.desc;
        let stem = desc.name.strip_prefix("frei0r-").unwrap_or(&desc.name);
        if modes::lookup(stem).is_none_or(|v| v.verdict != "stateless") {
            continue;
        }
        // uvmap reads outside its input frames where its map points off the frame (with a
        // no-access page after each input it dies of SIGSEGV): those pixels are whatever memory
        // lies next to the frame, which is not the same in the child's shared memory.
        if stem == "uvmap" {
            continue;
        }
        let run = |given: &[(String, String)], prefill: u8| -> Option<Vec<Vec<u8>>> {
            let mut frames = Vec::new();
            let ctx = |k: u64| FrameCtx::new(k, info.rate.frame_time_ns(k));
            let out = || {
                let mut o = pool.acquire().unwrap();
                o.data_mut().fill(prefill);
                o
            };
            match (r.create(&desc.name, given).unwrap(), &desc.kind) {
                (Element::Effect(mut f), ElementKind::Effect) => {
                    f.negotiate(info).unwrap();
                    let mut e = f.instantiate().unwrap();
                    for k in 0..3u64 {
                        let mut o = out();
                        e.process(&ctx(k), &inputs[k as usize], &mut o, &InlineSlices)
                            .unwrap();
                        frames.push(o.data().to_vec());
                    }
                }
                (Element::Mixer(mut m), ElementKind::Mixer { min_inputs, .. }) => {
                    let n = *min_inputs;
                    m.negotiate(&vec![info; n]).unwrap();
                    let mut x = m.instantiate().unwrap();
                    for k in 0..3u64 {
                        let ins: Vec<_> = (0..n).map(|j| &inputs[(j + k as usize) % 3]).collect();
                        let mut o = out();
                        x.process(&ctx(k), &ins, &mut o, &InlineSlices).unwrap();
                        frames.push(o.data().to_vec());
                    }
                }
                _ => return None,
            }
            Some(frames)
        };
        let Some(zeros) = run(&[], 0) else {
            continue;
        };
        // A plugin that leaves some output pixels unwritten (uvmap where its map points
        // nowhere) gives whatever the buffer held, in any host: nothing to compare.
        if run(&[], 0xa5).unwrap() != zeros {
            unwritten.push(desc.name.clone());
            continue;
        }
        let iso = run(&isolated, 0).unwrap();
        for k in 0..3 {
            assert!(
                iso[k] == zeros[k],
                "{}: frame {k} differs isolated",
                desc.name
            );
        }
        checked += 1;
    }
    assert!(unwritten.len() <= 5, "{unwritten:?}");
    // Debian 12's frei0r-plugins: most filters and mixers are stateless.
    assert!(checked >= 60, "only {checked} plugins checked");
    // None of them failed on the way.
    for s in framepipe_frei0r::isolate::summaries() {
        assert_eq!((s.crashes, s.stalls, s.substituted), (0, 0, 0), "{s:?}");
    }
}
