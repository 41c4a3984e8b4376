//! loom: small pools doing spawn, steal, sleep, wake and shutdown; every task runs
//! exactly once, nobody sleeps through work, and shutdown always completes.
//!
//! The shutdown protocol (`src/worker.rs`) is a Dekker pair between the dropper
//! (`phase = DRAINING`, fence, read the idle count) and the last worker to go idle
//! (count itself in, fence, read the phase). What fails when a piece of it is weakened
//! or removed (`docs/loom.md` has the full table):
//! - either `fence(SeqCst)` (`shut_down`'s or `wait_for_work`'s):
//!   `every_worker_exits_when_the_pool_is_dropped_as_they_go_to_sleep`,
//!   `a_spawn_just_before_drop_runs_on_a_single_worker`, `spawn_from_outside_then_shutdown`,
//!   `nested_spawn_in_scope_then_shutdown` and `install_from_outside_wakes_the_sleeping_worker`
//!   deadlock (the dropper reads a stale count, the worker a stale phase and sleeps);
//! - the scan in `terminate`: `a_spawn_just_before_drop_runs_on_a_single_worker` and
//!   `spawn_from_outside_then_shutdown` lose the task;
//! - `terminate`'s `notify(true)`: every model with a sleeping worker deadlocks;
//! - `shut_down` on the path where a task drops its own pool:
//!   `a_pool_dropped_by_its_own_task_runs_what_that_task_spawned` deadlocks.
//!
//! The `Release`/`Acquire` pair on the phase and the `AcqRel` increments of the idle
//! count are needed in C++ but not under loom, whose `SeqCst` loads and fences are
//! stronger (`docs/loom.md` says why).
//!
//! Under loom the pool's injector is a model of crossbeam's `Injector` synchronization
//! (no lock), so the sleep protocol's fences are what orders a submission against a
//! worker's last look at the queues: a lost wake-up leaves the submitter parked on its
//! latch and the worker parked in the event count, which loom reports as a deadlock.

use super::common::{self, model};
use depengine_pool::ThreadPool;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A plain cell that tasks on different threads write and read: loom reports any two
/// accesses that nothing orders, which is what the models using it check.
struct Plain(UnsafeCell<u32>);

// SAFETY: the models only access it in the order that the pool promises (and loom checks
// that order on every access).
unsafe impl Sync for Plain {}

#[test]
fn spawn_from_outside_then_shutdown() {
    model(2, || {
        let pool = ThreadPool::new(2).unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        for _ in 0..1 {
            let count = count.clone();
            pool.spawn(move || {
                count.fetch_add(1, Ordering::Relaxed);
            });
        }
        drop(pool);
        assert_eq!(count.load(Ordering::Relaxed), 1);
    });
}

/// A scoped task spawns a child from its worker (front of its own queue, where the
/// other worker may steal it); the caller parks on the scope's latch until both ran.
/// Each task writes a plain cell that the caller reads after the scope: the scope's
/// `CountLatch` must order every task's work before the caller's return (each
/// decrement's `Release` half, the last decrement's `Acquire` half, then the latch), or
/// loom reports the caller's read as concurrent with a task's write.
#[test]
fn nested_spawn_in_scope_then_shutdown() {
    model(1, || {
        let pool = ThreadPool::new(2).unwrap();
        let (parent, child) = (Plain(UnsafeCell::new(0)), Plain(UnsafeCell::new(0)));
        pool.scope(|s| {
            let (parent, child) = (&parent, &child);
            s.spawn(move |s| {
                s.spawn(move |_| {
                    // SAFETY: only this task writes the cell, and the caller reads it
                    // after the scope (what the model checks).
                    child.0.with_mut(|value| unsafe { *value = 1 });
                });
                // SAFETY: as above, for this task's cell.
                parent.0.with_mut(|value| unsafe { *value = 1 });
            });
        });
        // SAFETY: the scope has returned, so both tasks are done (what the model checks).
        let read = |cell: &Plain| cell.0.with(|value| unsafe { *value });
        let done = read(&parent) + read(&child);
        assert_eq!(done, 2);
        drop(pool);
    });
}

/// An outside thread submits a job with `install` while the only worker goes to sleep,
/// then parks on the job's latch until the worker ran it. The wake-up depends on the
/// Dekker handshake between the submitter (push to the injector, `SeqCst` fence in
/// `Shared::spinner_will_look`, read the waiter count) and the worker (`prewait`'s count and
/// `SeqCst` fence, read the injector). Catches either fence removed or relaxed
/// (deadlock), and the latch's orderings: the result is read through a plain cell, so a
/// latch that does not make the job's write visible to the waiter is a causality
/// violation.
#[test]
fn install_from_outside_wakes_the_sleeping_worker() {
    model(2, || {
        let pool = ThreadPool::new(1).unwrap();
        assert_eq!(pool.install(|| 7), 7);
        drop(pool);
    });
}

