//! Multi-threaded stress: pushes and completions from several threads on shared vars, with a
//! runtime check that no op runs while a conflicting one does.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

/// One pushing thread's plan: given how many ops it pushed and how many ready ops it holds,
/// the vars and payload of its next push, or `None` to complete a ready op first.
type Plan<'a> = Box<dyn FnMut(u64, usize) -> Option<(Vec<Var>, Vec<Var>, u64)> + 'a>;

/// How long the threads of `push_and_complete` may all find nothing to do before the test calls
/// it a deadlock.
const STALL: Duration = Duration::from_secs(20);

/// Runs `threads` threads on `graph`; thread `t` pushes `per_thread` ops as `plan(t)` says and
/// completes whatever is ready (its own ops and those its completions release), running `run`
/// on each op inside the exclusivity check, until every op of every thread completed. Fails if
/// no op completes for `STALL` while a thread has nothing to do: ops wait for each other.
fn push_and_complete<'a>(
    graph: &Graph<u64>,
    usage: &[AtomicU32],
    threads: u64,
    per_thread: u64,
    plan: impl Fn(u64) -> Plan<'a> + Sync,
    run: impl Fn(&ReadyOp<u64>) + Sync,
) {
    let completed = AtomicU64::new(0);
    let total = per_thread * threads;
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (plan, run, completed) = (&plan, &run, &completed);
            scope.spawn(move || {
                let mut next_push = plan(t);
                let mut ready: Vec<ReadyOp<u64>> = Vec::new();
                let mut pushed = 0;
                // The completion count when this thread last found nothing to do, and since when.
                let mut stalled: Option<(u64, Instant)> = None;
                while completed.load(Ordering::Acquire) < total {
                    let push = (pushed < per_thread)
                        .then(|| next_push(pushed, ready.len()))
                        .flatten();
                    if let Some((reads, writes, payload)) = push {
                        graph.push(&reads, &writes, payload, &mut ready).unwrap();
                        pushed += 1;
                    } else if let Some(op) = ready.pop() {
                        enter(&op, usage);
                        run(&op);
                        leave(&op, usage);
                        graph.complete(op, Ok(()), &mut ready).unwrap();
                        completed.fetch_add(1, Ordering::AcqRel);
                    } else {
                        let now = completed.load(Ordering::Acquire);
                        match stalled {
                            Some((at, since)) if at == now => assert!(
                                since.elapsed() < STALL,
                                "no op completed for {STALL:?}: {now} of {total} done"
                            ),
                            _ => stalled = Some((now, Instant::now())),
                        }
                        std::thread::yield_now();
                    }
                }
            });
        }
    });
    assert_eq!(completed.load(Ordering::Acquire), total);
    assert_eq!(graph.stats().live_op_blocks, 0);
}

/// A xorshift generator from `seed` (not 0): each thread's plan draws from its own.
fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

#[test]
fn concurrent_pushes_and_completions_keep_ops_exclusive() {
    let per_thread: u64 = if cfg!(miri) { 30 } else { 20_000 };
    let graph: Graph<u64> = Graph::new();
    let vars: Vec<Var> = (0..6).map(|_| graph.new_var().unwrap()).collect();
    let usage: Vec<AtomicU32> = (0..6).map(|_| AtomicU32::new(0)).collect();
    let plan = |t: u64| -> Plan<'_> {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15_u64 ^ (t + 1));
        let vars = &vars;
        Box::new(move |pushed, ready| {
            if ready > 0 && !next().is_multiple_of(2) {
                return None;
            }
            let r = next();
            let w = (r % 6) as usize;
            let reads: Vec<Var> = (0..6)
                .filter(|&i| i != w && (r >> (8 + i)) & 1 == 1)
                .map(|i| vars[i])
                .collect();
            let writes = if r.is_multiple_of(3) {
                Vec::new()
            } else {
                vec![vars[w]]
            };
            Some((reads, writes, pushed))
        })
    };
    push_and_complete(&graph, &usage, 3, per_thread, plan, |_| {
        std::thread::yield_now();
    });
    for &var in &vars {
        assert_eq!(graph.var_status(var).unwrap().pending(), 0);
    }
}

/// Three threads push ops that write two or three of four shared vars, each op naming them in an
/// order of its own, and complete whatever is ready: every op runs, one writer of a var at a
/// time. Two ops appended to two shared vars in opposite orders would each wait for the other
/// (the stall check of `push_and_complete` reports it).
#[test]
fn ops_writing_several_shared_vars_from_several_threads_all_run() {
    let per_thread: u64 = if cfg!(miri) { 30 } else { 20_000 };
    let graph: Graph<u64> = Graph::new();
    let vars: Vec<Var> = (0..4).map(|_| graph.new_var().unwrap()).collect();
    let usage: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
    let plan = |t: u64| -> Plan<'_> {
        let mut next = xorshift(0x2545_F491_4F6C_DD1D_u64 ^ (t + 1));
        let vars = &vars;
        Box::new(move |pushed, ready| {
            if ready > 2 {
                return None;
            }
            // From a random var, forwards or backwards around the four.
            let r = next();
            let start = (r % 4) as usize;
            let step = if (r >> 2) & 1 == 1 { 1 } else { 3 };
            let count = 2 + ((r >> 3) & 1) as usize;
            let writes = (0..count).map(|i| vars[(start + i * step) % 4]).collect();
            Some((Vec::new(), writes, pushed))
        })
    };
    push_and_complete(&graph, &usage, 3, per_thread, plan, |_| {
        std::thread::yield_now();
    });
    for &var in &vars {
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
    let graph: Graph<u64> = Graph::new();
    let hot = graph.new_var().unwrap();
    let other = graph.new_var().unwrap();
    let usage: Vec<AtomicU32> = (0..2).map(|_| AtomicU32::new(0)).collect();
    // The last sequence number of each thread's writes that ran (+1; 0: none yet).
    let last_run: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let plan = |t: u64| -> Plan<'_> {
        Box::new(move |pushed, ready| {
            if ready >= 4 && pushed % 3 != 0 {
                return None;
            }
            let reads = if pushed % 16 == 15 {
                vec![other]
            } else {
                Vec::new()
            };
            Some((reads, vec![hot], t << 32 | pushed))
        })
    };
    push_and_complete(&graph, &usage, threads, per_thread, plan, |op| {
        let (owner, seq) = (*op.payload() >> 32, *op.payload() & 0xFFFF_FFFF);
        let before = last_run[owner as usize].swap(seq + 1, Ordering::AcqRel);
        assert_eq!(before, seq, "thread {owner}'s writes ran out of order");
    });
    assert_eq!(graph.var_status(hot).unwrap().pending(), 0);
}
