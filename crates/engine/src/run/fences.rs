//! [`LaunchedOnVar`]: on each var, the fences of the device ops launched on it that have not
//! completed, so that a device op released behind them starts its work after theirs.
//!
//! A device op whose executor reports its launch (`DeviceCompletion::launched`, with a fence
//! after its work) launches in the graph (`Graph::launch`): the device ops behind it on its
//! vars, which wait for launch, are released at once, while the CPU ops behind it wait for its
//! completion. A released device op must still not *start* before the work it depends on has
//! finished on the device: its executor orders its work behind fences (a CUDA stream waits
//! for an event), and each var says which ones, as `MXNet` keeps them on its vars. The graph
//! keeps a `LaunchedOnVar` on each var (its `L`), under the var's own lock: the launch registers
//! the op's fence, with its access, on each of its vars in the section of the var's lock that
//! releases the ops behind it, and its completion removes it in the section that stores its
//! failure (`Graph::complete_launched`). A device op released behind launched ops looks at its
//! vars ([`behind`]):
//!
//! - one that reads a var starts after the launched writes of that var;
//! - one that writes it, after every launched op on it (write after read included).
//!
//! Why that is every fence an op needs: the graph releases it only once the ops before it on
//! its vars that it conflicts with completed or launched, and a launched op's fence stays on the
//! var from before its launch releases anything to its completion. A fence of an op pushed
//! after it can be there too (a read launched beside it) and is left out by the rule above, or
//! is harmless: it was recorded, so waiting for it never waits for work that has not been
//! launched. A var's fences go with its launched ops, so a deleted var's slot is reclaimed
//! (it waits for them) with none left for the next var there.
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
//! A var that no longer holds the fence holds the failure instead: both change in one section
//! of its lock.
//!
//! The wait blocks no thread. An op whose work is done before an outcome it needs is known
//! leaves its completion with that outcome, and the thread that settles it completes the op.
//! That comes soon: the op's work ran behind the fence, so the earlier op's work is done and
//! its completion on its way. The outcomes form no cycle: an op waits only for ops before it.

use std::mem;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use depengine_device::{Fence, Fences};
use depengine_graph::{Access, Graph, Var};
use depengine_sync::{Mutex, lock};
use smallvec::SmallVec;

use crate::failure::OpFailure;

/// Fences a var keeps room for once its launched ops completed: more is a burst's, given back.
const KEEP_FENCES: usize = 4;

/// The fences of the launched ops on one var, oldest first: the graph's `L` for the engine's
/// vars, changed and read under the var's lock (see the module documentation).
#[derive(Default)]
pub(crate) struct LaunchedOnVar(Vec<RegisteredFence>);

/// The fence of one launched op on one var.
struct RegisteredFence {
    access: Access,
    fence: Fence,
    /// The op's outcome, for the device ops released behind its writes; also which op it is.
    outcome: Arc<LaunchedOutcome>,
}

impl LaunchedOnVar {
    /// Registers `fence`, after the work of the launched op of `registration`, which uses the
    /// var as `access` (`Graph::launch`'s call on each var, before it releases anything).
    pub(crate) fn register(&mut self, access: Access, fence: &Fence, registration: &Registration) {
        self.0.push(RegisteredFence {
            access,
            fence: fence.clone(),
            outcome: Arc::clone(&registration.outcome),
        });
    }

    /// Removes the fence of `registration`'s op, which completed (`Graph::complete_launched`'s
    /// call on each var): the device ops released from now on no longer start or complete after
    /// it (one that uses a var it failed finds the failure instead).
    pub(crate) fn remove(&mut self, registration: &Registration) {
        self.0
            .retain(|registered| !Arc::ptr_eq(&registered.outcome, &registration.outcome));
        if self.0.is_empty() && self.0.capacity() > KEEP_FENCES {
            // A burst of launched ops on the var is over: its storage goes back.
            self.0 = Vec::new();
        }
    }

