//! y4msrc and y4msink against the real ffmpeg.

mod common;
use common::*;

/// Makes a y4m clip of ffmpeg's testsrc2 with `pix_fmt`, and ffmpeg's own RGBA decode of it.
fn clip(d: &std::path::Path, name: &str, pix_fmt: &str, frames: &str) -> (String, Vec<u8>) {
    let y4m = d.join(format!("{name}.y4m"));
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=64x48:rate=25",
        "-frames:v",
        frames,
        "-pix_fmt",
        pix_fmt,
        s(&y4m),
    ]);
    let rgba = ffmpeg(&["-i", s(&y4m), "-f", "rawvideo", "-pix_fmt", "rgba", "-"]);
    (s(&y4m).to_string(), rgba)
}

#[test]
fn y4msrc_matches_ffmpegs_own_rgba_conversion() {
    let d = dir("y4msrc-matches");
    for pix_fmt in ["yuv420p", "yuv444p"] {
        let (y4m, reference) = clip(&d, pix_fmt, pix_fmt, "3");
        let mut src = source("y4msrc", &[("location", &y4m)]);
        let info = src.info();
        assert_eq!((info.width, info.height), (64, 48));
        assert_eq!(info.rate, framepipe_core::Rational::new(25, 1));
        let (frames, err) = read_all(src.as_mut(), 100);
        assert_eq!(err, None);
        assert_eq!(frames.len(), 3);
        let ours = frames.concat();
        let (max, mean) = (max_diff(&ours, &reference), mean_diff(&ours, &reference));
        eprintln!("{pix_fmt}: max diff {max}, mean {mean:.3}");
        assert!(max <= TOLERANCE, "{pix_fmt}: max diff {max} > {TOLERANCE}");
        assert!(mean <= 1.0, "{pix_fmt}: mean diff {mean}");
    }
}

/// Largest per-channel difference allowed between our YUV->RGB conversion and ffmpeg's
/// (both BT.601 limited range; they round differently).
const TOLERANCE: u8 = 3;

#[test]
fn y4msink_output_is_read_back_by_ffmpeg() {
    let d = dir("y4msink");
    for chroma in ["420", "444"] {
        let out = d.join(format!("out{chroma}.y4m"));
        let props = [
            ("pattern", "gradient"),
            ("width", "64"),
            ("height", "48"),
            ("frames", "5"),
            ("rate", "30000/1001"),
        ];
        let mut src = source("testsrc", &props);
        let mut snk = sink("y4msink", &[("location", s(&out)), ("chroma", chroma)]);
        let (n, err) = pump(src.as_mut(), snk.as_mut(), 100);
        assert_eq!((n, err), (5, None));
        let probe = String::from_utf8(tool(
            "ffprobe",
            &[
                "-v",
                "error",
                "-count_frames",
                "-show_entries",
                "stream=width,height,nb_read_frames,r_frame_rate,pix_fmt",
                "-of",
                "default=noprint_wrappers=1",
                s(&out),
            ],
        ))
        .unwrap();
        for want in [
            "width=64",
            "height=48",
            "nb_read_frames=5",
            "r_frame_rate=30000/1001",
            &format!("pix_fmt=yuv{chroma}p"),
        ] {
            assert!(probe.lines().any(|l| l == want), "{want} not in {probe}");
        }
        // ffmpeg's decode of our file looks like what we wrote.
        let back = ffmpeg(&["-i", s(&out), "-f", "rawvideo", "-pix_fmt", "rgba", "-"]);
        let (orig, _) = read_all(source("testsrc", &props).as_mut(), 100);
        let orig = orig.concat();
        let (max, mean) = (max_diff(&orig, &back), mean_diff(&orig, &back));
        eprintln!("{chroma}: max diff {max}, mean {mean:.3}");
        // 4:4:4 loses only rounding (ours on the way in, ffmpeg's on the way out); 4:2:0 also averages each 2x2 block's chroma, and the red
        // ramp changes by 4 per pixel.
        let (max_ok, mean_ok) = if chroma == "444" { (3, 0.5) } else { (8, 1.5) };
        assert!(max <= max_ok, "{chroma}: max diff {max}");
        assert!(mean <= mean_ok, "{chroma}: mean diff {mean}");
        // And our own reader agrees with ffmpeg on our file.
        let (ours, err) = read_all(source("y4msrc", &[("location", s(&out))]).as_mut(), 100);
        assert_eq!(err, None);
        assert!(max_diff(&ours.concat(), &back) <= TOLERANCE);
    }
}

