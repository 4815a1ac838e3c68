//! The master output's part ([`Master`], held by the output of port 0 only): at every frame
//! boundary it takes the edit thread's answer, follows a live edit's switch (answering the
//! edit, handing what it replaced to the edit thread), reads the command queue, applies
//! transport commands itself and parameter commands (sets) to the live state, hands live
//! edits to the edit thread, and answers each command on the queue's return path. It also
//! holds the latency gate (a paced master) and the stall checks' threshold, and at the end
//! answers an edit the run's end overtook.
//!
//! Sets are resolved (parsed, checked) without any lock, then assigned together under the
//! live lock ([`assign_sets`]), so that every command read at one boundary applies from the
//! same frame, the one its reply names; old values are dropped, refusals reported and replies
//! sent with no lock held.

use std::sync::Arc;

use framepipe_clock::now_ns;
use framepipe_control::{Command, CommandReader, Outcome, Posted, Transport};

use super::gate::Gate;
use super::Output;
use crate::edit::{EditLink, FromEditor, ToEditor};
use crate::live::{Fate, Set};
use crate::sched::{Shared, Version};
use crate::stats::Event;

/// The reply to an edit that the run's end overtook.
const ENDED_BEFORE_EDIT: &str = "the run ended before the edit could take effect";

/// Most sets applied in one critical section of the live lock (one frame boundary's worth in
/// practice; more are applied in further batches).
const SET_BATCH: usize = 64;
const _: () = assert!(SET_BATCH >= framepipe_control::MAX_BATCH);

/// The master output's part (see the module doc).
pub(super) struct Master {
    commands: Option<CommandReader>,
    edits_link: Option<EditLink>,
    /// Pause, step, resume, stop: decides at each boundary whether the next frame goes.
    pub(super) transport: Transport,
    /// Stages running one frame longer than this are reported (`u64::MAX`: never).
    pub(super) stall_ns: u64,
    /// A paced master's latency gate.
    pub(super) gate: Option<Gate>,
    /// Sets resolved at this boundary, waiting to be assigned.
    sets: Vec<Set>,
    /// The commands of `sets`, answered once assigned.
    set_posted: Vec<Posted>,
    /// Per command of `set_posted`: how many of `sets` are its, and whether it is refused
    /// (its node ended by the armed live edit: the fate and the switch frame).
    set_of: Vec<Of>,
    /// The nodes the last live edit removed, and its first frame: a command naming one is
    /// refused saying so.
    removed: (Vec<Arc<str>>, u64),
    /// The repeat count when it armed the last live edit.
    edit_repeats_at_arm: u64,
    /// A live edit handed to the edit thread: when (monotonic ns) and the repeat count then,
    /// until it comes back built (`Counters::record_edit_build`).
    edit_sent: Option<(i64, u64)>,
    /// A live edit switched in: (its first frame, its drain in ns, the repeat count when it
    /// was armed), until that frame is released (`Counters::record_edit`).
    edit_watch: Option<(u64, i64, u64)>,
    /// A live edit switched in and was answered; what it replaced is not yet handed to the
    /// edit thread (an overlapping switch's replaced version still finishes its frames):
    /// looked for at every boundary until then.
    retire_due: bool,
}

impl Master {
    /// The master's part: `commands` (a post raises port 0's signal, the queue's waker: the
    /// master output thread, in a host the clock thread for this show, wakes up; commands are
    /// not polled), the edit thread's `edits_link`, the stall threshold and a paced master's
    /// latency gate.
    pub(super) fn new(
        shared: &Shared,
        commands: Option<CommandReader>,
        edits_link: Option<EditLink>,
        stall_ns: u64,
        gate: Option<Gate>,
    ) -> Self {
        if let Some(reader) = commands.as_ref() {
            let signal = Arc::clone(&shared.port_signals[0]);
            reader.set_waker(move || signal.raise());
        }
        Master {
            commands,
            edits_link,
            transport: Transport::new(),
            stall_ns,
            gate,
            sets: Vec::with_capacity(SET_BATCH),
            set_posted: Vec::with_capacity(SET_BATCH),
            set_of: Vec::with_capacity(SET_BATCH),
            removed: (Vec::new(), 0),
            edit_repeats_at_arm: 0,
            edit_sent: None,
            edit_watch: None,
            retire_due: false,
        }
    }

    /// Whether a live edit switched in and what it replaced is still to be handed to the
    /// edit thread (looked for at every boundary until then).
    pub(super) fn retire_due(&self) -> bool {
        self.retire_due
    }

