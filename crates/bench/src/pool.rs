//! `pool` group: depengine-pool, `SimplePool` and rayon on the four pool workloads
//! (see `README.md` beside this crate for the workloads and units).
//!
//! Every system runs the same closures and waits the same way: tasks count down a
//! shared [`Countdown`], and the main thread blocks on it (no spinning main thread
//! competing with the workers for the two cores).

use crate::args::{Args, ns_per, report};
use crate::other_threads::OtherThreads;
use depengine_pool::{SimplePool, ThreadPool};
use depengine_sync::{Condvar, Mutex, lock, wait};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// The per-item cost we declare to `parallel_for`: large, so that each of the
/// `2 x threads` items becomes its own block, as the workload asks.
const CHUNK_COST_NS: f64 = 1e6;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    match args.system.as_str() {
        "depengine-pool" => {
            let pool = leak(ThreadPool::new(args.threads).map_err(|e| e.to_string())?);
            run_system(args, leak(Ours(pool)));
        }
        "simplepool" => {
            let pool = leak(SimplePool::new(args.threads).map_err(|e| e.to_string())?);
            run_system(args, leak(Simple(pool)));
        }
        "rayon" => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(args.threads)
                .build()
                .map_err(|e| e.to_string())?;
            run_system(args, leak(Rayon(leak(pool))));
        }
        other => {
            return Err(format!(
                "unknown pool system `{other}` (expected depengine-pool, simplepool or rayon)"
            ));
        }
    }
    Ok(())
}

/// What each system provides; `None` where it has no such operation.
trait System: Sync {
    fn spawn<F: FnOnce() + Send + 'static>(&'static self, task: F);
    fn tree_join(&'static self, depth: u32) -> Option<u64>;
    fn parallel_for(&'static self, chunks: usize, body: &'static (dyn Fn(usize) + Sync));
}

/// Runs the workloads; pools and wrappers are leaked, so tasks may hold `'static`
/// references to them (the process ends right after).
fn run_system<S: System>(args: &Args, system: &'static S) {
    if args.wants("spawn_external") {
        let done = leak(Countdown::new(args.tasks));
        let start = Instant::now();
        for _ in 0..args.tasks {
            system.spawn(move || done.count());
        }
        done.wait();
        report(
            "spawn_external",
            ns_per(start.elapsed(), args.tasks),
            "ns/task",
        );
    }
    if args.wants("tree_spawn") {
        let nodes = (1u64 << (args.depth + 1)) - 1;
        let done = leak(Countdown::new(nodes));
        let start = Instant::now();
        spawn_tree(system, args.depth, done);
        done.wait();
        report("tree_spawn", ns_per(start.elapsed(), nodes), "ns/task");
    }
    if args.wants("tree_join") {
        let start = Instant::now();
        if let Some(nodes) = system.tree_join(args.depth) {
            report("tree_join", ns_per(start.elapsed(), nodes), "ns/task");
        }
    }
    let chunks = 2 * args.threads;
    if args.wants("parallel_for") {
        let slots: &'static [AtomicU64] =
            leak((0..chunks).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
        let body: &'static (dyn Fn(usize) + Sync) = leak(move |chunk: usize| {
            let value = black_box(chunk as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 1;
            slots[chunk].store(value, Ordering::Relaxed);
        });
        let start = Instant::now();
        for _ in 0..args.rounds {
            system.parallel_for(chunks, body);
        }
        let micros = start.elapsed().as_secs_f64() * 1e6 / args.rounds.max(1) as f64;
        report("parallel_for", micros, "us/round");
    }
    if args.wants("idle") {
        let threads = OtherThreads::now();
        let before = threads.cpu_times();
        std::thread::sleep(args.idle);
        let used = OtherThreads::used_since(&before, &threads.cpu_times());
        let per_second = used.as_secs_f64() * 1e3 / args.idle.as_secs_f64().max(1e-9);
        report("idle", per_second, "ms_cpu_per_s");
    }
}

fn spawn_tree<S: System>(system: &'static S, depth: u32, done: &'static Countdown) {
    system.spawn(move || {
        if depth > 0 {
            spawn_tree(system, depth - 1, done);
            spawn_tree(system, depth - 1, done);
        }
        done.count();
    });
}

struct Ours(&'static ThreadPool);

impl System for Ours {
    fn spawn<F: FnOnce() + Send + 'static>(&'static self, task: F) {
        self.0.spawn(task);
    }
    fn tree_join(&'static self, depth: u32) -> Option<u64> {
        fn tree(pool: &ThreadPool, depth: u32) -> u64 {
            if depth == 0 {
                return 1;
            }
            let (a, b) = pool.join(|| tree(pool, depth - 1), || tree(pool, depth - 1));
            a + b + 1
        }
        Some(self.0.install(|| tree(self.0, depth)))
    }
    fn parallel_for(&'static self, chunks: usize, body: &'static (dyn Fn(usize) + Sync)) {
        self.0
            .parallel_for(chunks, CHUNK_COST_NS, |range| range.for_each(body));
    }
}

struct Simple(&'static SimplePool);

impl System for Simple {
    fn spawn<F: FnOnce() + Send + 'static>(&'static self, task: F) {
        self.0.spawn(task);
    }
    fn tree_join(&'static self, _depth: u32) -> Option<u64> {
        None
    }
    fn parallel_for(&'static self, chunks: usize, body: &'static (dyn Fn(usize) + Sync)) {
        // Work sharing has no scope: one task per chunk, and a countdown to wait on.
        let done = std::sync::Arc::new(Countdown::new(chunks as u64));
        for chunk in 0..chunks {
            let done = done.clone();
            self.0.spawn(move || {
                body(chunk);
                done.count();
            });
        }
        done.wait();
    }
}

struct Rayon(&'static rayon::ThreadPool);

impl System for Rayon {
    fn spawn<F: FnOnce() + Send + 'static>(&'static self, task: F) {
        self.0.spawn(task);
    }
    fn tree_join(&'static self, depth: u32) -> Option<u64> {
        fn tree(depth: u32) -> u64 {
            if depth == 0 {
                return 1;
            }
            let (a, b) = rayon::join(|| tree(depth - 1), || tree(depth - 1));
            a + b + 1
        }
        Some(self.0.install(|| tree(depth)))
    }
    fn parallel_for(&'static self, chunks: usize, body: &'static (dyn Fn(usize) + Sync)) {
        use rayon::prelude::*;
        self.0.install(|| {
            (0..chunks).into_par_iter().with_max_len(1).for_each(body);
        });
    }
}

/// Counts finished tasks; the last one wakes the waiting main thread. `finished` is only
/// ever set to `true` under its lock, so a poisoned lock holds a consistent flag.
struct Countdown {
    remaining: AtomicUsize,
    finished: Mutex<bool>,
    wake: Condvar,
}

impl Countdown {
    fn new(count: u64) -> Self {
        Self {
            remaining: AtomicUsize::new(usize::try_from(count).unwrap_or(usize::MAX)),
            finished: Mutex::new(false),
            wake: Condvar::new(),
        }
    }

    fn count(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            *lock(&self.finished) = true;
            self.wake.notify_all();
        }
    }

    fn wait(&self) {
        let mut finished = lock(&self.finished);
        while !*finished {
            finished = wait(&self.wake, finished);
        }
    }
}

fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}
