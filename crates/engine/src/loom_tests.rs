//! Loom models of the facade's own synchronization (`wait.rs`): the completion counter that
//! `wait_for_all` sleeps on, and the latch `wait_for_var` blocks on.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p depengine
//! --lib --tests` (or `cargo xtask loom`).

use loom::sync::Arc;
use loom::thread;

use crate::wait::{IdleCounter, Latch};

/// Two ops complete on two threads while a third waits for all: the waiter always wakes, and
/// only once nothing is pending.
#[test]
fn wait_idle_never_misses_the_last_completion() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        counter.add();
        counter.add();
        let completers: Vec<_> = (0..2)
            .map(|_| {
                let counter = Arc::clone(&counter);
                thread::spawn(move || counter.done())
            })
            .collect();
        counter.wait_idle();
        assert_eq!(counter.pending(), 0);
        for completer in completers {
            completer.join().unwrap();
        }
    });
}

/// A completion racing a push of a new op and a waiter: the waiter returns only at zero.
#[test]
fn wait_idle_with_a_concurrent_push() {
    loom::model(|| {
        let counter = Arc::new(IdleCounter::new());
        counter.add();
        let worker = {
            let counter = Arc::clone(&counter);
            thread::spawn(move || {
                counter.add();
                counter.done();
                counter.done();
            })
        };
        counter.wait_idle();
        assert_eq!(counter.pending(), 0);
        worker.join().unwrap();
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
