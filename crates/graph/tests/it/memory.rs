//! Memory returns to its baseline once every op completed, and the steady state allocates
//! nothing: a counting allocator watches the test thread while the same conflicting workload
//! (ops parked, released in runs, vars deleted and recreated) runs round after round.
//!
//! The counting allocator is the global allocator of the whole test binary; it counts per
//! thread, so the tests that run beside this one on other threads do not disturb its counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use depengine_graph::{Graph, ReadyOp, Var};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    static LIVE_BYTES: Cell<isize> = const { Cell::new(0) };
}

fn note(allocations: usize, bytes: isize) {
    // `try_with`: the thread's locals may already be gone while it exits.
    let _ = ALLOCATIONS.try_with(|a| a.set(a.get() + allocations));
    let _ = LIVE_BYTES.try_with(|b| b.set(b.get() + bytes));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so `System`'s
// guarantees carry over; the bookkeeping touches only const-initialised thread locals, which
// never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(1, layout.size().cast_signed());
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(0, -layout.size().cast_signed());
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes through
        // `alloc`/`realloc` above).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(1, new_size.cast_signed() - layout.size().cast_signed());
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn counters() -> (usize, isize) {
    (ALLOCATIONS.with(Cell::get), LIVE_BYTES.with(Cell::get))
}

const VARS: usize = 8;

/// Ops pushed per round (fewer under Miri).
const OPS_PER_ROUND: usize = if cfg!(miri) { 16 } else { 64 };

/// The op slab's recycling batch (`RECYCLE_BATCH` of op slots, `crates/slab/src/slab.rs`): it
/// may hold up to this many slots beyond its peak use.
const RECYCLE_BATCH: usize = 32;

/// One round: 64 ops, each writing one var and reading two others, so most ops park; complete
/// them all, then delete one var and create a replacement.
fn round(
    graph: &Graph<u64>,
    vars: &mut [Var; VARS],
    ready: &mut Vec<ReadyOp<u64>>,
    running: &mut Vec<ReadyOp<u64>>,
    turn: usize,
) {
    for i in 0..OPS_PER_ROUND {
        let w = i % VARS;
        let inputs = [vars[(w + 1) % VARS], vars[(w + 3) % VARS]];
        graph.push(&inputs, &[vars[w]], i as u64, ready).unwrap();
    }
    while !ready.is_empty() {
        std::mem::swap(ready, running);
        for op in running.drain(..) {
            graph.complete(op, Ok(()), ready).unwrap();
        }
    }
    let old = vars[turn % VARS];
    graph.delete_var(old, || {}).unwrap().call_if_reclaimed();
    vars[turn % VARS] = graph.new_var().unwrap();
}

#[test]
fn steady_state_allocates_nothing_and_memory_returns_to_baseline() {
    let graph: Graph<u64> = Graph::new();
    let mut vars: [Var; VARS] = std::array::from_fn(|_| graph.new_var().unwrap());
    let mut ready = Vec::with_capacity(128);
    let mut running = Vec::with_capacity(128);
    // Warm-up: grows the op slab, the var queues and the recycled slots to their working size.
    // The op slab recycles in batches (`RECYCLE_BATCH`), so it may go on growing, up to a
    // batch beyond its peak use, within the buckets the warm-up allocated (Miri's rounds are
    // shorter, so it takes more of them to allocate those).
    let warm_up = if cfg!(miri) { 16 } else { 2 };
    for turn in 0..warm_up {
        round(&graph, &mut vars, &mut ready, &mut running, turn);
    }
    let warm = graph.stats();
    let (allocations, bytes) = counters();
    for turn in warm_up..warm_up + 8 {
        round(&graph, &mut vars, &mut ready, &mut running, turn);
    }
    let (allocations_after, bytes_after) = counters();
    assert_eq!(allocations_after - allocations, 0, "steady state allocated");
    assert_eq!(bytes_after, bytes, "memory did not return to its baseline");
    let stats = graph.stats();
    assert_eq!(stats.live_op_blocks, 0);
    assert!(
        stats.pooled_op_blocks <= warm.pooled_op_blocks.max(OPS_PER_ROUND + RECYCLE_BATCH),
        "op pool grew to {} slots, from {} after the warm-up",
        stats.pooled_op_blocks,
        warm.pooled_op_blocks
    );
    assert_eq!(stats.var_slots, warm.var_slots, "var slots grew");
    assert_eq!(stats.live_vars, VARS);
    for var in vars {
        assert_eq!(graph.var_status(var).unwrap().pending(), 0);
    }
}
