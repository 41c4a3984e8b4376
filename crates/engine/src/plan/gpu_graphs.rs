//! [`group`]: a plan's sync GPU ops captured one after another on one device executor, made
//! one op each run (`PlanFn::Graph`), whose work the executor records once and launches again
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
/// made one `PlanFn::Graph` op (a run of one as well: its function may launch many kernels).
pub(crate) fn group(ops: Vec<PlanOp>) -> Vec<PlanOp> {
    let mut grouped: Vec<PlanOp> = Vec::with_capacity(ops.len());
    // The run being grouped: its executor's target and context, and its ops.
    let mut run: Option<(Target, Context, Vec<GraphMember>, bool)> = None;
    for op in ops {
        if let Some((target, context, _, _)) = &run
            && (op.target != *target || op.run.context != *context)
        {
            grouped.extend(run.take().map(graph_of));
        }
        match op {
            PlanOp {
                name,
                func: PlanFn::Sync(func),
                run: context,
                target: target @ Target::Device { .. },
                profiled,
                reads,
                writes,
            } => {
                let (_, _, members, any_profiled) =
                    run.get_or_insert_with(|| (target, context.context, Vec::new(), false));
                *any_profiled |= profiled;
                members.push(GraphMember {
                    name,
                    func,
                    run: context,
                    reads,
                    writes,
                });
            }
            op => {
                grouped.extend(run.take().map(graph_of));
                grouped.push(op);
            }
        }
    }
    grouped.extend(run.map(graph_of));
    grouped
}

/// One op of `members` (one or more, in capture order) on `target`: the first one's place and
/// context, every var any of them writes as a write, the others they read as reads.
fn graph_of((target, _, members, profiled): (Target, Context, Vec<GraphMember>, bool)) -> PlanOp {
    let mut seen: HashSet<Var> = HashSet::new();
    let writes: Vec<Var> = members
        .iter()
        .flat_map(|op| &*op.writes)
        .filter(|&&var| seen.insert(var))
        .copied()
        .collect();
    let reads: Vec<Var> = members
        .iter()
        .flat_map(|op| &*op.reads)
        .filter(|&&var| seen.insert(var))
        .copied()
        .collect();
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
        reads: reads.into(),
        writes: writes.into(),
        func: PlanFn::Graph(Box::new(GpuGraph {
            recording: Arc::new(Recording::new()),
            members: members.into(),
        })),
    }
}
