//! [`group`]: a plan's sync GPU ops captured one after another on one device executor, made
//! one op each run (`PlanFn::DeviceGraph`), whose work the executor records once and launches again
//! at each later replay (`Capture::record_gpu_work`).
//!
//! Why one after another: ops next to each other in capture order are *convex*, no path of
//! dependencies leaves the run and comes back into it (every edge goes forward in capture
//! order, and nothing lies between), so the run can be one op of the plan, at the place of
//! its ops, with their reads and writes: the plan's dependencies (`plan/deps.rs`) computed on
//! it order everything else as they ordered its ops.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use depengine_device::Recording;
use depengine_graph::Var;

use crate::context::Context;
use crate::name::OpName;
use crate::op::plan::{GpuGraph, GraphMember, PlanFn, PlanOp, Target};

/// The ops of a plan as captured, each run of sync GPU ops one after another on one executor
/// (or inline, on the naive engine) made one `PlanFn::DeviceGraph` op (a run of one as well:
/// its function may launch many kernels).
pub(crate) fn group(ops: Vec<PlanOp>) -> Vec<PlanOp> {
    let mut grouped: Vec<PlanOp> = Vec::with_capacity(ops.len());
    let mut open: Option<GpuRun> = None;
    for op in ops {
        if open.as_ref().is_some_and(|run| !run.same_executor(&op)) {
            grouped.extend(open.take().map(GpuRun::into_op));
        }
        // Within: a sync GPU op joins the run; any other op (an async one on the same executor)
        // ends it.
        match op {
            PlanOp {
                name,
                func: PlanFn::Sync(func),
                run,
                target,
                profiled,
                reads,
                writes,
            } if on_device(target, run.context) => {
                let open = open.get_or_insert_with(|| GpuRun {
                    target,
                    members: Vec::new(),
                    profiled: false,
                });
                open.profiled |= profiled;
                open.members.push(GraphMember {
                    name,
                    func,
                    run,
                    reads,
                    writes,
                });
            }
            op => {
                grouped.extend(open.take().map(GpuRun::into_op));
                grouped.push(op);
            }
        }
    }
    grouped.extend(open.map(GpuRun::into_op));
    grouped
}

/// Whether an op on `target` and `context` is a GPU op: on its device's executor, or (the
/// naive engine's) inline.
fn on_device(target: Target, context: Context) -> bool {
    match target {
        Target::Device { .. } => true,
        Target::Inline => context.is_gpu(),
        Target::Block(_) => false,
    }
}

/// The run of sync GPU ops being grouped: one or more, in capture order.
struct GpuRun {
    target: Target,
    members: Vec<GraphMember>,
    /// Some op of it is marked for the profiler.
    profiled: bool,
}

impl GpuRun {
    /// Whether `op` runs where the run's ops do: the same target and context.
    fn same_executor(&self, op: &PlanOp) -> bool {
        op.target == self.target && op.run.context == self.members[0].run.context
    }

