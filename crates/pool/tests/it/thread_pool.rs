//! `ThreadPool`: spawn, scope, join, install, `parallel_for`, panics, shutdown.

use depengine_pool::{BuildError, MAX_THREADS, ThreadPool};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// `full` outside Miri; under it, at most `miri_most`, as Miri interprets every step.
fn sized(full: usize, miri_most: usize) -> usize {
    if cfg!(miri) {
        full.min(miri_most)
    } else {
        full
    }
}

/// Tasks and rounds: at most 20 under Miri.
fn n(full: usize) -> usize {
    sized(full, 20)
}

/// Rounds of a meeting of every worker: at most 4 under Miri, as each round wakes every worker
/// and lets it spin.
fn rounds(full: usize) -> usize {
    sized(full, 4)
}

#[test]
fn builder_rejects_zero_threads() {
    assert!(matches!(ThreadPool::new(0), Err(BuildError::ZeroThreads)));
}

#[test]
fn builder_rejects_more_than_max_threads() {
    for requested in [MAX_THREADS + 1, 100_000, usize::MAX] {
        match ThreadPool::new(requested) {
            Err(BuildError::TooManyThreads {
                requested: got,
                max,
            }) => {
                assert_eq!((got, max), (requested, MAX_THREADS));
            }
            other => panic!("{requested} threads: expected TooManyThreads, got {other:?}"),
        }
    }
    let message = ThreadPool::new(100_000).unwrap_err().to_string();
    assert!(
        message.contains("100000") && message.contains(&MAX_THREADS.to_string()),
        "{message}"
    );
}

/// Many workers, dropped while tasks are still queued: the tasks all run, and the
/// drop returns (the shutdown protocol with more workers than the loom models have).
/// Spawns `tasks` counting tasks on `pool`, drops it, and checks that every one ran.
fn spawned_tasks_all_run_before_the_drop_returns(pool: ThreadPool, tasks: usize) {
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..tasks {
        let ran = ran.clone();
        pool.spawn(move || {
            ran.fetch_add(1, Ordering::Relaxed);
        });
    }
    drop(pool);
    assert_eq!(ran.load(Ordering::Relaxed), tasks);
}

#[test]
fn a_pool_of_many_workers_dropped_with_queued_tasks_runs_them_all() {
    // 8 under Miri, which interprets every worker's search: still more than the loom models'.
    spawned_tasks_all_run_before_the_drop_returns(ThreadPool::new(sized(64, 8)).unwrap(), n(1000));
}

#[test]
fn builder_names_threads_and_reports_indices() {
    let pool = ThreadPool::builder()
        .threads(2)
        .thread_name("unit")
        .stack_size(256 * 1024)
        .queue_capacity(16)
        .build()
        .unwrap();
    assert_eq!(pool.num_threads(), 2);
    assert_eq!(pool.current_thread_index(), None);
    let (name, index) = pool.install(|| {
        (
            std::thread::current().name().map(str::to_owned),
            pool.current_thread_index(),
        )
    });
    let index = index.expect("install runs on a worker");
    assert!(index < 2);
    assert_eq!(name.unwrap(), format!("unit-{index}"));
}

#[test]
fn spawned_tasks_all_run_before_drop_returns() {
    let count = Arc::new(AtomicUsize::new(0));
    let tasks = n(10_000);
    {
        let pool = ThreadPool::new(2).unwrap();
        for _ in 0..tasks {
            let count = count.clone();
            pool.spawn(move || {
                count.fetch_add(1, Ordering::Relaxed);
            });
        }
    }
    assert_eq!(count.load(Ordering::Relaxed), tasks);
}

#[test]
fn tasks_spawned_by_tasks_during_shutdown_still_run() {
    let count = Arc::new(AtomicUsize::new(0));
    {
        let pool = Arc::new(ThreadPool::new(2).unwrap());
        let (tx, rx) = mpsc::channel();
        for _ in 0..n(100) {
            let (count, pool2, tx) = (count.clone(), pool.clone(), tx.clone());
            pool.spawn(move || {
                // Each task spawns a child through the pool it runs on.
                let count2 = count.clone();
                pool2.spawn(move || {
                    count2.fetch_add(1, Ordering::Relaxed);
                });
                count.fetch_add(1, Ordering::Relaxed);
                let _ = tx.send(pool2);
            });
        }
        drop(tx);
        // Hand the clones back so the pool is dropped here, not on a worker.
        let clones: Vec<_> = rx.iter().collect();
        drop(clones);
        drop(Arc::into_inner(pool).expect("last handle"));
    }
    assert_eq!(count.load(Ordering::Relaxed), 2 * n(100));
}

