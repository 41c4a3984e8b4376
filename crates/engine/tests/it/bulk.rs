//! Bulk execution (`EngineConfig::bulk_size`, `DEPENGINE_BULK_SIZE`): results, order and
//! failures equal to ops pushed alone, on every engine kind and several segment sizes; which
//! ops join a segment; what ends a segment; and no hang where the pushing thread waits by
//! other means.
#![allow(
    clippy::doc_markdown,
    clippy::too_many_lines,
    reason = "tests: MXNet named in docs, long scenario tests"
)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::common::isolated::{run_child, scenario, test_name};
use crate::common::{KINDS, Rng, held_async_op, mix, within};
use depengine::{
    BULK_SIZE, Completion, ConfigError, Context, Engine, EngineConfig, EngineError, EngineKind,
    FnProperty, MAX_BULK_SIZE, ProfileMode, ProfiledOutcome, Var,
};

/// The segment sizes the tests run with (1: every op alone).
const SIZES: [usize; 4] = [1, 2, 7, 64];

fn bulk_engine(kind: EngineKind, workers: usize, bulk: usize) -> Engine {
    Engine::new(
        EngineConfig::default()
            .kind(kind)
            .cpu_worker_threads(workers)
            .bulk_size(bulk),
    )
    .expect("engine starts")
}

/// An async op writing every var of `vars`, whose completion the test holds: every op pushed
/// after it on those vars waits (so segments stay open, and joins are deterministic).
fn gate(engine: &Engine, vars: &[Var]) -> Completion {
    let (tx, rx) = mpsc::channel();
    engine
        .op("gate")
        .writes(vars)
        .prop(FnProperty::Async)
        .push_async(move |_, done| tx.send(done).unwrap())
        .unwrap();
    rx.recv().unwrap()
}

fn vars(engine: &Engine, n: usize) -> Vec<Var> {
    (0..n).map(|_| engine.new_var().unwrap()).collect()
}

/// A log of op names, in the order their functions ran.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, engine: &Engine, name: &'static str, reads: &[Var], writes: &[Var]) {
        let log = self.clone();
        engine
            .op(name)
            .reads(reads)
            .writes(writes)
            .push_sync(move |_| log.0.lock().unwrap().push(name.to_owned()))
            .unwrap();
    }

    fn names(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Random workloads against a sequential model.
// ---------------------------------------------------------------------------------------------

/// How an op is pushed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `push_sync` on `Context::cpu(context)` with `priority`.
    Sync { context: u32, priority: i32 },
    /// `push_async`, completed inside its function: never joins, ends the open segment.
    Async,
}

#[derive(Clone)]
struct Op {
    id: u64,
    reads: Vec<usize>,
    writes: Vec<usize>,
    fails: bool,
    kind: Kind,
}

/// `n` ops on `vars` vars: a quarter of them random (1 or 2 writes, 0 to 3 reads), the others
/// built from the op before them (a subset of its vars, its written vars written or read),
/// so that runs of dependent ops on the same vars are frequent; a few are async, on another
/// device or of another priority. Ids from `first_id`.
fn workload(seed: u64, n: usize, vars: usize, first_id: u64, fail_rate: u64) -> Vec<Op> {
    let mut rng = Rng(seed);
    let mut ops: Vec<Op> = Vec::with_capacity(n);
    for i in 0..n {
        let pick = |rng: &mut Rng, from: &[usize], count: usize| {
            let mut pool = from.to_vec();
            let mut out = Vec::new();
            while out.len() < count && !pool.is_empty() {
                out.push(pool.swap_remove(rng.below(pool.len())));
            }
            out
        };
        let (reads, writes) = match ops.last() {
            Some(last) if rng.below(4) != 0 => {
                // A follower: writes some of the last op's written vars, reads some of the rest.
                let n_writes = 1 + rng.below(last.writes.len());
                let writes = pick(&mut rng, &last.writes, n_writes);
                let rest: Vec<usize> = last
                    .reads
                    .iter()
                    .chain(&last.writes)
                    .copied()
                    .filter(|v| !writes.contains(v))
                    .collect();
                let n_reads = rng.below(rest.len() + 1);
                (pick(&mut rng, &rest, n_reads), writes)
            }
            _ => {
                let all: Vec<usize> = (0..vars).collect();
                let n_writes = 1 + rng.below(2);
                let writes = pick(&mut rng, &all, n_writes);
                let rest: Vec<usize> = all.into_iter().filter(|v| !writes.contains(v)).collect();
                let n_reads = rng.below(4);
                (pick(&mut rng, &rest, n_reads), writes)
            }
        };
        let kind = match rng.below(40) {
            0 => Kind::Async,
            1 => Kind::Sync {
                context: 1,
                priority: 0,
            },
            2 => Kind::Sync {
                context: 0,
                priority: 1,
            },
            _ => Kind::Sync {
                context: 0,
                priority: 0,
            },
        };
        let fails = fail_rate > 0 && rng.next().is_multiple_of(fail_rate);
        ops.push(Op {
            id: first_id + i as u64,
            reads,
            writes,
            fails,
            kind,
        });
    }
    ops
}

