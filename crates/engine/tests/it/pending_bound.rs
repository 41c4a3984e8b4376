//! The pending bound (`EngineConfig::max_pending`, `DEPENGINE_MAX_PENDING`): a pusher that runs
//! ahead of the workers is held back once that many ops are pending; pushes that must not wait
//! (from inside ops, on the naive engine) are not; a held-back pusher whose ops make no
//! progress goes on after the bound's patience (`EngineConfig::max_pending_wait`), for an
//! allowance of pushes, and with a strict bound says that it waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{Buffer, held_async_op, within};
use depengine::{Engine, EngineConfig, EngineKind};

/// An engine with a strict bound (no patience: a held-back push waits as long as it takes, so
/// that the bound holds exactly even if a loaded machine stalls the workers).
fn engine(kind: EngineKind, max_pending: Option<usize>) -> Engine {
    Engine::new(
        EngineConfig::default()
            .kind(kind)
            .cpu_worker_threads(2)
            .max_pending(max_pending)
            .max_pending_wait(None),
    )
    .unwrap()
}

/// Spins for `time` (an op that takes a while without sleeping).
fn spin(time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        std::hint::spin_loop();
    }
}

/// Pushes `ops` ops of a few µs each on 16 vars; the most ops pending after a push.
///
/// Read on the pushing thread, the only one that pushes, so the count is exact: `pending_ops`
/// reads the completions, then the pushes, and no push can come in between. (Another thread's
/// read could count pushes made after the completions it read.)
fn most_pending_seen(engine: &Engine, ops: usize) -> usize {
    let vars: Vec<_> = (0..16).map(|_| engine.new_var().unwrap()).collect();
    let mut most = 0;
    for i in 0..ops {
        engine
            .op("work")
            .reads([vars[(i + 5) % 16]])
            .writes([vars[i % 16]])
            .push_sync(move |_| {
                spin(Duration::from_micros(3));
                Ok(())
            })
            .unwrap();
        most = most.max(engine.stats().pending_ops);
    }
    engine.wait_for_all().unwrap();
    most
}

#[test]
fn a_pusher_that_runs_ahead_is_held_at_the_bound() {
    const BOUND: usize = 64;
    // One pusher, and no op pushes: the bound holds exactly.
    const SLACK: usize = 0;
    for kind in [EngineKind::ThreadedPooled, EngineKind::ThreadedPerDevice] {
        within(120, &format!("{kind}"), move || {
            let bounded = engine(kind, Some(BOUND));
            let most = most_pending_seen(&bounded, 20_000);
            assert!(
                most <= BOUND + SLACK,
                "{kind}: {most} ops pending, bound {BOUND}"
            );
            // The bound did hold the pusher back: without it, the same pushes run far ahead.
            let unbounded = engine(kind, None);
            let most = most_pending_seen(&unbounded, 20_000);
            assert!(
                most > 4 * BOUND,
                "{kind}: only {most} pending without a bound"
            );
        });
    }
}

#[test]
fn a_bound_of_one_lets_every_op_through() {
    within(60, "max_pending 1", || {
        let engine = engine(EngineKind::ThreadedPerDevice, Some(1));
        let var = engine.new_var().unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        for _ in 0..1000 {
            let count = Arc::clone(&count);
            engine
                .op("count")
                .writes([var])
                .push_sync(move |_| {
                    count.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap();
            assert!(engine.stats().pending_ops <= 2);
        }
        engine.wait_for_all().unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 1000);
    });
}

/// An op pushes many more children than the bound allows: the pushes inside it are never held
/// back (they would wait for the op itself, which waits for them to return).
#[test]
fn pushes_from_inside_an_op_are_never_held_back() {
    for kind in [EngineKind::ThreadedPooled, EngineKind::ThreadedPerDevice] {
        within(60, &format!("{kind}"), move || {
            let engine = engine(kind, Some(8));
            let var = engine.new_var().unwrap();
            let children = Arc::new(AtomicUsize::new(0));
            let (inner, counted) = (engine.clone(), Arc::clone(&children));
            engine
                .op("parent")
                .writes([var])
                .push_sync(move |_| {
                    for _ in 0..1000 {
                        let counted = Arc::clone(&counted);
                        // All behind this op's own write: none can run before it returns.
                        inner
                            .op("child")
                            .reads([var])
                            .push_sync(move |_| {
                                counted.fetch_add(1, Ordering::Relaxed);
                                Ok(())
                            })
                            .unwrap();
                    }
                    Ok(())
                })
                .unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(children.load(Ordering::Relaxed), 1000);
        });
    }
}

/// The naive engine runs ops on the thread that makes them ready: a bound there would only
/// stop the pusher that holds a gate's completion, so it has none.
#[test]
fn the_naive_engine_has_no_bound() {
    within(60, "naive", || {
        let engine = engine(EngineKind::Naive, Some(4));
        let gate = engine.new_var().unwrap();
        let done = held_async_op(&engine, gate);
        for _ in 0..100 {
            engine
                .op("behind")
                .reads([gate])
                .push_sync(|_| Ok(()))
                .unwrap();
        }
        assert_eq!(engine.stats().pending_ops, 101);
        done.ok();
        engine.wait_for_all().unwrap();
    });
}

/// A pusher held back by a strict bound, by ops that wait for something it holds, is not
/// silent: the stall warning names the held-back push and the bound, and the push goes on once
/// the ops can run.
#[test]
fn a_held_back_pusher_that_waits_long_warns() {
    within(60, "warning", || {
        let engine = Engine::new(
            EngineConfig::default()
                .kind(EngineKind::ThreadedPerDevice)
                .cpu_worker_threads(2)
                .max_pending(Some(4))
                .max_pending_wait(None)
                .stall_warning(Some(Duration::from_millis(20))),
        )
        .unwrap();
        let gate = engine.new_var().unwrap();
        let done = held_async_op(&engine, gate);
        let buffer = Buffer::default();
        let subscriber = buffer.warn_subscriber();
        // The gate opens once the warning is out (or after 10 s, and the test fails).
        let opener = {
            let buffer = buffer.clone();
            thread::spawn(move || {
                let start = Instant::now();
                while !buffer.log().contains("throttled") && start.elapsed().as_secs() < 10 {
                    thread::sleep(Duration::from_millis(5));
                }
                done.ok();
            })
        };
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..10 {
                engine
                    .op("behind the gate")
                    .reads([gate])
                    .push_sync(|_| Ok(()))
                    .unwrap();
            }
        });
        opener.join().unwrap();
        engine.wait_for_all().unwrap();
        let log = buffer.log();
        assert!(log.contains("depengine::stall"), "{log}");
        assert!(
            log.contains("a push has been throttled for"),
            "names the held-back push: {log}"
        );
        assert!(
            log.contains("Engine::dump_pending"),
            "points to the picture: {log}"
        );
        assert!(
            log.contains("over the bound of 4") && log.contains("DEPENGINE_MAX_PENDING"),
            "names the bound and how to set it: {log}"
        );
    });
}

