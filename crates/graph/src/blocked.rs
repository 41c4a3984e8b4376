//! [`Graph::holds_back`]: the waiting ops that running ops hold back, for deadlock checks.
//!
//! An op that blocks while it runs (the engine's `wait_for_var` called inside an op) keeps its
//! vars until it returns. If the op it blocks on waits, directly or through other ops, for one
//! of those vars, it never returns: a deadlock. This walk finds every waiting op held back by
//! the holders of a set of vars, so the caller can look for the op it is about to block on.
//!
//! # Algorithm outline
//!
//! *Waiting* is about a var's FIFO (see `var_queue`): a request is either granted (the op
//! holds the var) or waiting in the FIFO, whose front is a write (or a read that only launched
//! ops hold back). Facts the walk uses:
//!
//! 1. Every request waiting on a var waits for every holder of that var: the front write waits
//!    for all of them, and every other waiting request is behind that write. (Except for reads
//!    at the front while no write runs, which only launched ops hold back, see `var_queue.rs`:
//!    they do not wait for the running reads; the first write behind them does.)
//! 2. A waiting write waits for everything ahead of it in the FIFO, so everything behind it
//!    waits for it.
//! 3. A waiting read is granted together with the reads that follow it up to the next write;
//!    that write, and everything behind it, waits for it. The reads beside it do not.
//! 4. A parked op that waits on one var may hold others (granted already): by (1), every
//!    request waiting on those waits for it.
//!
//! The walk starts from the requests waiting on the held vars (1), and from each op it reaches
//! goes on to the requests that op holds back on each of its vars: by (2) or (3) where it waits
//! in the var's FIFO, by (4) where it holds the var. Every op reached is parked for as long as
//! the holders run, so what the walk observes of it stays true while it walks, although it
//! takes one var lock at a time: an op it reached cannot be granted in the meantime, and pushes
//! only append behind it. An op pushed after the walk started can be missed, which is
//! harmless for the caller's question: an op can only wait for ops pushed before it.
//!
//! The walk holds the graph's push lock, so no push of an op on several vars is halfway
//! through its appends (one var at a time, `Graph::push_each`) while it looks: an op it reached
//! is on every one of its vars. Each var's FIFO is copied when the walk first reaches the var,
//! and the suffix of the copy already queued for a visit is remembered. An op missing from the
//! copy either holds the var or was pushed after the copy was taken (on that var alone): the FIFO is copied again, unless the whole copy is
//! queued already (then nothing the op could hold back matters: it was pushed after the walk
//! began, or it holds the var, which queues the whole FIFO, done). So each var is copied at
//! most once per op that reaches it while its copy is partly queued, which for a holder means
//! once: the walk costs time linear in the requests it reaches, plus a copy per op pushed
//! onto a var while the walk goes through it.

use std::collections::HashMap;

use crate::graph::Graph;
use crate::op::{OpId, PendingOp};
use crate::var::{Access, Var};

/// What [`Graph::holds_back`] does with a waiting op it reached.
///
/// # Examples
///
/// ```
/// use depengine_graph::{Graph, ReadyOp, Visit};
///
/// let graph: Graph<&str> = Graph::new();
/// let (a, b) = (graph.new_var()?, graph.new_var()?);
/// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
/// graph.push(&[], &[a], "holds a", &mut ready)?;
/// graph.push(&[], &[b], "holds b", &mut ready)?;
/// graph.push(&[a], &[], "waits for a", &mut ready)?;
/// graph.push(&[b], &[], "waits for b", &mut ready)?;
///
/// // From `a`, the walk reaches only the op waiting for `a`.
/// let found = |op: &&str| if *op == "waits for b" { Visit::Found } else { Visit::Continue };
/// assert_eq!(graph.holds_back(&[a], |_, op| found(op)), None);
/// // If that op also holds back whatever holds `b`, the walk goes on from `b`.
/// let path = graph.holds_back(&[a], |_, op| match *op {
///     "waits for a" => Visit::AlsoHolds(vec![b]),
///     _ => found(op),
/// });
/// assert_eq!(path.map(|path| path.len()), Some(2));
/// # Ok::<(), depengine_graph::GraphError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Visit {
    /// Stop: the op looked for is held back.
    Found,
    /// The op also holds back whatever holds these vars (say, a thread that runs ops on these
    /// vars and blocks until this op runs): go on from them, as from the held vars.
    AlsoHolds(Vec<Var>),
    /// Go on.
    Continue,
}