#[test]
fn scope_borrows_and_waits() {
    let pool = ThreadPool::new(2).unwrap();
    let mut data = vec![0u64; n(1000)];
    pool.scope(|s| {
        for (i, chunk) in data.chunks_mut(10).enumerate() {
            s.spawn(move |s| {
                for x in chunk.iter_mut() {
                    *x = i as u64;
                }
                // Nested spawn into the same scope.
                s.spawn(|_| {});
            });
        }
    });
    for (i, chunk) in data.chunks(10).enumerate() {
        assert!(chunk.iter().all(|&x| x == i as u64));
    }
}

#[test]
fn scope_inside_a_worker_helps_instead_of_blocking() {
    let pool = ThreadPool::new(1).unwrap();
    // One worker: the nested scope must run its tasks on the waiting worker itself.
    let total = pool.install(|| {
        let sum = AtomicUsize::new(0);
        pool.scope(|s| {
            for i in 0..n(100) {
                let sum = &sum;
                s.spawn(move |_| {
                    sum.fetch_add(i, Ordering::Relaxed);
                });
            }
        });
        sum.into_inner()
    });
    assert_eq!(total, (0..n(100)).sum());
}

#[test]
fn scope_resumes_a_task_panic_after_all_tasks_finish() {
    let pool = ThreadPool::new(2).unwrap();
    let finished = AtomicUsize::new(0);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn(|_| panic!("task failed"));
            for _ in 0..10 {
                s.spawn(|_| {
                    std::thread::sleep(Duration::from_millis(1));
                    finished.fetch_add(1, Ordering::Relaxed);
                });
            }
        });
    }));
    let payload = result.expect_err("the panic resumes in the caller");
    assert_eq!(depengine_pool::panic_message(&*payload), "task failed");
    assert_eq!(finished.load(Ordering::Relaxed), 10);
    // The pool still works.
    assert_eq!(pool.install(|| 7), 7);
}

fn fib(pool: &ThreadPool, k: u64) -> u64 {
    if k < 2 {
        return k;
    }
    let (a, b) = pool.join(|| fib(pool, k - 1), || fib(pool, k - 2));
    a + b
}

#[test]
fn join_computes_recursively_from_inside_and_outside() {
    let pool = ThreadPool::new(2).unwrap();
    let k = if cfg!(miri) { 8 } else { 22 };
    let from_outside = fib(&pool, k);
    let from_inside = pool.install(|| fib(&pool, k));
    let serial = (0..k).fold((0u64, 1u64), |(a, b), _| (b, a + b)).0;
    assert_eq!(from_outside, serial);
    assert_eq!(from_inside, serial);
}

#[test]
fn join_runs_both_halves_even_if_one_panics() {
    let pool = ThreadPool::new(2).unwrap();
    let ran_b = AtomicUsize::new(0);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.join(
            || panic!("left"),
            || {
                ran_b.fetch_add(1, Ordering::Relaxed);
            },
        )
    }));
    assert_eq!(depengine_pool::panic_message(&*result.unwrap_err()), "left");
    assert_eq!(ran_b.load(Ordering::Relaxed), 1);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.join(|| 1, || -> u32 { panic!("right") })
    }));
    assert_eq!(
        depengine_pool::panic_message(&*result.unwrap_err()),
        "right"
    );
}

#[test]
fn install_returns_values_and_resumes_panics() {
    let pool = ThreadPool::new(2).unwrap();
    assert_eq!(pool.install(|| "value"), "value");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.install(|| panic!("inside"))
    }));
    assert!(result.is_err());
}

#[test]
fn detached_panics_go_to_the_handler_and_workers_survive() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let pool = {
        let seen = seen.clone();
        ThreadPool::builder()
            .threads(2)
            .panic_handler(move |payload| {
                seen.lock()
                    .unwrap()
                    .push(depengine_pool::panic_message(&*payload).to_owned());
            })
            .build()
            .unwrap()
    };
    let ok = Arc::new(AtomicUsize::new(0));
    for i in 0..n(100) {
        let ok = ok.clone();
        pool.spawn(move || {
            assert!(!i.is_multiple_of(10), "boom {i}");
            ok.fetch_add(1, Ordering::Relaxed);
        });
    }
    drop(pool);
    assert_eq!(ok.load(Ordering::Relaxed), n(100) - n(100).div_ceil(10));
    assert_eq!(seen.lock().unwrap().len(), n(100).div_ceil(10));
}

