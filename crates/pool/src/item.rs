//! [`Item`]: what a pool's queues carry besides closures, and [`Work`], a queue's element.
//!
//! A closure travels as a [`JobRef`]: four words, its state inline when it fits in three,
//! boxed otherwise. A value that a pool runs by the thousand and that does not fit (the engine's
//! ready ops: an op record, its dependency list and its function, about 130 bytes) would cost an
//! allocation per value, freed on another thread. A pool made for such values carries them
//! unboxed instead: `ThreadPool<T>` queues `T` itself in its per-worker queues and injector
//! (Eigen's `RunQueue<Work>` is generic over its element the same way) and runs each with
//! [`Item::run`], beside the closures that every pool runs. The closure-only pool is
//! `ThreadPool<Infallible>` (the default): `Work<Infallible>` has the size of a `JobRef`.

use std::convert::Infallible;

use crate::job::JobRef;

/// A value a [`ThreadPool<Self>`](crate::ThreadPool) queues unboxed and runs on a worker.
///
/// # Examples
///
/// ```
/// use depengine_pool::{Item, ThreadPool};
/// use std::sync::mpsc::{Sender, channel};
///
/// /// Twice the value, sent back.
/// struct Double(u64, Sender<u64>);
///
/// impl Item for Double {
///     fn run(self) {
///         let Double(value, reply) = self;
///         reply.send(2 * value).unwrap();
///     }
/// }
///
/// let pool = ThreadPool::builder().threads(2).build_for::<Double>().unwrap();
/// let (tx, rx) = channel();
/// for value in 0..4 {
///     pool.submit(Double(value, tx.clone()));
/// }
/// let mut doubled: Vec<u64> = rx.iter().take(4).collect();
/// doubled.sort_unstable();
/// assert_eq!(doubled, [0, 2, 4, 6]);
/// ```
pub trait Item: Send + 'static {
    /// Runs the item on the worker that took it. A panic that escapes goes to the pool's
    /// panic handler, as a detached task's does.
    fn run(self);
}

/// The item type of a pool that runs closures only.
impl Item for Infallible {
    fn run(self) {
        match self {}
    }
}

/// An element of a pool's queues: a closure or an item.
pub(crate) enum Work<T> {
    Job(JobRef),
    Item(T),
}
