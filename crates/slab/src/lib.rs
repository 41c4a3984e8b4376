//! Slot storage for depengine: slabs of slots that never move, named by `u32` indices, with a
//! lock-free free list, and a store of byte blocks built on them.
//!
//! depengine takes storage on one thread and gives it back on another, once per op: the pushing
//! thread parks a waiting op in a slot, or stores a large closure in a block, and a worker frees
//! it once the op ran. A general allocator's per-thread caches serve neither side of that
//! pattern (a `free` of another thread's chunk takes the lock of the arena the `malloc` takes
//! too), so the graph and the engine share this allocator, shaped for it:
//!
//! - [`Slab`]: a growable array of [`Slot`]s with stable addresses (buckets of doubling size,
//!   a lookup is two loads and no lock); a free list in two lock-free stacks, the freeing
//!   threads pushing onto one and the allocating thread taking it whole, in batches, so that its
//!   cache line crosses between the cores once per batch rather than once per slot; and a trim
//!   that gives a burst's memory back once nobody uses the slab. A slot type chooses what each
//!   entry keeps beside its link, how its buckets are made, and how it recycles.
//!   `depengine-graph` keeps its vars and its parked ops in slabs.
//! - [`BlockStore`]: a slab of blocks of [`BLOCK_BYTES`] bytes, each named by a [`BlockId`] that
//!   its holder owns. The engine keeps there the op closures too large for its op record.
//! - [`prefetch_line`]: the cache hint an allocation gives for the slot it hands out next, which
//!   the graph gives for its own lines too.
//!
//! The protocols and their orderings are in the source, the module documentation of
//! `src/slab.rs` ("Free list: two stacks", "Recycling in batches", "Trimming"); the loom models
//! (`loom_tests.rs`, `docs/loom.md`) check them.
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! use depengine_slab::{Keep, Slab, Slot};
//!
//! /// A job: written by the thread that takes its slot, read by the one that gives it back.
//! #[derive(Default)]
//! struct Job(AtomicU64);
//!
//! impl Slot for Job {
//!     type Header = ();
//!     // Taken by one thread, given back by another, one of each per job.
//!     const RECYCLE_BATCH: u64 = 32;
//! }
//!
//! let slab: Slab<Job> = Slab::new();
//! let (jobs, worker_jobs) = std::sync::mpsc::channel::<u32>();
//! std::thread::scope(|s| {
//!     let slab = &slab;
//!     s.spawn(move || {
//!         // The worker holds each slot it receives, until it frees it.
//!         for index in worker_jobs {
//!             let job = slab.get(index).expect("a slot it holds");
//!             assert_eq!(job.0.load(Ordering::Relaxed), u64::from(index) + 1);
//!             slab.free(index);
//!         }
//!     });
//!     for _ in 0..1000 {
//!         let index = slab.alloc().expect("room");
//!         slab.get(index).unwrap().0.store(u64::from(index) + 1, Ordering::Relaxed);
//!         jobs.send(index).unwrap();
//!     }
//!     drop(jobs);
//! });
//! assert_eq!(slab.in_use(), 0);
//! // SAFETY: no other thread uses the slab any more, and this one holds no reference into it.
//! unsafe { slab.trim_to_system(Keep::RecentUse { at_least: 1 }) };
//! ```

// The only `unsafe` code is the slab's buckets (which a trim frees), the block store's bytes and
// its call of the trim, the call of glibc's `malloc_trim` in `heap` and the cache hints in
// `prefetch`, which opt in below.
#![deny(unsafe_code)]

mod block_store;
// `malloc_trim`, a foreign function; see the module documentation.
#[allow(unsafe_code)]
mod heap;
// Prefetch hints: an intrinsic that Rust marks unsafe, though it never faults.
#[allow(unsafe_code)]
mod prefetch;
// Buckets behind atomic pointers, freed by a trim; its module documentation has the protocol.
#[allow(unsafe_code)]
mod slab;

#[cfg(all(test, loom))]
mod loom_tests;

pub use block_store::{BLOCK_ALIGN, BLOCK_BYTES, BlockId, BlockStore};
pub use prefetch::prefetch_line;
pub use slab::{Entry, Keep, NIL, Slab, Slot, TrimGuard};
