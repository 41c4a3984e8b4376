//! Cache-line prefetch hints.
//!
//! The lines a completion writes were mostly written last by another core: a var's state by
//! the pushing thread (or the worker that released it before), a waiting op's slot by the
//! thread that parked it. Where the completing thread knows those lines early, it asks for them
//! early, so that their transfer overlaps other work instead of stalling the completion:
//!
//! - a worker about to run an op asks for the op's vars ([`Graph::prefetch_vars`]); the op's run
//!   covers their transfer;
//! - a release asks for the slot of each op it grants while it still holds the var's lock; the
//!   rest of its critical section covers the transfer.
//!
//! A hint changes timing only, never behaviour. `prefetcht0` (SSE, so every x86_64) moves the
//! line in shared state; the write that follows still has to take ownership, but no longer waits
//! for the data. Elsewhere the hint does nothing. Measured with `cargo xtask bench-ab`: see
//! `docs/bench-history.md`.
//!
//! [`Graph::prefetch_vars`]: crate::Graph::prefetch_vars

/// Starts moving the cache line holding `ptr` into this core's caches.
#[inline]
pub(crate) fn prefetch_line<T>(ptr: *const T) {
    // SAFETY: `prefetcht0` is a hint. It never faults, whatever the address, and neither reads
    // nor writes anything the program can observe, so `ptr` needs no validity at all.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(ptr.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

#[cfg(test)]
mod tests {
    use super::prefetch_line;

    /// Valid and dangling addresses alike: a hint never faults (Miri runs this too).
    #[test]
    fn any_address_is_fine() {
        let value = 7_u64;
        let ptr = std::ptr::from_ref(&value);
        prefetch_line(ptr);
        prefetch_line(ptr.cast::<u8>().wrapping_add(1 << 20));
        prefetch_line(std::ptr::null::<u8>());
        assert_eq!(value, 7);
    }
}
