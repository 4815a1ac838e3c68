//! `mix` and `monitor` in the real graph engine (framepipe-runtime): two sources mixed, the mix
//! teed to the show's sink and to a `monitor` tap (leaky by default), at 1 and 2 threads. The
//! show's frames must equal the mix computed directly, frame by frame; the preview's frames
//! (the tap may skip some) must equal the downscale of the show's frame of the same number.

use std::sync::{Arc, Mutex};

use framepipe_core::{
    Element, Frame, FrameCtx, FrameMut, InlineSlices, Rational, Registry, Result, Sink, Source,
    VideoInfo,
};
use framepipe_effects::mix::{Mix, MixSettings};
use framepipe_effects::monitor::Monitor;
use framepipe_runtime::{EffectStage, Graph, MixerStage, Node, NodeKind, OnEnd, Options};

// 1024x512: a 2-input mix is 6.3 MB of traffic, 3 slices on 2 workers.
const W: u32 = 1024;
const H: u32 = 512;
const N: u64 = 12;

/// Pseudo-random pixels, a function of (seed, frame number), alpha included.
fn picture(seed: u32, seq: u64, out: &mut [u8]) {
    let mut x = (seed ^ (seq as u32).wrapping_mul(0x9e37_79b9)).max(1);
    for b in out {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = (x >> 9) as u8;
    }
}

struct Noise {
    seed: u32,
    next: u64,
}
impl Source for Noise {
    fn info(&self) -> VideoInfo {
        VideoInfo {
            width: W,
            height: H,
            rate: Rational::new(30, 1),
        }
    }
    fn len_hint(&self) -> Option<u64> {
        Some(N)
    }
    fn fill(&mut self, _ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        if self.next >= N {
            return Ok(false);
        }
        picture(self.seed, self.next, frame.data_mut());
        self.next += 1;
        Ok(true)
    }
}

/// (frame number, bytes) of each frame a sink got.
type Kept = Vec<(u64, Vec<u8>)>;

/// Keeps (frame number, bytes) of every frame it gets.
#[derive(Clone, Default)]
struct Keep(Arc<Mutex<Kept>>);
impl Sink for Keep {
    fn start(&mut self, _info: VideoInfo) -> Result<()> {
        Ok(())
    }
    fn consume(&mut self, ctx: &FrameCtx, frame: &Frame) -> Result<()> {
        self.0
            .lock()
            .unwrap()
            .push((ctx.seq, frame.data().to_vec()));
        Ok(())
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

fn build(registry: &Registry, name: &str, props: &[(&str, &str)]) -> Element {
    let given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    registry.create(name, &given).unwrap()
}

#[test]
fn mix_and_a_monitor_tap_in_the_graph_engine_match_the_direct_computation() {
    let mut registry = Registry::new();
    framepipe_effects::register(&mut registry);
    for (props, settings) in [
        (
            vec![("mode", "crossfade"), ("fader", "0.3")],
            MixSettings {
                mode: framepipe_effects::mix::MixMode::Crossfade,
                fader: 0.3,
                ..Default::default()
            },
        ),
        (vec![("blend-1", "overlay"), ("opacity-1", "0.6")], {
            let mut s = MixSettings::default();
            s.blend[1] = framepipe_effects::mix::Blend::Overlay;
            s.opacity[1] = 0.6;
            s
        }),
    ] {
        // The reference: each frame mixed and shrunk directly, one after another.
        let mut monitor = Monitor::new(W, H, 160, 80);
        let reference: Vec<(Vec<u8>, Vec<u8>)> = (0..N)
            .map(|seq| {
                let bytes = (W * H * 4) as usize;
                let (mut a, mut b) = (vec![0; bytes], vec![0; bytes]);
                picture(1, seq, &mut a);
                picture(2, seq, &mut b);
                let mut out = vec![0; bytes];
                Mix::run(
                    &settings,
                    &[&a, &b],
                    &mut out,
                    W as usize * 4,
                    &InlineSlices,
                );
                let mut small = vec![0; 160 * 80 * 4];
                monitor.resize(&out, &mut small);
                (out, small)
            })
            .collect();
        for threads in [1, 2] {
            let Element::Mixer(mix) = build(&registry, "mix", &props) else {
                panic!("mix is not a mixer")
            };
            let Element::Effect(tap) =
                build(&registry, "monitor", &[("width", "160"), ("height", "80")])
            else {
                panic!("monitor is not an effect")
            };
            let mut mix = MixerStage::new(mix, framepipe_core::Mode::Parallel);
            mix.inputs = (2, 8);
            let (show, preview) = (Keep::default(), Keep::default());
            let sink = |name: &str, k: &Keep, input| {
                Node::new(
                    name,
                    NodeKind::Sink {
                        sink: Box::new(k.clone()),
                        master: false,
                    },
                    vec![input],
                )
            };
            let source = |name: &str, seed| {
                Node::new(
                    name,
                    NodeKind::Source {
                        source: Box::new(Noise { seed, next: 0 }),
                        on_end: OnEnd::Stop,
                    },
                    vec![],
                )
            };
            let stats = Graph::new(vec![
                source("a", 1),
                source("b", 2),
                Node::new("mix", NodeKind::Mixer(mix), vec![0, 1]),
                Node::new("t", NodeKind::Tee, vec![2]),
                sink("show", &show, 3),
                Node::new(
                    "tap",
                    NodeKind::Effect(EffectStage::new(tap, framepipe_core::Mode::Parallel)),
                    vec![3],
                ),
                sink("preview", &preview, 5),
            ])
            .unwrap()
            .prepare(Options {
                threads,
                ..Options::default()
            })
            .unwrap()
            .run()
            .unwrap();
            let show = show.0.lock().unwrap();
            assert_eq!(show.len() as u64, N, "threads={threads}: {stats:?}");
            for (i, (seq, bytes)) in show.iter().enumerate() {
                assert_eq!(*seq, i as u64);
                assert!(
                    *bytes == reference[i].0,
                    "{props:?} threads={threads} frame {i}"
                );
            }
            let preview = preview.0.lock().unwrap();
            assert!(!preview.is_empty(), "the tap showed nothing");
            for (seq, bytes) in preview.iter() {
                assert!(
                    *bytes == reference[*seq as usize].1,
                    "{props:?} threads={threads} preview of frame {seq}"
                );
            }
        }
    }
}
