//! Clips a VJ can play (#26), through the real binary and the real FFmpeg libraries: every
//! clip is made here with the `ffmpeg` tool, each frame carrying its index as eight black or
//! white bars (bit `b` of the index in the bar at x = 8b..8b+8), read back from the pixels of
//! what the show wrote. Small frames (64x48) and short clips keep the file quick.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{run, tmpdir, wait, FP};
use serde_json::Value;
use std::io::Write;

const W: usize = 64;
const H: usize = 48;
const FRAME: usize = W * H * 4;

/// Makes `name`: `frames` frames at `rate` fps, frame N showing N in bars, encoded with
/// `codec_args`.
fn make_clip(dir: &Path, name: &str, frames: u32, rate: u32, codec_args: &[&str]) {
    make_clip_from(dir, name, 0, frames, rate, codec_args)
}

/// [`make_clip`], frame N showing `offset + N`.
fn make_clip_from(
    dir: &Path,
    name: &str,
    offset: u32,
    frames: u32,
    rate: u32,
    codec_args: &[&str],
) {
    let src = format!(
        "color=black:size={W}x{H}:rate={rate},format=yuv420p,\
         geq=lum='if(bitand(floor((N+{offset})/pow(2\\,floor(X/8)))\\,1)\\,235\\,16)':cb=128:cr=128"
    );
    let frames = frames.to_string();
    let mut args = vec![
        "-v",
        "error",
        "-y",
        "-f",
        "lavfi",
        "-i",
        &src,
        "-frames:v",
        &frames,
    ];
    args.extend_from_slice(codec_args);
    args.push(name);
    let out = Command::new("ffmpeg")
        .current_dir(dir)
        .args(&args)
        .output()
        .expect("ffmpeg on PATH");
    assert!(
        out.status.success(),
        "ffmpeg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The index each RGBA frame of `raw` shows.
fn indices(raw: &[u8]) -> Vec<u32> {
    assert_eq!(raw.len() % FRAME, 0, "a partial frame");
    raw.chunks_exact(FRAME)
        .map(|f| {
            (0..8)
                .filter(|b| f[((H / 2) * W + b * 8 + 4) * 4] > 128)
                .map(|b| 1 << b)
                .sum()
        })
        .collect()
}

/// Runs `framepipe run EXTRA... PIPELINE` in `dir` and gives its stats.
fn show(dir: &Path, extra: &[&str], pipeline: &str) -> Value {
    let mut args = vec!["run", "--control", "none", "-q", "--stats", "stats.json"];
    args.extend_from_slice(extra);
    args.push(pipeline);
    let out = run(
        Command::new(FP).current_dir(dir).args(&args),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "{pipeline}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(dir.join("stats.json")).unwrap()).unwrap()
}

/// The indices of the frames `pipeline` (a `clip ... !` to end in `rawsink location=out.rgba`)
/// writes, unpaced.
fn played(dir: &Path, clip: &str) -> Vec<u32> {
    show(
        dir,
        &["--unpaced"],
        &format!("{clip} ! rawsink location=out.rgba"),
    );
    indices(&std::fs::read(dir.join("out.rgba")).unwrap())
}

const H264: &[&str] = &["-c:v", "libx264", "-g", "10", "-bf", "2", "-crf", "10"];

#[test]
fn a_looped_clip_paced_live_gives_every_frame_in_order_none_late_none_repeated() {
    // 30 frames at 60 fps, played 10 times paced under --overload live: a frame not ready in
    // time would be repeated by the output (and counted); a loop point that cost a decoder
    // restart would make one late.
    let dir = tmpdir("clip-loops");
    make_clip(&dir, "c.mp4", 30, 60, H264);
    let stats = show(
        &dir,
        &["--overload", "live", "--latency", "50"],
        "clip location=c.mp4 loop=true loops=10 ! rawsink location=out.rgba",
    );
    let got = indices(&std::fs::read(dir.join("out.rgba")).unwrap());
    let want: Vec<u32> = (0..10).flat_map(|_| 0..30).collect();
    assert_eq!(got, want, "stats: {stats}");
    assert_eq!(stats["paced_fps"].as_f64(), Some(60.0), "{stats}");
    assert_eq!(stats["repeated"].as_u64(), Some(0), "{stats}");
    // No frame was late because of the clip: every late release (if the shared machine took
    // the output thread's CPU) was of a frame ready before its deadline (`ready_us` < 0,
    // docs/REALTIME.md "Late frames"), and the log holds every one of them.
    let late = stats["late"].as_u64().unwrap();
    let log = stats["late_frames"].as_array().unwrap();
    assert_eq!(
        late as usize,
        log.len(),
        "more late frames than the log keeps: {stats}"
    );
    assert!(
        log.iter().all(|f| f["ready_us"].as_f64().unwrap() < 0.0),
        "a frame ready after its deadline: {stats}"
    );
}

#[test]
fn on_end_loop_goes_round_through_rewind_without_a_seam() {
    // The clip loops through the runtime's rewind; the run stops with the other source, a
    // testsrc of 30 frames (three and a half plays of the 12-frame clip... 2.5).
    let dir = tmpdir("clip-rewind");
    make_clip(&dir, "c.mp4", 12, 30, H264);
    show(
        &dir,
        &["--unpaced"],
        "testsrc width=8 height=8 rate=30 frames=30 ! nullsink  \
         clip location=c.mp4 on-end=loop ! rawsink location=out.rgba",
    );
    let got = indices(&std::fs::read(dir.join("out.rgba")).unwrap());
    let want: Vec<u32> = (0..30).map(|i| i % 12).collect();
    assert_eq!(got, want);
}

#[test]
fn speeds_and_reverse_give_exactly_the_expected_frames() {
    let dir = tmpdir("clip-speeds");
    make_clip(&dir, "c.mp4", 20, 30, H264);
    let d = &*dir;
    assert_eq!(
        played(d, "clip location=c.mp4 speed=2"),
        (0..20).step_by(2).collect::<Vec<_>>()
    );
    assert_eq!(
        played(d, "clip location=c.mp4 speed=0.5"),
        (0..20).flat_map(|i| [i, i]).collect::<Vec<_>>()
    );
    assert_eq!(
        played(d, "clip location=c.mp4 speed=-1"),
        (0..20).rev().collect::<Vec<_>>()
    );
    assert_eq!(
        played(
            d,
            "clip location=c.mp4 speed=-1 in=5 out=15 loop=true loops=2"
        ),
        (5..15).rev().chain((5..15).rev()).collect::<Vec<_>>()
    );
    assert_eq!(
        played(
            d,
            "clip location=c.mp4 ping-pong=true in=0 out=6 loop=true loops=2"
        ),
        [0, 1, 2, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 4, 3, 2, 1]
    );
    assert_eq!(
        played(d, "clip location=c.mp4 in=0.5s out=20"),
        (15..20).collect::<Vec<_>>()
    );
}

#[test]
fn position_lands_on_the_frame_it_names() {
    let dir = tmpdir("clip-position");
    make_clip(&dir, "c.mp4", 21, 30, H264);
    // position 0.5 of 21 frames = frame 10, then on from there.
    assert_eq!(
        played(&dir, "clip location=c.mp4 position=0.5"),
        (10..21).collect::<Vec<_>>()
    );
    assert_eq!(
        played(&dir, "clip location=c.mp4 position=0.75 speed=-1"),
        (0..=15).rev().collect::<Vec<_>>()
    );
}

#[test]
fn a_hap_clip_plays_and_equals_ffmpegs_own_decode() {
    let dir = tmpdir("clip-hap");
    make_clip(&dir, "c.mov", 8, 30, &["-c:v", "hap"]);
    show(
        &dir,
        &["--unpaced"],
        "clip location=c.mov ! rawsink location=ours.rgba",
    );
    let ours = std::fs::read(dir.join("ours.rgba")).unwrap();
    let theirs = Command::new("ffmpeg")
        .current_dir(&*dir)
        .args([
            "-v", "error", "-i", "c.mov", "-f", "rawvideo", "-pix_fmt", "rgba", "-",
        ])
        .output()
        .unwrap();
    assert!(theirs.status.success());
    assert_eq!(indices(&ours), (0..8).collect::<Vec<_>>());
    assert!(ours == theirs.stdout, "HAP: not ffmpeg's pictures");
}

#[test]
fn an_h264_clip_equals_ffmpegs_own_decode_byte_for_byte() {
    let dir = tmpdir("clip-exact");
    make_clip(&dir, "c.mp4", 6, 30, H264);
    show(
        &dir,
        &["--unpaced"],
        "clip location=c.mp4 ! rawsink location=ours.rgba",
    );
    let ours = std::fs::read(dir.join("ours.rgba")).unwrap();
    let theirs = Command::new("ffmpeg")
        .current_dir(&*dir)
        .args([
            "-v", "error", "-i", "c.mp4", "-f", "rawvideo", "-pix_fmt", "rgba", "-",
        ])
        .output()
        .unwrap();
    assert!(theirs.status.success());
    assert_eq!(ours.len(), theirs.stdout.len());
    assert!(ours == theirs.stdout, "H.264: not ffmpeg's pictures");
}

/// Runs `pipeline` paced in `dir`, sends `commands` on stdin one by one (`wait_ms` apart,
/// then `stop`), and gives the indices written to `out.rgba` and the stderr.
fn live(dir: &Path, pipeline: &str, commands: &[&str], wait_ms: u64) -> (Vec<u32>, String) {
    live_with(dir, &[], pipeline, commands, wait_ms)
}

/// [`live`] with `extra` arguments to `framepipe run`.
fn live_with(
    dir: &Path,
    extra: &[&str],
    pipeline: &str,
    commands: &[&str],
    wait_ms: u64,
) -> (Vec<u32>, String) {
    let mut child = std::process::Command::new(FP)
        .current_dir(dir)
        .arg("run")
        .args(extra)
        .arg(pipeline)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for c in commands.iter().chain(&["stop"]) {
        std::thread::sleep(Duration::from_millis(wait_ms));
        // A show that died early is reported below with its stderr, not as a broken pipe.
        let _ = stdin.write_all(format!("{c}\n").as_bytes());
        let _ = stdin.flush();
    }
    let done = wait(child, Duration::from_secs(30), pipeline);
    drop(stdin);
    let err = String::from_utf8_lossy(&done.stderr).into_owned();
    assert!(done.status.success(), "{err}");
    (indices(&std::fs::read(dir.join("out.rgba")).unwrap()), err)
}

/// The frame number of `framepipe: ok 'CMD' from frame N` in `err`.
fn ok_frame(err: &str, cmd: &str) -> usize {
    let prefix = format!("framepipe: ok '{cmd}' from frame ");
    let line = err
        .lines()
        .map(|l| l.trim_start_matches('\r'))
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no reply to '{cmd}' in:\n{err}"));
    line[prefix.len()..].parse().unwrap()
}

#[test]
fn a_live_speed_of_minus_one_plays_back_from_the_frame_the_reply_names() {
    let dir = tmpdir("clip-live-speed");
    make_clip(&dir, "c.mp4", 24, 60, H264);
    let (got, err) = live(
        &dir,
        "clip name=c location=c.mp4 loop=true ! rawsink location=out.rgba",
        &["set c.speed -1"],
        400,
    );
    let n = ok_frame(&err, "set c.speed -1");
    assert!(n > 0 && n + 2 < got.len(), "frame {n} of {}", got.len());
    let want_before: Vec<u32> = (0..n as u32).map(|i| i % 24).collect();
    assert_eq!(got[..n], want_before[..], "{err}");
    let last = got[n - 1] as i64;
    let want_after: Vec<u32> = (0..got.len() - n)
        .map(|k| (last - 1 - k as i64).rem_euclid(24) as u32)
        .collect();
    assert_eq!(got[n..], want_after[..], "reversed from frame {n}");
}

#[test]
fn a_deck_trigger_from_stdin_starts_the_clip_on_the_frame_the_reply_names() {
    // A bank of three with the middle one missing: named at start and skipped; triggering
    // it leaves clip 0 playing; clip 2 starts on the frame the reply names, from its first
    // frame.
    let dir = tmpdir("clip-deck");
    make_clip(&dir, "a.mp4", 20, 60, H264);
    make_clip_from(&dir, "b.mp4", 100, 20, 60, H264);
    let (got, err) = live(
        &dir,
        "clips name=deck locations=a.mp4,missing.mp4,b.mp4 ! rawsink location=out.rgba",
        &["set deck.clip 1", "set deck.clip 2"],
        300,
    );
    assert!(
        err.contains("skipped clip 1") && err.contains("missing.mp4"),
        "{err}"
    );
    let n = ok_frame(&err, "set deck.clip 2");
    assert!(n > 0 && n + 2 < got.len(), "frame {n} of {}", got.len());
    let want_before: Vec<u32> = (0..n as u32).map(|i| i % 20).collect();
    assert_eq!(got[..n], want_before[..], "{err}");
    let want_after: Vec<u32> = (0..(got.len() - n) as u32).map(|k| 100 + k % 20).collect();
    assert_eq!(got[n..], want_after[..], "clip 2 from frame {n}");
}

/// The frame numbers of every `framepipe: ok 'CMD' from frame N` in `err`, in order.
fn ok_frames(err: &str, cmd: &str) -> Vec<usize> {
    let prefix = format!("framepipe: ok '{cmd}' from frame ");
    err.lines()
        .map(|l| l.trim_start_matches('\r'))
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|n| n.parse().unwrap())
        .collect()
}

#[test]
fn deck_commands_trigger_by_name_next_and_prev_wrap_on_the_frames_the_replies_name() {
    // trigger by a clip's file stem, next twice (round the bank's end), prev (round its
    // start), then the clip playing again (it restarts); a name the bank lacks is refused,
    // naming the bank.
    let dir = tmpdir("clip-deck-cmds");
    make_clip(&dir, "a.mp4", 20, 60, H264);
    make_clip_from(&dir, "b.mp4", 100, 20, 60, H264);
    make_clip_from(&dir, "c.mp4", 200, 20, 60, H264);
    let (got, err) = live(
        &dir,
        "clips name=deck locations=a.mp4,b.mp4,c.mp4 ! rawsink location=out.rgba",
        &[
            "trigger deck nope",
            "trigger deck b",
            "next deck",
            "next deck",
            "prev deck",
            "trigger deck c",
        ],
        250,
    );
    assert!(
        err.contains("no clip named 'nope'") && err.contains("a, b, c"),
        "{err}"
    );
    let b = ok_frame(&err, "set deck.clip b");
    let next = ok_frames(&err, "set deck.clip next");
    let prev = ok_frame(&err, "set deck.clip prev");
    let again = ok_frame(&err, "set deck.clip c");
    assert_eq!(next.len(), 2, "{err}");
    // Each segment: the clip's first frame on the replied frame, then its frames in order.
    let starts = [
        (0, 0),
        (b, 100),
        (next[0], 200),
        (next[1], 0),
        (prev, 200),
        (again, 200),
    ];
    for (k, &(from, offset)) in starts.iter().enumerate() {
        let to = starts.get(k + 1).map_or(got.len(), |s| s.0);
        assert!(
            from < to && to <= got.len(),
            "{starts:?} of {}: {err}",
            got.len()
        );
        let want: Vec<u32> = (0..(to - from) as u32).map(|i| offset + i % 20).collect();
        assert_eq!(
            got[from..to],
            want[..],
            "segment {k} from frame {from}: {err}"
        );
    }
}

#[test]
fn a_decks_locations_in_a_project_file_are_beside_the_project_file() {
    // Run from the folder above the project's: `locations` (a list) and the sink's `location`
    // are resolved against the project file's folder, item by item.
    let dir = tmpdir("clip-deck-project");
    let show = dir.join("show");
    std::fs::create_dir_all(&show).unwrap();
    make_clip(&show, "a.mp4", 20, 60, H264);
    make_clip_from(&show, "b.mp4", 100, 20, 60, H264);
    std::fs::write(
        show.join("show.toml"),
        "pipeline = \"clips name=deck locations=a.mp4,b.mp4 ! rawsink location=../out.rgba\"\n",
    )
    .unwrap();
    let (got, err) = live(&dir, "show/show.toml", &["trigger deck 1"], 500);
    assert!(err.contains("2 of 2 clips playable"), "{err}");
    let n = ok_frame(&err, "set deck.clip 1");
    assert!(n < got.len(), "frame {n} of {}", got.len());
    let want: Vec<u32> = (0..got.len() as u32)
        .map(|i| {
            if (i as usize) < n {
                i % 20
            } else {
                100 + (i - n as u32) % 20
            }
        })
        .collect();
    assert_eq!(got, want, "clip 1 from frame {n}: {err}");
}

#[test]
fn a_deck_goes_on_with_the_next_clip_when_one_fails_mid_play() {
    // Clip 0's file is cut in the middle of its data (its index, at the front, still
    // announces every frame): the decoder names it when it fails and the deck plays clip 1.
    let dir = tmpdir("clip-deck-cut");
    make_clip(
        &dir,
        "full.mp4",
        60,
        60,
        &[H264, &["-movflags", "+faststart"]].concat(),
    );
    make_clip_from(&dir, "b.mp4", 100, 20, 60, H264);
    let full = std::fs::read(dir.join("full.mp4")).unwrap();
    // Half of the media data (after the `mdat` box's header) is kept.
    let mdat = full.windows(4).position(|w| w == b"mdat").unwrap() + 4;
    std::fs::write(dir.join("cut.mp4"), &full[..mdat + (full.len() - mdat) / 2]).unwrap();
    let (got, err) = live(
        &dir,
        "clips name=deck locations=cut.mp4,b.mp4 ! rawsink location=out.rgba",
        &[],
        1200,
    );
    assert!(
        err.contains("clip 0 stopped") && err.contains("goes on with clip 1"),
        "{err}"
    );
    let switch = got.iter().position(|&i| i >= 100).expect("clip 1 played");
    assert!(switch > 8, "clip 0's head and more played first: {got:?}");
    assert_eq!(
        got[..switch],
        (0..switch as u32).collect::<Vec<_>>()[..],
        "clip 0 in order"
    );
    let after: Vec<u32> = (0..(got.len() - switch) as u32)
        .map(|k| 100 + k % 20)
        .collect();
    assert_eq!(got[switch..], after[..], "clip 1 from its start");
}

#[test]
fn pause_holds_the_frame_and_a_position_set_while_paused_shows_its_frame() {
    let dir = tmpdir("clip-scrub");
    make_clip(&dir, "c.mp4", 24, 60, H264);
    let (got, err) = live(
        &dir,
        "clip name=c location=c.mp4 loop=true ! rawsink location=out.rgba",
        &["set c.pause true", "set c.position 0.25"],
        400,
    );
    let p = ok_frame(&err, "set c.pause true");
    let q = ok_frame(&err, "set c.position 0.25");
    assert!(0 < p && p < q && q + 2 < got.len(), "{p} {q} {}", got.len());
    let before: Vec<u32> = (0..p as u32).map(|i| i % 24).collect();
    assert_eq!(got[..p], before[..]);
    assert!(
        got[p..q].iter().all(|&i| i == got[p - 1]),
        "paused from frame {p}: {:?}",
        &got[p - 1..q]
    );
    // 0.25 of frames 0..=23 is 5.75: frame 6, held (still paused).
    assert!(
        got[q..].iter().all(|&i| i == 6),
        "scrubbed at frame {q}: {:?}",
        &got[q..]
    );
}

/// The beat position, in nanobeats, of frame `k` at 60 fps when the tempo goes from 120 bpm to
/// 90 from frame `f`, as the show's beat clock counts it: frame times in whole nanoseconds,
/// the beats they hold at the tempo of each step (the new tempo from the step into `f`),
/// rounded down.
fn nanobeats(k: usize, f: usize) -> i128 {
    let pts = |k: usize| k as i128 * 1_000_000_000 / 60;
    let milli = if k < f {
        pts(k) * 120_000
    } else {
        pts(f - 1) * 120_000 + (pts(k) - pts(f - 1)) * 90_000
    };
    milli / 60_000
}

#[test]
fn a_quantized_deck_starts_and_restarts_a_clip_on_the_first_frame_of_the_next_beat() {
    // quantize=beat at 60 fps: at 120 bpm a beat is 30 frames, so clip 1 starts on a frame
    // that is a multiple of 30, the one the reply names. After `tempo 90` (a beat: 40 frames,
    // from the tempo's frame on), triggering clip 1 again (the clip playing) restarts it, on
    // the first frame at or after the next whole beat as the test computes it.
    let dir = tmpdir("clip-deck-beat");
    make_clip(&dir, "a.mp4", 20, 60, H264);
    make_clip_from(&dir, "b.mp4", 100, 20, 60, H264);
    let (got, err) = live(
        &dir,
        "clips name=deck locations=a.mp4,b.mp4 quantize=beat ! rawsink location=out.rgba",
        &["trigger deck 1", "tempo 90", "trigger deck 1"],
        700,
    );
    let frames = ok_frames(&err, "set deck.clip 1");
    let f = ok_frame(&err, "tempo 90");
    assert_eq!(frames.len(), 2, "{err}");
    let (n1, n2) = (frames[0], frames[1]);
    assert!(
        0 < n1 && n1 < f && f < n2 && n2 < got.len(),
        "{n1} {f} {n2} of {}: {err}",
        got.len()
    );
    assert_eq!(n1 % 30, 0, "on a beat at 120 bpm: {err}");
    // n2 is the first frame at or after a whole beat: a beat begins between it and the one
    // before.
    let (b, a) = (nanobeats(n2 - 1, f), nanobeats(n2, f));
    assert!(
        b / 1_000_000_000 < a / 1_000_000_000,
        "frame {n2} ({a} nanobeats) is not the first of a beat after {b} (tempo from {f})"
    );
    let want: Vec<u32> = (0..got.len())
        .map(|k| match k {
            k if k < n1 => (k % 20) as u32,
            k if k < n2 => 100 + ((k - n1) % 20) as u32,
            k => 100 + ((k - n2) % 20) as u32,
        })
        .collect();
    assert_eq!(got, want, "clip 1 from {n1}, again from {n2}: {err}");
}

#[test]
fn a_loop_locked_to_beats_lasts_that_many_beats_at_the_tempo() {
    // 30 frames at 60 fps, 120 bpm: a beat is 30 output frames, so beats=4 plays each clip
    // frame 4 times (speed 0.25) and a loop lasts 120 frames; ping-pong's loop is 58 frames
    // long (0..29..1), so beats=1 squeezes it to 30 output frames (speed 58/30).
    let dir = tmpdir("clip-beats");
    make_clip(&dir, "c.mp4", 30, 60, H264);
    let got = played(&dir, "clip location=c.mp4 loop=true loops=2 beats=4");
    let want: Vec<u32> = (0..240).map(|k| (k / 4) % 30).collect();
    assert_eq!(got, want);
    let got = played(
        &dir,
        "clip location=c.mp4 loop=true loops=2 ping-pong=true beats=1",
    );
    // Head ×30 (exact): 58 per frame over a period of 58 × 30.
    let want: Vec<u32> = (0..60)
        .map(|k| {
            let u = (58 * k) % (58 * 30);
            let i = u / 30;
            if i < 30 {
                i
            } else {
                58 - i
            }
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_loop_locked_to_beats_follows_a_tempo_change_from_its_frame() {
    // beats=2: speed 0.5 at 120 bpm; `tempo 60` from frame f: speed 0.25 from the frame after
    // f − 1's head. Heads ×4: 2 a frame, then 1.
    let dir = tmpdir("clip-beats-tempo");
    make_clip(&dir, "c.mp4", 30, 60, H264);
    let (got, err) = live(
        &dir,
        "clip name=c location=c.mp4 loop=true beats=2 ! rawsink location=out.rgba",
        &["tempo 60"],
        500,
    );
    let f = ok_frame(&err, "tempo 60");
    assert!(0 < f && f + 10 < got.len(), "{f} of {}: {err}", got.len());
    let want: Vec<u32> = (0..got.len())
        .map(|k| {
            let u4 = if k < f {
                2 * k
            } else {
                2 * (f - 1) + (k + 1 - f)
            };
            ((u4 / 4) % 30) as u32
        })
        .collect();
    assert_eq!(got, want, "tempo 60 from frame {f}");
}

#[test]
fn clip_tables_in_a_project_file_give_a_deck_its_clips_with_their_own_settings() {
    // Two [[clip]] tables beside the project file: the first with its own in/out points and
    // speed 2 (a factor of the deck's), named for `trigger`; the second played backwards by
    // its own speed and held at its end (loop = false).
    let dir = tmpdir("clip-tables");
    let show = dir.join("show");
    std::fs::create_dir_all(&show).unwrap();
    make_clip(&show, "a.mp4", 20, 60, H264);
    make_clip_from(&show, "b.mp4", 100, 20, 60, H264);
    std::fs::write(
        show.join("show.toml"),
        r#"pipeline = "clips name=deck ! rawsink location=../out.rgba"

[[clip]]
location = "a.mp4"
name = "intro"
in = 4
out = 14
speed = 2

[[clip]]
location = "b.mp4"
name = "outro"
speed = -1
loop = false
"#,
    )
    .unwrap();
    let (got, err) = live(&dir, "show/show.toml", &["trigger deck outro"], 500);
    assert!(err.contains("2 of 2 clips playable"), "{err}");
    let n = ok_frame(&err, "set deck.clip outro");
    assert!(
        0 < n && n + 25 < got.len(),
        "frame {n} of {}: {err}",
        got.len()
    );
    // intro: frames 4, 6, ..., 12 again and again; outro: 119 down to 100, then held.
    let want: Vec<u32> = (0..got.len())
        .map(|k| match k {
            k if k < n => 4 + 2 * (k as u32 % 5),
            k => 119u32.saturating_sub((k - n) as u32).max(100),
        })
        .collect();
    assert_eq!(got, want, "outro from frame {n}: {err}");
}

#[test]
fn a_decks_pictures_are_in_the_memory_book_and_an_edit_over_the_budget_is_refused() {
    // A deck of two 64x48 clips with cache=200 holds (ahead 8 + 1 + cache 200) decoder
    // pictures and a head of 8 pictures per clip: 225 × 12288 bytes, counted in --stats'
    // memory.held_max beside the pools (a testsrc of the same shape holds exactly that much
    // less). Under a 4 MiB budget one deck fits, two at once do not: replacing the deck by
    // another (both held while the edit switches) is refused naming the memory, and the show
    // goes on.
    let dir = tmpdir("clip-deck-memory");
    make_clip(&dir, "a.mp4", 20, 60, H264);
    make_clip_from(&dir, "b.mp4", 100, 20, 60, H264);
    let extra = ["--max-memory", "4M", "--stats", "stats.json"];
    let replace = "replace deck clips locations=b.mp4,a.mp4 cache=200";
    let (got, err) = live_with(
        &dir,
        &extra,
        "clips name=deck locations=a.mp4,b.mp4 cache=200 ! rawsink location=out.rgba",
        &[replace],
        400,
    );
    let refused = err
        .lines()
        .find(|l| l.contains(replace) && !l.contains("ok '"))
        .unwrap_or_else(|| panic!("the replace was not refused: {err}"));
    for part in ["the running graph (", "the new one (", "raise --max-memory"] {
        assert!(refused.contains(part), "{part:?} not in: {refused}");
    }
    let n = got.len() as u32;
    assert!(n > 20, "{err}");
    assert_eq!(
        got,
        (0..n).map(|i| i % 20).collect::<Vec<_>>(),
        "clip 0 went on"
    );
    let held = |dir: &Path| {
        let s: Value =
            serde_json::from_slice(&std::fs::read(dir.join("stats.json")).unwrap()).unwrap();
        s["memory"]["held_max"].as_u64().unwrap()
    };
    let deck = held(&dir);
    let same = tmpdir("clip-deck-memory-same");
    live_with(
        &same,
        &extra,
        "testsrc width=64 height=48 rate=60 frames=30 ! rawsink location=out.rgba",
        &[],
        100,
    );
    assert_eq!(deck - held(&same), 225 * (W * H * 4) as u64, "{err}");
}

#[test]
fn a_bank_of_a_hundred_clips_plays_within_the_budget_with_shortened_heads() {
    // 100 clips (99 copies of one, the last another) under a 6 MiB budget: the heads of 8
    // pictures each (100 × 8 × 12 KiB ≈ 9.4 MiB) do not fit, so the deck shortens them to what
    // half the room left gives each; every clip is playable, the memory the show holds stays
    // within the budget, and the last clip, triggered, starts on the replied frame from its
    // first frame.
    let dir = tmpdir("clip-deck-hundred");
    make_clip(&dir, "a.mp4", 20, 60, H264);
    make_clip_from(&dir, "b.mp4", 100, 20, 60, H264);
    let bank = dir.join("bank");
    std::fs::create_dir(&bank).unwrap();
    for i in 0..99 {
        std::fs::copy(dir.join("a.mp4"), bank.join(format!("c{i:03}.mp4"))).unwrap();
    }
    std::fs::copy(dir.join("b.mp4"), bank.join("c099.mp4")).unwrap();
    let budget: u64 = 6 << 20;
    let extra = ["--max-memory", "6M", "--stats", "stats.json"];
    let (got, err) = live_with(
        &dir,
        &extra,
        "clips name=deck folder=bank ! rawsink location=out.rgba",
        &["set deck.clip 99"],
        600,
    );
    let line = err
        .lines()
        .find(|l| l.contains("clips playable"))
        .unwrap_or_else(|| panic!("no bank line: {err}"));
    assert!(line.contains("100 of 100 clips playable"), "{line}");
    let head: usize = line
        .split("heads of ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no head length in: {line}"));
    assert!((1..8).contains(&head), "heads of {head} frames: {line}");
    let stats: Value =
        serde_json::from_slice(&std::fs::read(dir.join("stats.json")).unwrap()).unwrap();
    let held = stats["memory"]["held_max"].as_u64().unwrap();
    assert!(
        held <= budget,
        "held {held} bytes, over the {budget} budget"
    );
    let n = ok_frame(&err, "set deck.clip 99");
    assert!(n > 0 && n + 2 < got.len(), "frame {n} of {}", got.len());
    let want_before: Vec<u32> = (0..n as u32).map(|i| i % 20).collect();
    assert_eq!(got[..n], want_before[..], "{err}");
    let want_after: Vec<u32> = (0..(got.len() - n) as u32).map(|k| 100 + k % 20).collect();
    assert_eq!(got[n..], want_after[..], "clip 99 from frame {n}");
}
