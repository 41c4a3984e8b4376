//! [`LaunchedFences`]: the fences of the device ops that launched and have not completed, by
//! var, so that a device op released behind them starts its work after theirs.
//!
//! A device op whose executor reports its launch (`DeviceCompletion::launched`, with a fence
//! after its work) launches in the graph (`Graph::launch`): the device ops behind it on its
//! vars, which wait for launch, are released at once, while the CPU ops behind it wait for its
//! completion. A released device op must still not *start* before the work it depends on has
//! finished on the device: its executor orders its work behind fences (a CUDA stream waits
//! for an event), and this registry says which ones. Per var, it keeps each launched op's
//! fence with its access until the op completes:
//!
//! - a device op that reads a var starts after the launched writes of that var;
//! - one that writes it, after every launched op on it (write after read included).
//!
//! Why that is every fence an op needs: the graph releases it only once the ops before it on
//! its vars that it conflicts with completed or launched, and a launched op's fence stays here
//! until the op completes, from before its launch releases anything (`register`) to after its
//! work is done (`remove`). A fence of an op pushed after it can be here too (a read launched
//! beside it) and is left out by the rule above, or is harmless: it was recorded, so waiting
//! for it never waits for work that has not been launched.
//!
//! Only device ops register, look up and remove fences (a CPU-only engine locks the registry
//! only at the idle trim); its one lock is held for a lookup or an update of the vars of one
//! op. The fences are kept per var slot, indexed by the var's index in the graph, as MXNet
//! keeps them on each var: a slot serves the next var at its index, and the idle trim gives
//! the slots back once no fence is left.
//!
//! # Failures
//!
//! A launched op's work can still fail (a kernel fault); that is known only at its completion,
//! after the device ops behind it were released and ran their functions. Had they waited for
//! its completion, those that use a var it wrote would have been skipped with its failure
//! (failure rule 2). On its own device their work fails too (CUDA's errors are sticky within a
//! context), on another it does not. So each registration carries the op's outcome, settled
//! when the op completes ([`Registration::settle`]), and `behind` hands a released op, with its
//! fences, the outcomes of the launched writers of its vars ([`Upstream`]). That op completes
//! once they are all known: with the first failure among them, passed on, in place of what its
//! device reported (the same fault, on the same device); its function's own failure still wins.
//!
//! The wait blocks no thread. An op whose work is done before an outcome it needs is known
//! leaves its completion with that outcome, and the thread that settles it completes the op.
//! That comes soon: the op's work ran behind the fence, so the earlier op's work is done and
//! its completion on its way. The outcomes form no cycle: an op waits only for ops before it.

use std::mem;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use depengine_device::Fence;
use depengine_graph::{Access, Var};
use depengine_sync::{Mutex, lock};
use smallvec::SmallVec;

use crate::failure::OpFailure;

/// The fence of one launched op on one var.
struct RegisteredFence {
    /// Which launched op (`LaunchedFences::register` hands the ids out).
    op: u64,
    access: Access,
    fence: Fence,
    /// The op's outcome, for the device ops released behind its writes.
    outcome: Arc<LaunchedOutcome>,
}

/// See the module documentation. Touched by the threads that launch, complete and dispatch
/// device ops (executors' workers and completion threads, and any thread that releases a
/// device op).
#[derive(Default)]
pub(crate) struct LaunchedFences {
    state: Mutex<ByVar>,
}

#[derive(Default)]
struct ByVar {
    /// The id of the next launched op.
    next_op: u64,
    /// Fences registered and not removed, over every var: `behind` looks at none when there are
    /// none.
    live: usize,
    /// Per var index (`Var::index`), the fences of the launched ops on the var there.
    slots: Vec<VarSlot>,
}

/// The launched ops' fences of one var, oldest first.
#[derive(Default)]
struct VarSlot {
    /// The var the fences are of: the slot is the next var's at that index once it was deleted.
    var: Option<Var>,
    fences: Vec<RegisteredFence>,
}

