//! ffmpegsrc and ffmpegsink with the real ffmpeg and ffprobe.

mod common;
use common::*;

use framepipe_core::Rational;

#[test]
fn ffmpegsrc_reads_a_clip_made_by_ffmpeg() {
    let d = dir("ffmpegsrc");
    let clip = d.join("clip.mkv");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=96x64:rate=25",
        "-frames:v",
        "5",
        "-c:v",
        "ffv1",
        s(&clip),
    ]);
    let reference = ffmpeg(&["-i", s(&clip), "-f", "rawvideo", "-pix_fmt", "rgba", "-"]);
    let mut src = source("ffmpegsrc", &[("location", s(&clip))]);
    let info = src.info();
    assert_eq!(
        (info.width, info.height, info.rate),
        (96, 64, Rational::new(25, 1))
    );
    let (frames, err) = read_all(src.as_mut(), 100);
    assert_eq!(err, None);
    assert_eq!(frames.len(), 5);
    assert!(
        frames.concat() == reference,
        "frames differ from ffmpeg's own decode"
    );

    // Scaled by ffmpeg, the missing side keeping the aspect ratio; limited to 2 frames.
    let mut src = source(
        "ffmpegsrc",
        &[("location", s(&clip)), ("width", "48"), ("frames", "2")],
    );
    assert_eq!((src.info().width, src.info().height), (48, 32));
    assert_eq!(src.len_hint(), Some(2));
    let (frames, err) = read_all(src.as_mut(), 100);
    assert_eq!((frames.len(), err), (2, None));
    assert_eq!(frames[0].len(), 48 * 32 * 4);

    // An input format for ffmpeg: its lavfi test source directly.
    let mut src = source(
        "ffmpegsrc",
        &[
            ("location", "testsrc2=size=32x24:rate=30000/1001"),
            ("format", "lavfi"),
            ("frames", "3"),
        ],
    );
    assert_eq!(src.info().rate, Rational::new(30000, 1001));
    let (frames, err) = read_all(src.as_mut(), 100);
    assert_eq!((frames.len(), err), (3, None));
}

#[test]
fn ffmpegsink_writes_an_mp4_with_every_frame() {
    let d = dir("ffmpegsink");
    let out = d.join("out.mp4");
    let mut src = source(
        "testsrc",
        &[
            ("width", "64"),
            ("height", "48"),
            ("frames", "12"),
            ("rate", "25"),
            ("counter", "true"),
        ],
    );
    let mut snk = sink(
        "ffmpegsink",
        &[
            ("location", s(&out)),
            ("codec", "libx264"),
            ("args", "-preset ultrafast -crf 20"),
        ],
    );
    assert_eq!(pump(src.as_mut(), snk.as_mut(), 100), (12, None));
    let probe = String::from_utf8(tool(
        "ffprobe",
        &[
            "-v",
            "error",
            "-count_frames",
            "-show_entries",
            "stream=codec_name,width,height,nb_read_frames,pix_fmt",
            "-of",
            "default=noprint_wrappers=1",
            s(&out),
        ],
    ))
    .unwrap();
    for want in [
        "codec_name=h264",
        "width=64",
        "height=48",
        "nb_read_frames=12",
        "pix_fmt=yuv420p",
    ] {
        assert!(probe.lines().any(|l| l == want), "{want} not in {probe}");
    }
}

