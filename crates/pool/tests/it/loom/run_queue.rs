//! loom: the owner's front operations racing a thief at the back; every item is taken
//! exactly once, whatever the interleaving.
//!
//! The slot protocol's orderings are caught here by loom's data-race detection on the
//! slot's value cell: a claim that does not acquire the previous transition's Release
//! lets the new owner of the slot touch the value concurrently with the previous one,
//! which loom reports as a causality violation. The queues hold 2 slots, so that the
//! models wrap the ring (a slot freed at one end is reused by the other end) and fill it.
//!
//! Every model yields once, either in the spawner right after the spawn or at the start
//! of the spawned thread, whichever explores more interleavings for that model: loom
//! 0.7's exploration may otherwise never run the spawned thread before the spawner's
//! next accesses (tokio-rs/loom#392). `cargo xtask loom` lists the interleavings each
//! model explores and fails on a model that explores one.
//!
//! The model thread that creates a queue is its owner, the only one that pushes (the
//! contract of `RunQueue::push_front`).

use depengine_pool::RunQueue;
use loom::sync::Arc;
use loom::thread;

fn check_exactly_once(mut taken: Vec<u32>, pushed: &[u32]) {
    taken.sort_unstable();
    let mut pushed = pushed.to_vec();
    pushed.sort_unstable();
    assert_eq!(taken, pushed);
}

/// `push_front` by the queue's owner (the model thread that created it).
fn push(q: &RunQueue<u32>, item: u32) -> Result<(), u32> {
    // SAFETY: only the owning thread pushes (see the module documentation).
    unsafe { q.push_front(item) }
}

/// Pops everything left at the owner's end.
fn drain_front(q: &RunQueue<u32>, taken: &mut Vec<u32>) {
    while let Some(item) = q.pop_front() {
        taken.push(item);
    }
}

#[test]
fn owner_push_pop_vs_thief_pop_back() {
    loom::model(|| {
        let q = Arc::new(RunQueue::with_capacity(2));
        push(&q, 0).unwrap();
        let thief = {
            let q = q.clone();
            thread::spawn(move || {
                thread::yield_now();
                q.pop_back().into_iter().collect::<Vec<_>>()
            })
        };
        push(&q, 1).unwrap();
        let mut taken: Vec<u32> = q.pop_front().into_iter().collect();
        taken.extend(q.pop_front());
        taken.extend(thief.join().unwrap());
        // Whatever the thief left behind is still there for the owner.
        drain_front(&q, &mut taken);
        check_exactly_once(taken, &[0, 1]);
    });
}

/// A thief that started on an empty queue steals an item the owner pushes meanwhile:
/// the only way the item can reach it is the slot's `READY` publication. Catches the
/// `Release` of `Slot::publish` and the `Acquire` of the claiming CAS in `Slot::claim_ready`
/// (either one `Relaxed`: causality violation on the value cell).
#[test]
fn thief_steals_an_item_pushed_after_it_started() {
    loom::model(|| {
        let q = Arc::new(RunQueue::with_capacity(2));
        let thief = {
            let q = q.clone();
            thread::spawn(move || {
                thread::yield_now();
                q.pop_back()
            })
        };
        push(&q, 0).unwrap();
        let mut taken: Vec<u32> = thief.join().unwrap().into_iter().collect();
        drain_front(&q, &mut taken);
        check_exactly_once(taken, &[0]);
    });
}

/// The ring wraps under a thief: the owner fills a 2-slot ring, then pushes into it
/// while a thread runs `steal`, reusing the slot the thief frees if it sees it `EMPTY`
/// (and getting its item back as "full" otherwise). Every item is taken exactly once.
fn owner_pushes_while_a_thief_frees_a_slot(steal: fn(&RunQueue<u32>) -> Vec<u32>) {
    loom::model(move || {
        let q = Arc::new(RunQueue::with_capacity(2));
        push(&q, 0).unwrap();
        push(&q, 1).unwrap();
        let thief = {
            let q = q.clone();
            thread::spawn(move || steal(&q))
        };
        thread::yield_now();
        let mut pushed = vec![0, 1];
        if push(&q, 2).is_ok() {
            pushed.push(2);
        }
        let mut taken = thief.join().unwrap();
        drain_front(&q, &mut taken);
        check_exactly_once(taken, &pushed);
    });
}

/// `owner_pushes_while_a_thief_frees_a_slot` with `pop_back`. Catches the `Release` of
/// the `EMPTY` store in `Slot::take` and the `Acquire` of the owner's claim of an `EMPTY`
/// slot, `Slot::claim_empty` (either one `Relaxed`: the owner's write races the thief's
/// move-out).
#[test]
fn owner_push_front_reuses_the_slot_a_thief_pops() {
    owner_pushes_while_a_thief_frees_a_slot(|q| q.pop_back().into_iter().collect());
}

/// `owner_pushes_while_a_thief_frees_a_slot` with `pop_back_half` (it marks the slot
/// `EMPTY` itself, after the sink accepted the item). Catches the `Release` of that store.
#[test]
fn owner_push_front_reuses_the_slot_pop_back_half_frees() {
    owner_pushes_while_a_thief_frees_a_slot(|q| {
        let mut got = Vec::new();
        q.pop_back_half(usize::MAX, |item| {
            got.push(item);
            Ok(())
        });
        got
    });
}

#[test]
fn owner_pop_vs_thief_pop_back_half() {
    loom::model(|| {
        let q = Arc::new(RunQueue::with_capacity(4));
        for i in 0..3 {
            push(&q, i).unwrap();
        }
        let thief = {
            let q = q.clone();
            thread::spawn(move || {
                thread::yield_now();
                let mut got = Vec::new();
                q.pop_back_half(usize::MAX, |item| {
                    got.push(item);
                    Ok(())
                });
                got
            })
        };
        let mut taken: Vec<u32> = q.pop_front().into_iter().collect();
        taken.extend(thief.join().unwrap());
        drain_front(&q, &mut taken);
        check_exactly_once(taken, &[0, 1, 2]);
    });
}
