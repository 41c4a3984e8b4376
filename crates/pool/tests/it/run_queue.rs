//! `RunQueue`: each operation, the full/empty edges, stealing halves, and concurrent
//! owner/thief traffic where every item must be taken exactly once.

use depengine_pool::RunQueue;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// `push_front` from the queue's owner: in these tests, the thread that created the queue
/// is the only one that pushes onto it.
fn push<T>(q: &RunQueue<T>, item: T) -> Result<(), T> {
    // SAFETY: only the owning thread pushes (see above).
    unsafe { q.push_front(item) }
}

#[test]
fn capacity_rounds_up_to_a_power_of_two() {
    assert_eq!(RunQueue::<u8>::with_capacity(0).capacity(), 2);
    assert_eq!(RunQueue::<u8>::with_capacity(3).capacity(), 4);
    assert_eq!(RunQueue::<u8>::with_capacity(1024).capacity(), 1024);
    assert_eq!(RunQueue::<u8>::new().capacity(), 1024);
}

#[test]
fn front_is_lifo_and_back_is_fifo() {
    let q = RunQueue::with_capacity(8);
    for i in 0..4 {
        push(&q, i).unwrap();
    }
    assert_eq!(q.pop_front(), Some(3));
    assert_eq!(q.pop_back(), Some(0));
    assert_eq!(q.pop_back(), Some(1));
    assert_eq!(q.pop_front(), Some(2));
    assert_eq!(q.pop_front(), None);
    assert_eq!(q.pop_back(), None);
    assert!(q.is_empty());
}

#[test]
fn a_full_queue_hands_the_item_back() {
    let q = RunQueue::with_capacity(4);
    for i in 0..4 {
        push(&q, i).unwrap();
    }
    assert_eq!(q.len(), 4);
    assert_eq!(push(&q, 9), Err(9));
    assert_eq!(q.pop_back(), Some(0));
    // The slot the thief freed is the one the front wraps around to.
    push(&q, 10).unwrap();
    assert_eq!(push(&q, 11), Err(11));
    assert_eq!(q.pop_front(), Some(10));
}

#[test]
fn wraps_around_many_times() {
    let q = RunQueue::with_capacity(4);
    for round in 0..1000 {
        push(&q, round).unwrap();
        push(&q, round + 1).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop_back(), Some(round));
        assert_eq!(q.pop_front(), Some(round + 1));
        assert!(q.is_empty());
    }
}

#[test]
fn pop_back_half_takes_the_oldest_half() {
    let q = RunQueue::with_capacity(16);
    for i in 0..5 {
        push(&q, i).unwrap();
    }
    let mut stolen = Vec::new();
    let taken = q.pop_back_half(usize::MAX, |item| {
        stolen.push(item);
        Ok(())
    });
    assert_eq!(taken, 3);
    assert_eq!(stolen, [0, 1, 2]);
    assert_eq!(q.len(), 2);
    assert_eq!(q.pop_back_half(1, |_| Ok(())), 1);
    assert_eq!(q.pop_front(), Some(4));
    assert_eq!(q.pop_back_half(usize::MAX, |_| Ok(())), 0);
}

#[test]
fn a_refused_item_stays_in_the_queue() {
    let q = RunQueue::with_capacity(8);
    for i in 0..6 {
        push(&q, i).unwrap();
    }
    let mut accepted = Vec::new();
    let taken = q.pop_back_half(usize::MAX, |item| {
        if accepted.len() == 1 {
            return Err(item);
        }
        accepted.push(item);
        Ok(())
    });
    assert_eq!(taken, 1);
    assert_eq!(accepted, [0]);
    assert_eq!(q.len(), 5);
    assert_eq!(q.pop_back(), Some(1));
}

#[test]
fn dropping_a_queue_drops_its_items() {
    let marker = Arc::new(());
    {
        let q = RunQueue::with_capacity(8);
        for _ in 0..3 {
            push(&q, marker.clone()).unwrap();
        }
        push(&q, marker.clone()).unwrap();
        drop(q.pop_front());
        assert_eq!(Arc::strong_count(&marker), 4);
    }
    assert_eq!(Arc::strong_count(&marker), 1);
}

/// The owner pushes and pops at the front while thieves steal at the back; every item
/// is taken exactly once.
#[test]
fn owner_and_thieves_take_each_item_once() {
    let items: usize = if cfg!(miri) { 200 } else { 200_000 };
    let q = Arc::new(RunQueue::with_capacity(64));
    let done = Arc::new(AtomicBool::new(false));
    let thieves: Vec<_> = (0..2)
        .map(|t| {
            let (q, done) = (q.clone(), done.clone());
            std::thread::spawn(move || {
                let mut got = Vec::new();
                while !done.load(Ordering::Acquire) || !q.is_empty() {
                    if t == 0 {
                        got.extend(q.pop_back());
                    } else {
                        q.pop_back_half(8, |item| {
                            got.push(item);
                            Ok(())
                        });
                    }
                    std::hint::spin_loop();
                }
                got
            })
        })
        .collect();
    let mut owner = Vec::new();
    for i in 0..items {
        let mut item = i;
        while let Err(back) = push(&q, item) {
            item = back;
            owner.extend(q.pop_front());
        }
        if i % 3 == 0 {
            owner.extend(q.pop_front());
        }
    }
    while let Some(item) = q.pop_front() {
        owner.push(item);
    }
    done.store(true, Ordering::Release);
    let mut all = owner;
    for thief in thieves {
        all.extend(thief.join().unwrap());
    }
    all.sort_unstable();
    assert_eq!(all, (0..items).collect::<Vec<_>>());
}
