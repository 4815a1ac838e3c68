//! The native `mix` element on real frames from a `FramePool`, built through the registry,
//! checked against a plain scalar reference of the maths in `mix.rs`'s docs.

use std::cell::Cell;

use framepipe_core::{
    Element, ElementKind, Frame, FrameCtx, FramePool, InlineSlices, Mixer, MixerFactory, Mode,
    PropValue, Rational, Registry, SliceRunner, VideoInfo,
};

const BLENDS: [&str; 8] = [
    "normal",
    "add",
    "multiply",
    "screen",
    "overlay",
    "difference",
    "lighten",
    "darken",
];

// ---- the scalar reference: one pixel at a time, plain u32 maths, the mode matched per pixel.

/// `x / 255` rounded to nearest (never a tie: 255 is odd).
fn rdiv(x: u32) -> u32 {
    (x + 127) / 255
}

fn w8(v: f64) -> u32 {
    (v * 255.0).round() as u32
}

fn blend_ref(mode: &str, b: u32, s: u32) -> u32 {
    match mode {
        "normal" => s,
        "add" => (b + s).min(255),
        "multiply" => rdiv(b * s),
        "screen" => 255 - rdiv((255 - b) * (255 - s)),
        "overlay" => {
            if b < 128 {
                rdiv(2 * b * s)
            } else {
                255 - rdiv(2 * (255 - b) * (255 - s))
            }
        }
        "difference" => b.abs_diff(s),
        "lighten" => b.max(s),
        "darken" => b.min(s),
        _ => unreachable!("{mode}"),
    }
}

/// Layers: `blends[k]` and `opacities[k]` for k >= 1 (index 0 unused).
fn layers_ref(inputs: &[&[u8]], blends: &[&str], opacities: &[f64]) -> Vec<u8> {
    let mut out = inputs[0].to_vec();
    for (k, src) in inputs.iter().enumerate().skip(1) {
        let op = w8(opacities[k]);
        for (d, s) in out.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
            let w = rdiv(s[3] as u32 * op);
            for c in 0..4 {
                let b = d[c] as u32;
                let f = if c == 3 {
                    255
                } else {
                    blend_ref(blends[k], b, s[c] as u32)
                };
                d[c] = rdiv(b * (255 - w) + f * w) as u8;
            }
        }
    }
    out
}

fn crossfade_ref(a: &[u8], b: &[u8], fader: f64) -> Vec<u8> {
    let f = w8(fader);
    a.iter()
        .zip(b)
        .map(|(&a, &b)| rdiv(a as u32 * (255 - f) + b as u32 * f) as u8)
        .collect()
}

// ---- helpers

fn info(w: u32, h: u32) -> VideoInfo {
    VideoInfo {
        width: w,
        height: h,
        rate: Rational::new(25, 1),
    }
}

fn factory(props: &[(&str, String)]) -> framepipe_core::Result<Box<dyn MixerFactory>> {
    let mut r = Registry::new();
    framepipe_effects::register(&mut r);
    let given: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    match r.create("mix", &given)? {
        Element::Mixer(f) => Ok(f),
        other => panic!("mix is not a mixer: {other:?}"),
    }
}

/// Builds `mix` with `props` for `n` inputs of `w` x `h`.
fn mixer(props: &[(&str, String)], n: usize, w: u32, h: u32) -> Box<dyn Mixer> {
    let mut f = factory(props).unwrap();
    let out = f.negotiate(&vec![info(w, h); n]).unwrap();
    assert_eq!((out.width, out.height), (w, h));
    f.instantiate().unwrap()
}

/// A frame of pseudo-random bytes (alpha included, so layers are partly transparent).
fn random_frame(pool: &FramePool, seed: u32) -> Frame {
    let mut f = pool.acquire().unwrap();
    let mut x = seed.wrapping_mul(2654435761).max(1);
    for b in f.data_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = (x >> 7) as u8;
    }
    f.freeze()
}

fn run(m: &mut dyn Mixer, inputs: &[Frame], pool: &FramePool, slices: &dyn SliceRunner) -> Vec<u8> {
    let refs: Vec<&Frame> = inputs.iter().collect();
    let mut out = pool.acquire().unwrap();
    m.process(&FrameCtx::new(0, 0), &refs, &mut out, slices)
        .unwrap();
    out.data().to_vec()
}

