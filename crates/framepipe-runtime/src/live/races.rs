//! Commands racing a live edit: what the edit on its way does to each running node
//! ([`Fate`]), when it may switch ([`Live::arm`]), which commands it refuses ([`Live::gone`]),
//! and what a replaced node takes from the running one ([`Live::carry`]).

use super::{Live, LiveStage};

/// What a live edit does to a running node, as far as the commands on it are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// The node goes on in the next version (kept, or replaced by a node of the same name and
    /// element, which takes the values commands set on it while the edit was on its way).
    GoesOn,
    /// The next version has no node of its name.
    Removed,
    /// The next version's node of its name is of another element.
    Replaced,
}

impl Live {
    /// A live edit was read (after every command read before it, before every command read
    /// after it): the commands from now on are the ones its switch carries into a replaced
    /// node (see [`Live::carry`]).
    pub fn edit_read(&mut self) {
        self.epoch += 1;
        for st in &mut self.stages {
            st.since_edit = None;
        }
    }

    /// A command on stage `s` was assigned from frame `first` (its reply's frame).
    pub fn commanded(&mut self, s: usize, first: u64) {
        let st = &mut self.stages[s];
        st.since_edit = Some(st.since_edit.map_or(first, |f| f.max(first)));
    }

    /// The edit on its way is armed (under the scheduler lock, which is taken first): it may
    /// switch at frame `at` at the earliest, but after the first frame of the commands read
    /// since it was read on the nodes it removes or replaces by another element (so that such
    /// a command, answered with that frame, shows there; a node that goes on shows it in
    /// either version). Notes each running node's `fates` (indexed like the stages; an edit
    /// without them changes no fate) and the switch frame; returns that frame.
    pub fn arm(&mut self, at: u64, fates: &[Fate]) -> u64 {
        let mut at = at;
        for (st, &f) in self.stages.iter_mut().zip(fates) {
            st.fate = f;
            if let (Fate::Removed | Fate::Replaced, Some(first)) = (f, st.since_edit) {
                at = at.max(first.saturating_add(1));
            }
        }
        self.switch_at = Some(at);
        at
    }

    /// Whether a command on stage `s`, whose first frame would be `first`, cannot apply: the
    /// armed edit removes its node, or replaces it by a node of another element, from a frame
    /// at or before `first`, so no frame would show it. The fate and the switch frame (for
    /// [`gone_reason`], after unlocking).
    pub fn gone(&self, s: usize, first: u64) -> Option<(Fate, u64)> {
        let at = self.switch_at.filter(|&at| first >= at)?;
        match self.stages[s].fate {
            Fate::GoesOn => None,
            f => Some((f, at)),
        }
    }

    /// A live edit's switch at frame `at` (under the scheduler lock: `maybe_switch`,
    /// `switch_overlapping`): `stages`, the next version's (`version`), become the live ones,
    /// and the running ones are left in `stages`, to be dropped off the frame path. First a
    /// node replaced by one of the same name and element passes on what was set on it since
    /// the edit was read ([`Live::carry`]); a node the edit keeps (`moves`: running index,
    /// new index) moves its values, oscillators and bypass to its new place. Each stage
    /// samples from frame `at` on. Swaps only, no allocation.
    pub(crate) fn switch_to(
        &mut self,
        stages: &mut Vec<LiveStage>,
        moved: &[bool],
        moves: &[(usize, usize)],
        version: u64,
        at: u64,
    ) {
        self.carry(stages, moved, moves);
        for &(o, j) in moves {
            if let Some(old) = self.stages.get_mut(o) {
                std::mem::swap(&mut old.params, &mut stages[j].params);
                stages[j].bypass = old.bypass;
            }
        }
        std::mem::swap(&mut self.stages, stages);
        self.switched(version, at);
    }

