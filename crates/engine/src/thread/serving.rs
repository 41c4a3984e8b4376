//! [`Serving`]: the worker block whose ops the current thread runs (a worker or a stand-in of a
//! CPU block, or a task of the priority block), for the stand-ins of a wait inside an op; and,
//! on a CPU block's threads, the engine that runs the block's ops ([`BlockRunner`]).
//!
//! A CPU block's ops are queued in the block's pool as items holding only the op, whose record
//! names its block (no reference to the engine: that would cost a reference count update per op on
//! a line every worker writes). The thread that runs one finds the engine in the thread's state:
//! each worker of the block gets a [`BlockRunner`] when it starts and drops it when it exits
//! ([`enter_block`], [`leave_block`], called by the block's start and exit hooks), and a stand-in
//! holds one while it helps ([`StandingIn`]). Those runners hold the engine's state alive while the
//! threads run; the engine ends them by shutting its blocks down (see `Handle`'s drop in
//! `api/mod.rs`).

use std::sync::Arc;

use depengine_graph::ReadyOp;

use crate::op::record::{BlockKey, OpRecord};
use crate::thread;

/// A block whose workers a stand-in can take the place of.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    /// A CPU worker block (`route/block.rs`).
    Queued(BlockKey),
    /// The CPU priority block.
    Priority,
}

impl Served {
    /// The block of engine `engine` that the current thread serves, if any.
    pub(crate) fn by_this_thread(engine: u64) -> Option<Self> {
        match thread::with(|cx| cx.serving.get()) {
            Some((id, served)) if id == engine => Some(served),
            _ => None,
        }
    }
}

/// The engine as the threads of its CPU blocks see it: runs one of a block's ops (`run/`
/// implements it).
pub(crate) trait BlockRunner: Send + Sync {
    /// Runs (or skips) `op`, queued on the block of its route, on this thread (one of the
    /// block's workers or a stand-in) and completes it.
    fn run_block_op(&self, op: ReadyOp<OpRecord>);
}

/// Runs `op`, queued on the block of its route, with the runner of the current thread: the
/// task a CPU block's pool runs for each op.
///
/// Only the block's workers and stand-ins run its tasks, and each has its runner from before
/// its first task until after its last; an op reaching a thread without one would be a broken
/// hook, which is reported and the op is dropped uncompleted (its dependents then wait, and
/// the stall warnings name them).
#[inline]
pub(crate) fn run_block_op(op: ReadyOp<OpRecord>) {
    thread::with(|cx| {
        if let Some(runner) = &*cx.runner.borrow() {
            runner.run_block_op(op);
        } else {
            tracing::error!(
                target: "depengine::engine",
                "an op reached a thread that runs no engine block; it is dropped uncompleted"
            );
        }
    });
}

/// Makes the current thread a worker of block `key` of engine `engine`, running its ops with
/// `runner` until [`leave_block`] (a block worker's start hook).
pub(crate) fn enter_block(engine: u64, key: BlockKey, runner: Arc<dyn BlockRunner>) {
    thread::with(|cx| {
        cx.serving.set(Some((engine, Served::Queued(key))));
        *cx.runner.borrow_mut() = Some(runner);
    });
}

/// Ends [`enter_block`] (a block worker's exit hook): drops the thread's runner, and with it
/// the thread's reference to the engine.
pub(crate) fn leave_block() {
    let runner = thread::with(|cx| {
        cx.serving.set(None);
        cx.runner.borrow_mut().take()
    });
    // Outside the thread's state: the engine's state may drop with it.
    drop(runner);
}

/// Marks the current thread as serving a block of one engine while alive.
pub(crate) struct Serving {
    previous: Option<(u64, Served)>,
}

impl Serving {
    pub(crate) fn enter(engine: u64, served: Served) -> Self {
        Serving {
            previous: thread::with(|cx| cx.serving.replace(Some((engine, served)))),
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        thread::with(|cx| cx.serving.set(self.previous));
    }
}

/// Serves block `key` of an engine as a stand-in (a thread of its own), running the block's ops
/// with a runner, until dropped.
pub(crate) struct StandingIn(());

impl StandingIn {
    pub(crate) fn enter(engine: u64, key: BlockKey, runner: Arc<dyn BlockRunner>) -> Self {
        enter_block(engine, key, runner);
        StandingIn(())
    }
}

impl Drop for StandingIn {
    fn drop(&mut self) {
        leave_block();
    }
}
