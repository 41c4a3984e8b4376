//! `graph` group: the cost of depengine-graph's push + complete (see issue 3).
//!
//! Workloads, each over `--ops` ops:
//!
//! - `push_complete_{1,2,4}var`: one thread pushes an op that writes the first of `k` vars and
//!   reads the `k - 1` others, completes it once it is dispatched, and repeats. This is the
//!   graph's own overhead per op (validation, the per-var transitions, dispatch), with the vars
//!   hot in cache and no op waiting.
//! - `contended_2threads`: two threads push and complete ops on the same two vars at once. Each op
//!   reads both vars, except every 8th, which writes the second one: completions from both
//!   threads contend on the same var locks and release each other's ops. A released op goes to
//!   the releasing thread's queue (as the engine's workers do).
//!
//! Each result is wall time divided by the number of ops (`ns/op`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use depengine_graph::{Graph, ReadyOp, Var};

use crate::args::{Args, ns_per, report};

pub(crate) fn run(args: &Args) -> Result<(), String> {
    if args.system != "depengine-graph" {
        return Err(format!(
            "unknown system `{}` (expected depengine-graph)",
            args.system
        ));
    }
    for (workload, vars) in [
        ("push_complete_1var", 1),
        ("push_complete_2var", 2),
        ("push_complete_4var", 4),
    ] {
        if args.wants(workload) {
            let ns = push_complete(args.ops, vars)?;
            report(workload, ns, "ns/op");
        }
    }
    if args.wants("contended_2threads") {
        let ns = contended(args.ops)?;
        report("contended_2threads", ns, "ns/op");
    }
    Ok(())
}

fn push_complete(ops: u64, k: usize) -> Result<f64, String> {
    let graph: Graph<u64> = Graph::new();
    let vars: Vec<Var> = (0..k)
        .map(|_| graph.new_var())
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let (outputs, inputs) = vars.split_at(1);
    let mut ready: Vec<ReadyOp<u64>> = Vec::with_capacity(4);
    let start = Instant::now();
    for i in 0..ops {
        graph
            .push(inputs, outputs, i, &mut ready)
            .map_err(|e| e.to_string())?;
        let Some(op) = ready.pop() else {
            return Err(format!("op {i} was not ready"));
        };
        graph
            .complete(op, Ok(()), &mut ready)
            .map_err(|e| e.to_string())?;
    }
    let elapsed = start.elapsed();
    if !ready.is_empty() || graph.stats().live_op_blocks != 0 {
        return Err("ops left over".to_owned());
    }
    Ok(ns_per(elapsed, ops))
}

fn contended(ops: u64) -> Result<f64, String> {
    let graph: Arc<Graph<u64>> = Arc::new(Graph::new());
    let a = graph.new_var().map_err(|e| e.to_string())?;
    let b = graph.new_var().map_err(|e| e.to_string())?;
    let completed = Arc::new(AtomicU64::new(0));
    let start_line = Arc::new(std::sync::Barrier::new(2));
    let per_thread = ops / 2;
    let worker =
        |graph: Arc<Graph<u64>>, completed: Arc<AtomicU64>, start_line: Arc<std::sync::Barrier>| {
            move || -> Result<(), String> {
                let mut ready: Vec<ReadyOp<u64>> = Vec::with_capacity(64);
                let mut running: Vec<ReadyOp<u64>> = Vec::with_capacity(64);
                start_line.wait();
                for i in 0..per_thread {
                    let pushed = if i % 8 == 7 {
                        graph.push(&[a], &[b], i, &mut ready)
                    } else {
                        graph.push(&[a, b], &[], i, &mut ready)
                    };
                    pushed.map_err(|e| e.to_string())?;
                    if ready.len() >= 4 {
                        complete_all(&graph, &mut ready, &mut running, &completed)?;
                    }
                }
                // Finish: complete what is ready here until every op of both threads completed
                // (the other thread may still release ops into this thread's queue).
                while completed.load(Ordering::Acquire) < per_thread * 2 {
                    if ready.is_empty() {
                        std::thread::yield_now();
                    } else {
                        complete_all(&graph, &mut ready, &mut running, &completed)?;
                    }
                }
                Ok(())
            }
        };
    let other = std::thread::spawn(worker(graph.clone(), completed.clone(), start_line.clone()));
    let start = Instant::now();
    let mine = worker(graph.clone(), completed.clone(), start_line)();
    let theirs = other
        .join()
        .map_err(|_| "worker thread panicked".to_owned())?;
    let elapsed = start.elapsed();
    mine?;
    theirs?;
    if graph.stats().live_op_blocks != 0 {
        return Err("ops left waiting".to_owned());
    }
    Ok(ns_per(elapsed, per_thread * 2))
}

fn complete_all(
    graph: &Graph<u64>,
    ready: &mut Vec<ReadyOp<u64>>,
    running: &mut Vec<ReadyOp<u64>>,
    completed: &AtomicU64,
) -> Result<(), String> {
    std::mem::swap(ready, running);
    let mut n = 0;
    for op in running.drain(..) {
        graph
            .complete(op, Ok(()), ready)
            .map_err(|e| e.to_string())?;
        n += 1;
    }
    // Release: orders this thread's completions before the other thread sees the count.
    completed.fetch_add(n, Ordering::Release);
    Ok(())
}
