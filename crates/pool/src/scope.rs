//! `scope`: spawn tasks that borrow from the caller's stack; wait for all of them.

use crate::ThreadPool;
use crate::job::{JobRef, Panic};
use crate::latch::CountLatch;
use crate::worker::Shared;
use depengine_sync::{Arc, Mutex, lock};
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};

/// A scope for tasks that may borrow anything that outlives it; see
/// [`ThreadPool::scope`].
///
/// # Examples
///
/// A task gets the scope too, and may spawn more tasks into it; all borrow from the caller:
///
/// ```
/// use depengine_pool::{Scope, ThreadPool};
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// /// Visits a complete binary tree of `depth` levels, one task per node.
/// fn visit<'s>(scope: &Scope<'s>, depth: u32, visited: &'s AtomicUsize) {
///     visited.fetch_add(1, Ordering::Relaxed);
///     if depth > 1 {
///         scope.spawn(move |s| visit(s, depth - 1, visited));
///         scope.spawn(move |s| visit(s, depth - 1, visited));
///     }
/// }
///
/// let pool = ThreadPool::new(2)?;
/// let visited = AtomicUsize::new(0);
/// pool.scope(|s| visit(s, 4, &visited));
/// // `scope` returned, so every nested task has run.
/// assert_eq!(visited.into_inner(), 15);
/// # Ok::<(), depengine_pool::BuildError>(())
/// ```
///
/// A task may borrow only what outlives the scope: not a local of the closure that spawns it,
/// which is gone when that closure returns, possibly before the task runs:
///
/// ```compile_fail,E0373
/// # let pool = depengine_pool::ThreadPool::new(2)?;
/// let mut total = 0;
/// pool.scope(|s| {
///     let step = 5;
///     s.spawn(|_| total += step); // `step` does not live as long as the scope
/// });
/// # Ok::<(), depengine_pool::BuildError>(())
/// ```
pub struct Scope<'scope> {
    shared: Arc<Shared>,
    /// Tasks not yet finished, plus one for the scope's own body.
    pending: CountLatch,
    /// The first panic of a task, resumed by `scope` once every task is done.
    panic: Mutex<Option<Panic>>,
    /// Invariant in `'scope`, like `std::thread::Scope`: tasks may borrow exactly
    /// what lives at least as long as the scope.
    _invariant: PhantomData<&'scope mut &'scope ()>,
}

/// A pointer to a scope that tasks carry to another thread.
struct ScopeRef(*const Scope<'static>);

// SAFETY: `Scope` is `Sync` (atomics, a mutex, an `Arc`), so sharing a pointer to it
// across threads is fine; its lifetime is guaranteed by `ThreadPool::scope`, which
// does not return before every task holding a `ScopeRef` has finished with it.
unsafe impl Send for ScopeRef {}

impl ThreadPool {
    /// Runs `op`, which may [`spawn`](Scope::spawn) tasks borrowing from the caller,
    /// and returns once `op` and every task spawned in the scope have finished.
    ///
    /// A panic in `op` or in a task is resumed here, after all tasks have finished
    /// (the body's panic first, otherwise the first task's). Called from a worker of
    /// this pool, the waiting worker runs other tasks meanwhile.
    pub fn scope<'scope, OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&Scope<'scope>) -> R,
    {
        let scope = Scope {
            shared: Arc::clone(&self.shared),
            pending: CountLatch::new(1),
            panic: Mutex::new(None),
            _invariant: PhantomData,
        };
        let result = panic::catch_unwind(AssertUnwindSafe(|| op(&scope)));
        // SAFETY: `scope` is this frame's, alive until the wait below returns; this is the
        // count of the initial 1.
        unsafe { CountLatch::count_down(&raw const scope.pending) };
        match self.shared.current_index() {
            Some(index) => self.shared.wait_until(index, scope.pending.latch()),
            None => scope.pending.wait(),
        }
        let task_panic = lock(&scope.panic).take();
        match (result, task_panic) {
            (Err(payload), _) | (Ok(_), Some(payload)) => panic::resume_unwind(payload),
            (Ok(value), None) => value,
        }
    }
}

impl<'scope> Scope<'scope> {
    /// Spawns `task` into the pool; the enclosing [`ThreadPool::scope`] waits for it.
    ///
    /// Like [`ThreadPool::spawn`], the task goes to the current worker's queue (inline
    /// if it is full), or to the pool's injector from outside the pool.
    pub fn spawn<F>(&self, task: F)
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        self.pending.increment();
        let scope = ScopeRef(std::ptr::from_ref(self).cast());
        let job = move || {
            let scope = scope;
            // SAFETY: the scope outlives this task: `ThreadPool::scope` waits for
            // `pending` to reach zero, and we count down only at the very end.
            let scope: &Scope<'scope> = unsafe { &*scope.0.cast() };
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| task(scope))) {
                let mut first = lock(&scope.panic);
                if first.is_none() {
                    *first = Some(payload);
                }
            }
            // SAFETY: `ThreadPool::scope` keeps the scope alive until `pending` is set,
            // which needs this count; `spawn` counted it up.
            unsafe { CountLatch::count_down(&raw const scope.pending) };
        };
        // SAFETY: the job borrows only `'scope` data and the scope itself, both alive
        // until `ThreadPool::scope` returns, which waits for this job to finish; the
        // pool runs every job it accepts exactly once.
        let job = unsafe { JobRef::boxed(job) };
        self.shared.inject_job(job);
    }
}

impl std::fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope").finish_non_exhaustive()
    }
}