    /// At a live edit's switch, before the new stages `new` take over: a node that the edit
    /// replaced by a new instance of the same element under the same name (`moved[j]` false)
    /// takes the values, oscillators and bypass that commands read *after the edit* set on
    /// the running node (they are the performer's later word; the replace's own values give
    /// way to them), property by property (same name and type). What was set before the edit
    /// was read gives way to the edit's node as written. Stages that move into the new version
    /// whole (`moves`' first) are left alone: their values go with them. Swaps only, no
    /// allocation.
    fn carry(&mut self, new: &mut [LiveStage], moved: &[bool], moves: &[(usize, usize)]) {
        let epoch = self.epoch;
        for (j, ns) in new.iter_mut().enumerate() {
            if moved.get(j).copied().unwrap_or(true) {
                continue;
            }
            let Some(o) = self
                .stages
                .iter()
                .position(|os| os.label == ns.label && os.element == ns.element)
            else {
                continue;
            };
            if moves.iter().any(|&(from, _)| from == o) {
                continue;
            }
            let os = &mut self.stages[o];
            if os.bypass_touched == epoch && ns.same_shape {
                ns.bypass = os.bypass;
                ns.bypass_touched = epoch;
            }
            for np in &mut ns.params {
                let Some(op) = os
                    .params
                    .iter_mut()
                    .find(|op| op.spec.name == np.spec.name && op.spec.kind == np.spec.kind)
                else {
                    continue;
                };
                if op.touched == epoch {
                    std::mem::swap(&mut np.base, &mut op.base);
                    std::mem::swap(&mut np.last, &mut op.last);
                    np.osc = op.osc;
                    np.ramp = op.ramp;
                    np.touched = epoch;
                    np.stamp = op.stamp;
                    np.held = op.held;
                    std::mem::swap(&mut np.held_value, &mut op.held_value);
                }
            }
        }
    }

    /// After a live edit's switch at frame `at`: the stages are `version`'s, and each samples
    /// from frame `at` on. Frames of the old version still in flight (an overlapping switch)
    /// took their values at the switch, for the nodes that had not started them
    /// ([`Live::catch_up_all`]).
    fn switched(&mut self, version: u64, at: u64) {
        self.version = version;
        for st in &mut self.stages {
            st.next = at;
        }
        // The commands from now on are the new version's.
        self.epoch += 1;
        self.switch_at = None;
    }
}

