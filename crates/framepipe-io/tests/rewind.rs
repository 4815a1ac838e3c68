//! `Source::rewind` (for `on-end=loop`): after the end, a rewound source gives its first frames
//! again, byte for byte; a pipe cannot rewind. Real files, made by the real ffmpeg.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use framepipe_core::{FrameCtx, FramePool, Source};

/// Reads `src` until it ends (at most `max` frames), numbering frames from `seq` on as the
/// runtime does (its clock goes on across a loop point); returns the frames and the next `seq`.
fn read_from(src: &mut dyn Source, seq: u64, max: u64) -> (Vec<Vec<u8>>, u64) {
    let info = src.info();
    let pool = FramePool::new(info.width, info.height, 2);
    let mut frames = Vec::new();
    let mut seq = seq;
    while (frames.len() as u64) < max {
        let mut f = pool.acquire().unwrap();
        let c = FrameCtx::new(seq, info.rate.frame_time_ns(seq));
        seq += 1;
        match src.fill(&c, &mut f) {
            Ok(true) => frames.push(f.data().to_vec()),
            Ok(false) => break,
            Err(e) => panic!("frame {seq}: {e}"),
        }
    }
    (frames, seq)
}

/// Reads `src` to its end, rewinds it and reads it to its end again, with the runtime's frame
/// numbers going on across the loop point. Asserts that the rewind was accepted and that both
/// passes gave the same `n` frames; returns the first pass.
fn assert_loops(what: &str, src: &mut dyn Source, n: usize) -> Vec<Vec<u8>> {
    let (first, seq) = read_from(src, 0, 1000);
    assert_eq!(first.len(), n, "{what}: frames before the end");
    assert!(src.rewind().unwrap(), "{what}: rewind refused");
    let (second, seq) = read_from(src, seq, 1000);
    assert_eq!(second.len(), n, "{what}: frames after the rewind");
    assert!(first == second, "{what}: frames after the rewind differ");
    // And once more, after a second end.
    assert!(src.rewind().unwrap(), "{what}: second rewind refused");
    let (third, _) = read_from(src, seq, 2);
    assert!(third[..] == first[..2], "{what}: second loop differs");
    first
}

/// Frames that differ from each other, so that a source that did not go back is caught.
fn assert_moving(what: &str, frames: &[Vec<u8>]) {
    assert!(
        frames.windows(2).all(|w| w[0] != w[1]),
        "{what}: the test clip has repeated frames"
    );
}

/// A raw RGBA file of `n` 96x64 frames of ffmpeg's testsrc2 (a moving picture).
fn rgba_clip(d: &Path, n: u32) -> PathBuf {
    let p = d.join("clip.rgba");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=96x64:rate=25",
        "-frames:v",
        &n.to_string(),
        "-pix_fmt",
        "rgba",
        "-f",
        "rawvideo",
        s(&p),
    ]);
    p
}

/// A named pipe at `path` with `data` written into it by a thread (joined by the caller).
fn fifo(path: &Path, data: Vec<u8>) -> std::thread::JoinHandle<()> {
    let st = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(st.success(), "mkfifo {}", path.display());
    let path = path.to_path_buf();
    // The reader may stop before the end (a broken pipe is fine).
    std::thread::spawn(move || {
        let _ = std::fs::write(path, data);
    })
}

#[test]
fn testsrc_counts_from_its_first_frame_again_after_a_rewind() {
    for pattern in ["bars", "counter", "noise", "gradient"] {
        let mut src = source(
            "testsrc",
            &[
                ("pattern", pattern),
                ("width", "64"),
                ("height", "48"),
                ("frames", "4"),
            ],
        );
        let frames = assert_loops(pattern, src.as_mut(), 4);
        assert_moving(pattern, &frames);
    }
    // When the runtime numbers the frames from 0 again instead, the same holds.
    let mut src = source("testsrc", &[("pattern", "counter"), ("frames", "3")]);
    let (first, _) = read_from(src.as_mut(), 0, 100);
    assert!(src.rewind().unwrap());
    let (second, _) = read_from(src.as_mut(), 0, 100);
    assert_eq!(second.len(), 3);
    assert!(first == second);
    // An endless one starts again too.
    let mut src = source("testsrc", &[("pattern", "counter")]);
    let (first, seq) = read_from(src.as_mut(), 0, 5);
    assert!(src.rewind().unwrap());
    let (second, _) = read_from(src.as_mut(), seq, 5);
    assert!(first == second);
}