fn output(op: &Op, inputs: u64, k: usize) -> u64 {
    mix(inputs, op.id.wrapping_mul(31).wrapping_add(k as u64))
}

/// The sequential model of ops pushed alone: final values, which vars end failed, which ops
/// run (failure rules 1 and 2).
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

/// The join rules of `run/bulk/mod.rs` for one pusher whose segments stay open (held behind a
/// gate): how many units (segments and ops alone) the ops make.
fn units(ops: &[Op], bulk: usize) -> usize {
    struct Open {
        kind: Kind,
        reads: Vec<usize>,
        writes: Vec<usize>,
        ops: usize,
        last_used: HashSet<usize>,
        last_written: HashSet<usize>,
    }
    let mut open: Option<Open> = None;
    let mut units = 0;
    for op in ops {
        let joins = open.as_ref().is_some_and(|segment| {
            let reads_ok = op
                .reads
                .iter()
                .all(|v| segment.reads.contains(v) || segment.writes.contains(v));
            let writes_ok = op.writes.iter().all(|v| segment.writes.contains(v));
            let conflicts = op.writes.iter().any(|v| segment.last_used.contains(v))
                || op.reads.iter().any(|v| segment.last_written.contains(v));
            op.kind == segment.kind && segment.ops < bulk && reads_ok && writes_ok && conflicts
        });
        if joins {
            let segment = open.as_mut().unwrap();
            segment.ops += 1;
            segment.last_used = op.reads.iter().chain(&op.writes).copied().collect();
            segment.last_written = op.writes.iter().copied().collect();
            continue;
        }
        units += 1;
        open = (bulk >= 2 && matches!(op.kind, Kind::Sync { .. })).then(|| Open {
            kind: op.kind,
            reads: op.reads.clone(),
            writes: op.writes.clone(),
            ops: 1,
            last_used: op.reads.iter().chain(&op.writes).copied().collect(),
            last_written: op.writes.iter().copied().collect(),
        });
    }
    units
}

/// Shared state of a random run: the vars' values (locked with `try_*`, so that an overlap
/// the engine allowed by mistake fails the op) and how often each op's function ran.
struct Data {
    values: Vec<RwLock<u64>>,
    ran: Vec<AtomicU8>,
}

impl Data {
    /// What op `op` does to the values.
    fn apply(&self, op: &Op) -> Result<(), String> {
        self.ran[op.id as usize].fetch_add(1, Ordering::Relaxed);
        if op.fails {
            return Err(format!("injected failure of op {}", op.id));
        }
        let mut inputs = op.id;
        for &r in &op.reads {
            let value = self.values[r]
                .try_read()
                .map_err(|_| "read raced a write")?;
            inputs = mix(inputs, *value);
        }
        for (k, &w) in op.writes.iter().enumerate() {
            let mut value = self.values[w].try_write().map_err(|_| "write raced")?;
            *value = output(op, inputs, k);
        }
        Ok(())
    }
}

fn push_all(engine: &Engine, vars: &[Var], data: &Arc<Data>, ops: &[Op]) {
    for op in ops {
        let reads: Vec<Var> = op.reads.iter().map(|&i| vars[i]).collect();
        let writes: Vec<Var> = op.writes.iter().map(|&i| vars[i]).collect();
        let (data, op2) = (Arc::clone(data), op.clone());
        let builder = engine.op("random").reads(&reads).writes(&writes);
        match op.kind {
            Kind::Sync { context, priority } => builder
                .on(Context::cpu(context))
                .priority(priority)
                .push_sync(move |_| data.apply(&op2).map_err(Into::into)),
            Kind::Async => builder.push_async(move |_, done| done.complete(data.apply(&op2))),
        }
        .unwrap();
    }
}

