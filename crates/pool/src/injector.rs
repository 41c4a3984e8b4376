//! The queue for work submitted from outside the pool.
//!
//! `spawn` from a thread that is not a worker goes here rather than to a worker's
//! `RunQueue`: crossbeam-deque's `Injector` is a lock-free unbounded MPMC queue, so an
//! outside submitter never contends with thieves for a `RunQueue`'s back lock and never
//! has to run a task inline because a queue is full. `cargo xtask bench pool` measured
//! both designs (see `docs/bench.md`): with 10^6 tasks from one outside thread, pushing
//! to a random `RunQueue`'s back cost 540-900 ns per task, the injector much less.
//!
//! Under loom the crossbeam type cannot be modelled (it does not use our sync facade),
//! so a mutex-protected deque with the same interface stands in for it.

#[cfg(not(loom))]
pub(crate) struct Injector<T>(crossbeam_deque::Injector<T>);

#[cfg(not(loom))]
impl<T> Injector<T> {
    pub(crate) fn new() -> Self {
        Self(crossbeam_deque::Injector::new())
    }

    pub(crate) fn push(&self, item: T) {
        self.0.push(item);
    }

    /// Takes the oldest item, if any.
    pub(crate) fn steal(&self) -> Option<T> {
        loop {
            match self.0.steal() {
                crossbeam_deque::Steal::Success(item) => return Some(item),
                crossbeam_deque::Steal::Empty => return None,
                // Lost a race with another consumer or a push in progress: try again.
                crossbeam_deque::Steal::Retry => crate::sync::spin_hint(),
            }
        }
    }

    /// The number of queued items (racy, like any length of a concurrent queue).
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Like `RunQueue::is_empty`, never reports empty once a push has returned: the
    /// tail index moves before the item is written, so an in-flight push counts.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(loom)]
pub(crate) struct Injector<T>(crate::sync::Mutex<std::collections::VecDeque<T>>);

#[cfg(loom)]
impl<T> Injector<T> {
    pub(crate) fn new() -> Self {
        Self(crate::sync::Mutex::new(std::collections::VecDeque::new()))
    }

    pub(crate) fn push(&self, item: T) {
        crate::sync::lock(&self.0).push_back(item);
    }

    pub(crate) fn steal(&self) -> Option<T> {
        crate::sync::lock(&self.0).pop_front()
    }

    pub(crate) fn is_empty(&self) -> bool {
        crate::sync::lock(&self.0).is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        crate::sync::lock(&self.0).len()
    }
}
