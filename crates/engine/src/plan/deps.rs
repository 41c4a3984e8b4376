//! [`PlanDeps`]: a captured plan's dependencies, computed once from the engine's rules (reads
//! run together, a write alone, in push order) so that a replay releases its ops by counters.
//!
//! Per var, walking the ops in capture order: a read depends on the var's last writer; a write
//! on the reads since that writer and on the writer itself. An edge from a writer *passes a
//! failure on* (the var it wrote holds the failure, so its dependents on that var skip, as
//! rule 2 of the crate documentation says); an edge from a read only orders (a failed read
//! leaves the var alone).

use std::collections::HashMap;

use depengine_graph::Var;

/// One dependency of a captured op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Edge {
    /// The dependent op, by capture index.
    pub(crate) to: u32,
    /// Whether the dependent skips when this op failed (this op wrote a var it uses).
    pub(crate) passes_failure: bool,
    /// Whether this op is the dependent's only dependency: finishing, it releases the
    /// dependent without counting down (set once the counts are known).
    pub(crate) sole: bool,
    /// Whether the dependent is released at this op's launch rather than its completion (two
    /// sync GPU ops: `mark_launches`).
    pub(crate) at_launch: bool,
}

impl Edge {
    /// An edge to `to`, neither sole nor at launch (yet).
    fn new(to: u32, passes_failure: bool) -> Self {
        Edge {
            to,
            passes_failure,
            sole: false,
            at_launch: false,
        }
    }
}

/// A plan's dependencies (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct PlanDeps {
    /// Per op, how many ops it waits for.
    pub(crate) counts: Box<[u32]>,
    /// The ops that wait for op `i`: `edges[first_edge[i]..first_edge[i + 1]]`.
    pub(crate) edges: Box<[Edge]>,
    /// Where each op's edges start in `edges`, and their end.
    pub(crate) first_edge: Box<[usize]>,
    /// The vars the plan reads and never writes.
    pub(crate) reads: Vec<Var>,
    /// The vars the plan writes.
    pub(crate) writes: Vec<Var>,
    /// Per var of `reads` then `writes`: the ops that find it as the replay does (every op on
    /// it up to its first writer, included), which skip if it holds a failure.
    pub(crate) entries: Box<[Box<[u32]>]>,
    /// Per var of `writes`: its last writer, whose outcome the var keeps.
    pub(crate) last_writers: Box<[u32]>,
    /// The ops that wait for none, in capture order.
    pub(crate) roots: Box<[u32]>,
    /// Per op, the ops it waits for along `at_launch` edges; empty when the plan has none.
    pub(crate) launch_preds: Box<[Box<[u32]>]>,
}

/// One var's state along the walk.
#[derive(Default)]
struct VarWalk {
    last_writer: Option<u32>,
    reads_since: Vec<u32>,
    /// Ops up to the first writer, included; closed once it is found.
    entries: Vec<u32>,
    written: bool,
}

