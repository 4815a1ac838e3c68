//! The master output's part: it reads the command queue at every frame boundary, applies
//! transport commands itself and parameter commands (sets) to the live state, hands live
//! edits to the edit thread and answers each command on the queue's return path.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use framepipe_clock::now_ns;
use framepipe_control::{Command, CommandReader, Outcome, Posted, Transport};

use super::Output;
use crate::edit::{EditLink, FromEditor, ToEditor};
use crate::live::{Fate, Set};
use crate::sched::{Shared, Version};
use crate::stats::Event;

/// The reply to an edit that the run's end overtook.
pub(super) const ENDED_BEFORE_EDIT: &str = "the run ended before the edit could take effect";

/// Most parameter edits applied in one critical section of the live lock (one frame
/// boundary's worth in practice; more are applied in further batches).
pub(super) const EDIT_BATCH: usize = 64;
const _: () = assert!(EDIT_BATCH >= framepipe_control::MAX_BATCH);

impl Output {
    /// Reads the commands and the edit thread's answers; whether `stop` was read.
    pub(super) fn read_commands(&mut self, shared: &Shared) -> bool {
        let port = self.port;
        // The edit thread's answer first: an edit armed now may switch at once, and the
        // commands read below must know it.
        if let (Some(l), Some(reader)) = (self.edits_link.as_mut(), self.commands.as_mut()) {
            match l.take() {
                Some(FromEditor::Ready(p)) => {
                    let repeated = shared.counters.repeated();
                    self.edit_repeats_at_arm = repeated;
                    if let Some((sent_ns, at_send)) = self.edit_sent.take() {
                        let build_ns = now_ns() - sent_ns;
                        let repeats = repeated.saturating_sub(at_send);
                        shared.counters.record_edit_build(build_ns, repeats);
                    }
                    // (It may switch at once, e.g. in a paused show: the commands below are
                    // then read against the new version.)
                    let mut st = shared.lock_output();
                    st.arm_switch(p, shared);
                    st.after_change(shared);
                }
                Some(FromEditor::Refused(p, reason)) => {
                    l.busy = false;
                    self.edit_sent = None;
                    refuse(shared, reader, p, reason);
                }
                None => {}
            }
        }
        // A live edit switched versions: look at the new one (and, the master, answer the
        // edit and hand what the switch replaced to the edit thread).
        let changed = shared.version.load(Ordering::Acquire) != self.ver.number;
        if changed || self.retire_due {
            let mut st = shared.lock_output();
            if changed {
                self.ver = Arc::clone(&st.ver);
                self.sink_stage = st.ports[port].node;
            }
            let (news, switched) = if port == 0 {
                (st.news.take(), st.switched.take())
            } else {
                (None, None)
            };
            drop(st);
            if changed {
                self.sink_counter = Arc::clone(&self.ver.stages[self.sink_stage]);
            }
            // Answered at the switch (the next edit may be built then, against the new
            // version); what it replaced goes to the edit thread once its frames are done (at
            // once when the switch waited for them).
            if let Some(mut news) = news {
                shared.counters.set_stages(Arc::clone(&self.ver.stages));
                std::mem::swap(&mut self.removed.0, &mut news.removed);
                self.removed.1 = news.frame;
                self.edit_watch = Some((news.frame, news.drain_ns, self.edit_repeats_at_arm));
                if let (Some(p), Some(reader)) = (news.posted, self.commands.as_mut()) {
                    reader.reply(p, Outcome::Applied { frame: news.frame });
                }
                if let Some(l) = self.edits_link.as_mut() {
                    l.busy = false;
                    // Full (cannot be: see the channel's size): dropped here instead.
                    let _ = l.tx.try_send(ToEditor::Switched {
                        frame: news.frame,
                        graph_view: news.graph_view,
                        dropped: news.removed,
                    });
                }
                self.retire_due = true;
            }
            if let Some(sw) = switched {
                self.retire_due = false;
                if let Some(l) = self.edits_link.as_mut() {
                    let _ = l.tx.try_send(ToEditor::Bury(sw));
                }
            }
        }
        let mut stop = false;
        if let Some(reader) = self.commands.as_mut() {
            // The boundary is named by the next frame to be released (see `Outcome::Applied`).
            let boundary = self.released_seq.map_or(0, |s| s + 1);
            let mut batch = Batch {
                edits: &mut self.edits,
                posted: &mut self.edited,
                of: &mut self.edited_of,
                removed: (&self.removed.0, self.removed.1),
            };
            let building = self.edits_link.as_ref().is_some_and(|l| l.busy);
            stop = apply_commands(
                shared,
                &self.ver,
                reader,
                self.edits_link.as_mut(),
                &mut self.transport,
                &mut batch,
                boundary,
            );
            if !building && self.edits_link.as_ref().is_some_and(|l| l.busy) {
                let repeated = shared.counters.repeated();
                self.edit_sent = Some((now_ns(), repeated));
            }
        }
        if port == 0 {
            shared.counters.set_paused(self.transport.is_paused());
        }
        stop
    }
}

/// Per command waiting to be assigned: how many of the batch's edits are its, and whether it
/// is refused because the armed live edit ends its node before its frame (that node's stage,
/// the fate, the switch frame).
pub(super) type Of = (usize, Option<(usize, Fate, u64)>);