#[test]
fn truncated_y4m_delivers_whole_frames_then_errors() {
    let d = dir("y4m-truncated");
    let (y4m, reference) = clip(&d, "full", "yuv420p", "4");
    let bytes = std::fs::read(&y4m).unwrap();
    let frame_len = 64 * 48 * 3 / 2;
    let rgba_len = 64 * 48 * 4;
    // Cut inside frame 3's pixels, then inside frame 3's "FRAME" line.
    for (name, cut, got) in [
        ("pixels", bytes.len() - 100, frame_len - 100),
        ("header", bytes.len() - frame_len - 3, 0),
    ] {
        let path = d.join(format!("cut-{name}.y4m"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let (frames, err) = read_all(source("y4msrc", &[("location", s(&path))]).as_mut(), 100);
        assert_eq!(frames.len(), 3, "{name}");
        assert_eq!(
            frames.concat(),
            read_all(source("y4msrc", &[("location", &y4m)]).as_mut(), 3)
                .0
                .concat()
        );
        assert!(max_diff(&frames.concat(), &reference[..3 * rgba_len]) <= TOLERANCE);
        assert_eq!(
            err.as_deref(),
            Some(
                format!(
                    "y4msrc: {} is truncated: frame 3 has {got} of {frame_len} bytes",
                    s(&path)
                )
                .as_str()
            ),
            "{name}"
        );
    }
}

#[test]
fn bad_y4m_input_gives_one_line_errors() {
    let d = dir("y4m-bad");
    // A chroma format we do not take, written by ffmpeg.
    let (c422, _) = clip(&d, "c422", "yuv422p", "1");
    let e = source_err("y4msrc", &[("location", &c422)]);
    assert!(
        e.starts_with(&format!("y4msrc: {c422}: unsupported chroma format C422 ")),
        "{e}"
    );
    // Not a y4m file at all.
    let junk = d.join("junk.y4m");
    std::fs::write(&junk, b"RIFF\x00\x00WAVEfmt \n").unwrap();
    let e = source_err("y4msrc", &[("location", s(&junk))]);
    assert_eq!(
        e,
        format!(
            "y4msrc: {}: bad YUV4MPEG2 header: not a YUV4MPEG2 stream (its first bytes are not \
             'YUV4MPEG2 '; the first line has 14 bytes)",
            s(&junk)
        )
    );
    // No newline ever.
    let long = d.join("long.y4m");
    std::fs::write(&long, vec![b'Y'; 10_000]).unwrap();
    let e = source_err("y4msrc", &[("location", s(&long))]);
    assert!(e.ends_with("no end of line in the first 4096 bytes"), "{e}");
    // Empty.
    let empty = d.join("empty.y4m");
    std::fs::write(&empty, b"").unwrap();
    assert!(source_err("y4msrc", &[("location", s(&empty))]).ends_with("the input is empty"));
    // Too large to allocate: refused before allocating.
    let big = d.join("big.y4m");
    std::fs::write(&big, b"YUV4MPEG2 W100000 H100000 F25:1\n").unwrap();
    let e = source_err("y4msrc", &[("location", s(&big))]);
    assert_eq!(
        e,
        "y4msrc: frame size 100000x100000 is too large (at most 16384x16384)"
    );
    // A bad frame header after a good one.
    let mut bytes = b"YUV4MPEG2 W4 H2 F25:1 C444\nFRAME\n".to_vec();
    bytes.extend([128u8; 24]);
    bytes.extend(b"FRAMX\n");
    bytes.extend([128u8; 24]);
    let bad_frame = d.join("badframe.y4m");
    std::fs::write(&bad_frame, &bytes).unwrap();
    let (frames, err) = read_all(
        source("y4msrc", &[("location", s(&bad_frame))]).as_mut(),
        10,
    );
    assert_eq!(frames.len(), 1);
    assert_eq!(
        err.unwrap(),
        format!(
            "y4msrc: {}: bad YUV4MPEG2 header: frame 1 does not start with a 'FRAME' line (its \
             line has 5 bytes)",
            s(&bad_frame)
        )
    );
    // Missing file.
    let e = source_err("y4msrc", &[("location", "/nonexistent/in.y4m")]);
    assert_eq!(
        e,
        "y4msrc: cannot open '/nonexistent/in.y4m': No such file or directory (os error 2)"
    );
    let e = source_err("y4msrc", &[]);
    assert_eq!(
        e,
        "y4msrc: property 'location' is required: the file to read, or - for stdin"
    );
}

/// Found while fuzzing (docs/RELIABILITY.md): a frame line that only begins with `FRAME`
/// (`FRAMEXYZ`) was taken for a frame header. `FRAME` alone and `FRAME` with parameters after a
/// space are frame headers; anything else is a one-line error naming what was found.
#[test]
fn a_frame_line_that_only_begins_with_frame_is_refused() {
    let d = dir("y4m-framexyz");
    let (y4m, _) = clip(&d, "two", "yuv420p", "2");
    let bytes = std::fs::read(&y4m).unwrap();
    let frame_len = 64 * 48 * 3 / 2;
    // The second frame's header starts `frame_len + 6` bytes from the end ("FRAME\n" + pixels).
    let second = bytes.len() - frame_len - 6;
    assert_eq!(&bytes[second..second + 6], b"FRAME\n");
    for (name, header, ok) in [
        ("params", &b"FRAME Ixyz\n"[..], true),
        ("glued", &b"FRAMEXYZ\n"[..], false),
    ] {
        let mut v = bytes[..second].to_vec();
        v.extend_from_slice(header);
        v.extend_from_slice(&bytes[second + 6..]);
        let path = d.join(format!("{name}.y4m"));
        std::fs::write(&path, &v).unwrap();
        let (frames, err) = read_all(source("y4msrc", &[("location", s(&path))]).as_mut(), 10);
        if ok {
            assert_eq!((frames.len(), err), (2, None), "{name}");
        } else {
            assert_eq!(frames.len(), 1, "{name}");
            let e = err.expect("an error for FRAMEXYZ");
            assert!(
                e.ends_with("frame 1 does not start with a 'FRAME' line (its line has 8 bytes)"),
                "{e}"
            );
        }
    }
}
