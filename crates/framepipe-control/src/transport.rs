//! [`Transport`]: pause, single step, resume and stop, decided at frame boundaries.

use crate::command::Command;

/// What to do at a frame boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Release the next frame.
    Go,
    /// Release the next frame; it is the first after a pause, so re-anchor the frame clock
    /// first (resume without a burst of the deadlines missed while paused).
    GoAfterPause,
    /// Release nothing at this boundary (paused).
    Hold,
    /// End the run.
    Stop,
}

/// The run state: running, paused with a number of single steps pending, or stopped.
///
/// Apply the transport commands read at a frame boundary with [`apply`](Self::apply), then ask
/// [`at_boundary`](Self::at_boundary) whether to release one frame. `step N` while paused
/// releases exactly N frames, one per boundary; `step N` while running pauses and then steps.
/// Plain state, no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Transport {
    paused: bool,
    steps: u32,
    stopped: bool,
    was_held: bool,
    input_closed: bool,
}

impl Transport {
    /// Running.
    pub fn new() -> Self {
        Transport::default()
    }

    /// Applies a transport command (`pause`, `step`, `resume`, `stop`, and the queue's
    /// [`Command::EndOfInput`]); returns `false` and does nothing for the other commands.
    pub fn apply(&mut self, cmd: &Command) -> bool {
        match cmd {
            Command::Pause => {
                self.paused = true;
                self.steps = 0;
            }
            Command::Step(n) => {
                self.paused = true;
                self.steps = self.steps.saturating_add(*n);
            }
            Command::Resume => {
                self.paused = false;
                self.steps = 0;
            }
            Command::Stop => self.stopped = true,
            Command::EndOfInput => self.input_closed = true,
            _ => return false,
        }
        true
    }

    /// Whether paused (stepping counts as paused).
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Single steps still to release.
    pub fn steps_pending(&self) -> u32 {
        self.steps
    }

    /// Whether `stop` was applied (or the end of input ended a pause).
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Decides this frame boundary: releases one frame when running or when a step is pending
    /// (consuming it), holds when paused, stops when stopped — and when it would hold but no
    /// command can come any more to end the pause ([`Command::EndOfInput`]).
    pub fn at_boundary(&mut self) -> Release {
        if self.stopped {
            return Release::Stop;
        }
        if self.input_closed && self.paused && self.steps == 0 {
            self.stopped = true;
            return Release::Stop;
        }
        let go = if !self.paused {
            true
        } else if self.steps > 0 {
            self.steps -= 1;
            true
        } else {
            false
        };
        if !go {
            self.was_held = true;
            return Release::Hold;
        }
        if std::mem::take(&mut self.was_held) {
            Release::GoAfterPause
        } else {
            Release::Go
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `boundaries` frame boundaries with `cmds` applied before the given boundary;
    /// returns the frame numbers released, in order (frames are numbered from 0).
    fn run(boundaries: usize, cmds: &[(usize, Command)]) -> (Vec<u64>, Vec<Release>) {
        let mut t = Transport::new();
        let mut next_frame = 0u64;
        let mut released = Vec::new();
        let mut decisions = Vec::new();
        for b in 0..boundaries {
            for (at, c) in cmds {
                if *at == b {
                    assert!(t.apply(c));
                }
            }
            let r = t.at_boundary();
            decisions.push(r);
            match r {
                Release::Go | Release::GoAfterPause => {
                    released.push(next_frame);
                    next_frame += 1;
                }
                Release::Hold => {}
                Release::Stop => break,
            }
        }
        (released, decisions)
    }

    #[test]
    fn steps_release_exactly_the_next_frames_one_per_boundary() {
        // Run 5 frames (0..=4), pause, idle 3 boundaries, step 3, idle, resume.
        let (released, decisions) = run(
            20,
            &[
                (5, Command::Pause),
                (8, Command::Step(3)),
                (14, Command::Resume),
            ],
        );
        // k = 4 was the last frame before the pause: steps give 5, 6, 7, one per boundary.
        assert_eq!(&released[..8], &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(&decisions[5..8], &[Release::Hold; 3]);
        assert_eq!(decisions[8], Release::GoAfterPause);
        assert_eq!(&decisions[9..11], &[Release::Go, Release::Go]);
        assert_eq!(&decisions[11..14], &[Release::Hold; 3]);
        // Resume: first frame re-anchors the clock, then one per boundary, no burst, in order.
        assert_eq!(decisions[14], Release::GoAfterPause);
        assert_eq!(&decisions[15..], &[Release::Go; 5]);
        assert_eq!(released, (0..14).collect::<Vec<u64>>());
    }

    #[test]
    fn step_while_running_pauses_then_steps_and_stop_ends() {
        let (released, decisions) = run(10, &[(2, Command::Step(1)), (6, Command::Stop)]);
        assert_eq!(released, [0, 1, 2]);
        assert_eq!(decisions[2], Release::Go);
        assert_eq!(&decisions[3..6], &[Release::Hold; 3]);
        assert_eq!(decisions[6], Release::Stop);
        assert_eq!(decisions.len(), 7);
        let mut t = Transport::new();
        assert!(!t.apply(&Command::Speed(2.0)));
        assert_eq!(t.at_boundary(), Release::Go);
    }

    /// Issue #7: `pause` followed by the end of stdin hung for ever. The end of input while
    /// paused now stops the run, after the steps already asked for; while running it changes
    /// nothing.
    #[test]
    fn end_of_input_while_paused_stops_after_the_pending_steps() {
        let (released, decisions) = run(
            12,
            &[
                (2, Command::Pause),
                (4, Command::Step(2)),
                (4, Command::EndOfInput),
            ],
        );
        assert_eq!(released, [0, 1, 2, 3]);
        assert_eq!(&decisions[2..4], &[Release::Hold; 2]);
        assert_eq!(decisions[4], Release::GoAfterPause);
        assert_eq!(decisions[5], Release::Go);
        assert_eq!(decisions[6], Release::Stop);
        assert_eq!(decisions.len(), 7);

        let (released, decisions) = run(6, &[(1, Command::EndOfInput)]);
        assert_eq!(
            released,
            [0, 1, 2, 3, 4, 5],
            "running: end of input changes nothing"
        );
        assert!(!decisions.contains(&Release::Stop));

        let (_, decisions) = run(6, &[(1, Command::EndOfInput), (3, Command::Pause)]);
        assert_eq!(
            decisions[3],
            Release::Stop,
            "a pause read before the end counts"
        );
    }
}
