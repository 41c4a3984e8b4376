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
//! Only device ops touch the registry (a CPU-only engine never locks it); its one lock is held
//! for a lookup or an update of the vars of one op.

use std::collections::HashMap;

use depengine_device::Fence;
use depengine_graph::{Access, Var};
use depengine_sync::{Mutex, lock};

/// The fence of one launched op on one var.
struct RegisteredFence {
    /// Which launched op (`LaunchedFences::register` hands the ids out).
    op: u64,
    access: Access,
    fence: Fence,
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
    /// Per var with launched ops: their fences, oldest first.
    fences: HashMap<Var, Vec<RegisteredFence>>,
}

impl LaunchedFences {
    /// Registers `fence`, after the work of a launched op that reads `reads` and writes
    /// `writes`, before the op's launch releases anything. Returns the op's id in the
    /// registry, for `remove`.
    pub(crate) fn register(
        &self,
        reads: impl Iterator<Item = Var>,
        writes: impl Iterator<Item = Var>,
        fence: &Fence,
    ) -> u64 {
        let mut state = lock(&self.state);
        let op = state.next_op;
        state.next_op += 1;
        let uses = reads
            .map(|var| (var, Access::Read))
            .chain(writes.map(|var| (var, Access::Write)));
        for (var, access) in uses {
            state.fences.entry(var).or_default().push(RegisteredFence {
                op,
                access,
                fence: fence.clone(),
            });
        }
        op
    }

    /// Removes the fences of launched op `op` (its work is done), which used `vars`.
    pub(crate) fn remove(&self, op: u64, vars: impl Iterator<Item = Var>) {
        let mut state = lock(&self.state);
        for var in vars {
            if let Some(fences) = state.fences.get_mut(&var) {
                fences.retain(|registered| registered.op != op);
                if fences.is_empty() {
                    state.fences.remove(&var);
                }
            }
        }
    }

    /// Removes the fences of `op` from every var, for an op whose vars are no longer known
    /// (a launch the graph refused): a visit of every fence, on that path only.
    pub(crate) fn remove_everywhere(&self, op: u64) {
        lock(&self.state).fences.retain(|_, fences| {
            fences.retain(|registered| registered.op != op);
            !fences.is_empty()
        });
    }

    /// The fences a device op that reads `reads` and writes `writes` starts after (see the
    /// module documentation), each once.
    pub(crate) fn behind(
        &self,
        reads: impl Iterator<Item = Var>,
        writes: impl Iterator<Item = Var>,
    ) -> Vec<Fence> {
        let state = lock(&self.state);
        if state.fences.is_empty() {
            return Vec::new();
        }
        let mut ops: Vec<u64> = Vec::new();
        let mut behind = Vec::new();
        let uses = reads
            .map(|var| (var, Access::Read))
            .chain(writes.map(|var| (var, Access::Write)));
        for (var, access) in uses {
            let conflicting = state
                .fences
                .get(&var)
                .into_iter()
                .flatten()
                .filter(|registered| access == Access::Write || registered.access == Access::Write);
            for registered in conflicting {
                if !ops.contains(&registered.op) {
                    ops.push(registered.op);
                    behind.push(registered.fence.clone());
                }
            }
        }
        behind
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
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
            labels(&fences.behind([x].into_iter(), [].into_iter())),
            ["writes x"]
        );
        assert!(fences.behind([y].into_iter(), [].into_iter()).is_empty());
        assert_eq!(
            labels(&fences.behind([].into_iter(), [x, y].into_iter())),
            ["writes x", "reads x, y"],
            "each op's fence once"
        );
        fences.remove(write, [x].into_iter());
        assert_eq!(
            labels(&fences.behind([].into_iter(), [x].into_iter())),
            ["reads x, y"]
        );
    }

    #[test]
    fn removing_the_last_fence_of_a_var_forgets_the_var() {
        let fences = LaunchedFences::default();
        let [x, y] = vars();
        let op = fences.register([].into_iter(), [x].into_iter(), &Fence::new("writes x"));
        fences.remove(op, [x].into_iter());
        assert!(lock(&fences.state).fences.is_empty());
        let op = fences.register([y].into_iter(), [x].into_iter(), &Fence::new("x, y"));
        fences.remove_everywhere(op);
        assert!(lock(&fences.state).fences.is_empty());
    }
}
