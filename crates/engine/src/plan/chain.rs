//! [`Chain`] and [`ReplayLink`]: replays of a plan queued behind the last one pushed, which
//! take over its vars when it is done instead of entering the var queues (`run/replay/`,
//! "Chained replays").
//!
//! A replay of a plan that writes a var, pushed when the plan's last pushed replay is the last
//! op waiting on each of the plan's vars, or holds the var with nothing waiting, would wait for
//! that replay alone (both write that var; a plan that writes none is not chained): it is
//! queued on that replay's link rather than pushed, and the replay, once its ops are done,
//! starts it on the vars it holds rather than giving them back and having them taken again.
//! An op pushed after it on those vars queues behind the replay it is queued on, so it still
//! runs after it.
//!
//! The chain's lock orders the two sides. The tail is set by a push made under the lock, and
//! cleared by the tail itself, under the lock, when it ends with nothing queued, before it
//! gives its vars back; a replay is queued under the lock, on the tail it was checked against,
//! only if that is still the tail. So what is queued on a tail is run by it. The check itself
//! (a lock per var) runs outside the chain's lock, so that a tail ending meanwhile does not
//! wait for it: if the tail ends during the check, the queueing finds it gone and the replay is
//! pushed. Subtle: the check is not atomic across the vars, nor is it with the queueing; an op
//! pushed on a var after the check looked at that var queues behind the tail and runs after
//! the queued replay, which is an order its push allows, as it did not happen before the
//! replay was asked for (then the check would have seen it). The loom model
//! `a_chained_replay_runs_or_is_pushed` checks that no replay is lost, and that an op pushed on
//! the var meanwhile runs after it.

use std::sync::{Arc, Weak};

use depengine_sync::{AtomicU32, Mutex, MutexGuard, Ordering, lock};

/// A plan's last pushed replay, while it has not ended (see the module documentation).
#[derive(Default)]
pub(crate) struct Chain(Mutex<Option<Weak<ReplayLink>>>);

/// One pushed replay of a plan, which its op carries: where replays queue behind it.
#[derive(Default)]
pub(crate) struct ReplayLink {
    /// Replays queued behind it. Changed only under its plan's chain lock, which orders every
    /// access (`Relaxed`).
    queued: AtomicU32,
}

/// The chain's lock, held while a replay is queued or pushed: [`Chain::lock`].
pub(crate) struct ChainGuard<'c>(MutexGuard<'c, Option<Weak<ReplayLink>>>);

impl Chain {
    /// Takes the chain's lock, to queue a replay or push one.
    pub(crate) fn lock(&self) -> ChainGuard<'_> {
        ChainGuard(lock(&self.0))
    }

    /// The tail, if there is one: what a replay may be queued on, once checked
    /// ([`ChainGuard::try_queue`]).
    pub(crate) fn tail(&self) -> Option<Arc<ReplayLink>> {
        lock(&self.0).as_ref().and_then(Weak::upgrade)
    }

    /// The replay `link` ran its ops: `true` when it starts a replay queued on it, on its vars
    /// (it stays the tail if it was); `false` when it ends and gives its vars back.
    pub(crate) fn pass_on(&self, link: &Arc<ReplayLink>) -> bool {
        let mut tail = lock(&self.0);
        let queued = link.queued.load(Ordering::Relaxed);
        if queued > 0 {
            link.queued.store(queued - 1, Ordering::Relaxed);
            return true;
        }
        if tail
            .as_ref()
            .is_some_and(|tail| std::ptr::eq(tail.as_ptr(), Arc::as_ptr(link)))
        {
            *tail = None;
        }
        false
    }
}

impl ChainGuard<'_> {
    /// Queues a replay on `tail`, checked to have nothing waiting behind it on the plan's vars,
    /// if it is still the tail (it has not ended, and no replay was pushed since); `false`:
    /// the replay is to be pushed.
    pub(crate) fn try_queue(&mut self, tail: &Arc<ReplayLink>) -> bool {
        // `tail` is alive (held here), so no other link can have its address.
        let is_tail = self
            .0
            .as_ref()
            .is_some_and(|current| std::ptr::eq(current.as_ptr(), Arc::as_ptr(tail)));
        let queued = tail.queued.load(Ordering::Relaxed);
        if !is_tail || queued == u32::MAX {
            return false;
        }
        tail.queued.store(queued + 1, Ordering::Relaxed);
        true
    }

    /// The replay `link` was pushed (under this lock): the new tail.
    pub(crate) fn pushed(&mut self, link: &Arc<ReplayLink>) {
        *self.0 = Some(Arc::downgrade(link));
    }
}