    /// Adds to `behind` the fences of the launched ops that an op using the var as `access`
    /// conflicts with, but for those of the ops in `fenced` (to which it adds its own), and
    /// the outcomes of the writers not in `behind` yet.
    fn add_conflicting(&self, access: Access, fenced: &mut Fenced, behind: &mut Behind) {
        let conflicting = self
            .0
            .iter()
            .filter(|registered| access == Access::Write || registered.access == Access::Write);
        for registered in conflicting {
            let op = Arc::as_ptr(&registered.outcome);
            if !fenced.contains(&op) {
                fenced.push(op);
                behind.fences.push(registered.fence.clone());
            }
            let is_upstream = |outcome: &Arc<LaunchedOutcome>| Arc::as_ptr(outcome) == op;
            if registered.access == Access::Write && !behind.upstream.0.iter().any(is_upstream) {
                behind.upstream.0.push(Arc::clone(&registered.outcome));
            }
        }
    }
}

/// What a device op released behind launched ops starts and completes after.
#[derive(Default)]
pub(crate) struct Behind {
    /// The fences its work starts after, each once; inline for a few (no allocation per op of
    /// a chain).
    pub(crate) fences: Fences,
    /// The outcomes it completes after.
    pub(crate) upstream: Upstream,
}

/// The ops whose fences a [`Behind`] holds, by their outcome's address (which names the op):
/// each op's fence once. Compared only, never followed; inline for a few: no allocation or
/// count change per lookup.
type Fenced = SmallVec<[*const LaunchedOutcome; 4]>;

/// What a device op that reads `reads` and writes `writes` starts and completes after (see the
/// module documentation): the fences of the launched ops it conflicts with, and the outcomes
/// of those that write one of its vars, from each var under its lock.
pub(crate) fn behind<T, E>(
    graph: &Graph<T, E, LaunchedOnVar>,
    reads: impl Iterator<Item = Var>,
    writes: impl Iterator<Item = Var>,
) -> Behind {
    let mut behind = Behind::default();
    let mut fenced = Fenced::new();
    let uses = reads
        .map(|var| (var, Access::Read))
        .chain(writes.map(|var| (var, Access::Write)));
    for (var, access) in uses {
        // A var of a ready op is live: held by the op, its handle cannot be stale.
        let _ = graph.launched_on(var, |launched| {
            launched.add_conflicting(access, &mut fenced, &mut behind);
        });
    }
    behind
}

/// What names a launched op's fences on its vars, and its outcome for the ops released behind
/// it: held by the op until its completion. Settled once:
/// `settle` takes it, and dropping it unsettled (a completion path that unwound) settles it as
/// a success, so that no op behind it waits forever.
pub(crate) struct Registration {
    outcome: Arc<LaunchedOutcome>,
}

impl Registration {
    /// The registration of an op about to launch, its outcome pending.
    pub(crate) fn new() -> Self {
        Registration {
            outcome: Arc::default(),
        }
    }

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
#[derive(Default)]
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
    use depengine_graph::{LaunchedOp, ReadyOp, Waits};

    type TestGraph = Graph<&'static str, OpFailure, LaunchedOnVar>;

    /// Pushes an op on `reads` and `writes` that waits for launch (ready at once) and launches
    /// it with fence `label`, registered on its vars as the engine does.
    fn launch(
        graph: &TestGraph,
        reads: &[Var],
        writes: &[Var],
        label: &'static str,
    ) -> (LaunchedOp<&'static str>, Registration) {
        let mut released: Vec<ReadyOp<&'static str>> = Vec::new();
        graph
            .push_with(Waits::Launch, reads, writes, label, &mut released)
            .unwrap();
        let op = released.pop().expect("ready at its push");
        let (fence, registration) = (Fence::new(label), Registration::new());
        let launched = graph
            .launch(
                op,
                |access, on_var| on_var.register(access, &fence, &registration),
                &mut released,
            )
            .unwrap();
        (launched, registration)
    }

    /// Completes launched `op`, whose fences go from its vars, as the engine does.
    fn complete(graph: &TestGraph, op: LaunchedOp<&'static str>, registration: &Registration) {
        let mut released: Vec<ReadyOp<&'static str>> = Vec::new();
        graph
            .complete_launched(
                op,
                Ok(()),
                |_, on_var| on_var.remove(registration),
                &mut released,
            )
            .unwrap();
    }

