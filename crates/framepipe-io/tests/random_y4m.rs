//! The quick, seeded version of the `y4m_parser` fuzz target (`fuzz/fuzz_targets/y4m_parser.rs`,
//! run for millions of inputs by `scripts/fuzz`): YUV4MPEG2 headers built from tags, numbers at
//! and past their limits and junk, followed by frames that are whole, cut short or malformed,
//! some mutated byte by byte; each read from a real file by a real `y4msrc` under a small memory
//! budget.

mod common;

use common::{dir, read_all, s, try_create};
use framepipe_core::{Element, Limits};
use framepipe_io::y4m::{Chroma, Y4mHeader};
use framepipe_testkit::fuzz::Inputs;

const TAGS: &[&str] = &[
    "W2",
    "W3",
    "W8",
    "W0",
    "W16384",
    "W16385",
    "W18446744073709551616",
    "W-1",
    "W",
    "H2",
    "H1",
    "H5",
    "H0",
    "H16384",
    "Hx",
    "F25:1",
    "F30000:1001",
    "F0:1",
    "F1:0",
    "F4294967295:4294967295",
    "F4294967296:1",
    "F25",
    "F:",
    "C420jpeg",
    "C420",
    "C444",
    "C422",
    "C444alpha",
    "Ip",
    "It",
    "A1:1",
    "A0:0",
    "XCOLORRANGE=FULL",
    "XCOLORRANGE=LIMITED",
    "XCOLORRANGE=",
    "XYSCSS=420JPEG",
    "X",
    "ü",
    "日本",
    "Z9",
    "",
];

const SEPARATORS: &[&str] = &[" ", " ", " ", "  ", "", "\t"];

/// A header line, a `\n`, then 0..3 frames of the header's size (when it has one the generator
/// knows), each `FRAME` line possibly damaged and its bytes possibly cut short.
fn stream(inputs: &mut Inputs) -> Vec<u8> {
    let mut header = String::from("YUV4MPEG2");
    if inputs.rng().one_in(20) {
        header = String::from("YUV4MPEG");
    }
    // Mostly a width, a height and a rate (each usually valid) among other tags, in any order;
    // sometimes anything.
    let tags = if inputs.rng().one_in(4) {
        inputs.text()
    } else {
        let r = inputs.rng();
        let mut tags = vec![
            r.pick(&["W1", "W2", "W3", "W8", "W5", "W16385", "W4096"]),
            r.pick(&["H1", "H2", "H3", "H6", "H0", "H4096"]),
            r.pick(&["F25:1", "F30000:1001", "F1:4294967295", "F0:1"]),
        ];
        for _ in 0..r.below(3) {
            tags.push(TAGS[r.below(TAGS.len())]);
        }
        for i in (1..tags.len()).rev() {
            tags.swap(i, r.below(i + 1));
        }
        tags.join(" ")
    };
    let mut out = header.into_bytes();
    out.push(b' ');
    out.extend(tags.as_bytes());
    out.push(b'\n');
    // Frame bytes for the size the tags name, when they parse.
    let line_end = out.iter().position(|&b| b == b'\n').unwrap();
    let per_frame = Y4mHeader::parse(&out[..line_end], "gen")
        .map(|h| h.chroma.frame_bytes(h.width, h.height))
        .unwrap_or(6)
        .min(4096);
    for _ in 0..inputs.rng().below(4) {
        let r = inputs.rng();
        out.extend(match r.below(8) {
            0 => &b"FRAMX\n"[..],
            1 => &b"FRAME Ixyz\n"[..],
            2 => &b"FRA"[..],
            _ => &b"FRAME\n"[..],
        });
        let n = if r.one_in(4) {
            r.below(per_frame + 1)
        } else {
            per_frame
        };
        let fill = r.below(256) as u8;
        out.extend(std::iter::repeat_n(fill, n));
    }
    if inputs.rng().one_in(3) {
        for _ in 0..1 + inputs.rng().below(3) {
            inputs.mutate(&mut out);
        }
    }
    out
}

fn header_text(h: &Y4mHeader) -> String {
    let c = match h.chroma {
        Chroma::C420 => "C420jpeg",
        Chroma::C444 => "C444",
    };
    let range = if h.full_range { "FULL" } else { "LIMITED" };
    format!(
        "YUV4MPEG2 W{} H{} F{}:{} Ip A1:1 {c} XCOLORRANGE={range}",
        h.width, h.height, h.rate.num, h.rate.den
    )
}

/// What one input reached.
#[derive(Default)]
struct Reached {
    /// The header parsed.
    header: bool,
    /// y4msrc was opened on a header over the budget (and refused it).
    over_budget: bool,
    /// Frames delivered.
    frames: usize,
}

