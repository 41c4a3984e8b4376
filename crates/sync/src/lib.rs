//! `depengine-sync`: the synchronization every depengine crate is built on, the way
//! crossbeam-utils serves crossbeam.
//!
//! It is under every crate that synchronizes; the crate graph: `docs/architecture.md`.
//!
//! # The loom switch
//!
//! Every atomic, lock, condition variable, cell and thread that takes part in a concurrency
//! protocol comes from here: `std`'s normally, [loom]'s model-checked ones under `--cfg loom`
//! (the pattern of tokio's `loom/` module). The loom models (`cargo xtask loom`) thus explore the
//! real code, not a copy of it. The API is the common subset of `std` and loom, so code that
//! compiles in one mode compiles in the other:
//!
//! - atomics ([`AtomicBool`], [`AtomicU8`], [`AtomicU32`], [`AtomicU64`], [`AtomicUsize`],
//!   [`AtomicPtr`]), [`Ordering`] and [`fence`];
//! - [`Arc`], [`Mutex`], [`MutexGuard`], [`Condvar`], [`WaitTimeoutResult`];
//! - the [`thread`] module, [`thread_local!`] and [`yield_now`];
//! - [`UnsafeCell`] with loom's closure API (`with`, `with_mut`), so that loom checks every
//!   access for data races;
//! - [`spin_hint`] and [`Backoff`] for spin loops, which under loom yield to the model checker
//!   instead of spinning (a spinning thread would otherwise be explored forever).
//!
//! Some state deliberately stays on `std` under loom:
//!
//! - [`OnceLock`], which this crate re-exports from `std` in both modes (loom has none). It is
//!   sound under loom only where its initializer performs no loom operation (it only allocates
//!   and constructs objects): loom can then never switch threads inside it, so the real
//!   `OnceLock` behaves as one atomic step of the model. `depengine-graph` publishes a var's
//!   side-entrance entries with it.
//! - State no model observes, such as `depengine-graph`'s process-wide counter of graph ids
//!   (ids only need to differ): it uses `std` directly, with a comment saying so.
//!
//! # Poisoning
//!
//! A `std` mutex is poisoned when a thread panics while holding its guard, to warn later lockers
//! that the protected data may be half-updated. [`lock`], [`wait`] and [`wait_timeout`] ignore
//! the poison and hand out the guard anyway. That is sound under one condition, which **every
//! caller must meet**: each critical section leaves the protected data consistent (its
//! invariants hold) before anything in it can panic. In practice: no caller-supplied code (a
//! task, a user closure) runs under the lock, and the section's own code either cannot panic or
//! panics before it modifies the data. Then a poisoned lock holds valid data, and turning the
//! poison into an error or a panic would only spread one failure to every thread that touches
//! the lock afterwards, while the library must never panic. Under loom the helpers change
//! nothing: loom's mutex does not poison (a panic fails the model instead).
//!
//! # Padding
//!
//! [`CachePadded`] (crossbeam-utils') aligns a value to the cache-line size prefetchers move
//! together (128 bytes on x86-64 and aarch64), so that hot atomics written by different threads
//! never share a line.
//!
//! # Example
//!
//! A flag handed from one thread to another through a mutex and a condition variable; under
//! `--cfg loom`, the same code runs inside `loom::model`.
//!
//! ```
//! use depengine_sync::{Arc, Condvar, Mutex, lock, thread, wait};
//!
//! let ready = Arc::new((Mutex::new(false), Condvar::new()));
//! let setter = {
//!     let ready = Arc::clone(&ready);
//!     thread::spawn(move || {
//!         *lock(&ready.0) = true;
//!         ready.1.notify_one();
//!     })
//! };
//! let mut flag = lock(&ready.0);
//! while !*flag {
//!     flag = wait(&ready.1, flag);
//! }
//! assert!(*flag);
//! drop(flag);
//! setter.join().unwrap();
//! ```
//!
//! [loom]: https://docs.rs/loom

#![forbid(unsafe_code)]

mod cell;
mod poison;
mod spin;

pub use cell::UnsafeCell;
pub use poison::{lock, wait, wait_timeout};
pub use spin::{Backoff, spin_hint};

#[cfg(loom)]
pub use loom::{
    sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    },
    sync::{Arc, Condvar, Mutex, MutexGuard, WaitTimeoutResult},
    thread,
    thread::yield_now,
    thread_local,
};

#[cfg(not(loom))]
pub use std::{
    sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    },
    sync::{Arc, Condvar, Mutex, MutexGuard, WaitTimeoutResult},
    thread,
    thread::yield_now,
    thread_local,
};

/// `std`'s `OnceLock`, in both modes: see the crate documentation for when it is sound under
/// loom (an initializer that performs no loom operation).
pub use std::sync::OnceLock;

#[doc(inline)]
pub use crossbeam_utils::CachePadded;
