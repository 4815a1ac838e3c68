//! `clips`: a deck, a bank of clips with one playing at a time, triggered live by its `clip`
//! property (`set deck.clip 2` from stdin, OSC, MIDI or the web page) at a frame boundary.
//!
//! The head of every clip (its first `ahead` frames from its in point) is decoded when the
//! deck is built and kept, so that a trigger shows the new clip's first frame on the very
//! frame it is assigned to, with no decoding: the deck gives the head from memory while its
//! decoder thread goes on from the frame after it. The heads are sized within the memory
//! budget (fewer frames each when the bank is large; none at all only when even one frame a
//! clip does not fit, and then a trigger waits for its first frame to be decoded).
//!
//! Every clip is given at the deck's size (the first playable clip's, or `width`/`height`),
//! scaled as the `ffmpeg` tool scales (bicubic), frame by frame at the deck's rate. A clip
//! that cannot be opened or decoded is named on stderr when the deck is built and skipped: its
//! place in the bank stays (clip numbers are places in the list), and triggering it (or a
//! place past the end) leaves the clip playing as it is: a refusal would make the runtime
//! refuse every later trigger. A clip that fails mid-play is named on stderr by the decoder
//! thread, dropped, and the deck goes on with the next clip.

use framepipe_core::{
    BeatCtx, Element, ElementDesc, ElementKind, Error, FrameCtx, FrameMut, Limits, Mode, PathUse,
    PropKind, PropSpec, PropValue, Props, Rational, Result, Source, VideoInfo,
};

use crate::clip::{not_live, play_props, points, Changed, PlaySettings};
use crate::cursor::{speed_fixed, Cursor, Span, ONE};
use crate::decode::ClipFile;
use crate::error::ClipError;
use crate::player::{Place, Player};

/// Element name.
pub const NAME: &str = "clips";
/// Extensions of the files a `folder` bank takes.
pub const VIDEO_EXTENSIONS: [&str; 12] = [
    "mp4", "mov", "mkv", "avi", "webm", "m4v", "mxf", "nut", "mpg", "mpeg", "ts", "y4m",
];

/// What a trigger does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The clip starts at its in point (from its head, decoded ahead).
    Restart,
    /// The clip goes on where it was left (a seek: its first frame is decoded then).
    Resume,
}

