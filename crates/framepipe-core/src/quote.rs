//! Quoting untrusted text in a message: one helper for every surface (issue #21).
//!
//! A refusal names the offending value, but the value comes from whoever sent it: a 60 KB OSC
//! string, a command line, a file name. Quoted whole, a flood of them floods the log (1.3 GB of
//! stderr in 2 s, issue #21), and quoted raw, a control character breaks the one-line message.
//! [`quote`] puts a value in quotes, cut to [`QUOTE_CHARS`] characters with its length in bytes
//! after it when longer, control characters escaped:
//!
//! ```
//! use framepipe_core::quote::quote;
//! assert_eq!(quote("blurr"), "'blurr'");
//! assert_eq!(quote(&"a".repeat(60_000)), format!("'{}…' (60000 bytes)", "a".repeat(60)));
//! assert_eq!(quote("a\nb"), "'a\\nb'");
//! ```
//!
//! Never quote bytes read from a file or a stream (a header, a line of a project file): a
//! message says what is wrong with them instead ("not a YUV4MPEG2 file", "line 3 is not
//! `key = value`"), so that no surface can be used to read a file it may not open.

/// The most characters of a value [`quote`] shows.
pub const QUOTE_CHARS: usize = 60;

/// `text` in single quotes for a message: whole when it has at most [`QUOTE_CHARS`]
/// characters, else its first [`QUOTE_CHARS`] followed by `…` and its length in bytes
/// (`'aaaa…' (60000 bytes)`). Control characters are escaped (`\n`, `\u{1b}`), so the message
/// stays on one line. Allocates at most about `4 * QUOTE_CHARS` bytes, whatever the length of
/// `text`.
pub fn quote(text: &str) -> String {
    quote_at_most(text, QUOTE_CHARS)
}

/// [`quote`] with another limit (`max` characters shown).
pub fn quote_at_most(text: &str, max: usize) -> String {
    quoted(text, max, text.len(), false)
}

/// Bytes that may not be UTF-8 (a datagram, a file name), quoted as [`quote`] does: an invalid
/// sequence shows as `U+FFFD`; the length given is of `bytes`.
pub fn quote_bytes(bytes: &[u8]) -> String {
    // QUOTE_CHARS characters take at most 4 bytes each: only that much is decoded.
    let head = &bytes[..bytes.len().min(4 * QUOTE_CHARS)];
    let text = String::from_utf8_lossy(head);
    quoted(&text, QUOTE_CHARS, bytes.len(), head.len() < bytes.len())
}

/// The first `max` characters of `text` quoted; cut (`…' (LEN bytes)`) when `text` has more,
/// or when `more` says the text itself was already cut from something `len` bytes long.
fn quoted(text: &str, max: usize, len: usize, more: bool) -> String {
    let mut out = String::with_capacity(max.min(text.len()) + 24);
    out.push('\'');
    let mut chars = text.chars();
    for c in chars.by_ref().take(max) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if more || chars.next().is_some() {
        out.push_str(&format!("…' ({len} bytes)"));
    } else {
        out.push('\'');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_quoted_whole() {
        assert_eq!(quote(""), "''");
        assert_eq!(quote("glow.blur"), "'glow.blur'");
        let exactly = "x".repeat(QUOTE_CHARS);
        assert_eq!(quote(&exactly), format!("'{exactly}'"));
    }

    #[test]
    fn long_values_are_cut_with_their_length() {
        let long = "é".repeat(QUOTE_CHARS + 1);
        let q = quote(&long);
        assert_eq!(
            q,
            format!("'{}…' ({} bytes)", "é".repeat(QUOTE_CHARS), long.len())
        );
        let huge = "a".repeat(1 << 20);
        assert!(quote(&huge).len() < 100);
        assert!(quote(&huge).ends_with("(1048576 bytes)"));
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(quote("a\r\nb\u{1b}[2J"), "'a\\r\\nb\\u{1b}[2J'");
        assert!(!quote(&"\n".repeat(500)).contains('\n'));
    }

    #[test]
    fn bytes_are_quoted_lossily_with_the_whole_length() {
        assert_eq!(quote_bytes(b"abc"), "'abc'");
        assert_eq!(quote_bytes(b"a\xffb"), "'a\u{fffd}b'");
        let big = vec![b'z'; 70_000];
        assert_eq!(
            quote_bytes(&big),
            format!("'{}…' (70000 bytes)", "z".repeat(QUOTE_CHARS))
        );
        // The head's characters all fit but the rest is cut (4-byte characters).
        let wide = "😀".repeat(QUOTE_CHARS).into_bytes();
        let mut more = wide.clone();
        more.extend_from_slice(b"tail");
        assert!(quote_bytes(&more).ends_with(&format!("…' ({} bytes)", more.len())));
        assert_eq!(
            quote_bytes(&wide),
            format!("'{}'", "😀".repeat(QUOTE_CHARS))
        );
    }
}
