//! Random workloads in the spirit of `MXNet`'s engine test: ops over vars holding real data (a
//! u64 each); each op reads its inputs and writes a hash of them and of its own id into its
//! outputs. Final values must equal a sequential run in push order, on every engine kind, with
//! 1, 2 and 8 workers, pushed from one thread and from four. Then failures injected at random,
//! with their propagation checked against the same sequential model.
#![allow(
    clippy::many_single_char_names,
    clippy::doc_markdown,
    clippy::unreadable_literal,
    reason = "tests: short var names, MXNet named in docs, seeds"
)]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, RwLock};

use crate::common::{KINDS, RandomOp as Op, engine, mix, random_workload as workload};
use depengine::{Engine, EngineError, EngineKind, Var};

fn output(op: &Op, inputs: u64, k: usize) -> u64 {
    mix(inputs, op.id.wrapping_mul(31).wrapping_add(k as u64))
}

/// The sequential model: final values, and which vars end failed (rules 1 and 2).
fn sequential(ops: &[Op], values: &mut [u64], failed: &mut [bool], runs: &mut [bool]) {
    for op in ops {
        let skipped = op.reads.iter().chain(&op.writes).any(|&v| failed[v]);
        runs[op.id as usize] = !skipped;
        if skipped || op.fails {
            for &w in &op.writes {
                failed[w] = true;
            }
            continue;
        }
        let inputs = op.reads.iter().fold(op.id, |acc, &r| mix(acc, values[r]));
        for (k, &w) in op.writes.iter().enumerate() {
            values[w] = output(op, inputs, k);
        }
    }
}

struct Data {
    values: Vec<RwLock<u64>>,
}

fn push_all(engine: &Engine, vars: &[Var], data: &Arc<Data>, ops: &[Op], ran: &Arc<Vec<AtomicU8>>) {
    for op in ops {
        let reads: Vec<Var> = op.reads.iter().map(|&i| vars[i]).collect();
        let writes: Vec<Var> = op.writes.iter().map(|&i| vars[i]).collect();
        let (data, ran, op2) = (Arc::clone(data), Arc::clone(ran), op.clone());
        engine
            .op("random")
            .reads(&reads)
            .writes(&writes)
            .priority((op.id % 5) as i32)
            .push_sync(move |_| {
                ran[op2.id as usize].fetch_add(1, Ordering::Relaxed);
                if op2.fails {
                    return Err(format!("injected failure of op {}", op2.id).into());
                }
                // try_read / try_write: any overlap the engine allowed by mistake shows up.
                let mut inputs = op2.id;
                for &r in &op2.reads {
                    let value = data.values[r]
                        .try_read()
                        .map_err(|_| "read raced a write")?;
                    inputs = mix(inputs, *value);
                }
                for (k, &w) in op2.writes.iter().enumerate() {
                    let mut value = data.values[w].try_write().map_err(|_| "write raced")?;
                    *value = output(&op2, inputs, k);
                }
                Ok(())
            })
            .unwrap();
    }
}

/// Vars each pusher's ops use (`check`); `hot_vars_match_sequential_run` uses few.
const VARS_PER_PUSHER: usize = 100;

/// Vars that every pusher's ops read and none writes (so the pushers contend on them while the
/// final values stay deterministic).
const SHARED_VARS: usize = 4;

/// Runs `threads` pushers, each on its own partition of vars plus reads of shared vars, and
/// checks values, failures and the failure rules against the sequential model.
fn check(kind: EngineKind, workers: usize, pushers: usize, ops_per_pusher: usize, fail_rate: u64) {
    check_with(
        kind,
        workers,
        pushers,
        ops_per_pusher,
        fail_rate,
        VARS_PER_PUSHER,
    );
}

