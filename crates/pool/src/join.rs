//! `join`: run two closures, potentially in parallel, without allocating.
//!
//! The second closure is pushed, as a [`StackJob`] living in this frame, to the front
//! of the current worker's queue, where an idle worker may steal it. The first runs
//! right away. Then the worker pops its queue until it gets the second job back (it
//! was not stolen: run it inline) or finds the queue empty (it was stolen: help with
//! other work until the thief sets the job's latch).

use crate::ThreadPool;
use crate::item::Work;
use crate::job::StackJob;
use crate::worker::Shared;
use std::panic::{self, AssertUnwindSafe};

impl ThreadPool {
    /// Runs `a` and `b`, potentially in parallel, and returns both results.
    ///
    /// Called from outside the pool, the join runs inside it (see
    /// [`install`](Self::install)). Both closures always run to completion; if either
    /// panics, the panic resumes in the caller afterwards (`a`'s first if both do).
    ///
    /// Either closure may run on another thread than the caller's, so what they share must be
    /// `Sync`:
    ///
    /// ```compile_fail,E0277
    /// # let pool = depengine_pool::ThreadPool::new(2)?;
    /// let shared = std::rc::Rc::new(7); // `Rc` is not `Sync`
    /// let (a, b) = pool.join(|| *shared + 1, || *shared + 2);
    /// # Ok::<(), depengine_pool::BuildError>(())
    /// ```
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        match self.shared.current_index() {
            Some(index) => join_on_worker(&self.shared, index, a, b),
            None => self.install(|| {
                let index = self.shared.current_index();
                match index {
                    Some(index) => join_on_worker(&self.shared, index, a, b),
                    // `install` ran us inline (every queue was full): run serially.
                    None => (a(), b()),
                }
            }),
        }
    }
}

fn join_on_worker<A, B, RA, RB>(shared: &Shared, index: usize, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let job_b = StackJob::new(b);
    let queue = &shared.queues[index];
    // SAFETY: `job_b` stays in this frame until it is popped back below (then run
    // inline, the reference never used again) or its latch is set by the thief that
    // popped it; this function returns or unwinds only after one of the two. The push:
    // the caller found this thread to be worker `index` (`current_index`), the owner of
    // `queue`.
    let pushed = unsafe { queue.push_front(Work::Job(job_b.as_job_ref())) };
    if let Err(_unqueued) = pushed {
        // Our queue is full: no reference escaped; run both here.
        let ra = panic::catch_unwind(AssertUnwindSafe(a));
        let rb = job_b.run_inline();
        return (resume_or(ra), rb);
    }
    // A hint, not a handshake: this worker runs `b` itself if nobody steals it.
    shared.wake_one_for_own_work();

    let ra = panic::catch_unwind(AssertUnwindSafe(a));

    let job_b_ptr = std::ptr::from_ref(&job_b);
    loop {
        match queue.pop_front() {
            Some(Work::Job(job)) if job.is_stack_job(job_b_ptr) => {
                // Not stolen: run it ourselves, without the latch round-trip.
                let rb = panic::catch_unwind(AssertUnwindSafe(|| job_b.run_inline()));
                return (resume_or(ra), resume_or(rb));
            }
            // Work that `a` pushed on top of ours and left behind (detached spawns).
            Some(job) => shared.execute(job),
            None => break,
        }
    }
    // Stolen: help with other work until the thief is done with it.
    shared.wait_until(index, &job_b.latch);
    let rb = job_b.into_result();
    (resume_or(ra), resume_or(rb))
}

fn resume_or<R>(result: std::thread::Result<R>) -> R {
    match result {
        Ok(value) => value,
        Err(payload) => panic::resume_unwind(payload),
    }
}
