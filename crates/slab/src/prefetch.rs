//! Cache-line prefetch hints.
//!
//! The line a thread is about to write was often written last by another core: a slot is
//! taken by one thread and given back by another. Where a thread knows such a line early, it
//! asks for it early, so that its transfer overlaps other work instead of stalling it. An
//! allocation asks for the slot the next allocation will take (the new top of the free list),
//! which a `free` on another core wrote last ([`Slab::prefetch`]); the push that parks an op
//! there finds it in this core's caches. The graph asks for its vars' lines and the slots of
//! the ops it grants (`docs/graph.md`, "Prefetch hints").
//!
//! Every line asked for is one the thread is about to write (a lock word, a wait count), so the
//! hint asks for it in the state a write needs: `prefetchw` moves the line into this core's
//! caches as its owner, taking it from the core that wrote it last, so the locked write that
//! follows finds it ready. A CPU without `prefetchw` (CPUID `PRFCHW`, which Linux lists as
//! `3dnowprefetch`; asked once) gets `prefetcht0` (SSE, so every `x86_64`), which moves the line
//! in shared state: the write still has to take ownership, but no longer waits for the data.
//! Elsewhere, and under Miri and loom, the hint does nothing.
//!
//! A hint changes timing only, never behaviour. Why each is kept: `docs/decisions.md`,
//! "Prefetch hints" and "`prefetchw` where the CPU has it".
//!
//! [`Slab::prefetch`]: crate::Slab::prefetch

/// Starts moving the cache line holding `ptr` into this core's caches, for a write: a hint,
/// which changes timing only. `ptr` need not be valid (see the module documentation of
/// `prefetch.rs` for the instruction).
///
/// ```
/// let word = std::sync::atomic::AtomicU64::new(0);
/// depengine_slab::prefetch_line(&raw const word);
/// word.store(1, std::sync::atomic::Ordering::Relaxed);
/// ```
#[inline]
pub fn prefetch_line<T>(ptr: *const T) {
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

#[cfg(all(test, not(loom)))]
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
