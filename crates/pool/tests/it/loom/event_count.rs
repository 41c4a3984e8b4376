//! loom: a waiter and a notifier never lose a wake-up (a lost one would leave the
//! waiter parked forever, which loom reports as a deadlock).

use depengine_pool::EventCount;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;

fn wait_for(event: &EventCount, flag: &AtomicBool, id: usize) {
    loop {
        if flag.load(Ordering::Relaxed) {
            return;
        }
        event.prewait(id);
        if flag.load(Ordering::Relaxed) {
            event.cancel_wait(id);
            return;
        }
        event.commit_wait(id);
    }
}

#[test]
fn notify_one_reaches_the_waiter() {
    loom::model(|| {
        let event = Arc::new(EventCount::new(1));
        let flag = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (event, flag) = (event.clone(), flag.clone());
            thread::spawn(move || wait_for(&event, &flag, 0))
        };
        flag.store(true, Ordering::Relaxed);
        event.notify(false);
        waiter.join().unwrap();
    });
}

#[test]
fn notify_all_reaches_both_waiters() {
    loom::model(|| {
        let event = Arc::new(EventCount::new(2));
        let flag = Arc::new(AtomicBool::new(false));
        let waiters: Vec<_> = (0..2)
            .map(|id| {
                let (event, flag) = (event.clone(), flag.clone());
                thread::spawn(move || wait_for(&event, &flag, id))
            })
            .collect();
        flag.store(true, Ordering::Relaxed);
        event.notify(true);
        for w in waiters {
            w.join().unwrap();
        }
    });
}

/// Two work items, two waiters, two notify-ones, modelled on the pool's workers:
/// either waiter may take either item, and a waiter that found work looks again
/// afterwards. Each notification must reach someone who (re-)checks, so both items are
/// taken; a lost wake-up leaves an item behind and the main thread spinning, which
/// loom reports. (Waiters with *different* conditions would need `notify(true)`, as
/// with any condition variable: a notify-one may be absorbed by a waiter that cancels
/// because it found other work.)
#[test]
fn two_notify_ones_get_two_items_taken() {
    fn take(items: &AtomicUsize) -> bool {
        items
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }
    loom::model(|| {
        let event = Arc::new(EventCount::new(2));
        let items = Arc::new(AtomicUsize::new(0));
        let taken = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let waiters: Vec<_> = (0..2)
            .map(|id| {
                let (event, items, taken, done) =
                    (event.clone(), items.clone(), taken.clone(), done.clone());
                thread::spawn(move || {
                    loop {
                        if take(&items) {
                            taken.fetch_add(1, Ordering::Release);
                            continue;
                        }
                        if done.load(Ordering::Relaxed) {
                            return;
                        }
                        event.prewait(id);
                        if items.load(Ordering::Relaxed) > 0 || done.load(Ordering::Relaxed) {
                            event.cancel_wait(id);
                            continue;
                        }
                        event.commit_wait(id);
                    }
                })
            })
            .collect();
        for _ in 0..2 {
            items.fetch_add(1, Ordering::Relaxed);
            event.notify(false);
        }
        while taken.load(Ordering::Acquire) < 2 {
            thread::yield_now();
        }
        done.store(true, Ordering::Relaxed);
        event.notify(true);
        for w in waiters {
            w.join().unwrap();
        }
    });
}

/// A notification goes only to a waiter that was waiting when it was sent: here the
/// notifier starts waiting itself right after notifying, for a different condition,
/// and must not take the signal meant for the other thread.
#[test]
fn a_later_waiter_does_not_take_an_earlier_signal() {
    loom::model(|| {
        let event = Arc::new(EventCount::new(2));
        let flags = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let other = {
            let (event, flags) = (event.clone(), flags.clone());
            thread::spawn(move || {
                wait_for(&event, &flags[1], 1);
                flags[0].store(true, Ordering::Relaxed);
                event.notify(false);
            })
        };
        flags[1].store(true, Ordering::Relaxed);
        event.notify(false);
        wait_for(&event, &flags[0], 0);
        other.join().unwrap();
    });
}

/// A waiter that comes back from `commit_wait` was signaled, and sees what the notifier
/// wrote before `notify` (read here through a plain cell, so loom checks it). The flag
/// is read `Relaxed` and the cell is read only on the signaled path, so the only
/// synchronization is the signal's: the notifier's `WAITING → SIGNALED` compare-exchange
/// (its Release half) and the waiter's `Acquire` on the status (`SIGNALED → IDLE` in
/// `commit_wait`, or the failure ordering of `WAITING → PARKED`). Catches any of these
/// weakened to `Relaxed` (causality violation).
#[test]
fn a_signaled_waiter_sees_the_notifiers_writes() {
    loom::model(|| {
        let event = Arc::new(EventCount::new(1));
        let flag = Arc::new(AtomicBool::new(false));
        let data = Arc::new(loom::cell::UnsafeCell::new(0_u32));
        let waiter = {
            let (event, flag, data) = (event.clone(), flag.clone(), data.clone());
            thread::spawn(move || {
                event.prewait(0);
                if flag.load(Ordering::Relaxed) {
                    event.cancel_wait(0);
                } else {
                    event.commit_wait(0);
                    // SAFETY: the notifier wrote the cell before notifying and never
                    // touches it again; the signal orders that write before this read.
                    assert_eq!(data.with(|value| unsafe { *value }), 1);
                }
            })
        };
        // SAFETY: the waiter reads the cell only after it was signaled, which happens
        // after this write.
        data.with_mut(|value| unsafe { *value = 1 });
        flag.store(true, Ordering::Relaxed);
        event.notify(false);
        waiter.join().unwrap();
    });
}
