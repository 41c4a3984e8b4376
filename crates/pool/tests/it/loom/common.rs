//! What the pool's loom models share.

use loom::sync::Arc;
use loom::thread;

/// A whole pool runs many more atomic steps than loom's default branch budget allows,
/// and its state space is large, so each pool model sets its own preemption bound (the
/// largest that finishes in seconds; `LOOM_POOL_PREEMPTIONS` overrides it), on top of
/// every switch at a blocking point (park, condvar, mutex, join), which loom always
/// explores.
pub(crate) fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.preemption_bound = Some(
        std::env::var("LOOM_POOL_PREEMPTIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(preemptions),
    );
    // `Builder::check` does not log loom's "Completed in N iterations" (only
    // `loom::model` installs its log subscriber), so count the executions here.
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = executions.clone();
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    eprintln!(
        "Completed in {} iterations",
        executions.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// The pool, once the tasks that hold clones of it have dropped them (so that the calling
/// thread's drop joins the workers).
pub(crate) fn only_handle<P>(mut pool: Arc<P>) -> P {
    loop {
        match Arc::try_unwrap(pool) {
            Ok(pool) => return pool,
            Err(shared) => {
                pool = shared;
                thread::yield_now();
            }
        }
    }
}