impl<T, E, L: Default> Graph<T, E, L> {
    /// Walks the waiting ops held back, directly or transitively, by the ops that hold `held`
    /// (vars granted to running ops that will not complete while the caller waits), calling
    /// `visit` once with the id and payload of each. As soon as `visit` returns
    /// [`Visit::Found`], returns the path to that op: the ops from one that waits on a var of
    /// `held` (or of a [`Visit::AlsoHolds`] list) to the op found, each held back by the one
    /// before it (or, after an op that returned `AlsoHolds`, by the holders of those vars);
    /// `None` if the walk ends without finding anything. `visit` runs while the op cannot be
    /// dispatched (as for [`inspect_op`](Self::inspect_op)): it must not call into this graph.
    /// Vars of another graph or stale handles in `held` are skipped. The walk holds off pushes
    /// on several vars and locks one var at a time; it is exact while the holders of `held`
    /// keep them, and
    /// ops pushed after it began may or may not be reached (`docs/graph.md`, "What running ops
    /// hold back").
    ///
    /// # Example
    ///
    /// ```
    /// use depengine_graph::{Graph, ReadyOp, Visit};
    ///
    /// let graph: Graph<&str> = Graph::new();
    /// let (a, b) = (graph.new_var()?, graph.new_var()?);
    /// let mut ready: Vec<ReadyOp<&str>> = Vec::new();
    /// graph.push(&[], &[a], "running, holds a", &mut ready)?;
    /// graph.push(&[a], &[b], "waits for a, holds b", &mut ready)?;
    /// graph.push(&[b], &[], "waits for b", &mut ready)?;
    /// assert_eq!(ready.len(), 1);
    ///
    /// let mut reached = Vec::new();
    /// let path = graph.holds_back(&[a], |id, op| {
    ///     reached.push((id, *op));
    ///     if *op == "waits for b" { Visit::Found } else { Visit::Continue }
    /// });
    /// let names: Vec<&str> = reached.iter().map(|&(_, op)| op).collect();
    /// assert_eq!(names, ["waits for a, holds b", "waits for b"]);
    /// let ids: Vec<_> = reached.iter().map(|&(id, _)| id).collect();
    /// assert_eq!(path, Some(ids));
    /// # Ok::<(), depengine_graph::GraphError>(())
    /// ```
    pub fn holds_back(
        &self,
        held: &[Var],
        mut visit: impl FnMut(OpId, &T) -> Visit,
    ) -> Option<Vec<OpId>> {
        // No push on several vars halfway through its appends while we walk (see the module
        // documentation).
        let _pushes = self.hold_pushes();
        let mut walk = Walk::default();
        for &var in held {
            walk.held_back_on(self, var, None, None);
        }
        while let Some((id, from)) = walk.stack.pop() {
            if walk.from.contains_key(&id) {
                continue;
            }
            walk.from.insert(id, from);
            let graph = self.id();
            let reached = self.inspect_parked(id, |parked| {
                let deps = parked.deps.all().iter().enumerate();
                let deps: Vec<(Var, Access)> = deps
                    .map(|(position, key)| (key.var(graph), parked.deps.access(position)))
                    .collect();
                (visit(id, &parked.payload), deps)
            });
            // No longer waiting: it was not held back (only ops granted meanwhile leave).
            let Some((verdict, deps)) = reached else {
                continue;
            };
            match verdict {
                Visit::Found => return Some(walk.path_to(id)),
                Visit::AlsoHolds(vars) => {
                    for var in vars {
                        walk.held_back_on(self, var, None, Some(id));
                    }
                }
                Visit::Continue => {}
            }
            for (var, access) in deps {
                walk.held_back_on(self, var, Some((id, access)), Some(id));
            }
        }
        None
    }
}

/// The state of one [`Graph::holds_back`] walk.
#[derive(Default)]
struct Walk {
    /// Ops reached and not yet visited, each with the op it was reached from.
    stack: Vec<(OpId, Option<OpId>)>,
    /// Ops visited, each with the op it was first reached from (`None`: from a held var).
    from: HashMap<OpId, Option<OpId>>,
    /// Per var index, the copy of its FIFO the walk works from.
    fifos: HashMap<u32, Fifo>,
}

/// A copy of the requests waiting on one var.
struct Fifo {
    waiting: Vec<PendingOp>,
    /// `waiting[..launch_held]` wait only for launched ops, not for the var's holders.
    launch_held: usize,
    position: HashMap<OpId, usize>,
    /// `waiting[queued..]` went onto the stack already.
    queued: usize,
}

