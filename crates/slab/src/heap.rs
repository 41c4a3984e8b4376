//! Asking the allocator to return freed memory to the system, after a trim.
//!
//! Freed memory goes back to the allocator, which does not always return it to the system:
//! glibc's `malloc` unmaps large blocks at once and trims the top of its heaps by itself, but
//! keeps free pages in the middle of a heap, where the memory of a drained burst mostly lies
//! (op-slab buckets below the mmap threshold, which glibc raises as large blocks are freed, and
//! the vars' queue spills, many medium blocks). `malloc_trim(0)` (glibc 2.8 and later) releases
//! the free pages of every arena, wherever they lie: it changes nothing but residency, takes
//! the arenas' locks itself, and costs a walk of their free lists. [`Slab::trim_to_system`](crate::Slab::trim_to_system) (the
//! graph's and the [`BlockStore`](crate::BlockStore)'s trims) calls it only when it freed
//! something, that is once per burst. Elsewhere (or with another global allocator, which
//! glibc's trim does not concern) the allocator keeps its own policy.

/// Returns free heap pages to the system, where the allocator needs asking.
#[cfg(all(target_os = "linux", target_env = "gnu", not(miri), not(loom)))]
pub(crate) fn release_free_pages() {
    // SAFETY: `malloc_trim` has no preconditions: it locks each arena itself and only gives
    // free pages back.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Returns free heap pages to the system, where the allocator needs asking: here it does not.
#[cfg(not(all(target_os = "linux", target_env = "gnu", not(miri), not(loom))))]
pub(crate) fn release_free_pages() {}