impl Trigger {
    /// The property words.
    pub const NAMES: [&'static str; 2] = ["restart", "resume"];

    fn parse(s: &str) -> Self {
        if s == "resume" {
            Trigger::Resume
        } else {
            Trigger::Restart
        }
    }
}

/// The words of `quantize`. The runtime reads the property (`Live::quantum`): it holds the
/// deck's sets until the grid and answers them with that frame.
pub const QUANTIZE: [&str; 3] = ["off", "beat", "bar"];

fn quantize_index(word: &str) -> usize {
    QUANTIZE.iter().position(|q| *q == word).unwrap_or(0)
}

/// The registry description of `clips`.
pub fn desc() -> ElementDesc {
    let mut props = vec![
        PropSpec::new(
            "locations",
            PropKind::Str,
            PropValue::Str(String::new()),
            "the bank: clip files separated by commas (a.mp4,b.mov)",
        )
        .path(PathUse::Files)
        .fixed(),
        PropSpec::new(
            "folder",
            PropKind::Str,
            PropValue::Str(String::new()),
            "the bank: every video file of this folder, by name (after locations)",
        )
        .path(PathUse::File)
        .fixed(),
        PropSpec::new(
            "clip",
            PropKind::Int { min: 0, max: 9999 },
            PropValue::Int(0),
            "the clip playing, by its place in the bank from 0; setting it triggers (live)",
        ),
        PropSpec::new(
            "trigger",
            PropKind::Enum(Trigger::NAMES.iter().map(|s| s.to_string()).collect()),
            PropValue::Str("restart".into()),
            "restart: from the in point; resume: where the clip was left (live)",
        ),
        PropSpec::new(
            "quantize",
            PropKind::Enum(QUANTIZE.iter().map(|s| s.to_string()).collect()),
            PropValue::Str("off".into()),
            "off: a trigger (and any live set of the deck) lands on the next frame; beat, bar: \
             on the first frame at or after the next beat (bar: 4 beats) of the show's beat \
             clock, the frame the reply names (live)",
        ),
        PropSpec::new(
            "clip-settings",
            PropKind::Str,
            PropValue::Str(String::new()),
            "each clip's own settings, in bank order: places separated by ';', each \
             key=value,... of name, in, out, speed (a factor), ping-pong, beats, loop (what a \
             project file's [[clip]] tables write)",
        )
        .fixed(),
        PropSpec::new(
            "width",
            PropKind::Int { min: 0, max: 16384 },
            PropValue::Int(0),
            "the deck's width; 0 = the first clip's",
        )
        .fixed(),
        PropSpec::new(
            "height",
            PropKind::Int { min: 0, max: 16384 },
            PropValue::Int(0),
            "the deck's height; 0 = the first clip's",
        )
        .fixed(),
    ];
    // A deck never ends by itself: no `loops`.
    props.extend(
        play_props()
            .into_iter()
            .filter(|p| p.name != "loops")
            .map(|p| {
                if p.name == "loop" {
                    PropSpec {
                        default: PropValue::Bool(true),
                        description:
                            "loop each clip (else hold its last frame until the next trigger)"
                                .into(),
                        ..p
                    }
                } else {
                    p
                }
            }),
    );
    ElementDesc {
        name: NAME.into(),
        kind: ElementKind::Source,
        description: "A deck: a bank of clips, one playing, triggered live at a frame boundary"
            .into(),
        props,
        default_mode: Mode::Serial,
        details: vec![(
            "library".into(),
            "FFmpeg (libavformat, libavcodec, libswscale)".into(),
        )],
    }
}

/// The bank's files: `locations`, then the video files of `folder` by name.
fn bank(props: &Props) -> Result<Vec<String>> {
    bank_of(props.str("locations"), props.str("folder"))
}

/// The bank of a deck given `locations` and `folder` (as its properties): the files of
/// `locations` (comma-separated), then the video files ([`VIDEO_EXTENSIONS`]) of `folder` by
/// name. A clip's number is its place in this list (the web page's thumbnails read it too).
pub fn bank_of(locations: &str, folder: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = locations
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    if !folder.is_empty() {
        let rd = std::fs::read_dir(folder)
            .map_err(|e| Error::element(NAME, format!("folder '{folder}': {e}")))?;
        let mut files: Vec<String> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                        VIDEO_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str())
                    })
            })
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        files.sort();
        out.extend(files);
    }
    if out.is_empty() {
        return Err(Error::element(
            NAME,
            "the bank is empty: give locations=a.mp4,b.mp4 or folder=DIR",
        ));
    }
    Ok(out)
}