    /// The run as one op: the first op's place and context, every var any of its ops writes as
    /// a write, the others they read as reads.
    fn into_op(self) -> PlanOp {
        let GpuRun {
            target,
            members,
            profiled,
        } = self;
        let mut seen: HashSet<Var> = HashSet::new();
        let mut vars = |named: fn(&GraphMember) -> &[Var]| -> Box<[Var]> {
            members
                .iter()
                .flat_map(named)
                .filter(|&&var| seen.insert(var))
                .copied()
                .collect()
        };
        let writes = vars(|op| &op.writes);
        let reads = vars(|op| &op.reads);
        let (first, last) = (&members[0], &members[members.len() - 1]);
        let name = if members.len() == 1 {
            format!("graph {}", first.name)
        } else {
            format!("graph {}..{}", first.name, last.name)
        };
        PlanOp {
            name: OpName::from(Cow::Owned(name)),
            run: first.run,
            target,
            profiled,
            reads,
            writes,
            func: PlanFn::DeviceGraph(Box::new(GpuGraph {
                recording: Arc::new(Recording::new()),
                members: members.into(),
            })),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::borrow::Cow;

    use depengine_graph::{Graph, Var};
    use proptest::prelude::*;

    use super::group;
    use crate::context::{Context, FnProperty, RunContext};
    use crate::name::OpName;
    use crate::op::plan::{PlanFn, PlanOp, Target};
    use crate::plan::deps::{PlanDeps, counter_order};

    /// Op number `index` on `context` (a GPU one on its device's executor, a CPU one inline),
    /// sync or not, reading `reads` and writing `writes`.
    fn op(index: usize, context: Context, sync: bool, reads: &[Var], writes: &[Var]) -> PlanOp {
        PlanOp {
            name: OpName::from(Cow::Owned(index.to_string())),
            func: if sync {
                PlanFn::Sync(Box::new(|_, _| Ok(())))
            } else {
                PlanFn::Async(Box::new(|_, _, _| {}))
            },
            run: RunContext {
                context,
                priority: 0,
                property: FnProperty::Normal,
            },
            target: if context.is_gpu() {
                Target::Device { copy: false }
            } else {
                Target::Inline
            },
            profiled: false,
            reads: reads.into(),
            writes: writes.into(),
        }
    }

    proptest! {
        /// Grouping runs of GPU ops into graphs, then running the graphs (each its ops in
        /// capture order) in any order the grouped plan's counters allow, gives every op the
        /// versions of its vars, and every var its last version, that the ungrouped capture
        /// order gives: a graph is convex, and its reads and writes are its ops'.
        #[test]
        fn graphs_in_any_order_the_counters_allow_equal_the_capture_order(
            ops in proptest::collection::vec(
                (0u8..4, proptest::collection::vec(0usize..4, 0..3), proptest::collection::vec(0usize..4, 0..3)),
                1..24,
            ),
            picks in proptest::collection::vec(any::<u32>(), 24),
        ) {
            let deps_graph = Graph::<(), ()>::new();
            let v: Vec<Var> = (0..4).map(|_| deps_graph.new_var().unwrap()).collect();
            // 0: a CPU op; 1, 2: a GPU op on device 0 or 1; 3: an async GPU op on device 0.
            let lists: Vec<(u8, Vec<usize>, Vec<usize>)> = ops
                .iter()
                .map(|(place, r, w)| {
                    let mut writes = w.clone();
                    writes.sort_unstable();
                    writes.dedup();
                    let mut reads: Vec<usize> = r.iter().copied().filter(|i| !writes.contains(i)).collect();
                    reads.sort_unstable();
                    reads.dedup();
                    (*place, reads, writes)
                })
                .collect();
            let captured: Vec<PlanOp> = lists
                .iter()
                .enumerate()
                .map(|(index, (place, r, w))| {
                    let context = match place {
                        0 => Context::cpu(0),
                        3 => Context::gpu(0),
                        device => Context::gpu(u32::from(*device) - 1),
                    };
                    let vars = |list: &[usize]| list.iter().map(|&i| v[i]).collect::<Vec<_>>();
                    op(index, context, *place != 3, &vars(r), &vars(w))
                })
                .collect();
            let grouped = group(captured);
            // Each grouped op's captured ops, by index.
            let members: Vec<Vec<usize>> = grouped
                .iter()
                .map(|op| match &op.func {
                    PlanFn::DeviceGraph(graph) => graph
                        .members
                        .iter()
                        .map(|member| member.name.as_str().parse().unwrap())
                        .collect(),
                    PlanFn::Sync(_) | PlanFn::Async(_) => vec![op.name.as_str().parse().unwrap()],
                })
                .collect();
            // Every sync GPU op in a graph, nothing else, one device's only.
            for (op, list) in grouped.iter().zip(&members) {
                let place = lists[list[0]].0;
                let grouped_op = matches!(op.func, PlanFn::DeviceGraph(_));
                prop_assert_eq!(grouped_op, place == 1 || place == 2);
                prop_assert!(list.iter().all(|&i| lists[i].0 == place));
            }
            let deps = PlanDeps::of(grouped.iter().map(|op| (&op.reads[..], &op.writes[..])));
            // The sequential model: the version of each var each op meets, and the last ones.
            let run = |order: &[usize]| {
                let mut version = [0usize; 4];
                let mut seen = vec![Vec::new(); lists.len()];
                for &op in order {
                    let (_, r, w) = &lists[op];
                    for &var in r.iter().chain(w) {
                        seen[op].push((var, version[var]));
                    }
                    for &var in w {
                        version[var] = op + 1;
                    }
                }
                (seen, version)
            };
            let sequential: Vec<usize> = (0..lists.len()).collect();
            // A graph runs its ops in capture order.
            let order: Vec<usize> = counter_order(&deps, &picks)
                .into_iter()
                .flat_map(|op| members[op].iter().copied())
                .collect();
            prop_assert_eq!(order.len(), lists.len());
            prop_assert_eq!(run(&order), run(&sequential));
        }
    }
}
