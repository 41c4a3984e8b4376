//! Cache-line prefetch hints.
//!
//! The lines a push or a completion writes were mostly written last by another core: a var's
//! state by the pushing thread or by the worker that released it before, a waiting op's slot by
//! the thread that parked it. Where a thread knows those lines early, it asks for them early,
//! so that their transfer overlaps other work instead of stalling it:
//!
//! - a push asks for the lock line of each of its vars before it takes the first lock, so that
//!   the misses overlap instead of coming one after the other;
//! - a worker about to run an op asks for the op's vars ([`Graph::prefetch_vars`]); the op's run
//!   covers their transfer;
//! - a release asks for the slot of each of the first ops it grants while it still holds the
//!   var's lock; the rest of its critical section covers the transfer;
//! - an allocation of an op slot asks for the slot the next allocation will take (the new top
//!   of the free list), which a `free` on another core wrote last; the push that parks an op
//!   there finds it in this core's caches.
//!
//! Every line asked for is one the thread is about to write (a lock word, a wait count), so the
//! hint asks for it in the state a write needs: `prefetchw` moves the line into this core's
//! caches as its owner, taking it from the core that wrote it last, so the locked write that
//! follows finds it ready. A CPU without `prefetchw` (CPUID `PRFCHW`, which Linux lists as
//! `3dnowprefetch`; asked once) gets `prefetcht0` (SSE, so every x86_64), which moves the line
//! in shared state: the write still has to take ownership, but no longer waits for the data.
//! Elsewhere, and under Miri and loom, the hint does nothing.
//!
//! A hint changes timing only, never behaviour. Why each is kept: `docs/decisions.md`,
//! "Prefetch hints" and "`prefetchw` where the CPU has it".
//!
//! [`Graph::prefetch_vars`]: crate::Graph::prefetch_vars

/// Starts moving the cache line holding `ptr` into this core's caches, for a write.
#[inline]
pub(crate) fn prefetch_line<T>(ptr: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
    if has_prefetchw() {
        // SAFETY: `prefetchw` is a hint, which this CPU has (`has_prefetchw`). It never faults,
        // whatever the address, and neither reads nor writes anything the program can observe
        // (it changes only where the line is cached), so `ptr` needs no validity at all.
        unsafe {
            core::arch::asm!(
                "prefetchw [{line}]",
                line = in(reg) ptr,
                options(nostack, preserves_flags, readonly),
            );
        }
    } else {
        // SAFETY: as above; `prefetcht0` is SSE, which every x86_64 CPU has.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(ptr.cast());
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri), not(loom))))]
    let _ = ptr;
}

/// Whether the CPU has `prefetchw`: CPUID leaf `0x8000_0001`, ECX bit 8 (`PRFCHW`). Asked once;
/// afterwards one load.
#[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
fn has_prefetchw() -> bool {
    use core::arch::x86_64::__cpuid;
    static HAS: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        // Leaf `0x8000_0000` gives the highest extended leaf; every x86_64 CPU has both.
        __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 8) != 0
    });
    *HAS
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