/// A pusher held back by ops that wait for something it holds (a gate it opens after pushing)
/// goes on once the pending count made no progress for the bound's patience, with an
/// allowance of `max` pushes at a time: held back one patience per allowance, not forever and
/// not for every push. Every op runs once the gate opens, and the bound holds again.
#[test]
fn a_held_back_pusher_whose_ops_wait_for_it_goes_on_by_allowances() {
    const BOUND: usize = 16;
    const OPS: usize = 200;
    const PATIENCE: Duration = Duration::from_millis(50);
    within(60, "patience", || {
        let engine = Engine::new(
            EngineConfig::default()
                .kind(EngineKind::ThreadedPerDevice)
                .cpu_worker_threads(2)
                .max_pending(Some(BOUND))
                .max_pending_wait(Some(PATIENCE)),
        )
        .unwrap();
        let gate = engine.new_var().unwrap();
        let done = held_async_op(&engine, gate);
        let ran = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        for _ in 0..OPS {
            let ran = Arc::clone(&ran);
            engine
                .op("behind the gate")
                .reads([gate])
                .push_sync(move |_| {
                    ran.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap();
        }
        let pushing = start.elapsed();
        // About 13 allowances of 16 pushes (one of each is the held-back push's withdrawn
        // count), each after at least one patience: an allowance without end would take one
        // patience, a push-by-push wait about 185.
        assert!(
            pushing >= 8 * PATIENCE,
            "held back by allowances: {pushing:?}"
        );
        assert!(pushing < 60 * PATIENCE, "not for every push: {pushing:?}");
        assert_eq!(ran.load(Ordering::Relaxed), 0, "the gate is still closed");
        assert_eq!(engine.stats().pending_ops, OPS + 1);
        done.ok();
        engine.wait_for_all().unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), OPS);
        // The last allowance's unused pushes, then the bound holds again. (A loaded machine
        // that stalls both workers for a patience while this thread pushes grants one more
        // allowance: hence the slack.)
        for _ in 0..BOUND {
            engine.op("use up").push_sync(|_| Ok(())).unwrap();
        }
        engine.wait_for_all().unwrap();
        let most = most_pending_seen(&engine, 2_000);
        assert!(most <= 2 * BOUND, "{most} ops pending, bound {BOUND}");
    });
}

#[test]
fn bad_bounds_and_periods_are_errors_naming_them() {
    let error = EngineConfig::from_lookup(|name| {
        (name == depengine::MAX_PENDING).then(|| "a million".to_owned())
    })
    .unwrap_err()
    .to_string();
    assert!(error.contains("DEPENGINE_MAX_PENDING"), "{error}");
    assert!(error.contains("a million"), "{error}");
    let error = Engine::new(EngineConfig::default().max_pending(Some(0)))
        .unwrap_err()
        .to_string();
    assert!(error.contains("EngineConfig::max_pending"), "{error}");
    let error = Engine::new(EngineConfig::default().max_pending_wait(Some(Duration::ZERO)))
        .unwrap_err()
        .to_string();
    assert!(error.contains("EngineConfig::max_pending_wait"), "{error}");
    let error = Engine::new(EngineConfig::default().stall_warning(Some(Duration::ZERO)))
        .unwrap_err()
        .to_string();
    assert!(error.contains("EngineConfig::stall_warning"), "{error}");
}