    /// Whether a command or the edit thread's answer is waiting (poll again at once).
    pub(super) fn waiting(&self) -> bool {
        self.commands.as_ref().is_some_and(|r| r.pending() > 0)
            || self.edits_link.as_ref().is_some_and(|l| l.has_message())
    }

    /// The edit thread's answer: a built edit is armed (it may switch at once, e.g. in a
    /// paused show: the commands read after are then read against the new version); a refused
    /// one is answered.
    fn take_built(&mut self, shared: &Shared) {
        let (Some(l), Some(reader)) = (self.edits_link.as_mut(), self.commands.as_mut()) else {
            return;
        };
        match l.take() {
            Some(FromEditor::Ready(p)) => {
                let repeated = shared.counters.repeated();
                self.edit_repeats_at_arm = repeated;
                if let Some((sent_ns, at_send)) = self.edit_sent.take() {
                    let build_ns = now_ns() - sent_ns;
                    let repeats = repeated.saturating_sub(at_send);
                    shared.counters.record_edit_build(build_ns, repeats);
                }
                let mut st = shared.lock_output();
                st.arm_switch(p, shared);
                st.after_change(shared);
            }
            Some(FromEditor::Refused(p, reason)) => {
                l.refused();
                self.edit_sent = None;
                refuse(shared, reader, p, reason);
            }
            None => {}
        }
    }

    /// A live edit switched in (`news`, with `ver` the new version): answered at the switch
    /// (the next edit may be built then, against the new version); what it replaced goes to
    /// the edit thread once its frames are done (`switched`; at once when the switch waited
    /// for them).
    fn switched(
        &mut self,
        shared: &Shared,
        ver: &Version,
        news: Option<crate::sched::SwitchNews>,
        switched: Option<crate::sched::Replaced>,
    ) {
        if let Some(mut news) = news {
            shared.counters.set_stages(Arc::clone(&ver.stages));
            std::mem::swap(&mut self.removed.0, &mut news.removed);
            self.removed.1 = news.frame;
            self.edit_watch = Some((news.frame, news.drain_ns, self.edit_repeats_at_arm));
            if let (Some(p), Some(reader)) = (news.posted, self.commands.as_mut()) {
                reader.reply(p, Outcome::Applied { frame: news.frame });
            }
            if let Some(l) = self.edits_link.as_mut() {
                l.switched(news.frame, news.graph_view, news.removed);
            }
            self.retire_due = true;
        }
        if let Some(sw) = switched {
            self.retire_due = false;
            if let Some(l) = self.edits_link.as_ref() {
                l.bury(sw);
            }
        }
    }

    /// Applies the commands pending now (see [`apply_commands`]); `boundary`: the next frame
    /// to be released, which names the boundary (see `Outcome::Applied`). Whether `stop` was
    /// read.
    fn apply_pending(&mut self, shared: &Shared, ver: &Version, boundary: u64) -> bool {
        let mut stop = false;
        if let Some(reader) = self.commands.as_mut() {
            let mut batch = Batch {
                sets: &mut self.sets,
                posted: &mut self.set_posted,
                of: &mut self.set_of,
                removed: (&self.removed.0, self.removed.1),
            };
            let building = self.edits_link.as_ref().is_some_and(|l| l.is_busy());
            stop = apply_commands(
                shared,
                ver,
                reader,
                self.edits_link.as_mut(),
                &mut self.transport,
                &mut batch,
                boundary,
            );
            if !building && self.edits_link.as_ref().is_some_and(|l| l.is_busy()) {
                let repeated = shared.counters.repeated();
                self.edit_sent = Some((now_ns(), repeated));
            }
        }
        shared.counters.set_paused(self.transport.is_paused());
        stop
    }

    /// Frame `seq` was given to the sink: the first frame of a live edit ends its watch
    /// (`Counters::record_edit`).
    pub(super) fn released(&mut self, shared: &Shared, seq: u64) {
        if let Some((first, drain_ns, at_arm)) = self.edit_watch {
            if seq >= first {
                let repeats = shared.counters.repeated().saturating_sub(at_arm);
                shared.counters.record_edit(drain_ns, repeats);
                self.edit_watch = None;
            }
        }
    }