impl ByVar {
    /// The fences of `var`, its slot made (or taken over from a deleted var) if need be.
    fn fences_mut(&mut self, var: Var) -> &mut Vec<RegisteredFence> {
        let index = var.index() as usize;
        if index >= self.slots.len() {
            self.slots.resize_with(index + 1, VarSlot::default);
        }
        let slot = &mut self.slots[index];
        if slot.var != Some(var) {
            // Subtle: the fences of a deleted var can still be here. A launched op completes in
            // the graph before its fence goes (`run/device.rs`), and its var may be deleted and
            // its index taken by a new var in between; the new var's ops have nothing to do
            // with them, and the old op's `remove` skips a slot that names another var.
            self.live -= slot.fences.len();
            slot.fences.clear();
            slot.var = Some(var);
        }
        &mut slot.fences
    }

    /// The fences of `var`.
    fn fences(&self, var: Var) -> &[RegisteredFence] {
        match self.slots.get(var.index() as usize) {
            Some(slot) if slot.var == Some(var) => &slot.fences,
            _ => &[],
        }
    }

    /// Gives back the storage of the slots, once no fence is left (the engine is idle).
    fn trim(&mut self) {
        if self.live == 0 {
            self.slots = Vec::new();
        }
    }

    /// Removes the fences of launched op `op` from `slot`.
    fn remove_from(live: &mut usize, fences: &mut Vec<RegisteredFence>, op: u64) {
        let before = fences.len();
        fences.retain(|registered| registered.op != op);
        *live -= before - fences.len();
    }
}

/// What a device op released behind launched ops starts and completes after.
pub(crate) struct Behind {
    /// The fences its work starts after, each once; inline for a few (no allocation per op of
    /// a chain).
    pub(crate) fences: SmallVec<[Fence; 2]>,
    /// The outcomes it completes after.
    pub(crate) upstream: Upstream,
}

impl LaunchedFences {
    /// Registers `fence`, after the work of a launched op that reads `reads` and writes
    /// `writes`, before the op's launch releases anything. The registration is removed
    /// (`remove`) and settled with the op's outcome (`Registration::settle`) at its completion.
    pub(crate) fn register(
        &self,
        reads: impl Iterator<Item = Var>,
        writes: impl Iterator<Item = Var>,
        fence: &Fence,
    ) -> Registration {
        let outcome = Arc::new(LaunchedOutcome::default());
        let mut state = lock(&self.state);
        let op = state.next_op;
        state.next_op += 1;
        let uses = reads
            .map(|var| (var, Access::Read))
            .chain(writes.map(|var| (var, Access::Write)));
        for (var, access) in uses {
            state.fences_mut(var).push(RegisteredFence {
                op,
                access,
                fence: fence.clone(),
                outcome: Arc::clone(&outcome),
            });
            state.live += 1;
        }
        Registration { op, outcome }
    }

    /// Removes the fences of the launched op of `registration` (its work is done and its
    /// outcome stored on its vars), which used `vars`: the device ops released from now on no
    /// longer start or complete after it (one that uses a var it failed is skipped instead).
    pub(crate) fn remove(&self, registration: &Registration, vars: impl Iterator<Item = Var>) {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        for var in vars {
            if let Some(slot) = state.slots.get_mut(var.index() as usize)
                && slot.var == Some(var)
            {
                ByVar::remove_from(&mut state.live, &mut slot.fences, registration.op);
            }
        }
    }

    /// Removes the fences of `registration`'s op from every var, for an op whose vars are no
    /// longer known (a launch the graph refused): a visit of every fence, on that path only.
    pub(crate) fn remove_everywhere(&self, registration: &Registration) {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        for slot in &mut state.slots {
            ByVar::remove_from(&mut state.live, &mut slot.fences, registration.op);
        }
    }

    /// Gives back the storage a burst of launched ops grew, if none is left.
    pub(crate) fn trim(&self) {
        lock(&self.state).trim();
    }