/// Builds `clips`: opens every clip of the bank (naming and skipping those that fail),
/// decodes their heads within the budget, starts the decoder thread.
pub fn build(props: &Props) -> Result<Element> {
    let locations = bank(props)?;
    let settings = PlaySettings::from_props(props);
    let limits = Limits::current();
    // The deck's size: given, or the first clip that opens.
    let mut size = match (props.i64("width"), props.i64("height")) {
        (w, h) if w > 0 && h > 0 => Some((w as u32, h as u32)),
        _ => None,
    };
    let mut files = Vec::with_capacity(locations.len());
    let mut spans = Vec::with_capacity(locations.len());
    let mut heads = Vec::with_capacity(locations.len());
    let mut skipped = vec![false; locations.len()];
    let mut rate = None;
    // Set by the first clip that opens: the picture's bytes and the head's length.
    let mut sized: Option<(u64, usize)> = None;
    let own = ClipOpts::parse_all(props.str("clip-settings"), locations.len())?;
    let span_of =
        |i: usize, info: &crate::decode::ClipInfo| -> std::result::Result<Span, ClipError> {
            let o = &own[i];
            let (first, end) = points(
                o.in_point.as_deref().unwrap_or(props.str("in")),
                o.out_point.as_deref().unwrap_or(props.str("out")),
                info,
            )?;
            // An in point past a short clip's end plays its last frame.
            let first = first.min(end.saturating_sub(1));
            Ok(Span {
                first,
                len: (end - first).max(1),
                ping_pong: o.ping_pong.unwrap_or(settings.ping_pong),
            })
        };
    // One clip open at a time: opened, its head decoded, closed (its decoder's memory given
    // back); the decoder thread opens the one that plays.
    for (i, loc) in locations.iter().enumerate() {
        let mut opened = ClipFile::open_sized(loc, settings.threads, size)
            .and_then(|f| Ok((span_of(i, f.info())?, f)));
        if let Ok((_, f)) = &opened {
            if sized.is_none() {
                let info = f.info();
                limits.check_frame(NAME, info.width, info.height)?;
                size = Some((info.width, info.height));
                let frame = u64::from(info.width) * u64::from(info.height) * 4;
                limits.check_total(
                    &format!(
                        "{NAME}: {} pictures decoded ahead and cached",
                        settings.sizing.depth + 1 + settings.sizing.cache
                    ),
                    settings.sizing.bytes(frame),
                )?;
                // The heads get at most half of what the budget leaves, shared by every
                // place of the bank.
                let room = limits
                    .max_memory
                    .saturating_sub(settings.sizing.bytes(frame))
                    / 2;
                let per_clip = (room / frame.max(1) / locations.len() as u64) as usize;
                sized = Some((frame, settings.sizing.depth.min(per_clip)));
            }
        }
        let head = match (&mut opened, sized) {
            (Ok((span, f)), Some((frame, head_len))) => {
                let mut scratch = f.rgba_frame();
                let n = (head_len as u64).min(span.len) as usize;
                let mut head = vec![vec![0u8; frame as usize]; n];
                match f.decode_into(span.first, &mut head, &mut scratch) {
                    Ok(got) if got > 0 || n == 0 => {
                        head.truncate(got);
                        Ok(head)
                    }
                    Ok(_) => Err("no frame could be decoded".to_string()),
                    Err(e) => Err(e.to_string()),
                }
            }
            (Ok(_), None) => Err("no size".to_string()),
            (Err(e), _) => Err(e.to_string()),
        };
        match (opened, head) {
            (Ok((span, f)), Ok(head)) => {
                rate.get_or_insert(f.info().rate);
                files.push(Place::Closed(f.close()));
                spans.push(span);
                heads.push(head);
            }
            (_, head) => {
                let why = head.err().unwrap_or_else(|| "cannot be opened".into());
                eprintln!("framepipe: {NAME}: skipped clip {i} ('{loc}'): {why}");
                skipped[i] = true;
                files.push(Place::Gone);
                spans.push(Span {
                    first: 0,
                    len: 1,
                    ping_pong: false,
                });
                heads.push(Vec::new());
            }
        }
    }
    let (Some((width, height)), Some(rate), Some((frame, head_len))) = (size, rate, sized) else {
        return Err(Error::element(
            NAME,
            format!(
                "no clip of the bank could be opened ({} tried)",
                locations.len()
            ),
        ));
    };
    let held: u64 = heads.iter().map(|h| h.len() as u64 * frame).sum();
    eprintln!(
        "framepipe: {NAME}: {} of {} clips playable, {width}x{height}; heads of {head_len} \
         frames each ({} MiB)",
        files.iter().filter(|f| f.playable()).count(),
        locations.len(),
        held >> 20
    );
    let start = props.i64("clip").max(0) as usize;
    let Some(active) = (start..files.len())
        .chain(0..start)
        .find(|&i| files[i].playable())
    else {
        return Err(Error::element(NAME, "no clip of the bank could be decoded"));
    };
    let cursor = Cursor::new(&spans[active], 0, settings.speed);
    let quantize = quantize_index(props.str("quantize"));
    let player = Player::start_bank(
        files,
        spans,
        (width, height),
        active,
        cursor,
        settings.sizing,
    )
    .map_err(|e| Error::element(NAME, e))?;
    let mut deck = Deck {
        info: VideoInfo {
            width,
            height,
            rate: Rational::new(rate.0, rate.1),
        },
        player,
        own_bytes: settings.sizing.bytes(frame).saturating_add(held),
        speed: settings.speed,
        beat: BeatCtx::default(),
        quantize,
        settings,
        heads,
        skipped,
        trigger: Trigger::parse(props.str("trigger")),
        resume: Vec::new(),
        head: None,
        shown: Shown::Nothing,
        ended: false,
        scrubbed: false,
        clip: active,
        names: locations
            .iter()
            .zip(&own)
            .map(|(l, o)| o.name.clone().unwrap_or_else(|| stem(l)))
            .collect(),
        own,
        given: [props.str("locations").into(), props.str("folder").into()],
    };
    deck.resume = vec![None; deck.heads.len()];
    deck.trigger_clip(active)?;
    Ok(Element::Source(Box::new(deck)))
}