impl PlanDeps {
    /// The dependencies of ops given as (reads, writes), in capture order: at most
    /// `u32::MAX` ops, each with no var twice in its lists (a capture checks both).
    pub(crate) fn of<'a>(ops: impl IntoIterator<Item = (&'a [Var], &'a [Var])>) -> Self {
        let mut order: Vec<Var> = Vec::new();
        let mut walks: HashMap<Var, VarWalk> = HashMap::new();
        let mut successors: Vec<Vec<Edge>> = Vec::new();
        let mut counts: Vec<u32> = Vec::new();
        for (index, (reads, writes)) in ops.into_iter().enumerate() {
            let op = u32::try_from(index).expect("a plan holds fewer than 2^32 ops");
            successors.push(Vec::new());
            counts.push(0);
            debug_assert!(
                reads.iter().chain(writes).enumerate().all(|(i, var)| {
                    !reads
                        .iter()
                        .chain(writes)
                        .skip(i + 1)
                        .any(|other| other == var)
                }),
                "a var twice in one op's lists"
            );
            let mut add = |from: u32, passes_failure: bool| {
                let edges = &mut successors[from as usize];
                // Edges to `op` are added only now, so only the last one can be to it.
                if let Some(edge) = edges.last_mut().filter(|edge| edge.to == op) {
                    edge.passes_failure |= passes_failure;
                } else {
                    edges.push(Edge::new(op, passes_failure));
                    counts[op as usize] += 1;
                }
            };
            for &var in reads {
                let walk = walks.entry(var).or_insert_with(|| {
                    order.push(var);
                    VarWalk::default()
                });
                if let Some(writer) = walk.last_writer {
                    add(writer, true);
                }
                walk.reads_since.push(op);
                if !walk.written {
                    walk.entries.push(op);
                }
            }
            for &var in writes {
                let walk = walks.entry(var).or_insert_with(|| {
                    order.push(var);
                    VarWalk::default()
                });
                for read in walk.reads_since.drain(..) {
                    add(read, false);
                }
                if let Some(writer) = walk.last_writer {
                    add(writer, true);
                }
                walk.last_writer = Some(op);
                if !walk.written {
                    walk.entries.push(op);
                    walk.written = true;
                }
            }
        }
        let (mut writes, mut reads): (Vec<Var>, Vec<Var>) =
            order.into_iter().partition(|var| walks[var].written);
        // By index, as the graph locks them: its sort of each replay's vars finds two runs.
        writes.sort_unstable_by_key(|var| var.index());
        reads.sort_unstable_by_key(|var| var.index());
        let entries = reads
            .iter()
            .chain(&writes)
            .map(|var| walks[var].entries.clone().into_boxed_slice())
            .collect();
        let last_writers = writes
            .iter()
            .filter_map(|var| walks[var].last_writer)
            .collect();
        let mut first_edge = Vec::with_capacity(successors.len() + 1);
        let mut edges = Vec::new();
        for list in &successors {
            first_edge.push(edges.len());
            edges.extend(list.iter().map(|&edge| Edge {
                sole: counts[edge.to as usize] == 1,
                ..edge
            }));
        }
        first_edge.push(edges.len());
        let roots = (0..)
            .zip(&counts)
            .filter(|&(_, &count)| count == 0)
            .map(|(op, _)| op)
            .collect();
        PlanDeps {
            roots,
            counts: counts.into(),
            edges: edges.into(),
            first_edge: first_edge.into(),
            reads,
            writes,
            entries,
            last_writers,
            launch_preds: Box::default(),
        }
    }

    /// Marks the edges whose dependent is released at the launch of their op (`at_launch(op,
    /// dependent)`: both are sync GPU ops), and lists each op's predecessors along them.
    pub(crate) fn mark_launches(&mut self, at_launch: impl Fn(u32, u32) -> bool) {
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); self.counts.len()];
        for (op, window) in (0..).zip(self.first_edge.windows(2)) {
            for edge in &mut self.edges[window[0]..window[1]] {
                edge.at_launch = at_launch(op, edge.to);
                if edge.at_launch {
                    preds[edge.to as usize].push(op);
                }
            }
        }
        if preds.iter().any(|list| !list.is_empty()) {
            self.launch_preds = preds.into_iter().map(Vec::into_boxed_slice).collect();
        }
    }

    /// Whether some op is released at another's launch.
    pub(crate) fn launches(&self) -> bool {
        !self.launch_preds.is_empty()
    }

    /// The ops that wait for `op`.
    #[inline]
    pub(crate) fn successors(&self, op: u32) -> &[Edge] {
        let (start, end) = (
            self.first_edge[op as usize],
            self.first_edge[op as usize + 1],
        );
        &self.edges[start..end]
    }
}