    /// What a device op that reads `reads` and writes `writes` starts and completes after (see
    /// the module documentation): the fences of the launched ops it conflicts with, and the
    /// outcomes of those that write one of its vars.
    pub(crate) fn behind(
        &self,
        reads: impl Iterator<Item = Var>,
        writes: impl Iterator<Item = Var>,
    ) -> Behind {
        let mut behind = Behind {
            fences: SmallVec::new(),
            upstream: Upstream(SmallVec::new()),
        };
        let state = lock(&self.state);
        if state.live == 0 {
            return behind;
        }
        // Inline for a few launched ops: no allocation per lookup.
        let mut fenced: SmallVec<[u64; 4]> = SmallVec::new();
        let mut writers_seen: SmallVec<[u64; 4]> = SmallVec::new();
        let uses = reads
            .map(|var| (var, Access::Read))
            .chain(writes.map(|var| (var, Access::Write)));
        for (var, access) in uses {
            let conflicting = state
                .fences(var)
                .iter()
                .filter(|registered| access == Access::Write || registered.access == Access::Write);
            for registered in conflicting {
                if !fenced.contains(&registered.op) {
                    fenced.push(registered.op);
                    behind.fences.push(registered.fence.clone());
                }
                if registered.access == Access::Write && !writers_seen.contains(&registered.op) {
                    writers_seen.push(registered.op);
                    behind.upstream.0.push(Arc::clone(&registered.outcome));
                }
            }
        }
        behind
    }
}

/// A launched op's place in the registry, held by the op until its completion. Settled once:
/// `settle` takes it, and dropping it unsettled (a completion path that unwound) settles it as
/// a success, so that no op behind it waits forever.
pub(crate) struct Registration {
    op: u64,
    outcome: Arc<LaunchedOutcome>,
}

impl Registration {
    /// Settles the op's outcome (`failure`, if it failed): the device ops released behind its
    /// writes, and waiting for it, complete now, on this thread.
    pub(crate) fn settle(self, failure: Option<&OpFailure>) {
        self.outcome.settle(failure);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // After `settle` this finds the outcome known and does nothing.
        self.outcome.settle(None);
    }
}

/// What a completion waiting for a launched op's outcome does with it.
type Waiter = Box<dyn FnOnce(Option<OpFailure>) + Send>;

/// The outcome of a launched op, shared by its registration and the ops released behind it.
/// Threads: the one completing the op settles it; those completing the ops behind it read it,
/// or leave their completion with it.
#[derive(Default)]
struct LaunchedOutcome {
    state: Mutex<OutcomeState>,
}

enum OutcomeState {
    /// The op has not completed: the completions waiting for it.
    Pending(Vec<Waiter>),
    /// It completed, with this failure if it failed.
    Known(Option<OpFailure>),
}

impl Default for OutcomeState {
    fn default() -> Self {
        OutcomeState::Pending(Vec::new())
    }
}

impl LaunchedOutcome {
    /// Makes the outcome known, unless it is, and runs the waiting completions (unlocked: they
    /// complete ops, which may release and dispatch more). Each runs caught: a panic in one
    /// (a user's `Drop` of released data) must not leave the others' ops unfinished, nor,
    /// when this runs in a `Registration`'s drop during an unwind, abort the process.
    fn settle(&self, failure: Option<&OpFailure>) {
        let waiters = {
            let mut state = lock(&self.state);
            match &mut *state {
                OutcomeState::Known(_) => return,
                OutcomeState::Pending(waiters) => {
                    let waiters = mem::take(waiters);
                    *state = OutcomeState::Known(failure.cloned());
                    waiters
                }
            }
        };
        for waiter in waiters {
            let failure = failure.cloned();
            let _ = catch_unwind(AssertUnwindSafe(move || waiter(failure)));
        }
    }
}

/// The outcomes of the launched writers a device op was released behind (see "Failures" in
/// the module documentation). Empty for every op but those released at a launch; inline for
/// a few (no allocation per op of a chain).
pub(crate) struct Upstream(SmallVec<[Arc<LaunchedOutcome>; 2]>);

