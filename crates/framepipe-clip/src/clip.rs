//! `clip`: one clip file played in the process, looping without a seam, at any speed, either
//! way, scrubbed and paused live.

use framepipe_core::{
    BeatCtx, Element, ElementDesc, ElementKind, Error, FrameCtx, FrameMut, Limits, Mode, PathUse,
    PropKind, PropSpec, PropValue, Props, Rational, Result, Source, VideoInfo,
};

use crate::cursor::{speed_fixed, Cursor, Span, ONE};
use crate::decode::{ClipFile, ClipInfo};
use crate::error::ClipError;
use crate::player::{Player, Sizing};

/// Element name.
pub const NAME: &str = "clip";
/// Pictures decoded ahead by default.
pub const DEFAULT_AHEAD: i64 = 8;
/// Pictures in the decoder's cache by default (the reverse window is one less).
pub const DEFAULT_CACHE: i64 = 16;

/// The properties every clip player shares (`clip` and `clips`).
pub fn play_props() -> Vec<PropSpec> {
    vec![
        PropSpec::new(
            "loop",
            PropKind::Bool,
            PropValue::Bool(false),
            "loop by itself, without a seam (on-end=loop does the same)",
        )
        .fixed(),
        PropSpec::new(
            "loops",
            PropKind::Int {
                min: 0,
                max: i64::MAX,
            },
            PropValue::Int(0),
            "with loop=true: stop after this many plays; 0 = endless",
        )
        .fixed(),
        PropSpec::new(
            "ping-pong",
            PropKind::Bool,
            PropValue::Bool(false),
            "play forward then backward (each turn shows its end frame once)",
        )
        .fixed(),
        PropSpec::new(
            "in",
            PropKind::Str,
            PropValue::Str("0".into()),
            "first frame played: a frame number (12) or seconds (1.5s)",
        )
        .fixed(),
        PropSpec::new(
            "out",
            PropKind::Str,
            PropValue::Str(String::new()),
            "frame after the last played: a frame number or seconds; empty = the end",
        )
        .fixed(),
        PropSpec::new(
            "speed",
            PropKind::Float {
                min: -64.0,
                max: 64.0,
            },
            PropValue::Float(1.0),
            "clip frames per output frame; negative plays backwards (live)",
        ),
        PropSpec::new(
            "position",
            PropKind::Float { min: 0.0, max: 1.0 },
            PropValue::Float(0.0),
            "where the head is, 0 = in point, 1 = last frame; setting it scrubs (live)",
        ),
        PropSpec::new(
            "pause",
            PropKind::Bool,
            PropValue::Bool(false),
            "hold the current frame (live)",
        ),
        PropSpec::new(
            "beats",
            PropKind::Int { min: 0, max: 1024 },
            PropValue::Int(0),
            "one loop (in..out) lasts this many beats of the show's beat clock, the speed \
             stretched or squeezed to fit and following the tempo; 0 = off (live)",
        ),
        PropSpec::new(
            "ahead",
            PropKind::Int { min: 1, max: 256 },
            PropValue::Int(DEFAULT_AHEAD),
            "pictures decoded ahead of the show",
        )
        .fixed(),
        PropSpec::new(
            "cache",
            PropKind::Int { min: 2, max: 1024 },
            PropValue::Int(DEFAULT_CACHE),
            "decoded pictures kept (reverse play decodes windows of cache-1 frames)",
        )
        .fixed(),
        PropSpec::new(
            "threads",
            PropKind::Int { min: 0, max: 64 },
            PropValue::Int(0),
            "decoder threads; 0 = as many as the machine has",
        )
        .fixed(),
    ]
}