/// An order in which the counters of `deps` release its ops, picking among the ready ones as
/// `picks` says (each modulo their count, in turn): for the property tests.
#[cfg(all(test, not(loom)))]
pub(crate) fn counter_order(deps: &PlanDeps, picks: &[u32]) -> Vec<usize> {
    let mut counts = deps.counts.to_vec();
    let mut ready: Vec<usize> = (0..counts.len()).filter(|&i| counts[i] == 0).collect();
    let mut order = Vec::new();
    while !ready.is_empty() {
        let pick = picks[order.len() % picks.len()] as usize % ready.len();
        let op = ready.swap_remove(pick);
        order.push(op);
        for edge in deps.successors(op as u32) {
            counts[edge.to as usize] -= 1;
            if counts[edge.to as usize] == 0 {
                ready.push(edge.to as usize);
            }
        }
    }
    order
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Edge, PlanDeps, counter_order};
    use depengine_graph::{Graph, Var};
    use proptest::prelude::*;

    fn vars(n: usize) -> Vec<Var> {
        let graph = Graph::<(), ()>::new();
        (0..n).map(|_| graph.new_var().unwrap()).collect()
    }

    #[test]
    fn reads_wait_for_the_writer_and_the_next_writer_for_them() {
        let v = vars(2);
        let ops: Vec<(Vec<Var>, Vec<Var>)> = vec![
            (vec![], vec![v[0]]),     // 0 writes a
            (vec![v[0]], vec![v[1]]), // 1 reads a, writes b
            (vec![v[0]], vec![]),     // 2 reads a
            (vec![], vec![v[0]]),     // 3 writes a
        ];
        let deps = PlanDeps::of(ops.iter().map(|(r, w)| (&r[..], &w[..])));
        assert_eq!(&*deps.counts, &[0, 1, 1, 3]);
        let edge = |to, passes_failure| Edge {
            at_launch: false,
            to,
            passes_failure,
            sole: to != 3,
        };
        assert_eq!(
            deps.successors(0),
            &[edge(1, true), edge(2, true), edge(3, true)]
        );
        assert_eq!(deps.successors(1), &[edge(3, false)]);
        assert_eq!(deps.successors(2), &[edge(3, false)]);
        assert!(deps.reads.is_empty());
        assert_eq!(deps.writes, [v[0], v[1]]);
        assert_eq!(&*deps.entries[0], &[0]);
        assert_eq!(&*deps.entries[1], &[1]);
        assert_eq!(&*deps.last_writers, &[3, 1]);
    }

    #[test]
    fn a_var_only_read_is_read_by_the_plan_and_entered_by_every_reader() {
        let v = vars(2);
        let ops: Vec<(Vec<Var>, Vec<Var>)> =
            vec![(vec![v[0]], vec![v[1]]), (vec![v[0]], vec![v[1]])];
        let deps = PlanDeps::of(ops.iter().map(|(r, w)| (&r[..], &w[..])));
        assert_eq!(deps.reads, [v[0]]);
        assert_eq!(deps.writes, [v[1]]);
        assert_eq!(&*deps.entries[0], &[0, 1]);
        assert_eq!(&*deps.entries[1], &[0]);
    }

    proptest! {
        /// Any order the counters allow gives every read the version the capture order gives
        /// it, and every var its last version: the plan's dependencies are those of the rules.
        #[test]
        fn every_order_the_counters_allow_equals_the_capture_order(
            ops in proptest::collection::vec(
                (proptest::collection::vec(0usize..5, 0..3), proptest::collection::vec(0usize..5, 0..3)),
                1..24,
            ),
            picks in proptest::collection::vec(any::<u32>(), 24),
        ) {
            let v = vars(5);
            let lists: Vec<(Vec<Var>, Vec<Var>)> = ops
                .iter()
                .map(|(r, w)| {
                    let mut w: Vec<Var> = w.iter().map(|&i| v[i]).collect();
                    w.dedup();
                    w.sort_by_key(|var| format!("{var:?}"));
                    w.dedup();
                    let mut r: Vec<Var> = r.iter().map(|&i| v[i]).filter(|var| !w.contains(var)).collect();
                    r.sort_by_key(|var| format!("{var:?}"));
                    r.dedup();
                    (r, w)
                })
                .collect();
            let deps = PlanDeps::of(lists.iter().map(|(r, w)| (&r[..], &w[..])));
            // Sequential model: the version of each var each op reads, and the final versions.
            let run = |order: &[usize]| {
                let mut version = vec![0usize; 5];
                let mut seen = vec![Vec::new(); lists.len()];
                for &op in order {
                    let (r, w) = &lists[op];
                    for var in r.iter().chain(w) {
                        let at = v.iter().position(|x| x == var).unwrap();
                        seen[op].push((at, version[at]));
                    }
                    for var in w {
                        let at = v.iter().position(|x| x == var).unwrap();
                        version[at] = op + 1;
                    }
                }
                (seen, version)
            };
            let sequential: Vec<usize> = (0..lists.len()).collect();
            let order = counter_order(&deps, &picks);
            prop_assert_eq!(order.len(), lists.len());
            prop_assert_eq!(run(&order), run(&sequential));
        }

        /// Failures as a replay passes them on (`run/replay/`: failures held before it reach
        /// the `entries`, a failed or skipped op's reach its dependents through the edges that
        /// pass them, each written var ends as its last writer did) equal the engine's rules
        /// in capture order: which ops run, and which vars end failed.
        #[test]
        fn failures_passed_along_the_edges_equal_the_rules(
            ops in proptest::collection::vec(
                (proptest::collection::vec(0usize..5, 0..3), proptest::collection::vec(0usize..5, 0..3), any::<bool>()),
                1..24,
            ),
            failed_before in proptest::collection::vec(any::<bool>(), 5),
        ) {
            let v = vars(5);
            let at = |var: &Var| v.iter().position(|x| x == var).unwrap();
            let lists: Vec<(Vec<Var>, Vec<Var>, bool)> = ops
                .iter()
                .map(|(r, w, fails)| {
                    let mut writes: Vec<Var> = Vec::new();
                    for &i in w {
                        if !writes.contains(&v[i]) {
                            writes.push(v[i]);
                        }
                    }
                    let mut reads: Vec<Var> = Vec::new();
                    for &i in r {
                        if !writes.contains(&v[i]) && !reads.contains(&v[i]) {
                            reads.push(v[i]);
                        }
                    }
                    (reads, writes, *fails)
                })
                .collect();
            let deps = PlanDeps::of(lists.iter().map(|(r, w, _)| (&r[..], &w[..])));
            // The rules, in capture order.
            let mut failed = failed_before.clone();
            let mut runs = vec![false; lists.len()];
            for (op, (r, w, fails)) in lists.iter().enumerate() {
                let skipped = r.iter().chain(w).any(|var| failed[at(var)]);
                runs[op] = !skipped;
                if skipped || *fails {
                    for var in w {
                        failed[at(var)] = true;
                    }
                }
            }
            // The replay, in capture order (any order the counters allow passes the same).
            let mut inherited = vec![false; lists.len()];
            for (position, var) in deps.reads.iter().chain(&deps.writes).enumerate() {
                if failed_before[at(var)] {
                    for &op in &*deps.entries[position] {
                        inherited[op as usize] = true;
                    }
                }
            }
            let mut outcome_failed = vec![false; lists.len()];
            for op in 0..lists.len() {
                prop_assert_eq!(!inherited[op], runs[op], "op {}", op);
                outcome_failed[op] = inherited[op] || lists[op].2;
                if outcome_failed[op] {
                    for edge in deps.successors(op as u32) {
                        if edge.passes_failure {
                            inherited[edge.to as usize] = true;
                        }
                    }
                }
            }
            let mut replayed = failed_before.clone();
            for (var, &writer) in deps.writes.iter().zip(&*deps.last_writers) {
                replayed[at(var)] = outcome_failed[writer as usize];
            }
            prop_assert_eq!(replayed, failed);
        }
    }
}