impl Upstream {
    /// Calls `then` once every outcome is known, or one is a failure, with the first failure
    /// found: at once on this thread if they are known already, else on the thread that
    /// settles the last one needed.
    pub(crate) fn then(mut self, then: impl FnOnce(Option<OpFailure>) + Send + 'static) {
        while let Some(outcome) = self.0.pop() {
            let mut state = lock(&outcome.state);
            match &mut *state {
                OutcomeState::Known(None) => {}
                OutcomeState::Known(Some(failure)) => {
                    let failure = failure.clone();
                    drop(state);
                    return then(Some(failure));
                }
                OutcomeState::Pending(waiters) => {
                    waiters.push(Box::new(move |failure| match failure {
                        Some(failure) => then(Some(failure)),
                        None => self.then(then),
                    }));
                    return;
                }
            }
        }
        then(None);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::failure::FailureCause;
    use depengine_graph::Graph;

    fn vars<const N: usize>() -> [Var; N] {
        let graph: Graph<()> = Graph::new();
        std::array::from_fn(|_| graph.new_var().unwrap())
    }

    /// The labels of `fences` (each a `&str` fence).
    fn labels(fences: &[Fence]) -> Vec<&'static str> {
        fences
            .iter()
            .map(|fence| *fence.downcast_ref::<&str>().unwrap())
            .collect()
    }

    fn failure(op: &'static str) -> OpFailure {
        OpFailure::new(op.into(), FailureCause::Error("kernel fault".into()))
    }

