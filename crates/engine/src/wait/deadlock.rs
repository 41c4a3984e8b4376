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
//! 1. **registers** in [`BlockedWaits`]: its one-shot and the vars of every sync op running on
//!    this thread (`frame::sync_ops_hold`: a sync op completes only after its function
//!    returns, so all of them block until the wait returns; an async op is left out, since
//!    whoever holds its `Completion` may complete it meanwhile);
//! 2. pushes its wait op;
//! 3. unless the wait is already over, **walks** the ops held back by those vars
//!    ([`Graph::holds_back`]). Reaching its own wait op means a cycle. Reaching the wait op of
//!    another registered wait whose one-shot is still open means the ops of that thread block
//!    too, so the walk goes on from their vars: cycles through several threads are found as
//!    well;
//! 4. **validates** the path the walk returns: every other wait it went on from must still
//!    be open once the walk is over (one that returned, or is about to, releases its vars);
//!    otherwise it walks again (at most `MAX_WALKS` times, then it waits);
//! 5. on a cycle, **unregisters** (its vars are about to be released, so later walks must not
//!    go on through them), then **abandons** its one-shot and returns `WaitDeadlock`, unless the
//!    wait op was claimed meanwhile (then it was released after all, and the thread waits);
//! 6. otherwise unregisters once the wait returned.
//!
//! A cycle through several waits is found by the last of them to register, or by a later one:
//! each registers before it pushes and walks after, so of two waits in one cycle, the one that
//! walks second sees the other's registration and its wait op (if the first walk missed the
//! second wait op, that op was pushed after the first walk looked, hence after the first
//! registration). Both may report it; either report breaks the cycle.
//!
//! An abandoned wait op stays queued and completes, doing nothing, once the ops ahead of it
//! have: `EngineState::release_wait` finds the one-shot abandoned and leaves the var's failure in
//! place.
//!
//! Not detected: a cycle through a thread that waits outside any op of this engine (a plain
//! thread holds no var), through another engine, or through an async op's vars (see
//! "Misuse" in `docs/engine.md`). Ops that cannot run because every worker of their block is
//! blocked in a wait get a stand-in thread instead (`stand_in.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use depengine_sync::{Mutex, MutexGuard, lock};

use depengine_graph::{Graph, OpId, Var, Visit};

use crate::failure::OpFailure;
use crate::wait::one_shot::OneShot;

/// The one-shot a `wait_for_var` blocks on.
pub(crate) type WaitOneShot = OneShot<Option<OpFailure>>;

/// The waits inside ops of one engine that are blocked now, with the vars they keep held.
///
/// Threads: only threads that call `wait_for_var` from inside an op of the engine (workers,
/// stand-ins, device executors' threads, pushers running naive ops) register, walk and
/// unregister, each under the registry's lock (briefly: a walk works on a snapshot); a stalled
/// `wait_for_var` looks up which blocked wait holds its var, for its warning.
#[derive(Default)]
pub(crate) struct BlockedWaits {
    waits: Mutex<Vec<BlockedWait>>,
}

#[derive(Clone)]
struct BlockedWait {
    one_shot: Arc<WaitOneShot>,
    /// The vars of the waiting thread's sync ops (`frame::sync_ops_hold`).
    held: Vec<Var>,
    /// The var it waits for (for stall warnings).
    waits_for: Var,
}

impl BlockedWaits {
    /// The registry, locked (no code that can panic runs under it).
    fn lock(&self) -> MutexGuard<'_, Vec<BlockedWait>> {
        lock(&self.waits)
    }

    /// Registers a wait for `waits_for` on `one_shot` by ops that hold `held`, until the guard is
    /// dropped.
    pub(crate) fn register(
        &self,
        one_shot: &Arc<WaitOneShot>,
        held: Vec<Var>,
        waits_for: Var,
    ) -> Registration<'_> {
        self.lock().push(BlockedWait {
            one_shot: Arc::clone(one_shot),
            held,
            waits_for,
        });
        Registration {
            waits: self,
            one_shot: Arc::clone(one_shot),
        }
    }

    /// The var a blocked wait waits for whose thread's ops hold `var`, if there is one (for
    /// stall warnings: the op that holds `var` is stuck in that wait).
    pub(crate) fn holder_waits_for(&self, var: Var) -> Option<Var> {
        self.lock()
            .iter()
            .find(|wait| wait.held.contains(&var))
            .map(|wait| wait.waits_for)
    }

    fn snapshot(&self) -> Vec<BlockedWait> {
        self.lock().clone()
    }
}

/// Keeps a wait registered in [`BlockedWaits`] while alive.
pub(crate) struct Registration<'a> {
    waits: &'a BlockedWaits,
    one_shot: Arc<WaitOneShot>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut waits = self.waits.lock();
        if let Some(at) = waits
            .iter()
            .position(|wait| Arc::ptr_eq(&wait.one_shot, &self.one_shot))
        {
            waits.swap_remove(at);
        }
    }
}

/// Walks after which `closes_cycle` gives up and lets the wait block (see there).
const MAX_WALKS: usize = 8;

/// Whether the wait op of `one_shot` waits, directly or through other blocked waits, for the sync
/// ops that hold `held` on this thread (see the module documentation).
///
/// The walk returns the path to the wait op. The cycle is real if every other wait the path
/// goes on from still blocks once the walk is over (its one-shot is still open): this thread's
/// sync ops hold their vars until the wait returns, and an op on the path cannot complete
/// while those hold. Otherwise the walk is repeated, at most `MAX_WALKS` times.
///
/// `wait_one_shot` tells the wait ops apart in the graph: the one-shot of a wait op's payload.
pub(crate) fn closes_cycle<P, L: Default>(
    graph: &Graph<P, OpFailure, L>,
    waits: &BlockedWaits,
    one_shot: &Arc<WaitOneShot>,
    held: &[Var],
    wait_one_shot: impl Fn(&P) -> Option<&Arc<WaitOneShot>>,
) -> bool {
    for _ in 0..MAX_WALKS {
        let others = waits.snapshot();
        let mut went_on: HashMap<OpId, usize> = HashMap::new();
        let path = graph.holds_back(held, |id, payload| match wait_one_shot(payload) {
            Some(reached) if Arc::ptr_eq(reached, one_shot) => Visit::Found,
            Some(reached) => match others
                .iter()
                .position(|wait| Arc::ptr_eq(&wait.one_shot, reached))
            {
                Some(at) if others[at].one_shot.is_open() => {
                    went_on.insert(id, at);
                    Visit::AlsoHolds(others[at].held.clone())
                }
                _ => Visit::Continue,
            },
            None => Visit::Continue,
        });
        let Some(path) = path else {
            return false;
        };
        let still_blocks = path
            .iter()
            .filter_map(|id| went_on.get(id))
            .all(|&at| others[at].one_shot.is_open());
        if still_blocks {
            return true;
        }
    }
    tracing::warn!(
        target: "depengine::wait",
        "wait_for_var inside an op: the deadlock check found a cycle that kept changing; waiting"
    );
    false
}