#[test]
fn parallel_for_covers_every_index_once() {
    let pool = ThreadPool::new(2).unwrap();
    for items in [0, 1, 3, 4, n(1000)] {
        let hits: Vec<AtomicUsize> = (0..items).map(|_| AtomicUsize::new(0)).collect();
        pool.parallel_for(items, 1e5, |range| {
            for i in range {
                hits[i].fetch_add(1, Ordering::Relaxed);
            }
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    }
}

#[test]
fn parallel_for_from_a_worker_and_with_panics() {
    let pool = ThreadPool::new(2).unwrap();
    let sum = pool.install(|| {
        let sum = AtomicUsize::new(0);
        pool.parallel_for(64, 1e5, |range| {
            sum.fetch_add(range.len(), Ordering::Relaxed);
        });
        sum.into_inner()
    });
    assert_eq!(sum, 64);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.parallel_for(8, 1e6, |range| {
            assert!(!range.contains(&5), "block 5");
        });
    }));
    assert_eq!(
        depengine_pool::panic_message(&*result.unwrap_err()),
        "block 5"
    );
}

#[test]
fn a_full_worker_queue_runs_tasks_inline() {
    let pool = ThreadPool::builder()
        .threads(1)
        .queue_capacity(2)
        .build()
        .unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let ran_inline = pool.install(|| {
        // The only worker is busy right here, so nothing drains its queue while we
        // spawn: at most 2 tasks fit, the rest run inline, on this worker.
        for _ in 0..10 {
            let count = count.clone();
            pool.spawn(move || {
                count.fetch_add(1, Ordering::Relaxed);
            });
        }
        count.load(Ordering::Relaxed)
    });
    assert_eq!(ran_inline, 8);
    drop(pool);
    assert_eq!(count.load(Ordering::Relaxed), 10);
}

#[test]
fn outside_spawns_beyond_the_backlog_run_inline() {
    // One worker with queues of 2: the injector holds at most 1 x 2 outside jobs.
    let pool = ThreadPool::builder()
        .threads(1)
        .queue_capacity(2)
        .build()
        .unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    pool.spawn(move || {
        started_tx.send(()).unwrap();
        let _ = release_rx.recv();
    });
    started_rx.recv().unwrap();
    for _ in 0..n(100) {
        let count = count.clone();
        pool.spawn(move || {
            count.fetch_add(1, Ordering::Relaxed);
        });
    }
    // The worker is blocked: 2 jobs wait in the injector, the rest ran right here.
    assert_eq!(count.load(Ordering::Relaxed), n(100) - 2);
    release_tx.send(()).unwrap();
    drop(pool);
    assert_eq!(count.load(Ordering::Relaxed), n(100));
}

#[test]
fn dropping_the_pool_from_its_own_task_does_not_deadlock() {
    let (tx, rx) = mpsc::channel();
    let pool = Arc::new(ThreadPool::new(2).unwrap());
    let inner = pool.clone();
    pool.spawn(move || {
        // Wait until the outside handle is gone, then drop the last one here.
        std::thread::sleep(Duration::from_millis(20));
        drop(inner);
        tx.send(()).unwrap();
    });
    drop(pool);
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
}

/// Spawns `n` tasks that each wait (up to 10 s) for all to start: they meet only if `n`
/// workers run them at once.
fn spawn_meeting(pool: &ThreadPool, n: usize) -> mpsc::Receiver<bool> {
    let met = Arc::new((Mutex::new(0_usize), std::sync::Condvar::new()));
    let (done_tx, done) = mpsc::channel();
    for _ in 0..n {
        let (met, done_tx) = (Arc::clone(&met), done_tx.clone());
        pool.spawn(move || {
            let (count, changed) = &*met;
            let mut count = count.lock().unwrap();
            *count += 1;
            changed.notify_all();
            let (_count, wait) = changed
                .wait_timeout_while(count, Duration::from_secs(10), |count| *count < n)
                .unwrap();
            done_tx.send(!wait.timed_out()).unwrap();
        });
    }
    done
}

#[test]
fn tasks_spawned_while_a_worker_spins_all_get_a_worker() {
    // A trivial task first: the worker that runs it then spins, searching for more, and the
    // group is spawned while it does. A spawn that sees a spinner wakes nobody; the spinner
    // takes one task and must wake a sleeper for the rest, which wakes the next one.
    for workers in [2, 4] {
        let pool = ThreadPool::new(workers).unwrap();
        for round in 0..rounds(200) {
            let (ran_tx, ran) = mpsc::channel();
            pool.spawn(move || ran_tx.send(()).unwrap());
            ran.recv().unwrap();
            let done = spawn_meeting(&pool, workers);
            for _ in 0..workers {
                assert!(
                    done.recv().unwrap(),
                    "{workers} workers, round {round}: the tasks never all ran at once"
                );
            }
        }
    }
}