    fn behind_of(graph: &TestGraph, reads: &[Var], writes: &[Var]) -> Behind {
        behind(graph, reads.iter().copied(), writes.iter().copied())
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
        let graph = TestGraph::new();
        let [x, y] = [(); 2].map(|()| graph.new_var().unwrap());
        let (write, registration) = launch(&graph, &[], &[x], "writes x");
        let _read = launch(&graph, &[x, y], &[], "reads x, y");
        assert_eq!(labels(&behind_of(&graph, &[x], &[]).fences), ["writes x"]);
        assert!(behind_of(&graph, &[y], &[]).fences.is_empty());
        let behind = behind_of(&graph, &[], &[x, y]);
        assert_eq!(
            labels(&behind.fences),
            ["writes x", "reads x, y"],
            "each op's fence once"
        );
        assert_eq!(behind.upstream.0.len(), 1, "the writer's outcome alone");
        complete(&graph, write, &registration);
        assert_eq!(labels(&behind_of(&graph, &[], &[x]).fences), ["reads x, y"]);
    }

    #[test]
    fn a_completed_op_leaves_no_fence_on_its_vars() {
        let graph = TestGraph::new();
        let [x, y] = [(); 2].map(|()| graph.new_var().unwrap());
        let (op, registration) = launch(&graph, &[y], &[x], "reads y, writes x");
        complete(&graph, op, &registration);
        let behind = behind_of(&graph, &[], &[x, y]);
        assert!(behind.fences.is_empty() && behind.upstream.0.is_empty());
        let (op, registration) = launch(&graph, &[], &[x], "writes x again");
        assert_eq!(
            labels(&behind_of(&graph, &[x], &[]).fences),
            ["writes x again"]
        );
        complete(&graph, op, &registration);
    }

    #[test]
    fn a_var_gives_back_the_room_of_a_burst_of_launched_ops() {
        let graph = TestGraph::new();
        let x = graph.new_var().unwrap();
        let reads: Vec<_> = (0..=KEEP_FENCES)
            .map(|_| launch(&graph, &[x], &[], "reads x"))
            .collect();
        let room = || {
            graph
                .launched_on(x, |launched| launched.0.capacity())
                .unwrap()
        };
        assert!(room() > KEEP_FENCES);
        for (op, registration) in reads {
            complete(&graph, op, &registration);
        }
        assert_eq!(room(), 0, "a burst's room kept");
        let (op, registration) = launch(&graph, &[x], &[], "reads x");
        complete(&graph, op, &registration);
        assert!(room() > 0, "the room of a few given back each time");
    }

    #[test]
    fn a_deleted_vars_handle_finds_no_fence_of_the_next_var_at_its_index() {
        let graph = TestGraph::new();
        let old = graph.new_var().unwrap();
        let (op, registration) = launch(&graph, &[], &[old], "old");
        complete(&graph, op, &registration);
        graph.delete_var(old, || {}).unwrap().call_if_reclaimed();
        let new = graph.new_var().unwrap();
        assert_eq!(new.index(), old.index(), "the slot was not reused");
        let _new_op = launch(&graph, &[], &[new], "new");
        assert_eq!(labels(&behind_of(&graph, &[new], &[]).fences), ["new"]);
        assert!(
            behind_of(&graph, &[old], &[]).fences.is_empty(),
            "a deleted var's handle found the new var's fence"
        );
    }

    #[test]
    fn an_op_behind_launched_writers_waits_for_their_outcomes_and_takes_a_failure() {
        let graph = TestGraph::new();
        let [x, y] = [(); 2].map(|()| graph.new_var().unwrap());
        let (_first_op, first) = launch(&graph, &[], &[x], "x");
        let (_second_op, second) = launch(&graph, &[], &[y], "y");
        let seen = passed_on(behind_of(&graph, &[x, y], &[]).upstream);
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
        let graph = TestGraph::new();
        let [x, y] = [(); 2].map(|()| graph.new_var().unwrap());
        let (_ok_op, ok) = launch(&graph, &[], &[x], "x");
        let (_failed_op, failed) = launch(&graph, &[], &[y], "y");
        let behind_x = behind_of(&graph, &[x], &[]).upstream;
        let behind_y = behind_of(&graph, &[], &[y]).upstream;
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
        let graph = TestGraph::new();
        let x = graph.new_var().unwrap();
        let (_read_op, read) = launch(&graph, &[x], &[], "reads x");
        let behind = behind_of(&graph, &[], &[x]);
        assert_eq!(labels(&behind.fences), ["reads x"]);
        read.settle(Some(&failure("reads x")));
        assert!(matches!(lock(&passed_on(behind.upstream))[..], [None]));
    }
}