/// A worker's task spawns a child into its own queue and then waits for it, so only the
/// other worker, asleep or going to sleep, can run the child. The wake-up depends on the
/// same Dekker handshake as a push from outside, on the worker's side of it: the push to its
/// own queue, the `SeqCst` fence in `Shared::spinner_will_look`, the read of the waiter count,
/// against the sleeper's `prewait` and look at every queue. Catches that fence relaxed (the
/// sleeper misses the child, the spawner misses the sleeper and yields forever: loom reports
/// a deadlock, or its branch limit). Preemption bound 1: with 2, the spawner's wait makes it
/// 332 036 interleavings (about five minutes), and bound 1 already fails without the fence.
/// The flag's `Release`/`Acquire` hands over no data: no argument relies on it.
#[test]
fn a_spawn_from_a_waiting_task_wakes_the_other_worker() {
    model(1, || {
        let pool = Arc::new(ThreadPool::new(2).unwrap());
        let inner = pool.clone();
        pool.install(move || {
            let ran = Arc::new(AtomicBool::new(false));
            let child_ran = ran.clone();
            inner.spawn(move || child_ran.store(true, Ordering::Release));
            while !ran.load(Ordering::Acquire) {
                loom::thread::yield_now();
            }
        });
        drop(common::only_handle(pool));
    });
}

/// The outside thread spawns a task, then drops the pool, while the only worker goes to
/// sleep. The worker's look at the queues after `prewait` may miss the task (its wake-up
/// is on its way), and the worker alone makes the idle count full: only the scan in
/// `terminate`, after reading `DRAINING`, keeps it from ending the pool with the task
/// still queued. (A shutdown check without that scan loses the task here.)
#[test]
fn a_spawn_just_before_drop_runs_on_a_single_worker() {
    model(2, || {
        let pool = ThreadPool::new(1).unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let counter = count.clone();
        pool.spawn(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        drop(pool);
        assert_eq!(count.load(Ordering::Relaxed), 1);
    });
}

/// Dropped right after its start: each worker is starting, looking for work or going to
/// sleep. Whoever sees both workers idle while `DRAINING` (the dropper, or the second
/// worker to count itself in) terminates the pool; the other worker is woken or sees
/// `TERMINATED` itself. A lost handshake leaves a worker asleep and the drop joining it
/// forever (a deadlock).
#[test]
fn every_worker_exits_when_the_pool_is_dropped_as_they_go_to_sleep() {
    model(2, || {
        drop(ThreadPool::new(2).unwrap());
    });
}

/// The last handle is dropped by the pool's own task, after it spawned a child to its
/// own queue: the drop cannot join (the task runs on a worker), so the workers finish on
/// their own. The child runs, and the worker, going idle last, terminates the pool (loom
/// reports a worker left asleep as a deadlock).
#[test]
fn a_pool_dropped_by_its_own_task_runs_what_that_task_spawned() {
    model(1, || {
        let pool = Arc::new(ThreadPool::new(2).unwrap());
        let ran = Arc::new(AtomicUsize::new(0));
        let outside_dropped = Arc::new(AtomicBool::new(false));
        {
            let (inner, ran, outside_dropped) =
                (pool.clone(), ran.clone(), outside_dropped.clone());
            pool.spawn(move || {
                while !outside_dropped.load(Ordering::Acquire) {
                    loom::thread::yield_now();
                }
                inner.spawn(move || {
                    ran.fetch_add(1, Ordering::Release);
                });
                // The last handle: the pool is dropped here, on its worker.
                drop(inner);
            });
        }
        drop(pool);
        outside_dropped.store(true, Ordering::Release);
        while ran.load(Ordering::Acquire) == 0 {
            loom::thread::yield_now();
        }
    });
}

/// A join inside the pool: its second half is pushed onto the joining worker's queue
/// with a wake-up hint only (no fence, `Shared::wake_one_for_own_work`), so the other
/// worker, asleep or about to be, may never hear of it. Whether it steals the half or
/// the joiner pops it back, both halves run once and their writes are ordered before
/// the join's return (the stack job's latch when stolen, program order when not): loom
/// reports a deadlock if the joiner could wait for a thief that never comes, and a
/// causality violation if a stolen half's write were not ordered before the read.
#[test]
fn a_join_completes_whether_or_not_a_sleeper_hears_of_it() {
    model(1, || {
        let pool = ThreadPool::new(2).unwrap();
        let (first, second) = (Plain(UnsafeCell::new(0)), Plain(UnsafeCell::new(0)));
        let (a, b) = pool.install(|| {
            let (first, second) = (&first, &second);
            pool.join(
                move || {
                    // SAFETY: only this half writes the cell; it is read after the join.
                    first.0.with_mut(|value| unsafe { *value = 1 });
                    1
                },
                move || {
                    // SAFETY: as above, for the second half's cell.
                    second.0.with_mut(|value| unsafe { *value = 2 });
                    2
                },
            )
        });
        assert_eq!((a, b), (1, 2));
        // SAFETY: both halves are done (the join returned), and nothing else writes.
        let written = unsafe { (first.0.with(|v| *v), second.0.with(|v| *v)) };
        assert_eq!(written, (1, 2));
        drop(pool);
    });
}