#[test]
fn a_pool_whose_workers_never_spin_still_runs_every_task() {
    // `max_spin(ZERO)`: an idle worker goes straight to the sleep protocol, so every spawn
    // that finds the workers idle has to wake one; the meeting needs all of them at once.
    for workers in [1, 2, 4] {
        let pool = ThreadPool::builder()
            .threads(workers)
            .max_spin(Duration::ZERO)
            .build()
            .unwrap();
        for round in 0..rounds(50) {
            let done = spawn_meeting(&pool, workers);
            for _ in 0..workers {
                assert!(
                    done.recv().unwrap(),
                    "{workers} workers, round {round}: the tasks never all ran at once"
                );
            }
        }
        spawned_tasks_all_run_before_the_drop_returns(pool, n(1000));
    }
}

#[test]
fn spawns_from_a_task_run_inline_for_a_full_queue_go_to_the_injector() {
    // One worker, queues of 2, busy in `install`: the third spawn runs inline; what that
    // one spawns while the queue is still full is queued (not nested inline again), so a
    // chain of such spawns cannot grow the stack.
    let pool = Arc::new(
        ThreadPool::builder()
            .threads(1)
            .queue_capacity(2)
            .build()
            .unwrap(),
    );
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    pool.install(|| {
        for i in 0..3 {
            let (log, inner, tx) = (log.clone(), pool.clone(), tx.clone());
            pool.spawn(move || {
                log.lock().unwrap().push(i);
                let log = log.clone();
                inner.spawn(move || log.lock().unwrap().push(10 + i));
                // Hand the clone back, so that the pool is dropped here, not on the worker
                // (tasks 0 and 1 may still be queued when `install` returns).
                tx.send(inner).unwrap();
            });
        }
        // Task 2 ran inline (the queue held tasks 0 and 1); its child was queued.
        assert_eq!(*log.lock().unwrap(), [2]);
    });
    for _ in 0..3 {
        drop(
            rx.recv_timeout(Duration::from_secs(10))
                .expect("every task ran"),
        );
    }
    let pool = Arc::into_inner(pool).expect("the only handle");
    drop(pool);
    let mut ran = log.lock().unwrap().clone();
    ran.sort_unstable();
    assert_eq!(ran, [0, 1, 2, 10, 11, 12]);
}

#[test]
fn a_never_inline_pool_queues_every_spawn() {
    let pool = Arc::new(
        ThreadPool::builder()
            .threads(1)
            .queue_capacity(2)
            .never_inline()
            .build()
            .unwrap(),
    );
    let count = Arc::new(AtomicUsize::new(0));
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    pool.spawn(move || {
        started_tx.send(()).unwrap();
        let _ = release_rx.recv();
    });
    started_rx.recv().unwrap();
    for _ in 0..n(100) {
        let count = count.clone();
        pool.spawn(move || {
            count.fetch_add(1, Ordering::Relaxed);
        });
    }
    assert_eq!(
        count.load(Ordering::Relaxed),
        0,
        "nothing ran on the submitter"
    );
    release_tx.send(()).unwrap();
    // From a worker too: its full queue overflows into the injector.
    let inner = pool.clone();
    let counter = count.clone();
    let ran_inline = pool.install(move || {
        for _ in 0..10 {
            let count = counter.clone();
            inner.spawn(move || {
                count.fetch_add(1, Ordering::Relaxed);
            });
        }
        counter.load(Ordering::Relaxed)
    });
    assert_eq!(ran_inline, n(100), "none of the ten ran inline");
    drop(Arc::into_inner(pool).expect("the only handle"));
    assert_eq!(count.load(Ordering::Relaxed), n(100) + 10);
}

