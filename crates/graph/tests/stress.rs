//! Multi-threaded stress: pushes and completions from several threads on shared vars, with a
//! runtime check that no op runs while a conflicting one does.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use depengine_graph::{Graph, ReadyOp, Var};

const WRITER: u32 = 1 << 31;

/// Marks the op's vars as in use, checking exclusivity.
fn enter(op: &ReadyOp<u64>, usage: &[AtomicU32]) {
    for var in op.reads() {
        let before = usage[var.index() as usize].fetch_add(1, Ordering::AcqRel);
        assert_eq!(before & WRITER, 0, "read runs while a write runs");
    }
    for var in op.writes() {
        let taken = usage[var.index() as usize].compare_exchange(
            0,
            WRITER,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        assert!(taken.is_ok(), "write overlaps another op: {taken:?}");
    }
}

fn leave(op: &ReadyOp<u64>, usage: &[AtomicU32]) {
    for var in op.reads() {
        usage[var.index() as usize].fetch_sub(1, Ordering::AcqRel);
    }
    for var in op.writes() {
        usage[var.index() as usize].store(0, Ordering::Release);
    }
}

#[test]
fn concurrent_pushes_and_completions_keep_ops_exclusive() {
    let threads = 3;
    let per_thread: u64 = if cfg!(miri) { 30 } else { 20_000 };
    let graph: Arc<Graph<u64>> = Arc::new(Graph::new());
    let vars: Arc<Vec<Var>> = Arc::new((0..6).map(|_| graph.new_var().unwrap()).collect());
    let usage: Arc<Vec<AtomicU32>> = Arc::new((0..6).map(|_| AtomicU32::new(0)).collect());
    let completed = Arc::new(AtomicU64::new(0));
    let total = per_thread * threads;

    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (graph, vars, usage, completed) = (
                graph.clone(),
                vars.clone(),
                usage.clone(),
                completed.clone(),
            );
            std::thread::spawn(move || {
                let mut rng = 0x9E37_79B9_7F4A_7C15_u64 ^ (t + 1);
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let mut ready: Vec<ReadyOp<u64>> = Vec::new();
                let mut pushed = 0;
                while completed.load(Ordering::Acquire) < total {
                    if pushed < per_thread && (ready.is_empty() || next().is_multiple_of(2)) {
                        let r = next();
                        let w = (r % 6) as usize;
                        let read_vars: Vec<Var> = (0..6)
                            .filter(|&i| i != w && (r >> (8 + i)) & 1 == 1)
                            .map(|i| vars[i])
                            .collect();
                        let write_vars: &[Var] = if r.is_multiple_of(3) {
                            &[]
                        } else {
                            &vars[w..=w]
                        };
                        graph
                            .push(&read_vars, write_vars, pushed, &mut ready)
                            .unwrap();
                        pushed += 1;
                    } else if let Some(op) = ready.pop() {
                        enter(&op, &usage);
                        std::thread::yield_now();
                        leave(&op, &usage);
                        graph.complete(op, Ok(()), &mut ready).unwrap();
                        completed.fetch_add(1, Ordering::AcqRel);
                    } else {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(completed.load(Ordering::Acquire), total);
    let stats = graph.stats();
    assert_eq!(stats.live_op_blocks, 0);
    for &var in vars.iter() {
        assert_eq!(graph.var_status(var).unwrap().pending(), 0);
    }
}

/// Several threads push writes of one hot var (most through its lock-free `Incoming` ring),
/// mixed with ops that also read a second var (through the locks), and complete whatever is
/// ready. The writes of each thread must run one at a time and in that thread's push order.
#[test]
fn single_var_writes_run_in_push_order_per_thread() {
    let threads: u64 = 3;
    let per_thread: u64 = if cfg!(miri) { 40 } else { 20_000 };
    let graph: Arc<Graph<u64>> = Arc::new(Graph::new());
    let hot = graph.new_var().unwrap();
    let other = graph.new_var().unwrap();
    let usage: Arc<Vec<AtomicU32>> = Arc::new((0..2).map(|_| AtomicU32::new(0)).collect());
    // The last sequence number of each thread's writes that ran (+1; 0: none yet).
    let last_run: Arc<Vec<AtomicU64>> = Arc::new((0..threads).map(|_| AtomicU64::new(0)).collect());
    let completed = Arc::new(AtomicU64::new(0));
    let total = per_thread * threads;

    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (graph, usage, last_run, completed) = (
                graph.clone(),
                usage.clone(),
                last_run.clone(),
                completed.clone(),
            );
            std::thread::spawn(move || {
                let mut ready: Vec<ReadyOp<u64>> = Vec::new();
                let mut pushed = 0;
                while completed.load(Ordering::Acquire) < total {
                    if pushed < per_thread && (ready.len() < 4 || pushed % 3 == 0) {
                        let payload = t << 32 | pushed;
                        let read_vars: &[Var] = if pushed % 16 == 15 { &[other] } else { &[] };
                        graph.push(read_vars, &[hot], payload, &mut ready).unwrap();
                        pushed += 1;
                    } else if let Some(op) = ready.pop() {
                        enter(&op, &usage);
                        let (owner, seq) = (*op.payload() >> 32, *op.payload() & 0xFFFF_FFFF);
                        let before = last_run[owner as usize].swap(seq + 1, Ordering::AcqRel);
                        assert_eq!(before, seq, "thread {owner}'s writes ran out of order");
                        leave(&op, &usage);
                        graph.complete(op, Ok(()), &mut ready).unwrap();
                        completed.fetch_add(1, Ordering::AcqRel);
                    } else {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(completed.load(Ordering::Acquire), total);
    assert_eq!(graph.stats().live_op_blocks, 0);
    assert_eq!(graph.var_status(hot).unwrap().pending(), 0);
}
