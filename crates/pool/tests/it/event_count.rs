//! `EventCount`: cancel, commit with a pending signal, and wake-ups that must not be
//! lost under a real race.

use depengine_pool::EventCount;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

#[test]
fn notify_without_waiters_is_a_no_op() {
    let event = EventCount::new(2);
    event.notify(false);
    event.notify(true);
    // Nothing was signaled: a later waiter is not woken by the earlier notifications.
    assert!(format!("{event:?}").contains("waiters: 0"));
    event.prewait(0);
    // Re-checking "the condition" here would see nothing; cancel instead of blocking.
    event.cancel_wait(0);
}

#[test]
fn cancel_undoes_prewait() {
    let event = EventCount::new(1);
    event.prewait(0);
    assert!(format!("{event:?}").contains("waiters: 1"));
    event.cancel_wait(0);
    assert!(format!("{event:?}").contains("waiters: 0"));
}

#[test]
fn a_signal_between_prewait_and_commit_is_not_lost() {
    let event = EventCount::new(1);
    event.prewait(0);
    event.notify(false);
    // Returns at once: the notification arrived after the prewait.
    event.commit_wait(0);
    assert!(format!("{event:?}").contains("waiters: 0"));
}

/// Two players alternate turns, each waiting for its own turn. When a player notifies,
/// only the other can be waiting, so `notify(false)` must reach it too; and a player
/// that starts waiting right after its own notification must not take the signal
/// meant for the other. A lost wake-up hangs.
fn ping_pong(all: bool) {
    let rounds = if cfg!(miri) { 20 } else { 20_000 };
    let event = Arc::new(EventCount::new(2));
    let turn = Arc::new(AtomicUsize::new(0));
    let players: Vec<_> = (0..2)
        .map(|me| {
            let (event, turn) = (event.clone(), turn.clone());
            thread::spawn(move || {
                for round in 0..rounds {
                    let mine = 2 * round + me;
                    loop {
                        if turn.load(Ordering::Acquire) == mine {
                            break;
                        }
                        event.prewait(me);
                        if turn.load(Ordering::Acquire) == mine {
                            event.cancel_wait(me);
                            break;
                        }
                        event.commit_wait(me);
                    }
                    turn.store(mine + 1, Ordering::Release);
                    event.notify(all);
                }
            })
        })
        .collect();
    for p in players {
        p.join().unwrap();
    }
    assert_eq!(turn.load(Ordering::Relaxed), 2 * rounds);
}

#[test]
fn ping_pong_with_notify_one() {
    ping_pong(false);
}

#[test]
fn ping_pong_with_notify_all() {
    ping_pong(true);
}

/// Producers publish work items one at a time with `notify(false)`; consumers, any of
/// which can take any item (like the pool's workers), must take them all. A lost
/// wake-up leaves items behind and hangs the final wait.
#[test]
fn notify_one_wakes_enough_consumers_for_all_items() {
    let items = if cfg!(miri) { 50 } else { 100_000 };
    let event = Arc::new(EventCount::new(2));
    let available = Arc::new(AtomicUsize::new(0));
    let taken = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let take = |available: &AtomicUsize| {
        available
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    };
    let consumers: Vec<_> = (0..2)
        .map(|id| {
            let (event, available, taken, done) = (
                event.clone(),
                available.clone(),
                taken.clone(),
                done.clone(),
            );
            thread::spawn(move || {
                loop {
                    if take(&available) {
                        taken.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if done.load(Ordering::Acquire) {
                        return;
                    }
                    event.prewait(id);
                    if available.load(Ordering::Acquire) > 0 || done.load(Ordering::Acquire) {
                        event.cancel_wait(id);
                        continue;
                    }
                    event.commit_wait(id);
                }
            })
        })
        .collect();
    for i in 0..items {
        available.fetch_add(1, Ordering::Release);
        event.notify(false);
        if i % 64 == 0 {
            thread::yield_now();
        }
    }
    while taken.load(Ordering::Relaxed) < items {
        thread::yield_now();
    }
    done.store(true, Ordering::Release);
    event.notify(true);
    for c in consumers {
        c.join().unwrap();
    }
    assert_eq!(available.load(Ordering::Relaxed), 0);
}

#[test]
fn notify_all_wakes_every_parked_waiter() {
    let waiters = 3;
    let event = Arc::new(EventCount::new(waiters));
    let go = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..waiters)
        .map(|id| {
            let (event, go) = (event.clone(), go.clone());
            thread::spawn(move || {
                while !go.load(Ordering::Acquire) {
                    event.prewait(id);
                    if go.load(Ordering::Acquire) {
                        event.cancel_wait(id);
                        break;
                    }
                    event.commit_wait(id);
                }
            })
        })
        .collect();
    go.store(true, Ordering::Release);
    event.notify(true);
    for t in threads {
        t.join().unwrap();
    }
}