/// Runs `pushers` threads, each pushing `per_pusher` ops of `workload` on its own 8 vars plus
/// reads of 2 shared vars, on an engine of `kind` with `workers` workers and segments of
/// `bulk`; checks values, failures and the failure rules against the sequential model. With
/// `gated` (one pusher), every op waits behind a gate until all are pushed, and the number of
/// pending units must be what the join rules say.
fn check(
    kind: EngineKind,
    workers: usize,
    bulk: usize,
    pushers: usize,
    per_pusher: usize,
    fail_rate: u64,
    gated: bool,
) {
    const OWN: usize = 8;
    const SHARED: usize = 2;
    let what = format!("{kind}/{workers} workers/bulk {bulk}/{pushers} pushers");
    let engine = bulk_engine(kind, workers, bulk);
    let n_vars = OWN * pushers + SHARED;
    let vars = vars(&engine, n_vars);
    let data = Arc::new(Data {
        values: (0..n_vars).map(|i| RwLock::new(i as u64)).collect(),
        ran: (0..per_pusher * pushers)
            .map(|_| AtomicU8::new(0))
            .collect(),
    });
    let plans: Vec<Vec<Op>> = (0..pushers)
        .map(|p| {
            let seed = 0xB01C + p as u64 * 7919 + (workers * 100 + bulk) as u64;
            let mut ops = workload(seed, per_pusher, OWN, (p * per_pusher) as u64, fail_rate);
            for op in &mut ops {
                for v in op.reads.iter_mut().chain(op.writes.iter_mut()) {
                    *v += p * OWN;
                }
                // Every fifth op also reads a shared var (all pushers contend on them).
                if op.id % 5 == 0 {
                    op.reads.push(OWN * pushers + op.id as usize % SHARED);
                }
            }
            ops
        })
        .collect();
    let gate = gated.then(|| gate(&engine, &vars));
    std::thread::scope(|s| {
        for plan in &plans {
            let (engine, vars, data) = (&engine, &vars, &data);
            s.spawn(move || push_all(engine, vars, data, plan));
        }
    });
    if let Some(gate) = gate {
        assert_eq!(pushers, 1, "joins are deterministic with one pusher");
        let units = units(&plans[0], bulk);
        let stats = engine.stats();
        assert_eq!(stats.pending_ops, units + 1, "{what}: units and the gate");
        assert_eq!(stats.waiting_ops, units, "{what}: every unit waits");
        if bulk >= 2 {
            assert!(
                units < per_pusher * 3 / 4,
                "{what}: few joins ({units} units)"
            );
        }
        gate.ok();
    }
    let mut expected: Vec<u64> = (0..n_vars as u64).collect();
    let mut failed = vec![false; n_vars];
    let mut runs = vec![false; per_pusher * pushers];
    for plan in &plans {
        sequential(plan, &mut expected, &mut failed, &mut runs);
    }
    // Rule 3 on every var: Err exactly where the model failed, then cleared.
    for (i, &var) in vars.iter().enumerate() {
        let got = engine.wait_for_var(var);
        assert_eq!(got.is_err(), failed[i], "{what}: var {i}: {got:?}");
        if let Err(error) = got {
            assert!(matches!(error, EngineError::OpFailed(_)), "{error}");
        } else {
            assert_eq!(
                *data.values[i].read().unwrap(),
                expected[i],
                "{what}: var {i}"
            );
        }
    }
    // Each op ran at most once, and an op ran iff none of its vars had failed before it.
    for (id, should_run) in runs.iter().enumerate() {
        let count = data.ran[id].load(Ordering::Relaxed);
        assert_eq!(
            count,
            u8::from(*should_run),
            "{what}: op {id} ran {count} times"
        );
    }
    let any_root = plans
        .iter()
        .flatten()
        .any(|op| op.fails && data.ran[op.id as usize].load(Ordering::Relaxed) == 1);
    let all = engine.wait_for_all();
    assert!(all.is_ok() || any_root, "{what}: {all:?}");
    engine.wait_for_all().unwrap();
    for &var in &vars {
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
        (0, 0, 0, 0),
        "{what}"
    );
}

fn ops() -> usize {
    if cfg!(miri) { 50 } else { 1200 }
}

#[test]
fn gated_random_workload_joins_as_the_rules_say_and_matches_the_sequential_run() {
    for kind in KINDS {
        for bulk in SIZES {
            check(kind, 2, bulk, 1, ops(), 0, true);
        }
    }
}

#[test]
fn random_workload_matches_the_sequential_run() {
    for kind in KINDS {
        for bulk in SIZES {
            for (workers, pushers) in [(1, 1), (2, 1), (8, 4)] {
                check(kind, workers, bulk, pushers, ops(), 0, false);
            }
        }
    }
}

