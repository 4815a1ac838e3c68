//! The run's settings: the flags checked once, and each show's [`Options`] from the flags and
//! its project file's own settings.
//!
//! Which wins differs with the number of shows, and is decided here only:
//! * **One show**: the flags win; what the project file sets (`threads`, `in-flight`, `fps`,
//!   `unpaced`) fills in what the flags leave unsaid, and is folded into [`Global`] before the
//!   show is built ([`Global::check`] with its settings).
//! * **Several shows**: each project's own `in-flight`, `fps` and `unpaced` win for its show
//!   ([`options_for`] with its settings, after it is built); `--threads` sizes the one pool
//!   every show shares, and a project's `threads` is not used.

use anyhow::{Context, Result};
use framepipe_core::Rational;
use framepipe_project::Settings;
use framepipe_runtime::{Options, Overload};

use crate::args::RunArgs;
use crate::flags;

/// The flags, checked once for every show (one show: with its project's settings folded in).
pub(crate) struct Global {
    pub overload: Overload,
    /// Worker threads (0: the engine's default).
    pub threads: usize,
    pub in_flight: Option<usize>,
    /// The pace asked for (one show: also the rate `--progress` counts output time in).
    pub fps: Option<Rational>,
    pub unpaced: bool,
    pub stall_timeout_ns: u64,
    pub latency_ns: u64,
    pub realtime: bool,
    pub no_standby: bool,
}

impl Global {
    /// Checks the flags; `one`: the only show's project settings, which fill in what the flags
    /// leave unsaid (`None` with several shows).
    pub fn check(args: &RunArgs, one: Option<&Settings>) -> Result<Self> {
        let none = Settings::default();
        let own = one.unwrap_or(&none);
        let overload = Overload::parse(&args.overload).with_context(|| {
            format!("bad --overload '{}': expected slow or live", args.overload)
        })?;
        let threads = match (args.threads, own.threads) {
            (Some(n), _) => flags::threads(n, "--threads")?,
            (None, Some(n)) => flags::threads(n, "'threads' in the project file")?,
            (None, None) => 0,
        };
        let in_flight = match (args.in_flight, own.in_flight) {
            (Some(n), _) => Some(flags::in_flight(n, "--in-flight")?),
            (None, Some(n)) => Some(flags::in_flight(n, "'in-flight' in the project file")?),
            (None, None) => None,
        };
        let fps = match (&args.fps, &own.fps) {
            (Some(f), _) => Some(flags::fps(f, "--fps")?),
            (None, Some(f)) => Some(flags::fps(f, "'fps' in the project file")?),
            (None, None) => None,
        };
        Ok(Global {
            overload,
            threads,
            in_flight,
            fps,
            unpaced: args.unpaced || own.unpaced,
            stall_timeout_ns: flags::stall_timeout_ns(args.stall_timeout.unwrap_or(0))?,
            latency_ns: flags::latency_ns(args.latency.unwrap_or(0))?,
            realtime: !args.no_realtime,
            no_standby: args.no_standby,
        })
    }
}

/// The options of one show, whose source runs at `source_rate`: `own` (several shows: its
/// project's settings, which win) before the flags; without a pace, the source's rate.
pub(crate) fn options_for(
    global: &Global,
    own: Option<&Settings>,
    threads: usize,
    source_rate: Rational,
) -> Result<Options> {
    let none = Settings::default();
    let s = own.unwrap_or(&none);
    let in_flight = match (s.in_flight, global.in_flight) {
        (Some(n), _) => flags::in_flight(n, "'in-flight' in the project file")?,
        (None, Some(n)) => n,
        (None, None) => 0,
    };
    let pace = if s.unpaced {
        None
    } else if let Some(f) = &s.fps {
        Some(flags::fps(f, "'fps' in the project file")?)
    } else if global.unpaced {
        None
    } else if let Some(rate) = global.fps {
        Some(rate)
    } else {
        Some(flags::rate_in_range(
            source_rate,
            "the source's rate",
            "; pace it with --fps or run --unpaced",
        )?)
    };
    Ok(Options {
        threads,
        in_flight,
        pace,
        overload: global.overload,
        stall_timeout_ns: global.stall_timeout_ns,
        realtime: global.realtime,
        latency_ns: global.latency_ns,
        no_standby: global.no_standby,
        inject_stall: None,
    })
}
