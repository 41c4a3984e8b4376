//! Unit tests of the graph: every transition through the public API, and every error.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Access, Graph, GraphError, Holder, ReadyOp, Var, VarStatus};

type G = Graph<u32, &'static str>;

fn names(ready: &[ReadyOp<u32>]) -> Vec<u32> {
    ready.iter().map(|op| *op.payload()).collect()
}

/// Completes the ready op with payload `id`, returning what became ready.
fn finish(graph: &G, ready: &mut Vec<ReadyOp<u32>>, id: u32, outcome: Result<(), &'static str>) {
    let at = ready
        .iter()
        .position(|op| *op.payload() == id)
        .expect("op is ready");
    let op = ready.remove(at);
    assert_eq!(graph.complete(op, outcome, ready), Ok(id));
}

/// Deletes `var`, with a callback that counts its calls in the returned counter.
fn delete_counting_calls(graph: &G, var: Var) -> Arc<AtomicUsize> {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    graph
        .delete_var(var, move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap()
        .call_if_reclaimed();
    calls
}

#[test]
fn reads_run_together_and_write_waits_for_them() {
    let graph = G::new();
    let v = graph.new_var().unwrap();
    let mut ready = Vec::new();
    graph.push(&[v], &[], 1, &mut ready).unwrap();
    graph.push(&[v], &[], 2, &mut ready).unwrap();
    graph.push(&[], &[v], 3, &mut ready).unwrap();
    assert_eq!(names(&ready), [1, 2]);
    let status = graph.var_status(v).unwrap();
    assert_eq!((status.running_reads, status.waiting), (2, 1));
    assert_eq!(status.pending(), 3);
    finish(&graph, &mut ready, 1, Ok(()));
    assert_eq!(names(&ready), [2]);
    finish(&graph, &mut ready, 2, Ok(()));
    assert_eq!(names(&ready), [3]);
    assert!(graph.var_status(v).unwrap().write_running);
    finish(&graph, &mut ready, 3, Ok(()));
    assert_eq!(graph.var_status(v).unwrap(), VarStatus::default());
}

#[test]
fn write_releases_following_reads_then_next_write() {
    let graph = G::new();
    let v = graph.new_var().unwrap();
    let mut ready = Vec::new();
    graph.push(&[], &[v], 1, &mut ready).unwrap();
    graph.push(&[v], &[], 2, &mut ready).unwrap();
    graph.push(&[v], &[], 3, &mut ready).unwrap();
    graph.push(&[], &[v], 4, &mut ready).unwrap();
    graph.push(&[v], &[], 5, &mut ready).unwrap();
    assert_eq!(names(&ready), [1]);
    assert_eq!(graph.stats().live_op_blocks, 4);
    finish(&graph, &mut ready, 1, Ok(()));
    assert_eq!(names(&ready), [2, 3]);
    finish(&graph, &mut ready, 3, Ok(()));
    finish(&graph, &mut ready, 2, Ok(()));
    assert_eq!(names(&ready), [4]);
    finish(&graph, &mut ready, 4, Ok(()));
    assert_eq!(names(&ready), [5]);
    finish(&graph, &mut ready, 5, Ok(()));
    let stats = graph.stats();
    assert_eq!(stats.live_op_blocks, 0);
    assert_eq!(stats.pooled_op_blocks, 4);
}

#[test]
fn op_waits_for_all_its_vars() {
    let graph = G::new();
    let (a, b) = (graph.new_var().unwrap(), graph.new_var().unwrap());
    let mut ready = Vec::new();
    graph.push(&[], &[a], 1, &mut ready).unwrap();
    graph.push(&[], &[b], 2, &mut ready).unwrap();
    graph.push(&[a], &[b], 3, &mut ready).unwrap();
    finish(&graph, &mut ready, 1, Ok(()));
    assert_eq!(names(&ready), [2], "3 still waits for b");
    finish(&graph, &mut ready, 2, Ok(()));
    assert_eq!(names(&ready), [3]);
    let op = &ready[0];
    assert_eq!(op.reads().collect::<Vec<_>>(), [a]);
    assert_eq!(op.writes().collect::<Vec<_>>(), [b]);
    finish(&graph, &mut ready, 3, Ok(()));
}

/// Completes `op` and, recursively, everything it releases.
fn run(graph: &G, op: ReadyOp<u32>, done: &mut Vec<u32>) {
    let mut next = Vec::new();
    done.push(graph.complete(op, Ok(()), &mut next).unwrap());
    for op in next {
        run(graph, op, done);
    }
}

#[test]
fn dispatcher_may_call_back_into_the_graph() {
    let graph = G::new();
    let v = graph.new_var().unwrap();
    let mut sink = Vec::new();
    graph.push(&[], &[v], 1, &mut sink).unwrap();
    graph.push(&[], &[v], 2, &mut sink).unwrap();
    let mut done = Vec::new();
    run(&graph, sink.pop().unwrap(), &mut done);
    assert_eq!(done, [1, 2]);
    let mut done_by_closure = 0;
    graph
        .push(&[v], &[], 3, &mut |op: ReadyOp<u32>| {
            done_by_closure += 1;
            graph.complete(op, Ok(()), &mut Vec::new()).unwrap();
        })
        .unwrap();
    assert_eq!(done_by_closure, 1);
    assert_eq!(graph.var_status(v).unwrap().pending(), 0);
}

#[test]
fn duplicate_and_conflicting_vars_are_rejected_without_change() {
    let graph = G::new();
    let (a, b) = (graph.new_var().unwrap(), graph.new_var().unwrap());
    let mut ready = Vec::new();
    assert_eq!(
        graph.push(&[a, b, a], &[], 1, &mut ready),
        Err(GraphError::DuplicateVar { var: a })
    );
    assert_eq!(
        graph.push(&[], &[b, b], 1, &mut ready),
        Err(GraphError::DuplicateVar { var: b })
    );
    assert_eq!(
        graph.push(&[a], &[b, a], 1, &mut ready),
        Err(GraphError::ReadWriteConflict { var: a })
    );
    // Long lists take the heap path.
    let many: Vec<Var> = (0..12).map(|_| graph.new_var().unwrap()).collect();
    let mut dup = many.clone();
    dup.push(many[3]);
    assert_eq!(
        graph.push(&[], &dup, 1, &mut ready),
        Err(GraphError::DuplicateVar { var: many[3] })
    );
    // Reads and writes each in slot order (a replay's) are merged, not sorted.
    assert_eq!(
        graph.push(&many[..6], &many[5..], 1, &mut ready),
        Err(GraphError::ReadWriteConflict { var: many[5] })
    );
    assert_eq!(
        graph.push(&many[..6], &many[6..], 1, &mut ready),
        Ok(()),
        "distinct sorted runs"
    );
    finish(&graph, &mut ready, 1, Ok(()));
    assert!(ready.is_empty());
    for var in [a, b].iter().chain(&many) {
        assert_eq!(graph.var_status(*var).unwrap(), VarStatus::default());
    }
    assert_eq!(graph.stats().live_op_blocks, 0);
}

/// An op naming a stale handle beside the current var of the same slot is refused for the
/// stale one, which is deleted, not repeated; the graph is left unchanged.
#[test]
fn a_stale_handle_beside_its_slots_current_var_is_deleted_not_duplicate() {
    let graph = G::new();
    let stale = graph.new_var().unwrap();
    graph.delete_var(stale, || {}).unwrap().call_if_reclaimed();
    let live = graph.new_var().unwrap();
    assert_eq!(live.index(), stale.index());
    let mut ready = Vec::new();
    let deleted = Err(GraphError::DeletedVar { var: stale });
    assert_eq!(graph.push(&[stale, live], &[], 1, &mut ready), deleted);
    assert_eq!(graph.push(&[], &[live, stale], 1, &mut ready), deleted);
    assert_eq!(graph.push(&[live], &[stale], 1, &mut ready), deleted);
    // The same on long lists, each in slot order.
    let mut long_reads: Vec<Var> = (0..8).map(|_| graph.new_var().unwrap()).collect();
    let long_writes: Vec<Var> = (0..8).map(|_| graph.new_var().unwrap()).collect();
    long_reads.insert(0, stale);
    assert_eq!(
        graph.push(&long_reads, &long_writes, 1, &mut ready),
        deleted
    );
    long_reads[0] = live;
    let mut with_stale = long_writes.clone();
    with_stale.insert(0, stale);
    assert_eq!(graph.push(&long_reads, &with_stale, 1, &mut ready), deleted);
    assert!(ready.is_empty());
    assert_eq!(graph.var_status(live).unwrap(), VarStatus::default());
}

#[test]
fn many_vars_per_op_work() {
    let graph = G::new();
    let vars: Vec<Var> = (0..20).map(|_| graph.new_var().unwrap()).collect();
    let mut ready = Vec::new();
    graph.push(&vars[..5], &vars[5..], 1, &mut ready).unwrap();
    graph.push(&vars[10..], &vars[..10], 2, &mut ready).unwrap();
    assert_eq!(names(&ready), [1]);
    finish(&graph, &mut ready, 1, Ok(()));
    assert_eq!(names(&ready), [2]);
    finish(&graph, &mut ready, 2, Ok(()));
}

#[test]
fn foreign_vars_and_ops_are_rejected() {
    let graph = G::new();
    let other = G::new();
    let mine = graph.new_var().unwrap();
    let theirs = other.new_var().unwrap();
    let mut ready = Vec::new();
    assert_eq!(
        graph.push(&[mine], &[theirs], 1, &mut ready),
        Err(GraphError::ForeignVar { var: theirs })
    );
    assert_eq!(
        graph.delete_var(theirs, || {}).err(),
        Some(GraphError::ForeignVar { var: theirs })
    );
    assert_eq!(
        graph.var_status(theirs),
        Err(GraphError::ForeignVar { var: theirs })
    );
    assert_eq!(graph.var_status(mine).unwrap(), VarStatus::default());
    other.push(&[], &[theirs], 7, &mut ready).unwrap();
    let op = ready.pop().unwrap();
    assert_eq!(
        graph.complete(op, Ok(()), &mut ready),
        Err(GraphError::ForeignOp)
    );
}

#[test]
fn delete_idle_var_reclaims_at_once_and_stale_handle_is_detected() {
    let graph = G::new();
    let v = graph.new_var().unwrap();
    let calls = delete_counting_calls(&graph, v);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(graph.stats().live_vars, 0);
    // The slot is reused under a new generation: the old handle never aliases it.
    let w = graph.new_var().unwrap();
    assert_eq!(w.index(), v.index());
    assert_ne!(w.generation(), v.generation());
    let mut ready = Vec::new();
    assert_eq!(
        graph.push(&[v], &[], 1, &mut ready),
        Err(GraphError::DeletedVar { var: v })
    );
    assert_eq!(graph.var_status(v), Err(GraphError::DeletedVar { var: v }));
    assert_eq!(
        graph.delete_var(v, || {}).err(),
        Some(GraphError::DeletedVar { var: v })
    );
    assert_eq!(graph.var_status(w).unwrap(), VarStatus::default());
}

#[test]
fn delete_waits_for_pending_ops() {
    let graph = G::new();
    let (v, other) = (graph.new_var().unwrap(), graph.new_var().unwrap());
    let mut ready = Vec::new();
    graph.push(&[], &[v], 1, &mut ready).unwrap();
    graph.push(&[v], &[other], 2, &mut ready).unwrap();
    let calls = delete_counting_calls(&graph, v);
    assert!(graph.var_status(v).unwrap().deleted);
    // New pushes are refused at once, and change nothing.
    assert_eq!(
        graph.push(&[other], &[v], 3, &mut ready),
        Err(GraphError::DeletedVar { var: v })
    );
    assert_eq!(
        graph.delete_var(v, || {}).err(),
        Some(GraphError::DeletedVar { var: v })
    );
    finish(&graph, &mut ready, 1, Ok(()));
    assert_eq!(calls.load(Ordering::SeqCst), 0, "op 2 still reads v");
    assert_eq!(graph.stats().live_vars, 2);
    finish(&graph, &mut ready, 2, Ok(()));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(graph.stats().live_vars, 1);
    assert_eq!(graph.var_status(v), Err(GraphError::DeletedVar { var: v }));
}

#[test]
fn failure_is_recorded_on_written_vars_and_cleared_by_a_successful_write() {
    let graph = G::new();
    let (input, output) = (graph.new_var().unwrap(), graph.new_var().unwrap());
    let mut ready = Vec::new();
    graph.push(&[input], &[output], 1, &mut ready).unwrap();
    finish(&graph, &mut ready, 1, Err("boom"));
    assert_eq!(graph.var_failure(output), Ok(Some("boom")));
    assert_eq!(graph.var_failure(input), Ok(None), "reads are not marked");
    assert!(graph.var_status(output).unwrap().failed);
    assert_eq!(graph.stats().failed_vars, 1);

    // A reader of the failed var sees it when it becomes ready.
    graph.push(&[output], &[], 2, &mut ready).unwrap();
    assert_eq!(graph.op_failure(&ready[0]), Some("boom"));
    finish(&graph, &mut ready, 2, Ok(()));
    assert_eq!(graph.var_failure(output), Ok(Some("boom")));

    // A successful write overwrites the data, and with it the failure.
    graph.push(&[], &[output], 3, &mut ready).unwrap();
    finish(&graph, &mut ready, 3, Ok(()));
    assert_eq!(graph.var_failure(output), Ok(None));
    assert_eq!(graph.stats().failed_vars, 0);
    graph.push(&[output], &[], 4, &mut ready).unwrap();
    assert_eq!(graph.op_failure(&ready[0]), None);
    finish(&graph, &mut ready, 4, Ok(()));

    // Explicit clearing, and deletion, drop the failure too.
    graph.push(&[], &[input, output], 5, &mut ready).unwrap();
    finish(&graph, &mut ready, 5, Err("again"));
    assert_eq!(graph.stats().failed_vars, 2);
    assert_eq!(graph.clear_failure(input), Ok(Some("again")));
    assert_eq!(graph.clear_failure(input), Ok(None));
    graph.delete_var(output, || {}).unwrap().call_if_reclaimed();
    assert_eq!(graph.stats().failed_vars, 0);
}

#[test]
fn complete_each_records_an_outcome_per_written_var() {
    let graph = G::new();
    let vars: Vec<Var> = (0..4).map(|_| graph.new_var().unwrap()).collect();
    let mut ready = Vec::new();
    // `vars[3]` holds a failure from before; the op reads it.
    graph.push(&[], &[vars[3]], 1, &mut ready).unwrap();
    finish(&graph, &mut ready, 1, Err("before"));
    // Positions: reads `vars[3]` (0), writes `vars[0]` (1), `vars[1]` (2), `vars[2]` (3).
    graph.push(&[vars[3]], &vars[..3], 2, &mut ready).unwrap();
    graph.push(&[], &[vars[1]], 3, &mut ready).unwrap();
    let op = ready.pop().unwrap();
    let outcomes = [Some("read"), None, Some("second"), Some("third")];
    let asked = AtomicUsize::new(0);
    let failure_of = |position: usize| {
        asked.fetch_or(1 << position, Ordering::Relaxed);
        outcomes[position].as_ref()
    };
    assert_eq!(graph.complete_each(op, failure_of, &mut ready), Ok(2));
    assert_eq!(
        asked.load(Ordering::Relaxed),
        0b1110,
        "asked for written vars only"
    );
    assert_eq!(graph.var_failure(vars[0]), Ok(None));
    assert_eq!(graph.var_failure(vars[1]), Ok(Some("second")));
    assert_eq!(graph.var_failure(vars[2]), Ok(Some("third")));
    assert_eq!(
        graph.var_failure(vars[3]),
        Ok(Some("before")),
        "a read var keeps its failure"
    );
    assert_eq!(graph.stats().failed_vars, 3);
    // Its vars were released: the op queued behind it is ready.
    assert_eq!(names(&ready), [3]);
    finish(&graph, &mut ready, 3, Ok(()));
    assert_eq!(graph.stats().failed_vars, 2);
    let other = Graph::<u32, &'static str>::new();
    let v = other.new_var().unwrap();
    other.push(&[], &[v], 4, &mut ready).unwrap();
    let foreign = ready.pop().unwrap();
    assert_eq!(
        graph.complete_each(foreign, |_| None, &mut ready),
        Err(GraphError::ForeignOp)
    );
}

#[test]
fn pending_ops_lists_waiters_for_stall_reports() {
    let graph = G::new();
    let v = graph.new_var().unwrap();
    let mut ready = Vec::new();
    graph.push(&[], &[v], 1, &mut ready).unwrap();
    graph.push(&[v], &[], 2, &mut ready).unwrap();
    graph.push(&[], &[v], 3, &mut ready).unwrap();
    let pending = graph.pending_ops(v).unwrap();
    let accesses: Vec<Access> = pending.iter().map(|p| p.access).collect();
    assert_eq!(accesses, [Access::Read, Access::Write]);
    let payloads: Vec<Option<u32>> = pending
        .iter()
        .map(|p| graph.inspect_op(p.id, |payload| *payload))
        .collect();
    assert_eq!(payloads, [Some(2), Some(3)]);
    finish(&graph, &mut ready, 1, Ok(()));
    // Op 2 is no longer waiting: its id is stale.
    assert_eq!(graph.inspect_op(pending[0].id, |p| *p), None);
    assert_eq!(graph.pending_ops(v).unwrap().len(), 1);
    finish(&graph, &mut ready, 2, Ok(()));
    finish(&graph, &mut ready, 3, Ok(()));
    assert!(graph.pending_ops(v).unwrap().is_empty());
}

/// `busy_vars` lists exactly the vars with running or waiting requests, by slot, with their
/// holder and their waiters in push order (ops pushed through a var's ring included), and
/// follows the graph as it drains.
#[test]
fn busy_vars_lists_holders_and_waiters_by_var() {
    let graph = G::new();
    let [idle, a, b, doomed] = [(); 4].map(|()| graph.new_var().unwrap());
    let freed = graph.new_var().unwrap();
    graph.delete_var(freed, || {}).unwrap().call_if_reclaimed();
    let mut ready = Vec::new();
    graph.push(&[], &[a], 1, &mut ready).unwrap();
    graph.push(&[b], &[], 2, &mut ready).unwrap();
    graph.push(&[b], &[], 3, &mut ready).unwrap();
    graph.push(&[a], &[b], 4, &mut ready).unwrap();
    // On `a` alone, behind a waiting op: through `a`'s ring.
    graph.push(&[], &[a], 5, &mut ready).unwrap();
    graph.push(&[doomed], &[], 6, &mut ready).unwrap();
    graph.delete_var(doomed, || {}).unwrap().call_if_reclaimed();
    // `c` grants its write to op 7 at once; `a` holds op 7 back.
    let c = graph.new_var().unwrap();
    assert_eq!(c.index(), freed.index());
    graph.push(&[a], &[c], 7, &mut ready).unwrap();
    assert_eq!(names(&ready), [1, 2, 3, 6]);

    let picture = |graph: &G| {
        graph
            .busy_vars()
            .into_iter()
            .map(|busy| {
                let waiting: Vec<(u32, Access)> = busy
                    .waiting
                    .iter()
                    .map(|op| (graph.inspect_op(op.id, |p| *p).unwrap(), op.access))
                    .collect();
                (busy.var, busy.holder, waiting, busy.deleted)
            })
            .collect::<Vec<_>>()
    };
    let running_reads = |n| Holder::Reads(NonZeroU32::new(n).unwrap());
    let busy = graph.busy_vars();
    let op_7 = busy[0].waiting[2].id;
    assert_eq!(graph.inspect_op(op_7, |p| *p), Some(7));
    assert_eq!(
        picture(&graph),
        [
            (
                a,
                Holder::Write { op: None },
                vec![(4, Access::Read), (5, Access::Write), (7, Access::Read)],
                false
            ),
            (b, running_reads(2), vec![(4, Access::Write)], false),
            (doomed, running_reads(1), vec![], true),
            (c, Holder::Write { op: Some(op_7) }, vec![], false),
        ]
    );
    assert!(!picture(&graph).iter().any(|(var, ..)| *var == idle));
    // The same op is listed on both vars it waits for, under one id.
    assert_eq!(busy[0].waiting[0].id, busy[1].waiting[0].id);

    finish(&graph, &mut ready, 6, Ok(()));
    finish(&graph, &mut ready, 1, Ok(()));
    assert_eq!(
        picture(&graph),
        [
            (
                a,
                running_reads(1),
                vec![(5, Access::Write), (7, Access::Read)],
                false
            ),
            (b, running_reads(2), vec![(4, Access::Write)], false),
            (c, Holder::Write { op: Some(op_7) }, vec![], false),
        ]
    );
    finish(&graph, &mut ready, 2, Ok(()));
    finish(&graph, &mut ready, 3, Ok(()));
    finish(&graph, &mut ready, 4, Ok(()));
    // Op 5 was granted after waiting, and dispatched: its slot no longer names it.
    assert_eq!(
        picture(&graph),
        [
            (
                a,
                Holder::Write { op: None },
                vec![(7, Access::Read)],
                false
            ),
            (c, Holder::Write { op: Some(op_7) }, vec![], false),
        ]
    );
    finish(&graph, &mut ready, 5, Ok(()));
    // Op 7 was dispatched: `c`'s write runs, by an op the graph no longer holds.
    assert_eq!(
        picture(&graph),
        [
            (a, running_reads(1), vec![], false),
            (c, Holder::Write { op: None }, vec![], false)
        ]
    );
    finish(&graph, &mut ready, 7, Ok(()));
    assert!(graph.busy_vars().is_empty());
}

#[test]
fn errors_have_clear_messages() {
    let graph = G::new();
    let v = graph.new_var().unwrap();
    let text = GraphError::ReadWriteConflict { var: v }.to_string();
    assert!(
        text.contains(&format!("var#{}.{}", v.index(), v.generation())),
        "{text}"
    );
    assert!(text.contains("both read and written"), "{text}");
    assert!(
        GraphError::CapacityExhausted { what: "op" }
            .to_string()
            .contains("op slot")
    );
}

#[test]
fn graph_is_send_and_sync() {
    fn check<S: Send + Sync>() {}
    check::<Graph<Box<dyn FnOnce() + Send>>>();
    check::<ReadyOp<u32>>();
}

#[test]
fn dropping_the_graph_drops_parked_payloads() {
    let payload = Arc::new(());
    {
        let graph: Graph<Arc<()>, &'static str> = Graph::new();
        let v = graph.new_var().unwrap();
        let mut ready = Vec::new();
        graph.push(&[], &[v], payload.clone(), &mut ready).unwrap();
        graph.push(&[v], &[], payload.clone(), &mut ready).unwrap();
        graph.push(&[], &[v], payload.clone(), &mut ready).unwrap();
        assert_eq!(ready.len(), 1);
        assert_eq!(graph.stats().live_op_blocks, 2);
        assert_eq!(Arc::strong_count(&payload), 4);
        drop(ready);
    }
    assert_eq!(Arc::strong_count(&payload), 1, "parked payloads leaked");
}

#[test]
fn op_slots_recycle_with_new_generations() {
    let graph = G::new();
    let v = graph.new_var().unwrap();
    let mut ready = Vec::new();
    graph.push(&[], &[v], 1, &mut ready).unwrap();
    graph.push(&[v], &[], 2, &mut ready).unwrap();
    let first = graph.pending_ops(v).unwrap()[0].id;
    finish(&graph, &mut ready, 1, Ok(()));
    // Writes that wait behind op 2, until one parks in the slot op 2 left (the slab recycles
    // op slots in batches: see depengine-slab's `slab.rs`).
    let mut last = 2;
    let second = loop {
        last += 1;
        assert!(last < 100, "op 2's slot was never recycled");
        graph.push(&[], &[v], last, &mut ready).unwrap();
        let id = graph.pending_ops(v).unwrap().last().unwrap().id;
        if id.index == first.index {
            break id;
        }
    };
    // The same slot, reused under a new generation: the old id does not see the new op.
    assert_ne!(first.generation, second.generation);
    assert_eq!(graph.inspect_op(first, |p| *p), None);
    assert_eq!(graph.inspect_op(second, |p| *p), Some(last));
    for op in 2..=last {
        finish(&graph, &mut ready, op, Ok(()));
    }
    assert_eq!(graph.stats().live_op_blocks, 0);
}

#[test]
fn dependency_lists_inline_and_on_the_heap() {
    let graph = G::new();
    let all: Vec<Var> = (0..12).map(|_| graph.new_var().unwrap()).collect();
    let mut ready = Vec::new();
    for split in [(1, 2), (3, 4), (7, 8), (8, 9), (6, 12)] {
        let (inputs, outputs) = (&all[..split.0], &all[split.0..split.1]);
        graph.push(inputs, outputs, 0, &mut ready).unwrap();
        let op = ready.pop().unwrap();
        assert_eq!(op.reads().collect::<Vec<_>>(), inputs);
        assert_eq!(op.writes().collect::<Vec<_>>(), outputs);
        graph.complete(op, Ok(()), &mut ready).unwrap();
    }
}

/// A var's attachment is the word it was created with, until its slot is reclaimed: then the
/// var that takes the slot has its own (none, for a plain var). Another graph's var has none
/// here.
#[test]
fn attachment_follows_the_var_that_holds_the_slot() {
    let graph = G::new();
    let mut words = [1_u64, 2];
    let word = |at: &mut u64| std::ptr::NonNull::from(at).cast::<()>();
    let first = graph.new_attached_var(word(&mut words[0])).unwrap();
    assert_eq!(graph.attachment(first), Some(word(&mut words[0])));
    let mut ready = Vec::new();
    graph.push(&[], &[first], 1, &mut ready).unwrap();
    graph.delete_var(first, || {}).unwrap().call_if_reclaimed();
    // Deletion waits for op 1: the slot, and its word, stay the var's.
    assert_eq!(graph.attachment(first), Some(word(&mut words[0])));
    finish(&graph, &mut ready, 1, Ok(()));
    // Reclaimed: a stale handle finds no word.
    assert_eq!(graph.attachment(first), None);

    let plain = graph.new_var().unwrap();
    assert_eq!(plain.index(), first.index());
    assert_eq!(graph.attachment(plain), None);
    graph.delete_var(plain, || {}).unwrap().call_if_reclaimed();
    let second = graph.new_attached_var(word(&mut words[1])).unwrap();
    assert_eq!(second.index(), first.index());
    assert_eq!(graph.attachment(second), Some(word(&mut words[1])));

    let other = G::new();
    assert_eq!(other.attachment(second), None);
}

/// A stale handle finds no word once its slot went to another var: it never reads that var's
/// word.
#[test]
fn a_stale_handle_never_finds_the_word_of_its_slots_next_var() {
    let graph = G::new();
    let mut words = [1_u64, 2];
    let word = |at: &mut u64| std::ptr::NonNull::from(at).cast::<()>();
    let stale = graph.new_attached_var(word(&mut words[0])).unwrap();
    graph.delete_var(stale, || {}).unwrap().call_if_reclaimed();
    let next = graph.new_attached_var(word(&mut words[1])).unwrap();
    assert_eq!(next.index(), stale.index());
    assert_eq!(graph.attachment(next), Some(word(&mut words[1])));
    assert_eq!(graph.attachment(stale), None);
}

/// A trim gives back the op storage that a burst of parked ops grew (freeing the buckets
/// without a visit to each free slot), keeps it once a second burst as large needed it, and the
/// graph works on with what it kept.
#[test]
fn trim_gives_back_the_storage_of_parked_ops_and_keeps_it_for_repeats() {
    let graph = G::new();
    let v = graph.new_var().unwrap();
    // Beyond the 992 slots a trim always keeps.
    let n = 1200;
    let burst = || {
        let mut ready = Vec::new();
        graph.push(&[], &[v], 0, &mut ready).unwrap();
        for id in 1..=n {
            graph.push(&[v], &[], id, &mut ready).unwrap();
        }
        assert_eq!(graph.stats().live_op_blocks, n as usize, "the reads wait");
        finish(&graph, &mut ready, 0, Ok(()));
        assert_eq!(ready.len(), n as usize);
        while let Some(op) = ready.pop() {
            graph.complete(op, Ok(()), &mut ready).unwrap();
        }
        let stats = graph.stats();
        (stats.live_op_blocks, stats.pooled_op_blocks)
    };
    assert_eq!(burst(), (0, n as usize));
    assert!(graph.trim(), "the first burst's storage goes back");
    assert_eq!(graph.stats().pooled_op_blocks, 992);
    assert_eq!(burst(), (0, n as usize));
    assert!(!graph.trim(), "a second burst as large keeps it");
    let kept = graph.stats().pooled_op_blocks;
    assert!(kept >= n as usize);
    assert_eq!(burst(), (0, kept), "without growing");
}

/// A reclaimed var's `L` is reset: the next var at its index finds nothing a completion left.
#[test]
fn the_next_var_at_a_reclaimed_index_finds_nothing_left_for_launched_ops() {
    use crate::Waits;

    let graph: Graph<u32, &'static str, Vec<u32>> = Graph::new();
    let old = graph.new_var().unwrap();
    let mut ready = Vec::new();
    graph
        .push_with(Waits::Launch, &[], &[old], 1, &mut ready)
        .unwrap();
    let op = ready.pop().unwrap();
    let launched = graph
        .launch(op, |_, noted| noted.push(1), &mut ready)
        .unwrap();
    // The completion leaves its note behind (a caller's mistake).
    graph
        .complete_launched(launched, Ok(()), |_, _| {}, &mut ready)
        .unwrap();
    graph.delete_var(old, || {}).unwrap().call_if_reclaimed();
    let new = graph.new_var().unwrap();
    assert_eq!(new.index(), old.index(), "the slot was not reused");
    assert_eq!(graph.launched_on(new, Clone::clone), Ok(Vec::new()));
}

/// What the caller notes on a launched op's vars (`L`) stays there until the op's completion
/// changes it, and `launched_on` reads it; a stale handle is refused.
#[test]
fn a_launched_ops_notes_stay_on_its_vars_until_its_completion() {
    use crate::Waits;

    let graph: Graph<u32, &'static str, Vec<(u32, Access)>> = Graph::new();
    let [a, b] = [(); 2].map(|()| graph.new_var().unwrap());
    let mut ready = Vec::new();
    graph
        .push_with(Waits::Launch, &[a], &[b], 1, &mut ready)
        .unwrap();
    let op = ready.pop().unwrap();
    let launched = graph
        .launch(op, |access, noted| noted.push((1, access)), &mut ready)
        .unwrap();
    let noted = |var| graph.launched_on(var, Clone::clone).unwrap();
    assert_eq!(noted(a), [(1, Access::Read)]);
    assert_eq!(noted(b), [(1, Access::Write)]);
    graph
        .complete_launched(
            launched,
            Ok(()),
            |_, noted| noted.retain(|&(op, _)| op != 1),
            &mut ready,
        )
        .unwrap();
    assert!(noted(a).is_empty() && noted(b).is_empty());
    graph.delete_var(a, || {}).unwrap().call_if_reclaimed();
    assert_eq!(
        graph.launched_on(a, Clone::clone),
        Err(GraphError::DeletedVar { var: a })
    );
}

/// A deleted var whose FIFO still has a read at its front, held back by a launched write, while
/// other reads run: the read is granted as soon as the launched write completes (not once the
/// running reads end), and the last read to complete reclaims the var.
#[test]
fn a_deleted_var_grants_a_read_its_launch_held_back_while_reads_run() {
    use crate::Waits;

    let graph = G::new();
    let a = graph.new_var().unwrap();
    let mut ready = Vec::new();
    graph.push(&[], &[a], 1, &mut ready).unwrap();
    graph
        .push_with(Waits::Launch, &[a], &[], 2, &mut ready)
        .unwrap();
    graph.push(&[a], &[], 3, &mut ready).unwrap();
    let write = ready.pop().unwrap();
    let launched = graph.launch(write, |_, &mut ()| {}, &mut ready).unwrap();
    assert_eq!(
        names(&ready),
        [2],
        "the read that waits for the launch runs"
    );
    let calls = delete_counting_calls(&graph, a);
    assert_eq!(
        graph.complete_launched(launched, Ok(()), |_, &mut ()| {}, &mut ready),
        Ok(1)
    );
    assert_eq!(
        names(&ready),
        [2, 3],
        "the held-back read is granted beside the running one"
    );
    finish(&graph, &mut ready, 2, Ok(()));
    assert_eq!(calls.load(Ordering::SeqCst), 0, "op 3 still reads a");
    finish(&graph, &mut ready, 3, Ok(()));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(graph.var_status(a), Err(GraphError::DeletedVar { var: a }));
}

/// A write's completion grants a long run of reads (each given a credit, `read_credits.rs`):
/// they complete without the var's lock, and the write behind them is granted by the last.
#[test]
fn a_long_run_of_reads_completes_without_the_lock_and_the_last_grants_the_write() {
    let graph = G::new();
    let (a, b) = (graph.new_var().unwrap(), graph.new_var().unwrap());
    let mut ready = Vec::new();
    graph.push(&[], &[a], 0, &mut ready).unwrap();
    // On two vars, so that every read queues in `a`'s FIFO (alone on `a`, they would come in
    // through its ring and be merged one at a time).
    for op in 1..=20 {
        graph.push(&[a, b], &[], op, &mut ready).unwrap();
    }
    graph.push(&[], &[a], 99, &mut ready).unwrap();
    finish(&graph, &mut ready, 0, Ok(()));
    assert_eq!(names(&ready), (1..=20).collect::<Vec<_>>());
    assert_eq!(graph.var_status(a).unwrap().running_reads, 20);
    for op in 1..20 {
        finish(&graph, &mut ready, op, Ok(()));
        assert!(!names(&ready).contains(&99), "the write waits for read 20");
    }
    finish(&graph, &mut ready, 20, Ok(()));
    assert_eq!(names(&ready), [99]);
    finish(&graph, &mut ready, 99, Ok(()));
    assert_eq!(graph.var_status(a).unwrap().pending(), 0);
}

/// The graph never calls a deleted var's callback: an idle var's comes back from `delete_var`,
/// a busy one's goes to the dispatcher of the completion that reclaims the var, which decides
/// when to call it (the engine: after counting the op done).
#[test]
fn a_deleted_var_s_callback_goes_to_its_caller_or_to_the_reclaiming_dispatcher() {
    /// Keeps ready ops and reclaimed callbacks, calling nothing.
    #[derive(Default)]
    struct Keeping {
        ready: Vec<ReadyOp<u32>>,
        reclaimed: Vec<crate::OnDeleted>,
    }
    impl crate::Dispatch<u32> for Keeping {
        fn dispatch(&mut self, op: ReadyOp<u32>) {
            self.ready.push(op);
        }
        fn reclaimed(&mut self, on_deleted: crate::OnDeleted) {
            self.reclaimed.push(on_deleted);
        }
    }
    let graph = G::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let counting = || {
        let calls = Arc::clone(&calls);
        move || {
            calls.fetch_add(1, Ordering::SeqCst);
        }
    };
    let idle = graph.new_var().unwrap();
    let crate::Deletion::Reclaimed(callback) = graph.delete_var(idle, counting()).unwrap() else {
        panic!("an idle var is reclaimed at once");
    };
    assert_eq!(calls.load(Ordering::SeqCst), 0, "handed back, not called");
    callback();
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let busy = graph.new_var().unwrap();
    let mut keeping = Keeping::default();
    graph.push(&[], &[busy], 1, &mut keeping).unwrap();
    assert!(matches!(
        graph.delete_var(busy, counting()).unwrap(),
        crate::Deletion::Pending
    ));
    let op = keeping.ready.pop().unwrap();
    assert_eq!(graph.complete(op, Ok(()), &mut keeping), Ok(1));
    assert_eq!(graph.stats().live_vars, 0, "reclaimed");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "kept by the dispatcher");
    keeping.reclaimed.pop().unwrap()();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn waits_last_looks_at_the_back_of_the_fifo_spilled_or_not_and_refuses_a_deleted_var() {
    let graph = G::new();
    let (var, other) = (graph.new_var().unwrap(), graph.new_var().unwrap());
    let mut ready = Vec::new();
    graph.push(&[], &[var], 0, &mut ready).unwrap();
    assert!(graph.waits_last(var, |_| false), "nothing waits");
    // Waiters on two vars (the locked path), past the ring into the spill, then one on `var`
    // alone (the side entrance, merged by the look).
    for id in 1..=20 {
        graph.push(&[other], &[var], id, &mut ready).unwrap();
        assert!(graph.waits_last(var, |&op| op == id), "op {id} waits last");
        assert!(!graph.waits_last(var, |&op| op == id - 1));
    }
    graph.push(&[var], &[], 21, &mut ready).unwrap();
    assert!(graph.waits_last(var, |&op| op == 21));
    drop(graph.delete_var(var, || {}).unwrap());
    assert!(!graph.waits_last(var, |_| true), "a deleted var");
}
