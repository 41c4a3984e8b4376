//! [`WorkerLocal`]: what a thread remembers about itself as a pool worker, and as a thread
//! that pushes into pools, in the one thread-local of the crate.
//!
//! Only the thread itself touches its worker-local state, so the fields are plain `Cell`s:
//!
//! | field | set by | what it says |
//! |---|---|---|
//! | `pool`, `index` | `Shared::run_worker`, at start and exit | which pool's worker this thread is |
//! | `overflowing` | `Shared::inject` | a task runs inline because the worker's queue was full |
//! | `random` | `next_random` | the thread's pseudo-random sequence (`rng.rs`), for the order in which a thief visits its victims |
//! | `skipped_wakes` | `check_due_after_skipped_wake` | pushes into a pool's injector by a thread that is not that pool's worker, which skipped their wake-up for a spinner since the thread last checked that spinners take its jobs (`Shared::wake_for_push`); one count for all pools |
//!
//! # The next-task slot
//!
//! Beside its queue, each worker has a slot in the pool's shared state (`Shared::next`, generic
//! over the pool's items, so it cannot live in this thread-local), which only that worker
//! touches. A task spawned with [`ThreadPool::spawn_next`](crate::ThreadPool::spawn_next) by a
//! worker goes into the worker's slot rather than into its queue: the worker runs it as soon as the current
//! task returns (its data is still in this core's cache), no other worker can steal it, and no
//! sleeper is woken for it (tokio's LIFO slot). The slot holds one task; a second `spawn_next`
//! before the worker comes back to its loop queues its task as `spawn` does.
//!
//! Nothing is stranded in a slot: only the owner fills it, from inside a task, and the owner
//! looks at the slot first whenever it looks for work (`find_work`), before it spins, sleeps or
//! exits. What a slot holds is therefore never counted by `has_work`: no other thread could run it.

use depengine_sync::thread_local;
use std::cell::Cell;

/// The pool worker the current thread is, if any, and its count of skipped wake-ups (see the
/// module documentation).
pub(crate) struct WorkerLocal {
    /// The address of the pool's `Shared`, 0 if this thread is no pool's worker.
    pool: Cell<usize>,
    /// The worker's index in its pool.
    index: Cell<usize>,
    /// Whether the task running now was run inline because the worker's queue was full.
    overflowing: Cell<bool>,
    /// The state of the thread's pseudo-random sequence (0: not seeded yet).
    random: Cell<u64>,
    /// Pushes into an injector that skipped their wake-up since the last check (see
    /// `check_due_after_skipped_wake`).
    skipped_wakes: Cell<u32>,
}

impl WorkerLocal {
    const fn new() -> Self {
        WorkerLocal {
            pool: Cell::new(0),
            index: Cell::new(0),
            overflowing: Cell::new(false),
            random: Cell::new(0),
            skipped_wakes: Cell::new(0),
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    // `const`: no lazy initialization to check on each access (every spawn reads it).
    static LOCAL: WorkerLocal = const { WorkerLocal::new() };
}

#[cfg(loom)]
thread_local! {
    static LOCAL: WorkerLocal = WorkerLocal::new();
}

/// Makes the current thread worker `index` of the pool whose `Shared` is at `pool` (0: no pool).
pub(crate) fn set_worker(pool: usize, index: usize) {
    LOCAL.with(|cx| {
        cx.pool.set(pool);
        cx.index.set(index);
    });
}

/// The index of the current thread in the pool whose `Shared` is at `pool`, if it is one of its
/// workers.
#[inline]
pub(crate) fn worker_index(pool: usize) -> Option<usize> {
    LOCAL.with(|cx| (cx.pool.get() == pool).then(|| cx.index.get()))
}

/// Whether the current thread runs a task inline because its queue was full.
#[inline]
pub(crate) fn overflowing() -> bool {
    LOCAL.with(|cx| cx.overflowing.get())
}

/// Marks the current thread as running a task inline because its queue was full, or not.
pub(crate) fn set_overflowing(overflowing: bool) {
    LOCAL.with(|cx| cx.overflowing.set(overflowing));
}

/// The next number of the current thread's pseudo-random sequence (see `rng.rs`).
pub(crate) fn next_random() -> u64 {
    LOCAL.with(|cx| crate::rng::next_u64(&cx.random))
}

/// Counts a push of the current thread that skipped its wake-up because a worker spun;
/// whether this is the `every`-th since the last time it said so (then the caller checks that
/// the spinners take the jobs, `Shared::wake_for_push`).
#[inline]
pub(crate) fn check_due_after_skipped_wake(every: u32) -> bool {
    LOCAL.with(|cx| {
        let skipped = cx.skipped_wakes.get() + 1;
        let due = skipped >= every;
        cx.skipped_wakes.set(if due { 0 } else { skipped });
        due
    })
}
