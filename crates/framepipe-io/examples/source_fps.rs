//! Prints how fast each testsrc pattern, and y4msrc/y4msink conversion, run at 1280x720:
//! frames per second, median and spread (min..max) over several runs.
//!
//! `cargo run --release -p framepipe-io --example source_fps [runs] [frames]`

use std::time::Instant;

use framepipe_core::{Element, FrameCtx, FramePool, Registry, Sink, Source};

fn build(r: &Registry, name: &str, props: &[(&str, &str)]) -> Element {
    let given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    r.create(name, &given)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn source(r: &Registry, name: &str, props: &[(&str, &str)]) -> Box<dyn Source> {
    match build(r, name, props) {
        Element::Source(s) => s,
        _ => panic!("{name} is no source"),
    }
}

fn sink(r: &Registry, name: &str, props: &[(&str, &str)]) -> Box<dyn Sink> {
    match build(r, name, props) {
        Element::Sink(s) => s,
        _ => panic!("{name} is no sink"),
    }
}

/// Frames per second of `src` into `sink` over `frames` frames.
fn fps(mut src: Box<dyn Source>, mut sink: Box<dyn Sink>, frames: u64) -> f64 {
    let info = src.info();
    let pool = FramePool::new(info.width, info.height, 2);
    sink.start(info).unwrap();
    let t = Instant::now();
    let mut n = 0;
    for seq in 0..frames {
        let ctx = FrameCtx::new(seq, 0);
        let mut f = pool.acquire().unwrap();
        if !src.fill(&ctx, &mut f).unwrap() {
            break;
        }
        sink.consume(&ctx, &f.freeze()).unwrap();
        n += 1;
    }
    sink.finish().unwrap();
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let frames: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let mut r = Registry::new();
    framepipe_io::register(&mut r);
    let size = [("width", "1280"), ("height", "720")];
    let tmp = std::env::temp_dir().join("framepipe-source-fps.y4m");
    let tmp = tmp.to_str().unwrap().to_string();
    let frames_s = frames.to_string();
    println!(
        "{:<28} {:>10} {:>22}",
        "1280x720", "fps median", "spread (min..max)"
    );
    type Case<'a> = (
        String,
        Box<dyn Fn() -> (Box<dyn Source>, Box<dyn Sink>) + 'a>,
    );
    let mut cases: Vec<Case> = Vec::new();
    for pattern in ["bars", "noise", "counter", "gradient", "solid"] {
        let r = &r;
        cases.push((
            format!("testsrc pattern={pattern}"),
            Box::new(move || {
                let mut p = size.to_vec();
                p.push(("pattern", pattern));
                (source(r, "testsrc", &p), sink(r, "nullsink", &[]))
            }),
        ));
    }
    {
        let (r, tmp, fs) = (&r, tmp.clone(), frames_s.clone());
        cases.push((
            "testsrc -> y4msink 420".into(),
            Box::new(move || {
                let mut p = size.to_vec();
                p.push(("frames", fs.as_str()));
                (
                    source(r, "testsrc", &p),
                    sink(r, "y4msink", &[("location", tmp.as_str())]),
                )
            }),
        ));
    }
    {
        let (r, tmp) = (&r, tmp.clone());
        cases.push((
            "y4msrc 420 -> nullsink".into(),
            Box::new(move || {
                (
                    source(r, "y4msrc", &[("location", tmp.as_str())]),
                    sink(r, "nullsink", &[]),
                )
            }),
        ));
    }
    for (name, make) in &cases {
        let mut v: Vec<f64> = (0..runs)
            .map(|_| {
                let (src, snk) = make();
                fps(src, snk, frames)
            })
            .collect();
        v.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{:<28} {:>10.0} {:>22}",
            name,
            v[v.len() / 2],
            format!("{:.0}..{:.0}", v[0], v[v.len() - 1])
        );
    }
    let _ = std::fs::remove_file(&tmp);
}
