//! Stand-in threads for workers blocked in a wait: inside an op, or in a value's `Drop` run
//! after one (`run/dispatch.rs`).
//!
//! A `wait_for_var` inside an op keeps a worker of the op's block busy until the ops it waits
//! for complete (so does any blocking wait on a worker, `api/blocking.rs`). If they are queued
//! on the same block and every other worker of the block is busy too (one worker, or as many
//! nested waits as workers), nothing would ever run them. So a worker that waits (`block_until`
//! in `api/blocking.rs`) does not just sleep: it sleeps in slices of [`WAIT_SLICE`], and after
//! each, if ops are queued on its block and it has no stand-in running, it starts a
//! *stand-in*: a thread that runs the block's queued ops as a worker would (`Workers::stand_in`,
//! through the pool's `help`) until none is queued, then exits. The engine
//! cannot tell whether the queued ops are the ones the wait needs, so it assumes they may be.
//!
//! - **Not a second way in.** A stand-in takes ops from the block's pool like a thief (the
//!   injector, then the backs of the workers' queues) but is not one of its workers; taking is
//!   all it does, so the pool's guarantee that no op is stranded is unaffected (loom model
//!   `a_stand_in_and_the_worker_run_each_task_once` in depengine-pool).
//! - **Why not tokio's `block_in_place`** (the blocked worker handing its queue to a new
//!   thread): the stand-in already reaches every op the blocked worker queued, from the back of
//!   its queue, and the worker's next-task slot is empty while its op's function runs (the slot
//!   is filled after a function returns; a completion that runs a value's `Drop` hands the op
//!   it kept back to the block first). Handing the queue over would make the pool's worker
//!   set change under its own loop, for no op that a stand-in cannot already reach.
//! - **Bounded.** Each blocked waiter has at most one stand-in running at a time, and an
//!   engine at most [`MAX_STAND_INS`]. A stand-in whose op waits starts stand-ins of its own,
//!   so nested waits get one thread per level, up to that bound; beyond it, waits block as
//!   they did before stand-ins (a hang, if nothing else runs the ops they wait for). Many ops
//!   that all wait for something outside the engine (an async op completed by another
//!   thread) can use up the bound: each takes a thread while the queue holds more of them.
//! - **Why a thread, not the waiter itself.** Running the queued ops on the waiting thread,
//!   nested in the waiting op's function (rayon's work-stealing wait), would deadlock if that
//!   function holds a lock one of them takes; on a thread of its own, such an op just waits
//!   for the lock.
//! - **Cost.** Nothing on the paths of ops that do not wait inside ops. A wait inside an op
//!   on a worker wakes once per [`WAIT_SLICE`] while blocked, and ops queued behind it wait
//!   that long before a stand-in starts (again after each time the queue ran empty and the
//!   stand-in exited: a thread start per burst).
//! - **Shutdown.** A stand-in holds a reference to the engine while it drains, which the last
//!   handle's teardown waits for; its `JoinHandle` goes to [`StandIns`], joined when the engine
//!   state is dropped.
//!
//! The CPU priority block gets stand-ins the same way (a stand-in runs its queued tasks in
//! priority order). Not covered: device executors, whose threads belong to the device backend
//! (their waits block as before; see "Misuse" in `docs/engine.md`). tokio's `block_in_place` is the model: there, a worker about
//! to block hands its place to a new thread (tokio caps such threads at 512 by default).

use depengine_sync::{Mutex, MutexGuard, lock};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// How long a waiting worker sleeps before it checks whether its block needs a stand-in.
pub(crate) const WAIT_SLICE: Duration = Duration::from_millis(1);

/// Stand-ins of one engine running at once, at most.
pub(crate) const MAX_STAND_INS: usize = 64;

/// The stand-in threads of one engine.
///
/// Threads: a worker waiting inside an op reserves a slot and keeps its stand-in's handle; the
/// stand-in frees its slot as it leaves; the thread that drops the engine's state joins them.
#[derive(Default)]
pub(crate) struct StandIns {
    /// Started and not yet joined (finished ones are joined as new ones are kept).
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Started and not yet done draining; at most `MAX_STAND_INS`.
    running: AtomicUsize,
}

impl StandIns {
    fn lock(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        lock(&self.threads)
    }

    /// Counts one more stand-in, unless `MAX_STAND_INS` run already.
    pub(crate) fn reserve(&self) -> bool {
        // Relaxed: a count only; the thread start orders everything the stand-in reads.
        self.running
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |running| {
                (running < MAX_STAND_INS).then_some(running + 1)
            })
            .is_ok()
    }

    /// A stand-in finished draining, or could not start.
    pub(crate) fn done(&self) {
        self.running.fetch_sub(1, Ordering::Relaxed);
    }

    /// Keeps `stand_in` for joining; joins the stand-ins that finished.
    pub(crate) fn keep(&self, stand_in: JoinHandle<()>) {
        let finished: Vec<JoinHandle<()>> = {
            let mut threads = self.lock();
            threads.push(stand_in);
            let (finished, running) = threads.drain(..).partition(JoinHandle::is_finished);
            *threads = running;
            finished
        };
        for thread in finished {
            // A stand-in catches every op's panic: it cannot have panicked itself.
            let _ = thread.join();
        }
    }
}

impl Drop for StandIns {
    fn drop(&mut self) {
        let current = thread::current().id();
        for thread in self.lock().drain(..) {
            // The engine state can be dropped by a stand-in (its reference was the last): that
            // thread is about to exit and cannot join itself.
            if thread.thread().id() != current {
                let _ = thread.join();
            }
        }
    }
}
