//! Stress: many producers, nested spawns, panics mixed in, drop while queued. Sizes
//! are the (10^6 tasks) in optimized builds, smaller in debug and Miri runs.

use depengine_pool::ThreadPool;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

fn total_tasks() -> usize {
    if cfg!(debug_assertions) {
        100_000
    } else {
        1_000_000
    }
}

/// 4 producer threads spawn from outside; every third task spawns a child from the
/// worker; every 1000th panics. Counts must be exact after the pool is dropped.
#[test]
#[cfg_attr(
    miri,
    ignore = "stress sizes; Miri runs the same paths in thread_pool.rs"
)]
fn producers_nested_spawns_and_panics() {
    let total = total_tasks();
    let per_producer = total / 4;
    let ran = Arc::new(AtomicUsize::new(0));
    let panics = Arc::new(AtomicUsize::new(0));
    let pool = {
        let panics = panics.clone();
        Arc::new(
            ThreadPool::builder()
                .threads(2)
                .panic_handler(move |_| {
                    panics.fetch_add(1, Ordering::Relaxed);
                })
                .build()
                .unwrap(),
        )
    };
    std::thread::scope(|s| {
        for p in 0..4 {
            let (pool, ran) = (&pool, &ran);
            s.spawn(move || {
                for i in 0..per_producer {
                    let id = p * per_producer + i;
                    let ran = ran.clone();
                    let child_pool = Arc::clone(pool);
                    pool.spawn(move || {
                        if id.is_multiple_of(3) {
                            let ran = ran.clone();
                            child_pool.spawn(move || {
                                ran.fetch_add(1, Ordering::Relaxed);
                            });
                        }
                        drop(child_pool);
                        assert!(id % 1000 != 999, "injected failure {id}");
                        ran.fetch_add(1, Ordering::Relaxed);
                    });
                }
            });
        }
    });
    // The tasks hold clones of the pool; wait for them to let go, then drop it here.
    let mut pool = pool;
    let pool = loop {
        match Arc::try_unwrap(pool) {
            Ok(pool) => break pool,
            Err(shared) => {
                pool = shared;
                std::thread::yield_now();
            }
        }
    };
    drop(pool);
    let produced = per_producer * 4;
    let children = (0..produced).filter(|id| id.is_multiple_of(3)).count();
    let failed = (0..produced).filter(|id| id % 1000 == 999).count();
    assert_eq!(panics.load(Ordering::Relaxed), failed);
    assert_eq!(ran.load(Ordering::Relaxed), produced - failed + children);
}

/// Dropping the pool while far more tasks are queued than the workers have run:
/// every one of them still runs.
#[test]
#[cfg_attr(
    miri,
    ignore = "stress sizes; Miri runs the same paths in thread_pool.rs"
)]
fn drop_while_queued_loses_nothing() {
    let total = total_tasks() / 10;
    let ran = Arc::new(AtomicUsize::new(0));
    let pool = ThreadPool::builder()
        .threads(2)
        .queue_capacity(1 << 16)
        .build()
        .unwrap();
    for _ in 0..total {
        let ran = ran.clone();
        pool.spawn(move || {
            ran.fetch_add(1, Ordering::Relaxed);
        });
    }
    drop(pool);
    assert_eq!(ran.load(Ordering::Relaxed), total);
}

/// A binary tree of fire-and-forget spawns from inside the workers.
#[test]
#[cfg_attr(
    miri,
    ignore = "stress sizes; Miri runs the same paths in thread_pool.rs"
)]
fn spawn_tree_counts_every_node() {
    fn node(pool: &Arc<ThreadPool>, depth: u32, count: &Arc<AtomicUsize>) {
        count.fetch_add(1, Ordering::Relaxed);
        if depth > 0 {
            for _ in 0..2 {
                let (p, c) = (pool.clone(), count.clone());
                pool.spawn(move || node(&p, depth - 1, &c));
            }
        }
    }
    let depth = 16;
    let count = Arc::new(AtomicUsize::new(0));
    let pool = Arc::new(ThreadPool::new(2).unwrap());
    {
        let (p, c) = (pool.clone(), count.clone());
        pool.spawn(move || node(&p, depth, &c));
    }
    let expected = (1usize << (depth + 1)) - 1;
    while count.load(Ordering::Relaxed) < expected {
        std::thread::yield_now();
    }
    let mut pool = pool;
    loop {
        match Arc::try_unwrap(pool) {
            Ok(pool) => break drop(pool),
            Err(shared) => {
                pool = shared;
                std::thread::yield_now();
            }
        }
    }
    assert_eq!(count.load(Ordering::Relaxed), expected);
}

/// Dropping an idle pool takes time linear in its worker count: one scan of the queues
/// and one broadcast, then each worker exits without looking at any queue (see the
/// shutdown protocol in `src/worker.rs`). Timed in optimized builds only, with generous
/// bounds (a quadratic shutdown takes 0.4 s at 256 workers and 6.6 s at 1024 here; a
/// linear one about as long as starting and joining as many plain threads: tens of
/// milliseconds).
#[test]
#[cfg_attr(debug_assertions, ignore = "timed: run with --release")]
#[cfg_attr(miri, ignore = "timed, and thousands of threads")]
fn shutdown_time_is_linear_in_the_worker_count() {
    use std::time::{Duration, Instant};
    for (workers, bound) in [
        (256, Duration::from_secs(1)),
        (1024, Duration::from_secs(2)),
    ] {
        let pool = ThreadPool::new(workers).unwrap();
        // One task per worker, so that each has started; then they all go to sleep.
        pool.scope(|s| {
            for _ in 0..workers {
                s.spawn(|_| {});
            }
        });
        std::thread::sleep(Duration::from_millis(50));
        let start = Instant::now();
        drop(pool);
        let took = start.elapsed();
        assert!(
            took < bound,
            "dropping a pool of {workers} idle workers took {took:?} (bound {bound:?})"
        );
    }
}

/// A pool of many workers dropped while its injector still holds most of the work: every
/// task runs, and the workers that go idle first stay until the last one does.
#[test]
#[cfg_attr(
    miri,
    ignore = "stress sizes; Miri runs the same paths in thread_pool.rs"
)]
fn dropping_a_busy_pool_of_many_workers_runs_every_task() {
    let total = total_tasks() / 10;
    let ran = Arc::new(AtomicUsize::new(0));
    let pool = ThreadPool::new(64).unwrap();
    for _ in 0..total {
        let ran = ran.clone();
        pool.spawn(move || {
            // A little work, so that the drop finds the tasks still queued.
            for _ in 0..100 {
                std::hint::spin_loop();
            }
            ran.fetch_add(1, Ordering::Relaxed);
        });
    }
    drop(pool);
    assert_eq!(ran.load(Ordering::Relaxed), total);
}