#[test]
fn ffmpeg_failures_are_reported_in_ffmpegs_words() {
    let d = dir("ffmpeg-fail");
    // ffmpeg refuses the codec and exits at once: the next write or finish says why.
    let out = d.join("out.mp4");
    let mut src = source(
        "testsrc",
        &[("width", "64"), ("height", "48"), ("frames", "50")],
    );
    let mut snk = sink(
        "ffmpegsink",
        &[("location", s(&out)), ("codec", "nosuchcodec")],
    );
    let (_, err) = pump(src.as_mut(), snk.as_mut(), 100);
    let err = err.expect("a bad codec must fail");
    assert!(
        err.starts_with("ffmpegsink: ffmpeg exited with exit status: "),
        "{err}"
    );
    assert!(err.contains("nosuchcodec"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    // A missing clip: ffprobe's message.
    let e = source_err("ffmpegsrc", &[("location", "/nonexistent/clip.mp4")]);
    assert!(
        e.starts_with("ffmpegsrc: cannot probe '/nonexistent/clip.mp4': ffprobe exited with"),
        "{e}"
    );
    assert!(e.contains("No such file or directory"), "{e}");

    // A file that is no video.
    let junk = d.join("junk.mp4");
    std::fs::write(&junk, vec![7u8; 4096]).unwrap();
    let e = source_err("ffmpegsrc", &[("location", s(&junk))]);
    assert!(
        e.starts_with(&format!("ffmpegsrc: cannot probe '{}'", s(&junk))),
        "{e}"
    );

    // A stream that probes fine but breaks after a few frames (its frame size changes), with
    // ffmpeg told to stop at the first error: the frames before it are delivered, then ffmpeg's
    // exit status and last message end the stream.
    let graph = "testsrc2=size=64x48:rate=25,scale=w='if(gt(n,3),-7,64)':h=48:eval=frame";
    let mut src = source(
        "ffmpegsrc",
        &[
            ("location", graph),
            ("format", "lavfi"),
            ("args", "-xerror"),
            ("frames", "10"),
        ],
    );
    let (frames, err) = read_all(src.as_mut(), 100);
    assert!((1..10).contains(&frames.len()), "{} frames", frames.len());
    let err = err.expect("ffmpeg's failure must end the stream with an error");
    assert!(
        err.starts_with("ffmpegsrc: ffmpeg exited with exit status: 1: "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    let e = source_err("ffmpegsrc", &[]);
    assert_eq!(
        e,
        "ffmpegsrc: property 'location' is required: the clip or URL ffmpeg reads"
    );
}

#[test]
fn locations_reach_ffmpeg_as_paths_never_as_options() {
    use framepipe_io::ffmpeg::{input_arg, output_arg};
    assert_eq!(input_arg("-i.mp4", ""), "./-i.mp4");
    assert_eq!(input_arg("-y", ""), "./-y");
    assert_eq!(input_arg("clip.mp4", ""), "clip.mp4");
    assert_eq!(input_arg("/abs/-x.mp4", ""), "/abs/-x.mp4");
    assert_eq!(input_arg("rtsp://cam/-stream", ""), "rtsp://cam/-stream");
    // With an input format the location is that format's own (a lavfi graph, a device).
    assert_eq!(
        input_arg("testsrc2=size=32x24", "lavfi"),
        "testsrc2=size=32x24"
    );
    assert_eq!(output_arg("-y.mp4"), "./-y.mp4");
    assert_eq!(output_arg("-"), "pipe:1");
    assert_eq!(output_arg("out.mkv"), "out.mkv");

    // ffmpegsrc cannot share standard input with ffprobe: said at build.
    let e = source_err("ffmpegsrc", &[("location", "-")]);
    assert!(e.contains("cannot read standard input"), "{e}");
}

/// A 50-frame H.264 mp4 with its index in front (`+faststart`), then a copy cut in the middle
/// as a broken download or a full disk leaves it: ffprobe still announces 50 frames.
fn truncated_clip(d: &std::path::Path) -> std::path::PathBuf {
    let whole = d.join("whole.mp4");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=25",
        "-frames:v",
        "50",
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-movflags",
        "+faststart",
        s(&whole),
    ]);
    let bytes = std::fs::read(&whole).unwrap();
    let cut = d.join("cut.mp4");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    cut
}

#[test]
fn a_truncated_clip_is_reported_and_an_error_under_strict() {
    let d = dir("ffmpeg-truncated");
    let cut = truncated_clip(&d);
    // Default: a warning on stderr (see the CLI test), the frames there are, no error.
    let mut src = source("ffmpegsrc", &[("location", s(&cut))]);
    let (frames, err) = read_all(src.as_mut(), 100);
    assert_eq!(err, None);
    let delivered = frames.len();
    assert!((1..50).contains(&delivered), "{delivered} frames");

    // strict=true: the same damage ends the stream with an error naming it.
    let mut src = source("ffmpegsrc", &[("location", s(&cut)), ("strict", "true")]);
    let (frames, err) = read_all(src.as_mut(), 100);
    assert_eq!(frames.len(), delivered);
    let err = err.expect("strict=true makes a damaged clip an error");
    let want = format!(
        "ffmpegsrc: '{}' is damaged: ffmpeg delivered {delivered} of 50 frames (announced by ffprobe); ffmpeg reported ",
        s(&cut)
    );
    assert!(err.starts_with(&want), "{err}");
    assert!(err.contains(", the first: "), "{err}");
    assert!(
        err.ends_with("(strict=true; without it this is a warning)"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    // The whole clip passes strict: every frame, no error.
    let mut src = source(
        "ffmpegsrc",
        &[("location", s(&d.join("whole.mp4"))), ("strict", "true")],
    );
    let (frames, err) = read_all(src.as_mut(), 100);
    assert_eq!((frames.len(), err), (50, None));
}
