//! A MIDI byte-stream parser for raw MIDI devices and FIFOs (`/dev/snd/midiC1D0`, a pipe):
//! running status, real-time bytes anywhere (even inside a message), System Exclusive skipped
//! without being stored, stray data bytes and cut-off messages counted.
//!
//! The parser holds a fixed few bytes of state: no input, however long or malformed, makes it
//! allocate, grow or panic.

/// A channel message the surface acts on. Channels are 0..=15 here (1..=16 in text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// Note on with a velocity above 0.
    NoteOn {
        /// 0..=15.
        channel: u8,
        /// 0..=127.
        note: u8,
        /// 1..=127.
        velocity: u8,
    },
    /// Note off, or a note on with velocity 0.
    NoteOff {
        /// 0..=15.
        channel: u8,
        /// 0..=127.
        note: u8,
    },
    /// Control change.
    Cc {
        /// 0..=15.
        channel: u8,
        /// Controller number, 0..=127.
        number: u8,
        /// 0..=127.
        value: u8,
    },
    /// A complete message of another kind (program change, pitch bend, aftertouch, system
    /// common): parsed, not used.
    Other,
}

/// What the parser has seen besides the messages it returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseCounts {
    /// Data bytes with no status to belong to, and undefined status bytes (0xF4, 0xF5, a 0xF7
    /// outside a System Exclusive).
    pub stray: u64,
    /// Messages cut off by a new status byte before their data was complete.
    pub truncated: u64,
    /// System Exclusive messages skipped.
    pub sysex: u64,
    /// Real-time bytes (clock, start, stop, active sensing, ...), ignored.
    pub realtime: u64,
}

/// The byte-stream parser; feed it with [`push`](Self::push).
#[derive(Debug, Clone, Default)]
pub struct Parser {
    /// The status in force (running status for channel messages), 0 for none.
    status: u8,
    /// Data bytes of the message being read.
    data: [u8; 2],
    /// How many of them have arrived.
    have: u8,
    /// Inside a System Exclusive message (its bytes are skipped).
    in_sysex: bool,
    /// The counts so far.
    pub counts: ParseCounts,
}

/// Data bytes a status takes, `None` for an undefined status.
fn data_len(status: u8) -> Option<u8> {
    match status {
        0x80..=0xBF | 0xE0..=0xEF => Some(2),
        0xC0..=0xDF => Some(1),
        0xF1 | 0xF3 => Some(1),
        0xF2 => Some(2),
        0xF6 => Some(0),
        _ => None,
    }
}

impl Parser {
    /// A parser with no status yet.
    pub fn new() -> Self {
        Parser::default()
    }

    /// Feeds one byte; returns the message it completes, if any.
    pub fn push(&mut self, byte: u8) -> Option<Message> {
        if byte >= 0xF8 {
            // Real-time: may come anywhere, changes nothing.
            self.counts.realtime += 1;
            return None;
        }
        if byte < 0x80 {
            return self.data(byte);
        }
        // A status byte: it ends any message or System Exclusive in progress.
        if self.in_sysex {
            self.in_sysex = false;
            self.counts.sysex += 1;
            if byte == 0xF7 {
                return None;
            }
        } else if self.have > 0 {
            self.counts.truncated += 1;
        }
        self.have = 0;
        self.status = 0;
        match byte {
            0xF0 => self.in_sysex = true,
            _ => match data_len(byte) {
                Some(0) => return Some(Message::Other),
                Some(_) => self.status = byte,
                None => self.counts.stray += 1,
            },
        }
        None
    }

    fn data(&mut self, byte: u8) -> Option<Message> {
        if self.in_sysex {
            return None;
        }
        let Some(len) = (self.status != 0).then(|| data_len(self.status)).flatten() else {
            self.counts.stray += 1;
            return None;
        };
        self.data[usize::from(self.have)] = byte;
        self.have += 1;
        if self.have < len {
            return None;
        }
        self.have = 0;
        let status = self.status;
        if status >= 0xF0 {
            // System common messages have no running status.
            self.status = 0;
            return Some(Message::Other);
        }
        let channel = status & 0x0F;
        let [a, b] = self.data;
        Some(match status & 0xF0 {
            0x90 if b > 0 => Message::NoteOn {
                channel,
                note: a,
                velocity: b,
            },
            0x80 | 0x90 => Message::NoteOff { channel, note: a },
            0xB0 => Message::Cc {
                channel,
                number: a,
                value: b,
            },
            _ => Message::Other,
        })
    }

