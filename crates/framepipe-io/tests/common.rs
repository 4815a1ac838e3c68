//! Helpers shared by the io tests: build elements through the registry, pump frames from a
//! source to a sink like the runtime's serial ends do, run the real ffmpeg tools.
#![allow(dead_code)] // each test file uses a different part

use std::process::Command;

use framepipe_core::{Element, FrameCtx, FramePool, Registry, Sink, Source};

pub fn registry() -> Registry {
    let mut r = Registry::new();
    framepipe_io::register(&mut r);
    r
}

fn given(props: &[(&str, &str)]) -> Vec<(String, String)> {
    props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Builds element `name`; the error as text on failure.
pub fn try_create(name: &str, props: &[(&str, &str)]) -> Result<Element, String> {
    registry()
        .create(name, &given(props))
        .map_err(|e| e.to_string())
}

pub fn source(name: &str, props: &[(&str, &str)]) -> Box<dyn Source> {
    match try_create(name, props) {
        Ok(Element::Source(s)) => s,
        Ok(other) => panic!("{name} built {other:?}"),
        Err(e) => panic!("{name}: {e}"),
    }
}

pub fn sink(name: &str, props: &[(&str, &str)]) -> Box<dyn Sink> {
    match try_create(name, props) {
        Ok(Element::Sink(s)) => s,
        Ok(other) => panic!("{name} built {other:?}"),
        Err(e) => panic!("{name}: {e}"),
    }
}

pub fn source_err(name: &str, props: &[(&str, &str)]) -> String {
    match try_create(name, props) {
        Ok(_) => panic!("{name} {props:?} was built but should have failed"),
        Err(e) => e,
    }
}

pub fn ctx(src: &dyn Source, seq: u64) -> FrameCtx {
    FrameCtx::new(seq, src.info().rate.frame_time_ns(seq))
}

/// Reads every frame of `src` (at most `max`): the frames' pixels and the error that ended the
/// stream, if one did.
pub fn read_all(src: &mut dyn Source, max: u64) -> (Vec<Vec<u8>>, Option<String>) {
    let info = src.info();
    let pool = FramePool::new(info.width, info.height, 2);
    let mut frames = Vec::new();
    for seq in 0..max {
        let mut f = pool.acquire().unwrap();
        match src.fill(&ctx(src, seq), &mut f) {
            Ok(true) => frames.push(f.data().to_vec()),
            Ok(false) => return (frames, None),
            Err(e) => return (frames, Some(e.to_string())),
        }
    }
    (frames, None)
}

/// Pumps `src` into `sink` until the source ends (at most `max` frames); returns the number of
/// frames and the first error as text. `finish` is always called, as the runtime does.
pub fn pump(src: &mut dyn Source, sink: &mut dyn Sink, max: u64) -> (u64, Option<String>) {
    let info = src.info();
    if let Err(e) = sink.start(info) {
        return (0, Some(e.to_string()));
    }
    let pool = FramePool::new(info.width, info.height, 2);
    let mut n = 0;
    let mut err = None;
    while n < max {
        let mut f = pool.acquire().unwrap();
        match src.fill(&ctx(src, n), &mut f) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                err = Some(e.to_string());
                break;
            }
        }
        if let Err(e) = sink.consume(&ctx(src, n), &f.freeze()) {
            err = Some(e.to_string());
            break;
        }
        n += 1;
    }
    if let Err(e) = sink.finish() {
        err.get_or_insert(e.to_string());
    }
    (n, err)
}

/// A fresh temporary directory `fp-io-TEST-XXXXXX` for one test, removed (with its files) when
/// the returned guard drops, also when the test fails; `FP_KEEP_TMP=1` keeps it.
pub fn dir(test: &str) -> framepipe_testkit::TestDir {
    framepipe_testkit::tmpdir(&format!("fp-io-{test}"))
}

pub fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// Runs a tool, asserts it succeeded, returns its stdout.
pub fn tool(program: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

pub fn ffmpeg(args: &[&str]) -> Vec<u8> {
    let mut a = vec!["-nostdin", "-v", "error", "-y"];
    a.extend_from_slice(args);
    tool("ffmpeg", &a)
}

/// The largest difference between two equally long byte buffers.
pub fn max_diff(a: &[u8], b: &[u8]) -> u8 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| x.abs_diff(*y))
        .max()
        .unwrap_or(0)
}

/// The mean absolute difference between two equally long byte buffers.
pub fn mean_diff(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let sum: u64 = a.iter().zip(b).map(|(x, y)| x.abs_diff(*y) as u64).sum();
    sum as f64 / a.len() as f64
}