#[test]
fn random_failures_propagate_as_the_model_says() {
    for kind in KINDS {
        for bulk in SIZES {
            check(kind, 2, bulk, 1, ops(), 20, true);
            check(kind, 2, bulk, 1, ops(), 20, false);
            check(kind, 8, bulk, 4, ops() / 2, 30, false);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Segments: what joins, failures inside and across segments, the profiler.
// ---------------------------------------------------------------------------------------------

#[test]
fn a_chain_runs_as_segments_of_the_configured_size() {
    for kind in KINDS {
        for (bulk, segments) in [(1, 10), (2, 5), (3, 4), (64, 1)] {
            let engine = bulk_engine(kind, 2, bulk);
            let x = engine.new_var().unwrap();
            let gate = gate(&engine, &[x]);
            let log = Log::default();
            let names = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
            for name in names {
                log.push(&engine, name, &[], &[x]);
            }
            let stats = engine.stats();
            assert_eq!(
                (stats.pending_ops, stats.waiting_ops),
                (segments + 1, segments),
                "{kind}/bulk {bulk}"
            );
            gate.ok();
            engine.wait_for_all().unwrap();
            assert_eq!(log.names(), names, "{kind}/bulk {bulk}: push order");
        }
    }
}

#[test]
fn an_op_that_cannot_join_starts_over() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let (x, y, z) = (
            engine.new_var().unwrap(),
            engine.new_var().unwrap(),
            engine.new_var().unwrap(),
        );
        let gate = gate(&engine, &[x, y, z]);
        let log = Log::default();
        log.push(&engine, "a", &[x], &[y]); // opens: reads x, writes y
        log.push(&engine, "b", &[y], &[]); // joins: reads y, which a writes
        log.push(&engine, "c", &[], &[x]); // opens: the segment only reads x
        log.push(&engine, "d", &[], &[x, z]); // opens: z is not c's
        log.push(&engine, "e", &[z], &[]); // joins d
        engine
            .op("f")
            .writes([z])
            .prop(FnProperty::CpuPrioritized)
            .push_sync(|_| {})
            .unwrap(); // another kind: alone
        log.push(&engine, "g", &[], &[z]); // opens
        engine
            .op("h")
            .writes([z])
            .on(Context::cpu(1))
            .push_sync(|_| {})
            .unwrap(); // another device: opens a segment of its own
        log.push(&engine, "i", &[], &[z]);
        engine
            .op("j")
            .writes([z])
            .priority(3)
            .push_sync(|_| {})
            .unwrap();
        log.push(&engine, "k", &[], &[z]);
        let twice = engine.op("l").reads([z]).writes([z]).push_sync(|_| {});
        assert!(
            matches!(twice, Err(EngineError::ReadWriteConflict { .. })),
            "{kind}: refused as when pushed alone: {twice:?}"
        );
        log.push(&engine, "m", &[], &[z]); // joins k: the error pushed nothing
        // Segments: ab, c, de, f, g, h, i, j, km.
        assert_eq!(engine.stats().pending_ops, 9 + 1, "{kind}");
        gate.ok();
        engine.wait_for_all().unwrap();
        assert_eq!(
            log.names(),
            ["a", "b", "c", "d", "e", "g", "i", "k", "m"],
            "{kind}"
        );
    }
}

/// Pushes the op `name` on `reads`/`writes` that fails or succeeds, counting its runs.
fn op(
    engine: &Engine,
    name: &'static str,
    reads: &[Var],
    writes: &[Var],
    fails: bool,
    ran: &Arc<Mutex<Vec<&'static str>>>,
) {
    let ran = Arc::clone(ran);
    engine
        .op(name)
        .reads(reads)
        .writes(writes)
        .push_sync(move |_| {
            ran.lock().unwrap().push(name);
            if fails {
                Err(format!("{name} failed").into())
            } else {
                Ok(())
            }
        })
        .unwrap();
}

#[test]
fn a_failure_inside_a_segment_reaches_its_dependents_only() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let (a, b, c) = (
            engine.new_var().unwrap(),
            engine.new_var().unwrap(),
            engine.new_var().unwrap(),
        );
        let gate = gate(&engine, &[a, b, c]);
        let ran = Arc::new(Mutex::new(Vec::new()));
        op(&engine, "first", &[], &[a, b, c], false, &ran);
        op(&engine, "fails", &[b], &[a], true, &ran); // a fails
        op(&engine, "independent", &[c], &[b], false, &ran); // uses b, c: runs
        op(&engine, "reader", &[a, c], &[b], false, &ran); // reads a: skipped, b fails
        op(&engine, "writer", &[], &[b, c], false, &ran); // b failed: skipped, c fails
        assert_eq!(engine.stats().pending_ops, 2, "{kind}: one segment");
        gate.ok();
        let error = engine.wait_for_var(b).unwrap_err();
        let EngineError::OpFailed(failure) = &error else {
            panic!("{error}")
        };
        assert_eq!(failure.op_name(), "fails", "{kind}: the original failure");
        assert_eq!(
            *ran.lock().unwrap(),
            ["first", "fails", "independent"],
            "{kind}"
        );
        let on_a = engine.wait_for_var(a).unwrap_err();
        let on_c = engine.wait_for_var(c).unwrap_err();
        for error in [on_a, on_c] {
            let EngineError::OpFailed(other) = &error else {
                panic!("{error}")
            };
            assert!(
                other.same_failure(failure),
                "{kind}: one failure, passed on"
            );
        }
        // Every var was waited for: wait_for_all has nothing new to report.
        engine.wait_for_all().unwrap();
        assert_eq!(engine.stats().failed_vars, 0);
    }
}

