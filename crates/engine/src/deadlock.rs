//! Waits inside ops that would never return: [`BlockedWaits`] and [`closes_cycle`].
//!
//! An op that calls `wait_for_var` keeps its vars until the wait returns. The wait is itself an
//! op (a write of the var, queued behind every op pushed on it before), so it deadlocks when
//! that op waits, directly or through others, for a var the waiting op holds: for example, an
//! op writing `a` waits for `b` while an op reading `a` and writing `b` was pushed before the
//! wait. Waiting for a var the op itself uses is the simplest case (`WaitOnOwnVar`, checked
//! before anything is pushed).
//!
//! # Protocol
//!
//! A wait from inside an op of this engine:
//!
//! 1. **registers** in [`BlockedWaits`]: its latch and the vars of every op running on this
//!    thread (all of them block until the wait returns);
//! 2. pushes its wait op;
//! 3. unless the wait is already over, **walks** the ops held back by its vars
//!    ([`Graph::holds_back`]). Reaching its own wait op means a cycle. Reaching the wait op of
//!    another registered wait means the ops of that thread block too, so the walk goes on from
//!    their vars: cycles through several threads are found as well;
//! 4. on a cycle, **abandons** its latch and returns `WaitDeadlock`, unless the wait op was
//!    claimed meanwhile (then there was no cycle, and it waits);
//! 5. unregisters once the wait returned.
//!
//! A cycle through several waits is found by the last of them to register, or by a later one:
//! each registers before it pushes and walks after, so of two waits in one cycle, the one that
//! walks second sees the other's registration and its wait op (if the first walk missed the
//! second wait op, that op was pushed after the first walk looked, hence after the first
//! registration). Both may report it; either report breaks the cycle.
//!
//! An abandoned wait op stays queued and completes, doing nothing, once the ops ahead of it
//! have: `release_waiter` finds the latch abandoned and leaves the var's failure in place.
//!
//! Not detected: a cycle through a thread that waits outside any op of this engine (a plain
//! thread holds no var), or through another engine, and ops that cannot run because every
//! worker of their block is blocked in a wait (see "Misuse" in `docs/engine.md`).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use depengine_graph::{Graph, Visit};

use crate::failure::OpFailure;
use crate::frame::Held;
use crate::record::{OpFn, OpRecord};
use crate::wait::Latch;

/// The latch a `wait_for_var` blocks on.
pub(crate) type WaitLatch = Latch<Option<OpFailure>>;

/// The waits inside ops of one engine that are blocked now, with the vars they keep held.
#[derive(Default)]
pub(crate) struct BlockedWaits {
    waits: Mutex<Vec<BlockedWait>>,
}

#[derive(Clone)]
struct BlockedWait {
    latch: Arc<WaitLatch>,
    held: Held,
}

impl BlockedWait {
    /// Whether the waiting thread still blocks, holding its vars: its wait neither returned nor
    /// is about to (the latch is open), and none of its async ops completed meanwhile.
    fn still_blocks(&self) -> bool {
        self.latch.is_open() && self.held.still_held()
    }
}

impl BlockedWaits {
    /// The registry, locked (no code that can panic runs under it).
    fn lock(&self) -> MutexGuard<'_, Vec<BlockedWait>> {
        self.waits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a wait on `latch` by ops that hold `held`, until the guard is dropped.
    pub(crate) fn register(&self, latch: &Arc<WaitLatch>, held: Held) -> Registration<'_> {
        self.lock().push(BlockedWait {
            latch: Arc::clone(latch),
            held,
        });
        Registration {
            waits: self,
            latch: Arc::clone(latch),
        }
    }

    fn snapshot(&self) -> Vec<BlockedWait> {
        self.lock().clone()
    }
}

/// Keeps a wait registered in [`BlockedWaits`] while alive.
pub(crate) struct Registration<'a> {
    waits: &'a BlockedWaits,
    latch: Arc<WaitLatch>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut waits = self.waits.lock();
        if let Some(at) = waits
            .iter()
            .position(|wait| Arc::ptr_eq(&wait.latch, &self.latch))
        {
            waits.swap_remove(at);
        }
    }
}

/// Walks after which `closes_cycle` gives up and lets the wait block (see there).
const MAX_WALKS: usize = 8;

/// Whether the wait op of `latch` waits, directly or through other blocked waits, for the ops
/// that hold `held` on this thread (see the module documentation).
///
/// A cycle the walk finds is real if everything it went through still blocks once the walk is
/// over: this thread's ops still hold their vars, and so does every other wait the walk went
/// on from. (An op on the cycle cannot complete while those hold, so only they can break it.)
/// Otherwise the walk is repeated, at most `MAX_WALKS` times.
pub(crate) fn closes_cycle(
    graph: &Graph<OpRecord, OpFailure>,
    waits: &BlockedWaits,
    latch: &Arc<WaitLatch>,
    held: &Held,
) -> bool {
    for _ in 0..MAX_WALKS {
        let others = waits.snapshot();
        let mut through = Vec::new();
        let found = graph.holds_back(&held.vars, |record| match &record.func {
            Some(OpFn::Wait(reached)) if Arc::ptr_eq(reached, latch) => Visit::Found,
            Some(OpFn::Wait(reached)) => match others
                .iter()
                .position(|wait| Arc::ptr_eq(&wait.latch, reached))
            {
                Some(at) if others[at].still_blocks() => {
                    through.push(at);
                    Visit::AlsoHolds(others[at].held.vars.clone())
                }
                _ => Visit::Continue,
            },
            _ => Visit::Continue,
        });
        if !found {
            return false;
        }
        if held.still_held() && through.iter().all(|&at| others[at].still_blocks()) {
            return true;
        }
    }
    tracing::warn!(
        target: "depengine::wait",
        "wait_for_var inside an op: the deadlock check found a cycle that kept changing; waiting"
    );
    false
}
