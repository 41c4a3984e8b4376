//! loom: the hand-offs the engine builds on: a task kept for its worker (`spawn_next`) and a
//! thread standing in for a blocked worker (`help`). Every task runs exactly once, the kept one
//! on its worker, and shutdown still completes.

use super::common::{model, only_handle};
use depengine_pool::ThreadPool;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

/// A task keeps a successor for its worker while an outside spawn races with it; the other
/// worker may sleep, steal or exit meanwhile. The kept task runs on the worker that kept it,
/// after the keeping task, and the drop still finds every worker idle: a kept task is never
/// stranded in its slot (the worker looks at the slot before it sleeps or exits).
#[test]
fn a_kept_task_runs_on_its_worker_before_shutdown() {
    model(1, || {
        let pool = Arc::new(ThreadPool::new(2).unwrap());
        let ran = Arc::new(AtomicUsize::new(0));
        let (inner, count) = (pool.clone(), ran.clone());
        pool.spawn(move || {
            let me = inner.current_thread_index();
            let (kept_pool, kept_count) = (inner.clone(), count.clone());
            inner.spawn_next(move || {
                assert_eq!(kept_pool.current_thread_index(), me);
                // Relaxed: the drop's join orders it before the check below.
                kept_count.fetch_add(1, Ordering::Relaxed);
            });
        });
        let count = ran.clone();
        pool.spawn(move || {
            count.fetch_add(1, Ordering::Relaxed);
        });
        drop(only_handle(pool));
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    });
}

/// A thread stands in (`help`) while the pool's only worker runs: each queued task runs once,
/// on one of the two, and a task that the stand-in's task spawns (to the injector: the
/// stand-in is no worker) still wakes the worker or is run by the stand-in.
#[test]
fn a_stand_in_and_the_worker_run_each_task_once() {
    model(1, || {
        let pool = Arc::new(ThreadPool::new(1).unwrap());
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let (inner, count) = (pool.clone(), ran.clone());
            pool.spawn(move || {
                let count = count.clone();
                inner.spawn(move || {
                    count.fetch_add(1, Ordering::Relaxed);
                });
            });
        }
        let stand_in = {
            let pool = pool.clone();
            thread::spawn(move || pool.help())
        };
        stand_in.join().unwrap();
        drop(only_handle(pool));
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    });
}

/// An item of a pool of items: counts its run, and keeps a successor for its worker until
/// `left` runs out, taking it back out of the slot (`take_kept`) to run it in place, as the
/// engine's runner does with a released op.
struct Link {
    pool: Arc<ThreadPool<Link>>,
    ran: Arc<AtomicUsize>,
    left: usize,
}

impl depengine_pool::Item for Link {
    fn run(self) {
        let Link { pool, ran, left } = self;
        ran.fetch_add(1, Ordering::Relaxed);
        if left > 0 {
            pool.submit_next(Link {
                pool: pool.clone(),
                ran: ran.clone(),
                left: left - 1,
            });
            if let Some(next) = pool.take_kept() {
                depengine_pool::Item::run(next);
            }
        }
    }
}

/// Items queued unboxed from outside while a worker keeps and takes back their successors: each
/// runs once, a kept one is never seen by the other worker, and shutdown completes.
#[test]
fn kept_items_are_taken_back_by_their_worker() {
    model(1, || {
        let pool = Arc::new(
            ThreadPool::builder()
                .threads(2)
                .build_for::<Link>()
                .unwrap(),
        );
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            pool.submit(Link {
                pool: pool.clone(),
                ran: ran.clone(),
                left: 1,
            });
        }
        drop(only_handle(pool));
        assert_eq!(ran.load(Ordering::Relaxed), 4);
    });
}
