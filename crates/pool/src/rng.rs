//! A pseudo-random sequence (xorshift64*), whose state each thread keeps in its `WorkerLocal`,
//! and coprime strides, for the order in which a thief visits its victims.
//! Quality needs are low; speed and no shared state are what matter.

use std::cell::Cell;

/// The next pseudo-random number of the sequence kept in `state` (a thread's own, in its
/// `WorkerLocal`: see `worker_local.rs`); a zero state is seeded first.
pub(crate) fn next_u64(state: &Cell<u64>) -> u64 {
    let mut x = state.get();
    if x == 0 {
        x = seed(state);
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    state.set(x);
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Seeds from the address of the state (a thread-local's field): distinct per thread, no
/// syscall, never zero.
#[cfg(not(loom))]
fn seed(state: &Cell<u64>) -> u64 {
    (std::ptr::from_ref(state) as u64) | 1
}

/// Under loom every execution must make the same choices: a fixed seed.
#[cfg(loom)]
fn seed(_state: &Cell<u64>) -> u64 {
    0x9E37_79B9_7F4A_7C15
}

/// Every stride in `1..=n` coprime with `n`: walking `start, start + s, ...` modulo
/// `n` with such a stride visits each index exactly once, in an order that differs
/// between thieves, which spreads them over the victims.
pub(crate) fn coprimes(n: usize) -> Box<[usize]> {
    (1..=n.max(1)).filter(|&s| gcd(s, n) == 1).collect()
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn coprime_strides_visit_every_index_once() {
        for n in 1..=12 {
            for &stride in &coprimes(n) {
                let mut seen = vec![false; n];
                let mut at = n / 2;
                for _ in 0..n {
                    assert!(!seen[at], "n={n} stride={stride} revisits {at}");
                    seen[at] = true;
                    at = (at + stride) % n;
                }
            }
        }
        assert_eq!(&*coprimes(6), &[1, 5]);
    }
}