impl Fifo {
    fn copy<T, E, L: Default>(graph: &Graph<T, E, L>, var: Var) -> Option<Self> {
        let (waiting, launch_held) = graph.waiting_behind_holders(var).ok()?;
        let position = waiting
            .iter()
            .enumerate()
            .map(|(i, op)| (op.id, i))
            .collect();
        Some(Fifo {
            queued: waiting.len(),
            waiting,
            launch_held,
            position,
        })
    }

    /// Where the requests held back by request `at` start: the next one behind a write (fact
    /// 2), the next write behind a read (fact 3).
    fn behind(&self, at: usize) -> usize {
        match self.waiting[at].access {
            Access::Write => at + 1,
            Access::Read => self.waiting[at + 1..]
                .iter()
                .position(|op| op.access == Access::Write)
                .map_or(self.waiting.len(), |offset| at + 1 + offset),
        }
    }
}

impl Walk {
    /// The visited ops from one reached from a held var to `id`.
    fn path_to(&self, id: OpId) -> Vec<OpId> {
        let mut path = vec![id];
        let mut at = id;
        while let Some(&Some(from)) = self.from.get(&at) {
            path.push(from);
            at = from;
        }
        path.reverse();
        path
    }

    /// Queues the requests on `var` held back by `op` (`None`: by the var's holders), as
    /// reached from `from`.
    fn held_back_on<T, E, L: Default>(
        &mut self,
        graph: &Graph<T, E, L>,
        var: Var,
        op: Option<(OpId, Access)>,
        from: Option<OpId>,
    ) {
        let fifo = match self.fifos.entry(var.index()) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => match Fifo::copy(graph, var) {
                Some(fifo) => entry.insert(fifo),
                None => return,
            },
        };
        if fifo.queued == 0 {
            // Every request of the copy went onto the stack already. A request pushed since
            // the copy was taken is behind every op the copy holds, and cannot hold back the
            // op the caller looks for, which was pushed before the walk began.
            return;
        }
        let start = match op {
            None => fifo.launch_held,
            Some((id, _)) => {
                if !fifo.position.contains_key(&id) {
                    // Pushed after the copy was taken: copy the FIFO again.
                    match Fifo::copy(graph, var) {
                        Some(fresh) => *fifo = fresh,
                        None => return,
                    }
                }
                match fifo.position.get(&id) {
                    Some(&at) => fifo.behind(at),
                    // Not waiting on this var: the op holds it (fact 4).
                    None => fifo.launch_held,
                }
            }
        };
        if start < fifo.queued {
            self.stack.extend(
                fifo.waiting[start..fifo.queued]
                    .iter()
                    .map(|op| (op.id, from)),
            );
            fifo.queued = start;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::ReadyOp;

    type Ready = Vec<ReadyOp<&'static str>>;

    fn new_vars<const N: usize>(graph: &Graph<&'static str>) -> [Var; N] {
        std::array::from_fn(|_| graph.new_var().unwrap())
    }

    /// The payloads `holds_back(held)` reaches, sorted.
    fn reached(graph: &Graph<&'static str>, held: &[Var]) -> Vec<&'static str> {
        let mut reached = Vec::new();
        let found = graph.holds_back(held, |_, op| {
            reached.push(*op);
            Visit::Continue
        });
        assert!(found.is_none());
        reached.sort_unstable();
        reached
    }

    #[test]
    fn reaches_every_request_waiting_on_a_held_var_and_what_those_ops_hold() {
        let graph: Graph<&str> = Graph::new();
        let [a, b, c] = new_vars(&graph);
        let mut ready = Ready::new();
        graph.push(&[], &[a], "holder", &mut ready).unwrap();
        graph
            .push(&[a], &[b], "reads a, holds b", &mut ready)
            .unwrap();
        graph.push(&[], &[a], "writes a", &mut ready).unwrap();
        graph.push(&[b], &[], "reads b", &mut ready).unwrap();
        graph.push(&[], &[c], "unrelated", &mut ready).unwrap();
        graph
            .push(&[c], &[], "waits for unrelated", &mut ready)
            .unwrap();
        assert_eq!(ready.len(), 2);
        assert_eq!(
            reached(&graph, &[a]),
            ["reads a, holds b", "reads b", "writes a"]
        );
        assert_eq!(reached(&graph, &[c]), ["waits for unrelated"]);
    }

    #[test]
    fn reads_that_only_a_launch_holds_back_do_not_wait_for_the_running_reads() {
        use crate::Waits;

        let graph: Graph<&str> = Graph::new();
        let [a] = new_vars(&graph);
        let mut ready = Ready::new();
        graph.push(&[], &[a], "kernel", &mut ready).unwrap();
        graph
            .push_with(Waits::Launch, &[a], &[], "kernel's reader", &mut ready)
            .unwrap();
        let kernel = ready.remove(0);
        let launched = graph.launch(kernel, |_, &mut ()| {}, &mut ready).unwrap();
        assert_eq!(ready.len(), 1, "the reader runs behind the launched kernel");
        // Behind the launched write, not behind the running reader: the host read waits for
        // the kernel's completion only; the write waits for both.
        graph.push(&[a], &[], "host read", &mut ready).unwrap();
        graph.push(&[], &[a], "host write", &mut ready).unwrap();
        assert_eq!(ready.len(), 1);
        assert_eq!(reached(&graph, &[a]), ["host write"]);
        graph
            .complete_launched(launched, Ok(()), |_, &mut ()| {}, &mut ready)
            .unwrap();
        assert_eq!(ready.len(), 2, "the host read runs beside the reader");
    }

    #[test]
    fn a_waiting_read_holds_back_the_next_write_not_the_reads_beside_it() {
        let graph: Graph<&str> = Graph::new();
        let [a, b] = new_vars(&graph);
        let mut ready = Ready::new();
        graph.push(&[], &[a], "holder of a", &mut ready).unwrap();
        graph.push(&[], &[b], "holder of b", &mut ready).unwrap();
        // Both wait on b behind its holder; the first also waits on a.
        graph
            .push(&[a, b], &[], "reads a and b", &mut ready)
            .unwrap();
        graph
            .push(&[b], &[], "reads b beside it", &mut ready)
            .unwrap();
        graph.push(&[], &[b], "writes b", &mut ready).unwrap();
        graph.push(&[b], &[], "reads b after", &mut ready).unwrap();
        assert_eq!(ready.len(), 2);
        assert_eq!(
            reached(&graph, &[a]),
            ["reads a and b", "reads b after", "writes b"]
        );
        assert_eq!(
            reached(&graph, &[b]),
            [
                "reads a and b",
                "reads b after",
                "reads b beside it",
                "writes b"
            ]
        );
    }

    #[test]
    fn found_stops_the_walk_and_also_holds_goes_on_from_more_vars() {
        let graph: Graph<&str> = Graph::new();
        let [a, b, c] = new_vars(&graph);
        let mut ready = Ready::new();
        graph.push(&[], &[a], "holder of a", &mut ready).unwrap();
        graph.push(&[], &[b], "holder of b", &mut ready).unwrap();
        graph
            .push(&[], &[a], "blocks the holder of b", &mut ready)
            .unwrap();
        graph.push(&[], &[b], "waits for b", &mut ready).unwrap();
        graph.push(&[], &[c], "holder of c", &mut ready).unwrap();
        graph.push(&[], &[c], "waits for c", &mut ready).unwrap();
        let mut visits = 0;
        let mut names = HashMap::new();
        let path = graph.holds_back(&[a, c], |id, op| {
            visits += 1;
            names.insert(id, *op);
            match *op {
                "blocks the holder of b" => Visit::AlsoHolds(vec![b]),
                "waits for b" => Visit::Found,
                _ => Visit::Continue,
            }
        });
        let path: Vec<&str> = path.unwrap().iter().map(|id| names[id]).collect();
        assert_eq!(path, ["blocks the holder of b", "waits for b"]);
        assert!(visits <= 3, "{visits} visits");
        assert!(graph.holds_back(&[a], |_, _| Visit::Continue).is_none());
    }

    #[test]
    fn a_long_fifo_is_walked_in_linear_time() {
        let n = if cfg!(miri) { 50 } else { 20_000 };
        let graph: Graph<&str> = Graph::new();
        let a = graph.new_var().unwrap();
        let mut ready = Ready::new();
        graph.push(&[], &[a], "holder", &mut ready).unwrap();
        for _ in 0..n {
            graph.push(&[], &[a], "writes a", &mut ready).unwrap();
        }
        let mut visits = 0;
        let found = graph.holds_back(&[a], |_, _| {
            visits += 1;
            Visit::Continue
        });
        assert!(found.is_none());
        assert_eq!(visits, n);
        while let Some(op) = ready.pop() {
            graph.complete(op, Ok(()), &mut ready).unwrap();
        }
        assert_eq!(graph.stats().live_op_blocks, 0);
    }
}