    /// The end of the run: an edit built but not switched in before it, or still on the edit
    /// thread, is answered saying so; one switched in but not yet answered is answered.
    pub(super) fn finish(&mut self, shared: &Shared) {
        let Some(reader) = self.commands.as_mut() else {
            return;
        };
        let (pending, switched, news) = {
            let mut st = shared.lock_output();
            (
                st.take_next_version(),
                st.take_replaced(),
                st.take_switch_news(),
            )
        };
        // (An edit answered whose replaced version had not finished: nothing to wait for.)
        let in_state = pending.is_some() || switched.is_some() || news.is_some() || self.retire_due;
        if let Some(p) = pending.and_then(|mut p| p.take_posted()) {
            refuse(shared, reader, p, ENDED_BEFORE_EDIT.into());
        }
        // An edit still on the edit thread (being built, or built and not yet taken): its
        // answer is waited for (off the frame path: the run is over), so that it too gets a
        // reply. Dropping our sender lets the edit thread end after it.
        if let Some(l) = self.edits_link.take() {
            match l.close(!in_state, crate::model::JOIN_GRACE) {
                Some(FromEditor::Ready(mut p)) => {
                    if let Some(posted) = p.take_posted() {
                        refuse(shared, reader, posted, ENDED_BEFORE_EDIT.into());
                    }
                }
                Some(FromEditor::Refused(p, reason)) => refuse(shared, reader, p, reason),
                // Nothing on its way, or the edit thread is stuck in an element's
                // constructor: it is left running, detached (see `Prepared::run`).
                None => {}
            }
        }
        if let Some(news) = news {
            if let Some(p) = news.posted {
                reader.reply(p, Outcome::Applied { frame: news.frame });
            }
        }
        drop(switched);
    }
}

impl Output {
    /// At a frame boundary: the master takes the edit thread's answer; every output follows a
    /// live edit's switch to the new version ([`Output::follow_switch`]), the master also
    /// answering the edit; the master applies the pending commands. Whether `stop` was read.
    pub(super) fn read_commands(&mut self, shared: &Shared) -> bool {
        // The edit thread's answer first: an edit armed now may switch at once, and the
        // commands read below must know it.
        if let Some(m) = self.master.as_mut() {
            m.take_built(shared);
        }
        let (news, switched) = self.follow_switch(shared);
        let Some(m) = self.master.as_mut() else {
            return false;
        };
        if news.is_some() || switched.is_some() {
            m.switched(shared, &self.ver, news, switched);
        }
        m.apply_pending(shared, &self.ver, self.released_seq.map_or(0, |s| s + 1))
    }
}

/// Per command waiting to be assigned: how many of the batch's sets are its, whether it
/// is refused because the armed live edit ends its node before its frame (that node's stage,
/// the fate, the switch frame), and the frame its values are held until when it sets a
/// quantized node's property (`Live::quantum`).
type Of = (usize, Option<(usize, Fate, u64)>, Option<u64>);

/// Sets waiting to be assigned, with their commands (answered once assigned).
/// Every vector has room for [`SET_BATCH`] from the start.
struct Batch<'a> {
    sets: &'a mut Vec<Set>,
    posted: &'a mut Vec<Posted>,
    /// Per command of `posted`: how many of `sets` are its; whether it is refused.
    of: &'a mut Vec<Of>,
    /// The nodes the last live edit removed, and its first frame (for the refusals).
    removed: (&'a [Arc<str>], u64),
}

/// Applies the commands pending now: transport ones here, answered with `boundary` (the next
/// frame to be released); parameter ones are resolved (parsed, checked) here, without any
/// lock, then assigned together under the live lock, so that every command read at one
/// boundary applies from the same frame, the one its reply names. Old values are dropped,
/// rejections reported and replies sent with no lock held. A `stop` ends the reading: what is
/// queued after it is refused when the reader is dropped at the end of the run. Returns
/// whether `stop` was read.
fn apply_commands(
    shared: &Shared,
    ver: &Version,
    reader: &mut CommandReader,
    mut link: Option<&mut EditLink>,
    transport: &mut Transport,
    batch: &mut Batch<'_>,
    boundary: u64,
) -> bool {
    let pending = reader.pending();
    let mut stop = false;
    for _ in 0..pending {
        let Some(p) = reader.pop() else { break };
        if let Command::Edit(_) = &p.command {
            // Built on the edit thread, switched in at a frame boundary; answered then.
            let refused = match link.as_deref_mut() {
                None => Some("live edits are not available in this run"),
                Some(l) if l.is_busy() => {
                    Some("another edit is being prepared; send this one once it is answered")
                }
                Some(l) => match l.build(p) {
                    Ok(()) => {
                        // The commands read before it are assigned first: the ones after it
                        // are those its switch carries into a node it replaces.
                        assign_sets(shared, ver, reader, batch);
                        shared.live.lock().edit_read();
                        continue;
                    }
                    Err(
                        std::sync::mpsc::TrySendError::Full(msg)
                        | std::sync::mpsc::TrySendError::Disconnected(msg),
                    ) => {
                        if let ToEditor::Build(back) = msg {
                            let reason = "the edit thread is not taking edits";
                            refuse(shared, reader, back, reason.into());
                        }
                        continue;
                    }
                },
            };
            if let Some(reason) = refused {
                refuse(shared, reader, p, reason.into());
            }
            continue;
        }
        if let Command::Batch(cmds) = &p.command {
            let n = cmds.len();
            apply_batch(shared, ver, reader, transport, batch, p, n);
            continue;
        }
        if transport.apply(&p.command) {
            stop = matches!(p.command, Command::Stop);
            reader.reply(p, Outcome::Applied { frame: boundary });
            if stop {
                break;
            }
            continue;
        }
        match resolve(shared, ver, &p.command) {
            Ok(set) => {
                if batch.sets.len() == batch.sets.capacity() {
                    assign_sets(shared, ver, reader, batch);
                }
                batch.sets.push(set);
                batch.posted.push(p);
                batch.of.push((1, None, None));
            }
            Err(reason) => {
                let on_its_way = link.as_deref().is_some_and(|l| l.is_busy());
                let reason = not_yet(reason, &p.command, on_its_way, batch.removed);
                refuse(shared, reader, p, reason);
            }
        }
    }
    assign_sets(shared, ver, reader, batch);
    stop
}