/// The registry description of `clip`.
pub fn desc() -> ElementDesc {
    let mut props = vec![PropSpec::new(
        "location",
        PropKind::Str,
        PropValue::Str(String::new()),
        "the clip file (any format and codec FFmpeg decodes: H.264, HAP, ProRes...)",
    )
    .path(PathUse::File)
    .fixed()];
    props.extend(play_props());
    ElementDesc {
        name: NAME.into(),
        kind: ElementKind::Source,
        description: "Plays a clip decoded in the process: seamless loops, speed, reverse, scrub"
            .into(),
        props,
        default_mode: Mode::Serial,
        details: vec![(
            "library".into(),
            "FFmpeg (libavformat, libavcodec, libswscale)".into(),
        )],
    }
}

/// How a clip plays, from its properties.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlaySettings {
    /// Loops by itself.
    pub looping: bool,
    /// Plays before the end when looping (0: endless).
    pub loops: u64,
    /// Forward then backward.
    pub ping_pong: bool,
    /// Fixed-point speed.
    pub speed: i64,
    /// Start position 0..1, when given.
    pub position: f64,
    /// Paused at start.
    pub pause: bool,
    /// One loop lasts this many beats (0: `speed` alone).
    pub beats: u32,
    /// Queue and cache.
    pub sizing: Sizing,
    /// Decoder threads.
    pub threads: usize,
}

impl PlaySettings {
    /// Settings from resolved properties.
    pub fn from_props(props: &Props) -> Self {
        PlaySettings {
            looping: props.bool("loop"),
            loops: props.i64("loops").max(0) as u64,
            ping_pong: props.bool("ping-pong"),
            speed: speed_fixed(props.f64("speed")),
            position: props.f64("position"),
            pause: props.bool("pause"),
            beats: props.i64("beats").clamp(0, 1024) as u32,
            sizing: Sizing {
                depth: props.i64("ahead").max(1) as usize,
                cache: props.i64("cache").max(2) as usize,
            },
            threads: props.i64("threads").max(0) as usize,
        }
    }
}

/// Which of the live properties every clip player shares a set changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    /// `speed`: the player moves on at the new speed from the frame after the one shown.
    Speed,
    /// `position`: the player seeks (scrubs).
    Position,
    /// `pause` or `beats`: read on each frame.
    Other,
}

impl PlaySettings {
    /// The value in force of a live property every clip player shares (`speed`, `position`,
    /// `pause`, `beats`); `None` for the others.
    pub fn live_value(&self, name: &str) -> Option<PropValue> {
        Some(match name {
            "speed" => PropValue::Float(self.speed as f64 / ONE as f64),
            "position" => PropValue::Float(self.position),
            "pause" => PropValue::Bool(self.pause),
            "beats" => PropValue::Int(i64::from(self.beats)),
            _ => return None,
        })
    }

    /// Takes a live set of a shared property; which one changed (`None`: not a shared live
    /// property, or a value of the wrong kind).
    pub fn set_live(&mut self, name: &str, value: &PropValue) -> Option<Changed> {
        match (name, value) {
            ("speed", v) => {
                self.speed = speed_fixed(v.as_f64()?);
                Some(Changed::Speed)
            }
            ("position", v) => {
                self.position = v.as_f64()?;
                Some(Changed::Position)
            }
            ("pause", PropValue::Bool(b)) => {
                self.pause = *b;
                Some(Changed::Other)
            }
            ("beats", PropValue::Int(n)) => {
                self.beats = (*n).clamp(0, 1024) as u32;
                Some(Changed::Other)
            }
            _ => None,
        }
    }

    /// The speed (fixed point) to play a loop of `period` frames at, at frame `beat` of a show
    /// at `rate`: `speed`, or with `beats` and a running beat clock, the speed of `speed`'s
    /// sign (forward for 0) at which one loop lasts `beats` beats at the tempo in force:
    /// `period × tempo / (beats × 60 × fps)` clip frames per output frame.
    pub fn play_speed(&self, beat: &BeatCtx, period: u64, rate: Rational) -> i64 {
        if self.beats == 0 || !beat.is_running() || rate.num == 0 {
            return self.speed;
        }
        let num =
            i128::from(period) * i128::from(ONE) * i128::from(beat.millibpm) * i128::from(rate.den);
        let den = i128::from(self.beats) * 60_000 * i128::from(rate.num);
        let s = ((num + den / 2) / den).min(64 * i128::from(ONE)) as i64;
        if self.speed < 0 {
            -s
        } else {
            s
        }
    }
}

