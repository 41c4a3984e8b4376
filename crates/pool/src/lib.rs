//! `depengine-pool`: where depengine's ready work runs, a work-stealing thread pool.
//!
//! It sits under the facade (`depengine`) and `depengine-cpu`, beside `depengine-graph`, which
//! only the facade joins to it: the pool knows nothing of ops or vars, it runs closures, and
//! items of a type its owner defines. The crate graph: `docs/architecture.md`.
//!
//! The design follows Eigen's `NonBlockingThreadPool` (the one TensorFlow uses):
//!
//! - [`RunQueue`]: a fixed-size ring per worker; the owner pushes and pops at the
//!   front without locks, other threads steal at the back (outside spawns go to the
//!   [`Injector`]).
//! - [`EventCount`]: lets idle workers sleep on "no work anywhere" with no lost
//!   wake-up, while a spawn pays one fence and one load when nobody sleeps.
//! - [`ThreadPool`]: the workers, stealing in random coprime order, each spinning
//!   before it sleeps for a window learned from its idle periods (`spin_window.rs`);
//!   `spawn`, `scope`, `join`, `install` and `parallel_for` on top. See `worker.rs` for
//!   the algorithm and shutdown protocol.
//! - [`SimplePool`]: Eigen's `SimpleThreadPool` (one locked deque), the baseline.
//!
//! The lock-free pieces are model-checked with loom (`cargo xtask loom`), the unsafe
//! code runs under Miri (`cargo xtask miri`), and `cargo xtask bench pool` compares
//! the pool with rayon, Eigen, OpenMP and oneTBB.
//!
//! ```
//! use depengine_pool::ThreadPool;
//!
//! let pool = ThreadPool::new(2).unwrap();
//! let squares: Vec<u64> = {
//!     let mut out = vec![0; 8];
//!     pool.scope(|s| {
//!         for (i, slot) in out.iter_mut().enumerate() {
//!             s.spawn(move |_| *slot = (i * i) as u64);
//!         }
//!     });
//!     out
//! };
//! assert_eq!(squares, [0, 1, 4, 9, 16, 25, 36, 49]);
//! ```

mod builder;
mod event_count;
mod injector;
mod item;
mod job;
mod join;
mod latch;
mod parallel_for;
mod rng;
mod run_queue;
mod scope;
mod simple_pool;
mod spin_window;
mod thread_pool;
mod unwind;
mod worker;
mod worker_local;

pub use builder::{BuildError, Builder, DEFAULT_MAX_SPIN, MAX_THREADS};
pub use event_count::EventCount;
pub use injector::Injector;
pub use item::Item;
pub use parallel_for::{BlockPlan, MAX_BLOCKS_PER_THREAD, TARGET_BLOCK_NS};
pub use run_queue::{DEFAULT_CAPACITY, MAX_CAPACITY, RunQueue};
pub use scope::Scope;
pub use simple_pool::SimplePool;
pub use thread_pool::ThreadPool;
pub use unwind::{PanicHandler, panic_message};