/// A parameter or clock command against the version's [`LiveSpec`](crate::live::LiveSpec);
/// `tempo auto` needs the show's audio.
fn resolve(shared: &Shared, ver: &Version, cmd: &Command) -> std::result::Result<Set, String> {
    if matches!(cmd, Command::TempoAuto) && shared.audio.is_none() {
        return Err(
            "tempo auto follows the show's audio, and this show has none; run it \
                    with --audio FILE (or --audio default for the sound card)"
                .into(),
        );
    }
    ver.live_spec.resolve(cmd)
}

/// A [`Command::Batch`]: every parameter command in it is resolved first; if one is refused,
/// the whole batch is (with that command's reason) and nothing of it applies. Otherwise its
/// transport commands apply now and its sets join the ones assigned at this boundary, so that
/// all of it is seen from the same frame (the one its reply names).
fn apply_batch(
    shared: &Shared,
    ver: &Version,
    reader: &mut CommandReader,
    transport: &mut Transport,
    batch: &mut Batch<'_>,
    p: Posted,
    n: usize,
) {
    let Command::Batch(cmds) = &p.command else {
        unreachable!("apply_batch takes a batch");
    };
    // Room for all of it in this assignment (a batch has at most MAX_BATCH commands, and the
    // buffer holds SET_BATCH >= MAX_BATCH, so this never grows it).
    if batch.sets.len() + n > batch.sets.capacity() {
        assign_sets(shared, ver, reader, batch);
    }
    let start = batch.sets.len();
    let mut refused = None;
    for c in cmds {
        if matches!(c, Command::Pause | Command::Resume | Command::Step(_)) {
            continue;
        }
        match resolve(shared, ver, c) {
            Ok(set) => batch.sets.push(set),
            Err(reason) => {
                refused = Some(format!("{c}: {reason}"));
                break;
            }
        }
    }
    if let Some(reason) = refused {
        batch.sets.truncate(start);
        refuse(shared, reader, p, reason);
        return;
    }
    for c in cmds {
        transport.apply(c);
    }
    batch.posted.push(p);
    batch.of.push((batch.sets.len() - start, None, None));
}

