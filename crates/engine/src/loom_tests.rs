//! Loom models of the facade's own synchronization (`wait.rs`): the completion counter that
//! `wait_for_all` sleeps on, and the latch `wait_for_var` blocks on.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p depengine
//! --lib --tests` (or `cargo xtask loom`).
//!
//! Each op's "effect" is a relaxed store to a flag before its `done()`: a waiter that returns
//! must see it, which checks both that it did not return early and that the op's effects
//! happen-before the return.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

use crate::wait::{IdleCounter, Latch};

/// An op: its effect, then its completion.
fn complete(counter: &IdleCounter, effect: &AtomicBool) {
    effect.store(true, Ordering::Relaxed);
    counter.done();
}

/// Two ops complete on two threads while a third waits for all: the waiter always wakes, and
/// only once both completed.
#[test]
fn wait_idle_never_misses_the_last_completion() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        let effects = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        counter.add();
        counter.add();
        let completers: Vec<_> = (0..2)
            .map(|op| {
                let counter = Arc::clone(&counter);
                let effects = Arc::clone(&effects);
                thread::spawn(move || complete(&counter, &effects[op]))
            })
            .collect();
        counter.wait_idle();
        assert!(effects[0].load(Ordering::Relaxed));
        assert!(effects[1].load(Ordering::Relaxed));
        assert_eq!(counter.pending(), 0);
        for completer in completers {
            completer.join().unwrap();
        }
    });
}

/// An op pushes a child before it completes itself (as an op that pushes ops does): the
/// waiter, which only knew of the parent, must not return while the child is pending.
#[test]
fn wait_idle_waits_for_ops_pushed_by_ops() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        let effects = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        counter.add();
        let parent = {
            let counter = Arc::clone(&counter);
            let effects = Arc::clone(&effects);
            thread::spawn(move || {
                counter.add();
                let child = {
                    let counter = Arc::clone(&counter);
                    let effects = Arc::clone(&effects);
                    thread::spawn(move || complete(&counter, &effects[1]))
                };
                complete(&counter, &effects[0]);
                child.join().unwrap();
            })
        };
        counter.wait_idle();
        assert!(
            effects[0].load(Ordering::Relaxed),
            "returned before the parent"
        );
        assert!(
            effects[1].load(Ordering::Relaxed),
            "returned before the child"
        );
        assert_eq!(counter.pending(), 0);
        parent.join().unwrap();
    });
}

/// An unrelated thread adds and completes an op of its own while the waiter's op is pending:
/// the counts are not op identities, so the other op's completion must not stand in for the
/// waiter's (a target taken from `pushed` and compared with `completed` would return early).
#[test]
fn wait_idle_is_not_fooled_by_a_concurrent_op() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        let effect = Arc::new(AtomicBool::new(false));
        counter.add();
        let completer = {
            let counter = Arc::clone(&counter);
            let effect = Arc::clone(&effect);
            thread::spawn(move || complete(&counter, &effect))
        };
        let other = {
            let counter = Arc::clone(&counter);
            thread::spawn(move || {
                counter.add();
                counter.done();
            })
        };
        counter.wait_idle();
        assert!(
            effect.load(Ordering::Relaxed),
            "returned before the waited op"
        );
        completer.join().unwrap();
        other.join().unwrap();
        assert_eq!(counter.pending(), 0);
    });
}

/// Two threads wait at once while an op completes: both wake, neither early.
#[test]
fn two_waiters_both_wake() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        let effect = Arc::new(AtomicBool::new(false));
        counter.add();
        let completer = {
            let counter = Arc::clone(&counter);
            let effect = Arc::clone(&effect);
            thread::spawn(move || complete(&counter, &effect))
        };
        let waiter = {
            let counter = Arc::clone(&counter);
            let effect = Arc::clone(&effect);
            thread::spawn(move || {
                counter.wait_idle();
                assert!(effect.load(Ordering::Relaxed));
            })
        };
        counter.wait_idle();
        assert!(effect.load(Ordering::Relaxed));
        waiter.join().unwrap();
        completer.join().unwrap();
        assert_eq!(counter.pending(), 0);
    });
}

/// `pending` read while an op is added and completed concurrently: never underflows (it
/// would panic in debug, or be huge), and is 0 or 1.
#[test]
fn pending_never_underflows() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        let worker = {
            let counter = Arc::clone(&counter);
            thread::spawn(move || {
                counter.add();
                counter.done();
            })
        };
        assert!(counter.pending() <= 1);
        worker.join().unwrap();
        assert_eq!(counter.pending(), 0);
    });
}

/// The latch hands its value over whether it is set before or after the wait begins.
#[test]
fn latch_hands_over_its_value() {
    loom::model(|| {
        let latch = Arc::new(Latch::new());
        let setter = {
            let latch = Arc::clone(&latch);
            thread::spawn(move || latch.set(7_u32))
        };
        assert_eq!(latch.wait(), 7);
        setter.join().unwrap();
    });
}
