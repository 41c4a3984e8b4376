//! The random workload of `random.rs` on typed data: every value lives in a `Data<u64>`, and
//! each op computes its outputs from its inputs through `&u64` / `&mut u64`, with no lock.
//! Final values (and which data end failed) must equal a sequential run in push order, on
//! every engine kind, with 1, 2 and 8 workers.
#![allow(clippy::doc_markdown, clippy::unreadable_literal, reason = "tests")]

use crate::common::{KINDS, RandomOp as Op, engine, mix, random_workload};
use depengine::{Data, Engine, EngineError, Result};

/// What an op computes from its inputs: the `k`-th output.
fn output(id: u64, inputs: &[u64], k: u64) -> u64 {
    let folded = inputs.iter().fold(id, |acc, &v| mix(acc, v));
    mix(folded, id.wrapping_mul(31).wrapping_add(k))
}

/// The sequential model: final values, and which values end failed.
fn sequential(ops: &[Op], values: &mut [u64], failed: &mut [bool]) {
    for op in ops {
        let skipped = op.reads.iter().chain(&op.writes).any(|&v| failed[v]);
        if skipped || op.fails {
            for &w in &op.writes {
                failed[w] = true;
            }
            continue;
        }
        let inputs: Vec<u64> = op.reads.iter().map(|&r| values[r]).collect();
        for (k, &w) in op.writes.iter().enumerate() {
            values[w] = output(op.id, &inputs, k as u64);
        }
    }
}

/// The op's result: `Err` when it is to fail.
fn result(fails: bool) -> std::result::Result<(), depengine::BoxError> {
    if fails {
        Err("injected".into())
    } else {
        Ok(())
    }
}

/// Pushes `op` as a typed op: one shape per count of reads and writes.
fn push(engine: &Engine, data: &[Data<u64>], op: &Op) -> Result<()> {
    let (id, fails) = (op.id, op.fails);
    let r = |i: usize| &data[op.reads[i]];
    let w = |i: usize| &data[op.writes[i]];
    let name = "random";
    match (op.reads.len(), op.writes.len()) {
        (0, 1) => engine.op(name).write(w(0)).push_sync(move |_, a| {
            *a = output(id, &[], 0);
            result(fails)
        }),
        (1, 1) => engine
            .op(name)
            .read(r(0))
            .write(w(0))
            .push_sync(move |_, (x, a)| {
                *a = output(id, &[*x], 0);
                result(fails)
            }),
        (2, 1) => {
            engine
                .op(name)
                .read(r(0))
                .read(r(1))
                .write(w(0))
                .push_sync(move |_, (x, y, a)| {
                    *a = output(id, &[*x, *y], 0);
                    result(fails)
                })
        }
        (3, 1) => engine
            .op(name)
            .read(r(0))
            .read(r(1))
            .read(r(2))
            .write(w(0))
            .push_sync(move |_, (x, y, z, a)| {
                *a = output(id, &[*x, *y, *z], 0);
                result(fails)
            }),
        (0, 2) => engine
            .op(name)
            .write(w(0))
            .write(w(1))
            .push_sync(move |_, (a, b)| {
                *a = output(id, &[], 0);
                *b = output(id, &[], 1);
                result(fails)
            }),
        (1, 2) => engine
            .op(name)
            .read(r(0))
            .write(w(0))
            .write(w(1))
            .push_sync(move |_, (x, a, b)| {
                *a = output(id, &[*x], 0);
                *b = output(id, &[*x], 1);
                result(fails)
            }),
        (2, 2) => engine
            .op(name)
            .read(r(0))
            .read(r(1))
            .write(w(0))
            .write(w(1))
            .push_sync(move |_, (x, y, a, b)| {
                *a = output(id, &[*x, *y], 0);
                *b = output(id, &[*x, *y], 1);
                result(fails)
            }),
        (3, 2) => engine
            .op(name)
            .read(r(0))
            .read(r(1))
            .read(r(2))
            .write(w(0))
            .write(w(1))
            .push_sync(move |_, (x, y, z, a, b)| {
                *a = output(id, &[*x, *y, *z], 0);
                *b = output(id, &[*x, *y, *z], 1);
                result(fails)
            }),
        shape => unreachable!("the workload makes no op of shape {shape:?}"),
    }
}

fn check(seed: u64, ops: usize, values: usize, fail_rate: u64) {
    let workload = random_workload(seed, ops, values, 0, fail_rate);
    let mut expected = vec![0_u64; values];
    let mut failed = vec![false; values];
    sequential(&workload, &mut expected, &mut failed);
    for kind in KINDS {
        for threads in [1, 2, 8] {
            let engine = engine(kind, threads);
            let data: Vec<Data<u64>> = (0..values).map(|_| engine.data(0).unwrap()).collect();
            for op in &workload {
                push(&engine, &data, op).unwrap();
            }
            for (v, value) in data.iter().enumerate() {
                let read = engine.read(value);
                if failed[v] {
                    assert!(
                        matches!(read, Err(EngineError::OpFailed(_))),
                        "value {v} should have failed ({kind:?}, {threads} workers)"
                    );
                } else {
                    assert_eq!(
                        *read.unwrap(),
                        expected[v],
                        "value {v} ({kind:?}, {threads} workers)"
                    );
                }
            }
            let _ = engine.wait_for_all();
            for value in data {
                engine.take(value).unwrap();
            }
            assert_eq!(engine.stats().live_vars, 0);
        }
    }
}

#[test]
fn typed_random_workloads_match_a_sequential_run() {
    let ops = if cfg!(debug_assertions) {
        3_000
    } else {
        100_000
    };
    for seed in [1, 2, 3] {
        check(seed, ops, 40, 0);
    }
}

#[test]
fn typed_random_workloads_with_failures_match_a_sequential_run() {
    let ops = if cfg!(debug_assertions) {
        3_000
    } else {
        100_000
    };
    for seed in [4, 5] {
        check(seed, ops, 60, 400);
    }
}
