//! Stand-in threads for workers blocked in a wait inside an op.
//!
//! A `wait_for_var` inside an op keeps a worker of the op's block busy until the ops it waits
//! for complete. If they are queued on the same block and every other worker of the block is
//! busy too (one worker, or as many nested waits as workers), nothing would ever run them. So a
//! worker that waits ([`Inner::wait_on_worker`]) does not just sleep: it sleeps in slices of
//! [`STARVED_AFTER`], and after each, if ops are queued on its block and it has no stand-in
//! running, it starts a *stand-in*: a thread that drains the block as a worker would
//! (`Inner::stand_in`) until the queue is empty, then exits. The stand-in takes the blocked
//! worker's place, as tokio's `block_in_place` hands a blocked worker's place to a new thread.
//!
//! - **Not a second way in.** A stand-in pops from the block's queue like a worker but is not
//!   one of the queue's enlisted drainers; popping is all it does to the queue, so the
//!   queue's guarantee that no op is stranded is unaffected.
//! - **Bounded.** Each blocked waiter has at most one stand-in running at a time: the block runs
//!   at most one extra thread per worker blocked in a wait, and only while ops are queued.
//! - **Why a thread, not the waiter itself.** Running the queued ops on the waiting thread,
//!   nested in the waiting op's function (rayon's work-stealing wait), would deadlock if that
//!   function holds a lock one of them takes; on a thread of its own, such an op just waits
//!   for the lock.
//! - **Cost.** Nothing on the paths of ops that do not wait inside ops. A wait inside an op
//!   on a worker wakes once per [`STARVED_AFTER`] while blocked, and a starved block waits that
//!   long before its stand-in starts.
//! - **Shutdown.** A stand-in holds a reference to the engine while it drains, which the last
//!   handle's teardown waits for; its `JoinHandle` goes to [`StandIns`], joined when the engine
//!   state is dropped.
//!
//! Not covered: the CPU priority block and device executors (their waits block as before; see
//! "Misuse" in `docs/engine.md`).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::deadlock::WaitLatch;
use crate::failure::OpFailure;
use crate::inner::Inner;
use crate::queued::QueuedBlock;
use crate::record::BlockKey;

/// How long a waiting worker sleeps before it checks whether its block is starved.
pub(crate) const STARVED_AFTER: Duration = Duration::from_millis(1);

/// The stand-in threads an engine started (finished ones are joined as new ones start).
#[derive(Default)]
pub(crate) struct StandIns {
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl StandIns {
    fn lock(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `stand_in` for joining; joins the stand-ins that finished.
    fn keep(&self, stand_in: JoinHandle<()>) {
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

impl Inner {
    /// Waits on `latch` on a worker of block `key` (from inside an op's function), starting a
    /// stand-in for the block whenever ops are queued on it while the wait lasts (see the module
    /// documentation).
    pub(crate) fn wait_on_worker(
        self: &Arc<Self>,
        latch: &WaitLatch,
        key: BlockKey,
    ) -> Option<OpFailure> {
        let mut stand_in: Option<JoinHandle<()>> = None;
        let value = loop {
            if let Some(value) = latch.wait_timeout(STARVED_AFTER) {
                break value;
            }
            if stand_in
                .as_ref()
                .is_some_and(|stand_in| !stand_in.is_finished())
            {
                continue;
            }
            if !self.block(key).is_some_and(QueuedBlock::has_queued) {
                continue;
            }
            if let Some(finished) = stand_in.take() {
                self.stand_ins.keep(finished);
            }
            let inner = Arc::clone(self);
            // If no thread can be started, the wait goes on as before: it is up to the other
            // workers, or a later attempt.
            stand_in = thread::Builder::new()
                .name("depengine-stand-in".to_owned())
                .spawn(move || inner.stand_in(key))
                .ok();
        };
        if let Some(stand_in) = stand_in {
            self.stand_ins.keep(stand_in);
        }
        value
    }
}
