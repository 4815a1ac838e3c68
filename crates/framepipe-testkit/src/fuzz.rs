//! Seeded random inputs for the parsers' quick randomized tests: the suite's short, repeatable
//! versions of the cargo-fuzz targets in `fuzz/` (which run for millions of inputs, see
//! `scripts/fuzz`).
//!
//! An [`Inputs`] generator joins fragments of the format (keywords, numbers at and past their
//! limits, separators, quotes, non-ASCII text) into inputs, then applies a few byte-level
//! mutations to some of them (bit flips, inserted or deleted bytes, repeated or cut-off spans),
//! as libFuzzer does. The same seed gives the same inputs on every machine, so a failure names an
//! input that can be replayed.

/// A small, fast, seeded pseudo-random generator (xorshift64*). Not for anything but tests.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; 0 is replaced by a fixed non-zero state).
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x2545_F491_4F6C_DD1D
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True once in `n` times on average.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One of `items` (not empty).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// Bytes that libFuzzer's mutators like to insert: ends of ranges, line ends, a UTF-8 lead byte
/// without its continuation, a lone continuation byte.
const SPECIAL_BYTES: [u8; 10] = [0, 0xff, b'\n', b'\r', b' ', b'"', b'\\', 0xc3, 0x80, 0x7f];

/// A generator of inputs from the fragments of a format.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    rng: Rng,
    fragments: &'a [&'a str],
    separators: &'a [&'a str],
    max_parts: usize,
}

impl<'a> Inputs<'a> {
    /// Inputs of 1..=`max_parts` `fragments`, each followed by one of `separators`, from `seed`.
    pub fn new(
        seed: u64,
        fragments: &'a [&'a str],
        separators: &'a [&'a str],
        max_parts: usize,
    ) -> Self {
        assert!(!fragments.is_empty() && !separators.is_empty() && max_parts > 0);
        Inputs {
            rng: Rng::new(seed),
            fragments,
            separators,
            max_parts,
        }
    }

    /// The generator, for choices a test makes itself.
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// Fragments joined by separators, as text.
    pub fn text(&mut self) -> String {
        let mut s = String::new();
        for _ in 0..1 + self.rng.below(self.max_parts) {
            s.push_str(self.fragments[self.rng.below(self.fragments.len())]);
            s.push_str(self.separators[self.rng.below(self.separators.len())]);
        }
        s
    }

    /// [`text`](Self::text) with, one time in two, 1 to 4 byte-level mutations: the result may
    /// be invalid UTF-8.
    pub fn bytes(&mut self) -> Vec<u8> {
        let mut b = self.text().into_bytes();
        if self.rng.one_in(2) {
            for _ in 0..1 + self.rng.below(4) {
                self.mutate(&mut b);
            }
        }
        b
    }

    /// [`bytes`](Self::bytes) made valid UTF-8 (invalid sequences become U+FFFD), for parsers
    /// that take `&str`.
    pub fn mutated_text(&mut self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    /// One byte-level mutation of `b`.
    pub fn mutate(&mut self, b: &mut Vec<u8>) {
        let r = &mut self.rng;
        if b.is_empty() {
            b.push(r.pick(&SPECIAL_BYTES));
            return;
        }
        let i = r.below(b.len());
        match r.below(6) {
            0 => b[i] ^= 1 << r.below(8),
            1 => b[i] = r.pick(&SPECIAL_BYTES),
            2 => b.insert(i, r.pick(&SPECIAL_BYTES)),
            3 => {
                b.remove(i);
            }
            4 => {
                // Repeat a span (up to 16 bytes) in place.
                let end = (i + 1 + r.below(16)).min(b.len());
                let span = b[i..end].to_vec();
                b.splice(i..i, span);
            }
            _ => b.truncate(i),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_inputs() {
        let frags = ["a", "bc", "d=1"];
        let mut x = Inputs::new(7, &frags, &[" ", "!"], 5);
        let mut y = Inputs::new(7, &frags, &[" ", "!"], 5);
        let mut z = Inputs::new(8, &frags, &[" ", "!"], 5);
        let a: Vec<Vec<u8>> = (0..100).map(|_| x.bytes()).collect();
        let b: Vec<Vec<u8>> = (0..100).map(|_| y.bytes()).collect();
        let c: Vec<Vec<u8>> = (0..100).map(|_| z.bytes()).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn mutations_reach_invalid_utf8_and_every_fragment() {
        let frags = ["ü", "x"];
        let mut g = Inputs::new(1, &frags, &[" "], 3);
        let inputs: Vec<Vec<u8>> = (0..1000).map(|_| g.bytes()).collect();
        assert!(inputs.iter().any(|b| std::str::from_utf8(b).is_err()));
        assert!(inputs.iter().any(|b| b.starts_with("ü".as_bytes())));
        assert!(inputs.iter().any(|b| b.starts_with(b"x")));
    }
}