/// Runs the slices one after another in reverse order, counting them: a slice that read or
/// wrote outside its rows would change the result.
#[derive(Default)]
struct Reverse {
    workers: usize,
    slices: Cell<usize>,
}
impl SliceRunner for Reverse {
    fn workers(&self) -> usize {
        self.workers
    }
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        self.slices.set(self.slices.get() + n);
        (0..n).rev().for_each(job);
    }
}

// ---- tests

#[test]
fn mix_registers_as_a_parallel_mixer_of_2_to_8_inputs() {
    let mut r = Registry::new();
    framepipe_effects::register(&mut r);
    let d = &r.lookup("mix").unwrap().desc;
    assert_eq!(
        d.kind,
        ElementKind::Mixer {
            min_inputs: 2,
            max_inputs: 8
        }
    );
    assert_eq!(d.default_mode, Mode::Parallel);
    let f = factory(&[]).unwrap();
    assert_eq!(f.default_mode(), Mode::Parallel);
    assert!(f.needs_equal_sizes());
    for k in 1..8 {
        assert!(d.props.iter().any(|p| p.name == format!("blend-{k}")));
        assert!(d.props.iter().any(|p| p.name == format!("opacity-{k}")));
    }
    assert!(!d.props.iter().any(|p| p.name == "opacity-0"));
}

#[test]
fn every_blend_mode_equals_the_scalar_reference() {
    // 67 pixels a row: a block of 64 and a tail of 3, so the block tail is covered.
    let (w, h) = (67, 23);
    let pool = FramePool::new(w, h, 12);
    let inputs: Vec<Frame> = (0..3).map(|i| random_frame(&pool, 11 + i)).collect();
    let data: Vec<&[u8]> = inputs.iter().map(|f| f.data()).collect();
    for (i, top) in BLENDS.iter().enumerate() {
        // Input 1 in this mode, input 2 in another, at opacities that are not 0 or 1.
        let under = BLENDS[(i + 3) % 8];
        for (o1, o2) in [(1.0, 1.0), (0.37, 0.81)] {
            let props = [
                ("blend-1", under.to_string()),
                ("blend-2", top.to_string()),
                ("opacity-1", o1.to_string()),
                ("opacity-2", o2.to_string()),
            ];
            let mut m = mixer(&props, 3, w, h);
            let got = run(m.as_mut(), &inputs, &pool, &InlineSlices);
            let want = layers_ref(&data, &["", under, top], &[0.0, o1, o2]);
            assert!(
                got == want,
                "blend-2={top} over blend-1={under} (opacities {o1}, {o2}): first difference at byte {:?}",
                got.iter().zip(&want).position(|(a, b)| a != b)
            );
        }
    }
}

#[test]
fn eight_inputs_in_every_mode_equal_the_scalar_reference() {
    let (w, h) = (130, 17);
    let pool = FramePool::new(w, h, 12);
    let inputs: Vec<Frame> = (0..8).map(|i| random_frame(&pool, 100 + i)).collect();
    let data: Vec<&[u8]> = inputs.iter().map(|f| f.data()).collect();
    let mut blends = vec![""];
    let mut opacities = vec![0.0];
    let mut props = Vec::new();
    for k in 1..8 {
        let b = BLENDS[k];
        let o = [0.9, 0.25, 1.0, 0.5, 0.66, 0.1, 0.75][k - 1];
        blends.push(b);
        opacities.push(o);
        props.push((
            [
                "blend-1", "blend-2", "blend-3", "blend-4", "blend-5", "blend-6", "blend-7",
            ][k - 1],
            b.to_string(),
        ));
        props.push((
            [
                "opacity-1",
                "opacity-2",
                "opacity-3",
                "opacity-4",
                "opacity-5",
                "opacity-6",
                "opacity-7",
            ][k - 1],
            o.to_string(),
        ));
    }
    let mut m = mixer(&props, 8, w, h);
    let got = run(m.as_mut(), &inputs, &pool, &InlineSlices);
    assert!(got == layers_ref(&data, &blends, &opacities));
}

