//! `SimplePool`: the baseline runs everything, survives panics, drains on drop.

use depengine_pool::{BuildError, MAX_THREADS, SimplePool};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn runs_every_task_before_drop_returns() {
    let tasks = if cfg!(miri) { 20 } else { 10_000 };
    let count = Arc::new(AtomicUsize::new(0));
    {
        let pool = SimplePool::new(2).unwrap();
        assert_eq!(pool.num_threads(), 2);
        for i in 0..tasks {
            let count = count.clone();
            pool.spawn(move || {
                assert!(i % 7 != 3, "every seventh task panics");
                count.fetch_add(1, Ordering::Relaxed);
            });
        }
    }
    let panicked = (0..tasks).filter(|i| i % 7 == 3).count();
    assert_eq!(count.load(Ordering::Relaxed), tasks - panicked);
}

#[test]
fn rejects_zero_threads() {
    assert!(matches!(SimplePool::new(0), Err(BuildError::ZeroThreads)));
}

#[test]
fn rejects_more_than_max_threads() {
    assert!(matches!(
        SimplePool::new(MAX_THREADS + 1),
        Err(BuildError::TooManyThreads { requested, max: MAX_THREADS }) if requested == MAX_THREADS + 1
    ));
}