    /// Feeds every byte of `bytes`, calling `f` with each message completed.
    pub fn feed(&mut self, bytes: &[u8], mut f: impl FnMut(Message)) {
        for &b in bytes {
            if let Some(m) = self.push(b) {
                f(m);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> (Vec<Message>, ParseCounts) {
        let mut p = Parser::new();
        let mut out = Vec::new();
        p.feed(bytes, |m| out.push(m));
        (out, p.counts)
    }

    fn cc(channel: u8, number: u8, value: u8) -> Message {
        Message::Cc {
            channel,
            number,
            value,
        }
    }

    #[test]
    fn channel_messages_and_running_status() {
        let (m, c) = parse(&[
            0xB1, 7, 100, 8, 101, 7, 0, 0x90, 36, 127, 36, 0, 0x80, 37, 64,
        ]);
        assert_eq!(
            m,
            [
                cc(1, 7, 100),
                cc(1, 8, 101),
                cc(1, 7, 0),
                Message::NoteOn {
                    channel: 0,
                    note: 36,
                    velocity: 127
                },
                Message::NoteOff {
                    channel: 0,
                    note: 36
                },
                Message::NoteOff {
                    channel: 0,
                    note: 37
                },
            ]
        );
        assert_eq!(c, ParseCounts::default());
        // One-data-byte messages keep running status too.
        let (m, _) = parse(&[0xC0, 5, 6, 0xBF, 1, 2]);
        assert_eq!(m, [Message::Other, Message::Other, cc(15, 1, 2)]);
    }

    #[test]
    fn realtime_bytes_anywhere_change_nothing() {
        let (m, c) = parse(&[0xF8, 0xB0, 0xF8, 7, 0xFE, 64, 0xFA, 8, 0xFC, 65, 0xFF]);
        assert_eq!(m, [cc(0, 7, 64), cc(0, 8, 65)]);
        assert_eq!(c.realtime, 6);
        assert_eq!((c.stray, c.truncated), (0, 0));
        // Inside a System Exclusive too.
        let (m, c) = parse(&[0xF0, 0x7E, 0xF8, 0x01, 0xF7, 0xB0, 1, 2]);
        assert_eq!(m, [cc(0, 1, 2)]);
        assert_eq!((c.sysex, c.realtime), (1, 1));
    }

    #[test]
    fn sysex_is_skipped_and_ends_at_any_status() {
        let mut long = vec![0xF0];
        long.extend(std::iter::repeat_n(0x55, 100_000));
        long.extend([0xF7, 0xB0, 1, 2]);
        let (m, c) = parse(&long);
        assert_eq!(m, [cc(0, 1, 2)]);
        assert_eq!(c.sysex, 1);
        // An unterminated one ends at the next status byte; running status is gone after it.
        let (m, c) = parse(&[0xB0, 1, 1, 0xF0, 1, 2, 0x90, 36, 100, 5, 6]);
        assert_eq!(
            m,
            [
                cc(0, 1, 1),
                Message::NoteOn {
                    channel: 0,
                    note: 36,
                    velocity: 100
                },
                Message::NoteOn {
                    channel: 0,
                    note: 5,
                    velocity: 6
                }
            ]
        );
        assert_eq!(c.sysex, 1);
        let (m, c) = parse(&[0xB0, 1, 1, 0xF0, 0xF7, 3, 4]);
        assert_eq!(m, [cc(0, 1, 1)]);
        assert_eq!(c.stray, 2, "no running status after a SysEx");
    }

    #[test]
    fn truncated_messages_and_stray_bytes_are_counted() {
        // A CC cut off after its number, then a complete one; data with no status; a stray F7;
        // undefined F4/F5.
        let (m, c) = parse(&[1, 2, 0xB0, 7, 0xB0, 7, 9, 0xF7, 0xF4, 3, 0xF5]);
        assert_eq!(m, [cc(0, 7, 9)]);
        assert_eq!(c.truncated, 1);
        assert_eq!(c.stray, 2 + 1 + 2 + 1);
        // A system common message clears running status.
        let (m, c) = parse(&[0xB0, 1, 2, 0xF3, 4, 5, 6]);
        assert_eq!(m, [cc(0, 1, 2), Message::Other]);
        assert_eq!(c.stray, 2);
        // Tune request (no data) is a whole message at once.
        assert_eq!(parse(&[0xF6]).0, [Message::Other]);
        // A message cut off at the end of the input is simply not complete.
        let (m, c) = parse(&[0xB0, 7]);
        assert!(m.is_empty());
        assert_eq!(c, ParseCounts::default());
    }

    /// Issue #21: after a megabyte of random bytes, the next whole message is parsed (the
    /// parser resynchronises on its status byte), and so is one with its running status.
    #[test]
    fn a_valid_message_after_a_megabyte_of_garbage_is_parsed() {
        for seed in [0x9E37_79B9_7F4A_7C15u64, 0x2545_F491_4F6C_DD1D, 7] {
            let mut x = seed;
            let mut p = Parser::new();
            for _ in 0..1 << 20 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                p.push(x as u8);
            }
            let (mut m, counts) = (Vec::new(), p.counts);
            p.feed(&[0xB3, 7, 99, 8, 0xF8, 100], |msg| m.push(msg));
            assert_eq!(m, [cc(3, 7, 99), cc(3, 8, 100)], "seed {seed:#x}");
            assert!(counts.stray > 0 && counts.truncated > 0, "{counts:?}");
        }
    }

    /// Random bytes never panic, and every message returned is well-formed.
    #[test]
    fn random_bytes_never_panic() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut p = Parser::new();
        let mut n = 0;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if let Some(m) = p.push(x as u8) {
                n += 1;
                match m {
                    Message::Cc {
                        channel,
                        number,
                        value,
                    } => assert!(channel < 16 && number < 128 && value < 128),
                    Message::NoteOn {
                        channel,
                        note,
                        velocity,
                    } => assert!(channel < 16 && note < 128 && (1..128).contains(&velocity)),
                    Message::NoteOff { channel, note } => assert!(channel < 16 && note < 128),
                    Message::Other => {}
                }
            }
        }
        assert!(n > 1000, "{n}");
    }
}