/// Head frames being given from memory after a trigger.
#[derive(Debug, Clone, Copy)]
struct HeadPlay {
    clip: usize,
    cursor: Cursor,
    left: u64,
}

/// What the last frame given was.
#[derive(Debug, Clone, Copy)]
enum Shown {
    Nothing,
    Player,
    Head { clip: usize, at: usize, u: i64 },
}

/// The `clips` source.
#[derive(Debug)]
pub struct Deck {
    info: VideoInfo,
    player: Player,
    /// The player's pictures and the heads, in bytes ([`Source::own_bytes`]).
    own_bytes: u64,
    settings: PlaySettings,
    /// The speed the player plays at: `speed`, or the one `beats` asks for.
    speed: i64,
    /// The beat clock at the last frame given (a trigger's `beats` speed is computed with it).
    beat: BeatCtx,
    /// `quantize`, as set (its place in [`QUANTIZE`]; the runtime acts on it).
    quantize: usize,
    heads: Vec<Vec<Vec<u8>>>,
    /// Places whose clip could not be opened or decoded.
    skipped: Vec<bool>,
    trigger: Trigger,
    /// Where each clip was left (its head), for `trigger=resume`.
    resume: Vec<Option<i64>>,
    head: Option<HeadPlay>,
    shown: Shown,
    /// The clip played once and holds its last frame.
    ended: bool,
    scrubbed: bool,
    clip: usize,
    /// Each place's name: its own (`[[clip]]`'s `name`), else its file's stem (`trigger deck
    /// intro`).
    names: Vec<String>,
    /// Each place's own settings (from `clip-settings`).
    own: Vec<ClipOpts>,
    /// `locations` and `folder` as given (published: the web page's thumbnails find the
    /// bank's files from them with [`bank_of`]).
    given: [String; 2],
}

/// One place's own settings, from the deck's `clip-settings` (a project file's `[[clip]]`
/// tables): each given one replaces the deck's (`speed` multiplies it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClipOpts {
    /// The name `trigger` takes.
    pub name: Option<String>,
    /// `in`, as the property takes it.
    pub in_point: Option<String>,
    /// `out`, as the property takes it.
    pub out_point: Option<String>,
    /// A factor of the deck's speed.
    pub speed: Option<f64>,
    /// Forward then backward.
    pub ping_pong: Option<bool>,
    /// One loop lasts this many beats.
    pub beats: Option<u32>,
    /// Loops (else holds its last frame).
    pub looping: Option<bool>,
}

impl ClipOpts {
    /// The settings of `places` places from `text` (`;` between places, `,` between
    /// `key=value`s; places left out have none). Errors name the place and the key.
    pub fn parse_all(text: &str, places: usize) -> Result<Vec<ClipOpts>> {
        let mut out = vec![ClipOpts::default(); places];
        if text.trim().is_empty() {
            return Ok(out);
        }
        for (i, entry) in text.split(';').enumerate() {
            let bad =
                |what: String| Error::element(NAME, format!("clip-settings of clip {i}: {what}"));
            let Some(o) = out.get_mut(i) else {
                if entry.trim().is_empty() {
                    continue;
                }
                return Err(bad(format!("the bank has {places} clips")));
            };
            for field in entry.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                let (k, v) = field
                    .split_once('=')
                    .ok_or_else(|| bad(format!("'{field}': expected key=value")))?;
                let num = |v: &str| -> Result<f64> {
                    v.parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite())
                        .ok_or_else(|| bad(format!("{k}={v}: expected a number")))
                };
                let flag = |v: &str| -> Result<bool> {
                    v.parse::<bool>()
                        .map_err(|_| bad(format!("{k}={v}: expected true or false")))
                };
                match k {
                    "name" => o.name = Some(v.to_string()),
                    "in" => o.in_point = Some(v.to_string()),
                    "out" => o.out_point = Some(v.to_string()),
                    "speed" => o.speed = Some(num(v)?.clamp(-64.0, 64.0)),
                    "ping-pong" => o.ping_pong = Some(flag(v)?),
                    "beats" => o.beats = Some(num(v)?.clamp(0.0, 1024.0) as u32),
                    "loop" => o.looping = Some(flag(v)?),
                    _ => {
                        return Err(bad(format!(
                            "unknown key '{k}'; expected one of: name, in, out, speed, \
                             ping-pong, beats, loop"
                        )))
                    }
                }
            }
        }
        Ok(out)
    }
}