/// The fuzz target's properties for one input.
fn check(path: &std::path::Path, data: &[u8]) -> Reached {
    let line_end = data.iter().position(|&b| b == b'\n');
    let shown = String::from_utf8_lossy(&data[..data.len().min(80)]).into_owned();
    let Ok(h) = Y4mHeader::parse(&data[..line_end.unwrap_or(data.len())], "in") else {
        return Reached::default();
    };
    let mut reached = Reached {
        header: true,
        ..Reached::default()
    };
    assert!(
        (1..=16384).contains(&h.width) && (1..=16384).contains(&h.height),
        "{shown:?}"
    );
    assert!(h.rate.is_usable(), "{shown:?}: rate {}", h.rate);
    let printed = header_text(&h);
    assert_eq!(
        Y4mHeader::parse(printed.as_bytes(), "in").ok(),
        Some(h),
        "{printed}"
    );
    if line_end.is_none() {
        return reached;
    }
    std::fs::write(path, data).unwrap();
    let rgba = u64::from(h.width) * u64::from(h.height) * 4;
    let max = Limits::current().max_frame_bytes();
    reached.over_budget = rgba > max;
    let Ok(Element::Source(mut src)) = try_create("y4msrc", &[("location", s(path))]) else {
        return reached;
    };
    // Accepted only within the budget: nothing was allocated for a frame it does not allow.
    assert!(
        rgba <= max,
        "{shown:?}: a {rgba}-byte frame accepted, over {max}"
    );
    if rgba > 64 << 10 {
        return reached; // a frame this large needs more input than the generator writes
    }
    let (frames, _err) = read_all(src.as_mut(), 8);
    let per_frame = h.chroma.frame_bytes(h.width, h.height);
    assert!(
        frames.len() * per_frame <= data.len(),
        "{shown:?}: {} frames of {per_frame} bytes from {} bytes",
        frames.len(),
        data.len()
    );
    for f in &frames {
        assert_eq!(f.len(), h.width as usize * h.height as usize * 4);
        assert!(f.chunks_exact(4).all(|px| px[3] == 255), "{shown:?}");
    }
    reached.frames = frames.len();
    reached
}

#[test]
fn random_y4m_streams_never_panic_and_deliver_only_whole_frames() {
    // As `--max-memory 128M`: a frame may take 16 MiB (the budget is process-wide; this test
    // binary holds no other test that could mind).
    Limits {
        max_memory: 128 << 20,
    }
    .set();
    let d = dir("random-y4m");
    let path = d.join("in.y4m");
    let mut inputs = Inputs::new(0x0079_4d4d, TAGS, SEPARATORS, 7);
    let (mut headers, mut over_budget, mut frames) = (0, 0, 0);
    for _ in 0..4_000 {
        let data = stream(&mut inputs);
        let r = check(&path, &data);
        headers += r.header as u32;
        over_budget += r.over_budget as u32;
        frames += r.frames;
    }
    eprintln!("{headers} headers accepted, {over_budget} over the budget, {frames} frames");
    // The generator reaches accepted headers, headers over the budget and whole frames, not
    // only junk.
    assert!(headers > 400, "{headers} headers accepted");
    assert!(over_budget > 20, "{over_budget} headers over the budget");
    assert!(frames > 200, "{frames} frames delivered");
}

/// Issue #7: a header token whose first character is not ASCII (`YUV4MPEG2 W2 H2 F25:1 é`)
/// panicked (`split_at(1)` inside a character) instead of being refused as an unknown tag.
#[test]
fn a_header_tag_that_is_not_ascii_is_refused_not_a_panic() {
    for line in [
        "YUV4MPEG2 W2 H2 F25:1 é",
        "YUV4MPEG2 日本 W2",
        "YUV4MPEG2 \u{a0}",
    ] {
        let e = Y4mHeader::parse(line.as_bytes(), "in.y4m")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("in.y4m: bad YUV4MPEG2 header: unknown tag (tag "),
            "{e}"
        );
    }
}

/// `F1:4294967295` (one frame in 136 years) was accepted, and the runtime's stall timeout (five
/// periods) overflowed on it; rates slower than one frame a day are refused.
#[test]
fn a_y4m_rate_slower_than_one_frame_a_day_is_refused() {
    for line in ["YUV4MPEG2 W2 H2 F1:4294967295", "YUV4MPEG2 W2 H2 F1:86401"] {
        let e = Y4mHeader::parse(line.as_bytes(), "in.y4m")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is out of range (positive, at least one frame a day)"),
            "{e}"
        );
    }
    assert!(Y4mHeader::parse(b"YUV4MPEG2 W2 H2 F1:86400", "in.y4m").is_ok());
}
