//! `SplitMix64`: the soak's one source of randomness, so that a seed replays a run's ops.

/// A `SplitMix64` generator.
#[derive(Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator for one part of the run (a pusher of an epoch, ...), independent of the
    /// others' draws, so that each part replays alone from the run's seed.
    pub(crate) fn derive(seed: u64, parts: &[u64]) -> Self {
        Rng(parts.iter().fold(seed, |acc, &part| mix(acc, part)))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        finalize(self.0)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True once in `n` draws on average.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
}

/// `SplitMix64`'s output function.
fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes two words into one: what ops compute, and how seeds are derived.
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    finalize(a ^ b.rotate_left(17).wrapping_add(0x9E37_79B9_7F4A_7C15))
}