/// Waits until no op is pending, without a wait (which would report and clear failures).
fn settle(engine: &Engine) {
    for _ in 0..10_000 {
        if engine.stats().pending_ops == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("ops still pending after 10 s");
}

/// A failure on a var of the segment's first op when the segment becomes ready: the first op
/// is skipped, so every var it writes fails, and every op that joined it uses one of those
/// (rules 3 and 4 of the joins): the whole segment is skipped, passing the failure on.
#[test]
fn a_failure_before_the_segment_skips_it_and_passes_on() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let (a, b, d) = (
            engine.new_var().unwrap(),
            engine.new_var().unwrap(),
            engine.new_var().unwrap(),
        );
        let gate = gate(&engine, &[a, b, d]);
        let ran = Arc::new(Mutex::new(Vec::new()));
        op(&engine, "earlier", &[], &[a], true, &ran); // a segment of its own
        op(&engine, "first", &[a], &[b, d], false, &ran); // b, d are not a's: opens
        op(&engine, "writes d", &[], &[d], false, &ran); // joins
        op(&engine, "reads b", &[b], &[d], false, &ran); // joins
        assert_eq!(engine.stats().pending_ops, 3, "{kind}");
        engine.profiler().start();
        gate.ok();
        settle(&engine);
        assert_eq!(*ran.lock().unwrap(), ["earlier"], "{kind}");
        assert_eq!(engine.stats().failed_vars, 3, "{kind}: a, then b and d");
        let skipped = engine
            .profiler()
            .take()
            .ops()
            .iter()
            .filter(|op| op.outcome() == ProfiledOutcome::Skipped)
            .count();
        assert_eq!(skipped, 3, "{kind}");
        let all = engine.wait_for_all().unwrap_err();
        let EngineError::OpFailed(failure) = &all else {
            panic!("{all}")
        };
        assert_eq!(failure.op_name(), "earlier", "{kind}");
        assert_eq!(engine.stats().failed_vars, 0, "{kind}: cleared");
    }
}

#[test]
fn a_failure_crosses_segments_and_a_later_write_clears_it() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 2);
        let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
        let gate = gate(&engine, &[a, b]);
        let ran = Arc::new(Mutex::new(Vec::new()));
        op(&engine, "s1", &[], &[a, b], false, &ran);
        op(&engine, "s1 fails", &[b], &[a], true, &ran);
        op(&engine, "s2 reads a", &[a], &[b], false, &ran); // full: a segment of its own
        op(&engine, "s2 skipped", &[b], &[], false, &ran);
        op(&engine, "s3 skipped", &[], &[b], false, &ran);
        assert_eq!(engine.stats().pending_ops, 4, "{kind}");
        gate.ok();
        let error = engine.wait_for_var(b).unwrap_err();
        assert!(
            error.to_string().contains("op `s1 fails` failed"),
            "{error}"
        );
        // Cleared on b: a write of b runs and leaves it clear; a keeps its failure.
        op(&engine, "rewrite", &[], &[b], false, &ran);
        engine.wait_for_var(b).unwrap();
        assert!(engine.wait_for_var(a).is_err());
        assert_eq!(
            *ran.lock().unwrap(),
            ["s1", "s1 fails", "rewrite"],
            "{kind}"
        );
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn a_panicking_member_fails_alone() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
        let gate = gate(&engine, &[a, b]);
        let log = Log::default();
        log.push(&engine, "first", &[], &[a, b]);
        engine
            .op("panics")
            .reads([a])
            .writes([b])
            .push_sync(|_| panic!("member panic"))
            .unwrap();
        log.push(&engine, "after", &[b], &[a]); // reads b: skipped
        log.push(&engine, "writes a", &[], &[a]); // a failed: skipped
        assert_eq!(engine.stats().pending_ops, 2, "{kind}");
        gate.ok();
        let error = engine.wait_for_all().unwrap_err();
        assert!(
            error.to_string().contains("panicked: member panic"),
            "{error}"
        );
        assert_eq!(log.names(), ["first"], "{kind}");
    }
}