/// A point (`in`, `out`): a frame number, or seconds with an `s`.
pub fn parse_point(
    prop: &'static str,
    text: &str,
    rate: (u32, u32),
) -> std::result::Result<Option<u64>, ClipError> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(None);
    }
    let bad = |reason: &str| ClipError::BadValue {
        prop,
        value: text.into(),
        reason: reason.into(),
    };
    if let Some(secs) = t.strip_suffix('s') {
        let s: f64 = secs
            .trim()
            .parse()
            .map_err(|_| bad("expected seconds like 1.5s"))?;
        if !s.is_finite() || s < 0.0 {
            return Err(bad("expected a time of 0s or more"));
        }
        return Ok(Some((s * rate.0 as f64 / rate.1 as f64).round() as u64));
    }
    t.parse()
        .map(Some)
        .map_err(|_| bad("expected a frame number (12) or seconds (1.5s)"))
}

/// The frames `[first, end)` of `info` between an `in` and an `out` point (texts as the
/// properties take them; an empty or 0 `out` is the clip's end).
pub fn points(
    in_point: &str,
    out_point: &str,
    info: &ClipInfo,
) -> std::result::Result<(u64, u64), ClipError> {
    let first = parse_point("in", in_point, info.rate)?.unwrap_or(0);
    let end = parse_point("out", out_point, info.rate)?
        .filter(|&o| o > 0)
        .unwrap_or(info.frames)
        .min(info.frames);
    Ok((first, end))
}

/// The span of `info` between the `in` and `out` properties.
pub fn span_of(
    props: &Props,
    info: &ClipInfo,
    ping_pong: bool,
) -> std::result::Result<Span, ClipError> {
    let (first, end) = points(props.str("in"), props.str("out"), info)?;
    if first >= end {
        return Err(ClipError::BadValue {
            prop: "in",
            value: props.str("in").into(),
            reason: format!(
                "the in point must come before the out point ({end}; the clip has {} frames)",
                info.frames
            ),
        });
    }
    Ok(Span {
        first,
        len: end - first,
        ping_pong,
    })
}

/// Builds `clip`: opens the file, checks the budget, starts the decoder thread.
pub fn build(props: &Props) -> Result<Element> {
    let location = props.str("location");
    if location.is_empty() {
        return Err(Error::element(
            NAME,
            "location= is required: the clip file to play",
        ));
    }
    let settings = PlaySettings::from_props(props);
    let file = ClipFile::open(location, settings.threads).map_err(|e| Error::element(NAME, e))?;
    let info = file.info().clone();
    Limits::current().check_frame(NAME, info.width, info.height)?;
    let frame = u64::from(info.width) * u64::from(info.height) * 4;
    Limits::current().check_total(
        &format!(
            "{NAME} '{location}': {} pictures decoded ahead and cached",
            settings.sizing.depth + 1 + settings.sizing.cache
        ),
        settings.sizing.bytes(frame),
    )?;
    let span = span_of(props, &info, settings.ping_pong).map_err(|e| Error::element(NAME, e))?;
    Ok(Element::Source(Box::new(Clip::start(
        file, span, settings,
    )?)))
}

/// The refusal of a set of a fixed property of `element`.
pub(crate) fn not_live(element: &str, name: &str) -> Error {
    Error::Pipeline(format!(
        "property '{name}' of {element} cannot be changed while running"
    ))
}

/// The `clip` source.
#[derive(Debug)]
pub struct Clip {
    info: VideoInfo,
    player: Player,
    settings: PlaySettings,
    /// The speed the player plays at: `speed`, or the one `beats` asks for.
    speed: i64,
    /// A new position was set while paused: show its frame once.
    scrubbed: bool,
    hint: Option<u64>,
    /// Plays finished.
    plays: u64,
}

