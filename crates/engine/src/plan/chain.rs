//! [`Chain`] and [`ReplayLink`]: replays of a plan queued behind the last one pushed, which
//! take over its vars when it is done instead of entering the var queues (`run/replay.rs`,
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
//! The chain's lock orders the two sides. A replay is queued only on the chain's tail, checked
//! under the lock; the tail is set by a push made under the lock, and cleared by the tail
//! itself, under the lock, when it ends with nothing queued, before it gives its vars back. So
//! while a check runs, the tail is in the graph (waiting or holding every var), and what is
//! queued on it is run by it. The loom model `a_chained_replay_runs_or_is_pushed` checks that
//! none is lost, and that an op pushed on the var meanwhile runs after it.

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
    /// Queues a replay on the tail, if there is one and `behind_tail` (called with it, under the
    /// lock) says nothing waits on the plan's vars behind it; `false`: the replay is to be
    /// pushed.
    pub(crate) fn try_queue(&mut self, behind_tail: impl FnOnce(&ReplayLink) -> bool) -> bool {
        let Some(tail) = self.0.as_ref().and_then(Weak::upgrade) else {
            return false;
        };
        let queued = tail.queued.load(Ordering::Relaxed);
        if queued == u32::MAX || !behind_tail(&tail) {
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