#[test]
fn the_profiler_records_each_member_by_name() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
        let gate = gate(&engine, &[a, b]);
        engine.profiler().start();
        let ran = Arc::new(Mutex::new(Vec::new()));
        op(&engine, "m0", &[], &[a, b], false, &ran);
        op(&engine, "m1", &[b], &[a], true, &ran);
        op(&engine, "m2", &[a], &[b], false, &ran);
        op(&engine, "m3", &[], &[b], false, &ran);
        assert_eq!(engine.stats().pending_ops, 2, "{kind}: one segment");
        gate.ok();
        assert!(engine.wait_for_all().is_err());
        let profile = engine.profiler().take();
        let mut recorded: Vec<(&str, ProfiledOutcome)> = profile
            .ops()
            .iter()
            .filter(|op| op.name() != "gate")
            .map(|op| (op.name(), op.outcome()))
            .collect();
        recorded.sort_by_key(|(name, _)| *name);
        assert_eq!(
            recorded,
            [
                ("m0", ProfiledOutcome::Completed),
                ("m1", ProfiledOutcome::Failed),
                ("m2", ProfiledOutcome::Skipped),
                ("m3", ProfiledOutcome::Skipped),
            ],
            "{kind}"
        );
        // Marked mode: only the marked members.
        engine.profiler().set_mode(ProfileMode::Marked);
        let gate = held_async_op(&engine, a);
        engine.op("plain").writes([a]).push_sync(|_| {}).unwrap();
        engine
            .op("marked")
            .writes([a])
            .profiled()
            .push_sync(|_| {})
            .unwrap();
        assert_eq!(engine.stats().pending_ops, 2, "{kind}: one segment");
        gate.ok();
        engine.wait_for_all().unwrap();
        let marked: Vec<String> = engine
            .profiler()
            .take()
            .ops()
            .iter()
            .map(|op| op.name().to_owned())
            .collect();
        assert_eq!(marked, ["marked"], "{kind}");
    }
}

#[test]
fn a_wait_inside_a_member_on_a_var_of_its_segment_is_refused() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let (a, b) = (engine.new_var().unwrap(), engine.new_var().unwrap());
        let gate = gate(&engine, &[a, b]);
        engine.op("first").writes([a, b]).push_sync(|_| {}).unwrap();
        let inner = engine.clone();
        let (tx, rx) = mpsc::channel();
        engine
            .op("waits")
            .writes([a])
            .push_sync(move |_| {
                let _ = tx.send(inner.wait_for_var(b));
            })
            .unwrap();
        assert_eq!(engine.stats().pending_ops, 2, "{kind}: one segment");
        gate.ok();
        let waited = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(
            matches!(waited, Err(EngineError::WaitOnOwnVar { .. })),
            "{kind}: {waited:?}"
        );
        engine.wait_for_all().unwrap();
    }
}

#[test]
fn typed_ops_join_and_run_in_push_order() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let (total, log) = (
            engine.data(0_u64).unwrap(),
            engine.data(Vec::<u64>::new()).unwrap(),
        );
        let gate = gate(&engine, &[total.var(), log.var()]);
        engine
            .op("first")
            .write(&total)
            .write(&log)
            .push_sync(|_, (total, log)| {
                *total = 1;
                log.push(1);
            })
            .unwrap();
        for step in 2..=10_u64 {
            // Reads the total, which the op before writes; appends to the log.
            engine
                .op("step")
                .read(&total)
                .write(&log)
                .push_sync(move |_, (total, log)| log.push(*total * step))
                .unwrap();
            engine
                .op("add")
                .write(&total)
                .push_sync(|_, total| *total += 1)
                .unwrap();
        }
        assert_eq!(engine.stats().pending_ops, 2, "{kind}: one segment");
        gate.ok();
        // A guard is a hold (an async op): it waits for the segment, and ends the open one.
        let expected: Vec<u64> = std::iter::once(1)
            .chain((2..=10).map(|step| (step - 1) * step))
            .collect();
        assert_eq!(*engine.read(&log).unwrap(), expected, "{kind}");
        assert_eq!(*engine.read(&total).unwrap(), 10, "{kind}");
        assert_eq!(engine.take(total).unwrap(), 10);
        engine.wait_for_all().unwrap();
    }
}

/// A wait inside a member for a var whose writer waits for the segment: with the ops alone the
/// writer would wait for the first op only and the wait would return; in a segment the member
/// holds the first op's vars too, and the wait is refused as a deadlock, not left hanging.
#[test]
fn a_wait_inside_a_member_on_a_writer_behind_the_segment_is_a_deadlock_error() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let (a, b, c) = (
            engine.new_var().unwrap(),
            engine.new_var().unwrap(),
            engine.new_var().unwrap(),
        );
        let gate = gate(&engine, &[a, b]);
        engine.op("first").writes([a, b]).push_sync(|_| {}).unwrap();
        let inner = engine.clone();
        let (tx, rx) = mpsc::channel();
        engine
            .op("waits for c")
            .writes([a])
            .push_sync(move |_| {
                let _ = tx.send(inner.wait_for_var(c));
            })
            .unwrap();
        // Reads `b`: behind the segment.
        engine
            .op("writes c")
            .reads([b])
            .writes([c])
            .push_sync(|_| {})
            .unwrap();
        assert_eq!(engine.stats().pending_ops, 3, "{kind}");
        gate.ok();
        let waited = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(
            matches!(waited, Err(EngineError::WaitDeadlock { .. })),
            "{kind}: {waited:?}"
        );
        engine.wait_for_all().unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// What ends a segment, and order with other threads.
// ---------------------------------------------------------------------------------------------