    /// What `upstream` passed on so far: empty while it waits, then its one call's failure.
    fn passed_on(upstream: Upstream) -> Arc<Mutex<Vec<Option<OpFailure>>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let calls = Arc::clone(&seen);
        upstream.then(move |failure| lock(&calls).push(failure));
        seen
    }

    #[test]
    fn a_read_starts_after_launched_writes_and_a_write_after_everything() {
        let fences = LaunchedFences::default();
        let [x, y] = vars();
        let write = fences.register([].into_iter(), [x].into_iter(), &Fence::new("writes x"));
        fences.register(
            [x, y].into_iter(),
            [].into_iter(),
            &Fence::new("reads x, y"),
        );
        assert_eq!(
            labels(&fences.behind([x].into_iter(), [].into_iter()).fences),
            ["writes x"]
        );
        assert!(
            fences
                .behind([y].into_iter(), [].into_iter())
                .fences
                .is_empty()
        );
        let behind = fences.behind([].into_iter(), [x, y].into_iter());
        assert_eq!(
            labels(&behind.fences),
            ["writes x", "reads x, y"],
            "each op's fence once"
        );
        assert_eq!(behind.upstream.0.len(), 1, "the writer's outcome alone");
        fences.remove(&write, [x].into_iter());
        assert_eq!(
            labels(&fences.behind([].into_iter(), [x].into_iter()).fences),
            ["reads x, y"]
        );
    }

    #[test]
    fn removing_an_ops_fences_leaves_none_behind() {
        let fences = LaunchedFences::default();
        let [x, y] = vars();
        let op = fences.register([].into_iter(), [x].into_iter(), &Fence::new("writes x"));
        fences.remove(&op, [x].into_iter());
        assert_eq!(lock(&fences.state).live, 0);
        let op = fences.register([y].into_iter(), [x].into_iter(), &Fence::new("x, y"));
        fences.remove_everywhere(&op);
        assert_eq!(lock(&fences.state).live, 0);
        assert!(
            fences
                .behind([].into_iter(), [x, y].into_iter())
                .fences
                .is_empty()
        );
    }

    #[test]
    fn a_var_at_the_index_of_a_deleted_one_has_fences_of_its_own() {
        let graph: Graph<()> = Graph::new();
        let fences = LaunchedFences::default();
        let old = graph.new_var().unwrap();
        let op = fences.register([].into_iter(), [old].into_iter(), &Fence::new("old"));
        fences.remove(&op, [old].into_iter());
        graph.delete_var(old, || {}).unwrap().call_if_reclaimed();
        let new = graph.new_var().unwrap();
        assert_eq!(new.index(), old.index(), "the slot was not reused");
        fences.register([].into_iter(), [new].into_iter(), &Fence::new("new"));
        let behind = |var| labels(&fences.behind([var].into_iter(), [].into_iter()).fences);
        assert_eq!(behind(new), ["new"]);
        assert!(
            behind(old).is_empty(),
            "a deleted var's handle found the new var's fence"
        );
    }

    #[test]
    fn a_new_var_at_the_index_of_one_whose_op_still_completes_leaves_that_op_alone() {
        let graph: Graph<()> = Graph::new();
        let fences = LaunchedFences::default();
        let old = graph.new_var().unwrap();
        let completing = fences.register([].into_iter(), [old].into_iter(), &Fence::new("old"));
        // The op completed in the graph, and its var was deleted, before its fence went.
        graph.delete_var(old, || {}).unwrap().call_if_reclaimed();
        let new = graph.new_var().unwrap();
        assert_eq!(new.index(), old.index(), "the slot was not reused");
        fences.register([].into_iter(), [new].into_iter(), &Fence::new("new"));
        fences.remove(&completing, [old].into_iter());
        let behind = labels(&fences.behind([].into_iter(), [new].into_iter()).fences);
        assert_eq!(
            behind,
            ["new"],
            "the old op's removal took the new var's fence"
        );
        assert_eq!(lock(&fences.state).live, 1);
    }

    #[test]
    fn trimming_gives_the_slots_back_only_once_no_fence_is_left() {
        let fences = LaunchedFences::default();
        let [x] = vars();
        let op = fences.register([].into_iter(), [x].into_iter(), &Fence::new("x"));
        fences.trim();
        assert_eq!(
            labels(&fences.behind([x].into_iter(), [].into_iter()).fences),
            ["x"]
        );
        fences.remove(&op, [x].into_iter());
        fences.trim();
        assert!(lock(&fences.state).slots.is_empty());
    }

    #[test]
    fn an_op_behind_launched_writers_waits_for_their_outcomes_and_takes_a_failure() {
        let fences = LaunchedFences::default();
        let [x, y] = vars();
        let first = fences.register([].into_iter(), [x].into_iter(), &Fence::new("x"));
        let second = fences.register([].into_iter(), [y].into_iter(), &Fence::new("y"));
        let seen = passed_on(fences.behind([x, y].into_iter(), [].into_iter()).upstream);
        assert!(lock(&seen).is_empty(), "completed before its writers");
        second.settle(None);
        assert!(lock(&seen).is_empty(), "completed before its first writer");
        let fault = failure("first");
        first.settle(Some(&fault));
        let seen = lock(&seen);
        assert!(matches!(&seen[..], [Some(taken)] if taken.same_failure(&fault)));
    }

    #[test]
    fn known_outcomes_pass_on_at_once_and_a_dropped_registration_is_a_success() {
        let fences = LaunchedFences::default();
        let [x, y] = vars();
        let ok = fences.register([].into_iter(), [x].into_iter(), &Fence::new("x"));
        let failed = fences.register([].into_iter(), [y].into_iter(), &Fence::new("y"));
        let behind_x = fences.behind([x].into_iter(), [].into_iter()).upstream;
        let behind_y = fences.behind([].into_iter(), [y].into_iter()).upstream;
        drop(ok);
        failed.settle(Some(&failure("y")));
        assert!(matches!(lock(&passed_on(behind_x))[..], [None]));
        assert!(matches!(lock(&passed_on(behind_y))[..], [Some(_)]));
        assert!(matches!(
            lock(&passed_on(Upstream(SmallVec::new())))[..],
            [None]
        ));
    }

    #[test]
    fn a_launched_read_passes_no_outcome_on() {
        let fences = LaunchedFences::default();
        let [x] = vars();
        let read = fences.register([x].into_iter(), [].into_iter(), &Fence::new("reads x"));
        let behind = fences.behind([].into_iter(), [x].into_iter());
        assert_eq!(labels(&behind.fences), ["reads x"]);
        read.settle(Some(&failure("reads x")));
        assert!(matches!(lock(&passed_on(behind.upstream))[..], [None]));
    }
}