#[test]
fn rawsrc_seeks_a_file_back_to_its_first_frame() {
    let d = dir("rewind-raw");
    let clip = rgba_clip(&d, 5);
    let reference = std::fs::read(&clip).unwrap();
    let props = [("location", s(&clip)), ("width", "96"), ("height", "64")];
    let frames = assert_loops("rawsrc", source("rawsrc", &props).as_mut(), 5);
    assert_moving("rawsrc", &frames);
    assert!(frames.concat() == reference);
    // frames=3 on a 5-frame file: the limit counts from the loop point, and the file is read
    // from its start again (not from frame 3, where the first pass stopped).
    let mut limited = props.to_vec();
    limited.push(("frames", "3"));
    let frames = assert_loops("rawsrc frames=3", source("rawsrc", &limited).as_mut(), 3);
    assert!(frames.concat() == reference[..3 * 96 * 64 * 4]);
    // bgra goes through the scratch buffer: the same frames after the loop.
    let bgra = d.join("clip.bgra");
    ffmpeg(&[
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgba",
        "-s",
        "96x64",
        "-i",
        s(&clip),
        "-f",
        "rawvideo",
        "-pix_fmt",
        "bgra",
        s(&bgra),
    ]);
    let mut p = props.to_vec();
    p[0] = ("location", s(&bgra));
    p.push(("format", "bgra"));
    let frames = assert_loops("rawsrc format=bgra", source("rawsrc", &p).as_mut(), 5);
    assert!(frames.concat() == reference);
}

#[test]
fn rawsrc_on_a_pipe_cannot_rewind() {
    let d = dir("rewind-raw-pipe");
    let clip = rgba_clip(&d, 3);
    let pipe = d.join("pipe");
    let writer = fifo(&pipe, std::fs::read(&clip).unwrap());
    let mut src = source(
        "rawsrc",
        &[("location", s(&pipe)), ("width", "96"), ("height", "64")],
    );
    let (frames, _) = read_from(src.as_mut(), 0, 100);
    assert_eq!(frames.len(), 3);
    assert!(!src.rewind().unwrap(), "a pipe was said to rewind");
    writer.join().unwrap();
}

#[test]
fn y4msrc_seeks_a_file_back_to_its_first_frame() {
    let d = dir("rewind-y4m");
    let y4m = d.join("clip.y4m");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=96x64:rate=25",
        "-frames:v",
        "5",
        "-pix_fmt",
        "yuv420p",
        s(&y4m),
    ]);
    let src = || source("y4msrc", &[("location", s(&y4m))]);
    let frames = assert_loops("y4msrc", src().as_mut(), 5);
    assert_moving("y4msrc", &frames);
    // The rewind lands on the first frame header, not on the stream header: the frames read
    // after it are the ones a fresh source reads.
    let (fresh, _) = read_from(src().as_mut(), 0, 100);
    assert!(frames == fresh);
    let mut limited = source("y4msrc", &[("location", s(&y4m)), ("frames", "2")]);
    let two = assert_loops("y4msrc frames=2", limited.as_mut(), 2);
    assert!(two[..] == frames[..2]);
}

#[test]
fn y4msrc_on_a_pipe_cannot_rewind() {
    let d = dir("rewind-y4m-pipe");
    let y4m = d.join("clip.y4m");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=96x64:rate=25",
        "-frames:v",
        "3",
        "-pix_fmt",
        "yuv420p",
        s(&y4m),
    ]);
    let pipe = d.join("pipe");
    let writer = fifo(&pipe, std::fs::read(&y4m).unwrap());
    let mut src = source("y4msrc", &[("location", s(&pipe))]);
    let (frames, _) = read_from(src.as_mut(), 0, 100);
    assert_eq!(frames.len(), 3);
    assert!(!src.rewind().unwrap(), "a pipe was said to rewind");
    writer.join().unwrap();
}

#[test]
fn ffmpegsrc_starts_ffmpeg_again_on_the_same_input() {
    let d = dir("rewind-ffmpeg");
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
    let mut src = source("ffmpegsrc", &[("location", s(&clip)), ("strict", "true")]);
    let frames = assert_loops("ffmpegsrc", src.as_mut(), 5);
    assert_moving("ffmpegsrc", &frames);
    assert!(frames.concat() == reference);
    // A rewind before the end (ffmpeg still running) kills that ffmpeg and starts over; with
    // frames=2 the limit counts from the loop point.
    let mut src = source(
        "ffmpegsrc",
        &[("location", s(&clip)), ("frames", "2"), ("strict", "true")],
    );
    let (one, seq) = read_from(src.as_mut(), 0, 1);
    assert!(src.rewind().unwrap());
    let (two, _) = read_from(src.as_mut(), seq, 100);
    assert_eq!(two.len(), 2);
    assert!(one[0] == two[0] && two[..] == frames[..2]);
}