#[test]
fn waits_and_a_dump_end_the_open_segment() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let x = engine.new_var().unwrap();
        let gate = gate(&engine, &[x]);
        let log = Log::default();
        log.push(&engine, "1", &[], &[x]);
        log.push(&engine, "2", &[], &[x]); // joins
        let waited = engine.wait_for_var_async(x);
        log.push(&engine, "3", &[], &[x]); // after the wait op: a new segment
        let mut dot = Vec::new();
        engine.dump_pending(&mut dot).unwrap();
        log.push(&engine, "4", &[], &[x]);
        let all = engine.wait_for_all_async();
        log.push(&engine, "5", &[], &[x]);
        log.push(&engine, "6", &[], &[x]); // joins
        // The gate, segments 12, 3, 4, 56 (the wait op is not counted).
        assert_eq!(engine.stats().pending_ops, 5, "{kind}");
        gate.ok();
        futures::executor::block_on(waited).unwrap();
        futures::executor::block_on(all).unwrap();
        assert_eq!(log.names(), ["1", "2", "3", "4", "5", "6"], "{kind}");
    }
}

#[test]
fn a_push_from_another_thread_in_between_is_not_overtaken() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let x = engine.new_var().unwrap();
        let gate = gate(&engine, &[x]);
        let log = Log::default();
        log.push(&engine, "mine 1", &[], &[x]);
        std::thread::scope(|s| {
            s.spawn(|| log.push(&engine, "theirs", &[], &[x]));
        });
        // Their push happened before this one: it stays ahead.
        log.push(&engine, "mine 2", &[], &[x]);
        assert_eq!(engine.stats().pending_ops, 4, "{kind}");
        gate.ok();
        engine.wait_for_all().unwrap();
        assert_eq!(log.names(), ["mine 1", "theirs", "mine 2"], "{kind}");
    }
}

#[test]
fn a_wait_from_another_thread_in_between_sees_the_ops_before_it_only() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let x = engine.new_var().unwrap();
        let gate = gate(&engine, &[x]);
        let ran = Arc::new(Mutex::new(Vec::new()));
        op(&engine, "fails", &[], &[x], true, &ran);
        let waited = std::thread::scope(|s| s.spawn(|| engine.wait_for_var_async(x)).join());
        // Pushed after the wait: it finds x cleared by the wait, and runs.
        op(&engine, "after the wait", &[], &[x], false, &ran);
        gate.ok();
        let error = futures::executor::block_on(waited.unwrap()).unwrap_err();
        assert!(error.to_string().contains("op `fails` failed"), "{error}");
        engine.wait_for_all().unwrap();
        assert_eq!(*ran.lock().unwrap(), ["fails", "after the wait"], "{kind}");
        assert_eq!(engine.stats().failed_vars, 0);
    }
}

#[test]
fn a_deletion_from_another_thread_in_between_is_seen() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let x = engine.new_var().unwrap();
        let gate = gate(&engine, &[x]);
        engine.op("first").writes([x]).push_sync(|_| {}).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| engine.delete_var(x, || ()).unwrap());
        });
        let pushed = engine.op("second").writes([x]).push_sync(|_| {});
        assert!(
            matches!(pushed, Err(EngineError::DeletedVar { .. })),
            "{kind}: {pushed:?}"
        );
        gate.ok();
        engine.wait_for_all().unwrap();
        assert_eq!(engine.stats().live_vars, 0);
    }
}

#[test]
fn a_push_to_another_engine_that_bulks_ends_the_open_segment() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let (bulking, alone) = (bulk_engine(kind, 1, 64), bulk_engine(kind, 1, 0));
        let x = engine.new_var().unwrap();
        let (y, z) = (bulking.new_var().unwrap(), alone.new_var().unwrap());
        let gate = gate(&engine, &[x]);
        engine.op("1").writes([x]).push_sync(|_| {}).unwrap();
        // An engine without bulk execution leaves this thread's segment open: it orders
        // nothing on this engine.
        alone.op("other").writes([z]).push_sync(|_| {}).unwrap();
        engine.op("2").writes([x]).push_sync(|_| {}).unwrap();
        assert_eq!(
            engine.stats().pending_ops,
            2,
            "{kind}: 1 and 2 in one segment"
        );
        // One that bulks takes the thread's one open segment.
        bulking.op("other").writes([y]).push_sync(|_| {}).unwrap();
        engine.op("3").writes([x]).push_sync(|_| {}).unwrap();
        assert_eq!(engine.stats().pending_ops, 3, "{kind}");
        gate.ok();
        engine.wait_for_all().unwrap();
        bulking.wait_for_all().unwrap();
        alone.wait_for_all().unwrap();
    }
}

