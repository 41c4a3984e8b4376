//! Memory under overload: a burst of parked ops costs at most about 128 bytes an op, and once
//! it completed (`wait_for_all`, then a few milliseconds) the engine gives its memory back;
//! with a pending bound, a pusher that runs ahead never grows it. Measured as the process's
//! resident memory (Linux), with generous bounds, in a process of its own
//! (`common::isolated`). What the machine runs beside it shifts when pages go back, so the
//! test is ignored in a plain `cargo test` and CI runs it alone, in debug and release builds
//! (`cargo test -p depengine --test it -- --include-ignored memory_returned::`).

use std::time::{Duration, Instant};

use crate::common::held_async_op;
use crate::common::isolated::{alone, test_name};
use depengine::{Engine, EngineConfig, EngineKind, Var};

/// Parked ops in the burst: 10^6 in release, 10^5 in debug builds.
const BURST: usize = if cfg!(debug_assertions) {
    100_000
} else {
    1_000_000
};
const VARS: usize = 1024;
const MB: f64 = (1 << 20) as f64;

/// This process's resident memory in bytes.
fn resident() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|pages| pages.parse().ok())
        .expect("resident pages");
    // The page size of every Linux target this runs on.
    pages * 4096.0
}

/// `resident()` once it has stopped falling for 50 ms (sampled every 5 ms, for at most 5 s).
fn settled_resident() -> f64 {
    let mut last = resident();
    let mut steady = 0;
    for _ in 0..1000 {
        std::thread::sleep(Duration::from_millis(5));
        let now = resident();
        steady = if now < last { 0 } else { steady + 1 };
        last = now.min(last);
        if steady == 10 {
            break;
        }
    }
    last
}

/// An engine with `max_pending` as a strict bound (no patience: a loaded machine that stalls
/// the workers does not let the pusher run ahead of it).
fn engine(max_pending: Option<usize>) -> Engine {
    Engine::new(
        EngineConfig::default()
            .kind(EngineKind::ThreadedPerDevice)
            .cpu_worker_threads(2)
            .max_pending(max_pending)
            .max_pending_wait(None),
    )
    .unwrap()
}

fn vars(engine: &Engine) -> Vec<Var> {
    (0..VARS).map(|_| engine.new_var().unwrap()).collect()
}

/// `ops` ops on `vars`, each reading two and writing one and spinning for `work`; returns the
/// most resident memory seen while pushing (sampled every 1024 pushes).
fn push_random(engine: &Engine, vars: &[Var], ops: usize, work: Duration) -> f64 {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % VARS as u64) as usize
    };
    let mut peak = 0.0_f64;
    for i in 0..ops {
        let (w, r) = (next(), next());
        let (r0, r1) = ((w + 1 + r % (VARS - 2)) % VARS, (w + VARS - 1) % VARS);
        engine
            .op("random")
            .reads([vars[r0], vars[r1]])
            .writes([vars[w]])
            .push_sync(move |_| {
                let start = Instant::now();
                while start.elapsed() < work {
                    std::hint::spin_loop();
                }
                Ok(())
            })
            .unwrap();
        if i % 1024 == 0 {
            peak = peak.max(resident());
        }
    }
    peak
}

#[test]
#[cfg_attr(miri, ignore = "spawns a child process")]
#[cfg_attr(
    not(miri),
    ignore = "measures the resident memory: run alone (`--include-ignored memory_returned::`)"
)]
fn a_burst_costs_little_and_gives_its_memory_back() {
    if !alone(test_name!(a_burst_costs_little_and_gives_its_memory_back)) {
        return;
    }
    // Warm-up: threads, first buckets, the vars' cold parts.
    let engine = engine(None);
    let vars = vars(&engine);
    push_random(&engine, &vars, 20_000, Duration::ZERO);
    engine.wait_for_all().unwrap();
    let before = settled_resident();

    // The burst: every op parks behind a gate, reading it and writing one of the vars (2 deps).
    let gate = engine.new_var().unwrap();
    let done = held_async_op(&engine, gate);
    let parking = resident();
    for i in 0..BURST {
        engine
            .op("parked")
            .reads([gate])
            .writes([vars[i % VARS]])
            .push_sync(|_| Ok(()))
            .unwrap();
    }
    let peak = resident();
    let per_op = (peak - parking) / BURST as f64;
    done.ok();
    engine.wait_for_all().unwrap();
    // The worker that completed the last op gives the memory back after it woke the wait.
    let after = settled_resident();
    eprintln!(
        "before {:.1} MB, peak {:.1} MB ({per_op:.1} B per parked op), after {:.1} MB",
        before / MB,
        peak / MB,
        after / MB
    );
    // The burst was resident (the test can see memory), at about 120 bytes an op.
    assert!(
        per_op > 64.0,
        "{per_op:.1} B per parked op: RSS did not grow"
    );
    assert!(per_op < 160.0, "{per_op:.1} B per parked op");
    // ... and went back: within a quarter of the memory before it, or 8 MB. Subtle: a run may
    // keep one more 4 MB allocator block than the others (its owner not traced yet), so the
    // floor is two such blocks, far below the burst.
    let retained = after - before;
    assert!(
        retained < (before / 4.0).max(8.0 * MB),
        "{:.1} MB retained of a {:.1} MB burst",
        retained / MB,
        (peak - before) / MB
    );

    // With a bound, a pusher that runs ahead of the workers does not grow the memory: 2^12
    // pending ops, of about 200 bytes each with their closures and queue entries.
    let bounded = self::engine(Some(4096));
    let vars = self::vars(&bounded);
    push_random(&bounded, &vars, 20_000, Duration::ZERO);
    bounded.wait_for_all().unwrap();
    let before = settled_resident();
    let peak = push_random(&bounded, &vars, BURST, Duration::from_micros(2));
    bounded.wait_for_all().unwrap();
    eprintln!(
        "bounded: before {:.1} MB, peak {:.1} MB",
        before / MB,
        peak / MB
    );
    assert!(
        peak - before < 8.0 * MB,
        "{:.1} MB grown under a bound of 4096 ops",
        (peak - before) / MB
    );
}
