//! Property test: random workloads checked against a sequential model of `MXNet`'s semantics.
//!
//! A workload has up to 16 vars and a list of ops with random read/write sets, each waiting for
//! the completion or for the launch of the ops before it. It is run by a random interleaving of
//! pushes, completions (chosen among the ready ops, some of them failing), launches of ready ops
//! and completions of launched ones (some failing), and var deletions. After every step the set
//! of ready ops must equal what the model allows. An op is granted on var `v` once every earlier
//! op on `v` was granted on `v` (a var grants in push order), and
//!
//! - for a read of `v`: every earlier write of `v` completed;
//! - for a write of `v`: every earlier op on `v` completed;
//!
//! where for an op that waits for launch, launched counts as completed. The op is allowed once
//! every one of its vars granted it. Without launches this implies that writes become ready in
//! push order and never overlap another op on their var, that a read never runs while a later
//! write runs, and that nothing is ready early or late. Each op must be dispatched exactly once, every var's failure must be that of the last
//! write that completed on it, a deleted var's callback must run exactly when its last op
//! completes, and at the end everything completes and no op block or var is left. From each
//! ready op's vars, `holds_back` must reach exactly the ops that wait for it, directly or
//! through others, and the path it returns to one of them must be a chain of such waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use depengine_graph::{Graph, GraphError, LaunchedOp, ReadyOp, Var, Visit, Waits};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct OpSpec {
    reads: u16,
    writes: u16,
    waits: Waits,
}

/// One in three ops waits for launch.
fn waits() -> impl Strategy<Value = Waits> {
    prop_oneof![2 => Just(Waits::Completion), 1 => Just(Waits::Launch)]
}

#[derive(Debug, Clone)]
struct Workload {
    vars: usize,
    ops: Vec<OpSpec>,
    choices: Vec<u32>,
}

fn workload() -> impl Strategy<Value = Workload> {
    let max_ops = if cfg!(miri) { 12 } else { 64 };
    (1usize..=16).prop_flat_map(move |vars| {
        let mask = (1u32 << vars) - 1;
        let many = (any::<u16>(), any::<u16>(), waits()).prop_map(move |(r, w, waits)| {
            let reads = u32::from(r) & mask;
            // Keep the lists small and disjoint: at most 4 vars each.
            let writes = u32::from(w) & mask & !reads;
            OpSpec {
                reads: sparse(reads),
                writes: sparse(writes),
                waits,
            }
        });
        // Ops on one var take the lock-free way into a busy var (`Incoming`): make them common.
        let one = (0..vars, any::<bool>(), waits()).prop_map(|(var, write, waits)| {
            let bit = 1u16 << var;
            if write {
                OpSpec {
                    reads: 0,
                    writes: bit,
                    waits,
                }
            } else {
                OpSpec {
                    reads: bit,
                    writes: 0,
                    waits,
                }
            }
        });
        let op = prop_oneof![many, one];
        (
            Just(vars),
            prop::collection::vec(op, 1..max_ops),
            prop::collection::vec(any::<u32>(), 0..max_ops * 3),
        )
            .prop_map(|(vars, ops, choices)| Workload { vars, ops, choices })
    })
}

/// Keeps at most the lowest 4 set bits of `mask`, so ops touch few vars and conflict often.
fn sparse(mask: u32) -> u16 {
    let mut out = 0u32;
    let mut rest = mask;
    for _ in 0..4 {
        if rest == 0 {
            break;
        }
        let bit = rest & rest.wrapping_neg();
        out |= bit;
        rest &= !bit;
    }
    out as u16
}

