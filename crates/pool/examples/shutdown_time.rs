//! How long dropping an idle pool takes, by worker count (the shutdown protocol in
//! `src/worker.rs`), next to starting and joining as many plain threads.
//!
//! ```text
//! cargo run --release -p depengine-pool --example shutdown_time -- 64 256 512
//! ```
//!
//! For each worker count (default 64, 256, 512): starts a pool, lets every worker go to
//! sleep, then times the drop; five rounds, the median and the range are printed.

use depengine_pool::ThreadPool;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;

fn main() {
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .map(|arg| arg.parse().expect("worker counts are positive integers"))
        .collect();
    let counts = if counts.is_empty() {
        vec![64, 256, 512]
    } else {
        counts
    };
    println!(
        "workers  drop median of {ROUNDS}  (min..max)       as many plain threads, spawn + join"
    );
    for workers in counts {
        let mut drops: Vec<Duration> = (0..ROUNDS).map(|_| time_drop(workers)).collect();
        drops.sort();
        let plain = time_plain_threads(workers);
        println!(
            "{workers:>7}  {:>11.2?}  ({:.2?}..{:.2?})  {plain:.2?}",
            drops[ROUNDS / 2],
            drops[0],
            drops[ROUNDS - 1],
        );
    }
}

/// Starts a pool of `workers`, waits until they are asleep, and times its drop.
fn time_drop(workers: usize) -> Duration {
    let pool = ThreadPool::new(workers).expect("threads start");
    // Every worker runs one task, so each has started; then they all go idle.
    pool.scope(|s| {
        for _ in 0..workers {
            s.spawn(|_| {});
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    let start = Instant::now();
    drop(pool);
    start.elapsed()
}

/// Starts and joins `threads` plain threads: the floor for any pool's start and stop.
fn time_plain_threads(threads: usize) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads).map(|_| std::thread::spawn(|| {})).collect();
    for handle in handles {
        handle.join().expect("an empty thread does not panic");
    }
    start.elapsed()
}