/// Parameter edits waiting to be assigned, with their commands (answered once assigned).
/// Every vector has room for [`EDIT_BATCH`] from the start.
struct Batch<'a> {
    edits: &'a mut Vec<Set>,
    posted: &'a mut Vec<Posted>,
    /// Per command of `posted`: how many of `edits` are its; whether it is refused.
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
                Some(l) if l.busy => {
                    Some("another edit is being prepared; send this one once it is answered")
                }
                Some(l) => match l.tx.try_send(ToEditor::Build(p)) {
                    Ok(()) => {
                        l.busy = true;
                        // The commands read before it are assigned first: the ones after it
                        // are those its switch carries into a node it replaces.
                        assign_edits(shared, ver, reader, batch);
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
        match ver.live_spec.resolve(&p.command) {
            Ok(edit) => {
                if batch.edits.len() == batch.edits.capacity() {
                    assign_edits(shared, ver, reader, batch);
                }
                batch.edits.push(edit);
                batch.posted.push(p);
                batch.of.push((1, None));
            }
            Err(reason) => {
                let on_its_way = link.as_deref().is_some_and(|l| l.busy);
                let reason = not_yet(reason, &p.command, on_its_way, batch.removed);
                refuse(shared, reader, p, reason);
            }
        }
    }
    assign_edits(shared, ver, reader, batch);
    stop
}

/// A [`Command::Batch`]: every parameter command in it is resolved first; if one is refused,
/// the whole batch is (with that command's reason) and nothing of it applies. Otherwise its
/// transport commands apply now and its edits join the ones assigned at this boundary, so that
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
    // buffer holds EDIT_BATCH >= MAX_BATCH, so this never grows it).
    if batch.edits.len() + n > batch.edits.capacity() {
        assign_edits(shared, ver, reader, batch);
    }
    let start = batch.edits.len();
    let mut refused = None;
    for c in cmds {
        if matches!(c, Command::Pause | Command::Resume | Command::Step(_)) {
            continue;
        }
        match ver.live_spec.resolve(c) {
            Ok(edit) => batch.edits.push(edit),
            Err(reason) => {
                refused = Some(format!("{c}: {reason}"));
                break;
            }
        }
    }
    if let Some(reason) = refused {
        batch.edits.truncate(start);
        refuse(shared, reader, p, reason);
        return;
    }
    for c in cmds {
        transport.apply(c);
    }
    batch.posted.push(p);
    batch.of.push((batch.edits.len() - start, None));
}

/// Assigns the batch's edits under the live lock, from the first frame that can show all of
/// them: the latest of their stages' next frames (the next frame to begin for a clock
/// command), the stages behind it first sampling their current values for the frames in
/// between (`Live::catch_up`; see `crate::live`). After unlocking, the old values they then hold
/// are dropped and their commands answered with that frame.
///
/// The edits were resolved (node and property indices) against graph version `ver`; if a
/// live edit switched versions since (another thread may make the switch between the output
/// thread's look at the version and this), they would name other nodes, or none: they are
/// refused instead. A command on a node that the armed live edit removes (or replaces by
/// another element) is refused when that frame would be the switch's or later: no frame
/// would show it (`Live::gone`).
fn assign_edits(shared: &Shared, ver: &Version, reader: &mut CommandReader, batch: &mut Batch<'_>) {
    if batch.edits.is_empty() {
        return;
    }
    let (frame, next_frame) = {
        let mut live = shared.live.lock();
        let next_frame = live.next_frame();
        let frame = if live.version() == ver.number {
            let first_of = |live: &crate::live::Live, of: &[Of]| {
                let mut k = 0;
                let mut first = None::<u64>;
                for &(n, gone) in of {
                    if gone.is_none() {
                        for e in &batch.edits[k..k + n] {
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
                for (n, gone) in batch.of.iter_mut() {
                    *gone = batch.edits[k..k + *n].iter().find_map(|e| {
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
                for &(n, gone) in batch.of.iter() {
                    if gone.is_none() {
                        for e in batch.edits[k..k + n].iter_mut() {
                            if let Some(s) = e.stage() {
                                live.catch_up(s, first, &ver.snapshots, ver.topo.cap);
                                live.commanded(s, first);
                            }
                            live.apply(e);
                        }
                    }
                    k += n;
                }
                shared.counters.set_tempo_bpm(live.tempo());
            }
            Some(first)
        } else {
            None
        };
        (frame, next_frame)
    };
    batch.edits.clear();
    for (p, (_, gone)) in batch.posted.drain(..).zip(batch.of.drain(..)) {
        match (frame, gone) {
            (Some(_), Some((s, fate, at))) => {
                let reason = crate::live::gone_reason(ver.live_spec.label(s), fate, at);
                refuse(shared, reader, p, reason);
            }
            // (None: only commands without edits are left, transport ones of a batch.)
            (Some(frame), None) => reader.reply(
                p,
                Outcome::Applied {
                    frame: frame.unwrap_or(next_frame),
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
pub(super) fn refuse(shared: &Shared, reader: &mut CommandReader, p: Posted, reason: String) {
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