impl Clip {
    /// Starts playing `file`'s `span`.
    pub fn start(file: ClipFile, span: Span, settings: PlaySettings) -> Result<Self> {
        let ci = file.info().clone();
        let u = if settings.position > 0.0 {
            span.head_at(settings.position)
        } else {
            span.start(settings.speed)
        };
        let cursor = Cursor::new(&span, u, settings.speed);
        let once = span.frames_until_wrap(u, settings.speed);
        let hint = match (settings.looping, settings.loops) {
            (false, _) => once,
            (true, 0) => None,
            // The first play from `u`, the others whole.
            (true, n) => span
                .frames_until_wrap(span.start(settings.speed), settings.speed)
                .zip(once)
                .map(|(whole, first)| first + whole * (n - 1)),
        };
        let player = Player::start(file, span, cursor, settings.sizing)
            .map_err(|e| Error::element(NAME, e))?;
        Ok(Clip {
            info: VideoInfo {
                width: ci.width,
                height: ci.height,
                rate: Rational::new(ci.rate.0, ci.rate.1),
            },
            player,
            speed: settings.speed,
            settings,
            scrubbed: false,
            // A loop locked to beats lasts what the tempo says.
            hint: hint.filter(|_| settings.beats == 0),
            plays: 0,
        })
    }
}

impl Source for Clip {
    fn info(&self) -> VideoInfo {
        self.info
    }

    fn len_hint(&self) -> Option<u64> {
        self.hint
    }

    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        if self.settings.pause && !self.scrubbed && self.player.repeat(frame.data_mut()) {
            return Ok(true);
        }
        self.scrubbed = false;
        let speed =
            self.settings
                .play_speed(&ctx.beat, self.player.span().period(), self.info.rate);
        if speed != self.speed {
            self.speed = speed;
            self.player.set_speed(speed);
        }
        loop {
            if self
                .player
                .next(frame.data_mut())
                .map_err(|e| Error::element(NAME, e))?
            {
                return Ok(true);
            }
            // The next frame begins a new play.
            self.plays += 1;
            let more = self.settings.looping
                && (self.settings.loops == 0 || self.plays < self.settings.loops);
            if !more {
                return Ok(false);
            }
        }
    }

    fn rewind(&mut self) -> Result<bool> {
        // The next loop's first picture is held by the player, decoded already.
        Ok(true)
    }

    /// `fill` waits for the decoder thread when it is behind (a seek, a reverse window of a
    /// long-GOP clip, a slow disk): a wait that depends on the file, not on the machine's
    /// speed alone, so the source runs on the show's IO thread, never on a compute worker.
    fn blocks(&self) -> bool {
        true
    }

    /// The decoder's pictures: `ahead + 1 + cache`.
    fn own_bytes(&self) -> u64 {
        let frame = u64::from(self.info.width) * u64::from(self.info.height) * 4;
        self.settings.sizing.bytes(frame)
    }

    fn ready(&mut self) -> Result<()> {
        self.player
            .wait_ahead(self.settings.sizing.depth)
            .map_err(|e| Error::element(NAME, e))
    }

    fn live_props(&self) -> Vec<(PropSpec, PropValue)> {
        desc()
            .props
            .into_iter()
            .map(|spec| {
                let v = self
                    .settings
                    .live_value(&spec.name)
                    .unwrap_or_else(|| spec.default.clone());
                (spec, v)
            })
            .collect()
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        match self.settings.set_live(name, value) {
            Some(Changed::Speed) => {
                // With `beats` the speed's sign alone counts: the next frame sets the speed.
                if self.settings.beats == 0 {
                    self.speed = self.settings.speed;
                    self.player.set_speed(self.speed);
                }
            }
            Some(Changed::Position) => {
                self.player.seek(self.settings.position, self.speed);
                self.scrubbed = true;
            }
            Some(Changed::Other) => {}
            None => return Err(not_live(NAME, name)),
        }
        Ok(())
    }
}
