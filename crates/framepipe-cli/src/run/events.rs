//! The engine's events as lines on stderr, for a show of any run: the only show's unnamed,
//! each of several named (`framepipe: show cam3: ...`) and held to [`EVENT_LINES_PER_S`] over
//! every show ([`EventBudget`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use framepipe_runtime::Event;

/// Event lines a second at most, over every show of a run of several; the rest are counted
/// and the count said with the next line shown (200 shows stalling at once must not print 200
/// lines a second).
pub(crate) const EVENT_LINES_PER_S: u64 = 10;

/// The process-wide budget of event lines (lock-free: events come from every show's threads).
#[derive(Default)]
pub(crate) struct EventBudget {
    /// The second (since `start`) the count is for.
    second: AtomicU64,
    /// Lines asked for in that second.
    lines: AtomicU64,
    /// Lines not shown since the last one shown.
    hidden: AtomicU64,
    start: std::sync::OnceLock<Instant>,
}

impl EventBudget {
    /// Whether a line may be printed now; if so, how many were hidden before it.
    fn take(&self) -> Option<u64> {
        let now = self.start.get_or_init(Instant::now).elapsed().as_secs();
        if self.second.swap(now, Ordering::AcqRel) != now {
            self.lines.store(0, Ordering::Release);
        }
        if self.lines.fetch_add(1, Ordering::AcqRel) < EVENT_LINES_PER_S {
            Some(self.hidden.swap(0, Ordering::AcqRel))
        } else {
            self.hidden.fetch_add(1, Ordering::AcqRel);
            None
        }
    }

    /// Says, at the end of the run, how many lines were never shown (if any).
    pub(crate) fn say_hidden(&self) {
        let hidden = self.hidden.swap(0, Ordering::AcqRel);
        if hidden > 0 {
            say!("framepipe: {hidden} more warnings of the shows were not shown (at most {EVENT_LINES_PER_S} a second)");
        }
    }
}

/// A show's events on stderr. `name`: the show's, in a run of several (`None`: the only show);
/// `budget`: the lines a second every show shares (several shows). `surfaces`: commands come
/// from a surface, whose replies answer them (`fp-replies`), so a rejected command is not said
/// twice; `quiet`: which source ended the run is not said (the normal end of a render).
pub(crate) fn show_events(
    name: Option<&str>,
    surfaces: bool,
    quiet: bool,
    budget: Option<Arc<EventBudget>>,
) -> framepipe_runtime::EventFn {
    let name = name.map(str::to_string);
    Arc::new(move |e: &Event| {
        if surfaces && matches!(e, Event::CommandRejected { .. }) {
            return;
        }
        if quiet && matches!(e, Event::SourceEnded { .. }) {
            return;
        }
        if let Some(budget) = &budget {
            let Some(hidden) = budget.take() else {
                return;
            };
            if hidden > 0 {
                say!(
                    "\rframepipe: ({hidden} more warnings of the shows not shown: at most {EVENT_LINES_PER_S} a second)"
                );
            }
        }
        say_event(name.as_deref(), e);
    })
}

/// One event as one line on stderr, naming show `name` when there are several. A source's end
/// ends the only show's run, one show of several; the fade lines are the only show's (for one
/// of several they are said as the event itself).
fn say_event(name: Option<&str>, e: &Event) {
    let who = crate::outlet::who(name);
    match e {
        Event::Stalled { stage, elapsed_ms } => say!(
            "\rframepipe: {who}warning: {stage} stalled: one frame has taken {elapsed_ms} ms"
        ),
        Event::CommandRejected { command, reason } => {
            say!("\rframepipe: {who}command '{command}' rejected: {reason}")
        }
        Event::PropertyRejected {
            stage,
            prop,
            reason,
        } => say!("\rframepipe: {who}{stage} cannot change '{prop}' while running: {reason}"),
        Event::LeftRunning { stage, worker } => say!(
            "\rframepipe: {who}warning: fp-worker-{worker} is still inside {stage} (blocked; it cannot be interrupted) and was left running"
        ),
        Event::SourceEnded { stage, frames } => say!(
            "\rframepipe: {who}{stage} ended after {frames} frames: the {} ends",
            if name.is_some() { "show" } else { "run" }
        ),
        Event::GpuNodeFailed {
            stage,
            frame,
            reason,
        } => say!(
            "\rframepipe: {who}warning: {stage}: failed at render on frame {frame}: {reason}; bypassed from then on"
        ),
        Event::FadeDone { to, frame } if name.is_none() => {
            say!("\rframepipe: fade to {to} done at frame {frame}")
        }
        Event::FadeStuck { to, reason } if name.is_none() => say!(
            "\rframepipe: warning: the fade to {to} cannot end (its old project keeps running): {reason}"
        ),
        other => say!("\rframepipe: {who}{other:?}"),
    }
}
