//! The beat clock reaches every node of a frame: the source and the sink of each frame see
//! the same `FrameCtx::beat`, the beat position the oscillators of that frame read, advancing
//! at the tempo in force (issue #26: decks trigger on the beat and lock loops to beats).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use framepipe_control::{command_queue, Command, Outcome};
use framepipe_core::{
    BeatCtx, Frame, FrameCtx, FrameMut, Rational, Result, Sink, Source, VideoInfo,
};
use framepipe_runtime::{Options, Pipeline};

type Beats = Arc<Mutex<Vec<(u64, BeatCtx)>>>;

/// Records the beat clock of every frame it fills.
struct BeatSource {
    frames: u64,
    seen: Beats,
}

impl Source for BeatSource {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: 4,
            height: 4,
            rate: Rational::new(30, 1),
        }
    }
    fn fill(&mut self, ctx: &FrameCtx, _frame: &mut FrameMut) -> Result<bool> {
        if ctx.seq >= self.frames {
            return Ok(false);
        }
        self.seen.lock().unwrap().push((ctx.seq, ctx.beat));
        Ok(true)
    }
}

/// Records the beat clock of every frame it consumes.
struct BeatSink(Beats);

impl Sink for BeatSink {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, _frame: &Frame) -> Result<()> {
        self.0.lock().unwrap().push((ctx.seq, ctx.beat));
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// At the default 120 bpm a source sees 2 beats per second of frame time (1/15 beat a frame
/// at 30 fps); after `tempo 90`, from the frame its reply names, 1.5 beats per second (1/20
/// beat a frame), with no jump; the sink sees the same beat clock as the source on every frame.
#[test]
fn a_source_sees_the_beat_advance_at_the_tempo_in_force() {
    const FRAMES: u64 = 120;
    let source_seen = Beats::default();
    let sink_seen = Beats::default();
    let (tx, rx) = command_queue(4);
    let replies = tx.replies();
    let p = Pipeline::new(
        (
            "src".into(),
            Box::new(BeatSource {
                frames: FRAMES,
                seen: source_seen.clone(),
            }),
        ),
        vec![],
        ("sink".into(), Box::new(BeatSink(sink_seen.clone()))),
    );
    // Paced at 300 fps (frames keep their 30 fps timestamps): ~0.4 s, long enough for a
    // command posted after frame 30 to land mid-run.
    let mut prepared = p
        .prepare(Options {
            threads: 2,
            pace: Some(Rational::new(300, 1)),
            ..Options::default()
        })
        .unwrap();
    prepared.set_commands(rx);
    let poster = {
        let seen = source_seen.clone();
        std::thread::spawn(move || {
            while seen.lock().unwrap().len() < 30 {
                std::thread::sleep(Duration::from_millis(1));
            }
            tx.post(Command::parse("tempo 90").unwrap()).unwrap()
        })
    };
    let stats = prepared.run().unwrap();
    let ticket = poster.join().unwrap();
    assert_eq!(stats.tempo_bpm, 90.0);
    let reply = std::iter::from_fn(|| replies.take())
        .find(|r| r.ticket == ticket)
        .expect("a reply to tempo");
    let Outcome::Applied { frame: f } = reply.outcome else {
        panic!("tempo refused: {:?}", reply.outcome);
    };
    assert!((30..FRAMES - 10).contains(&f), "tempo landed mid-run: {f}");

    let mut src = source_seen.lock().unwrap().clone();
    let mut sink = sink_seen.lock().unwrap().clone();
    src.sort_by_key(|s| s.0);
    sink.sort_by_key(|s| s.0);
    assert_eq!(src.len(), FRAMES as usize);
    assert_eq!(
        src, sink,
        "the source and the sink see one beat clock per frame"
    );
    for (k, &(seq, beat)) in src.iter().enumerate() {
        assert_eq!(seq, k as u64);
        let tempo = if seq < f { 120_000 } else { 90_000 };
        assert_eq!(
            beat.millibpm, tempo,
            "frame {seq}: tempo (tempo 90 from {f})"
        );
        if seq == 0 {
            assert_eq!(beat.nanobeats, 0);
            continue;
        }
        let step = beat.nanobeats - src[k - 1].1.nanobeats;
        // 1/15 beat (120 bpm at 30 fps) or 1/20 beat (90 bpm), to the nanobeat (frame
        // times are whole nanoseconds).
        let want = if seq < f {
            BeatCtx::ONE / 15
        } else {
            BeatCtx::ONE / 20
        };
        assert!(
            (step - want).abs() <= 2,
            "frame {seq}: {step} nanobeats since the frame before, want {want} (tempo 90 \
             from {f})"
        );
    }
    // Two beats per second of frame time before the change: frame 15 (half a second) is beat
    // 1, frame 30 beat 2 where the tempo had not changed yet.
    assert_eq!(src[15].1.nanobeats, BeatCtx::ONE);
    if f > 30 {
        assert_eq!(src[30].1.nanobeats, 2 * BeatCtx::ONE);
    }
}
