//! rawsrc and rawsink: byte-exact round trips, agreement with ffmpeg's packing, truncation.

mod common;
use common::*;

const W: u32 = 32;
const H: u32 = 16;

fn noise(frames: &str) -> Box<dyn framepipe_core::Source> {
    source(
        "testsrc",
        &[
            ("pattern", "noise"),
            ("seed", "9"),
            ("width", "32"),
            ("height", "16"),
            ("frames", frames),
        ],
    )
}

#[test]
fn raw_round_trips_are_byte_exact_in_every_format() {
    let d = dir("raw-roundtrip");
    let (original, _) = read_all(noise("4").as_mut(), 100);
    let rgba_file = d.join("a.rgba");
    assert_eq!(
        pump(
            noise("4").as_mut(),
            sink("rawsink", &[("location", s(&rgba_file))]).as_mut(),
            100
        ),
        (4, None)
    );
    assert_eq!(std::fs::read(&rgba_file).unwrap(), original.concat());
    for format in ["rgba", "bgra", "rgb24"] {
        let a = d.join(format!("a.{format}"));
        let b = d.join(format!("b.{format}"));
        let (n, err) = pump(
            noise("4").as_mut(),
            sink("rawsink", &[("location", s(&a)), ("format", format)]).as_mut(),
            100,
        );
        assert_eq!((n, err), (4, None), "{format}");
        // What we wrote is what ffmpeg makes of the same RGBA frames.
        let ffmpeg_packed = ffmpeg(&[
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgba",
            "-s",
            "32x16",
            "-i",
            s(&rgba_file),
            "-f",
            "rawvideo",
            "-pix_fmt",
            format,
            "-",
        ]);
        assert!(
            std::fs::read(&a).unwrap() == ffmpeg_packed,
            "{format} differs from ffmpeg's"
        );
        // Reading it back gives the original frames (noise is opaque, so rgb24 loses nothing).
        let props = [
            ("location", s(&a)),
            ("format", format),
            ("width", "32"),
            ("height", "16"),
        ];
        let mut src = source("rawsrc", &props);
        assert_eq!(src.len_hint(), Some(4));
        let (back, err) = read_all(src.as_mut(), 100);
        assert_eq!(err, None);
        assert!(back == original, "{format}: frames read back differ");
        // And writing them again gives the same bytes.
        let (n, err) = pump(
            source("rawsrc", &props).as_mut(),
            sink("rawsink", &[("location", s(&b)), ("format", format)]).as_mut(),
            100,
        );
        assert_eq!((n, err), (4, None));
        assert!(
            std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
            "{format}"
        );
    }
}

#[test]
fn truncated_raw_file_delivers_whole_frames_then_names_the_cut() {
    let d = dir("raw-truncated");
    let (original, _) = read_all(noise("3").as_mut(), 100);
    let path = d.join("in.rgba");
    let mut bytes = original.concat();
    bytes.extend_from_slice(&original[0][..1000]);
    std::fs::write(&path, &bytes).unwrap();
    let props = [("location", s(&path)), ("width", "32"), ("height", "16")];
    let (frames, err) = read_all(source("rawsrc", &props).as_mut(), 100);
    assert!(frames == original);
    let want = (W * H * 4) as usize;
    assert_eq!(
        err.unwrap(),
        format!(
            "rawsrc: {} is truncated: frame 3 has 1000 of {want} bytes",
            s(&path)
        )
    );
    // In a pipeline, the whole frames still reach the sink before the error ends the run.
    let out = d.join("out.rgba");
    let (n, err) = pump(
        source("rawsrc", &props).as_mut(),
        sink("rawsink", &[("location", s(&out))]).as_mut(),
        100,
    );
    assert_eq!(n, 3);
    assert!(err.unwrap().contains("is truncated: frame 3 has 1000 of"));
    assert!(std::fs::read(&out).unwrap() == original.concat());
}

#[test]
fn raw_elements_refuse_bad_settings() {
    let d = dir("raw-bad");
    let e = source_err(
        "rawsrc",
        &[
            ("location", "/nonexistent/x.rgba"),
            ("width", "8"),
            ("height", "8"),
        ],
    );
    assert_eq!(
        e,
        "rawsrc: cannot open '/nonexistent/x.rgba': No such file or directory (os error 2)"
    );
    let e = source_err("rawsrc", &[("location", "x.rgba"), ("width", "8")]);
    assert_eq!(
        e,
        "rawsrc: property 'height' is required: raw frames carry no size"
    );
    let e = source_err(
        "rawsrc",
        &[("location", "x"), ("width", "20000"), ("height", "8")],
    );
    assert!(
        e.starts_with("bad value '20000' for property 'width' of rawsrc: out of range"),
        "{e}"
    );
    let e = source_err(
        "rawsrc",
        &[
            ("location", "x"),
            ("width", "8"),
            ("height", "8"),
            ("format", "yuyv"),
        ],
    );
    assert!(e.contains("expected one of: rgba, bgra, rgb24"), "{e}");
    let e = source_err(
        "rawsrc",
        &[
            ("location", "x"),
            ("width", "8"),
            ("height", "8"),
            ("rate", "0"),
        ],
    );
    assert!(e.contains("bad value '0' for property 'rate'"), "{e}");
    let e = source_err(
        "rawsink",
        &[("location", s(&d.join("no/such/dir/out.rgba")))],
    );
    assert!(
        e.starts_with("rawsink: cannot create '")
            && e.ends_with("No such file or directory (os error 2)"),
        "{e}"
    );
    // An empty file is an empty stream, not an error.
    let empty = d.join("empty.rgba");
    std::fs::write(&empty, b"").unwrap();
    let (frames, err) = read_all(
        source(
            "rawsrc",
            &[("location", s(&empty)), ("width", "8"), ("height", "8")],
        )
        .as_mut(),
        10,
    );
    assert_eq!((frames.len(), err), (0, None));
}

#[test]
fn nullsink_takes_everything() {
    let (n, err) = pump(noise("7").as_mut(), sink("nullsink", &[]).as_mut(), 100);
    assert_eq!((n, err), (7, None));
}