/// `check` with `vars_per_pusher` vars per pusher (at least 5: an op uses up to 5).
fn check_with(
    kind: EngineKind,
    workers: usize,
    pushers: usize,
    ops_per_pusher: usize,
    fail_rate: u64,
    vars_per_pusher: usize,
) {
    let engine = engine(kind, workers);
    let shared = vars_per_pusher * pushers;
    let n_vars = shared + SHARED_VARS;
    let vars: Vec<Var> = (0..n_vars).map(|_| engine.new_var().unwrap()).collect();
    let data = Arc::new(Data {
        values: (0..n_vars).map(|i| RwLock::new(i as u64)).collect(),
    });
    let total = ops_per_pusher * pushers;
    let ran: Arc<Vec<AtomicU8>> = Arc::new((0..total).map(|_| AtomicU8::new(0)).collect());
    let plans: Vec<Vec<Op>> = (0..pushers)
        .map(|p| {
            let mut ops = workload(
                0xC0FFEE + p as u64 * 7919 + workers as u64,
                ops_per_pusher,
                vars_per_pusher,
                (p * ops_per_pusher) as u64,
                fail_rate,
            );
            for op in &mut ops {
                for v in op.reads.iter_mut().chain(op.writes.iter_mut()) {
                    *v += p * vars_per_pusher;
                }
                // Every other op also reads one of the shared vars.
                if op.id % 2 == 0 {
                    op.reads.push(shared + (op.id / 2) as usize % SHARED_VARS);
                }
            }
            ops
        })
        .collect();
    std::thread::scope(|s| {
        for plan in &plans {
            let (engine, vars, data, ran) = (&engine, &vars, &data, &ran);
            s.spawn(move || push_all(engine, vars, data, plan, ran));
        }
    });

    let mut expected: Vec<u64> = (0..n_vars as u64).collect();
    let mut failed = vec![false; n_vars];
    let mut runs = vec![false; total];
    for plan in &plans {
        sequential(plan, &mut expected, &mut failed, &mut runs);
    }
    // Rule 3 on every var: Err exactly where the model failed, then cleared.
    for (i, &var) in vars.iter().enumerate() {
        let got = engine.wait_for_var(var);
        assert_eq!(
            got.is_err(),
            failed[i],
            "{kind}/{workers}/{pushers}: var {i}: {got:?}"
        );
        if let Err(error) = got {
            assert!(matches!(error, EngineError::OpFailed(_)), "{error}");
        } else {
            assert_eq!(
                *data.values[i].read().unwrap(),
                expected[i],
                "{kind}/{workers}: var {i}"
            );
        }
    }
    // Each op ran at most once, and an op ran iff none of its vars was failed before it.
    for (id, should_run) in runs.iter().enumerate() {
        let count = ran[id].load(Ordering::Relaxed);
        assert_eq!(
            count,
            u8::from(*should_run),
            "{kind}/{workers}: op {id} ran {count} times"
        );
    }
    let any_root = plans
        .iter()
        .flatten()
        .any(|op| op.fails && ran[op.id as usize].load(Ordering::Relaxed) == 1);
    // Rule 4: every failed var was reported by wait_for_var; a root that wrote only vars
    // already reported is not reported again, so wait_for_all reports nothing new.
    let all = engine.wait_for_all();
    assert!(all.is_ok() || any_root, "{all:?}");
    engine.wait_for_all().unwrap();
    for &var in &vars {
        engine.wait_for_var(var).unwrap();
        engine.delete_var(var, || ()).unwrap();
    }
    engine.wait_for_all().unwrap();
    let stats = engine.stats();
    assert_eq!(
        (
            stats.pending_ops,
            stats.live_vars,
            stats.waiting_ops,
            stats.failed_vars
        ),
        (0, 0, 0, 0)
    );
}

fn ops_per_pusher() -> usize {
    if cfg!(miri) { 50 } else { 1500 }
}

#[test]
fn random_workload_matches_sequential_run_one_pusher() {
    for kind in KINDS {
        for workers in [1, 2, 8] {
            check(kind, workers, 1, ops_per_pusher() * 2, 0);
        }
    }
}

#[test]
fn random_workload_matches_sequential_run_four_pushers() {
    for kind in KINDS {
        for workers in [1, 2, 8] {
            check(kind, workers, 4, ops_per_pusher() / 2, 0);
        }
    }
}

#[test]
fn random_failures_propagate_as_the_model_says() {
    for kind in KINDS {
        for (workers, pushers) in [(2, 1), (8, 4)] {
            check(kind, workers, pushers, ops_per_pusher(), 40);
        }
    }
}

/// Six vars per pusher: queues stay long, so the ops on a single var (a sixth of them) mostly
/// enter through the var's lock-free `Incoming` ring, interleaved with ops on several vars that
/// take the locks, with and without failures.
#[test]
fn hot_vars_match_sequential_run() {
    for kind in KINDS {
        for (workers, pushers, fail_rate) in [(1, 1, 0), (2, 4, 0), (2, 1, 40), (8, 4, 40)] {
            check_with(kind, workers, pushers, ops_per_pusher(), fail_rate, 6);
        }
    }
}

/// 10^6 ops in release (10^4 in debug) on the default engine, from four pushers.
#[test]
fn stress() {
    let total = if cfg!(miri) {
        200
    } else if cfg!(debug_assertions) {
        10_000
    } else {
        1_000_000
    };
    check(EngineKind::ThreadedPerDevice, 2, 4, total / 4, 0);
    check(EngineKind::ThreadedPooled, 2, 4, total / 40, 200);
}