#[test]
fn crossfade_equals_the_reference_and_its_ends_are_the_inputs_exactly() {
    let (w, h) = (99, 31);
    let pool = FramePool::new(w, h, 8);
    let inputs: Vec<Frame> = (0..3).map(|i| random_frame(&pool, 7 + i)).collect();
    let (a, b) = (inputs[0].data(), inputs[1].data());
    for fader in [0.0, 1.0, 0.5, 0.3, 0.999] {
        let props = [
            ("mode", "crossfade".to_string()),
            ("fader", fader.to_string()),
        ];
        // Three inputs: the third is ignored.
        let mut m = mixer(&props, 3, w, h);
        let got = run(m.as_mut(), &inputs, &pool, &InlineSlices);
        assert!(got == crossfade_ref(a, b, fader), "fader={fader}");
        if fader == 0.0 {
            assert!(got == a, "fader=0 is not input 0");
        }
        if fader == 1.0 {
            assert!(got == b, "fader=1 is not input 1");
        }
    }
}

#[test]
fn opacity_zero_leaves_the_base_unchanged() {
    let (w, h) = (64, 16);
    let pool = FramePool::new(w, h, 8);
    let inputs: Vec<Frame> = (0..4).map(|i| random_frame(&pool, 40 + i)).collect();
    for blend in BLENDS {
        let props = [
            ("blend-1", blend.to_string()),
            ("blend-2", blend.to_string()),
            ("blend-3", blend.to_string()),
            ("opacity-1", "0".to_string()),
            ("opacity-2", "0".to_string()),
            ("opacity-3", "0".to_string()),
        ];
        let mut m = mixer(&props, 4, w, h);
        let got = run(m.as_mut(), &inputs, &pool, &InlineSlices);
        assert!(got == inputs[0].data(), "blend={blend}");
    }
}

#[test]
fn an_opaque_normal_layer_at_full_opacity_replaces_the_base() {
    let (w, h) = (20, 10);
    let pool = FramePool::new(w, h, 4);
    let base = random_frame(&pool, 1);
    let mut top = pool.acquire().unwrap();
    top.data_mut()
        .copy_from_slice(random_frame(&pool, 2).data());
    for px in top.data_mut().chunks_exact_mut(4) {
        px[3] = 255;
    }
    let top = top.freeze();
    let want: Vec<u8> = top.data().to_vec();
    let mut m = mixer(&[], 2, w, h);
    let got = run(m.as_mut(), &[base, top], &pool, &InlineSlices);
    // The alpha of the result is "over": 255 where the layer is opaque.
    assert!(got == want);
}

#[test]
fn sliced_output_equals_inline_output() {
    // 1024x600: 2.4 MB of output; with 3 inputs 9.8 MB of traffic: 4 slices by the work
    // (16 at most for 4 workers).
    let (w, h) = (1024, 600);
    let pool = FramePool::new(w, h, 6);
    let inputs: Vec<Frame> = (0..3).map(|i| random_frame(&pool, 70 + i)).collect();
    for props in [
        vec![
            ("blend-1", "overlay".to_string()),
            ("opacity-1", "0.6".to_string()),
            ("blend-2", "screen".to_string()),
        ],
        vec![("mode", "crossfade".to_string()), ("fader", "0.2".into())],
    ] {
        let mut m = mixer(&props, 3, w, h);
        let inline = run(m.as_mut(), &inputs, &pool, &InlineSlices);
        let reverse = Reverse {
            workers: 4,
            ..Default::default()
        };
        let sliced = run(m.as_mut(), &inputs, &pool, &reverse);
        assert!(reverse.slices.get() > 1, "{props:?}: not sliced");
        assert!(sliced == inline, "{props:?}");
    }
    // A small frame is not worth a hand-off: it runs inline, the runner is not called.
    let pool = FramePool::new(64, 48, 4);
    let inputs: Vec<Frame> = (0..2).map(|i| random_frame(&pool, i)).collect();
    let reverse = Reverse {
        workers: 4,
        ..Default::default()
    };
    run(mixer(&[], 2, 64, 48).as_mut(), &inputs, &pool, &reverse);
    assert_eq!(reverse.slices.get(), 0);
}