fn bits(mask: u16) -> impl Iterator<Item = usize> {
    (0..16).filter(move |i| mask & (1 << i) != 0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Waiting,
    Ready,
    Launched,
    Completed,
}

struct Model {
    spec: Vec<OpSpec>,
    /// Ops in push order (indices into `spec`), with their state.
    pushed: Vec<(usize, State)>,
    failure: Vec<Option<u32>>,
    deleted: Vec<bool>,
}

impl Model {
    fn state(&self, op: usize) -> Option<State> {
        self.pushed.iter().find(|(o, _)| *o == op).map(|(_, s)| *s)
    }

    fn set(&mut self, op: usize, state: State) {
        for entry in &mut self.pushed {
            if entry.0 == op {
                entry.1 = state;
            }
        }
    }

    /// Whether the model allows the `at`-th pushed op to be ready: every var it uses granted
    /// it.
    fn allowed(&self, at: usize) -> bool {
        let me = &self.spec[self.pushed[at].0];
        bits(me.reads | me.writes).all(|v| self.granted_on(v)[at])
    }

    /// Per pushed op (by push position), whether var `v` granted it: every earlier op on `v`
    /// was granted there, and every earlier op on `v` that it conflicts with there completed
    /// (or launched, for an op that waits for launch).
    fn granted_on(&self, v: usize) -> Vec<bool> {
        let bit = 1u16 << v;
        let uses = |at: usize| {
            let s = &self.spec[self.pushed[at].0];
            (s.reads | s.writes) & bit != 0
        };
        let mut granted = vec![false; self.pushed.len()];
        let mut all_before = true;
        for at in (0..self.pushed.len()).filter(|&at| uses(at)) {
            let me = &self.spec[self.pushed[at].0];
            let clear = (0..at).filter(|&e| uses(e)).all(|e| {
                let (earlier, state) = self.pushed[e];
                let other = &self.spec[earlier];
                let conflict = (me.writes | other.writes) & bit != 0;
                !conflict
                    || state == State::Completed
                    || (me.waits == Waits::Launch && state == State::Launched)
            });
            granted[at] = all_before && clear;
            all_before &= granted[at];
        }
        granted
    }

    /// The waiting ops that wait, directly or through other ops, for op `op`: `x`
    /// waits directly for an earlier `y` that has not completed if they conflict on a var.
    fn held_back_by(&self, op: usize) -> Vec<usize> {
        let Some(start) = self.pushed.iter().position(|&(o, _)| o == op) else {
            return Vec::new();
        };
        let mut blocked = vec![false; self.pushed.len()];
        blocked[start] = true;
        for at in start + 1..self.pushed.len() {
            let me = &self.spec[self.pushed[at].0];
            blocked[at] = self.pushed[at].1 == State::Waiting
                && (start..at).any(|earlier| {
                    let e = &self.spec[self.pushed[earlier].0];
                    let conflict = (me.writes & (e.reads | e.writes)) | (me.reads & e.writes);
                    blocked[earlier] && conflict != 0
                });
        }
        let mut held: Vec<usize> = (start + 1..self.pushed.len())
            .filter(|&at| blocked[at])
            .map(|at| self.pushed[at].0)
            .collect();
        held.sort_unstable();
        held
    }

    fn pending_on(&self, var: usize) -> usize {
        self.pushed
            .iter()
            .filter(|&&(op, state)| {
                let s = &self.spec[op];
                state != State::Completed && (s.reads | s.writes) & (1 << var) != 0
            })
            .count()
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "one interpreter loop, clearer in one piece"
)]
fn run(w: &Workload) -> Result<(), TestCaseError> {
    let graph: Graph<usize, u32> = Graph::new();
    let vars: Vec<Var> = (0..w.vars).map(|_| graph.new_var().unwrap()).collect();
    let deleted_calls: Vec<Arc<AtomicUsize>> =
        (0..w.vars).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let mut model = Model {
        spec: w.ops.clone(),
        pushed: Vec::new(),
        failure: vec![None; w.vars],
        deleted: vec![false; w.vars],
    };
    let mut ready: Vec<ReadyOp<usize>> = Vec::new();
    let mut launched: Vec<LaunchedOp<usize>> = Vec::new();
    let mut dispatched = vec![0u32; w.ops.len()];
    let mut next_op = 0;
    let mut choices = w.choices.iter().copied();

    let mut step = |choice: u32,
                    model: &mut Model,
                    ready: &mut Vec<ReadyOp<usize>>,
                    launched: &mut Vec<LaunchedOp<usize>>,
                    next_op: &mut usize|
     -> Result<bool, TestCaseError> {
        let mut out = Vec::new();
        let can_push = *next_op < w.ops.len();
        if choice % 11 == 10 {
            // Delete a var (again, if it already was: an error that changes nothing).
            let v = (choice as usize / 11) % w.vars;
            let calls = deleted_calls[v].clone();
            let result = graph.delete_var(vars[v], move || {
                calls.fetch_add(1, Ordering::SeqCst);
            });
            if model.deleted[v] {
                prop_assert_eq!(result.err(), Some(GraphError::DeletedVar { var: vars[v] }));
            } else {
                prop_assert!(result.is_ok(), "{:?}", result.err());
                if let Ok(deletion) = result {
                    deletion.call_if_reclaimed();
                }
                model.deleted[v] = true;
            }
        } else if can_push
            && ((ready.is_empty() && launched.is_empty()) || choice.is_multiple_of(3))
        {
            let op = *next_op;
            *next_op += 1;
            let spec = &w.ops[op];
            let read_vars: Vec<Var> = bits(spec.reads).map(|i| vars[i]).collect();
            let write_vars: Vec<Var> = bits(spec.writes).map(|i| vars[i]).collect();
            let result = graph.push_with(spec.waits, &read_vars, &write_vars, op, &mut out);
            let first_deleted = bits(spec.reads | spec.writes).find(|&i| model.deleted[i]);
            if let Some(i) = first_deleted {
                prop_assert!(
                    matches!(result, Err(GraphError::DeletedVar { .. })),
                    "op {} names deleted var {}: {:?}",
                    op,
                    i,
                    result
                );
                prop_assert!(out.is_empty());
            } else {
                prop_assert_eq!(result, Ok(()));
                model.pushed.push((op, State::Waiting));
            }
        } else if !launched.is_empty() && (ready.is_empty() || choice % 7 == 2) {
            // A launched op's work is done.
            let at = (choice as usize / 7) % launched.len();
            let op = launched.swap_remove(at);
            let id = *op.payload();
            let fails = choice % 5 == 1;
            let outcome = if fails { Err(id as u32) } else { Ok(()) };
            prop_assert_eq!(
                graph.complete_launched(op, outcome, |_, &mut ()| {}, &mut out),
                Ok(id)
            );
            model.set(id, State::Completed);
            if fails {
                for v in bits(w.ops[id].writes) {
                    model.failure[v] = Some(id as u32);
                }
            }
        } else if !ready.is_empty() {
            let at = (choice as usize / 3) % ready.len();
            let op = ready.swap_remove(at);
            let id = *op.payload();
            // Failures the op's vars hold (reads first), as the engine would see them.
            let spec = &w.ops[id];
            let expected_failure = bits(spec.reads)
                .chain(bits(spec.writes))
                .find_map(|i| model.failure[i]);
            prop_assert_eq!(graph.op_failure(&op), expected_failure);
            if choice % 5 == 3 {
                // Launches: its work goes on; a write clears its vars' failures.
                launched.push(graph.launch(op, |_, &mut ()| {}, &mut out).unwrap());
                model.set(id, State::Launched);
                for v in bits(spec.writes) {
                    model.failure[v] = None;
                }
            } else {
                let fails = choice % 5 == 1;
                let outcome = if fails { Err(id as u32) } else { Ok(()) };
                prop_assert_eq!(graph.complete(op, outcome, &mut out), Ok(id));
                model.set(id, State::Completed);
                for v in bits(spec.writes) {
                    model.failure[v] = fails.then_some(id as u32);
                }
            }
        } else {
            return Ok(false);
        }
        for op in out {
            let id = *op.payload();
            dispatched[id] += 1;
            prop_assert_eq!(dispatched[id], 1, "op {} dispatched twice", id);
            prop_assert_eq!(model.state(id), Some(State::Waiting));
            model.set(id, State::Ready);
            ready.push(op);
        }
        // Checking reads every var's status, which merges the requests that single-var pushes
        // left in the var's `Incoming` ring; some steps skip it so that requests pile up there
        // and reach the FIFO through pushes and completions instead.
        if choice % 4 != 3 {
            check(&graph, model, &vars, &deleted_calls)?;
        }
        Ok(true)
    };

    for choice in choices.by_ref() {
        step(choice, &mut model, &mut ready, &mut launched, &mut next_op)?;
    }
    // Finish: push the rest and complete everything, in a deterministic order.
    let mut tail = 0u32;
    while step(
        tail.wrapping_mul(3),
        &mut model,
        &mut ready,
        &mut launched,
        &mut next_op,
    )? {
        tail = tail.wrapping_add(7);
    }
    prop_assert!(
        model.pushed.iter().all(|&(_, s)| s == State::Completed),
        "everything pushed completes"
    );
    let stats = graph.stats();
    prop_assert_eq!(stats.live_op_blocks, 0);
    for (i, &var) in vars.iter().enumerate() {
        if !model.deleted[i] {
            prop_assert_eq!(graph.var_status(var).unwrap().pending(), 0);
            graph.delete_var(var, || {}).unwrap().call_if_reclaimed();
        }
        if model.deleted[i] {
            prop_assert_eq!(deleted_calls[i].load(Ordering::SeqCst), 1);
        }
    }
    let stats = graph.stats();
    prop_assert_eq!(stats.live_vars, 0);
    prop_assert_eq!(stats.failed_vars, 0);
    Ok(())
}

/// The graph's state equals the model's after a step.
fn check(
    graph: &Graph<usize, u32>,
    model: &Model,
    vars: &[Var],
    deleted_calls: &[Arc<AtomicUsize>],
) -> Result<(), TestCaseError> {
    for at in 0..model.pushed.len() {
        let (op, state) = model.pushed[at];
        if state == State::Completed {
            continue;
        }
        let allowed = model.allowed(at);
        prop_assert_eq!(
            state == State::Ready || state == State::Launched,
            allowed,
            "op {} is {:?} but the model says allowed = {}",
            op,
            state,
            allowed
        );
    }
    // `holds_back` from each running op's vars reaches exactly the ops waiting for it. The
    // model's waits are conflicts on vars, which launched ops change (an op that waits for
    // launch no longer waits for a launched op, one held back by a launch holds back the
    // requests pushed after it): checked while no op is launched.
    let launches = model.pushed.iter().any(|&(_, s)| s == State::Launched);
    for &(op, state) in &model.pushed {
        if state != State::Ready || launches {
            continue;
        }
        let spec = &model.spec[op];
        let held: Vec<Var> = bits(spec.reads | spec.writes).map(|i| vars[i]).collect();
        let mut reached = Vec::new();
        let found = graph.holds_back(&held, |_, &id| {
            reached.push(id);
            Visit::Continue
        });
        prop_assert!(found.is_none());
        // Looking for the last op reached: the path to it is a chain of direct waits.
        if let Some(&target) = reached.last() {
            let mut names = std::collections::HashMap::new();
            let path = graph.holds_back(&held, |id, &payload| {
                names.insert(id, payload);
                if payload == target {
                    Visit::Found
                } else {
                    Visit::Continue
                }
            });
            let path: Vec<usize> = path
                .unwrap_or_default()
                .iter()
                .map(|id| names[id])
                .collect();
            prop_assert_eq!(path.last(), Some(&target));
            let mut before = op;
            for &next in &path {
                prop_assert!(
                    model.held_back_by(before).contains(&next),
                    "path {:?} from op {}: {} does not wait for {}",
                    path,
                    op,
                    next,
                    before
                );
                before = next;
            }
        }
        reached.sort_unstable();
        prop_assert_eq!(reached, model.held_back_by(op), "held back by op {}", op);
    }
    for (v, &var) in vars.iter().enumerate() {
        let pending = model.pending_on(v);
        let reclaimed = model.deleted[v] && pending == 0;
        prop_assert_eq!(
            deleted_calls[v].load(Ordering::SeqCst),
            usize::from(reclaimed)
        );
        if reclaimed {
            prop_assert_eq!(graph.var_status(var), Err(GraphError::DeletedVar { var }));
            continue;
        }
        let status = graph.var_status(var).unwrap();
        prop_assert_eq!(status.pending(), pending, "pending count of var {}", v);
        prop_assert_eq!(status.deleted, model.deleted[v]);
        prop_assert_eq!(graph.var_failure(var).unwrap(), model.failure[v]);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 1024 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_workloads_match_the_sequential_model(w in workload()) {
        run(&w)?;
    }
}