/// A clip's name: its file name without folder and extension.
fn stem(location: &str) -> String {
    let p = std::path::Path::new(location);
    p.file_stem()
        .or(p.file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| location.to_string())
}

impl Deck {
    /// The head of the frame shown last.
    fn shown_u(&self) -> Option<i64> {
        match self.shown {
            Shown::Head { u, .. } => Some(u),
            Shown::Player => self.player.head().map(|(_, s)| s.u),
            Shown::Nothing => None,
        }
    }

    /// Starts clip `n` on the next frame. A place with no playable clip (past the bank's end,
    /// or skipped at start, where it was named) leaves the clip playing as it is: a refusal
    /// would make the runtime refuse every later trigger of the property.
    fn trigger_clip(&mut self, n: usize) -> Result<()> {
        let Some(span) = self.player.span_of(n) else {
            return Ok(());
        };
        if self.skipped[n] || self.player.broken(n) {
            return Ok(());
        }
        if let Some(u) = self.shown_u() {
            let old = self.clip;
            self.resume[old] = Some(u);
        }
        self.clip = n;
        self.ended = false;
        self.scrubbed = self.settings.pause;
        self.speed = self
            .settings_of(n)
            .play_speed(&self.beat, span.period(), self.info.rate);
        let speed = self.speed;
        if let (Trigger::Resume, Some(u)) = (self.trigger, self.resume[n]) {
            self.head = None;
            let mut c = Cursor::new(&span, u, speed);
            c.advance(&span);
            self.player.play(n, c);
            return Ok(());
        }
        let start = Cursor::new(&span, span.start(speed), speed);
        let held = self.heads[n].len() as u64;
        // The steps whose frames the head holds, forward from the in point.
        let mut probe = start;
        let mut steps = 0;
        if speed > 0 {
            while steps < held * 64 && span.frame_at(probe.u) < span.first + held {
                probe.advance(&span);
                steps += 1;
                if probe.wrapped {
                    break;
                }
            }
        }
        self.player.play(n, probe);
        self.head = (steps > 0).then_some(HeadPlay {
            clip: n,
            cursor: start,
            left: steps,
        });
        Ok(())
    }

    /// How clip `n` plays: the deck's settings with the clip's own (its speed a factor of the
    /// deck's).
    fn settings_of(&self, n: usize) -> PlaySettings {
        let mut s = self.settings;
        let Some(o) = self.own.get(n) else {
            return s;
        };
        if let Some(f) = o.speed {
            s.speed = speed_fixed(s.speed as f64 / ONE as f64 * f);
        }
        if let Some(b) = o.beats {
            s.beats = b;
        }
        if let Some(l) = o.looping {
            s.looping = l;
        }
        s
    }

    /// From the next frame on, plays at `speed` from the frame after the one shown.
    fn change_speed(&mut self, speed: i64) {
        self.speed = speed;
        let u = self.shown_u().unwrap_or(0);
        self.head = None;
        self.ended = false;
        self.player.set_speed_from(u, speed);
    }

    fn repeat(&self, out: &mut [u8]) -> bool {
        match self.shown {
            Shown::Nothing => false,
            Shown::Player => self.player.repeat(out),
            Shown::Head { clip, at, .. } => {
                out.copy_from_slice(&self.heads[clip][at]);
                true
            }
        }
    }
}

impl Source for Deck {
    fn info(&self) -> VideoInfo {
        self.info
    }

