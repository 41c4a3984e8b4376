//! Pushing an op on up to 4 vars allocates nothing in steady state: a counting allocator
//! watches the pushing thread of a naive engine, which also runs the ops (so their whole path
//! is counted), while it pushes ops through builders that own their var lists.
//!
//! The counting allocator is the global allocator of the whole test binary (it counts per
//! thread, at the cost of a thread-local add per allocation); the test runs in a process of its
//! own (`common::isolated`), where no other test's engine runs beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use crate::common::isolated::{alone, test_name};
use depengine::{Engine, EngineConfig, EngineKind};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees carry over; the count is a const-initialised thread local, which never
// allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // `try_with`: the thread's locals may already be gone while it exits.
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    /// `System`'s own, not the default `alloc` and a fill: `calloc` gets fresh pages from the
    /// system already zeroed, without touching them, and the resident memory that
    /// `memory_returned.rs` measures in this binary must not grow by pages nobody used yet.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

#[test]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn pushing_on_up_to_four_vars_allocates_nothing() {
    if !alone(test_name!(pushing_on_up_to_four_vars_allocates_nothing)) {
        return;
    }
    let engine = Engine::new(EngineConfig::default().kind(EngineKind::Naive)).unwrap();
    let vars: Vec<_> = (0..4).map(|_| engine.new_var().unwrap()).collect();
    let [a, b, c, d] = vars[..] else {
        unreachable!()
    };
    let round = || {
        for _ in 0..100 {
            engine
                .op("two in, two out")
                .reads([a, b])
                .writes([c, d])
                .push_sync(|_| {})
                .unwrap();
            let mut op = engine.op("kept");
            op = op.reads(vars.iter().take(1)).writes(&vars[1..]);
            op.push_sync(|_| Ok(())).unwrap();
        }
    };
    // Warm up: the thread's frames and the graph's storage grow to their steady size.
    round();
    let before = allocations();
    round();
    assert_eq!(allocations() - before, 0, "allocations in 200 pushes");
}