/// The refusal of a command on node `label`, which a live edit ends at frame `at` (see
/// [`Live::gone`]).
pub(crate) fn gone_reason(label: &str, fate: Fate, at: u64) -> String {
    match fate {
        Fate::Replaced => format!(
            "'{label}' is replaced by a node of another element at frame {at}; send the command \
             again for the new one"
        ),
        _ => format!("no node '{label}' (removed at frame {at})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::Set;
    use framepipe_control::Oscillator;
    use framepipe_core::{PropKind, PropSpec, PropValue};

    /// A stage `label` of element `stamp` with float properties `p` and `q` at `p0`, `q0`.
    fn pq(label: &str, p0: f64, q0: f64) -> LiveStage {
        let float = PropKind::Float { min: 0.0, max: 1.0 };
        let mut st = LiveStage::new(label.into(), "stamp".into(), true, true);
        for (name, v) in [("p", p0), ("q", q0)] {
            st.add_param(
                PropSpec::new(name, float.clone(), PropValue::Float(0.0), ""),
                PropValue::Float(v),
            );
        }
        st
    }

    /// Issue #9, a command racing a live edit: at the switch, a node replaced by one of the same
    /// name and element takes what commands read *after the edit* set (`q`); what was set
    /// before it (`p`) gives way to the edit's node as written. A node that moves whole is left
    /// alone, and nothing is carried into a node of another name.
    #[test]
    fn a_replaced_node_takes_the_values_set_after_the_edit_was_read() {
        let mut live = Live::new(vec![pq("fx", 0.0, 0.0), pq("kept", 0.0, 0.0)]);
        let set = |stage, param, x| Set::Value {
            stage,
            param,
            value: PropValue::Float(x),
        };
        live.apply(&mut set(0, 0, 0.3));
        live.edit_read();
        live.apply(&mut set(0, 1, 0.7));
        live.apply(&mut Set::Bypass { stage: 0, on: true });
        live.apply(&mut set(1, 1, 0.9));
        // The next version: fx replaced (as written: p = 0.5), kept moved, other new.
        let mut new = vec![
            pq("fx", 0.5, 0.0),
            pq("kept", 0.0, 0.0),
            pq("other", 0.0, 0.0),
        ];
        live.carry(&mut new, &[false, true, false], &[(1, 1)]);
        let values = |st: &LiveStage| -> Vec<PropValue> {
            st.params.iter().map(|p| p.base.clone()).collect()
        };
        assert_eq!(
            values(&new[0]),
            vec![PropValue::Float(0.5), PropValue::Float(0.7)]
        );
        assert!(
            new[0].bypass,
            "a bypass read after the edit goes with the node"
        );
        assert_eq!(
            values(&new[1]),
            vec![PropValue::Float(0.0); 2],
            "moved whole"
        );
        assert_eq!(values(&new[2]), vec![PropValue::Float(0.0); 2]);
        assert!(!new[2].bypass);
        // After a switch the epoch moves on: what is set then stays with that version.
        live.switched(1, 10);
        live.apply(&mut set(0, 0, 0.1));
        live.edit_read();
        let mut next = vec![pq("fx", 0.5, 0.5)];
        live.carry(&mut next, &[false], &[]);
        assert_eq!(values(&next[0]), vec![PropValue::Float(0.5); 2]);
        // An oscillator attached after the edit was read goes with the node too; one on a
        // property of another type does not (the same name, another element's spec).
        let osc = Oscillator::new(framepipe_control::Shape::Sine).with_range(0.0, 1.0);
        live.apply(&mut Set::Attach {
            stage: 0,
            param: 1,
            osc,
        });
        let mut next = vec![pq("fx", 0.5, 0.5)];
        next[0].params[1].spec.kind = PropKind::Int { min: 0, max: 9 };
        let mut same = vec![pq("fx", 0.5, 0.5)];
        live.carry(&mut next, &[false], &[]);
        assert!(next[0].params[1].osc.is_none(), "another type: not carried");
        live.carry(&mut same, &[false], &[]);
        assert_eq!(same[0].params[1].osc, Some(osc));
    }

    /// Issue #9: an edit armed after a command read since it on a node it removes (answered
    /// "from frame 5", not begun yet) switches after that frame; once armed, a command on a node it removes whose
    /// first frame would be the switch frame is refused, one before it is not, and a node that
    /// goes on is never refused.
    #[test]
    fn an_armed_edit_switches_after_the_commands_read_since_it_and_ends_its_nodes() {
        let mut live = Live::new(vec![pq("fx", 0.0, 0.0), pq("kept", 0.0, 0.0)]);
        live.edit_read();
        live.commanded(0, 5);
        live.commanded(1, 8);
        // (A node that goes on holds nothing back: frame 8 shows its command in either version.)
        assert_eq!(live.arm(5, &[Fate::Removed, Fate::GoesOn]), 6);
        assert_eq!(live.gone(0, 5), None);
        assert_eq!(live.gone(0, 6), Some((Fate::Removed, 6)));
        assert_eq!(live.gone(1, 6), None);
        assert_eq!(
            gone_reason("fx", Fate::Removed, 6),
            "no node 'fx' (removed at frame 6)"
        );
        // Without a command since the edit, it switches at the frame it is armed at.
        let mut live = Live::new(vec![pq("fx", 0.0, 0.0)]);
        live.commanded(0, 9);
        live.edit_read();
        assert_eq!(live.arm(7, &[Fate::Replaced]), 7);
        assert_eq!(live.gone(0, 7), Some((Fate::Replaced, 7)));
        live.switched(1, 7);
        assert_eq!(live.gone(0, 8), None, "the switch clears the armed edit");
    }
}