#[test]
fn a_kept_task_runs_next_on_the_same_worker() {
    let pool = Arc::new(ThreadPool::new(2).unwrap());
    let (tx, rx) = mpsc::channel();
    for _ in 0..n(100) {
        let (inner, tx) = (pool.clone(), tx.clone());
        pool.spawn(move || {
            let me = inner.current_thread_index();
            let order = Arc::new(Mutex::new(Vec::new()));
            // The kept task runs after this one returns, before anything queued later by it.
            let (kept_order, kept_pool, kept_tx) = (order.clone(), inner.clone(), tx.clone());
            inner.spawn_next(move || {
                kept_order.lock().unwrap().push("kept");
                let same = kept_pool.current_thread_index() == me;
                kept_tx
                    .send((same, kept_order.lock().unwrap().clone()))
                    .unwrap();
            });
            order.lock().unwrap().push("spawner");
        });
    }
    for _ in 0..n(100) {
        let (same, order) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(same, "the kept task ran on another worker");
        assert_eq!(order, ["spawner", "kept"]);
    }
}

#[test]
fn a_second_kept_task_is_queued_and_both_run() {
    let pool = Arc::new(ThreadPool::new(1).unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let inner = pool.clone();
    let counter = count.clone();
    pool.install(move || {
        for _ in 0..3 {
            let count = counter.clone();
            inner.spawn_next(move || {
                count.fetch_add(1, Ordering::Relaxed);
            });
        }
        assert!(inner.has_queued(), "the second and third are in the queue");
    });
    // Outside the pool, `spawn_next` is a `spawn`.
    let counter = count.clone();
    pool.spawn_next(move || {
        counter.fetch_add(1, Ordering::Relaxed);
    });
    drop(Arc::into_inner(pool).expect("the only handle"));
    assert_eq!(count.load(Ordering::Relaxed), 4);
}

#[test]
fn help_runs_queued_tasks_on_a_thread_outside_the_pool() {
    let pool = Arc::new(ThreadPool::new(1).unwrap());
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    pool.spawn(move || {
        started_tx.send(()).unwrap();
        let _ = release_rx.recv();
    });
    started_rx.recv().unwrap();
    let helper = std::thread::current().id();
    let ran_here = Arc::new(AtomicUsize::new(0));
    for _ in 0..n(10) {
        let ran_here = ran_here.clone();
        pool.spawn(move || {
            if std::thread::current().id() == helper {
                ran_here.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    assert!(pool.has_queued());
    // The only worker is blocked: this thread stands in and runs everything queued.
    pool.help();
    assert_eq!(ran_here.load(Ordering::Relaxed), n(10));
    assert!(!pool.has_queued());
    assert_eq!(pool.current_thread_index(), None, "the helper is no worker");
    release_tx.send(()).unwrap();
}

#[test]
fn start_and_exit_hooks_run_on_each_worker() {
    let started = Arc::new(Mutex::new(Vec::new()));
    let exited = Arc::new(AtomicUsize::new(0));
    let (on_start, on_exit) = (started.clone(), exited.clone());
    let pool = ThreadPool::builder()
        .threads(3)
        .on_thread_start(move |index| on_start.lock().unwrap().push(index))
        .on_thread_exit(move |_| {
            on_exit.fetch_add(1, Ordering::Relaxed);
        })
        .panic_handler(|_| {})
        .build()
        .unwrap();
    pool.shut_down_and_join();
    let mut indices = started.lock().unwrap().clone();
    indices.sort_unstable();
    assert_eq!(indices, [0, 1, 2]);
    assert_eq!(exited.load(Ordering::Relaxed), 3);
    drop(pool);
}

#[test]
fn a_panicking_start_hook_goes_to_the_panic_handler() {
    let panics = Arc::new(AtomicUsize::new(0));
    let counter = panics.clone();
    let pool = ThreadPool::builder()
        .threads(2)
        .on_thread_start(|_| panic!("hook"))
        .panic_handler(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        })
        .build()
        .unwrap();
    assert_eq!(pool.install(|| 1 + 1), 2, "the workers run anyway");
    drop(pool);
    assert_eq!(panics.load(Ordering::Relaxed), 2);
}

/// A worker takes the injector's jobs in batches (into its own queue): spawns from outside
/// still run in the order they were made on a pool of one worker.
#[test]
fn outside_spawns_run_in_order_on_one_worker() {
    let pool = ThreadPool::new(1).unwrap();
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    // Holds the worker until every later spawn is queued.
    pool.spawn(move || gate_rx.recv().unwrap());
    let order = Arc::new(Mutex::new(Vec::new()));
    let count = n(100);
    for i in 0..count {
        let order = Arc::clone(&order);
        pool.spawn(move || order.lock().unwrap().push(i));
    }
    gate_tx.send(()).unwrap();
    drop(pool);
    let order = order.lock().unwrap();
    assert_eq!(*order, (0..count).collect::<Vec<_>>());
}