    fn fill(&mut self, ctx: &FrameCtx, frame: &mut FrameMut) -> Result<bool> {
        self.beat = ctx.beat;
        if let Some(span) = self.player.span_of(self.clip) {
            let speed =
                self.settings_of(self.clip)
                    .play_speed(&ctx.beat, span.period(), self.info.rate);
            if speed != self.speed {
                self.change_speed(speed);
            }
        }
        let out = frame.data_mut();
        if ((self.settings.pause && !self.scrubbed) || self.ended) && self.repeat(out) {
            return Ok(true);
        }
        self.scrubbed = false;
        if let Some(h) = &mut self.head {
            if h.left > 0 {
                let span = self.player.span_of(h.clip).unwrap_or(Span {
                    first: 0,
                    len: 1,
                    ping_pong: false,
                });
                let step = h.cursor.next(&span);
                let at = (step.frame - span.first) as usize;
                h.left -= 1;
                out.copy_from_slice(&self.heads[h.clip][at]);
                self.shown = Shown::Head {
                    clip: h.clip,
                    at,
                    u: step.u,
                };
                if h.left == 0 {
                    self.head = None;
                }
                return Ok(true);
            }
            self.head = None;
        }
        loop {
            if self.player.next(out).map_err(|e| Error::element(NAME, e))? {
                self.shown = Shown::Player;
                // The decoder may have moved on from a clip that failed.
                self.clip = self.player.active();
                return Ok(true);
            }
            if !self.settings_of(self.clip).looping {
                self.ended = true;
                if self.repeat(out) {
                    return Ok(true);
                }
            }
        }
    }

    /// `fill` waits for the decoder thread when it is behind (a resumed clip's seek, a
    /// reverse window): it runs on the show's IO thread.
    fn blocks(&self) -> bool {
        true
    }

    /// The decoder's pictures (`ahead + 1 + cache`) and every clip's head.
    fn own_bytes(&self) -> u64 {
        self.own_bytes
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
            .map(|mut spec| {
                if spec.name == "clip" {
                    // The range is the bank: a MIDI control or an OSCQuery slider spans it.
                    spec.kind = PropKind::Int {
                        min: 0,
                        max: self.skipped.len().saturating_sub(1) as i64,
                    };
                }
                let v = match spec.name.as_str() {
                    "clip" => PropValue::Int(self.clip as i64),
                    "trigger" => PropValue::Str(
                        match self.trigger {
                            Trigger::Restart => "restart",
                            Trigger::Resume => "resume",
                        }
                        .into(),
                    ),
                    "quantize" => PropValue::Str(QUANTIZE[self.quantize].into()),
                    "locations" => PropValue::Str(self.given[0].clone()),
                    "folder" => PropValue::Str(self.given[1].clone()),
                    name => self
                        .settings
                        .live_value(name)
                        .unwrap_or_else(|| spec.default.clone()),
                };
                (spec, v)
            })
            .chain(std::iter::once((
                // The names `clip` also takes (`trigger deck intro`: the runtime reads them).
                PropSpec::new(
                    "clip-names",
                    PropKind::Enum(self.names.clone()),
                    PropValue::Str(self.names[self.clip].clone()),
                    "the bank's clips by name (their file stems), in order: `clip` takes a \
                     name too",
                )
                .fixed(),
                PropValue::Str(self.names[self.clip].clone()),
            )))
            .collect()
    }

    fn set_property(&mut self, name: &str, value: &PropValue) -> Result<()> {
        match (name, value) {
            ("clip", PropValue::Int(n)) => return self.trigger_clip((*n).max(0) as usize),
            ("trigger", PropValue::Str(s)) => {
                self.trigger = Trigger::parse(s);
                return Ok(());
            }
            ("quantize", PropValue::Str(s)) => {
                // The runtime holds the deck's sets by it; the deck only publishes it.
                self.quantize = quantize_index(s);
                return Ok(());
            }
            _ => {}
        }
        match self.settings.set_live(name, value) {
            Some(Changed::Speed) => {
                // With `beats` the speed's sign alone counts: the next frame sets the speed.
                let own = self.settings_of(self.clip);
                if own.beats == 0 {
                    self.change_speed(own.speed);
                }
            }
            Some(Changed::Position) => {
                self.head = None;
                self.ended = false;
                self.player.seek(self.settings.position, self.speed);
                self.scrubbed = true;
            }
            Some(Changed::Other) => {}
            None => return Err(not_live(NAME, name)),
        }
        Ok(())
    }
}