#[test]
fn shutdown_runs_the_segments_and_refuses_later_ops() {
    for kind in KINDS {
        let engine = bulk_engine(kind, 2, 64);
        let x = engine.new_var().unwrap();
        let gate = gate(&engine, &[x]);
        let log = Log::default();
        for name in ["1", "2", "3"] {
            log.push(&engine, name, &[], &[x]);
        }
        let other = engine.clone();
        let opener = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            gate.ok();
        });
        within(30, "shutdown with a segment behind a gate", move || {
            other.shutdown().unwrap();
        });
        opener.join().unwrap();
        assert_eq!(log.names(), ["1", "2", "3"], "{kind}");
        let refused = engine.op("late").writes([x]).push_sync(|_| {});
        assert!(matches!(refused, Err(EngineError::ShutDown)), "{kind}");
    }
}

// ---------------------------------------------------------------------------------------------
// No hang.
// ---------------------------------------------------------------------------------------------

#[test]
fn a_pusher_that_waits_on_a_channel_filled_by_its_last_op_does_not_hang() {
    for kind in KINDS {
        for bulk in SIZES {
            within(30, "the last op fills the channel", move || {
                let engine = bulk_engine(kind, 2, bulk);
                let x = engine.new_var().unwrap();
                let (tx, rx) = mpsc::channel();
                for step in 0..5 {
                    let tx = tx.clone();
                    engine
                        .op("step")
                        .writes([x])
                        .push_sync(move |_| {
                            if step == 4 {
                                tx.send(()).unwrap();
                            }
                        })
                        .unwrap();
                }
                rx.recv().unwrap();
                // Behind a gate that another thread opens later: the ops join the waiting
                // segment, and still run once it may.
                let gate = gate(&engine, &[x]);
                for step in 0..5 {
                    let tx = tx.clone();
                    engine
                        .op("step")
                        .writes([x])
                        .push_sync(move |_| {
                            if step == 4 {
                                tx.send(()).unwrap();
                            }
                        })
                        .unwrap();
                }
                let opener = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(10));
                    gate.ok();
                });
                rx.recv().unwrap();
                opener.join().unwrap();
            });
        }
    }
}

#[test]
fn a_member_that_waits_for_its_pusher_does_not_hang() {
    for kind in [EngineKind::ThreadedPooled, EngineKind::ThreadedPerDevice] {
        within(30, "a member waits for the pusher", move || {
            let engine = bulk_engine(kind, 2, 64);
            let x = engine.new_var().unwrap();
            let (started_tx, started_rx) = mpsc::channel();
            let (go_tx, go_rx) = mpsc::channel::<()>();
            engine
                .op("waits")
                .writes([x])
                .push_sync(move |_| {
                    started_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                })
                .unwrap();
            started_rx.recv().unwrap();
            // Its segment runs: these join it (or start another), then the member goes on.
            let log = Log::default();
            for name in ["1", "2", "3"] {
                log.push(&engine, name, &[], &[x]);
            }
            go_tx.send(()).unwrap();
            engine.wait_for_all().unwrap();
            assert_eq!(log.names(), ["1", "2", "3"]);
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration.
// ---------------------------------------------------------------------------------------------

#[test]
fn a_bulk_size_too_large_is_a_config_error() {
    let error = Engine::new(EngineConfig::default().bulk_size(MAX_BULK_SIZE + 1)).unwrap_err();
    assert!(
        matches!(
            error,
            EngineError::Config(ConfigError::BulkTooLarge {
                setting: "EngineConfig::bulk_size",
                ..
            })
        ),
        "{error}"
    );
}

/// The environment is process-wide: each value is read in a child process (`common::isolated`).
#[test]
#[cfg_attr(miri, ignore = "spawns a child process")]
fn the_environment_variable_sets_the_bulk_size() {
    let test = test_name!(the_environment_variable_sets_the_bulk_size);
    if let Some(expected) = scenario(test) {
        match expected.as_str() {
            "invalid" | "too large" => {
                let error = Engine::from_env().unwrap_err().to_string();
                assert!(error.contains(BULK_SIZE), "{error}");
                let what = if expected == "invalid" {
                    "ops per segment"
                } else {
                    "at most 4096 ops"
                };
                assert!(error.contains(what), "{error}");
            }
            units => {
                let engine = Engine::from_env().unwrap();
                let x = engine.new_var().unwrap();
                let gate = gate(&engine, &[x]);
                for _ in 0..4 {
                    engine.op("step").writes([x]).push_sync(|_| {}).unwrap();
                }
                let units: usize = units.parse().unwrap();
                assert_eq!(engine.stats().pending_ops, units + 1);
                gate.ok();
                engine.wait_for_all().unwrap();
            }
        }
        return;
    }
    for (value, expected) in [
        ("3", "2"),
        ("0", "4"),
        ("off", "4"),
        ("lots", "invalid"),
        ("100000", "too large"),
    ] {
        // Fails unless the child ran this test and passed.
        run_child(test, expected, &[(BULK_SIZE, value)]);
    }
}