/// Assigns the batch's sets under the live lock, from the first frame that can show all of
/// them: the latest of their stages' next frames (the next frame to begin for a clock
/// command), the stages behind it first sampling their current values for the frames in
/// between (`Live::catch_up`; see `crate::live`). After unlocking, the old values they then hold
/// are dropped and their commands answered with that frame.
///
/// The sets were resolved (node and property indices) against graph version `ver`; if a
/// live edit switched versions since (another thread may make the switch between the output
/// thread's look at the version and this), they would name other nodes, or none: they are
/// refused instead. A command on a node that the armed live edit removes (or replaces by
/// another element) is refused when that frame would be the switch's or later: no frame
/// would show it (`Live::gone`).
fn assign_sets(shared: &Shared, ver: &Version, reader: &mut CommandReader, batch: &mut Batch<'_>) {
    if batch.sets.is_empty() {
        return;
    }
    let (frame, next_frame) = {
        let mut live = shared.live.lock();
        let next_frame = live.next_frame();
        let frame = if live.version() == ver.number {
            let first_of = |live: &crate::live::Live, of: &[Of]| {
                let mut k = 0;
                let mut first = None::<u64>;
                for &(n, gone, _) in of {
                    if gone.is_none() {
                        for e in &batch.sets[k..k + n] {
                            let f = live.first_frame_of(e);
                            first = Some(first.map_or(f, |g| g.max(f)));
                        }
                    }
                    k += n;
                }
                first
            };
            let mut first = first_of(&live, batch.of);
            if let Some(f) = first {
                // Commands on nodes the armed edit ends before that frame: refused.
                let mut k = 0;
                let mut any = false;
                for (n, gone, _) in batch.of.iter_mut() {
                    *gone = batch.sets[k..k + *n].iter().find_map(|e| {
                        let s = e.stage()?;
                        live.gone(s, f).map(|(fate, at)| (s, fate, at))
                    });
                    any |= gone.is_some();
                    k += *n;
                }
                if any {
                    first = first_of(&live, batch.of);
                }
            }
            if let Some(first) = first {
                let mut k = 0;
                for (n, gone, held) in batch.of.iter_mut() {
                    if gone.is_none() {
                        let group = &mut batch.sets[k..k + *n];
                        // A command setting a quantized node's property (a deck's trigger)
                        // waits for the beat grid: its values are held until that frame,
                        // which its reply names.
                        let beats = group
                            .iter()
                            .filter(|e| live.quantized(e))
                            .filter_map(Set::stage)
                            .map(|s| live.quantum(s))
                            .max();
                        *held = beats.map(|b| {
                            live.beat_frame(first, b, shared.rate, &ver.snapshots, ver.topo.cap)
                        });
                        for e in group.iter_mut() {
                            if let Some(s) = e.stage() {
                                live.catch_up(s, first, &ver.snapshots, ver.topo.cap);
                                live.commanded(s, held.unwrap_or(first));
                            }
                            match *held {
                                Some(at) => live.hold(e, at),
                                None => live.apply(e),
                            }
                        }
                    }
                    k += *n;
                }
                shared.counters.set_tempo_bpm(live.tempo());
            }
            Some(first)
        } else {
            None
        };
        (frame, next_frame)
    };
    batch.sets.clear();
    for (p, (_, gone, held)) in batch.posted.drain(..).zip(batch.of.drain(..)) {
        match (frame, gone) {
            (Some(_), Some((s, fate, at))) => {
                let reason = crate::live::gone_reason(ver.live_spec.label(s), fate, at);
                refuse(shared, reader, p, reason);
            }
            // (None: only commands without sets are left, transport ones of a batch.)
            (Some(frame), None) => reader.reply(
                p,
                Outcome::Applied {
                    frame: held.or(frame).unwrap_or(next_frame),
                },
            ),
            (None, _) => reader.reply(
                p,
                Outcome::Refused {
                    reason: "the graph changed (a live edit) while this command was read; \
                             send it again"
                        .into(),
                },
            ),
        }
    }
}

/// A command's refusal `reason` when `command` names a node the running graph does not have:
/// one the last live edit removed (`ended`: their names, its first frame) is named so; else a
/// word on the live edit on its way (`on_its_way`), which may bring it.
fn not_yet(
    reason: String,
    command: &Command,
    on_its_way: bool,
    ended: (&[Arc<str>], u64),
) -> String {
    if !reason.starts_with("no element '") {
        return reason;
    }
    let named = match command {
        Command::Set { element, .. }
        | Command::Osc { element, .. }
        | Command::Unosc { element, .. }
        | Command::Bypass { element, .. } => match element {
            framepipe_control::Target::Name(n) => Some(n.as_str()),
            framepipe_control::Target::Index(_) => None,
        },
        _ => None,
    };
    if let Some(n) = named.filter(|n| ended.0.iter().any(|e| &**e == *n)) {
        return crate::live::gone_reason(n, crate::live::Fate::Removed, ended.1);
    }
    if on_its_way {
        format!(
            "{reason} (a live edit is on its way: a node it adds takes commands once it is \
             answered)"
        )
    } else {
        reason
    }
}

/// Refuses a command: reported as an event (for a caller without a reply printer) and
/// answered with `reason`. Every refusal of the output thread goes through here.
fn refuse(shared: &Shared, reader: &mut CommandReader, p: Posted, reason: String) {
    shared.emit(Event::CommandRejected {
        command: p.command.to_string(),
        reason: reason.clone(),
    });
    reader.reply(
        p,
        Outcome::Refused {
            reason: reason.into(),
        },
    );
}
