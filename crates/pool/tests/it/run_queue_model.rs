//! proptest: any single-threaded sequence of `RunQueue` operations behaves like a
//! `VecDeque` (front = the owner's end) bounded by the capacity.

use depengine_pool::RunQueue;
use proptest::prelude::*;
use std::collections::VecDeque;

#[derive(Debug, Clone)]
enum Op {
    PushFront(u32),
    PopFront,
    PopBack,
    PopBackHalf(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => any::<u32>().prop_map(Op::PushFront),
        2 => Just(Op::PopFront),
        1 => Just(Op::PopBack),
        1 => (1usize..6).prop_map(Op::PopBackHalf),
    ]
}

/// Operations per case: under Miri, fewer (still many times the largest capacity, so the
/// indices wrap around), as Miri interprets each one.
const OPS: usize = if cfg!(miri) { 64 } else { 200 };

fn config() -> ProptestConfig {
    let mut config = ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 512 });
    if cfg!(miri) {
        // Miri's isolation forbids the file system that failure persistence uses.
        config.failure_persistence = None;
    }
    config
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn matches_a_bounded_deque(capacity in 1usize..9, ops in prop::collection::vec(op(), 0..OPS)) {
        let queue = RunQueue::with_capacity(capacity);
        let capacity = queue.capacity();
        let mut model: VecDeque<u32> = VecDeque::new();
        for op in ops {
            match op {
                Op::PushFront(v) => {
                    let expected = if model.len() < capacity { model.push_front(v); Ok(()) } else { Err(v) };
                    // SAFETY: this thread is the queue's only pusher.
                    prop_assert_eq!(unsafe { queue.push_front(v) }, expected);
                }
                Op::PopFront => prop_assert_eq!(queue.pop_front(), model.pop_front()),
                Op::PopBack => prop_assert_eq!(queue.pop_back(), model.pop_back()),
                Op::PopBackHalf(max) => {
                    let want = model.len().div_ceil(2).min(max);
                    let expected: Vec<u32> = (0..want).filter_map(|_| model.pop_back()).collect();
                    let mut got = Vec::new();
                    let taken = queue.pop_back_half(max, |v| { got.push(v); Ok(()) });
                    prop_assert_eq!(taken, expected.len());
                    prop_assert_eq!(got, expected);
                }
            }
            prop_assert_eq!(queue.len(), model.len());
            prop_assert_eq!(queue.is_empty(), model.is_empty());
        }
    }
}
