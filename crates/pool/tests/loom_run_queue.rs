//! loom: the owner's front operations racing a thief at the back; every item is taken
//! exactly once, whatever the interleaving.
#![cfg(loom)]

use depengine_pool::RunQueue;
use loom::sync::Arc;
use loom::thread;

fn check_exactly_once(mut taken: Vec<u32>, pushed: u32) {
    taken.sort_unstable();
    assert_eq!(taken, (0..pushed).collect::<Vec<_>>());
}

#[test]
fn owner_push_pop_vs_thief_pop_back() {
    loom::model(|| {
        let q = Arc::new(RunQueue::with_capacity(2));
        q.push_front(0).unwrap();
        let thief = {
            let q = q.clone();
            thread::spawn(move || q.pop_back().into_iter().collect::<Vec<_>>())
        };
        q.push_front(1).unwrap();
        let mut taken: Vec<u32> = q.pop_front().into_iter().collect();
        taken.extend(q.pop_front());
        taken.extend(thief.join().unwrap());
        // Whatever the thief left behind is still there for the owner.
        taken.extend(q.pop_front());
        check_exactly_once(taken, 2);
    });
}

#[test]
fn owner_pop_vs_thief_pop_back_half() {
    loom::model(|| {
        let q = Arc::new(RunQueue::with_capacity(4));
        for i in 0..3 {
            q.push_front(i).unwrap();
        }
        let thief = {
            let q = q.clone();
            thread::spawn(move || {
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
        while let Some(item) = q.pop_front() {
            taken.push(item);
        }
        check_exactly_once(taken, 3);
    });
}

#[test]
fn outside_push_back_vs_owner_pop_front() {
    loom::model(|| {
        let q = Arc::new(RunQueue::with_capacity(2));
        let pusher = {
            let q = q.clone();
            thread::spawn(move || q.push_back(7u32).is_ok())
        };
        let early = q.pop_front();
        assert!(pusher.join().unwrap());
        let late = q.pop_front();
        // Exactly one of the two pops got the item.
        assert_eq!(u8::from(early.is_some()) + u8::from(late.is_some()), 1);
        assert!(q.is_empty());
    });
}
