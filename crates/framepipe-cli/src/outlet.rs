//! One show's command outlet, the layer every surface that reads a flood posts through (the
//! `fp-stdin` reader's `commands::ShowInput`, the `fp-osc` reader's targets).
//!
//! An [`Outlet`] is a show's command sender with a [`Coalescer`] (a flood of `set`s of one
//! property reaches the engine as one per 10 ms; the rest are replaced by the latest and
//! counted) and a [`LogLimit`] for the lines about a full queue (one a second, the rest
//! counted). The surface says how each post is reported ([`Posted`]: stdin and OSC word a full
//! queue their own way, OSC also counts), and when to post what is held:
//! [`Outlet::pace`] after each input (what is due posted; a flood that outruns the engine
//! waits for the next gap, holding back its writer), [`Outlet::settle`] before blocking on the
//! input, [`Outlet::flush`] at the end.

use std::time::Instant;

use framepipe_control::{Coalescer, Command, CommandSender, Full, LogLimit, Ticket};

/// What starts a message about a show: `show NAME: ` in a run of several shows (`name`), nothing
/// for the only show (`None`).
pub(crate) fn who(name: Option<&str>) -> String {
    name.map_or(String::new(), |n| format!("show {n}: "))
}

/// How a surface reports one post: `who` (`show NAME: `, or empty for the only show), the
/// full-queue line limit, how many commands the post carried, and the queue's answer.
pub(crate) type Posted<'a> = dyn FnMut(&str, &mut LogLimit, usize, Result<Ticket, Full>) + 'a;

/// One show's command sender, coalesced, for one surface.
pub(crate) struct Outlet {
    /// The show's name when the run has several (`None`: the only show).
    name: Option<String>,
    /// `show NAME: ` in a run of several shows, empty for one show (prefixes messages).
    who: String,
    tx: CommandSender,
    /// Commands held back.
    coalescer: Coalescer,
    /// Lines about a full queue: one a second at most, the rest counted.
    full: LogLimit,
}

impl Outlet {
    /// The outlet to show `name` (`None`: the only show) through `tx`.
    pub fn new(name: Option<&str>, tx: CommandSender) -> Self {
        Outlet {
            name: name.map(str::to_string),
            who: who(name),
            tx,
            coalescer: Coalescer::new(),
            full: LogLimit::new(1),
        }
    }

    /// The show's name, when the run has several.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// What starts a message about this show: `show NAME: `, or nothing for the only show.
    pub fn who(&self) -> &str {
        &self.who
    }

    /// The show's sender (for what is not coalesced: a surface command's route).
    pub fn tx(&self) -> &CommandSender {
        &self.tx
    }

    /// Offers `cmd` (posted at once unless one of its property was posted within the gap).
    pub fn offer(&mut self, cmd: Command, posted: &mut Posted<'_>) {
        let (who, full) = (&self.who, &mut self.full);
        self.coalescer
            .offer(&self.tx, cmd, &mut |n, r| posted(who, full, n, r));
    }

    /// Posts what is held now.
    pub fn flush(&mut self, posted: &mut Posted<'_>) {
        let (who, full) = (&self.who, &mut self.full);
        self.coalescer
            .flush(&self.tx, &mut |n, r| posted(who, full, n, r));
    }

    /// Waits for the gap, then posts what is held (before a read that may block, or when a
    /// flood outruns the engine).
    pub fn settle(&mut self, posted: &mut Posted<'_>) {
        let (who, full) = (&self.who, &mut self.full);
        self.coalescer
            .settle(&self.tx, &mut |n, r| posted(who, full, n, r));
    }

    /// After an input: posts what is held once it is due, or waits for the next gap when a
    /// flood outruns the engine. Returns the full-queue lines not shown in the second that
    /// just ended, if it ended.
    pub fn pace(&mut self, posted: &mut Posted<'_>) -> Option<u64> {
        if self.coalescer.due() {
            self.flush(posted);
        } else if self.coalescer.should_wait() {
            self.settle(posted);
        }
        self.full.tick(Instant::now())
    }

    /// Reports `r`, the answer to a post made past the coalescer (a surface command routed
    /// to the show's queue).
    pub fn report(&mut self, r: Result<Ticket, Full>, posted: &mut Posted<'_>) {
        posted(&self.who, &mut self.full, 1, r);
    }

    /// Commands held now.
    pub fn held(&self) -> usize {
        self.coalescer.held()
    }

    /// Commands replaced by a later one of their kind so far.
    pub fn coalesced(&self) -> u64 {
        self.coalescer.coalesced()
    }

    /// Full-queue lines not shown since the last said, counted from now on again.
    pub fn take_hidden(&mut self) -> u64 {
        self.full.take_hidden()
    }

    /// The show's sender, the outlet done with (what it held must be flushed first).
    pub fn into_sender(self) -> CommandSender {
        self.tx
    }
}