#[test]
fn live_changes_apply_from_the_next_frame() {
    let (w, h) = (33, 9);
    let pool = FramePool::new(w, h, 8);
    let inputs: Vec<Frame> = (0..2).map(|i| random_frame(&pool, 5 + i)).collect();
    let (a, b) = (inputs[0].data(), inputs[1].data());
    let mut m = mixer(&[], 2, w, h);
    m.set_property("mode", &PropValue::Str("crossfade".into()))
        .unwrap();
    m.set_property("fader", &PropValue::Float(0.25)).unwrap();
    assert!(run(m.as_mut(), &inputs, &pool, &InlineSlices) == crossfade_ref(a, b, 0.25));
    m.set_property("mode", &PropValue::Str("layers".into()))
        .unwrap();
    m.set_property("blend-1", &PropValue::Str("difference".into()))
        .unwrap();
    m.set_property("opacity-1", &PropValue::Float(0.5)).unwrap();
    let want = layers_ref(&[a, b], &["", "difference"], &[0.0, 0.5]);
    assert!(run(m.as_mut(), &inputs, &pool, &InlineSlices) == want);
}

#[test]
fn property_errors_name_the_value() {
    let err = |props: &[(&str, String)]| factory(props).err().unwrap().to_string();
    let e = err(&[("opacity-3", "1.5".into())]);
    assert!(e.contains("'1.5'") && e.contains("opacity-3"), "{e}");
    let e = err(&[("blend-2", "burn".into())]);
    assert!(e.contains("'burn'") && e.contains("blend-2"), "{e}");
    let e = err(&[("opacity-0", "1".into())]);
    assert!(e.contains("'opacity-0'"), "{e}");
    let e = err(&[("blend-8", "add".into())]);
    assert!(e.contains("'blend-8'"), "{e}");

    let mut m = mixer(&[], 2, 8, 8);
    let live = |m: &mut Box<dyn Mixer>, name: &str, v: PropValue| {
        m.set_property(name, &v).unwrap_err().to_string()
    };
    let e = live(&mut m, "fader", PropValue::Float(1.25));
    assert_eq!(
        e,
        "mix: bad value '1.25' for live property 'fader': expected a number in [0, 1]"
    );
    let e = live(&mut m, "opacity-7", PropValue::Float(f64::NAN));
    assert!(e.contains("'NaN'") && e.contains("opacity-7"), "{e}");
    let e = live(&mut m, "blend-4", PropValue::Str("burn".into()));
    assert!(
        e.contains("'burn'") && e.contains("blend-4") && e.contains("darken"),
        "{e}"
    );
    let e = live(&mut m, "mode", PropValue::Str("wipe".into()));
    assert!(e.contains("'wipe'") && e.contains("crossfade"), "{e}");
    let e = live(&mut m, "blend-8", PropValue::Str("add".into()));
    assert!(
        e.contains("'blend-8'") && e.contains("blend-1..blend-7"),
        "{e}"
    );
    assert!(!e.contains('\n'));
}

#[test]
fn negotiate_names_the_input_of_another_size_and_the_input_count() {
    let mut f = factory(&[]).unwrap();
    let e = f
        .negotiate(&[info(64, 48), info(64, 48), info(32, 48)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "mix: bad frame size 32x48: input 2 is not the size of input 0 (64x48); scale it first"
    );
    let e = f.negotiate(&[info(64, 48)]).unwrap_err().to_string();
    assert_eq!(e, "mix: 1 inputs; expected 2 to 8");
    let e = f.negotiate(&[info(8, 8); 9]).unwrap_err().to_string();
    assert_eq!(e, "mix: 9 inputs; expected 2 to 8");
    // A frame of another size at process time is refused too, naming it.
    let mut m = mixer(&[], 2, 16, 16);
    let pool = FramePool::new(16, 16, 2);
    let other = FramePool::new(16, 8, 1);
    let frames = [random_frame(&pool, 1), random_frame(&other, 2)];
    let refs: Vec<&Frame> = frames.iter().collect();
    let mut out = pool.acquire().unwrap();
    let e = m
        .process(&FrameCtx::new(0, 0), &refs, &mut out, &InlineSlices)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "mix: bad frame size 16x8: input 1 is not the negotiated 16x16"
    );
}
